//! Forks over HTTP beyond the official suite (`docs/forks.md` §7): the
//! bucketed layout, a source in another bucket, read access to the source,
//! and SSE and long-poll through a chain.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{TestServer, off};
use hyper::StatusCode;
use strand_server::auth::{Claims, Right, sign_hs256};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forks_in_the_bucketed_layout() {
    let s = TestServer::start().await;
    s.put("/acme/src").text("hello").send().await;
    let r = s
        .put("/acme/fork")
        .header("stream-forked-from", "/acme/src")
        .header("stream-fork-offset", &off(2))
        .text("XY")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.next(), off(4));
    assert_eq!(s.get("/acme/fork?offset=-1").send().await.text(), "heXY");
    // Affinity paths name sources too; the DS mount is the default bucket.
    s.put("/acme/tenant/a").text("abc").send().await;
    let r = s
        .put("/acme/tenant/b")
        .header("stream-forked-from", "/acme/tenant/a")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(s.get("/acme/tenant/b?offset=-1").send().await.text(), "abc");
    s.put("/v1/stream/plain").text("p").send().await;
    let r = s
        .put("/default/forked")
        .header("stream-forked-from", "/v1/stream/plain")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // A source in another bucket, a path that names no stream, or a
    // malformed offset is a bad request.
    for (from, offset) in [
        ("/other/src", None),
        ("/acme", None),
        ("/__strand/usage/acme", None),
        ("/acme/src", Some("12")),
    ] {
        let mut req = s.put("/acme/bad").header("stream-forked-from", from);
        if let Some(o) = offset {
            req = req.header("stream-fork-offset", o);
        }
        let r = req.send().await;
        assert!(
            matches!(r.status, StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND),
            "{from}: {}",
            r.status
        );
    }
    s.put("/other/src").text("o").send().await;
    let r = s
        .put("/acme/bad")
        .header("stream-forked-from", "/other/src")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        s.head("/acme/bad").send().await.status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_needs_read_access_to_its_source() {
    const SECRET: &[u8] = b"test-secret-of-at-least-16-bytes";
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let s = TestServer::start_with(|c| c.auth_secret_file = Some(secret.clone())).await;
    let token = |grants: &[(&str, &[Right])]| {
        let claims = Claims {
            sub: "tester".into(),
            exp: 4_102_444_800,
            grants: grants
                .iter()
                .map(|(k, r)| ((*k).to_owned(), r.to_vec()))
                .collect(),
        };
        format!("Bearer {}", sign_hs256(SECRET, &claims).unwrap())
    };
    let root = token(&[("*", &[Right::Read, Right::Write, Right::Admin])]);
    let r = s
        .put("/acme/secret")
        .header("authorization", &root)
        .text("classified")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // Write access to the fork's path alone does not let a caller read the
    // source through a fork.
    let writer = token(&[("acme/mine", &[Right::Read, Right::Write])]);
    let r = s
        .put("/acme/mine")
        .header("authorization", &writer)
        .header("stream-forked-from", "/acme/secret")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(
        s.head("/acme/mine")
            .header("authorization", &root)
            .send()
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let reader = token(&[
        ("acme/mine", &[Right::Read, Right::Write]),
        ("acme/secret", &[Right::Read]),
    ]);
    let r = s
        .put("/acme/mine")
        .header("authorization", &reader)
        .header("stream-forked-from", "/acme/secret")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reads_through_a_chain_and_a_deleted_middle() {
    let s = TestServer::start().await;
    s.put("/acme/a").text("ab").send().await;
    s.put("/acme/b")
        .header("stream-forked-from", "/acme/a")
        .text("cd")
        .send()
        .await;
    s.put("/acme/c")
        .header("stream-forked-from", "/acme/b")
        .send()
        .await;
    // The middle goes: soft-deleted (410), `c` still reads through it.
    assert_eq!(
        s.delete("/acme/b").send().await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(s.get("/acme/b").send().await.status, StatusCode::GONE);
    assert_eq!(s.head("/acme/b").send().await.status, StatusCode::GONE);
    assert_eq!(s.put("/acme/b").send().await.status, StatusCode::CONFLICT);
    let r = s
        .put("/acme/d")
        .header("stream-forked-from", "/acme/b")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    // Long-poll from the start answers the inherited bytes at once.
    let r = s.get("/acme/c?offset=-1&live=long-poll").send().await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), "abcd");
    // SSE from the start streams them, then the fork's own append.
    let response = s.get("/acme/c?offset=-1&live=sse").open().await;
    assert_eq!(response.status(), StatusCode::OK);
    s.post("/acme/c").text("e").send().await;
    let text = common::read_sse(response, std::time::Duration::from_secs(10), |t| {
        t.contains("data: e\n") || t.contains("data:e\n")
    })
    .await;
    let data: Vec<&str> = text
        .split("\n\n")
        .filter(|event| event.starts_with("event: data"))
        .filter_map(|event| event.lines().nth(1))
        .collect();
    assert_eq!(data, ["data:abcd", "data:e"], "{text}");
    // Deleting the last fork removes the soft-deleted middle too.
    assert_eq!(
        s.delete("/acme/c").send().await.status,
        StatusCode::NO_CONTENT
    );
    common::eventually(
        "the soft-deleted middle is removed",
        std::time::Duration::from_secs(10),
        || async { (s.head("/acme/b").send().await.status == StatusCode::NOT_FOUND).then_some(()) },
    )
    .await;
    s.stop().await;
}
