//! Builders shared by the integration tests: small valid snapshot entries
//! that each test then breaks in one place.

#![allow(dead_code, clippy::unwrap_used)]

use serde_json::json;
use strand_integrity::StreamIntegritySnapshot;
use strand_model::{
    BucketStreamId, ColdChunkRef, HotPayloadSegment, ObjectPayloadRef, ProducerAppendRecord,
    ProducerReceipt, ProducerSnapshot, StreamAttrs, StreamMessageRecord, StreamMetadata,
    StreamStatus, StreamVisibleSnapshot,
};
use strand_records::StreamRecordIndex;
use strand_snapshot::{StreamSnapshot, StreamSnapshotEntry};

/// The empty setsum: 64 `'0'`.
pub(crate) const ZERO: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// 62 `'0'`, to build setsums from a leading byte.
pub(crate) const ZEROS_62: &str = "00000000000000000000000000000000000000000000000000000000000000";

/// A setsum hex string whose first byte is `first` (two hex chars) and the
/// rest zero.
pub(crate) fn setsum(first: &str) -> String {
    format!("{first}{ZEROS_62}")
}

pub(crate) fn integrity(live: &str, evicted: &str, total: &str) -> StreamIntegritySnapshot {
    StreamIntegritySnapshot {
        live_setsum: live.to_owned(),
        evicted_setsum: evicted.to_owned(),
        total_setsum: total.to_owned(),
        live_start_offset: 0,
        tail_offset: 0,
        live_records: 0,
        evicted_records: 0,
        total_records: 0,
    }
}

pub(crate) fn id(bucket: &str, stream: &str) -> BucketStreamId {
    BucketStreamId::new(bucket, stream)
}

pub(crate) fn seg(
    start_offset: u64,
    end_offset: u64,
    payload_start: usize,
    payload_end: usize,
) -> HotPayloadSegment {
    HotPayloadSegment {
        start_offset,
        end_offset,
        payload_start,
        payload_end,
    }
}

pub(crate) fn record(start_offset: u64, end_offset: u64) -> StreamMessageRecord {
    StreamMessageRecord {
        start_offset,
        end_offset,
    }
}

/// A record index with arbitrary (unvalidated) contents, built through serde
/// because its fields are private.
pub(crate) fn record_index(first_record: u64, record_offsets: &[u64]) -> StreamRecordIndex {
    serde_json::from_value(serde_json::json!({
        "first_record": first_record,
        "record_offsets": record_offsets,
    }))
    .unwrap()
}

pub(crate) fn producer(producer_id: &str) -> ProducerSnapshot {
    ProducerSnapshot {
        producer_id: producer_id.to_owned(),
        producer_epoch: 0,
        producer_seq: 0,
        last_start_offset: 0,
        last_next_offset: 0,
        last_closed: false,
        last_items: vec![ProducerAppendRecord {
            start_offset: 0,
            next_offset: 0,
            closed: false,
            record_start: None,
            record_next: None,
        }],
        receipts: vec![],
    }
}

/// A valid entry for `id` whose whole content is `payload`, hot, retained
/// offset 0, one message record per non-empty payload, zero setsums.
pub(crate) fn entry(id: BucketStreamId, payload: &[u8]) -> StreamSnapshotEntry {
    let tail = payload.len() as u64;
    StreamSnapshotEntry {
        metadata: StreamMetadata {
            stream_id: id,
            content_type: "application/octet-stream".to_owned(),
            status: StreamStatus::Open,
            tail_offset: tail,
            last_stream_seq: None,
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
            created_at_ms: 0,
            last_ttl_touch_at_ms: 0,
        },
        attrs: None,
        hot_start_offset: 0,
        payload: payload.to_vec(),
        hot_segments: if payload.is_empty() {
            vec![]
        } else {
            vec![seg(0, tail, 0, payload.len())]
        },
        cold_frontier_offset: 0,
        cold_index_generation: 0,
        cold_chunks: vec![],
        external_segments: vec![],
        message_records: if payload.is_empty() {
            vec![]
        } else {
            vec![record(0, tail)]
        },
        record_index: None,
        integrity: integrity(ZERO, ZERO, ZERO),
        retained_offset: Some(0),
        visible_snapshot: None,
        producer_states: vec![],
        cold_raw_frontier_offset: None,
        fork: None,
    }
}

/// A snapshot with the given active buckets and stream entries.
pub(crate) fn snapshot(buckets: &[&str], streams: Vec<StreamSnapshotEntry>) -> StreamSnapshot {
    StreamSnapshot {
        buckets: buckets.iter().map(|b| (*b).to_owned()).collect(),
        streams,
        ..StreamSnapshot::default()
    }
}

pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// One stream entry with every field set to a non-default value.
pub(crate) fn full_entry() -> StreamSnapshotEntry {
    let item = ProducerAppendRecord {
        start_offset: 9,
        next_offset: 12,
        closed: false,
        record_start: Some(2),
        record_next: Some(3),
    };
    let mut metadata = serde_json::Map::new();
    metadata.insert("b".into(), json!(1));
    metadata.insert("a".into(), json!("x"));
    StreamSnapshotEntry {
        metadata: StreamMetadata {
            stream_id: BucketStreamId::with_affinity("acme", "k", "s"),
            content_type: "application/json".into(),
            status: StreamStatus::Closed,
            tail_offset: 12,
            last_stream_seq: Some("0003".into()),
            stream_ttl_seconds: Some(60),
            stream_expires_at_ms: Some(61_000),
            created_at_ms: 1000,
            last_ttl_touch_at_ms: 2000,
        },
        attrs: Some(StreamAttrs {
            title: Some("T".into()),
            metadata,
        }),
        hot_start_offset: 9,
        payload: b"xyz".to_vec(),
        hot_segments: vec![seg(9, 12, 0, 3)],
        cold_frontier_offset: 3,
        cold_index_generation: 1,
        cold_chunks: vec![ColdChunkRef {
            start_offset: 3,
            end_offset: 6,
            s3_path: "_packs/p1.bin".into(),
            object_size: 10,
            object_offset: 4,
            shared_object: true,
            payload_digest: "abcd".into(),
        }],
        external_segments: vec![ObjectPayloadRef {
            start_offset: 6,
            end_offset: 9,
            s3_path: "ext/a.bin".into(),
            object_size: 5,
            object_offset: 2,
        }],
        message_records: vec![record(0, 6), record(6, 9), record(9, 12)],
        record_index: Some(record_index(2, &[0, 6, 9])),
        integrity: StreamIntegritySnapshot {
            live_setsum: setsum("01"),
            evicted_setsum: ZERO.into(),
            total_setsum: setsum("01"),
            live_start_offset: 1,
            tail_offset: 12,
            live_records: 3,
            evicted_records: 1,
            total_records: 3,
        },
        retained_offset: Some(0),
        visible_snapshot: Some(StreamVisibleSnapshot {
            offset: 6,
            content_type: "application/json".into(),
            payload: b"{}".to_vec(),
            digest: "a8e77ad0200c3d91cb1062a5ee44d523f5b458efa4639a671b4c1421a3f27f37".into(),
        }),
        producer_states: vec![ProducerSnapshot {
            producer_id: "p1".into(),
            producer_epoch: 2,
            producer_seq: 7,
            last_start_offset: 9,
            last_next_offset: 12,
            last_closed: true,
            last_items: vec![item.clone()],
            receipts: vec![ProducerReceipt {
                producer_seq: 7,
                start_offset: 9,
                next_offset: 12,
                closed: true,
                items: vec![item],
            }],
        }],
        cold_raw_frontier_offset: None,
        fork: None,
    }
}
