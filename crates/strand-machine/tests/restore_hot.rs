//! Restoring hot segments the reference accepts but a machine cannot hold
//! as they are (spec 07 §5, check 15: unordered, overlapping, past the
//! tail): the restored buffer keeps each reachable byte once, in order,
//! and the machine's invariants hold.

#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use strand_machine::{StreamCommand, StreamResponse, StreamStateMachine};
use strand_model::{BucketStreamId, HotPayloadSegment, MachineProfile};

fn segment(start: u64, end: u64, payload_start: usize, payload_end: usize) -> HotPayloadSegment {
    HotPayloadSegment {
        start_offset: start,
        end_offset: end,
        payload_start,
        payload_end,
    }
}

/// A machine with one stream holding `abcdef` in its hot buffer.
fn machine() -> StreamStateMachine {
    let mut m = StreamStateMachine::with_profile(MachineProfile::Corrected);
    m.apply(StreamCommand::CreateBucket {
        bucket_id: "acme".into(),
    });
    let r = m.apply(StreamCommand::CreateStream {
        stream_id: BucketStreamId::new("acme", "s"),
        content_type: "text/plain".into(),
        initial_payload: Bytes::from_static(b"abcdef"),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 1,
    });
    assert!(matches!(r, StreamResponse::Created { .. }), "{r:?}");
    m
}

/// Restores `machine()`'s snapshot with its entry's payload and segments
/// replaced; the restored stream's hot bytes.
fn restored(payload: &[u8], segments: Vec<HotPayloadSegment>) -> Vec<u8> {
    let mut snapshot = machine().snapshot();
    let entry = &mut snapshot.streams[0];
    entry.payload = payload.to_vec();
    entry.hot_segments = segments;
    let m = StreamStateMachine::restore(snapshot).unwrap();
    m.check_invariants().unwrap();
    let id = BucketStreamId::new("acme", "s");
    let mut out = Vec::new();
    for s in m.hot_segments(&id) {
        assert!(s.end_offset <= 6, "{s:?}");
        out.extend_from_slice(&m.snapshot().streams[0].payload[s.payload_start..s.payload_end]);
    }
    out
}

#[test]
fn unordered_overlapping_and_past_the_tail() {
    // Unordered.
    assert_eq!(
        restored(b"defabc", vec![segment(3, 6, 0, 3), segment(0, 3, 3, 6)]),
        b"abcdef"
    );
    // Past the tail (6): the bytes beyond it are not the stream's.
    assert_eq!(
        restored(b"abcdefgh", vec![segment(0, 4, 0, 4), segment(4, 8, 4, 8)]),
        b"abcdef"
    );
    // Overlapping: each byte from the first segment holding it.
    assert_eq!(
        restored(b"abcdefcd", vec![segment(0, 6, 0, 6), segment(2, 4, 6, 8)]),
        b"abcdef"
    );
}
