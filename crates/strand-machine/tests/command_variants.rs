//! One representative `StreamCommand` of every variant (spec 01 §9.1), with
//! non-default fields: pinned as compact JSON in an insta snapshot (one line
//! per variant, declaration order), checked for field order, and round-tripped
//! through JSON.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use serde_json::{Map, Value, json};
use strand_integrity::StreamIntegritySnapshot;
use strand_machine::StreamCommand;
use strand_model::{
    BucketStreamId, ColdChunkRef, ColdGcEntry, ColdGcTarget, ExternalPayloadRef, HotPayloadSegment,
    ObjectPayloadRef, ProducerAppendRecord, ProducerReceipt, ProducerRequest, ProducerSnapshot,
    StreamAttrs, StreamMessageRecord, StreamMetadata, StreamStatus, StreamVisibleSnapshot,
};
use strand_records::StreamRecordIndex;
use strand_snapshot::{SharedColdObjectOwnersSnapshot, StreamSnapshot, StreamSnapshotEntry};
use strand_usage::{BucketQuota, BucketQuotaSnapshot, BucketUsage, BucketUsageSnapshot};

fn to_json(command: &StreamCommand) -> String {
    serde_json::to_string(command).unwrap()
}

fn from_json(text: &str) -> StreamCommand {
    serde_json::from_str(text).unwrap()
}

fn sid() -> BucketStreamId {
    BucketStreamId::new("bkt1", "s1")
}

fn producer(id: &str, epoch: u64, seq: u64) -> ProducerRequest {
    ProducerRequest {
        producer_id: id.to_owned(),
        producer_epoch: epoch,
        producer_seq: seq,
    }
}

fn external(path: &str, payload_len: u64, object_size: u64) -> ExternalPayloadRef {
    ExternalPayloadRef {
        s3_path: path.to_owned(),
        payload_len,
        object_size,
    }
}

/// The attrs of the §9.2 `CreateExternal` example, built in a different
/// insertion order (`z` then `a`; inside `a`, `y` then `b`): the JSON must
/// come out with sorted keys anyway.
fn spec_attrs() -> StreamAttrs {
    let mut inner = Map::new();
    inner.insert("y".to_owned(), json!(1.0));
    inner.insert("b".to_owned(), json!([1, 2]));
    let mut metadata = Map::new();
    metadata.insert("z".to_owned(), json!(1));
    metadata.insert("a".to_owned(), Value::Object(inner));
    StreamAttrs {
        title: Some("T".to_owned()),
        metadata,
    }
}

// ---------------------------------------------------------------------------
// One representative value per variant (every field non-default)
// ---------------------------------------------------------------------------

/// The 19 variant names in declaration order (spec 01 §9.1), then strand's
/// four fork commands (`docs/forks.md` §3).
const VARIANTS: [&str; 23] = [
    "CreateBucket",
    "DeleteBucket",
    "CreateStream",
    "CreateExternal",
    "Append",
    "AppendExternal",
    "AppendBatch",
    "PublishSnapshot",
    "AdvanceRetention",
    "TouchStreamAccess",
    "UpdateStreamAttrs",
    "FlushCold",
    "CompactCold",
    "Close",
    "DeleteStream",
    "PurgeBucket",
    "AckColdGc",
    "ImportSnapshot",
    "SetBucketQuota",
    "PinForkSource",
    "CreateFork",
    "UnpinForkSource",
    "AckForkUnpins",
];

/// Exhaustive (no wildcard): adding a variant breaks the build here, so the
/// representative list cannot silently miss one.
fn variant_name(command: &StreamCommand) -> &'static str {
    match command {
        StreamCommand::CreateBucket { .. } => "CreateBucket",
        StreamCommand::DeleteBucket { .. } => "DeleteBucket",
        StreamCommand::CreateStream { .. } => "CreateStream",
        StreamCommand::CreateExternal { .. } => "CreateExternal",
        StreamCommand::Append { .. } => "Append",
        StreamCommand::AppendExternal { .. } => "AppendExternal",
        StreamCommand::AppendBatch { .. } => "AppendBatch",
        StreamCommand::PublishSnapshot { .. } => "PublishSnapshot",
        StreamCommand::AdvanceRetention { .. } => "AdvanceRetention",
        StreamCommand::TouchStreamAccess { .. } => "TouchStreamAccess",
        StreamCommand::UpdateStreamAttrs { .. } => "UpdateStreamAttrs",
        StreamCommand::FlushCold { .. } => "FlushCold",
        StreamCommand::CompactCold { .. } => "CompactCold",
        StreamCommand::Close { .. } => "Close",
        StreamCommand::DeleteStream { .. } => "DeleteStream",
        StreamCommand::PurgeBucket { .. } => "PurgeBucket",
        StreamCommand::AckColdGc { .. } => "AckColdGc",
        StreamCommand::ImportSnapshot { .. } => "ImportSnapshot",
        StreamCommand::SetBucketQuota { .. } => "SetBucketQuota",
        StreamCommand::PinForkSource { .. } => "PinForkSource",
        StreamCommand::CreateFork { .. } => "CreateFork",
        StreamCommand::UnpinForkSource { .. } => "UnpinForkSource",
        StreamCommand::AckForkUnpins { .. } => "AckForkUnpins",
    }
}

fn aff_sid() -> BucketStreamId {
    BucketStreamId::with_affinity("bkt1", "aff", "s1")
}

fn chunk(start: u64, end: u64, path: &str) -> ColdChunkRef {
    ColdChunkRef {
        start_offset: start,
        end_offset: end,
        s3_path: path.to_owned(),
        object_size: 64,
        object_offset: 8,
        shared_object: true,
        payload_digest: "ab01".to_owned(),
    }
}

fn rich_attrs() -> StreamAttrs {
    let mut metadata = Map::new();
    metadata.insert(
        "zeta".to_owned(),
        json!({"n": -1, "f": 1.5e-7, "big": 1e20}),
    );
    metadata.insert("alpha".to_owned(), json!([true, null, "x"]));
    StreamAttrs {
        title: Some("Title \"q\"\n/é".to_owned()),
        metadata,
    }
}

fn rich_entry() -> StreamSnapshotEntry {
    let id = aff_sid();
    StreamSnapshotEntry {
        metadata: StreamMetadata {
            stream_id: id,
            content_type: "application/json".to_owned(),
            status: StreamStatus::Closed,
            tail_offset: 6,
            last_stream_seq: Some("s9".to_owned()),
            stream_ttl_seconds: Some(60),
            stream_expires_at_ms: None,
            created_at_ms: 10,
            last_ttl_touch_at_ms: 11,
        },
        attrs: Some(StreamAttrs {
            title: Some("t".to_owned()),
            metadata: Map::new(),
        }),
        hot_start_offset: 4,
        payload: vec![1, 2],
        hot_segments: vec![HotPayloadSegment {
            start_offset: 4,
            end_offset: 6,
            payload_start: 0,
            payload_end: 2,
        }],
        cold_frontier_offset: 4,
        cold_index_generation: 1,
        cold_chunks: vec![chunk(0, 4, "cold/a")],
        external_segments: vec![ObjectPayloadRef {
            start_offset: 0,
            end_offset: 2,
            s3_path: "ext/x".to_owned(),
            object_size: 2,
            object_offset: 1,
        }],
        message_records: vec![StreamMessageRecord {
            start_offset: 2,
            end_offset: 6,
        }],
        record_index: Some(StreamRecordIndex::new()),
        integrity: StreamIntegritySnapshot {
            live_setsum: "11".to_owned(),
            evicted_setsum: "22".to_owned(),
            total_setsum: "33".to_owned(),
            live_start_offset: 2,
            tail_offset: 6,
            live_records: 1,
            evicted_records: 1,
            total_records: 2,
        },
        retained_offset: Some(2),
        visible_snapshot: Some(StreamVisibleSnapshot {
            offset: 2,
            content_type: "c".to_owned(),
            payload: vec![7],
            digest: "dd".to_owned(),
        }),
        producer_states: vec![ProducerSnapshot {
            producer_id: "w".to_owned(),
            producer_epoch: 1,
            producer_seq: 2,
            last_start_offset: 4,
            last_next_offset: 6,
            last_closed: true,
            last_items: vec![ProducerAppendRecord {
                start_offset: 4,
                next_offset: 6,
                closed: true,
                record_start: Some(1),
                record_next: Some(2),
            }],
            receipts: vec![ProducerReceipt {
                producer_seq: 2,
                start_offset: 4,
                next_offset: 6,
                closed: true,
                items: Vec::new(),
            }],
        }],
        cold_raw_frontier_offset: None,
        fork: None,
    }
}

fn rich_snapshot() -> StreamSnapshot {
    StreamSnapshot {
        buckets: vec!["bkt1".to_owned(), "bkt2".to_owned()],
        erased_buckets: vec!["gone".to_owned()],
        streams: vec![rich_entry()],
        pending_cold_gc: vec![
            ColdGcEntry {
                seq: 1,
                bucket_id: "bkt1".to_owned(),
                not_before_ms: 0,
                target: ColdGcTarget::Stream(aff_sid()),
            },
            ColdGcEntry {
                seq: 2,
                bucket_id: String::new(),
                not_before_ms: 5,
                target: ColdGcTarget::Paths(vec!["p1".to_owned(), "p2".to_owned()]),
            },
        ],
        next_cold_gc_seq: 3,
        shared_cold_object_owners: vec![SharedColdObjectOwnersSnapshot {
            s3_path: "cold/a".to_owned(),
            bucket_ids: vec!["bkt1".to_owned(), "bkt2".to_owned()],
        }],
        bucket_usage: vec![BucketUsageSnapshot {
            bucket_id: "bkt1".to_owned(),
            usage: BucketUsage {
                committed_append_bytes: 1,
                committed_records: 2,
                committed_write_units: 3,
                retained_bytes: 4,
                stream_count: 5,
            },
        }],
        bucket_quotas: vec![BucketQuotaSnapshot {
            bucket_id: "bkt2".to_owned(),
            quota: BucketQuota {
                max_streams: Some(1),
                max_retained_bytes: None,
            },
        }],
        machine_options: None,
        fork_unpins: Vec::new(),
        next_fork_pin: 0,
    }
}

/// One value of every variant, in declaration order, with non-default fields
/// (options `Some`, vectors non-empty, booleans `true`, numbers non-zero).
fn representatives() -> Vec<StreamCommand> {
    vec![
        StreamCommand::CreateBucket {
            bucket_id: "bkt-create".to_owned(),
        },
        StreamCommand::DeleteBucket {
            bucket_id: "bkt-delete".to_owned(),
        },
        StreamCommand::CreateStream {
            stream_id: aff_sid(),
            content_type: "text/plain".to_owned(),
            initial_payload: Bytes::from_static(b"hi\n"),
            close_after: true,
            stream_seq: Some("seq-1".to_owned()),
            producer: Some(producer("writer", 2, 0)),
            stream_ttl_seconds: Some(30),
            stream_expires_at_ms: Some(99),
            attrs: Some(rich_attrs()),
            now_ms: 1_700_000_000_000,
        },
        StreamCommand::CreateExternal {
            stream_id: sid(),
            content_type: "application/json".to_owned(),
            initial_payload: external("ext/obj-1", 16, 32),
            record_ends: vec![8, 16],
            close_after: true,
            stream_seq: Some("seq-2".to_owned()),
            producer: Some(producer("writer", 3, 0)),
            stream_ttl_seconds: Some(31),
            stream_expires_at_ms: Some(100),
            attrs: Some(spec_attrs()),
            now_ms: 8,
        },
        StreamCommand::Append {
            stream_id: aff_sid(),
            content_type: Some("application/octet-stream".to_owned()),
            payload: Bytes::from_static(&[0, 255, 10]),
            close_after: true,
            stream_seq: Some("seq-3".to_owned()),
            producer: Some(producer("w", 4, 5)),
            now_ms: 9,
            record_match: Some(u64::MAX),
        },
        StreamCommand::AppendExternal {
            stream_id: sid(),
            content_type: Some("application/json".to_owned()),
            payload: external("ext/obj-2", 7, 70),
            record_ends: vec![3, 7],
            close_after: true,
            stream_seq: Some("seq-4".to_owned()),
            producer: Some(producer("w", 5, 6)),
            now_ms: 10,
            record_match: Some(4),
        },
        StreamCommand::AppendBatch {
            stream_id: aff_sid(),
            content_type: Some("text/plain".to_owned()),
            payloads: vec![
                Bytes::from_static(b"a"),
                Bytes::from_static(b"bc"),
                Bytes::from_static(b"def"),
            ],
            producer: Some(producer("w", 6, 7)),
            now_ms: 11,
        },
        StreamCommand::PublishSnapshot {
            stream_id: sid(),
            snapshot_offset: 12,
            content_type: "application/json".to_owned(),
            payload: Bytes::from_static(b"{}"),
            expected_digest: Some("00ff".to_owned()),
            now_ms: 13,
        },
        StreamCommand::AdvanceRetention {
            stream_id: aff_sid(),
            retained_offset: 14,
            now_ms: 15,
        },
        StreamCommand::TouchStreamAccess {
            stream_id: sid(),
            now_ms: 16,
            renew_ttl: true,
        },
        StreamCommand::UpdateStreamAttrs {
            stream_id: aff_sid(),
            attrs: Some(StreamAttrs {
                title: Some(String::new()),
                metadata: Map::new(),
            }),
            now_ms: 17,
        },
        StreamCommand::FlushCold {
            stream_id: sid(),
            chunk: chunk(0, 18, "cold/f"),
        },
        StreamCommand::CompactCold {
            stream_id: aff_sid(),
            old_chunks: vec![chunk(0, 10, "cold/o1"), chunk(10, 20, "cold/o2")],
            replacement: chunk(0, 20, "cold/r"),
            gc_not_before_ms: 19,
        },
        StreamCommand::Close {
            stream_id: sid(),
            stream_seq: Some("seq-5".to_owned()),
            producer: Some(producer("w", 7, 8)),
            now_ms: 20,
        },
        StreamCommand::DeleteStream {
            stream_id: aff_sid(),
        },
        StreamCommand::PurgeBucket {
            bucket_id: "bkt-purge".to_owned(),
        },
        StreamCommand::AckColdGc { up_to_seq: 21 },
        StreamCommand::ImportSnapshot {
            snapshot: Box::new(rich_snapshot()),
        },
        StreamCommand::SetBucketQuota {
            bucket_id: "bkt-quota".to_owned(),
            max_streams: Some(22),
            max_retained_bytes: Some(23),
        },
        StreamCommand::PinForkSource {
            stream_id: sid(),
            fork_stream_id: aff_sid(),
            fork_offset: Some(24),
            now_ms: 25,
        },
        StreamCommand::CreateFork {
            stream_id: aff_sid(),
            source_stream_id: sid(),
            fork_offset: 26,
            fork_offset_given: true,
            pin: 7,
            sub_offset: 3,
            inherited_start: 2,
            first_record: Some(4),
            content_type: "application/json".to_owned(),
            prefix: Bytes::from_static(b"{}\n"),
            initial_payload: Bytes::from_static(b"[]\n"),
            close_after: true,
            stream_ttl_seconds: Some(27),
            stream_expires_at_ms: Some(28),
            attrs: Some(spec_attrs()),
            now_ms: 29,
        },
        StreamCommand::UnpinForkSource {
            stream_id: sid(),
            fork_stream_id: aff_sid(),
            pin: 7,
        },
        StreamCommand::AckForkUnpins {
            unpins: vec![strand_snapshot::ForkUnpinSnapshot {
                source_stream_id: sid(),
                fork_stream_id: aff_sid(),
                pin: 7,
            }],
        },
    ]
}

#[test]
fn representatives_cover_every_variant_in_declaration_order() {
    let names: Vec<&str> = representatives().iter().map(variant_name).collect();
    assert_eq!(names, VARIANTS);
    // The external tag written is the variant name, and every variant is a
    // struct variant: `{"<Name>":{...}}`.
    for command in representatives() {
        let value: Value = serde_json::from_str(&to_json(&command)).unwrap();
        let object = value.as_object().unwrap();
        assert_eq!(object.len(), 1);
        let (tag, inner) = object.iter().next().unwrap();
        assert_eq!(tag, variant_name(&command));
        assert_eq!(command.kind(), tag, "kind() is the serde tag");
        assert!(inner.is_object(), "{tag} must be a struct variant");
    }
}

#[test]
fn field_order_is_declaration_order() {
    // Field names per variant, in the order of spec 01 §9.1.
    let expected: [&[&str]; 19] = [
        &["bucket_id"],
        &["bucket_id"],
        &[
            "stream_id",
            "content_type",
            "initial_payload",
            "close_after",
            "stream_seq",
            "producer",
            "stream_ttl_seconds",
            "stream_expires_at_ms",
            "attrs",
            "now_ms",
        ],
        &[
            "stream_id",
            "content_type",
            "initial_payload",
            "record_ends",
            "close_after",
            "stream_seq",
            "producer",
            "stream_ttl_seconds",
            "stream_expires_at_ms",
            "attrs",
            "now_ms",
        ],
        &[
            "stream_id",
            "content_type",
            "payload",
            "close_after",
            "stream_seq",
            "producer",
            "now_ms",
            "record_match",
        ],
        &[
            "stream_id",
            "content_type",
            "payload",
            "record_ends",
            "close_after",
            "stream_seq",
            "producer",
            "now_ms",
            "record_match",
        ],
        &[
            "stream_id",
            "content_type",
            "payloads",
            "producer",
            "now_ms",
        ],
        &[
            "stream_id",
            "snapshot_offset",
            "content_type",
            "payload",
            "expected_digest",
            "now_ms",
        ],
        &["stream_id", "retained_offset", "now_ms"],
        &["stream_id", "now_ms", "renew_ttl"],
        &["stream_id", "attrs", "now_ms"],
        &["stream_id", "chunk"],
        &["stream_id", "old_chunks", "replacement", "gc_not_before_ms"],
        &["stream_id", "stream_seq", "producer", "now_ms"],
        &["stream_id"],
        &["bucket_id"],
        &["up_to_seq"],
        &["snapshot"],
        &["bucket_id", "max_streams", "max_retained_bytes"],
    ];
    for (command, fields) in representatives().iter().zip(expected) {
        let text = to_json(command);
        let inner_start = text.find(":{").unwrap() + 1;
        let inner: Map<String, Value> =
            serde_json::from_str(&text[inner_start..text.len() - 1]).unwrap();
        // Same key set...
        let mut keys: Vec<&str> = inner.keys().map(String::as_str).collect();
        let mut sorted_expected = fields.to_vec();
        keys.sort_unstable();
        sorted_expected.sort_unstable();
        assert_eq!(keys, sorted_expected, "{}", variant_name(command));
        // ...appearing in declaration order in the text.
        let positions: Vec<usize> = fields
            .iter()
            .map(|field| text.find(&format!("\"{field}\":")).unwrap())
            .collect();
        assert!(
            positions.windows(2).all(|pair| pair[0] < pair[1]),
            "{}: fields out of order in {text}",
            variant_name(command)
        );
    }
}

#[test]
fn snapshot_of_every_variant() {
    let lines: Vec<String> = representatives().iter().map(to_json).collect();
    insta::assert_snapshot!("command_variants", lines.join("\n"));
}

#[test]
fn representatives_round_trip() {
    for command in representatives() {
        let text = to_json(&command);
        let decoded = from_json(&text);
        assert_eq!(decoded, command);
        assert_eq!(to_json(&decoded), text);
        let bytes = serde_json::to_vec(&command).unwrap();
        assert_eq!(bytes, text.as_bytes());
        assert_eq!(
            serde_json::from_slice::<StreamCommand>(&bytes).unwrap(),
            command
        );
    }
}

#[test]
fn pretty_output_differs_only_in_whitespace() {
    // Spec 01 conventions: `to_string_pretty` changes only whitespace.
    for command in representatives() {
        let pretty = serde_json::to_string_pretty(&command).unwrap();
        let compact: Value = serde_json::from_str(&to_json(&command)).unwrap();
        let reparsed: Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(reparsed, compact);
        assert_eq!(
            serde_json::from_str::<StreamCommand>(&pretty).unwrap(),
            command
        );
    }
}
