//! The workers over a real engine (no HTTP): GC respects `not_before_ms`,
//! reads mix cold and hot bytes, and an unflushable store keeps the hot
//! bytes.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use strand::{BucketStreamId, ColdChunkRef, StreamCommand, StreamResponse};
use strand_cold::{
    ColdBackend, ColdConfig, ColdTier, FaultPlan, FaultyBackend, ObjectStoreBackend, SharedBackend,
    starts,
};
use strand_engine::{Engine, EngineConfig, ManualClock, ReadFrom, WriteRequest};

const NOW: u64 = 1_767_225_600_000;

fn config() -> ColdConfig {
    ColdConfig {
        flush_min_bytes: 1,
        chunk_max_bytes: 1024,
        pack_max_bytes: 4096,
        flush_interval: Duration::from_millis(2),
        gc_interval: Duration::from_millis(2),
        retry_min: Duration::from_millis(1),
        retry_max: Duration::from_millis(10),
        ..ColdConfig::default()
    }
}

async fn engine() -> (Engine, ManualClock) {
    let clock = ManualClock::new(NOW);
    let engine = Engine::start_with_clock(
        EngineConfig {
            groups: 1,
            ..EngineConfig::default()
        },
        Arc::new(clock.clone()),
    );
    (engine, clock)
}

async fn stream(engine: &Engine, name: &str, payload: &[u8]) -> BucketStreamId {
    let id = BucketStreamId::new("bkt1", name);
    let r = engine
        .create_stream(
            StreamCommand::CreateStream {
                stream_id: id.clone(),
                content_type: "text/plain".into(),
                initial_payload: Bytes::new(),
                close_after: false,
                stream_seq: None,
                producer: None,
                stream_ttl_seconds: None,
                stream_expires_at_ms: None,
                attrs: None,
                now_ms: NOW,
            },
            false,
        )
        .await
        .unwrap();
    assert!(matches!(r, StreamResponse::Created { .. }), "{r:?}");
    for piece in payload.chunks(300) {
        append(engine, &id, piece).await;
    }
    id
}

async fn until(mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..5_000 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("condition never held");
}

fn text(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| b'a' + ((i as u8).wrapping_mul(7) ^ salt) % 26)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_waits_for_not_before_ms() {
    let (engine, clock) = engine().await;
    let backend: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let tier = ColdTier::new(Arc::clone(&backend), config());
    let workers = tier.start(&engine);
    let first = stream(&engine, "first", &text(2000, 1)).await;
    let later = stream(&engine, "later", &text(2000, 2)).await;
    until(async || engine.hot_bytes().await.unwrap() == 0).await;
    // A due entry (a deleted stream) ahead of a delayed one (a compaction
    // whose old objects may go only after not_before_ms).
    let deleted = engine.delete(first.clone()).await.unwrap();
    assert_eq!(deleted, StreamResponse::Deleted);
    let id = later.clone();
    let chunks: Vec<ColdChunkRef> = engine
        .query(&later, move |m| m.cold_chunks(&id).to_vec())
        .await
        .unwrap();
    assert!(chunks.len() >= 2, "{chunks:?}");
    let old_paths: Vec<String> = chunks.iter().map(|c| c.s3_path.clone()).collect();
    let (start, end) = (chunks[0].start_offset, chunks[chunks.len() - 1].end_offset);
    let compacted = engine
        .apply(
            &later,
            StreamCommand::CompactCold {
                stream_id: later.clone(),
                old_chunks: chunks,
                replacement: ColdChunkRef {
                    start_offset: start,
                    end_offset: end,
                    s3_path: "replacement".into(),
                    object_size: end - start,
                    object_offset: 0,
                    shared_object: false,
                    payload_digest: String::new(),
                },
                gc_not_before_ms: NOW + 60_000,
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(compacted, StreamResponse::ColdCompacted { .. }),
        "{compacted:?}"
    );
    // The deleted stream's entry is reclaimed; the delayed ones wait.
    until(async || tier.stats().gc_acked.load(Ordering::Relaxed) >= 1).await;
    let pending = engine
        .query_group(0, |m| m.pending_cold_gc_len())
        .await
        .unwrap();
    assert!(pending >= 1);
    let stored = stored_names(backend.as_ref()).await;
    for p in &old_paths {
        assert!(stored.contains(p), "{p} deleted before not_before_ms");
    }
    clock.advance(60_000);
    until(async || {
        engine
            .query_group(0, |m| m.pending_cold_gc_len())
            .await
            .unwrap()
            == 0
    })
    .await;
    let stored = stored_names(backend.as_ref()).await;
    // Each object goes with its message-start sidecar.
    assert!(
        stored.iter().all(|name| !old_paths.contains(name)
            && !old_paths.iter().any(|p| *name == starts::sidecar_name(p))),
        "{stored:?}"
    );
    workers.stop().await;
    engine.shutdown().await;
}

async fn append(engine: &Engine, id: &BucketStreamId, payload: &[u8]) {
    let w = engine
        .write(WriteRequest {
            stream_id: id.clone(),
            content_type: Some("text/plain".into()),
            media_type_match: false,
            payload: Bytes::copy_from_slice(payload),
            close: false,
            stream_seq: None,
            producer: None,
            record_match: None,
        })
        .await
        .unwrap();
    assert!(!w.response.is_error(), "{:?}", w.response);
}

/// The names of every object stored.
async fn stored_names(backend: &dyn ColdBackend) -> Vec<String> {
    backend
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect()
}

fn joined(read: &strand::HotRead) -> Vec<u8> {
    read.slices.iter().flat_map(|s| s.iter().copied()).collect()
}

/// Offsets a client computed inside flushed messages are read from the
/// message's start, and pages of flushed bytes end at message boundaries,
/// so a reader that always sends the offset it was given gets every byte
/// once (#29): the cold tier keeps each object's message starts beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushed_messages_are_read_whole() {
    let (engine, _clock) = engine().await;
    let backend: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let tier = ColdTier::new(Arc::clone(&backend), config());
    let workers = tier.start(&engine);
    // Messages of 100, 250, 40, 300, 10 and 500 bytes: 1,200 bytes, so a
    // flush's 1,024-byte piece cuts the last one.
    let sizes = [100usize, 250, 40, 300, 10, 500];
    let data = text(1200, 5);
    let id = stream(&engine, "yjs", &[]).await;
    let mut starts = vec![0usize];
    for size in sizes {
        let at = *starts.last().unwrap();
        append(&engine, &id, &data[at..at + size]).await;
        starts.push(at + size);
    }
    until(async || engine.hot_bytes().await.unwrap() == 0).await;
    let stored = stored_names(backend.as_ref()).await;
    assert!(
        stored.iter().any(|n| starts::object_of(n).is_some()),
        "{stored:?}"
    );
    let read = async |from: ReadFrom, max: usize| {
        tier.read(&engine, id.clone(), from, max)
            .await
            .unwrap()
            .unwrap()
    };
    // Inside a message: its start (snapshot offset + 1, as Yjs asks).
    for (asked, start) in [(101, 100), (349, 100), (350, 350), (391, 390), (0, 0)] {
        let page = read(ReadFrom::Within(asked), 4096).await;
        assert_eq!(page.offset, start, "asked {asked}");
        assert_eq!(joined(&page), data[start as usize..]);
    }
    // A message longer than the page is read from the offset itself; an
    // exact offset is never moved.
    assert_eq!(read(ReadFrom::Within(420), 200).await.offset, 420);
    assert_eq!(read(ReadFrom::Offset(101), 4096).await.offset, 101);
    // Pages end at message boundaries inside flushed bytes.
    let page = read(ReadFrom::Offset(0), 120).await;
    assert_eq!((page.offset, page.next_offset), (0, 100));
    assert_eq!(joined(&page), data[..100]);
    assert_eq!(read(ReadFrom::Within(0), 380).await.next_offset, 350);
    // Paging with the offsets handed out loses and repeats nothing, with
    // pages smaller and larger than the messages.
    for max in [7usize, 64, 120, 260, 333, 1000] {
        let (mut got, mut at) = (Vec::new(), 0u64);
        for _ in 0..2_000 {
            let page = read(ReadFrom::Within(at), max).await;
            assert_eq!(page.offset, at, "page size {max}");
            got.extend(joined(&page));
            at = page.next_offset;
            if page.up_to_date {
                break;
            }
        }
        assert!(got == data, "page size {max}");
    }
    workers.stop().await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_down_keeps_the_hot_bytes_and_reads_mix_tiers() {
    let (engine, _clock) = engine().await;
    let faulty = Arc::new(FaultyBackend::new(
        Arc::new(ObjectStoreBackend::memory()),
        FaultPlan::default(),
        3,
    ));
    let backend: SharedBackend = faulty.clone();
    let tier = ColdTier::new(backend, config());
    let workers = tier.start(&engine);
    let data = text(3000, 9);
    let id = stream(&engine, "s", &data[..2000]).await;
    until(async || engine.hot_bytes().await.unwrap() == 0).await;
    faulty.set_down(true);
    append(&engine, &id, &data[2000..]).await;
    // Uploads fail: the bytes stay hot, the failure is counted.
    until(async || tier.stats().consecutive_failures.load(Ordering::Relaxed) >= 3).await;
    assert_eq!(engine.hot_bytes().await.unwrap(), 1000);
    assert!(!tier.report().healthy);
    // A read from 0 is cold then hot; while the store is down it fails.
    assert!(
        tier.read(&engine, id.clone(), ReadFrom::Start, 1 << 20)
            .await
            .is_err()
    );
    faulty.set_down(false);
    let read = tier
        .read(&engine, id.clone(), ReadFrom::Start, 1 << 20)
        .await
        .unwrap()
        .unwrap();
    assert!(joined(&read) == data);
    assert!(read.up_to_date);
    // A page that would stop inside the second append ends at its start,
    // whether that append is still hot or the workers (running again)
    // flushed it meanwhile.
    let part = tier
        .read(&engine, id.clone(), ReadFrom::Offset(1500), 700)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((part.offset, part.next_offset), (1500, 2000));
    assert!(joined(&part)[..] == data[1500..2000]);
    assert_eq!(part.next_offset, 2000);
    let rest = tier
        .read(&engine, id.clone(), ReadFrom::Offset(1500), 1 << 20)
        .await
        .unwrap()
        .unwrap();
    assert!(joined(&rest)[..] == data[1500..]);
    assert!(rest.up_to_date);
    until(async || engine.hot_bytes().await.unwrap() == 0).await;
    assert!(tier.report().healthy);
    // All cold now: the same page.
    let cold = tier
        .read(&engine, id.clone(), ReadFrom::Offset(1500), 700)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((cold.offset, cold.next_offset), (1500, 2000));
    assert!(joined(&cold)[..] == data[1500..2000]);
    workers.stop().await;
    engine.shutdown().await;
}

/// The shape of `GET /__strand/cold`'s body, with both memory limits set
/// (before any worker ran): a change to it shows up here.
#[tokio::test]
async fn the_cold_report_keeps_its_shape() {
    let engine = Engine::start(EngineConfig {
        groups: 2,
        ..EngineConfig::default()
    });
    // An in-memory engine's workers act on every group it has.
    assert!(engine.leads_group(0) && engine.leads_group(1) && !engine.leads_group(2));
    let backend: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let tier = ColdTier::new(
        backend,
        ColdConfig {
            max_hot_bytes: Some(1 << 20),
            max_group_hot_bytes: Some(1 << 16),
            ..config()
        },
    );
    assert!(tier.install(&engine));
    let admitted = tier.admit(1, 1000).unwrap();
    assert_eq!(
        tier.admit(0, (1 << 16) + 1).unwrap_err(),
        strand_cold::Refusal::GroupTooLarge
    );
    assert_eq!(
        tier.admit(0, (1 << 20) + 1).unwrap_err(),
        strand_cold::Refusal::NodeTooLarge
    );
    insta::assert_json_snapshot!("cold_report", tier.report());
    drop(admitted);
    engine.shutdown().await;
}

/// A write that finds the hot memory full waits for the next sample that
/// shows room, and is refused only once its wait has passed.
#[tokio::test]
async fn a_write_waits_for_room_then_is_refused() {
    let backend: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let tier = ColdTier::new(
        backend,
        ColdConfig {
            max_hot_bytes: Some(1000),
            ..config()
        },
    );
    let held = tier.admit(0, 900).unwrap();
    // Nothing makes room: refused once the wait has passed.
    assert_eq!(
        tier.admit_waiting(0, 200, Duration::from_millis(50))
            .await
            .unwrap_err(),
        strand_cold::Refusal::NodeFull
    );
    // The held write finishes and a sample shows the room: the waiting
    // write goes in then, long before its wait ends.
    let budget = tier.budget();
    let (waited, ()) = tokio::join!(
        tier.admit_waiting(0, 200, Duration::from_secs(600)),
        async {
            drop(held);
            let completed = budget.sample_start();
            budget.record_sample(0, completed);
        }
    );
    let admitted = waited.unwrap();
    assert_eq!(budget.estimate(), 200);
    assert_eq!(tier.waiting_bytes(), 0, "its place was given back");
    drop(admitted);
    let completed = budget.sample_start();
    budget.record_sample(0, completed);
    // The waiting writes hold at most half the limit (500 bytes) between
    // them: with 400 waiting, a write of 200 is refused at once.
    let held = tier.admit(0, 900).unwrap();
    let (first, second) = tokio::join!(
        tier.admit_waiting(0, 400, Duration::from_millis(50)),
        async {
            // The first write has taken its place before this runs.
            assert_eq!(tier.waiting_bytes(), 400);
            tier.admit_waiting(0, 200, Duration::from_secs(600)).await
        }
    );
    assert_eq!(first.unwrap_err(), strand_cold::Refusal::NodeFull);
    assert_eq!(second.unwrap_err(), strand_cold::Refusal::NodeFull);
    assert_eq!(tier.waiting_bytes(), 0);
    drop(held);
    // Each write that gave up counts once, however often it tried: the
    // first wait's write and these two.
    assert_eq!(budget.refused(), 3);
    // A body that never fits is refused at once, without waiting.
    assert_eq!(
        tier.admit_waiting(0, 1001, Duration::from_secs(600))
            .await
            .unwrap_err(),
        strand_cold::Refusal::NodeTooLarge
    );
}
