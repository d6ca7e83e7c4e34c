//! Allocation budget of the inline append hot path: an inline append of
//! 100 B without producer must cost at most one heap allocation event
//! (`alloc`, `alloc_zeroed` or `realloc`) inside `apply`, on average over
//! many appends spread over 100 streams, once every stream has had a
//! warm-up round.
//!
//! This binary installs the counting global allocator of
//! `benches/common/alloc.rs`, so it must hold this test only: other tests
//! would run on that allocator too. Counting is per thread, so the harness
//! threads add nothing. It is deterministic: counts, not timings.

#![allow(clippy::unwrap_used)]

// Only the counter and `count_allocations` are used here.
#[allow(dead_code)]
#[path = "../benches/common/alloc.rs"]
mod alloc;

use alloc::{Counting, count_allocations};
use bytes::Bytes;
use strand_machine::{StreamCommand, StreamResponse, StreamStateMachine};
use strand_model::BucketStreamId;

#[global_allocator]
static GLOBAL: Counting = Counting;

const STREAMS: usize = 100;
const WARMUP_ROUNDS: usize = 10;
const ROUNDS: usize = 100;

fn append(stream_id: BucketStreamId, payload: Bytes) -> StreamCommand {
    StreamCommand::Append {
        stream_id,
        content_type: Some("application/octet-stream".to_owned()),
        payload,
        close_after: false,
        stream_seq: None,
        producer: None,
        now_ms: 1_000,
        record_match: None,
    }
}

#[test]
fn inline_append_without_producer_allocates_at_most_once() {
    // Debug builds check the machine's invariants after every command, and
    // that check allocates: measure the append path alone.
    strand_machine::set_debug_invariant_checks(false);
    let mut machine = StreamStateMachine::new();
    let created = machine.apply(StreamCommand::CreateBucket {
        bucket_id: "alloc".to_owned(),
    });
    assert!(!created.is_error(), "{created:?}");
    let ids: Vec<BucketStreamId> = (0..STREAMS)
        .map(|i| BucketStreamId::new("alloc", format!("s-{i:03}")))
        .collect();
    for id in &ids {
        let created = machine.apply(StreamCommand::CreateStream {
            stream_id: id.clone(),
            content_type: "application/octet-stream".to_owned(),
            initial_payload: Bytes::new(),
            close_after: false,
            stream_seq: None,
            producer: None,
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
            attrs: None,
            now_ms: 1_000,
        });
        assert!(!created.is_error(), "{created:?}");
    }

    let body = [7u8; 100];
    let mut counted = 0u64;
    let mut appends = 0u64;
    let mut offset = 0u64;
    for round in 0..WARMUP_ROUNDS + ROUNDS {
        for id in &ids {
            // Built (payload included) before the counted region.
            let command = append(id.clone(), Bytes::copy_from_slice(&body));
            let (response, events) = count_allocations(|| machine.apply(command));
            // Every append really lands at the expected offset.
            match response {
                StreamResponse::Appended {
                    offset: at,
                    next_offset,
                    deduplicated: false,
                    ..
                } => {
                    assert_eq!(at, offset);
                    assert_eq!(next_offset, offset + 100);
                }
                other => panic!("unexpected response {other:?}"),
            }
            if round >= WARMUP_ROUNDS {
                counted += events;
                appends += 1;
            }
        }
        offset += 100;
    }

    // The counter itself works: a visible allocation is seen.
    let (_v, seen) = count_allocations(|| Vec::<u8>::with_capacity(16));
    assert_eq!(seen, 1);

    let per_append = counted as f64 / appends as f64;
    assert!(
        per_append <= 1.0,
        "inline append without producer allocates {per_append:.2} times on average \
         ({counted} allocation events over {appends} appends); the budget is 1"
    );
}
