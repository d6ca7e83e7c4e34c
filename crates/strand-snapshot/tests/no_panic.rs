//! Property tests: arbitrary mutations of a valid entry's numeric fields
//! (and of its setsum strings) never panic the validator, and whatever it
//! accepts satisfies the invariants restore relies on.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{full_entry, record_index};
use proptest::prelude::*;
use strand_records::StreamRecordIndex;
use strand_snapshot::{SnapshotValidator, StreamSnapshotEntry};

const FIELDS: u8 = 26;

fn value() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0_u64),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        0_u64..16,
        any::<u64>(),
    ]
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

fn index_parts(index: &StreamRecordIndex) -> (u64, Vec<u64>) {
    let value = serde_json::to_value(index).unwrap();
    let offsets = value["record_offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    (value["first_record"].as_u64().unwrap(), offsets)
}

fn mutate(entry: &mut StreamSnapshotEntry, field: u8, v: u64) {
    let i = to_usize(v % 4);
    match field {
        0 => entry.metadata.tail_offset = v,
        1 => entry.hot_start_offset = v,
        2 => entry
            .hot_segments
            .iter_mut()
            .for_each(|s| s.start_offset = v),
        3 => entry.hot_segments.iter_mut().for_each(|s| s.end_offset = v),
        4 => entry
            .hot_segments
            .iter_mut()
            .for_each(|s| s.payload_start = to_usize(v)),
        5 => entry
            .hot_segments
            .iter_mut()
            .for_each(|s| s.payload_end = to_usize(v)),
        6 => entry.cold_frontier_offset = v,
        7 => entry
            .cold_chunks
            .iter_mut()
            .for_each(|c| c.start_offset = v),
        8 => entry.cold_chunks.iter_mut().for_each(|c| c.end_offset = v),
        9 => entry.cold_chunks.iter_mut().for_each(|c| c.object_size = v),
        10 => entry
            .cold_chunks
            .iter_mut()
            .for_each(|c| c.object_offset = v),
        11 => entry
            .external_segments
            .iter_mut()
            .for_each(|e| e.start_offset = v),
        12 => entry
            .external_segments
            .iter_mut()
            .for_each(|e| e.end_offset = v),
        13 => entry
            .external_segments
            .iter_mut()
            .for_each(|e| e.object_size = v),
        14 => entry
            .external_segments
            .iter_mut()
            .for_each(|e| e.object_offset = v),
        15 => {
            if let Some(r) = entry.message_records.get_mut(i) {
                r.start_offset = v;
            }
        }
        16 => {
            if let Some(r) = entry.message_records.get_mut(i) {
                r.end_offset = v;
            }
        }
        17 | 18 => {
            let (mut first, mut offsets) = entry
                .record_index
                .as_ref()
                .map(index_parts)
                .unwrap_or_default();
            if field == 17 {
                first = v;
            } else if let Some(o) = offsets.get_mut(i) {
                *o = v;
            } else {
                offsets.push(v);
            }
            entry.record_index = Some(record_index(first, &offsets));
        }
        19 => entry.retained_offset = Some(v),
        20 => entry.retained_offset = None,
        21 => {
            if let Some(visible) = entry.visible_snapshot.as_mut() {
                visible.offset = v;
                visible.digest.clear();
            }
        }
        22 => entry.hot_segments.clear(),
        23 => entry.payload.truncate(to_usize(v % 8)),
        24 => entry.integrity.total_records = v,
        _ => entry.visible_snapshot = None,
    }
}

fn setsum_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just('0'),
            Just('f'),
            Just('F'),
            Just('+'),
            Just('é'),
            Just('€'),
            any::<char>()
        ],
        0..70,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #[test]
    fn numeric_mutations_never_panic(
        mutations in proptest::collection::vec((0..FIELDS, value()), 1..8)
    ) {
        let mut entry = full_entry();
        for (field, v) in mutations {
            mutate(&mut entry, field, v);
        }
        let buckets = vec![entry.metadata.stream_id.bucket_id.clone()];
        let first = SnapshotValidator::new(&buckets, &[]).unwrap().check_entry(&entry);
        let second = SnapshotValidator::new(&buckets, &[]).unwrap().check_entry(&entry);
        prop_assert_eq!(&first, &second);
        if let Ok(checked) = first {
            let tail = entry.metadata.tail_offset;
            prop_assert!(checked.retained_offset <= tail);
            let mut expected = 0_usize;
            for segment in &checked.hot_segments {
                prop_assert_eq!(segment.payload_start, expected);
                prop_assert!(segment.payload_end > segment.payload_start);
                prop_assert!(segment.payload_end <= entry.payload.len());
                expected = segment.payload_end;
            }
            prop_assert_eq!(expected, entry.payload.len());
            prop_assert_eq!(checked.visible_digest.is_some(), entry.visible_snapshot.is_some());
        }
    }

    #[test]
    fn arbitrary_setsum_text_never_panics(
        live in setsum_text(),
        evicted in setsum_text(),
        total in setsum_text(),
    ) {
        let mut entry = full_entry();
        entry.integrity.live_setsum = live;
        entry.integrity.evicted_setsum = evicted;
        entry.integrity.total_setsum = total;
        let buckets = vec![entry.metadata.stream_id.bucket_id.clone()];
        let result = SnapshotValidator::new(&buckets, &[]).unwrap().check_entry(&entry);
        if !entry.integrity.live_setsum.is_ascii() {
            prop_assert!(result.is_err());
        }
    }
}

#[test]
fn the_unmutated_entry_is_valid() {
    // Guards the property above against testing only rejections.
    let entry = full_entry();
    let buckets = vec![entry.metadata.stream_id.bucket_id.clone()];
    assert!(
        SnapshotValidator::new(&buckets, &[])
            .unwrap()
            .check_entry(&entry)
            .is_ok()
    );
}
