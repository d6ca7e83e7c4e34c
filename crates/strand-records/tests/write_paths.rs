//! The state-machine helpers of spec 02 §3, with the cases of §7.4 and §7.5
//! that can be expressed without a state machine.
#![allow(clippy::unwrap_used)]

use strand_model::StreamMessageRecord;
use strand_records::{
    RecordIndexError, RecordWriteError, StreamRecordIndex, StreamRecordRange,
    appended_record_count, batch_item_record_ranges, batch_record_ends, build_record_index,
    check_record_precondition, is_json_record_content_type, message_records_for_append,
    offset_for_record, payload_record_ends, prepare_record_append, prepare_record_retention,
    producer_record_bounds, push_message_records, record_range_of, validate_restored_record_index,
};

const J: &str = "application/json";
const O: &str = "application/octet-stream";

fn range(first_record: u64, next_record: u64) -> StreamRecordRange {
    StreamRecordRange {
        first_record,
        next_record,
    }
}

fn msg(start_offset: u64, end_offset: u64) -> StreamMessageRecord {
    StreamMessageRecord {
        start_offset,
        end_offset,
    }
}

/// J stream `j` of §7.5: created with `{"a":1}\n{"b":2}\n`, tail 16,
/// next_record 2.
fn stream_j() -> StreamRecordIndex {
    let ends = payload_record_ends(Some(J), b"{\"a\":1}\n{\"b\":2}\n").unwrap();
    assert_eq!(ends, [8, 16]);
    build_record_index(J, 16, &ends).unwrap().unwrap()
}

/// The inline append path up to the prepare step (§3.3.3 steps 6–8).
fn inline_append(
    index: Option<&StreamRecordIndex>,
    stream_type: &str,
    tail: u64,
    content_type: Option<&str>,
    payload: &[u8],
    record_match: Option<u64>,
) -> Result<Option<strand_records::PendingRecordAppend>, RecordWriteError> {
    check_record_precondition(index, record_match)?;
    let ends = payload_record_ends(content_type, payload)?;
    prepare_record_append(
        index,
        is_json_record_content_type(stream_type),
        tail,
        payload.len() as u64,
        &ends,
    )
}

fn assert_invalid_boundaries_without_tail(error: RecordWriteError) {
    assert!(!error.is_precondition_failure(), "{error:?}");
    assert!(!error.reports_tail(), "{error:?}");
    assert_eq!(error.current_record(), None);
}

// ---- §3.1 build_record_index ------------------------------------------

#[test]
fn build_record_index_table_of_3_1() {
    // CreateStream, JSON, empty payload.
    let index = build_record_index(J, 0, &[]).unwrap().unwrap();
    assert_eq!(
        serde_json::to_string(&index).unwrap(),
        r#"{"first_record":0,"record_offsets":[]}"#
    );
    // CreateStream, JSON, non-empty canonical payload.
    let index = build_record_index(J, 16, &[8, 16]).unwrap().unwrap();
    assert_eq!(index.record_offsets(), &[0, 8]);
    assert_eq!(index.range(), Ok(range(0, 2)));
    // CreateStream, non-JSON: canonical ends are [] -> no index.
    assert_eq!(build_record_index("text/plain", 2, &[]), Ok(None));
    // CreateExternal, JSON, no ends -> legacy (no index).
    assert_eq!(build_record_index(J, 9, &[]), Ok(None));
    // CreateExternal, JSON, good ends.
    let index = build_record_index(J, 9, &[4, 9]).unwrap().unwrap();
    assert_eq!(index.record_offsets(), &[0, 4]);
    // CreateExternal, JSON, bad ends (§7.5 creates).
    for ends in [&[4, 8][..], &[0, 9][..]] {
        let error = build_record_index(J, 9, ends).unwrap_err();
        assert_eq!(
            error,
            RecordWriteError::BoundaryMismatch(RecordIndexError::InvalidBoundaries)
        );
        assert_invalid_boundaries_without_tail(error);
    }
    // CreateExternal, non-JSON with ends (§7.5: text/plain, len 4, [4]).
    let error = build_record_index("text/plain", 4, &[4]).unwrap_err();
    assert_eq!(error, RecordWriteError::BoundariesOnNonJsonStream);
    assert_invalid_boundaries_without_tail(error);
    // CreateExternal, non-JSON without ends.
    assert_eq!(build_record_index(O, 4, &[]), Ok(None));
}

#[test]
fn create_stream_boundary_step_comes_from_payload_record_ends() {
    // §7.5: CreateStream(J, "{}") fails at the dispatcher step.
    let error = payload_record_ends(Some(J), b"{}").unwrap_err();
    assert_eq!(error, RecordWriteError::NonCanonicalJsonPayload);
    assert_invalid_boundaries_without_tail(error);
    // CreateStream(text/plain, "{}") -> created with no index, one message
    // record and one usage record.
    let ends = payload_record_ends(Some("text/plain"), b"{}").unwrap();
    assert!(ends.is_empty());
    assert_eq!(build_record_index("text/plain", 2, &ends), Ok(None));
    assert_eq!(message_records_for_append(0, 2, &ends), [msg(0, 2)]);
    assert_eq!(appended_record_count(&ends, 2), 1);
    // No content type: no ends, whatever the payload.
    assert_eq!(payload_record_ends(None, b"{}"), Ok(vec![]));
}

// ---- §7.4 index lifecycle ---------------------------------------------

#[test]
fn lifecycle_1_and_2_empty_json_create_then_append() {
    let ends = payload_record_ends(Some(J), b"").unwrap();
    let mut index = build_record_index(J, 0, &ends).unwrap().unwrap();
    assert_eq!(record_range_of(Some(&index)), Ok(Some(range(0, 0))));
    assert!(message_records_for_append(0, 0, &ends).is_empty());
    assert_eq!(appended_record_count(&ends, 0), 0);
    assert_eq!(
        producer_record_bounds(index.range().ok()),
        (Some(0), Some(0))
    );

    let payload = b"{\"a\":1}\n{\"b\":2}\n";
    let pending = inline_append(Some(&index), J, 0, Some(J), payload, None)
        .unwrap()
        .unwrap();
    assert_eq!(pending.range(), range(0, 2));
    let ends = payload_record_ends(Some(J), payload).unwrap();
    index.commit_append(pending);
    assert_eq!(index.record_offsets(), &[0, 8]);
    assert_eq!(
        message_records_for_append(0, 16, &ends),
        [msg(0, 8), msg(8, 16)]
    );
}

#[test]
fn lifecycle_3_append_restore_and_retention() {
    let mut index = stream_j();
    let pending = inline_append(Some(&index), J, 16, Some(J), b"{\"c\":3}\n", None)
        .unwrap()
        .unwrap();
    assert_eq!(index.commit_append(pending), range(2, 3));
    assert_eq!(record_range_of(Some(&index)), Ok(Some(range(0, 3))));
    assert_eq!(offset_for_record(Some(&index), 2, 24), Ok(Some(16)));

    // Snapshot / restore of the index.
    let text = serde_json::to_string(&index).unwrap();
    let restored: StreamRecordIndex = serde_json::from_str(&text).unwrap();
    assert_eq!(
        validate_restored_record_index(Some(&restored), 0, 24),
        Ok(())
    );
    assert_eq!(offset_for_record(Some(&restored), 1, 24), Ok(Some(8)));

    // AdvanceRetention(16).
    let pending = prepare_record_retention(Some(&restored), 16, 24)
        .unwrap()
        .unwrap();
    let mut index = restored;
    index.commit_retain(pending);
    assert_eq!(record_range_of(Some(&index)), Ok(Some(range(2, 3))));
    assert_eq!(
        offset_for_record(Some(&index), 1, 24),
        Err(RecordIndexError::RecordGone {
            first_record: 2,
            next_record: 3
        })
    );
    assert_eq!(offset_for_record(Some(&index), 3, 24), Ok(Some(24)));
}

#[test]
fn lifecycle_4_binary_external_append_without_ends() {
    assert_eq!(prepare_record_append(None, false, 2, 4, &[]), Ok(None));
    let mut records = vec![msg(0, 2)];
    push_message_records(&mut records, 2, 6, &[]);
    assert_eq!(records, [msg(0, 2), msg(2, 6)]);
    assert_eq!(appended_record_count(&[], 4), 1);
}

#[test]
fn lifecycle_5_external_create_then_batch() {
    let mut index = build_record_index(J, 9, &[4, 9]).unwrap().unwrap();
    assert_eq!(
        serde_json::to_string(&index).unwrap(),
        r#"{"first_record":0,"record_offsets":[0,4]}"#
    );
    let mut records = message_records_for_append(0, 9, &[4, 9]);
    assert_eq!(records, [msg(0, 4), msg(4, 9)]);

    let payloads: [&[u8]; 2] = [b"{}\n", b"1\n2\n"];
    let batch = batch_record_ends(J, &payloads).unwrap();
    assert_eq!(batch.item_ends, [vec![3], vec![2, 4]]);
    assert_eq!(batch.item_lens, [3, 4]);
    assert_eq!(batch.combined_ends, [3, 5, 7]);
    assert_eq!(batch.total_len, 7);
    assert_eq!(batch.appended_record_count(), 3);
    let pending = prepare_record_append(
        Some(&index),
        is_json_record_content_type(J),
        9,
        batch.total_len,
        &batch.combined_ends,
    )
    .unwrap()
    .unwrap();
    assert_eq!(pending.range(), range(2, 5));
    let items = batch_item_record_ranges(Some(pending.range()), &batch);
    assert_eq!(items, [Some(range(2, 3)), Some(range(3, 5))]);
    assert_eq!(producer_record_bounds(items[1]), (Some(3), Some(5)));
    index.commit_append(pending);
    assert_eq!(index.record_offsets(), &[0, 4, 9, 12, 14]);
    push_message_records(&mut records, 9, 12, &batch.item_ends[0]);
    push_message_records(&mut records, 12, 16, &batch.item_ends[1]);
    assert_eq!(
        records,
        [msg(0, 4), msg(4, 9), msg(9, 12), msg(12, 14), msg(14, 16)]
    );
}

#[test]
fn lifecycle_6_legacy_json_stream() {
    let index = build_record_index(J, 9, &[]).unwrap();
    assert_eq!(index, None);
    assert_eq!(record_range_of(index.as_ref()), Ok(None));
    let mut records = message_records_for_append(0, 9, &[]);
    assert_eq!(records, [msg(0, 9)]);
    assert_eq!(appended_record_count(&[], 9), 1);

    // Append(J, "{}\n[]\n"): no index, any ends accepted.
    let payload = b"{}\n[]\n";
    assert_eq!(inline_append(None, J, 9, Some(J), payload, None), Ok(None));
    let ends = payload_record_ends(Some(J), payload).unwrap();
    push_message_records(&mut records, 9, 15, &ends);
    assert_eq!(records, [msg(0, 9), msg(9, 12), msg(12, 15)]);

    // record_match on a stream without index.
    let error = inline_append(None, J, 15, Some(J), b"1\n", Some(0)).unwrap_err();
    assert_eq!(error, RecordWriteError::RecordMatchWithoutIndex);
    assert_invalid_boundaries_without_tail(error);

    // AppendExternal(J, len 5, [3, 1, 9]): not validated, still used.
    assert_eq!(
        prepare_record_append(None, true, 15, 5, &[3, 1, 9]),
        Ok(None)
    );
    push_message_records(&mut records, 15, 20, &[3, 1, 9]);
    assert_eq!(records[3..], [msg(15, 18), msg(18, 16), msg(16, 24)]);
    assert_eq!(appended_record_count(&[3, 1, 9], 5), 3);
    assert_eq!(offset_for_record(None, 0, 20), Ok(None));
}

#[test]
fn lifecycle_7_close_on_indexed_stream() {
    // An indexed stream at tail 25 with next_record 7 (§7.5's stream j after
    // its successful appends).
    let index = StreamRecordIndex::restore(0, vec![0, 8, 16, 19, 20, 21, 23], 0, 25).unwrap();
    let before = index.clone();
    let pending = inline_append(Some(&index), J, 25, None, b"", None)
        .unwrap()
        .unwrap();
    assert_eq!(pending.range(), range(7, 7));
    assert_eq!(
        producer_record_bounds(Some(pending.range())),
        (Some(7), Some(7))
    );
    // No commit and no message record for a close.
    assert!(message_records_for_append(25, 25, &[]).is_empty());
    assert_eq!(index, before);
    // Without an index a close records no bounds.
    assert_eq!(producer_record_bounds(None), (None, None));
}

// ---- §7.5 boundary rejections -------------------------------------------

#[test]
fn rejections_on_indexed_json_stream() {
    let index = stream_j();
    for (content_type, payload) in [
        (Some("text/plain"), &b"xyz"[..]),
        (Some("text/plain"), &b"xyz\n"[..]),
        (None, &b"xyz\n"[..]),
    ] {
        let error = inline_append(Some(&index), J, 16, content_type, payload, None).unwrap_err();
        assert_eq!(
            error,
            RecordWriteError::BoundaryMismatch(RecordIndexError::InvalidBoundaries)
        );
        assert_invalid_boundaries_without_tail(error);
    }
    // Variant spellings of JSON pass the boundary steps (ContentTypeMismatch
    // follows in the machine).
    for content_type in ["application/json; charset=utf-8", "APPLICATION/JSON"] {
        let pending = inline_append(Some(&index), J, 16, Some(content_type), b"{}\n", None)
            .unwrap()
            .unwrap();
        assert_eq!(pending.range(), range(2, 3));
    }
    let error = inline_append(Some(&index), J, 16, Some(J), b"{}", None).unwrap_err();
    assert_eq!(error, RecordWriteError::NonCanonicalJsonPayload);
    assert_invalid_boundaries_without_tail(error);
}

#[test]
fn precondition_before_boundaries_and_successful_appends() {
    let mut index = stream_j();
    // A stale precondition is reported even for a malformed body.
    let error = inline_append(Some(&index), J, 16, Some(J), b"{}", Some(5)).unwrap_err();
    assert_eq!(
        error,
        RecordWriteError::RecordTailMismatch {
            current_record: 2,
            expected_record: 5
        }
    );
    assert!(error.is_precondition_failure());
    assert!(error.reports_tail());
    assert_eq!(error.current_record(), Some(2));

    let pending = inline_append(Some(&index), J, 16, Some(J), b"{}\n", Some(2))
        .unwrap()
        .unwrap();
    index.commit_append(pending);
    assert_eq!(index.record_offsets(), &[0, 8, 16]);

    // Append(J, "\n\n") at tail 19: empty-line records at 19 and 20.
    let pending = inline_append(Some(&index), J, 19, Some(J), b"\n\n", None)
        .unwrap()
        .unwrap();
    assert_eq!(pending.start_offsets(), &[19, 20]);
    index.commit_append(pending);

    // AppendExternal(J, len 4, [2]) at tail 21.
    let error = prepare_record_append(Some(&index), true, 21, 4, &[2]).unwrap_err();
    assert_eq!(
        error,
        RecordWriteError::BoundaryMismatch(RecordIndexError::InvalidBoundaries)
    );
    // AppendExternal(J, len 4, [2, 4]).
    let pending = prepare_record_append(Some(&index), true, 21, 4, &[2, 4])
        .unwrap()
        .unwrap();
    index.commit_append(pending);
    assert_eq!(index.record_offsets(), &[0, 8, 16, 19, 20, 21, 23]);
    // AppendExternal(text/plain, len 4, [2, 4]) at 25: the command's type
    // plays no part in the boundaries (ContentTypeMismatch follows).
    assert!(
        prepare_record_append(Some(&index), true, 25, 4, &[2, 4])
            .unwrap()
            .is_some()
    );
}

#[test]
fn rejections_on_binary_stream() {
    // O stream `o` at tail 2, no index.
    let error = inline_append(None, O, 2, Some(J), b"{}\n", None).unwrap_err();
    assert_eq!(error, RecordWriteError::BoundariesOnNonJsonStream);
    assert_invalid_boundaries_without_tail(error);
    let error = inline_append(None, O, 2, Some(J), b"{}", None).unwrap_err();
    assert_eq!(error, RecordWriteError::NonCanonicalJsonPayload);
    // text/plain body passes the boundary steps (ContentTypeMismatch follows).
    assert_eq!(
        inline_append(None, O, 2, Some("text/plain"), b"x", None),
        Ok(None)
    );
    let error = inline_append(None, O, 2, Some(O), b"x", Some(0)).unwrap_err();
    assert_eq!(error, RecordWriteError::RecordMatchWithoutIndex);
    assert_invalid_boundaries_without_tail(error);
    let error = prepare_record_append(None, false, 2, 4, &[4]).unwrap_err();
    assert_eq!(error, RecordWriteError::BoundariesOnNonJsonStream);
}

#[test]
fn external_append_without_ends_on_indexed_stream_is_rejected() {
    let index = build_record_index(J, 9, &[9]).unwrap().unwrap();
    let before = index.clone();
    let error = prepare_record_append(Some(&index), true, 9, 9, &[]).unwrap_err();
    assert_eq!(
        error,
        RecordWriteError::BoundaryMismatch(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(index, before);
}

#[test]
fn retention_to_a_mid_record_offset_is_rejected_with_tail() {
    let index = build_record_index(J, 24, &[8, 16, 24]).unwrap().unwrap();
    let before = index.clone();
    let error = prepare_record_retention(Some(&index), 4, 24).unwrap_err();
    assert_eq!(
        error,
        RecordWriteError::RetentionNotRecordBoundary(RecordIndexError::OffsetNotRecordBoundary)
    );
    assert!(!error.is_precondition_failure());
    assert!(error.reports_tail());
    assert_eq!(error.current_record(), None);
    assert_eq!(index, before);
    assert_eq!(index.record_offsets(), &[0, 8, 16]);
    // No index: nothing to check.
    assert_eq!(prepare_record_retention(None, 4, 24), Ok(None));
}

#[test]
fn transaction_rollback_restores_the_first_stream() {
    let mut journal = build_record_index(J, 0, &[]).unwrap().unwrap();
    let queue = build_record_index(J, 0, &[]).unwrap().unwrap();
    let journal_before = serde_json::to_string(&journal).unwrap();
    let checkpoint = journal.checkpoint();

    let pending = inline_append(Some(&journal), J, 0, Some(J), b"{\"event\":1}\n", Some(0))
        .unwrap()
        .unwrap();
    assert_eq!(journal.commit_append(pending), range(0, 1));
    let error =
        inline_append(Some(&queue), J, 0, Some(J), b"{\"event\":2}\n", Some(1)).unwrap_err();
    assert_eq!(
        error,
        RecordWriteError::RecordTailMismatch {
            current_record: 0,
            expected_record: 1
        }
    );
    journal.rollback(checkpoint);
    assert_eq!(serde_json::to_string(&journal).unwrap(), journal_before);
}

#[test]
fn precondition_none_always_passes_and_overflowing_index_is_invalid() {
    assert_eq!(check_record_precondition(None, None), Ok(()));
    let text = format!(r#"{{"first_record":{},"record_offsets":[1]}}"#, u64::MAX);
    let broken: StreamRecordIndex = serde_json::from_str(&text).unwrap();
    assert_eq!(check_record_precondition(Some(&broken), None), Ok(()));
    let error = check_record_precondition(Some(&broken), Some(0)).unwrap_err();
    assert_eq!(
        error,
        RecordWriteError::InvalidRecordIndex(RecordIndexError::ArithmeticOverflow)
    );
    assert_invalid_boundaries_without_tail(error);
}

// ---- §3.3.5 batches ------------------------------------------------------

#[test]
fn batch_first_non_canonical_payload_fails() {
    let payloads: [&[u8]; 3] = [b"1\n", b"2", b"3"];
    assert_eq!(
        batch_record_ends(J, &payloads),
        Err(RecordWriteError::NonCanonicalJsonPayload)
    );
}

#[test]
fn non_json_batch_has_no_ends_and_no_item_ranges() {
    let payloads = [b"ab".to_vec(), b"cde".to_vec()];
    let batch = batch_record_ends(O, &payloads).unwrap();
    assert_eq!(batch.item_ends, [Vec::<u64>::new(), Vec::new()]);
    assert!(batch.combined_ends.is_empty());
    assert_eq!(batch.total_len, 5);
    assert_eq!(batch.appended_record_count(), 2);
    assert_eq!(
        prepare_record_append(None, false, 0, 5, &batch.combined_ends),
        Ok(None)
    );
    assert_eq!(batch_item_record_ranges(None, &batch), [None, None]);
    // A non-JSON batch on a (restored) indexed stream cannot cover the bytes.
    let index = StreamRecordIndex::new();
    assert_eq!(
        prepare_record_append(Some(&index), false, 0, 5, &batch.combined_ends),
        Err(RecordWriteError::BoundaryMismatch(
            RecordIndexError::InvalidBoundaries
        ))
    );
}

// ---- §3.8 / §7.8 restore -------------------------------------------------

#[test]
fn restore_index_rows_of_7_8() {
    // bench/j: {"a":1}\n{"b":2}\n, retained 0, tail 16.
    let check = |json: &str| {
        let index: StreamRecordIndex = serde_json::from_str(json).unwrap();
        validate_restored_record_index(Some(&index), 0, 16)
    };
    assert_eq!(
        check(r#"{"first_record":100,"record_offsets":[0,8]}"#),
        Ok(())
    );
    assert_eq!(
        check(&format!(
            r#"{{"first_record":{},"record_offsets":[0,8]}}"#,
            u64::MAX
        )),
        Err(RecordIndexError::ArithmeticOverflow)
    );
    assert_eq!(
        check(r#"{"first_record":0,"record_offsets":[1,8]}"#),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        check(r#"{"first_record":0,"record_offsets":[0,16]}"#),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        check(r#"{"first_record":0,"record_offsets":[0,3]}"#),
        Ok(())
    );
    assert_eq!(check(r#"{"first_record":0,"record_offsets":[0]}"#), Ok(()));
    assert_eq!(
        check(r#"{"first_record":0,"record_offsets":[]}"#),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(validate_restored_record_index(None, 0, 16), Ok(()));
    assert!(serde_json::from_str::<StreamRecordIndex>(r#"{"record_offsets":[0,8]}"#).is_err());
}
