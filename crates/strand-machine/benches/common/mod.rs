//! Fixtures shared by the bench binaries: command builders, a tiny
//! deterministic PRNG, the `BENCH name=value unit` report line that
//! `cargo xtask bench` parses, and the counting allocator.

// Each bench binary uses a different subset of these helpers.
#![allow(dead_code)]

pub(crate) mod alloc;

use bytes::Bytes;
use strand_machine::{StreamCommand, StreamResponse, StreamStateMachine};
use strand_model::{BucketStreamId, ProducerRequest};

/// Content type of binary streams.
pub(crate) const OCTET: &str = "application/octet-stream";
/// Content type of JSON streams.
pub(crate) const JSON: &str = "application/json";
/// The fixed clock of every command (no TTLs are set, so time is inert).
pub(crate) const NOW_MS: u64 = 1_000;

/// Prints one machine-readable figure for `cargo xtask bench`.
pub(crate) fn report(name: &str, value: f64, unit: &str) {
    println!("BENCH {name}={value} {unit}");
}

/// Whether the binary runs as a benchmark (`cargo bench` passes `--bench`)
/// rather than as a smoke test (`cargo test --benches`), where the custom
/// figures use small sizes so the run stays fast.
pub(crate) fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// `full` in a benchmark run, `smoke` otherwise.
pub(crate) fn scale(full: usize, smoke: usize) -> usize {
    if full_run() { full } else { smoke }
}

/// xorshift64: deterministic, dependency-free pseudo-random numbers.
pub(crate) struct XorShift(u64);

impl XorShift {
    /// A generator from a non-zero seed.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (`n > 0`; the modulo bias is irrelevant here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Panics with `what` when `response` is an error: a bench that measures
/// a failing path would measure the wrong thing.
pub(crate) fn expect_ok(response: &StreamResponse, what: &str) {
    assert!(!response.is_error(), "{what}: {response:?}");
}

/// Creates bucket `bucket`.
pub(crate) fn create_bucket(machine: &mut StreamStateMachine, bucket: &str) {
    let response = machine.apply(StreamCommand::CreateBucket {
        bucket_id: bucket.to_owned(),
    });
    expect_ok(&response, "create bucket");
}

/// A `CreateStream` of `id` with no initial payload and no producer.
pub(crate) fn create_stream(id: BucketStreamId, content_type: &str) -> StreamCommand {
    StreamCommand::CreateStream {
        stream_id: id,
        content_type: content_type.to_owned(),
        initial_payload: Bytes::new(),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: NOW_MS,
    }
}

/// An inline `Append` of `payload` to `id`.
pub(crate) fn append(
    id: BucketStreamId,
    content_type: &str,
    payload: Bytes,
    producer: Option<ProducerRequest>,
) -> StreamCommand {
    StreamCommand::Append {
        stream_id: id,
        content_type: Some(content_type.to_owned()),
        payload,
        close_after: false,
        stream_seq: None,
        producer,
        now_ms: NOW_MS,
        record_match: None,
    }
}

/// A producer request of `producer_id`, epoch 1, sequence `seq`.
pub(crate) fn producer(producer_id: &str, seq: u64) -> ProducerRequest {
    ProducerRequest {
        producer_id: producer_id.to_owned(),
        producer_epoch: 1,
        producer_seq: seq,
    }
}

/// `count` stream ids `bucket/<prefix><i>`, `i` zero-padded to `width`.
pub(crate) fn stream_ids(
    bucket: &str,
    prefix: &str,
    width: usize,
    count: usize,
) -> Vec<BucketStreamId> {
    (0..count)
        .map(|i| BucketStreamId::new(bucket, format!("{prefix}{i:0width$}")))
        .collect()
}

/// A machine holding bucket `bucket` and one empty stream per id.
pub(crate) fn machine_with_streams(
    bucket: &str,
    ids: &[BucketStreamId],
    content_type: &str,
) -> StreamStateMachine {
    let mut machine = StreamStateMachine::new();
    create_bucket(&mut machine, bucket);
    for id in ids {
        let response = machine.apply(create_stream(id.clone(), content_type));
        expect_ok(&response, "create stream");
    }
    machine
}

/// A payload of `len` bytes, every byte `fill`.
pub(crate) fn payload(len: usize, fill: u8) -> Bytes {
    Bytes::from(vec![fill; len])
}

/// A JSON payload of exactly `len` bytes holding `records` newline-
/// terminated records (`{"v":"xxx…"}\n`), for `application/json` streams.
pub(crate) fn json_payload(len: usize, records: usize) -> Bytes {
    let per = len / records;
    let mut out = Vec::with_capacity(len);
    for r in 0..records {
        let this = if r + 1 == records {
            len - out.len()
        } else {
            per
        };
        // `{"v":"` + filler + `"}` + `\n`
        let filler = this.saturating_sub(9);
        out.extend_from_slice(b"{\"v\":\"");
        out.extend(std::iter::repeat_n(b'x', filler));
        out.extend_from_slice(b"\"}\n");
    }
    Bytes::from(out)
}
