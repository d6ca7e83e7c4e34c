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

#[test]
fn message_start_rounds_down_to_whole_hot_messages() {
    let (mut m, _) = machine_with(&[b"abcdef", b"ghij", b"k"]);
    let at = |m: &StreamStateMachine, offset| m.whole_message_start(&id(), offset, 100);
    assert_eq!(
        [0, 3, 5, 6, 7, 9, 10, 11, 12, 99].map(|o| at(&m, o)),
        [0, 0, 0, 6, 6, 6, 10, 11, 11, 11],
        "inside a message its start; at or beyond the tail the tail"
    );
    assert_eq!(
        m.whole_message_start(&BucketStreamId::new("acme", "none"), 7, 100),
        7
    );
    // A message longer than a page is read from the offset itself.
    assert_eq!(m.whole_message_start(&id(), 3, 5), 3);
    assert_eq!(m.whole_message_start(&id(), 3, 6), 0);
    assert_eq!(m.message_bounds(&id(), 7), Some((6, 10)));
    assert_eq!(m.message_bounds(&id(), 11), None);
    // Once [0, 6) is flushed its boundaries are merged away: offsets below
    // the hot start stay as asked; hot ones still round down.
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
    assert_eq!([3, 6, 8].map(|o| at(&m, o)), [3, 6, 6]);
}

#[test]
fn message_starts_name_the_hot_messages_a_flush_takes() {
    let (mut m, _) = machine_with(&[b"abcdef", b"ghij", b"k", b"lmn"]);
    assert_eq!(m.message_starts(&id(), 0, 14), [0, 6, 10, 11]);
    assert_eq!(m.message_starts(&id(), 1, 11), [6, 10]);
    assert_eq!(m.message_starts(&id(), 11, 11), Vec::<u64>::new());
    assert!(
        m.message_starts(&BucketStreamId::new("acme", "none"), 0, 9)
            .is_empty()
    );
    // A flush that cuts "ghij" leaves its rest starting at the cut.
    let r = m.apply(StreamCommand::FlushCold {
        stream_id: id(),
        chunk: ColdChunkRef {
            start_offset: 0,
            end_offset: 8,
            s3_path: "cold/acme/log/0-8".into(),
            object_size: 8,
            ..Default::default()
        },
    });
    assert!(matches!(r, StreamResponse::ColdFlushed { .. }), "{r:?}");
    assert_eq!(m.message_starts(&id(), 0, 14), [8, 10, 11]);
}

#[test]
fn message_start_of_a_json_stream_uses_its_record_index() {
    let mut m = StreamStateMachine::new();
    m.apply(StreamCommand::CreateBucket {
        bucket_id: "acme".into(),
    });
    let r = m.apply(StreamCommand::CreateStream {
        stream_id: id(),
        content_type: "application/json".into(),
        initial_payload: Bytes::from_static(b"{\"a\":1}\n{\"b\":22}\n"),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 1,
    });
    assert!(!r.is_error(), "{r:?}");
    // One message of two records: [0, 8) and [8, 17).
    assert_eq!(
        [0, 1, 7, 8, 9, 16, 17, 30].map(|o| m.whole_message_start(&id(), o, 100)),
        [0, 0, 0, 8, 8, 8, 17, 17]
    );
    assert!(
        m.message_starts(&id(), 0, 17).is_empty(),
        "its index has them"
    );
}

#[test]
fn pages_end_on_message_boundaries() {
    let (m, _) = machine_with(&[b"abcdef", b"ghij", b"k"]);
    let mut page = m.read_hot_at(&id(), 0, 8, 5).unwrap();
    m.end_on_message(&id(), &mut page);
    assert_eq!((page.offset, page.next_offset), (0, 6));
    assert_eq!(page.slices, [Bytes::from_static(b"abcdef")]);
    // Less than one whole message: kept as it is.
    let mut short = m.read_hot_at(&id(), 0, 4, 5).unwrap();
    m.end_on_message(&id(), &mut short);
    assert_eq!(short.next_offset, 4);
    // Up to date: kept.
    let mut rest = m.read_hot_at(&id(), 6, 100, 5).unwrap();
    m.end_on_message(&id(), &mut rest);
    assert_eq!((rest.next_offset, rest.len()), (11, 5));
}

#[test]
fn truncate_at_cuts_only_strictly_inside_the_page() {
    let mut read = strand_machine::HotRead {
        offset: 10,
        next_offset: 17,
        content_type: "text/plain".into(),
        slices: vec![Bytes::from_static(b"abc"), Bytes::from_static(b"defg")],
        up_to_date: false,
        closed: false,
    };
    for outside in [10, 17, 5, 30] {
        assert!(!read.truncate_at(outside));
        assert_eq!(read.len(), 7);
    }
    assert!(read.truncate_at(14));
    assert_eq!(read.next_offset, 14);
    assert_eq!(read.slices, [&b"abc"[..], &b"d"[..]]);
    assert!(read.truncate_at(12));
    assert_eq!(read.slices, [&b"ab"[..]]);
}
