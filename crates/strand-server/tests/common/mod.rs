//! A real server on an ephemeral loopback port, a manual clock, a small
//! HTTP/1.1 client, and [`eventually`], the one way the integration tests
//! wait for what another task or process does.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use strand_engine::{Engine, ManualClock};
use strand_server::{Config, engine_config, serve_with_cold};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// 2026-01-01T00:00:00Z.
pub const START_MS: u64 = 1_767_225_600_000;

/// The HTTP engine the tests' servers run: `STRAND_HTTP_ENGINE` as the
/// binary reads it (`hyper`; anything else is lean, the default), so one
/// variable runs the suite's servers — spawned ones, and in-process ones
/// whose test does not choose an engine — on either engine.
pub fn http_engine() -> strand_server::config::HttpEngine {
    match std::env::var("STRAND_HTTP_ENGINE").as_deref() {
        Ok("hyper") => strand_server::config::HttpEngine::Hyper,
        _ => strand_server::config::HttpEngine::Lean,
    }
}

/// A server under test.
pub struct TestServer {
    pub addr: SocketAddr,
    /// The admin listener (`--admin-listen`): the operator routes.
    pub admin_addr: SocketAddr,
    pub clock: ManualClock,
    pub engine: Engine,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    /// Starts a server with a short long-poll timeout.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Starts a server after `tweak` adjusted its configuration.
    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config::for_listen("127.0.0.1:0".parse().unwrap());
        config.long_poll_timeout_ms = 300;
        // The engine is in memory: no default cold tier under ./strand-data
        // (a test that wants one names its directory).
        config.memory = true;
        config.http_engine = http_engine();
        tweak(&mut config);
        let cold = config.cold_tier().unwrap();
        Self::start_cold(config, cold).await
    }

    /// Starts a server with this configuration and cold tier (tests that
    /// wrap the cold backend build it themselves).
    pub async fn start_cold(config: Config, cold: Option<strand_cold::ColdTier>) -> Self {
        let listener = strand_server::listen(config.listen).unwrap();
        let addr = listener.local_addr().unwrap();
        let admin = strand_server::listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let admin_addr = admin.local_addr().unwrap();
        let listeners = strand_server::Listeners {
            client: listener,
            admin: Some(admin),
        };
        let clock = ManualClock::new(START_MS);
        let engine = Engine::start_with_clock(engine_config(&config), Arc::new(clock.clone()));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_with_cold(
            config,
            listeners,
            engine.clone(),
            cold,
            async move {
                let _ = stopped.await;
            },
        ));
        Self {
            addr,
            admin_addr,
            clock,
            engine,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the server and waits for it to end.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("server stops within 10 s")
                .unwrap()
                .unwrap();
        }
    }

    /// Starts a request.
    pub fn req(&self, method: Method, path: &str) -> Req {
        request(self.addr, method, path)
    }

    /// Starts a request to the admin listener (the operator routes).
    pub fn admin(&self, method: Method, path: &str) -> Req {
        request(self.admin_addr, method, path)
    }

    pub fn get(&self, path: &str) -> Req {
        self.req(Method::GET, path)
    }
    pub fn put(&self, path: &str) -> Req {
        self.req(Method::PUT, path)
    }
    pub fn post(&self, path: &str) -> Req {
        self.req(Method::POST, path)
    }
    pub fn head(&self, path: &str) -> Req {
        self.req(Method::HEAD, path)
    }
    pub fn delete(&self, path: &str) -> Req {
        self.req(Method::DELETE, path)
    }

    /// Waits until exactly `n` live readers (long-polls, SSE sessions) are
    /// parked in the engine: what a test waits for before it appends,
    /// closes or stops under them.
    pub async fn parked(&self, n: usize) {
        eventually(
            &format!("{n} parked live readers"),
            Duration::from_secs(10),
            || async { (self.engine.parked_waiters().await.unwrap() == n).then_some(()) },
        )
        .await;
    }
}

pub use strand_testkit::eventually;

/// Starts a request to `addr`.
pub fn request(addr: SocketAddr, method: Method, path: &str) -> Req {
    Req {
        addr,
        builder: Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr.to_string()),
        body: Bytes::new(),
    }
}

/// A request being built.
pub struct Req {
    addr: SocketAddr,
    builder: hyper::http::request::Builder,
    body: Bytes,
}

impl Req {
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.builder = self.builder.header(name, value);
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    pub fn text(self, body: &str) -> Self {
        self.header("content-type", "text/plain")
            .body(Bytes::copy_from_slice(body.as_bytes()))
    }

    /// Sends the request and returns the response head with a body still
    /// to be read (for SSE).
    pub async fn open(self) -> hyper::Response<Incoming> {
        let stream = TcpStream::connect(self.addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let request = self.builder.body(Full::new(self.body)).unwrap();
        sender.send_request(request).await.unwrap()
    }

    /// Sends the request and reads the whole response.
    pub async fn send(self) -> Resp {
        let response = self.open().await;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Resp {
            status,
            headers,
            body,
        }
    }
}

/// A whole response.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl Resp {
    /// A header's value, if present.
    pub fn h(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// The body as text.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }

    /// The next offset header.
    pub fn next(&self) -> String {
        self.h("stream-next-offset").unwrap().to_owned()
    }
}

/// Reads SSE text from a response body until `stop` says enough or
/// `within` passes.
pub async fn read_sse(
    response: hyper::Response<Incoming>,
    within: Duration,
    stop: impl Fn(&str) -> bool,
) -> String {
    let mut body = response.into_body();
    let mut text = String::new();
    let _ = tokio::time::timeout(within, async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            if let Some(data) = frame.data_ref() {
                text.push_str(std::str::from_utf8(data).unwrap());
                if stop(&text) {
                    break;
                }
            }
        }
    })
    .await;
    text
}

/// The rendered offset of a byte position.
pub fn off(v: u64) -> String {
    strand_server::offsets::render(v)
}
