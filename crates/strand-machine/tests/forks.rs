//! Fork commands one at a time (`docs/forks.md` §3–§5): every error path,
//! soft deletion, retention, the unpin cascade, and the snapshot fields and
//! their restore checks.

#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use serde_json::Value;
use strand_machine::{
    ForkProbe, StreamCommand, StreamErrorCode, StreamResponse, StreamStateMachine,
};
use strand_model::{BucketStreamId, MachineProfile};
use strand_snapshot::{StreamSnapshot, StreamSnapshotError};

const BUCKET: &str = "acme";

fn sid(name: &str) -> BucketStreamId {
    BucketStreamId::new(BUCKET, name)
}

fn machine() -> StreamStateMachine {
    let mut m = StreamStateMachine::with_profile(MachineProfile::Corrected);
    for bucket in [BUCKET, "other"] {
        m.apply(StreamCommand::CreateBucket {
            bucket_id: bucket.into(),
        });
    }
    m
}

fn create(m: &mut StreamStateMachine, id: &BucketStreamId, body: &[u8], ttl: Option<u64>) {
    let r = m.apply(StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: "text/plain".into(),
        initial_payload: Bytes::copy_from_slice(body),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: ttl,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 10,
    });
    assert!(matches!(r, StreamResponse::Created { .. }), "{r:?}");
}

fn append(m: &mut StreamStateMachine, id: &BucketStreamId, body: &[u8]) -> StreamResponse {
    m.apply(StreamCommand::Append {
        stream_id: id.clone(),
        content_type: Some("text/plain".into()),
        payload: Bytes::copy_from_slice(body),
        close_after: false,
        stream_seq: None,
        producer: None,
        now_ms: 20,
        record_match: None,
    })
}

fn pin(
    m: &mut StreamStateMachine,
    source: &BucketStreamId,
    fork: &BucketStreamId,
    at: Option<u64>,
    now_ms: u64,
) -> StreamResponse {
    m.apply(StreamCommand::PinForkSource {
        stream_id: source.clone(),
        fork_stream_id: fork.clone(),
        fork_offset: at,
        now_ms,
    })
}

fn create_fork_cmd(
    fork: &BucketStreamId,
    source: &BucketStreamId,
    fork_offset: u64,
    pin: u64,
    body: &[u8],
) -> StreamCommand {
    StreamCommand::CreateFork {
        stream_id: fork.clone(),
        source_stream_id: source.clone(),
        fork_offset,
        fork_offset_given: true,
        pin,
        sub_offset: 0,
        inherited_start: 0,
        first_record: None,
        content_type: "text/plain".into(),
        prefix: Bytes::new(),
        initial_payload: Bytes::copy_from_slice(body),
        close_after: false,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 30,
    }
}

/// Pins and creates a fork; returns its pin.
fn fork(
    m: &mut StreamStateMachine,
    fork: &BucketStreamId,
    source: &BucketStreamId,
    at: Option<u64>,
    body: &[u8],
) -> u64 {
    let StreamResponse::ForkSourcePinned {
        fork_offset, pin, ..
    } = pin(m, source, fork, at, 30)
    else {
        panic!("pin refused");
    };
    let r = m.apply(create_fork_cmd(fork, source, fork_offset, pin, body));
    assert!(matches!(r, StreamResponse::Created { .. }), "{r:?}");
    pin
}

fn code(r: &StreamResponse) -> Option<StreamErrorCode> {
    r.error_code()
}

fn deliver(m: &mut StreamStateMachine) {
    for _ in 0..8 {
        let batch = m.pending_fork_unpins(16);
        if batch.is_empty() {
            return;
        }
        for u in &batch {
            m.apply(StreamCommand::UnpinForkSource {
                stream_id: u.source_stream_id.clone(),
                fork_stream_id: u.fork_stream_id.clone(),
                pin: u.pin,
            });
        }
        m.apply(StreamCommand::AckForkUnpins { unpins: batch });
    }
}

#[test]
fn pin_errors_in_check_order() {
    let mut m = machine();
    let (src, f) = (sid("src"), sid("fork"));
    assert_eq!(
        code(&pin(&mut m, &src, &f, None, 30)),
        Some(StreamErrorCode::StreamNotFound)
    );
    create(&mut m, &src, b"hello", None);
    assert_eq!(
        code(&pin(&mut m, &src, &src, None, 30)),
        Some(StreamErrorCode::InvalidFork)
    );
    let elsewhere = BucketStreamId::new("other", "fork");
    assert_eq!(
        code(&pin(&mut m, &src, &elsewhere, None, 30)),
        Some(StreamErrorCode::InvalidFork)
    );
    assert_eq!(
        code(&pin(&mut m, &src, &f, Some(6), 30)),
        Some(StreamErrorCode::OffsetOutOfRange)
    );
    let r = pin(&mut m, &src, &f, None, 30);
    let StreamResponse::ForkSourcePinned {
        fork_offset,
        pin: first,
        inherited_start,
        content_type,
        ..
    } = r
    else {
        panic!("{r:?}");
    };
    assert_eq!((fork_offset, inherited_start), (5, 0));
    assert_eq!(content_type, "text/plain");
    // Every pin gets its own id, even for the same fork id.
    let StreamResponse::ForkSourcePinned { pin: second, .. } = pin(&mut m, &src, &f, Some(2), 30)
    else {
        panic!("second pin refused");
    };
    assert_ne!(first, second);
}

#[test]
fn an_expired_source_is_missing_unless_forks_read_it() {
    let mut m = machine();
    let (a, b, f) = (sid("a"), sid("b"), sid("fork"));
    create(&mut m, &a, b"x", Some(1));
    create(&mut m, &b, b"y", Some(1));
    fork(&mut m, &f, &b, None, b"");
    // Past the 1 s TTL: `a` expires away, `b` is kept for its fork.
    assert_eq!(
        code(&pin(&mut m, &a, &f, None, 5_000)),
        Some(StreamErrorCode::StreamNotFound)
    );
    assert_eq!(
        code(&pin(&mut m, &b, &sid("fork2"), None, 5_000)),
        Some(StreamErrorCode::StreamSoftDeleted)
    );
    assert!(m.is_soft_deleted(&b));
    assert!(m.head(&b).is_none());
}

#[test]
fn create_fork_errors_and_idempotence() {
    let mut m = machine();
    let (src, f) = (sid("src"), sid("fork"));
    create(&mut m, &src, b"hello", None);
    let pin1 = fork(&mut m, &f, &src, Some(2), b"XY");
    assert_eq!(m.fork_origin(&f), Some((src.clone(), 2)));

    // The same request again (with a new pin, which the engine gives back).
    let r = m.apply(create_fork_cmd(&f, &src, 2, pin1 + 1, b"XY"));
    assert!(
        matches!(r, StreamResponse::AlreadyExists { next_offset: 4, .. }),
        "{r:?}"
    );
    // Without a fork offset it matches whatever offset the fork has.
    let mut any_offset = create_fork_cmd(&f, &src, 5, pin1 + 1, b"");
    if let StreamCommand::CreateFork {
        fork_offset_given, ..
    } = &mut any_offset
    {
        *fork_offset_given = false;
    }
    assert!(matches!(
        m.apply(any_offset),
        StreamResponse::AlreadyExists { .. }
    ));
    // Another offset, another source or a plain stream at the path conflict.
    assert_eq!(
        code(&m.apply(create_fork_cmd(&f, &src, 3, pin1 + 1, b""))),
        Some(StreamErrorCode::StreamAlreadyExistsConflict)
    );
    create(&mut m, &sid("plain"), b"p", None);
    assert_eq!(
        code(&m.apply(create_fork_cmd(&sid("plain"), &src, 2, 9, b""))),
        Some(StreamErrorCode::StreamAlreadyExistsConflict)
    );
    // A fork in another bucket, of itself, or with its start past its offset.
    assert_eq!(
        code(&m.apply(create_fork_cmd(
            &BucketStreamId::new("other", "f"),
            &src,
            2,
            9,
            b""
        ))),
        Some(StreamErrorCode::InvalidFork)
    );
    assert_eq!(
        code(&m.apply(create_fork_cmd(&sid("self"), &sid("self"), 0, 9, b""))),
        Some(StreamErrorCode::InvalidFork)
    );
    let mut late_start = create_fork_cmd(&sid("late"), &src, 2, 9, b"");
    if let StreamCommand::CreateFork {
        inherited_start, ..
    } = &mut late_start
    {
        *inherited_start = 3;
    }
    assert_eq!(
        code(&m.apply(late_start)),
        Some(StreamErrorCode::InvalidFork)
    );
}

#[test]
fn a_fork_is_a_stream_from_its_fork_offset() {
    let mut m = machine();
    let (src, f) = (sid("src"), sid("fork"));
    create(&mut m, &src, b"hello", None);
    fork(&mut m, &f, &src, Some(2), b"XY");
    let head = m.head(&f).unwrap();
    assert_eq!(head.tail_offset, 4);
    assert_eq!(m.read_start_offset(&f), 0);
    // Below the fork offset a fork has no bytes of its own.
    assert_eq!(
        m.fork_probe(&f, 1),
        ForkProbe::Inherited {
            source: src.clone(),
            cap: 2
        }
    );
    assert_eq!(
        code(&m.read_hot_at(&f, 0, 10, 40).unwrap_err()),
        Some(StreamErrorCode::StreamGone)
    );
    let own = m.read_hot_at(&f, 2, 10, 40).unwrap();
    assert_eq!(own.slices.concat(), b"XY");
    // Its usage counts its own bytes only.
    let usage = m
        .bucket_usage_report()
        .into_iter()
        .find(|u| u.bucket_id == BUCKET)
        .unwrap();
    assert_eq!(usage.usage.retained_bytes, 5 + 2);
    // Its setsum covers its own appends: restore recomputes nothing else.
    let snapshot = m.snapshot();
    let entry = snapshot
        .streams
        .iter()
        .find(|e| e.metadata.stream_id == f)
        .unwrap();
    assert_eq!(entry.retained_offset, Some(2));
    assert_eq!(entry.payload, b"XY");
    // Source appends do not reach the fork.
    assert!(!append(&mut m, &src, b"!").is_error());
    assert_eq!(m.head(&f).unwrap().tail_offset, 4);
}

#[test]
fn deleting_a_pinned_source_soft_deletes_it() {
    let mut m = machine();
    let (src, f) = (sid("src"), sid("fork"));
    create(&mut m, &src, b"hello", None);
    fork(&mut m, &f, &src, None, b"");
    assert_eq!(
        m.apply(StreamCommand::DeleteStream {
            stream_id: src.clone()
        }),
        StreamResponse::Deleted
    );
    assert!(m.is_soft_deleted(&src));
    assert!(m.head(&src).is_none());
    let soft = Some(StreamErrorCode::StreamSoftDeleted);
    assert_eq!(code(&append(&mut m, &src, b"x")), soft);
    assert_eq!(
        code(&m.apply(StreamCommand::DeleteStream {
            stream_id: src.clone()
        })),
        soft
    );
    create_refused(&mut m, &src);
    assert_eq!(code(&pin(&mut m, &src, &sid("f2"), None, 30)), soft);
    assert_eq!(code(&m.read_hot_at(&src, 0, 10, 40).unwrap_err()), soft);
    // The fork still reads through it.
    assert_eq!(
        m.read_hot_through(&src, 0, 5).unwrap().slices.concat(),
        b"hello"
    );
    // Deleting the last fork removes the source once the unpin arrives.
    assert_eq!(
        m.apply(StreamCommand::DeleteStream {
            stream_id: f.clone()
        }),
        StreamResponse::Deleted
    );
    assert!(m.has_pending_fork_unpins());
    deliver(&mut m);
    assert!(!m.is_soft_deleted(&src));
    assert!(m.snapshot().streams.is_empty());
}

fn create_refused(m: &mut StreamStateMachine, id: &BucketStreamId) {
    let r = m.apply(StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: "text/plain".into(),
        initial_payload: Bytes::new(),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 50,
    });
    assert_eq!(code(&r), Some(StreamErrorCode::StreamSoftDeleted));
}

#[test]
fn the_cascade_goes_up_a_chain_of_soft_deleted_forks() {
    let mut m = machine();
    let (a, b, c) = (sid("a"), sid("b"), sid("c"));
    create(&mut m, &a, b"abc", None);
    fork(&mut m, &b, &a, None, b"d");
    fork(&mut m, &c, &b, None, b"e");
    for id in [&a, &b] {
        m.apply(StreamCommand::DeleteStream {
            stream_id: id.clone(),
        });
    }
    assert!(m.is_soft_deleted(&a) && m.is_soft_deleted(&b));
    m.apply(StreamCommand::DeleteStream {
        stream_id: c.clone(),
    });
    deliver(&mut m);
    assert!(m.snapshot().streams.is_empty());
    assert!(!m.has_pending_fork_unpins());
}

#[test]
fn retention_stops_at_pins_and_a_fork_retained_past_its_offset_lets_go() {
    let mut m = machine();
    let (src, f) = (sid("src"), sid("fork"));
    create(&mut m, &src, b"hello", None);
    fork(&mut m, &f, &src, None, b"own");
    let publish = |m: &mut StreamStateMachine, id: &BucketStreamId, at: u64| {
        let r = m.apply(StreamCommand::PublishSnapshot {
            stream_id: id.clone(),
            snapshot_offset: at,
            content_type: "text/plain".into(),
            payload: Bytes::from_static(b"s"),
            expected_digest: None,
            now_ms: 40,
        });
        assert!(!r.is_error(), "{r:?}");
        m.apply(StreamCommand::AdvanceRetention {
            stream_id: id.clone(),
            retained_offset: at,
            now_ms: 40,
        })
    };
    assert_eq!(
        code(&publish(&mut m, &src, 5)),
        Some(StreamErrorCode::StreamHasForks)
    );
    // The fork retained past its fork offset reads nothing of the source
    // any more: it drops its pin.
    assert!(!publish(&mut m, &f, 8).is_error());
    assert_eq!(m.fork_origin(&f), None);
    deliver(&mut m);
    assert!(!publish(&mut m, &src, 5).is_error());
}

#[test]
fn purge_drops_the_unpins_of_the_bucket() {
    let mut m = machine();
    let (src, f) = (sid("src"), sid("fork"));
    create(&mut m, &src, b"hello", None);
    fork(&mut m, &f, &src, None, b"");
    m.apply(StreamCommand::DeleteStream { stream_id: src });
    let r = m.apply(StreamCommand::PurgeBucket {
        bucket_id: BUCKET.into(),
    });
    assert!(
        matches!(
            r,
            StreamResponse::BucketPurged {
                removed_streams: 2,
                ..
            }
        ),
        "{r:?}"
    );
    assert!(!m.has_pending_fork_unpins());
}

#[test]
fn snapshots_without_forks_carry_no_fork_fields() {
    let mut m = machine();
    create(&mut m, &sid("plain"), b"x", None);
    let text = serde_json::to_string(&m.snapshot()).unwrap();
    assert!(!text.contains("fork"), "{text}");
}

/// A group with a chain, a soft-deleted source and an undelivered unpin.
fn forked_machine() -> StreamStateMachine {
    let mut m = machine();
    let (a, b, c) = (sid("a"), sid("b"), sid("c"));
    create(&mut m, &a, b"abc", None);
    fork(&mut m, &b, &a, Some(2), b"d");
    fork(&mut m, &c, &b, None, b"");
    fork(&mut m, &sid("gone"), &a, None, b"");
    m.apply(StreamCommand::DeleteStream {
        stream_id: a.clone(),
    });
    m.apply(StreamCommand::DeleteStream {
        stream_id: sid("gone"),
    });
    m
}

#[test]
fn fork_state_in_snapshots() {
    let m = forked_machine();
    let snapshot = m.snapshot();
    let value = serde_json::to_value(&snapshot).unwrap();
    let forks: Vec<Value> = value["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            serde_json::json!({
                "stream": e["metadata"]["stream_id"]["stream_id"],
                "retained_offset": e["retained_offset"],
                "fork": e.get("fork"),
            })
        })
        .collect();
    insta::assert_json_snapshot!("fork_entries", forks);
    insta::assert_json_snapshot!(
        "fork_group_fields",
        serde_json::json!({
            "fork_unpins": value["fork_unpins"],
            "next_fork_pin": value["next_fork_pin"],
        })
    );
    // Both codecs keep it.
    let json = serde_json::to_vec(&snapshot).unwrap();
    let back = strand_machine::restore_from_slice(&json).unwrap();
    assert_eq!(back.snapshot(), snapshot);
    let mut binary = Vec::new();
    strand_machine::write_snapshot(&m, strand_snapshot::SnapshotFormat::Binary, &mut binary)
        .unwrap();
    assert_eq!(
        strand_machine::restore_from_slice(&binary)
            .unwrap()
            .snapshot(),
        snapshot
    );
}

fn restore_err(edit: impl FnOnce(&mut Value)) -> StreamSnapshotError {
    let mut value = serde_json::to_value(forked_machine().snapshot()).unwrap();
    edit(&mut value);
    let snapshot: StreamSnapshot = serde_json::from_value(value).unwrap();
    StreamStateMachine::restore(snapshot).unwrap_err()
}

fn entry<'a>(value: &'a mut Value, name: &str) -> &'a mut Value {
    value["streams"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["metadata"]["stream_id"]["stream_id"] == name)
        .unwrap()
}

#[test]
fn restore_checks_the_fork_fields() {
    assert!(StreamStateMachine::restore(forked_machine().snapshot()).is_ok());
    // A soft-deleted stream without pins.
    let e = restore_err(|v| {
        let a = entry(v, "a");
        a["fork"]["fork_pins"] = Value::Array(Vec::new());
    });
    assert!(
        matches!(e, StreamSnapshotError::SoftDeletedWithoutForks(_)),
        "{e}"
    );
    // A fork origin past the retained offset.
    let e = restore_err(|v| entry(v, "b")["fork"]["forked_from"]["fork_offset"] = 3.into());
    assert!(matches!(e, StreamSnapshotError::InvalidFork { .. }), "{e}");
    // A fork of itself.
    let e = restore_err(|v| {
        let b = entry(v, "b");
        b["fork"]["forked_from"]["source_stream_id"] = b["metadata"]["stream_id"].clone();
    });
    assert!(matches!(e, StreamSnapshotError::InvalidFork { .. }), "{e}");
    // A pin beyond the tail.
    let e = restore_err(|v| entry(v, "a")["fork"]["fork_pins"][0]["fork_offset"] = 99.into());
    assert!(
        matches!(e, StreamSnapshotError::InvalidForkPin { .. }),
        "{e}"
    );
    // A fork whose source does not hold its pin.
    let e = restore_err(|v| entry(v, "b")["fork"]["forked_from"]["pin"] = 77.into());
    assert!(
        matches!(e, StreamSnapshotError::ForkPinMismatch { .. }),
        "{e}"
    );
    // A pin of a fork in the snapshot that reads through another source,
    // without an unpin waiting in the outbox.
    let e = restore_err(|v| {
        let c_id = entry(v, "c")["metadata"]["stream_id"].clone();
        let pins = entry(v, "a")["fork"]["fork_pins"].as_array_mut().unwrap();
        pins.insert(
            1,
            serde_json::json!({ "fork_stream_id": c_id, "pin": 60, "fork_offset": 1 }),
        );
    });
    assert!(
        matches!(e, StreamSnapshotError::ForkPinMismatch { .. }),
        "{e}"
    );
    // A cycle: `a` claims to be a fork of `c`, at an offset `c` pins.
    let e = restore_err(|v| {
        let c_id = entry(v, "c")["metadata"]["stream_id"].clone();
        let a_id = entry(v, "a")["metadata"]["stream_id"].clone();
        let a = entry(v, "a");
        a["retained_offset"] = 0.into();
        a["fork"]["forked_from"] = serde_json::json!({
            "source_stream_id": c_id, "fork_offset": 0, "pin": 50, "sub_offset": 0, "inherited_start": 0
        });
        let c = entry(v, "c");
        c["fork"]["fork_pins"] =
            serde_json::json!([{ "fork_stream_id": a_id, "pin": 50, "fork_offset": 0 }]);
    });
    assert!(matches!(e, StreamSnapshotError::ForkCycle(_)), "{e}");
}

#[test]
fn a_fork_created_closed_takes_its_prefix_and_body_first() {
    let mut m = machine();
    let (src, f) = (sid("src"), sid("fork"));
    create(&mut m, &src, b"hello", None);
    let StreamResponse::ForkSourcePinned { pin, .. } = pin(&mut m, &src, &f, Some(1), 30) else {
        panic!("pin refused");
    };
    let mut cmd = create_fork_cmd(&f, &src, 1, pin, b"XY");
    if let StreamCommand::CreateFork {
        prefix,
        close_after,
        ..
    } = &mut cmd
    {
        *prefix = Bytes::from_static(b"ell");
        *close_after = true;
    }
    let r = m.apply(cmd);
    assert_eq!(
        r,
        StreamResponse::Created {
            stream_id: f.clone(),
            next_offset: 6,
            closed: true
        }
    );
    let own = m.read_hot_at(&f, 1, 10, 40).unwrap();
    assert_eq!(own.slices.concat(), b"ellXY");
    assert!(own.closed);
    // Prefix and body are two messages.
    assert_eq!(
        m.fork_probe(&f, 1),
        ForkProbe::Own {
            message_end: Some(4),
            record: None,
            tail: 6
        }
    );
    assert_eq!(
        code(&append(&mut m, &f, b"!")),
        Some(StreamErrorCode::StreamClosed)
    );
}
