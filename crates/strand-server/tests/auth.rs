//! Authentication and authorization over real sockets: every route with no
//! token, an expired token, a token for another bucket, a read-only token
//! on a write route and a write token on an admin route is refused (401 or
//! 403) and changes nothing; the right token succeeds. The log never shows
//! a token.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::TestServer;
use hyper::{Method, StatusCode};
use strand_server::auth::{Claims, Right, sign_hs256};
use strand_testkit::ChildGuard;

const SECRET: &[u8] = b"test-secret-of-at-least-16-bytes";

fn token(grants: &[(&str, &[Right])], exp: u64) -> String {
    let claims = Claims {
        sub: "tester".into(),
        exp,
        grants: grants
            .iter()
            .map(|(k, r)| ((*k).to_owned(), r.to_vec()))
            .collect(),
    };
    sign_hs256(SECRET, &claims).unwrap()
}

fn far() -> u64 {
    4_102_444_800
}

async fn server() -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let s = TestServer::start_with(|c| c.auth_secret_file = Some(secret.clone())).await;
    (s, dir)
}

/// One route: method, path, content type and body, the bucket whose
/// grants decide it, and the right it needs.
struct Route {
    method: Method,
    path: &'static str,
    body: &'static [u8],
    content_type: &'static str,
    bucket: &'static str,
    right: Right,
}

fn routes() -> Vec<Route> {
    let r = |method: Method, path, body, content_type, bucket, right| Route {
        method,
        path,
        body,
        content_type,
        bucket,
        right,
    };
    vec![
        r(Method::GET, "/v1/stream/d", b"", "", "default", Right::Read),
        r(
            Method::HEAD,
            "/v1/stream/d",
            b"",
            "",
            "default",
            Right::Read,
        ),
        r(
            Method::GET,
            "/v1/stream/d?offset=-1&live=long-poll",
            b"",
            "",
            "default",
            Right::Read,
        ),
        r(
            Method::POST,
            "/v1/stream/d",
            b"x",
            "text/plain",
            "default",
            Right::Write,
        ),
        r(
            Method::PUT,
            "/v1/stream/fresh",
            b"",
            "text/plain",
            "default",
            Right::Write,
        ),
        r(
            Method::DELETE,
            "/v1/stream/doomed",
            b"",
            "",
            "default",
            Right::Write,
        ),
        r(Method::PUT, "/acme", b"", "", "acme", Right::Write),
        r(Method::GET, "/acme", b"", "", "acme", Right::Read),
        r(Method::GET, "/acme/s", b"", "", "acme", Right::Read),
        r(
            Method::POST,
            "/acme/s",
            b"y",
            "text/plain",
            "acme",
            Right::Write,
        ),
        r(
            Method::POST,
            "/acme/s/append-batch",
            b"\0\0\0\x01z",
            "text/plain",
            "acme",
            Right::Write,
        ),
        r(
            Method::POST,
            "/acme/k/$transaction",
            br#"[{"stream":"a","content_type":"text/plain","body":"t"}]"#,
            "application/json",
            "acme",
            Right::Write,
        ),
        r(Method::GET, "/acme/s/attrs", b"", "", "acme", Right::Read),
        r(
            Method::PUT,
            "/acme/s/attrs",
            br#"{"title":"T"}"#,
            "application/json",
            "acme",
            Right::Write,
        ),
        r(
            Method::GET,
            "/acme/s/bootstrap",
            b"",
            "",
            "acme",
            Right::Read,
        ),
        r(
            Method::PUT,
            "/acme/s/snapshot/4",
            b"S",
            "application/x-state",
            "acme",
            Right::Write,
        ),
        r(
            Method::GET,
            "/acme/s/snapshot",
            b"",
            "",
            "acme",
            Right::Read,
        ),
        r(
            Method::PUT,
            "/acme/s/retention/4",
            b"",
            "",
            "acme",
            Right::Write,
        ),
        r(
            Method::GET,
            "/__strand/integrity/acme/s",
            b"",
            "",
            "acme",
            Right::Read,
        ),
        r(
            Method::PUT,
            "/__strand/quota/acme",
            br#"{"max_streams":100}"#,
            "application/json",
            "acme",
            Right::Admin,
        ),
        r(
            Method::GET,
            "/__strand/usage/acme",
            b"",
            "",
            "acme",
            Right::Admin,
        ),
        r(
            Method::DELETE,
            "/__strand/purge/acme",
            b"",
            "",
            "acme",
            Right::Admin,
        ),
    ]
}

async fn send(s: &TestServer, route: &Route, token: Option<&str>) -> common::Resp {
    let mut req = s.req(route.method.clone(), route.path).body(route.body);
    if !route.content_type.is_empty() {
        req = req.header("content-type", route.content_type);
    }
    if let Some(t) = token {
        req = req.header("authorization", &format!("Bearer {t}"));
    }
    req.send().await
}

/// Everything the routes could change, read with an all-powerful token.
async fn state_of(s: &TestServer, root: &str) -> Vec<String> {
    let auth = format!("Bearer {root}");
    let mut out = Vec::new();
    for path in [
        "/v1/stream/d",
        "/v1/stream/fresh",
        "/v1/stream/doomed",
        "/acme/s",
        "/acme/k/a",
        "/acme/s/attrs",
        "/acme/s/snapshot",
        "/acme/s/bootstrap",
        "/__strand/usage/acme",
    ] {
        let r = s.get(path).header("authorization", &auth).send().await;
        out.push(format!("{path} {} {}", r.status, r.text()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_the_wrong_token_and_accepts_the_right_one() {
    let (s, _dir) = server().await;
    let root = token(&[("*", &[Right::Read, Right::Write, Right::Admin])], far());
    let auth = format!("Bearer {root}");
    for (path, body) in [
        ("/v1/stream/d", "seed"),
        ("/v1/stream/doomed", "bye"),
        ("/acme/s", "seed"),
        ("/acme/k/a", ""),
    ] {
        let r = s
            .put(path)
            .header("authorization", &auth)
            .text(body)
            .send()
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{path}");
    }
    let before = state_of(&s, &root).await;
    for route in routes() {
        let what = format!("{} {}", route.method, route.path);
        let no_token = send(&s, &route, None).await;
        assert_eq!(
            no_token.status,
            StatusCode::UNAUTHORIZED,
            "{what} without a token"
        );
        assert!(
            no_token
                .h("www-authenticate")
                .unwrap()
                .starts_with("Bearer"),
            "{what}"
        );
        let expired = send(
            &s,
            &route,
            Some(&token(&[(route.bucket, &[route.right])], 1)),
        )
        .await;
        assert_eq!(
            expired.status,
            StatusCode::UNAUTHORIZED,
            "{what} with an expired token"
        );
        let forged = s
            .req(route.method.clone(), route.path)
            .header("authorization", "Bearer not-a-jwt")
            .send()
            .await;
        assert_eq!(
            forged.status,
            StatusCode::UNAUTHORIZED,
            "{what} with garbage"
        );
        let elsewhere = send(
            &s,
            &route,
            Some(&token(
                &[("other", &[Right::Read, Right::Write, Right::Admin])],
                far(),
            )),
        )
        .await;
        assert_eq!(
            elsewhere.status,
            StatusCode::FORBIDDEN,
            "{what} with another bucket's token"
        );
        match route.right {
            Right::Write => {
                let read_only = send(
                    &s,
                    &route,
                    Some(&token(&[(route.bucket, &[Right::Read])], far())),
                )
                .await;
                assert_eq!(read_only.status, StatusCode::FORBIDDEN, "{what} read-only");
            }
            Right::Admin => {
                let writer = send(
                    &s,
                    &route,
                    Some(&token(
                        &[(route.bucket, &[Right::Read, Right::Write])],
                        far(),
                    )),
                )
                .await;
                assert_eq!(
                    writer.status,
                    StatusCode::FORBIDDEN,
                    "{what} with a write token"
                );
            }
            Right::Read => {
                let writer = send(
                    &s,
                    &route,
                    Some(&token(&[(route.bucket, &[Right::Write])], far())),
                )
                .await;
                assert_eq!(writer.status, StatusCode::FORBIDDEN, "{what} write-only");
            }
        }
    }
    assert_eq!(
        state_of(&s, &root).await,
        before,
        "a refused request changed something"
    );

    // The right token succeeds, route by route.
    for route in routes() {
        let t = token(&[(route.bucket, &[route.right])], far());
        let ok = send(&s, &route, Some(&t)).await;
        assert!(
            ok.status.is_success(),
            "{} {} with the right token: {} {}",
            route.method,
            route.path,
            ok.status,
            ok.text()
        );
    }
    // Health needs no token; preflights neither.
    assert_eq!(
        s.get("/__strand/health").send().await.status,
        StatusCode::OK
    );
    let pre = s.req(Method::OPTIONS, "/v1/stream/d").send().await;
    assert_eq!(pre.status, StatusCode::NO_CONTENT);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_grants_cover_only_their_streams() {
    let (s, _dir) = server().await;
    let t = format!(
        "Bearer {}",
        token(&[("logs/app-", &[Right::Read, Right::Write])], far())
    );
    assert_eq!(
        s.put("/logs/app-1")
            .header("authorization", &t)
            .text("x")
            .send()
            .await
            .status,
        StatusCode::CREATED
    );
    assert_eq!(
        s.put("/logs/db-1")
            .header("authorization", &t)
            .text("x")
            .send()
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        s.put("/logs")
            .header("authorization", &t)
            .send()
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let read = s
        .get("/logs/app-1")
        .header("authorization", &t)
        .send()
        .await;
    assert_eq!(read.text(), "x");
    // What one token may read, only that client's cache may keep.
    assert_eq!(
        read.h("cache-control"),
        Some("private, max-age=60, stale-while-revalidate=300")
    );
    s.stop().await;
}

/// On the mount, grants match the stream's name, whatever id it maps to:
/// `default/yjs/` covers every stream under `/v1/stream/yjs/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_grants_match_mount_names_of_any_shape() {
    let (s, _dir) = server().await;
    let t = format!(
        "Bearer {}",
        token(&[("default/yjs/", &[Right::Read, Right::Write])], far())
    );
    let put = |path: &'static str| s.put(path).header("authorization", &t).text("x").send();
    assert_eq!(
        put("/v1/stream/yjs/svc/docs/d/.updates").await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        put("/v1/stream/yjs/short").await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        put("/v1/stream/other/svc/docs/d/.updates").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(put("/v1/stream/yjs").await.status, StatusCode::FORBIDDEN);
    // A fork needs read on its source's name too.
    let fork = s
        .put("/v1/stream/yjs/fork/of/it")
        .header("authorization", &t)
        .header("stream-forked-from", "/v1/stream/yjs/svc/docs/d/.updates")
        .send()
        .await;
    assert_eq!(fork.status, StatusCode::CREATED);
    s.stop().await;
}

#[test]
fn tokens_never_reach_the_log_but_subjects_do() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let bin = env!("CARGO_BIN_EXE_strand-server");
    let minted = Command::new(bin)
        .args(["token", "--secret-file"])
        .arg(&secret)
        .args([
            "--bucket",
            "default",
            "--rights",
            "read,write",
            "--subject",
            "alice",
        ])
        .output()
        .unwrap();
    assert!(minted.status.success());
    let token = String::from_utf8(minted.stdout).unwrap().trim().to_owned();
    assert_eq!(token.split('.').count(), 3);
    // Killed on drop too: a failed assertion before the kill below leaves
    // no server behind.
    let mut child = ChildGuard::new(
        Command::new(bin)
            .args(["--listen", "127.0.0.1:0", "--memory", "--auth-secret-file"])
            .arg(&secret)
            .env("STRAND_LOG", "debug")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("strand-server listening on http://")
        .unwrap()
        .to_owned();
    for (auth, expect) in [
        (format!("Bearer {token}"), "201"),
        (format!("Bearer {token}x"), "401"),
    ] {
        let mut stream = TcpStream::connect(&addr).unwrap();
        write!(
            stream,
            "PUT /v1/stream/logged HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {expect}")),
            "{answer}"
        );
    }
    child.kill().unwrap();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let _ = child.wait();
    assert!(
        log.contains("alice"),
        "the request log names the subject:\n{log}"
    );
    let signature = token.rsplit('.').next().unwrap();
    assert!(
        !log.contains(signature),
        "a token's signature reached the log:\n{log}"
    );
    assert!(
        !log.contains(&token[..20]),
        "a token reached the log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_token_rate_and_live_reader_limits() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let s = TestServer::start_with(|c| {
        c.auth_secret_file = Some(secret.clone());
        c.rate_limit_per_token = 5;
        c.max_live_readers_per_token = 1;
        c.long_poll_timeout_ms = 1_000;
    })
    .await;
    let a = format!(
        "Bearer {}",
        token(&[("default", &[Right::Read, Right::Write])], far())
    );
    let b_claims = Claims {
        sub: "other".into(),
        exp: far(),
        grants: [("default".to_owned(), vec![Right::Read, Right::Write])]
            .into_iter()
            .collect(),
    };
    let b = format!("Bearer {}", sign_hs256(SECRET, &b_claims).unwrap());
    assert_eq!(
        s.put("/v1/stream/r")
            .header("authorization", &a)
            .text("x")
            .send()
            .await
            .status,
        StatusCode::CREATED
    );
    let mut statuses = Vec::new();
    // 20 requests within well under 3 s: a burst of 5 plus what refills.
    for _ in 0..20 {
        statuses.push(
            s.get("/v1/stream/r")
                .header("authorization", &a)
                .send()
                .await,
        );
    }
    let refused = statuses
        .iter()
        .find(|r| r.status == StatusCode::TOO_MANY_REQUESTS)
        .expect("the burst of 5 is exceeded");
    assert!(refused.h("retry-after").is_some());
    // Another subject is not affected.
    assert_eq!(
        s.get("/v1/stream/r")
            .header("authorization", &b)
            .send()
            .await
            .status,
        StatusCode::OK
    );

    // One live reader per token: a second concurrent long-poll is refused
    // (`other` has spent one of its 5 requests: its rate does not refuse).
    let url = format!("/v1/stream/r?offset={}&live=long-poll", common::off(1));
    let first = {
        let req = s.get(&url).header("authorization", &b);
        tokio::spawn(async move { req.send().await })
    };
    s.parked(1).await;
    let second = s.get(&url).header("authorization", &b).send().await;
    assert_eq!(second.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(second.text().contains("live readers"), "{}", second.text());
    assert_eq!(first.await.unwrap().status, StatusCode::NO_CONTENT);
    // The place is free again.
    assert_eq!(
        s.get(&url).header("authorization", &b).send().await.status,
        StatusCode::NO_CONTENT
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_cors_origins_only() {
    let s = TestServer::start_with(|c| c.cors_origin = vec!["https://app.test".into()]).await;
    let allowed = s
        .get("/v1/stream/none")
        .header("origin", "https://app.test")
        .send()
        .await;
    assert_eq!(
        allowed.h("access-control-allow-origin"),
        Some("https://app.test")
    );
    assert_eq!(allowed.h("vary"), Some("origin"));
    let other = s
        .get("/v1/stream/none")
        .header("origin", "https://evil.test")
        .send()
        .await;
    assert_eq!(other.h("access-control-allow-origin"), None);
    assert_eq!(other.h("x-content-type-options"), Some("nosniff"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eddsa_tokens_from_a_jwks_file() {
    use base64::Engine as _;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.public_key_raw());
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(
        &jwks,
        format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","x":"{x}","kid":"k1","alg":"EdDSA","use":"sig"}}]}}"#),
    )
    .unwrap();
    let s = TestServer::start_with(|c| c.auth_jwks_file = Some(jwks.clone())).await;
    let claims = Claims {
        sub: "svc".into(),
        exp: far(),
        grants: [("default".to_owned(), vec![Right::Read, Right::Write])]
            .into_iter()
            .collect(),
    };
    let encoding = jsonwebtoken::EncodingKey::from_ed_pem(key.serialize_pem().as_bytes()).unwrap();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some("k1".into());
    let signed = jsonwebtoken::encode(&header, &claims, &encoding).unwrap();
    let ok = s
        .put("/v1/stream/ed")
        .header("authorization", &format!("Bearer {signed}"))
        .text("x")
        .send()
        .await;
    assert_eq!(ok.status, StatusCode::CREATED);
    // Another Ed25519 key's signature is refused, and so is an HS256
    // token (no shared secret is configured).
    let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let wrong = jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_ed_pem(other.serialize_pem().as_bytes()).unwrap(),
    )
    .unwrap();
    let refused = s
        .get("/v1/stream/ed")
        .header("authorization", &format!("Bearer {wrong}"))
        .send()
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let hs = s
        .get("/v1/stream/ed")
        .header(
            "authorization",
            &format!("Bearer {}", token(&[("default", &[Right::Read])], far())),
        )
        .send()
        .await;
    assert_eq!(hs.status, StatusCode::UNAUTHORIZED);
    s.stop().await;
}

/// `GET path`, an operator route of `*`: refused without a token (401)
/// and with the admin right on one bucket only (403); the answer to a
/// token with the admin right on `*`.
async fn admin_on_every_bucket(s: &TestServer, path: &str) -> common::Resp {
    assert_eq!(s.get(path).send().await.status, StatusCode::UNAUTHORIZED);
    let one_bucket = token(&[("default", &[Right::Admin])], far());
    let r = s
        .get(path)
        .header("authorization", &format!("Bearer {one_bucket}"))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}");
    let every = token(&[("*", &[Right::Admin])], far());
    s.get(path)
        .header("authorization", &format!("Bearer {every}"))
        .send()
        .await
}

#[tokio::test]
async fn the_cold_report_needs_admin_on_every_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let cold = dir.path().join("cold");
    let s = TestServer::start_with(|c| {
        c.auth_secret_file = Some(secret.clone());
        c.cold_dir = Some(cold.clone());
    })
    .await;
    let r = admin_on_every_bucket(&s, "/__strand/cold").await;
    assert_eq!(r.status, StatusCode::OK);
    let report: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert!(report["backend"].as_str().unwrap().starts_with("local:"));
    assert_eq!(report["healthy"], true);
    s.stop().await;
}

/// A Raft message on the route peers use (its body is not a valid
/// message: only the gate in front of it is under test).
async fn raft_post(
    s: &TestServer,
    cluster_token: Option<&str>,
    bearer: Option<&str>,
) -> StatusCode {
    raft_post_to(s, "/__strand/raft/0/vote", b"\x80", cluster_token, bearer).await
}

/// The batch route with an empty batch (200 once past the gate).
async fn raft_batch_post(
    s: &TestServer,
    cluster_token: Option<&str>,
    bearer: Option<&str>,
) -> StatusCode {
    raft_post_to(s, "/__strand/raft/batch", b"\x90", cluster_token, bearer).await
}

async fn raft_post_to(
    s: &TestServer,
    path: &str,
    body: &[u8],
    cluster_token: Option<&str>,
    bearer: Option<&str>,
) -> StatusCode {
    let mut req = s.post(path).body(body.to_vec());
    if let Some(t) = cluster_token {
        req = req.header("strand-cluster-token", t);
    }
    if let Some(t) = bearer {
        req = req.header("authorization", &format!("Bearer {t}"));
    }
    req.send().await.status
}

/// POSTs `body` to `path` with the cluster token over a raw socket,
/// writing the body on another task while the answer is read: the status
/// of an answer the server may send before it has read the body.
async fn status_of_early_answer(s: &TestServer, path: &str, body: &[u8], token: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nstrand-cluster-token: {token}\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    let writer = tokio::spawn(async move {
        // Refused part-way once the server closes: that is expected.
        let _ = write.write_all(&request).await;
    });
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match read.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
    writer.abort();
    let text = String::from_utf8_lossy(&got);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no answer: {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raft_routes_need_the_cluster_token() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let cluster = dir.path().join("cluster-token");
    std::fs::write(&cluster, "the-cluster-token-0123\n").unwrap();
    let root = token(&[("*", &[Right::Read, Right::Write, Right::Admin])], far());

    // A cluster token with client authentication off: still required.
    let s = TestServer::start_with(|c| c.cluster_token_file = Some(cluster.clone())).await;
    assert_eq!(raft_post(&s, None, None).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        raft_post(&s, Some("the-cluster-token-0124"), None).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        raft_post(&s, Some("the-cluster-token-012"), None).await,
        StatusCode::FORBIDDEN
    );
    // The batch route has the same gate.
    assert_eq!(
        raft_batch_post(&s, None, None).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        raft_batch_post(&s, Some("the-cluster-token-0124"), None).await,
        StatusCode::FORBIDDEN
    );
    // The right token passes the gate (this in-memory node then has no
    // Raft group to hand the message to; an empty batch needs none).
    let passed = raft_post(&s, Some("the-cluster-token-0123"), None).await;
    assert!(
        passed != StatusCode::UNAUTHORIZED && passed != StatusCode::FORBIDDEN,
        "{passed}"
    );
    assert_eq!(
        raft_batch_post(&s, Some("the-cluster-token-0123"), None).await,
        StatusCode::OK
    );
    // Past the gate, a body that is not a batch is refused.
    assert_eq!(
        raft_post_to(
            &s,
            "/__strand/raft/batch",
            b"\x80",
            Some("the-cluster-token-0123"),
            None
        )
        .await,
        StatusCode::BAD_REQUEST
    );
    // More messages than a batch may hold, or a body over the limit: 413.
    let mut many = vec![0xdc, 0x00, 0x41];
    for _ in 0..65 {
        many.extend_from_slice(b"\x93\x00\xa4vote\xc4\x00");
    }
    let ok = Some("the-cluster-token-0123");
    assert_eq!(
        raft_post_to(&s, "/__strand/raft/batch", &many, ok, None).await,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    // The server answers before it reads the body and stops reading it
    // after a while; the body is sent beside reading the answer, so a
    // write the server no longer takes cannot lose the answer.
    let huge = vec![0x90; strand_raft::MAX_BATCH_BODY + 1];
    assert_eq!(
        status_of_early_answer(&s, "/__strand/raft/batch", &huge, "the-cluster-token-0123").await,
        413
    );
    // Client routes do not need the cluster token.
    let r = s.put("/v1/stream/open").text("x").send().await;
    assert_eq!(r.status, StatusCode::CREATED);
    s.stop().await;

    // Authentication on and a cluster token: a client's bearer token,
    // even an all-powerful one, does not open the Raft routes.
    let s = TestServer::start_with(|c| {
        c.auth_secret_file = Some(secret.clone());
        c.cluster_token_file = Some(cluster.clone());
    })
    .await;
    assert_eq!(
        raft_post(&s, None, Some(&root)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        raft_post(&s, Some("wrong-wrong-wrong-wrong"), Some(&root)).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        raft_batch_post(&s, None, Some(&root)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        raft_batch_post(&s, Some("wrong-wrong-wrong-wrong"), Some(&root)).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        raft_batch_post(&s, Some("the-cluster-token-0123"), None).await,
        StatusCode::OK
    );
    let passed = raft_post(&s, Some("the-cluster-token-0123"), None).await;
    assert!(
        passed != StatusCode::UNAUTHORIZED && passed != StatusCode::FORBIDDEN,
        "{passed}"
    );
    s.stop().await;

    // Authentication on and no cluster token: the Raft routes are closed.
    let s = TestServer::start_with(|c| c.auth_secret_file = Some(secret.clone())).await;
    assert_eq!(
        raft_post(&s, None, Some(&root)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        raft_post(&s, Some("the-cluster-token-0123"), None).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        raft_batch_post(&s, Some("the-cluster-token-0123"), None).await,
        StatusCode::UNAUTHORIZED
    );
    s.stop().await;

    // A token file that is too short is refused at startup.
    let short = dir.path().join("short-token");
    std::fs::write(&short, "short").unwrap();
    let mut config = strand_server::Config::for_listen("127.0.0.1:0".parse().unwrap());
    config.cluster_token_file = Some(short);
    assert!(config.cluster_token().unwrap_err().contains("at least 16"));
}

/// The listing needs the read right on the bucket, or on every name the
/// prefix covers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_needs_read_on_the_prefix() {
    let (s, _dir) = server().await;
    let writer = token(&[("default", &[Right::Write])], far());
    let r = s
        .put("/v1/stream/yjs/svc/doc/.updates")
        .header("authorization", &format!("Bearer {writer}"))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let yjs = token(&[("default/yjs/", &[Right::Read])], far());
    let list = |prefix: &str, token: Option<&str>| {
        let mut req = s.get(&format!("/__strand/streams/default?prefix={prefix}"));
        if let Some(t) = token {
            req = req.header("authorization", &format!("Bearer {t}"));
        }
        req.send()
    };
    let r = list("yjs%2F", Some(&yjs)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert!(r.text().contains("yjs/svc/doc/.updates"));
    assert_eq!(list("yjs%2Fsvc", Some(&yjs)).await.status, StatusCode::OK);
    assert_eq!(list("", Some(&yjs)).await.status, StatusCode::FORBIDDEN);
    assert_eq!(list("yj", Some(&yjs)).await.status, StatusCode::FORBIDDEN);
    assert_eq!(list("", Some(&writer)).await.status, StatusCode::FORBIDDEN);
    assert_eq!(list("yjs%2F", None).await.status, StatusCode::UNAUTHORIZED);
    s.stop().await;
}

#[tokio::test]
async fn the_cluster_status_needs_admin_on_every_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let s = TestServer::start_with(|c| {
        c.auth_secret_file = Some(secret.clone());
        c.groups = 3;
    })
    .await;
    let r = admin_on_every_bucket(&s, "/__strand/cluster").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let every = token(&[("*", &[Right::Admin])], far());
    // A node in memory is a cluster of one: itself, up, at its client
    // listener's address; each group with it as the only voter and leader.
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        v["nodes"],
        serde_json::json!([{"id": 1, "url": format!("http://{}", s.addr), "state": "up"}]),
        "{v}"
    );
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 3, "{v}");
    for (i, g) in groups.iter().enumerate() {
        assert_eq!(g["group"], i, "{v}");
        assert_eq!(g["voters"], serde_json::json!([1]), "{v}");
        assert_eq!(g["learners"], serde_json::json!([]), "{v}");
        assert_eq!(g["leader"], 1, "{v}");
        assert_eq!(g["replicas"][0]["node"], 1, "{v}");
        assert_eq!(g["replicas"][0]["lag"], 0, "{v}");
    }
    assert_eq!(v["moves"], serde_json::json!([]), "{v}");
    // Only reads: a write to it is no route.
    let r = s
        .post("/__strand/cluster")
        .header("authorization", &format!("Bearer {every}"))
        .send()
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
    s.stop().await;
}
