//! Spec 02 §4 and the helper-level cases of §7.6.
#![allow(clippy::unwrap_used)]

use strand_model::StreamMessageRecord;
use strand_records::{
    appended_record_count, batch_record_ends, message_records_for_append, payload_record_ends,
    push_message_records,
};

fn msg(start_offset: u64, end_offset: u64) -> StreamMessageRecord {
    StreamMessageRecord {
        start_offset,
        end_offset,
    }
}

#[test]
fn empty_ends_give_one_record_for_a_non_empty_range() {
    assert_eq!(message_records_for_append(3, 5, &[]), [msg(3, 5)]);
    assert!(message_records_for_append(5, 5, &[]).is_empty());
    // A backwards range is "empty" too.
    assert!(message_records_for_append(6, 5, &[]).is_empty());
}

#[test]
fn ends_give_one_record_each_without_checks() {
    assert_eq!(
        message_records_for_append(10, 16, &[2, 6]),
        [msg(10, 12), msg(12, 16)]
    );
    // Invalid ends go backwards and past the end (legacy external quirk).
    assert_eq!(
        message_records_for_append(15, 20, &[3, 1, 9]),
        [msg(15, 18), msg(18, 16), msg(16, 24)]
    );
    // Saturating addition.
    assert_eq!(
        message_records_for_append(u64::MAX - 1, u64::MAX, &[5]),
        [msg(u64::MAX - 1, u64::MAX)]
    );
}

#[test]
fn push_appends_at_the_end() {
    let mut records = vec![msg(0, 1)];
    push_message_records(&mut records, 1, 3, &[1, 2]);
    push_message_records(&mut records, 3, 3, &[]);
    assert_eq!(records, [msg(0, 1), msg(1, 2), msg(2, 3)]);
}

#[test]
fn record_count_rule_of_4_3() {
    assert_eq!(appended_record_count(&[1, 2, 3], 3), 3);
    assert_eq!(appended_record_count(&[3, 1, 9], 5), 3);
    assert_eq!(appended_record_count(&[], 7), 1);
    assert_eq!(appended_record_count(&[], 0), 0);
}

#[test]
fn binary_appends_abc_and_de() {
    let mut records = Vec::new();
    let mut committed_records = 0;
    let mut tail = 0;
    for payload in [&b"abc"[..], &b"de"[..]] {
        let ends = payload_record_ends(Some("application/octet-stream"), payload).unwrap();
        let next = tail + payload.len() as u64;
        push_message_records(&mut records, tail, next, &ends);
        committed_records += appended_record_count(&ends, payload.len() as u64);
        tail = next;
    }
    assert_eq!(committed_records, 2);
    assert_eq!(records, [msg(0, 3), msg(3, 5)]);
}

#[test]
fn json_create_counts_one_record_per_line() {
    let payload = b"{\"a\":1}\n{\"b\":2}\n";
    let ends = payload_record_ends(Some("application/json"), payload).unwrap();
    assert_eq!(appended_record_count(&ends, payload.len() as u64), 2);
    assert_eq!(payload.len(), 16);
}

#[test]
fn batch_count_is_the_sum_over_items() {
    let payloads: [&[u8]; 3] = [b"a\nb\n", b"c\n", b"\n\n\n"];
    let batch = batch_record_ends("application/json", &payloads).unwrap();
    assert_eq!(batch.appended_record_count(), 6);
    let binary = batch_record_ends("text/plain", &payloads).unwrap();
    assert_eq!(binary.appended_record_count(), 3);
}
