//! Message records tile the retained suffix (spec 07 §5.8).

use strand_model::StreamMessageRecord;

/// Walking the records in list order from `expected = retained`, each record
/// starts at `expected` and is non-empty; the last one ends at `tail`. An
/// empty list is valid only when `retained == tail`.
pub(crate) fn message_records_tile(
    records: &[StreamMessageRecord],
    retained: u64,
    tail: u64,
) -> bool {
    let mut expected = retained;
    for record in records {
        if record.start_offset != expected || record.end_offset <= record.start_offset {
            return false;
        }
        expected = record.end_offset;
    }
    expected == tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(pairs: &[(u64, u64)]) -> Vec<StreamMessageRecord> {
        pairs
            .iter()
            .map(|&(start_offset, end_offset)| StreamMessageRecord {
                start_offset,
                end_offset,
            })
            .collect()
    }

    #[test]
    fn tiling() {
        assert!(message_records_tile(&[], 3, 3));
        assert!(!message_records_tile(&[], 0, 3));
        assert!(message_records_tile(&records(&[(0, 2), (2, 5)]), 0, 5));
        assert!(message_records_tile(&records(&[(3, 5)]), 3, 5));
        // Gap, overlap, empty record, short, long, starts before retained.
        assert!(!message_records_tile(&records(&[(0, 2), (3, 5)]), 0, 5));
        assert!(!message_records_tile(&records(&[(0, 3), (2, 5)]), 0, 5));
        assert!(!message_records_tile(&records(&[(0, 0), (0, 5)]), 0, 5));
        assert!(!message_records_tile(&records(&[(0, 1)]), 0, 2));
        assert!(!message_records_tile(&records(&[(0, 3)]), 0, 2));
        assert!(!message_records_tile(&records(&[(0, 4)]), 2, 4));
    }
}
