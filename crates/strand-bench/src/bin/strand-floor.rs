//! `strand-floor`: a stand-in server that answers the load tool's writes
//! (`PUT` creates, `POST` appends) without storing anything, and passes
//! each append on to the stream's SSE subscribers (`GET …?live=sse`) as
//! a data and a control event, for measuring what the HTTP layer alone
//! costs per request and per delivery.
//!
//! `--http hyper` serves through hyper's HTTP/1.1 connection, as
//! strand-server does; `--http lean` through a minimal keep-alive loop
//! (`httparse` and one `write` per answer), the shape of a hand-rolled
//! server; `--http lean-typed` is that loop building each request and
//! answer as the `http` crate's types too, as a hand-rolled server in
//! front of routes written on those types would. Both answer an append with the head strand-server sends for
//! one (`204`, `stream-next-offset`, `nosniff`, the resource policy,
//! `date`), on a two-thread runtime. With hyper each subscriber's events
//! go through a channel its connection's task reads (a task wake-up per
//! delivery, as in strand-server); the lean loop writes them to every
//! subscriber's socket from the appending task. It listens on loopback
//! only, and is for measurements: it keeps no data, speaks only what the
//! load tool sends (bodies with a `content-length`), and drops a
//! subscriber whose socket or channel is full.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use clap::{Parser, ValueEnum};
use http_body_util::{BodyExt, Either, Empty};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The largest request head the lean loop reads.
const MAX_HEAD: usize = 64 << 10;
/// The largest request body either mode takes.
const MAX_BODY: usize = 16 << 20;
/// The most header lines the lean loop parses.
const MAX_HEADERS: usize = 32;
/// Events a hyper subscriber's channel holds.
const CHANNEL_EVENTS: usize = 64;
/// The control event a subscription starts with.
const FIRST_CONTROL: &[u8] = b"event: control\ndata:{\"streamNextOffset\":\"0000000000000000_0000000000000000\",\"streamCursor\":\"1\",\"upToDate\":true}\n\n";

/// The SSE subscribers of each stream path.
struct Hub<T> {
    by_path: Mutex<HashMap<String, Vec<T>>>,
    /// Subscribers registered, so appends skip the map while none is.
    count: AtomicUsize,
}

impl<T> Hub<T> {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            by_path: Mutex::new(HashMap::new()),
            count: AtomicUsize::new(0),
        })
    }

    fn add(&self, path: String, subscriber: T) {
        self.add_after(path, subscriber, |_| true);
    }

    /// Adds `subscriber` once `greet` has sent it its first event, under
    /// the lock `publish` takes: no event is published between the two,
    /// and the subscriber hears of none before it is registered. One
    /// whose greeting does not go out is not added.
    fn add_after(&self, path: String, subscriber: T, greet: impl FnOnce(&T) -> bool) {
        let mut map = self
            .by_path
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if greet(&subscriber) {
            map.entry(path).or_default().push(subscriber);
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Offers `event` to `path`'s subscribers; `deliver` false drops one.
    fn publish(&self, path: &str, mut deliver: impl FnMut(&T) -> bool) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut map = self
            .by_path
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(list) = map.get_mut(path) {
            let before = list.len();
            list.retain(|s| deliver(s));
            self.count.fetch_sub(before - list.len(), Ordering::Relaxed);
        }
    }
}

/// The data and control events of one append of `body`.
fn events(body: &[u8], next: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 160);
    out.extend_from_slice(b"event: data\ndata:");
    out.extend_from_slice(body);
    out.extend_from_slice(b"\n\nevent: control\ndata:{\"streamNextOffset\":\"");
    out.extend_from_slice(next_offset(next).as_bytes());
    out.extend_from_slice(b"\",\"streamCursor\":\"1\",\"upToDate\":true}\n\n");
    out
}

/// `data` as one chunk of a chunked body.
fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 12);
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// A hyper response body fed by a subscriber's channel.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|event| event.map(|e| Ok(Frame::data(e))))
    }
}

type HyperBody = Either<Empty<Bytes>, ChannelBody>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Http {
    /// hyper 1's HTTP/1.1 server connection.
    Hyper,
    /// A minimal keep-alive loop over `httparse`.
    Lean,
    /// The lean loop, with each request and answer also built as the
    /// `http` crate's types (a `Request` with its `HeaderMap`, a
    /// `Response` whose map is encoded), as a server whose routes take
    /// and give those types would.
    LeanTyped,
}

/// A server that answers writes and keeps nothing: the HTTP floor.
#[derive(Debug, Parser)]
#[command(name = "strand-floor", version)]
struct Args {
    /// The loopback address to listen on.
    #[arg(long, default_value = "127.0.0.1:4499")]
    listen: SocketAddr,
    /// Which HTTP/1.1 implementation serves the requests.
    #[arg(long, value_enum, default_value = "hyper")]
    http: Http,
    /// Runtime worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// With `--http lean`: the tasks an append's events are written to
    /// its subscribers' sockets from (the appending one, and others it
    /// spawns), each writing to its share of the subscribers.
    #[arg(long, default_value_t = 1)]
    fanout_tasks: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.listen.ip().is_loopback() {
        eprintln!("strand-floor: --listen must be a loopback address");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers.max(1))
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("strand-floor: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strand-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> std::io::Result<()> {
    let listener = TcpListener::bind(args.listen).await?;
    eprintln!(
        "strand-floor: listening on {} ({:?})",
        args.listen, args.http
    );
    let hyper_hub = Hub::<mpsc::Sender<Bytes>>::new();
    let lean_hub: Arc<Vec<Arc<Hub<Arc<OwnedWriteHalf>>>>> =
        Arc::new((0..args.fanout_tasks.max(1)).map(|_| Hub::new()).collect());
    let mut connections = 0usize;
    loop {
        connections = connections.wrapping_add(1);
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("strand-floor: accept: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        match args.http {
            Http::Hyper => {
                let hub = Arc::clone(&hyper_hub);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        answer_hyper(Arc::clone(&hub), request)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Http::Lean | Http::LeanTyped => {
                let hub = Arc::clone(&lean_hub);
                let typed = args.http == Http::LeanTyped;
                let shard = connections % hub.len();
                tokio::spawn(async move {
                    let _ = lean_connection(stream, hub, shard, typed).await;
                });
            }
        }
    }
}

/// The next offset an answer names: the body's length after a fixed
/// zero (the load tool checks only the status).
fn next_offset(len: usize) -> String {
    format!("0000000000000000_{len:016}")
}

/// Appends the HTTP date of now, formatted once a second per thread
/// (as hyper caches it).
fn push_http_date(out: &mut Vec<u8>) {
    thread_local! {
        static DATE: std::cell::RefCell<(u64, String)> =
            const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let now = std::time::SystemTime::now();
    let second = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|date| {
        let mut date = date.borrow_mut();
        if date.0 != second {
            *date = (second, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(date.1.as_bytes());
    });
}

async fn answer_hyper(
    hub: Arc<Hub<mpsc::Sender<Bytes>>>,
    request: Request<Incoming>,
) -> Result<Response<HyperBody>, Infallible> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let sse = request
        .uri()
        .query()
        .is_some_and(|q| q.contains("live=sse"));
    let mut body = request.into_body();
    let mut whole = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Ok(status_only(StatusCode::BAD_REQUEST));
        };
        if let Ok(data) = frame.into_data() {
            if whole.len() + data.len() > MAX_BODY {
                return Ok(status_only(StatusCode::PAYLOAD_TOO_LARGE));
            }
            whole.extend_from_slice(&data);
        }
    }
    let status = match method {
        Method::PUT => StatusCode::CREATED,
        Method::POST => StatusCode::NO_CONTENT,
        Method::GET if sse => {
            let (tx, rx) = mpsc::channel(CHANNEL_EVENTS);
            let _ = tx.try_send(Bytes::from_static(FIRST_CONTROL));
            hub.add(path, tx);
            let mut response = Response::new(Either::Right(ChannelBody(rx)));
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/event-stream"),
            );
            return Ok(response);
        }
        // A health probe.
        Method::GET | Method::HEAD => return Ok(status_only(StatusCode::OK)),
        _ => return Ok(status_only(StatusCode::METHOD_NOT_ALLOWED)),
    };
    if method == Method::POST {
        let mut event = None;
        hub.publish(&path, |tx| {
            let event = event.get_or_insert_with(|| Bytes::from(events(&whole, whole.len())));
            tx.try_send(event.clone()).is_ok()
        });
    }
    let mut response = Response::new(Either::Left(Empty::new()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Ok(value) = next_offset(whole.len()).parse() {
        headers.insert("stream-next-offset", value);
    }
    answer_headers(headers);
    Ok(response)
}

/// The headers strand-server puts on every answer (besides `date`).
fn answer_headers(headers: &mut hyper::HeaderMap) {
    headers.insert(
        "x-content-type-options",
        hyper::header::HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        hyper::header::HeaderValue::from_static("cross-origin"),
    );
}

fn status_only(status: StatusCode) -> Response<HyperBody> {
    let mut response = Response::new(Either::Left(Empty::new()));
    *response.status_mut() = status;
    response
}

/// Writes `event` to every subscriber of `path` in `hub`; one whose
/// socket does not take it whole is dropped.
fn write_events(hub: &Hub<Arc<OwnedWriteHalf>>, path: &str, event: &[u8]) {
    hub.publish(
        path,
        |write| matches!(write.try_write(event), Ok(n) if n == event.len()),
    );
}

/// A parsed head as an `http::Request` (for `--http lean-typed`).
fn http_request(parsed: &httparse::Request<'_, '_>) -> Request<()> {
    let mut request = Request::new(());
    if let Some(method) = parsed
        .method
        .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
    {
        *request.method_mut() = method;
    }
    if let Some(uri) = parsed.path.and_then(|p| p.parse().ok()) {
        *request.uri_mut() = uri;
    }
    let headers = request.headers_mut();
    for header in parsed.headers.iter() {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(header.name.as_bytes()),
            hyper::header::HeaderValue::from_bytes(header.value),
        ) {
            headers.append(name, value);
        }
    }
    request
}

/// Builds the answer as an `http::Response` and encodes its status and
/// header map into `out` (for `--http lean-typed`).
fn encode_http_answer(out: &mut Vec<u8>, request: &Request<Bytes>, verb: Verb, body_len: usize) {
    let status = match verb {
        Verb::Append => StatusCode::NO_CONTENT,
        Verb::Create => StatusCode::CREATED,
        Verb::Probe | Verb::Subscribe => StatusCode::OK,
        Verb::Other => StatusCode::METHOD_NOT_ALLOWED,
    };
    let mut response = Response::new(());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if request.method() == Method::POST
        && let Ok(value) = next_offset(body_len).parse()
    {
        headers.insert("stream-next-offset", value);
    } else {
        headers.insert(
            hyper::header::CONTENT_LENGTH,
            hyper::header::HeaderValue::from_static("0"),
        );
    }
    answer_headers(headers);
    let mut date = Vec::with_capacity(32);
    push_http_date(&mut date);
    if let Ok(value) = hyper::header::HeaderValue::from_bytes(&date) {
        headers.insert(hyper::header::DATE, value);
    }
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in response.headers() {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// What the lean loop answers a request with.
#[derive(Debug, Clone, Copy)]
enum Verb {
    /// `POST`: 204 and the next offset.
    Append,
    /// `PUT`: 201.
    Create,
    /// `GET …?live=sse`: an event stream that stays open.
    Subscribe,
    /// `GET` or `HEAD` (a health probe): 200.
    Probe,
    /// Anything else: 405.
    Other,
}

/// Serves one connection's requests in turn until the peer closes it or
/// sends what the loop does not speak (then the connection is closed).
async fn lean_connection(
    mut stream: TcpStream,
    hubs: Arc<Vec<Arc<Hub<Arc<OwnedWriteHalf>>>>>,
    shard: usize,
    typed: bool,
) -> std::io::Result<()> {
    let mut buf = BytesMut::with_capacity(8 << 10);
    let mut out = Vec::with_capacity(256);
    loop {
        // The head.
        let (head_len, method, body_len, path, as_http) = loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut request = httparse::Request::new(&mut headers);
            match request.parse(&buf) {
                Ok(httparse::Status::Complete(head_len)) => {
                    let mut body_len = 0usize;
                    for header in request.headers.iter() {
                        if header.name.eq_ignore_ascii_case("content-length") {
                            body_len = std::str::from_utf8(header.value)
                                .ok()
                                .and_then(|v| v.trim().parse().ok())
                                .unwrap_or(usize::MAX);
                        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                            return Ok(());
                        }
                    }
                    if body_len > MAX_BODY {
                        return Ok(());
                    }
                    let target = request.path.unwrap_or("/");
                    let (path, query) = target.split_once('?').unwrap_or((target, ""));
                    let verb = match request.method {
                        Some("POST") => Verb::Append,
                        Some("PUT") => Verb::Create,
                        Some("GET") if query.contains("live=sse") => Verb::Subscribe,
                        Some("GET" | "HEAD") => Verb::Probe,
                        _ => Verb::Other,
                    };
                    let as_http = typed.then(|| http_request(&request));
                    break (head_len, verb, body_len, path.to_owned(), as_http);
                }
                Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
                _ => return Ok(()),
            }
            if stream.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        };
        // The body.
        while buf.len() < head_len + body_len {
            buf.reserve(head_len + body_len - buf.len());
            if stream.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        out.clear();
        if let Verb::Subscribe = method {
            let mut head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\ndate: ".to_vec();
            push_http_date(&mut head);
            head.extend_from_slice(b"\r\n\r\n");
            stream.write_all(&head).await?;
            let (mut read, write) = stream.into_split();
            // The first control event goes out as the subscriber is
            // registered: an append the client makes once it has seen it
            // reaches the subscriber.
            let first = chunk(FIRST_CONTROL);
            hubs[shard].add_after(
                path,
                Arc::new(write),
                |write| matches!(write.try_write(&first), Ok(n) if n == first.len()),
            );
            // Until the subscriber goes away.
            let mut sink = [0u8; 1024];
            while read.read(&mut sink).await? > 0 {}
            return Ok(());
        }
        if matches!(method, Verb::Append)
            && hubs.iter().any(|hub| hub.count.load(Ordering::Relaxed) > 0)
        {
            let body = &buf[head_len..head_len + body_len];
            let event: Arc<[u8]> = chunk(&events(body, body_len)).into();
            for hub in hubs.iter().skip(1) {
                let (hub, event, path) = (Arc::clone(hub), Arc::clone(&event), path.clone());
                tokio::spawn(async move { write_events(&hub, &path, &event) });
            }
            write_events(&hubs[0], &path, &event);
        }
        if let Some(request) = as_http {
            let body = Bytes::copy_from_slice(&buf[head_len..head_len + body_len]);
            let request = request.map(|()| body);
            encode_http_answer(&mut out, &request, method, body_len);
            drop(std::hint::black_box(request));
            buf.advance(head_len + body_len);
            stream.write_all(&out).await?;
            continue;
        }
        match method {
            Verb::Subscribe => {}
            Verb::Append => {
                out.extend_from_slice(b"HTTP/1.1 204 No Content\r\nstream-next-offset: ");
                out.extend_from_slice(next_offset(body_len).as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Verb::Create => out.extend_from_slice(b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\n"),
            // A health probe.
            Verb::Probe => out.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n"),
            Verb::Other => {
                out.extend_from_slice(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n")
            }
        }
        buf.advance(head_len + body_len);
        out.extend_from_slice(
            b"x-content-type-options: nosniff\r\ncross-origin-resource-policy: cross-origin\r\ndate: ",
        );
        push_http_date(&mut out);
        out.extend_from_slice(b"\r\n\r\n");
        stream.write_all(&out).await?;
    }
}
