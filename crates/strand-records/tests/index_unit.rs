//! Spec 02 §7.3 (record index unit behaviour) and the method details of §2.5.
#![allow(clippy::unwrap_used)]

use strand_records::{RecordIndexError, StreamRecordIndex, StreamRecordRange, relative_ends_cover};

fn range(first_record: u64, next_record: u64) -> StreamRecordRange {
    StreamRecordRange {
        first_record,
        next_record,
    }
}

fn index_with(ends_len: u64, ends: &[u64]) -> StreamRecordIndex {
    let mut index = StreamRecordIndex::new();
    index.append_relative_ends(0, ends_len, ends).unwrap();
    index
}

#[test]
fn case_1_two_appends_and_offsets() {
    let mut index = StreamRecordIndex::new();
    assert_eq!(index.append_relative_ends(0, 18, &[9, 18]), Ok(range(0, 2)));
    assert_eq!(index.record_offsets(), &[0, 9]);
    assert_eq!(index.offset_for(0, 18), Ok(0));
    assert_eq!(index.offset_for(1, 18), Ok(9));
    assert_eq!(index.offset_for(2, 18), Ok(18));
    assert_eq!(index.append_relative_ends(18, 9, &[9]), Ok(range(2, 3)));
    assert_eq!(index.record_offsets(), &[0, 9, 18]);
    assert_eq!(index.offset_for(3, 27), Ok(27));
}

#[test]
fn case_2_retention_keeps_ordinals() {
    let mut index = index_with(27, &[9, 18, 27]);
    assert_eq!(index.retain_from_offset(18, 27), Ok(2));
    assert_eq!(index.record_offsets(), &[18]);
    assert_eq!(
        index.offset_for(1, 27),
        Err(RecordIndexError::RecordGone {
            first_record: 2,
            next_record: 3
        })
    );
    assert_eq!(index.offset_for(2, 27), Ok(18));
}

#[test]
fn case_3_restore_checks_first_offset_and_order() {
    assert_eq!(
        StreamRecordIndex::restore(0, vec![1, 9], 0, 18),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        StreamRecordIndex::restore(0, vec![0, 0], 0, 18),
        Err(RecordIndexError::InvalidBoundaries)
    );
    let index = StreamRecordIndex::restore(2, vec![18], 18, 27).unwrap();
    assert_eq!(index.range(), Ok(range(2, 3)));
    assert_eq!(index.record_offsets(), &[18]);
}

#[test]
fn case_4_restore_empty_and_overflow() {
    assert!(StreamRecordIndex::restore(0, vec![], 3, 3).is_ok());
    assert_eq!(
        StreamRecordIndex::restore(0, vec![], 3, 4),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        StreamRecordIndex::restore(0, vec![3], 4, 3),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        StreamRecordIndex::restore(u64::MAX, vec![3], 3, 4),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    let index = StreamRecordIndex::restore(u64::MAX, vec![], 3, 3).unwrap();
    assert_eq!(index.range(), Ok(range(u64::MAX, u64::MAX)));
}

#[test]
fn case_5_bad_ends_on_new_index() {
    let mut index = StreamRecordIndex::new();
    for (len, ends) in [(18, &[9][..]), (18, &[9, 9, 18][..]), (0, &[0][..])] {
        assert_eq!(
            index.append_relative_ends(0, len, ends),
            Err(RecordIndexError::InvalidBoundaries),
            "{len} {ends:?}"
        );
        assert_eq!(index, StreamRecordIndex::new());
    }
    assert_eq!(index.append_relative_ends(0, 0, &[]), Ok(range(0, 0)));
    assert_eq!(index, StreamRecordIndex::new());
}

#[test]
fn case_6_base_must_be_after_last_start_and_gaps_are_allowed() {
    let mut index = index_with(4, &[4]);
    assert_eq!(index.record_offsets(), &[0]);
    assert_eq!(
        index.append_relative_ends(0, 4, &[4]),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        index.append_relative_ends(0, 0, &[]),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(index.record_offsets(), &[0]);
    assert_eq!(index.append_relative_ends(10, 2, &[2]), Ok(range(1, 2)));
    assert_eq!(index.record_offsets(), &[0, 10]);
}

#[test]
fn case_7_record_for_offset() {
    assert_eq!(StreamRecordIndex::new().record_for_offset(5, 5), Ok(0));
    let index = index_with(4, &[4]);
    assert_eq!(index.record_for_offset(0, 4), Ok(0));
    assert_eq!(index.record_for_offset(4, 4), Ok(1));
    assert_eq!(
        index.record_for_offset(4, 9),
        Err(RecordIndexError::OffsetNotRecordBoundary)
    );
    assert_eq!(
        index.record_for_offset(9, 4),
        Err(RecordIndexError::OffsetNotRecordBoundary)
    );
}

#[test]
fn case_8_retain_not_boundary_then_tail() {
    let mut index = index_with(6, &[2, 4, 6]);
    assert_eq!(index.record_offsets(), &[0, 2, 4]);
    let before = index.clone();
    assert_eq!(
        index.retain_from_offset(3, 6),
        Err(RecordIndexError::OffsetNotRecordBoundary)
    );
    assert_eq!(index, before);
    assert_eq!(index.retain_from_offset(6, 6), Ok(3));
    assert_eq!(index.range(), Ok(range(3, 3)));
    assert!(index.record_offsets().is_empty());
}

#[test]
fn case_9_restored_index_queries() {
    let mut index = StreamRecordIndex::restore(5, vec![10, 12], 10, 14).unwrap();
    let before = index.clone();
    assert_eq!(index.retain_from_offset(10, 14), Ok(5));
    assert_eq!(index, before);
    assert_eq!(
        index.retain_from_offset(0, 14),
        Err(RecordIndexError::OffsetNotRecordBoundary)
    );
    assert_eq!(index, before);
    assert_eq!(
        index.offset_for(4, 14),
        Err(RecordIndexError::RecordGone {
            first_record: 5,
            next_record: 7
        })
    );
    assert_eq!(index.offset_for(5, 14), Ok(10));
    assert_eq!(index.offset_for(6, 14), Ok(12));
    assert_eq!(index.offset_for(7, 14), Ok(14));
    assert_eq!(
        index.offset_for(8, 14),
        Err(RecordIndexError::RecordBeyondTail { next_record: 7 })
    );
}

#[test]
fn range_overflow_examples_of_method_3() {
    let empty_at_max = StreamRecordIndex::restore(u64::MAX, vec![], 0, 0).unwrap();
    assert_eq!(empty_at_max.range(), Ok(range(u64::MAX, u64::MAX)));
    let overflowing: StreamRecordIndex = serde_json::from_str(&format!(
        r#"{{"first_record":{},"record_offsets":[0]}}"#,
        u64::MAX
    ))
    .unwrap();
    assert_eq!(
        overflowing.range(),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    // Every method that starts with range() reports the overflow first.
    assert_eq!(
        overflowing.offset_for(0, 1),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    assert_eq!(
        overflowing.record_for_offset(1, 1),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    assert_eq!(
        overflowing.validate(5, 1),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    // prepare: the ends check comes before the range check.
    let mut copy = overflowing.clone();
    assert_eq!(
        copy.append_relative_ends(9, 1, &[]),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        copy.append_relative_ends(9, 1, &[1]),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    assert_eq!(copy, overflowing);
}

#[test]
fn offset_for_next_record_returns_the_given_tail_unchecked() {
    let index = index_with(4, &[4]);
    assert_eq!(index.offset_for(1, 4), Ok(4));
    assert_eq!(index.offset_for(1, 0), Ok(0));
    assert_eq!(index.offset_for(1, u64::MAX), Ok(u64::MAX));
    assert_eq!(
        index.offset_for(u64::MAX, 4),
        Err(RecordIndexError::RecordBeyondTail { next_record: 1 })
    );
}

#[test]
fn record_for_offset_checks_tail_before_searching() {
    // The tail wins even when it equals a stored offset (inconsistent state).
    let index = StreamRecordIndex::restore(3, vec![0, 2], 0, 4).unwrap();
    assert_eq!(index.record_for_offset(2, 2), Ok(5));
    assert_eq!(index.record_for_offset(2, 4), Ok(4));
    assert_eq!(index.record_for_offset(0, 4), Ok(3));
}

#[test]
fn next_record_overflow_on_append_of_many_records() {
    let mut index = StreamRecordIndex::restore(u64::MAX - 1, vec![], 0, 0).unwrap();
    assert_eq!(
        index.append_relative_ends(0, 2, &[1, 2]),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    assert_eq!(
        index.append_relative_ends(0, 1, &[1]),
        Ok(range(u64::MAX - 1, u64::MAX))
    );
}

#[test]
fn start_offset_overflow_on_append_near_u64_max() {
    let mut index = StreamRecordIndex::new();
    // base + last end is never computed: only the ends used as starts are.
    assert_eq!(
        index.append_relative_ends(u64::MAX, 5, &[5]),
        Ok(range(0, 1))
    );
    assert_eq!(index.record_offsets(), &[u64::MAX]);
    let mut index = StreamRecordIndex::new();
    assert_eq!(
        index.append_relative_ends(u64::MAX - 1, 5, &[2, 5]),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    assert_eq!(index, StreamRecordIndex::new());
}

#[test]
fn retention_overflow_leaves_index_unchanged() {
    // Retention never computes range(): an index whose range overflows can
    // still drop records as long as `first_record + dropped` fits.
    let near_max = |first_record: u64| -> StreamRecordIndex {
        let text = format!(r#"{{"first_record":{first_record},"record_offsets":[0,4]}}"#);
        serde_json::from_str(&text).unwrap()
    };
    let mut index = near_max(u64::MAX - 1);
    assert_eq!(index.retain_from_offset(4, 8), Ok(u64::MAX));
    assert_eq!(index.record_offsets(), &[4]);

    let mut index = near_max(u64::MAX - 1);
    assert_eq!(index.retain_from_offset(0, 8), Ok(u64::MAX - 1));
    assert_eq!(index, near_max(u64::MAX - 1));

    let mut index = near_max(u64::MAX);
    assert_eq!(
        index.retain_from_offset(8, 8),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    assert_eq!(index, near_max(u64::MAX));
}

#[test]
fn validate_does_not_cross_check_payload_records() {
    // [0, 3] is accepted for a 16-byte stream whose records are at [0, 8].
    assert!(StreamRecordIndex::restore(0, vec![0, 3], 0, 16).is_ok());
    let index = StreamRecordIndex::restore(0, vec![0, 8], 0, 16).unwrap();
    assert_eq!(index.validate(0, 16), Ok(()));
    assert_eq!(
        index.validate(8, 16),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        index.validate(0, 8),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        index.validate(17, 16),
        Err(RecordIndexError::InvalidBoundaries)
    );
}

#[test]
fn ends_cover_rule_of_2_4() {
    assert!(relative_ends_cover(0, &[]));
    assert!(!relative_ends_cover(0, &[0]));
    assert!(!relative_ends_cover(3, &[]));
    assert!(relative_ends_cover(3, &[3]));
    assert!(relative_ends_cover(3, &[1, 2, 3]));
    assert!(!relative_ends_cover(3, &[0, 3]));
    assert!(!relative_ends_cover(3, &[2, 2, 3]));
    assert!(!relative_ends_cover(3, &[2, 1, 3]));
    assert!(!relative_ends_cover(3, &[1, 4]));
    assert!(!relative_ends_cover(3, &[1, 2]));
    assert!(relative_ends_cover(u64::MAX, &[u64::MAX]));
}

#[test]
fn default_equals_new() {
    assert_eq!(StreamRecordIndex::default(), StreamRecordIndex::new());
    assert_eq!(StreamRecordIndex::new().range(), Ok(range(0, 0)));
    assert!(StreamRecordIndex::new().record_offsets().is_empty());
}
