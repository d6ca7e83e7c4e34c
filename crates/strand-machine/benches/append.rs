//! Append hot paths through `apply` (timing only; the allocation figures
//! are in `memory.rs`, so these run on the plain system allocator).
//!
//! * `inline_100b_*`: 100-byte inline appends spread round-robin over 100
//!   streams: without producer, with one producer per stream and 10 %
//!   retries, and on `application/json` streams with 3 newline-terminated
//!   records per append. `cargo xtask bench` turns the median into
//!   appends/s.
//! * `floor_inline_100b_*` beside each of them: the integrity floor of the
//!   same workload, i.e. hashing into a fresh `setsum` exactly the item
//!   bytes each of those appends must hash (spec 02 §5.2: domain tag,
//!   bucket, NUL, stream, NUL, start and end offsets as LE u64, `inline`,
//!   the payload; built contiguously outside the timed region) and nothing
//!   else. A deduplicated retry hashes nothing, so
//!   the producer floor replays the same request sequence and hashes only
//!   the accepted appends. `cargo xtask bench` reports append / floor.
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
/// Samples of each small-append bench and of its floor. Many short samples
/// (about 50 µs each) rather than a few long ones: on a shared machine most
/// of them then run without being preempted, so the medians of a bench and
/// its floor compare.
const SMALL_SAMPLES: u32 = 1000;
/// Appends (or floor items) per sample.
const SMALL_SAMPLE_SIZE: u32 = 50;

fn main() {
    check_floor_items();
    divan::main();
}

/// The floors must hash the very items the appends hash: after two appends
/// to a fresh stream, the machine's integrity total equals the setsum of
/// the two items [`hash_item`] builds (checked in every run, smoke or full,
/// before anything is timed).
fn check_floor_items() {
    for (prefix, content_type, body) in [
        ("s-", OCTET, payload(100, 7)),
        ("j-", JSON, json_payload(100, 3)),
    ] {
        let ids = common::stream_ids(BUCKET, prefix, 3, 1);
        let mut machine = machine_with_streams(BUCKET, &ids, content_type);
        let len = body.len() as u64;
        let mut expected = setsum::Setsum::default();
        for k in 0..2 {
            let response = machine.apply(append(ids[0].clone(), content_type, body.clone(), None));
            common::expect_ok(&response, "floor check append");
            let item = item_bytes(&ids[0].stream_id, k * len, (k + 1) * len, &body);
            let (digest, _) = hash_item(Some(item));
            expected += setsum::Setsum::from_digest(digest);
        }
        let got = machine
            .integrity_snapshot(&ids[0])
            .map(|snapshot| snapshot.total_setsum);
        assert_eq!(
            got.as_deref(),
            Ok(expected.hexdigest().as_str()),
            "the floor's items must be the appends' integrity items"
        );
    }
}

/// Inline 100 B appends, no producer.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
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
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
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
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
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

/// Domain tag of an integrity item of a stream without affinity key
/// (spec 02 §5.2), written out here rather than taken from the crate under
/// test.
const ITEM_TAG_V1: &[u8] = b"ursula-stream-record-v1";

/// The integrity item of an inline append of `payload` at `[start, end)` to
/// stream `stream` of bucket [`BUCKET`], laid out as spec 02 §5.2 says:
/// one contiguous buffer, so the floor is the bare SHA3-256 pass over those
/// bytes, with no piecewise feeding.
fn item_bytes(stream: &str, start: u64, end: u64, payload: &[u8]) -> Vec<u8> {
    let mut item = Vec::with_capacity(64 + stream.len() + payload.len());
    item.extend_from_slice(ITEM_TAG_V1);
    item.extend_from_slice(BUCKET.as_bytes());
    item.push(0);
    item.extend_from_slice(stream.as_bytes());
    item.push(0);
    item.extend_from_slice(&start.to_le_bytes());
    item.extend_from_slice(&end.to_le_bytes());
    item.extend_from_slice(b"inline");
    item.extend_from_slice(payload);
    item
}

/// One floor input: the whole item, built outside the timed region. `None`:
/// a request whose append hashes nothing (a deduplicated retry).
type FloorInput = Option<Vec<u8>>;

/// Hashes one integrity item into a fresh setsum; returns what the timed
/// region must not drop.
fn hash_item(input: FloorInput) -> ([u8; 32], FloorInput) {
    let mut sum = setsum::Setsum::default();
    if let Some(item) = &input {
        sum.insert(item);
    }
    (sum.digest(), input)
}

/// The floor of a round-robin workload over [`STREAMS`] streams whose
/// every request is an accepted append of `body`.
fn round_robin_floor(bencher: Bencher, prefix: &str, body: &Bytes) {
    let ids = common::stream_ids(BUCKET, prefix, 3, STREAMS);
    let len = body.len() as u64;
    let mut tails = vec![0u64; STREAMS];
    let mut i = 0usize;
    bencher
        .with_inputs(|| {
            let s = i % STREAMS;
            i += 1;
            let start = tails[s];
            tails[s] += len;
            Some(item_bytes(&ids[s].stream_id, start, start + len, body))
        })
        .bench_local_values(hash_item);
}

/// Floor of `inline_100b_no_producer`.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
fn floor_inline_100b_no_producer(bencher: Bencher) {
    round_robin_floor(bencher, "s-", &payload(100, 7));
}

/// Floor of `inline_100b_producer_10pct_retries`: the same request
/// sequence (same PRNG); a retry hashes nothing.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
fn floor_inline_100b_producer_10pct_retries(bencher: Bencher) {
    let ids = common::stream_ids(BUCKET, "s-", 3, STREAMS);
    let body = payload(100, 7);
    let len = body.len() as u64;
    let mut next_seq = vec![0u64; STREAMS];
    let mut tails = vec![0u64; STREAMS];
    let mut rng = XorShift::new(0x5eed);
    let mut i = 0usize;
    bencher
        .with_inputs(|| {
            let s = i % STREAMS;
            i += 1;
            if next_seq[s] > 0 && rng.below(10) == 0 {
                return None;
            }
            next_seq[s] += 1;
            let start = tails[s];
            tails[s] += len;
            Some(item_bytes(&ids[s].stream_id, start, start + len, &body))
        })
        .bench_local_values(hash_item);
}

/// Floor of `inline_100b_json_3_records`.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
fn floor_inline_100b_json_3_records(bencher: Bencher) {
    round_robin_floor(bencher, "j-", &json_payload(100, 3));
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
