//! `read_hot_at` and `producer_position`: the zero-copy read and the
//! producer lookup a server needs beside the reference API.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use strand_machine::{StreamCommand, StreamErrorCode, StreamResponse, StreamStateMachine};
use strand_model::{BucketStreamId, ColdChunkRef, ProducerRequest};

fn id() -> BucketStreamId {
    BucketStreamId::new("acme", "log")
}

fn machine_with(payloads: &[&'static [u8]]) -> (StreamStateMachine, Vec<Bytes>) {
    let mut m = StreamStateMachine::new();
    m.apply(StreamCommand::CreateBucket {
        bucket_id: "acme".into(),
    });
    m.apply(StreamCommand::CreateStream {
        stream_id: id(),
        content_type: "text/plain".into(),
        initial_payload: Bytes::new(),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 1,
    });
    let mut kept = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let payload = Bytes::from_static(p);
        kept.push(payload.clone());
        let r = m.apply(StreamCommand::Append {
            stream_id: id(),
            content_type: Some("text/plain".into()),
            payload,
            close_after: false,
            stream_seq: None,
            producer: Some(ProducerRequest {
                producer_id: "w".into(),
                producer_epoch: 2,
                producer_seq: u64::try_from(i).unwrap(),
            }),
            now_ms: 2,
            record_match: None,
        });
        assert!(!r.is_error(), "{r:?}");
    }
    (m, kept)
}

#[test]
fn reads_slices_of_the_appended_buffers_without_copying() {
    let (m, kept) = machine_with(&[b"hello ", b"wide ", b"world"]);
    let read = m.read_hot_at(&id(), 3, 1 << 20, 5).unwrap();
    assert_eq!((read.offset, read.next_offset), (3, 16));
    assert!(read.up_to_date && !read.closed);
    let joined: Vec<u8> = read.slices.iter().flat_map(|s| s.iter().copied()).collect();
    assert_eq!(joined, b"lo wide world");
    // The slices point into the appended buffers themselves.
    assert_eq!(read.slices.len(), 3);
    assert_eq!(read.slices[1].as_ptr(), kept[1].as_ptr());
    assert_eq!(read.slices[0].as_ptr(), kept[0][3..].as_ptr());
    // The same bytes as the reference's copying read.
    assert_eq!(m.read(&id(), 3, 1 << 20).unwrap().payload, joined);
}

#[test]
fn pages_and_bounds() {
    let (m, _) = machine_with(&[b"abcdef", b"ghij"]);
    let page = m.read_hot_at(&id(), 0, 8, 5).unwrap();
    assert_eq!(
        (page.next_offset, page.up_to_date, page.len()),
        (8, false, 8)
    );
    let tail = m.read_hot_at(&id(), 10, 8, 5).unwrap();
    assert!(tail.is_empty() && tail.up_to_date && tail.slices.is_empty());
    let beyond = m.read_hot_at(&id(), 11, 8, 5).unwrap_err();
    assert_eq!(beyond.error_code(), Some(StreamErrorCode::OffsetOutOfRange));
    let missing = m
        .read_hot_at(&BucketStreamId::new("acme", "nope"), 0, 8, 5)
        .unwrap_err();
    assert_eq!(missing.error_code(), Some(StreamErrorCode::StreamNotFound));
}

#[test]
fn a_flushed_range_is_not_hot() {
    let (mut m, _) = machine_with(&[b"abcdef", b"ghij"]);
    let r = m.apply(StreamCommand::FlushCold {
        stream_id: id(),
        chunk: ColdChunkRef {
            start_offset: 0,
            end_offset: 6,
            s3_path: "cold/acme/log/0-6".into(),
            object_size: 6,
            ..Default::default()
        },
    });
    assert!(matches!(r, StreamResponse::ColdFlushed { .. }), "{r:?}");
    let err = m.read_hot_at(&id(), 0, 100, 5).unwrap_err();
    assert_eq!(err.error_code(), Some(StreamErrorCode::InvalidColdFlush));
    let hot = m.read_hot_at(&id(), 6, 100, 5).unwrap();
    assert_eq!(hot.slices, [Bytes::from_static(b"ghij")]);
}

#[test]
fn expiry_is_tested_against_the_callers_time() {
    let mut m = StreamStateMachine::new();
    m.apply(StreamCommand::CreateBucket {
        bucket_id: "acme".into(),
    });
    m.apply(StreamCommand::CreateStream {
        stream_id: id(),
        content_type: "text/plain".into(),
        initial_payload: Bytes::from_static(b"x"),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: Some(1),
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 1_000,
    });
    assert!(m.read_hot_at(&id(), 0, 10, 1_999).is_ok());
    let gone = m.read_hot_at(&id(), 0, 10, 2_000).unwrap_err();
    assert_eq!(gone.error_code(), Some(StreamErrorCode::StreamNotFound));
}

#[test]
fn producer_position_is_the_highest_accepted_sequence() {
    let (m, _) = machine_with(&[b"a", b"b", b"c"]);
    assert_eq!(m.producer_position(&id(), "w"), Some((2, 2)));
    assert_eq!(m.producer_position(&id(), "other"), None);
    assert_eq!(
        m.producer_position(&BucketStreamId::new("acme", "nope"), "w"),
        None
    );
}
