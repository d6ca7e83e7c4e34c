//! Routing: the Durable Streams mount `/v1/stream/{name}`, the bucketed
//! layout `/{bucket}/…`, and the server's own `/__strand/…` routes
//! (spec 08 §21–§22).

pub mod admin;
pub mod extensions;
pub mod stream;

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
use stream::StreamRequest;

/// The Durable Streams mount.
pub const DS_PREFIX: &str = "/v1/stream/";

/// The answer to an operator route on the client listener while
/// authentication is off.
pub const OPERATOR_ROUTES_CLOSED: &str = "the operator routes (/__strand/purge, /__strand/quota, /__strand/usage, /__strand/cold) are served only with authentication on, to a token with the admin right (--auth-secret-file or --auth-jwks-file), or on the admin listener (--admin-listen ADDR)";

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
/// `messages_per_request`); 503 while a durable group has no leader.
async fn health(state: &AppState) -> Response {
    let groups = state.engine.group_status();
    let durable = state.engine.is_replicated();
    let ready = groups.iter().all(|g| g.leader.is_some());
    let mut body = serde_json::json!({
        "status": if ready { "ok" } else { "no-leader" },
        "mode": if durable { "durable" } else { "memory" },
        "groups": groups,
    });
    if durable {
        let total = groups.iter().filter_map(|g| g.log).fold(
            strand_engine::LogStats::default(),
            strand_engine::LogStats::combined,
        );
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
        if let Some(network) = strand_raft::network_stats(&state.engine).await {
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

/// Whether a request may use the Raft routes: with a cluster token
/// configured it must carry it (401 without, 403 with another); without
/// one they are open only while client authentication is off (a cluster
/// with authentication needs the token, so an authenticated node without
/// one has no peers to hear from). A refusal is its status and message.
fn raft_allowed(
    state: &AppState,
    headers: &axum::http::HeaderMap,
) -> Result<(), (StatusCode, &'static str)> {
    match &state.cluster_token {
        Some(token) => match headers.get(strand_raft::CLUSTER_TOKEN_HEADER) {
            None => Err((
                StatusCode::UNAUTHORIZED,
                "the Raft routes need the cluster token (strand-cluster-token)\n",
            )),
            Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => Ok(()),
            Some(_) => Err((StatusCode::FORBIDDEN, "wrong cluster token\n")),
        },
        None if state.verifier.is_some() => Err((
            StatusCode::UNAUTHORIZED,
            "the Raft routes are closed: authentication is on and no --cluster-token-file is set\n",
        )),
        None => Ok(()),
    }
}

/// Compares two byte strings in time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `POST /__strand/raft/{group}/{kind}`: a peer's Raft message for one of
/// this node's groups, handed to the group's log as it is; 404 for a group
/// the node does not have (a node in memory has none).
async fn raft_message(state: &AppState, rest: &str, request: Request) -> Response {
    use axum::http::StatusCode;
    let Some((group, kind)) = rest.split_once('/') else {
        return (StatusCode::NOT_FOUND, "no such raft route\n").into_response();
    };
    // A group this node does not have is no route either (an in-memory
    // node has none): the log's "no replicated group" was a 500.
    let Some(group) = group
        .parse::<usize>()
        .ok()
        .filter(|&g| state.engine.is_replicated() && g < state.engine.group_count())
    else {
        return (StatusCode::NOT_FOUND, "no such group\n").into_response();
    };
    let kind = kind.to_owned();
    let body = match axum::body::to_bytes(request.into_body(), 256 << 20).await {
        Ok(b) => b.to_vec(),
        Err(e) => return (StatusCode::PAYLOAD_TOO_LARGE, format!("{e}\n")).into_response(),
    };
    match state.engine.log_message(group, &kind, body).await {
        Ok(answer) => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/msgpack")],
            answer,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

/// `POST /__strand/raft/batch`: a peer's Raft messages for several of
/// this node's groups at once (`strand_raft::serve_batch`): 200 with one
/// answer frame per message, each sent as soon as its group answers; 413 for a body over `strand_raft::MAX_BATCH_BODY`
/// or more than `strand_raft::MAX_BATCH_MESSAGES` messages, 400 for a
/// body that is not a batch.
async fn raft_batch(state: &AppState, request: Request) -> Response {
    let body = match axum::body::to_bytes(request.into_body(), strand_raft::MAX_BATCH_BODY).await {
        Ok(b) => b,
        Err(e) => return (StatusCode::PAYLOAD_TOO_LARGE, format!("{e}\n")).into_response(),
    };
    match strand_raft::serve_batch(&state.engine, &body) {
        Ok(answers) => {
            use futures_util::StreamExt;
            (
                StatusCode::OK,
                [(axum::http::header::CONTENT_TYPE, "application/msgpack")],
                Body::from_stream(answers.map(Ok::<_, std::convert::Infallible>)),
            )
                .into_response()
        }
        Err(e @ strand_raft::BatchRefused::TooMany(_)) => {
            (StatusCode::PAYLOAD_TOO_LARGE, format!("{e}\n")).into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

/// `POST /__strand/raft/segment`: the whole segment file (object bytes
/// and trailer, checked) of the object named by the body, for a peer
/// that lacks it (`strand_cold::ReplicaSegments`); 404 when this node
/// keeps no copy of its own or does not hold the object, 400 for a name
/// the store cannot hold, 503 for a file that cannot be read or is
/// damaged.
async fn raft_segment(state: &AppState, request: Request) -> Response {
    let Some(replica) = state.cold.as_ref().and_then(strand_cold::ColdTier::replica) else {
        return (StatusCode::NOT_FOUND, "this node keeps no segment files\n").into_response();
    };
    let body = match axum::body::to_bytes(request.into_body(), 4096).await {
        Ok(b) => b,
        Err(e) => return (StatusCode::PAYLOAD_TOO_LARGE, format!("{e}\n")).into_response(),
    };
    let Ok(name) = std::str::from_utf8(&body) else {
        return (StatusCode::BAD_REQUEST, "the object name is not UTF-8\n").into_response();
    };
    match replica.segment_file(name).await {
        Ok(Some(file)) => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
            file,
        )
            .into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "no such object here\n").into_response(),
        Err(e @ strand_cold::ColdError::InvalidName(_)) => {
            (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
        }
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

/// Answers one request: what [`router`]'s only handler does, and what the
/// server's connections call directly (no router in between: the routes
/// are matched here, so axum's path router, URL-parameter extraction and
/// handler adapters only cost instructions).
pub async fn serve(state: AppState, request: Request) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let uri = request.uri().clone();
    let origin = request.headers().get(axum::http::header::ORIGIN).cloned();
    let origins = std::sync::Arc::clone(&state.origins);
    let preflight = method == Method::OPTIONS;
    let mut response = if preflight {
        crate::cors::preflight()
    } else if uri.path() == "/__strand/health" && (method == Method::GET || method == Method::HEAD)
    {
        health(&state).await
    } else if let Some(rest) = uri.path().strip_prefix("/__strand/raft/")
        && method == Method::POST
        && state.plane == Plane::Client
    {
        match raft_allowed(&state, request.headers()) {
            Ok(()) if rest == "batch" => raft_batch(&state, request).await,
            Ok(()) if rest == "segment" => raft_segment(&state, request).await,
            Ok(()) => raft_message(&state, rest, request).await,
            Err(refused) => refused.into_response(),
        }
    } else {
        match route(state, request).await {
            Ok(response) => response,
            Err(error) => error.into_response(),
        }
    };
    crate::cors::add_headers(response.headers_mut(), &origins, origin.as_ref(), preflight);
    let status = response.status();
    let subject = response
        .extensions()
        .get::<auth::Subject>()
        .map_or("-", |s| s.0.as_str());
    if status.is_server_error() {
        tracing::warn!(%method, path = uri.path(), status = status.as_u16(), subject, "request failed");
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

/// Splits a raw path into percent-decoded segments, refusing what no
/// stream name may hold: non-UTF-8, NUL, `.` and `..` segments.
pub fn segments(path: &str) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::new();
    for raw in path.split('/').filter(|s| !s.is_empty()) {
        let decoded = percent_decode(raw)
            .ok_or_else(|| ApiError::bad_request("path is not valid percent-encoded UTF-8"))?;
        if decoded == "." || decoded == ".." || decoded.contains('\0') {
            return Err(ApiError::bad_request(
                "path segments may not be '.', '..' or hold NUL",
            ));
        }
        out.push(decoded);
    }
    Ok(out)
}

pub(crate) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

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

fn stream_id(bucket: &str, rest: &[String]) -> Result<BucketStreamId, ApiError> {
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

/// Whether a path is one of the operator routes under `/__strand/` (not
/// health, the Raft transport or a stream's integrity, which are not
/// operator routes).
fn is_operator_path(path: &str) -> bool {
    path.strip_prefix("/__strand/").is_some_and(|rest| {
        !rest.starts_with("integrity/") && !rest.starts_with("raft/") && rest != "health"
    })
}

/// The right a method needs on a stream or bucket.
fn right_for(method: &Method) -> Right {
    if method == Method::GET || method == Method::HEAD {
        Right::Read
    } else {
        Right::Write
    }
}

/// A stream's name for grant prefixes: its affinity path included.
pub(crate) fn stream_name(id: &BucketStreamId) -> String {
    match &id.affinity_key {
        Some(key) => format!("{key}/{}", id.stream_id),
        None => id.stream_id.clone(),
    }
}

/// The bucket and stream name an extension route concerns.
fn extension_scope(extension: &extensions::Extension) -> (String, String) {
    use extensions::Extension as E;
    match extension {
        E::AppendBatch(id)
        | E::Snapshot(id, _)
        | E::Retention(id, _)
        | E::Attrs(id)
        | E::Bootstrap(id) => (id.bucket_id.clone(), stream_name(id)),
        E::Transaction { bucket, affinity } => (bucket.clone(), format!("{affinity}/")),
    }
}

async fn route(state: AppState, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let authority = parts.uri.authority().cloned();
    let query = parts.uri.query().map(str::to_owned);
    let method = parts.method.clone();
    let headers = parts.headers;
    let verifier = state.verifier.clone();
    let limits = std::sync::Arc::clone(&state.limits);
    let authorize = |bucket: &str, stream: Option<&str>, right: Right| {
        let subject = auth::authorize(verifier.as_deref(), &headers, bucket, stream, right)?;
        if let Some(subject) = &subject {
            limits.admit(subject)?;
        }
        Ok::<_, ApiError>(subject)
    };
    if state.plane == Plane::Admin && !is_operator_path(&path) {
        return Err(ApiError::not_found(
            "the admin listener serves only the operator routes (/__strand/purge, /__strand/quota, /__strand/usage, /__strand/cold) and /__strand/health",
        ));
    }
    let (subject, result) = if let Some(name) = path.strip_prefix(DS_PREFIX) {
        let bucket = state.config.default_bucket.clone();
        let Named { id, name } = crate::names::mount_stream(&bucket, name)?;
        let subject = authorize(&bucket, Some(&name), right_for(&method))?;
        let target = StreamRequest {
            id,
            layout: Layout::DurableStreams,
            path,
            authority: authority.clone(),
            subject: subject.clone(),
        };
        (
            subject,
            stream::handle(state, target, method, query, headers, body).await,
        )
    } else {
        let segs = segments(&path)?;
        match segs.split_first() {
            Some((first, rest))
                if first == "__strand"
                    && rest.first().is_some_and(|k| k == "integrity")
                    && rest.len() > 2 =>
            {
                // `/__strand/integrity/{bucket}/[{affinity}/]{stream}`: a
                // read of that stream.
                let bucket = &rest[1];
                let id = stream_id(bucket, &rest[2..])?;
                let subject = authorize(bucket, Some(&stream_name(&id)), Right::Read)?;
                (subject, admin::integrity(&state, &method, id).await)
            }
            Some((first, rest)) if first == "__strand" => {
                let scope = match rest {
                    [_, bucket] => bucket.as_str(),
                    [kind] if kind == "cold" => "*",
                    _ => return Err(ApiError::not_found("no such admin route")),
                };
                if state.plane == Plane::Client && state.verifier.is_none() {
                    return Err(ApiError::new(StatusCode::FORBIDDEN, OPERATOR_ROUTES_CLOSED));
                }
                let subject = authorize(scope, None, Right::Admin)?;
                (subject, admin::handle(&state, &method, rest, body).await)
            }

            Some((bucket, [])) => {
                let subject = authorize(bucket, None, right_for(&method))?;
                (subject, bucket_route(&state, &method, bucket).await)
            }
            Some((bucket, rest)) => {
                if let Some(extension) = extensions::classify(bucket, rest) {
                    let (b, name) = extension_scope(&extension);
                    let subject = authorize(&b, Some(&name), right_for(&method))?;
                    let result =
                        extensions::handle(&state, extension, &method, &headers, body).await;
                    (subject, result)
                } else {
                    let id = stream_id(bucket, rest)?;
                    let subject = authorize(bucket, Some(&stream_name(&id)), right_for(&method))?;
                    let target = StreamRequest {
                        id,
                        layout: Layout::Bucketed,
                        path,
                        authority: authority.clone(),
                        subject: subject.clone(),
                    };
                    (
                        subject,
                        stream::handle(state, target, method, query, headers, body).await,
                    )
                }
            }
            None => return Err(ApiError::not_found("no such resource")),
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
}
