//! Snapshot and restore of a large group: 10 k streams with 2 KiB hot
//! each, written by 3 producers per stream (8 appends of 256 B, producers
//! taking turns, so 3, 3 and 2 appends and receipts each).
//!
//! * `snapshot_encode_json`: `write_snapshot(.., SnapshotFormat::Json, ..)`
//!   (the reference's JSON bytes, streamed entry by entry).
//! * `snapshot_decode_restore_json`: `restore_from_slice` of that JSON.
//! * `snapshot_encode_serde_json` / `snapshot_decode_restore_serde_json`: the
//!   same through plain `serde_json` and `snapshot()` / `restore()`, for
//!   comparison.
//!
//! * `snapshot_encode_binary`: `write_snapshot(.., SnapshotFormat::Binary, ..)`
//!   into a `Vec<u8>`.
//! * `snapshot_decode_restore_binary`: `restore_from` of those bytes.
//! * `snapshot_build_only` / `snapshot_restore_only`: `snapshot()` and
//!   `restore()` alone, strand's own share of the serde path.
//! * `snapshot_clone_machine`: `StreamStateMachine::clone` of the fixture,
//!   what a group task spends before handing its state to an encoder off
//!   the task (the engine's replicated snapshots do that).
//!
//! The binary prints `BENCH snapshot_json_bytes=<n> bytes` and
//! `BENCH snapshot_binary_bytes=<n> bytes` so that `cargo xtask bench` can
//! turn the median times into MiB/s of each encoding.

mod common;

use common::{OCTET, append, expect_ok, machine_with_streams, producer, report, stream_ids};
use divan::Bencher;
use strand_machine::{StreamStateMachine, restore_from, restore_from_slice, write_snapshot};
use strand_snapshot::{SnapshotFormat, StreamSnapshot};

/// Streams in the fixture.
const STREAMS: usize = 10_000;
/// Producers per stream.
const PRODUCERS: usize = 3;
/// Appends per stream (2 KiB in total).
const APPENDS: usize = 8;
/// Bytes per append.
const CHUNK: usize = 256;

/// The fixture machine (streams scaled down in smoke runs).
fn fixture() -> StreamStateMachine {
    let ids = stream_ids("snapshot", "s-", 5, common::scale(STREAMS, 200));
    let mut machine = machine_with_streams("snapshot", &ids, OCTET);
    let names: Vec<String> = (0..PRODUCERS).map(|p| format!("writer-{p}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let fill = u8::try_from(i % 251).unwrap_or(0);
        for a in 0..APPENDS {
            let name = &names[a % PRODUCERS];
            let seq = u64::try_from(a / PRODUCERS).unwrap_or(0);
            let response = machine.apply(append(
                id.clone(),
                OCTET,
                common::payload(CHUNK, fill),
                Some(producer(name, seq)),
            ));
            expect_ok(&response, "fixture append");
        }
    }
    machine
}

fn encode(machine: &StreamStateMachine) -> Vec<u8> {
    serde_json::to_vec(&machine.snapshot()).expect("snapshot encodes")
}

fn encode_json_codec(machine: &StreamStateMachine) -> Vec<u8> {
    let mut out = Vec::new();
    write_snapshot(machine, SnapshotFormat::Json, &mut out).expect("snapshot encodes");
    out
}

fn encode_binary(machine: &StreamStateMachine) -> Vec<u8> {
    let mut out = Vec::new();
    write_snapshot(machine, SnapshotFormat::Binary, &mut out).expect("snapshot encodes");
    out
}

fn main() {
    let machine = fixture();
    let json = encode(&machine);
    report("snapshot_json_bytes", json.len() as f64, "bytes");
    let binary = encode_binary(&machine);
    report("snapshot_binary_bytes", binary.len() as f64, "bytes");
    // Both encodings hold the same group.
    let from_binary = restore_from(binary.as_slice()).expect("binary snapshot restores");
    assert!(
        encode(&from_binary) == json,
        "binary round trip changes the snapshot"
    );
    assert!(
        encode_json_codec(&from_binary) == json,
        "the JSON codec differs from serde_json"
    );
    drop((machine, json, binary, from_binary));
    divan::main();
}

/// `write_snapshot` in the JSON format (the reference's bytes), into a
/// `Vec<u8>`.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn snapshot_encode_json(bencher: Bencher) {
    let machine = fixture();
    bencher.bench_local(|| encode_json_codec(&machine));
}

/// `restore_from_slice` of a JSON snapshot held in memory.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn snapshot_decode_restore_json(bencher: Bencher) {
    let json = encode(&fixture());
    bencher.bench_local(|| restore_from_slice(&json).expect("snapshot restores"));
}

/// `snapshot()` + plain `serde_json::to_vec` (no codec fast paths).
#[divan::bench(sample_count = 10, sample_size = 1)]
fn snapshot_encode_serde_json(bencher: Bencher) {
    let machine = fixture();
    bencher.bench_local(|| encode(&machine));
}

/// Plain `serde_json::from_slice::<StreamSnapshot>` + `restore`.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn snapshot_decode_restore_serde_json(bencher: Bencher) {
    let json = encode(&fixture());
    bencher.bench_local(|| {
        let snapshot: StreamSnapshot = serde_json::from_slice(&json).expect("snapshot decodes");
        StreamStateMachine::restore(snapshot).expect("snapshot restores")
    });
}

/// `write_snapshot` in the binary format, into a `Vec<u8>`.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn snapshot_encode_binary(bencher: Bencher) {
    let machine = fixture();
    bencher.bench_local(|| encode_binary(&machine));
}

/// `restore_from` of a binary snapshot.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn snapshot_decode_restore_binary(bencher: Bencher) {
    let binary = encode_binary(&fixture());
    bencher.bench_local(|| restore_from(binary.as_slice()).expect("snapshot restores"));
}

/// `clone` of the machine: what the group task pays before a snapshot is
/// encoded on a blocking thread.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn snapshot_clone_machine(bencher: Bencher) {
    let machine = fixture();
    bencher.bench_local(|| machine.clone());
}

/// `snapshot()` alone: strand's share of the serde encode path (the rest
/// is `serde_json` writing the value).
#[divan::bench(sample_count = 10, sample_size = 1)]
fn snapshot_build_only(bencher: Bencher) {
    let machine = fixture();
    bencher.bench_local(|| machine.snapshot());
}

/// `restore()` of a decoded snapshot alone (the decoded value is built
/// outside the timed region): strand's share of the serde decode path.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn snapshot_restore_only(bencher: Bencher) {
    let snapshot = fixture().snapshot();
    bencher
        .with_inputs(|| snapshot.clone())
        .bench_local_values(|s| StreamStateMachine::restore(s).expect("snapshot restores"));
}
