//! Entries that restore accepts, with the `CheckedEntry` values the spec
//! implies: coverage edge cases (spec 07 §5.7, §10.40-42, §10.45), lenient
//! integrity parsing (§5.9, §10.33), retained derivation and the digest fill
//! (§5.3 steps 3 and 12).

#![allow(clippy::unwrap_used)]

use crate::common;

use common::*;
use strand_model::StreamVisibleSnapshot;
use strand_snapshot::{
    CheckedEntry, SnapshotValidator, StreamSnapshotEntry, StreamSnapshotError,
    visible_snapshot_digest,
};

fn check(entry: &StreamSnapshotEntry) -> Result<CheckedEntry, StreamSnapshotError> {
    let bucket = entry.metadata.stream_id.bucket_id.clone();
    SnapshotValidator::new(&[bucket], &[])
        .unwrap()
        .check_entry(entry)
}

fn plm(entry: &StreamSnapshotEntry) -> StreamSnapshotError {
    StreamSnapshotError::PayloadLengthMismatch {
        stream_id: entry.metadata.stream_id.clone(),
        tail_offset: entry.metadata.tail_offset,
        payload_len: entry.payload.len(),
    }
}

#[test]
fn plain_entry() {
    let checked = check(&entry(id("aaaa", "s"), b"ab")).unwrap();
    assert_eq!(checked.retained_offset, 0);
    assert_eq!(checked.hot_segments, vec![seg(0, 2, 0, 2)]);
    assert_eq!(checked.integrity.total_setsum_hex(), ZERO);
    assert_eq!(checked.visible_digest, None);
}

#[test]
fn coverage_may_run_past_tail() {
    // §5.7: hot 0..3 with a 3-byte payload on a stream whose tail is 2.
    let mut e0 = entry(id("aaaa", "s"), b"abc");
    e0.metadata.tail_offset = 2;
    e0.message_records = vec![record(0, 2)];
    let checked = check(&e0).unwrap();
    assert_eq!(checked.hot_segments, vec![seg(0, 3, 0, 3)]);
}

#[test]
fn retained_equal_tail_range_beyond_tail_fails_straddling_passes() {
    // §10.40: tail 2, retained 2, no records.
    let mut beyond = entry(id("aaaa", "s"), b"x");
    beyond.metadata.tail_offset = 2;
    beyond.retained_offset = Some(2);
    beyond.message_records = vec![];
    beyond.hot_segments = vec![seg(3, 4, 0, 1)];
    assert_eq!(check(&beyond), Err(plm(&beyond)));

    let mut straddling = entry(id("aaaa", "s"), b"xy");
    straddling.metadata.tail_offset = 2;
    straddling.retained_offset = Some(2);
    straddling.message_records = vec![];
    straddling.hot_segments = vec![seg(1, 3, 0, 2)];
    let checked = check(&straddling).unwrap();
    assert_eq!(checked.retained_offset, 2);
    assert_eq!(checked.hot_segments, vec![seg(1, 3, 0, 2)]);
}

#[test]
fn gap_before_hot_data_needs_the_frontier() {
    // §10.41: tail 4 with only hot 2..4.
    let mut e0 = entry(id("aaaa", "s"), b"cd");
    e0.metadata.tail_offset = 4;
    e0.hot_segments = vec![seg(2, 4, 0, 2)];
    e0.message_records = vec![record(0, 4)];
    assert_eq!(check(&e0), Err(plm(&e0)));
    e0.cold_frontier_offset = 2;
    assert_eq!(check(&e0).unwrap().retained_offset, 0);
}

#[test]
fn synthesized_segment_must_be_non_empty() {
    // §10.42: hot_start_offset 3, empty hot_segments, 2-byte payload, tail 2.
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.hot_start_offset = 3;
    e0.hot_segments = vec![];
    assert_eq!(check(&e0), Err(plm(&e0)));
}

#[test]
fn unordered_hot_segments_are_kept_in_list_order() {
    // §10.45.
    let mut e0 = entry(id("aaaa", "s"), &[1, 2, 3, 4]);
    e0.hot_segments = vec![seg(2, 4, 0, 2), seg(0, 2, 2, 4)];
    let checked = check(&e0).unwrap();
    assert_eq!(checked.hot_segments, vec![seg(2, 4, 0, 2), seg(0, 2, 2, 4)]);
}

#[test]
fn empty_payload_with_empty_segments_is_not_synthesized() {
    let mut e0 = entry(id("aaaa", "s"), b"");
    e0.hot_start_offset = 7;
    assert!(check(&e0).unwrap().hot_segments.is_empty());
}

#[test]
fn uppercase_setsum_hex_is_accepted() {
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.integrity = integrity(ZERO, &setsum("0A"), &setsum("0a"));
    e0.integrity.total_records = 7;
    let checked = check(&e0).unwrap();
    assert_eq!(checked.integrity.total_setsum_hex(), setsum("0a"));
    assert_eq!(checked.integrity.total_records(), 7);
}

#[test]
fn evicted_plus_live_equals_total_restores_as_total() {
    // §10.33: evicted 01… = total, live zero; it re-snapshots as
    // live = total = 01… and evicted zero.
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.integrity = integrity(ZERO, &setsum("01"), &setsum("01"));
    let checked = check(&e0).unwrap();
    let view = checked.integrity.snapshot(checked.retained_offset, 2);
    assert_eq!(view.live_setsum, setsum("01"));
    assert_eq!(view.total_setsum, setsum("01"));
    assert_eq!(view.evicted_setsum, ZERO);
}

#[test]
fn retained_is_derived_from_the_visible_snapshot_when_absent() {
    let mut e0 = entry(id("aaaa", "s"), b"cd");
    e0.metadata.tail_offset = 4;
    e0.retained_offset = None;
    e0.hot_segments = vec![seg(2, 4, 0, 2)];
    e0.message_records = vec![record(2, 4)];
    e0.visible_snapshot = Some(StreamVisibleSnapshot {
        offset: 2,
        content_type: "text/plain".into(),
        payload: b"state".to_vec(),
        digest: String::new(),
    });
    let checked = check(&e0).unwrap();
    assert_eq!(checked.retained_offset, 2);
    // Spec 05 §6.1 vector.
    assert_eq!(
        checked.visible_digest.as_deref(),
        Some("d1768bf8ff2099ce2eb24a7b8ff7a2c6ea48a094fde29160a1ed42943358e2dc")
    );
}

#[test]
fn explicit_retained_wins_and_visible_below_retained_is_accepted() {
    let mut e0 = entry(id("aaaa", "s"), b"cd");
    e0.metadata.tail_offset = 4;
    e0.retained_offset = Some(3);
    e0.hot_segments = vec![seg(2, 4, 0, 2)];
    e0.message_records = vec![record(3, 4)];
    e0.visible_snapshot = Some(StreamVisibleSnapshot {
        offset: 1,
        content_type: "x".into(),
        payload: vec![],
        digest: "not-a-digest".into(),
    });
    let checked = check(&e0).unwrap();
    assert_eq!(checked.retained_offset, 3);
    // A non-empty digest is kept and never checked.
    assert_eq!(checked.visible_digest.as_deref(), Some("not-a-digest"));
}

#[test]
fn digest_vector_for_empty_payload() {
    assert_eq!(
        visible_snapshot_digest("x", b""),
        "83dc55ccddb68bf3cf487468c2681a52e752a60105fb23653f70a55eb95ad340"
    );
}

#[test]
fn setsums_are_not_compared_with_the_payload() {
    // §5.9 step 5: all-zero setsums with a non-empty payload restore.
    let checked = check(&entry(id("aaaa", "s"), b"hello")).unwrap();
    assert_eq!(checked.integrity.total_records(), 0);
}

#[test]
fn huge_offsets_do_not_panic() {
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.metadata.tail_offset = u64::MAX;
    e0.hot_segments = vec![seg(u64::MAX - 2, u64::MAX, 0, 2)];
    e0.message_records = vec![record(0, u64::MAX)];
    e0.cold_frontier_offset = u64::MAX - 2;
    let checked = check(&e0).unwrap();
    assert_eq!(checked.retained_offset, 0);

    let mut e1 = entry(id("aaaa", "s"), b"ab");
    e1.hot_segments = vec![seg(0, 2, 0, usize::MAX)];
    assert_eq!(check(&e1), Err(plm(&e1)));
}
