//! Serialized shapes of every model type, checked against the JSON examples of
//! spec 01 §4–§11 and pinned with insta snapshots of the exact compact bytes.
#![allow(clippy::unwrap_used)]

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use strand_model::*;

/// Compact serde_json output.
fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

/// Serializes, checks the bytes against `expected` (taken from the spec), and
/// checks that decoding gives the value back.
fn check<T>(value: &T, expected: &str) -> String
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let encoded = to_json(value);
    assert_eq!(encoded, expected);
    let decoded: T = serde_json::from_str(&encoded).unwrap();
    assert_eq!(&decoded, value);
    encoded
}

fn sid() -> BucketStreamId {
    BucketStreamId::new("bkt1", "s1")
}

fn spec_attrs() -> StreamAttrs {
    // Inserted as `z`, then `a`; inside `a`, `y` before `b`.
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

// ---- §4 BucketStreamId ----

#[test]
fn bucket_stream_id_plain() {
    let s = check(&sid(), r#"{"bucket_id":"bkt1","stream_id":"s1"}"#);
    insta::assert_snapshot!("bucket_stream_id_plain", s);
}

#[test]
fn bucket_stream_id_affinity() {
    let id = BucketStreamId::with_affinity("bkt1", "aff", "s1");
    let s = check(
        &id,
        r#"{"bucket_id":"bkt1","stream_id":"s1","affinity_key":"aff"}"#,
    );
    insta::assert_snapshot!("bucket_stream_id_affinity", s);
}

// ---- §5 proto structs ----

#[test]
fn producer_request() {
    let p = ProducerRequest {
        producer_id: "w".to_owned(),
        producer_epoch: 1,
        producer_seq: 2,
    };
    let s = check(
        &p,
        r#"{"producer_id":"w","producer_epoch":1,"producer_seq":2}"#,
    );
    insta::assert_snapshot!("producer_request", s);
}

#[test]
fn external_payload_ref() {
    let e = ExternalPayloadRef {
        s3_path: "a/b".to_owned(),
        payload_len: 5,
        object_size: 9,
    };
    let s = check(&e, r#"{"s3_path":"a/b","payload_len":5,"object_size":9}"#);
    insta::assert_snapshot!("external_payload_ref", s);
}

#[test]
fn cold_chunk_ref_spec_example() {
    let c = ColdChunkRef {
        end_offset: 4,
        s3_path: "c".to_owned(),
        object_size: 4,
        ..Default::default()
    };
    let s = check(
        &c,
        r#"{"start_offset":0,"end_offset":4,"s3_path":"c","object_size":4,"object_offset":0,"shared_object":false,"payload_digest":""}"#,
    );
    insta::assert_snapshot!("cold_chunk_ref_spec_example", s);
}

#[test]
fn cold_chunk_ref_all_fields() {
    let c = ColdChunkRef {
        start_offset: 10,
        end_offset: 20,
        s3_path: "cold/x".to_owned(),
        object_size: 64,
        object_offset: 8,
        shared_object: true,
        payload_digest: "ab".repeat(32),
    };
    let expected = format!(
        r#"{{"start_offset":10,"end_offset":20,"s3_path":"cold/x","object_size":64,"object_offset":8,"shared_object":true,"payload_digest":"{}"}}"#,
        "ab".repeat(32)
    );
    let s = check(&c, &expected);
    insta::assert_snapshot!("cold_chunk_ref_all_fields", s);
}

// ---- §6 status, metadata, attrs ----

#[test]
fn stream_status() {
    assert_eq!(check(&StreamStatus::Open, r#""Open""#), r#""Open""#);
    let s = check(&StreamStatus::Closed, r#""Closed""#);
    insta::assert_snapshot!("stream_status_closed", s);
}

#[test]
fn stream_metadata() {
    let m = StreamMetadata {
        stream_id: sid(),
        content_type: "c".to_owned(),
        status: StreamStatus::Closed,
        tail_offset: 3,
        last_stream_seq: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: Some(1),
        created_at_ms: 0,
        last_ttl_touch_at_ms: 0,
    };
    let s = check(
        &m,
        r#"{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"content_type":"c","status":"Closed","tail_offset":3,"last_stream_seq":null,"stream_ttl_seconds":null,"stream_expires_at_ms":1,"created_at_ms":0,"last_ttl_touch_at_ms":0}"#,
    );
    insta::assert_snapshot!("stream_metadata", s);
}

#[test]
fn stream_attrs_default_is_empty_object() {
    let s = check(&StreamAttrs::default(), "{}");
    insta::assert_snapshot!("stream_attrs_default", s);
}

#[test]
fn stream_attrs_title_only() {
    let a = StreamAttrs {
        title: Some("x".to_owned()),
        metadata: Map::new(),
    };
    let s = check(&a, r#"{"title":"x"}"#);
    insta::assert_snapshot!("stream_attrs_title_only", s);
}

#[test]
fn stream_attrs_keys_sorted_at_every_level() {
    let s = check(
        &spec_attrs(),
        r#"{"title":"T","metadata":{"a":{"b":[1,2],"y":1.0},"z":1}}"#,
    );
    insta::assert_snapshot!("stream_attrs_title_metadata", s);
}

#[test]
fn stream_attrs_metadata_only() {
    let mut metadata = Map::new();
    metadata.insert("k".to_owned(), json!("v"));
    let a = StreamAttrs {
        title: None,
        metadata,
    };
    let s = check(&a, r#"{"metadata":{"k":"v"}}"#);
    insta::assert_snapshot!("stream_attrs_metadata_only", s);
}

// ---- §7 producer types ----

fn append_record() -> ProducerAppendRecord {
    ProducerAppendRecord {
        start_offset: 0,
        next_offset: 1,
        closed: false,
        record_start: None,
        record_next: Some(1),
    }
}

#[test]
fn producer_append_record() {
    let s = check(
        &append_record(),
        r#"{"start_offset":0,"next_offset":1,"closed":false,"record_start":null,"record_next":1}"#,
    );
    insta::assert_snapshot!("producer_append_record", s);
}

#[test]
fn producer_receipt() {
    let r = ProducerReceipt {
        producer_seq: 4,
        start_offset: 0,
        next_offset: 1,
        closed: false,
        items: vec![append_record()],
    };
    let s = check(
        &r,
        r#"{"producer_seq":4,"start_offset":0,"next_offset":1,"closed":false,"items":[{"start_offset":0,"next_offset":1,"closed":false,"record_start":null,"record_next":1}]}"#,
    );
    insta::assert_snapshot!("producer_receipt", s);
}

#[test]
fn producer_snapshot() {
    let p = ProducerSnapshot {
        producer_id: "w".to_owned(),
        producer_epoch: 1,
        producer_seq: 2,
        last_start_offset: 3,
        last_next_offset: 5,
        last_closed: true,
        last_items: vec![],
        receipts: vec![ProducerReceipt {
            producer_seq: 2,
            start_offset: 3,
            next_offset: 5,
            closed: true,
            items: vec![],
        }],
    };
    let s = check(
        &p,
        r#"{"producer_id":"w","producer_epoch":1,"producer_seq":2,"last_start_offset":3,"last_next_offset":5,"last_closed":true,"last_items":[],"receipts":[{"producer_seq":2,"start_offset":3,"next_offset":5,"closed":true,"items":[]}]}"#,
    );
    insta::assert_snapshot!("producer_snapshot", s);
}

#[test]
fn append_stream_input_builds_with_borrowed_fields() {
    let payload = b"abc";
    let input = AppendStreamInput {
        stream_id: sid(),
        content_type: Some("text/plain"),
        payload,
        close_after: false,
        stream_seq: None,
        producer: None,
        now_ms: 1,
        record_match: Some(2),
    };
    assert_eq!(input.payload.len(), 3);
    assert!(format!("{input:?}").contains("text/plain"));
}

// ---- §8 storage types ----

#[test]
fn object_payload_ref_and_from_cold_chunk() {
    let chunk = ColdChunkRef {
        start_offset: 0,
        end_offset: 3,
        s3_path: "x".to_owned(),
        object_size: 3,
        object_offset: 0,
        shared_object: true,
        payload_digest: "d".to_owned(),
    };
    let object = ObjectPayloadRef::from(&chunk);
    let s = check(
        &object,
        r#"{"start_offset":0,"end_offset":3,"s3_path":"x","object_size":3,"object_offset":0}"#,
    );
    insta::assert_snapshot!("object_payload_ref", s);
    let shifted = ColdChunkRef {
        object_offset: 7,
        ..chunk
    };
    assert_eq!(ObjectPayloadRef::from(&shifted).object_offset, 7);
}

#[test]
fn hot_payload_segment() {
    let h = HotPayloadSegment {
        start_offset: 0,
        end_offset: 3,
        payload_start: 0,
        payload_end: 3,
    };
    let s = check(
        &h,
        r#"{"start_offset":0,"end_offset":3,"payload_start":0,"payload_end":3}"#,
    );
    insta::assert_snapshot!("hot_payload_segment", s);
}

#[test]
fn cold_gc_entry_stream_target() {
    let e = ColdGcEntry {
        seq: 1,
        bucket_id: "b".to_owned(),
        not_before_ms: 0,
        target: ColdGcTarget::Stream(BucketStreamId::with_affinity("bkt1", "aff", "s1")),
    };
    let s = check(
        &e,
        r#"{"seq":1,"bucket_id":"b","not_before_ms":0,"target":{"Stream":{"bucket_id":"bkt1","stream_id":"s1","affinity_key":"aff"}}}"#,
    );
    insta::assert_snapshot!("cold_gc_entry_stream", s);
}

#[test]
fn cold_gc_entry_paths_target() {
    let e = ColdGcEntry {
        seq: 2,
        bucket_id: "b".to_owned(),
        not_before_ms: 5,
        target: ColdGcTarget::Paths(vec!["p1".to_owned(), "p2".to_owned()]),
    };
    let s = check(
        &e,
        r#"{"seq":2,"bucket_id":"b","not_before_ms":5,"target":{"Paths":["p1","p2"]}}"#,
    );
    insta::assert_snapshot!("cold_gc_entry_paths", s);
    assert_eq!(
        to_json(&ColdGcTarget::Paths(vec!["p1".to_owned(), "p2".to_owned()])),
        r#"{"Paths":["p1","p2"]}"#
    );
}

#[test]
fn stream_message_record() {
    let m = StreamMessageRecord {
        start_offset: 0,
        end_offset: 3,
    };
    let s = check(&m, r#"{"start_offset":0,"end_offset":3}"#);
    insta::assert_snapshot!("stream_message_record", s);
}

#[test]
fn stream_visible_snapshot() {
    let v = StreamVisibleSnapshot {
        offset: 3,
        content_type: "c".to_owned(),
        payload: vec![1, 2],
        digest: "d".to_owned(),
    };
    let s = check(
        &v,
        r#"{"offset":3,"content_type":"c","payload":[1,2],"digest":"d"}"#,
    );
    insta::assert_snapshot!("stream_visible_snapshot", s);
}

// ---- §10 query and result types ----

#[test]
fn stream_read() {
    let r = StreamRead {
        offset: 2,
        next_offset: 5,
        content_type: "application/octet-stream".to_owned(),
        payload: b"cde".to_vec(),
        up_to_date: false,
        closed: false,
    };
    let s = check(
        &r,
        r#"{"offset":2,"next_offset":5,"content_type":"application/octet-stream","payload":[99,100,101],"up_to_date":false,"closed":false}"#,
    );
    insta::assert_snapshot!("stream_read", s);
}

fn cold_index_segment() -> StreamReadSegment {
    StreamReadSegment::ColdIndex(StreamReadColdIndexSegment {
        generation: 1,
        page_id: 0,
        read_start_offset: 5,
        len: 3,
    })
}

fn object_segment() -> StreamReadSegment {
    StreamReadSegment::Object(StreamReadObjectSegment {
        object: ObjectPayloadRef {
            start_offset: 0,
            end_offset: 3,
            s3_path: "x".to_owned(),
            object_size: 3,
            object_offset: 0,
        },
        read_start_offset: 0,
        len: 3,
    })
}

#[test]
fn stream_read_segment_variants() {
    let s = check(
        &cold_index_segment(),
        r#"{"ColdIndex":{"generation":1,"page_id":0,"read_start_offset":5,"len":3}}"#,
    );
    insta::assert_snapshot!("stream_read_segment_cold_index", s);
    let s = check(
        &object_segment(),
        r#"{"Object":{"object":{"start_offset":0,"end_offset":3,"s3_path":"x","object_size":3,"object_offset":0},"read_start_offset":0,"len":3}}"#,
    );
    insta::assert_snapshot!("stream_read_segment_object", s);
    let s = check(&StreamReadSegment::Hot(vec![1, 2]), r#"{"Hot":[1,2]}"#);
    insta::assert_snapshot!("stream_read_segment_hot", s);
}

#[test]
fn stream_read_plan_shape() {
    let plan = StreamReadPlan {
        offset: 0,
        next_offset: 6,
        content_type: "text/plain".to_owned(),
        segments: vec![object_segment(), StreamReadSegment::Hot(vec![1, 2, 3])],
        up_to_date: true,
        closed: false,
        retained_record_range: None,
        record_range: Some(StreamRecordRange {
            first_record: 0,
            next_record: 2,
        }),
    };
    let expected = format!(
        r#"{{"offset":0,"next_offset":6,"content_type":"text/plain","segments":[{},{{"Hot":[1,2,3]}}],"up_to_date":true,"closed":false,"retained_record_range":null,"record_range":{{"first_record":0,"next_record":2}}}}"#,
        r#"{"Object":{"object":{"start_offset":0,"end_offset":3,"s3_path":"x","object_size":3,"object_offset":0},"read_start_offset":0,"len":3}}"#
    );
    let s = check(&plan, &expected);
    insta::assert_snapshot!("stream_read_plan", s);
}

#[test]
fn stream_read_cold_segment() {
    let c = StreamReadColdSegment {
        chunk: ColdChunkRef::default(),
        read_start_offset: 1,
        len: 2,
    };
    let s = check(
        &c,
        r#"{"chunk":{"start_offset":0,"end_offset":0,"s3_path":"","object_size":0,"object_offset":0,"shared_object":false,"payload_digest":""},"read_start_offset":1,"len":2}"#,
    );
    insta::assert_snapshot!("stream_read_cold_segment", s);
}

#[test]
fn stream_bootstrap_plan() {
    let b = StreamBootstrapPlan {
        snapshot: None,
        updates: vec![StreamMessageRecord {
            start_offset: 0,
            end_offset: 2,
        }],
        next_offset: 2,
        content_type: "text/plain".to_owned(),
        up_to_date: true,
        closed: false,
    };
    let s = check(
        &b,
        r#"{"snapshot":null,"updates":[{"start_offset":0,"end_offset":2}],"next_offset":2,"content_type":"text/plain","up_to_date":true,"closed":false}"#,
    );
    insta::assert_snapshot!("stream_bootstrap_plan", s);
}

#[test]
fn stream_bootstrap_plan_with_snapshot() {
    let b = StreamBootstrapPlan {
        snapshot: Some(StreamVisibleSnapshot {
            offset: 1,
            content_type: "c".to_owned(),
            payload: vec![7],
            digest: String::new(),
        }),
        updates: vec![],
        next_offset: 1,
        content_type: "c".to_owned(),
        up_to_date: true,
        closed: true,
    };
    let s = check(
        &b,
        r#"{"snapshot":{"offset":1,"content_type":"c","payload":[7],"digest":""},"updates":[],"next_offset":1,"content_type":"c","up_to_date":true,"closed":true}"#,
    );
    insta::assert_snapshot!("stream_bootstrap_plan_with_snapshot", s);
}

#[test]
fn cold_flush_candidate() {
    let digest = "0123456789abcdef".repeat(4);
    let c = ColdFlushCandidate {
        stream_id: sid(),
        start_offset: 0,
        end_offset: 2,
        payload: b"ab".to_vec(),
        payload_digest: digest.clone(),
    };
    let expected = format!(
        r#"{{"stream_id":{{"bucket_id":"bkt1","stream_id":"s1"}},"start_offset":0,"end_offset":2,"payload":[97,98],"payload_digest":"{digest}"}}"#
    );
    let s = check(&c, &expected);
    insta::assert_snapshot!("cold_flush_candidate", s);
}

#[test]
fn stream_batch_append() {
    let item = StreamBatchAppendItem {
        offset: 0,
        next_offset: 1,
        closed: false,
        deduplicated: false,
    };
    let s = check(
        &item,
        r#"{"offset":0,"next_offset":1,"closed":false,"deduplicated":false}"#,
    );
    insta::assert_snapshot!("stream_batch_append_item", s);
    let batch = StreamBatchAppend {
        items: vec![item],
        deduplicated: false,
    };
    let s = check(
        &batch,
        r#"{"items":[{"offset":0,"next_offset":1,"closed":false,"deduplicated":false}],"deduplicated":false}"#,
    );
    insta::assert_snapshot!("stream_batch_append", s);
}

// ---- §11.1 record range ----

#[test]
fn stream_record_range() {
    let r = StreamRecordRange {
        first_record: 0,
        next_record: 2,
    };
    let s = check(&r, r#"{"first_record":0,"next_record":2}"#);
    insta::assert_snapshot!("stream_record_range", s);
}
