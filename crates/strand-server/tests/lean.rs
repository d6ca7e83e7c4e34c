//! `--http-engine lean`, strand's own HTTP/1.1 connection, on what only a
//! raw socket shows: pipelining, chunked uploads with `Expect:
//! 100-continue`, a connection closed after a body the routes did not
//! read, HTTP/2's preface handed to hyper, and idle connections closed
//! when the server stops. (Everything else runs through it when the whole
//! suite runs with `STRAND_HTTP_ENGINE=lean`, as `cargo xtask ci` does.)

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use strand_server::config::HttpEngine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::TestServer;

async fn lean(tweak: impl FnOnce(&mut strand_server::Config)) -> TestServer {
    TestServer::start_with(|c| {
        c.http_engine = HttpEngine::Lean;
        tweak(c);
    })
    .await
}

/// Reads from `stream` until `done` holds for what was read (or 5 s, or
/// the end of the connection), and returns it.
async fn read_until(stream: &mut TcpStream, done: impl Fn(&str) -> bool) -> String {
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let mut chunk = [0u8; 8192];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
            if done(&String::from_utf8_lossy(&got)) {
                break;
            }
        }
    })
    .await;
    String::from_utf8_lossy(&got).into_owned()
}

/// Whether the peer closed `stream` (a read gives end of file within 5 s).
async fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

fn statuses(text: &str) -> Vec<&str> {
    text.match_indices("HTTP/1.1 ")
        .map(|(at, _)| &text[at + 9..at + 12])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let s = lean(|_| {}).await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    stream
        .write_all(
            b"PUT /v1/stream/p HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nab\
              POST /v1/stream/p HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\ncd\
              POST /v1/stream/p HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nef\
              GET /v1/stream/p?offset=-1 HTTP/1.1\r\nHost: t\r\n\r\n",
        )
        .await
        .unwrap();
    let text = read_until(&mut stream, |t| t.ends_with("abcdef")).await;
    assert_eq!(statuses(&text), ["201", "204", "204", "200"], "{text}");
    assert!(text.ends_with("\r\n\r\nabcdef"), "{text}");
    // Still open for the next request.
    stream
        .write_all(b"HEAD /v1/stream/p HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let text = read_until(&mut stream, |t| t.ends_with("\r\n\r\n")).await;
    assert_eq!(statuses(&text), ["200"], "{text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_upload_waits_for_100_continue_and_is_appended_whole() {
    let s = lean(|_| {}).await;
    s.put("/v1/stream/c").text("").send().await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    stream
        .write_all(
            b"POST /v1/stream/c HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
              Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
        )
        .await
        .unwrap();
    let text = read_until(&mut stream, |t| t.ends_with("\r\n\r\n")).await;
    assert_eq!(text, "HTTP/1.1 100 Continue\r\n\r\n");
    stream
        .write_all(b"5;x=y\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n")
        .await
        .unwrap();
    let text = read_until(&mut stream, |t| t.ends_with("\r\n\r\n")).await;
    assert_eq!(statuses(&text), ["204"], "{text}");
    let read = s.get("/v1/stream/c?offset=-1").send().await;
    assert_eq!(read.text(), "hello world");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_refused_from_its_head_gets_no_100_continue() {
    let s = lean(|c| c.max_body_bytes = 1024).await;
    s.put("/v1/stream/e").text("").send().await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    stream
        .write_all(
            b"POST /v1/stream/e HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
              Content-Length: 100000\r\nExpect: 100-continue\r\n\r\n",
        )
        .await
        .unwrap();
    let text = read_until(&mut stream, |t| t.contains("\r\n\r\n")).await;
    assert_eq!(statuses(&text), ["413"], "{text}");
    assert!(closed(&mut stream).await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_chunked_body_appends_nothing() {
    let s = lean(|_| {}).await;
    s.put("/v1/stream/m").text("").send().await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    stream
        .write_all(
            b"POST /v1/stream/m HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
              Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX3\r\n",
        )
        .await
        .unwrap();
    let text = read_until(&mut stream, |t| t.contains("\r\n\r\n")).await;
    let status: u16 = statuses(&text)[0].parse().unwrap();
    assert!((400..500).contains(&status), "{text}");
    assert!(closed(&mut stream).await);
    let read = s.get("/v1/stream/m?offset=-1").send().await;
    assert_eq!(read.text(), "");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_left_unread_closes_the_connection_after_the_answer() {
    let s = lean(|c| c.max_body_bytes = 1024).await;
    s.put("/v1/stream/u").text("").send().await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    // Too large: refused before its body is read, of which only a part
    // was sent; the rest must never be taken for a next request.
    stream
        .write_all(
            b"POST /v1/stream/u HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
              Content-Length: 100000\r\n\r\nGET /v1/stream/u HTTP/1.1\r\n\r\n",
        )
        .await
        .unwrap();
    let text = read_until(&mut stream, |t| t.contains("\r\n\r\n")).await;
    assert_eq!(statuses(&text), ["413"], "{text}");
    assert!(text.contains("connection: close"), "{text}");
    assert!(closed(&mut stream).await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_lengths_and_unknown_codings_get_400() {
    let s = lean(|_| {}).await;
    for head in [
        "POST /v1/stream/x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\na",
        "POST /v1/stream/x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST /v1/stream/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
        "GET /v1/stream/x HTTP/1.1\r\nX: a\x01b\r\n\r\n",
    ] {
        let mut stream = TcpStream::connect(s.addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let text = read_until(&mut stream, |t| t.contains("\r\n\r\n")).await;
        assert_eq!(statuses(&text), ["400"], "{head:?}: {text}");
        assert!(closed(&mut stream).await, "{head:?}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_with_prior_knowledge_is_served_by_hyper() {
    let s = lean(|_| {}).await;
    s.put("/v1/stream/h2").text("two").send().await;
    let stream = TcpStream::connect(s.addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let request = Request::get(format!("http://{}/v1/stream/h2?offset=-1", s.addr))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), hyper::Version::HTTP_2);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"two");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_server_closes_idle_connections_and_answers_the_one_in_service() {
    let s = lean(|c| c.long_poll_timeout_ms = 5_000).await;
    s.put("/v1/stream/s").text("x").send().await;
    // One idle keep-alive connection, one waiting in a long-poll.
    let mut idle = TcpStream::connect(s.addr).await.unwrap();
    idle.write_all(b"GET /v1/stream/s?offset=-1 HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let text = read_until(&mut idle, |t| t.ends_with("\r\n\r\nx")).await;
    assert_eq!(statuses(&text), ["200"], "{text}");
    let mut polling = TcpStream::connect(s.addr).await.unwrap();
    let tail = s.get("/v1/stream/s?offset=-1").send().await.next();
    polling
        .write_all(
            format!("GET /v1/stream/s?offset={tail}&live=long-poll HTTP/1.1\r\nHost: t\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    s.parked(1).await;
    // `stop` waits (at most 10 s) for the server to end: it ends the
    // long-poll, which is answered, and closes both connections.
    s.stop().await;
    let text = read_until(&mut polling, |t| t.contains("\r\n\r\n")).await;
    assert_eq!(statuses(&text).len(), 1, "{text}");
    assert!(closed(&mut polling).await);
    assert!(closed(&mut idle).await);
}
