//! Spec 02 §7.9: the coordinate fixtures at the index level.
#![allow(clippy::unwrap_used)]

use strand_model::StreamMessageRecord;
use strand_records::{
    RecordIndexError, StreamRecordIndex, StreamRecordRange, build_record_index,
    check_record_precondition, message_records_for_append, offset_for_record, payload_record_ends,
    prepare_record_append, prepare_record_retention, record_range_for_offsets, record_range_of,
};

const J: &str = "application/json";

fn range(first_record: u64, next_record: u64) -> StreamRecordRange {
    StreamRecordRange {
        first_record,
        next_record,
    }
}

/// `{"id":0}\n{"id":1}\n{"id":2}\n`: 27 bytes, records at 0, 9, 18.
fn setup() -> StreamRecordIndex {
    let ends = payload_record_ends(Some(J), b"{\"id\":0}\n{\"id\":1}\n{\"id\":2}\n").unwrap();
    assert_eq!(ends, [9, 18, 27]);
    build_record_index(J, 27, &ends).unwrap().unwrap()
}

fn append(index: &mut StreamRecordIndex, tail: u64, payload: &[u8]) -> StreamRecordRange {
    let ends = payload_record_ends(Some(J), payload).unwrap();
    let pending = prepare_record_append(Some(index), true, tail, payload.len() as u64, &ends)
        .unwrap()
        .unwrap();
    index.commit_append(pending)
}

#[test]
fn append_cases_start_at_record_zero() {
    let cases: [(&[u8], u64); 5] = [
        (b"{\"type\":\"navigation_started\"}\n", 1),
        (b"{\"type\":\"console\"}\n{\"type\":\"network\"}\n", 2),
        (b"[1,2,3]\n", 1),
        (b"42\n", 1),
        (b"", 0),
    ];
    for (bytes, count) in cases {
        let ends = payload_record_ends(Some(J), bytes).unwrap();
        let index = build_record_index(J, bytes.len() as u64, &ends)
            .unwrap()
            .unwrap();
        assert_eq!(index.range(), Ok(range(0, count)));
        assert_eq!(
            offset_for_record(Some(&index), count, bytes.len() as u64),
            Ok(Some(bytes.len() as u64))
        );
    }
}

#[test]
fn http_cases_before_the_append() {
    let index = setup();
    // json-head-advertises-active-extension.
    assert_eq!(record_range_of(Some(&index)), Ok(Some(range(0, 3))));
    // binary-head-does-not-advertise-json-extension.
    let binary = build_record_index("application/octet-stream", 0, &[]).unwrap();
    assert_eq!(record_range_of(binary.as_ref()), Ok(None));
    // record-match-failure-reports-current-tails.
    let error = check_record_precondition(Some(&index), Some(2)).unwrap_err();
    assert!(error.is_precondition_failure());
    assert_eq!(error.current_record(), Some(3));
    // record-aligned-read (record 1, max 2): bytes [9, 27).
    assert_eq!(index.offset_for(1, 27), Ok(9));
    assert_eq!(index.offset_for(3, 27), Ok(27));
    // record-beyond-tail-is-bad-request (record 4).
    assert_eq!(
        index.offset_for(4, 27),
        Err(RecordIndexError::RecordBeyondTail { next_record: 3 })
    );
    // empty-long-poll-keeps-record-continuation (record 3).
    assert_eq!(offset_for_record(Some(&index), 3, 27), Ok(Some(27)));
    // sse-control-carries-matching-record-and-offset-tail (record 2).
    assert_eq!(index.offset_for(2, 27), Ok(18));
}

#[test]
fn http_trimmed_record_is_gone() {
    let mut index = setup();
    assert_eq!(index.retain_from_offset(18, 27), Ok(2));
    assert_eq!(
        index.offset_for(1, 27),
        Err(RecordIndexError::RecordGone {
            first_record: 2,
            next_record: 3
        })
    );
}

#[test]
fn state_machine_scenario_of_7_9() {
    let mut index = setup();
    // append-acknowledges-contiguous-range.
    assert_eq!(
        append(&mut index, 27, b"{\"id\":3}\n{\"id\":4}\n"),
        range(3, 5)
    );
    assert_eq!(
        record_range_for_offsets(Some(&index), 27, 45, 45),
        Ok(Some(range(3, 5)))
    );
    let offsets: Vec<u64> = (0..=5).map(|k| index.offset_for(k, 45).unwrap()).collect();
    assert_eq!(offsets, [0, 9, 18, 27, 36, 45]);
    assert_eq!(
        index.offset_for(6, 45),
        Err(RecordIndexError::RecordBeyondTail { next_record: 5 })
    );
    // Retention keeps the surviving records' ordinals and offsets.
    let pending = prepare_record_retention(Some(&index), 18, 45)
        .unwrap()
        .unwrap();
    index.commit_retain(pending);
    assert_eq!(index.range(), Ok(range(2, 5)));
    assert_eq!(index.record_offsets(), &[18, 27, 36]);
    assert_eq!(
        record_range_for_offsets(Some(&index), 9, 18, 45),
        Err(RecordIndexError::OffsetNotRecordBoundary)
    );
    // Retention to the tail.
    let pending = prepare_record_retention(Some(&index), 45, 45)
        .unwrap()
        .unwrap();
    index.commit_retain(pending);
    assert_eq!(index.range(), Ok(range(5, 5)));
    assert_eq!(
        serde_json::to_string(&index).unwrap(),
        r#"{"first_record":5,"record_offsets":[]}"#
    );
    // Append(J, "7\n", record_match 5).
    check_record_precondition(Some(&index), Some(5)).unwrap();
    assert_eq!(append(&mut index, 45, b"7\n"), range(5, 6));
    assert_eq!(
        serde_json::to_string(&index).unwrap(),
        r#"{"first_record":5,"record_offsets":[45]}"#
    );
    assert_eq!(
        message_records_for_append(45, 47, &[2]),
        [StreamMessageRecord {
            start_offset: 45,
            end_offset: 47
        }]
    );
    // The state still restores cleanly (retained 45, tail 47).
    assert_eq!(index.validate(45, 47), Ok(()));
}
