//! The protocol's subscription API (`docs/subscriptions.md`) on an
//! in-process server: pull-wake wakes appended to the wake stream,
//! claims and their fencing, explicit streams, and refusals. Webhook
//! delivery is covered by the official suite's opt-in tests (`cargo xtask
//! http-conformance --subscriptions`, inside a network namespace).
#![allow(clippy::unwrap_used)]

use crate::common;

use common::TestServer;
use hyper::StatusCode;
use serde_json::{Value, json};

const SUBS: &str = "/v1/stream/__ds/subscriptions";

fn body(r: &common::Resp) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

/// Waits (long-polling the wake stream, no sleeps) until it holds an
/// event for `id`; the events.
async fn wake_events(s: &TestServer, stream: &str, id: &str) -> Vec<Value> {
    let mut offset = "-1".to_owned();
    let mut seen = Vec::new();
    for _ in 0..50 {
        let r = s
            .get(&format!("{stream}?offset={offset}&live=long-poll"))
            .send()
            .await;
        if r.status == StatusCode::OK {
            let batch: Vec<Value> = serde_json::from_slice(&r.body).unwrap();
            seen.extend(batch);
        }
        offset = r.next();
        if seen.iter().any(|e| e["subscription_id"] == id) {
            return seen;
        }
    }
    panic!("no wake for {id} in {stream}: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_wake_claim_ack_release_and_fencing() {
    let s = TestServer::start_with(|c| c.long_poll_timeout_ms = 200).await;
    let created = s
        .put("/v1/stream/wake/pool")
        .header("content-type", "application/json")
        .body("[]")
        .send()
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let spec = json!({
        "type": "pull-wake",
        "pattern": "events/*",
        "wake_stream": "wake/pool",
        "lease_ttl_ms": 60_000,
    });
    let put = |spec: Value| {
        s.put(&format!("{SUBS}/pull-1"))
            .header("content-type", "application/json")
            .body(spec.to_string())
            .send()
    };
    assert_eq!(put(spec.clone()).await.status, StatusCode::CREATED);
    assert_eq!(put(spec.clone()).await.status, StatusCode::OK);
    let mut other = spec.clone();
    other["lease_ttl_ms"] = json!(5_000);
    let conflict = put(other).await;
    assert_eq!(conflict.status, StatusCode::CONFLICT);
    assert_eq!(
        body(&conflict)["error"]["code"],
        "SUBSCRIPTION_ALREADY_EXISTS"
    );

    // A matching stream is written: the dispatcher links it and appends a
    // wake to the wake stream. Other streams do not match.
    s.put("/v1/stream/other/x").text("no").send().await;
    let path = "events/pull-a";
    s.put(&format!("/v1/stream/{path}"))
        .header("content-type", "application/json")
        .body(r#"{"event":"created"}"#)
        .send()
        .await;
    let events = wake_events(&s, "/v1/stream/wake/pool", "pull-1").await;
    assert_eq!(events[0]["type"], "wake");
    assert_eq!(events[0]["stream"], path);

    let claim = |worker: &'static str| {
        s.post(&format!("{SUBS}/pull-1/claim"))
            .header("content-type", "application/json")
            .body(json!({ "worker": worker }).to_string())
            .send()
    };
    let first = claim("worker-1").await;
    assert_eq!(first.status, StatusCode::OK);
    let claimed = body(&first);
    let stream = claimed["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["path"] == path)
        .unwrap()
        .clone();
    assert_eq!(stream["has_pending"], true);
    assert_eq!(stream["link_type"], "glob");
    let busy = claim("worker-2").await;
    assert_eq!(busy.status, StatusCode::CONFLICT);
    assert_eq!(body(&busy)["error"]["code"], "ALREADY_CLAIMED");
    assert_eq!(body(&busy)["error"]["current_holder"], "worker-1");

    let ack = json!({
        "wake_id": claimed["wake_id"],
        "generation": claimed["generation"],
        "acks": [{"stream": path, "offset": stream["tail_offset"]}],
        "done": true,
    });
    let token = format!("Bearer {}", claimed["token"].as_str().unwrap());
    let acked = s
        .post(&format!("{SUBS}/pull-1/ack"))
        .header("authorization", &token)
        .header("content-type", "application/json")
        .body(ack.to_string())
        .send()
        .await;
    assert_eq!(acked.status, StatusCode::OK);
    assert_eq!(body(&acked), json!({"ok": true, "next_wake": false}));
    // The same acknowledgement again is fenced: that wake is over.
    let stale = s
        .post(&format!("{SUBS}/pull-1/ack"))
        .header("authorization", &token)
        .header("content-type", "application/json")
        .body(ack.to_string())
        .send()
        .await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert_eq!(body(&stale)["error"]["code"], "FENCED");
    // A forged token is refused.
    let forged = s
        .post(&format!("{SUBS}/pull-1/ack"))
        .header("authorization", "Bearer e30.AAAA")
        .header("content-type", "application/json")
        .body(ack.to_string())
        .send()
        .await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED);

    let shown = body(&s.get(&format!("{SUBS}/pull-1")).send().await);
    assert_eq!(shown["type"], "pull-wake");
    let link = shown["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["path"] == path)
        .unwrap()
        .clone();
    assert_eq!(link["acked_offset"], stream["tail_offset"]);

    // More data: a new claim, then released.
    s.post(&format!("/v1/stream/{path}"))
        .header("content-type", "application/json")
        .body(r#"{"event":"second"}"#)
        .send()
        .await;
    let second = claim("worker-1").await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text());
    let claimed2 = body(&second);
    assert!(claimed2["generation"].as_u64() > claimed["generation"].as_u64());
    let released = s
        .post(&format!("{SUBS}/pull-1/release"))
        .header(
            "authorization",
            &format!("Bearer {}", claimed2["token"].as_str().unwrap()),
        )
        .header("content-type", "application/json")
        .body(
            json!({"wake_id": claimed2["wake_id"], "generation": claimed2["generation"]})
                .to_string(),
        )
        .send()
        .await;
    assert_eq!(released.status, StatusCode::NO_CONTENT);

    assert_eq!(
        s.delete(&format!("{SUBS}/pull-1")).send().await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        s.get(&format!("{SUBS}/pull-1")).send().await.status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_streams_and_refusals() {
    let s = TestServer::start().await;
    let put = |id: &str, spec: Value| {
        s.put(&format!("{SUBS}/{id}"))
            .header("content-type", "application/json")
            .body(spec.to_string())
            .send()
    };
    let created = put(
        "manual",
        json!({"type": "pull-wake", "streams": ["manual/a"], "wake_stream": "wake/m"}),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let add = s
        .post(&format!("{SUBS}/manual/streams"))
        .header("content-type", "application/json")
        .body(json!({"streams": ["manual/b"]}).to_string())
        .send()
        .await;
    assert_eq!(add.status, StatusCode::NO_CONTENT);
    let remove = s
        .delete(&format!("{SUBS}/manual/streams/manual%2Fb"))
        .send()
        .await;
    assert_eq!(remove.status, StatusCode::NO_CONTENT);
    let shown = body(&s.get(&format!("{SUBS}/manual")).send().await);
    let paths: Vec<&str> = shown["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["manual/a"]);
    assert_eq!(shown["streams"][0]["link_type"], "explicit");

    for (spec, code) in [
        (
            json!({"type": "webhook", "pattern": "e/*", "webhook": {"url": "http://10.0.0.1/hook"}}),
            "WEBHOOK_URL_REJECTED",
        ),
        (
            json!({"type": "webhook", "pattern": "e/*"}),
            "INVALID_REQUEST",
        ),
        (
            json!({"type": "pull-wake", "pattern": "e/*"}),
            "INVALID_REQUEST",
        ),
        (
            json!({"type": "pull-wake", "wake_stream": "w"}),
            "INVALID_REQUEST",
        ),
        (
            json!({"type": "pull-wake", "pattern": "e/*", "wake_stream": "w", "lease_ttl_ms": 5}),
            "INVALID_REQUEST",
        ),
        (
            json!({"type": "carrier-pigeon", "pattern": "e/*"}),
            "INVALID_REQUEST",
        ),
    ] {
        let r = put("bad", spec.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{spec}");
        assert_eq!(body(&r)["error"]["code"], code, "{spec}");
    }
    assert_eq!(
        s.get(&format!("{SUBS}/missing")).send().await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.get("/v1/stream/__ds/nothing-here").send().await.status,
        StatusCode::NOT_FOUND
    );
    // The registry's own stream is no client's: its bucket has no route.
    assert_eq!(
        s.get("/__strand/subscriptions").send().await.status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

/// A subscription is replicated state: after kill -9 and a restart the
/// durable node still has it, with its streams, acknowledgements and
/// generation, and still fences the wake that ended before the crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_survive_kill_9() {
    use crate::process::{request, start};
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let addr = server.addr;
    let json_headers = [("content-type", "application/json".to_owned())];
    let spec = json!({"type": "pull-wake", "pattern": "jobs/*", "wake_stream": "wake/jobs", "lease_ttl_ms": 60_000});
    let r = request(addr, "PUT", "/v1/stream/wake/jobs", &json_headers, b"[]")
        .await
        .unwrap();
    assert_eq!(r.status, 201);
    let r = request(
        addr,
        "PUT",
        &format!("{SUBS}/jobs"),
        &json_headers,
        spec.to_string().as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201);
    let r = request(
        addr,
        "PUT",
        "/v1/stream/jobs/one",
        &json_headers,
        br#"{"n":1}"#,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201);
    // Claim (the claim opens the wake if the dispatcher has not yet).
    let r = request(
        addr,
        "POST",
        &format!("{SUBS}/jobs/claim"),
        &json_headers,
        br#"{"worker":"w"}"#,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let claimed: Value = serde_json::from_slice(&r.body).unwrap();
    let tail = claimed["streams"][0]["tail_offset"].clone();
    let token = format!("Bearer {}", claimed["token"].as_str().unwrap());
    let ack = json!({"wake_id": claimed["wake_id"], "generation": claimed["generation"],
        "acks": [{"stream": "jobs/one", "offset": tail}], "done": true});
    let with_token = [
        ("content-type", "application/json".to_owned()),
        ("authorization", token.clone()),
    ];
    let body = ack.to_string();
    let send_ack = |addr| {
        let (headers, body) = (with_token.clone(), body.clone());
        async move {
            let path = format!("{SUBS}/jobs/ack");
            request(addr, "POST", &path, &headers, body.as_bytes())
                .await
                .unwrap()
                .status
        }
    };
    assert_eq!(send_ack(addr).await, 200);
    server.kill9();

    let server = start(dir.path());
    let addr = server.addr;
    let r = request(addr, "GET", &format!("{SUBS}/jobs"), &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let shown: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(shown["generation"], claimed["generation"]);
    assert_eq!(shown["streams"][0]["path"], "jobs/one");
    assert_eq!(shown["streams"][0]["acked_offset"], tail);
    // The token still names that (finished) wake: fenced, not accepted.
    assert_eq!(send_ack(addr).await, 409);
    server.kill9();
}

/// A new subscription links the streams that already match its pattern,
/// acknowledged at their tails (no wake for what was there), hashed names
/// included; a later write wakes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_links_existing_streams() {
    let s = TestServer::start_with(|c| {
        c.long_poll_timeout_ms = 200;
        c.groups = 4;
    })
    .await;
    s.put("/v1/stream/wake/pool")
        .header("content-type", "application/json")
        .body("[]")
        .send()
        .await;
    let existing = ["docs/a/.updates", "docs/b/.updates", "docs/c/.updates"];
    for name in existing {
        let r = s
            .put(&format!("/v1/stream/{name}"))
            .text("old")
            .send()
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
    }
    for name in ["docs/a/.index", "other/a/.updates", "docs"] {
        s.put(&format!("/v1/stream/{name}")).text("x").send().await;
    }
    let spec = json!({
        "type": "pull-wake",
        "pattern": "docs/*/.updates",
        "wake_stream": "wake/pool",
        "lease_ttl_ms": 60_000,
    });
    let put = s
        .put(&format!("{SUBS}/backfill"))
        .header("content-type", "application/json")
        .body(spec.to_string())
        .send()
        .await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text());
    let shown = body(&s.get(&format!("{SUBS}/backfill")).send().await);
    let mut linked: Vec<(String, Value)> = shown["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| {
            assert_eq!(st["link_type"], "glob");
            (
                st["path"].as_str().unwrap().to_owned(),
                st["acked_offset"].clone(),
            )
        })
        .collect();
    linked.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&str> = linked.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, existing);
    for (_, acked) in &linked {
        assert_eq!(acked, &json!(common::off(3)));
    }
    // Nothing new: nothing to claim.
    let claim = || {
        s.post(&format!("{SUBS}/backfill/claim"))
            .header("content-type", "application/json")
            .body(json!({ "worker": "w" }).to_string())
            .send()
    };
    let none = claim().await;
    assert_eq!(none.status, StatusCode::CONFLICT, "{}", none.text());
    assert_eq!(body(&none)["error"]["code"], "NO_PENDING_WORK");
    // A write to a linked stream wakes the subscription for it alone.
    s.post("/v1/stream/docs/b/.updates")
        .text("new")
        .send()
        .await;
    wake_events(&s, "/v1/stream/wake/pool", "backfill").await;
    let claimed = claim().await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.text());
    let pending: Vec<Value> = body(&claimed)["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|st| st["has_pending"] == true)
        .map(|st| st["path"].clone())
        .collect();
    assert_eq!(pending, [json!("docs/b/.updates")]);
    s.stop().await;
}

/// A webhook delivery that fails is tried again after a second, well
/// before the wake's lease (60 s) runs out, and the retry's `done`
/// acknowledges the stream. It sends HTTP requests, so it runs only in a
/// network namespace with nothing but loopback: `cargo xtask
/// http-conformance --subscriptions` runs it there (it is ignored
/// elsewhere, and refuses to run outside one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "sends webhooks: runs inside a loopback-only network namespace (cargo xtask http-conformance --subscriptions)"]
async fn a_failed_webhook_is_retried_before_the_lease_ends() {
    let dev = std::fs::read_to_string("/proc/self/net/dev").unwrap();
    let interfaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(str::trim))
        .collect();
    assert_eq!(
        interfaces,
        ["lo"],
        "this test sends webhooks: run it inside a loopback-only network namespace"
    );
    // A receiver that answers 500 to the first delivery, then `done`.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        for n in 1.. {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // The head, then the body its Content-Length gives.
            while let Ok(read) = socket.read(&mut buf).await {
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..read]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let (status, body) = if n == 1 {
                ("500 Internal Server Error", "not now")
            } else {
                ("200 OK", r#"{"done":true}"#)
            };
            let answer = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(answer.as_bytes()).await;
            let _ = tx.send(String::from_utf8_lossy(&request).to_string());
        }
    });
    let s = TestServer::start_with(|c| {
        c.webhook_allow = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    let spec = json!({
        "type": "webhook",
        "pattern": "hook/*",
        "webhook": { "url": format!("http://127.0.0.1:{port}/hook") },
        "lease_ttl_ms": 60_000,
    });
    let put = s
        .put(&format!("{SUBS}/retry"))
        .header("content-type", "application/json")
        .body(spec.to_string())
        .send()
        .await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text());
    let r = s.put("/v1/stream/hook/a").text("data").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    let wait = std::time::Duration::from_secs(20);
    let first = tokio::time::timeout(wait, rx.recv())
        .await
        .unwrap()
        .unwrap();
    let second = tokio::time::timeout(wait, rx.recv())
        .await
        .unwrap()
        .unwrap();
    for delivery in [&first, &second] {
        assert!(delivery.starts_with("POST /hook "), "{delivery}");
        assert!(
            delivery.to_ascii_lowercase().contains("webhook-signature:"),
            "{delivery}"
        );
    }
    // The same wake both times: the retry is not a new generation.
    let wake = |d: &str| {
        let body: Value = serde_json::from_str(&d[d.find("\r\n\r\n").unwrap() + 4..]).unwrap();
        (body["wake_id"].clone(), body["generation"].clone())
    };
    assert_eq!(wake(&first), wake(&second));
    // The retry's `done` acknowledged the stream at its tail.
    common::eventually("the retry's done acknowledges hook/a", wait, || async {
        let shown = body(&s.get(&format!("{SUBS}/retry")).send().await);
        (shown["streams"][0]["acked_offset"] == json!(common::off(4))).then_some(())
    })
    .await;
    s.stop().await;
}
