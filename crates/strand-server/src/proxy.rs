//! Client requests a cluster member passes on to another member: for a
//! group a node does not hold (it has no vote in it, or joined and is
//! still receiving it) it answers its client routes through a member
//! that does, bodies streamed both ways (reads, long-polls, SSE, creates
//! and the rest; appends it proposes itself, and its group's proposer
//! forwards them to the leader as log entries).
//!
//! A passed-on request carries [`FORWARDED_BY`], the ids of the members
//! that passed it on. The member that receives it answers it itself or
//! refuses it, except that one holding the group without leading it
//! passes it on to the leader (reads of a member's own writes come from
//! a leader, which has applied them); so a request makes two hops at
//! most.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::Response;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::errors::ApiError;

/// The header of a request one member passed on to another: the ids of
/// the nodes that passed it on, comma-separated, in order.
pub const FORWARDED_BY: HeaderName = HeaderName::from_static("strand-forwarded-by");

/// How many times `headers`' request was passed on between members (the
/// ids [`FORWARDED_BY`] names; a value that is not text counts as one).
pub(crate) fn hops(headers: &HeaderMap) -> usize {
    headers
        .get_all(FORWARDED_BY)
        .iter()
        .map(|v| v.to_str().map_or(1, |ids| ids.split(',').count()))
        .sum()
}

/// How long connecting to the other member may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the other member may take to start its answer beyond the
/// longest long-poll it holds a request for.
const HEAD_GRACE: Duration = Duration::from_secs(30);
/// Idle connections kept per member, and for how long.
const IDLE_PER_MEMBER: usize = 64;
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Headers that belong to one connection, not to the request or answer
/// (RFC 9110 §7.6.1), and the ones [`crate::cors::add_headers`] sets on
/// this node's answer itself.
const NOT_PASSED_ON: [HeaderName; 13] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::VARY,
    header::ACCESS_CONTROL_ALLOW_ORIGIN,
    header::ACCESS_CONTROL_EXPOSE_HEADERS,
    header::X_CONTENT_TYPE_OPTIONS,
    HeaderName::from_static("cross-origin-resource-policy"),
];

fn client() -> &'static Client<HttpConnector, Body> {
    static CLIENT: OnceLock<Client<HttpConnector, Body>> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        http.set_nodelay(true);
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(IDLE_PER_MEMBER)
            .build(http)
    })
}

fn strip(headers: &mut HeaderMap) {
    // Headers named in `Connection` are the connection's too.
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(NOT_PASSED_ON.iter()) {
        headers.remove(name);
    }
}

/// Passes `request` on to member `to` (its id and URL) on behalf of node
/// `me`, and answers with that member's answer, its body streamed. The
/// `Host` header stays the client's, so URLs in the answer name the node
/// the client asked. `long_poll` is the longest the other member may
/// hold a read before answering.
///
/// # Errors
/// 503 with `Retry-After: 1` when the member cannot be reached or does
/// not answer in time.
pub(crate) async fn forward(
    me: u64,
    to: (u64, String),
    request: Request,
    long_poll: Duration,
) -> Result<Response, ApiError> {
    let (id, url) = to;
    let unavailable = |why: String| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "this node is joining its cluster and passes requests on to a member that holds \
                 the data, but node {id} {why}; retry"
            ),
        )
        .with_header(header::RETRY_AFTER, "1")
    };
    let (mut parts, body) = request.into_parts();
    // An HTTP/2 request names its authority in the URI, not in `Host`.
    if !parts.headers.contains_key(header::HOST)
        && let Some(authority) = parts.uri.authority()
        && let Ok(host) = HeaderValue::from_str(authority.as_str())
    {
        parts.headers.insert(header::HOST, host);
    }
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri: Uri = format!("{}{path}", url.trim_end_matches('/'))
        .parse()
        .map_err(|_| unavailable(format!("has an address that is not a URL ({url})")))?;
    parts.uri = uri;
    strip(&mut parts.headers);
    let by = match parts.headers.get(FORWARDED_BY).map(HeaderValue::to_str) {
        Some(Ok(before)) => HeaderValue::from_str(&format!("{before},{me}")),
        _ => Ok(HeaderValue::from(me)),
    };
    parts
        .headers
        .insert(FORWARDED_BY, by.unwrap_or_else(|_| HeaderValue::from(me)));
    let answer = tokio::time::timeout(
        long_poll.saturating_add(HEAD_GRACE),
        client().request(Request::from_parts(parts, body)),
    )
    .await
    .map_err(|_| unavailable("did not answer in time".to_owned()))?
    .map_err(|e| unavailable(format!("could not be reached ({e})")))?;
    let (mut parts, body) = answer.into_parts();
    strip(&mut parts.headers);
    Ok(Response::from_parts(parts, Body::new(body)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn connection_headers_are_not_passed_on() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        h.insert("stream-next-offset", HeaderValue::from_static("0_5"));
        strip(&mut h);
        let left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["content-type", "stream-next-offset"]);
    }

    #[test]
    fn hops_count_the_members_that_passed_a_request_on() {
        let mut h = HeaderMap::new();
        assert_eq!(hops(&h), 0);
        h.insert(FORWARDED_BY, HeaderValue::from(2u64));
        assert_eq!(hops(&h), 1);
        h.insert(FORWARDED_BY, HeaderValue::from_static("2,3"));
        assert_eq!(hops(&h), 2);
        h.insert(FORWARDED_BY, HeaderValue::from_bytes(b"\xff").unwrap());
        assert_eq!(hops(&h), 1);
    }
}
