//! The admin plane under `/__strand/`: bucket quota, usage and purge
//! (spec 08 §22), the cold tier's status (`GET /__strand/cold`), and a
//! stream's integrity setsums (`GET /__strand/integrity/{bucket}/…`).

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use strand::{StreamCommand, StreamErrorCode, StreamResponse};

use crate::errors::{ApiError, Layout};
use crate::reply::json;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuotaBody {
    #[serde(default)]
    max_streams: Option<u64>,
    #[serde(default)]
    max_retained_bytes: Option<u64>,
}

#[derive(Debug, Serialize)]
struct PurgeReport {
    bucket_id: String,
    removed_streams: u64,
    pending_cold_gc_entries: u64,
}

/// `GET /__strand/integrity/{bucket}/[{affinity}/]{stream}`: the stream's
/// integrity setsums as this node's machine holds them (spec 02 §5: one
/// item per contributing append; offsets are byte positions), so a client
/// can recompute them from the bytes it reads back and compare.
pub(super) async fn integrity(
    state: &AppState,
    method: &Method,
    id: strand::BucketStreamId,
) -> Result<Response, ApiError> {
    if method != Method::GET && method != Method::HEAD {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {method} is not allowed here"),
        ));
    }
    let query_id = id.clone();
    match state
        .engine
        .query(&id, move |machine| machine.integrity_snapshot(&query_id))
        .await?
    {
        Ok(snapshot) => Ok(json(StatusCode::OK, &snapshot)),
        Err(response) => Err(ApiError::from_machine(&response, Layout::Bucketed)),
    }
}

/// `GET /__strand/streams/{bucket}?prefix=P&after=C&limit=N`: a page of
/// the bucket's streams whose names start with `P`, as this node's
/// machines hold them (`crate::listing`). 404 for a bucket no group knows
/// and for the server's own bucket.
pub(super) async fn list(
    state: &AppState,
    bucket: &str,
    query: &crate::listing::ListQuery,
) -> Result<Response, ApiError> {
    let missing = || ApiError::not_found(format!("bucket {bucket:?} not found"));
    if bucket == crate::subs::SYSTEM_BUCKET || strand::validate_bucket_id(bucket).is_err() {
        return Err(missing());
    }
    if bucket != state.config.default_bucket && !state.engine.bucket_exists(bucket).await? {
        return Err(missing());
    }
    let page =
        crate::listing::page(&state.engine, &state.config.default_bucket, bucket, query).await?;
    Ok(json(
        StatusCode::OK,
        &crate::listing::to_json(bucket, bucket == state.config.default_bucket, query, &page),
    ))
}

/// Refuses a bucket id the machine would refuse, before a command goes to
/// any group.
fn valid_bucket(bucket: &str) -> Result<(), ApiError> {
    strand::validate_bucket_id(bucket)
        .map_err(|e| ApiError::bad_request(format!("bucket id {bucket:?}: {e}")))
}

/// `DELETE /__strand/purge/{bucket}`: removes every stream of the bucket
/// and fences its id for good, in every group — also in the groups where
/// the bucket never had a stream, so no later create anywhere revives it.
/// 404 (nothing changed) when no group knows the bucket; 409 (nothing
/// changed) for the bucket behind the protocol mount, whose fence would
/// refuse every later create under `/v1/stream/` (docs/profiles.md).
async fn purge(state: &AppState, bucket: &str) -> Result<Response, ApiError> {
    valid_bucket(bucket)?;
    if bucket == state.config.default_bucket {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "bucket '{bucket}' holds the streams of the protocol mount (/v1/stream/): \
                 purging it would erase its id for good and refuse every later create there; \
                 delete its streams one by one instead"
            ),
        ));
    }
    let purge = StreamCommand::PurgeBucket {
        bucket_id: bucket.to_owned(),
    };
    let responses = state.engine.apply_all(purge.clone()).await?;
    let not_found = |r: &StreamResponse| {
        matches!(
            r,
            StreamResponse::Error {
                code: StreamErrorCode::BucketNotFound,
                ..
            }
        )
    };
    if responses.iter().all(not_found)
        && let Some(first) = responses.first()
    {
        return Err(ApiError::from_machine(first, Layout::Bucketed));
    }
    let mut report = PurgeReport {
        bucket_id: bucket.to_owned(),
        removed_streams: 0,
        pending_cold_gc_entries: 0,
    };
    for (group, response) in responses.iter().enumerate() {
        let response = if not_found(response) {
            // The bucket exists elsewhere: fence it here too. Creating it
            // first lets the purge take (the corrected profile refuses to
            // purge a bucket a group never knew).
            let create = StreamCommand::CreateBucket {
                bucket_id: bucket.to_owned(),
            };
            let created = state
                .engine
                .apply_in_group(group, create)
                .await
                .map_err(|e| partial(group, &report, &e))?;
            if created.is_error() {
                return Err(ApiError::from_machine(&created, Layout::Bucketed));
            }
            state
                .engine
                .apply_in_group(group, purge.clone())
                .await
                .map_err(|e| partial(group, &report, &e))?
        } else {
            response.clone()
        };
        match response {
            StreamResponse::BucketPurged {
                removed_streams,
                pending_cold_gc_entries,
                ..
            } => {
                report.removed_streams += removed_streams;
                report.pending_cold_gc_entries += pending_cold_gc_entries;
            }
            other => return Err(ApiError::from_machine(&other, Layout::Bucketed)),
        }
    }
    Ok(json(StatusCode::OK, &report))
}

/// A purge that stopped at `group` while fencing the groups that did not
/// know the bucket: 503, saying how far it went (repeating it finishes).
fn partial(group: usize, report: &PurgeReport, error: &strand_engine::EngineError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "bucket '{}' was purged in some groups ({} streams removed) but group {group} did not \
             take the purge ({error}); repeat the request to finish it",
            report.bucket_id, report.removed_streams
        ),
    )
    .with_header(header::RETRY_AFTER, "1")
}

/// How long `GET /__strand/cluster` waits for each peer's view.
const PEER_VIEW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /__strand/cluster`: the cluster as this node sees it
/// ([`strand_raft::ClusterStatus`]): every member (`up` when it answered
/// this node for its view, `down` otherwise), every group's voters,
/// learners, leader and term, each replica's applied index and lag, and
/// the moves under way. A node without peers is a cluster of one (`url`:
/// its client listener's); a node in memory answers the same shape for
/// its groups, each with this node as its only voter.
async fn cluster(state: &AppState) -> Response {
    let url = state.client_url.as_deref().map(str::to_owned);
    let status = match &state.raft {
        Some(raft) => raft.cluster_status(url, PEER_VIEW_TIMEOUT).await,
        None => {
            let me = state.config.node_id;
            // No log: no term and no indexes.
            let groups = (0..state.engine.group_count())
                .map(|group| strand_raft::GroupView {
                    group,
                    voters: vec![me],
                    joint: Vec::new(),
                    learners: Vec::new(),
                    leader: Some(me),
                    term: 0,
                    applied_index: None,
                    last_log_index: None,
                    membership_index: None,
                    matched: std::collections::BTreeMap::new(),
                })
                .collect();
            let view = strand_raft::NodeView {
                node: me,
                draining: false,
                removed: false,
                leaving: false,
                replication_factor: None,
                moves: Vec::new(),
                groups,
            };
            strand_raft::ClusterStatus::assemble(
                me,
                &url.map(|url| (me, url)).into_iter().collect(),
                &[(me, Ok(view))],
            )
        }
    };
    json(StatusCode::OK, &status)
}

/// `POST /__strand/cluster/drain/{node}` and `…/undrain/{node}`: starts
/// or ends a member's drain (it hands off every leadership it holds, one
/// per balancing round, and takes none), on this node or asked of the
/// member; 204 once the member took it (it does not wait for the
/// leaderships to move: `GET /__strand/cluster` shows them), 404 for a
/// node that is not a member or a node without Raft, 409 on a node
/// without peers; 503 when the member did not answer.
async fn drain(state: &AppState, draining: bool, node: &str) -> Result<Response, ApiError> {
    let Some(raft) = &state.raft else {
        return Err(ApiError::not_found(
            "this node runs no Raft groups: there is nothing to drain",
        ));
    };
    if !raft.has_peers() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "this node has no peers (--peer): it leads every group and has no one to hand \
             a leadership to",
        ));
    }
    let Ok(id) = node.parse::<u64>() else {
        return Err(ApiError::bad_request(format!("{node:?} is not a node id")));
    };
    if !raft.members().contains(&id) {
        return Err(ApiError::not_found(format!("node {id} is not a member")));
    }
    raft.drain(id, draining, PEER_VIEW_TIMEOUT)
        .await
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// How long a removal waits for the member's leaderships to move off it.
const REMOVE_DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// `POST /__strand/cluster/remove/{node}`: takes a member out of the
/// cluster (`strand_raft::RaftNode::remove`: drained and its votes moved
/// first while it answers, then out of group 0's membership; every
/// group's leader drops what is left of it). 204 once group 0 no longer
/// holds it (or it was removed already); 404 for a node that is not a
/// member or a node without Raft; 409 on a node without peers or for the
/// last member; 503 when the change cannot be made now (no leader of
/// group 0, or its votes still moving after 30 s).
async fn remove(state: &AppState, node: &str) -> Result<Response, ApiError> {
    let Some(raft) = &state.raft else {
        return Err(ApiError::not_found(
            "this node runs no Raft groups: there is no member to remove",
        ));
    };
    let Ok(id) = node.parse::<u64>() else {
        return Err(ApiError::bad_request(format!("{node:?} is not a node id")));
    };
    match raft.remove(id, REMOVE_DRAIN_WAIT).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT.into_response()),
        Err(e @ strand_raft::RemoveError::NotMember(_)) => Err(ApiError::not_found(e.to_string())),
        Err(
            e @ (strand_raft::RemoveError::NotClustered | strand_raft::RemoveError::LastMember(_)),
        ) => Err(ApiError::new(StatusCode::CONFLICT, e.to_string())),
        Err(e) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            e.to_string(),
        )),
    }
}

/// Serves `/__strand/{rest…}`.
pub(super) async fn handle(
    state: &AppState,
    method: &Method,
    rest: &[String],
    body: Body,
) -> Result<Response, ApiError> {
    match (method, rest) {
        (&Method::GET, [kind]) if kind == "cold" => match &state.cold {
            Some(cold) => Ok(json(StatusCode::OK, &cold.report())),
            None => Err(ApiError::not_found(
                "no cold tier is configured (--cold-dir or --cold-url)",
            )),
        },
        (&Method::PUT, [kind, bucket]) if kind == "quota" => {
            valid_bucket(bucket)?;
            let (bytes, _lease) = state.bodies.read(body, 64 * 1024).await?;
            let quota: QuotaBody = serde_json::from_slice(&bytes)
                .map_err(|e| ApiError::bad_request(format!("invalid quota body: {e}")))?;
            let responses = state
                .engine
                .apply_all(StreamCommand::SetBucketQuota {
                    bucket_id: bucket.clone(),
                    max_streams: quota.max_streams,
                    max_retained_bytes: quota.max_retained_bytes,
                })
                .await?;
            // The machine refuses a quota only for a bad or erased bucket,
            // alike in every group (a purge fences all of them).
            if let Some(error) = responses.iter().find(|r| r.is_error()) {
                return Err(ApiError::from_machine(error, Layout::Bucketed));
            }
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        (&Method::GET, [kind, bucket]) if kind == "usage" => {
            match state.engine.bucket_usage(bucket).await? {
                Some(usage) => Ok(json(StatusCode::OK, &usage)),
                None => Err(ApiError::not_found(format!("bucket '{bucket}' not found"))),
            }
        }
        (&Method::DELETE, [kind, bucket]) if kind == "purge" => purge(state, bucket).await,
        (&Method::GET, [kind]) if kind == "cluster" => Ok(cluster(state).await),
        (&Method::POST, [kind, action, node]) if kind == "cluster" && action == "remove" => {
            remove(state, node).await
        }
        (&Method::POST, [kind, action, node]) if kind == "cluster" => {
            drain(state, action == "drain", node).await
        }
        _ => Err(ApiError::not_found("no such admin route")),
    }
}
