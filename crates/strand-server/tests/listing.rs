//! `GET /__strand/streams/{bucket}`: a bucket's streams by name prefix, a
//! page at a time, against a real server with several groups.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use crate::common::{self, TestServer};
use hyper::StatusCode;
use serde_json::Value;

/// Every page of a listing, as (name, id) pairs, following `next`.
async fn list_all(
    s: &TestServer,
    bucket: &str,
    prefix: &str,
    limit: usize,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..1000 {
        let mut path = format!(
            "/__strand/streams/{bucket}?limit={limit}&prefix={}",
            enc(prefix)
        );
        if let Some(a) = &after {
            path.push_str(&format!("&after={}", enc(a)));
        }
        let r = s.get(&path).send().await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let v: Value = serde_json::from_str(r.text()).unwrap();
        let streams = v["streams"].as_array().unwrap();
        assert!(streams.len() <= limit);
        for e in streams {
            out.push((
                e["name"].as_str().unwrap().to_owned(),
                e["id"].as_str().unwrap().to_owned(),
            ));
        }
        match v["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return out,
        }
    }
    panic!("the listing never ended");
}

fn enc(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn names(listed: &[(String, String)]) -> BTreeSet<String> {
    listed.iter().map(|(n, _)| n.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_streams_of_any_name_by_prefix_in_pages() {
    let s = TestServer::start_with(|c| c.groups = 4).await;
    let mut all = BTreeSet::new();
    let create = async |name: String| {
        let r = s.put(&format!("/v1/stream/{name}")).text("x").send().await;
        assert_eq!(r.status, StatusCode::CREATED, "{name}");
    };
    let mut made = Vec::new();
    for i in 0..120 {
        made.push(format!("bulk/{i:03}"));
    }
    for i in 0..40 {
        made.push(format!("yjs/svc/docs/doc-{i}/.updates"));
    }
    made.extend(
        [
            "a",
            "chat/42",
            "chat/7",
            "chat/42/0b3c8f2e-uuid",
            "yjs/svc/docs/doc-1/.awareness/default",
            "pct%2Fslash",
            "pct%25sign",
        ]
        .map(str::to_owned),
    );
    for name in &made {
        create(name.clone()).await;
        // Canonical names keep `%2F` and `%25` escaped, as sent here.
        all.insert(name.clone());
    }

    // Every stream once, in id order, across pages of any size.
    for limit in [7, 1000] {
        let listed = list_all(&s, "default", "", limit).await;
        assert_eq!(listed.len(), made.len(), "limit {limit}");
        assert_eq!(names(&listed), all);
        let ids: Vec<&String> = listed.iter().map(|(_, id)| id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in order");
    }
    // Prefixes: direct names, hashed names, a mix.
    let doc1 = names(&list_all(&s, "default", "yjs/svc/docs/doc-1/", 5).await);
    assert_eq!(
        doc1,
        BTreeSet::from([
            "yjs/svc/docs/doc-1/.awareness/default".to_owned(),
            "yjs/svc/docs/doc-1/.updates".to_owned()
        ])
    );
    let doc1x = list_all(&s, "default", "yjs/svc/docs/doc-1", 5).await;
    assert_eq!(doc1x.len(), 2 + 10, "doc-1 and doc-10..doc-19");
    let chat = names(&list_all(&s, "default", "chat/", 2).await);
    assert_eq!(
        chat,
        BTreeSet::from([
            "chat/42".to_owned(),
            "chat/42/0b3c8f2e-uuid".to_owned(),
            "chat/7".to_owned()
        ])
    );
    assert_eq!(
        list_all(&s, "default", "bulk/1", 9).await.len(),
        20,
        "bulk/100..bulk/119"
    );
    assert_eq!(list_all(&s, "default", "pct%2F", 9).await.len(), 1);
    assert!(list_all(&s, "default", "nothing", 9).await.is_empty());

    // A page's entries.
    let r = s
        .get("/__strand/streams/default?prefix=chat%2F42&limit=1")
        .send()
        .await;
    let v: Value = serde_json::from_str(r.text()).unwrap();
    let e = &v["streams"][0];
    assert_eq!(e["name"], "chat/42");
    assert_eq!(e["id"], "chat/42");
    assert_eq!(e["bytes"], 1);
    assert_eq!(e["next_offset"], common::off(1));
    assert_eq!(e["content_type"], "text/plain");
    assert_eq!(e["closed"], false);
    assert!(v["next"].is_string());

    // Deleted streams are gone from the listing.
    assert_eq!(
        s.delete("/v1/stream/chat/7").send().await.status,
        StatusCode::NO_CONTENT
    );
    let chat = names(&list_all(&s, "default", "chat/", 2).await);
    assert!(!chat.contains("chat/7"));

    // A hashed stream keeps its name when its attributes are replaced.
    let named = list_all(&s, "default", "chat/42/", 5).await;
    let id = &named[0].1;
    let r = s
        .put(&format!("/default/{id}/attrs"))
        .text(r#"{"title":"t"}"#)
        .send()
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        names(&list_all(&s, "default", "chat/42/", 5).await),
        BTreeSet::from(["chat/42/0b3c8f2e-uuid".to_owned()])
    );

    // A fork under a hashed name is listed by its name.
    let r = s
        .put("/v1/stream/forks/of/a")
        .header("stream-forked-from", "/v1/stream/a")
        .send()
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    assert_eq!(
        names(&list_all(&s, "default", "forks/", 5).await),
        BTreeSet::from(["forks/of/a".to_owned()])
    );

    // The bucketed layout lists paths.
    s.put("/acme/tenant-1/events").text("e").send().await;
    s.put("/acme/log").send().await;
    let acme = list_all(&s, "acme", "", 1).await;
    assert_eq!(
        acme,
        [
            ("log".to_owned(), "log".to_owned()),
            ("tenant-1/events".to_owned(), "tenant-1/events".to_owned())
        ]
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_what_it_cannot_list() {
    let s = TestServer::start().await;
    // An empty mount lists nothing.
    let r = s.get("/__strand/streams/default").send().await;
    assert_eq!(r.status, StatusCode::OK);
    let v: Value = serde_json::from_str(r.text()).unwrap();
    assert_eq!(v["streams"], serde_json::json!([]));
    assert_eq!(v["next"], Value::Null);
    for (path, status) in [
        ("/__strand/streams/nobucket", StatusCode::NOT_FOUND),
        ("/__strand/streams/__strand", StatusCode::NOT_FOUND),
        ("/__strand/streams/default?limit=0", StatusCode::BAD_REQUEST),
        (
            "/__strand/streams/default?limit=5000",
            StatusCode::BAD_REQUEST,
        ),
        (
            "/__strand/streams/default?prefix=%ZZ",
            StatusCode::BAD_REQUEST,
        ),
    ] {
        assert_eq!(s.get(path).send().await.status, status, "{path}");
    }
    s.stop().await;
}

/// A hashed stream made before names were kept (here: through the
/// bucketed layout, under its id, without the name) is listed under its
/// id, and creating it again on the mount stays idempotent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_from_before_names_were_kept() {
    let s = TestServer::start().await;
    let name = "old/app/stream/.log";
    let made = s.put(&format!("/v1/stream/{name}")).text("x").send().await;
    assert_eq!(made.status, StatusCode::CREATED);
    let listed = list_all(&s, "default", "old/", 10).await;
    assert_eq!(listed.len(), 1);
    let id = listed[0].1.clone();
    assert_eq!(
        s.delete(&format!("/v1/stream/{name}")).send().await.status,
        StatusCode::NO_CONTENT
    );
    let old = s.put(&format!("/default/{id}")).text("x").send().await;
    assert_eq!(old.status, StatusCode::CREATED, "{}", old.text());
    assert_eq!(
        list_all(&s, "default", &id, 10).await,
        [(id.clone(), id.clone())]
    );
    let again = s.put(&format!("/v1/stream/{name}")).text("x").send().await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    // A different configuration is still a conflict.
    let other = s
        .put(&format!("/v1/stream/{name}"))
        .header("content-type", "application/json")
        .send()
        .await;
    assert_eq!(other.status, StatusCode::CONFLICT);
    s.stop().await;
}
