//! Serde JSON format of `StreamErrorCode` (spec 01 §14, all 28 codes in
//! declaration order) and `StreamErrorContext` (§15, every form with the exact
//! JSON of the spec table): exact strings, insta snapshots and round trips.
#![allow(clippy::unwrap_used)]

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strand_machine::{StreamErrorCode, StreamErrorContext, StreamResponse};

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

// ---------------------------------------------------------------------------
// §14 StreamErrorCode
// ---------------------------------------------------------------------------

/// All 28 codes in declaration order (spec 01 §14).
const ALL_CODES: [StreamErrorCode; 31] = [
    StreamErrorCode::InvalidBucketId,
    StreamErrorCode::InvalidStreamId,
    StreamErrorCode::BucketNotFound,
    StreamErrorCode::BucketErased,
    StreamErrorCode::BucketNotEmpty,
    StreamErrorCode::StreamNotFound,
    StreamErrorCode::StreamGone,
    StreamErrorCode::StreamAlreadyExistsConflict,
    StreamErrorCode::MissingContentType,
    StreamErrorCode::ContentTypeMismatch,
    StreamErrorCode::EmptyAppend,
    StreamErrorCode::StreamClosed,
    StreamErrorCode::StreamSeqConflict,
    StreamErrorCode::InvalidProducer,
    StreamErrorCode::ProducerEpochStale,
    StreamErrorCode::ProducerSeqConflict,
    StreamErrorCode::InvalidRetention,
    StreamErrorCode::OffsetOutOfRange,
    StreamErrorCode::InvalidColdFlush,
    StreamErrorCode::InvalidSnapshot,
    StreamErrorCode::SnapshotNotFound,
    StreamErrorCode::SnapshotConflict,
    StreamErrorCode::InvalidStreamAttrs,
    StreamErrorCode::InvalidRecordBoundaries,
    StreamErrorCode::RecordPreconditionFailed,
    StreamErrorCode::ImportConflict,
    StreamErrorCode::ImportInvalid,
    StreamErrorCode::QuotaExceeded,
    StreamErrorCode::StreamSoftDeleted,
    StreamErrorCode::InvalidFork,
    StreamErrorCode::StreamHasForks,
];

/// The spec's names for the codes above, same order.
const CODE_NAMES: [&str; 31] = [
    "InvalidBucketId",
    "InvalidStreamId",
    "BucketNotFound",
    "BucketErased",
    "BucketNotEmpty",
    "StreamNotFound",
    "StreamGone",
    "StreamAlreadyExistsConflict",
    "MissingContentType",
    "ContentTypeMismatch",
    "EmptyAppend",
    "StreamClosed",
    "StreamSeqConflict",
    "InvalidProducer",
    "ProducerEpochStale",
    "ProducerSeqConflict",
    "InvalidRetention",
    "OffsetOutOfRange",
    "InvalidColdFlush",
    "InvalidSnapshot",
    "SnapshotNotFound",
    "SnapshotConflict",
    "InvalidStreamAttrs",
    "InvalidRecordBoundaries",
    "RecordPreconditionFailed",
    "ImportConflict",
    "ImportInvalid",
    "QuotaExceeded",
    "StreamSoftDeleted",
    "InvalidFork",
    "StreamHasForks",
];

/// Exhaustive (no wildcard): a new code breaks the build until it is listed.
fn code_position(code: StreamErrorCode) -> usize {
    match code {
        StreamErrorCode::InvalidBucketId => 0,
        StreamErrorCode::InvalidStreamId => 1,
        StreamErrorCode::BucketNotFound => 2,
        StreamErrorCode::BucketErased => 3,
        StreamErrorCode::BucketNotEmpty => 4,
        StreamErrorCode::StreamNotFound => 5,
        StreamErrorCode::StreamGone => 6,
        StreamErrorCode::StreamAlreadyExistsConflict => 7,
        StreamErrorCode::MissingContentType => 8,
        StreamErrorCode::ContentTypeMismatch => 9,
        StreamErrorCode::EmptyAppend => 10,
        StreamErrorCode::StreamClosed => 11,
        StreamErrorCode::StreamSeqConflict => 12,
        StreamErrorCode::InvalidProducer => 13,
        StreamErrorCode::ProducerEpochStale => 14,
        StreamErrorCode::ProducerSeqConflict => 15,
        StreamErrorCode::InvalidRetention => 16,
        StreamErrorCode::OffsetOutOfRange => 17,
        StreamErrorCode::InvalidColdFlush => 18,
        StreamErrorCode::InvalidSnapshot => 19,
        StreamErrorCode::SnapshotNotFound => 20,
        StreamErrorCode::SnapshotConflict => 21,
        StreamErrorCode::InvalidStreamAttrs => 22,
        StreamErrorCode::InvalidRecordBoundaries => 23,
        StreamErrorCode::RecordPreconditionFailed => 24,
        StreamErrorCode::ImportConflict => 25,
        StreamErrorCode::ImportInvalid => 26,
        StreamErrorCode::QuotaExceeded => 27,
        StreamErrorCode::StreamSoftDeleted => 28,
        StreamErrorCode::InvalidFork => 29,
        StreamErrorCode::StreamHasForks => 30,
    }
}

#[test]
fn every_error_code_is_its_name_as_a_string() {
    for (position, (code, name)) in ALL_CODES.iter().zip(CODE_NAMES).enumerate() {
        assert_eq!(code_position(*code), position);
        check(code, &format!("\"{name}\""));
    }
}

#[test]
fn error_codes_are_copy_and_distinct() {
    let copy = ALL_CODES[27];
    assert_eq!(copy, StreamErrorCode::QuotaExceeded);
    for (i, a) in ALL_CODES.iter().enumerate() {
        for (j, b) in ALL_CODES.iter().enumerate() {
            assert_eq!(i == j, a == b);
        }
    }
}

#[test]
fn snapshot_of_every_error_code() {
    let lines: Vec<String> = ALL_CODES.iter().map(to_json).collect();
    insta::assert_snapshot!("error_codes", lines.join("\n"));
}

// ---------------------------------------------------------------------------
// §15 StreamErrorContext
// ---------------------------------------------------------------------------

/// Every variant with the exact JSON of the §15 table, in declaration order.
fn spec_contexts() -> Vec<(StreamErrorContext, &'static str)> {
    vec![
        (StreamErrorContext::StreamClosed, r#""StreamClosed""#),
        (
            StreamErrorContext::StaleColdFlushCandidate,
            r#""StaleColdFlushCandidate""#,
        ),
        (
            StreamErrorContext::ProducerEpochStale { current_epoch: 3 },
            r#"{"ProducerEpochStale":{"current_epoch":3}}"#,
        ),
        (
            StreamErrorContext::ProducerSeqConflict {
                expected_seq: 1,
                received_seq: 5,
            },
            r#"{"ProducerSeqConflict":{"expected_seq":1,"received_seq":5}}"#,
        ),
        (
            StreamErrorContext::RecordTailMismatch { current_record: 4 },
            r#"{"RecordTailMismatch":{"current_record":4}}"#,
        ),
    ]
}

/// Exhaustive (no wildcard) over the context variants.
fn context_position(context: &StreamErrorContext) -> usize {
    match context {
        StreamErrorContext::StreamClosed => 0,
        StreamErrorContext::StaleColdFlushCandidate => 1,
        StreamErrorContext::ProducerEpochStale { .. } => 2,
        StreamErrorContext::ProducerSeqConflict { .. } => 3,
        StreamErrorContext::RecordTailMismatch { .. } => 4,
    }
}

#[test]
fn every_error_context_matches_the_spec_table() {
    for (position, (context, expected)) in spec_contexts().iter().enumerate() {
        assert_eq!(context_position(context), position);
        check(context, expected);
    }
}

#[test]
fn snapshot_of_every_error_context() {
    let lines: Vec<String> = spec_contexts()
        .iter()
        .map(|(context, _)| to_json(context))
        .collect();
    insta::assert_snapshot!("error_contexts", lines.join("\n"));
}

#[test]
fn codes_and_contexts_round_trip() {
    for code in ALL_CODES {
        round_trip(&code);
    }
    for (context, _) in spec_contexts() {
        round_trip(&context);
    }
    // Every code, with every context, inside an Error: the way they travel.
    for code in ALL_CODES {
        round_trip(&StreamResponse::error_with(
            code,
            Some(1),
            spec_contexts().into_iter().map(|(c, _)| c).collect(),
            "m",
        ));
    }
}
