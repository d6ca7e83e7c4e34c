//! `strand-snapshot` alone on the repository's legacy snapshot fixtures.
//! The expected counts were read off the fixture file itself (a JSON tool
//! counting `buckets`, `erased_buckets`, `streams`, the `payload` byte
//! arrays, `producer_states` and `pending_cold_gc`), not from this code.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use component_snapshot_check::{check_bytes, check_file};
use strand_snapshot::{SnapshotFormat, encode_binary};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/legacy")
        .join(name)
}

#[test]
fn a_complete_snapshot_validates_in_both_formats() {
    let (format, snapshot, summary) = check_file(&fixture("modern-complete.json")).unwrap();
    assert_eq!(format, SnapshotFormat::Json);
    assert_eq!(summary.buckets, 2);
    assert_eq!(summary.erased_buckets, 1);
    assert_eq!(summary.streams, 3);
    assert_eq!(summary.hot_payload_bytes, 24 + 3 + 4);
    assert_eq!(summary.producers, 2);
    assert_eq!(summary.pending_cold_gc, 3);

    let mut binary = Vec::new();
    encode_binary(&mut binary, &snapshot, &snapshot.streams).unwrap();
    let (format, again, again_summary) = check_bytes(&binary).unwrap();
    assert_eq!(format, SnapshotFormat::Binary);
    assert_eq!(again, snapshot);
    assert_eq!(again_summary, summary);
}

#[test]
fn invalid_snapshots_are_rejected_with_a_reason() {
    // The bucket "acme" is listed twice.
    let err = check_file(&fixture("error-duplicate-bucket.json")).unwrap_err();
    assert!(err.contains("acme"), "{err}");
    assert!(check_bytes(b"not a snapshot").is_err());
    let mut binary = Vec::new();
    let (_, snapshot, _) = check_file(&fixture("modern-complete.json")).unwrap();
    encode_binary(&mut binary, &snapshot, &snapshot.streams).unwrap();
    binary.truncate(binary.len() - 1);
    assert!(check_bytes(&binary).unwrap_err().contains("truncated"));
}
