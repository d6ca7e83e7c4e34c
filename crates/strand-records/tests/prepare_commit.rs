//! Spec 02 §2.6: prepare / commit / checkpoint / rollback.
#![allow(clippy::unwrap_used)]

use strand_records::{RecordIndexError, StreamRecordIndex, StreamRecordRange};

fn range(first_record: u64, next_record: u64) -> StreamRecordRange {
    StreamRecordRange {
        first_record,
        next_record,
    }
}

#[test]
fn prepare_does_not_change_the_index_and_commit_applies_it() {
    let mut index = StreamRecordIndex::new();
    index.append_relative_ends(0, 16, &[8, 16]).unwrap();
    let before = index.clone();
    let pending = index.prepare_append(16, 8, &[3, 8]).unwrap();
    assert_eq!(index, before);
    assert_eq!(pending.range(), range(2, 4));
    assert_eq!(pending.start_offsets(), &[16, 19]);
    assert_eq!(index.commit_append(pending), range(2, 4));
    assert_eq!(index.record_offsets(), &[0, 8, 16, 19]);
}

#[test]
fn appends_of_few_and_of_many_records_commit_the_same_offsets() {
    // Up to 8 records the pending starts are kept inline, beyond on the
    // heap: both must give the plain list of starts.
    for count in [1u64, 7, 8, 9, 40] {
        let mut index = StreamRecordIndex::new();
        index.append_relative_ends(0, 4, &[4]).unwrap();
        let ends: Vec<u64> = (1..=count).map(|k| 2 * k).collect();
        let pending = index.prepare_append(4, 2 * count, &ends).unwrap();
        let starts: Vec<u64> = (0..count).map(|k| 4 + 2 * k).collect();
        assert_eq!(pending.start_offsets(), starts.as_slice());
        assert_eq!(pending.clone(), pending);
        assert_eq!(
            format!("{:?}", pending.start_offsets()),
            format!("{starts:?}")
        );
        assert_eq!(index.commit_append(pending), range(1, 1 + count));
        let mut expected = vec![0];
        expected.extend(&starts);
        assert_eq!(index.record_offsets(), expected.as_slice());
    }
}

#[test]
fn dropping_a_pending_append_abandons_it() {
    let index = StreamRecordIndex::new();
    let pending = index.prepare_append(0, 2, &[2]).unwrap();
    drop(pending);
    assert_eq!(index, StreamRecordIndex::new());
}

#[test]
fn zero_length_prepare_gives_empty_range_at_next_record() {
    let mut index = StreamRecordIndex::new();
    index.append_relative_ends(0, 6, &[2, 6]).unwrap();
    let pending = index.prepare_append(6, 0, &[]).unwrap();
    assert_eq!(pending.range(), range(2, 2));
    assert!(pending.start_offsets().is_empty());
    let before = index.clone();
    assert_eq!(index.commit_append(pending), range(2, 2));
    assert_eq!(index, before);
}

#[test]
fn prepare_check_order() {
    // 1. ends_cover comes before 4. (base not after last start).
    let mut index = StreamRecordIndex::new();
    index.append_relative_ends(0, 4, &[4]).unwrap();
    assert_eq!(
        index.prepare_append(0, 4, &[5]),
        Err(RecordIndexError::InvalidBoundaries)
    );
    // 4. comes before 5. (start offset overflow): last start 0 >= base 0.
    assert_eq!(
        index.prepare_append(0, u64::MAX, &[u64::MAX - 1, u64::MAX]),
        Err(RecordIndexError::InvalidBoundaries)
    );
    // 5. with a valid base.
    assert_eq!(
        index.prepare_append(2, u64::MAX, &[u64::MAX - 1, u64::MAX]),
        Err(RecordIndexError::ArithmeticOverflow)
    );
}

#[test]
fn checkpoint_and_rollback_undo_appends_only() {
    let mut index = StreamRecordIndex::restore(4, vec![10, 12], 10, 14).unwrap();
    let before = index.clone();
    let checkpoint = index.checkpoint();
    assert_eq!(checkpoint.len(), 2);
    assert!(!checkpoint.is_empty());
    index.append_relative_ends(14, 3, &[1, 3]).unwrap();
    index.append_relative_ends(17, 1, &[1]).unwrap();
    assert_eq!(index.range(), Ok(range(4, 9)));
    index.rollback(checkpoint);
    assert_eq!(index, before);
    assert_eq!(
        serde_json::to_string(&index).unwrap(),
        serde_json::to_string(&before).unwrap()
    );
}

#[test]
fn rollback_to_a_longer_checkpoint_does_nothing() {
    let mut long = StreamRecordIndex::new();
    long.append_relative_ends(0, 3, &[1, 2, 3]).unwrap();
    let checkpoint = long.checkpoint();
    let mut short = StreamRecordIndex::new();
    short.append_relative_ends(0, 1, &[1]).unwrap();
    let before = short.clone();
    short.rollback(checkpoint);
    assert_eq!(short, before);
    assert!(StreamRecordIndex::new().checkpoint().is_empty());
}

#[test]
fn prepare_retain_then_commit() {
    let mut index = StreamRecordIndex::new();
    index.append_relative_ends(0, 27, &[9, 18, 27]).unwrap();
    let before = index.clone();
    let pending = index.prepare_retain(18, 27).unwrap();
    assert_eq!(index, before);
    assert_eq!(pending.dropped_records(), 2);
    assert_eq!(pending.first_record(), 2);
    assert_eq!(index.commit_retain(pending), 2);
    assert_eq!(index.record_offsets(), &[18]);
    assert_eq!(index.range(), Ok(range(2, 3)));
    assert_eq!(
        index.prepare_retain(9, 27),
        Err(RecordIndexError::OffsetNotRecordBoundary)
    );
}
