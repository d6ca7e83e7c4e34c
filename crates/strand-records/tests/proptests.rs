//! Property tests: consistent use keeps the index valid and its lookups
//! inverse; arbitrary input never panics.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use strand_records::{
    StreamRecordIndex, StreamRecordRange, appended_record_count, batch_item_record_ranges,
    batch_record_ends, build_record_index, canonical_json_record_ends, check_record_precondition,
    is_json_record_content_type, message_records_for_append, prepare_record_append,
    prepare_record_retention, record_range_for_offsets, relative_ends_cover,
    validate_restored_record_index,
};

#[derive(Debug, Clone)]
enum Op {
    /// Append a payload of `len` bytes cut at the given positions.
    Append { len: u64, cuts: Vec<u64> },
    /// Retain from the retained record start (or tail) picked by `pick`.
    Retain { pick: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..40, proptest::collection::vec(1u64..40, 0..6))
            .prop_map(|(len, cuts)| Op::Append { len, cuts }),
        1 => any::<usize>().prop_map(|pick| Op::Retain { pick }),
    ]
}

/// Valid relative ends for `len` bytes: the cuts below `len`, sorted,
/// deduplicated, then `len` itself.
fn ends_for(len: u64, cuts: &[u64]) -> Vec<u64> {
    if len == 0 {
        return Vec::new();
    }
    let mut ends: Vec<u64> = cuts.iter().copied().filter(|&cut| cut < len).collect();
    ends.sort_unstable();
    ends.dedup();
    ends.push(len);
    ends
}

/// Numbers biased towards the edges of `u64`.
fn edgy_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..32,
        (0u64..32).prop_map(|d| u64::MAX - d),
        Just(u64::MAX / 2),
    ]
}

fn raw_index(first_record: u64, offsets: &[u64]) -> StreamRecordIndex {
    serde_json::from_value(serde_json::json!({
        "first_record": first_record,
        "record_offsets": offsets,
    }))
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn consistent_appends_and_retentions_keep_the_index_valid(
        ops in proptest::collection::vec(op(), 0..30),
        start in prop_oneof![Just(0u64), 0u64..1000],
    ) {
        // Model: every record start ever appended, the number dropped, the
        // retained offset and the tail.
        let mut index = StreamRecordIndex::restore(0, vec![], start, start).unwrap();
        let mut starts: Vec<u64> = Vec::new();
        let mut dropped = 0usize;
        let (mut retained, mut tail) = (start, start);
        for op in ops {
            match op {
                Op::Append { len, cuts } => {
                    let ends = ends_for(len, &cuts);
                    let before = index.clone();
                    let pending = index.prepare_append(tail, len, &ends).unwrap();
                    prop_assert_eq!(&index, &before);
                    let expected = StreamRecordRange {
                        first_record: starts.len() as u64,
                        next_record: (starts.len() + ends.len()) as u64,
                    };
                    prop_assert_eq!(pending.range(), expected);
                    prop_assert_eq!(index.commit_append(pending), expected);
                    if !ends.is_empty() {
                        starts.push(tail);
                        starts.extend(ends[..ends.len() - 1].iter().map(|end| tail + end));
                    }
                    tail += len;
                }
                Op::Retain { pick } => {
                    let live = &starts[dropped..];
                    let position = pick % (live.len() + 1);
                    let offset = live.get(position).copied().unwrap_or(tail);
                    prop_assert_eq!(
                        index.retain_from_offset(offset, tail),
                        Ok((dropped + position) as u64)
                    );
                    dropped += position;
                    retained = offset;
                }
            }
            prop_assert_eq!(index.validate(retained, tail), Ok(()));
            let range = index.range().unwrap();
            prop_assert_eq!(range.first_record, dropped as u64);
            prop_assert_eq!(range.next_record, starts.len() as u64);
            prop_assert_eq!(index.record_offsets(), &starts[dropped..]);
            for record in range.first_record..range.next_record {
                let offset = index.offset_for(record, tail).unwrap();
                prop_assert_eq!(offset, starts[record as usize]);
                prop_assert_eq!(index.record_for_offset(offset, tail), Ok(record));
            }
            prop_assert_eq!(index.offset_for(range.next_record, tail), Ok(tail));
            prop_assert_eq!(index.record_for_offset(tail, tail), Ok(range.next_record));
            let text = serde_json::to_string(&index).unwrap();
            let decoded: StreamRecordIndex = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(validate_restored_record_index(Some(&decoded), retained, tail), Ok(()));
        }
    }

    #[test]
    fn rollback_undoes_any_appends(
        first in proptest::collection::vec((1u64..20, proptest::collection::vec(1u64..20, 0..4)), 0..6),
        second in proptest::collection::vec((0u64..20, proptest::collection::vec(1u64..20, 0..4)), 0..6),
    ) {
        let mut index = StreamRecordIndex::new();
        let mut tail = 0;
        for (len, cuts) in first {
            index.append_relative_ends(tail, len, &ends_for(len, &cuts)).unwrap();
            tail += len;
        }
        let before = index.clone();
        let checkpoint = index.checkpoint();
        for (len, cuts) in second {
            index.append_relative_ends(tail, len, &ends_for(len, &cuts)).unwrap();
            tail += len;
        }
        index.rollback(checkpoint);
        prop_assert_eq!(index, before);
    }

    #[test]
    fn arbitrary_index_methods_never_panic(
        first_record in edgy_u64(),
        offsets in proptest::collection::vec(edgy_u64(), 0..8),
        a in edgy_u64(),
        b in edgy_u64(),
        c in edgy_u64(),
        ends in proptest::collection::vec(edgy_u64(), 0..8),
    ) {
        let _ = StreamRecordIndex::restore(first_record, offsets.clone(), a, b);
        let index = raw_index(first_record, &offsets);
        let _ = index.range();
        let _ = index.offset_for(a, b);
        let _ = index.offset_for(u64::MAX, u64::MAX);
        let _ = index.offset_for(first_record, b);
        let _ = index.record_for_offset(a, b);
        let _ = index.record_for_offset(u64::MAX, 0);
        let _ = index.validate(a, b);
        let _ = index.prepare_retain(a, b);
        let _ = check_record_precondition(Some(&index), Some(a));
        let _ = prepare_record_retention(Some(&index), a, b);
        let _ = record_range_for_offsets(Some(&index), a, b, c);
        let _ = prepare_record_append(Some(&index), true, a, b, &ends);
        let _ = relative_ends_cover(b, &ends);

        let mut retained = index.clone();
        if retained.retain_from_offset(a, b).is_err() {
            prop_assert_eq!(&retained, &index);
        }
        let mut appended = index.clone();
        if appended.append_relative_ends(a, b, &ends).is_err() {
            prop_assert_eq!(&appended, &index);
        }
        let mut extreme = index.clone();
        let _ = extreme.append_relative_ends(u64::MAX, u64::MAX, &[u64::MAX]);
        let _ = extreme.append_relative_ends(c, 0, &[]);
        let checkpoint = StreamRecordIndex::new().checkpoint();
        extreme.rollback(checkpoint);
        prop_assert!(extreme.record_offsets().is_empty());
    }

    #[test]
    fn arbitrary_helper_inputs_never_panic(
        content_type in prop_oneof![
            Just("application/json".to_owned()),
            Just("text/plain".to_owned()),
            any::<String>(),
        ],
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 0..4),
        a in edgy_u64(),
        b in edgy_u64(),
        ends in proptest::collection::vec(edgy_u64(), 0..8),
        first_record in edgy_u64(),
        next_record in edgy_u64(),
    ) {
        let json = is_json_record_content_type(&content_type);
        for payload in &payloads {
            if let Ok(found) = canonical_json_record_ends(&content_type, payload) {
                if json && !payload.is_empty() {
                    prop_assert!(relative_ends_cover(payload.len() as u64, &found));
                } else {
                    prop_assert!(found.is_empty());
                }
            }
        }
        let _ = build_record_index(&content_type, a, &ends);
        let _ = prepare_record_append(None, json, a, b, &ends);
        let records = message_records_for_append(a, b, &ends);
        prop_assert_eq!(records.len(), ends.len().max(usize::from(ends.is_empty() && a < b)));
        let _ = appended_record_count(&ends, b);
        if let Ok(batch) = batch_record_ends(&content_type, &payloads) {
            let pending = StreamRecordRange { first_record, next_record };
            let ranges = batch_item_record_ranges(Some(pending), &batch);
            prop_assert_eq!(ranges.len(), payloads.len());
            if json {
                prop_assert!(relative_ends_cover(batch.total_len, &batch.combined_ends));
            } else {
                prop_assert!(batch.combined_ends.is_empty());
            }
            prop_assert_eq!(batch.total_len, payloads.iter().map(|p| p.len() as u64).sum::<u64>());
        }
    }
}
