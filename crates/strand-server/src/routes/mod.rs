//! Routing: the Durable Streams mount `/v1/stream/{name}`, the bucketed
//! layout `/{bucket}/…`, and the server's own `/__strand/…` routes
//! (spec 08 §21–§22).

mod admin;
pub mod extensions;
mod raft;
mod stream;
mod table;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use std::time::Instant;

use strand::BucketStreamId;

use crate::auth::{self, Right};
use crate::errors::{ApiError, Layout};
use crate::names::Named;
use crate::state::{AppState, Plane};
use crate::target::StreamRequest;
use table::{Access, RaftRoute, Route};

/// The Durable Streams mount.
pub const DS_PREFIX: &str = "/v1/stream/";

/// The answer to an operator route on the client listener while
/// authentication is off.
pub const OPERATOR_ROUTES_CLOSED: &str = "the operator routes (/__strand/purge, /__strand/quota, /__strand/usage, /__strand/cold) are served only with authentication on, to a token with the admin right (--auth-secret-file or --auth-jwks-file), or on the admin listener (--admin-listen ADDR)";

/// The answer of a cluster member that does not hold every group yet (it
/// joined and is still receiving them) to a client request it cannot pass
/// on to another member.
pub const JOINING: &str = "this node does not hold the data this request needs yet (it is joining its cluster), and no member could take the request; retry, or send the request to another member";

/// The answer of a node the cluster removed to every client request.
pub const REMOVED: &str = "this node was removed from its cluster and serves no requests; send them to another member (to add this node back, start it with an empty data directory and --join)";

/// The server's routes as an axum [`Router`] (for embedding and tests).
/// Every request goes through one function, [`serve`], which adds the CORS
/// and security headers and writes the request log line, so no middleware
/// layer boxes each request's future again.
pub fn router(state: AppState) -> Router {
    Router::new()
        .fallback(|State(state): State<AppState>, request: Request| serve(state, request))
        .with_state(state)
}

/// `GET /__strand/health`: 200 with the node's mode and, for a durable
/// node, each group's leader, applied index and log counters, and the
/// counters' totals over the groups (`log`: writes, entries, fsyncs,
/// `entries_per_fsync`, `proposals_per_fsync`, `mean_fsync_us`) and, for a
/// cluster's node, its Raft traffic to its peers (`network`:
/// `strand_raft::NetworkStats` with `messages_per_batch` and
/// `messages_per_request`); 503 while a durable group has no leader, and
/// (`status`: `removed`) on a node its cluster removed.
/// A group's entry is `strand_raft::RaftGroupStatus` on a durable node.
async fn health(state: &AppState) -> Response {
    let durable = state.engine.is_replicated();
    let (groups, ready, totals) = match &state.raft {
        Some(raft) => {
            let groups = raft.status();
            // A group this node does not hold is its members' to answer.
            let ready = groups
                .iter()
                .filter(|g| g.held)
                .all(|g| g.replication.leader.is_some());
            let totals = groups.iter().map(|g| g.log).fold(
                strand_raft::LogStats::default(),
                strand_raft::LogStats::combined,
            );
            let groups = serde_json::to_value(&groups).unwrap_or_default();
            (groups, ready, Some(totals))
        }
        None => {
            let groups = state.engine.group_status();
            let ready = groups.iter().all(|g| g.leader.is_some());
            let groups = serde_json::to_value(&groups).unwrap_or_default();
            (groups, ready, None)
        }
    };
    let removed = state
        .raft
        .as_ref()
        .is_some_and(strand_raft::RaftNode::removed);
    let joining = !removed
        && state
            .raft
            .as_ref()
            .is_some_and(strand_raft::RaftNode::joining);
    let ready = ready && !removed && !joining;
    let status = if removed {
        "removed"
    } else if joining {
        "joining"
    } else if ready {
        "ok"
    } else {
        "no-leader"
    };
    let mut body = serde_json::json!({
        "status": status,
        "mode": if durable { "durable" } else { "memory" },
        "groups": groups,
    });
    if let Some(total) = totals {
        let mut log = serde_json::to_value(total).unwrap_or_default();
        if let Some(map) = log.as_object_mut() {
            map.insert(
                "entries_per_fsync".to_owned(),
                serde_json::json!(total.entries_per_fsync()),
            );
            map.insert(
                "proposals_per_fsync".to_owned(),
                serde_json::json!(total.proposals_per_fsync()),
            );
            map.insert(
                "mean_fsync_us".to_owned(),
                serde_json::json!(total.mean_fsync_us()),
            );
        }
        body["log"] = log;
    }
    if let Some(raft) = state.raft.as_ref().filter(|r| r.has_peers()) {
        body["balance"] = serde_json::to_value(raft.balance_stats()).unwrap_or_default();
    }
    if let Some(network) = state
        .raft
        .as_ref()
        .and_then(strand_raft::RaftNode::network_stats)
    {
        let mut value = serde_json::to_value(network).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert(
                "messages_per_batch".to_owned(),
                serde_json::json!(network.messages_per_batch()),
            );
            map.insert(
                "messages_per_request".to_owned(),
                serde_json::json!(network.messages_per_request()),
            );
        }
        body["network"] = value;
    }
    let status = if ready {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        format!("{body}\n"),
    )
        .into_response()
}

/// `GET /metrics`: the node's metrics in the Prometheus text format
/// (`crate::metrics`).
async fn metrics_route(state: &AppState) -> Response {
    let sources = crate::metrics::Sources {
        engine: &state.engine,
        cold: state.cold.as_ref(),
        raft: state.raft.as_ref(),
        bodies: &state.bodies,
        peer_bodies: &state.peer_bodies,
    };
    match state.metrics.render(sources).await {
        Ok(text) => (
            StatusCode::OK,
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be encoded",
        )
        .into_response(),
    }
}

/// Answers one request: what [`router`]'s only handler does, and what the
/// server's connections call directly (no router in between: the routes
/// are matched here, so axum's path router, URL-parameter extraction and
/// handler adapters only cost instructions). The route and the right it
/// needs come from the route table (`table::classify`) before any
/// handler runs.
pub async fn serve(state: AppState, request: Request) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let uri = request.uri().clone();
    let origin = request.headers().get(axum::http::header::ORIGIN).cloned();
    let origins = std::sync::Arc::clone(&state.origins);
    let preflight = method == Method::OPTIONS;
    let metrics = std::sync::Arc::clone(&state.metrics);
    let (class, result) = dispatch(state, request).await;
    let mut response = match result {
        Ok(response) => response,
        Err(error) => error.into_response(),
    };
    // A shared cache may keep answers to the safe methods only.
    let cacheable = method.is_safe();
    crate::cors::add_headers(
        response.headers_mut(),
        &origins,
        origin.as_ref(),
        preflight,
        cacheable,
    );
    let status = response.status();
    metrics.request(class, &method, status.as_u16(), started.elapsed());
    let subject = response
        .extensions()
        .get::<auth::Subject>()
        .map_or("-", |s| s.0.as_str());
    // A health check's 503 says "not ready" (no leader, joining): the
    // answer it asks for, polled by load balancers, not a failure.
    if status.is_server_error() && class != "health" {
        // An overloaded node refuses thousands of requests a second (503
        // with Retry-After); a line for each would add work and flood the
        // log just then. One a second, with how many were left out.
        if let Some(left_out) = FAILED_LOG.admit(started) {
            tracing::warn!(
                %method,
                path = uri.path(),
                status = status.as_u16(),
                subject,
                left_out,
                "request failed"
            );
        }
    } else {
        tracing::debug!(
            %method,
            path = uri.path(),
            status = status.as_u16(),
            subject,
            micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "request"
        );
    }
    response
}

/// The failed-request warnings: at most one a second.
static FAILED_LOG: crate::log_limit::LogLimit = crate::log_limit::LogLimit::new(1_000);

/// Classifies a request, checks the access its route needs, and hands it
/// to the route's handler.
/// Answers with the route's class (`unrouted` for a request no route
/// takes), for the metrics.
async fn dispatch(state: AppState, request: Request) -> (&'static str, Result<Response, ApiError>) {
    let mut route = match table::classify(
        request.method(),
        request.uri().path(),
        state.plane,
        &state.config.default_bucket,
    ) {
        Ok(route) => route,
        Err(error) => return ("unrouted", Err(error)),
    };
    if let Route::List { query, .. } = &mut route {
        match crate::listing::ListQuery::parse(request.uri().query()) {
            Ok(parsed) => *query = parsed,
            Err(error) => return ("list", Err(error)),
        }
    }
    let class = route.class();
    (class, route_request(state, request, route).await)
}

/// Checks the access `route` needs and hands the request to its handler.
async fn route_request(
    state: AppState,
    request: Request,
    route: Route,
) -> Result<Response, ApiError> {
    let subject = match route.access(request.method()) {
        Access::Open => None,
        Access::ClusterToken => {
            if let Err(refused) = raft::allowed(&state, request.headers()) {
                return Ok(refused.into_response());
            }
            None
        }
        Access::Operator(scope) => {
            if state.plane == Plane::Client && state.verifier.is_none() {
                return Err(ApiError::new(StatusCode::FORBIDDEN, OPERATOR_ROUTES_CLOSED));
            }
            admit(&state, request.headers(), scope, None, Right::Admin)?
        }
        Access::Resource {
            bucket,
            stream,
            right,
        } => admit(&state, request.headers(), &bucket, stream.as_deref(), right)?,
    };
    // A fork also needs the read right on its source.
    if let Route::Stream(..) = &route
        && request.method() == Method::PUT
        && let Some(from) = request.headers().get(&crate::headers::FORKED_FROM)
        && let Ok(source) = stream_for_path(
            from.to_str().unwrap_or_default(),
            &state.config.default_bucket,
        )
    {
        auth::authorize(
            state.verifier.as_deref(),
            request.headers(),
            &source.id.bucket_id,
            Some(&source.name),
            Right::Read,
        )?;
    }
    if let Some(raft) = &state.raft
        && matches!(
            route,
            Route::Stream(..)
                | Route::Integrity(..)
                | Route::List { .. }
                | Route::Bucket(..)
                | Route::Extension(..)
                | Route::Subscriptions { .. }
        )
    {
        if raft.removed() {
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, REMOVED));
        }
        // A group this node does not hold (one that joined holds none
        // until the group's leader adds it): its empty state would answer
        // 404 for streams that exist, so a stream's request goes to a
        // member that holds the data (the group's leader first), at most
        // one hop (appends aside, below). A request needs its stream's group only: what crosses
        // groups (a fork's sources, a listing, the bucket routes, the
        // subscription registry) the engine asks of the members that
        // hold the other groups, and its commands for those groups go to
        // their leaders.
        let group = match &route {
            Route::Stream(named, _) | Route::Integrity(named) => {
                Some(state.engine.group_for(&named.id))
            }
            Route::Extension(extension) => Some(state.engine.group_for(&extension.placement())),
            _ => None,
        };
        let (group, held) = match group {
            Some(group) => (group, raft.holds(group)),
            None => (0, true),
        };
        // An append is the exception: this node proposes it, and its
        // group's proposer hands it to the leader as a log entry, batched
        // with the others as a follower's are — no second HTTP request,
        // and what it needs (the stream's state) is checked as it applies.
        let appends = matches!(route, Route::Stream(..)) && request.method() == Method::POST;
        let hops = crate::proxy::hops(request.headers());
        if !held && !appends {
            if hops == 0
                && let Some(to) = raft.forward_target(group)
            {
                return pass_on(&state, raft.node_id(), to, request).await;
            }
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, JOINING)
                .with_header(axum::http::header::RETRY_AFTER, "1"));
        }
        // A request passed on to a member that holds the group but no
        // longer leads it (the views that named it are a round old) goes
        // on to the leader, once: the member that passed it on has had
        // its writes answered by a leader, and reads them back from one.
        if hops == 1
            && !appends
            && let Some(to) = raft.leader_target(group)
        {
            return pass_on(&state, raft.node_id(), to, request).await;
        }
        // A read at an offset past this member's tail of the stream: the
        // client saw the stream further on elsewhere (its own append
        // through another member, a read there). This member follows the
        // group and has not applied that far yet — a follower hears of a
        // commit with the leader's next message — so the leader answers,
        // and the client never reads behind what it saw.
        if hops == 0
            && request.method() == Method::GET
            && let Route::Stream(named, layout) = &route
            && let Some(to) = raft.leader_target(group)
            && Box::pin(behind_offset(
                &state,
                group,
                named,
                *layout,
                request.uri().query(),
            ))
            .await
        {
            return pass_on(&state, raft.node_id(), to, request).await;
        }
    }
    let result = match route {
        Route::Preflight => Ok(crate::cors::preflight()),
        Route::Health => Ok(Box::pin(health(&state)).await),
        Route::Metrics => Ok(Box::pin(metrics_route(&state)).await),
        Route::Console(file) => crate::console::serve(request.method(), &file),
        Route::Raft(RaftRoute::Batch) => Ok(Box::pin(raft::batch(&state, request)).await),
        Route::Raft(RaftRoute::Segment) => Ok(Box::pin(raft::segment(&state, request)).await),
        Route::Raft(RaftRoute::View) => Ok(raft::view(&state)),
        Route::Raft(RaftRoute::Drain) => Ok(Box::pin(raft::drain(&state, request)).await),
        Route::Raft(RaftRoute::Remove) => Ok(Box::pin(raft::remove(&state, request)).await),
        Route::Raft(RaftRoute::Join) => Ok(Box::pin(raft::join(&state, request)).await),
        Route::Raft(RaftRoute::Ask(rest)) => Ok(Box::pin(raft::ask(&state, &rest, request)).await),
        Route::Raft(RaftRoute::Message(rest)) => {
            Ok(Box::pin(raft::message(&state, &rest, request)).await)
        }
        Route::Stream(named, layout) => {
            let (parts, body) = request.into_parts();
            let target = StreamRequest {
                id: named.id,
                name: named.name.clone(),
                layout,
                path: parts.uri.path().to_owned(),
                authority: parts.uri.authority().cloned(),
                subject: subject.clone(),
            };
            let query = parts.uri.query().map(str::to_owned);
            let writes = parts.method == Method::PUT || parts.method == Method::POST;
            // Only while subscriptions exist: an append pays nothing else.
            let subs = (writes && state.subs.active()).then(|| std::sync::Arc::clone(&state.subs));
            let result =
                stream::handle(state, target, parts.method, query, parts.headers, body).await;
            // A write on the mount may concern a subscription.
            if let Some(subs) = subs
                && layout == Layout::DurableStreams
                && result.as_ref().is_ok_and(|r| r.status().is_success())
            {
                subs.written(&named.name);
            }
            result
        }
        Route::Integrity(named) => {
            Box::pin(admin::integrity(&state, request.method(), named.id)).await
        }
        Route::List { bucket, query } => Box::pin(admin::list(&state, &bucket, &query)).await,
        Route::Operator { rest, .. } => {
            let (parts, body) = request.into_parts();
            Box::pin(admin::handle(&state, &parts.method, &rest, body)).await
        }
        Route::Bucket(bucket) => Box::pin(bucket_route(&state, request.method(), &bucket)).await,
        Route::Extension(extension) => {
            let (parts, body) = request.into_parts();
            Box::pin(extensions::handle(
                &state,
                extension,
                &parts.method,
                &parts.headers,
                body,
            ))
            .await
        }
        Route::Subscriptions { rest, .. } => {
            let (parts, body) = request.into_parts();
            let base = stream::base_url(&state.config, &parts.headers, parts.uri.authority());
            let subs = std::sync::Arc::clone(&state.subs);
            Ok(Box::pin(crate::subs::api::handle(
                &subs,
                &parts.method,
                &rest,
                &parts.headers,
                body,
                &state.bodies,
                base,
            ))
            .await)
        }
    };
    let mut response = match result {
        Ok(response) => response,
        Err(error) => error.into_response(),
    };
    if let Some(subject) = subject {
        response.extensions_mut().insert(auth::Subject(subject));
    }
    Ok(response)
}

/// Passes a request on to another member (`to`), counted; boxed, so the
/// proxy's future does not grow every request's.
async fn pass_on(
    state: &AppState,
    me: u64,
    to: (u64, String),
    request: Request,
) -> Result<Response, ApiError> {
    let long_poll = state.config.long_poll_timeout();
    state.metrics.passed_on();
    Box::pin(crate::proxy::forward(me, to, request, long_poll)).await
}

/// Authorizes a request (with authentication on) and admits its token
/// under the per-token rate limit; the token's subject, if any.
fn admit(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    bucket: &str,
    stream: Option<&str>,
    right: Right,
) -> Result<Option<String>, ApiError> {
    let subject = auth::authorize(state.verifier.as_deref(), headers, bucket, stream, right)?;
    if let Some(subject) = &subject {
        state.limits.admit(subject)?;
    }
    Ok(subject)
}

pub use crate::names::segments;

/// The stream a path names, as a client sends it in `Stream-Forked-From`:
/// `/v1/stream/{name}` (the default bucket, any name the mount takes) or
/// `/{bucket}/[{affinity}/]{stream}`; a query string is ignored.
pub fn stream_for_path(path: &str, default_bucket: &str) -> Result<Named, ApiError> {
    let path = path.split(['?', '#']).next().unwrap_or(path).trim();
    if let Some(name) = path.strip_prefix(DS_PREFIX) {
        return crate::names::mount_stream(default_bucket, name).map_err(|e| {
            ApiError::bad_request(format!("Stream-Forked-From: {}", e.message.trim_end()))
        });
    }
    let segs = segments(path)?;
    match segs.split_first() {
        Some((bucket, rest)) if bucket != "__strand" && !rest.is_empty() => stream_id(bucket, rest)
            .map(|id| Named {
                name: stream_name(&id),
                id,
            })
            .map_err(|_| ApiError::bad_request("Stream-Forked-From does not name a stream")),
        _ => Err(ApiError::bad_request(
            "Stream-Forked-From does not name a stream",
        )),
    }
}

pub(crate) fn stream_id(bucket: &str, rest: &[String]) -> Result<BucketStreamId, ApiError> {
    match rest {
        [stream] => Ok(BucketStreamId::new(bucket, stream.as_str())),
        [affinity, stream] => Ok(BucketStreamId::with_affinity(
            bucket,
            affinity.as_str(),
            stream.as_str(),
        )),
        _ => Err(ApiError::not_found("no such resource")),
    }
}

/// A stream's name for grant prefixes: its affinity path included.
pub(crate) fn stream_name(id: &BucketStreamId) -> String {
    match &id.affinity_key {
        Some(key) => format!("{key}/{}", id.stream_id),
        None => id.stream_id.clone(),
    }
}

async fn bucket_route(
    state: &AppState,
    method: &Method,
    bucket: &str,
) -> Result<Response, ApiError> {
    match *method {
        Method::PUT => {
            strand::validate_bucket_id(bucket)
                .map_err(|e| ApiError::bad_request(format!("bucket id {bucket:?}: {e}")))?;
            let responses = state
                .engine
                .apply_all(strand::StreamCommand::CreateBucket {
                    bucket_id: bucket.to_owned(),
                })
                .await?;
            let mut created = false;
            for response in &responses {
                match response {
                    strand::StreamResponse::BucketCreated { .. } => created = true,
                    strand::StreamResponse::BucketAlreadyExists { .. } => {}
                    other => return Err(ApiError::from_machine(other, Layout::Bucketed)),
                }
            }
            let status = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(status.into_response())
        }
        Method::HEAD | Method::GET => {
            if state.engine.bucket_exists(bucket).await? {
                Ok(StatusCode::OK.into_response())
            } else {
                Err(ApiError::not_found(format!("bucket '{bucket}' not found")))
            }
        }
        _ => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {method} is not allowed on a bucket"),
        )),
    }
}

/// An empty body, for handlers that ignore theirs.
pub fn empty() -> Body {
    Body::empty()
}

/// Whether a read's explicit offset (`query`'s `offset`) is past this
/// node's tail of the stream `named` in `group` (a missing stream, or
/// no explicit offset: not behind).
async fn behind_offset(
    state: &AppState,
    group: usize,
    named: &Named,
    layout: Layout,
    query: Option<&str>,
) -> bool {
    let Ok(crate::query::ReadQuery {
        offset: Some(text), ..
    }) = crate::query::ReadQuery::parse(query)
    else {
        return false;
    };
    let Ok(strand_engine::ReadFrom::Offset(offset) | strand_engine::ReadFrom::Within(offset)) =
        crate::live::read_from(Some(&text), layout)
    else {
        return false;
    };
    let id = named.id.clone();
    let tail = state
        .engine
        .query_group(group, move |m| m.head(&id).map(|h| h.tail_offset))
        .await;
    matches!(tail, Ok(Some(tail)) if tail < offset)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn segments_decode_and_refuse() {
        assert_eq!(segments("/a/b%20c/").unwrap(), ["a", "b c"]);
        assert!(segments("/a/%2e%2e/b").is_err());
        assert!(segments("/a/..").is_err());
        assert!(segments("/a/%00").is_err());
        assert!(segments("/a/%ff").is_err());
        assert!(segments("/a/%4").is_err());
    }

    /// The size of the future an async fn taking `(A, B)` returns.
    fn future_size<A, B, F: std::future::Future>(_: impl Fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// hyper moves a request's future into its connection and out again
    /// (a copy of its whole size each time), so the one `serve` returns
    /// stays small: routes other than an append box their handlers, and
    /// the state is one pointer. It was 15,016 bytes, and those copies
    /// took about 5 % of a durable node's CPU per 256 B append.
    #[test]
    fn the_request_future_stays_small() {
        assert_eq!(std::mem::size_of::<AppState>(), 16);
        let size = future_size(serve);
        assert!(size <= 6 * 1024, "serve's future is {size} bytes");
        let size = future_size(|state: AppState, request: Request| {
            route_request(state, request, Route::Preflight)
        });
        assert!(size <= 4 * 1024, "route_request's future is {size} bytes");
    }
}
