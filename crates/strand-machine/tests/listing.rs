//! The ordered listing of a bucket's streams by path
//! (`StreamStateMachine::streams_by_path`): order, cursors, affinity
//! paths, deletes, expiry, and a restored machine listing the same.

#![allow(clippy::unwrap_used)]

use std::ops::Bound;

use bytes::Bytes;
use strand_machine::{StreamCommand, StreamResponse, StreamStateMachine};
use strand_model::{BucketStreamId, MachineProfile};

fn create(m: &mut StreamStateMachine, id: &BucketStreamId, body: &[u8], ttl: Option<u64>) {
    let r = m.apply(StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: "text/plain".into(),
        initial_payload: Bytes::copy_from_slice(body),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: ttl,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 1_000,
    });
    assert!(matches!(r, StreamResponse::Created { .. }), "{r:?}");
}

fn paths(m: &StreamStateMachine, bucket: &str, after: Option<&str>, now_ms: u64) -> Vec<String> {
    let from = after.map_or(Bound::Unbounded, Bound::Excluded);
    m.streams_by_path(bucket, from, now_ms)
        .map(|s| s.path())
        .collect()
}

fn machine() -> StreamStateMachine {
    let mut m = StreamStateMachine::with_profile(MachineProfile::Corrected);
    for bucket in ["acme", "zeta"] {
        m.apply(StreamCommand::CreateBucket {
            bucket_id: bucket.into(),
        });
    }
    for name in ["m", "b", "z", "a-1"] {
        create(&mut m, &BucketStreamId::new("acme", name), b"", None);
    }
    create(
        &mut m,
        &BucketStreamId::with_affinity("acme", "chat", "42"),
        b"hello",
        None,
    );
    create(
        &mut m,
        &BucketStreamId::with_affinity("acme", "chat", "7"),
        b"",
        None,
    );
    create(
        &mut m,
        &BucketStreamId::new("acme", "short-lived"),
        b"",
        Some(1),
    );
    create(&mut m, &BucketStreamId::new("zeta", "other"), b"", None);
    m
}

#[test]
fn lists_a_bucket_in_path_order_from_a_cursor() {
    let m = machine();
    assert_eq!(
        paths(&m, "acme", None, 1_000),
        ["a-1", "b", "chat/42", "chat/7", "m", "short-lived", "z"]
    );
    assert_eq!(
        paths(&m, "acme", Some("chat/42"), 1_000),
        ["chat/7", "m", "short-lived", "z"]
    );
    // A cursor need not be a stream's path.
    assert_eq!(
        paths(&m, "acme", Some("c"), 1_000),
        ["chat/42", "chat/7", "m", "short-lived", "z"]
    );
    assert_eq!(paths(&m, "zeta", None, 1_000), ["other"]);
    assert!(paths(&m, "none", None, 1_000).is_empty());
    let chat = m
        .streams_by_path("acme", Bound::Included("chat/42"), 1_000)
        .next()
        .unwrap();
    assert_eq!(chat.path(), "chat/42");
    assert_eq!(chat.metadata.tail_offset, 5);
    assert_eq!(chat.retained_offset, 0);
    assert_eq!(
        chat.metadata.stream_id,
        BucketStreamId::with_affinity("acme", "chat", "42")
    );
}

#[test]
fn deleted_and_expired_streams_are_not_listed() {
    let mut m = machine();
    // Expired (a 1 s TTL from 1,000 ms) but not yet removed: skipped.
    assert!(!paths(&m, "acme", None, 5_000).contains(&"short-lived".to_owned()));
    let r = m.apply(StreamCommand::DeleteStream {
        stream_id: BucketStreamId::new("acme", "m"),
    });
    assert!(!matches!(r, StreamResponse::Error { .. }), "{r:?}");
    assert_eq!(
        paths(&m, "acme", None, 1_000),
        ["a-1", "b", "chat/42", "chat/7", "short-lived", "z"]
    );
    // A new stream under a freed slot is listed under its own path.
    create(&mut m, &BucketStreamId::new("acme", "c"), b"", None);
    assert_eq!(
        paths(&m, "acme", None, 1_000),
        ["a-1", "b", "c", "chat/42", "chat/7", "short-lived", "z"]
    );
    m.check_invariants().unwrap();
}

#[test]
fn a_restored_machine_lists_the_same() {
    let m = machine();
    let mut bytes = Vec::new();
    strand_machine::write_snapshot(&m, strand_snapshot::SnapshotFormat::Binary, &mut bytes)
        .unwrap();
    let restored = strand_machine::restore_from_slice(&bytes).unwrap();
    restored.check_invariants().unwrap();
    for bucket in ["acme", "zeta"] {
        assert_eq!(
            paths(&restored, bucket, None, 1_000),
            paths(&m, bucket, None, 1_000)
        );
    }
}
