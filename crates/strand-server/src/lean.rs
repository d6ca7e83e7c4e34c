//! strand's own HTTP/1.1 server connection (`--http-engine lean`).
//!
//! hyper's connection costs a few microseconds of CPU per request more
//! than a plain keep-alive loop (docs/performance.md, "the HTTP floor"):
//! a want-channel per request body, a dispatcher task's polls and its
//! buffers. This module serves the same routes ([`crate::routes::serve`])
//! over a loop that parses each request head in place with `httparse`,
//! hands a body that is already in the read buffer to the routes as one
//! piece, and writes each answer's head and a small body with one write.
//!
//! It speaks HTTP/1.0 and HTTP/1.1 over plaintext TCP: keep-alive,
//! pipelined requests (answered in order), `Content-Length` and chunked
//! request bodies, `Expect: 100-continue`, `Content-Length` and chunked
//! (or, to HTTP/1.0, connection-delimited) answers. A connection that
//! opens with HTTP/2's preface is handed to hyper's HTTP/2 server, and TLS
//! connections are always served by hyper. The limits are hyper's as
//! strand sets them: a request head of at most
//! [`MAX_CONNECTION_BUFFER`] bytes (431 beyond), at most [`MAX_HEADERS`]
//! header fields (431), and the connection watchdog's timeouts
//! ([`crate::conn`]), which watch this loop's socket as they watch
//! hyper's.
//!
//! What it refuses with 400 and a closed connection: a head `httparse`
//! does not accept, a header value with control characters, a target that
//! is no URI, `Transfer-Encoding` on HTTP/1.0 or together with
//! `Content-Length`, a transfer coding other than `chunked`, and
//! `Content-Length` values that disagree or are not decimal numbers
//! (RFC 9112 §6). A request whose body the routes did not read to its end
//! (an early 413, 401 or 404) is answered and the connection closed, so
//! the unread bytes are never taken for the next request.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::header::{
    CONNECTION, CONTENT_LENGTH, DATE, EXPECT, HeaderName, HeaderValue, TRANSFER_ENCODING,
};
use axum::http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version};
use bytes::{Buf, Bytes, BytesMut};
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use crate::conn::{self, MAX_CONNECTION_BUFFER, Watch};
use crate::state::AppState;

/// The most header fields a request head may have (hyper's default).
pub(crate) const MAX_HEADERS: usize = 100;
/// HTTP/2's connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The longest chunk-size line (with extensions) or trailer line of a
/// chunked body.
const MAX_CHUNK_LINE: usize = 4 << 10;
/// The most trailer bytes after a chunked body's last chunk.
const MAX_TRAILERS: usize = 16 << 10;
/// The most bytes read from the socket for a body at once.
const BODY_READ: usize = 64 << 10;
/// A response body up to this size is written with its head in one write.
const INLINE_BODY: usize = 16 << 10;

/// How a connection's service ended.
pub(crate) enum Served {
    /// The connection is done (closed by either side, or refused).
    Done,
    /// The client opened with HTTP/2's preface: these bytes (read so far)
    /// and the socket go to hyper's HTTP/2 server.
    Http2(Bytes),
}

/// Why a request head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Malformed (400).
    Bad,
    /// Too large or too many fields (431).
    TooLarge,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Self::Bad => StatusCode::BAD_REQUEST,
            Self::TooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        }
    }
}

/// How a request's body is framed (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// This many bytes (none for a request without a length).
    Length(u64),
    /// Chunked.
    Chunked,
}

/// A parsed request head.
struct Head {
    request: Request<()>,
    framing: Framing,
    /// The client asked to close the connection after this request (or,
    /// on HTTP/1.0, did not ask to keep it).
    close: bool,
    /// `Expect: 100-continue`.
    expect_continue: bool,
}

/// Serves one plaintext connection's requests in turn until either side
/// closes it, `stop` is true after an answer, or the client speaks
/// HTTP/2. (A connection waiting for its next request when the server
/// stops is closed by its task: [`Watch::idle_after`].)
///
/// # Errors
/// A socket error.
pub(crate) async fn serve<IO>(
    io: &mut IO,
    watch: &Arc<Watch>,
    state: &AppState,
    stop: &watch::Receiver<bool>,
) -> io::Result<Served>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = BytesMut::with_capacity(8 << 10);
    let mut first = true;
    loop {
        // The head: read until it is complete or the connection closes
        // (bytes left after the last request may already hold it).
        let parsed = loop {
            if first && !buf.is_empty() {
                let n = buf.len().min(H2_PREFACE.len());
                if buf[..n] == H2_PREFACE[..n] {
                    if n == H2_PREFACE.len() {
                        return Ok(Served::Http2(buf.freeze()));
                    }
                } else {
                    first = false;
                }
            }
            if !first && !buf.is_empty() {
                match parse_head(&mut buf) {
                    Ok(Some(head)) => break Ok(head),
                    Ok(None) => {}
                    Err(refusal) => break Err(refusal),
                }
            }
            if buf.capacity() - buf.len() < 1024 {
                buf.reserve(8 << 10);
            }
            if io.read_buf(&mut buf).await? == 0 {
                return Ok(Served::Done);
            }
        };
        let head = match parsed {
            Ok(head) => head,
            Err(refusal) => {
                let guard = watch.request();
                write_refusal(io, refusal.status()).await?;
                drop(guard);
                return Ok(Served::Done);
            }
        };
        let guard = watch.request();
        let Head {
            request,
            framing,
            close,
            expect_continue,
        } = head;
        let version = request.version();
        let method = request.method().clone();
        // The body: whole from the buffer when it is there, else read by a
        // pump polled beside the routes.
        let (response, body_complete) = match framing {
            Framing::Length(n) if n <= buf.len() as u64 => {
                // In range: n <= buf.len().
                #[allow(clippy::cast_possible_truncation)]
                let body = buf.split_to(n as usize).freeze();
                let request = request.map(|()| {
                    axum::body::Body::new(conn::TrackedBody::new(Whole(Some(body)), watch))
                });
                let response = crate::routes::serve(state.clone(), request).await;
                (response, true)
            }
            framing => {
                // `Expect: 100-continue`: the interim answer goes out when
                // the routes first ask for the body, so a request refused
                // from its head (413, 401) is answered before the client
                // sends a byte of the body.
                let (wanted, want) = if expect_continue && version == Version::HTTP_11 {
                    let (wanted, want) = tokio::sync::oneshot::channel();
                    (Some(wanted), Some(want))
                } else {
                    (None, None)
                };
                let (tx, rx) = mpsc::channel(1);
                let hint = match framing {
                    Framing::Length(n) => SizeHint::with_exact(n),
                    Framing::Chunked => SizeHint::default(),
                };
                let request = request.map(|()| {
                    axum::body::Body::new(conn::TrackedBody::new(
                        Piped {
                            rx,
                            hint,
                            ended: false,
                            wanted,
                        },
                        watch,
                    ))
                });
                let routes = crate::routes::serve(state.clone(), request);
                let pump = pump_body(io, &mut buf, framing, want, tx);
                tokio::pin!(routes, pump);
                let mut pumped = None;
                let response = loop {
                    tokio::select! {
                        response = &mut routes => break response,
                        result = &mut pump, if pumped.is_none() => pumped = Some(result),
                    }
                };
                (response, matches!(pumped, Some(Ok(()))))
            }
        };
        let stopping = *stop.borrow();
        let keep_alive = !close && body_complete && !stopping;
        let kept = write_response(io, response, &method, version, keep_alive).await?;
        drop(guard);
        if !kept {
            return Ok(Served::Done);
        }
    }
}

/// Parses the request head at the start of `buf`, taking its bytes:
/// `None` while it is incomplete.
fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, Refusal> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut fields);
    let head_len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_CONNECTION_BUFFER => {
            return Err(Refusal::TooLarge);
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Refusal::TooLarge),
        Err(_) => return Err(Refusal::Bad),
    };
    let base = buf.as_ptr() as usize;
    let at = |s: &[u8]| (s.as_ptr() as usize - base, s.len());
    let method = Method::from_bytes(parsed.method.unwrap_or_default().as_bytes())
        .map_err(|_| Refusal::Bad)?;
    let version = match parsed.version {
        Some(1) => Version::HTTP_11,
        _ => Version::HTTP_10,
    };
    let target = at(parsed.path.unwrap_or_default().as_bytes());
    let mut names = Vec::with_capacity(parsed.headers.len());
    for field in parsed.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(|_| Refusal::Bad)?;
        names.push((name, at(field.value)));
    }
    let head = buf.split_to(head_len).freeze();
    let slice = |(offset, len): (usize, usize)| head.slice(offset..offset + len);
    let uri = Uri::from_maybe_shared(slice(target)).map_err(|_| Refusal::Bad)?;
    let mut headers = HeaderMap::with_capacity(names.len());
    for (name, value) in names {
        let value = HeaderValue::from_maybe_shared(slice(value)).map_err(|_| Refusal::Bad)?;
        headers.append(name, value);
    }
    let framing = framing(&headers, version)?;
    let close = wants_close(&headers, version);
    let expect_continue = headers
        .get(EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = headers;
    Ok(Some(Head {
        request,
        framing,
        close,
        expect_continue,
    }))
}

/// How the request's body is framed, or why the head is refused.
fn framing(headers: &HeaderMap, version: Version) -> Result<Framing, Refusal> {
    let mut codings = headers.get_all(TRANSFER_ENCODING).iter().peekable();
    if codings.peek().is_some() {
        if version == Version::HTTP_10 || headers.contains_key(CONTENT_LENGTH) {
            return Err(Refusal::Bad);
        }
        // Only `chunked`, once: strand decodes no other coding.
        let mut tokens = 0;
        for value in codings {
            let text = value.to_str().map_err(|_| Refusal::Bad)?;
            for token in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                if !token.eq_ignore_ascii_case("chunked") {
                    return Err(Refusal::Bad);
                }
                tokens += 1;
            }
        }
        return if tokens == 1 {
            Ok(Framing::Chunked)
        } else {
            Err(Refusal::Bad)
        };
    }
    let mut length = None;
    for value in headers.get_all(CONTENT_LENGTH) {
        for text in value.as_bytes().split(|b| *b == b',') {
            let text = text.trim_ascii();
            if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
                return Err(Refusal::Bad);
            }
            let n: u64 = std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or(Refusal::Bad)?;
            if length.is_some_and(|l| l != n) {
                return Err(Refusal::Bad);
            }
            length = Some(n);
        }
    }
    Ok(Framing::Length(length.unwrap_or(0)))
}

/// Whether a `Connection` header (or HTTP/1.0's default) closes the
/// connection after the exchange.
fn wants_close(headers: &HeaderMap, version: Version) -> bool {
    has_connection_token(headers, b"close")
        || (version == Version::HTTP_10 && !has_connection_token(headers, b"keep-alive"))
}

/// Whether a `Connection` header of `headers` lists `token`.
fn has_connection_token(headers: &HeaderMap, token: &[u8]) -> bool {
    headers.get_all(CONNECTION).iter().any(|value| {
        value
            .as_bytes()
            .split(|b| *b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
    })
}

/// Reads the rest of a request body from `io` into `tx`; `Ok` once the
/// whole body was read (even if the routes stopped reading it). With
/// `want` (`Expect: 100-continue`) it first waits for the routes to ask
/// for the body, then sends `100 Continue`.
async fn pump_body<IO>(
    io: &mut IO,
    buf: &mut BytesMut,
    framing: Framing,
    want: Option<tokio::sync::oneshot::Receiver<()>>,
    tx: mpsc::Sender<io::Result<Bytes>>,
) -> io::Result<()>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    if let Some(want) = want {
        if want.await.is_err() {
            // The routes dropped the body unread: the client sends none.
            return Err(io::Error::other("the request body was not asked for"));
        }
        io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
    }
    let result = match framing {
        Framing::Length(n) => pump_length(io, buf, n, &tx).await,
        Framing::Chunked => pump_chunked(io, buf, &tx).await,
    };
    if let Err(e) = &result {
        let _ = tx.send(Err(io::Error::new(e.kind(), e.to_string()))).await;
    }
    result
}

/// Fills `buf` with at least one more byte; end of file is an error in a
/// body.
async fn fill<IO: AsyncRead + Unpin>(io: &mut IO, buf: &mut BytesMut) -> io::Result<()> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(BODY_READ);
    }
    if io.read_buf(buf).await? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection closed inside a request body",
        ));
    }
    Ok(())
}

/// Sends a piece of body; a body the routes dropped takes nothing more
/// but the bytes are still read (to keep the connection).
async fn send(tx: &mpsc::Sender<io::Result<Bytes>>, piece: Bytes) {
    if !piece.is_empty() {
        let _ = tx.send(Ok(piece)).await;
    }
}

async fn pump_length<IO: AsyncRead + Unpin>(
    io: &mut IO,
    buf: &mut BytesMut,
    length: u64,
    tx: &mpsc::Sender<io::Result<Bytes>>,
) -> io::Result<()> {
    let mut left = length;
    while left > 0 {
        if buf.is_empty() {
            fill(io, buf).await?;
        }
        let take = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        send(tx, buf.split_to(take).freeze()).await;
        left -= take as u64;
    }
    Ok(())
}

/// Takes one CRLF-terminated line (without it) of at most `max` bytes.
async fn line<IO: AsyncRead + Unpin>(
    io: &mut IO,
    buf: &mut BytesMut,
    max: usize,
) -> io::Result<BytesMut> {
    loop {
        if let Some(end) = buf.windows(2).position(|w| w == b"\r\n") {
            let line = buf.split_to(end);
            buf.advance(2);
            return Ok(line);
        }
        if buf.len() > max {
            return Err(bad_chunk("a chunk line is too long"));
        }
        fill(io, buf).await?;
    }
}

fn bad_chunk(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed chunked body: {why}"),
    )
}

async fn pump_chunked<IO: AsyncRead + Unpin>(
    io: &mut IO,
    buf: &mut BytesMut,
    tx: &mpsc::Sender<io::Result<Bytes>>,
) -> io::Result<()> {
    loop {
        let size_line = line(io, buf, MAX_CHUNK_LINE).await?;
        let digits = size_line[..]
            .split(|b| *b == b';')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(bad_chunk("not a chunk size"));
        }
        let size = std::str::from_utf8(digits)
            .ok()
            .and_then(|d| u64::from_str_radix(d, 16).ok())
            .ok_or_else(|| bad_chunk("not a chunk size"))?;
        if size == 0 {
            let mut trailers = 0;
            loop {
                let trailer = line(io, buf, MAX_CHUNK_LINE).await?;
                if trailer.is_empty() {
                    return Ok(());
                }
                trailers += trailer.len() + 2;
                if trailers > MAX_TRAILERS {
                    return Err(bad_chunk("too many trailer bytes"));
                }
            }
        }
        pump_length(io, buf, size, tx).await?;
        while buf.len() < 2 {
            fill(io, buf).await?;
        }
        if &buf[..2] != b"\r\n" {
            return Err(bad_chunk("a chunk does not end with CRLF"));
        }
        buf.advance(2);
    }
}

/// A request body already read whole.
struct Whole(Option<Bytes>);

impl Body for Whole {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Poll::Ready(
            self.0
                .take()
                .filter(|b| !b.is_empty())
                .map(|b| Ok(Frame::data(b))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(Bytes::is_empty)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
    }
}

/// A request body arriving from the connection's pump.
struct Piped {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    hint: SizeHint,
    ended: bool,
    /// Told at the first poll, when the client waits for `100 Continue`.
    wanted: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Body for Piped {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Some(wanted) = self.wanted.take() {
            let _ = wanted.send(());
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(piece))) => {
                let len = piece.len() as u64;
                let lower = self.hint.lower().saturating_sub(len);
                let upper = self.hint.upper().map(|u| u.saturating_sub(len));
                self.hint = SizeHint::new();
                self.hint.set_lower(lower);
                if let Some(upper) = upper {
                    self.hint.set_upper(upper);
                }
                Poll::Ready(Some(Ok(Frame::data(piece))))
            }
            Poll::Ready(Some(Err(e))) => {
                self.ended = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.hint.upper() == Some(0)
    }

    fn size_hint(&self) -> SizeHint {
        self.hint
    }
}

/// Answers a refused head and closes.
async fn write_refusal<IO: AsyncWrite + Unpin>(io: &mut IO, status: StatusCode) -> io::Result<()> {
    let mut out = Vec::with_capacity(128);
    status_line(&mut out, status);
    out.extend_from_slice(b"content-length: 0\r\nconnection: close\r\n");
    push_date(&mut out);
    out.extend_from_slice(b"\r\n");
    io.write_all(&out).await?;
    io.flush().await
}

fn status_line(out: &mut Vec<u8>, status: StatusCode) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends `date: …\r\n`, formatted at most once a second per thread.
fn push_date(out: &mut Vec<u8>) {
    thread_local! {
        static CACHE: std::cell::RefCell<(u64, String)> = const {
            std::cell::RefCell::new((u64::MAX, String::new()))
        };
    }
    let now = std::time::SystemTime::now();
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.0 != secs {
            *cache = (secs, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(cache.1.as_bytes());
        out.extend_from_slice(b"\r\n");
    });
}

/// Writes the answer to a `method` request; `Ok(true)` when the
/// connection stays open for the next request.
async fn write_response<IO, B>(
    io: &mut IO,
    response: Response<B>,
    method: &Method,
    version: Version,
    keep_alive: bool,
) -> io::Result<bool>
where
    IO: AsyncWrite + Unpin,
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let (parts, mut body) = response.into_parts();
    let status = parts.status;
    let bodiless = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let head_only = bodiless || method == Method::HEAD;
    let mut keep_alive = keep_alive && !has_connection_token(&parts.headers, b"close");
    let exact = body.size_hint().exact();
    let has_length = parts.headers.contains_key(CONTENT_LENGTH);
    // How the body is framed on the wire.
    let chunked = !head_only && exact.is_none() && version == Version::HTTP_11;
    if !head_only && exact.is_none() && version != Version::HTTP_11 {
        // HTTP/1.0 without a length: the body ends with the connection.
        keep_alive = false;
    }
    let mut out = Vec::with_capacity(512);
    status_line(&mut out, status);
    for (name, value) in &parts.headers {
        if name == TRANSFER_ENCODING || name == CONNECTION {
            continue;
        }
        if bodiless && name == CONTENT_LENGTH {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !parts.headers.contains_key(DATE) {
        push_date(&mut out);
    }
    if chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    } else if !has_length
        && !bodiless
        && let Some(n) = exact.filter(|n| method != Method::HEAD || *n > 0)
    {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(n.to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !keep_alive {
        out.extend_from_slice(b"connection: close\r\n");
    } else if version == Version::HTTP_10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if head_only {
        io.write_all(&out).await?;
        io.flush().await?;
        return Ok(keep_alive);
    }
    // The body: frames that are ready gather behind the head; the
    // gathered bytes are written whenever the body has nothing ready.
    loop {
        let polled =
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx))).await;
        let frame = match polled {
            Poll::Ready(frame) => frame,
            Poll::Pending => {
                if !out.is_empty() {
                    io.write_all(&out).await?;
                    io.flush().await?;
                    out.clear();
                }
                std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
            }
        };
        match frame {
            None => break,
            Some(Err(e)) => {
                // The answer cannot be completed: what was sent stays cut.
                tracing::debug!(error = %e, "response body failed");
                if !out.is_empty() {
                    io.write_all(&out).await?;
                }
                io.flush().await?;
                return Ok(false);
            }
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if data.is_empty() {
                    continue;
                }
                if chunked {
                    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                }
                if out.len() + data.len() <= INLINE_BODY {
                    out.extend_from_slice(&data);
                } else {
                    // What is gathered and the large piece in one vectored
                    // write, the piece not copied.
                    let mut both = Buf::chain(&out[..], data);
                    io.write_all_buf(&mut both).await?;
                    out.clear();
                }
                if chunked {
                    out.extend_from_slice(b"\r\n");
                }
                if out.len() >= MAX_CONNECTION_BUFFER {
                    io.write_all(&out).await?;
                    out.clear();
                }
            }
        }
    }
    if chunked {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    if !out.is_empty() {
        io.write_all(&out).await?;
    }
    io.flush().await?;
    Ok(keep_alive)
}

/// A socket whose first bytes were already read: they are read again
/// first (the HTTP/2 hand-off).
pub(crate) struct Rewound<IO> {
    prefix: Bytes,
    io: IO,
}

impl<IO> Rewound<IO> {
    /// `prefix`, then the rest of `io`.
    pub(crate) fn new(prefix: Bytes, io: IO) -> Self {
        Self { prefix, io }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Rewound<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Rewound<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn head(text: &str) -> Result<Option<Head>, Refusal> {
        parse_head(&mut BytesMut::from(text.as_bytes()))
    }

    #[test]
    fn a_head_parses_into_the_request_the_routes_take() {
        let parsed = head("POST /v1/stream/a?offset=-1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello")
            .unwrap()
            .unwrap();
        assert_eq!(parsed.request.method(), Method::POST);
        assert_eq!(parsed.request.uri().path(), "/v1/stream/a");
        assert_eq!(parsed.request.uri().query(), Some("offset=-1"));
        assert_eq!(parsed.request.version(), Version::HTTP_11);
        assert_eq!(parsed.request.headers().get_all("x-a").iter().count(), 2);
        assert_eq!(parsed.framing, Framing::Length(5));
        assert!(!parsed.close);
        assert!(head("GET / HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let framing = |text: &str| head(text).map(|h| h.map(|h| h.framing));
        assert_eq!(
            framing("GET / HTTP/1.1\r\n\r\n"),
            Ok(Some(Framing::Length(0)))
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"),
            Ok(Some(Framing::Length(3)))
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"),
            Ok(Some(Framing::Chunked))
        );
        for bad in [
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nX: \x7f\r\n\r\n",
            "GET /a b HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(head(bad).err(), Some(Refusal::Bad), "{bad:?}");
        }
    }

    #[test]
    fn a_long_head_or_too_many_fields_is_431() {
        let long = format!(
            "GET / HTTP/1.1\r\nX: {}\r\n",
            "a".repeat(MAX_CONNECTION_BUFFER)
        );
        assert_eq!(head(&long).err(), Some(Refusal::TooLarge));
        let mut many = "GET / HTTP/1.1\r\n".to_owned();
        for i in 0..=MAX_HEADERS {
            many.push_str(&format!("X-{i}: 1\r\n"));
        }
        many.push_str("\r\n");
        assert_eq!(head(&many).err(), Some(Refusal::TooLarge));
    }

    #[test]
    fn http_1_0_closes_unless_asked_to_keep_alive() {
        let close = |text: &str| head(text).unwrap().unwrap().close;
        assert!(close("GET / HTTP/1.0\r\n\r\n"));
        assert!(!close("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
        assert!(!close("GET / HTTP/1.1\r\n\r\n"));
        assert!(close("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n"));
    }

    /// Serves `wire` through the lean loop over an in-memory pipe that
    /// passes at most `piece` bytes at a time (so heads, chunk lines and
    /// CRLFs arrive split anywhere), with the client's side closed after
    /// it, and returns everything answered.
    async fn served_in_pieces(wire: &[u8], piece: usize) -> String {
        let mut config = crate::Config::for_listen("127.0.0.1:0".parse().unwrap());
        config.memory = true;
        let config = Arc::new(config);
        let engine = strand_engine::Engine::start(crate::engine_config(&config));
        let (_stop_tx, stop) = watch::channel(false);
        let state = crate::app_state(
            Arc::clone(&config),
            crate::Node::from(engine.clone()),
            stop.clone(),
            None,
            None,
            None,
            None,
        );
        let (client, mut server) = tokio::io::duplex(piece);
        let conn = Watch::new();
        let serving = async {
            let served = serve(&mut server, &conn, &state, &stop).await;
            drop(server);
            served
        };
        let (mut from_server, mut to_server) = tokio::io::split(client);
        // Answers are read while requests are written: the pipe holds
        // `piece` bytes each way.
        let writing = async {
            to_server.write_all(wire).await.unwrap();
            to_server.shutdown().await.unwrap();
        };
        let reading = async {
            let mut answers = Vec::new();
            from_server.read_to_end(&mut answers).await.unwrap();
            answers
        };
        let talking = async { tokio::join!(writing, reading).1 };
        let (served, answers) = tokio::join!(serving, talking);
        assert!(matches!(served, Ok(Served::Done)));
        engine.shutdown().await;
        String::from_utf8_lossy(&answers).into_owned()
    }

    #[tokio::test]
    async fn requests_split_anywhere_are_answered_as_when_whole() {
        let wire = b"PUT /v1/stream/s HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
              Content-Length: 3\r\n\r\nabc\
              POST /v1/stream/s HTTP/1.1\r\nContent-Type: text/plain\r\n\
              Transfer-Encoding: chunked\r\n\r\n2;e=1\r\nde\r\n1\r\nf\r\n0\r\nT: 1\r\n\r\n\
              POST /v1/stream/s HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\ngh\
              HEAD /v1/stream/s HTTP/1.1\r\n\r\n\
              GET /v1/stream/s?offset=-1 HTTP/1.0\r\n\r\n";
        let whole = served_in_pieces(wire, 1 << 16).await;
        let statuses: Vec<&str> = whole
            .match_indices("HTTP/1.1 ")
            .map(|(at, _)| &whole[at + 9..at + 12])
            .collect();
        assert_eq!(statuses, ["201", "204", "204", "200", "200"], "{whole}");
        assert!(whole.ends_with("\r\n\r\nabcdefgh"), "{whole}");
        for piece in [1, 2, 3, 7, 64] {
            let split = served_in_pieces(wire, piece).await;
            // The same answers but for their Date and cursor headers.
            let strip = |text: &str| {
                text.lines()
                    .filter(|l| !l.starts_with("date: ") && !l.starts_with("stream-cursor: "))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            assert_eq!(strip(&split), strip(&whole), "pieces of {piece} bytes");
        }
    }

    async fn pumped(framing: Framing, wire: &[u8]) -> (io::Result<()>, Vec<u8>) {
        let (tx, mut rx) = mpsc::channel(64);
        let mut io = tokio::io::join(wire, tokio::io::sink());
        let mut buf = BytesMut::new();
        let result = pump_body(&mut io, &mut buf, framing, None, tx).await;
        let mut got = Vec::new();
        while let Ok(Ok(piece)) = rx.try_recv() {
            got.extend_from_slice(&piece);
        }
        (result, got)
    }

    #[tokio::test]
    async fn chunked_bodies_decode_and_bad_ones_fail() {
        let (result, got) = pumped(
            Framing::Chunked,
            b"5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-T: 1\r\n\r\n",
        )
        .await;
        assert!(result.is_ok());
        assert_eq!(got, b"hello!");
        for bad in [
            &b"5\r\nhelloX\r\n0\r\n\r\n"[..],
            b"z\r\n",
            b"5\r\nhel",
            b"10000000000000000\r\n",
        ] {
            assert!(pumped(Framing::Chunked, bad).await.0.is_err(), "{bad:?}");
        }
        let (result, got) = pumped(Framing::Length(3), b"abcdef").await;
        assert!(result.is_ok());
        assert_eq!(got, b"abc");
        assert!(pumped(Framing::Length(9), b"abc").await.0.is_err());
    }
}
