//! The Durable Streams mount `/v1/stream/{name}` against a real server on
//! an ephemeral port: create, append, read, HEAD, delete, offsets, JSON
//! mode, producers, closure, TTL, ETag and CORS.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{TestServer, off};
use hyper::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_append_read_head_delete() {
    let s = TestServer::start().await;
    let r = s.put("/v1/stream/a").text("hello ").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.h("content-type"), Some("text/plain"));
    assert_eq!(r.next(), off(6));
    let location = r.h("location").unwrap();
    assert!(location.starts_with("http://127.0.0.1:") && location.ends_with("/v1/stream/a"));

    // The same create again is 200 without a Location; another type is 409.
    let again = s.put("/v1/stream/a").text("ignored").send().await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.h("location"), None);
    assert_eq!(again.next(), off(6));
    let other = s
        .put("/v1/stream/a")
        .header("content-type", "application/json")
        .send()
        .await;
    assert_eq!(other.status, StatusCode::CONFLICT);

    let w = s.post("/v1/stream/a").text("world").send().await;
    assert_eq!(w.status, StatusCode::NO_CONTENT);
    assert_eq!(w.next(), off(11));

    let all = s.get("/v1/stream/a").send().await;
    assert_eq!(all.status, StatusCode::OK);
    assert_eq!(all.text(), "hello world");
    assert_eq!(all.h("stream-up-to-date"), Some("true"));
    assert_eq!(all.next(), off(11));
    let from_start = s.get("/v1/stream/a?offset=-1").send().await;
    assert_eq!(from_start.text(), "hello world");
    let rest = s
        .get(&format!("/v1/stream/a?offset={}", off(6)))
        .send()
        .await;
    assert_eq!(rest.text(), "world");
    let now = s.get("/v1/stream/a?offset=now").send().await;
    assert_eq!((now.status, now.text()), (StatusCode::OK, ""));
    assert_eq!(now.h("cache-control"), Some("no-store"));
    assert_eq!(now.next(), off(11));

    let head = s.head("/v1/stream/a").send().await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    assert_eq!(head.next(), off(11));
    assert_eq!(head.h("cache-control"), Some("no-store"));
    assert_eq!(head.h("stream-closed"), None);

    assert_eq!(
        s.delete("/v1/stream/a").send().await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        s.get("/v1/stream/a").send().await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.head("/v1/stream/a").send().await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.delete("/v1/stream/a").send().await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.post("/v1/stream/a").text("x").send().await.status,
        StatusCode::NOT_FOUND
    );
    // Re-created after delete: a fresh stream.
    let fresh = s.put("/v1/stream/a").text("new").send().await;
    assert_eq!(fresh.status, StatusCode::CREATED);
    assert_eq!(s.get("/v1/stream/a").send().await.text(), "new");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_4xx() {
    let s = TestServer::start().await;
    s.put("/v1/stream/b").text("data").send().await;
    for query in [
        "offset=",
        "offset=1&offset=2",
        "offset=0,1",
        "offset=0%201",
        "offset=abc",
        "offset=..%2F",
    ] {
        let r = s.get(&format!("/v1/stream/b?{query}")).send().await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(r.h("x-content-type-options"), Some("nosniff"));
    }
    let beyond = s
        .get("/v1/stream/b?offset=9999999999999999_9999999999999999")
        .send()
        .await;
    assert_eq!(beyond.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        s.get("/v1/stream/b?live=long-poll").send().await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        s.get("/v1/stream/b?live=sse").send().await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        s.get("/v1/stream/b?live=bogus&offset=-1")
            .send()
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    // POST: empty body, missing content type, wrong content type.
    assert_eq!(
        s.post("/v1/stream/b").send().await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        s.post("/v1/stream/b").body("x").send().await.status,
        StatusCode::BAD_REQUEST
    );
    let mismatch = s
        .post("/v1/stream/b")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await;
    assert_eq!(mismatch.status, StatusCode::CONFLICT);
    // Case and parameters do not matter.
    let ok = s
        .post("/v1/stream/b")
        .header("content-type", "TEXT/PLAIN; charset=utf-8")
        .body("!")
        .send()
        .await;
    assert_eq!(ok.status, StatusCode::NO_CONTENT);
    // PUT: bad TTL, bad expiry, both.
    for ttl in ["-1", "1.5", "01", "abc", "1e3"] {
        let r = s
            .put("/v1/stream/ttl")
            .header("stream-ttl", ttl)
            .send()
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{ttl}");
    }
    let r = s
        .put("/v1/stream/ttl")
        .header("stream-expires-at", "not-a-timestamp")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = s
        .put("/v1/stream/ttl")
        .header("stream-ttl", "60")
        .header("stream-expires-at", "2030-01-01T00:00:00Z")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // Traversal (names the machine's ids could not hold map to hashed
    // ids: `stream_urls_of_any_shape`).
    assert_eq!(
        s.put("/v1/stream/x/%2E%2E").send().await.status,
        StatusCode::BAD_REQUEST
    );
    // Unknown methods.
    let patch = s.req(hyper::Method::PATCH, "/v1/stream/b").send().await;
    assert_eq!(patch.status, StatusCode::METHOD_NOT_ALLOWED);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_413() {
    let s = TestServer::start_with(|c| c.max_body_bytes = 1024).await;
    s.put("/v1/stream/big").text("").send().await;
    let r = s
        .post("/v1/stream/big")
        .text(&"x".repeat(1025))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    let r = s
        .post("/v1/stream/big")
        .text(&"x".repeat(1024))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(s.get("/v1/stream/big").send().await.body.len(), 1024);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_reads_are_paginated() {
    let s = TestServer::start_with(|c| {
        c.max_body_bytes = 1000;
        c.max_read_bytes = 1000;
    })
    .await;
    s.put("/v1/stream/p").text("").send().await;
    let mut expected = Vec::new();
    for i in 0..10u8 {
        let chunk = vec![b'a' + i; 700];
        expected.extend_from_slice(&chunk);
        s.post("/v1/stream/p")
            .header("content-type", "text/plain")
            .body(chunk)
            .send()
            .await;
    }
    let mut got = Vec::new();
    let mut offset = "-1".to_owned();
    let mut pages = 0;
    loop {
        let r = s.get(&format!("/v1/stream/p?offset={offset}")).send().await;
        pages += 1;
        assert!(r.body.len() <= 1001);
        got.extend_from_slice(&r.body);
        offset = r.next();
        if r.h("stream-up-to-date") == Some("true") {
            break;
        }
        assert!(pages < 100);
    }
    assert_eq!(got, expected);
    assert!(pages >= 7, "{pages} pages");
    s.stop().await;
}

/// A page of many small messages (gathered into several chunks) and one
/// of a large and small message mix is sent with its exact
/// `Content-Length`, not chunked, and holds every byte in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_many_messages_carry_their_length() {
    let s = TestServer::start().await;
    s.put("/v1/stream/many").text("").send().await;
    let mut expected = Vec::new();
    for i in 0..300u32 {
        let message: Vec<u8> = (0..1024u32).map(|k| (i * 7 + k) as u8).collect();
        expected.extend_from_slice(&message);
        s.post("/v1/stream/many")
            .header("content-type", "text/plain")
            .body(message)
            .send()
            .await;
        if i == 150 {
            let large = vec![b'L'; 40 * 1024];
            expected.extend_from_slice(&large);
            s.post("/v1/stream/many")
                .header("content-type", "text/plain")
                .body(large)
                .send()
                .await;
        }
    }
    let r = s.get("/v1/stream/many?offset=-1").send().await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.h("stream-up-to-date"), Some("true"));
    assert_eq!(r.h("transfer-encoding"), None);
    assert_eq!(
        r.h("content-length"),
        Some(expected.len().to_string().as_str())
    );
    assert_eq!(&r.body[..], &expected[..]);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_bytes_round_trip() {
    let s = TestServer::start().await;
    let all: Vec<u8> = (0..=255u8).collect();
    s.put("/v1/stream/bin")
        .header("content-type", "application/octet-stream")
        .send()
        .await;
    let r = s
        .post("/v1/stream/bin")
        .header("content-type", "application/octet-stream")
        .body(all.clone())
        .send()
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let back = s.get("/v1/stream/bin").send().await;
    assert_eq!(back.h("content-type"), Some("application/octet-stream"));
    assert_eq!(&back.body[..], &all[..]);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_mode_flattens_and_renders_arrays() {
    let s = TestServer::start().await;
    let r = s
        .put("/v1/stream/j")
        .header("content-type", "application/json")
        .body(r#"[{"a": 1}, {"b": 2}]"#)
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = s
        .post("/v1/stream/j")
        .header("content-type", "application/json")
        .body(r#"[[1, 2, 3]]"#)
        .send()
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = s
        .post("/v1/stream/j")
        .header("content-type", "application/json; charset=utf-8")
        .body(r#""s""#)
        .send()
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let all = s.get("/v1/stream/j").send().await;
    assert_eq!(all.h("content-type"), Some("application/json"));
    assert_eq!(all.text(), r#"[{"a":1},{"b":2},[1,2,3],"s"]"#);
    let now = s.get("/v1/stream/j?offset=now").send().await;
    assert_eq!(now.text(), "[]");
    for bad in ["{", "[]", ""] {
        let r = s
            .post("/v1/stream/j")
            .header("content-type", "application/json")
            .body(bad)
            .send()
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad:?}");
    }
    let empty = s
        .put("/v1/stream/j2")
        .header("content-type", "application/json")
        .body("[]")
        .send()
        .await;
    assert_eq!(empty.status, StatusCode::CREATED);
    assert_eq!(s.get("/v1/stream/j2").send().await.text(), "[]");
    s.stop().await;
}

/// Stream URLs of any shape under the mount (`docs/stream-urls.md`):
/// many segments, long names, dots, escaped slashes kept apart from real
/// ones, forks between any two, and clear refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_urls_of_any_shape() {
    let s = TestServer::start().await;
    let yjs = "/v1/stream/yjs/svc-1/docs/doc%20one/.updates";
    let created = s
        .put(yjs)
        .header("content-type", "application/octet-stream")
        .body(b"\x01\x02".to_vec())
        .send()
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert!(created.h("location").unwrap().ends_with(yjs));
    let appended = s
        .post(yjs)
        .header("content-type", "application/octet-stream")
        .body(b"\x03".to_vec())
        .send()
        .await;
    assert_eq!(appended.status, StatusCode::NO_CONTENT);
    assert_eq!(&s.get(yjs).send().await.body[..], b"\x01\x02\x03");
    assert_eq!(s.head(yjs).send().await.next(), off(3));

    // Names the machine's ids could not hold directly.
    let long = format!("/v1/stream/{}", "n".repeat(2_000));
    for path in [
        long.as_str(),
        "/v1/stream/streams",
        "/v1/stream/a..b",
        "/v1/stream/~x",
        "/v1/stream/.awareness/.index",
    ] {
        assert_eq!(
            s.put(path).text(path).send().await.status,
            StatusCode::CREATED,
            "{path}"
        );
    }
    for path in [
        long.as_str(),
        "/v1/stream/streams",
        "/v1/stream/.awareness/.index",
    ] {
        assert_eq!(s.get(path).send().await.text(), path);
    }

    // An escaped slash is part of a segment: two different streams.
    s.put("/v1/stream/a%2Fb").text("escaped").send().await;
    s.put("/v1/stream/a/b").text("real").send().await;
    assert_eq!(s.get("/v1/stream/a%2Fb").send().await.text(), "escaped");
    assert_eq!(s.get("/v1/stream/a/b").send().await.text(), "real");
    // Two direct segments are the bucketed layout's affinity stream.
    assert_eq!(s.get("/default/a/b").send().await.text(), "real");

    // A fork between two streams of any shape.
    let fork = s
        .put("/v1/stream/forks/of/the/doc")
        .header("content-type", "application/octet-stream")
        .header("stream-forked-from", yjs)
        .send()
        .await;
    assert_eq!(fork.status, StatusCode::CREATED);
    s.post("/v1/stream/forks/of/the/doc")
        .header("content-type", "application/octet-stream")
        .body(b"\x04".to_vec())
        .send()
        .await;
    assert_eq!(
        &s.get("/v1/stream/forks/of/the/doc").send().await.body[..],
        b"\x01\x02\x03\x04"
    );

    for (path, status) in [
        ("/v1/stream/a//b", StatusCode::BAD_REQUEST),
        ("/v1/stream/a/", StatusCode::BAD_REQUEST),
        ("/v1/stream/a/%2e%2e/b", StatusCode::BAD_REQUEST),
        ("/v1/stream/a/%ff", StatusCode::BAD_REQUEST),
        ("/v1/stream/__ds/not-a-route", StatusCode::NOT_FOUND),
    ] {
        assert_eq!(s.put(path).text("x").send().await.status, status, "{path}");
    }
    let too_long = format!("/v1/stream/{}", "n".repeat(4_097));
    let refused = s.put(&too_long).text("x").send().await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.text().contains("4096"), "{}", refused.text());
    s.stop().await;
}

/// Offsets a client computes (the Yjs server reads from a snapshot's
/// offset plus one) are read as the protocol's reference server reads
/// them: from the start of the message holding the offset, from the tail
/// when it is beyond. The bucketed layout keeps exact byte offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_clients_compute_read_whole_messages() {
    let s = TestServer::start().await;
    s.put("/v1/stream/m").text("abcdef").send().await;
    s.post("/v1/stream/m").text("ghij").send().await;
    let get = |offset: u64| {
        s.get(&format!("/v1/stream/m?offset={}", off(offset)))
            .send()
    };
    let inside_first = get(3).await;
    assert_eq!(inside_first.text(), "abcdefghij");
    assert_eq!(inside_first.next(), off(10));
    assert_eq!(get(7).await.text(), "ghij");
    assert_eq!(get(6).await.text(), "ghij");
    let beyond = get(11).await;
    assert_eq!((beyond.status, beyond.text()), (StatusCode::OK, ""));
    assert_eq!(beyond.h("stream-up-to-date"), Some("true"));
    assert_eq!(beyond.next(), off(10));
    // A long-poll one past the tail waits at the tail and gets the next
    // message whole.
    let poll = s
        .get(&format!("/v1/stream/m?offset={}&live=long-poll", off(11)))
        .send();
    let append = async {
        // The poll may start before or after this append; either way it
        // answers with the message.
        s.post("/v1/stream/m").text("kl").send().await
    };
    let (poll, appended) = tokio::join!(poll, append);
    assert_eq!(appended.status, StatusCode::NO_CONTENT);
    assert_eq!((poll.status, poll.text()), (StatusCode::OK, "kl"));
    assert_eq!(poll.next(), off(12));

    // JSON: from the value holding the offset.
    s.put("/v1/stream/mj")
        .header("content-type", "application/json")
        .body(r#"[{"a":1},{"b":22}]"#)
        .send()
        .await;
    let json = s
        .get(&format!("/v1/stream/mj?offset={}", off(9)))
        .send()
        .await;
    assert_eq!(json.text(), r#"[{"b":22}]"#);

    // The bucketed layout reads the byte offset as it is.
    let exact = s.get(&format!("/default/m?offset={}", off(3))).send().await;
    assert_eq!(exact.text(), "defghijkl");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_seq_must_increase() {
    let s = TestServer::start().await;
    s.put("/v1/stream/seq").text("").send().await;
    let post = |seq: &str| s.post("/v1/stream/seq").header("stream-seq", seq).text("x");
    assert_eq!(post("09").send().await.status, StatusCode::NO_CONTENT);
    assert_eq!(post("10").send().await.status, StatusCode::NO_CONTENT);
    assert_eq!(post("10").send().await.status, StatusCode::CONFLICT);
    assert_eq!(post("2").send().await.status, StatusCode::NO_CONTENT);
    assert_eq!(post("10").send().await.status, StatusCode::CONFLICT);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producers() {
    let s = TestServer::start().await;
    s.put("/v1/stream/prod").text("").send().await;
    let send = |epoch: &str, seq: &str, body: &str| {
        s.post("/v1/stream/prod")
            .header("producer-id", "p1")
            .header("producer-epoch", epoch)
            .header("producer-seq", seq)
            .text(body)
            .send()
    };
    let first = send("0", "0", "a").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        (first.h("producer-epoch"), first.h("producer-seq")),
        (Some("0"), Some("0"))
    );
    assert_eq!(send("0", "1", "b").await.status, StatusCode::OK);
    assert_eq!(send("0", "2", "c").await.status, StatusCode::OK);
    // A duplicate echoes the highest accepted sequence and writes nothing.
    let dup = send("0", "1", "b").await;
    assert_eq!(dup.status, StatusCode::NO_CONTENT);
    assert_eq!(dup.h("producer-seq"), Some("2"));
    assert_eq!(s.get("/v1/stream/prod").send().await.text(), "abc");
    // A gap.
    let gap = send("0", "5", "x").await;
    assert_eq!(gap.status, StatusCode::CONFLICT);
    assert_eq!(
        (
            gap.h("producer-expected-seq"),
            gap.h("producer-received-seq")
        ),
        (Some("3"), Some("5"))
    );
    // A new epoch must start at 0; then the old one is fenced.
    assert_eq!(send("1", "1", "x").await.status, StatusCode::BAD_REQUEST);
    assert_eq!(send("1", "0", "d").await.status, StatusCode::OK);
    let stale = send("0", "3", "x").await;
    assert_eq!(stale.status, StatusCode::FORBIDDEN);
    assert_eq!(stale.h("producer-epoch"), Some("1"));
    // Unknown producer must start at 0.
    let unknown = s
        .post("/v1/stream/prod")
        .header("producer-id", "p2")
        .header("producer-epoch", "0")
        .header("producer-seq", "3")
        .text("x")
        .send()
        .await;
    assert_eq!(unknown.status, StatusCode::CONFLICT);
    assert_eq!(unknown.h("producer-expected-seq"), Some("0"));
    // Partial or malformed headers.
    let partial = s
        .post("/v1/stream/prod")
        .header("producer-id", "p1")
        .text("x")
        .send()
        .await;
    assert_eq!(partial.status, StatusCode::BAD_REQUEST);
    for bad in ["1abc", "-1", "1e3", ""] {
        assert_eq!(
            send("1", bad, "x").await.status,
            StatusCode::BAD_REQUEST,
            "{bad:?}"
        );
    }
    assert_eq!(s.get("/v1/stream/prod").send().await.text(), "abcd");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_stream() {
    let s = TestServer::start().await;
    s.put("/v1/stream/c").text("a").send().await;
    let close = s
        .post("/v1/stream/c")
        .header("stream-closed", "true")
        .send()
        .await;
    assert_eq!(close.status, StatusCode::NO_CONTENT);
    assert_eq!(close.h("stream-closed"), Some("true"));
    assert_eq!(close.next(), off(1));
    // Idempotent.
    assert_eq!(
        s.post("/v1/stream/c")
            .header("stream-closed", "true")
            .send()
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let late = s.post("/v1/stream/c").text("b").send().await;
    assert_eq!(late.status, StatusCode::CONFLICT);
    assert_eq!(late.h("stream-closed"), Some("true"));
    assert_eq!(late.next(), off(1));
    let read = s.get("/v1/stream/c").send().await;
    assert_eq!((read.text(), read.h("stream-closed")), ("a", Some("true")));
    assert_eq!(
        s.head("/v1/stream/c").send().await.h("stream-closed"),
        Some("true")
    );
    // A long-poll at the tail of a closed stream answers at once.
    let lp = s
        .get(&format!("/v1/stream/c?offset={}&live=long-poll", off(1)))
        .send()
        .await;
    assert_eq!(lp.status, StatusCode::NO_CONTENT);
    assert_eq!(lp.h("stream-closed"), Some("true"));
    // Append-and-close, and a stream created closed.
    s.put("/v1/stream/c2").text("").send().await;
    let both = s
        .post("/v1/stream/c2")
        .header("stream-closed", "true")
        .text("end")
        .send()
        .await;
    assert_eq!(
        (both.status, both.h("stream-closed")),
        (StatusCode::NO_CONTENT, Some("true"))
    );
    let created = s
        .put("/v1/stream/c3")
        .header("stream-closed", "true")
        .text("x")
        .send()
        .await;
    assert_eq!(
        (created.status, created.h("stream-closed")),
        (StatusCode::CREATED, Some("true"))
    );
    assert_eq!(
        s.post("/v1/stream/missing")
            .header("stream-closed", "true")
            .send()
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_slides_with_reads_and_writes_but_not_head() {
    let s = TestServer::start().await;
    let r = s
        .put("/v1/stream/t")
        .header("stream-ttl", "10")
        .text("x")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        s.head("/v1/stream/t").send().await.h("stream-ttl"),
        Some("10")
    );
    // Idempotent create must repeat the TTL.
    assert_eq!(
        s.put("/v1/stream/t")
            .header("stream-ttl", "10")
            .text("")
            .send()
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        s.put("/v1/stream/t")
            .header("stream-ttl", "11")
            .text("")
            .send()
            .await
            .status,
        StatusCode::CONFLICT
    );
    // HEAD does not renew.
    s.clock.advance(6_000);
    assert_eq!(s.head("/v1/stream/t").send().await.status, StatusCode::OK);
    s.clock.advance(4_000);
    assert_eq!(
        s.head("/v1/stream/t").send().await.status,
        StatusCode::NOT_FOUND
    );

    // A read renews.
    s.put("/v1/stream/t2")
        .header("stream-ttl", "10")
        .text("x")
        .send()
        .await;
    s.clock.advance(6_000);
    assert_eq!(
        s.get("/v1/stream/t2?offset=now").send().await.status,
        StatusCode::OK
    );
    s.clock.advance(6_000);
    assert_eq!(s.head("/v1/stream/t2").send().await.status, StatusCode::OK);
    // A close-only POST renews too.
    s.clock.advance(3_000);
    assert_eq!(
        s.post("/v1/stream/t2")
            .header("stream-closed", "true")
            .send()
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    s.clock.advance(9_000);
    assert_eq!(s.head("/v1/stream/t2").send().await.status, StatusCode::OK);
    s.clock.advance(1_000);
    assert_eq!(
        s.get("/v1/stream/t2").send().await.status,
        StatusCode::NOT_FOUND
    );
    // The expired path can be created again, with any configuration.
    let again = s
        .put("/v1/stream/t2")
        .header("content-type", "application/json")
        .send()
        .await;
    assert_eq!(again.status, StatusCode::CREATED);

    // An absolute expiry is echoed and never extended.
    let at = strand_server::time::render_rfc3339_ms(common::START_MS + 100_000);
    s.put("/v1/stream/t3")
        .header("stream-expires-at", &at)
        .text("x")
        .send()
        .await;
    assert_eq!(
        s.head("/v1/stream/t3").send().await.h("stream-expires-at"),
        Some(at.as_str())
    );
    s.clock.advance(99_000);
    s.get("/v1/stream/t3").send().await;
    s.clock.advance(2_000);
    assert_eq!(
        s.get("/v1/stream/t3").send().await.status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etags_and_not_modified() {
    let s = TestServer::start().await;
    s.put("/v1/stream/e").text("one").send().await;
    let first = s.get("/v1/stream/e").send().await;
    let tag = first.h("etag").unwrap().to_owned();
    let same = s
        .get("/v1/stream/e")
        .header("if-none-match", &tag)
        .send()
        .await;
    assert_eq!(same.status, StatusCode::NOT_MODIFIED);
    assert!(same.body.is_empty());
    assert_eq!(same.h("etag"), Some(tag.as_str()));
    let other = s
        .get("/v1/stream/e")
        .header("if-none-match", "\"x\"")
        .send()
        .await;
    assert_eq!((other.status, other.text()), (StatusCode::OK, "one"));
    s.post("/v1/stream/e").text("two").send().await;
    let changed = s
        .get("/v1/stream/e")
        .header("if-none-match", &tag)
        .send()
        .await;
    assert_eq!((changed.status, changed.text()), (StatusCode::OK, "onetwo"));
    assert_ne!(changed.h("etag"), Some(tag.as_str()));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_and_security_headers() {
    let s = TestServer::start().await;
    let pre = s
        .req(hyper::Method::OPTIONS, "/v1/stream/any")
        .header("origin", "http://example.test")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "if-none-match")
        .send()
        .await;
    assert_eq!(pre.status, StatusCode::NO_CONTENT);
    assert!(
        pre.h("access-control-allow-headers")
            .unwrap()
            .contains("if-none-match")
    );
    assert_eq!(pre.h("access-control-allow-origin"), Some("*"));
    let missing = s.get("/v1/stream/none").send().await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.h("x-content-type-options"), Some("nosniff"));
    assert_eq!(
        missing.h("cross-origin-resource-policy"),
        Some("cross-origin")
    );
    assert!(
        missing
            .h("access-control-expose-headers")
            .unwrap()
            .contains("stream-next-offset")
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers() {
    let s = TestServer::start().await;
    let r = s.get("/__strand/health").send().await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.text(),
        "{\"groups\":[],\"mode\":\"memory\",\"status\":\"ok\"}\n"
    );
    s.stop().await;
}

/// A Raft message for a group the node does not have is not found, not a
/// server error: a node in memory has no Raft group at all, a durable one
/// only its `--groups` (the invariant test sent `POST
/// /__strand/raft/9/vote` to a node in memory and got a 500).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_messages_for_missing_groups_are_not_found() {
    use std::sync::Arc;

    let s = TestServer::start().await;
    for path in ["/__strand/raft/0/vote", "/__strand/raft/9/append"] {
        let r = s.post(path).body(vec![0x93, 0x01, 0x02]).send().await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {}", r.text());
    }
    s.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let mut config = strand_server::Config::for_listen("127.0.0.1:0".parse().unwrap());
    config.data_dir = Some(dir.path().to_owned());
    config.groups = 2;
    let node = strand_server::start_engine(&config).await.unwrap();
    assert!(node.raft.is_some());
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let router = strand_server::app(Arc::new(config), node.clone(), shutdown, None, None, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    // A group it lacks, a message there is no such name for, and a group
    // it has on a node that takes no peer messages (it has no peers).
    for path in [
        "/__strand/raft/2/vote",
        "/__strand/raft/9/append",
        "/__strand/raft/0/network-stats",
        "/__strand/raft/0/vote",
    ] {
        let r = common::request(addr, hyper::Method::POST, path)
            .body(vec![0x93, 0x01, 0x02])
            .send()
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {}", r.text());
    }
    server.abort();
    node.engine.shutdown().await;
}

/// A member's question about a group it does not hold
/// (`POST /__strand/raft/ask/{group}/{kind}`) is answered from this
/// node's machine (MessagePack both ways); an unknown question or group
/// is 404 and a body that is not the question 400, and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_about_a_group_are_answered_from_its_machine() {
    let s = TestServer::start().await;
    let r = s.put("/acme").send().await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let r = s
        .put("/acme/s")
        .header("content-type", "text/plain")
        .body(b"hello".to_vec())
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let pack = |v: serde_json::Value| rmp_serde::to_vec_named(&v).unwrap();
    let ask = |path: String, body: Vec<u8>| s.post(&path).body(body).send();
    let unpack = |body: &[u8]| -> serde_json::Value { rmp_serde::from_slice(body).unwrap() };
    let bucket = |name: &str| pack(serde_json::json!({ "bucket": name }));
    let groups = 0..4;
    let mut found = 0;
    for g in groups.clone() {
        let r = ask(
            format!("/__strand/raft/ask/{g}/bucket-exists"),
            bucket("acme"),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(unpack(&r.body), serde_json::json!(true), "group {g}");
        let r = ask(
            format!("/__strand/raft/ask/{g}/bucket-exists"),
            bucket("nosuch"),
        )
        .await;
        assert_eq!(unpack(&r.body), serde_json::json!(false), "group {g}");
        // One group holds the stream: it knows the bucket's usage, and
        // reads the stream's bytes for a fork in another group.
        let r = ask(
            format!("/__strand/raft/ask/{g}/bucket-usage"),
            bucket("acme"),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        if unpack(&r.body)["bucket_id"] == "acme" {
            found += 1;
        }
    }
    assert_eq!(found, 1, "one group holds acme/s");
    let id = serde_json::json!({"bucket_id": "acme", "stream_id": "s"});
    let step = pack(serde_json::json!({"stream": id, "offset": 0, "max_len": 3}));
    let mut answered = None;
    for g in groups {
        let r = ask(format!("/__strand/raft/ask/{g}/read-step"), step.clone()).await;
        match r.status {
            StatusCode::OK => answered = Some(r),
            // Asked in a group the stream is not in.
            status => assert_eq!(status, StatusCode::BAD_REQUEST, "{}", r.text()),
        }
    }
    let r = answered.expect("the stream's group answers");
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let step: strand_engine::StepAnswer = rmp_serde::from_slice(&r.body).unwrap();
    match step {
        strand_engine::StepAnswer::Data(page) => {
            assert_eq!((page.offset, page.next_offset), (0, 3));
            assert_eq!(page.slices.concat(), b"hel");
        }
        other => panic!("{other:?}"),
    }
    for (path, body, status) in [
        (
            "/__strand/raft/ask/0/no-such-question",
            bucket("acme"),
            StatusCode::NOT_FOUND,
        ),
        (
            "/__strand/raft/ask/99/bucket-exists",
            bucket("acme"),
            StatusCode::NOT_FOUND,
        ),
        (
            "/__strand/raft/ask/x/bucket-exists",
            bucket("acme"),
            StatusCode::NOT_FOUND,
        ),
        (
            "/__strand/raft/ask/0",
            bucket("acme"),
            StatusCode::NOT_FOUND,
        ),
        (
            "/__strand/raft/ask/0/bucket-exists",
            pack(serde_json::json!({"bucket": 7})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/__strand/raft/ask/0/list-scan",
            b"not msgpack".to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/__strand/raft/ask/0/read-step",
            b"\xc0".to_vec(),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let r = ask(path.to_owned(), body).await;
        assert_eq!(r.status, status, "{path}: {}", r.text());
    }
    s.stop().await;
}

/// `strand_server::app`, the routes as an axum `Router` for embedding,
/// answers like the server itself (which calls the same `routes::serve` without
/// a router): create, append, read, with the CORS headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_router_serves_the_routes() {
    use std::sync::Arc;

    let config = strand_server::Config::for_listen("127.0.0.1:0".parse().unwrap());
    let engine = strand_engine::Engine::start(strand_server::engine_config(&config));
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let router = strand_server::app(Arc::new(config), engine.clone(), shutdown, None, None, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let created = common::request(addr, hyper::Method::PUT, "/v1/stream/r")
        .text("hello ")
        .send()
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(created.next(), off(6));
    let appended = common::request(addr, hyper::Method::POST, "/v1/stream/r")
        .text("router")
        .send()
        .await;
    assert_eq!(appended.status, StatusCode::NO_CONTENT);
    // No cache keeps an append's answer: the CORS headers go to browsers
    // (which name an `Origin`) only; the security headers go to everyone.
    assert_eq!(appended.h("access-control-allow-origin"), None);
    assert_eq!(appended.h("access-control-expose-headers"), None);
    assert_eq!(appended.h("x-content-type-options"), Some("nosniff"));
    let from_browser = common::request(addr, hyper::Method::POST, "/v1/stream/r")
        .header("origin", "https://app.test")
        .text("!")
        .send()
        .await;
    assert_eq!(from_browser.status, StatusCode::NO_CONTENT);
    assert_eq!(from_browser.h("access-control-allow-origin"), Some("*"));
    assert!(
        from_browser
            .h("access-control-expose-headers")
            .is_some_and(|h| h.contains("stream-next-offset"))
    );
    let read = common::request(addr, hyper::Method::GET, "/v1/stream/r")
        .send()
        .await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.text(), "hello router!");
    assert_eq!(read.h("access-control-allow-origin"), Some("*"));
    assert_eq!(read.h("x-content-type-options"), Some("nosniff"));
    let missing = common::request(addr, hyper::Method::GET, "/v1/stream/none")
        .send()
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    server.abort();
    engine.shutdown().await;
}

/// Behind a proxy, `Location` names the URL clients see (`--public-url`),
/// whatever `Host` the proxy sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locations_follow_the_public_url() {
    let s = TestServer::start_with(|c| {
        c.public_url = Some("https://streams.example.com/ds".to_owned());
    })
    .await;
    let r = s.put("/v1/stream/behind").text("x").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        r.h("location"),
        Some("https://streams.example.com/ds/v1/stream/behind")
    );
    let r = s.put("/acme/k/behind").text("x").send().await;
    assert_eq!(
        r.h("location"),
        Some("https://streams.example.com/ds/acme/k/behind")
    );
    s.stop().await;
    // The flag is checked.
    use clap::Parser;
    for bad in [
        "streams.example.com",
        "ftp://x",
        "https://",
        "https://x/?q=1",
    ] {
        assert!(
            strand_server::Cli::try_parse_from(["strand-server", "--public-url", bad]).is_err(),
            "{bad}"
        );
    }
    let ok = strand_server::Cli::try_parse_from([
        "strand-server",
        "--public-url",
        "https://streams.example.com/",
    ])
    .unwrap();
    assert_eq!(
        ok.config.public_url.as_deref(),
        Some("https://streams.example.com")
    );
}
