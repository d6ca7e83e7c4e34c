//! `GET /metrics`: the node's metrics in the Prometheus text exposition
//! format (version 0.0.4), encoded by `prometheus-client`.
//!
//! Two kinds of figures. The server counts its own events as they happen
//! ([`Metrics`]: requests by route class, method and status, their
//! latency, appends, live readers, SSE events). Everything the node
//! already keeps — the groups' machines, the cold tier, the Raft log and
//! network — is read at scrape time into a registry made for that scrape,
//! so nothing is counted twice and no counter drifts from its source.
//!
//! Every label set is bounded: route classes, methods and statuses are
//! fixed sets, groups and followers are as many as the node's `--groups`
//! and `--peer`s; no stream, bucket or producer name is ever a label.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use axum::http::Method;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A request's labels: its route class, method and status.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    method: &'static str,
    status: u16,
}

/// A route class.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

/// How a live reader waits.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabels {
    mode: &'static str,
}

/// A group.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    group: u64,
}

/// A follower of a group.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FollowerLabels {
    group: u64,
    follower: u64,
}

type LatencyFamily = Family<RouteLabels, Latency, fn() -> Latency>;

/// How many finite request latency buckets there are: 100 µs to about
/// 26 s, doubling.
const LATENCY_BUCKETS: usize = 19;

/// The first latency bucket's bound, in nanoseconds.
const LATENCY_FIRST_NS: u64 = 100_000;

/// A request latency histogram counted with atomics alone: every answer
/// observes one, so it takes no lock (prometheus-client's `Histogram`
/// takes a mutex). Buckets of 100 µs to about 26 s, doubling, and one
/// beyond; the sum in nanoseconds.
#[derive(Debug, Clone, Default)]
struct Latency(std::sync::Arc<LatencyCounts>);

#[derive(Debug, Default)]
struct LatencyCounts {
    buckets: [AtomicU64; LATENCY_BUCKETS + 1],
    sum_ns: AtomicU64,
}

impl Latency {
    fn observe(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let counts = &self.0;
        counts.buckets[latency_bucket(ns)].fetch_add(1, Relaxed);
        counts.sum_ns.fetch_add(ns, Relaxed);
    }
}

/// The bucket a latency of `ns` nanoseconds falls in: the first whose
/// bound (`LATENCY_FIRST_NS · 2^i`) is at least `ns`, else the last.
fn latency_bucket(ns: u64) -> usize {
    if ns <= LATENCY_FIRST_NS {
        return 0;
    }
    // The smallest i with 2^i · first ≥ ns: i = ⌈log2 ⌈ns / first⌉⌉.
    let multiple = ns.div_ceil(LATENCY_FIRST_NS);
    let i = (u64::BITS - (multiple - 1).leading_zeros()) as usize;
    i.min(LATENCY_BUCKETS)
}

impl prometheus_client::metrics::TypedMetric for Latency {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Latency {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let counts = &self.0;
        let mut bound = LATENCY_FIRST_NS as f64 / 1e9;
        let mut buckets = Vec::with_capacity(LATENCY_BUCKETS + 1);
        for (i, count) in counts.buckets.iter().enumerate() {
            let upper = if i == LATENCY_BUCKETS {
                f64::INFINITY
            } else {
                bound
            };
            buckets.push((upper, count.load(Relaxed)));
            bound *= 2.0;
        }
        let count = buckets.iter().map(|(_, n)| n).sum();
        #[allow(clippy::cast_precision_loss)]
        let sum = counts.sum_ns.load(Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Distinguishes [`Metrics`] instances in the per-thread cache of
/// [`Metrics::request`] (tests run many servers in one process).
static METRICS_SERIAL: AtomicU64 = AtomicU64::new(0);

/// What [`Metrics::request`] caches: a request's labels and their series.
struct RecentSeries {
    metrics: u64,
    route: &'static str,
    method: &'static str,
    status: u16,
    requests: Counter,
    latency: Latency,
}

/// How many label sets each thread keeps at hand.
const RECENT_SERIES: usize = 8;

thread_local! {
    /// The series of the requests this thread answered last: looking a
    /// label set up in a family hashes it and takes a lock shared by
    /// every thread, and nearly every request repeats one of a few.
    static RECENT: std::cell::RefCell<Vec<RecentSeries>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The figures the server counts as they happen. Cheap to share: every
/// metric is an `Arc` inside.
#[derive(Debug)]
pub struct Metrics {
    /// This instance among the process's ([`METRICS_SERIAL`]).
    serial: u64,
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
    appends: Counter,
    appended_bytes: Counter,
    live_readers: Family<ModeLabels, Gauge>,
    sse_events: Counter,
    passed_on: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty metrics, registered under the `strand_` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("strand");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route class, method and status",
            requests.clone(),
        );
        let latency = LatencyFamily::new_with_constructor(Latency::default);
        registry.register(
            "http_request_duration_seconds",
            "Time to answer a request (until its head is sent), by route class",
            latency.clone(),
        );
        let appends = Counter::default();
        registry.register(
            "appends",
            "Appends this node accepted from clients (not deduplicated)",
            appends.clone(),
        );
        let appended_bytes = Counter::default();
        registry.register(
            "appended_bytes",
            "Bytes of the appends this node accepted from clients",
            appended_bytes.clone(),
        );
        let live_readers = Family::<ModeLabels, Gauge>::default();
        // Both series exist from the start, at 0.
        for mode in ["long-poll", "sse"] {
            live_readers.get_or_create(&ModeLabels { mode }).set(0);
        }
        registry.register(
            "live_readers",
            "Live readers waiting or following now, by mode (long-poll, sse)",
            live_readers.clone(),
        );
        let sse_events = Counter::default();
        registry.register(
            "sse_events",
            "SSE events (data and control) sent to readers",
            sse_events.clone(),
        );
        let passed_on = Counter::default();
        registry.register(
            "requests_passed_on",
            "Client requests this cluster member passed on to a member holding their group",
            passed_on.clone(),
        );
        Self {
            serial: METRICS_SERIAL.fetch_add(1, Relaxed),
            registry,
            requests,
            latency,
            appends,
            appended_bytes,
            live_readers,
            sse_events,
            passed_on,
        }
    }

    /// Counts an answered request of route class `route`.
    pub(crate) fn request(
        &self,
        route: &'static str,
        method: &Method,
        status: u16,
        took: Duration,
    ) {
        let method = method_label(method);
        RECENT.with_borrow_mut(|recent| {
            let at = recent.iter().position(|r| {
                r.metrics == self.serial
                    && r.status == status
                    && r.route == route
                    && r.method == method
            });
            let series = match at {
                Some(at) => &recent[at],
                None => {
                    if recent.len() == RECENT_SERIES {
                        recent.remove(0);
                    }
                    recent.push(RecentSeries {
                        metrics: self.serial,
                        route,
                        method,
                        status,
                        requests: self
                            .requests
                            .get_or_create(&RequestLabels {
                                route,
                                method,
                                status,
                            })
                            .clone(),
                        latency: self.latency.get_or_create(&RouteLabels { route }).clone(),
                    });
                    &recent[recent.len() - 1]
                }
            };
            series.requests.inc();
            series.latency.observe(took);
        });
    }

    /// Counts an append of `bytes` bytes.
    pub(crate) fn appended(&self, bytes: usize) {
        self.appends.inc();
        self.appended_bytes
            .inc_by(u64::try_from(bytes).unwrap_or(u64::MAX));
    }

    /// Counts `n` SSE events sent.
    pub(crate) fn passed_on(&self) {
        self.passed_on.inc();
    }

    pub(crate) fn sse_events(&self, n: u64) {
        self.sse_events.inc_by(n);
    }

    /// A live reader of `mode` (`long-poll`, `sse`), counted until the
    /// returned guard drops.
    pub(crate) fn live_reader(&self, mode: &'static str) -> LiveReader {
        let gauge = self.live_readers.get_or_create_owned(&ModeLabels { mode });
        gauge.inc();
        LiveReader(gauge)
    }
}

/// One live reader counted in `strand_live_readers` while it is held.
#[derive(Debug)]
pub(crate) struct LiveReader(Gauge);

impl Drop for LiveReader {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A method as a label: the protocol's methods by name, anything else
/// `other` (the set stays bounded).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// A log's fsyncs by duration, as a Prometheus histogram in seconds.
#[derive(Debug)]
struct FsyncSeconds(strand_raft::FsyncHistogram);

impl EncodeMetric for FsyncSeconds {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = strand_raft::FSYNC_BUCKETS_US
            .iter()
            .zip(self.0.counts)
            .map(|(us, count)| (*us as f64 / 1e6, count))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(
            self.0.sum_us as f64 / 1e6,
            self.0.count(),
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let g = Gauge::<i64>::default();
    g.set(i64::try_from(value).unwrap_or(i64::MAX));
    registry.register(name, help, g);
}

fn counter(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(value);
    registry.register(name, help, c);
}

/// A per-group gauge family from `(group, value)` pairs.
fn group_gauges(
    registry: &mut Registry,
    name: &str,
    help: &str,
    values: impl IntoIterator<Item = (usize, u64)>,
) {
    let family = Family::<GroupLabels, Gauge>::default();
    for (group, value) in values {
        family
            .get_or_create(&GroupLabels {
                group: group as u64,
            })
            .set(i64::try_from(value).unwrap_or(i64::MAX));
    }
    registry.register(name, help, family);
}

/// What a scrape reads besides the server's own counters.
pub(crate) struct Sources<'a> {
    /// The node's groups.
    pub(crate) engine: &'a strand_engine::Engine,
    /// The cold tier, if the node has one.
    pub(crate) cold: Option<&'a strand_cold::ColdTier>,
    /// The Raft side of a durable node.
    pub(crate) raft: Option<&'a strand_raft::RaftNode>,
    /// The budget for request bodies.
    pub(crate) bodies: &'a crate::body::BodyBudget,
    /// The budget for peers' Raft messages.
    pub(crate) peer_bodies: &'a crate::body::BodyBudget,
}

impl Metrics {
    /// The node's metrics as the Prometheus text format: the server's own
    /// counters, then what the groups, the cold tier and the Raft side
    /// hold now.
    pub(crate) async fn render(&self, sources: Sources<'_>) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
        let scrape = scrape(sources).await;
        prometheus_client::encoding::prometheus_text::encode(&mut out, &scrape)?;
        Ok(out)
    }
}

/// A registry of what the node holds now.
async fn scrape(sources: Sources<'_>) -> Registry {
    let mut r = Registry::with_prefix("strand");
    let engine = sources.engine;
    // The machines of the groups the node holds: hot bytes, streams,
    // buckets.
    let mut hot = Vec::new();
    let mut streams = 0u64;
    let mut buckets = BTreeSet::new();
    for group in (0..engine.group_count()).filter(|&g| engine.holds_group(g)) {
        let answer = engine
            .query_group(group, |m| {
                let usage = m.bucket_usage_report();
                (m.total_hot_payload_bytes(), usage)
            })
            .await;
        if let Ok((bytes, usage)) = answer {
            hot.push((group, bytes));
            for bucket in usage {
                streams = streams.saturating_add(bucket.usage.stream_count);
                buckets.insert(bucket.bucket_id);
            }
        }
    }
    let node_hot = hot.iter().fold(0u64, |a, (_, b)| a.saturating_add(*b));
    gauge(
        &mut r,
        "hot_bytes",
        "Bytes held in the hot buffers of every group",
        node_hot,
    );
    group_gauges(
        &mut r,
        "group_hot_bytes",
        "Bytes held in a group's hot buffers",
        hot,
    );
    gauge(
        &mut r,
        "streams",
        "Streams on this node's groups (soft-deleted included)",
        streams,
    );
    gauge(
        &mut r,
        "buckets",
        "Buckets on this node's groups",
        buckets.len() as u64,
    );
    gauge(
        &mut r,
        "request_body_bytes",
        "Bytes of request bodies held now, received or being received (--max-body-memory-bytes)",
        sources.bodies.held() as u64,
    );
    counter(
        &mut r,
        "request_body_refused",
        "Requests refused with 503 because the request bodies held stayed at --max-body-memory-bytes",
        sources.bodies.refused(),
    );
    gauge(
        &mut r,
        "peer_body_bytes",
        "Bytes of peers' Raft messages held now, received or being received (--max-peer-body-memory-bytes)",
        sources.peer_bodies.held() as u64,
    );
    counter(
        &mut r,
        "peer_body_refused",
        "Peer messages refused with 503 because the messages held stayed at --max-peer-body-memory-bytes",
        sources.peer_bodies.refused(),
    );
    if let Some(cold) = sources.cold {
        cold_metrics(&mut r, cold.stats());
        let report = cold.report();
        counter(
            &mut r,
            "hot_refused_writes",
            "Writes refused with 503 because the node's or a group's hot memory stayed full",
            report
                .refused_writes
                .saturating_add(report.group_refused_writes),
        );
        gauge(
            &mut r,
            "hot_waiting_write_bytes",
            "Bytes of the writes waiting for the hot memory to make room",
            cold.waiting_bytes(),
        );
    }
    if let Some(raft) = sources.raft {
        raft_metrics(&mut r, raft);
    }
    r
}

fn cold_metrics(r: &mut Registry, s: &strand_cold::ColdStats) {
    use std::sync::atomic::Ordering::Relaxed;
    let c = |v: &std::sync::atomic::AtomicU64| v.load(Relaxed);
    let counters = [
        (
            "cold_uploads",
            "Objects uploaded to the cold tier",
            c(&s.uploads),
        ),
        (
            "cold_uploaded_bytes",
            "Bytes uploaded to the cold tier",
            c(&s.uploaded_bytes),
        ),
        (
            "cold_flushed_bytes",
            "Stream bytes whose flush to the cold tier committed",
            c(&s.flushed_bytes),
        ),
        (
            "cold_reads",
            "Reads served from the cold tier",
            c(&s.cold_reads),
        ),
        (
            "cold_read_bytes",
            "Bytes served from the cold tier",
            c(&s.cold_read_bytes),
        ),
        (
            "cold_store_failures",
            "Failed uploads, deletes, lists and reads of the cold store",
            c(&s.store_errors),
        ),
        (
            "cold_gc_deleted",
            "Objects deleted by the cold tier's GC",
            c(&s.gc_deleted),
        ),
    ];
    for (name, help, value) in counters {
        counter(r, name, help, value);
    }
    gauge(
        r,
        "cold_consecutive_failures",
        "Cold store failures in a row (0 after a success)",
        c(&s.consecutive_failures),
    );
}

fn raft_metrics(r: &mut Registry, raft: &strand_raft::RaftNode) {
    let groups = raft.metrics();
    type Figure = fn(&strand_raft::RaftGroupMetrics) -> Option<u64>;
    let per_group: [(&str, &str, Figure); 5] = [
        (
            "raft_leader",
            "1 where this node leads the group, else 0",
            |g| Some(u64::from(g.leader)),
        ),
        ("raft_term", "The group's current term", |g| Some(g.term)),
        (
            "raft_applied_index",
            "The log index of the group's last applied entry",
            |g| g.applied_index,
        ),
        (
            "raft_committed_index",
            "The log index of the group's last entry known committed",
            |g| g.committed_index,
        ),
        (
            "raft_last_log_index",
            "The last log index this node holds for the group",
            |g| g.last_log_index,
        ),
    ];
    for (name, help, figure) in per_group {
        let values = groups
            .iter()
            .filter_map(|g| figure(g).map(|v| (g.group, v)));
        group_gauges(r, name, help, values);
    }
    let lag = Family::<FollowerLabels, Gauge>::default();
    for g in &groups {
        for (follower, entries) in &g.follower_lag {
            lag.get_or_create(&FollowerLabels {
                group: g.group as u64,
                follower: *follower,
            })
            .set(i64::try_from(*entries).unwrap_or(i64::MAX));
        }
    }
    r.register(
        "raft_replication_lag_entries",
        "On a group's leader: entries a follower lacks",
        lag,
    );
    let snapshots_built = Family::<GroupLabels, Counter>::default();
    let snapshots_installed = Family::<GroupLabels, Counter>::default();
    for g in &groups {
        if let Some(s) = g.snapshot {
            let labels = GroupLabels {
                group: g.group as u64,
            };
            snapshots_built.get_or_create(&labels).inc_by(s.built);
            snapshots_installed
                .get_or_create(&labels)
                .inc_by(s.installed);
        }
    }
    r.register(
        "raft_snapshots_built",
        "Snapshots this node built of a group",
        snapshots_built,
    );
    r.register(
        "raft_snapshots_installed",
        "Snapshots of a group this node received and installed",
        snapshots_installed,
    );
    let log = groups.iter().map(|g| g.log).fold(
        strand_raft::LogStats::default(),
        strand_raft::LogStats::combined,
    );
    let log_counters = [
        ("log_writes", "Batches the log writers wrote", log.writes),
        (
            "log_written_bytes",
            "Bytes the log writers wrote",
            log.bytes,
        ),
        ("log_entries", "Log entries written", log.entries),
        (
            "log_proposals",
            "Proposals (appends and other writes) the written entries held",
            log.proposals,
        ),
        ("log_fsyncs", "fsyncs of the logs", log.fsyncs),
        (
            "log_synced_proposals",
            "Proposals made durable by those fsyncs (per fsync: its increase over strand_log_fsyncs_total's)",
            log.synced_proposals,
        ),
    ];
    for (name, help, value) in log_counters {
        counter(r, name, help, value);
    }
    let fsyncs = groups.iter().map(|g| g.fsyncs).fold(
        strand_raft::FsyncHistogram::default(),
        strand_raft::FsyncHistogram::combined,
    );
    r.register(
        "log_fsync_duration_seconds",
        "How long the logs' fsyncs took",
        FsyncSeconds(fsyncs),
    );
    if let Some(n) = raft.network_stats() {
        let network = [
            (
                "raft_messages_sent",
                "Raft messages sent to peers",
                n.raft_messages_sent,
            ),
            (
                "raft_requests_sent",
                "HTTP requests that carried Raft messages",
                n.raft_requests_sent,
            ),
            (
                "raft_batches_sent",
                "Batches of Raft messages sent",
                n.raft_batches_sent,
            ),
            (
                "raft_batched_messages",
                "Raft messages sent in batches",
                n.raft_batched_messages,
            ),
            (
                "raft_messages_failed",
                "Raft messages that got no answer",
                n.raft_messages_failed,
            ),
        ];
        for (name, help, value) in network {
            counter(r, name, help, value);
        }
    }
}

/// The text of a scrape's metric names, for tests.
#[cfg(test)]
fn names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_bounded_labels() {
        let m = Metrics::new();
        m.request("stream", &Method::POST, 204, Duration::from_millis(3));
        m.request("stream", &Method::POST, 204, Duration::from_millis(5));
        m.request(
            "stream",
            &Method::from_bytes(b"BREW").unwrap(),
            405,
            Duration::ZERO,
        );
        m.appended(10);
        let reader = m.live_reader("sse");
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &m.registry).unwrap();
        assert!(
            out.contains(
                r#"strand_http_requests_total{route="stream",method="POST",status="204"} 2"#
            ),
            "{out}"
        );
        assert!(out.contains(r#"method="other",status="405""#), "{out}");
        assert!(out.contains("strand_appended_bytes_total 10"), "{out}");
        assert!(
            out.contains(r#"strand_live_readers{mode="sse"} 1"#),
            "{out}"
        );
        drop(reader);
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &m.registry).unwrap();
        assert!(
            out.contains(r#"strand_live_readers{mode="sse"} 0"#),
            "{out}"
        );
        assert!(names(&out).contains("strand_http_request_duration_seconds"));
    }

    #[test]
    fn latencies_fall_in_the_first_bucket_whose_bound_holds_them() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(100_000), 0);
        assert_eq!(latency_bucket(100_001), 1);
        assert_eq!(latency_bucket(200_000), 1);
        assert_eq!(latency_bucket(200_001), 2);
        assert_eq!(latency_bucket(400_000), 2);
        // The last finite bound: 100 µs · 2^18 ≈ 26.2 s.
        assert_eq!(latency_bucket(100_000 << 18), 18);
        assert_eq!(latency_bucket((100_000 << 18) + 1), 19);
        assert_eq!(latency_bucket(u64::MAX), 19);
        let m = Metrics::new();
        for took in [50, 150, 150, 30_000_000] {
            m.request("stream", &Method::GET, 200, Duration::from_micros(took));
        }
        // Another instance's requests stay out of this one's series,
        // though the same thread answered both.
        Metrics::new().request("stream", &Method::GET, 200, Duration::from_micros(50));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &m.registry).unwrap();
        for line in [
            r#"strand_http_request_duration_seconds_bucket{route="stream",le="0.0001"} 1"#,
            r#"strand_http_request_duration_seconds_bucket{route="stream",le="0.0002"} 3"#,
            r#"strand_http_request_duration_seconds_bucket{route="stream",le="26.2144"} 3"#,
            r#"strand_http_request_duration_seconds_bucket{route="stream",le="+Inf"} 4"#,
            r#"strand_http_request_duration_seconds_count{route="stream"} 4"#,
            r#"strand_http_request_duration_seconds_sum{route="stream"} 30.00035"#,
            r#"strand_http_requests_total{route="stream",method="GET",status="200"} 4"#,
        ] {
            assert!(out.contains(line), "{line} not in {out}");
        }
    }

    #[test]
    fn fsync_buckets_become_a_cumulative_histogram_in_seconds() {
        let mut h = strand_raft::FsyncHistogram::default();
        h.counts[0] = 2;
        h.counts[3] = 1;
        *h.counts.last_mut().unwrap() = 1;
        h.sum_us = 3_000_000;
        let mut r = Registry::default();
        r.register("fsync_seconds", "test", FsyncSeconds(h));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &r).unwrap();
        assert!(
            out.contains(r#"fsync_seconds_bucket{le="0.0001"} 2"#),
            "{out}"
        );
        assert!(
            out.contains(r#"fsync_seconds_bucket{le="0.001"} 3"#),
            "{out}"
        );
        assert!(out.contains(r#"fsync_seconds_bucket{le="1"} 3"#), "{out}");
        assert!(
            out.contains(r#"fsync_seconds_bucket{le="+Inf"} 4"#),
            "{out}"
        );
        assert!(out.contains("fsync_seconds_count 4"), "{out}");
        assert!(out.contains("fsync_seconds_sum 3.0"), "{out}");
    }
}
