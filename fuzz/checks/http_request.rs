//! Raw HTTP/1.1 requests through strand-server: first its pure parsers on
//! each request's parts, then the whole sequence through the real service
//! (`strand_server::routes::serve`, what the server's connections call) on
//! an in-memory engine, end to end without sockets.
//!
//! Input layout: requests separated by the line `~~~` ([`SEPARATOR`]), at
//! most [`MAX_REQUESTS`]. A request's head is parsed with httparse, as
//! hyper parses it (LF line ends are accepted; a head without its blank
//! line is all head); a method, target, header name or value hyper would
//! refuse with 400 skips the request for the service. The bytes after the
//! head, up to the separator, are the body: `Content-Length` is set to
//! their length and `Transfer-Encoding` dropped, so bodies need no framing.
//!
//! Pure checks, on every request (never a panic):
//!
//! * query (`ReadQuery::parse`): what parses has a non-empty offset and
//!   parses again, equal, from its percent-encoded form;
//! * offsets (the query's, every header value): `parse` and
//!   `parse_position` agree, `render` of a position is 33 characters,
//!   parses back, is the text itself when that was 33 characters, and
//!   sorts as the numbers do;
//! * header values: `parse_decimal` accepts exactly the canonical decimal
//!   `u64`s; an `parse_rfc3339_ms` time before the year 10000 renders
//!   (`render_rfc3339_ms`) and parses back to itself; `next_cursor` grows
//!   past an echoed cursor; `producer` gives all three headers or none,
//!   within 2^53 - 1; `DataEncoding::for_content_type` and `media_type`
//!   take any text;
//! * path: `segments` refuses `.`, `..` and NUL and round-trips through
//!   percent-encoding; `stream_for_path` (of the path and of every header
//!   value) and `extensions::classify` never panic;
//! * body: `encode_body` accepts only JSON, stores one compact value per
//!   line, and `render_array` of its output (whole, or cut into slices
//!   anywhere) is the JSON array of the body's values (the body itself if
//!   it is an array); `whole_values_len` finds the whole output;
//!   `split_frames` output re-frames to the body; `push_event` gives one
//!   event whose `data:` lines rejoin to the payload (CR, LF and CRLF read
//!   as LF).
//!
//! The service: a fresh engine per input (two groups, a manual clock that
//! moves 1 s before each request) on a current-thread runtime built once
//! per thread with its time paused, so timers fire as soon as everything
//! waits and long-polls cost nothing. Before the input's requests, setup
//! requests create streams the input may use (`/v1/stream/a` bytes,
//! `/v1/stream/j` JSON, `/bkt1/s` text) and a sentinel bucket. A live read
//! (`live=` in a GET's query) runs as a task of its own, so later requests
//! can wake it, and is read for at most [`LIVE_FRAMES`] body frames after
//! the last request; every other request is answered before the next.
//! Checks: no response is a 5xx other than 503; a success's
//! `Stream-Next-Offset` is a canonical offset; a 200 read of a JSON stream
//! from the start, the tail or an offset the server handed out for it
//! ([`Boundaries`]) is a JSON array; a 200 read of another stream from a
//! handed-out offset holds exactly next offset minus that offset bytes;
//! SSE control events are JSON with a canonical offset and base64 data
//! events decode; afterwards every group still answers, and, unless a
//! request named the sentinel bucket, its streams read back exactly as
//! written.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, header};
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use serde::de::IgnoredAny;
use serde_json::Value;
use strand::BucketStreamId;
use strand_engine::{Engine, ManualClock, ReadFrom};
use strand_server::headers as h;
use strand_server::offsets::{self, OffsetError};
use strand_server::query::ReadQuery;
use strand_server::routes::{self, extensions};
use strand_server::{AppState, Config, json_mode, sse, time};

/// The line between two requests.
pub(crate) const SEPARATOR: &[u8] = b"\n~~~\n";
/// Requests of one input beyond this many are ignored.
pub(crate) const MAX_REQUESTS: usize = 16;
/// Body frames read from a live response (SSE sends one per event batch).
pub(crate) const LIVE_FRAMES: usize = 4;
/// Headers per request (hyper allows 100).
const MAX_HEADERS: usize = 32;
/// The engine clock's start: 2026-01-01T00:00:00Z.
const START_MS: u64 = 1_767_225_600_000;
/// The clock moves this far before each request.
const STEP_MS: u64 = 1_000;
/// 10000-01-01T00:00:00Z: `render_rfc3339_ms` writes four-digit years
/// only below it.
const YEAR_10000_MS: u64 = 253_402_300_800_000;
/// The bucket of the sentinel streams.
const SENTINEL: &str = "sentinel";
const SENTINEL_BYTES: &[u8] = b"sentinel bytes \x00\xff";
const SENTINEL_JSON: &str = r#"[1,{"a":"b c"},"\n"]"#;

/// Requests run before each input's: streams for it to use, and the
/// sentinels. Each must succeed (2xx).
const SETUP: &[&str] = &[
    "PUT /v1/stream/a HTTP/1.1\nContent-Type: application/octet-stream\n\nhello",
    "PUT /v1/stream/j HTTP/1.1\nContent-Type: application/json\n\n[1,{\"x\":2}]",
    "PUT /bkt1 HTTP/1.1\n\n",
    "PUT /bkt1/s HTTP/1.1\nContent-Type: text/plain\n\nx",
    "PUT /sentinel HTTP/1.1\n\n",
    "PUT /sentinel/j HTTP/1.1\nContent-Type: application/json\n\n[1, {\"a\": \"b c\"}, \"\\n\"]",
];

/// One fuzz input: the pure checks on each request, then the sequence
/// through the service.
pub(crate) fn check(data: &[u8]) {
    let mut requests = Vec::new();
    for piece in pieces(data).take(MAX_REQUESTS) {
        let Some(request) = parse_request(piece) else {
            // hyper answers 400 itself: only the body parsers see it.
            pure_body(piece);
            continue;
        };
        pure_request(&request);
        requests.push(request);
    }
    RUNTIME.with(|runtime| runtime.block_on(service(requests)));
}

/// The input cut at each [`SEPARATOR`].
fn pieces(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let text = rest?;
        match text.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
            Some(at) => {
                rest = Some(&text[at + SEPARATOR.len()..]);
                Some(&text[..at])
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

/// One request as the service gets it.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

/// A piece as hyper would hand it over, or `None` where hyper answers 400
/// itself (or has no request at all).
fn parse_request(piece: &[u8]) -> Option<Parsed> {
    let (method, uri, mut headers, len) = parse_head(piece)?;
    let body = &piece[len..];
    if !body.is_empty() {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    Some(Parsed {
        method,
        uri,
        headers,
        body: Bytes::copy_from_slice(body),
    })
}

/// A request head: method, target, fields (without `Content-Length` and
/// `Transfer-Encoding`) and its length; `None` for one hyper refuses. A
/// piece without the blank line is all head. The HTTP version is not
/// kept: the service never looks at it.
fn parse_head(bytes: &[u8]) -> Option<(Method, Uri, HeaderMap, usize)> {
    const END: &[u8] = b"\r\n\r\n";
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut head = httparse::Request::new(&mut slots);
    let httparse::Status::Complete(len) = head.parse(bytes).ok()? else {
        if bytes.ends_with(END) {
            return None;
        }
        let mut whole = bytes.to_vec();
        whole.extend_from_slice(END);
        let (method, uri, headers, _) = parse_head(&whole)?;
        return Some((method, uri, headers, bytes.len()));
    };
    let method = Method::from_bytes(head.method?.as_bytes()).ok()?;
    let uri = Uri::try_from(head.path?).ok()?;
    let mut headers = HeaderMap::new();
    for field in head.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(field.value).ok()?;
        if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
            headers.append(name, value);
        }
    }
    Some((method, uri, headers, len))
}

// ---------------------------------------------------------------------
// The pure parsers.

fn pure_request(request: &Parsed) {
    let path = request.uri.path();
    check_query(request.uri.query());
    check_path(path);
    for value in request.headers.values() {
        let lossy = String::from_utf8_lossy(value.as_bytes());
        check_media_type(&lossy);
        if let Ok(text) = value.to_str() {
            check_header_text(text);
        }
    }
    check_producer(&request.headers);
    pure_body(&request.body);
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn check_query(raw: Option<&str>) {
    let Ok(query) = ReadQuery::parse(raw) else {
        return;
    };
    let mut parts = Vec::new();
    for (key, value) in [
        ("offset", &query.offset),
        ("live", &query.live),
        ("cursor", &query.cursor),
    ] {
        if let Some(value) = value {
            parts.push(format!("{key}={}", percent_encode(value)));
        }
    }
    let again = ReadQuery::parse(Some(&parts.join("&")));
    assert_eq!(again.as_ref().ok(), Some(&query), "{raw:?} re-encoded");
    if let Some(offset) = &query.offset {
        assert!(!offset.is_empty(), "{raw:?}: an empty offset parsed");
        check_offset(offset);
    }
    if let Some(cursor) = &query.cursor {
        check_cursor(cursor);
    }
}

fn check_offset(text: &str) {
    match offsets::parse(text) {
        Ok(ReadFrom::Start) => assert_eq!(text, "-1"),
        Ok(ReadFrom::Tail) => assert_eq!(text, "now"),
        Ok(ReadFrom::Offset(position)) => {
            assert_eq!(offsets::parse_position(text), Ok(position), "{text:?}");
            let rendered = check_render(position);
            if text.len() == rendered.len() {
                assert_eq!(rendered, text, "a 33-character offset is canonical");
            }
        }
        Ok(ReadFrom::Within(_)) => panic!("{text:?}: parsing never answers Within"),
        Err(OffsetError::TooLarge) => {
            let (hi, lo) = text.split_once('_').unwrap_or_default();
            assert!(
                [hi, lo]
                    .iter()
                    .all(|d| (1..=16).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit())),
                "{text:?} is too large but not well formed"
            );
        }
        Err(OffsetError::Malformed) => {}
    }
}

/// `render(position)` is canonical and parses back; returns it.
fn check_render(position: u64) -> String {
    let rendered = offsets::render(position);
    assert_eq!(rendered.len(), 33, "{rendered:?}");
    assert_eq!(
        offsets::parse(&rendered),
        Ok(ReadFrom::Offset(position)),
        "{rendered:?}"
    );
    rendered
}

fn check_cursor(text: &str) {
    let next = time::next_cursor(START_MS, Some(text));
    if let Ok(echoed) = text.parse::<u64>()
        && echoed < u64::MAX - 256
    {
        assert!(next > echoed, "cursor {echoed} answered with {next}");
    }
    let control = sse::control_json(&offsets::render(next), Some(&next.to_string()), true, false);
    let value: Value = serde_json::from_str(&control).expect("a control event is JSON");
    assert_eq!(
        value["streamNextOffset"].as_str(),
        Some(offsets::render(next).as_str())
    );
}

fn check_media_type(text: &str) {
    let _ = sse::DataEncoding::for_content_type(text);
    let _ = strand_engine::media_type(text);
}

/// Every header value through every value parser.
fn check_header_text(text: &str) {
    let canonical = text.parse::<u64>().ok().filter(|n| n.to_string() == text);
    assert_eq!(h::parse_decimal(text), canonical, "{text:?}");
    if let Some(n) = canonical {
        check_render(n);
    }
    if let Some(ms) = h::parse_rfc3339_ms(text)
        && ms < YEAR_10000_MS
    {
        let rendered = time::render_rfc3339_ms(ms);
        assert_eq!(
            h::parse_rfc3339_ms(&rendered),
            Some(ms),
            "{text:?} → {rendered:?}"
        );
    }
    check_offset(text.trim());
    check_cursor(text);
    if let Ok(id) = routes::stream_for_path(text, "default") {
        assert!(
            !id.id.stream_id.is_empty(),
            "{text:?} names an empty stream"
        );
    }
}

fn check_producer(headers: &HeaderMap) {
    let given = [&h::PRODUCER_ID, &h::PRODUCER_EPOCH, &h::PRODUCER_SEQ]
        .map(|name| headers.get(name).and_then(|v| v.to_str().ok()));
    match h::producer(headers) {
        Ok(None) => assert_eq!(given, [None, None, None]),
        Ok(Some(producer)) => {
            assert!(!producer.producer_id.trim().is_empty());
            assert_eq!(given[0], Some(producer.producer_id.as_str()));
            assert!(producer.producer_epoch <= h::MAX_SAFE_INTEGER);
            assert!(producer.producer_seq <= h::MAX_SAFE_INTEGER);
            assert_eq!(given[1].map(str::parse), Some(Ok(producer.producer_epoch)));
            assert_eq!(given[2].map(str::parse), Some(Ok(producer.producer_seq)));
        }
        Err(_) => {}
    }
}

fn check_path(path: &str) {
    if let Ok(names) = routes::segments(path) {
        for name in &names {
            assert!(
                !name.is_empty() && name != "." && name != ".." && !name.contains('\0'),
                "{path:?} gave segment {name:?}"
            );
        }
        let again: String = names
            .iter()
            .map(|name| format!("/{}", percent_encode(name)))
            .collect();
        assert_eq!(
            routes::segments(&again).ok().as_ref(),
            Some(&names),
            "{path:?} re-encoded as {again:?}"
        );
        if let Some((bucket, rest)) = names.split_first() {
            let _ = extensions::classify(bucket, rest);
        }
    }
    let _ = routes::stream_for_path(path, "default");
}

/// The body through the JSON mode, the batch framing and SSE framing.
fn pure_body(body: &[u8]) {
    // A stride for cutting byte runs into slices, chosen by the body.
    let stride = 1 + usize::from(body.first().copied().unwrap_or(0) % 13);
    check_json(body, stride);
    let raw = cut(body, stride);
    let rendered = json_mode::render_array(&raw);
    assert!(rendered.starts_with(b"[") && rendered.ends_with(b"]"));
    let whole = json_mode::whole_values_len(&raw);
    assert!(whole <= body.len());
    assert!(whole == 0 || body[whole - 1] == b'\n', "{whole}");
    assert!(!body[whole..].contains(&b'\n'));

    let bytes = Bytes::copy_from_slice(body);
    if let Ok(frames) = extensions::split_frames(&bytes) {
        let mut again = Vec::with_capacity(body.len());
        for frame in frames {
            let len = u32::try_from(frame.len()).expect("a frame fits its length");
            again.extend_from_slice(&len.to_be_bytes());
            again.extend_from_slice(&frame);
        }
        assert_eq!(again, body, "append-batch frames re-framed");
    }

    check_event(body);
    if body.len() >= 16 {
        let a = u64::from_le_bytes(body[..8].try_into().unwrap_or_default());
        let b = u64::from_le_bytes(body[8..16].try_into().unwrap_or_default());
        let (ra, rb) = (check_render(a), check_render(b));
        assert_eq!(a.cmp(&b), ra.cmp(&rb), "{ra} vs {rb}");
        if a < YEAR_10000_MS {
            let text = time::render_rfc3339_ms(a);
            assert_eq!(h::parse_rfc3339_ms(&text), Some(a), "{text:?}");
        }
    }
}

/// `bytes` in slices of `stride` bytes.
fn cut(bytes: &[u8], stride: usize) -> Vec<Bytes> {
    bytes.chunks(stride).map(Bytes::copy_from_slice).collect()
}

/// Whether `bytes` is one JSON text; a nesting deeper than serde_json's
/// recursion limit counts as JSON.
fn is_json(bytes: &[u8]) -> bool {
    match serde_json::from_slice::<IgnoredAny>(bytes) {
        Ok(_) => true,
        Err(e) => e.to_string().contains("recursion limit"),
    }
}

fn check_json(body: &[u8], stride: usize) {
    for allow_empty in [false, true] {
        let Ok(stored) = json_mode::encode_body(body, allow_empty) else {
            continue;
        };
        assert!(
            is_json(body),
            "encode_body took {body:?}, which is not JSON"
        );
        assert!(stored.is_empty() || stored.ends_with(b"\n"));
        let lines: Vec<&[u8]> = match stored.split_last() {
            Some((_, init)) => init.split(|&b| b == b'\n').collect(),
            None => Vec::new(),
        };
        for line in &lines {
            assert!(is_json(line), "stored line {line:?} is not one JSON value");
            assert!(!line.is_empty());
        }
        let whole = json_mode::render_array(std::slice::from_ref(&stored));
        assert!(is_json(&whole), "render_array gave {whole:?}");
        assert_eq!(json_mode::render_array(&cut(&stored, stride)), whole);
        assert_eq!(
            json_mode::whole_values_len(&cut(&stored, stride)),
            stored.len()
        );
        // The same values, when serde_json can hold them (it refuses
        // numbers out of f64's range, which encode_body keeps as text).
        if let (Ok(value), Ok(rendered)) = (
            serde_json::from_slice::<Value>(body),
            serde_json::from_slice::<Value>(&whole),
        ) {
            let expected = match value {
                Value::Array(items) => items,
                other => vec![other],
            };
            assert!(allow_empty || !expected.is_empty());
            assert_eq!(lines.len(), expected.len());
            assert_eq!(rendered, Value::Array(expected));
        }
    }
}

/// `push_event` frames any payload as one event.
fn check_event(payload: &[u8]) {
    let mut out = BytesMut::new();
    sse::push_event(&mut out, "data", payload);
    let text = out
        .strip_prefix(b"event: data\n".as_slice())
        .expect("the event line");
    let text = text
        .strip_suffix(b"\n\n".as_slice())
        .expect("a blank line ends it");
    let mut data = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_prefix(b"data:".as_slice()).expect("a data line");
        assert!(!line.contains(&b'\r'));
        if i > 0 {
            data.push(b'\n');
        }
        data.extend_from_slice(line);
    }
    let mut expected = Vec::with_capacity(payload.len());
    let mut i = 0;
    while i < payload.len() {
        match payload[i] {
            b'\r' if payload.get(i + 1) == Some(&b'\n') => {
                expected.push(b'\n');
                i += 2;
            }
            b'\r' => {
                expected.push(b'\n');
                i += 1;
            }
            b => {
                expected.push(b);
                i += 1;
            }
        }
    }
    assert_eq!(data, expected);
}

// ---------------------------------------------------------------------
// The service.

thread_local! {
    /// One runtime per thread for every input: current-thread, time paused
    /// (it jumps to the next timer whenever every task waits).
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    /// The setup requests, parsed once.
    static SETUP_REQUESTS: Vec<Parsed> = SETUP
        .iter()
        .map(|raw| parse_request(raw.as_bytes()).expect("a setup request parses"))
        .collect();
}

/// The server's configuration: small bodies and pages, few live readers.
fn config() -> Arc<Config> {
    static CONFIG: OnceLock<Arc<Config>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let mut config = Config::for_listen("127.0.0.1:0".parse().expect("an address"));
        config.groups = 2;
        config.group_queue_depth = 64;
        config.max_body_bytes = 1024;
        config.max_read_bytes = 256;
        config.max_live_readers = 4;
        config.long_poll_timeout_ms = 1_000;
        Arc::new(config)
    });
    Arc::clone(config)
}

/// A response, with at most the body frames asked for.
struct Outcome {
    status: StatusCode,
    headers: HeaderMap,
    frames: Vec<Bytes>,
    complete: bool,
}

impl Outcome {
    fn body(&self) -> Vec<u8> {
        self.frames.concat()
    }
}

fn is_live(request: &Parsed) -> bool {
    request.method == Method::GET
        && ReadQuery::parse(request.uri.query()).is_ok_and(|q| q.live.is_some())
}

/// Whether a request may reach the sentinel bucket: its path or a header
/// names it.
fn names_sentinel(request: &Parsed) -> bool {
    let in_path = routes::segments(request.uri.path())
        .is_ok_and(|names| names.iter().any(|n| n.contains(SENTINEL)));
    in_path
        || request.headers.values().any(|v| {
            String::from_utf8_lossy(v.as_bytes()).contains(SENTINEL)
                || v.to_str().is_ok_and(|t| {
                    routes::stream_for_path(t, "default")
                        .is_ok_and(|named| named.id.bucket_id == SENTINEL)
                })
        })
}

async fn exchange(mut state: AppState, request: Parsed, max_frames: usize) -> Outcome {
    // The operator routes go to the admin listener's state, as an operator
    // sends them; everything else to the client listener's.
    let path = request.uri.path();
    if path.starts_with("/__strand/")
        && ![
            "/__strand/raft/",
            "/__strand/integrity/",
            "/__strand/health",
        ]
        .iter()
        .any(|p| path.starts_with(p))
    {
        state.plane = strand_server::state::Plane::Admin;
    }
    let mut builder = Request::builder().method(request.method).uri(request.uri);
    if let Some(headers) = builder.headers_mut() {
        *headers = request.headers;
    }
    let request = builder
        .body(Body::from(request.body))
        .expect("a request from valid parts");
    let response = routes::serve(state, request).await;
    let (parts, mut body) = response.into_parts();
    let mut frames = Vec::new();
    let mut complete = false;
    while frames.len() < max_frames {
        match body.frame().await {
            None => {
                complete = true;
                break;
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    frames.push(data);
                }
            }
            Some(Err(e)) => panic!("the response body failed: {e}"),
        }
    }
    Outcome {
        status: parts.status,
        headers: parts.headers,
        frames,
        complete,
    }
}

async fn service(requests: Vec<Parsed>) {
    let config = config();
    let clock = ManualClock::new(START_MS);
    let engine = Engine::start_with_clock(
        strand_server::engine_config(&config),
        Arc::new(clock.clone()),
    );
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let state = AppState::new(strand_server::state::Shared {
        raft: None,
        metrics: std::sync::Arc::new(strand_server::metrics::Metrics::new()),
        bodies: Arc::new(strand_server::body::BodyBudget::new(
            config.max_body_memory_bytes,
        )),
        peer_bodies: Arc::new(strand_server::body::BodyBudget::for_peers(
            config.max_peer_body_memory_bytes,
        )),
        config: Arc::clone(&config),
        engine: engine.clone(),
        shutdown: stop_rx,
        verifier: None,
        cluster_token: None,
        origins: Arc::new(strand_server::cors::Origins::for_config(
            &config.cors_origin,
            true,
        )),
        limits: Arc::new(strand_server::limits::Limits::new(
            config.rate_limit_per_token,
            config.max_live_readers_per_token,
        )),
        cold: None,
        disk: None,
        subs: strand_server::subs::Subscriptions::new(
            engine.clone(),
            &config.default_bucket,
            config.webhook_policy(),
        ),
        client_url: None,
    });
    let mut boundaries = Boundaries::default();
    let setup = SETUP_REQUESTS.with(Vec::clone);
    for request in setup {
        let asked = Asked::of(&request, &boundaries);
        let outcome = exchange(state.clone(), request, usize::MAX).await;
        assert!(
            outcome.status.is_success(),
            "setup {}: {}",
            asked.shown,
            outcome.status
        );
        boundaries.learn(&asked, &outcome);
    }
    let sentinel = exchange(
        state.clone(),
        Parsed {
            method: Method::PUT,
            uri: Uri::from_static("/sentinel/s"),
            headers: HeaderMap::from_iter([(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            )]),
            body: Bytes::from_static(SENTINEL_BYTES),
        },
        usize::MAX,
    )
    .await;
    assert_eq!(sentinel.status, StatusCode::CREATED);

    let mut touched = false;
    let mut live = Vec::new();
    for request in requests {
        clock.advance(STEP_MS);
        touched |= names_sentinel(&request);
        let asked = Asked::of(&request, &boundaries);
        if is_live(&request) {
            let state = state.clone();
            live.push((
                asked,
                tokio::spawn(async move { exchange(state, request, LIVE_FRAMES).await }),
            ));
            // Let it read and park before the next request.
            tokio::task::yield_now().await;
        } else {
            let outcome = exchange(state.clone(), request, usize::MAX).await;
            verify(&asked, &outcome);
            boundaries.learn(&asked, &outcome);
        }
    }
    for (asked, handle) in live {
        verify(&asked, &handle.await.expect("a live read panicked"));
    }

    for group in 0..engine.group_count() {
        let probe = (0..256)
            .map(|i| BucketStreamId::new(SENTINEL, format!("probe{i}")))
            .find(|id| engine.group_for(id) == group)
            .expect("a stream id in every group");
        if let Err(e) = engine.head(probe).await {
            panic!("group {group} no longer answers: {e}");
        }
    }
    for (path, expected) in [
        ("/sentinel/s?offset=-1", SENTINEL_BYTES),
        ("/sentinel/j?offset=-1", SENTINEL_JSON.as_bytes()),
    ] {
        let read = Parsed {
            method: Method::GET,
            uri: Uri::from_static(path),
            headers: HeaderMap::new(),
            body: Bytes::new(),
        };
        let asked = Asked::of(&read, &boundaries);
        let outcome = exchange(state.clone(), read, usize::MAX).await;
        verify(&asked, &outcome);
        if !touched {
            assert_eq!(outcome.status, StatusCode::OK, "GET {path}");
            assert_eq!(outcome.body(), expected, "GET {path}");
        }
    }
    let _ = stop.send(true);
    engine.shutdown().await;
}

/// What a request asked, for checking its answer.
struct Asked {
    /// Method and target, for messages.
    shown: String,
    method: Method,
    /// The stream its path names, if any (`bucket/[affinity/]stream`).
    stream: Option<String>,
    /// The query's offset, when it is a position (`digits_digits`).
    position: Option<u64>,
    /// Whether that position is one the server handed out for the stream.
    at_boundary: bool,
}

impl Asked {
    fn of(request: &Parsed, boundaries: &Boundaries) -> Self {
        let stream = routes::stream_for_path(request.uri.path(), "default")
            .ok()
            .map(|named| named.id.to_string());
        let position =
            ReadQuery::parse(request.uri.query()).ok().and_then(|q| {
                match offsets::parse(q.offset.as_deref()?) {
                    Ok(ReadFrom::Offset(position)) => Some(position),
                    _ => None,
                }
            });
        let at_boundary = match (&stream, position) {
            (Some(stream), Some(position)) => boundaries.holds(stream, position),
            _ => false,
        };
        Self {
            shown: format!("{} {}", request.method, request.uri),
            method: request.method.clone(),
            stream,
            position,
            at_boundary,
        }
    }
}

/// The offsets the server handed out per stream: 0 and the
/// `Stream-Next-Offset` of every success on the stream's own path since
/// it was created. Spec 08 §23: every offset the server hands out is a
/// message (or, paging, a value) boundary; a read from any other offset
/// returns what §5 says, which the checks do not model, so they judge
/// reads from these offsets only.
#[derive(Default)]
struct Boundaries(HashMap<String, BTreeSet<u64>>);

impl Boundaries {
    fn holds(&self, stream: &str, position: u64) -> bool {
        self.0
            .get(stream)
            .is_some_and(|set| set.contains(&position))
    }

    fn learn(&mut self, asked: &Asked, outcome: &Outcome) {
        let Some(stream) = &asked.stream else {
            return;
        };
        if !outcome.status.is_success() {
            return;
        }
        if asked.method == Method::DELETE {
            self.0.remove(stream);
            return;
        }
        let set = self.0.entry(stream.clone()).or_default();
        if outcome.status == StatusCode::CREATED {
            set.clear();
            set.insert(0);
        }
        let next = outcome
            .headers
            .get(h::NEXT_OFFSET)
            .and_then(|v| v.to_str().ok())
            .and_then(|t| offsets::parse_position(t).ok());
        if let Some(next) = next {
            set.insert(next);
        }
    }
}

/// Whether `HTTP_REQUEST_TRACE` is set: then every answer is printed
/// (`cargo test -p strand-tests --test workspace http_request --
/// --nocapture` shows what the saved inputs do).
fn trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("HTTP_REQUEST_TRACE").is_some())
}

/// The checks on every answer.
fn verify(asked: &Asked, outcome: &Outcome) {
    let shown = &asked.shown;
    let status = outcome.status;
    if trace() {
        println!(
            "{shown} -> {status} {:?}",
            String::from_utf8_lossy(&outcome.body())
        );
    }
    assert!(
        !status.is_server_error() || status == StatusCode::SERVICE_UNAVAILABLE,
        "{shown} answered {status}: {:?}",
        String::from_utf8_lossy(&outcome.body())
    );
    let next = outcome
        .headers
        .get(h::NEXT_OFFSET)
        .filter(|_| status.is_success())
        .map(|v| {
            let text = v.to_str().expect("Stream-Next-Offset is text");
            let next = offsets::parse_position(text).expect("Stream-Next-Offset is an offset");
            assert_eq!(offsets::render(next), text, "{shown}");
            next
        });
    if asked.method != Method::GET || status != StatusCode::OK {
        return;
    }
    let content_type = outcome
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type == "text/event-stream" {
        let base64 = outcome.headers.contains_key(h::SSE_DATA_ENCODING);
        for frame in &outcome.frames {
            check_sse_frame(shown, frame, base64);
        }
        return;
    }
    // A stream read (not an extension route's JSON answer) carries its
    // next offset.
    let Some(next) = next.filter(|_| outcome.complete) else {
        return;
    };
    let body = outcome.body();
    if strand::is_json_record_content_type(content_type) {
        if asked.position.is_none() || asked.at_boundary {
            assert!(
                body.starts_with(b"[") && is_json(&body),
                "{shown}: a JSON read gave {:?}",
                String::from_utf8_lossy(&body)
            );
        }
    } else if let Some(position) = asked.position.filter(|_| asked.at_boundary) {
        assert_eq!(
            u64::try_from(body.len()).ok(),
            next.checked_sub(position),
            "{shown}: a read from {position} to {next}"
        );
    }
}

/// One SSE frame: whole events; control data is a JSON object with a
/// canonical offset, base64 data decodes.
fn check_sse_frame(shown: &str, frame: &[u8], base64: bool) {
    // A text/* stream's bytes go out as they are, UTF-8 or not (only CR
    // and LF frame them): read them lossily.
    let text = String::from_utf8_lossy(frame);
    let text = text
        .strip_suffix("\n\n")
        .expect("a frame ends with an event");
    for event in text.split("\n\n") {
        let mut lines = event.split('\n');
        let kind = lines
            .next()
            .and_then(|l| l.strip_prefix("event: "))
            .expect("an event line");
        let data: Vec<&str> = lines
            .map(|l| l.strip_prefix("data:").expect("a data line"))
            .collect();
        assert!(
            data.iter().all(|l| !l.contains('\r')),
            "{shown}: CR in {event:?}"
        );
        match kind {
            "control" => {
                let value: Value =
                    serde_json::from_str(&data.join("\n")).expect("control data is JSON");
                let next = value["streamNextOffset"]
                    .as_str()
                    .expect("streamNextOffset");
                let position = offsets::parse_position(next).expect("a control offset");
                assert_eq!(offsets::render(position), next, "{shown}");
            }
            "data" if base64 => {
                base64::engine::general_purpose::STANDARD
                    .decode(data.concat())
                    .expect("base64 data decodes");
            }
            "data" => {}
            other => panic!("{shown}: an SSE event {other:?}"),
        }
    }
}
