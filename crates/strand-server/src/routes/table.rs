//! The route table: what a request asks for and the right it needs,
//! decided from its method, path and listener alone ([`classify`],
//! [`Route::access`]), before any handler runs.
//!
//! | method | path | route | access |
//! |---|---|---|---|
//! | `OPTIONS` | any | [`Route::Preflight`] | open |
//! | `GET`, `HEAD` | `/__strand/health` | [`Route::Health`] | open |
//! | any | `/__strand/console`, `/__strand/console/{file}` | [`Route::Console`] | open (the files hold no data) |
//! | `GET` | `/metrics` | [`Route::Metrics`] | admin on `*`; closed on the client listener without authentication |
//! | `POST` (client listener) | `/__strand/raft/batch`, `…/segment`, `…/{group}/{kind}`, `…/ask/{group}/{kind}` | [`Route::Raft`] | the cluster token |
//! | any (admin listener) | not an operator route | 404 | |
//! | any | `/v1/stream/{name…}` | [`Route::Stream`] (the mount) | read (`GET`, `HEAD`) or write on the stream's name |
//! | any | `/__strand/integrity/{bucket}/[{affinity}/]{stream}` | [`Route::Integrity`] | read on the stream |
//! | `GET` | `/__strand/streams/{bucket}?prefix=P` | [`Route::List`] | read on the bucket, or on the names starting with `P` |
//! | any | `/__strand/{kind}/{bucket}`, `/__strand/cold` | [`Route::Operator`] | admin on the bucket (`*` for cold); closed on the client listener without authentication |
//! | any | `/{bucket}` | [`Route::Bucket`] | read or write on the bucket |
//! | any | `/{bucket}/…/{append-batch, $transaction, snapshot, retention, attrs, bootstrap}` | [`Route::Extension`] | read or write on the stream (the affinity path for `$transaction`) |
//! | any | `/{bucket}/[{affinity}/]{stream}` | [`Route::Stream`] (bucketed) | read or write on the stream |

use std::borrow::Cow;

use axum::http::Method;
#[cfg(test)]
use axum::http::StatusCode;

use crate::auth::Right;
use crate::errors::{ApiError, Layout};
use crate::names::Named;
use crate::routes::extensions::{self, Extension};
use crate::routes::{DS_PREFIX, segments, stream_id, stream_name};
use crate::state::Plane;

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// A CORS preflight.
    Preflight,
    /// `GET /__strand/health`.
    Health,
    /// `GET /metrics`: the Prometheus metrics.
    Metrics,
    /// A file of the web console (`index.html` for `/__strand/console`).
    Console(String),
    /// A peer's Raft traffic.
    Raft(RaftRoute),
    /// A stream, on the mount or the bucketed layout.
    Stream(Named, Layout),
    /// A stream's integrity setsums.
    Integrity(Named),
    /// `GET /__strand/streams/{bucket}`: a page of the bucket's streams.
    List {
        /// The bucket.
        bucket: String,
        /// The query (filled in from the request's query string by the
        /// dispatcher: [`classify`] sees only the path).
        query: crate::listing::ListQuery,
    },
    /// An operator route: `/__strand/{kind}/{bucket}` or `/__strand/cold`.
    Operator {
        /// The bucket it concerns, `*` for all of them.
        scope: String,
        /// The path after `/__strand/`.
        rest: Vec<String>,
    },
    /// `/{bucket}`.
    Bucket(String),
    /// An extension route of the bucketed layout.
    Extension(Extension),
    /// The protocol's subscription API.
    Subscriptions {
        /// The default bucket, whose rights the management routes need.
        bucket: String,
        /// The decoded path after `/v1/stream/__ds/`.
        rest: Vec<String>,
    },
}

/// The Raft transport's routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RaftRoute {
    /// `POST /__strand/raft/batch`.
    Batch,
    /// `POST /__strand/raft/segment`.
    Segment,
    /// `POST /__strand/raft/view`: the node's own view of its groups.
    View,
    /// `POST /__strand/raft/drain`: start or end this node's drain.
    Drain,
    /// `POST /__strand/raft/remove`: take a member out (on group 0's
    /// leader).
    Remove,
    /// `POST /__strand/raft/join`: admit a new member.
    Join,
    /// `POST /__strand/raft/ask/{group}/{kind}`: a member's question about
    /// a group it does not hold; the path after `ask/`.
    Ask(String),
    /// `POST /__strand/raft/{group}/{kind}`: the path after `raft/`.
    Message(String),
}

/// What a route needs before its handler runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Access<'a> {
    /// Nothing.
    Open,
    /// The cluster token (`strand_raft::CLUSTER_TOKEN_HEADER`).
    ClusterToken,
    /// The admin right on a bucket (or `*`); on the client listener only
    /// with authentication on.
    Operator(&'a str),
    /// A right on a bucket, or on a stream of it by name.
    Resource {
        /// The bucket.
        bucket: Cow<'a, str>,
        /// The stream's name for grants, if the route concerns one.
        stream: Option<Cow<'a, str>>,
        /// The right.
        right: Right,
    },
}

/// The message of a request to the admin listener outside its routes.
pub(super) const ADMIN_LISTENER_ONLY: &str = "the admin listener serves only the operator routes (/__strand/purge, /__strand/quota, /__strand/usage, /__strand/cold, /__strand/cluster), /metrics, /__strand/health and the console (/__strand/console)";

/// Decides a request's route.
///
/// # Errors
///
/// 404 for a path no route serves (and for anything but the operator
/// routes on the admin listener); 400 for a path that is not valid
/// percent-encoded UTF-8 or names no valid stream.
pub(super) fn classify(
    method: &Method,
    path: &str,
    plane: Plane,
    default_bucket: &str,
) -> Result<Route, ApiError> {
    if method == Method::OPTIONS {
        return Ok(Route::Preflight);
    }
    if path == "/__strand/health" && (method == Method::GET || method == Method::HEAD) {
        return Ok(Route::Health);
    }
    if path == "/metrics" && method == Method::GET {
        return Ok(Route::Metrics);
    }
    if let Some(rest) = path.strip_prefix("/__strand/raft/")
        && method == Method::POST
        && plane == Plane::Client
    {
        return Ok(Route::Raft(match rest {
            "batch" => RaftRoute::Batch,
            "segment" => RaftRoute::Segment,
            "view" => RaftRoute::View,
            "drain" => RaftRoute::Drain,
            "remove" => RaftRoute::Remove,
            "join" => RaftRoute::Join,
            _ => match rest.strip_prefix("ask/") {
                Some(asked) => RaftRoute::Ask(asked.to_owned()),
                None => RaftRoute::Message(rest.to_owned()),
            },
        }));
    }
    if plane == Plane::Admin && !is_operator_path(path) {
        return Err(ApiError::not_found(ADMIN_LISTENER_ONLY));
    }
    if let Some(rest) = path.strip_prefix(DS_PREFIX).and_then(|p| {
        p.strip_prefix(crate::names::RESERVED_SEGMENT)
            .filter(|r| r.is_empty() || r.starts_with('/'))
    }) {
        return Ok(Route::Subscriptions {
            bucket: default_bucket.to_owned(),
            rest: segments(rest)?,
        });
    }
    if let Some(name) = path.strip_prefix(DS_PREFIX) {
        let named = crate::names::mount_stream(default_bucket, name)?;
        return Ok(Route::Stream(named, Layout::DurableStreams));
    }
    let segs = segments(path)?;
    let Some((first, rest)) = segs.split_first() else {
        return Err(ApiError::not_found("no such resource"));
    };
    if first == "__strand" {
        return match rest {
            [kind] if kind == "console" => Ok(Route::Console("index.html".to_owned())),
            [kind, file] if kind == "console" && crate::console::has_asset(file) => {
                Ok(Route::Console(file.clone()))
            }
            [kind, bucket, stream @ ..] if kind == "integrity" && !stream.is_empty() => {
                Ok(Route::Integrity(named(stream_id(bucket, stream)?)))
            }
            [kind, bucket] if kind == "streams" && method == Method::GET => Ok(Route::List {
                bucket: bucket.clone(),
                query: crate::listing::ListQuery::default(),
            }),
            [_, bucket] => Ok(Route::Operator {
                scope: bucket.clone(),
                rest: rest.to_vec(),
            }),
            [kind, action, _]
                if kind == "cluster"
                    && (action == "drain" || action == "undrain" || action == "remove") =>
            {
                Ok(Route::Operator {
                    scope: "*".to_owned(),
                    rest: rest.to_vec(),
                })
            }
            [kind] if kind == "cold" || kind == "cluster" => Ok(Route::Operator {
                scope: "*".to_owned(),
                rest: rest.to_vec(),
            }),
            _ => Err(ApiError::not_found("no such admin route")),
        };
    }
    if rest.is_empty() {
        return Ok(Route::Bucket(first.clone()));
    }
    if let Some(extension) = extensions::classify(first, rest) {
        return Ok(Route::Extension(extension));
    }
    Ok(Route::Stream(
        named(stream_id(first, rest)?),
        Layout::Bucketed,
    ))
}

impl Route {
    /// The route's class, a metrics label (a fixed set of names).
    pub(super) fn class(&self) -> &'static str {
        match self {
            Self::Preflight => "preflight",
            Self::Health => "health",
            Self::Metrics => "metrics",
            Self::Console(_) => "console",
            Self::Raft(_) => "raft",
            Self::Stream(_, Layout::DurableStreams) => "stream",
            Self::Stream(_, Layout::Bucketed) => "bucketed_stream",
            Self::Integrity(_) => "integrity",
            Self::List { .. } => "list",
            Self::Operator { .. } => "operator",
            Self::Bucket(_) => "bucket",
            Self::Extension(_) => "extension",
            Self::Subscriptions { .. } => "subscriptions",
        }
    }

    /// What the route needs from a request made with `method`.
    pub(super) fn access(&self, method: &Method) -> Access<'_> {
        let right = if method == Method::GET || method == Method::HEAD {
            Right::Read
        } else {
            Right::Write
        };
        match self {
            Self::Preflight | Self::Health | Self::Console(_) => Access::Open,
            Self::Raft(_) => Access::ClusterToken,
            Self::Stream(named, _) => stream_access(named, right),
            Self::Integrity(named) => stream_access(named, Right::Read),
            Self::List { bucket, query } => Access::Resource {
                bucket: Cow::Borrowed(bucket),
                stream: (!query.prefix.is_empty()).then_some(Cow::Borrowed(query.prefix.as_str())),
                right: Right::Read,
            },
            Self::Operator { scope, .. } => Access::Operator(scope),
            Self::Metrics => Access::Operator("*"),
            Self::Bucket(bucket) => Access::Resource {
                bucket: Cow::Borrowed(bucket),
                stream: None,
                right,
            },
            // The wake routes carry the wake's own bearer token, checked
            // by their handlers; the JWKS is public.
            Self::Subscriptions { bucket, rest } => match rest.as_slice() {
                [file] if file == "jwks.json" => Access::Open,
                [_, _, action] if ["callback", "ack", "release"].contains(&action.as_str()) => {
                    Access::Open
                }
                _ => Access::Resource {
                    bucket: Cow::Borrowed(bucket),
                    stream: None,
                    right,
                },
            },
            Self::Extension(extension) => {
                let (bucket, name) = extension_scope(extension);
                Access::Resource {
                    bucket: Cow::Owned(bucket),
                    stream: Some(Cow::Owned(name)),
                    right,
                }
            }
        }
    }
}

/// A right on a named stream.
fn stream_access(named: &Named, right: Right) -> Access<'_> {
    Access::Resource {
        bucket: Cow::Borrowed(named.id.bucket_id.as_str()),
        stream: Some(Cow::Borrowed(named.name.as_str())),
        right,
    }
}

/// A bucketed-layout id with its name for grants.
fn named(id: strand::BucketStreamId) -> Named {
    Named {
        name: stream_name(&id),
        id,
    }
}

/// Whether a path is one of the operator routes under `/__strand/` (not
/// health, the Raft transport, a stream's integrity or the listing, which
/// are not operator routes).
fn is_operator_path(path: &str) -> bool {
    path == "/metrics"
        || path.strip_prefix("/__strand/").is_some_and(|rest| {
            !rest.starts_with("integrity/")
                && !rest.starts_with("raft/")
                && !rest.starts_with("streams/")
                && rest != "health"
        })
}

/// The bucket and stream name an extension route concerns.
fn extension_scope(extension: &Extension) -> (String, String) {
    use Extension as E;
    match extension {
        E::AppendBatch(id)
        | E::Snapshot(id, _)
        | E::Retention(id, _)
        | E::Attrs(id)
        | E::Bootstrap(id) => (id.bucket_id.clone(), stream_name(id)),
        E::Transaction { bucket, affinity } => (bucket.clone(), format!("{affinity}/")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use strand::BucketStreamId;

    /// The status of a refused classification.
    fn refused(method: &Method, path: &str, plane: Plane) -> StatusCode {
        classify(method, path, plane, "default").unwrap_err().status
    }

    fn route(method: Method, path: &str) -> Route {
        classify(&method, path, Plane::Client, "default").unwrap()
    }

    fn resource(bucket: &str, stream: Option<&str>, right: Right) -> Access<'static> {
        Access::Resource {
            bucket: Cow::Owned(bucket.to_owned()),
            stream: stream.map(|s| Cow::Owned(s.to_owned())),
            right,
        }
    }

    #[test]
    fn the_mount_and_the_bucketed_layout() {
        let r = route(Method::GET, "/v1/stream/yjs/a/b");
        assert!(matches!(&r, Route::Stream(n, Layout::DurableStreams) if n.name == "yjs/a/b"));
        assert_eq!(
            r.access(&Method::GET),
            resource("default", Some("yjs/a/b"), Right::Read)
        );
        let r = route(Method::POST, "/acme/aff/s");
        assert_eq!(
            r,
            Route::Stream(
                Named {
                    id: BucketStreamId::with_affinity("acme", "aff", "s"),
                    name: "aff/s".to_owned()
                },
                Layout::Bucketed
            )
        );
        assert_eq!(
            r.access(&Method::POST),
            resource("acme", Some("aff/s"), Right::Write)
        );
        let r = route(Method::PUT, "/acme");
        assert_eq!(r, Route::Bucket("acme".to_owned()));
        assert_eq!(r.access(&Method::PUT), resource("acme", None, Right::Write));
        assert_eq!(
            route(Method::HEAD, "/acme").access(&Method::HEAD),
            resource("acme", None, Right::Read)
        );
    }

    #[test]
    fn metrics_are_an_operator_route_on_either_listener() {
        let r = route(Method::GET, "/metrics");
        assert_eq!(r, Route::Metrics);
        assert_eq!(r.access(&Method::GET), Access::Operator("*"));
        assert_eq!(r.class(), "metrics");
        let admin = classify(&Method::GET, "/metrics", Plane::Admin, "default").unwrap();
        assert_eq!(admin, Route::Metrics);
        // Any other method is a bucket route of a bucket named "metrics"
        // on the client listener, and nothing on the admin listener.
        assert_eq!(
            route(Method::PUT, "/metrics"),
            Route::Bucket("metrics".to_owned())
        );
        assert_eq!(
            refused(&Method::PUT, "/metrics/x/y", Plane::Admin),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn extensions_need_a_right_on_their_stream() {
        let r = route(Method::POST, "/acme/s/append-batch");
        assert!(matches!(r, Route::Extension(Extension::AppendBatch(_))));
        assert_eq!(
            r.access(&Method::POST),
            resource("acme", Some("s"), Right::Write)
        );
        let r = route(Method::POST, "/acme/aff/$transaction");
        assert_eq!(
            r.access(&Method::POST),
            resource("acme", Some("aff/"), Right::Write)
        );
        let r = route(Method::GET, "/acme/s/snapshot/12");
        assert_eq!(
            r.access(&Method::GET),
            resource("acme", Some("s"), Right::Read)
        );
    }

    #[test]
    fn the_servers_own_routes() {
        assert_eq!(
            route(Method::OPTIONS, "/anything").access(&Method::OPTIONS),
            Access::Open
        );
        assert_eq!(route(Method::GET, "/__strand/health"), Route::Health);
        assert_eq!(route(Method::HEAD, "/__strand/health"), Route::Health);
        assert_eq!(
            route(Method::POST, "/__strand/raft/batch"),
            Route::Raft(RaftRoute::Batch)
        );
        assert_eq!(
            route(Method::POST, "/__strand/raft/segment").access(&Method::POST),
            Access::ClusterToken
        );
        assert_eq!(
            route(Method::POST, "/__strand/raft/3/append"),
            Route::Raft(RaftRoute::Message("3/append".to_owned()))
        );
        let r = route(Method::POST, "/__strand/raft/ask/3/bucket-exists");
        assert_eq!(r, Route::Raft(RaftRoute::Ask("3/bucket-exists".to_owned())));
        assert_eq!(r.access(&Method::POST), Access::ClusterToken);
        let r = route(Method::GET, "/__strand/integrity/acme/aff/s");
        assert_eq!(
            r.access(&Method::GET),
            resource("acme", Some("aff/s"), Right::Read)
        );
        let r = route(Method::PUT, "/__strand/quota/acme");
        assert_eq!(r.access(&Method::PUT), Access::Operator("acme"));
        let r = route(Method::GET, "/__strand/cold");
        assert_eq!(r.access(&Method::GET), Access::Operator("*"));
        let r = route(Method::GET, "/__strand/cluster");
        assert_eq!(r.access(&Method::GET), Access::Operator("*"));
        assert_eq!(
            route(Method::POST, "/__strand/raft/view"),
            Route::Raft(RaftRoute::View)
        );
        assert_eq!(
            route(Method::POST, "/__strand/raft/drain"),
            Route::Raft(RaftRoute::Drain)
        );
        let r = route(Method::POST, "/__strand/cluster/drain/3");
        assert_eq!(r.access(&Method::POST), Access::Operator("*"));
        assert_eq!(
            route(Method::POST, "/__strand/raft/remove"),
            Route::Raft(RaftRoute::Remove)
        );
        assert!(matches!(
            route(Method::POST, "/__strand/cluster/remove/3"),
            Route::Operator { .. }
        ));
        let r = route(Method::POST, "/__strand/cluster/undrain/3");
        assert_eq!(r.access(&Method::POST), Access::Operator("*"));
        for (path, file) in [
            ("/__strand/console", "index.html"),
            ("/__strand/console/", "index.html"),
            ("/__strand/console/console.js", "console.js"),
        ] {
            let r = route(Method::GET, path);
            assert_eq!(r, Route::Console(file.to_owned()));
            assert_eq!(r.access(&Method::GET), Access::Open);
        }
        let mut r = route(Method::GET, "/__strand/streams/default");
        assert_eq!(r.class(), "list");
        assert_eq!(
            r.access(&Method::GET),
            resource("default", None, Right::Read)
        );
        if let Route::List { query, .. } = &mut r {
            query.prefix = "yjs/".into();
        }
        assert_eq!(
            r.access(&Method::GET),
            resource("default", Some("yjs/"), Right::Read)
        );
        assert_eq!(
            refused(&Method::GET, "/__strand/streams/default", Plane::Admin),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn the_admin_listener_serves_operator_routes_only() {
        let admin = |method: &Method, path: &str| classify(method, path, Plane::Admin, "default");
        let purge = admin(&Method::DELETE, "/__strand/purge/acme").unwrap();
        assert_eq!(purge.access(&Method::DELETE), Access::Operator("acme"));
        assert_eq!(
            admin(&Method::GET, "/__strand/health").unwrap(),
            Route::Health
        );
        for path in ["/v1/stream/a", "/acme/s", "/__strand/integrity/acme/s"] {
            assert_eq!(
                refused(&Method::GET, path, Plane::Admin),
                StatusCode::NOT_FOUND,
                "{path}"
            );
        }
        // The Raft routes are the client listener's.
        assert_eq!(
            refused(&Method::POST, "/__strand/raft/batch", Plane::Admin),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn refusals() {
        let client = |method: Method, path: &str| refused(&method, path, Plane::Client);
        assert_eq!(client(Method::GET, "/"), StatusCode::NOT_FOUND);
        assert_eq!(
            client(Method::GET, "/__strand/nope/a/b"),
            StatusCode::NOT_FOUND
        );
        assert_eq!(client(Method::GET, "/acme/a/b/c"), StatusCode::NOT_FOUND);
        assert_eq!(client(Method::GET, "/acme/%ff"), StatusCode::BAD_REQUEST);
        assert_eq!(
            client(Method::GET, "/v1/stream/a//b"),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            client(Method::GET, "/v1/stream/__dsx/%ff"),
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn the_subscription_api() {
        let r = route(Method::PUT, "/v1/stream/__ds/subscriptions/s%2F1");
        assert_eq!(
            r,
            Route::Subscriptions {
                bucket: "default".to_owned(),
                rest: vec!["subscriptions".to_owned(), "s/1".to_owned()]
            }
        );
        assert_eq!(
            r.access(&Method::PUT),
            resource("default", None, Right::Write)
        );
        for open in [
            "/v1/stream/__ds/jwks.json",
            "/v1/stream/__ds/subscriptions/s/callback",
            "/v1/stream/__ds/subscriptions/s/ack",
            "/v1/stream/__ds/subscriptions/s/release",
        ] {
            assert_eq!(
                route(Method::POST, open).access(&Method::POST),
                Access::Open,
                "{open}"
            );
        }
        assert_eq!(
            route(Method::POST, "/v1/stream/__ds/subscriptions/s/claim").access(&Method::POST),
            resource("default", None, Right::Write)
        );
    }
}
