//! Decoding leniency and strictness of the model types (spec 01 §1, §4–§8):
//! absent default fields, legacy shapes, unknown fields, required fields and
//! float formatting inside attrs metadata.
#![allow(clippy::unwrap_used)]

use serde::de::DeserializeOwned;
use serde_json::{Map, json};
use strand_model::*;

fn decode<T: DeserializeOwned>(text: &str) -> T {
    serde_json::from_str(text).unwrap()
}

fn fails<T: DeserializeOwned>(text: &str) -> bool {
    serde_json::from_str::<T>(text).is_err()
}

// ---- BucketStreamId ----

#[test]
fn affinity_key_null_or_missing_reads_as_none() {
    let expected = BucketStreamId::new("bkt1", "s1");
    assert_eq!(
        decode::<BucketStreamId>(r#"{"bucket_id":"bkt1","stream_id":"s1","affinity_key":null}"#),
        expected
    );
    assert_eq!(
        decode::<BucketStreamId>(r#"{"bucket_id":"bkt1","stream_id":"s1"}"#),
        expected
    );
}

#[test]
fn bucket_stream_id_requires_bucket_and_stream() {
    assert!(fails::<BucketStreamId>(r#"{"bucket_id":"bkt1"}"#));
    assert!(fails::<BucketStreamId>(r#"{"stream_id":"s1"}"#));
}

#[test]
fn unknown_fields_are_ignored() {
    assert_eq!(
        decode::<BucketStreamId>(r#"{"bucket_id":"b","extra":[1],"stream_id":"s"}"#),
        BucketStreamId::new("b", "s")
    );
    assert_eq!(
        decode::<StreamAttrs>(r#"{"title":"t","colour":"red"}"#)
            .title
            .as_deref(),
        Some("t")
    );
    assert_eq!(
        decode::<ProducerRequest>(
            r#"{"producer_id":"w","producer_epoch":1,"producer_seq":2,"x":true}"#
        )
        .producer_seq,
        2
    );
    assert_eq!(
        decode::<ColdChunkRef>(r#"{"future":1}"#),
        ColdChunkRef::default()
    );
}

// ---- proto structs ----

#[test]
fn producer_request_missing_any_field_is_an_error() {
    assert!(fails::<ProducerRequest>(
        r#"{"producer_epoch":1,"producer_seq":2}"#
    ));
    assert!(fails::<ProducerRequest>(
        r#"{"producer_id":"w","producer_seq":2}"#
    ));
    assert!(fails::<ProducerRequest>(
        r#"{"producer_id":"w","producer_epoch":1}"#
    ));
    assert!(fails::<ProducerRequest>("{}"));
}

#[test]
fn external_payload_ref_missing_any_field_is_an_error() {
    assert!(fails::<ExternalPayloadRef>(
        r#"{"payload_len":5,"object_size":9}"#
    ));
    assert!(fails::<ExternalPayloadRef>(
        r#"{"s3_path":"a","object_size":9}"#
    ));
    assert!(fails::<ExternalPayloadRef>(
        r#"{"s3_path":"a","payload_len":5}"#
    ));
}

#[test]
fn cold_chunk_ref_empty_object_is_default() {
    let chunk: ColdChunkRef = decode("{}");
    assert_eq!(chunk, ColdChunkRef::default());
    assert_eq!(chunk.start_offset, 0);
    assert_eq!(chunk.s3_path, "");
    assert!(!chunk.shared_object);
    assert_eq!(chunk.payload_digest, "");
}

#[test]
fn cold_chunk_ref_legacy_without_new_fields() {
    let chunk: ColdChunkRef =
        decode(r#"{"start_offset":0,"end_offset":4,"s3_path":"c","object_size":4}"#);
    assert_eq!(
        chunk,
        ColdChunkRef {
            end_offset: 4,
            s3_path: "c".to_owned(),
            object_size: 4,
            ..Default::default()
        }
    );
}

#[test]
fn numbers_must_be_non_negative_integers() {
    let bad = [
        r#"{"producer_id":"w","producer_epoch":-1,"producer_seq":2}"#,
        r#"{"producer_id":"w","producer_epoch":1.0,"producer_seq":2}"#,
        r#"{"producer_id":"w","producer_epoch":"1","producer_seq":2}"#,
    ];
    for text in bad {
        assert!(fails::<ProducerRequest>(text), "{text}");
    }
    let max: ProducerRequest =
        decode(r#"{"producer_id":"w","producer_epoch":18446744073709551615,"producer_seq":0}"#);
    assert_eq!(max.producer_epoch, u64::MAX);
}

// ---- status, metadata, attrs ----

#[test]
fn stream_status_accepts_unit_as_map_with_null() {
    assert_eq!(decode::<StreamStatus>(r#""Open""#), StreamStatus::Open);
    assert_eq!(
        decode::<StreamStatus>(r#"{"Closed":null}"#),
        StreamStatus::Closed
    );
    assert!(fails::<StreamStatus>(r#""Deleted""#));
    assert!(fails::<StreamStatus>(r#""open""#));
}

#[test]
fn stream_metadata_option_fields_may_be_absent() {
    let m: StreamMetadata = decode(
        r#"{"stream_id":{"bucket_id":"b","stream_id":"s"},"content_type":"c","status":"Open","tail_offset":0,"created_at_ms":1,"last_ttl_touch_at_ms":1}"#,
    );
    assert_eq!(m.last_stream_seq, None);
    assert_eq!(m.stream_ttl_seconds, None);
    assert_eq!(m.stream_expires_at_ms, None);
}

#[test]
fn stream_metadata_plain_fields_are_required() {
    assert!(fails::<StreamMetadata>(
        r#"{"stream_id":{"bucket_id":"b","stream_id":"s"},"content_type":"c","status":"Open","tail_offset":0,"last_ttl_touch_at_ms":1}"#
    ));
}

#[test]
fn stream_attrs_empty_forms() {
    assert_eq!(decode::<StreamAttrs>("{}"), StreamAttrs::default());
    assert_eq!(
        decode::<StreamAttrs>(r#"{"title":null}"#),
        StreamAttrs::default()
    );
    assert_eq!(
        decode::<StreamAttrs>(r#"{"metadata":{}}"#),
        StreamAttrs::default()
    );
    let titled: StreamAttrs = decode(r#"{"title":"x"}"#);
    assert_eq!(titled.title.as_deref(), Some("x"));
    assert!(titled.metadata.is_empty());
}

#[test]
fn stream_attrs_decoded_out_of_order_reencode_sorted() {
    let a: StreamAttrs = decode(r#"{"metadata":{"z":1,"a":{"y":1.0,"b":[1,2]}},"title":"T"}"#);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        r#"{"title":"T","metadata":{"a":{"b":[1,2],"y":1.0},"z":1}}"#
    );
}

#[test]
fn stream_attrs_nested_sorting_deep() {
    let mut metadata = Map::new();
    metadata.insert(
        "m".to_owned(),
        json!([{"zz": {"k2": 0, "k1": 0}, "aa": null}]),
    );
    metadata.insert("B".to_owned(), json!(true));
    metadata.insert("a".to_owned(), json!("s"));
    let attrs = StreamAttrs {
        title: None,
        metadata,
    };
    // Byte-wise order: uppercase sorts before lowercase.
    assert_eq!(
        serde_json::to_string(&attrs).unwrap(),
        r#"{"metadata":{"B":true,"a":"s","m":[{"aa":null,"zz":{"k1":0,"k2":0}}]}}"#
    );
}

#[test]
fn float_formatting_in_metadata() {
    let a: StreamAttrs =
        decode(r#"{"metadata":{"a":1.0,"b":100.0,"c":-0.0,"d":1e20,"e":1.5e-7,"f":1E2,"g":7}}"#);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        r#"{"metadata":{"a":1.0,"b":100.0,"c":-0.0,"d":1e+20,"e":1.5e-7,"f":100.0,"g":7}}"#
    );
    assert_ne!(a.metadata["a"], json!(1));
    assert_eq!(a.metadata["g"], json!(7));
}

#[test]
fn stream_attrs_size_counts_sorted_compact_encoding() {
    let a: StreamAttrs = decode(r#"{ "metadata" : { "z" : 1 , "a" : 2 } }"#);
    // {"metadata":{"a":2,"z":1}} is 26 bytes.
    assert_eq!(a.encoded_len(), 26);
}

// ---- producer types ----

#[test]
fn producer_snapshot_without_receipts() {
    let p: ProducerSnapshot = decode(
        r#"{"producer_id":"w","producer_epoch":1,"producer_seq":2,"last_start_offset":0,"last_next_offset":1,"last_closed":false,"last_items":[]}"#,
    );
    assert!(p.receipts.is_empty());
}

#[test]
fn producer_snapshot_last_items_required() {
    assert!(fails::<ProducerSnapshot>(
        r#"{"producer_id":"w","producer_epoch":1,"producer_seq":2,"last_start_offset":0,"last_next_offset":1,"last_closed":false,"receipts":[]}"#
    ));
}

#[test]
fn producer_append_record_without_record_fields() {
    let r: ProducerAppendRecord = decode(r#"{"start_offset":0,"next_offset":1,"closed":true}"#);
    assert_eq!(r.record_start, None);
    assert_eq!(r.record_next, None);
    assert!(r.closed);
}

#[test]
fn producer_receipt_items_required() {
    assert!(fails::<ProducerReceipt>(
        r#"{"producer_seq":1,"start_offset":0,"next_offset":1,"closed":false}"#
    ));
}

// ---- storage types ----

#[test]
fn object_payload_ref_missing_object_offset_is_zero() {
    let o: ObjectPayloadRef =
        decode(r#"{"start_offset":0,"end_offset":3,"s3_path":"x","object_size":3}"#);
    assert_eq!(o.object_offset, 0);
    assert_eq!(o.s3_path, "x");
}

#[test]
fn object_payload_ref_other_fields_required() {
    assert!(fails::<ObjectPayloadRef>(
        r#"{"start_offset":0,"end_offset":3,"object_size":3}"#
    ));
}

#[test]
fn cold_gc_entry_without_not_before() {
    let e: ColdGcEntry = decode(r#"{"seq":1,"bucket_id":"","target":{"Paths":[]}}"#);
    assert_eq!(e.not_before_ms, 0);
    assert_eq!(e.bucket_id, "");
    assert_eq!(e.target, ColdGcTarget::Paths(vec![]));
}

#[test]
fn cold_gc_target_forms() {
    assert!(fails::<ColdGcTarget>(r#""Paths""#));
    assert!(fails::<ColdGcTarget>(r#"{"Bucket":"b"}"#));
    assert_eq!(
        decode::<ColdGcTarget>(r#"{"Stream":{"bucket_id":"b","stream_id":"s"}}"#),
        ColdGcTarget::Stream(BucketStreamId::new("b", "s"))
    );
}

#[test]
fn visible_snapshot_without_digest() {
    let v: StreamVisibleSnapshot = decode(r#"{"offset":3,"content_type":"c","payload":[1,2]}"#);
    assert_eq!(v.digest, "");
    assert_eq!(v.payload, vec![1, 2]);
}

#[test]
fn vec_u8_payload_rejects_string() {
    assert!(fails::<StreamVisibleSnapshot>(
        r#"{"offset":3,"content_type":"c","payload":"ab","digest":""}"#
    ));
    assert!(fails::<StreamReadSegment>(r#"{"Hot":"ab"}"#));
    assert!(fails::<StreamReadSegment>(r#"{"Hot":[256]}"#));
}

#[test]
fn read_plan_record_ranges_may_be_absent() {
    let p: StreamReadPlan = decode(
        r#"{"offset":0,"next_offset":0,"content_type":"c","segments":[],"up_to_date":true,"closed":false}"#,
    );
    assert_eq!(p.retained_record_range, None);
    assert_eq!(p.record_range, None);
}
