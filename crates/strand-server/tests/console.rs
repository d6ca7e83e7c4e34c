//! The web console's files on a real server: served to anyone (they hold
//! no data), with headers that keep the page to the node's own origin.
//! The page itself is checked in Chromium by `cargo xtask console`.
#![allow(clippy::unwrap_used)]

use crate::common::TestServer;
use hyper::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_from_the_binary() {
    let s = TestServer::start().await;
    let page = s.get("/__strand/console").send().await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.h("content-type"), Some("text/html; charset=utf-8"));
    assert!(page.text().contains("/__strand/console/console.js"));
    let csp = page.h("content-security-policy").unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    assert_eq!(page.h("x-content-type-options"), Some("nosniff"));
    for (file, content_type) in [
        ("console.js", "text/javascript; charset=utf-8"),
        ("console.css", "text/css; charset=utf-8"),
    ] {
        let r = s.get(&format!("/__strand/console/{file}")).send().await;
        assert_eq!(r.status, StatusCode::OK, "{file}");
        assert_eq!(r.h("content-type"), Some(content_type));
        assert!(!r.body.is_empty());
    }
    let head = s.head("/__strand/console/").send().await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    assert_eq!(
        s.post("/__strand/console").send().await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );
    s.stop().await;
}
