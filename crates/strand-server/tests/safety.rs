//! The server against clients that half-close, stall or never finish, and
//! the operator routes' safety: they are closed on the client listener
//! without authentication, a purge that answers an error changed nothing,
//! and the protocol mount's bucket cannot be fenced.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::TestServer;
use hyper::{Method, StatusCode};
use strand::BucketStreamId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest any test here waits for the server to act before failing.
const PATIENCE: Duration = Duration::from_secs(20);

/// Reads until the server closes the connection (or resets it); fails the
/// test after [`PATIENCE`].
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        let mut chunk = [0u8; 8192];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .expect("the server closes the connection");
    out
}

/// The status of a raw response, if it holds one.
fn status_of(response: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(response);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_half_closes_after_its_request_gets_the_answer() {
    let s = TestServer::start().await;
    for i in 0..20 {
        let mut stream = TcpStream::connect(s.addr).await.unwrap();
        let request = format!(
            "PUT /v1/stream/half-{i} HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
             Content-Length: 2\r\nConnection: close\r\n\r\nhi"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        stream.shutdown().await.unwrap();
        let response = read_to_close(&mut stream).await;
        assert_eq!(status_of(&response), Some(201), "request {i}");
    }
    // Keep-alive too: the answer comes before the close.
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    stream
        .write_all(b"GET /v1/stream/half-3?offset=-1 HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    stream.shutdown().await.unwrap();
    let response = read_to_close(&mut stream).await;
    assert_eq!(status_of(&response), Some(200));
    assert!(response.ends_with(b"hi"));
    s.stop().await;
}

/// A server whose connection timeouts are short.
async fn strict_server() -> TestServer {
    TestServer::start_with(|c| {
        c.request_head_timeout_ms = 300;
        c.body_timeout_ms = 400;
        c.send_timeout_ms = 400;
        c.idle_timeout_ms = 600;
        c.long_poll_timeout_ms = 1_500;
    })
    .await
}

/// Sends a raw `Connection: close` request on a new connection until the
/// server takes the connection (a server at its connection limit closes
/// new ones unread), and returns the response.
async fn until_accepted(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let Ok(mut stream) = TcpStream::connect(addr).await else {
                continue;
            };
            if stream.write_all(request).await.is_ok() {
                let response = read_to_close(&mut stream).await;
                if status_of(&response).is_some() {
                    return response;
                }
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the server takes a connection")
}

/// Opens a connection, writes `sent`, and waits for the server to close it;
/// returns what the server wrote and how long it took.
async fn held(addr: SocketAddr, sent: &[u8]) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(sent).await.unwrap();
    let answer = read_to_close(&mut stream).await;
    (answer, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_connections_are_closed_by_their_timeouts() {
    let s = strict_server().await;
    // Half a request head.
    let (answer, took) = held(s.addr, b"PUT /v1/stream/slow HTTP/1.1\r\nHost: t\r\nConte").await;
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    assert!(took >= Duration::from_millis(300), "{took:?}");
    // A body that stops short of its Content-Length.
    let (answer, took) = held(
        s.addr,
        b"PUT /v1/stream/slow HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nonly this",
    )
    .await;
    assert!(took >= Duration::from_millis(400), "{took:?}");
    // The handler may answer the broken body before the connection goes;
    // nothing of it was applied.
    if let Some(status) = status_of(&answer) {
        assert!((400..500).contains(&status), "{status}");
    }
    // Nothing at all.
    let (answer, took) = held(s.addr, b"").await;
    assert!(answer.is_empty());
    assert!(took >= Duration::from_millis(600), "{took:?}");
    // The slot is free again, and nothing of the slow requests landed.
    assert_eq!(
        s.head("/v1/stream/slow").send().await.status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reads_and_uploads_that_make_progress_are_not_cut() {
    let s = strict_server().await;
    assert_eq!(
        s.put("/v1/stream/live").text("a").send().await.status,
        StatusCode::CREATED
    );
    // A long-poll outlives the idle and head timeouts: it is not idle.
    let started = Instant::now();
    let r = s
        .get(&format!(
            "/v1/stream/live?live=long-poll&offset={}",
            common::off(1)
        ))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(started.elapsed() >= Duration::from_millis(1_500));
    // An upload paced slower than the body timeout in total, but with
    // every pause shorter than it.
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    stream
        .write_all(
            b"POST /v1/stream/live HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
              Content-Length: 10\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
    for _ in 0..10 {
        // Pacing the client, not waiting for the server.
        tokio::time::sleep(Duration::from_millis(100)).await;
        stream.write_all(b"b").await.unwrap();
    }
    let answer = read_to_close(&mut stream).await;
    assert_eq!(status_of(&answer), Some(204));
    drop(stream);
    let read = s.get("/v1/stream/live?offset=-1").send().await;
    assert_eq!(read.text(), "abbbbbbbbbb");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_its_response_is_cut_off() {
    let s = TestServer::start_with(|c| {
        c.send_timeout_ms = 300;
        c.max_connections = 1;
        c.max_read_bytes = 16 << 20;
    })
    .await;
    // The server has room for one connection, so every request here waits
    // for the one before it to be closed.
    let create = b"PUT /v1/stream/big HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    assert_eq!(status_of(&until_accepted(s.addr, create).await), Some(201));
    let mut append = b"POST /v1/stream/big HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 4194304\r\nConnection: close\r\n\r\n".to_vec();
    append.extend(std::iter::repeat_n(b'x', 4 << 20));
    for _ in 0..4 {
        assert_eq!(status_of(&until_accepted(s.addr, &append).await), Some(204));
    }
    // A small receive buffer, so the response cannot hide in the kernel.
    let stream = tokio::time::timeout(PATIENCE, async {
        loop {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_recv_buffer_size(4096).unwrap();
            let mut stream = socket.connect(s.addr).await.unwrap();
            stream
                .write_all(b"GET /v1/stream/big?offset=-1 HTTP/1.1\r\nHost: t\r\n\r\n")
                .await
                .unwrap();
            // Refused connections close at once; the taken one sends the
            // response head.
            let mut first = [0u8; 12];
            if stream.read_exact(&mut first).await.is_ok() {
                assert_eq!(&first, b"HTTP/1.1 200");
                return stream;
            }
        }
    })
    .await
    .expect("the server takes the reader's connection");
    let mut stream = stream;
    // The server frees its only connection slot once it gives up on the
    // reader: wait for that by sending a request on a new connection.
    let head = b"HEAD /v1/stream/big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    assert_eq!(status_of(&until_accepted(s.addr, head).await), Some(200));
    let got = read_to_close(&mut stream).await;
    assert!(got.len() < 16 << 20, "the whole response arrived");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_routes_need_authentication_or_the_admin_listener() {
    let s = TestServer::start().await;
    s.put("/acme/s").text("x").send().await;
    for (method, path) in [
        (Method::DELETE, "/__strand/purge/acme"),
        (Method::PUT, "/__strand/quota/acme"),
        (Method::GET, "/__strand/usage/acme"),
        (Method::GET, "/__strand/cold"),
    ] {
        let r = s
            .req(method.clone(), path)
            .body(r#"{"max_streams":5}"#)
            .send()
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{method} {path}");
        assert!(r.text().contains("--admin-listen"), "{}", r.text());
        assert!(r.text().contains("admin right"), "{}", r.text());
    }
    // Nothing was purged.
    assert_eq!(s.get("/acme/s").send().await.text(), "x");
    // The admin listener serves them, and only them.
    let usage = s.admin(Method::GET, "/__strand/usage/acme").send().await;
    assert_eq!(usage.status, StatusCode::OK);
    assert_eq!(
        s.admin(Method::GET, "/__strand/health").send().await.status,
        StatusCode::OK
    );
    for path in ["/acme/s", "/v1/stream/x", "/__strand/integrity/acme/s"] {
        assert_eq!(
            s.admin(Method::GET, path).send().await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    assert_eq!(
        s.admin(Method::POST, "/__strand/raft/batch")
            .send()
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_mount_cannot_be_purged_away() {
    let s = TestServer::start().await;
    let base = "/v1/stream";
    let r = s.put(&format!("{base}/important")).text("hi").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = s.delete("/__strand/purge/default").send().await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = s
        .admin(Method::DELETE, "/__strand/purge/default")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(r.text().contains("/v1/stream/"), "{}", r.text());
    let r = s.get(&format!("{base}/important?offset=-1")).send().await;
    assert_eq!((r.status, r.text()), (StatusCode::OK, "hi"));
    let r = s.put(&format!("{base}/new")).text("").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    s.stop().await;
}

/// A stream name of the bucket `acme` in each group of `s`.
fn one_stream_per_group(s: &TestServer, prefix: &str) -> Vec<String> {
    let groups = s.engine.group_count();
    let mut names = vec![None; groups];
    for i in 0.. {
        let name = format!("{prefix}{i}");
        let g = s
            .engine
            .group_for(&BucketStreamId::new("acme", name.as_str()));
        names[g].get_or_insert(name);
        if names.iter().all(Option::is_some) {
            break;
        }
    }
    names.into_iter().map(Option::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purging_a_bucket_held_by_some_groups_purges_and_fences_it_everywhere() {
    let s = TestServer::start_with(|c| c.groups = 4).await;
    // A bucket that only one group knows: its one stream's.
    let names = one_stream_per_group(&s, "s");
    let r = s.put(&format!("/acme/{}", names[1])).text("x").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = s.admin(Method::DELETE, "/__strand/purge/acme").send().await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let report: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(report["removed_streams"], 1);
    assert_eq!(
        s.get(&format!("/acme/{}", names[1])).send().await.status,
        StatusCode::NOT_FOUND
    );
    // Every group refuses the erased bucket now.
    for name in one_stream_per_group(&s, "t") {
        let r = s.put(&format!("/acme/{name}")).text("y").send().await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{name}: {}", r.text());
        assert!(r.text().contains("erased"), "{}", r.text());
    }
    // Purging it again is a purge of nothing, not an error.
    let r = s.admin(Method::DELETE, "/__strand/purge/acme").send().await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_that_fails_changes_nothing() {
    let s = TestServer::start_with(|c| c.groups = 4).await;
    let r = s.put("/other/s").text("keep").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    // A bucket no group knows: 404, and no group fenced it.
    let r = s.admin(Method::DELETE, "/__strand/purge/acme").send().await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    for name in one_stream_per_group(&s, "s") {
        let r = s.put(&format!("/acme/{name}")).text("y").send().await;
        assert_eq!(r.status, StatusCode::CREATED, "{name}: {}", r.text());
    }
    // A bad bucket id: 400 before any group is asked.
    let r = s
        .admin(Method::DELETE, "/__strand/purge/a%20b")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(s.get("/other/s").send().await.text(), "keep");
    s.stop().await;
}
