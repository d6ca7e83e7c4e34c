//! Reads: one page of a stream (shared with catch-up), long-poll, and SSE
//! (spec 08 §6–§8, §25). A live reader parks on its stream in the engine
//! and costs nothing until that stream changes.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use strand::{HotRead, StreamErrorCode, StreamResponse};
use strand_engine::{AppendNotice, ReadFrom, WaitOutcome, WaiterPermit};

use crate::errors::Layout;
use crate::errors::{ApiError, ApiResult};
use crate::headers as h;
use crate::json_mode;
use crate::limits::LivePlace;
use crate::offsets;
use crate::page::PageBody;
use crate::query::ReadQuery;
use crate::reply::set_header;
use crate::sse::{self, DataEncoding};
use crate::state::AppState;
use crate::target::StreamRequest;
use crate::time::next_cursor;

/// One page of a stream, ready to render.
pub(crate) struct Page {
    /// Where it starts.
    pub offset: u64,
    /// Where the next read starts.
    pub next_offset: u64,
    /// The stream's content type.
    pub content_type: String,
    /// The page's body.
    pub body: PageBody,
    /// Whether it reached the tail.
    pub up_to_date: bool,
    /// Whether the stream is closed.
    pub closed: bool,
    /// Whether the page holds no data.
    pub empty: bool,
}

/// Reads one page; a JSON page ends on a value boundary and renders as an
/// array.
pub(crate) async fn read_page(
    state: &AppState,
    target: &StreamRequest,
    from: ReadFrom,
) -> ApiResult<Page> {
    let read = read_hot(state, target, from).await?;
    Ok(page_of(read))
}

async fn read_hot(state: &AppState, target: &StreamRequest, from: ReadFrom) -> ApiResult<HotRead> {
    let outcome = read_outcome(state, &target.id, from, state.config.read_page_bytes()).await?;
    outcome.map_err(|e| read_error(&e, target, state.cold.is_some()))
}

/// Reads a page wherever its bytes live: the hot buffer (zero-copy) and,
/// below it, the cold tier the engine was given (`ColdTier::install`), a
/// fork's inherited range included.
pub(crate) async fn read_outcome(
    state: &AppState,
    id: &strand::BucketStreamId,
    from: ReadFrom,
    max_len: usize,
) -> ApiResult<strand_engine::ReadOutcome> {
    Ok(state.engine.read(id.clone(), from, max_len).await?)
}

fn read_error(e: &StreamResponse, target: &StreamRequest, cold: bool) -> ApiError {
    match (e.error_code(), e) {
        // With a cold tier the message says what failed (the store); the
        // client retries.
        (Some(StreamErrorCode::InvalidColdFlush), StreamResponse::Error { message, .. })
            if cold =>
        {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message.clone())
                .with_header(header::RETRY_AFTER, "1")
        }
        (Some(StreamErrorCode::InvalidColdFlush), _) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this range is in the cold tier, which this server does not serve \
             (start it with --cold-dir or --cold-url)",
        ),
        _ => ApiError::from_machine(e, target.layout),
    }
}

fn page_of(mut read: HotRead) -> Page {
    let json = strand::is_json_record_content_type(&read.content_type);
    if json && !read.up_to_date {
        let whole = json_mode::whole_values_len(&read.slices);
        trim_slices(&mut read.slices, whole);
        read.next_offset = read.offset + u64::try_from(whole).unwrap_or(0);
        read.up_to_date = false;
    }
    let empty = read.slices.iter().all(Bytes::is_empty);
    let body = if json {
        PageBody::Rendered(json_mode::render_array(&read.slices))
    } else {
        PageBody::Slices(read.slices)
    };
    Page {
        offset: read.offset,
        next_offset: read.next_offset,
        content_type: read.content_type,
        body,
        up_to_date: read.up_to_date,
        closed: read.closed,
        empty,
    }
}

fn trim_slices(slices: &mut Vec<Bytes>, mut keep: usize) {
    let mut out = Vec::with_capacity(slices.len());
    for s in slices.drain(..) {
        if keep == 0 {
            break;
        }
        let take = keep.min(s.len());
        out.push(s.slice(..take));
        keep -= take;
    }
    *slices = out;
}

/// The places a live reader holds: the node's and its token's.
struct LivePermit {
    _node: WaiterPermit,
    _token: Option<LivePlace>,
    _counted: crate::metrics::LiveReader,
}

/// Takes a live reader's places; `mode` (`long-poll`, `sse`) labels it in
/// the metrics while it holds them.
fn permit(state: &AppState, target: &StreamRequest, mode: &'static str) -> ApiResult<LivePermit> {
    let token = match &target.subject {
        Some(subject) => state.limits.live_place(subject)?,
        None => None,
    };
    let node = state.engine.waiter_permit().map_err(ApiError::from)?;
    Ok(LivePermit {
        _node: node,
        _token: token,
        _counted: state.metrics.live_reader(mode),
    })
}

/// `live=long-poll`: data now, or wait for it until the timeout.
pub(crate) async fn long_poll(
    state: &AppState,
    target: &StreamRequest,
    query: ReadQuery,
) -> ApiResult {
    let Some(offset_text) = query.offset.as_deref() else {
        return Err(ApiError::bad_request("live=long-poll needs an offset"));
    };
    let mut from = read_from(Some(offset_text), target.layout)?;
    // `offset=now` names a different position each time: never cached.
    let caching = if from == ReadFrom::Tail {
        "no-store"
    } else {
        cache_control(state)
    };
    let deadline = Instant::now() + state.config.long_poll_timeout();
    let mut _permit = None;
    let mut shutdown = state.shutdown.clone();
    let mut pending: Option<HotRead> = None;
    loop {
        let page = match pending.take() {
            Some(read) => page_of(read),
            None => read_page(state, target, from).await?,
        };
        let cursor = next_cursor(state.engine.now_ms(), query.cursor.as_deref()).to_string();
        if !page.empty || page.closed {
            let status = if page.empty {
                StatusCode::NO_CONTENT
            } else {
                StatusCode::OK
            };
            let closed_end = page.closed && page.up_to_date;
            let content_type = page.content_type.clone();
            let mut out = if page.empty {
                status.into_response()
            } else {
                page.body.into_response_body(status)
            };
            set_header(out.headers_mut(), header::CONTENT_TYPE, content_type);
            set_header(
                out.headers_mut(),
                h::NEXT_OFFSET,
                offsets::render(page.next_offset),
            );
            if page.up_to_date {
                set_header(out.headers_mut(), h::UP_TO_DATE, "true");
            }
            if closed_end {
                set_header(out.headers_mut(), h::CLOSED, "true");
            }
            set_header(out.headers_mut(), h::CURSOR, cursor);
            set_header(out.headers_mut(), header::CACHE_CONTROL, caching);
            return Ok(out);
        }
        let now = Instant::now();
        let timed_out = |offset: u64, cursor: String| {
            let mut out = StatusCode::NO_CONTENT.into_response();
            set_header(out.headers_mut(), h::NEXT_OFFSET, offsets::render(offset));
            set_header(out.headers_mut(), h::UP_TO_DATE, "true");
            set_header(out.headers_mut(), h::CURSOR, cursor);
            set_header(out.headers_mut(), header::CACHE_CONTROL, caching);
            out
        };
        if now >= deadline || *shutdown.borrow() {
            return Ok(timed_out(page.next_offset, cursor));
        }
        if _permit.is_none() {
            _permit = Some(permit(state, target, "long-poll")?);
        }
        from = continue_at(target.layout, page.next_offset);
        let wait = state
            .engine
            .wait(target.id.clone(), page.next_offset, deadline - now);
        let outcome = tokio::select! {
            outcome = wait => outcome?,
            _ = shutdown.changed() => WaitOutcome::Shutdown,
        };
        match outcome {
            WaitOutcome::Changed => {}
            WaitOutcome::Appended(notice) => {
                pending = Some(notice_read(notice, page.content_type));
            }
            WaitOutcome::TimedOut | WaitOutcome::Shutdown => {
                // A last look, so an append racing the deadline is not lost.
                let page = read_page(state, target, from).await?;
                if page.empty && !page.closed {
                    return Ok(timed_out(page.next_offset, cursor));
                }
            }
        }
    }
}

/// Where a reader continues: on the Durable Streams mount a page ends on
/// a message boundary (`ReadFrom::Within`), so each offset it hands out is
/// one a client may resume from.
fn continue_at(layout: Layout, offset: u64) -> ReadFrom {
    match layout {
        Layout::DurableStreams => ReadFrom::Within(offset),
        Layout::Bucketed => ReadFrom::Offset(offset),
    }
}

/// Resolves a query's offset text. On the Durable Streams mount an offset
/// is read as the protocol's reference server reads it: from the start of
/// the message that holds it, from the tail when it is beyond
/// (`ReadFrom::Within`), so offsets clients compute (one past a snapshot's
/// offset) work; the bucketed layout reads exact byte offsets.
pub(crate) fn read_from(text: Option<&str>, layout: Layout) -> Result<ReadFrom, ApiError> {
    let from = match text {
        None => Ok(ReadFrom::Start),
        Some(t) => offsets::parse(t).map_err(|e| match e {
            offsets::OffsetError::Malformed => {
                ApiError::bad_request(format!("invalid offset {t:?}"))
            }
            offsets::OffsetError::TooLarge => {
                ApiError::bad_request(format!("offset {t:?} is beyond any stream"))
            }
        }),
    }?;
    Ok(match from {
        ReadFrom::Offset(offset) => continue_at(layout, offset),
        from => from,
    })
}

/// The read an append notice stands for: its bytes, at the tail they made.
fn notice_read(notice: AppendNotice, content_type: String) -> HotRead {
    HotRead {
        offset: notice.offset,
        next_offset: notice.next_offset,
        content_type,
        slices: vec![notice.payload],
        up_to_date: true,
        closed: notice.closed,
    }
}

/// The `Cache-Control` of catch-up and long-poll responses (PROTOCOL
/// §10.1): the bytes at an offset never change, and each long-poll answer
/// carries a new cursor, so caches may keep them a minute and serve them
/// stale while they revalidate; only the client's own cache with
/// authentication on, since each token may see different streams.
pub(crate) fn cache_control(state: &AppState) -> &'static str {
    if state.verifier.is_some() {
        "private, max-age=60, stale-while-revalidate=300"
    } else {
        "public, max-age=60, stale-while-revalidate=300"
    }
}

/// `live=sse`: catch up, then stream new data as it arrives, a control
/// event after every data event.
pub(crate) async fn sse(state: &AppState, target: &StreamRequest, query: ReadQuery) -> ApiResult {
    let Some(offset_text) = query.offset.as_deref() else {
        return Err(ApiError::bad_request("live=sse needs an offset"));
    };
    let from = read_from(Some(offset_text), target.layout)?;
    // The first read answers 404 and friends before the stream starts.
    let first = read_hot(state, target, from).await?;
    let permit = permit(state, target, "sse")?;
    let encoding = DataEncoding::for_content_type(&first.content_type);
    let content_type = first.content_type.clone();
    let now = tokio::time::Instant::now();
    let ends = now + Duration::from_millis(state.config.sse_max_duration_ms.max(1));
    let mut shutdown = state.shutdown.clone();
    let session = SseSession {
        state: state.clone(),
        target: StreamRequest {
            id: target.id.clone(),
            name: target.name.clone(),
            layout: target.layout,
            path: String::new(),
            authority: None,
            subject: target.subject.clone(),
        },
        encoding,
        content_type,
        cursor: query.cursor.clone(),
        pending: Some(first),
        offset: 0,
        done: false,
        announced: false,
        caught_up: false,
        subscription: None,
        ends,
        last_sent: now,
        idle: Box::pin(tokio::time::sleep_until(
            (now + state.config.long_poll_timeout()).min(ends),
        )),
        shutdown: Box::pin(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        }),
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(session, |mut s| async move {
        let chunk = s.next_chunk().await?;
        Some((Ok::<Bytes, std::convert::Infallible>(chunk), s))
    });
    let mut out = Response::new(Body::from_stream(stream));
    set_header(out.headers_mut(), header::CONTENT_TYPE, "text/event-stream");
    set_header(out.headers_mut(), header::CACHE_CONTROL, "no-cache");
    // Proxies that buffer responses (nginx) would hold events back.
    set_header(out.headers_mut(), h::X_ACCEL_BUFFERING, "no");
    if encoding == DataEncoding::Base64 {
        set_header(out.headers_mut(), h::SSE_DATA_ENCODING, "base64");
    }
    Ok(out)
}

/// Bytes a control event takes, with its cursor (about 130), rounded up.
const CONTROL_EVENT_BYTES: usize = 192;
/// Bytes a data event adds to its payload when the payload is one line
/// (`event: data`, `data:` and the newlines); more lines grow the buffer.
const DATA_EVENT_OVERHEAD: usize = 24;

struct SseSession {
    state: AppState,
    target: StreamRequest,
    encoding: DataEncoding,
    content_type: String,
    cursor: Option<String>,
    pending: Option<HotRead>,
    offset: u64,
    done: bool,
    announced: bool,
    /// The last page was up to date (or empty): park before reading again.
    caught_up: bool,
    /// Parked at `offset` in the stream's group, while the reader keeps up.
    subscription: Option<strand_engine::Subscription>,
    /// When the response ends (`--sse-max-duration-ms`).
    ends: tokio::time::Instant,
    /// When the last chunk went out: a control event follows a quiet
    /// `long_poll_timeout` after it.
    last_sent: tokio::time::Instant,
    /// Fires at the next quiet deadline (or `ends`), or earlier: it is
    /// not moved for each event, only re-armed when it fires early.
    idle: Pin<Box<tokio::time::Sleep>>,
    /// Resolves once the server shuts down.
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
    _permit: LivePermit,
}

impl SseSession {
    /// The next bytes to send, or `None` to end the response.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        let chunk = self.next_chunk_inner().await;
        if chunk.is_some() {
            self.last_sent = tokio::time::Instant::now();
        }
        chunk
    }

    async fn next_chunk_inner(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        loop {
            if self.caught_up {
                // Wait on the stream's subscription right away: the group
                // answers at once if the tail moved meanwhile, so a read
                // that would find nothing new is not needed, and while the
                // reader keeps up each append's bytes come without asking
                // the group again.
                self.caught_up = false;
                if tokio::time::Instant::now() >= self.ends {
                    return None;
                }
                let subscription = match self.subscription.as_mut() {
                    Some(subscription) => subscription,
                    None => self.subscription.insert(
                        self.state
                            .engine
                            .subscribe(self.target.id.clone(), self.offset)
                            .ok()?,
                    ),
                };
                // The shutdown signal and the idle timer live as long as
                // the session: an event registers no waiter and no timer
                // anew. The timer is re-armed only when it fires early
                // (events came since it was set).
                let idle = self.state.config.long_poll_timeout();
                let outcome = loop {
                    tokio::select! {
                        outcome = subscription.next_event() => break outcome,
                        () = self.shutdown.as_mut() => break WaitOutcome::Shutdown,
                        () = self.idle.as_mut() => {
                            let now = tokio::time::Instant::now();
                            if now >= self.ends {
                                return None;
                            }
                            let due = (self.last_sent + idle).min(self.ends);
                            if now >= due {
                                self.idle.as_mut().reset((now + idle).min(self.ends));
                                break WaitOutcome::TimedOut;
                            }
                            self.idle.as_mut().reset(due);
                        }
                    }
                };
                match outcome {
                    WaitOutcome::Changed => self.subscription = None,
                    WaitOutcome::Appended(notice)
                        if !notice.closed && !notice.payload.is_empty() =>
                    {
                        return Some(self.shared_events(&notice));
                    }
                    WaitOutcome::Appended(notice) => {
                        self.pending = Some(notice_read(notice, self.content_type.clone()));
                    }
                    WaitOutcome::Shutdown => return None,
                    WaitOutcome::TimedOut => {
                        self.caught_up = true;
                        let mut out = BytesMut::with_capacity(CONTROL_EVENT_BYTES);
                        self.push_control(&mut out, self.offset, true, false);
                        return Some(out.freeze());
                    }
                }
            }
            let read = match self.pending.take() {
                Some(read) => read,
                None => {
                    // A read moves the offset; subscribe anew from there.
                    self.subscription = None;
                    let outcome = read_outcome(
                        &self.state,
                        &self.target.id,
                        continue_at(self.target.layout, self.offset),
                        self.state.config.read_page_bytes(),
                    )
                    .await
                    .ok()?;
                    outcome.ok()?
                }
            };
            let page = page_of(read);
            self.offset = page.next_offset;
            // Room for the control event; a data event reserves its own.
            let mut out = BytesMut::with_capacity(CONTROL_EVENT_BYTES);
            if !page.empty {
                push_data(&mut out, self.encoding, page.body);
            }
            let closed_end = page.closed && page.up_to_date;
            let mut events = u64::from(!page.empty);
            if !page.empty || !self.announced || closed_end {
                self.push_control(&mut out, page.next_offset, page.up_to_date, closed_end);
                self.announced = true;
                events += 1;
            }
            self.state.metrics.sse_events(events);
            if closed_end {
                self.done = true;
            }
            // Up to date, or nothing to send: wait before reading again.
            self.caught_up = page.up_to_date || out.is_empty();
            if !out.is_empty() {
                return Some(out.freeze());
            }
        }
    }

    /// Appends a control event at `next_offset`, with the next cursor.
    fn push_control(&self, out: &mut BytesMut, next_offset: u64, up_to_date: bool, closed: bool) {
        push_control(out, next_offset, self.next_cursor(), up_to_date, closed);
    }

    fn next_cursor(&self) -> u64 {
        next_cursor(self.state.engine.now_ms(), self.cursor.as_deref())
    }

    /// The events of an append the subscription handed over, which left
    /// the reader up to date: its data event and a control event. The
    /// first subscriber woken with the notice encodes both; every other
    /// one sends the same bytes when its control event would be the same
    /// (its cursor is: the usual case, every reader that sent no cursor,
    /// within one cursor interval), else the shared data event and a
    /// control event of its own.
    fn shared_events(&mut self, notice: &AppendNotice) -> Bytes {
        let cursor = self.next_cursor();
        let shared = notice.rendering.get_or_init(|| {
            SharedEvents::render(self.encoding, &self.content_type, notice, cursor)
        });
        self.offset = notice.next_offset;
        self.announced = true;
        self.caught_up = true;
        self.state.metrics.sse_events(2);
        // A notice reaches the readers of one stream, so of one encoding;
        // only this code fills the slot, so it holds `SharedEvents`.
        let Some(shared) = shared else {
            return SharedEvents::render(self.encoding, &self.content_type, notice, cursor).bytes;
        };
        if shared.cursor == cursor {
            return shared.bytes.clone();
        }
        let data = shared.bytes.slice(..shared.data_len);
        let mut out = BytesMut::with_capacity(data.len() + CONTROL_EVENT_BYTES);
        out.extend_from_slice(&data);
        push_control(&mut out, notice.next_offset, cursor, true, false);
        out.freeze()
    }
}

/// An append's events as its subscribers receive them: the data event,
/// then the control event that leaves a reader up to date at the append's
/// end ([`SseSession::shared_events`]).
struct SharedEvents {
    /// Both events.
    bytes: Bytes,
    /// Bytes of the data event (the rest is the control event).
    data_len: usize,
    /// The cursor the control event carries.
    cursor: u64,
}

impl SharedEvents {
    fn render(
        encoding: DataEncoding,
        content_type: &str,
        notice: &AppendNotice,
        cursor: u64,
    ) -> Self {
        let page = page_of(notice_read(notice.clone(), content_type.to_owned()));
        let mut out = BytesMut::with_capacity(CONTROL_EVENT_BYTES);
        push_data(&mut out, encoding, page.body);
        let data_len = out.len();
        push_control(&mut out, notice.next_offset, cursor, true, false);
        Self {
            bytes: out.freeze(),
            data_len,
            cursor,
        }
    }
}

/// Appends the data event of a page's body.
fn push_data(out: &mut BytesMut, encoding: DataEncoding, body: PageBody) {
    let payload = match body {
        PageBody::Rendered(b) => b,
        PageBody::Slices(slices) => concat(slices),
    };
    match encoding {
        DataEncoding::Base64 => {
            let text = base64::engine::general_purpose::STANDARD.encode(&payload);
            out.reserve(text.len() + DATA_EVENT_OVERHEAD);
            sse::push_event(out, "data", text.as_bytes());
        }
        DataEncoding::Text | DataEncoding::Json => {
            out.reserve(payload.len() + DATA_EVENT_OVERHEAD);
            sse::push_event(out, "data", &payload);
        }
    }
}

/// Appends a control event at `next_offset` carrying `cursor`.
fn push_control(out: &mut BytesMut, next_offset: u64, cursor: u64, up_to_date: bool, closed: bool) {
    let next = offsets::render(next_offset);
    let cursor = cursor.to_string();
    let control = sse::control_json(&next, Some(&cursor), up_to_date, closed);
    sse::push_event(out, "control", control.as_bytes());
}

fn concat(slices: Vec<Bytes>) -> Bytes {
    if slices.len() == 1 {
        return slices.into_iter().next().unwrap_or_default();
    }
    let mut out = BytesMut::with_capacity(slices.iter().map(Bytes::len).sum());
    for s in slices {
        out.extend_from_slice(&s);
    }
    out.freeze()
}
