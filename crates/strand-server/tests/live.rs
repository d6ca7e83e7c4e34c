//! Long-poll and SSE against a real server: immediate data, parking until
//! an append or close, timeouts, SSE framing and the end of a closed
//! stream.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::{TestServer, off, read_sse};
use hyper::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_returns_data_at_once_or_waits_for_it() {
    let s = TestServer::start_with(|c| c.long_poll_timeout_ms = 5_000).await;
    s.put("/v1/stream/lp").text("abc").send().await;
    let now = s.get("/v1/stream/lp?offset=-1&live=long-poll").send().await;
    assert_eq!((now.status, now.text()), (StatusCode::OK, "abc"));
    assert!(
        now.h("stream-cursor")
            .unwrap()
            .bytes()
            .all(|b| b.is_ascii_digit())
    );
    assert_eq!(now.h("stream-up-to-date"), Some("true"));

    // A reader at the tail parks until the append.
    let url = format!("/v1/stream/lp?offset={}&live=long-poll", off(3));
    let waiting = tokio::spawn({
        let req = s.get(&url);
        async move { req.send().await }
    });
    s.parked(1).await;
    assert!(!waiting.is_finished());
    s.post("/v1/stream/lp").text("de").send().await;
    let woken = tokio::time::timeout(Duration::from_secs(3), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((woken.status, woken.text()), (StatusCode::OK, "de"));
    assert_eq!(woken.next(), off(5));

    // `offset=now` waits from the tail; a close wakes it with 204.
    let waiting = tokio::spawn({
        let req = s.get("/v1/stream/lp?offset=now&live=long-poll");
        async move { req.send().await }
    });
    s.parked(1).await;
    s.post("/v1/stream/lp")
        .header("stream-closed", "true")
        .send()
        .await;
    let closed = tokio::time::timeout(Duration::from_secs(3), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(closed.status, StatusCode::NO_CONTENT);
    assert_eq!(closed.h("stream-closed"), Some("true"));
    assert_eq!(closed.next(), off(5));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_times_out_with_204_and_a_cursor() {
    let s = TestServer::start().await;
    s.put("/v1/stream/idle").text("x").send().await;
    let r = s
        .get(&format!("/v1/stream/idle?offset={}&live=long-poll", off(1)))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(r.next(), off(1));
    assert_eq!(r.h("stream-up-to-date"), Some("true"));
    let cursor: u64 = r.h("stream-cursor").unwrap().parse().unwrap();
    // Echoing the cursor gives a larger one.
    let again = s
        .get(&format!(
            "/v1/stream/idle?offset={}&live=long-poll&cursor={cursor}",
            off(1)
        ))
        .send()
        .await;
    let next: u64 = again.h("stream-cursor").unwrap().parse().unwrap();
    assert!(next > cursor);
    assert_eq!(
        s.get("/v1/stream/none?offset=-1&live=long-poll")
            .send()
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_wakes_a_parked_reader() {
    let s = TestServer::start_with(|c| c.long_poll_timeout_ms = 5_000).await;
    s.put("/v1/stream/d").text("x").send().await;
    let waiting = tokio::spawn({
        let req = s.get(&format!("/v1/stream/d?offset={}&live=long-poll", off(1)));
        async move { req.send().await }
    });
    s.parked(1).await;
    s.delete("/v1/stream/d").send().await;
    let r = tokio::time::timeout(Duration::from_secs(3), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_catches_up_then_streams_with_a_control_after_every_event() {
    let s = TestServer::start_with(|c| c.long_poll_timeout_ms = 5_000).await;
    s.put("/v1/stream/s").text("line1\nline2").send().await;
    let response = s.get("/v1/stream/s?offset=-1&live=sse").open().await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["cache-control"], "no-cache");
    assert!(response.headers().get("stream-sse-data-encoding").is_none());
    let reader = tokio::spawn(read_sse(response, Duration::from_secs(3), |t| {
        t.matches("event: control").count() >= 2
    }));
    // Caught up and parked: the append streams to it.
    s.parked(1).await;
    s.post("/v1/stream/s").text("more").send().await;
    let text = reader.await.unwrap();
    let expected_first = format!(
        "event: data\ndata:line1\ndata:line2\n\nevent: control\ndata:{{\"streamNextOffset\":\"{}\",\"streamCursor\":\"",
        off(11)
    );
    assert!(text.starts_with(&expected_first), "{text}");
    assert!(text.contains("\"upToDate\":true}\n\n"), "{text}");
    let second = &text[text.find("}\n\n").unwrap() + 3..];
    assert!(
        second.starts_with("event: data\ndata:more\n\nevent: control\n"),
        "{second}"
    );
    assert!(second.contains(&off(15)), "{second}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_binary_is_base64_and_a_close_ends_the_response() {
    let s = TestServer::start().await;
    s.put("/v1/stream/sb")
        .header("content-type", "application/octet-stream")
        .body(vec![0u8, 255, 10])
        .send()
        .await;
    s.post("/v1/stream/sb")
        .header("stream-closed", "true")
        .send()
        .await;
    let response = s.get("/v1/stream/sb?offset=-1&live=sse").open().await;
    assert_eq!(response.headers()["stream-sse-data-encoding"], "base64");
    // The whole response, ended by the server.
    let text = read_sse(response, Duration::from_secs(3), |_| false).await;
    assert_eq!(
        text,
        format!(
            "event: data\ndata:AP8K\n\nevent: control\ndata:{{\"streamNextOffset\":\"{}\",\"streamClosed\":true}}\n\n",
            off(3)
        )
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_and_long_poll_answers_may_be_cached_and_sse_is_not_buffered() {
    const CACHED: &str = "public, max-age=60, stale-while-revalidate=300";
    let s = TestServer::start_with(|c| c.long_poll_timeout_ms = 50).await;
    s.put("/v1/stream/c").text("abc").send().await;
    let read = s.get("/v1/stream/c?offset=-1").send().await;
    assert_eq!(read.h("cache-control"), Some(CACHED));
    let etag = read.h("etag").unwrap().to_owned();
    let again = s
        .get("/v1/stream/c?offset=-1")
        .header("if-none-match", &etag)
        .send()
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert_eq!(again.h("cache-control"), Some(CACHED));
    // Positions that move are never cached.
    let now = s.get("/v1/stream/c?offset=now").send().await;
    assert_eq!(now.h("cache-control"), Some("no-store"));
    assert_eq!(
        s.head("/v1/stream/c").send().await.h("cache-control"),
        Some("no-store")
    );
    // Long-poll: data, and a timeout, at a concrete offset; `now` is not.
    // (An offset inside the one message reads it whole.)
    let data = s
        .get(&format!("/v1/stream/c?offset={}&live=long-poll", off(1)))
        .send()
        .await;
    assert_eq!((data.status, data.text()), (StatusCode::OK, "abc"));
    assert_eq!(data.h("cache-control"), Some(CACHED));
    let idle = s
        .get(&format!("/v1/stream/c?offset={}&live=long-poll", off(3)))
        .send()
        .await;
    assert_eq!(idle.status, StatusCode::NO_CONTENT);
    assert_eq!(idle.h("cache-control"), Some(CACHED));
    let tail = s.get("/v1/stream/c?offset=now&live=long-poll").send().await;
    assert_eq!(tail.status, StatusCode::NO_CONTENT);
    assert_eq!(tail.h("cache-control"), Some("no-store"));
    // SSE: not cached, and not buffered by proxies.
    let sse = s.get("/v1/stream/c?offset=-1&live=sse").open().await;
    assert_eq!(sse.headers()["cache-control"], "no-cache");
    assert_eq!(sse.headers()["x-accel-buffering"], "no");
    drop(sse);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_text_lines_that_begin_with_spaces_keep_them() {
    let s = TestServer::start().await;
    s.put("/v1/stream/sp").text(" two\n  lines").send().await;
    s.post("/v1/stream/sp")
        .header("stream-closed", "true")
        .send()
        .await;
    let response = s.get("/v1/stream/sp?offset=-1&live=sse").open().await;
    let text = read_sse(response, Duration::from_secs(3), |_| false).await;
    // What any SSE client reads: the `data` lines of the data event, one
    // space after the colon dropped (the SSE standard).
    let event = text.split("\n\n").next().unwrap();
    let data: Vec<&str> = event
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect();
    assert_eq!(data.join("\n"), " two\n  lines", "{text}");
    s.stop().await;
}

/// The first subscriber woken with an append encodes its events for all
/// of them; one whose cursor differs gets the same data event and a
/// control event of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_of_a_stream_share_its_events_and_keep_their_cursors() {
    let s = TestServer::start_with(|c| c.long_poll_timeout_ms = 5_000).await;
    s.put("/v1/stream/fan")
        .header("content-type", "application/octet-stream")
        .send()
        .await;
    let tail = off(0);
    let mut readers = Vec::new();
    for cursor in ["", "&cursor=999999999", ""] {
        let response = s
            .get(&format!("/v1/stream/fan?offset={tail}&live=sse{cursor}"))
            .open()
            .await;
        readers.push(tokio::spawn(read_sse(
            response,
            Duration::from_secs(3),
            |t| t.matches("event: data").count() >= 2 && t.matches("event: control").count() >= 3,
        )));
    }
    s.parked(3).await;
    for body in [vec![0u8, 255, 10], b"\n z".to_vec()] {
        s.post("/v1/stream/fan")
            .header("content-type", "application/octet-stream")
            .body(body)
            .send()
            .await;
    }
    let mut texts = Vec::new();
    for reader in readers {
        texts.push(reader.await.unwrap());
    }
    let cursors: Vec<Vec<u64>> = texts
        .iter()
        .map(|t| {
            t.split("\"streamCursor\":\"")
                .skip(1)
                .map(|rest| rest[..rest.find('"').unwrap()].parse().unwrap())
                .collect()
        })
        .collect();
    for (text, cursors) in texts.iter().zip(&cursors) {
        let first = text.find("event: data").unwrap_or_else(|| panic!("{text}"));
        let events = &text[first..];
        let expected = format!(
            "event: data\ndata:AP8K\n\nevent: control\ndata:{{\"streamNextOffset\":\"{}\",\"streamCursor\":\"{}\",\"upToDate\":true}}\n\n\
             event: data\ndata:CiB6\n\nevent: control\ndata:{{\"streamNextOffset\":\"{}\",\"streamCursor\":\"{}\",\"upToDate\":true}}\n\n",
            off(3),
            cursors[1],
            off(6),
            cursors[2],
        );
        assert_eq!(events, expected);
    }
    // The reader that sent a cursor got later ones than it sent; the
    // others got the current interval's.
    assert!(cursors[1].iter().all(|&c| c > 999_999_999), "{cursors:?}");
    assert!(cursors[0].iter().all(|&c| c < 999_999_999), "{cursors:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_json_events_are_arrays_and_empty_streams_announce_their_offset() {
    let s = TestServer::start().await;
    s.put("/v1/stream/sj")
        .header("content-type", "application/json")
        .send()
        .await;
    let response = s.get("/v1/stream/sj?offset=-1&live=sse").open().await;
    let reader = tokio::spawn(read_sse(response, Duration::from_secs(3), |t| {
        t.contains("event: data") && t.matches("event: control").count() >= 2
    }));
    s.parked(1).await;
    s.post("/v1/stream/sj")
        .header("content-type", "application/json")
        .body(r#"[{"a":1},{"b":2}]"#)
        .send()
        .await;
    let text = reader.await.unwrap();
    let first = format!("event: control\ndata:{{\"streamNextOffset\":\"{}\"", off(0));
    assert!(text.starts_with(&first), "{text}");
    assert!(
        text.contains("event: data\ndata:[{\"a\":1},{\"b\":2}]\n\n"),
        "{text}"
    );
    assert_eq!(
        s.get("/v1/stream/none?offset=-1&live=sse")
            .send()
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_readers_are_bounded() {
    let s = TestServer::start_with(|c| {
        c.max_live_readers = 2;
        c.long_poll_timeout_ms = 2_000;
    })
    .await;
    s.put("/v1/stream/w").text("x").send().await;
    let url = format!("/v1/stream/w?offset={}&live=long-poll", off(1));
    let parked: Vec<_> = (0..2)
        .map(|_| {
            let req = s.get(&url);
            tokio::spawn(async move { req.send().await })
        })
        .collect();
    s.parked(2).await;
    let refused = s.get(&url).send().await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.h("retry-after"), Some("1"));
    s.post("/v1/stream/w").text("y").send().await;
    for p in parked {
        assert_eq!(p.await.unwrap().status, StatusCode::OK);
    }
    // The places are free again.
    let r = s
        .get(&format!("/v1/stream/w?offset={}&live=long-poll", off(2)))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_live_reads() {
    let s = TestServer::start_with(|c| c.long_poll_timeout_ms = 60_000).await;
    s.put("/v1/stream/z").text("x").send().await;
    let sse = s
        .get(&format!("/v1/stream/z?offset={}&live=sse", off(1)))
        .open()
        .await;
    let lp = {
        let req = s.get(&format!("/v1/stream/z?offset={}&live=long-poll", off(1)));
        tokio::spawn(async move { req.send().await })
    };
    s.parked(2).await;
    let reader = tokio::spawn(read_sse(sse, Duration::from_secs(20), |_| false));
    let started = std::time::Instant::now();
    s.stop().await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(lp.await.unwrap().status, StatusCode::NO_CONTENT);
    let text = reader.await.unwrap();
    assert!(text.starts_with("event: control\n"), "{text}");
}

/// An SSE response on a quiet stream sends a control event each quiet
/// `long_poll_timeout`, goes on delivering appends between them, and ends
/// by itself at `--sse-max-duration-ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_idles_with_controls_and_ends_at_its_maximum_duration() {
    use http_body_util::BodyExt;
    let s = TestServer::start_with(|c| {
        c.long_poll_timeout_ms = 100;
        c.sse_max_duration_ms = 3_000;
    })
    .await;
    s.put("/v1/stream/q").text("").send().await;
    let response = s.get("/v1/stream/q?offset=-1&live=sse").open().await;
    s.parked(1).await;
    let writer = {
        let posts: Vec<_> = (0..5)
            .map(|i| s.post("/v1/stream/q").text(&format!("<{i}>")))
            .collect();
        tokio::spawn(async move {
            for post in posts {
                // Pacing the writer (the load under test): quiet spells
                // between appends.
                tokio::time::sleep(Duration::from_millis(150)).await;
                assert_eq!(post.send().await.status, StatusCode::NO_CONTENT);
            }
        })
    };
    // The whole body: it ends by itself, well within this bound.
    let body = tokio::time::timeout(Duration::from_secs(30), response.into_body().collect())
        .await
        .expect("the response ends at its maximum duration")
        .unwrap()
        .to_bytes();
    writer.await.unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    let data: String = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter(|line| line.starts_with('<'))
        .collect();
    assert_eq!(data, "<0><1><2><3><4>", "{text}");
    // Quiet spells of 100 ms or more before, between and after the
    // appends each brought a control event with no data event before it.
    let idle = text
        .split("\n\n")
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0].starts_with("event: control") && w[1].starts_with("event: control"))
        .count();
    assert!(idle >= 3, "{text}");
    s.stop().await;
}

/// Appends that land while an SSE reader is between events (the reader
/// parks at once after an up-to-date event, and the group answers that park
/// at once when the tail moved) are all delivered, in order, exactly once;
/// an idle reader gets a control event at the long-poll timeout naming the
/// tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_delivers_a_burst_of_appends_exactly_once_and_idles_with_controls() {
    let s = TestServer::start_with(|c| c.long_poll_timeout_ms = 300).await;
    s.put("/v1/stream/burst").text("").send().await;
    let response = s.get("/v1/stream/burst?offset=-1&live=sse").open().await;
    let writer = {
        let posts: Vec<_> = (0..200)
            .map(|i| s.post("/v1/stream/burst").text(&format!("<{i:03}>")))
            .collect();
        tokio::spawn(async move {
            for (i, post) in posts.into_iter().enumerate() {
                // Bursts of 50 with a pause between: pacing the writer (the
                // load under test), not waiting for the server.
                if i % 50 == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                assert_eq!(post.send().await.status, StatusCode::NO_CONTENT);
            }
        })
    };
    let tail = off(200 * 5);
    let at_tail = format!("{{\"streamNextOffset\":\"{tail}\"");
    let text = read_sse(response, Duration::from_secs(10), |t| {
        // Everything delivered, its control event, then an idle one.
        t.find("<199>")
            .is_some_and(|at| t[at..].matches(&at_tail).count() >= 2)
    })
    .await;
    writer.await.unwrap();
    let data: String = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter(|line| line.starts_with('<'))
        .collect();
    let expected: String = (0..200).map(|i| format!("<{i:03}>")).collect();
    assert_eq!(data, expected, "{text}");
    // The idle control events after the burst: up to date at the tail, no
    // data between them.
    let last_data = text.rfind("event: data").unwrap();
    let idle = &text[last_data..];
    assert!(idle.matches(&at_tail).count() >= 2, "{idle}");
    assert!(idle.matches("\"upToDate\":true").count() >= 2, "{idle}");
    s.stop().await;
}

/// An SSE reader that stops reading while megabytes are appended (its
/// session blocks on the socket, its subscription's queue fills and the
/// group drops it) still gets every byte exactly once, in order, when it
/// reads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_sse_reader_catches_up_exactly_once() {
    let s = TestServer::start_with(|c| c.long_poll_timeout_ms = 5_000).await;
    s.put("/v1/stream/lag").text("").send().await;
    let response = s.get("/v1/stream/lag?offset=-1&live=sse").open().await;
    let messages = 300usize;
    let mut expected = String::new();
    for i in 0..messages {
        let body: String =
            std::iter::repeat_n(char::from(b'a' + (i % 26) as u8), 16 * 1024).collect();
        expected.push_str(&body);
        let r = s.post("/v1/stream/lag").text(&body).send().await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    let tail = off((messages * 16 * 1024) as u64);
    let text = read_sse(response, Duration::from_secs(20), |t| {
        t.contains(&format!("{{\"streamNextOffset\":\"{tail}\""))
    })
    .await;
    let data: String = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter(|line| !line.starts_with('{'))
        .collect();
    assert_eq!(data.len(), expected.len());
    assert!(data == expected, "bytes differ");
    s.stop().await;
}
