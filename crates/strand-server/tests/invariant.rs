//! "A request that fails changes nothing" (issue 27). Random sequences of
//! requests over the whole route table — the Durable Streams mount, the
//! bucketed layout and its extension routes, buckets, the `/__strand/`
//! routes, unknown paths and methods — with good and bad headers, offsets,
//! producers and bodies, go to a live in-process server whose streams come
//! from a small fixed pool, so requests collide on real streams. After every
//! answer of 400 or more, the state of every stream of the pool must be what
//! it was before the request; a 5xx fails at once.
//!
//! The state is taken through the API, model-free: per stream a HEAD, a
//! catch-up read from `-1` paged through `Stream-Next-Offset`, its attrs and
//! its latest snapshot, and per producer with state a retry of its last
//! acknowledged append (same `Producer-Id`/`-Epoch`/`-Seq`), which must be
//! answered as a duplicate. The retry carries a `Stream-Record-Match` no
//! stream can be at and a body the stream accepts: the machine looks for a
//! duplicate first, so the retry cannot write whatever the producer's state
//! is. Besides, what the API shows of no stream is read from the engine: the
//! stream's metadata (last `Stream-Seq` token, TTL touch time), record range,
//! retained offset, producer positions, and each group's bucket usage and
//! quotas. Fork unpins, which the engine delivers in the background, are
//! waited for before the state is taken.
//!
//! Time is a manual clock: now and then it moves on and the state is taken
//! afresh (expiry is a legitimate change); before some requests it moves a
//! little, never up to an expiry, so a failed request that renewed a TTL
//! shows in the touch time. One such renewal is let through: a GET the
//! machine refuses renews the TTL first (see [`tolerated`]).
//!
//! The operator routes go to both listeners; a purge of a pool bucket
//! only to the client listener (where it is refused), since a purge that
//! succeeds erases its bucket for good.
//!
//! `STRAND_INVARIANT_REQUESTS` (default 3000) and `STRAND_INVARIANT_SEED`
//! (decimal or `0x` hex) set the run; `cargo xtask invariant` runs a long
//! one. A failure prints the seed, the request's index, the request, the
//! answer, the state that changed, the requests just before, and the
//! command that replays it.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use common::TestServer;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::HeaderValue;
use hyper::{HeaderMap, Method};
use hyper_util::rt::TokioIo;
use strand::BucketStreamId;
use strand_server::offsets::render;
use strand_server::time::render_rfc3339_ms;
use tokio::net::TcpStream;

const DEFAULT_REQUESTS: u64 = 3000;
const DEFAULT_SEED: u64 = 0x1dea_5eed_0027_f00d;
/// The server's `max_body_bytes`: small, so oversize bodies are cheap.
const MAX_BODY: usize = 512;
/// The server's `max_read_bytes`: small, so catch-up reads page.
const MAX_READ: usize = 512;
const DEFAULT_BUCKET: &str = "default";
/// The producer ids requests use.
const PRODUCERS: [&str; 2] = ["p1", "p2"];
/// The buckets whose existence the state holds.
const BUCKETS: [&str; 4] = ["default", "acme", "beta", "gamma"];
/// A record number no stream reaches: the producer probes' guard.
const NO_RECORD: &str = "9007199254740991";

/// One stream of the pool.
struct Spec {
    bucket: &'static str,
    affinity: Option<&'static str>,
    name: &'static str,
}

const fn spec(bucket: &'static str, affinity: Option<&'static str>, name: &'static str) -> Spec {
    Spec {
        bucket,
        affinity,
        name,
    }
}

/// The pool: the default bucket (also reached through `/v1/stream/`), two
/// more buckets, and an affinity group `k` in each for transactions.
const POOL: [Spec; 10] = [
    spec(DEFAULT_BUCKET, None, "a"),
    spec(DEFAULT_BUCKET, None, "b"),
    spec(DEFAULT_BUCKET, Some("k"), "j"),
    spec("acme", None, "s"),
    spec("acme", None, "t"),
    spec("acme", Some("k"), "x"),
    spec("acme", Some("k"), "y"),
    spec("beta", None, "s"),
    spec("beta", Some("k"), "x"),
    spec("beta", Some("k"), "y"),
];

/// The affinity groups `$transaction` is sent to: bucket, key and the pool
/// streams in it (`acme/none` holds none).
const TX_GROUPS: [(&str, &str, &[usize]); 4] = [
    (DEFAULT_BUCKET, "k", &[2]),
    ("acme", "k", &[5, 6]),
    ("beta", "k", &[8, 9]),
    ("acme", "none", &[]),
];

impl Spec {
    fn id(&self) -> BucketStreamId {
        match self.affinity {
            Some(key) => BucketStreamId::with_affinity(self.bucket, key, self.name),
            None => BucketStreamId::new(self.bucket, self.name),
        }
    }

    /// The path below the bucket: `[{affinity}/]{name}`.
    fn rel(&self) -> String {
        match self.affinity {
            Some(key) => format!("{key}/{}", self.name),
            None => self.name.to_owned(),
        }
    }

    fn label(&self) -> String {
        format!("{}/{}", self.bucket, self.rel())
    }

    /// The bucketed path, which reaches every stream of the pool.
    fn canonical(&self) -> String {
        format!("/{}", self.label())
    }

    /// The bucketed path with the name's first byte percent-encoded.
    fn encoded(&self) -> String {
        let (first, rest) = self.name.split_at(1);
        let prefix = self.affinity.map(|k| format!("{k}/")).unwrap_or_default();
        format!(
            "/{}/{prefix}%{:02X}{rest}",
            self.bucket,
            first.as_bytes()[0]
        )
    }
}

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n.max(1)).unwrap()).unwrap()
    }
    fn upto(&mut self, n: u64) -> u64 {
        self.next() % (n + 1)
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

/// The request kinds, for the generator's weights and the closing table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Create,
    Append,
    Close,
    Read,
    LiveRead,
    Head,
    Delete,
    Fork,
    AppendBatch,
    Transaction,
    Snapshot,
    Retention,
    Attrs,
    Bootstrap,
    Bucket,
    Admin,
    Junk,
    Options,
}

const KINDS: [(Kind, usize); 18] = [
    (Kind::Create, 10),
    (Kind::Append, 20),
    (Kind::Close, 3),
    (Kind::Read, 8),
    (Kind::LiveRead, 3),
    (Kind::Head, 3),
    (Kind::Delete, 3),
    (Kind::Fork, 6),
    (Kind::AppendBatch, 6),
    (Kind::Transaction, 6),
    (Kind::Snapshot, 6),
    (Kind::Retention, 3),
    (Kind::Attrs, 5),
    (Kind::Bootstrap, 2),
    (Kind::Bucket, 2),
    (Kind::Admin, 4),
    (Kind::Junk, 3),
    (Kind::Options, 1),
];

/// One request as sent.
struct Request {
    kind: Kind,
    /// Sent to the admin listener (`--admin-listen`) rather than the
    /// client listener, where the operator routes answer 403.
    admin_plane: bool,
    method: Method,
    path: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Request {
    fn new(kind: Kind, method: Method, path: impl Into<String>) -> Self {
        Self {
            kind,
            admin_plane: false,
            method,
            path: path.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers
            .push((name.to_owned(), value.as_ref().to_vec()));
        self
    }

    fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plane = if self.admin_plane {
            " (admin listener)"
        } else {
            ""
        };
        write!(f, "{:?}{plane}: {} {}", self.kind, self.method, self.path)?;
        for (name, value) in &self.headers {
            write!(f, "\n    {name}: {}", value.escape_ascii())?;
        }
        write!(
            f,
            "\n    body ({} bytes): {}",
            self.body.len(),
            clip(&self.body.escape_ascii().to_string(), 300)
        )
    }
}

/// A whole answer.
struct Response {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
}

impl Response {
    fn h(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The status, the named headers present and, with `body`, the body.
    fn render(&self, names: &[&str], body: bool) -> String {
        let mut out = self.status.to_string();
        for name in names {
            if let Some(v) = self.headers.get(*name) {
                let _ = write!(out, " {name}={}", v.as_bytes().escape_ascii());
            }
        }
        if body {
            let _ = write!(out, " body={}", self.body.escape_ascii());
        }
        out
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} chars)", &text[..end], text.len())
}

fn build(addr: SocketAddr, request: &Request) -> Result<hyper::Request<Full<Bytes>>, String> {
    let mut builder = hyper::Request::builder()
        .method(request.method.clone())
        .uri(&request.path)
        .header("host", addr.to_string());
    for (name, value) in &request.headers {
        let value = HeaderValue::from_bytes(value).map_err(|e| format!("header {name}: {e}"))?;
        builder = builder.header(name.as_str(), value);
    }
    builder
        .body(Full::new(Bytes::from(request.body.clone())))
        .map_err(|e| format!("cannot build the request: {e}"))
}

async fn answer(response: hyper::Response<hyper::body::Incoming>) -> Result<Response, String> {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// Sends a generated request on a connection of its own (a request that
/// may write is never sent twice), with a deadline.
async fn send_once(addr: SocketAddr, request: &Request) -> Result<Response, String> {
    let exchange = async {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let response = sender
            .send_request(build(addr, request)?)
            .await
            .map_err(|e| format!("send: {e}"))?;
        answer(response).await
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| "no answer within 10 s".to_owned())?
}

/// A kept-alive connection for the state's requests, which change nothing
/// and so may be sent again when the connection broke.
struct Conn {
    addr: SocketAddr,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Conn {
    async fn send(&mut self, request: &Request) -> Response {
        let mut last = String::new();
        for _ in 0..3 {
            if self.sender.is_none() {
                let stream = TcpStream::connect(self.addr).await.unwrap();
                let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .unwrap();
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                self.sender = Some(sender);
            }
            let sender = self.sender.as_mut().unwrap();
            if sender.ready().await.is_err() {
                self.sender = None;
                continue;
            }
            let exchange = async {
                let response = sender
                    .send_request(build(self.addr, request)?)
                    .await
                    .map_err(|e| e.to_string())?;
                answer(response).await
            };
            match tokio::time::timeout(Duration::from_secs(10), exchange).await {
                Ok(Ok(response)) => return response,
                Ok(Err(e)) => last = e,
                Err(_) => last = "no answer within 10 s".into(),
            }
            self.sender = None;
        }
        panic!("state request failed three times ({last}): {request}");
    }

    async fn get(&mut self, method: Method, path: &str) -> Response {
        self.send(&Request::new(Kind::Read, method, path)).await
    }
}

/// What the generator knows of one stream of the pool, from the last state.
#[derive(Debug, Clone, Default)]
struct View {
    /// HEAD's status: 200, 404, or 410 (soft-deleted).
    head: u16,
    tail: u64,
    content_type: String,
    closed: bool,
    ttl: Option<String>,
    expires_at: Option<String>,
    /// The latest visible snapshot: offset and digest.
    snapshot: Option<(u64, String)>,
    /// `(producer, epoch, last seq)` of the producers with state.
    producers: Vec<(&'static str, u64, u64)>,
    last_seq: Option<String>,
    next_record: Option<u64>,
    retained: u64,
    /// When the stream expires, if it does.
    deadline: Option<u64>,
}

impl View {
    fn exists(&self) -> bool {
        self.head == 200
    }

    fn json(&self) -> bool {
        is_json(&self.content_type)
    }

    fn producer(&self, id: &str) -> Option<(u64, u64)> {
        self.producers
            .iter()
            .find(|(p, _, _)| *p == id)
            .map(|(_, e, s)| (*e, *s))
    }
}

fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .eq_ignore_ascii_case("application/json")
}

/// The state of the pool at one moment.
struct State {
    /// What the API shows: key → rendered answer.
    http: BTreeMap<String, String>,
    /// The engine's view, taken before this state's reads (which may renew
    /// a TTL) …
    pre: BTreeMap<String, String>,
    /// … and after them: what the next request starts from.
    post: BTreeMap<String, String>,
    views: Vec<View>,
    now_ms: u64,
}

impl State {
    /// The state a request started from.
    fn before(&self) -> BTreeMap<&str, &str> {
        self.http
            .iter()
            .chain(&self.post)
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// The state a request left.
    fn after(&self) -> BTreeMap<&str, &str> {
        self.http
            .iter()
            .chain(&self.pre)
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// The earliest expiry of the pool's streams, and whether the pool
    /// holds a soft-deleted stream (whose expiry the engine does not show).
    fn earliest_expiry(&self) -> (Option<u64>, bool) {
        let soft = self.views.iter().any(|v| v.head == 410);
        (self.views.iter().filter_map(|v| v.deadline).min(), soft)
    }
}

const HEAD_HEADERS: [&str; 7] = [
    "content-type",
    "stream-next-offset",
    "stream-closed",
    "stream-ttl",
    "stream-expires-at",
    "etag",
    "cache-control",
];
const READ_HEADERS: [&str; 5] = [
    "content-type",
    "stream-next-offset",
    "stream-up-to-date",
    "stream-closed",
    "etag",
];
const SNAPSHOT_HEADERS: [&str; 3] = [
    "content-type",
    "stream-snapshot-offset",
    "stream-snapshot-digest",
];
const PROBE_HEADERS: [&str; 6] = [
    "producer-epoch",
    "producer-seq",
    "producer-expected-seq",
    "producer-received-seq",
    "stream-next-offset",
    "stream-closed",
];

/// The engine's view of the pool: per stream its metadata (with what the
/// API does not show: the last `Stream-Seq` token, the TTL touch time),
/// attrs, retained offset, record range and producer positions; per group
/// its bucket usage and quotas. Also fills the views' engine-side fields.
async fn engine_state(s: &TestServer, views: &mut [View]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (spec, view) in POOL.iter().zip(views.iter_mut()) {
        let id = spec.id();
        let (line, touch, facts) = s
            .engine
            .query(&spec.id(), move |m| {
                let meta = m.head(&id).cloned();
                let records = m.record_range(&id);
                let producers: Vec<(&'static str, Option<(u64, u64)>)> = PRODUCERS
                    .iter()
                    .map(|p| (*p, m.producer_position(&id, p)))
                    .collect();
                // The TTL touch time on a line of its own (see `tolerated`).
                let touch = meta.as_ref().map(|m| m.last_ttl_touch_at_ms);
                let untouched = meta.clone().map(|mut m| {
                    m.last_ttl_touch_at_ms = 0;
                    m
                });
                let line = format!(
                    "meta={untouched:?} attrs={:?} retained={} records={records:?} producers={producers:?} soft_deleted={}",
                    m.stream_attrs(&id),
                    m.retained_offset(&id),
                    m.is_soft_deleted(&id),
                );
                let next_record = records.ok().flatten().map(|r| r.next_record);
                let deadline = meta.as_ref().and_then(|m| {
                    let ttl = m
                        .stream_ttl_seconds
                        .map(|t| m.last_ttl_touch_at_ms.saturating_add(t.saturating_mul(1000)));
                    match (ttl, m.stream_expires_at_ms) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    }
                });
                let positions: Vec<(&'static str, u64, u64)> = producers
                    .iter()
                    .filter_map(|(p, pos)| pos.map(|(e, s)| (*p, e, s)))
                    .collect();
                let facts = (
                    meta.and_then(|m| m.last_stream_seq),
                    next_record,
                    m.retained_offset(&id),
                    deadline,
                    positions,
                );
                (line, touch, facts)
            })
            .await
            .unwrap();
        (
            view.last_seq,
            view.next_record,
            view.retained,
            view.deadline,
            view.producers,
        ) = facts;
        out.insert(format!("{} engine", spec.label()), line);
        out.insert(
            format!("{} engine ttl touch", spec.label()),
            format!("{touch:?}"),
        );
    }
    for group in 0..s.engine.group_count() {
        let line = s
            .engine
            .query_group(group, |m| {
                format!(
                    "usage={:?} quotas={:?}",
                    m.bucket_usage_report(),
                    m.bucket_quota_report()
                )
            })
            .await
            .unwrap();
        out.insert(format!("group {group} buckets"), line);
    }
    out
}

/// Waits until no group holds fork unpins still to deliver. The engine
/// delivers them in the background: a removed fork's unpin removes its
/// soft-deleted source, a change that belongs to what removed the fork,
/// not to the next request.
async fn settle(s: &TestServer) {
    let pending = || async {
        for group in 0..s.engine.group_count() {
            if s.engine
                .query_group(group, |m| !m.pending_fork_unpins(1).is_empty())
                .await
                .unwrap()
            {
                return true;
            }
        }
        false
    };
    // Twice in a row with none: an unpin delivered between two groups'
    // answers may have left a new one in a group already asked.
    common::eventually(
        "no fork unpins pending",
        Duration::from_secs(10),
        || async {
            if pending().await {
                return None;
            }
            tokio::task::yield_now().await;
            (!pending().await).then_some(())
        },
    )
    .await;
}

/// HEAD of every pool stream (which expires what is due without renewing
/// anything), concurrently, and GET of every bucket.
async fn heads(conns: &mut Conns, http: &mut BTreeMap<String, String>, views: &mut [View]) {
    let answers = futures_util::future::join_all(
        POOL.iter()
            .zip(conns.streams.iter_mut())
            .map(|(spec, conn)| async move { conn.get(Method::HEAD, &spec.canonical()).await }),
    )
    .await;
    for ((spec, view), head) in POOL.iter().zip(views.iter_mut()).zip(answers) {
        *view = View {
            head: head.status,
            ..View::default()
        };
        if head.status == 200 {
            view.content_type = head.h("content-type").unwrap_or_default().to_owned();
            view.tail = head
                .h("stream-next-offset")
                .and_then(|t| strand_server::offsets::parse_position(t).ok())
                .unwrap_or(0);
            view.closed = head.h("stream-closed") == Some("true");
            view.ttl = head.h("stream-ttl").map(str::to_owned);
            view.expires_at = head.h("stream-expires-at").map(str::to_owned);
        }
        http.insert(
            format!("{} head", spec.label()),
            head.render(&HEAD_HEADERS, true),
        );
    }
    for bucket in BUCKETS {
        let r = conns.other.get(Method::GET, &format!("/{bucket}")).await;
        http.insert(format!("bucket {bucket}"), r.render(&[], false));
    }
}

/// A stream's catch-up read from `-1` (every page), its attrs and its
/// latest snapshot, with the snapshot's offset and digest.
async fn reads(conn: &mut Conn, spec: &Spec) -> (Vec<(String, String)>, Option<(u64, String)>) {
    let path = spec.canonical();
    let mut pages = String::new();
    let mut offset = "-1".to_owned();
    for page in 0.. {
        let r = conn
            .get(Method::GET, &format!("{path}?offset={offset}"))
            .await;
        let _ = writeln!(pages, "page {page}: {}", r.render(&READ_HEADERS, true));
        match r.h("stream-next-offset") {
            Some(next) if r.status == 200 && r.h("stream-up-to-date") != Some("true") => {
                assert!(page < 1000, "{path}: no end after 1000 pages");
                next.clone_into(&mut offset);
            }
            _ => break,
        }
    }
    let attrs = conn.get(Method::GET, &format!("{path}/attrs")).await;
    let snapshot = conn.get(Method::GET, &format!("{path}/snapshot")).await;
    let visible = if snapshot.status == 200 {
        let offset = snapshot
            .h("stream-snapshot-offset")
            .and_then(|t| strand_server::offsets::parse_position(t).ok());
        let digest = snapshot.h("stream-snapshot-digest");
        offset.zip(digest.map(str::to_owned))
    } else {
        None
    };
    let label = spec.label();
    let lines = vec![
        (format!("{label} read"), pages),
        (format!("{label} attrs"), attrs.render(&[], true)),
        (
            format!("{label} snapshot"),
            snapshot.render(&SNAPSHOT_HEADERS, true),
        ),
    ];
    (lines, visible)
}

/// Each producer's retry of its last acknowledged append: a duplicate,
/// answered with the producer's epoch and seq, that writes nothing (see
/// the module's text).
async fn retries(conn: &mut Conn, spec: &Spec, view: &View) -> Vec<(String, String)> {
    let mut lines = Vec::new();
    for &(producer, epoch, seq) in &view.producers {
        let probe = Request::new(Kind::Append, Method::POST, spec.canonical())
            .header("content-type", &view.content_type)
            .header("producer-id", producer)
            .header("producer-epoch", epoch.to_string())
            .header("producer-seq", seq.to_string())
            .header("stream-record-match", NO_RECORD)
            .body("0");
        let r = conn.send(&probe).await;
        assert_eq!(
            (r.status, r.h("producer-epoch"), r.h("producer-seq")),
            (
                204,
                Some(epoch.to_string().as_str()),
                Some(seq.to_string().as_str())
            ),
            "a retry of the last acknowledged append is a duplicate\n  {probe}\nanswer: {}",
            r.render(&PROBE_HEADERS, true)
        );
        lines.push((
            format!("{} producer {producer} retry", spec.label()),
            r.render(&PROBE_HEADERS, true),
        ));
    }
    lines
}

/// Kept-alive connections for taking the state: one per pool stream, for
/// its requests, which go concurrently with the other streams', and one
/// more.
struct Conns {
    other: Conn,
    streams: Vec<Conn>,
}

impl Conns {
    fn new(addr: SocketAddr) -> Self {
        let conn = || Conn { addr, sender: None };
        Self {
            other: conn(),
            streams: POOL.iter().map(|_| conn()).collect(),
        }
    }
}

/// Takes the pool's state (see the module's text).
async fn take_state(s: &TestServer, conns: &mut Conns) -> State {
    let mut http = BTreeMap::new();
    let mut views = vec![View::default(); POOL.len()];
    // HEADs first. An expired fork they remove leaves an unpin for its
    // source, which may remove a soft-deleted one: once the unpins are
    // delivered, the soft-deleted streams are looked at again, and if one
    // went, all of them.
    settle(s).await;
    loop {
        heads(conns, &mut http, &mut views).await;
        settle(s).await;
        let mut gone = false;
        for (spec, view) in POOL.iter().zip(&views) {
            if view.head == 410 {
                let again = conns.other.get(Method::HEAD, &spec.canonical()).await;
                gone |= again.status != 410;
            }
        }
        if !gone {
            break;
        }
    }
    let pre = engine_state(s, &mut views).await;
    let read = futures_util::future::join_all(
        POOL.iter()
            .zip(&views)
            .zip(conns.streams.iter_mut())
            .filter(|((_, view), _)| view.exists())
            .map(|((spec, _), conn)| async move { (spec.label(), reads(conn, spec).await) }),
    )
    .await;
    for (label, (lines, visible)) in read {
        http.extend(lines);
        if let Some(view) = POOL
            .iter()
            .position(|spec| spec.label() == label)
            .map(|i| &mut views[i])
        {
            view.snapshot = visible;
        }
    }
    let post = engine_state(s, &mut views).await;
    let retried = futures_util::future::join_all(
        POOL.iter()
            .zip(&views)
            .zip(conns.streams.iter_mut())
            .filter(|((_, view), _)| view.exists())
            .map(|((spec, view), conn)| retries(conn, spec, view)),
    )
    .await;
    http.extend(retried.into_iter().flatten());
    State {
        http,
        pre,
        post,
        views,
        now_ms: s.engine.now_ms(),
    }
}

/// A change a failed request may make: a GET renews a TTL before its read
/// fails. The engine touches the stream (`TouchStreamAccess`) before it
/// reads, so a read refused by the machine (an offset beyond the tail: 400
/// or 416; one below the retained offset: 410) still renews it. Changing
/// that is the engine's business; the test lets the touch time move to
/// the request's time, and nothing else.
fn tolerated(request: &Request, now_ms: u64, key: &str, after: Option<&str>) -> bool {
    request.method == Method::GET
        && key.ends_with(" engine ttl touch")
        && after == Some(format!("Some({now_ms})").as_str())
}

/// The keys whose values differ, each with both values.
fn differences(
    before: &BTreeMap<&str, &str>,
    after: &BTreeMap<&str, &str>,
    tolerate: impl Fn(&str, Option<&str>) -> bool,
) -> Vec<String> {
    let mut keys: Vec<&str> = before.keys().chain(after.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(k) != after.get(k) && !tolerate(k, after.get(k).copied()))
        .map(|k| {
            format!(
                "{k}\n    before: {}\n    after:  {}",
                clip(before.get(k).copied().unwrap_or("(absent)"), 1500),
                clip(after.get(k).copied().unwrap_or("(absent)"), 1500)
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The generator.

const CONTENT_TYPES: [&str; 9] = [
    "text/plain",
    "text/plain",
    "application/json",
    "application/json",
    "application/octet-stream",
    "TEXT/PLAIN; charset=utf-8",
    "application/json; charset=utf-8",
    "image/png",
    "not-a-type",
];

fn media(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// A content type of another media type than `current`.
fn other_type(rng: &mut Rng, current: &str) -> &'static str {
    loop {
        let ct = rng.pick(&CONTENT_TYPES);
        if media(ct) != media(current) {
            return ct;
        }
    }
}

/// A content type naming `current`'s media type, spelled some way.
fn same_type(rng: &mut Rng, current: &str) -> String {
    if current.is_empty() {
        return "text/plain".into();
    }
    match rng.below(6) {
        0 => current.to_ascii_uppercase(),
        1 => format!("{}; charset=utf-8", media(current)),
        _ => current.to_owned(),
    }
}

/// A body the content type accepts.
fn payload(rng: &mut Rng, json: bool) -> Vec<u8> {
    if json {
        return rng
            .pick(&[
                "1",
                "\"s\"",
                "{\"a\":1}",
                "[1,2]",
                "[{\"b\":[3]}]",
                "null",
                "[[1],[2]]",
                " [true] ",
            ])
            .as_bytes()
            .to_vec();
    }
    let n = 1 + rng.below(24);
    if rng.chance(15) {
        return (0..n)
            .map(|_| u8::try_from(rng.next() & 0xff).unwrap())
            .collect();
    }
    (0..n)
        .map(|_| b'a' + u8::try_from(rng.below(26)).unwrap())
        .collect()
}

/// A body for the routes that store bytes as they come (`append-batch`,
/// `$transaction`): on a JSON stream, whole compact values each ending in
/// a newline, as JSON mode stores them (now and then not so).
fn raw_payload(rng: &mut Rng, json: bool) -> Vec<u8> {
    if json && rng.chance(90) {
        return rng
            .pick(&["1\n", "\"s\"\n", "{\"a\":1}\n", "1\n2\n", "[3]\n", "null\n"])
            .as_bytes()
            .to_vec();
    }
    payload(rng, json)
}

fn bad_json(rng: &mut Rng) -> Vec<u8> {
    rng.pick(&["[1,", "{", "[]", "nul", "{\"a\":}", "\u{ff}", "1 2", "[1]]"])
        .as_bytes()
        .to_vec()
}

fn oversize(rng: &mut Rng) -> Vec<u8> {
    vec![b'o'; MAX_BODY + 1 + rng.below(64)]
}

fn pick_stream(rng: &mut Rng) -> usize {
    rng.below(POOL.len())
}

/// A pool stream for which `wanted` holds, `percent` % of the time (when
/// there is one), else any.
fn choose(rng: &mut Rng, state: &State, percent: usize, wanted: fn(&View) -> bool) -> usize {
    let fitting: Vec<usize> = (0..POOL.len())
        .filter(|&i| wanted(&state.views[i]))
        .collect();
    if !fitting.is_empty() && rng.chance(percent) {
        rng.pick(&fitting)
    } else {
        pick_stream(rng)
    }
}

fn missing(view: &View) -> bool {
    view.head == 404
}

fn open(view: &View) -> bool {
    view.exists() && !view.closed
}

/// A path to a pool stream on either layout, sometimes percent-encoded.
fn stream_path(rng: &mut Rng, spec: &Spec) -> String {
    match rng.below(8) {
        0..=2 if spec.bucket == DEFAULT_BUCKET => format!("/v1/stream/{}", spec.rel()),
        3 => spec.encoded(),
        _ => spec.canonical(),
    }
}

/// The bucketed path of a pool stream, for its extension routes.
fn ext_path(rng: &mut Rng, spec: &Spec) -> String {
    if rng.chance(15) {
        spec.encoded()
    } else {
        spec.canonical()
    }
}

/// A byte offset near the stream's interesting places.
fn offset_near(rng: &mut Rng, view: &View) -> u64 {
    let tail = view.tail;
    match rng.below(8) {
        0 => 0,
        1 | 2 => tail,
        3 => tail / 2,
        4 => tail + 1,
        5 => tail.saturating_sub(1),
        6 => view.retained,
        _ => rng.upto(tail),
    }
}

/// A `Stream-Seq` token: the last one (409), one above it, or any.
fn stream_seq(rng: &mut Rng, view: &View) -> String {
    match (view.last_seq.as_deref(), rng.below(4)) {
        (Some(last), 0) => last.to_owned(),
        (Some(last), 1) => format!("{last}1"),
        _ => rng
            .pick(&["1", "2", "3", "10", "09", "a", "B", "z"])
            .to_owned(),
    }
}

/// A producer's `(id, epoch, seq)`: the next one, a duplicate, a gap, an
/// epoch bump (good or with a seq ≠ 0), a stale epoch, or any.
fn producer_tuple(rng: &mut Rng, view: &View) -> (&'static str, u64, u64) {
    let id = rng.pick(&PRODUCERS);
    let (epoch, seq) = match (view.producer(id), rng.below(10)) {
        (Some((e, s)), 0..=3) => (e, s + 1),
        (Some((e, s)), 4) => (e, s),
        (Some((e, s)), 5) => (e, s + 3),
        (Some((e, _)), 6) => (e + 1, 0),
        (Some((e, _)), 7) => (e + 1, 1),
        (Some((e, s)), 8) if e > 0 => (e - 1, s + 1),
        (None, 0..=5) => (u64::from(rng.chance(20)), 0),
        (None, 6) => (0, 2),
        _ => (rng.upto(2), rng.upto(4)),
    };
    (id, epoch, seq)
}

/// Producer headers, sometimes malformed or incomplete.
fn producer_headers(rng: &mut Rng, view: &View, mut request: Request) -> Request {
    let (id, epoch, seq) = producer_tuple(rng, view);
    let (mut id, mut epoch, mut seq) = (id.to_owned(), epoch.to_string(), seq.to_string());
    if rng.chance(12) {
        let bad = rng
            .pick(&[
                "",
                "x",
                "-1",
                "1e3",
                "9007199254740992",
                "18446744073709551616",
            ])
            .to_owned();
        match rng.below(3) {
            0 => id = if bad.is_empty() { " ".into() } else { bad },
            1 => epoch = bad,
            _ => seq = bad,
        }
    }
    let skip = if rng.chance(5) { rng.below(3) } else { 3 };
    for (i, (name, value)) in [
        ("producer-id", id),
        ("producer-epoch", epoch),
        ("producer-seq", seq),
    ]
    .into_iter()
    .enumerate()
    {
        if i != skip {
            request = request.header(name, value);
        }
    }
    request
}

/// `Stream-TTL` / `Stream-Expires-At`, good or bad, or neither.
fn expiry_headers(rng: &mut Rng, now_ms: u64, request: Request) -> Request {
    match rng.below(24) {
        0..=4 => request.header("stream-ttl", rng.pick(&["4", "4", "5", "60", "3600", "0"])),
        5 => {
            let at = now_ms + rng.pick(&[10_000u64, 600_000]);
            request.header("stream-expires-at", render_rfc3339_ms(at))
        }
        6 => request.header("stream-expires-at", render_rfc3339_ms(now_ms - 1_000)),
        7 => request.header(
            "stream-ttl",
            rng.pick(&["-1", "01", "1.5", "abc", "99999999999999999999", ""]),
        ),
        8 => request.header(
            "stream-expires-at",
            rng.pick(&["yesterday", "2030-02-30T00:00:00Z", "2030-01-01T00:00:00"]),
        ),
        9 => request
            .header("stream-ttl", "60")
            .header("stream-expires-at", render_rfc3339_ms(now_ms + 60_000)),
        _ => request,
    }
}

fn attrs_value(rng: &mut Rng) -> &'static str {
    rng.pick(&[
        "{\"title\":\"T\"}",
        "{\"metadata\":{\"k\":1}}",
        "{}",
        "{\"title\":\"\",\"metadata\":{\"z\":[1],\"a\":null}}",
        "{",
        "{\"title\":1}",
        "{\"bogus\":1}",
        "[]",
    ])
}

fn create(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 65, missing);
    let (spec, view) = (&POOL[i], &state.views[i]);
    let mut r = Request::new(Kind::Create, Method::PUT, stream_path(rng, spec));
    let content_type = if view.exists() && rng.chance(50) {
        Some(view.content_type.clone())
    } else if rng.chance(8) {
        None
    } else {
        Some(rng.pick(&CONTENT_TYPES).to_owned())
    };
    let json = content_type.as_deref().is_some_and(is_json);
    if let Some(ct) = &content_type {
        r = r.header("content-type", ct);
    }
    if view.exists() && rng.chance(50) {
        // The stream's own configuration: an idempotent create.
        if let Some(ttl) = &view.ttl {
            r = r.header("stream-ttl", ttl);
        }
        if let Some(at) = &view.expires_at {
            r = r.header("stream-expires-at", at);
        }
        if view.closed {
            r = r.header("stream-closed", "true");
        }
    } else {
        r = expiry_headers(rng, state.now_ms, r);
        if rng.chance(4) {
            r = r.header("stream-closed", "true");
        } else if rng.chance(2) {
            r = r.header("stream-closed", "maybe");
        }
    }
    if rng.chance(8) {
        r = r.header("stream-seq", stream_seq(rng, view));
    }
    if rng.chance(12) {
        r = r.header("stream-attrs", attrs_value(rng));
    }
    if rng.chance(3) {
        r = r.header("stream-fork-offset", render(0));
    }
    let body = match rng.below(12) {
        0..=5 => Vec::new(),
        6..=8 => payload(rng, json),
        9 if json => bad_json(rng),
        10 => oversize(rng),
        _ => payload(rng, !json),
    };
    r.body(body)
}

/// Gives an append its `Content-Type`: mostly the stream's own (in some
/// spelling), sometimes another type, sometimes none; and whether the
/// body should be JSON.
fn with_content_type(rng: &mut Rng, r: Request, stream_type: &str) -> (Request, bool) {
    let content_type = match rng.below(20) {
        0 => None,
        1 | 2 => Some(other_type(rng, stream_type).to_owned()),
        _ => Some(same_type(rng, stream_type)),
    };
    let json = content_type.as_deref().is_some_and(is_json);
    match content_type {
        Some(ct) => (r.header("content-type", ct), json),
        None => (r, json),
    }
}

fn append(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 75, open);
    let (spec, view) = (&POOL[i], &state.views[i]);
    let r = Request::new(Kind::Append, Method::POST, stream_path(rng, spec));
    let (mut r, json) = with_content_type(rng, r, &view.content_type);
    let body = match rng.below(25) {
        0 => Vec::new(),
        1 => oversize(rng),
        2 | 3 if json => bad_json(rng),
        _ => payload(rng, json),
    };
    if rng.chance(2) {
        r = r.header("stream-closed", "true");
    }
    if rng.chance(15) {
        r = r.header("stream-seq", stream_seq(rng, view));
    }
    if rng.chance(30) {
        r = producer_headers(rng, view, r);
    }
    if rng.chance(8) {
        let at = match (view.next_record, rng.below(3)) {
            (Some(n), 0 | 1) => n.to_string(),
            (Some(n), _) => (n + 1).to_string(),
            (None, _) => rng.pick(&["0", "1", "x", "01"]).to_owned(),
        };
        r = r.header("stream-record-match", at);
    }
    r.body(body)
}

fn close(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 70, open);
    let (spec, view) = (&POOL[i], &state.views[i]);
    let mut r = Request::new(Kind::Close, Method::POST, stream_path(rng, spec)).header(
        "stream-closed",
        rng.pick(&["true", "true", "true", "TRUE", "maybe", "false"]),
    );
    if rng.chance(40) {
        r = producer_headers(rng, view, r);
    }
    if rng.chance(20) {
        r = r.header("content-type", same_type(rng, &view.content_type));
    }
    if rng.chance(10) {
        r = r.header("stream-seq", stream_seq(rng, view));
    }
    if rng.chance(10) {
        let json = view.json();
        r = r
            .header("content-type", same_type(rng, &view.content_type))
            .body(payload(rng, json));
    }
    r
}

fn read(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 75, View::exists);
    let (spec, view) = (&POOL[i], &state.views[i]);
    let query = match rng.below(15) {
        0 => String::new(),
        1 | 2 => "?offset=-1".into(),
        3 => "?offset=now".into(),
        4..=7 => format!("?offset={}", render(offset_near(rng, view))),
        8 => "?offset=".into(),
        9 => "?offset=abc".into(),
        10 => "?offset=-1&offset=now".into(),
        11 => "?offset=9999999999999999_9999999999999999".into(),
        12 => "?offset=%zz".into(),
        13 => "?offset=0,1&x=1".into(),
        _ => "?live=bogus&offset=-1".into(),
    };
    let mut r = Request::new(
        Kind::Read,
        Method::GET,
        format!("{}{query}", stream_path(rng, spec)),
    );
    if rng.chance(10) {
        r = r.header("if-none-match", rng.pick(&["*", "\"x\""]));
    }
    r
}

fn live_read(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 75, View::exists);
    let (spec, view) = (&POOL[i], &state.views[i]);
    let live = rng.pick(&["long-poll", "sse"]);
    let offset = match rng.below(8) {
        0 => None,
        1 => Some("-1".to_owned()),
        2 => Some("now".to_owned()),
        3 => Some("bad".to_owned()),
        4 => Some(render(view.tail + 1)),
        _ => Some(render(offset_near(rng, view))),
    };
    let mut query = format!("?live={live}");
    if let Some(o) = offset {
        let _ = write!(query, "&offset={o}");
    }
    if rng.chance(20) {
        query.push_str("&cursor=12");
    }
    Request::new(
        Kind::LiveRead,
        Method::GET,
        format!("{}{query}", stream_path(rng, spec)),
    )
}

fn fork(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 70, missing);
    let spec = &POOL[i];
    let mut siblings: Vec<usize> = (0..POOL.len())
        .filter(|&j| j != i && POOL[j].bucket == spec.bucket)
        .collect();
    if rng.chance(75) && siblings.iter().any(|&j| state.views[j].exists()) {
        siblings.retain(|&j| state.views[j].exists());
    }
    let j = if !siblings.is_empty() && rng.chance(85) {
        rng.pick(&siblings)
    } else {
        pick_stream(rng)
    };
    let source = &state.views[j];
    let from = match rng.below(14) {
        0 => rng
            .pick(&[
                "/acme",
                "/nobucket/x",
                "/__strand/usage/acme",
                "garbage",
                "/v1/stream/",
                "/v1/stream/%ff",
                "/acme/a/b/c",
            ])
            .to_owned(),
        _ => stream_path(rng, &POOL[j]),
    };
    let mut r = Request::new(Kind::Fork, Method::PUT, stream_path(rng, spec))
        .header("stream-forked-from", from);
    match rng.below(9) {
        0..=3 => {}
        4 => r = r.header("stream-fork-offset", render(rng.upto(source.tail))),
        5 => r = r.header("stream-fork-offset", render(source.tail)),
        6 => r = r.header("stream-fork-offset", render(source.tail + 1)),
        7 => r = r.header("stream-fork-offset", render(source.retained)),
        _ => r = r.header("stream-fork-offset", rng.pick(&["12", "abc", "-1"])),
    }
    if rng.chance(10) {
        r = r.header(
            "stream-fork-sub-offset",
            rng.pick(&["0", "1", "2", "01", "-1"]),
        );
    }
    if rng.chance(30) {
        let ct = if rng.chance(70) {
            same_type(rng, &source.content_type)
        } else {
            other_type(rng, &source.content_type).to_owned()
        };
        r = r.header("content-type", ct);
    }
    if rng.chance(12) {
        r = expiry_headers(rng, state.now_ms, r);
    }
    if rng.chance(8) {
        r = r.header("stream-closed", "true");
    }
    if rng.chance(5) {
        r = r.header("stream-attrs", attrs_value(rng));
    }
    if rng.chance(20) {
        let json = source.json();
        r = r.body(if rng.chance(10) {
            oversize(rng)
        } else {
            payload(rng, json)
        });
    }
    r
}

fn frames(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        out.extend_from_slice(&u32::try_from(p.len()).unwrap().to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn append_batch(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 75, open);
    let (spec, view) = (&POOL[i], &state.views[i]);
    let method = if rng.chance(95) {
        Method::POST
    } else {
        rng.pick(&[Method::GET, Method::PUT, Method::DELETE])
    };
    let r = Request::new(
        Kind::AppendBatch,
        method,
        format!("{}/append-batch", ext_path(rng, spec)),
    );
    let (mut r, json) = with_content_type(rng, r, &view.content_type);
    let body = match rng.below(14) {
        0 => Vec::new(),
        1 => vec![0, 0, 0, 9, b'x'],
        2 => vec![0, 0],
        3 => frames(&[oversize(rng)]),
        4 => frames(&[bad_json(rng)]),
        5 => frames(&[Vec::new()]),
        _ => {
            let parts: Vec<Vec<u8>> = (0..1 + rng.below(3))
                .map(|_| raw_payload(rng, json))
                .collect();
            frames(&parts)
        }
    };
    if rng.chance(25) {
        r = producer_headers(rng, view, r);
    }
    if rng.chance(30) {
        r = r.header("prefer", "return=minimal");
    }
    r.body(body)
}

fn transaction(rng: &mut Rng, state: &State) -> Request {
    // The group with no pool stream only now and then.
    let (bucket, key, members) = if rng.chance(5) {
        TX_GROUPS[3]
    } else {
        TX_GROUPS[rng.below(3)]
    };
    let method = if rng.chance(95) {
        Method::POST
    } else {
        rng.pick(&[Method::GET, Method::PUT])
    };
    let r = Request::new(
        Kind::Transaction,
        method,
        format!("/{bucket}/{key}/$transaction"),
    );
    let body = match rng.below(16) {
        0 => b"{".to_vec(),
        1 => b"[]".to_vec(),
        2 => b"[{\"stream\":\"x\"}]".to_vec(),
        3 => oversize(rng),
        4 => b"[{\"stream\":\"x\",\"content_type\":\"text/plain\",\"body\":\"a\",\"extra\":1}]"
            .to_vec(),
        _ => {
            let items: Vec<serde_json::Value> = (0..1 + rng.below(3))
                .map(|_| transaction_item(rng, state, members))
                .collect();
            serde_json::to_vec(&items).unwrap()
        }
    };
    r.header("content-type", "application/json").body(body)
}

fn transaction_item(rng: &mut Rng, state: &State, members: &[usize]) -> serde_json::Value {
    let mut members = members.to_vec();
    if rng.chance(80) && members.iter().any(|&m| open(&state.views[m])) {
        members.retain(|&m| open(&state.views[m]));
    }
    let member = if members.is_empty() || rng.chance(5) {
        None
    } else {
        Some(rng.pick(&members))
    };
    let (name, view) = match member {
        Some(m) => (POOL[m].name, state.views[m].clone()),
        None => ("zz", View::default()),
    };
    let content_type = match rng.below(10) {
        0 => other_type(rng, &view.content_type).to_owned(),
        1 => String::new(),
        _ => same_type(rng, &view.content_type),
    };
    let data = raw_payload(rng, is_json(&content_type));
    let mut item = serde_json::json!({ "stream": name, "content_type": content_type });
    let text = String::from_utf8_lossy(&data).into_owned();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&data);
    match rng.below(40) {
        0..=29 => item["body"] = text.into(),
        30..=36 => item["body_base64"] = b64.into(),
        37 => item["body_base64"] = "!!not base64".into(),
        38 => {
            item["body"] = text.into();
            item["body_base64"] = b64.into();
        }
        _ => {}
    }
    if rng.chance(10) {
        item["stream_seq"] = stream_seq(rng, &view).into();
    }
    if rng.chance(15) {
        let (id, epoch, seq) = producer_tuple(rng, &view);
        item["producer"] = serde_json::json!({
            "producer_id": id,
            "producer_epoch": epoch,
            "producer_seq": seq,
        });
    }
    item
}

/// An offset for a path: decimal or rendered, near the stream's places, or
/// malformed.
fn path_offset(rng: &mut Rng, view: &View) -> String {
    let at = match (view.snapshot.as_ref(), rng.below(9)) {
        (_, 0) => return rng.pick(&["x", "-1", "99999999999999999999999"]).to_owned(),
        (Some((offset, _)), 1 | 2) => *offset,
        _ => offset_near(rng, view),
    };
    if rng.chance(50) {
        at.to_string()
    } else {
        render(at)
    }
}

fn snapshot_route(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 75, View::exists);
    let (spec, view) = (&POOL[i], &state.views[i]);
    let base = format!("{}/snapshot", ext_path(rng, spec));
    match rng.below(20) {
        0..=9 => {
            let at = if rng.chance(50) {
                view.tail.to_string()
            } else {
                path_offset(rng, view)
            };
            let mut r = Request::new(Kind::Snapshot, Method::PUT, format!("{base}/{at}"));
            if rng.chance(50) {
                r = r.header(
                    "content-type",
                    rng.pick(&["application/x-state", "text/plain"]),
                );
            }
            match (view.snapshot.as_ref(), rng.below(10)) {
                (Some((_, digest)), 0..=5) => r = r.header("stream-snapshot-match", digest),
                (_, 6) => r = r.header("stream-snapshot-match", "00"),
                _ => {}
            }
            let body = if rng.chance(5) {
                oversize(rng)
            } else {
                payload(rng, false)
            };
            r.body(body)
        }
        10..=13 => Request::new(Kind::Snapshot, Method::GET, base),
        14 | 15 => Request::new(
            Kind::Snapshot,
            Method::GET,
            format!("{base}/{}", path_offset(rng, view)),
        ),
        16 | 17 => Request::new(
            Kind::Snapshot,
            Method::DELETE,
            format!("{base}/{}", path_offset(rng, view)),
        ),
        18 => Request::new(Kind::Snapshot, Method::POST, base).body("x"),
        _ => Request::new(Kind::Snapshot, Method::PUT, base).body("x"),
    }
}

fn retention(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 75, |v| v.snapshot.is_some());
    let (spec, view) = (&POOL[i], &state.views[i]);
    let method = if rng.chance(90) {
        Method::PUT
    } else {
        rng.pick(&[Method::GET, Method::POST, Method::DELETE])
    };
    let at = match (&view.snapshot, rng.below(10)) {
        (Some((offset, _)), 0..=5) => offset.to_string(),
        _ => path_offset(rng, view),
    };
    let path = format!("{}/retention/{at}", ext_path(rng, spec));
    Request::new(Kind::Retention, method, path)
}

fn attrs(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 70, View::exists);
    let path = format!("{}/attrs", ext_path(rng, &POOL[i]));
    match rng.below(20) {
        0..=7 => Request::new(Kind::Attrs, Method::GET, path),
        8..=18 => {
            let body: Vec<u8> = match rng.below(10) {
                0 => Vec::new(),
                1 => b"  ".to_vec(),
                2 => oversize(rng),
                _ => attrs_value(rng).as_bytes().to_vec(),
            };
            Request::new(Kind::Attrs, Method::PUT, path).body(body)
        }
        _ => Request::new(Kind::Attrs, rng.pick(&[Method::POST, Method::DELETE]), path),
    }
}

fn bootstrap(rng: &mut Rng, state: &State) -> Request {
    let i = choose(rng, state, 70, View::exists);
    let method = if rng.chance(90) {
        Method::GET
    } else {
        Method::POST
    };
    Request::new(
        Kind::Bootstrap,
        method,
        format!("{}/bootstrap", ext_path(rng, &POOL[i])),
    )
}

fn bucket(rng: &mut Rng) -> Request {
    let name = rng.pick(&[
        "default",
        "acme",
        "beta",
        "gamma",
        "Bad.Bucket",
        "%ff",
        "UPPER",
    ]);
    let method = rng.pick(&[
        Method::PUT,
        Method::PUT,
        Method::GET,
        Method::HEAD,
        Method::DELETE,
        Method::POST,
    ]);
    Request::new(Kind::Bucket, method, format!("/{name}"))
}

fn admin(rng: &mut Rng) -> Request {
    let bucket = rng.pick(&["acme", "beta", "default", "gamma", "zzzz", "Bad.Bucket"]);
    match rng.below(22) {
        0..=3 => {
            let body = rng.pick(&[
                "{\"max_streams\":1000}",
                "{\"max_retained_bytes\":1000000}",
                "{}",
                "{\"max_streams\":4,\"max_retained_bytes\":4096}",
                "{",
                "{\"max_streams\":-1}",
                "{\"other\":1}",
                "[]",
            ]);
            Request::new(
                Kind::Admin,
                Method::PUT,
                format!("/__strand/quota/{bucket}"),
            )
            .body(body)
        }
        4 | 5 => Request::new(
            Kind::Admin,
            Method::GET,
            format!("/__strand/usage/{bucket}"),
        ),
        6 | 7 => {
            // Pool buckets are purged only on the client listener (403;
            // see `generate`); `default` is refused everywhere (409).
            let target = rng.pick(&["zzzz", "gamma", "Bad.Bucket", "default", "acme", "beta"]);
            Request::new(
                Kind::Admin,
                Method::DELETE,
                format!("/__strand/purge/{target}"),
            )
        }
        8 => Request::new(Kind::Admin, Method::GET, "/__strand/cold"),
        9 | 10 => {
            let spec = &POOL[pick_stream(rng)];
            Request::new(
                Kind::Admin,
                rng.pick(&[Method::GET, Method::GET, Method::POST]),
                format!("/__strand/integrity{}", spec.canonical()),
            )
        }
        11 => Request::new(
            Kind::Admin,
            rng.pick(&[Method::GET, Method::HEAD, Method::POST]),
            "/__strand/health",
        ),
        12 => Request::new(
            Kind::Admin,
            Method::POST,
            rng.pick(&[
                "/__strand/raft/0/append",
                "/__strand/raft/9/vote",
                "/__strand/raft/x/append",
                "/__strand/raft/batch",
                "/__strand/raft/0",
            ]),
        )
        .body(vec![0x93, 0x01, 0x02]),
        13 => Request::new(Kind::Admin, Method::GET, "/__strand/integrity/acme"),
        _ => {
            let path = rng.pick(&[
                "/__strand/nothing",
                "/__strand/quota",
                "/__strand/purge",
                "/__strand/a/b/c",
                "/__strand/usage/acme/x",
                "/__strand/quota/acme",
                "/__strand/purge/zzzz",
                "/__strand/usage/acme",
            ]);
            let method = rng.pick(&[Method::GET, Method::POST, Method::PATCH, Method::DELETE]);
            Request::new(Kind::Admin, method, path).body("{}")
        }
    }
}

fn junk(rng: &mut Rng) -> Request {
    if rng.chance(40) {
        let spec = &POOL[pick_stream(rng)];
        let method = rng.pick(&[
            Method::PATCH,
            Method::TRACE,
            Method::CONNECT,
            Method::from_bytes(b"BREW").unwrap(),
        ]);
        return Request::new(Kind::Junk, method, stream_path(rng, spec)).body("x");
    }
    let path = rng.pick(&[
        "/",
        "//",
        "/v1/stream/",
        "/v1/stream/%ff",
        "/v1/stream/%2e%2e",
        "/v1/stream/a%00b",
        "/v1/stream/a/b/c",
        "/acme/a/b/c",
        "/acme/%zz",
        "/v1/stream/streams",
        "/acme/k/x/attrs/extra",
        "/acme/s/retention",
        "/acme/$transaction",
        "/Bad.Bucket/s",
    ]);
    let method = rng.pick(&[Method::GET, Method::PUT, Method::POST, Method::DELETE]);
    Request::new(Kind::Junk, method, path)
        .header("content-type", "text/plain")
        .body("x")
}

fn options(rng: &mut Rng) -> Request {
    let spec = &POOL[pick_stream(rng)];
    Request::new(Kind::Options, Method::OPTIONS, stream_path(rng, spec))
        .header("origin", "http://example.test")
        .header("access-control-request-method", "POST")
}

/// Breaks a good request in a way of its own: a header twice, or a header
/// that is not text.
fn spoil(rng: &mut Rng, mut request: Request) -> Request {
    if request.headers.is_empty() {
        return request;
    }
    let at = rng.below(request.headers.len());
    if rng.chance(60) {
        let twice = request.headers[at].clone();
        request.headers.push(twice);
    } else {
        request.headers[at].1 = b"\xfe\xff".to_vec();
    }
    request
}

fn generate(rng: &mut Rng, state: &State) -> Request {
    let total: usize = KINDS.iter().map(|(_, w)| w).sum();
    let mut roll = rng.below(total);
    let mut kind = Kind::Append;
    for (k, w) in KINDS {
        if roll < w {
            kind = k;
            break;
        }
        roll -= w;
    }
    let request = match kind {
        Kind::Create => create(rng, state),
        Kind::Append => append(rng, state),
        Kind::Close => close(rng, state),
        Kind::Read => read(rng, state),
        Kind::LiveRead => live_read(rng, state),
        Kind::Head => {
            let spec = &POOL[pick_stream(rng)];
            Request::new(Kind::Head, Method::HEAD, stream_path(rng, spec))
        }
        Kind::Delete => {
            // Closed streams mostly: they take no more appends.
            let i = if rng.chance(50) {
                choose(rng, state, 100, |v| v.closed)
            } else {
                choose(rng, state, 70, View::exists)
            };
            let spec = &POOL[i];
            Request::new(Kind::Delete, Method::DELETE, stream_path(rng, spec))
        }
        Kind::Fork => fork(rng, state),
        Kind::AppendBatch => append_batch(rng, state),
        Kind::Transaction => transaction(rng, state),
        Kind::Snapshot => snapshot_route(rng, state),
        Kind::Retention => retention(rng, state),
        Kind::Attrs => attrs(rng, state),
        Kind::Bootstrap => bootstrap(rng, state),
        Kind::Bucket => bucket(rng),
        Kind::Admin => {
            let mut request = admin(rng);
            // Half of them go to the admin listener, where they are served;
            // a purge there of a pool bucket would erase it for good, so
            // those stay on the client listener (403).
            let pool_purge =
                ["/__strand/purge/acme", "/__strand/purge/beta"].contains(&request.path.as_str());
            request.admin_plane = !pool_purge && rng.chance(50);
            request
        }
        Kind::Junk => junk(rng),
        Kind::Options => options(rng),
    };
    if rng.chance(4) {
        spoil(rng, request)
    } else {
        request
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Err(_) => default,
        Ok(text) => {
            let text = text.trim();
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
                None => text.replace('_', "").parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{name}={text:?} is not a number"))
        }
    }
}

/// Per kind: how many answers of each status.
type Tally = BTreeMap<Kind, BTreeMap<u16, u64>>;

fn tally_table(tally: &Tally) -> String {
    let mut out = String::new();
    for (kind, statuses) in tally {
        let sent: u64 = statuses.values().sum();
        let failed: u64 = statuses.range(400..).map(|(_, n)| n).sum();
        let each: Vec<String> = statuses.iter().map(|(s, n)| format!("{s}×{n}")).collect();
        let _ = writeln!(
            out,
            "  {kind:?}: {sent} sent, {failed} answered >= 400 ({})",
            each.join(" ")
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_requests_change_nothing() {
    let requests = env_u64("STRAND_INVARIANT_REQUESTS", DEFAULT_REQUESTS);
    let seed = env_u64("STRAND_INVARIANT_SEED", DEFAULT_SEED);
    let started = Instant::now();
    let s = TestServer::start_with(|c| {
        c.long_poll_timeout_ms = 10;
        c.sse_max_duration_ms = 10;
        c.max_body_bytes = MAX_BODY;
        c.max_read_bytes = MAX_READ;
    })
    .await;
    let mut conns = Conns::new(s.addr);
    let mut rng = Rng::new(seed);
    let mut state = take_state(&s, &mut conns).await;
    let mut tally = Tally::new();
    let mut failed = 0u64;
    let mut recent: Vec<String> = Vec::new();
    for index in 0..requests {
        if rng.chance(1) {
            // Time moves on: expiry is a change like any other.
            let step = rng.pick(&[1_000u64, 2_000, 5_000, 20_000, 70_000]);
            s.clock.advance(step);
            state = take_state(&s, &mut conns).await;
            recent.push(format!("clock +{step} ms"));
        } else if rng.chance(10) {
            // A little time passes, never up to an expiry, so that a
            // failed request that renews a TTL shows in the touch time.
            let (earliest, soft) = state.earliest_expiry();
            let room = earliest.map_or(u64::MAX, |e| e.saturating_sub(state.now_ms + 1));
            let step = rng.pick(&[500u64, 1_500, 3_000]).min(room);
            if !soft && step > 0 {
                s.clock.advance(step);
                recent.push(format!("clock +{step} ms, no expiry"));
            }
        }
        let request = generate(&mut rng, &state);
        let addr = if request.admin_plane {
            s.admin_addr
        } else {
            s.addr
        };
        let response = match send_once(addr, &request).await {
            Ok(r) => r,
            Err(e) => panic!(
                "seed {seed:#x}, request {index}: no answer ({e})\n  {request}\nrecent:\n  {}",
                recent.join("\n  ")
            ),
        };
        *tally
            .entry(request.kind)
            .or_default()
            .entry(response.status)
            .or_default() += 1;
        let answer = format!(
            "{} {}",
            response.status,
            clip(&response.body.escape_ascii().to_string(), 400)
        );
        let replay = format!(
            "replay: STRAND_INVARIANT_SEED={seed:#x} STRAND_INVARIANT_REQUESTS={} cargo test -p strand-server --test server invariant",
            index + 1
        );
        assert!(
            response.status < 500,
            "seed {seed:#x}, request {index}: a server error\n  {request}\nanswer: {answer}\n{replay}\nrecent:\n  {}",
            recent.join("\n  ")
        );
        let after = take_state(&s, &mut conns).await;
        if response.status >= 400 {
            failed += 1;
            let changed = differences(&state.before(), &after.after(), |key, value| {
                tolerated(&request, after.now_ms, key, value)
            });
            assert!(
                changed.is_empty(),
                "seed {seed:#x}, request {index}: answered {} and changed the state\n  {request}\nanswer: {answer}\nchanged:\n  {}\n{replay}\nrecent:\n  {}",
                response.status,
                changed.join("\n  "),
                recent.join("\n  ")
            );
        }
        let line = request
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        recent.push(format!("#{index} {line} -> {}", response.status));
        if recent.len() > 12 {
            recent.drain(..recent.len() - 12);
        }
        state = after;
    }
    println!(
        "invariant: seed {seed:#x}, {requests} requests, {failed} answered >= 400, in {:.1} s\n{}",
        started.elapsed().as_secs_f64(),
        tally_table(&tally)
    );
    s.stop().await;
}
