//! `Display` strings of `StreamCommand` (spec 01 §9.3): every row of the table
//! and every "Examples (verified)" string, exact.

use bytes::Bytes;
use strand_machine::StreamCommand;
use strand_model::{BucketStreamId, ColdChunkRef, ExternalPayloadRef, ProducerRequest};
use strand_snapshot::{StreamSnapshot, StreamSnapshotEntry};

fn sid() -> BucketStreamId {
    BucketStreamId::new("bkt1", "s1")
}

fn aff_sid() -> BucketStreamId {
    BucketStreamId::with_affinity("bkt1", "aff", "s1")
}

fn external(payload_len: u64, object_size: u64) -> ExternalPayloadRef {
    ExternalPayloadRef {
        s3_path: "a/b".to_owned(),
        payload_len,
        object_size,
    }
}

fn chunk(start_offset: u64, end_offset: u64) -> ColdChunkRef {
    ColdChunkRef {
        start_offset,
        end_offset,
        s3_path: "c".to_owned(),
        object_size: 100,
        object_offset: 7,
        ..Default::default()
    }
}

fn producer() -> Option<ProducerRequest> {
    Some(ProducerRequest {
        producer_id: "w".to_owned(),
        producer_epoch: 1,
        producer_seq: 2,
    })
}

fn create_stream(stream_id: BucketStreamId, payload: &'static [u8]) -> StreamCommand {
    StreamCommand::CreateStream {
        stream_id,
        content_type: "text/plain".to_owned(),
        initial_payload: Bytes::from_static(payload),
        close_after: false,
        stream_seq: None,
        producer: producer(),
        stream_ttl_seconds: None,
        stream_expires_at_ms: Some(5),
        attrs: None,
        now_ms: 7,
    }
}

fn create_external(stream_id: BucketStreamId, payload: ExternalPayloadRef) -> StreamCommand {
    StreamCommand::CreateExternal {
        stream_id,
        content_type: "application/json".to_owned(),
        initial_payload: payload,
        record_ends: vec![2, 5],
        close_after: true,
        stream_seq: Some("1".to_owned()),
        producer: None,
        stream_ttl_seconds: Some(3),
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 7,
    }
}

fn append(stream_id: BucketStreamId, payload: &'static [u8]) -> StreamCommand {
    StreamCommand::Append {
        stream_id,
        content_type: None,
        payload: Bytes::from_static(payload),
        close_after: false,
        stream_seq: None,
        producer: None,
        now_ms: 1,
        record_match: Some(3),
    }
}

fn append_external(stream_id: BucketStreamId, payload: ExternalPayloadRef) -> StreamCommand {
    StreamCommand::AppendExternal {
        stream_id,
        content_type: Some("application/json".to_owned()),
        payload,
        record_ends: vec![1, 2, 3],
        close_after: false,
        stream_seq: None,
        producer: producer(),
        now_ms: 1,
        record_match: None,
    }
}

fn append_batch(stream_id: BucketStreamId, payloads: Vec<Bytes>) -> StreamCommand {
    StreamCommand::AppendBatch {
        stream_id,
        content_type: None,
        payloads,
        producer: producer(),
        now_ms: 2,
    }
}

fn publish_snapshot(
    stream_id: BucketStreamId,
    snapshot_offset: u64,
    payload: &'static [u8],
) -> StreamCommand {
    StreamCommand::PublishSnapshot {
        stream_id,
        snapshot_offset,
        content_type: "c".to_owned(),
        payload: Bytes::from_static(payload),
        expected_digest: Some("d".to_owned()),
        now_ms: 4,
    }
}

fn compact_cold(
    stream_id: BucketStreamId,
    old_chunks: Vec<ColdChunkRef>,
    replacement: ColdChunkRef,
) -> StreamCommand {
    StreamCommand::CompactCold {
        stream_id,
        old_chunks,
        replacement,
        gc_not_before_ms: 9,
    }
}

fn import_snapshot(buckets: &[&str], streams: usize) -> StreamCommand {
    // The entries' content does not matter for Display; only the counts do.
    let entry: StreamSnapshotEntry = serde_json::from_str(concat!(
        r#"{"metadata":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"content_type":"c","status":"Open","tail_offset":0,"last_stream_seq":null,"stream_ttl_seconds":null,"stream_expires_at_ms":null,"created_at_ms":0,"last_ttl_touch_at_ms":0},"#,
        r#""hot_start_offset":0,"payload":[],"hot_segments":[],"cold_chunks":[],"external_segments":[],"message_records":[],"#,
        r#""integrity":{"live_setsum":"","evicted_setsum":"","total_setsum":"","live_start_offset":0,"tail_offset":0,"live_records":0,"evicted_records":0,"total_records":0},"#,
        r#""producer_states":[]}"#
    ))
    .expect("a valid snapshot entry");
    StreamCommand::ImportSnapshot {
        snapshot: Box::new(StreamSnapshot {
            buckets: buckets.iter().map(|b| (*b).to_owned()).collect(),
            erased_buckets: vec!["gone1".to_owned(), "gone2".to_owned(), "gone3".to_owned()],
            streams: vec![entry; streams],
            next_cold_gc_seq: 42,
            ..Default::default()
        }),
    }
}

fn assert_display(command: &StreamCommand, expected: &str) {
    assert_eq!(command.to_string(), expected);
}

// ---------------------------------------------------------------------------
// "Examples (verified)"
// ---------------------------------------------------------------------------

#[test]
fn verified_examples() {
    assert_display(
        &create_external(aff_sid(), external(5, 9)),
        "create_external:bkt1/aff/s1:5 bytes",
    );
    assert_display(&append(sid(), b"xyz"), "append:bkt1/s1:3 bytes");
    assert_display(
        &append_batch(sid(), vec![Bytes::from_static(b"a"), Bytes::new()]),
        "append_batch:bkt1/s1:2 items",
    );
    assert_display(
        &publish_snapshot(sid(), 3, &[1, 2]),
        "publish_snapshot:bkt1/s1:3:2 bytes",
    );
    assert_display(
        &StreamCommand::TouchStreamAccess {
            stream_id: sid(),
            now_ms: 4,
            renew_ttl: true,
        },
        "touch_stream_access:bkt1/s1:renew_ttl=true",
    );
    assert_display(
        &StreamCommand::FlushCold {
            stream_id: sid(),
            chunk: ColdChunkRef {
                start_offset: 0,
                end_offset: 4,
                s3_path: "c".to_owned(),
                object_size: 4,
                ..Default::default()
            },
        },
        "flush_cold:bkt1/s1:0..4",
    );
    assert_display(
        &compact_cold(sid(), vec![chunk(0, 2), chunk(2, 4)], chunk(0, 4)),
        "compact_cold:bkt1/s1:2 chunks:0..4",
    );
    assert_display(
        &StreamCommand::AckColdGc { up_to_seq: 12 },
        "ack_cold_gc:up_to_seq=12",
    );
    assert_display(
        &StreamCommand::ImportSnapshot {
            snapshot: Box::default(),
        },
        "import_snapshot:buckets=0:streams=0",
    );
}

// ---------------------------------------------------------------------------
// Every row of the §9.3 table, in declaration order
// ---------------------------------------------------------------------------

#[test]
fn create_bucket() {
    assert_display(
        &StreamCommand::CreateBucket {
            bucket_id: "bkt1".to_owned(),
        },
        "create_bucket:bkt1",
    );
}

#[test]
fn delete_bucket() {
    assert_display(
        &StreamCommand::DeleteBucket {
            bucket_id: "bkt-9".to_owned(),
        },
        "delete_bucket:bkt-9",
    );
}

#[test]
fn create_stream_prints_no_size() {
    assert_display(&create_stream(sid(), b"ab"), "create_stream:bkt1/s1");
    assert_display(&create_stream(aff_sid(), b""), "create_stream:bkt1/aff/s1");
}

#[test]
fn create_external_prints_the_declared_payload_len() {
    // Not object_size (9), not the record count (2).
    assert_display(
        &create_external(sid(), external(5, 9)),
        "create_external:bkt1/s1:5 bytes",
    );
    assert_display(
        &create_external(aff_sid(), external(1, 1)),
        "create_external:bkt1/aff/s1:1 bytes",
    );
    // The declared value is printed even when it is invalid.
    assert_display(
        &create_external(sid(), external(0, 0)),
        "create_external:bkt1/s1:0 bytes",
    );
}

#[test]
fn append_prints_the_payload_length() {
    assert_display(&append(sid(), b"xyz"), "append:bkt1/s1:3 bytes");
    assert_display(&append(aff_sid(), b"x"), "append:bkt1/aff/s1:1 bytes");
    assert_display(&append(sid(), b""), "append:bkt1/s1:0 bytes");
}

#[test]
fn append_external_prints_the_declared_payload_len() {
    // Not object_size (70), not the record-end count (3).
    assert_display(
        &append_external(sid(), external(7, 70)),
        "append_external:bkt1/s1:7 bytes",
    );
    assert_display(
        &append_external(aff_sid(), external(u64::MAX, 1)),
        "append_external:bkt1/aff/s1:18446744073709551615 bytes",
    );
}

#[test]
fn append_batch_prints_the_item_count() {
    // Counts items, not bytes (6 bytes here).
    assert_display(
        &append_batch(
            sid(),
            vec![
                Bytes::from_static(b"a"),
                Bytes::from_static(b"bc"),
                Bytes::from_static(b"def"),
            ],
        ),
        "append_batch:bkt1/s1:3 items",
    );
    assert_display(
        &append_batch(aff_sid(), vec![Bytes::from_static(b"abcd")]),
        "append_batch:bkt1/aff/s1:1 items",
    );
    assert_display(
        &append_batch(sid(), Vec::new()),
        "append_batch:bkt1/s1:0 items",
    );
}

#[test]
fn publish_snapshot_prints_offset_and_payload_length() {
    assert_display(
        &publish_snapshot(sid(), 10, b"abcd"),
        "publish_snapshot:bkt1/s1:10:4 bytes",
    );
    assert_display(
        &publish_snapshot(aff_sid(), 0, b""),
        "publish_snapshot:bkt1/aff/s1:0:0 bytes",
    );
}

#[test]
fn advance_retention() {
    assert_display(
        &StreamCommand::AdvanceRetention {
            stream_id: sid(),
            retained_offset: 17,
            now_ms: 99,
        },
        "advance_retention:bkt1/s1:17",
    );
}

#[test]
fn touch_stream_access() {
    assert_display(
        &StreamCommand::TouchStreamAccess {
            stream_id: aff_sid(),
            now_ms: 4,
            renew_ttl: false,
        },
        "touch_stream_access:bkt1/aff/s1:renew_ttl=false",
    );
}

#[test]
fn update_stream_attrs() {
    assert_display(
        &StreamCommand::UpdateStreamAttrs {
            stream_id: sid(),
            attrs: None,
            now_ms: 3,
        },
        "update_stream_attrs:bkt1/s1",
    );
}

#[test]
fn flush_cold_prints_the_chunk_range() {
    // Not object_offset (7) or object_size (100).
    assert_display(
        &StreamCommand::FlushCold {
            stream_id: aff_sid(),
            chunk: chunk(5, 12),
        },
        "flush_cold:bkt1/aff/s1:5..12",
    );
}

#[test]
fn compact_cold_prints_count_and_replacement_range() {
    assert_display(
        &compact_cold(
            sid(),
            vec![chunk(3, 5), chunk(5, 8), chunk(8, 11)],
            chunk(3, 11),
        ),
        "compact_cold:bkt1/s1:3 chunks:3..11",
    );
    // No pluralization, and the range comes from the replacement only.
    assert_display(
        &compact_cold(aff_sid(), vec![chunk(0, 1)], chunk(20, 30)),
        "compact_cold:bkt1/aff/s1:1 chunks:20..30",
    );
    assert_display(
        &compact_cold(sid(), Vec::new(), chunk(0, 0)),
        "compact_cold:bkt1/s1:0 chunks:0..0",
    );
}

#[test]
fn close_prints_close_stream() {
    assert_display(
        &StreamCommand::Close {
            stream_id: sid(),
            stream_seq: Some("9".to_owned()),
            producer: producer(),
            now_ms: 1,
        },
        "close_stream:bkt1/s1",
    );
}

#[test]
fn delete_stream() {
    assert_display(
        &StreamCommand::DeleteStream {
            stream_id: aff_sid(),
        },
        "delete_stream:bkt1/aff/s1",
    );
}

#[test]
fn purge_bucket() {
    assert_display(
        &StreamCommand::PurgeBucket {
            bucket_id: "bkt2".to_owned(),
        },
        "purge_bucket:bkt2",
    );
}

#[test]
fn ack_cold_gc() {
    assert_display(
        &StreamCommand::AckColdGc { up_to_seq: 0 },
        "ack_cold_gc:up_to_seq=0",
    );
    assert_display(
        &StreamCommand::AckColdGc {
            up_to_seq: u64::MAX,
        },
        "ack_cold_gc:up_to_seq=18446744073709551615",
    );
}

#[test]
fn import_snapshot_prints_bucket_and_stream_counts() {
    // Erased buckets (3) and next_cold_gc_seq (42) are not printed.
    assert_display(
        &import_snapshot(&["bkt1", "bkt2"], 1),
        "import_snapshot:buckets=2:streams=1",
    );
    assert_display(
        &import_snapshot(&["bkt1"], 3),
        "import_snapshot:buckets=1:streams=3",
    );
}

#[test]
fn set_bucket_quota() {
    assert_display(
        &StreamCommand::SetBucketQuota {
            bucket_id: "bkt1".to_owned(),
            max_streams: Some(3),
            max_retained_bytes: Some(4),
        },
        "set_bucket_quota:bkt1",
    );
}

#[test]
fn ids_are_joined_without_escaping() {
    // §4: the Display of BucketStreamId joins the raw strings.
    assert_display(
        &StreamCommand::DeleteStream {
            stream_id: BucketStreamId::with_affinity("b:1", "a/b", "s é"),
        },
        "delete_stream:b:1/a/b/s é",
    );
}
