//! Serde JSON format of `StreamResponse` (spec 01 §1, §13): the spec examples
//! byte for byte, the four error shapes, the decoding rules, an insta snapshot
//! with one representative value per variant, and a JSON round trip of those
//! values. Error codes and contexts alone are covered in `error_wire.rs`.
#![allow(clippy::unwrap_used)]

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use strand_machine::{StreamErrorCode, StreamErrorContext, StreamResponse};
use strand_model::{BucketStreamId, ProducerRequest, StreamRecordRange};

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

fn from_json<T: DeserializeOwned>(text: &str) -> T {
    serde_json::from_str(text).unwrap()
}

/// Asserts the compact encoding equals `expected` (spec text) and that the
/// spec text decodes back to the same value.
fn check<T>(value: &T, expected: &str)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    assert_eq!(to_json(value), expected);
    assert_eq!(&from_json::<T>(expected), value);
}

fn round_trip<T>(value: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let text = to_json(value);
    let decoded: T = from_json(&text);
    assert_eq!(&decoded, value);
    assert_eq!(to_json(&decoded), text);
    let pretty = serde_json::to_string_pretty(value).unwrap();
    assert_eq!(&from_json::<T>(&pretty), value);
}

fn producer(id: &str, epoch: u64, seq: u64) -> ProducerRequest {
    ProducerRequest {
        producer_id: id.to_owned(),
        producer_epoch: epoch,
        producer_seq: seq,
    }
}

// ---------------------------------------------------------------------------
// §13 JSON examples
// ---------------------------------------------------------------------------

#[test]
fn spec_example_deleted() {
    check(&StreamResponse::Deleted, r#""Deleted""#);
}

#[test]
fn spec_example_created() {
    check(
        &StreamResponse::Created {
            stream_id: BucketStreamId::new("bkt1", "s1"),
            next_offset: 2,
            closed: false,
        },
        r#"{"Created":{"stream_id":{"bucket_id":"bkt1","stream_id":"s1"},"next_offset":2,"closed":false}}"#,
    );
}

#[test]
fn spec_example_appended() {
    check(
        &StreamResponse::Appended {
            offset: 0,
            next_offset: 3,
            closed: false,
            deduplicated: false,
            producer: None,
        },
        r#"{"Appended":{"offset":0,"next_offset":3,"closed":false,"deduplicated":false,"producer":null}}"#,
    );
}

#[test]
fn spec_example_cold_flushed() {
    check(
        &StreamResponse::ColdFlushed {
            hot_start_offset: 4,
        },
        r#"{"ColdFlushed":{"hot_start_offset":4}}"#,
    );
}

#[test]
fn spec_example_error() {
    // The spec elides the message as "…"; used literally here (non-ASCII is
    // written raw, §1).
    check(
        &StreamResponse::Error {
            code: StreamErrorCode::StreamClosed,
            message: "…".to_owned(),
            next_offset: Some(3),
            context: vec![StreamErrorContext::StreamClosed],
        },
        r#"{"Error":{"code":"StreamClosed","message":"…","next_offset":3,"context":["StreamClosed"]}}"#,
    );
}

#[test]
fn the_four_error_shapes() {
    // §13: plain, with context, with next offset, with both.
    assert_eq!(
        to_json(&StreamResponse::error(StreamErrorCode::QuotaExceeded, "m")),
        r#"{"Error":{"code":"QuotaExceeded","message":"m","next_offset":null,"context":[]}}"#
    );
    assert_eq!(
        to_json(&StreamResponse::error_with(
            StreamErrorCode::InvalidColdFlush,
            None,
            vec![StreamErrorContext::StaleColdFlushCandidate],
            "m",
        )),
        r#"{"Error":{"code":"InvalidColdFlush","message":"m","next_offset":null,"context":["StaleColdFlushCandidate"]}}"#
    );
    assert_eq!(
        to_json(&StreamResponse::error_at(
            StreamErrorCode::OffsetOutOfRange,
            7,
            "m"
        )),
        r#"{"Error":{"code":"OffsetOutOfRange","message":"m","next_offset":7,"context":[]}}"#
    );
    assert_eq!(
        to_json(&StreamResponse::error_with(
            StreamErrorCode::ProducerSeqConflict,
            Some(9),
            vec![StreamErrorContext::ProducerSeqConflict {
                expected_seq: 1,
                received_seq: 5,
            }],
            "m",
        )),
        r#"{"Error":{"code":"ProducerSeqConflict","message":"m","next_offset":9,"context":[{"ProducerSeqConflict":{"expected_seq":1,"received_seq":5}}]}}"#
    );
}

// ---------------------------------------------------------------------------
// Decoding rules (§1) applied to responses
// ---------------------------------------------------------------------------

#[test]
fn unit_variant_accepts_the_null_form() {
    assert_eq!(
        from_json::<StreamResponse>(r#"{"Deleted":null}"#),
        StreamResponse::Deleted
    );
    assert_eq!(
        from_json::<StreamErrorCode>(r#"{"QuotaExceeded":null}"#),
        StreamErrorCode::QuotaExceeded
    );
    assert_eq!(
        from_json::<StreamErrorContext>(r#"{"StreamClosed":null}"#),
        StreamErrorContext::StreamClosed
    );
    assert_eq!(
        from_json::<StreamErrorContext>(r#"{"StaleColdFlushCandidate":null}"#),
        StreamErrorContext::StaleColdFlushCandidate
    );
}

#[test]
fn struct_variant_as_bare_string_is_an_error() {
    assert!(serde_json::from_str::<StreamResponse>(r#""Created""#).is_err());
    assert!(serde_json::from_str::<StreamResponse>(r#""Error""#).is_err());
    assert!(serde_json::from_str::<StreamErrorContext>(r#""ProducerEpochStale""#).is_err());
    assert!(serde_json::from_str::<StreamErrorContext>(r#""RecordTailMismatch""#).is_err());
}

#[test]
fn unknown_names_are_errors() {
    assert!(serde_json::from_str::<StreamResponse>(r#""Removed""#).is_err());
    assert!(serde_json::from_str::<StreamErrorCode>(r#""NotAnError""#).is_err());
    assert!(serde_json::from_str::<StreamErrorCode>(r#""quotaExceeded""#).is_err());
    assert!(serde_json::from_str::<StreamErrorContext>(r#""Closed""#).is_err());
}

#[test]
fn option_fields_may_be_absent() {
    assert_eq!(
        from_json::<StreamResponse>(
            r#"{"Error":{"code":"StreamNotFound","message":"m","context":[]}}"#
        ),
        StreamResponse::error(StreamErrorCode::StreamNotFound, "m")
    );
    assert_eq!(
        from_json::<StreamResponse>(
            r#"{"Appended":{"offset":0,"next_offset":3,"closed":false,"deduplicated":false}}"#
        ),
        StreamResponse::Appended {
            offset: 0,
            next_offset: 3,
            closed: false,
            deduplicated: false,
            producer: None,
        }
    );
    assert_eq!(
        from_json::<StreamResponse>(r#"{"RetentionAdvanced":{"retained_offset":5}}"#),
        StreamResponse::RetentionAdvanced {
            retained_offset: 5,
            record_range: None,
        }
    );
    assert_eq!(
        from_json::<StreamResponse>(
            r#"{"AlreadyExists":{"next_offset":1,"closed":true,"content_type":"c"}}"#
        ),
        StreamResponse::AlreadyExists {
            next_offset: 1,
            closed: true,
            content_type: "c".to_owned(),
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
        }
    );
}

#[test]
fn non_option_fields_are_required() {
    // `context` and `message` have no serde default.
    assert!(
        serde_json::from_str::<StreamResponse>(
            r#"{"Error":{"code":"StreamNotFound","message":"m","next_offset":null}}"#
        )
        .is_err()
    );
    assert!(
        serde_json::from_str::<StreamResponse>(
            r#"{"Error":{"code":"StreamNotFound","next_offset":null,"context":[]}}"#
        )
        .is_err()
    );
    assert!(serde_json::from_str::<StreamResponse>(r#"{"ColdFlushed":{}}"#).is_err());
    assert!(
        serde_json::from_str::<StreamErrorContext>(r#"{"ProducerSeqConflict":{"expected_seq":1}}"#)
            .is_err()
    );
}

#[test]
fn unknown_extra_fields_are_ignored() {
    assert_eq!(
        from_json::<StreamResponse>(r#"{"ColdGcAcked":{"removed":2,"later":"x"}}"#),
        StreamResponse::ColdGcAcked { removed: 2 }
    );
}

// ---------------------------------------------------------------------------
// §13 StreamResponse: one representative value per variant
// ---------------------------------------------------------------------------

/// The 19 variant names in declaration order (spec 01 §13), with strand's
/// three fork responses before `Error` (`docs/forks.md` §3).
const VARIANTS: [&str; 22] = [
    "BucketCreated",
    "BucketAlreadyExists",
    "BucketDeleted",
    "BucketQuotaSet",
    "Created",
    "AlreadyExists",
    "Appended",
    "Closed",
    "Deleted",
    "ColdFlushed",
    "ColdCompacted",
    "SnapshotPublished",
    "RetentionAdvanced",
    "Accessed",
    "AttrsUpdated",
    "ColdGcAcked",
    "BucketPurged",
    "SnapshotImported",
    "ForkSourcePinned",
    "ForkSourceUnpinned",
    "ForkUnpinsAcked",
    "Error",
];

/// Exhaustive (no wildcard): a new variant breaks the build until listed.
fn variant_name(response: &StreamResponse) -> &'static str {
    match response {
        StreamResponse::BucketCreated { .. } => "BucketCreated",
        StreamResponse::BucketAlreadyExists { .. } => "BucketAlreadyExists",
        StreamResponse::BucketDeleted { .. } => "BucketDeleted",
        StreamResponse::BucketQuotaSet { .. } => "BucketQuotaSet",
        StreamResponse::Created { .. } => "Created",
        StreamResponse::AlreadyExists { .. } => "AlreadyExists",
        StreamResponse::Appended { .. } => "Appended",
        StreamResponse::Closed { .. } => "Closed",
        StreamResponse::Deleted => "Deleted",
        StreamResponse::ColdFlushed { .. } => "ColdFlushed",
        StreamResponse::ColdCompacted { .. } => "ColdCompacted",
        StreamResponse::SnapshotPublished { .. } => "SnapshotPublished",
        StreamResponse::RetentionAdvanced { .. } => "RetentionAdvanced",
        StreamResponse::Accessed { .. } => "Accessed",
        StreamResponse::AttrsUpdated { .. } => "AttrsUpdated",
        StreamResponse::ColdGcAcked { .. } => "ColdGcAcked",
        StreamResponse::BucketPurged { .. } => "BucketPurged",
        StreamResponse::SnapshotImported { .. } => "SnapshotImported",
        StreamResponse::ForkSourcePinned { .. } => "ForkSourcePinned",
        StreamResponse::ForkSourceUnpinned { .. } => "ForkSourceUnpinned",
        StreamResponse::ForkUnpinsAcked { .. } => "ForkUnpinsAcked",
        StreamResponse::Error { .. } => "Error",
    }
}

/// One value of every variant, in declaration order, with non-default fields.
fn representatives() -> Vec<StreamResponse> {
    vec![
        StreamResponse::BucketCreated {
            bucket_id: "bkt-created".to_owned(),
        },
        StreamResponse::BucketAlreadyExists {
            bucket_id: "bkt-exists".to_owned(),
        },
        StreamResponse::BucketDeleted {
            bucket_id: "bkt-deleted".to_owned(),
        },
        StreamResponse::BucketQuotaSet {
            bucket_id: "bkt-quota".to_owned(),
        },
        StreamResponse::Created {
            stream_id: BucketStreamId::with_affinity("bkt1", "aff", "s1"),
            next_offset: 5,
            closed: true,
        },
        StreamResponse::AlreadyExists {
            next_offset: 6,
            closed: true,
            content_type: "application/json".to_owned(),
            stream_ttl_seconds: Some(60),
            stream_expires_at_ms: Some(1_700_000_000_000),
        },
        StreamResponse::Appended {
            offset: 7,
            next_offset: 10,
            closed: true,
            deduplicated: true,
            producer: Some(producer("w", 1, 2)),
        },
        StreamResponse::Closed {
            next_offset: 11,
            deduplicated: true,
            producer: Some(producer("closer", 3, 4)),
        },
        StreamResponse::Deleted,
        StreamResponse::ColdFlushed {
            hot_start_offset: 12,
        },
        StreamResponse::ColdCompacted {
            compacted_chunks: 2,
            compacted_bytes: 13,
        },
        StreamResponse::SnapshotPublished {
            snapshot_offset: 14,
            snapshot_digest: "af".repeat(32),
            record_range: Some(StreamRecordRange {
                first_record: 1,
                next_record: 3,
            }),
        },
        StreamResponse::RetentionAdvanced {
            retained_offset: 15,
            record_range: Some(StreamRecordRange {
                first_record: 2,
                next_record: 4,
            }),
        },
        StreamResponse::Accessed {
            changed: true,
            expired: true,
        },
        StreamResponse::AttrsUpdated { changed: true },
        StreamResponse::ColdGcAcked { removed: 16 },
        StreamResponse::BucketPurged {
            bucket_id: "bkt-purged".to_owned(),
            removed_streams: 17,
            pending_cold_gc_entries: 18,
        },
        StreamResponse::SnapshotImported {
            buckets: 19,
            streams: 20,
        },
        StreamResponse::ForkSourcePinned {
            fork_offset: 21,
            pin: 7,
            inherited_start: 2,
            content_type: "text/plain".to_owned(),
            stream_ttl_seconds: Some(22),
            stream_expires_at_ms: Some(23),
        },
        StreamResponse::ForkSourceUnpinned {
            unpinned: true,
            removed: true,
        },
        StreamResponse::ForkUnpinsAcked { remaining: 24 },
        StreamResponse::Error {
            code: StreamErrorCode::ProducerSeqConflict,
            message: "producer \"w\" seq\tgap: expected 1, got 5".to_owned(),
            next_offset: Some(u64::MAX),
            context: vec![
                StreamErrorContext::ProducerSeqConflict {
                    expected_seq: 1,
                    received_seq: 5,
                },
                StreamErrorContext::StreamClosed,
            ],
        },
    ]
}

#[test]
fn representatives_cover_every_variant_in_declaration_order() {
    let names: Vec<&str> = representatives().iter().map(variant_name).collect();
    assert_eq!(names, VARIANTS);
    for response in representatives() {
        let value: Value = from_json(&to_json(&response));
        let name = variant_name(&response);
        if name == "Deleted" {
            // The only unit variant (§13).
            assert_eq!(value, Value::String("Deleted".to_owned()));
        } else {
            let object = value.as_object().unwrap();
            assert_eq!(object.len(), 1);
            let (tag, inner) = object.iter().next().unwrap();
            assert_eq!(tag, name);
            assert!(inner.is_object(), "{tag} must be a struct variant");
        }
    }
}

#[test]
fn field_order_is_declaration_order() {
    // Field names per variant, in the order of the §13 table (Deleted: none).
    let expected: [&[&str]; 22] = [
        &["bucket_id"],
        &["bucket_id"],
        &["bucket_id"],
        &["bucket_id"],
        &["stream_id", "next_offset", "closed"],
        &[
            "next_offset",
            "closed",
            "content_type",
            "stream_ttl_seconds",
            "stream_expires_at_ms",
        ],
        &[
            "offset",
            "next_offset",
            "closed",
            "deduplicated",
            "producer",
        ],
        &["next_offset", "deduplicated", "producer"],
        &[],
        &["hot_start_offset"],
        &["compacted_chunks", "compacted_bytes"],
        &["snapshot_offset", "snapshot_digest", "record_range"],
        &["retained_offset", "record_range"],
        &["changed", "expired"],
        &["changed"],
        &["removed"],
        &["bucket_id", "removed_streams", "pending_cold_gc_entries"],
        &["buckets", "streams"],
        &[
            "fork_offset",
            "pin",
            "inherited_start",
            "content_type",
            "stream_ttl_seconds",
            "stream_expires_at_ms",
        ],
        &["unpinned", "removed"],
        &["remaining"],
        &["code", "message", "next_offset", "context"],
    ];
    for (response, fields) in representatives().iter().zip(expected) {
        let text = to_json(response);
        let value: Value = from_json(&text);
        let Some(object) = value.as_object() else {
            assert!(fields.is_empty());
            continue;
        };
        let inner = object.values().next().unwrap().as_object().unwrap();
        let mut keys: Vec<&str> = inner.keys().map(String::as_str).collect();
        let mut sorted_expected = fields.to_vec();
        keys.sort_unstable();
        sorted_expected.sort_unstable();
        assert_eq!(keys, sorted_expected, "{}", variant_name(response));
        // Top-level field names come first in the text before any nested
        // value that could repeat them, so the first match is the field.
        let positions: Vec<usize> = fields
            .iter()
            .map(|field| text.find(&format!("\"{field}\":")).unwrap())
            .collect();
        assert!(
            positions.windows(2).all(|pair| pair[0] < pair[1]),
            "{}: fields out of order in {text}",
            variant_name(response)
        );
    }
}

#[test]
fn snapshot_of_every_response_variant() {
    let lines: Vec<String> = representatives().iter().map(to_json).collect();
    insta::assert_snapshot!("response_variants", lines.join("\n"));
}

#[test]
fn representatives_round_trip() {
    for response in representatives() {
        round_trip(&response);
    }
}
