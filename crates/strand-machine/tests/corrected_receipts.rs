//! Memory bound of the corrected profile (fix 4): one producer appending a
//! million times keeps exactly `producer_receipt_limit` receipts, while the
//! reference keeps one per sequence (spec 04 Q-RECEIPTS).
//!
//! The payloads are one byte and the machine flushes its hot buffer to the
//! cold tier every 4096 appends, so the test measures receipts, not hot
//! bytes. Under the test profile a million appends took 1.6 s on this
//! project's 2-core VM (measured 2026-12-01), so the full million runs.

#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use strand_machine::{StreamCommand, StreamResponse, StreamStateMachine};
use strand_model::{
    AppendStreamInput, BucketStreamId, ColdChunkRef, DEFAULT_PRODUCER_RECEIPT_LIMIT,
    MachineProfile, ProducerRequest,
};

const APPENDS: u64 = 1_000_000;

fn run(profile: MachineProfile, appends: u64) -> StreamStateMachine {
    let id = BucketStreamId::new("acme", "log");
    let mut m = StreamStateMachine::with_profile(profile);
    m.apply(StreamCommand::CreateBucket {
        bucket_id: "acme".into(),
    });
    let created = m.apply(StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: "application/octet-stream".into(),
        initial_payload: Bytes::new(),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 1,
    });
    assert!(!created.is_error(), "{created:?}");
    let mut flushed = 0u64;
    for seq in 0..appends {
        let r = m.append_borrowed(AppendStreamInput {
            stream_id: id.clone(),
            content_type: Some("application/octet-stream"),
            payload: b"x",
            close_after: false,
            stream_seq: None,
            producer: Some(ProducerRequest {
                producer_id: "p".into(),
                producer_epoch: 0,
                producer_seq: seq,
            }),
            now_ms: 1,
            record_match: None,
        });
        debug_assert!(matches!(r, StreamResponse::Appended { .. }), "{r:?}");
        if (seq + 1) % 4096 == 0 {
            let end = seq + 1;
            let r = m.apply(StreamCommand::FlushCold {
                stream_id: id.clone(),
                chunk: ColdChunkRef {
                    start_offset: flushed,
                    end_offset: end,
                    s3_path: format!("cold/{flushed}"),
                    object_size: end - flushed,
                    object_offset: 0,
                    shared_object: false,
                    payload_digest: String::new(),
                },
            });
            assert!(!r.is_error(), "{r:?}");
            flushed = end;
        }
    }
    m
}

fn receipts(m: &StreamStateMachine) -> (u64, usize) {
    let snap = m.snapshot();
    let p = &snap.streams[0].producer_states[0];
    (p.producer_seq, p.receipts.len())
}

#[test]
fn a_million_appends_keep_the_receipt_limit() {
    let started = std::time::Instant::now();
    let m = run(MachineProfile::Corrected, APPENDS);
    eprintln!("{APPENDS} corrected appends in {:?}", started.elapsed());
    let limit = usize::try_from(DEFAULT_PRODUCER_RECEIPT_LIMIT).unwrap();
    assert_eq!(receipts(&m), (APPENDS - 1, limit));
    assert_eq!(
        m.head(&BucketStreamId::new("acme", "log"))
            .unwrap()
            .tail_offset,
        APPENDS
    );
}

#[test]
fn the_reference_keeps_every_receipt() {
    // A smaller run is enough to show the growth.
    let m = run(MachineProfile::Reference, 10_000);
    assert_eq!(receipts(&m), (9_999, 10_000));
}
