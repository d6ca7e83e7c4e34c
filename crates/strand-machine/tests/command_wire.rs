//! Serde JSON format of `StreamCommand` (spec 01 §1, §9.1, §9.2): the verified
//! JSON examples byte for byte and the decoding leniency the reference has.
//! One representative value per variant is pinned in `command_variants.rs`.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use serde_json::{Map, Value, json};
use strand_machine::StreamCommand;
use strand_model::{
    BucketStreamId, ColdChunkRef, ExternalPayloadRef, ProducerRequest, StreamAttrs,
};
use strand_snapshot::StreamSnapshot;

fn to_json(command: &StreamCommand) -> String {
    serde_json::to_string(command).unwrap()
}

fn from_json(text: &str) -> StreamCommand {
    serde_json::from_str(text).unwrap()
}

fn decode_err(text: &str) -> bool {
    serde_json::from_str::<StreamCommand>(text).is_err()
}

/// Asserts the compact encoding equals `expected` (spec text) and that the
/// spec text decodes back to the same value.
fn check(command: &StreamCommand, expected: &str) {
    assert_eq!(to_json(command), expected);
    assert_eq!(&from_json(expected), command);
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
// §9.2 JSON examples, byte for byte
// ---------------------------------------------------------------------------

#[test]
fn spec_example_create_bucket() {
    check(
        &StreamCommand::CreateBucket {
            bucket_id: "bkt1".to_owned(),
        },
        r#"{"CreateBucket":{"bucket_id":"bkt1"}}"#,
    );
}

#[test]
fn spec_example_create_stream() {
    check(
        &StreamCommand::CreateStream {
            stream_id: sid(),
            content_type: "text/plain".to_owned(),
            initial_payload: Bytes::from_static(b"ab"),
            close_after: false,
            stream_seq: None,
            producer: Some(producer("w", 1, 2)),
            stream_ttl_seconds: None,
            stream_expires_at_ms: Some(5),
            attrs: None,
            now_ms: 7,
        },
        r#"{"CreateStream":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"content_type":"text/plain","initial_payload":[97,98],"close_after":false,"stream_seq":null,"producer":{"producer_id":"w","producer_epoch":1,"producer_seq":2},"stream_ttl_seconds":null,"stream_expires_at_ms":5,"attrs":null,"now_ms":7}}"#,
    );
}

#[test]
fn spec_example_create_external() {
    check(
        &StreamCommand::CreateExternal {
            stream_id: BucketStreamId::with_affinity("bkt1", "aff", "s1"),
            content_type: "application/json".to_owned(),
            initial_payload: external("a/b", 5, 9),
            record_ends: vec![2, 5],
            close_after: true,
            stream_seq: Some("1".to_owned()),
            producer: None,
            stream_ttl_seconds: Some(3),
            stream_expires_at_ms: None,
            attrs: Some(spec_attrs()),
            now_ms: 7,
        },
        r#"{"CreateExternal":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1","affinity_key":"aff"},"content_type":"application/json","initial_payload":{"s3_path":"a/b","payload_len":5,"object_size":9},"record_ends":[2,5],"close_after":true,"stream_seq":"1","producer":null,"stream_ttl_seconds":3,"stream_expires_at_ms":null,"attrs":{"title":"T","metadata":{"a":{"b":[1,2],"y":1.0},"z":1}},"now_ms":7}}"#,
    );
}

#[test]
fn spec_example_append() {
    check(
        &StreamCommand::Append {
            stream_id: sid(),
            content_type: None,
            payload: Bytes::from_static(b"xyz"),
            close_after: false,
            stream_seq: None,
            producer: None,
            now_ms: 1,
            record_match: Some(3),
        },
        r#"{"Append":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"content_type":null,"payload":[120,121,122],"close_after":false,"stream_seq":null,"producer":null,"now_ms":1,"record_match":3}}"#,
    );
}

#[test]
fn spec_example_append_batch() {
    check(
        &StreamCommand::AppendBatch {
            stream_id: sid(),
            content_type: None,
            payloads: vec![Bytes::from_static(b"a"), Bytes::new()],
            producer: None,
            now_ms: 2,
        },
        r#"{"AppendBatch":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"content_type":null,"payloads":[[97],[]],"producer":null,"now_ms":2}}"#,
    );
}

#[test]
fn spec_example_touch_stream_access() {
    // `now_ms` precedes `renew_ttl` (§9.1 item 10).
    check(
        &StreamCommand::TouchStreamAccess {
            stream_id: sid(),
            now_ms: 4,
            renew_ttl: true,
        },
        r#"{"TouchStreamAccess":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"now_ms":4,"renew_ttl":true}}"#,
    );
}

#[test]
fn spec_example_flush_cold() {
    check(
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
        r#"{"FlushCold":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"chunk":{"start_offset":0,"end_offset":4,"s3_path":"c","object_size":4,"object_offset":0,"shared_object":false,"payload_digest":""}}}"#,
    );
}

#[test]
fn spec_example_ack_cold_gc() {
    // Also the struct-variant example of §1.
    check(
        &StreamCommand::AckColdGc { up_to_seq: 12 },
        r#"{"AckColdGc":{"up_to_seq":12}}"#,
    );
}

#[test]
fn spec_example_import_snapshot() {
    check(
        &StreamCommand::ImportSnapshot {
            snapshot: Box::default(),
        },
        r#"{"ImportSnapshot":{"snapshot":{"buckets":[],"erased_buckets":[],"streams":[],"pending_cold_gc":[],"next_cold_gc_seq":0,"shared_cold_object_owners":[],"bucket_usage":[],"bucket_quotas":[]}}}"#,
    );
}

#[test]
fn spec_example_set_bucket_quota() {
    check(
        &StreamCommand::SetBucketQuota {
            bucket_id: "bkt1".to_owned(),
            max_streams: Some(3),
            max_retained_bytes: None,
        },
        r#"{"SetBucketQuota":{"bucket_id":"bkt1","max_streams":3,"max_retained_bytes":null}}"#,
    );
}

// ---------------------------------------------------------------------------
// §9.2 decoding leniency, plus the §1 rules applied to the command fields
// ---------------------------------------------------------------------------

#[test]
fn append_with_string_payload_and_missing_options_decodes() {
    let decoded = from_json(
        r#"{"Append":{"stream_id":{"bucket_id":"bkt1","stream_id":"s"},"payload":"abc","close_after":false,"now_ms":1}}"#,
    );
    assert_eq!(
        decoded,
        StreamCommand::Append {
            stream_id: BucketStreamId::new("bkt1", "s"),
            content_type: None,
            payload: Bytes::from_static(b"abc"),
            close_after: false,
            stream_seq: None,
            producer: None,
            now_ms: 1,
            record_match: None,
        }
    );
    // Written back as a number array, never as a string.
    assert_eq!(
        to_json(&decoded),
        r#"{"Append":{"stream_id":{"bucket_id":"bkt1","stream_id":"s"},"content_type":null,"payload":[97,98,99],"close_after":false,"stream_seq":null,"producer":null,"now_ms":1,"record_match":null}}"#
    );
}

#[test]
fn old_create_stream_without_attrs_decodes_to_none() {
    let built = StreamCommand::CreateStream {
        stream_id: sid(),
        content_type: "text/plain".to_owned(),
        initial_payload: Bytes::from_static(b"ab"),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 7,
    };
    let old = r#"{"CreateStream":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"content_type":"text/plain","initial_payload":[97,98],"close_after":false,"stream_seq":null,"producer":null,"stream_ttl_seconds":null,"stream_expires_at_ms":null,"now_ms":7}}"#;
    assert_eq!(from_json(old), built);
}

#[test]
fn old_create_external_without_attrs_or_record_ends_decodes() {
    let old = r#"{"CreateExternal":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"content_type":"c","initial_payload":{"s3_path":"a/b","payload_len":5,"object_size":9},"close_after":false,"now_ms":7}}"#;
    assert_eq!(
        from_json(old),
        StreamCommand::CreateExternal {
            stream_id: sid(),
            content_type: "c".to_owned(),
            initial_payload: external("a/b", 5, 9),
            record_ends: Vec::new(),
            close_after: false,
            stream_seq: None,
            producer: None,
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
            attrs: None,
            now_ms: 7,
        }
    );
}

#[test]
fn old_flush_cold_chunk_without_new_fields_decodes_to_defaults() {
    let old = r#"{"FlushCold":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"chunk":{"start_offset":0,"end_offset":4,"s3_path":"c","object_size":4}}}"#;
    let StreamCommand::FlushCold { stream_id, chunk } = from_json(old) else {
        panic!("expected FlushCold");
    };
    assert_eq!(stream_id, sid());
    assert_eq!(chunk.start_offset, 0);
    assert_eq!(chunk.end_offset, 4);
    assert_eq!(chunk.s3_path, "c");
    assert_eq!(chunk.object_size, 4);
    assert_eq!(chunk.object_offset, 0);
    assert!(!chunk.shared_object);
    assert_eq!(chunk.payload_digest, "");
}

#[test]
fn flush_cold_accepts_an_empty_chunk_object() {
    // ColdChunkRef has a container default (§5.3): `{}` is the all-default chunk.
    assert_eq!(
        from_json(
            r#"{"FlushCold":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"chunk":{}}}"#
        ),
        StreamCommand::FlushCold {
            stream_id: sid(),
            chunk: ColdChunkRef::default(),
        }
    );
}

#[test]
fn bare_string_for_a_struct_variant_is_an_error() {
    assert!(decode_err(r#""CreateBucket""#));
    assert!(decode_err(r#""AckColdGc""#));
    // The `{"Name":null}` form is only accepted for unit variants; every
    // StreamCommand variant is a struct variant.
    assert!(decode_err(r#"{"CreateBucket":null}"#));
}

#[test]
fn unknown_variant_is_an_error() {
    assert!(decode_err(r#"{"CreateBuckets":{"bucket_id":"bkt1"}}"#));
    assert!(decode_err(r#"{"createBucket":{"bucket_id":"bkt1"}}"#));
}

#[test]
fn unknown_extra_fields_are_ignored() {
    assert_eq!(
        from_json(r#"{"AckColdGc":{"up_to_seq":12,"extra":[1,{"x":null}]}}"#),
        StreamCommand::AckColdGc { up_to_seq: 12 }
    );
}

#[test]
fn required_fields_must_be_present() {
    // `now_ms` has no serde default.
    assert!(decode_err(
        r#"{"Append":{"stream_id":{"bucket_id":"bkt1","stream_id":"s"},"payload":[],"close_after":false}}"#
    ));
    // `payload` (Bytes) has no serde default.
    assert!(decode_err(
        r#"{"Append":{"stream_id":{"bucket_id":"bkt1","stream_id":"s"},"close_after":false,"now_ms":1}}"#
    ));
    // `close_after` has no serde default.
    assert!(decode_err(
        r#"{"Append":{"stream_id":{"bucket_id":"bkt1","stream_id":"s"},"payload":[],"now_ms":1}}"#
    ));
    // `renew_ttl` has no serde default.
    assert!(decode_err(
        r#"{"TouchStreamAccess":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"now_ms":4}}"#
    ));
    // ExternalPayloadRef has no container default (§5.2).
    assert!(decode_err(
        r#"{"AppendExternal":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"payload":{"s3_path":"a","payload_len":1},"close_after":false,"now_ms":1}}"#
    ));
    // ProducerRequest has no container default (§5.1).
    assert!(decode_err(
        r#"{"Close":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"producer":{"producer_id":"w","producer_epoch":1},"now_ms":1}}"#
    ));
    // StreamSnapshot requires `buckets` and `streams` (§11.3).
    assert!(decode_err(
        r#"{"ImportSnapshot":{"snapshot":{"buckets":[]}}}"#
    ));
    assert!(decode_err(r#"{"AckColdGc":{}}"#));
}

#[test]
fn numbers_are_non_negative_integers_only() {
    assert!(decode_err(r#"{"AckColdGc":{"up_to_seq":-1}}"#));
    assert!(decode_err(r#"{"AckColdGc":{"up_to_seq":1.0}}"#));
    assert!(decode_err(r#"{"AckColdGc":{"up_to_seq":"1"}}"#));
    assert!(decode_err(
        r#"{"AckColdGc":{"up_to_seq":18446744073709551616}}"#
    ));
    check(
        &StreamCommand::AckColdGc {
            up_to_seq: u64::MAX,
        },
        r#"{"AckColdGc":{"up_to_seq":18446744073709551615}}"#,
    );
}

#[test]
fn string_payloads_are_accepted_for_every_bytes_field() {
    assert_eq!(
        from_json(
            r#"{"CreateStream":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"content_type":"c","initial_payload":"hé","close_after":true,"now_ms":0}}"#
        ),
        StreamCommand::CreateStream {
            stream_id: sid(),
            content_type: "c".to_owned(),
            initial_payload: Bytes::from_static("hé".as_bytes()),
            close_after: true,
            stream_seq: None,
            producer: None,
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
            attrs: None,
            now_ms: 0,
        }
    );
    // Vec<Bytes>: each element follows the Bytes rule, mixed forms allowed.
    assert_eq!(
        from_json(
            r#"{"AppendBatch":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"payloads":["a",[98],""],"now_ms":2}}"#
        ),
        StreamCommand::AppendBatch {
            stream_id: sid(),
            content_type: None,
            payloads: vec![
                Bytes::from_static(b"a"),
                Bytes::from_static(b"b"),
                Bytes::new()
            ],
            producer: None,
            now_ms: 2,
        }
    );
    assert_eq!(
        from_json(
            r#"{"PublishSnapshot":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"snapshot_offset":3,"content_type":"c","payload":"xy","now_ms":1}}"#
        ),
        StreamCommand::PublishSnapshot {
            stream_id: sid(),
            snapshot_offset: 3,
            content_type: "c".to_owned(),
            payload: Bytes::from_static(b"xy"),
            expected_digest: None,
            now_ms: 1,
        }
    );
}

#[test]
fn byte_arrays_reject_out_of_range_elements() {
    assert!(decode_err(
        r#"{"Append":{"stream_id":{"bucket_id":"bkt1","stream_id":"s"},"payload":[256],"close_after":false,"now_ms":1}}"#
    ));
    assert!(decode_err(
        r#"{"Append":{"stream_id":{"bucket_id":"bkt1","stream_id":"s"},"payload":[-1],"close_after":false,"now_ms":1}}"#
    ));
}

#[test]
fn every_option_field_may_be_absent() {
    assert_eq!(
        from_json(
            r#"{"AppendExternal":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"payload":{"s3_path":"a/b","payload_len":5,"object_size":9},"close_after":false,"now_ms":3}}"#
        ),
        StreamCommand::AppendExternal {
            stream_id: sid(),
            content_type: None,
            payload: external("a/b", 5, 9),
            record_ends: Vec::new(),
            close_after: false,
            stream_seq: None,
            producer: None,
            now_ms: 3,
            record_match: None,
        }
    );
    assert_eq!(
        from_json(
            r#"{"UpdateStreamAttrs":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"now_ms":3}}"#
        ),
        StreamCommand::UpdateStreamAttrs {
            stream_id: sid(),
            attrs: None,
            now_ms: 3,
        }
    );
    assert_eq!(
        from_json(r#"{"Close":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"now_ms":3}}"#),
        StreamCommand::Close {
            stream_id: sid(),
            stream_seq: None,
            producer: None,
            now_ms: 3,
        }
    );
    assert_eq!(
        from_json(r#"{"SetBucketQuota":{"bucket_id":"bkt1"}}"#),
        StreamCommand::SetBucketQuota {
            bucket_id: "bkt1".to_owned(),
            max_streams: None,
            max_retained_bytes: None,
        }
    );
}

#[test]
fn legacy_import_snapshot_with_only_required_fields_decodes() {
    assert_eq!(
        from_json(r#"{"ImportSnapshot":{"snapshot":{"buckets":["bkt1"],"streams":[]}}}"#),
        StreamCommand::ImportSnapshot {
            snapshot: Box::new(StreamSnapshot {
                buckets: vec!["bkt1".to_owned()],
                ..Default::default()
            }),
        }
    );
}

#[test]
fn affinity_key_null_or_absent_reads_as_none() {
    let expected = StreamCommand::DeleteStream { stream_id: sid() };
    assert_eq!(
        from_json(r#"{"DeleteStream":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"}}}"#),
        expected
    );
    assert_eq!(
        from_json(
            r#"{"DeleteStream":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1","affinity_key":null}}}"#
        ),
        expected
    );
}
