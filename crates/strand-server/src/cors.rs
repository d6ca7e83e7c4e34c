//! Browser security and CORS headers on every response (spec 08 §16), and
//! the preflight answer.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};

const ALLOW_METHODS: &str = "GET, POST, PUT, DELETE, HEAD, OPTIONS";
const ALLOW_HEADERS: &str = "content-type, authorization, if-none-match, stream-seq, stream-ttl, \
stream-expires-at, stream-closed, producer-id, producer-epoch, producer-seq, stream-forked-from, \
stream-fork-offset, stream-fork-sub-offset, stream-attrs, stream-record-match, \
stream-snapshot-match, prefer";
const EXPOSE_HEADERS: &str = "stream-next-offset, stream-cursor, stream-up-to-date, stream-closed, \
producer-epoch, producer-seq, producer-expected-seq, producer-received-seq, \
stream-sse-data-encoding, stream-ttl, stream-expires-at, etag, location, content-type, \
content-encoding, vary, retry-after";

/// Adds the CORS and security headers to a response.
pub fn add_headers(headers: &mut HeaderMap) {
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    set(headers, header::ACCESS_CONTROL_ALLOW_METHODS, ALLOW_METHODS);
    set(headers, header::ACCESS_CONTROL_ALLOW_HEADERS, ALLOW_HEADERS);
    set(
        headers,
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        EXPOSE_HEADERS,
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(
        headers,
        header::HeaderName::from_static("cross-origin-resource-policy"),
        "cross-origin",
    );
}

/// The answer to a CORS preflight (`OPTIONS` on any path): 204; the
/// headers come from [`add_headers`] like every other response's.
pub fn preflight() -> Response<Body> {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}
