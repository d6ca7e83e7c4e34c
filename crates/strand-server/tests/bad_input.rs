//! Thousands of random requests — methods, paths, headers, bodies, some of
//! them not even HTTP — thrown at a live server over raw TCP, each client
//! half-closing after its request: every complete request is answered
//! (only non-HTTP input and truncated bodies may go unanswered, and the
//! test knows which it sent), no answer is a 5xx but 503, and the server
//! still serves a normal read afterwards.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::TestServer;
use hyper::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap()).unwrap()
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n)
            .map(|_| u8::try_from(self.next() & 0xff).unwrap())
            .collect()
    }
}

const METHODS: &[&str] = &[
    "GET", "PUT", "POST", "HEAD", "DELETE", "OPTIONS", "PATCH", "TRACE", "BREW", "get", "",
];
const PATHS: &[&str] = &[
    "/v1/stream/f",
    "/v1/stream/f2",
    "/v1/stream/",
    "/v1/stream/a/b",
    "/v1/stream/a/b/c/d",
    "/v1/stream/..",
    "/v1/stream/%2e%2e",
    "/v1/stream/%00",
    "/v1/stream/%ff%fe",
    "/v1/stream/%zz",
    "/acme",
    "/acme/s",
    "/acme/k/s",
    "/acme/s/append-batch",
    "/acme/k/$transaction",
    "/acme/s/snapshot",
    "/acme/s/snapshot/12",
    "/acme/s/snapshot/x",
    "/acme/s/retention/3",
    "/acme/s/attrs",
    "/acme/s/bootstrap",
    "/__strand/health",
    "/__strand/quota/acme",
    "/__strand/usage/acme",
    "/__strand/purge/zzzz",
    "/__strand/purge/default",
    "/__strand/purge/quiet",
    "/__strand/cold",
    "/__strand/cluster",
    "/__strand/raft/view",
    "/",
    "//",
    "/a/b/c/d/e/f",
    "*",
];
const QUERIES: &[&str] = &[
    "",
    "?offset=-1",
    "?offset=now",
    "?offset=",
    "?offset=0000000000000000_0000000000000000",
    "?offset=9999999999999999_9999999999999999",
    "?live=sse",
    "?live=long-poll&offset=now",
    "?live=sse&offset=-1",
    "?offset=-1&offset=now",
    "?cursor=abc&live=long-poll&offset=-1",
    "?%%%",
];
const HEADERS: &[&str] = &[
    "Content-Type: text/plain",
    "Content-Type: application/json",
    "Content-Type: ",
    "Content-Type: \u{1}",
    "Stream-TTL: 1",
    "Stream-TTL: -5",
    "Stream-TTL: 99999999999999999999",
    "Stream-Expires-At: 2030-01-01T00:00:00Z",
    "Stream-Expires-At: yesterday",
    "Stream-Closed: true",
    "Stream-Closed: maybe",
    "Stream-Seq: 5",
    "Producer-Id: p",
    "Producer-Epoch: 0",
    "Producer-Seq: 0",
    "Producer-Seq: 18446744073709551616",
    "Stream-Forked-From: /v1/stream/f",
    "If-None-Match: *",
    "Stream-Attrs: {",
    "Stream-Attrs: {\"title\":1}",
    "Stream-Record-Match: 0",
    "Prefer: return=minimal",
    "Stream-Snapshot-Match: ab",
    "Transfer-Encoding: chunked",
    "Content-Length: 5",
    "Content-Length: x",
    "X: \u{7f}",
];
const BODIES: &[&str] = &[
    "",
    "hello",
    "{}",
    "[]",
    "[1,2",
    "[{\"a\":1}]",
    "\0\0\0\x02ab",
    "{\"max_streams\":1}",
    "null",
];

async fn send_raw(addr: std::net::SocketAddr, request: Vec<u8>) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    stream.write_all(&request).await.ok()?;
    let _ = stream.shutdown().await;
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stream.read(&mut chunk).await {
            if n == 0 || buf.len() > 1 << 20 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&buf);
    let status = text.strip_prefix("HTTP/1.1 ")?.get(..3)?;
    status.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_requests_never_get_a_server_error() {
    let s = TestServer::start_with(|c| {
        c.long_poll_timeout_ms = 50;
        c.sse_max_duration_ms = 50;
        c.max_body_bytes = 4096;
    })
    .await;
    s.put("/v1/stream/f").text("seed").send().await;
    s.put("/acme/s").text("seed").send().await;
    // No random request can reach this one.
    s.put("/quiet/stream").text("seed").send().await;
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let (mut complete, mut answered, mut others_answered) = (0, 0, 0);
    for i in 0..3000 {
        let method = rng.pick(METHODS);
        let mut path = format!("{}{}", rng.pick(PATHS), rng.pick(QUERIES));
        if rng.below(10) == 0 {
            // Raw bytes in the request target.
            path.push_str(&String::from_utf8_lossy(&rng.bytes(8)));
        }
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n").into_bytes();
        // What the head says of its body: the Content-Length values it
        // gives, and whether it claims a chunked body.
        let mut lengths = Vec::new();
        let mut chunked = false;
        for _ in 0..rng.below(5) {
            let header = rng.pick(HEADERS);
            if let Some(value) = header.strip_prefix("Content-Length: ") {
                lengths.push(value.to_owned());
            }
            chunked |= header.starts_with("Transfer-Encoding");
            request.extend_from_slice(header.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        let body: Vec<u8> = if rng.below(4) == 0 {
            rng.bytes(300)
        } else {
            rng.pick(BODIES).as_bytes().to_vec()
        };
        if rng.below(8) != 0 {
            request.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
            lengths.push(body.len().to_string());
        }
        request.extend_from_slice(b"Connection: close\r\n\r\n");
        request.extend_from_slice(&body);
        let not_http = rng.below(20) == 0;
        if not_http {
            request = rng.bytes(200);
        }
        // A body shorter than its one agreed length never completes (the
        // client half-closes instead); a chunked claim over bytes that are
        // not chunks is not a whole body either. Every other request is
        // complete — malformed heads included, which get a 400 — and must
        // be answered.
        let truncated = match lengths.first() {
            Some(first) if lengths.iter().all(|l| l == first) => {
                first.parse::<usize>().is_ok_and(|n| body.len() < n)
            }
            _ => false,
        };
        let must_answer = !not_http && !chunked && !truncated;
        let status = send_raw(s.addr, request).await;
        if let Some(status) = status {
            assert!(
                status < 500 || status == 503,
                "request {i} answered {status}"
            );
        }
        if must_answer {
            complete += 1;
            assert!(status.is_some(), "complete request {i} got no answer");
            answered += 1;
        } else if status.is_some() {
            others_answered += 1;
        }
    }
    assert_eq!(answered, complete);
    assert!(
        complete > 2400,
        "only {complete} complete requests were sent"
    );
    println!(
        "{complete} complete requests, all answered; {others_answered} of {} others answered",
        3000 - complete
    );
    let read = s.get("/quiet/stream").send().await;
    assert_eq!((read.status, read.text()), (StatusCode::OK, "seed"));
    let created = s.put("/v1/stream/after-fuzz").text("ok").send().await;
    assert_eq!(created.status, StatusCode::CREATED);
    s.stop().await;
}

/// A request head larger than a connection's buffer (64 KiB) is answered
/// 431 rather than buffered whole; a large head within it is served, and
/// so is the next connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_over_64_kib_is_refused_with_431() {
    let s = TestServer::start().await;
    let head = |filler: usize| {
        format!(
            "PUT /v1/stream/big-head HTTP/1.1\r\nHost: test\r\nContent-Type: text/plain\r\n\
             X-Filler: {}\r\nContent-Length: 0\r\n\r\n",
            "f".repeat(filler)
        )
        .into_bytes()
    };
    assert_eq!(send_raw(s.addr, head(100 << 10)).await, Some(431));
    assert_eq!(send_raw(s.addr, head(32 << 10)).await, Some(201));
    let read = s.get("/v1/stream/big-head").send().await;
    assert_eq!(read.status, StatusCode::OK);
    s.stop().await;
}
