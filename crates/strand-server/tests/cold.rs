//! The cold tier through the server: flushes under a hot-memory limit,
//! reads of flushed ranges (catch-up, long-poll, SSE), GC after deletes and
//! purges, and a store that fails at random.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Resp, TestServer, eventually, off, read_sse, request};
use hyper::{Method, StatusCode};
use strand::{BucketStreamId, ColdGcTarget};
use strand_cold::{
    ColdBackend, ColdTier, FaultPlan, FaultyBackend, ObjectStoreBackend, SharedBackend, starts,
};
use strand_engine::Engine;
use strand_server::Config;

/// The byte at `offset` of stream `s`: letters only, so SSE carries it as
/// text, and different per stream and position.
fn byte_at(s: usize, offset: u64) -> u8 {
    let s = s as u64;
    b'a' + u8::try_from((s * 13 + offset * 7 + offset / 101) % 26).unwrap()
}

fn bytes(s: usize, range: std::ops::Range<u64>) -> Vec<u8> {
    range.map(|o| byte_at(s, o)).collect()
}

fn config(tweak: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::for_listen("127.0.0.1:0".parse().unwrap());
    c.long_poll_timeout_ms = 300;
    c.groups = 4;
    c.cold_flush_interval_ms = 5;
    c.cold_gc_interval_ms = 20;
    tweak(&mut c);
    c
}

/// Sends a request built by `make`, again while it answers 503 (the
/// hot-memory limit, or a cold store that failed), for up to `within`.
async fn retrying(within: Duration, make: impl Fn() -> common::Req) -> Resp {
    eventually("an answer other than 503", within, || async {
        let r = make().send().await;
        (r.status != StatusCode::SERVICE_UNAVAILABLE).then_some(r)
    })
    .await
}

/// Waits until the engine holds no hot byte: the workers flushed them all.
async fn all_flushed(engine: &Engine) {
    eventually(
        "every hot byte flushed",
        Duration::from_secs(30),
        || async { (engine.hot_bytes().await.unwrap() == 0).then_some(()) },
    )
    .await;
}

/// Creates `/v1/stream/{name}` as a text stream.
async fn create(addr: std::net::SocketAddr, path: &str) {
    let r = request(addr, Method::PUT, path)
        .header("content-type", "text/plain")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{path}");
}

/// Appends `len` bytes of stream `s` in pieces of `piece`.
async fn fill(addr: std::net::SocketAddr, path: String, s: usize, len: u64, piece: u64) {
    let mut at = 0;
    while at < len {
        let end = (at + piece).min(len);
        let body = bytes(s, at..end);
        let r = retrying(Duration::from_secs(100), || {
            request(addr, Method::POST, &path)
                .header("content-type", "text/plain")
                .body(body.clone())
        })
        .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{path} at {at}");
        assert_eq!(r.next(), off(end));
        at = end;
    }
}

/// Catch-up reads from `-1` to the tail.
async fn read_all(addr: std::net::SocketAddr, path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = "-1".to_owned();
    for _ in 0..10_000 {
        let url = format!("{path}?offset={offset}");
        let r = retrying(Duration::from_secs(30), || request(addr, Method::GET, &url)).await;
        assert_eq!(r.status, StatusCode::OK, "{url}: {}", r.text());
        out.extend_from_slice(&r.body);
        offset = r.next();
        if r.h("stream-up-to-date") == Some("true") {
            return out;
        }
    }
    panic!("{path} never caught up");
}

/// The data of an SSE response from `-1` until the first up-to-date
/// control event.
async fn read_sse_all(addr: std::net::SocketAddr, path: &str) -> Vec<u8> {
    let url = format!("{path}?offset=-1&live=sse");
    let response = eventually(
        &format!("{path}: SSE answers other than 503"),
        Duration::from_secs(30),
        || async {
            let response = request(addr, Method::GET, &url).open().await;
            (response.status() != StatusCode::SERVICE_UNAVAILABLE).then_some(response)
        },
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let text = read_sse(response, Duration::from_secs(20), |t| {
        t.contains("\"upToDate\":true")
    })
    .await;
    assert!(
        text.contains("\"upToDate\":true"),
        "{path}: SSE never caught up"
    );
    let mut out = Vec::new();
    let mut in_data = false;
    for line in text.lines() {
        if let Some(kind) = line.strip_prefix("event: ") {
            in_data = kind == "data";
        } else if let Some(data) = line.strip_prefix("data:")
            && in_data
        {
            out.extend_from_slice(data.as_bytes());
        }
    }
    out
}

/// Every object path a live stream of the engine references.
async fn referenced(engine: &Engine) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for g in 0..engine.group_count() {
        let paths = engine
            .query_group(g, |m| {
                m.snapshot_without_streams()
                    .shared_cold_object_owners
                    .into_iter()
                    .map(|o| o.s3_path)
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap();
        out.extend(paths);
    }
    out
}

async fn pending_gc(engine: &Engine) -> usize {
    let mut n = 0;
    for g in 0..engine.group_count() {
        n += engine
            .query_group(g, |m| m.pending_cold_gc_len())
            .await
            .unwrap();
    }
    n
}

/// The objects stored, each with its message-start sidecar folded in: a
/// sidecar whose object is gone is listed (an orphan).
async fn listed(backend: &dyn ColdBackend) -> BTreeSet<String> {
    let names: BTreeSet<String> = backend
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    names
        .iter()
        .filter(|n| starts::object_of(n).is_none_or(|o| !names.contains(o)))
        .cloned()
        .collect()
}

/// Samples the engine's hot-bytes gauge until stopped; returns the peak.
/// The node's hot bytes, every group asked at once: asked one after
/// another, a flush in one group and writes in another between their
/// answers could add up past anything the node held at one moment.
async fn hot_now(engine: &Engine) -> Option<u64> {
    let asks = (0..engine.group_count())
        .map(|group| engine.query_group(group, |m| m.total_hot_payload_bytes()));
    futures_util::future::join_all(asks)
        .await
        .into_iter()
        .try_fold(0u64, |sum, hot| hot.ok().map(|h| sum + h))
}

fn sample_hot(engine: Engine, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut peak = 0;
        while !stop.load(Ordering::Relaxed) {
            if let Some(hot) = hot_now(&engine).await {
                peak = peak.max(hot);
            }
            // The sampling period of a measurement, not a wait for an event.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        peak
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_mib_over_200_streams_flush_under_the_limit_and_read_back_exact() {
    const STREAMS: usize = 200;
    const PER_STREAM: u64 = 256 * 1024; // 200 × 256 KiB = 50 MiB
    const LIMIT: u64 = 8 * 1024 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let c = config(|c| {
        c.cold_dir = Some(dir.path().join("cold"));
        c.max_hot_bytes = Some(LIMIT);
        c.cold_flush_bytes = 64 * 1024;
        c.cold_chunk_bytes = 256 * 1024;
        c.cold_pack_bytes = 1024 * 1024;
    });
    let cold = c.cold_tier().unwrap().unwrap();
    let server = TestServer::start_cold(c, Some(cold.clone())).await;
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_hot(server.engine.clone(), Arc::clone(&stop));

    for s in 0..STREAMS {
        create(addr, &format!("/v1/stream/cold-{s}")).await;
    }
    let started = Instant::now();
    let mut writers = Vec::new();
    for t in 0..16 {
        writers.push(tokio::spawn(async move {
            for s in (t..STREAMS).step_by(16) {
                fill(
                    addr,
                    format!("/v1/stream/cold-{s}"),
                    s,
                    PER_STREAM,
                    16 * 1024,
                )
                .await;
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let write_secs = started.elapsed().as_secs_f64();
    let total = STREAMS as u64 * PER_STREAM;
    // Let the workers flush what passed their threshold. Below the
    // pressure mark a group that holds less than four times
    // `--cold-flush-bytes`, none of it in a stream holding
    // `--cold-piece-bytes`, keeps it hot: at most that much per group
    // stays.
    let may_stay = 4 * 4 * 64 * 1024;
    let flushed = eventually(
        &format!("all but {may_stay} of {total} bytes flushed"),
        Duration::from_secs(60),
        || async {
            let flushed = cold.stats().flushed_bytes.load(Ordering::Relaxed);
            (flushed + may_stay >= total).then_some(flushed)
        },
    )
    .await;

    // Every stream back, byte-exact: catch-up from -1, long-poll from an
    // old offset, SSE from -1.
    let read_started = Instant::now();
    let mut readers = Vec::new();
    for t in 0..4 {
        readers.push(tokio::spawn(async move {
            for s in (t..STREAMS).step_by(4) {
                let path = format!("/v1/stream/cold-{s}");
                let got = read_all(addr, &path).await;
                assert!(got == bytes(s, 0..PER_STREAM), "{path}: catch-up differs");
            }
        }));
    }
    for r in readers {
        r.await.unwrap();
    }
    let read_secs = read_started.elapsed().as_secs_f64();
    for s in 0..STREAMS {
        let path = format!("/v1/stream/cold-{s}");
        let from = (s as u64 * 1237) % PER_STREAM;
        let url = format!("{path}?offset={}&live=long-poll", off(from));
        let r = retrying(Duration::from_secs(30), || request(addr, Method::GET, &url)).await;
        assert_eq!(r.status, StatusCode::OK, "{url}");
        // From the offset itself where the bytes left the hot buffer, from
        // the start of the 16 KiB message holding it where they did not.
        let start = PER_STREAM - r.body.len() as u64;
        assert!(
            start == from
                || (start.is_multiple_of(16 * 1024) && start <= from && from - start < 16 * 1024),
            "{url}: long-poll starts at {start}"
        );
        assert!(
            r.body == bytes(s, start..PER_STREAM),
            "{url}: long-poll differs"
        );
        assert_eq!(r.h("stream-up-to-date"), Some("true"));
        let sse = read_sse_all(addr, &path).await;
        assert!(sse == bytes(s, 0..PER_STREAM), "{path}: SSE differs");
    }
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap();
    let report = cold.report();
    assert!(peak <= LIMIT, "hot bytes peaked at {peak} > {LIMIT}");
    assert!(report.cold_reads > 0 && report.healthy);
    let flush_secs = report.flush_ms as f64 / 1000.0;
    eprintln!(
        "COLD 50MiB: hot peak {:.2} MiB (limit {:.0} MiB), writes {:.1} MiB/s with {} refusals, \
         flushed {:.1} MiB in {} uploads at {:.1} MiB/s of flush time, catch-up from cold {:.1} MiB/s",
        mib(peak),
        mib(LIMIT),
        mib(total) / write_secs,
        report.refused_writes,
        mib(report.flushed_bytes),
        report.uploads,
        mib(report.flushed_bytes) / flush_secs.max(1e-9),
        mib(total) / read_secs,
    );
    let status = server.admin(Method::GET, "/__strand/cold").send().await;
    assert_eq!(status.status, StatusCode::OK);
    let json: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
    assert_eq!(json["max_hot_bytes"], LIMIT);
    assert!(json["flushed_bytes"].as_u64().unwrap() >= flushed);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_and_purges_reclaim_every_object_they_owned() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(|c| {
        c.cold_dir = Some(dir.path().join("cold"));
        c.cold_flush_bytes = 1;
        c.cold_chunk_bytes = 8 * 1024;
        c.cold_pack_bytes = 32 * 1024;
    });
    let cold = c.cold_tier().unwrap().unwrap();
    let server = TestServer::start_cold(c, Some(cold.clone())).await;
    let addr = server.addr;
    for bucket in ["keep", "gone"] {
        assert_eq!(
            server.put(&format!("/{bucket}")).send().await.status,
            StatusCode::CREATED
        );
        for s in 0..10 {
            let path = format!("/{bucket}/s{s}");
            create(addr, &path).await;
            fill(addr, path, s, 20 * 1024, 4 * 1024).await;
        }
    }
    all_flushed(&server.engine).await;
    let before = listed(cold.backend().as_ref()).await;
    assert!(!before.is_empty());
    for s in 0..5 {
        assert_eq!(
            server.delete(&format!("/keep/s{s}")).send().await.status,
            StatusCode::NO_CONTENT
        );
    }
    let purge = server
        .admin(Method::DELETE, "/__strand/purge/gone")
        .send()
        .await;
    assert_eq!(purge.status, StatusCode::OK, "{}", purge.text());
    // The deletes queued GC entries (not_before_ms 0); the workers drain
    // them and delete the objects nothing references any more.
    eventually(
        "the GC queue and the store drained",
        Duration::from_secs(30),
        || async {
            (pending_gc(&server.engine).await == 0
                && listed(cold.backend().as_ref()).await == referenced(&server.engine).await)
                .then_some(())
        },
    )
    .await;
    let after = listed(cold.backend().as_ref()).await;
    assert!(after.len() < before.len());
    for s in 5..10 {
        let path = format!("/keep/s{s}");
        assert!(
            read_all(addr, &path).await == bytes(s, 0..20 * 1024),
            "{path}"
        );
    }
    assert_eq!(
        server.get("/keep/s0?offset=-1").send().await.status,
        StatusCode::NOT_FOUND
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_loses_no_acknowledged_byte_and_leaves_no_orphan() {
    const STREAMS: usize = 20;
    const PER_STREAM: u64 = 64 * 1024;
    let inner: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let faulty = Arc::new(FaultyBackend::new(
        Arc::clone(&inner),
        FaultPlan {
            fail_put_ppm: 200_000,
            phantom_put_ppm: 100_000,
            fail_get_ppm: 100_000,
            fail_delete_ppm: 200_000,
            fail_list_ppm: 100_000,
            delay_ppm: 100_000,
            max_delay: Duration::from_millis(5),
        },
        // STRAND_COLD_FAULT_SEED replays another sequence of faults.
        std::env::var("STRAND_COLD_FAULT_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0x5eed),
    ));
    let c = config(|c| {
        c.max_hot_bytes = Some(512 * 1024);
        c.cold_flush_bytes = 1024;
        c.cold_chunk_bytes = 8 * 1024;
        c.cold_pack_bytes = 32 * 1024;
        c.cold_sweep_interval_ms = 50;
        c.cold_orphan_grace_ms = 0;
    });
    let mut cold_config = c.cold_config();
    cold_config.retry_max = Duration::from_millis(50);
    // The random draws depend on how operations interleave; the first
    // stored put is a phantom in any case, so the orphan path always runs.
    faulty.phantom_next_puts(1);
    let backend: SharedBackend = faulty.clone();
    let cold = ColdTier::new(backend, cold_config);
    let server = TestServer::start_cold(c, Some(cold.clone())).await;
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_hot(server.engine.clone(), Arc::clone(&stop));
    for s in 0..STREAMS {
        create(addr, &format!("/v1/stream/f-{s}")).await;
    }
    // An outage in the middle of the writes (once the store took a
    // flush): they go on until the limit, then get 503 until the store is
    // back.
    let outage = {
        let (faulty, cold) = (Arc::clone(&faulty), cold.clone());
        tokio::spawn(async move {
            eventually("the first flush", Duration::from_secs(30), || async {
                (cold.stats().flushed_bytes.load(Ordering::Relaxed) > 0).then_some(())
            })
            .await;
            faulty.set_down(true);
            // The outage itself: the store stays down this long.
            tokio::time::sleep(Duration::from_millis(300)).await;
            faulty.set_down(false);
        })
    };
    let mut writers = Vec::new();
    for t in 0..4 {
        writers.push(tokio::spawn(async move {
            for s in (t..STREAMS).step_by(4) {
                fill(addr, format!("/v1/stream/f-{s}"), s, PER_STREAM, 4 * 1024).await;
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    outage.await.unwrap();
    for s in 0..STREAMS {
        let path = format!("/v1/stream/f-{s}");
        assert!(
            read_all(addr, &path).await == bytes(s, 0..PER_STREAM),
            "{path}"
        );
    }
    for s in 0..STREAMS / 2 {
        let r = server.delete(&format!("/v1/stream/f-{s}")).send().await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    // Eventually: the GC queue is empty and the store holds exactly the
    // objects live streams reference (orphans of phantom puts and of
    // deleted streams gone).
    eventually("the store clean", Duration::from_secs(60), || async {
        (pending_gc(&server.engine).await == 0
            && listed(inner.as_ref()).await == referenced(&server.engine).await)
            .then_some(())
    })
    .await;
    // Nothing a live stream references was deleted: all still readable.
    for s in STREAMS / 2..STREAMS {
        let path = format!("/v1/stream/f-{s}");
        assert!(
            read_all(addr, &path).await == bytes(s, 0..PER_STREAM),
            "{path}"
        );
    }
    let live = referenced(&server.engine).await;
    let stored = listed(inner.as_ref()).await;
    assert!(live.is_subset(&stored));
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap();
    assert!(peak <= 512 * 1024, "hot peak {peak}");
    let report = cold.report();
    assert!(report.store_errors > 0, "no fault was injected");
    assert!(faulty.counts.phantoms.load(Ordering::Relaxed) > 0);
    eprintln!("COLD faults: {report:?}");
    server.stop().await;
}

/// A stream deleted and created again under the same name: the old
/// stream's GC entry (its whole prefix) must not take the new stream's
/// objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_stream_keeps_its_objects_when_the_old_ones_are_reclaimed() {
    let c = config(|c| c.cold_flush_bytes = 1);
    let inner: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let faulty = Arc::new(FaultyBackend::new(
        Arc::clone(&inner),
        FaultPlan::default(),
        1,
    ));
    let mut cold_config = c.cold_config();
    cold_config.retry_max = Duration::from_millis(20);
    let backend: SharedBackend = faulty.clone();
    let cold = ColdTier::new(backend, cold_config);
    let server = TestServer::start_cold(c, Some(cold.clone())).await;
    let addr = server.addr;
    let path = "/v1/stream/again";
    create(addr, path).await;
    fill(addr, path.to_owned(), 1, 4096, 1024).await;
    all_flushed(&server.engine).await;
    // Deletes fail until the new stream's bytes are in the store, so its
    // GC entry runs over a prefix that holds both streams' objects.
    faulty.set_deletes_down(true);
    assert_eq!(
        server.delete(path).send().await.status,
        StatusCode::NO_CONTENT
    );
    create(addr, path).await;
    fill(addr, path.to_owned(), 2, 4096, 1024).await;
    all_flushed(&server.engine).await;
    let id = BucketStreamId::new("default", "again");
    let queued = server
        .engine
        .query(&id, |m| m.pending_cold_gc_batch(16))
        .await
        .unwrap();
    assert!(
        queued
            .iter()
            .any(|e| matches!(&e.target, ColdGcTarget::Stream(s) if *s == id)),
        "{queued:?}"
    );
    faulty.set_deletes_down(false);
    eventually("the GC queue drained", Duration::from_secs(30), || async {
        (pending_gc(&server.engine).await == 0).then_some(())
    })
    .await;
    assert_eq!(
        listed(inner.as_ref()).await,
        referenced(&server.engine).await
    );
    assert!(read_all(addr, path).await == bytes(2, 0..4096));
    server.stop().await;
}

/// What happens when the store is down for a while under write load
/// (30 s by default; `STRAND_COLD_OUTAGE_SECS`). Measures, asserts only
/// what must hold (the limit, no lost byte); run with `--ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a 45-second measurement; run with --ignored"]
async fn store_down_for_30_seconds_under_write_load() {
    const STREAMS: usize = 50;
    const LIMIT: u64 = 8 * 1024 * 1024;
    let outage_secs: u64 = std::env::var("STRAND_COLD_OUTAGE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let inner: SharedBackend =
        Arc::new(ObjectStoreBackend::local(&dir.path().join("cold")).unwrap());
    let faulty = Arc::new(FaultyBackend::new(
        Arc::clone(&inner),
        FaultPlan::default(),
        9,
    ));
    let c = config(|c| {
        c.max_hot_bytes = Some(LIMIT);
        c.cold_flush_bytes = 64 * 1024;
        c.cold_chunk_bytes = 256 * 1024;
        c.cold_pack_bytes = 1024 * 1024;
    });
    let backend: SharedBackend = faulty.clone();
    let cold = ColdTier::new(backend, c.cold_config());
    let server = TestServer::start_cold(c, Some(cold.clone())).await;
    let addr = server.addr;
    for s in 0..STREAMS {
        create(addr, &format!("/v1/stream/o-{s}")).await;
    }
    let stop_hot = Arc::new(AtomicBool::new(false));
    let sampler = sample_hot(server.engine.clone(), Arc::clone(&stop_hot));
    // phase: 0 before, 1 during the outage, 2 after.
    let phase = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let acked: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let refused: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let done = Arc::new(AtomicBool::new(false));
    let lengths: Arc<Vec<AtomicU64>> = Arc::new((0..STREAMS).map(|_| AtomicU64::new(0)).collect());
    let mut writers = Vec::new();
    for t in 0..8 {
        let (phase, acked, refused, done, lengths) = (
            Arc::clone(&phase),
            Arc::clone(&acked),
            Arc::clone(&refused),
            Arc::clone(&done),
            Arc::clone(&lengths),
        );
        writers.push(tokio::spawn(async move {
            let mut round = 0u64;
            while !done.load(Ordering::Relaxed) {
                for s in (t..STREAMS).step_by(8) {
                    let path = format!("/v1/stream/o-{s}");
                    let at = lengths[s].load(Ordering::Relaxed);
                    let body = bytes(s, at..at + 16 * 1024);
                    let r = request(addr, Method::POST, &path)
                        .header("content-type", "text/plain")
                        .body(body)
                        .send()
                        .await;
                    let p = phase.load(Ordering::Relaxed);
                    if r.status == StatusCode::SERVICE_UNAVAILABLE {
                        refused[p].fetch_add(1, Ordering::Relaxed);
                        // The load's own back-off, not a wait for an event.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    assert_eq!(r.status, StatusCode::NO_CONTENT);
                    lengths[s].store(at + 16 * 1024, Ordering::Relaxed);
                    acked[p].fetch_add(16 * 1024, Ordering::Relaxed);
                }
                round += 1;
            }
            round
        }));
    }
    let before = Duration::from_secs(5);
    let after = Duration::from_secs(10);
    // The phases are the measurement: load before, during and after an
    // outage of `outage_secs`.
    tokio::time::sleep(before).await;
    faulty.set_down(true);
    phase.store(1, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(outage_secs)).await;
    let hot_at_end_of_outage = server.engine.hot_bytes().await.unwrap();
    faulty.set_down(false);
    let back = Instant::now();
    phase.store(2, Ordering::Relaxed);
    let mut healthy_after = None;
    while back.elapsed() < after {
        if healthy_after.is_none() && cold.report().healthy {
            healthy_after = Some(back.elapsed());
        }
        // Sampling the phase after the outage, which lasts `after`.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    // Measured, not asserted: `None` when not drained within 30 s.
    let drained = eventually(
        "the hot bytes drained",
        Duration::from_secs(3600),
        || async { (server.engine.hot_bytes().await.unwrap() <= 4 * 64 * 1024).then_some(()) },
    );
    let drained_after = tokio::time::timeout(Duration::from_secs(30), drained)
        .await
        .ok()
        .map(|()| back.elapsed());
    stop_hot.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap();
    for s in 0..STREAMS {
        let path = format!("/v1/stream/o-{s}");
        let len = lengths[s].load(Ordering::Relaxed);
        assert!(read_all(addr, &path).await == bytes(s, 0..len), "{path}");
    }
    assert!(peak <= LIMIT, "hot peak {peak}");
    let rate = |i: usize, secs: f64| mib(acked[i].load(Ordering::Relaxed)) / secs;
    let report = cold.report();
    eprintln!(
        "COLD outage {outage_secs} s: accepted writes {:.1} MiB/s before, {:.2} MiB/s during \
         ({} refusals, hot {:.2} MiB at the end of the outage), {:.1} MiB/s after; \
         hot peak {:.2} MiB (limit {:.0}); healthy again {:?} after the store came back, \
         hot drained below the flush threshold {:?} after; {} store errors; \
         no acknowledged byte lost",
        rate(0, before.as_secs_f64()),
        rate(1, outage_secs as f64),
        refused[1].load(Ordering::Relaxed),
        mib(hot_at_end_of_outage),
        rate(2, after.as_secs_f64()),
        mib(peak),
        mib(LIMIT),
        healthy_after,
        drained_after,
        report.store_errors,
    );
    server.stop().await;
}

/// A JSON stream whose flushes cut values in the middle (pieces of 1000
/// bytes): reads from cold still return whole values as one array, and a
/// page that ends in the cold tier continues in the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_streams_read_back_whole_values_across_the_tiers() {
    let c = config(|c| {
        c.cold_flush_bytes = 1;
        c.cold_chunk_bytes = 1000;
        c.max_read_bytes = 3000;
        c.max_body_bytes = 2000;
    });
    let backend: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let cold = ColdTier::new(backend, c.cold_config());
    let server = TestServer::start_cold(c, Some(cold.clone())).await;
    let path = "/v1/stream/values";
    let r = server
        .put(path)
        .header("content-type", "application/json")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let values: Vec<serde_json::Value> = (0..300)
        .map(|i| serde_json::json!({"n": i, "pad": "x".repeat(i % 37)}))
        .collect();
    for chunk in values.chunks(10) {
        let r = server
            .post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(chunk).unwrap())
            .send()
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    all_flushed(&server.engine).await;
    // One more append stays hot: the last page mixes tiers.
    let r = server
        .post(path)
        .header("content-type", "application/json")
        .body(r#"{"n":"hot"}"#)
        .send()
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let mut got: Vec<serde_json::Value> = Vec::new();
    let mut offset = "-1".to_owned();
    let mut pages = 0;
    for _ in 0..1_000 {
        let r = server.get(&format!("{path}?offset={offset}")).send().await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let page: Vec<serde_json::Value> = serde_json::from_slice(&r.body).unwrap();
        got.extend(page);
        pages += 1;
        offset = r.next();
        if r.h("stream-up-to-date") == Some("true") {
            break;
        }
    }
    let mut want = values;
    want.push(serde_json::json!({"n": "hot"}));
    assert_eq!(got, want);
    assert!(pages > 1, "one page held everything");
    server.stop().await;
}

/// The Yjs server's compaction path over flushed bytes (#29): a late
/// joiner asks for a snapshot's offset + 1 and must get whole updates from
/// the one after the snapshot, and every page of flushed bytes ends at an
/// update boundary (its client decodes each body as whole updates).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn computed_offsets_inside_flushed_messages_start_at_the_message() {
    let c = config(|c| {
        c.cold_flush_bytes = 1;
        c.cold_chunk_bytes = 1000;
        c.max_read_bytes = 700;
    });
    let backend: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let cold = ColdTier::new(backend, c.cold_config());
    let server = TestServer::start_cold(c, Some(cold.clone())).await;
    let path = "/v1/stream/yjs/service/docs/doc-1/.updates";
    let r = server
        .put(path)
        .header("content-type", "application/octet-stream")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // Updates of 1 to 300 bytes, each its own append.
    let mut updates: Vec<Vec<u8>> = Vec::new();
    let mut at = 0u64;
    for i in 0..40u64 {
        let len = 1 + (i * 97) % 300;
        let update = bytes(7, at..at + len);
        let r = server
            .post(path)
            .header("content-type", "application/octet-stream")
            .body(update.clone())
            .send()
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        updates.push(update);
        at += len;
    }
    all_flushed(&server.engine).await;
    let starts: Vec<u64> = updates
        .iter()
        .scan(0u64, |at, u| {
            let start = *at;
            *at += u.len() as u64;
            Some(start)
        })
        .collect();
    // "snapshot offset + 1" for a snapshot taken after update 9.
    let (snapshot, next) = (starts[10], &updates[10]);
    let r = server
        .get(&format!("{path}?offset={}", off(snapshot + 1)))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert!(r.body.starts_with(next), "the read starts at update 10");
    // Paging from the start: every body is whole updates, none twice.
    let (mut offset, mut seen) = ("-1".to_owned(), 0usize);
    for _ in 0..1_000 {
        let r = server.get(&format!("{path}?offset={offset}")).send().await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let mut body = &r.body[..];
        while !body.is_empty() {
            let update = &updates[seen];
            assert!(body.starts_with(update), "update {seen} is whole");
            body = &body[update.len()..];
            seen += 1;
        }
        offset = r.next();
        if r.h("stream-up-to-date") == Some("true") {
            break;
        }
    }
    assert_eq!(seen, updates.len());
    server.stop().await;
}

/// A fork of a source whose bytes went to the cold tier reads them through
/// it, also once the source is soft-deleted; deleting the fork lets the
/// source go and its objects be reclaimed (`docs/forks.md` §3.5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_reads_its_flushed_source_through_the_cold_tier() {
    let c = config(|c| c.cold_flush_bytes = 1);
    let backend: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let cold = ColdTier::new(Arc::clone(&backend), c.cold_config());
    let server = TestServer::start_cold(c, Some(cold.clone())).await;
    let addr = server.addr;
    let (src, fork) = ("/v1/stream/cold-src", "/v1/stream/cold-fork");
    create(addr, src).await;
    fill(addr, src.to_owned(), 3, 20_000, 1000).await;
    all_flushed(&server.engine).await;
    let r = request(addr, Method::PUT, fork)
        .header("stream-forked-from", src)
        .header("stream-fork-offset", &off(15_000))
        .header("content-type", "text/plain")
        .body(b"tail".to_vec())
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let mut want = bytes(3, 0..15_000);
    want.extend_from_slice(b"tail");
    assert!(read_all(addr, fork).await == want);
    // The source goes (soft): its objects stay while the fork reads them.
    assert_eq!(
        server.delete(src).send().await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        request(addr, Method::GET, src).send().await.status,
        StatusCode::GONE
    );
    all_flushed(&server.engine).await;
    assert!(read_all(addr, fork).await == want);
    // The fork goes: the source is removed and every object reclaimed.
    assert_eq!(
        server.delete(fork).send().await.status,
        StatusCode::NO_CONTENT
    );
    eventually(
        "the soft-deleted source's objects reclaimed",
        Duration::from_secs(30),
        || async {
            (pending_gc(&server.engine).await == 0
                && listed(backend.as_ref()).await.is_empty()
                && request(addr, Method::HEAD, src).send().await.status == StatusCode::NOT_FOUND)
                .then_some(())
        },
    )
    .await;
    server.stop().await;
}

/// `--max-group-hot-bytes`: with the store down, a group at its limit
/// refuses writes with 503 `Retry-After` while another group still takes
/// them; a body larger than the limit gets 413; once the store is back,
/// the full group flushes under pressure (far below `--cold-flush-bytes`)
/// and takes writes again, and the other group's hot bytes stay put.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_over_its_hot_limit_refuses_writes_until_it_flushes() {
    const LIMIT: u64 = 64 * 1024;
    const PIECE: u64 = 16 * 1024;
    let inner: SharedBackend = Arc::new(ObjectStoreBackend::memory());
    let faulty = Arc::new(FaultyBackend::new(inner, FaultPlan::default(), 1));
    faulty.set_down(true);
    let c = config(|c| {
        c.groups = 2;
        c.max_group_hot_bytes = Some(LIMIT);
        c.cold_flush_bytes = 64 * 1024 * 1024;
    });
    let backend: SharedBackend = faulty.clone();
    let cold = ColdTier::new(backend, c.cold_config());
    let server = TestServer::start_cold(c, Some(cold.clone())).await;
    let addr = server.addr;
    let engine = server.engine.clone();
    // Two streams in different groups.
    let id = |n: usize| BucketStreamId::new("default", format!("g-{n}"));
    let full = 0;
    let other = (1..64)
        .find(|n| engine.group_for(&id(*n)) != engine.group_for(&id(full)))
        .unwrap();
    let (full_group, other_group) = (engine.group_for(&id(full)), engine.group_for(&id(other)));
    for n in [full, other] {
        create(addr, &format!("/v1/stream/g-{n}")).await;
    }
    let append = |n: usize, at: u64, len: u64| {
        request(addr, Method::POST, &format!("/v1/stream/g-{n}"))
            .header("content-type", "text/plain")
            .body(bytes(n, at..at + len))
    };
    // Fill the group to its limit; the next piece is refused.
    let mut len = 0;
    let refused = loop {
        let r = append(full, len, PIECE).send().await;
        if r.status != StatusCode::NO_CONTENT {
            break r;
        }
        len += PIECE;
        assert!(len <= LIMIT, "the group took more than its limit");
    };
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.h("retry-after"), Some("1"));
    assert!(refused.text().contains("--max-group-hot-bytes"));
    assert_eq!(len, LIMIT);
    // Counted once, however often it tried while it waited for room.
    assert_eq!(cold.report().group_refused_writes, 1);
    // Another group is not held back; a body over the limit never fits.
    assert_eq!(
        append(other, 0, PIECE).send().await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        append(other, PIECE, LIMIT + 1).send().await.status,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let report = cold.report();
    assert!(report.group_refused_writes >= 1 && report.refused_writes == 0);
    assert_eq!(report.max_group_hot_bytes, Some(LIMIT));
    assert!(report.group_hot_bytes_bounds[full_group] <= LIMIT);

    // The store comes back: the full group flushes under pressure and the
    // write goes through.
    faulty.set_down(false);
    let r = retrying(Duration::from_secs(30), || append(full, len, PIECE)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    len += PIECE;
    assert!(cold.stats().flushed_bytes.load(Ordering::Relaxed) >= LIMIT);
    let hot = |g: usize| {
        let engine = engine.clone();
        async move {
            engine
                .query_group(g, |m| m.total_hot_payload_bytes())
                .await
                .unwrap()
        }
    };
    assert!(hot(full_group).await <= LIMIT);
    assert_eq!(
        hot(other_group).await,
        PIECE,
        "the other group was not flushed"
    );
    assert!(read_all(addr, &format!("/v1/stream/g-{full}")).await == bytes(full, 0..len));
    server.stop().await;
}
