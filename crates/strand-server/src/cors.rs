//! Browser security and CORS headers on every response (spec 08 §16), and
//! the preflight answer.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, header};

const ALLOW_METHODS: &str = "GET, POST, PUT, DELETE, HEAD, OPTIONS";
const ALLOW_HEADERS: &str = "content-type, authorization, if-none-match, stream-seq, stream-ttl, \
stream-expires-at, stream-closed, producer-id, producer-epoch, producer-seq, stream-forked-from, \
stream-fork-offset, stream-fork-sub-offset, stream-attrs, stream-record-match, \
stream-snapshot-match, prefer";
const EXPOSE_HEADERS: &str = "stream-next-offset, stream-cursor, stream-up-to-date, stream-closed, \
producer-epoch, producer-seq, producer-expected-seq, producer-received-seq, \
stream-sse-data-encoding, stream-ttl, stream-expires-at, etag, location, content-type, \
content-encoding, vary, retry-after";

// Every response carries these headers, so names and values are built at
// compile time: `from_static` outside a const context checks every byte of
// the value (and parses the name) on each call.
const ANY_ORIGIN: HeaderValue = HeaderValue::from_static("*");
const VARY_ORIGIN: HeaderValue = HeaderValue::from_static("origin");
const ALLOW_METHODS_VALUE: HeaderValue = HeaderValue::from_static(ALLOW_METHODS);
const ALLOW_HEADERS_VALUE: HeaderValue = HeaderValue::from_static(ALLOW_HEADERS);
const EXPOSE_HEADERS_VALUE: HeaderValue = HeaderValue::from_static(EXPOSE_HEADERS);
const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");
const CROSS_ORIGIN_RESOURCE_POLICY: HeaderName =
    HeaderName::from_static("cross-origin-resource-policy");
const CROSS_ORIGIN: HeaderValue = HeaderValue::from_static("cross-origin");

/// Which origins may read responses from a browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origins {
    /// Any origin (`Access-Control-Allow-Origin: *`): the default on
    /// loopback binds.
    Any,
    /// These origins only (the request's `Origin` is echoed when listed,
    /// with `Vary: Origin`); empty means none.
    Listed(Vec<String>),
}

impl Origins {
    /// The policy for a configuration: the `--cors-origin` list when given
    /// (`*` in it means any), else any origin on a loopback bind and none
    /// elsewhere.
    pub fn for_config(listed: &[String], loopback: bool) -> Self {
        if listed.iter().any(|o| o == "*") || (listed.is_empty() && loopback) {
            Self::Any
        } else {
            Self::Listed(listed.to_vec())
        }
    }
}

/// Adds the CORS and security headers to a response, for a request from
/// `origin` (its `Origin` header, if any). `Access-Control-Allow-Methods`
/// and `-Allow-Headers` go on preflight answers only (`preflight`): the
/// Fetch standard reads them from a preflight and nowhere else, and they
/// are two thirds of these headers' bytes on every other response.
///
/// `cacheable` says whether a shared cache may keep the response (`GET`,
/// `HEAD` and the rest of the safe methods). A response that no cache
/// keeps (a `POST`, `PUT` or `DELETE` answer) carries
/// `Access-Control-Allow-Origin` and `-Expose-Headers` only when the
/// request names an `Origin`: browsers send one with every cross-origin
/// request, and with every `POST`, so no browser misses them, while a
/// writer outside a browser saves their 375 bytes on each append. A
/// cacheable response carries them whatever the request, so that a CDN
/// cannot hand a browser a copy made for a client without an `Origin`.
pub fn add_headers(
    headers: &mut HeaderMap,
    origins: &Origins,
    origin: Option<&HeaderValue>,
    preflight: bool,
    cacheable: bool,
) {
    if !cacheable && !preflight && origin.is_none() {
        headers.insert(header::X_CONTENT_TYPE_OPTIONS, NOSNIFF);
        headers.insert(CROSS_ORIGIN_RESOURCE_POLICY, CROSS_ORIGIN);
        return;
    }
    match origins {
        Origins::Any => {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, ANY_ORIGIN);
        }
        Origins::Listed(list) => {
            headers.append(header::VARY, VARY_ORIGIN);
            if let Some(origin) = origin
                && origin
                    .to_str()
                    .is_ok_and(|o| list.iter().any(|allowed| allowed == o))
            {
                headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            }
        }
    }
    if preflight {
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, ALLOW_METHODS_VALUE);
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, ALLOW_HEADERS_VALUE);
    }
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSE_HEADERS_VALUE);
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, NOSNIFF);
    headers.insert(CROSS_ORIGIN_RESOURCE_POLICY, CROSS_ORIGIN);
}

/// The answer to a CORS preflight (`OPTIONS` on any path): 204; the
/// headers come from [`add_headers`] like every other response's.
pub fn preflight() -> Response<Body> {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn origin_policies() {
        assert_eq!(Origins::for_config(&[], true), Origins::Any);
        assert_eq!(Origins::for_config(&[], false), Origins::Listed(vec![]));
        assert_eq!(Origins::for_config(&["*".into()], false), Origins::Any);
        let listed = Origins::for_config(&["https://app.test".into()], true);
        let mut h = HeaderMap::new();
        add_headers(
            &mut h,
            &listed,
            Some(&HeaderValue::from_static("https://app.test")),
            false,
            true,
        );
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_ORIGIN], "https://app.test");
        assert_eq!(h[header::VARY], "origin");
        let mut h = HeaderMap::new();
        add_headers(
            &mut h,
            &listed,
            Some(&HeaderValue::from_static("https://evil.test")),
            false,
            true,
        );
        assert!(h.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
        let mut h = HeaderMap::new();
        add_headers(&mut h, &Origins::Any, None, false, true);
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert!(h.contains_key(header::ACCESS_CONTROL_EXPOSE_HEADERS));
        assert!(!h.contains_key(header::ACCESS_CONTROL_ALLOW_METHODS));
        assert!(!h.contains_key(header::ACCESS_CONTROL_ALLOW_HEADERS));
        let mut h = HeaderMap::new();
        add_headers(&mut h, &Origins::Any, None, true, false);
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_METHODS], ALLOW_METHODS);
        assert!(
            h[header::ACCESS_CONTROL_ALLOW_HEADERS]
                .to_str()
                .unwrap()
                .contains("if-none-match")
        );
    }

    #[test]
    fn answers_no_cache_keeps_carry_cors_headers_only_for_an_origin() {
        let origin = HeaderValue::from_static("https://app.test");
        for origins in [
            Origins::Any,
            Origins::Listed(vec!["https://app.test".into()]),
        ] {
            let mut h = HeaderMap::new();
            add_headers(&mut h, &origins, None, false, false);
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(h[CROSS_ORIGIN_RESOURCE_POLICY], "cross-origin");
            assert_eq!(h.len(), 2, "{h:?}");
            let mut h = HeaderMap::new();
            add_headers(&mut h, &origins, Some(&origin), false, false);
            let allowed = if origins == Origins::Any {
                "*"
            } else {
                "https://app.test"
            };
            assert_eq!(h[header::ACCESS_CONTROL_ALLOW_ORIGIN], allowed);
            assert!(h.contains_key(header::ACCESS_CONTROL_EXPOSE_HEADERS));
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        }
    }
}
