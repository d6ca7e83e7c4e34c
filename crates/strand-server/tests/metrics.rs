//! `GET /metrics`: scraped from live servers (in memory, a durable node, a
//! three-node cluster) and parsed with `prometheus-parse`, a parser
//! independent of the encoder.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use prometheus_parse::{Sample, Scrape, Value};

use crate::common::{TestServer, eventually};
use crate::process;

/// Parses a scrape; every line must be valid exposition text.
fn parse(text: &str) -> Scrape {
    for line in text.lines() {
        assert!(
            line.is_empty()
                || line.starts_with("# HELP ")
                || line.starts_with("# TYPE ")
                || line.starts_with("strand_"),
            "unexpected line {line:?}"
        );
    }
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// The samples named `name` whose labels include `labels`.
fn samples<'a>(s: &'a Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    s.samples
        .iter()
        .filter(|x| x.metric == name)
        .filter(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .collect()
}

/// The value of the one sample named `name` with `labels`.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found = samples(s, name, labels);
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    match &found[0].value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        other => panic!("{name}: {other:?}"),
    }
}

/// Label values are bounded: no stream or bucket name appears in a scrape.
fn assert_no_names(text: &str, names: &[&str]) {
    for name in names {
        assert!(!text.contains(name), "{name} leaked into the metrics");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_in_memory_counts_requests_appends_and_live_readers() {
    let s = TestServer::start().await;
    // Without authentication the client listener does not serve metrics.
    let r = s.get("/metrics").send().await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = s.put("/v1/stream/secret-orders").text("").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    for body in ["abc", "defg", "hi"] {
        let r = s.post("/v1/stream/secret-orders").text(body).send().await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    let r = s.get("/v1/stream/missing-one").send().await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // A long-poll parked at the tail is a live reader while it waits.
    let waiting = tokio::spawn({
        let req = s.get("/v1/stream/secret-orders?offset=now&live=long-poll");
        async move { req.send().await }
    });
    let scrape = eventually("the long-poll counted", Duration::from_secs(10), || async {
        let r = s.admin(Method::GET, "/metrics").send().await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert!(
            r.h("content-type")
                .unwrap()
                .starts_with("text/plain; version=0.0.4")
        );
        let scrape = parse(r.text());
        let parked = value(&scrape, "strand_live_readers", &[("mode", "long-poll")]) == 1.0;
        parked.then(|| {
            assert_no_names(r.text(), &["secret-orders", "missing-one"]);
            scrape
        })
    })
    .await;
    let post = [("route", "stream"), ("method", "POST"), ("status", "204")];
    assert_eq!(value(&scrape, "strand_http_requests_total", &post), 3.0);
    let missing = [("route", "stream"), ("method", "GET"), ("status", "404")];
    assert_eq!(value(&scrape, "strand_http_requests_total", &missing), 1.0);
    let refused = [("route", "metrics"), ("method", "GET"), ("status", "403")];
    assert_eq!(value(&scrape, "strand_http_requests_total", &refused), 1.0);
    assert_eq!(value(&scrape, "strand_appends_total", &[]), 3.0);
    assert_eq!(value(&scrape, "strand_appended_bytes_total", &[]), 9.0);
    assert_eq!(value(&scrape, "strand_streams", &[]), 1.0);
    assert_eq!(value(&scrape, "strand_buckets", &[]), 1.0);
    assert_eq!(value(&scrape, "strand_hot_bytes", &[]), 9.0);
    let per_group: f64 = samples(&scrape, "strand_group_hot_bytes", &[])
        .iter()
        .map(|x| match x.value {
            Value::Gauge(v) => v,
            _ => 0.0,
        })
        .sum();
    assert_eq!(per_group, 9.0);
    // The latency histogram of the stream route counted every request.
    let latency = samples(
        &scrape,
        "strand_http_request_duration_seconds",
        &[("route", "stream")],
    );
    match &latency[0].value {
        Value::Histogram(buckets) => {
            assert_eq!(buckets.last().unwrap().count, 5.0, "{buckets:?}");
        }
        other => panic!("{other:?}"),
    }
    // No durable node: no Raft or log figures.
    assert!(samples(&scrape, "strand_raft_leader", &[]).is_empty());
    // The append wakes the long-poll; then no live reader is left.
    let r = s.post("/v1/stream/secret-orders").text("j").send().await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let woken = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(woken.status, StatusCode::OK);
    let r = s.admin(Method::GET, "/metrics").send().await;
    let scrape = parse(r.text());
    assert_eq!(
        value(&scrape, "strand_live_readers", &[("mode", "long-poll")]),
        0.0
    );
    assert_eq!(value(&scrape, "strand_appends_total", &[]), 4.0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_readers_and_events_are_counted() {
    let s = TestServer::start().await;
    s.put("/v1/stream/feed").text("first").send().await;
    let response = s.get("/v1/stream/feed?offset=-1&live=sse").open().await;
    // Read until the first control event; the reader stays connected.
    let mut body = response.into_body();
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        use http_body_util::BodyExt;
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                text.push_str(std::str::from_utf8(data).unwrap());
                if text.contains("event: control") {
                    break;
                }
            }
        }
    })
    .await
    .unwrap();
    assert!(text.contains("event: data"), "{text}");
    let r = s.admin(Method::GET, "/metrics").send().await;
    let scrape = parse(r.text());
    assert_eq!(
        value(&scrape, "strand_live_readers", &[("mode", "sse")]),
        1.0
    );
    assert_eq!(value(&scrape, "strand_sse_events_total", &[]), 2.0);
    drop(body);
    let r = s.admin(Method::GET, "/metrics").send().await;
    let scrape = parse(r.text());
    assert!(value(&scrape, "strand_sse_events_total", &[]) >= 2.0);
    s.stop().await;
}

/// `GET /metrics` on a durable node's admin listener: the first scrape
/// for which `pred` holds (within 20 s).
async fn scrape_until(admin: SocketAddr, pred: impl Fn(&Scrape) -> bool) -> (String, Scrape) {
    eventually(
        "a scrape that shows it",
        Duration::from_secs(20),
        || async {
            let r = process::request(admin, "GET", "/metrics", &[], b"")
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            let text = String::from_utf8(r.body).unwrap();
            let scrape = parse(&text);
            pred(&scrape).then_some((text, scrape))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_node_reports_its_log_and_groups() {
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--groups",
        "2",
        "--data-dir",
        &dir.path().display().to_string(),
    ]
    .map(str::to_owned)
    .to_vec();
    let server = process::start_args(&args);
    let admin = process::admin_addr(server.addr);
    let created = process::request(server.addr, "PUT", "/v1/stream/s", &[], b"")
        .await
        .unwrap();
    assert_eq!(created.status, 201);
    for _ in 0..5 {
        let r = process::request(
            server.addr,
            "POST",
            "/v1/stream/s",
            &[("Content-Type", "application/octet-stream".to_owned())],
            b"12345678",
        )
        .await
        .unwrap();
        assert_eq!(r.status, 204);
    }
    let (_, scrape) = scrape_until(admin, |s| {
        samples(s, "strand_raft_leader", &[])
            .iter()
            .all(|x| matches!(x.value, Value::Gauge(v) if v == 1.0))
    })
    .await;
    for group in ["0", "1"] {
        assert_eq!(
            value(&scrape, "strand_raft_leader", &[("group", group)]),
            1.0
        );
        assert!(value(&scrape, "strand_raft_term", &[("group", group)]) >= 1.0);
        let applied = value(&scrape, "strand_raft_applied_index", &[("group", group)]);
        let last = value(&scrape, "strand_raft_last_log_index", &[("group", group)]);
        assert!(applied >= 1.0 && applied <= last, "{applied} {last}");
        assert!(value(&scrape, "strand_raft_committed_index", &[("group", group)]) >= 1.0);
    }
    assert!(value(&scrape, "strand_log_fsyncs_total", &[]) >= 5.0);
    assert!(value(&scrape, "strand_log_synced_proposals_total", &[]) >= 6.0);
    assert_eq!(value(&scrape, "strand_appended_bytes_total", &[]), 40.0);
    let fsyncs = value(&scrape, "strand_log_fsyncs_total", &[]);
    assert_eq!(
        value(&scrape, "strand_log_fsync_duration_seconds_count", &[]),
        fsyncs
    );
    match &samples(&scrape, "strand_log_fsync_duration_seconds", &[])[0].value {
        Value::Histogram(buckets) => {
            let inf = buckets
                .iter()
                .find(|b| b.less_than == f64::INFINITY)
                .unwrap();
            assert_eq!(inf.count, fsyncs, "{buckets:?}");
        }
        other => panic!("{other:?}"),
    }
    // A single node has no peers: no replication lag, no Raft traffic.
    assert!(samples(&scrape, "strand_raft_replication_lag_entries", &[]).is_empty());
    assert!(samples(&scrape, "strand_raft_messages_sent_total", &[]).is_empty());
    // The cold tier (local segments by default) reports its counters.
    assert_eq!(value(&scrape, "strand_cold_store_failures_total", &[]), 0.0);
    // Its hot budget refused nothing and holds no waiting write.
    assert_eq!(value(&scrape, "strand_hot_refused_writes_total", &[]), 0.0);
    assert_eq!(value(&scrape, "strand_hot_waiting_write_bytes", &[]), 0.0);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_leader_reports_replication_to_its_followers() {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| process::free_port()).collect();
    let nodes: Vec<process::Server> = (1..=3)
        .map(|id| {
            let mut args = process::cluster_node_args(dir.path(), id, &ports);
            args.extend(["--admin-listen".to_owned(), "127.0.0.1:0".to_owned()]);
            // The leader found below stays the leader: no hand-off moves
            // group 0 while the test reads its replication (the one failure
            // seen of this test, its message lost, may have been one).
            args.extend(["--leader-balance-interval-ms".to_owned(), "0".to_owned()]);
            process::start_args(&args)
        })
        .collect();
    let admins: Vec<SocketAddr> = nodes.iter().map(|n| process::admin_addr(n.addr)).collect();
    // Wait for a leader, then write through it so every node has entries.
    let leader = eventually("a leader of group 0", Duration::from_secs(30), || async {
        for (i, admin) in admins.iter().enumerate() {
            let r = process::request(*admin, "GET", "/metrics", &[], b"")
                .await
                .unwrap();
            let scrape = parse(&String::from_utf8_lossy(&r.body));
            if samples(&scrape, "strand_raft_leader", &[("group", "0")])
                .iter()
                .any(|x| matches!(x.value, Value::Gauge(v) if v == 1.0))
            {
                return Some(i);
            }
        }
        None
    })
    .await;
    let addr = nodes[leader].addr;
    // Until every member has its placement, a member may answer 503
    // ("joining"), which changes nothing; a client tries again.
    eventually("the stream created", Duration::from_secs(30), || async {
        let r = process::request(addr, "PUT", "/v1/stream/c", &[], b"")
            .await
            .unwrap();
        match r.status {
            201 => Some(()),
            503 => None,
            other => panic!("PUT answered {other}: {}", String::from_utf8_lossy(&r.body)),
        }
    })
    .await;
    let r = process::request(
        addr,
        "POST",
        "/v1/stream/c",
        &[("Content-Type", "application/octet-stream".to_owned())],
        b"xyz",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 204);
    // The leader lists both followers; once they have every entry their
    // lag is 0.
    let followers: Vec<String> = (1..=3u64)
        .filter(|id| *id != leader as u64 + 1)
        .map(|id| id.to_string())
        .collect();
    let (_, scrape) = scrape_until(admins[leader], |s| {
        followers.iter().all(|f| {
            samples(
                s,
                "strand_raft_replication_lag_entries",
                &[("group", "0"), ("follower", f)],
            )
            .iter()
            .any(|x| matches!(x.value, Value::Gauge(v) if v == 0.0))
        })
    })
    .await;
    for f in &followers {
        let labels = [("group", "0"), ("follower", f.as_str())];
        assert_eq!(
            value(&scrape, "strand_raft_replication_lag_entries", &labels),
            0.0
        );
    }
    assert!(value(&scrape, "strand_raft_messages_sent_total", &[]) > 0.0);
    // Messages to peers not started yet failed; the counter is there.
    assert!(value(&scrape, "strand_raft_messages_failed_total", &[]) >= 0.0);
    assert!(
        value(&scrape, "strand_raft_batched_messages_total", &[])
            <= value(&scrape, "strand_raft_messages_sent_total", &[])
    );
    // A follower reports no lag of its own and follows the same term.
    let follower = (leader + 1) % 3;
    let (_, other) = scrape_until(admins[follower], |_| true).await;
    assert_eq!(value(&other, "strand_raft_leader", &[("group", "0")]), 0.0);
    assert!(samples(&other, "strand_raft_replication_lag_entries", &[]).is_empty());
    assert_eq!(
        value(&other, "strand_raft_term", &[("group", "0")]),
        value(&scrape, "strand_raft_term", &[("group", "0")])
    );
    drop(nodes);
}

/// Peers' Raft messages are bounded node-wide too, in a budget of their
/// own (`--max-peer-body-memory-bytes`): while uploads to the batch route
/// hold all of it, one more waits, then gets 503 naming the flag, and
/// clients' writes go on meanwhile; once the uploads go away, their bytes
/// are given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_messages_are_bounded_apart_from_client_bodies() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let s = TestServer::start_with(|c| {
        c.max_peer_body_memory_bytes = strand_server::config::MAX_PEER_MESSAGE_BYTES;
    })
    .await;
    let batch = strand_raft::MAX_BATCH_BODY;
    let fit = strand_server::config::MAX_PEER_MESSAGE_BYTES / batch;
    let head = format!(
        "POST /__strand/raft/batch HTTP/1.1\r\nHost: test\r\n\
         Content-Type: application/msgpack\r\nContent-Length: {batch}\r\n\r\n"
    );
    // Uploads that announce a whole batch each and send a few bytes.
    let mut uploads = Vec::new();
    for _ in 0..fit {
        let mut upload = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        upload.write_all(head.as_bytes()).await.unwrap();
        upload.write_all(&[0u8; 16]).await.unwrap();
        uploads.push(upload);
    }
    let held = (fit * batch) as f64;
    eventually(
        "the uploads' bytes held",
        Duration::from_secs(20),
        || async {
            let r = s.admin(Method::GET, "/metrics").send().await;
            (value(&parse(r.text()), "strand_peer_body_bytes", &[]) == held).then_some(())
        },
    )
    .await;
    // One more batch finds no room.
    let mut late = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    late.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), late.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(
            n > 0,
            "the late batch's connection closed without an answer"
        );
        answer.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&answer).to_string();
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    // A client's write is not held up by the peers' budget.
    let r = s.put("/v1/stream/c").text("").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = s.post("/v1/stream/c").text("client").send().await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text());
    let scrape = parse(s.admin(Method::GET, "/metrics").send().await.text());
    assert_eq!(value(&scrape, "strand_peer_body_refused_total", &[]), 1.0);
    assert_eq!(
        value(&scrape, "strand_request_body_refused_total", &[]),
        0.0
    );
    // The uploads go away; their bytes come back.
    drop(uploads);
    eventually(
        "the uploads' bytes given back",
        Duration::from_secs(20),
        || async {
            let r = s.admin(Method::GET, "/metrics").send().await;
            (value(&parse(r.text()), "strand_peer_body_bytes", &[]) == 0.0).then_some(())
        },
    )
    .await;
    s.stop().await;
}

/// Request bodies are bounded node-wide (`--max-body-memory-bytes`): while
/// one upload holds the whole budget, another write waits, then gets 503
/// with `Retry-After: 1`; once the upload ends, writes go on. The scrape
/// shows the bytes held and the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_are_bounded_node_wide() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let s = TestServer::start_with(|c| {
        c.max_body_bytes = 1000;
        c.max_body_memory_bytes = 1000;
    })
    .await;
    let r = s.put("/v1/stream/b").text("").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    // An upload that announces 1000 bytes and sends 400 of them.
    let mut upload = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let head = "POST /v1/stream/b HTTP/1.1\r\nHost: test\r\nContent-Type: text/plain\r\n\
                Content-Length: 1000\r\n\r\n";
    upload.write_all(head.as_bytes()).await.unwrap();
    upload.write_all(&[b'u'; 400]).await.unwrap();
    eventually(
        "the upload's bytes held",
        Duration::from_secs(10),
        || async {
            let r = s.admin(Method::GET, "/metrics").send().await;
            (value(&parse(r.text()), "strand_request_body_bytes", &[]) == 1000.0).then_some(())
        },
    )
    .await;
    let r = s.post("/v1/stream/b").text("later").send().await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    assert_eq!(r.h("retry-after"), Some("1"));
    assert!(r.text().contains("--max-body-memory-bytes"), "{}", r.text());
    // The upload ends and is answered; its bytes are given back.
    upload.write_all(&[b'v'; 600]).await.unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 1024];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), upload.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the upload's connection closed without an answer");
        answer.extend_from_slice(&chunk[..n]);
    }
    assert!(
        answer.starts_with(b"HTTP/1.1 204"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let r = s.post("/v1/stream/b").text("later").send().await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text());
    let r = s.get("/v1/stream/b").send().await;
    let mut want = vec![b'u'; 400];
    want.extend_from_slice(&[b'v'; 600]);
    want.extend_from_slice(b"later");
    assert_eq!(r.body, want);
    let scrape = parse(s.admin(Method::GET, "/metrics").send().await.text());
    assert_eq!(value(&scrape, "strand_request_body_bytes", &[]), 0.0);
    assert_eq!(
        value(&scrape, "strand_request_body_refused_total", &[]),
        1.0
    );
    s.stop().await;
}
