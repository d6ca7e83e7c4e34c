//! The legacy snapshot examples of spec 07 §8.2–§8.4, copied verbatim into
//! `tests/data/`: they decode, validate, and give the `CheckedEntry` values
//! the spec's "restored state" lists.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{ZERO, id, seg};
use strand_model::{ColdGcTarget, StreamStatus};
use strand_snapshot::{SnapshotSummary, SnapshotValidator, StreamSnapshot, validate_snapshot};

const EXAMPLE_A: &str = include_str!("data/legacy_a.json");
const EXAMPLE_B: &str = include_str!("data/legacy_b.json");
const EXAMPLE_C: &str = include_str!("data/legacy_c.json");

fn decode(text: &str) -> StreamSnapshot {
    serde_json::from_str(text).unwrap()
}

#[test]
fn example_a_oldest_shape() {
    let snap = decode(EXAMPLE_A);
    assert_eq!(snap.buckets, ["acme"]);
    assert!(snap.erased_buckets.is_empty());
    assert!(snap.pending_cold_gc.is_empty());
    assert_eq!(snap.next_cold_gc_seq, 0);
    assert!(snap.shared_cold_object_owners.is_empty());
    assert!(snap.bucket_usage.is_empty());
    assert!(snap.bucket_quotas.is_empty());

    let entry = &snap.streams[0];
    assert_eq!(entry.metadata.stream_id, id("acme", "events"));
    assert_eq!(entry.metadata.status, StreamStatus::Open);
    assert_eq!(entry.metadata.last_stream_seq, None);
    assert_eq!(entry.metadata.stream_ttl_seconds, None);
    assert_eq!(entry.metadata.stream_expires_at_ms, None);
    assert_eq!(entry.attrs, None);
    assert_eq!(entry.cold_frontier_offset, 0);
    assert_eq!(entry.cold_index_generation, 0);
    assert_eq!(entry.record_index, None);
    assert_eq!(entry.retained_offset, None);
    assert_eq!(entry.visible_snapshot, None);
    let producer = &entry.producer_states[0];
    assert!(producer.receipts.is_empty());
    assert_eq!(producer.last_items[0].record_start, None);
    assert_eq!(producer.last_items[0].record_next, None);

    let mut validator = SnapshotValidator::new(&snap.buckets, &snap.erased_buckets).unwrap();
    let checked = validator.check_entry(entry).unwrap();
    // Retained 0: no retained_offset and no visible snapshot.
    assert_eq!(checked.retained_offset, 0);
    // One chunk 0..5 synthesized from hot_start_offset 0 and tail 5.
    assert_eq!(checked.hot_segments, vec![seg(0, 5, 0, 5)]);
    assert_eq!(&entry.payload[..], b"hello");
    // total = live = the zero setsum, 2 total records.
    assert_eq!(checked.integrity.total_setsum_hex(), ZERO);
    assert_eq!(checked.integrity.total_records(), 2);
    assert_eq!(checked.visible_digest, None);

    assert_eq!(
        validate_snapshot(&snap).unwrap(),
        SnapshotSummary {
            buckets: 1,
            erased_buckets: 0,
            streams: 1,
            hot_payload_bytes: 5,
            producers: 1,
            pending_cold_gc: 0,
        }
    );
}

#[test]
fn example_b_retained_from_visible_snapshot_digest_absent() {
    let snap = decode(EXAMPLE_B);
    let entry = &snap.streams[0];
    assert_eq!(entry.metadata.status, StreamStatus::Closed);
    assert_eq!(entry.metadata.last_stream_seq.as_deref(), Some("0009"));
    let visible = entry.visible_snapshot.as_ref().unwrap();
    assert_eq!(visible.digest, "");
    assert_eq!(&visible.payload[..], b"{}");

    let mut validator = SnapshotValidator::new(&snap.buckets, &snap.erased_buckets).unwrap();
    let checked = validator.check_entry(entry).unwrap();
    // Retained 3, derived from the visible-snapshot offset.
    assert_eq!(checked.retained_offset, 3);
    // One chunk 3..5 = `lo`, synthesized from hot_start_offset 3.
    assert_eq!(checked.hot_segments, vec![seg(3, 5, 0, 2)]);
    assert_eq!(&entry.payload[..], b"lo");
    assert_eq!(
        checked.visible_digest.as_deref(),
        Some("a8e77ad0200c3d91cb1062a5ee44d523f5b458efa4639a671b4c1421a3f27f37")
    );
    assert_eq!(checked.integrity.total_records(), 2);
    // The integrity view written after restore starts at the retained offset.
    assert_eq!(checked.integrity.snapshot(3, 5).live_start_offset, 3);

    let summary = validate_snapshot(&snap).unwrap();
    assert_eq!(summary.hot_payload_bytes, 2);
    assert_eq!(summary.producers, 0);
}

#[test]
fn example_c_tiered_legacy_gc_old_counter_unlimited_quota() {
    let snap = decode(EXAMPLE_C);
    let entry = &snap.streams[0];
    // Cold chunk kept verbatim with `payload_digest ""` defaulted; external
    // segment with `object_offset 0` defaulted.
    assert_eq!(entry.cold_chunks[0].payload_digest, "");
    assert!(entry.cold_chunks[0].shared_object);
    assert_eq!(entry.external_segments[0].object_offset, 0);
    assert_eq!(entry.cold_frontier_offset, 3);
    // GC entry: not_before_ms defaulted, empty bucket id kept.
    assert_eq!(snap.pending_cold_gc[0].seq, 4);
    assert_eq!(snap.pending_cold_gc[0].bucket_id, "");
    assert_eq!(snap.pending_cold_gc[0].not_before_ms, 0);
    assert_eq!(
        snap.pending_cold_gc[0].target,
        ColdGcTarget::Paths(vec!["old/x.bin".into()])
    );
    assert_eq!(snap.next_cold_gc_seq, 5);
    // Old usage counter name; quota with an absent limit.
    assert_eq!(snap.bucket_usage[0].usage.committed_write_units, 3);
    assert!(snap.bucket_quotas[0].quota.is_unlimited());
    assert_eq!(snap.bucket_quotas[1].bucket_id, "ghost");
    assert_eq!(snap.bucket_quotas[1].quota.max_streams, Some(4));
    assert_eq!(snap.bucket_quotas[1].quota.max_retained_bytes, None);

    let mut validator = SnapshotValidator::new(&snap.buckets, &snap.erased_buckets).unwrap();
    let checked = validator.check_entry(entry).unwrap();
    // Coverage of [0,12): frontier 0..3, shared chunk 3..6, external 6..9,
    // hot 9..12.
    assert_eq!(checked.retained_offset, 0);
    assert_eq!(checked.hot_segments, vec![seg(9, 12, 0, 3)]);
    assert_eq!(checked.integrity.total_records(), 3);
    assert_eq!(checked.visible_digest, None);

    assert_eq!(
        validate_snapshot(&snap).unwrap(),
        SnapshotSummary {
            buckets: 1,
            erased_buckets: 0,
            streams: 1,
            hot_payload_bytes: 3,
            producers: 0,
            pending_cold_gc: 1,
        }
    );
}

#[test]
fn example_c_without_frontier_has_a_gap() {
    // Removing the frontier leaves 0..3 uncovered.
    let mut snap = decode(EXAMPLE_C);
    snap.streams[0].cold_frontier_offset = 0;
    assert_eq!(
        validate_snapshot(&snap).unwrap_err().to_string(),
        "snapshot stream 'acme/tiered' tail offset 12 does not match payload length 3"
    );
}

#[test]
fn missing_required_field_is_a_decode_error() {
    // §8.1: a very old shape without `integrity` fails at decode.
    let mut value: serde_json::Value = serde_json::from_str(EXAMPLE_A).unwrap();
    value["streams"][0]
        .as_object_mut()
        .unwrap()
        .remove("integrity");
    let err = serde_json::from_value::<StreamSnapshot>(value).unwrap_err();
    assert!(
        err.to_string().contains("missing field `integrity`"),
        "{err}"
    );
}
