//! The engine's interface without HTTP: routing by placement, the bucket
//! created with the first stream, waiters woken by their stream only,
//! back-pressure, and shutdown.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strand::{BucketStreamId, StreamCommand, StreamResponse};
use strand_engine::{
    Engine, EngineConfig, EngineError, ManualClock, ReadFrom, WaitOutcome, WriteRequest,
};

pub(crate) fn engine(groups: usize) -> Engine {
    Engine::start_with_clock(
        EngineConfig {
            groups,
            ..EngineConfig::default()
        },
        Arc::new(ManualClock::new(1_000)),
    )
}

pub(crate) fn create(id: &BucketStreamId, body: &'static [u8]) -> StreamCommand {
    StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: "text/plain".into(),
        initial_payload: Bytes::from_static(body),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 1_000,
    }
}

fn append(id: &BucketStreamId, body: &'static [u8]) -> WriteRequest {
    WriteRequest {
        stream_id: id.clone(),
        content_type: Some("TEXT/plain".into()),
        media_type_match: true,
        payload: Bytes::from_static(body),
        close: false,
        stream_seq: None,
        producer: None,
        record_match: None,
    }
}

#[tokio::test]
async fn streams_live_in_their_placement_group() {
    let e = engine(8);
    let ids: Vec<BucketStreamId> = (0..32)
        .map(|i| BucketStreamId::new("acme", format!("s{i}")))
        .collect();
    for id in &ids {
        let r = e.create_stream(create(id, b"x"), true).await.unwrap();
        assert!(matches!(r, StreamResponse::Created { .. }), "{r:?}");
    }
    let mut used = std::collections::BTreeSet::new();
    for id in &ids {
        let group = e.group_for(id);
        used.insert(group);
        let probe = id.clone();
        assert!(
            e.query_group(group, move |m| m.head(&probe).is_some())
                .await
                .unwrap()
        );
        let probe = id.clone();
        let elsewhere = (group + 1) % 8;
        assert!(
            !e.query_group(elsewhere, move |m| m.head(&probe).is_some())
                .await
                .unwrap()
        );
    }
    assert!(used.len() > 1, "32 streams all landed in one of 8 groups");
    let usage = e.bucket_usage("acme").await.unwrap().unwrap();
    assert_eq!(usage.usage.stream_count, 32);
    e.shutdown().await;
}

#[tokio::test]
async fn writes_match_media_types_and_reads_are_slices() {
    let e = engine(2);
    let id = BucketStreamId::new("acme", "log");
    e.create_stream(create(&id, b"ab"), true).await.unwrap();
    let w = e.write(append(&id, b"cd")).await.unwrap();
    assert!(
        matches!(w.response, StreamResponse::Appended { next_offset: 4, .. }),
        "{w:?}"
    );
    let mut wrong = append(&id, b"{}");
    wrong.content_type = Some("application/json".into());
    let w = e.write(wrong).await.unwrap();
    assert_eq!(
        w.response.error_code(),
        Some(strand::StreamErrorCode::ContentTypeMismatch)
    );
    let read = e
        .read(id.clone(), ReadFrom::Start, 1024)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        read.slices,
        [Bytes::from_static(b"ab"), Bytes::from_static(b"cd")]
    );
    let tail = e
        .read(id.clone(), ReadFrom::Tail, 1024)
        .await
        .unwrap()
        .unwrap();
    assert!(tail.is_empty() && tail.offset == 4);
    e.shutdown().await;
}

/// On paused time: `b`'s 300 ms run out only once nothing else can run,
/// so both readers are parked when `a` gets its append, however loaded
/// the machine, and the test does not wait for them in real time.
#[tokio::test(start_paused = true)]
async fn an_append_wakes_only_its_streams_waiters() {
    let e = engine(1);
    let a = BucketStreamId::new("acme", "a");
    let b = BucketStreamId::new("acme", "b");
    e.create_stream(create(&a, b"1"), true).await.unwrap();
    e.create_stream(create(&b, b"1"), true).await.unwrap();
    let wait_a = tokio::spawn({
        let e = e.clone();
        let a = a.clone();
        async move { e.wait(a, 1, Duration::from_secs(5)).await }
    });
    let wait_b = tokio::spawn({
        let e = e.clone();
        let b = b.clone();
        async move { e.wait(b, 1, Duration::from_millis(300)).await }
    });
    crate::parked(&e, 2).await;
    e.write(append(&a, b"2")).await.unwrap();
    // Parked exactly at the tail the append extends: the bytes come along.
    match wait_a.await.unwrap().unwrap() {
        WaitOutcome::Appended(n) => {
            assert_eq!((n.offset, n.next_offset, n.closed), (1, 2, false));
            assert_eq!(n.payload, Bytes::from_static(b"2"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(wait_b.await.unwrap().unwrap(), WaitOutcome::TimedOut);
    // Already past the offset: no parking at all.
    assert_eq!(
        e.wait(a.clone(), 0, Duration::from_secs(5)).await.unwrap(),
        WaitOutcome::Changed
    );
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_parked_readers() {
    let e = engine(1);
    let a = BucketStreamId::new("acme", "a");
    e.create_stream(create(&a, b""), true).await.unwrap();
    let waiting = tokio::spawn({
        let e = e.clone();
        async move { e.wait(a, 0, Duration::from_secs(60)).await }
    });
    crate::parked(&e, 1).await;
    e.shutdown().await;
    let outcome = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.unwrap(), WaitOutcome::Shutdown);
    let after = e.head(BucketStreamId::new("acme", "a")).await;
    assert_eq!(after, Err(EngineError::Shutdown));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_is_back_pressure() {
    let e = Engine::start_with_clock(
        EngineConfig {
            groups: 1,
            queue_depth: 4,
            max_waiters: 2,
            ..EngineConfig::default()
        },
        Arc::new(ManualClock::new(0)),
    );
    let id = BucketStreamId::new("acme", "a");
    // Hold the group's task inside a query so that requests pile up.
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let (entered_tx, entered) = tokio::sync::oneshot::channel::<()>();
    let blocker = tokio::spawn({
        let e = e.clone();
        async move {
            e.query_group(0, move |_| {
                let _ = entered_tx.send(());
                let _ = blocked.recv_timeout(Duration::from_secs(10));
            })
            .await
        }
    });
    entered.await.unwrap();
    // Four requests fill the queue: a call queues its request when it is
    // first polled, so each is in the queue once polled once.
    let mut pending: Vec<_> = (0..4).map(|_| Box::pin(e.head(id.clone()))).collect();
    for p in &mut pending {
        let answered = tokio::select! {
            biased;
            answer = p => Some(answer),
            () = std::future::ready(()) => None,
        };
        assert_eq!(answered, None, "the group answered while held");
    }
    assert_eq!(e.head(id.clone()).await, Err(EngineError::Busy));
    release.send(()).unwrap();
    blocker.await.unwrap().unwrap();
    for p in pending {
        assert_eq!(p.await, Ok(None));
    }
    let first = e.waiter_permit().unwrap();
    let _second = e.waiter_permit().unwrap();
    assert_eq!(e.waiter_permit().unwrap_err(), EngineError::TooManyWaiters);
    drop(first);
    assert!(e.waiter_permit().is_ok());
    e.shutdown().await;
}

#[tokio::test]
async fn groups_run_the_configured_profile() {
    use strand::{MachineOptions, MachineProfile};
    // The default configuration is the corrected profile.
    let e = engine(2);
    for group in 0..2 {
        let profile = e.query_group(group, |m| m.profile()).await.unwrap();
        assert_eq!(profile, MachineProfile::Corrected);
    }
    e.shutdown().await;
    let e = Engine::start_with_clock(
        EngineConfig {
            groups: 1,
            machine: MachineOptions::reference(),
            ..EngineConfig::default()
        },
        Arc::new(ManualClock::new(1_000)),
    );
    let profile = e.query_group(0, |m| m.profile()).await.unwrap();
    assert_eq!(profile, MachineProfile::Reference);
}

/// A log that keeps every proposal unanswered until told.
#[derive(Default)]
struct HeldLog {
    held: std::sync::Mutex<Vec<strand_engine::ProposalDone>>,
}

impl strand_engine::GroupLog for HeldLog {
    fn propose(&self, _entry: strand_engine::GroupEntry, done: strand_engine::ProposalDone) {
        self.held.lock().unwrap().push(done);
    }

    fn status(&self) -> strand_engine::GroupStatus {
        strand_engine::GroupStatus {
            group: 0,
            leader: None,
            applied_index: None,
            last_log_index: None,
        }
    }

    fn shutdown(&self) -> strand_engine::LogFuture<()> {
        Box::pin(async {})
    }
}

#[tokio::test]
async fn writes_proposed_straight_to_a_log_are_bounded_by_the_queue_depth() {
    let (e, links) = Engine::start_replicated(
        EngineConfig {
            groups: 1,
            queue_depth: 2,
            ..EngineConfig::default()
        },
        Arc::new(ManualClock::new(1_000)),
    );
    let log = Arc::new(HeldLog::default());
    for link in links {
        link.attach(Arc::clone(&log) as Arc<dyn strand_engine::GroupLog>);
    }
    let id = BucketStreamId::new("acme", "s");
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let (e, id) = (e.clone(), id.clone());
            tokio::spawn(async move { e.write(append(&id, b"x")).await })
        })
        .collect();
    let held = || log.held.lock().unwrap().len();
    while held() < 2 {
        tokio::task::yield_now().await;
    }
    // Two writes wait for the log: a third is refused, not queued.
    // (The timeout only turns a write that waits, the bug, into a failure.)
    let third = tokio::time::timeout(Duration::from_secs(10), e.write(append(&id, b"x"))).await;
    assert!(matches!(third, Ok(Err(EngineError::Busy))), "{third:?}");
    assert_eq!(held(), 2);
    // Answered, they give their places back.
    for done in log.held.lock().unwrap().drain(..) {
        done(Err(EngineError::Shutdown));
    }
    for w in waiting {
        assert!(matches!(w.await.unwrap(), Err(EngineError::Shutdown)));
    }
    let next = {
        let (e, id) = (e.clone(), id.clone());
        tokio::spawn(async move { e.write(append(&id, b"x")).await })
    };
    while held() < 1 {
        tokio::task::yield_now().await;
    }
    for done in log.held.lock().unwrap().drain(..) {
        done(Err(EngineError::Shutdown));
    }
    assert!(matches!(next.await.unwrap(), Err(EngineError::Shutdown)));
}
