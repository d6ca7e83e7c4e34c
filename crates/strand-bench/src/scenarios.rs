//! The five scenarios. Each is bounded in time and in count, and returns
//! its figures as a JSON object.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::Args;
use http_body_util::BodyExt;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::Scenario;
use crate::client::{Conn, Reply};
use crate::stats::{Latencies, Resident, cpu_seconds, rss_bytes};

/// Hard cap on requests any one scenario sends, whatever its duration.
const MAX_REQUESTS: u64 = 20_000_000;
/// How long any one scenario may run, setup included.
const MAX_SCENARIO: Duration = Duration::from_secs(600);

/// Options of `writes`.
#[derive(Debug, Args)]
pub(crate) struct WritesArgs {
    /// Streams written to.
    #[arg(long, default_value_t = 500)]
    streams: usize,
    /// Concurrent writers (one connection each; writer i writes stream i mod streams).
    #[arg(long, default_value_t = 500)]
    writers: usize,
    /// How long to write.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Bytes per append.
    #[arg(long, default_value_t = 256)]
    body_bytes: usize,
    /// Send idempotent producer headers (one producer per writer).
    #[arg(long)]
    producer: bool,
    /// Batch like the TypeScript client's IdempotentProducer: wait this many
    /// milliseconds, then send every append that arrived meanwhile in one
    /// request (one producer sequence per batch). 0 = no batching.
    #[arg(long, default_value_t = 0)]
    linger_ms: u64,
    /// With batching: appends each writer's application makes per second.
    #[arg(long, default_value_t = 2_000)]
    app_rate: u64,
    /// With batching: the most bytes in one batch.
    #[arg(long, default_value_t = 1 << 20)]
    max_batch_bytes: usize,
}

/// Options of `fanout`.
#[derive(Debug, Args)]
pub(crate) struct FanoutArgs {
    /// SSE subscribers.
    #[arg(long, default_value_t = 1000)]
    subscribers: usize,
    /// Appends per second by the one writer.
    #[arg(long, default_value_t = 50)]
    rate: u64,
    /// How long to write.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
}

/// Options of `catchup`.
#[derive(Debug, Args)]
pub(crate) struct CatchupArgs {
    /// Clients, each with its own stream.
    #[arg(long, default_value_t = 1000)]
    clients: usize,
    /// Messages per stream.
    #[arg(long, default_value_t = 200)]
    messages: usize,
    /// Bytes per message.
    #[arg(long, default_value_t = 1024)]
    message_bytes: usize,
    /// Times every client reads its stream from the start, all clients
    /// together each time (a longer read phase for steadier figures).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
}

/// Options of `idle-memory`.
#[derive(Debug, Args)]
pub(crate) struct IdleMemoryArgs {
    /// Empty streams to create.
    #[arg(long, default_value_t = 100_000)]
    streams: usize,
}

/// Options of `resident`.
#[derive(Debug, Args)]
pub(crate) struct ResidentArgs {
    /// Streams, created first (application/octet-stream); the appends go
    /// to them round-robin.
    #[arg(long, default_value_t = 100)]
    streams: usize,
    /// Bytes per append (a plain number, or with KiB, MiB or GiB).
    #[arg(long, default_value = "64KiB", value_parser = parse_size)]
    body_bytes: u64,
    /// Bytes to append in all, rounded down to whole bodies.
    #[arg(long, default_value = "2GiB", value_parser = parse_size)]
    total_bytes: u64,
    /// Bytes appended when the middle memory sample is taken; the growth
    /// per appended byte and per append is measured from there to the end.
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    checkpoint_bytes: u64,
    /// Concurrent writers, one connection each.
    #[arg(long, default_value_t = 8)]
    writers: usize,
    /// How often one append answered 503 or 507 with Retry-After is
    /// retried (after 10 ms, doubling to at most 500 ms) before it counts
    /// as an error.
    #[arg(long, default_value_t = 20)]
    max_retries: u32,
    /// Pause before each memory sample, for the server to settle (ms).
    #[arg(long, default_value_t = 1000)]
    settle_ms: u64,
    /// Stop appending after this many seconds, done or not (the result
    /// then says `"finished": false`).
    #[arg(long, default_value_t = 1200)]
    max_seconds: u64,
    /// Stop appending once the server's VmRSS (summed over its processes,
    /// read every 100 ms) reaches this, so that a server that keeps many
    /// times the appended bytes cannot exhaust the machine's memory (the
    /// result then says `"stopped_at_rss_limit": true`).
    #[arg(long, default_value = "12GiB", value_parser = parse_size)]
    max_rss: u64,
}

/// A byte count: a plain number, or one with a binary unit (`K`/`KiB`,
/// `M`/`MiB`, `G`/`GiB`, case-insensitive; `B` alone is bytes).
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a byte count"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return Err(format!("`{text}`: the unit must be KiB, MiB or GiB")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// Runs a scenario against `addrs` (one server, or a cluster's nodes);
/// `stats` are nodes without load whose log counters count too; `pids`
/// are the server processes whose CPU time is reported.
pub(crate) async fn run(
    addrs: &[SocketAddr],
    stats: &[SocketAddr],
    pids: &[u32],
    scenario: Scenario,
) -> Result<Value, String> {
    let addr = *addrs.first().ok_or("no server address")?;
    let run_id = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let prefix = format!("/v1/stream/bench-{run_id}");
    // `resident` bounds its appending itself (`--max-seconds`); two
    // minutes more cover the streams' creation and the memory samples.
    let limit = match &scenario {
        Scenario::Resident(a) => Duration::from_secs(a.max_seconds.saturating_add(120)),
        _ => MAX_SCENARIO,
    };
    let work = async {
        match scenario {
            Scenario::Writes(a) => writes(addrs, stats, pids, &prefix, a).await,
            Scenario::Fanout(a) => fanout(addr, pids, &prefix, a).await,
            Scenario::Catchup(a) => catchup(addr, pids, &prefix, a).await,
            Scenario::IdleMemory(a) => idle_memory(addr, pids, &prefix, a).await,
            Scenario::Resident(a) => resident(addr, pids, &prefix, a).await,
        }
    };
    tokio::time::timeout(limit, work)
        .await
        .map_err(|_| format!("scenario did not finish within {limit:?}"))?
}

/// Each process's CPU time; `None` when one cannot be read.
fn each_cpu(pids: &[u32]) -> Option<Vec<f64>> {
    pids.iter().map(|p| cpu_seconds(*p)).collect()
}

/// The largest share one process had of the CPU time all of them spent
/// between `before` and `after`; `None` for fewer than two processes, a
/// missing reading, or no time spent.
fn busiest_share(before: Option<Vec<f64>>, after: Option<Vec<f64>>) -> Option<f64> {
    let (before, after) = (before?, after?);
    if before.len() < 2 || before.len() != after.len() {
        return None;
    }
    let spent: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let total: f64 = spent.iter().sum();
    let busiest = spent.iter().copied().fold(0.0, f64::max);
    (total > 0.0).then(|| (busiest / total * 1000.0).round() / 1000.0)
}

/// The processes' CPU time added up; `None` without processes or when
/// one cannot be read.
fn cpu(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    pids.iter().map(|p| cpu_seconds(*p)).sum()
}

/// The log counters of strand-server's `GET /__strand/health` (`log`:
/// entries written by fsynced batches, fsyncs, microseconds in fsync,
/// proposals — appends — held by those entries),
/// added up over the nodes; `None` when a server reports none (in
/// memory, or another server).
async fn log_counters(addrs: &[SocketAddr]) -> Option<[u64; 4]> {
    let mut total = [0u64; 4];
    for addr in addrs {
        let mut conn = Conn::open(*addr).await.ok()?;
        let reply = conn
            .send(Method::GET, "/__strand/health", &[], Bytes::new())
            .await
            .ok()?;
        let v: Value = serde_json::from_slice(&reply.body).ok()?;
        let log = v.get("log")?;
        for (slot, key) in
            total
                .iter_mut()
                .zip(["synced_entries", "fsyncs", "fsync_us", "synced_proposals"])
        {
            *slot += log.get(key)?.as_u64()?;
        }
    }
    Some(total)
}

/// The group-commit figures between two readings of [`log_counters`]:
/// fsyncs, log entries and appends (proposals) per fsync, the mean fsync
/// time (ms) and fsyncs per client append (`appends`), all nodes together.
fn fsync_figures(before: Option<[u64; 4]>, after: Option<[u64; 4]>, appends: u64) -> Value {
    let (Some(b), Some(a)) = (before, after) else {
        return json!({});
    };
    let entries = a[0].saturating_sub(b[0]);
    let fsyncs = a[1].saturating_sub(b[1]);
    let us = a[2].saturating_sub(b[2]);
    let proposals = a[3].saturating_sub(b[3]);
    let round = |x: f64, digits: i32| {
        let scale = 10f64.powi(digits);
        (x * scale).round() / scale
    };
    let ratio = |n: u64, d: u64, digits| (d > 0).then(|| round(n as f64 / d as f64, digits));
    json!({
        "fsyncs": fsyncs,
        "entries_per_fsync": ratio(entries, fsyncs, 1),
        "appends_per_fsync": ratio(proposals, fsyncs, 1),
        "mean_fsync_ms": ratio(us, fsyncs, 0).map(|us| round(us / 1000.0, 2)),
        "fsyncs_per_append": ratio(fsyncs, appends, 2),
    })
}

fn cpu_per_op_us(before: Option<f64>, after: Option<f64>, ops: u64) -> Value {
    match (before, after) {
        (Some(b), Some(a)) if ops > 0 => json!(((a - b) * 1e6 / ops as f64 * 10.0).round() / 10.0),
        _ => Value::Null,
    }
}

/// Creates streams with `concurrency` connections.
async fn create_streams(
    addr: SocketAddr,
    paths: &[String],
    content_type: &str,
    concurrency: usize,
) -> Result<(), String> {
    let next = Arc::new(AtomicUsize::new(0));
    let paths = Arc::new(paths.to_vec());
    let mut tasks = Vec::new();
    for _ in 0..concurrency.max(1) {
        let next = Arc::clone(&next);
        let paths = Arc::clone(&paths);
        let ct = content_type.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = paths.get(i) else {
                    return Ok::<(), String>(());
                };
                let r = conn
                    .send(Method::PUT, path, &[("content-type", &ct)], Bytes::new())
                    .await?;
                if !(r.status == StatusCode::CREATED || r.status == StatusCode::OK) {
                    return Err(format!("PUT {path}: {}", r.status));
                }
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

async fn writes(
    addrs: &[SocketAddr],
    stats: &[SocketAddr],
    pid: &[u32],
    prefix: &str,
    a: WritesArgs,
) -> Result<Value, String> {
    let streams: Vec<String> = (0..a.streams.max(1))
        .map(|i| format!("{prefix}-w{i}"))
        .collect();
    create_streams(addrs[0], &streams, "application/octet-stream", 50).await?;
    let body = Bytes::from(vec![b'x'; a.body_bytes]);
    let appends = Arc::new(AtomicU64::new(0));
    let requests = Arc::new(AtomicU64::new(0));
    let duration = Duration::from_secs(a.seconds.max(1));
    let counted: Vec<SocketAddr> = addrs.iter().chain(stats).copied().collect();
    let log_before = log_counters(&counted).await;
    let cpu_before = cpu(pid);
    let each_before = each_cpu(pid);
    let own_before = cpu(&[std::process::id()]);
    let started = Instant::now();
    let deadline = started + duration;
    let batching = a.linger_ms > 0;
    let per_batch_max = (a.max_batch_bytes / a.body_bytes.max(1)).max(1) as u64;
    let mut tasks = Vec::new();
    for w in 0..a.writers.max(1) {
        let path = streams[w % streams.len()].clone();
        let addr = addrs[w % addrs.len()];
        let body = body.clone();
        let (appends, requests) = (Arc::clone(&appends), Arc::clone(&requests));
        let producer = a.producer || batching;
        let (linger, app_rate) = (Duration::from_millis(a.linger_ms), a.app_rate);
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            let mut lat = Latencies::default();
            let mut failed = BTreeMap::<String, u64>::new();
            let producer_id = format!("writer-{w}");
            let mut seq = 0u64;
            let mut last_send = Instant::now();
            while Instant::now() < deadline && requests.load(Ordering::Relaxed) < MAX_REQUESTS {
                let (payload, count) = if batching {
                    tokio::time::sleep_until((last_send + linger).into()).await;
                    let waited = last_send.elapsed();
                    let arrived =
                        ((waited.as_secs_f64() * app_rate as f64) as u64).clamp(1, per_batch_max);
                    let mut batch = Vec::with_capacity(body.len() * arrived as usize);
                    for _ in 0..arrived {
                        batch.extend_from_slice(&body);
                    }
                    (Bytes::from(batch), arrived)
                } else {
                    (body.clone(), 1)
                };
                last_send = Instant::now();
                let seq_text = seq.to_string();
                let mut headers = vec![("content-type", "application/octet-stream")];
                if producer {
                    headers.push(("producer-id", producer_id.as_str()));
                    headers.push(("producer-epoch", "0"));
                    headers.push(("producer-seq", seq_text.as_str()));
                }
                let t = Instant::now();
                let r = conn.send(Method::POST, &path, &headers, payload).await;
                lat.push(t.elapsed());
                requests.fetch_add(1, Ordering::Relaxed);
                match r {
                    Ok(r) if r.status.is_success() => {
                        appends.fetch_add(count, Ordering::Relaxed);
                        seq += 1;
                    }
                    Ok(r) => {
                        *failed.entry(r.status.as_u16().to_string()).or_default() += 1;
                    }
                    Err(_) => {
                        *failed.entry("connection".to_owned()).or_default() += 1;
                    }
                }
            }
            Ok::<_, String>((lat, failed))
        }));
    }
    let mut lat = Latencies::default();
    let mut failed = BTreeMap::<String, u64>::new();
    for t in tasks {
        let (own, own_failed) = t.await.map_err(|e| e.to_string())??;
        lat.extend(own);
        for (kind, n) in own_failed {
            *failed.entry(kind).or_default() += n;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_after = cpu(pid);
    let own_after = cpu(&[std::process::id()]);
    let log_after = log_counters(&counted).await;
    let appends = appends.load(Ordering::Relaxed);
    let mut result = json!({
        "scenario": "writes",
        "nodes": addrs.len(),
        "producer": a.producer || batching,
        "linger_ms": a.linger_ms,
        "writers": a.writers,
        "streams": a.streams,
        "body_bytes": a.body_bytes,
        "seconds": elapsed,
        "requests": requests.load(Ordering::Relaxed),
        "appends": appends,
        "errors": failed.values().sum::<u64>(),
        // The failed requests by status code (or `connection`).
        "errors_by_kind": failed,
        "appends_per_s": (appends as f64 / elapsed).round(),
        "appended_mib_per_s":
            (appends as f64 * a.body_bytes as f64 / (1024.0 * 1024.0) / elapsed.max(1e-6) * 10.0)
                .round()
                / 10.0,
        "p50_ms": lat.percentile_ms(50.0),
        "p90_ms": lat.percentile_ms(90.0),
        "p99_ms": lat.percentile_ms(99.0),
        "p999_ms": lat.percentile_ms(99.9),
        "max_ms": lat.percentile_ms(100.0),
        "server_cpu_us_per_append": cpu_per_op_us(cpu_before, cpu_after, appends),
        // Of several servers (a cluster's nodes), the busiest one's part
        // of their CPU time over the run.
        "busiest_server_share": busiest_share(each_before, each_cpu(pid)),
        // The load tool's own CPU per request: on a machine it shares with
        // the server, it bounds how far a cheaper server can raise the rate.
        "client_cpu_us_per_request": cpu_per_op_us(own_before, own_after, requests.load(Ordering::Relaxed)),
    });
    if let (Some(map), Value::Object(log)) = (
        result.as_object_mut(),
        fsync_figures(log_before, log_after, appends),
    ) {
        map.extend(log);
    }
    Ok(result)
}

/// Microseconds since `base`.
fn micros_since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_micros()).unwrap_or(u64::MAX)
}

async fn fanout(
    addr: SocketAddr,
    pid: &[u32],
    prefix: &str,
    a: FanoutArgs,
) -> Result<Value, String> {
    let path = format!("{prefix}-fanout");
    create_streams(addr, std::slice::from_ref(&path), "text/plain", 1).await?;
    let base = Instant::now();
    let total = a.rate.max(1) * a.seconds.max(1);
    let ready = Arc::new(AtomicUsize::new(0));
    let mut subs = Vec::new();
    for _ in 0..a.subscribers {
        let path = path.clone();
        let ready = Arc::clone(&ready);
        subs.push(tokio::spawn(async move {
            subscribe(addr, &path, base, total, ready).await
        }));
    }
    let wait_start = Instant::now();
    while ready.load(Ordering::Relaxed) < a.subscribers {
        if wait_start.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "only {} of {} subscribers connected",
                ready.load(Ordering::Relaxed),
                a.subscribers
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu_before = cpu(pid);
    let mut writer = Conn::open(addr).await?;
    let interval = Duration::from_secs_f64(1.0 / a.rate.max(1) as f64);
    let mut next = Instant::now();
    for seq in 0..total {
        tokio::time::sleep_until(next.into()).await;
        next += interval;
        let body = format!("{seq}:{};", micros_since(base));
        let r = writer
            .send(
                Method::POST,
                &path,
                &[("content-type", "text/plain")],
                Bytes::from(body),
            )
            .await?;
        if !r.status.is_success() {
            return Err(format!("append {seq}: {}", r.status));
        }
    }
    let mut lat = Latencies::default();
    let mut complete = 0usize;
    let mut received = 0u64;
    for s in subs {
        let (l, got) = s.await.map_err(|e| e.to_string())??;
        received += got;
        if got == total {
            complete += 1;
        }
        lat.extend(l);
    }
    let cpu_after = cpu(pid);
    let deliveries = total * a.subscribers as u64;
    Ok(json!({
        "scenario": "fanout",
        "subscribers": a.subscribers,
        "rate": a.rate,
        "events": total,
        "deliveries": received,
        "expected_deliveries": deliveries,
        "complete_subscribers": complete,
        "all_delivered": received == deliveries,
        "p50_ms": lat.percentile_ms(50.0),
        "p99_ms": lat.percentile_ms(99.0),
        "server_cpu_us_per_delivery": cpu_per_op_us(cpu_before, cpu_after, received),
    }))
}

/// One SSE subscriber from the tail: collects the latency of every message
/// until it has `total` of them or 5 s pass without news.
async fn subscribe(
    addr: SocketAddr,
    path: &str,
    base: Instant,
    total: u64,
    ready: Arc<AtomicUsize>,
) -> Result<(Latencies, u64), String> {
    let mut conn = Conn::open(addr).await?;
    let response = conn
        .start(
            Method::GET,
            &format!("{path}?offset=now&live=sse"),
            &[],
            Bytes::new(),
        )
        .await?;
    if response.status() != StatusCode::OK {
        return Err(format!("SSE: {}", response.status()));
    }
    let mut body = response.into_body();
    let mut lat = Latencies::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut buffer = String::new();
    let mut announced = false;
    loop {
        let frame = match tokio::time::timeout(Duration::from_secs(5), body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            _ => break,
        };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let now = micros_since(base);
        buffer.push_str(&String::from_utf8_lossy(data));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if event.starts_with("event: control") && !announced {
                announced = true;
                ready.fetch_add(1, Ordering::Relaxed);
            }
            if !event.starts_with("event: data") {
                continue;
            }
            for line in event.lines().filter_map(|l| l.strip_prefix("data:")) {
                for message in line.split(';').filter(|m| !m.is_empty()) {
                    let Some((seq, sent)) = message.split_once(':') else {
                        continue;
                    };
                    let (Ok(seq), Ok(sent)) = (seq.parse::<u64>(), sent.parse::<u64>()) else {
                        continue;
                    };
                    if seen.insert(seq) {
                        lat.push_micros(now.saturating_sub(sent));
                    }
                }
            }
        }
        if seen.len() as u64 >= total {
            break;
        }
    }
    if !announced {
        ready.fetch_add(1, Ordering::Relaxed);
    }
    Ok((lat, seen.len() as u64))
}

/// How often one append of `catchup`'s fill answered 503 or 507 with
/// Retry-After is tried again (the backoff of [`retry_backoff`]).
const FILL_RETRIES: u32 = 20;

async fn catchup(
    addr: SocketAddr,
    pid: &[u32],
    prefix: &str,
    a: CatchupArgs,
) -> Result<Value, String> {
    let streams: Vec<String> = (0..a.clients.max(1))
        .map(|i| format!("{prefix}-c{i}"))
        .collect();
    create_streams(addr, &streams, "application/octet-stream", 50).await?;
    // Fill: `messages` appends per stream, 50 connections.
    let message = Bytes::from(vec![b'c'; a.message_bytes]);
    let next = Arc::new(AtomicUsize::new(0));
    let jobs = streams.len() * a.messages;
    let shared = Arc::new(streams.clone());
    let mut fill = Vec::new();
    for _ in 0..50 {
        let (next, shared, message) = (Arc::clone(&next), Arc::clone(&shared), message.clone());
        let messages = a.messages;
        fill.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs {
                    return Ok::<(), String>(());
                }
                let path = &shared[i / messages];
                // A server whose flushes lag behind its hot budget answers
                // 503 (or 507) with Retry-After: the fill waits and tries
                // again, as `resident` does; the fill is not timed.
                let mut attempt = 0u32;
                loop {
                    let r = conn
                        .send(
                            Method::POST,
                            path,
                            &[("content-type", "application/octet-stream")],
                            message.clone(),
                        )
                        .await?;
                    if r.status.is_success() {
                        break;
                    }
                    if !busy(&r) || attempt >= FILL_RETRIES {
                        return Err(format!("fill {path}: {}", r.status));
                    }
                    attempt += 1;
                    tokio::time::sleep(retry_backoff(attempt)).await;
                }
            }
        }));
    }
    for f in fill {
        f.await.map_err(|e| e.to_string())??;
    }
    let expected = (a.messages * a.message_bytes) as u64;
    let rounds = a.rounds.max(1) as usize;
    // Every client connects first, at most 64 connects at a time, and all
    // start reading together: a thousand simultaneous connects overflow the
    // listen queue, and the 1 s SYN retries that follow would be timed as
    // the catch-up. Each round starts when every client has finished the
    // one before (a client that failed still waits at the start lines, so
    // the others never wait forever).
    let connecting = Arc::new(Semaphore::new(64));
    let start_line = Arc::new(tokio::sync::Barrier::new(streams.len()));
    let cpu_before = Arc::new(std::sync::Mutex::new(None));
    let mut readers = Vec::new();
    for path in streams {
        let (connecting, start_line) = (Arc::clone(&connecting), Arc::clone(&start_line));
        let cpu_before = Arc::clone(&cpu_before);
        let pid = pid.to_vec();
        readers.push(tokio::spawn(async move {
            let permit = connecting.acquire().await.map_err(|e| e.to_string())?;
            let mut conn = Conn::open(addr).await;
            drop(permit);
            let mut done = Vec::with_capacity(rounds);
            let mut failed = None;
            for round in 0..rounds {
                let leader = start_line.wait().await.is_leader();
                if round == 0
                    && leader
                    && let Ok(mut slot) = cpu_before.lock()
                {
                    *slot = cpu(&pid);
                }
                if failed.is_some() {
                    continue;
                }
                let c = match conn.as_mut() {
                    Ok(c) => c,
                    Err(e) => {
                        failed = Some(e.clone());
                        continue;
                    }
                };
                match read_from_start(c, &path).await {
                    Ok(r) => done.push(r),
                    Err(e) => failed = Some(e),
                }
            }
            match failed {
                Some(e) => Err(e),
                None => Ok::<_, String>(done),
            }
        }));
    }
    let mut lat = Latencies::default();
    let (mut bytes, mut requests, mut short) = (0u64, 0u64, 0usize);
    let mut spans = vec![(None::<Instant>, None::<Instant>, 0u64); rounds];
    for r in readers {
        let done = r.await.map_err(|e| e.to_string())??;
        for ((start, end, b, n), span) in done.into_iter().zip(spans.iter_mut()) {
            lat.push(end - start);
            span.0 = Some(span.0.map_or(start, |f| f.min(start)));
            span.1 = Some(span.1.map_or(end, |l| l.max(end)));
            span.2 += b;
            bytes += b;
            requests += n;
            if b != expected {
                short += 1;
            }
        }
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut elapsed = 0.0;
    let mut per_round = Vec::with_capacity(rounds);
    for (first, last, b) in &spans {
        let secs = match (first, last) {
            (Some(f), Some(l)) => (*l - *f).as_secs_f64().max(1e-6),
            _ => 1e-6,
        };
        elapsed += secs;
        per_round.push((mib(*b) / secs * 10.0).round() / 10.0);
    }
    let cpu_after = cpu(pid);
    let cpu_before = cpu_before.lock().ok().and_then(|slot| *slot);
    Ok(json!({
        "scenario": "catchup",
        "clients": a.clients,
        "rounds": rounds,
        "bytes_per_stream": expected,
        "requests": requests,
        "incomplete_streams": short,
        "p50_ms": lat.percentile_ms(50.0),
        "p99_ms": lat.percentile_ms(99.0),
        "mib_per_s": (mib(bytes) / elapsed.max(1e-6) * 10.0).round() / 10.0,
        "round_mib_per_s": per_round,
        "server_cpu_us_per_request": cpu_per_op_us(cpu_before, cpu_after, requests),
        "samples": lat.len(),
    }))
}

/// Reads `path` from the start until the server says it is up to date
/// (at most 10,000 requests): (start, end, bytes, requests).
async fn read_from_start(
    conn: &mut Conn,
    path: &str,
) -> Result<(Instant, Instant, u64, u64), String> {
    let t = Instant::now();
    let mut offset = "-1".to_owned();
    let mut bytes = 0u64;
    let mut requests = 0u64;
    loop {
        let r = conn
            .send(
                Method::GET,
                &format!("{path}?offset={offset}"),
                &[],
                Bytes::new(),
            )
            .await?;
        requests += 1;
        if r.status != StatusCode::OK {
            return Err(format!("read {path}: {}", r.status));
        }
        bytes += r.body.len() as u64;
        offset = r.next_offset.ok_or("no Stream-Next-Offset")?;
        if r.up_to_date || requests > 10_000 {
            break;
        }
    }
    Ok((t, Instant::now(), bytes, requests))
}

async fn idle_memory(
    addr: SocketAddr,
    pid: &[u32],
    prefix: &str,
    a: IdleMemoryArgs,
) -> Result<Value, String> {
    let Some(&pid) = pid.first() else {
        return Err("idle-memory needs --server-pid".into());
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_bytes(pid).ok_or("cannot read the server's memory")?;
    let streams: Vec<String> = (0..a.streams).map(|i| format!("{prefix}-m{i}")).collect();
    let cpu_before = cpu_seconds(pid);
    create_streams(addr, &streams, "application/octet-stream", 64).await?;
    let cpu_after = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_bytes(pid).ok_or("cannot read the server's memory")?;
    Ok(json!({
        "scenario": "idle-memory",
        "streams": a.streams,
        "rss_before": before,
        "rss_after": after,
        "bytes_per_stream": (after.saturating_sub(before) as f64 / a.streams.max(1) as f64).round(),
        "server_cpu_us_per_create": cpu_per_op_us(cpu_before, cpu_after, a.streams as u64),
    }))
}

/// Counters shared by `resident`'s writers.
#[derive(Default)]
struct Tally {
    /// The next append's index (stream `index mod streams`).
    next: AtomicU64,
    appends: AtomicU64,
    errors: AtomicU64,
    retries: AtomicU64,
    requests: AtomicU64,
}

/// What every `resident` writer shares.
struct Appending {
    paths: Vec<String>,
    body: Bytes,
    max_retries: u32,
    deadline: Instant,
    /// Set when the server's memory reached `--max-rss`.
    stop: std::sync::atomic::AtomicBool,
    tally: Tally,
}

impl Appending {
    /// Whether to stop appending: past the deadline or the memory limit.
    fn stopped(&self) -> bool {
        Instant::now() >= self.deadline || self.stop.load(Ordering::Relaxed)
    }
}

/// Appends number `first..end` (round-robin over the streams), one task
/// per connection, until done or past the deadline; hands the
/// connections back for the next phase.
async fn append_phase(
    conns: Vec<Conn>,
    shared: &Arc<Appending>,
    first: u64,
    end: u64,
) -> Result<Vec<Conn>, String> {
    shared.tally.next.store(first, Ordering::Relaxed);
    let mut tasks = Vec::with_capacity(conns.len());
    for mut conn in conns {
        let shared = Arc::clone(shared);
        tasks.push(tokio::spawn(async move {
            let t = &shared.tally;
            loop {
                let i = t.next.fetch_add(1, Ordering::Relaxed);
                if i >= end
                    || shared.stopped()
                    || t.requests.load(Ordering::Relaxed) >= MAX_REQUESTS
                {
                    return conn;
                }
                let path = &shared.paths[(i % shared.paths.len() as u64) as usize];
                let counter = if append_retrying(&mut conn, path, &shared).await {
                    &t.appends
                } else {
                    &t.errors
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut conns = Vec::with_capacity(tasks.len());
    for task in tasks {
        conns.push(task.await.map_err(|e| e.to_string())?);
    }
    Ok(conns)
}

/// One append; a 503 or 507 with Retry-After is tried again after a short
/// backoff, at most `max_retries` times and not once stopped.
/// Whether it was acknowledged (2xx).
async fn append_retrying(conn: &mut Conn, path: &str, shared: &Appending) -> bool {
    let t = &shared.tally;
    let mut attempt = 0u32;
    loop {
        t.requests.fetch_add(1, Ordering::Relaxed);
        let reply = conn
            .send(
                Method::POST,
                path,
                &[("content-type", "application/octet-stream")],
                shared.body.clone(),
            )
            .await;
        let busy = match &reply {
            Ok(r) if r.status.is_success() => return true,
            Ok(r) => busy(r),
            Err(_) => false,
        };
        if !busy || attempt >= shared.max_retries || shared.stopped() {
            return false;
        }
        attempt += 1;
        t.retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(retry_backoff(attempt)).await;
    }
}

/// Whether an answer says the server is busy for now — 503 or 507 with
/// Retry-After — so the request may be tried again.
fn busy(r: &Reply) -> bool {
    r.retry_after
        && matches!(
            r.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::INSUFFICIENT_STORAGE
        )
}

/// The pause before retry number `attempt` (from 1): 10 ms, doubling,
/// at most 500 ms.
fn retry_backoff(attempt: u32) -> Duration {
    let ms = 10u64.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    Duration::from_millis(ms.min(500))
}

/// `x` rounded to four significant digits.
fn significant(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(3 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// The least-squares slope of `y` over `x` (`None` with fewer than two
/// distinct `x`).
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x, sy + y));
    let (mx, my) = (sx / n, sy / n);
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(sxy, sxx), (x, y)| {
        (sxy + (x - mx) * (y - my), sxx + (x - mx) * (x - mx))
    });
    (sxx > 0.0).then(|| sxy / sxx)
}

/// `resident`'s memory figures from the three samples and the appends
/// acknowledged by the checkpoint and by the end: the growth of RssAnon
/// (and VmRSS) from checkpoint to end per byte and per append appended
/// between them (`null` when none was), and from start to end.
fn resident_figures(
    samples: [Resident; 3],
    checkpoint_appends: u64,
    end_appends: u64,
    body_bytes: u64,
) -> Value {
    let [start, checkpoint, end] = samples;
    let growth = |from: u64, to: u64| i128::from(to) - i128::from(from);
    let appends = end_appends.saturating_sub(checkpoint_appends);
    let bytes = appends.saturating_mul(body_bytes);
    let per = |g: i128, n: u64| (n > 0).then(|| significant(g as f64 / n as f64));
    let anon = growth(checkpoint.rss_anon, end.rss_anon);
    let rss = growth(checkpoint.vm_rss, end.vm_rss);
    json!({
        "rss_anon_start": start.rss_anon,
        "rss_anon_checkpoint": checkpoint.rss_anon,
        "rss_anon_end": end.rss_anon,
        "vm_rss_start": start.vm_rss,
        "vm_rss_checkpoint": checkpoint.vm_rss,
        "vm_rss_end": end.vm_rss,
        "anon_bytes_per_appended_byte": per(anon, bytes),
        "anon_bytes_per_append": per(anon, appends),
        "vm_rss_bytes_per_appended_byte": per(rss, bytes),
        "vm_rss_bytes_per_append": per(rss, appends),
        "anon_growth_total": growth(start.rss_anon, end.rss_anon) as i64,
        "vm_rss_growth_total": growth(start.vm_rss, end.vm_rss) as i64,
    })
}

/// Appends `total_bytes` in bodies of `body_bytes` round-robin over
/// `streams` streams with `writers` connections, and samples the
/// server's RssAnon and VmRSS after creating the streams, at the
/// checkpoint (every writer idle, exactly the checkpoint's appends sent)
/// and at the end.
async fn resident(
    addr: SocketAddr,
    pids: &[u32],
    prefix: &str,
    a: ResidentArgs,
) -> Result<Value, String> {
    if pids.is_empty() {
        return Err("resident needs --server-pid".into());
    }
    let body_bytes = a.body_bytes.max(1);
    let total = a.total_bytes / body_bytes;
    let checkpoint = (a.checkpoint_bytes / body_bytes).min(total);
    if total == 0 {
        return Err("--total-bytes is less than one body".into());
    }
    let body_len = usize::try_from(body_bytes).map_err(|e| e.to_string())?;
    let paths: Vec<String> = (0..a.streams.max(1))
        .map(|i| format!("{prefix}-r{i}"))
        .collect();
    create_streams(addr, &paths, "application/octet-stream", 50).await?;
    // One connection per writer, opened one after another (a burst of
    // hundreds of connects can overflow the listen queue).
    let writers = u64::try_from(a.writers.max(1))
        .map_err(|e| e.to_string())?
        .min(total);
    let mut conns = Vec::new();
    for _ in 0..writers {
        conns.push(Conn::open(addr).await?);
    }
    let settle = Duration::from_millis(a.settle_ms);
    // The sum over the processes, and each one (a cluster's nodes).
    let sample = || async {
        tokio::time::sleep(settle).await;
        let each: Option<Vec<Resident>> = pids.iter().map(|p| Resident::of(&[*p])).collect();
        Resident::of(pids)
            .zip(each)
            .ok_or_else(|| "cannot read the server's memory".to_owned())
    };
    let (start, start_each) = sample().await?;
    let started = Instant::now();
    let shared = Arc::new(Appending {
        paths,
        body: Bytes::from(vec![b'r'; body_len]),
        max_retries: a.max_retries,
        deadline: started + Duration::from_secs(a.max_seconds),
        stop: std::sync::atomic::AtomicBool::new(false),
        tally: Tally::default(),
    });
    // Every 100 ms: the RSS limit, and after the checkpoint a point
    // (appends acknowledged, RssAnon) for the fitted growth per append,
    // which two instants alone leave to where the hot bytes stood.
    let measuring = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let points = Arc::new(std::sync::Mutex::new(Vec::<(f64, f64)>::new()));
    let watcher = {
        let (shared, pids, limit) = (Arc::clone(&shared), pids.to_vec(), a.max_rss);
        let (measuring, points) = (Arc::clone(&measuring), Arc::clone(&points));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let Some(m) = Resident::of(&pids) else {
                    continue;
                };
                if m.vm_rss >= limit {
                    shared.stop.store(true, Ordering::Relaxed);
                    return;
                }
                if measuring.load(Ordering::Relaxed)
                    && let Ok(mut p) = points.lock()
                {
                    let appends = shared.tally.appends.load(Ordering::Relaxed);
                    p.push((appends as f64, m.rss_anon as f64));
                }
            }
        })
    };
    let conns = append_phase(conns, &shared, 0, checkpoint).await?;
    let at_checkpoint = shared.tally.appends.load(Ordering::Relaxed);
    let (mid, mid_each) = sample().await?;
    measuring.store(true, Ordering::Relaxed);
    let mid_elapsed = started.elapsed();
    let conns = append_phase(conns, &shared, checkpoint, total).await?;
    let elapsed = started.elapsed().saturating_sub(settle);
    watcher.abort();
    drop(conns);
    let (end, end_each) = sample().await?;
    let t = &shared.tally;
    let appends = t.appends.load(Ordering::Relaxed);
    let errors = t.errors.load(Ordering::Relaxed);
    let appended = appends * body_bytes;
    let mut result = json!({
        "scenario": "resident",
        "streams": a.streams,
        "writers": writers,
        "body_bytes": body_bytes,
        "total_bytes": total * body_bytes,
        "checkpoint_bytes": checkpoint * body_bytes,
        "appends": appends,
        "appended_bytes": appended,
        "checkpoint_appended_bytes": at_checkpoint * body_bytes,
        "errors": errors,
        "retries": t.retries.load(Ordering::Relaxed),
        "finished": appends + errors >= total,
        "stopped_at_rss_limit": shared.stop.load(Ordering::Relaxed),
        "seconds": significant(elapsed.as_secs_f64()),
        "seconds_to_checkpoint": significant(mid_elapsed.saturating_sub(settle).as_secs_f64()),
        "appended_mib_per_s": significant(
            appended as f64 / (1024.0 * 1024.0) / elapsed.as_secs_f64().max(1e-6)
        ),
    });
    if let (Some(map), Value::Object(memory)) = (
        result.as_object_mut(),
        resident_figures([start, mid, end], at_checkpoint, appends, body_bytes),
    ) {
        map.extend(memory);
        let points = points.lock().map(|p| p.clone()).unwrap_or_default();
        map.insert(
            "anon_bytes_per_append_fitted".into(),
            json!(slope(&points).map(significant)),
        );
        map.insert("fitted_samples".into(), json!(points.len()));
        if pids.len() > 1 {
            // Each process on its own: a cluster's every node.
            let each: Vec<Value> = start_each
                .into_iter()
                .zip(mid_each)
                .zip(end_each)
                .zip(pids)
                .map(|(((s, m), e), pid)| {
                    let mut v = resident_figures([s, m, e], at_checkpoint, appends, body_bytes);
                    if let Some(o) = v.as_object_mut() {
                        o.insert("pid".into(), json!(pid));
                    }
                    v
                })
                .collect();
            map.insert("per_process".into(), json!(each));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsync_figures_are_deltas_over_the_window() {
        let v = fsync_figures(Some([10, 5, 1_000, 20]), Some([110, 25, 41_000, 420]), 50);
        assert_eq!(v["fsyncs"], 20);
        assert_eq!(v["entries_per_fsync"], 5.0);
        assert_eq!(v["appends_per_fsync"], 20.0);
        assert_eq!(v["mean_fsync_ms"], 2.0);
        assert_eq!(v["fsyncs_per_append"], 0.4);
        let none = fsync_figures(Some([0; 4]), Some([0; 4]), 0);
        assert_eq!(none["entries_per_fsync"], Value::Null);
        assert_eq!(fsync_figures(None, Some([1; 4]), 1), json!({}));
    }

    #[test]
    fn the_busiest_share_is_of_the_time_spent_in_the_window() {
        let share = busiest_share(Some(vec![10.0, 1.0, 1.0]), Some(vec![14.0, 4.0, 4.0]));
        assert_eq!(share, Some(0.4));
        assert_eq!(busiest_share(Some(vec![1.0]), Some(vec![2.0])), None);
        assert_eq!(busiest_share(None, Some(vec![1.0, 2.0])), None);
        assert_eq!(
            busiest_share(Some(vec![1.0, 1.0]), Some(vec![1.0, 1.0])),
            None
        );
    }

    #[test]
    fn the_fitted_slope_is_least_squares() {
        assert_eq!(slope(&[]), None);
        assert_eq!(slope(&[(1.0, 5.0)]), None);
        assert_eq!(slope(&[(1.0, 5.0), (1.0, 7.0)]), None);
        assert_eq!(slope(&[(0.0, 10.0), (10.0, 30.0)]), Some(2.0));
        // Scattered points: the least-squares line.
        let noisy = [(0.0, 2.0), (1.0, 3.0), (2.0, 8.0), (3.0, 9.0)];
        assert!((slope(&noisy).expect("a slope") - 2.6).abs() < 1e-9);
    }

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("256"), Ok(256));
        assert_eq!(parse_size("256B"), Ok(256));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("128 MiB"), Ok(128 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        for bad in [
            "",
            "MiB",
            "1.5GiB",
            "-1",
            "3TiB",
            "1 2",
            "99999999999999999999GiB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad} parsed");
        }
        assert!(parse_size("17179869184GiB").is_err());
    }

    #[test]
    fn resident_figures_measure_from_the_checkpoint() {
        let m = |anon: u64, rss: u64| Resident {
            rss_anon: anon,
            vm_rss: rss,
        };
        // 1000 appends of 100 B after the checkpoint; RssAnon grew by
        // 50_000 bytes over them, VmRSS by 200_000.
        let v = resident_figures(
            [m(1_000, 5_000), m(11_000, 105_000), m(61_000, 305_000)],
            500,
            1_500,
            100,
        );
        assert_eq!(v["rss_anon_start"], 1_000);
        assert_eq!(v["rss_anon_checkpoint"], 11_000);
        assert_eq!(v["rss_anon_end"], 61_000);
        assert_eq!(v["vm_rss_end"], 305_000);
        assert_eq!(v["anon_bytes_per_appended_byte"], 0.5);
        assert_eq!(v["anon_bytes_per_append"], 50.0);
        assert_eq!(v["vm_rss_bytes_per_appended_byte"], 2.0);
        assert_eq!(v["anon_growth_total"], 60_000);
        assert_eq!(v["vm_rss_growth_total"], 300_000);
        // Memory may shrink; nothing appended after the checkpoint has no
        // per-byte figure.
        let v = resident_figures([m(9, 9), m(8, 8), m(4, 4)], 10, 10, 100);
        assert_eq!(v["anon_growth_total"], -5);
        assert_eq!(v["anon_bytes_per_appended_byte"], Value::Null);
        assert_eq!(v["anon_bytes_per_append"], Value::Null);
    }

    #[test]
    fn retries_back_off_to_half_a_second() {
        assert_eq!(retry_backoff(1), Duration::from_millis(10));
        assert_eq!(retry_backoff(2), Duration::from_millis(20));
        assert_eq!(retry_backoff(6), Duration::from_millis(320));
        assert_eq!(retry_backoff(7), Duration::from_millis(500));
        assert_eq!(retry_backoff(u32::MAX), Duration::from_millis(500));
    }

    #[test]
    fn significant_keeps_four_digits() {
        assert_eq!(significant(0.000_123_456), 0.000_123_5);
        assert_eq!(significant(1.0), 1.0);
        assert_eq!(significant(-1234.56), -1235.0);
        assert_eq!(significant(0.0), 0.0);
    }
}
