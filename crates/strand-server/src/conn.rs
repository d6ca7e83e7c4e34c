//! Connections below HTTP: every accepted socket is served by hyper under a
//! watchdog that closes it when its client holds it without making
//! progress, and is closed so that a response already written survives.
//!
//! A connection is in one of four phases, each with its own limit:
//!
//! * **idle** (no request in service, nothing of a next one received):
//!   closed after the idle timeout (`--idle-timeout-ms`);
//! * **head** (bytes of a request head received, no request in service):
//!   closed when the head is not complete within the head timeout
//!   (`--request-head-timeout-ms`) of its first byte;
//! * **body** (a request in service whose body is still arriving): closed
//!   when no byte arrives for the body timeout (`--body-timeout-ms`), so a
//!   large upload that keeps making progress is never cut;
//! * **response** (every body received, a response in service): never
//!   closed for being slow to produce (a long-poll or SSE response is not
//!   idle), only when a write has waited for the client to read for the
//!   send timeout (`--send-timeout-ms`).
//!
//! The watchdog wakes at the phase's deadline (at the latest every
//! [`Timeouts::recheck`]) and reads the connection's counters, which the
//! socket wrapper ([`WatchedIo`]), the request-body wrapper
//! ([`TrackedBody`]) and the response-body guard ([`Guarded`]) keep as the
//! connection runs. No timer is armed per request.
//!
//! Closing: a connection the server closes while its client may still be
//! sending (a `Connection: close` response to a request followed by more
//! bytes, a timeout, a parse error) is shut for writing and drained for a
//! moment ([`LINGER`]) before the socket is closed: closing with unread
//! bytes makes the kernel send a reset, which can destroy the response the
//! client has not read yet.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// How long a connection the server closes is drained of what its client
/// still sends before the socket closes (see the module docs).
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// The most bytes a connection's HTTP/1.1 read buffer grows to (and so
/// the largest request head; a longer one is answered 431), and the
/// most a response queues for writing before it waits for the socket.
/// hyper's default is about 400 KiB; with `--max-connections` 20 000,
/// this keeps what the connections' buffers can hold at once to 1.25
/// GiB. Bodies are read through it in pieces, whatever their size.
pub(crate) const MAX_CONNECTION_BUFFER: usize = 64 << 10;
/// The most bytes a closing connection is drained of.
const LINGER_BYTES: usize = 1 << 20;

/// The limits of a connection's phases (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// A request head must be complete this long after its first byte.
    pub head: Duration,
    /// A request body may pause this long between bytes.
    pub body: Duration,
    /// A write may wait this long for the client to read.
    pub send: Duration,
    /// A connection with nothing in service may stay open this long.
    pub idle: Duration,
}

impl Timeouts {
    /// The longest the watchdog sleeps before it looks again (a phase can
    /// change to one with an earlier deadline while it sleeps).
    pub fn recheck(&self) -> Duration {
        self.head
            .min(self.body)
            .min(self.send)
            .min(self.idle)
            .max(Duration::from_millis(1))
    }
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expired {
    /// A request head was not complete in time.
    Head,
    /// A request body stopped arriving.
    Body,
    /// The client did not read a response.
    Send,
    /// Nothing happened on the connection.
    Idle,
}

impl Expired {
    /// The expiry's name for the log.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Head => "request head timeout",
            Self::Body => "request body timeout",
            Self::Send => "send timeout",
            Self::Idle => "idle timeout",
        }
    }
}

/// A connection's progress counters (module docs). Times are milliseconds
/// since the connection was accepted; `0` in the `…_at` fields that allow
/// it means "not now", so they store the time plus one.
#[derive(Debug)]
pub(crate) struct Watch {
    started: Instant,
    /// When a byte last arrived.
    last_read: AtomicU64,
    /// The first byte received while nothing was in service (plus one).
    head_at: AtomicU64,
    /// When the last request in service finished.
    idle_since: AtomicU64,
    /// When a write started waiting for the client (plus one).
    stalled_at: AtomicU64,
    /// Requests in service, their responses included.
    busy: AtomicU32,
    /// Requests in service whose bodies are still arriving.
    receiving: AtomicU32,
}

impl Watch {
    /// The counters of a connection accepted now.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            last_read: AtomicU64::new(0),
            head_at: AtomicU64::new(0),
            idle_since: AtomicU64::new(0),
            stalled_at: AtomicU64::new(0),
            busy: AtomicU32::new(0),
            receiving: AtomicU32::new(0),
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn read(&self) {
        let now = self.now();
        self.last_read.store(now, Relaxed);
        if self.busy.load(Relaxed) == 0 && self.head_at.load(Relaxed) == 0 {
            self.head_at.store(now + 1, Relaxed);
        }
    }

    /// A request enters service: the guard its response carries until the
    /// response is sent (or dropped).
    pub(crate) fn request(self: &Arc<Self>) -> BusyGuard {
        self.busy.fetch_add(1, Relaxed);
        self.head_at.store(0, Relaxed);
        BusyGuard(Arc::clone(self))
    }

    /// Completes once `stop` is true and the connection has no request in
    /// service nor a head arriving (then closing it loses nothing): how a
    /// stopping server ends the idle connections of the lean engine.
    /// Checked every 10 ms after the stop (a stop happens once).
    pub(crate) async fn idle_after(&self, stop: &mut tokio::sync::watch::Receiver<bool>) {
        if stop.wait_for(|stopped| *stopped).await.is_err() {
            // The server is gone without a stop: nothing to wait for.
            return std::future::pending().await;
        }
        while self.busy.load(Relaxed) > 0 || self.head_at.load(Relaxed) != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// When the connection expires in its present phase, and why; `None`
    /// while a response is being produced and its writes go through.
    fn deadline(&self, limits: &Timeouts) -> Option<(u64, Expired)> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if self.busy.load(Relaxed) == 0 {
            return Some(match self.head_at.load(Relaxed) {
                0 => (
                    self.idle_since
                        .load(Relaxed)
                        .saturating_add(ms(limits.idle)),
                    Expired::Idle,
                ),
                at => ((at - 1).saturating_add(ms(limits.head)), Expired::Head),
            });
        }
        if self.receiving.load(Relaxed) > 0 {
            return Some((
                self.last_read.load(Relaxed).saturating_add(ms(limits.body)),
                Expired::Body,
            ));
        }
        match self.stalled_at.load(Relaxed) {
            0 => None,
            at => Some(((at - 1).saturating_add(ms(limits.send)), Expired::Send)),
        }
    }

    /// Completes when the connection has expired, with the reason.
    pub(crate) async fn expired(&self, limits: Timeouts) -> Expired {
        let recheck = u64::try_from(limits.recheck().as_millis()).unwrap_or(u64::MAX);
        loop {
            let now = self.now();
            let wake = match self.deadline(&limits) {
                Some((at, why)) if now >= at => return why,
                Some((at, _)) => at.min(now.saturating_add(recheck)),
                None => now.saturating_add(recheck),
            };
            tokio::time::sleep_until(self.started + Duration::from_millis(wake)).await;
        }
    }
}

/// Keeps a request counted as in service ([`Watch::request`]); dropping it
/// ends the service.
#[derive(Debug)]
pub(crate) struct BusyGuard(Arc<Watch>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let watch = &self.0;
        if watch.busy.fetch_sub(1, Relaxed) == 1 {
            watch.idle_since.store(watch.now(), Relaxed);
            watch.head_at.store(0, Relaxed);
        }
    }
}

/// A request body that counts as arriving ([`Watch`]) until it ends, fails
/// or is dropped.
#[derive(Debug)]
pub(crate) struct TrackedBody<B> {
    inner: B,
    watch: Option<Arc<Watch>>,
}

impl<B: Body + Unpin> TrackedBody<B> {
    /// Wraps a request's body; one that is already complete (no body, or
    /// an empty one) is not counted.
    pub(crate) fn new(inner: B, watch: &Arc<Watch>) -> Self {
        let watch = (!inner.is_end_stream()).then(|| {
            watch.receiving.fetch_add(1, Relaxed);
            Arc::clone(watch)
        });
        Self { inner, watch }
    }
}

impl<B> TrackedBody<B> {
    /// The body has ended (or failed, or gone): it no longer arrives.
    fn done(&mut self) {
        if let Some(watch) = self.watch.take() {
            watch.receiving.fetch_sub(1, Relaxed);
        }
    }
}

impl<B> Drop for TrackedBody<B> {
    fn drop(&mut self) {
        self.done();
    }
}

impl<B: Body + Unpin> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None | Some(Err(_))) => self.done(),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.done(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that keeps its request in service ([`BusyGuard`])
/// until it is sent or dropped.
#[derive(Debug)]
pub(crate) struct Guarded<B> {
    inner: B,
    _guard: BusyGuard,
}

impl<B> Guarded<B> {
    /// Wraps a response body.
    pub(crate) fn new(inner: B, guard: BusyGuard) -> Self {
        Self {
            inner,
            _guard: guard,
        }
    }
}

impl<B: Body + Unpin> Body for Guarded<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The accepted socket: reads and writes go through to it while the
/// [`Watch`] notes progress; when it is dropped before its client closed
/// its side, it lingers (module docs).
#[derive(Debug)]
pub(crate) struct WatchedIo {
    stream: Option<TcpStream>,
    watch: Arc<Watch>,
    /// The connection's place under `--max-connections`, given back when
    /// the connection is done (before it lingers).
    permit: Option<OwnedSemaphorePermit>,
    /// The client closed its side (a read returned end of file).
    eof: bool,
}

impl WatchedIo {
    /// Wraps an accepted socket, holding its connection permit.
    pub(crate) fn new(stream: TcpStream, watch: Arc<Watch>, permit: OwnedSemaphorePermit) -> Self {
        Self {
            stream: Some(stream),
            watch,
            permit: Some(permit),
            eof: false,
        }
    }

    fn stream(&mut self) -> Pin<&mut TcpStream> {
        // Present until drop takes it.
        #[allow(clippy::unwrap_used)]
        Pin::new(self.stream.as_mut().unwrap())
    }

    fn wrote(&self, polled: &Poll<std::io::Result<usize>>) {
        match polled {
            Poll::Pending => {
                if self.watch.stalled_at.load(Relaxed) == 0 {
                    self.watch.stalled_at.store(self.watch.now() + 1, Relaxed);
                }
            }
            Poll::Ready(_) => {
                if self.watch.stalled_at.load(Relaxed) != 0 {
                    self.watch.stalled_at.store(0, Relaxed);
                }
            }
        }
    }
}

impl AsyncRead for WatchedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = self.stream().poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            if buf.filled().len() > before {
                self.watch.read();
            } else if buf.remaining() > 0 {
                self.eof = true;
            }
        }
        polled
    }
}

impl AsyncWrite for WatchedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = self.stream().poll_write(cx, buf);
        self.wrote(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = self.stream().poll_write_vectored(cx, bufs);
        self.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream
            .as_ref()
            .is_some_and(TcpStream::is_write_vectored)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.stream().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.stream().poll_shutdown(cx)
    }
}

impl Drop for WatchedIo {
    fn drop(&mut self) {
        drop(self.permit.take());
        let Some(stream) = self.stream.take() else {
            return;
        };
        if self.eof {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(linger(stream));
    }
}

/// Shuts a socket for writing, reads and discards what its client still
/// sends for up to [`LINGER`], then closes it.
async fn linger(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream.shutdown().await;
    let _ = tokio::time::timeout(LINGER, async {
        let mut buf = [0u8; 4096];
        let mut drained = 0usize;
        while drained < LINGER_BYTES {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn limits() -> Timeouts {
        Timeouts {
            head: Duration::from_millis(100),
            body: Duration::from_millis(300),
            send: Duration::from_millis(400),
            idle: Duration::from_millis(1000),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn phases_choose_their_deadlines() {
        let watch = Watch::new();
        let l = limits();
        assert_eq!(watch.deadline(&l), Some((1000, Expired::Idle)));
        tokio::time::advance(Duration::from_millis(50)).await;
        watch.read();
        assert_eq!(watch.deadline(&l), Some((150, Expired::Head)));
        let guard = watch.request();
        // Busy without a body: a response in the making has no deadline.
        assert_eq!(watch.deadline(&l), None);
        watch.receiving.fetch_add(1, Relaxed);
        assert_eq!(watch.deadline(&l), Some((350, Expired::Body)));
        watch.receiving.fetch_sub(1, Relaxed);
        watch.stalled_at.store(61, Relaxed);
        assert_eq!(watch.deadline(&l), Some((460, Expired::Send)));
        watch.stalled_at.store(0, Relaxed);
        tokio::time::advance(Duration::from_millis(100)).await;
        drop(guard);
        assert_eq!(watch.deadline(&l), Some((1150, Expired::Idle)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_expires_and_a_busy_one_does_not() {
        let watch = Watch::new();
        let l = limits();
        assert_eq!(watch.expired(l).await, Expired::Idle);
        let _guard = watch.request();
        let waited = tokio::time::timeout(Duration::from_secs(60), watch.expired(l)).await;
        assert!(waited.is_err(), "a response in the making never expires");
    }
}
