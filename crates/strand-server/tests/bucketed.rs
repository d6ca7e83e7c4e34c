//! The bucketed layout and its extension routes, and the admin plane,
//! against a real server.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{TestServer, off};
use hyper::{Method, StatusCode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_and_streams_in_both_layouts() {
    let s = TestServer::start().await;
    assert_eq!(s.put("/acme").send().await.status, StatusCode::CREATED);
    assert_eq!(s.put("/acme").send().await.status, StatusCode::OK);
    assert_eq!(s.get("/acme").send().await.status, StatusCode::OK);
    assert_eq!(
        s.get("/nobucket").send().await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.put("/Bad.Bucket").send().await.status,
        StatusCode::BAD_REQUEST
    );

    // A stream in a bucket that was never created creates the bucket.
    let r = s.put("/other/log").text("x").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(s.get("/other").send().await.status, StatusCode::OK);

    // The DS mount is the default bucket.
    s.put("/v1/stream/shared").text("one").send().await;
    assert_eq!(s.get("/default/shared").send().await.text(), "one");
    s.post("/default/shared").text("two").send().await;
    assert_eq!(s.get("/v1/stream/shared").send().await.text(), "onetwo");

    // Affinity paths.
    let r = s.put("/acme/tenant-1/events").text("e").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(s.get("/acme/tenant-1/events").send().await.text(), "e");
    assert_eq!(
        s.get("/acme/events").send().await.status,
        StatusCode::NOT_FOUND
    );

    // Offsets beyond the tail are 416 here; the DS mount reads them as
    // its reference server does: from the tail, up to date.
    let far = s
        .get(&format!("/acme/tenant-1/events?offset={}", off(99)))
        .send()
        .await;
    assert_eq!(far.status, StatusCode::RANGE_NOT_SATISFIABLE);
    let far = s
        .get(&format!("/v1/stream/shared?offset={}", off(99)))
        .send()
        .await;
    assert_eq!(far.status, StatusCode::OK);
    assert_eq!(far.h("stream-up-to-date"), Some("true"));
    assert!(far.body.is_empty());
    s.stop().await;
}

fn frames(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        out.extend_from_slice(&u32::try_from(p.len()).unwrap().to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_batch_answers_per_frame() {
    let s = TestServer::start().await;
    s.put("/acme/b").text("12").send().await;
    let r = s
        .post("/acme/b/append-batch")
        .header("content-type", "text/plain")
        .body(frames(&[b"abc", b"de"]))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let results: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        results,
        serde_json::json!([
            {"offset": off(2), "next_offset": off(5)},
            {"offset": off(5), "next_offset": off(7)},
        ])
    );
    assert_eq!(r.next(), off(7));
    let minimal = s
        .post("/acme/b/append-batch")
        .header("content-type", "text/plain")
        .header("prefer", "return=minimal")
        .body(frames(&[b"f"]))
        .send()
        .await;
    assert_eq!(minimal.status, StatusCode::NO_CONTENT);
    assert_eq!(s.get("/acme/b").send().await.text(), "12abcdef");
    let torn = s
        .post("/acme/b/append-batch")
        .header("content-type", "text/plain")
        .body(vec![0, 0, 0, 9, b'x'])
        .send()
        .await;
    assert_eq!(torn.status, StatusCode::BAD_REQUEST);
    let wrong = s
        .post("/acme/b/append-batch")
        .header("content-type", "image/png")
        .body(frames(&[b"x"]))
        .send()
        .await;
    assert_eq!(wrong.status, StatusCode::CONFLICT);
    assert_eq!(s.get("/acme/b").send().await.text(), "12abcdef");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_are_all_or_nothing() {
    let s = TestServer::start().await;
    s.put("/acme/k/a").text("").send().await;
    s.put("/acme/k/b").text("").send().await;
    let ok = s
        .post("/acme/k/$transaction")
        .header("content-type", "application/json")
        .body(r#"[{"stream":"a","content_type":"text/plain","body":"A1"},{"stream":"b","content_type":"text/plain","body_base64":"QjE="}]"#)
        .send()
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text());
    let results: serde_json::Value = serde_json::from_slice(&ok.body).unwrap();
    assert_eq!(results[1]["next_offset"], off(2));
    // The second append fails (wrong type): the first is rolled back.
    let bad = s
        .post("/acme/k/$transaction")
        .body(r#"[{"stream":"a","content_type":"text/plain","body":"A2"},{"stream":"b","content_type":"image/png","body":"x"}]"#)
        .send()
        .await;
    assert_eq!(bad.status, StatusCode::CONFLICT);
    assert_eq!(s.get("/acme/k/a").send().await.text(), "A1");
    assert_eq!(s.get("/acme/k/b").send().await.text(), "B1");
    let garbage = s.post("/acme/k/$transaction").body("{").send().await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_retention_and_bootstrap() {
    let s = TestServer::start().await;
    s.put("/acme/doc").text("v1;").send().await;
    s.post("/acme/doc").text("v2;").send().await;
    s.post("/acme/doc").text("v3;").send().await;
    assert_eq!(
        s.get("/acme/doc/snapshot").send().await.status,
        StatusCode::NOT_FOUND
    );
    let published = s
        .put("/acme/doc/snapshot/6")
        .header("content-type", "application/x-state")
        .body("STATE@6")
        .send()
        .await;
    assert_eq!(
        published.status,
        StatusCode::CREATED,
        "{}",
        published.text()
    );
    let info: serde_json::Value = serde_json::from_slice(&published.body).unwrap();
    let digest = info["snapshot_digest"].as_str().unwrap().to_owned();
    let latest = s.get("/acme/doc/snapshot").send().await;
    assert_eq!((latest.status, latest.text()), (StatusCode::OK, "STATE@6"));
    assert_eq!(latest.h("content-type"), Some("application/x-state"));
    assert_eq!(latest.h("stream-snapshot-offset"), Some(off(6).as_str()));
    assert_eq!(latest.h("stream-snapshot-digest"), Some(digest.as_str()));
    assert_eq!(
        s.get(&format!("/acme/doc/snapshot/{}", off(6)))
            .send()
            .await
            .text(),
        "STATE@6"
    );
    assert_eq!(
        s.get("/acme/doc/snapshot/3").send().await.status,
        StatusCode::NOT_FOUND
    );
    // A compare-and-swap with the wrong digest conflicts.
    let cas = s
        .put("/acme/doc/snapshot/9")
        .header("stream-snapshot-match", "00")
        .body("S9")
        .send()
        .await;
    assert_eq!(cas.status, StatusCode::CONFLICT);
    // The current snapshot cannot be deleted.
    assert_eq!(
        s.delete("/acme/doc/snapshot/6").send().await.status,
        StatusCode::CONFLICT
    );

    // Bootstrap: the snapshot, then the messages after it.
    let boot = s.get("/acme/doc/bootstrap").send().await;
    assert_eq!(boot.status, StatusCode::OK);
    let ct = boot.h("content-type").unwrap();
    assert!(ct.starts_with("multipart/mixed; boundary="));
    let text = boot.text();
    let state_at = text.find("STATE@6").unwrap();
    let update_at = text.find("\r\n\r\nv3;\r\n").unwrap();
    assert!(state_at < update_at);
    assert!(!text.contains("v1;") && !text.contains("v2;"));

    // Retention up to the snapshot.
    let kept = s.put("/acme/doc/retention/6").send().await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.text());
    assert_eq!(s.get("/acme/doc?offset=-1").send().await.text(), "v3;");
    let gone = s
        .get("/acme/doc?offset=0000000000000000_0000000000000000")
        .send()
        .await;
    assert_eq!(gone.status, StatusCode::GONE);
    let beyond = s.put("/acme/doc/retention/99").send().await;
    assert!(beyond.status.is_client_error());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attrs_and_record_match() {
    let s = TestServer::start().await;
    let r = s
        .put("/acme/j")
        .header("content-type", "application/json")
        .header("stream-attrs", r#"{"title":"T"}"#)
        .body("[1,2]")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let attrs = s.get("/acme/j/attrs").send().await;
    assert_eq!(attrs.text(), r#"{"title":"T"}"#);
    let put = s
        .put("/acme/j/attrs")
        .body(r#"{"metadata":{"k":1}}"#)
        .send()
        .await;
    assert_eq!(put.status, StatusCode::OK);
    assert_eq!(
        s.get("/acme/j/attrs").send().await.text(),
        r#"{"metadata":{"k":1}}"#
    );
    assert_eq!(
        s.put("/acme/j/attrs").body("[").send().await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        s.get("/acme/none/attrs").send().await.status,
        StatusCode::NOT_FOUND
    );
    // Record match: the next record is 2.
    let stale = s
        .post("/acme/j")
        .header("content-type", "application/json")
        .header("stream-record-match", "1")
        .body("3")
        .send()
        .await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    let fresh = s
        .post("/acme/j")
        .header("content-type", "application/json")
        .header("stream-record-match", "2")
        .body("3")
        .send()
        .await;
    assert_eq!(fresh.status, StatusCode::NO_CONTENT);
    assert_eq!(s.get("/acme/j").send().await.text(), "[1,2,3]");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_quota_usage_and_purge() {
    let s = TestServer::start_with(|c| c.groups = 3).await;
    s.put("/acme").send().await;
    let q = s
        .admin(Method::PUT, "/__strand/quota/acme")
        .body(r#"{"max_streams":2}"#)
        .send()
        .await;
    assert_eq!(q.status, StatusCode::NO_CONTENT);
    // Streams of one affinity key share a group, so the per-group quota
    // applies to them together.
    assert_eq!(
        s.put("/acme/k/s1").text("abc").send().await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        s.put("/acme/k/s2").text("de").send().await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        s.put("/acme/k/s3").text("").send().await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    let usage = s.admin(Method::GET, "/__strand/usage/acme").send().await;
    assert_eq!(usage.status, StatusCode::OK);
    let u: serde_json::Value = serde_json::from_slice(&usage.body).unwrap();
    assert_eq!(u["usage"]["stream_count"], 2);
    assert_eq!(u["usage"]["retained_bytes"], 5);
    assert_eq!(
        s.admin(Method::GET, "/__strand/usage/nobucket")
            .send()
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.admin(Method::PUT, "/__strand/quota/acme")
            .body("{")
            .send()
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    let purge = s.admin(Method::DELETE, "/__strand/purge/acme").send().await;
    assert_eq!(purge.status, StatusCode::OK);
    let p: serde_json::Value = serde_json::from_slice(&purge.body).unwrap();
    assert_eq!(p["removed_streams"], 2);
    assert_eq!(
        s.get("/acme/k/s1").send().await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.get("/__strand/nothing").send().await.status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}
