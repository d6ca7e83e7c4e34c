//! Append hot paths through `apply` (timing only; the allocation figures
//! are in `memory.rs`, so these run on the plain system allocator).
//!
//! * `inline_100b_*`: 100-byte inline appends spread round-robin over 100
//!   streams: without producer, with one producer per stream and 10 %
//!   retries, and on `application/json` streams with 3 newline-terminated
//!   records per append. `cargo xtask bench` turns the median into
//!   appends/s.
//! * `append_64k` beside `setsum_floor_64k`: a 64 KiB inline append versus
//!   hashing the same 64 KiB once with `setsum` (the integrity digest every
//!   append must pay), reported as the ratio append / floor.
//!
//! Commands (ids, content-type strings, `Bytes` payloads) are built by
//! `with_inputs`, outside the timed region; the response is dropped outside
//! it too.

mod common;

use bytes::Bytes;
use common::{
    JSON, OCTET, XorShift, append, json_payload, machine_with_streams, payload, producer,
};
use divan::Bencher;

/// Streams the 100-byte appends are spread over.
const STREAMS: usize = 100;
/// Bucket of every append fixture.
const BUCKET: &str = "bench";

fn main() {
    divan::main();
}

/// Inline 100 B appends, no producer.
#[divan::bench(sample_count = 50, sample_size = 2000)]
fn inline_100b_no_producer(bencher: Bencher) {
    let ids = common::stream_ids(BUCKET, "s-", 3, STREAMS);
    let mut machine = machine_with_streams(BUCKET, &ids, OCTET);
    let body = payload(100, 7);
    let mut i = 0usize;
    bencher
        .with_inputs(|| {
            let id = ids[i % STREAMS].clone();
            i += 1;
            append(id, OCTET, Bytes::copy_from_slice(&body), None)
        })
        .bench_local_values(|command| machine.apply(command));
}

/// Inline 100 B appends, one producer per stream; every tenth request (on
/// average, deterministic PRNG) is a retry of that stream's latest
/// accepted sequence number, as a client retrying after a lost ack would.
#[divan::bench(sample_count = 50, sample_size = 2000)]
fn inline_100b_producer_10pct_retries(bencher: Bencher) {
    let ids = common::stream_ids(BUCKET, "s-", 3, STREAMS);
    let mut machine = machine_with_streams(BUCKET, &ids, OCTET);
    let body = payload(100, 7);
    let mut next_seq = vec![0u64; STREAMS];
    let mut rng = XorShift::new(0x5eed);
    let mut i = 0usize;
    bencher
        .with_inputs(|| {
            let s = i % STREAMS;
            i += 1;
            let seq = if next_seq[s] > 0 && rng.below(10) == 0 {
                next_seq[s] - 1
            } else {
                next_seq[s] += 1;
                next_seq[s] - 1
            };
            let request = producer("writer", seq);
            append(
                ids[s].clone(),
                OCTET,
                Bytes::copy_from_slice(&body),
                Some(request),
            )
        })
        .bench_local_values(|command| machine.apply(command));
}

/// Inline 100 B appends to `application/json` streams, 3 records each.
#[divan::bench(sample_count = 50, sample_size = 2000)]
fn inline_100b_json_3_records(bencher: Bencher) {
    let ids = common::stream_ids(BUCKET, "j-", 3, STREAMS);
    let mut machine = machine_with_streams(BUCKET, &ids, JSON);
    let body = json_payload(100, 3);
    let mut i = 0usize;
    bencher
        .with_inputs(|| {
            let id = ids[i % STREAMS].clone();
            i += 1;
            append(id, JSON, Bytes::copy_from_slice(&body), None)
        })
        .bench_local_values(|command| machine.apply(command));
}

/// Size of the large append.
const LARGE: usize = 64 * 1024;

/// One 64 KiB inline append to one stream, no producer. The payload is a
/// fresh copy per append (like a request body off the wire).
#[divan::bench(sample_count = 100, sample_size = 10)]
fn append_64k(bencher: Bencher) {
    let ids = common::stream_ids(BUCKET, "big-", 1, 1);
    let mut machine = machine_with_streams(BUCKET, &ids, OCTET);
    let body = payload(LARGE, 42);
    bencher
        .with_inputs(|| append(ids[0].clone(), OCTET, Bytes::copy_from_slice(&body), None))
        .bench_local_values(|command| machine.apply(command));
}

/// The floor: hashing the same 64 KiB once into a fresh setsum. The input
/// is a fresh copy too, so both sides read memory of the same age.
#[divan::bench(sample_count = 100, sample_size = 10)]
fn setsum_floor_64k(bencher: Bencher) {
    let body = payload(LARGE, 42);
    bencher
        .with_inputs(|| Bytes::copy_from_slice(&body))
        .bench_local_values(|bytes| {
            let mut sum = setsum::Setsum::default();
            sum.insert(&bytes);
            (sum.digest(), bytes)
        });
}
