//! Heap and allocation figures, measured with the counting allocator of
//! `common/alloc.rs`. No timing: the binary only prints `BENCH` lines.
//!
//! * `heap_bytes_per_empty_stream`: live heap growth while 100 k streams
//!   are created with an empty payload, divided by 100 k (and the peak
//!   above the starting point, per stream: transient growth of maps).
//! * `allocs_per_inline_append_*`: allocation events (`alloc`,
//!   `alloc_zeroed`, `realloc`) inside `apply` only, per 100 B inline
//!   append spread over 100 streams, after a warm-up round. Commands,
//!   including their `Bytes` payloads, are built outside the counted
//!   region and responses are dropped outside it.
//! * `heap_bytes_per_empty_fork`: live heap growth while 100 k empty forks
//!   of one source are made (`PinForkSource` + `CreateFork`, as the engine
//!   does), divided by 100 k: the fork's own stream and the source's pin.
//! * `heap_bytes_per_receipt`: one producer makes 200 k accepted appends of
//!   16 B to one stream; the same 200 k appends are made without a producer
//!   on a fresh machine; the difference of the two live heap growths,
//!   divided by 200 k, is what the producer's bookkeeping costs per
//!   receipt (the payloads, hot chunks and message records are the same on
//!   both sides and cancel out). Vector capacity slack is included: it is
//!   heap the machine holds.
//! * `heap_bytes_per_cold_chunk`: 1 000 streams, each flushed 20 times;
//!   every round is one shared object holding a 512 B piece of every
//!   stream (as the flush worker packs them), with its BLAKE3 digest. The
//!   same appends and flushes into exclusive objects (which leave no stored
//!   chunk) on a second machine; the difference of the two live heap
//!   growths, divided by the stored chunks, is what one costs.
//! * `allocs_per_stream_write_snapshot_{json,binary}`: allocation events
//!   inside `write_snapshot` per stream, on 1 000 streams shaped like the
//!   snapshot bench's (2 KiB hot in 8 appends by 3 producers each), written
//!   into a vector reserved beforehand (so the output's growth is not
//!   counted), divided by the stream count.

mod common;

use bytes::Bytes;
use common::alloc::{Counting, count_allocations, live_bytes, peak_bytes, reset_peak};
use common::{
    JSON, OCTET, append, create_bucket, create_stream, expect_ok, json_payload,
    machine_with_streams, payload, producer, report, scale, stream_ids,
};
use strand_machine::{StreamStateMachine, write_snapshot};
use strand_snapshot::SnapshotFormat;

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    empty_streams();
    empty_forks();
    allocations_per_append();
    receipts();
    cold_chunks();
    snapshot_allocations();
}

/// Heap bytes per stored (shared) cold chunk.
fn cold_chunks() {
    let streams = scale(1_000, 50);
    let rounds = 20;
    let shared = flushed_growth(streams, rounds, true);
    let exclusive = flushed_growth(streams, rounds, false);
    report(
        "heap_bytes_per_cold_chunk",
        shared.saturating_sub(exclusive) as f64 / (streams * rounds) as f64,
        "bytes",
    );
}

/// Live heap growth of `rounds` rounds of a 512 B append and its flush to
/// each of `streams` streams (into one shared object per round, or into
/// an exclusive object per piece).
fn flushed_growth(streams: usize, rounds: usize, shared: bool) -> usize {
    let ids = stream_ids("coldmem", "s-", 5, streams);
    let mut machine = machine_with_streams("coldmem", &ids, OCTET);
    let piece = 512u64;
    let body = payload(piece as usize, 7);
    let digest = blake3::hash(&body).to_hex().to_string();
    let object_size = piece * streams as u64;
    let before = live_bytes();
    for round in 0..rounds as u64 {
        let object = format!("g/000/p/{:013}-{round:016x}.pack", 1_733_000_000_000u64);
        for (i, id) in ids.iter().enumerate() {
            let response = machine.apply(append(id.clone(), OCTET, body.clone(), None));
            expect_ok(&response, "append");
            let (s3_path, object_size, object_offset) = if shared {
                (object.clone(), object_size, piece * i as u64)
            } else {
                (format!("{object}-{i}"), piece, 0)
            };
            let response = machine.apply(strand_machine::StreamCommand::FlushCold {
                stream_id: id.clone(),
                chunk: strand_model::ColdChunkRef {
                    start_offset: round * piece,
                    end_offset: (round + 1) * piece,
                    s3_path,
                    object_size,
                    object_offset,
                    shared_object: shared,
                    payload_digest: digest.clone(),
                },
            });
            expect_ok(&response, "flush");
        }
    }
    let growth = live_bytes().saturating_sub(before);
    drop(machine);
    growth
}

/// Allocation events per stream inside `write_snapshot`, both formats.
fn snapshot_allocations() {
    let streams = scale(1_000, 50);
    let ids = stream_ids("snapalloc", "s-", 5, streams);
    let mut machine = machine_with_streams("snapalloc", &ids, OCTET);
    let names: Vec<String> = (0..3).map(|p| format!("writer-{p}")).collect();
    for id in &ids {
        for a in 0..8usize {
            let response = machine.apply(append(
                id.clone(),
                OCTET,
                payload(256, 1),
                Some(producer(&names[a % 3], (a / 3) as u64)),
            ));
            expect_ok(&response, "snapshot fixture append");
        }
    }
    for (format, name) in [
        (
            SnapshotFormat::Json,
            "allocs_per_stream_write_snapshot_json",
        ),
        (
            SnapshotFormat::Binary,
            "allocs_per_stream_write_snapshot_binary",
        ),
    ] {
        let mut out = Vec::with_capacity(streams * 16 * 1024);
        let (result, events) = count_allocations(|| write_snapshot(&machine, format, &mut out));
        assert!(result.is_ok(), "write_snapshot: {result:?}");
        report(name, events as f64 / streams as f64, "allocs");
    }
}

/// Heap bytes per stream created with an empty payload.
fn empty_streams() {
    let count = scale(100_000, 2_000);
    let ids = stream_ids("memory", "e-", 6, count);
    let mut machine = StreamStateMachine::new();
    create_bucket(&mut machine, "memory");
    // The ids are built beforehand and cloned into each command, so the
    // growth counts the id strings the machine keeps, not the vector.
    let before = live_bytes();
    reset_peak();
    for id in &ids {
        let response = machine.apply(create_stream(id.clone(), OCTET));
        expect_ok(&response, "create stream");
    }
    let after = live_bytes();
    let peak = peak_bytes();
    let n = count as f64;
    report(
        "heap_bytes_per_empty_stream",
        after.saturating_sub(before) as f64 / n,
        "bytes",
    );
    report(
        "peak_heap_bytes_per_empty_stream",
        peak.saturating_sub(before) as f64 / n,
        "bytes",
    );
    drop(machine);
}

/// Heap bytes per empty fork of one source (the fork's stream plus the
/// source's pin).
fn empty_forks() {
    let count = scale(100_000, 2_000);
    let ids = stream_ids("memory", "f-", 6, count);
    let source = strand_model::BucketStreamId::new("memory", "source");
    let mut machine = StreamStateMachine::new();
    create_bucket(&mut machine, "memory");
    expect_ok(
        &machine.apply(create_stream(source.clone(), OCTET)),
        "create source",
    );
    let before = live_bytes();
    for id in &ids {
        let pinned = machine.apply(strand_machine::StreamCommand::PinForkSource {
            stream_id: source.clone(),
            fork_stream_id: id.clone(),
            fork_offset: None,
            now_ms: 1_000,
        });
        let strand_machine::StreamResponse::ForkSourcePinned { pin, .. } = pinned else {
            panic!("pin refused: {pinned:?}");
        };
        let created = machine.apply(strand_machine::StreamCommand::CreateFork {
            stream_id: id.clone(),
            source_stream_id: source.clone(),
            fork_offset: 0,
            fork_offset_given: false,
            pin,
            sub_offset: 0,
            inherited_start: 0,
            first_record: None,
            content_type: OCTET.to_owned(),
            prefix: Bytes::new(),
            initial_payload: Bytes::new(),
            close_after: false,
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
            attrs: None,
            now_ms: 1_000,
        });
        expect_ok(&created, "create fork");
    }
    let after = live_bytes();
    report(
        "heap_bytes_per_empty_fork",
        after.saturating_sub(before) as f64 / count as f64,
        "bytes",
    );
    drop(machine);
}

/// Which inline-append shape to count.
#[derive(Clone, Copy)]
enum Shape {
    /// Binary stream, no producer.
    NoProducer,
    /// Binary stream, one producer per stream, no retries.
    Producer,
    /// JSON stream, 3 records per append, no producer.
    Json,
}

/// Allocation events per inline 100 B append, counted inside `apply`.
fn allocations_per_append() {
    for (shape, name) in [
        (Shape::NoProducer, "allocs_per_inline_append_no_producer"),
        (Shape::Producer, "allocs_per_inline_append_producer"),
        (Shape::Json, "allocs_per_inline_append_json"),
    ] {
        report(name, count_append_allocations(shape), "allocs");
    }
}

fn count_append_allocations(shape: Shape) -> f64 {
    const STREAMS: usize = 100;
    const WARMUP_ROUNDS: usize = 10;
    let rounds = scale(1_000, 20);
    let content_type = if matches!(shape, Shape::Json) {
        JSON
    } else {
        OCTET
    };
    let body = if matches!(shape, Shape::Json) {
        json_payload(100, 3)
    } else {
        payload(100, 7)
    };
    let ids = stream_ids("alloc", "s-", 3, STREAMS);
    let mut machine = machine_with_streams("alloc", &ids, content_type);
    let mut total = 0u64;
    for round in 0..WARMUP_ROUNDS + rounds {
        // One producer per stream: its sequence number is the round.
        let seq = round as u64;
        for id in &ids {
            let request = matches!(shape, Shape::Producer).then(|| producer("writer", seq));
            let command = append(
                id.clone(),
                content_type,
                Bytes::copy_from_slice(&body),
                request,
            );
            let (response, events) = count_allocations(|| machine.apply(command));
            expect_ok(&response, "append");
            drop(response);
            if round >= WARMUP_ROUNDS {
                total += events;
            }
        }
    }
    total as f64 / (rounds * STREAMS) as f64
}

/// Heap bytes per producer receipt.
fn receipts() {
    let appends = scale(200_000, 2_000);
    let with_producer = append_growth(appends, true);
    let without = append_growth(appends, false);
    let n = appends as f64;
    report(
        "heap_bytes_per_receipt",
        with_producer.saturating_sub(without) as f64 / n,
        "bytes",
    );
    report(
        "heap_bytes_per_16b_append_no_producer",
        without as f64 / n,
        "bytes",
    );
}

/// Live heap growth of `appends` accepted 16 B appends to one fresh stream
/// (one producer making them, or none).
fn append_growth(appends: usize, with_producer: bool) -> usize {
    let ids = stream_ids("receipts", "s-", 1, 1);
    let mut machine = machine_with_streams("receipts", &ids, OCTET);
    let body = payload(16, 3);
    let before = live_bytes();
    for seq in 0..appends as u64 {
        let request = with_producer.then(|| producer("writer", seq));
        let response = machine.apply(append(
            ids[0].clone(),
            OCTET,
            Bytes::copy_from_slice(&body),
            request,
        ));
        expect_ok(&response, "append");
    }
    let growth = live_bytes().saturating_sub(before);
    drop(machine);
    growth
}
