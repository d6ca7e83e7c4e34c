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
//! * before divan's benches, the same three ratios measured interleaved
//!   (`BENCH interleaved_floor_ratio_<bench>=<ratio> x`): one sample of
//!   appends and one of floor items back to back, 1000 pairs, the median of
//!   the pairs' ratios (see [`interleaved_floor_ratios`]).
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
use std::time::Instant;

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
    if runs_interleaved() {
        interleaved_floor_ratios();
    }
    divan::main();
}

/// Whether this run measures the interleaved ratios: not when listing the
/// benches, and not when a name filter leaves out every small-append bench.
fn runs_interleaved() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args
        .iter()
        .any(|a| a == "--list" || a == "--help" || a == "-h")
    {
        return false;
    }
    // divan's flags that take a value; everything else not starting with
    // `-` is a name filter.
    const WITH_VALUE: [&str; 9] = [
        "--color",
        "--skip",
        "--sort",
        "--sortr",
        "--timer",
        "--sample-count",
        "--sample-size",
        "--min-time",
        "--max-time",
    ];
    let mut filters = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if WITH_VALUE.contains(&arg.as_str()) {
            rest.next();
        } else if !arg.starts_with('-') {
            filters.push(arg.as_str());
        }
    }
    filters.is_empty()
        || filters
            .iter()
            .any(|f| "interleaved_inline_100b".contains(f))
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

/// The three small-append workloads, each with its floor.
#[derive(Clone, Copy)]
enum Workload {
    /// 100 B to octet-stream streams, no producer.
    NoProducer,
    /// 100 B to octet-stream streams, one producer per stream, 10 % retries.
    Producer,
    /// 100 B to JSON streams, 3 records per append.
    Json,
}

impl Workload {
    const ALL: [Workload; 3] = [Workload::NoProducer, Workload::Producer, Workload::Json];

    /// The bench's name without `floor_`, also the key of its figures.
    fn key(self) -> &'static str {
        match self {
            Workload::NoProducer => "inline_100b_no_producer",
            Workload::Producer => "inline_100b_producer_10pct_retries",
            Workload::Json => "inline_100b_json_3_records",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Workload::Json => "j-",
            _ => "s-",
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Workload::Json => JSON,
            _ => OCTET,
        }
    }

    fn body(self) -> Bytes {
        match self {
            Workload::Json => json_payload(100, 3),
            _ => payload(100, 7),
        }
    }
}

/// One request of a workload's deterministic sequence: round-robin over
/// [`STREAMS`] streams; with producers, every tenth request on average
/// (deterministic PRNG) is a retry of that stream's latest accepted
/// sequence number, as a client retrying after a lost ack would.
struct Requests {
    workload: Workload,
    ids: Vec<strand_model::BucketStreamId>,
    body: Bytes,
    /// Requests made so far.
    i: usize,
    /// Next producer sequence number per stream.
    next_seq: Vec<u64>,
    /// Tail offset per stream, as the appends so far left it.
    tails: Vec<u64>,
    rng: XorShift,
}

/// What one request is: its stream, its producer sequence and whether it
/// is a retry (which the machine deduplicates and hashes nothing for), and
/// where an accepted append starts.
struct Request {
    stream: usize,
    seq: Option<u64>,
    retry: bool,
    start: u64,
}

impl Requests {
    fn new(workload: Workload) -> Self {
        Self {
            workload,
            ids: common::stream_ids(BUCKET, workload.prefix(), 3, STREAMS),
            body: workload.body(),
            i: 0,
            next_seq: vec![0; STREAMS],
            tails: vec![0; STREAMS],
            rng: XorShift::new(0x5eed),
        }
    }

    /// A machine holding this workload's empty streams.
    fn machine(&self) -> strand_machine::StreamStateMachine {
        machine_with_streams(BUCKET, &self.ids, self.workload.content_type())
    }

    fn next_request(&mut self) -> Request {
        let s = self.i % STREAMS;
        self.i += 1;
        let start = self.tails[s];
        let (seq, retry) = match self.workload {
            Workload::Producer => {
                if self.next_seq[s] > 0 && self.rng.below(10) == 0 {
                    (Some(self.next_seq[s] - 1), true)
                } else {
                    self.next_seq[s] += 1;
                    (Some(self.next_seq[s] - 1), false)
                }
            }
            Workload::NoProducer | Workload::Json => (None, false),
        };
        if !retry {
            self.tails[s] += self.body.len() as u64;
        }
        Request {
            stream: s,
            seq,
            retry,
            start,
        }
    }

    /// The next request as the command the append bench applies (the
    /// payload a fresh copy, like a request body off the wire).
    fn next_command(&mut self) -> strand_machine::StreamCommand {
        let r = self.next_request();
        append(
            self.ids[r.stream].clone(),
            self.workload.content_type(),
            Bytes::copy_from_slice(&self.body),
            r.seq.map(|seq| producer("writer", seq)),
        )
    }

    /// The next request as the floor's input: the item its append hashes,
    /// or `None` for a retry.
    fn next_floor(&mut self) -> FloorInput {
        let r = self.next_request();
        let len = self.body.len() as u64;
        (!r.retry).then(|| {
            item_bytes(
                &self.ids[r.stream].stream_id,
                r.start,
                r.start + len,
                &self.body,
            )
        })
    }
}

/// The append bench of `workload`.
fn append_bench(bencher: Bencher, workload: Workload) {
    let mut requests = Requests::new(workload);
    let mut machine = requests.machine();
    bencher
        .with_inputs(|| requests.next_command())
        .bench_local_values(|command| machine.apply(command));
}

/// The floor bench of `workload`: the same request sequence, hashing only
/// the accepted appends' items.
fn floor_bench(bencher: Bencher, workload: Workload) {
    let mut requests = Requests::new(workload);
    bencher
        .with_inputs(|| requests.next_floor())
        .bench_local_values(hash_item);
}

/// Inline 100 B appends, no producer.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
fn inline_100b_no_producer(bencher: Bencher) {
    append_bench(bencher, Workload::NoProducer);
}

/// Inline 100 B appends, one producer per stream, 10 % retries.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
fn inline_100b_producer_10pct_retries(bencher: Bencher) {
    append_bench(bencher, Workload::Producer);
}

/// Inline 100 B appends to `application/json` streams, 3 records each.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
fn inline_100b_json_3_records(bencher: Bencher) {
    append_bench(bencher, Workload::Json);
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

/// Floor of `inline_100b_no_producer`.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
fn floor_inline_100b_no_producer(bencher: Bencher) {
    floor_bench(bencher, Workload::NoProducer);
}

/// Floor of `inline_100b_producer_10pct_retries`: the same request
/// sequence (same PRNG); a retry hashes nothing.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
fn floor_inline_100b_producer_10pct_retries(bencher: Bencher) {
    floor_bench(bencher, Workload::Producer);
}

/// Floor of `inline_100b_json_3_records`.
#[divan::bench(sample_count = SMALL_SAMPLES, sample_size = SMALL_SAMPLE_SIZE)]
fn floor_inline_100b_json_3_records(bencher: Bencher) {
    floor_bench(bencher, Workload::Json);
}

/// Sample pairs of the interleaved ratio (one sample of appends, one of
/// floor items, each [`SMALL_SAMPLE_SIZE`] requests): as many requests as
/// the divan benches make.
const INTERLEAVED_PAIRS: usize = SMALL_SAMPLES as usize;

/// Appends / floor measured interleaved: sample `k` of the appends and
/// sample `k` of the floor (the same positions of the same request
/// sequence) run back to back, in alternating order, and the figure is the
/// median of the per-pair time ratios. divan runs all of one bench's
/// samples before the next bench's, so on a machine whose speed drifts
/// (10–40 % here, from one second to the next) its two medians can come
/// from different speeds; a pair's two samples are microseconds apart.
///
/// Prints `BENCH interleaved_floor_ratio_<key>=<ratio> x` per workload, and
/// `BENCH interleaved_floor_samples=<n> pairs`.
fn interleaved_floor_ratios() {
    let pairs = common::scale(INTERLEAVED_PAIRS, 20);
    let size = SMALL_SAMPLE_SIZE as usize;
    for workload in Workload::ALL {
        let mut appends = Requests::new(workload);
        let mut machine = appends.machine();
        let mut floors = Requests::new(workload);
        let mut commands = Vec::with_capacity(size);
        let mut items = Vec::with_capacity(size);
        let mut responses = Vec::with_capacity(size);
        let mut digests = Vec::with_capacity(size);
        let mut ratios = Vec::with_capacity(pairs);
        for k in 0..pairs {
            commands.extend((0..size).map(|_| appends.next_command()));
            items.extend((0..size).map(|_| floors.next_floor()));
            let time_appends =
                |machine: &mut strand_machine::StreamStateMachine,
                 commands: &mut Vec<strand_machine::StreamCommand>,
                 responses: &mut Vec<strand_machine::StreamResponse>| {
                    let t = Instant::now();
                    responses.extend(commands.drain(..).map(|c| machine.apply(c)));
                    t.elapsed()
                };
            let time_floor =
                |items: &mut Vec<FloorInput>, digests: &mut Vec<([u8; 32], FloorInput)>| {
                    let t = Instant::now();
                    digests.extend(items.drain(..).map(hash_item));
                    t.elapsed()
                };
            let (a, f) = if k % 2 == 0 {
                let a = time_appends(&mut machine, &mut commands, &mut responses);
                (a, time_floor(&mut items, &mut digests))
            } else {
                let f = time_floor(&mut items, &mut digests);
                (time_appends(&mut machine, &mut commands, &mut responses), f)
            };
            for response in responses.drain(..) {
                common::expect_ok(&response, "interleaved append");
            }
            digests.clear();
            ratios.push(a.as_secs_f64() / f.as_secs_f64().max(1e-9));
        }
        ratios.sort_by(f64::total_cmp);
        let median = ratios[ratios.len() / 2];
        common::report(
            &format!("interleaved_floor_ratio_{}", workload.key()),
            median,
            "x",
        );
    }
    common::report("interleaved_floor_samples", pairs as f64, "pairs");
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
