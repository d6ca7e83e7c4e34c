//! Idempotent-producer retries (timing; the heap per receipt is in
//! `memory.rs`).
//!
//! One stream, one producer. `retry_200k_receipts`: the producer first
//! makes 200 k accepted appends of 16 B (sequence numbers 0..200 k, so 200 k
//! receipts), then each measured call retries a random old sequence number
//! (xorshift, fixed seed). `retry_10_receipts`: the same with only 10
//! accepted appends. A retry cost that does not depend on the history
//! gives a ratio of 1.

mod common;

use bytes::Bytes;
use common::{OCTET, XorShift, append, expect_ok, machine_with_streams, payload, producer};
use divan::Bencher;
use strand_machine::{StreamResponse, StreamStateMachine};
use strand_model::BucketStreamId;

/// Accepted appends of the big history.
const HISTORY: u64 = 200_000;
/// Accepted appends of the small history.
const SHORT: u64 = 10;
/// Bytes per append.
const BODY: usize = 16;

fn main() {
    divan::main();
}

/// A machine with one stream whose producer `writer` made `history`
/// accepted appends.
fn fixture(history: u64) -> (StreamStateMachine, BucketStreamId) {
    let ids = common::stream_ids("producer", "s-", 1, 1);
    let mut machine = machine_with_streams("producer", &ids, OCTET);
    let body = payload(BODY, 3);
    for seq in 0..history {
        let response = machine.apply(append(
            ids[0].clone(),
            OCTET,
            Bytes::copy_from_slice(&body),
            Some(producer("writer", seq)),
        ));
        expect_ok(&response, "fixture append");
    }
    (machine, ids[0].clone())
}

/// Measures retries of random sequence numbers below `history`.
fn retries(bencher: Bencher, history: u64) {
    let history = if common::full_run() {
        history
    } else {
        history.min(1_000)
    };
    let (mut machine, id) = fixture(history);
    let body = payload(BODY, 3);
    // Check once that a retry is answered from the receipt.
    let check = machine.apply(append(
        id.clone(),
        OCTET,
        Bytes::copy_from_slice(&body),
        Some(producer("writer", history / 2)),
    ));
    assert!(
        matches!(
            check,
            StreamResponse::Appended {
                deduplicated: true,
                ..
            }
        ),
        "a retry must be deduplicated: {check:?}"
    );
    let mut rng = XorShift::new(0xfeed_beef);
    bencher
        .with_inputs(|| {
            let seq = rng.below(history);
            append(
                id.clone(),
                OCTET,
                Bytes::copy_from_slice(&body),
                Some(producer("writer", seq)),
            )
        })
        .bench_local_values(|command| machine.apply(command));
}

/// A retry against a producer holding 200 k receipts.
#[divan::bench(sample_count = 100, sample_size = 20)]
fn retry_200k_receipts(bencher: Bencher) {
    retries(bencher, HISTORY);
}

/// A retry against a producer holding 10 receipts.
#[divan::bench(sample_count = 100, sample_size = 20)]
fn retry_10_receipts(bencher: Bencher) {
    retries(bencher, SHORT);
}
