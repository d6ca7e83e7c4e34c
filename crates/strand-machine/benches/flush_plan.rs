//! Group-wide cold flush planning: `plan_next_cold_flush_batch(1, 4096,
//! 1 << 20, 256)` over 1 k, 10 k and 50 k streams holding 1 KiB of hot
//! bytes each (4 inline appends of 256 B, `application/octet-stream`,
//! bucket `benchcmp`, streams `flush-<i>` zero-padded to 5 digits, every
//! byte `i % 251`, as in the reference's fixture).
//!
//! The planner is a read-only query, so one prepared machine serves every
//! sample. `cargo xtask bench` reports the time per call and the 50k/1k
//! ratio (a planner linear in the stream count gives 50).

mod common;

use common::{OCTET, append, expect_ok, machine_with_streams, stream_ids};
use divan::Bencher;
use strand_machine::StreamStateMachine;

fn main() {
    divan::main();
}

/// Bytes per inline append of the fixture.
const CHUNK: usize = 256;
/// Appends per stream of the fixture.
const APPENDS: usize = 4;
/// The planner's `max_candidates`.
const MAX_CANDIDATES: usize = 256;

/// The fixture: `streams` streams with `APPENDS * CHUNK` hot bytes each.
fn fixture(streams: usize) -> StreamStateMachine {
    let ids = stream_ids("benchcmp", "flush-", 5, streams);
    let mut machine = machine_with_streams("benchcmp", &ids, OCTET);
    for (i, id) in ids.iter().enumerate() {
        let fill = u8::try_from(i % 251).unwrap_or(0);
        for _ in 0..APPENDS {
            let response = machine.apply(append(
                id.clone(),
                OCTET,
                common::payload(CHUNK, fill),
                None,
            ));
            expect_ok(&response, "fixture append");
        }
    }
    machine
}

/// Time per `plan_next_cold_flush_batch(1, 4096, 1 << 20, 256)` call.
#[divan::bench(args = [1_000, 10_000, 50_000], sample_count = 100, sample_size = 1)]
fn plan_next_cold_flush_batch(bencher: Bencher, streams: usize) {
    let machine = fixture(streams);
    // Check once that the measured call plans what it should: 256
    // candidates of one whole stream (1 KiB) each.
    let planned = machine
        .plan_next_cold_flush_batch(1, 4096, 1 << 20, MAX_CANDIDATES)
        .expect("planning succeeds");
    assert_eq!(planned.len(), MAX_CANDIDATES.min(streams));
    assert!(planned.iter().all(|c| c.payload.len() == APPENDS * CHUNK));
    bencher.bench_local(|| machine.plan_next_cold_flush_batch(1, 4096, 1 << 20, MAX_CANDIDATES));
}
