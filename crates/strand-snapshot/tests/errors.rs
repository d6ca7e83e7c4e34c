//! One test per `StreamSnapshotError` variant (exact `Display` text, spec 07
//! §4) and the error-choice cases of spec 07 §5.11 and §10.12, §10.25–45.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::*;
use strand_model::{BucketStreamId, ColdChunkRef, StreamVisibleSnapshot};
use strand_snapshot::{SnapshotValidator, StreamSnapshot, StreamSnapshotError, validate_snapshot};

fn err(snapshot: &StreamSnapshot) -> StreamSnapshotError {
    validate_snapshot(snapshot).unwrap_err()
}

fn visible(offset: u64) -> StreamVisibleSnapshot {
    StreamVisibleSnapshot {
        offset,
        content_type: "text/plain".to_owned(),
        payload: b"state".to_vec(),
        digest: String::new(),
    }
}

// ---- one test per variant, exact Display ----

#[test]
fn duplicate_bucket() {
    let e = err(&snapshot(&["benchcmp", "benchcmp"], vec![]));
    assert_eq!(e, StreamSnapshotError::DuplicateBucket("benchcmp".into()));
    assert_eq!(
        e.to_string(),
        "snapshot contains duplicate bucket 'benchcmp'"
    );
}

#[test]
fn duplicate_erased_bucket() {
    let mut snap = snapshot(&[], vec![]);
    snap.erased_buckets = strings(&["bbbb", "bbbb"]);
    let e = err(&snap);
    assert_eq!(e, StreamSnapshotError::DuplicateErasedBucket("bbbb".into()));
    assert_eq!(
        e.to_string(),
        "snapshot contains duplicate erased bucket 'bbbb'"
    );
}

#[test]
fn active_bucket_erased() {
    let mut snap = snapshot(&["aaaa"], vec![]);
    snap.erased_buckets = strings(&["aaaa", "aaaa"]);
    let e = err(&snap);
    assert_eq!(e, StreamSnapshotError::ActiveBucketErased("aaaa".into()));
    assert_eq!(
        e.to_string(),
        "snapshot bucket 'aaaa' is both active and erased"
    );
}

#[test]
fn duplicate_stream() {
    let e = err(&snapshot(
        &["aaaa"],
        vec![entry(id("aaaa", "s"), b"ab"), entry(id("aaaa", "s"), b"ab")],
    ));
    assert_eq!(e, StreamSnapshotError::DuplicateStream(id("aaaa", "s")));
    assert_eq!(e.to_string(), "snapshot contains duplicate stream 'aaaa/s'");
}

#[test]
fn duplicate_stream_with_affinity_displays_three_parts() {
    let aff = BucketStreamId::with_affinity("aaaa", "k", "s");
    let e = err(&snapshot(
        &["aaaa"],
        vec![entry(aff.clone(), b""), entry(aff.clone(), b"")],
    ));
    assert_eq!(e, StreamSnapshotError::DuplicateStream(aff));
    assert_eq!(
        e.to_string(),
        "snapshot contains duplicate stream 'aaaa/k/s'"
    );
}

#[test]
fn duplicate_producer() {
    // §10.12: tail 0 with two producer records both `writer-1`.
    let mut e0 = entry(id("aaaa", "s"), b"");
    e0.producer_states = vec![
        producer("writer-1"),
        producer("writer-0"),
        producer("writer-1"),
    ];
    let e = err(&snapshot(&["aaaa"], vec![e0]));
    assert_eq!(
        e,
        StreamSnapshotError::DuplicateProducer {
            stream_id: id("aaaa", "s"),
            producer_id: "writer-1".into(),
        }
    );
    assert_eq!(
        e.to_string(),
        "snapshot stream 'aaaa/s' contains duplicate producer 'writer-1'"
    );
}

#[test]
fn missing_bucket() {
    let e = err(&snapshot(&["aaaa"], vec![entry(id("missing", "s"), b"")]));
    assert_eq!(e, StreamSnapshotError::MissingBucket(id("missing", "s")));
    assert_eq!(
        e.to_string(),
        "snapshot stream 'missing/s' references a missing bucket"
    );
}

#[test]
fn payload_length_mismatch() {
    // §10.12: tail 2 with payload `x` and no hot segments; the synthesized
    // segment 0..2 needs 2 bytes.
    let mut e0 = entry(id("aaaa", "s"), b"x");
    e0.metadata.tail_offset = 2;
    e0.hot_segments = vec![];
    e0.message_records = vec![record(0, 2)];
    let e = err(&snapshot(&["aaaa"], vec![e0]));
    assert_eq!(
        e,
        StreamSnapshotError::PayloadLengthMismatch {
            stream_id: id("aaaa", "s"),
            tail_offset: 2,
            payload_len: 1,
        }
    );
    assert_eq!(
        e.to_string(),
        "snapshot stream 'aaaa/s' tail offset 2 does not match payload length 1"
    );
}

#[test]
fn message_boundary_mismatch() {
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.message_records = vec![record(0, 1)];
    let e = err(&snapshot(&["aaaa"], vec![e0]));
    assert_eq!(
        e,
        StreamSnapshotError::MessageBoundaryMismatch {
            stream_id: id("aaaa", "s")
        }
    );
    assert_eq!(
        e.to_string(),
        "snapshot stream 'aaaa/s' has inconsistent message boundaries"
    );
}

#[test]
fn record_boundary_mismatch() {
    // §10.24: offsets [1, 9] with retained 0 are rejected.
    let mut e0 = entry(id("aaaa", "s"), &[b'x'; 18]);
    e0.record_index = Some(record_index(0, &[1, 9]));
    let e = err(&snapshot(&["aaaa"], vec![e0]));
    assert_eq!(
        e,
        StreamSnapshotError::RecordBoundaryMismatch {
            stream_id: id("aaaa", "s")
        }
    );
    assert_eq!(
        e.to_string(),
        "snapshot stream 'aaaa/s' has inconsistent record boundaries"
    );
}

#[test]
fn integrity_mismatch() {
    // §10.31: `live_setsum "zz"`.
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.integrity.live_setsum = "zz".into();
    let e = err(&snapshot(&["aaaa"], vec![e0]));
    assert_eq!(
        e,
        StreamSnapshotError::IntegrityMismatch {
            stream_id: id("aaaa", "s")
        }
    );
    assert_eq!(
        e.to_string(),
        "snapshot stream 'aaaa/s' has inconsistent integrity setsums"
    );
}

#[test]
fn snapshot_offset_out_of_range() {
    // §10.26: tail 2, retained 0, visible snapshot at 3.
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.visible_snapshot = Some(visible(3));
    let e = err(&snapshot(&["aaaa"], vec![e0]));
    assert_eq!(
        e,
        StreamSnapshotError::SnapshotOffsetOutOfRange {
            stream_id: id("aaaa", "s"),
            snapshot_offset: 3,
            tail_offset: 2,
        }
    );
    assert_eq!(
        e.to_string(),
        "snapshot stream 'aaaa/s' visible snapshot offset 3 is beyond tail offset 2"
    );
}

// ---- bucket checks, §5.1 / §5.11 ----

#[test]
fn buckets_are_checked_before_erased_buckets() {
    let mut snap = snapshot(&["aaaa", "aaaa"], vec![]);
    snap.erased_buckets = strings(&["aaaa", "bbbb", "bbbb"]);
    assert_eq!(
        err(&snap),
        StreamSnapshotError::DuplicateBucket("aaaa".into())
    );
}

#[test]
fn erased_loop_runs_in_list_order() {
    // Erased [bbbb, bbbb, aaaa]: the duplicate comes first in list order.
    let mut snap = snapshot(&["aaaa"], vec![]);
    snap.erased_buckets = strings(&["bbbb", "bbbb", "aaaa"]);
    assert_eq!(
        err(&snap),
        StreamSnapshotError::DuplicateErasedBucket("bbbb".into())
    );
}

#[test]
fn stream_in_erased_bucket_is_missing_bucket() {
    let mut snap = snapshot(&["aaaa"], vec![entry(id("gone", "s"), b"")]);
    snap.erased_buckets = strings(&["gone"]);
    assert_eq!(
        err(&snap),
        StreamSnapshotError::MissingBucket(id("gone", "s"))
    );
}

#[test]
fn ids_are_not_format_checked() {
    let snap = snapshot(&["X"], vec![entry(id("X", ""), b"")]);
    assert!(validate_snapshot(&snap).is_ok());
}

// ---- per-entry order, §5.3 / §10.25-45 ----

#[test]
fn missing_bucket_wins_over_every_content_error() {
    let mut e0 = entry(id("missing", "s"), b"ab");
    e0.visible_snapshot = Some(visible(9));
    e0.payload.clear();
    e0.integrity.live_setsum = "zz".into();
    assert_eq!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::MissingBucket(id("missing", "s"))
    );
}

#[test]
fn visible_offset_is_checked_before_retained_offset() {
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.visible_snapshot = Some(visible(3));
    e0.retained_offset = Some(9);
    assert_eq!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::SnapshotOffsetOutOfRange {
            stream_id: id("aaaa", "s"),
            snapshot_offset: 3,
            tail_offset: 2,
        }
    );
}

#[test]
fn retained_beyond_tail_reuses_snapshot_offset_variant() {
    // §10.27: tail 2 with retained_offset 9.
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.retained_offset = Some(9);
    let e = err(&snapshot(&["aaaa"], vec![e0]));
    assert_eq!(
        e,
        StreamSnapshotError::SnapshotOffsetOutOfRange {
            stream_id: id("aaaa", "s"),
            snapshot_offset: 9,
            tail_offset: 2,
        }
    );
    assert_eq!(
        e.to_string(),
        "snapshot stream 'aaaa/s' visible snapshot offset 9 is beyond tail offset 2"
    );
}

#[test]
fn record_index_is_checked_before_payload() {
    // §10.28.
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.record_index = Some(record_index(0, &[1]));
    e0.payload = b"abc".to_vec();
    assert_eq!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::RecordBoundaryMismatch {
            stream_id: id("aaaa", "s")
        }
    );
}

#[test]
fn empty_record_index_needs_retained_equal_tail() {
    // §10.29.
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.record_index = Some(record_index(0, &[]));
    assert_eq!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::RecordBoundaryMismatch {
            stream_id: id("aaaa", "s")
        }
    );
    let mut e1 = entry(id("aaaa", "s"), b"");
    e1.record_index = Some(record_index(5, &[]));
    assert!(validate_snapshot(&snapshot(&["aaaa"], vec![e1])).is_ok());
}

#[test]
fn record_index_unit_cases() {
    // §10.24: [0, 0] is rejected; first 2, [18], retained 18, tail 27 is accepted.
    let mut e0 = entry(id("aaaa", "s"), &[b'x'; 18]);
    e0.record_index = Some(record_index(0, &[0, 0]));
    assert!(matches!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::RecordBoundaryMismatch { .. }
    ));
    let mut e1 = entry(id("aaaa", "s"), &[b'x'; 9]);
    e1.metadata.tail_offset = 27;
    e1.retained_offset = Some(18);
    e1.hot_segments = vec![seg(18, 27, 0, 9)];
    e1.message_records = vec![record(18, 27)];
    e1.record_index = Some(record_index(2, &[18]));
    assert!(validate_snapshot(&snapshot(&["aaaa"], vec![e1])).is_ok());
}

#[test]
fn record_index_overflow() {
    // §10.44: {first u64::MAX, offsets [0]}.
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.record_index = Some(record_index(u64::MAX, &[0]));
    assert_eq!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::RecordBoundaryMismatch {
            stream_id: id("aaaa", "s")
        }
    );
}

#[test]
fn message_records_are_checked_before_integrity() {
    // §10.30.
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.message_records = vec![record(0, 1)];
    e0.integrity.total_setsum = "zz".into();
    assert_eq!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::MessageBoundaryMismatch {
            stream_id: id("aaaa", "s")
        }
    );
}

#[test]
fn message_records_must_start_at_retained() {
    // §10.43: retained 2 but message records [{0,4}].
    let mut e0 = entry(id("aaaa", "s"), b"cd");
    e0.metadata.tail_offset = 4;
    e0.retained_offset = Some(2);
    e0.hot_segments = vec![seg(2, 4, 0, 2)];
    e0.message_records = vec![record(0, 4)];
    assert_eq!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::MessageBoundaryMismatch {
            stream_id: id("aaaa", "s")
        }
    );
}

#[test]
fn payload_is_checked_before_message_records() {
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.payload = b"abc".to_vec();
    e0.message_records = vec![];
    assert!(matches!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::PayloadLengthMismatch { .. }
    ));
}

#[test]
fn integrity_sum_must_hold() {
    // §10.32: live = 01 00… with evicted = total = 0….
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.integrity = integrity(&setsum("01"), ZERO, ZERO);
    assert_eq!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::IntegrityMismatch {
            stream_id: id("aaaa", "s")
        }
    );
}

#[test]
fn non_ascii_setsum_is_integrity_mismatch_without_panic() {
    // 64 bytes each: 'é' aligned to the first pair, and straddling pairs.
    for bad in [format!("é{ZEROS_62}"), format!("0é{}", &ZEROS_62[1..])] {
        assert_eq!(bad.len(), 64);
        for field in 0..3 {
            let mut e0 = entry(id("aaaa", "s"), b"ab");
            match field {
                0 => e0.integrity.live_setsum = bad.clone(),
                1 => e0.integrity.evicted_setsum = bad.clone(),
                _ => e0.integrity.total_setsum = bad.clone(),
            }
            assert_eq!(
                err(&snapshot(&["aaaa"], vec![e0])),
                StreamSnapshotError::IntegrityMismatch {
                    stream_id: id("aaaa", "s")
                }
            );
        }
    }
}

#[test]
fn duplicate_stream_with_invalid_content_reports_the_content_error() {
    // §10.35: second has tail 3 and a 2-byte payload.
    let mut second = entry(id("aaaa", "s"), b"ab");
    second.metadata.tail_offset = 3;
    assert_eq!(
        err(&snapshot(
            &["aaaa"],
            vec![entry(id("aaaa", "s"), b"ab"), second]
        )),
        StreamSnapshotError::PayloadLengthMismatch {
            stream_id: id("aaaa", "s"),
            tail_offset: 3,
            payload_len: 2,
        }
    );
}

#[test]
fn duplicate_stream_is_checked_before_producers() {
    // §10.36.
    let mut second = entry(id("aaaa", "s"), b"ab");
    second.producer_states = vec![producer("p"), producer("p")];
    assert_eq!(
        err(&snapshot(
            &["aaaa"],
            vec![entry(id("aaaa", "s"), b"ab"), second]
        )),
        StreamSnapshotError::DuplicateStream(id("aaaa", "s"))
    );
}

#[test]
fn affinity_makes_a_different_stream() {
    // §10.37.
    let snap = snapshot(
        &["aaaa"],
        vec![
            entry(id("aaaa", "s"), b"ab"),
            entry(BucketStreamId::with_affinity("aaaa", "k", "s"), b"ab"),
        ],
    );
    assert_eq!(validate_snapshot(&snap).unwrap().streams, 2);
}

#[test]
fn entries_are_checked_one_at_a_time_in_list_order() {
    // The first entry's late error wins over the second entry's early one.
    let mut first = entry(id("aaaa", "s"), b"");
    first.producer_states = vec![producer("p"), producer("p")];
    let second = entry(id("missing", "t"), b"");
    assert!(matches!(
        err(&snapshot(&["aaaa"], vec![first, second])),
        StreamSnapshotError::DuplicateProducer { .. }
    ));
}

#[test]
fn failed_entry_is_not_remembered() {
    let mut validator = SnapshotValidator::new(&strings(&["aaaa"]), &[]).unwrap();
    let mut bad = entry(id("aaaa", "s"), b"");
    bad.producer_states = vec![producer("p"), producer("p")];
    assert!(validator.check_entry(&bad).is_err());
    assert!(validator.accepted_streams().is_empty());
    assert!(validator.check_entry(&entry(id("aaaa", "s"), b"")).is_ok());
    assert_eq!(
        validator.check_entry(&entry(id("aaaa", "s"), b"")),
        Err(StreamSnapshotError::DuplicateStream(id("aaaa", "s")))
    );
}

// ---- cold chunk / external validity, §5.7 / §10.38-39 ----

fn with_chunk(chunk: ColdChunkRef) -> StreamSnapshot {
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.cold_chunks = vec![chunk];
    snapshot(&["aaaa"], vec![e0])
}

fn chunk(start: u64, end: u64, path: &str, size: u64, offset: u64) -> ColdChunkRef {
    ColdChunkRef {
        start_offset: start,
        end_offset: end,
        s3_path: path.to_owned(),
        object_size: size,
        object_offset: offset,
        shared_object: true,
        payload_digest: String::new(),
    }
}

#[test]
fn cold_chunk_validity() {
    let plm = StreamSnapshotError::PayloadLengthMismatch {
        stream_id: id("aaaa", "s"),
        tail_offset: 2,
        payload_len: 2,
    };
    // §10.38: blank path after trimming.
    assert_eq!(err(&with_chunk(chunk(0, 1, "  ", 1, 0))), plm);
    // §10.39: object_offset 5, size 5, length 1.
    assert_eq!(err(&with_chunk(chunk(0, 1, "p", 5, 5))), plm);
    // Overflowing object end, empty range.
    assert_eq!(err(&with_chunk(chunk(0, 1, "p", u64::MAX, u64::MAX))), plm);
    assert_eq!(err(&with_chunk(chunk(1, 1, "p", 5, 0))), plm);
    // A valid chunk, even one overlapping the hot data, is fine.
    assert!(validate_snapshot(&with_chunk(chunk(0, 1, "p", 5, 4))).is_ok());
}

#[test]
fn external_ref_validity() {
    let mut e0 = entry(id("aaaa", "s"), b"ab");
    e0.external_segments = vec![strand_model::ObjectPayloadRef {
        start_offset: 0,
        end_offset: 2,
        s3_path: "\t".into(),
        object_size: 2,
        object_offset: 0,
    }];
    assert!(matches!(
        err(&snapshot(&["aaaa"], vec![e0])),
        StreamSnapshotError::PayloadLengthMismatch { .. }
    ));
}
