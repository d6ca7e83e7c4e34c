//! The corrected profile (issue 16, `docs/profiles.md`): for each corrected
//! quirk, the reference behaviour under the default profile next to the fix
//! under `MachineProfile::Corrected`.

#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use strand_machine::{StreamCommand, StreamErrorCode, StreamResponse, StreamStateMachine};
use strand_model::{
    BucketStreamId, ColdChunkRef, ExternalPayloadRef, MachineOptions, MachineProfile,
    ProducerRequest, StreamReadSegment,
};
use strand_snapshot::StreamSnapshotError;

fn id() -> BucketStreamId {
    BucketStreamId::new("acme", "log")
}

fn machine(profile: MachineProfile) -> StreamStateMachine {
    let mut m = StreamStateMachine::with_profile(profile);
    ok(m.apply(StreamCommand::CreateBucket {
        bucket_id: "acme".into(),
    }));
    m
}

fn ok(r: StreamResponse) -> StreamResponse {
    assert!(!r.is_error(), "{r:?}");
    r
}

fn create(m: &mut StreamStateMachine, id: &BucketStreamId, ttl: Option<u64>, now_ms: u64) {
    ok(m.apply(StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: "text/plain".into(),
        initial_payload: Bytes::new(),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: ttl,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms,
    }));
}

fn append_cmd(
    id: &BucketStreamId,
    body: &'static [u8],
    producer: Option<ProducerRequest>,
) -> StreamCommand {
    StreamCommand::Append {
        stream_id: id.clone(),
        content_type: Some("text/plain".into()),
        payload: Bytes::from_static(body),
        close_after: false,
        stream_seq: None,
        producer,
        now_ms: 2_000,
        record_match: None,
    }
}

fn external_cmd(id: &BucketStreamId, path: &str, len: u64) -> StreamCommand {
    StreamCommand::AppendExternal {
        stream_id: id.clone(),
        content_type: Some("text/plain".into()),
        payload: ExternalPayloadRef {
            s3_path: path.into(),
            payload_len: len,
            object_size: len,
        },
        record_ends: Vec::new(),
        close_after: false,
        stream_seq: None,
        producer: None,
        now_ms: 2_000,
        record_match: None,
    }
}

fn chunk(start: u64, end: u64, path: &str, shared: bool) -> ColdChunkRef {
    ColdChunkRef {
        start_offset: start,
        end_offset: end,
        s3_path: path.into(),
        object_size: end - start,
        object_offset: 0,
        shared_object: shared,
        payload_digest: String::new(),
    }
}

/// Spec 07 P3: inline `[0,5)`, external `[5,10)`, inline `[10,12)`, then
/// `FlushCold [0,5)`.
fn p3(profile: MachineProfile) -> StreamStateMachine {
    let mut m = machine(profile);
    create(&mut m, &id(), None, 1_000);
    ok(m.apply(append_cmd(&id(), b"abcde", None)));
    ok(m.apply(external_cmd(&id(), "ext/1", 5)));
    ok(m.apply(append_cmd(&id(), b"xy", None)));
    ok(m.apply(StreamCommand::FlushCold {
        stream_id: id(),
        chunk: chunk(0, 5, "cold/0", false),
    }));
    m
}

fn code(r: &StreamResponse) -> Option<StreamErrorCode> {
    r.error_code()
}

#[test]
fn fix1_flush_cold_never_lowers_the_frontier() {
    // Reference: the flush lowers the raw frontier to 5; [5, 10) is lost
    // and the snapshot does not restore.
    let reference = p3(MachineProfile::Reference);
    let err = reference.read_plan(&id(), 5, 5).unwrap_err();
    assert_eq!(code(&err), Some(StreamErrorCode::InvalidColdFlush));
    assert_eq!(reference.snapshot().streams[0].cold_frontier_offset, 5);
    assert!(matches!(
        StreamStateMachine::restore(reference.snapshot()),
        Err(StreamSnapshotError::PayloadLengthMismatch {
            tail_offset: 12,
            payload_len: 2,
            ..
        })
    ));
    // Corrected: the frontier stays at 10, the external object is planned,
    // and the snapshot restores to the same state.
    let corrected = p3(MachineProfile::Corrected);
    let plan = corrected.read_plan(&id(), 5, 5).unwrap();
    assert!(
        matches!(plan.segments.as_slice(), [StreamReadSegment::Object(o)] if o.object.s3_path == "ext/1"),
        "{plan:?}"
    );
    assert_eq!(corrected.snapshot().streams[0].cold_frontier_offset, 10);
    let restored = StreamStateMachine::restore(corrected.snapshot()).unwrap();
    assert_eq!(restored.snapshot(), corrected.snapshot());
}

#[test]
fn fix2_external_writes_are_recorded() {
    for profile in [MachineProfile::Reference, MachineProfile::Corrected] {
        let mut m = machine(profile);
        ok(m.apply(StreamCommand::CreateExternal {
            stream_id: id(),
            content_type: "text/plain".into(),
            initial_payload: ExternalPayloadRef {
                s3_path: "ext/0".into(),
                payload_len: 4,
                object_size: 8,
            },
            record_ends: Vec::new(),
            close_after: false,
            stream_seq: None,
            producer: None,
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
            attrs: None,
            now_ms: 1_000,
        }));
        ok(m.apply(external_cmd(&id(), "ext/1", 3)));
        let paths: Vec<(u64, u64, String)> = m
            .external_segments(&id())
            .iter()
            .map(|s| (s.start_offset, s.end_offset, s.s3_path.clone()))
            .collect();
        let snap = m.snapshot();
        match profile {
            // Reference: nothing but the frontier (and the setsum) knows.
            MachineProfile::Reference => {
                assert!(paths.is_empty());
                assert!(snap.streams[0].external_segments.is_empty());
            }
            MachineProfile::Corrected => {
                assert_eq!(
                    paths,
                    vec![(0, 4, "ext/0".to_owned()), (4, 7, "ext/1".to_owned())]
                );
                assert_eq!(snap.streams[0].external_segments.len(), 2);
                let restored = StreamStateMachine::restore(snap.clone()).unwrap();
                assert_eq!(
                    restored.external_segments(&id()),
                    m.external_segments(&id())
                );
                assert_eq!(restored.snapshot(), snap);
            }
        }
    }
}

/// Spec 07 P2: retention over hot data only, then a delete.
#[test]
fn fix3_restore_keeps_the_raw_frontier() {
    for profile in [MachineProfile::Reference, MachineProfile::Corrected] {
        let mut m = machine(profile);
        create(&mut m, &id(), None, 1_000);
        ok(m.apply(append_cmd(&id(), b"abc", None)));
        ok(m.apply(StreamCommand::PublishSnapshot {
            stream_id: id(),
            snapshot_offset: 3,
            content_type: "text/plain".into(),
            payload: Bytes::from_static(b"s"),
            expected_digest: None,
            now_ms: 2_000,
        }));
        ok(m.apply(StreamCommand::AdvanceRetention {
            stream_id: id(),
            retained_offset: 3,
            now_ms: 2_000,
        }));
        let mut restored = StreamStateMachine::restore(m.snapshot()).unwrap();
        ok(m.apply(StreamCommand::DeleteStream { stream_id: id() }));
        ok(restored.apply(StreamCommand::DeleteStream { stream_id: id() }));
        assert_eq!(m.pending_cold_gc_len(), 0);
        match profile {
            // Reference: the restored copy enqueues a Stream GC entry the
            // original does not.
            MachineProfile::Reference => assert_eq!(restored.pending_cold_gc_len(), 1),
            MachineProfile::Corrected => {
                assert_eq!(restored.pending_cold_gc_len(), 0);
                assert_eq!(restored.snapshot(), m.snapshot());
            }
        }
    }
}

fn producer(seq: u64) -> Option<ProducerRequest> {
    Some(ProducerRequest {
        producer_id: "p".into(),
        producer_epoch: 0,
        producer_seq: seq,
    })
}

#[test]
fn fix4_producer_receipts_are_bounded() {
    let options = MachineOptions {
        profile: MachineProfile::Corrected,
        producer_receipt_limit: 4,
    };
    let mut reference = machine(MachineProfile::Reference);
    let mut corrected = StreamStateMachine::with_options(options);
    ok(corrected.apply(StreamCommand::CreateBucket {
        bucket_id: "acme".into(),
    }));
    for m in [&mut reference, &mut corrected] {
        create(m, &id(), None, 1_000);
        for seq in 0..10 {
            ok(m.apply(append_cmd(&id(), b"ab", producer(seq))));
        }
    }
    let receipts =
        |m: &StreamStateMachine| m.snapshot().streams[0].producer_states[0].receipts.len();
    assert_eq!(receipts(&reference), 10);
    assert_eq!(receipts(&corrected), 4);
    // A kept receipt answers with its original offsets in both profiles.
    for m in [&mut reference, &mut corrected] {
        let r = m.apply(append_cmd(&id(), b"ab", producer(8)));
        assert!(
            matches!(
                r,
                StreamResponse::Appended {
                    offset: 16,
                    next_offset: 18,
                    deduplicated: true,
                    ..
                }
            ),
            "{r:?}"
        );
    }
    // An older one: the reference still has it; the corrected profile
    // answers a duplicate at the start of its oldest kept receipt (seq 6,
    // offset 12), without the original offsets.
    let r = reference.apply(append_cmd(&id(), b"ab", producer(2)));
    assert!(
        matches!(
            r,
            StreamResponse::Appended {
                offset: 4,
                next_offset: 6,
                deduplicated: true,
                ..
            }
        ),
        "{r:?}"
    );
    let r = corrected.apply(append_cmd(&id(), b"ab", producer(2)));
    assert!(
        matches!(
            &r,
            StreamResponse::Appended { offset: 12, next_offset: 12, closed: false, deduplicated: true, producer: Some(p) }
                if p.producer_seq == 2
        ),
        "{r:?}"
    );
    // Nothing was appended by either retry; restore answers the same.
    let mut restored = StreamStateMachine::restore(corrected.snapshot()).unwrap();
    assert_eq!(restored.options(), options);
    assert_eq!(
        restored.apply(append_cmd(&id(), b"ab", producer(2))),
        corrected.apply(append_cmd(&id(), b"ab", producer(2)))
    );
    assert_eq!(restored.snapshot(), corrected.snapshot());
}

#[test]
fn fix5_failed_shared_compaction_changes_nothing() {
    for profile in [MachineProfile::Reference, MachineProfile::Corrected] {
        let mut m = machine(profile);
        create(&mut m, &id(), None, 1_000);
        ok(m.apply(append_cmd(&id(), b"abcdefgh", None)));
        let a = ColdChunkRef {
            object_size: 100,
            ..chunk(0, 4, "pack/1", true)
        };
        ok(m.apply(StreamCommand::FlushCold {
            stream_id: id(),
            chunk: a.clone(),
        }));
        let before = m.snapshot();
        let b = ColdChunkRef {
            object_size: 100,
            ..chunk(4, 8, "pack/2", true)
        };
        let r = m.apply(StreamCommand::CompactCold {
            stream_id: id(),
            old_chunks: vec![a.clone(), b],
            replacement: chunk(0, 8, "compact/1", false),
            gc_not_before_ms: 0,
        });
        assert_eq!(code(&r), Some(StreamErrorCode::InvalidColdFlush));
        let owners = &m.snapshot().shared_cold_object_owners;
        assert_eq!(owners.len(), 1, "the reference is kept in both profiles");
        match profile {
            // Reference: chunk A dropped, its reference never released.
            MachineProfile::Reference => assert!(m.cold_chunks(&id()).is_empty()),
            MachineProfile::Corrected => {
                assert_eq!(m.cold_chunks(&id()), &[a]);
                assert_eq!(m.snapshot(), before);
            }
        }
    }
}

#[test]
fn fix6_purging_an_unknown_bucket_is_bucket_not_found() {
    for profile in [MachineProfile::Reference, MachineProfile::Corrected] {
        let mut m = machine(profile);
        let r = m.apply(StreamCommand::PurgeBucket {
            bucket_id: "never".into(),
        });
        let again = m.apply(StreamCommand::CreateBucket {
            bucket_id: "never".into(),
        });
        match profile {
            // Reference: purged, and fenced for ever.
            MachineProfile::Reference => {
                assert!(matches!(
                    r,
                    StreamResponse::BucketPurged {
                        removed_streams: 0,
                        ..
                    }
                ));
                assert_eq!(code(&again), Some(StreamErrorCode::BucketErased));
            }
            MachineProfile::Corrected => {
                assert_eq!(code(&r), Some(StreamErrorCode::BucketNotFound));
                assert!(matches!(again, StreamResponse::BucketCreated { .. }));
            }
        }
        // A bucket that exists is purged in both.
        let r = m.apply(StreamCommand::PurgeBucket {
            bucket_id: "acme".into(),
        });
        assert!(matches!(r, StreamResponse::BucketPurged { .. }), "{r:?}");
    }
}

#[test]
fn fix7_ttl_renewal_never_goes_backwards() {
    for profile in [MachineProfile::Reference, MachineProfile::Corrected] {
        let mut m = machine(profile);
        create(&mut m, &id(), Some(10), 10_000);
        let r = m.apply(StreamCommand::TouchStreamAccess {
            stream_id: id(),
            now_ms: 5_000,
            renew_ttl: true,
        });
        let touch = m.head(&id()).unwrap().last_ttl_touch_at_ms;
        match profile {
            MachineProfile::Reference => {
                assert_eq!(
                    r,
                    StreamResponse::Accessed {
                        changed: true,
                        expired: false
                    }
                );
                assert_eq!(touch, 5_000);
            }
            MachineProfile::Corrected => {
                assert_eq!(
                    r,
                    StreamResponse::Accessed {
                        changed: false,
                        expired: false
                    }
                );
                assert_eq!(touch, 10_000);
            }
        }
        // An append with an older clock does not move it back either.
        let mut cmd = append_cmd(&id(), b"a", None);
        if let StreamCommand::Append { now_ms, .. } = &mut cmd {
            *now_ms = 1_000;
        }
        ok(m.apply(cmd));
        let touch = m.head(&id()).unwrap().last_ttl_touch_at_ms;
        assert_eq!(
            touch,
            if profile == MachineProfile::Corrected {
                10_000
            } else {
                1_000
            }
        );
        // read_at tests expiry against the caller's time (both profiles).
        assert!(m.read_at(&id(), 0, 1, touch + 1).is_ok());
        let gone = m.read_at(&id(), 0, 1, touch + 10_000).unwrap_err();
        assert_eq!(code(&gone), Some(StreamErrorCode::StreamNotFound));
    }
}

#[test]
fn fix8_reads_return_a_bounded_page() {
    let huge = 1u64 << 40;
    for profile in [MachineProfile::Reference, MachineProfile::Corrected] {
        let mut m = machine(profile);
        create(&mut m, &id(), None, 1_000);
        ok(m.apply(external_cmd(&id(), "ext/huge", huge)));
        let plan = m.read_plan(&id(), 0, usize::MAX).unwrap();
        match profile {
            // Reference: one cold-index segment per 64 MiB page of the
            // whole range.
            MachineProfile::Reference => {
                assert_eq!(plan.next_offset, huge);
                assert_eq!(plan.segments.len(), 16_384);
            }
            MachineProfile::Corrected => {
                let page = strand_model::CORRECTED_MAX_READ_BYTES;
                assert_eq!(plan.next_offset, page);
                assert!(!plan.up_to_date);
                assert_eq!(plan.segments.len(), 1);
                let next = m.read_plan(&id(), plan.next_offset, usize::MAX).unwrap();
                assert_eq!(next.next_offset, 2 * page);
            }
        }
    }
}

#[test]
fn fix9_usage_gauges_never_saturate() {
    for profile in [MachineProfile::Reference, MachineProfile::Corrected] {
        let mut m = machine(profile);
        let small = BucketStreamId::new("acme", "small");
        create(&mut m, &small, None, 1_000);
        ok(m.apply(append_cmd(&small, b"a", None)));
        create(&mut m, &id(), None, 1_000);
        let r = m.apply(external_cmd(&id(), "ext/max", u64::MAX));
        let gauge = |m: &StreamStateMachine| m.bucket_usage_report()[0].usage.retained_bytes;
        match profile {
            MachineProfile::Reference => {
                assert!(!r.is_error());
                assert_eq!(gauge(&m), u64::MAX);
                ok(m.apply(StreamCommand::DeleteStream { stream_id: id() }));
                // Drifted: 0 while `small` still holds a byte; restore says 1.
                assert_eq!(gauge(&m), 0);
                assert_eq!(
                    gauge(&StreamStateMachine::restore(m.snapshot()).unwrap()),
                    1
                );
            }
            MachineProfile::Corrected => {
                assert_eq!(code(&r), Some(StreamErrorCode::QuotaExceeded));
                assert_eq!(gauge(&m), 1);
                ok(m.apply(StreamCommand::DeleteStream { stream_id: id() }));
                assert_eq!(gauge(&m), 1);
                assert_eq!(
                    gauge(&StreamStateMachine::restore(m.snapshot()).unwrap()),
                    1
                );
            }
        }
    }
}

#[test]
fn the_profile_is_recorded_only_for_corrected_and_survives_both_codecs() {
    let reference = p3(MachineProfile::Reference);
    let json = serde_json::to_value(reference.snapshot()).unwrap();
    assert!(json.get("machine_options").is_none());
    assert!(json["streams"][0].get("cold_raw_frontier_offset").is_none());

    let corrected = p3(MachineProfile::Corrected);
    let snap = corrected.snapshot();
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(
        json["machine_options"],
        serde_json::json!({"profile": "corrected", "producer_receipt_limit": 64})
    );
    assert_eq!(json["streams"][0]["cold_raw_frontier_offset"], 10);
    for format in [
        strand_snapshot::SnapshotFormat::Json,
        strand_snapshot::SnapshotFormat::Binary,
    ] {
        let mut bytes = Vec::new();
        strand_machine::write_snapshot(&corrected, format, &mut bytes).unwrap();
        let back = strand_machine::restore_from_slice(&bytes).unwrap();
        assert_eq!(back.profile(), MachineProfile::Corrected);
        assert_eq!(back.snapshot(), snap);
    }
    // ImportSnapshot keeps the importing group's own profile.
    let mut group = StreamStateMachine::with_profile(MachineProfile::Corrected);
    let r = group.apply(StreamCommand::ImportSnapshot {
        snapshot: Box::new(p3_before_flush(MachineProfile::Reference).snapshot()),
    });
    assert!(
        matches!(r, StreamResponse::SnapshotImported { .. }),
        "{r:?}"
    );
    assert_eq!(group.profile(), MachineProfile::Corrected);
}

fn p3_before_flush(profile: MachineProfile) -> StreamStateMachine {
    let mut m = machine(profile);
    create(&mut m, &id(), None, 1_000);
    ok(m.apply(append_cmd(&id(), b"abcde", None)));
    m
}
