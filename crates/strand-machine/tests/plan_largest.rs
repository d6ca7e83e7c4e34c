//! `plan_largest_cold_flush_batch`: strand's own flush planner, which
//! drains the streams holding the most hot bytes first.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use strand_machine::{StreamCommand, StreamStateMachine};
use strand_model::{BucketStreamId, ColdChunkRef};

fn id(name: &str) -> BucketStreamId {
    BucketStreamId::new("acme", name)
}

/// A machine with one stream per `(name, hot bytes)`, created in order.
fn machine(streams: &[(&str, usize)]) -> StreamStateMachine {
    let mut m = StreamStateMachine::new();
    m.apply(StreamCommand::CreateBucket {
        bucket_id: "acme".into(),
    });
    for (name, len) in streams {
        let r = m.apply(StreamCommand::CreateStream {
            stream_id: id(name),
            content_type: "application/octet-stream".into(),
            initial_payload: Bytes::from(vec![b'x'; *len]),
            close_after: false,
            stream_seq: None,
            producer: None,
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
            attrs: None,
            now_ms: 1,
        });
        assert!(!r.is_error(), "{r:?}");
    }
    m
}

/// (stream, start, end) of each planned piece.
fn pieces(
    m: &StreamStateMachine,
    min: usize,
    piece: usize,
    batch: usize,
    count: usize,
) -> Vec<(String, u64, u64)> {
    m.plan_largest_cold_flush_batch(min, piece, batch, count)
        .into_iter()
        .map(|c| (c.stream_id.stream_id.clone(), c.start_offset, c.end_offset))
        .collect()
}

#[test]
fn the_largest_streams_come_first_ties_in_id_order() {
    let m = machine(&[("a", 10), ("b", 30), ("c", 20), ("d", 30)]);
    assert_eq!(
        pieces(&m, 1, 100, 1000, 10),
        [
            ("b".into(), 0, 30),
            ("d".into(), 0, 30),
            ("c".into(), 0, 20),
            ("a".into(), 0, 10)
        ]
    );
}

#[test]
fn streams_below_the_minimum_are_left_hot() {
    let m = machine(&[("a", 10), ("b", 30), ("c", 20)]);
    assert_eq!(
        pieces(&m, 20, 100, 1000, 10),
        [("b".into(), 0, 30), ("c".into(), 0, 20)]
    );
    assert!(pieces(&m, 31, 100, 1000, 10).is_empty());
}

#[test]
fn pieces_batch_and_count_are_bounded() {
    let m = machine(&[("a", 10), ("b", 25)]);
    // A stream larger than a piece gives several, in order.
    assert_eq!(
        pieces(&m, 1, 10, 1000, 10),
        [
            ("b".into(), 0, 10),
            ("b".into(), 10, 20),
            ("b".into(), 20, 25),
            ("a".into(), 0, 10)
        ]
    );
    assert_eq!(pieces(&m, 1, 10, 1000, 2).len(), 2);
    // The batch stops before a piece that would pass it, after the first.
    assert_eq!(pieces(&m, 1, 100, 30, 10), [("b".into(), 0, 25)]);
    assert_eq!(pieces(&m, 1, 100, 5, 10), [("b".into(), 0, 25)]);
    assert!(pieces(&m, 1, 0, 30, 10).is_empty());
    assert!(pieces(&m, 1, 10, 0, 10).is_empty());
    assert!(pieces(&m, 1, 10, 30, 0).is_empty());
}

#[test]
fn pieces_are_the_hot_bytes_with_their_digest() {
    let mut m = machine(&[("a", 0)]);
    for part in [&b"hello "[..], b"wide ", b"world"] {
        let r = m.apply(StreamCommand::Append {
            stream_id: id("a"),
            content_type: Some("application/octet-stream".into()),
            payload: Bytes::copy_from_slice(part),
            close_after: false,
            stream_seq: None,
            producer: None,
            now_ms: 2,
            record_match: None,
        });
        assert!(!r.is_error(), "{r:?}");
    }
    let planned = m.plan_largest_cold_flush_batch(1, 8, 1000, 10);
    let got: Vec<(u64, u64, Vec<u8>, String)> = planned
        .iter()
        .map(|p| {
            let bytes: Vec<u8> = p.slices.iter().flat_map(|s| s.iter().copied()).collect();
            (
                p.start_offset,
                p.end_offset,
                bytes,
                p.payload_digest.clone(),
            )
        })
        .collect();
    let digest = |b: &[u8]| blake3::hash(b).to_hex().to_string();
    assert_eq!(
        got,
        [
            (0, 8, b"hello wi".to_vec(), digest(b"hello wi")),
            (8, 16, b"de world".to_vec(), digest(b"de world")),
        ]
    );
}

#[test]
fn a_flushed_prefix_is_not_planned_again() {
    let mut m = machine(&[("a", 10), ("b", 30)]);
    let planned = m.plan_largest_cold_flush_batch(1, 100, 1000, 1);
    let b = planned.first().unwrap();
    let r = m.apply(StreamCommand::FlushCold {
        stream_id: b.stream_id.clone(),
        chunk: ColdChunkRef {
            start_offset: b.start_offset,
            end_offset: b.end_offset,
            s3_path: "g0/p/one.pack".into(),
            object_size: b.end_offset - b.start_offset,
            object_offset: 0,
            shared_object: true,
            payload_digest: b.payload_digest.clone(),
        },
    });
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(pieces(&m, 1, 100, 1000, 10), [("a".into(), 0, 10)]);
}
