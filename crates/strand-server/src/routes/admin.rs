//! The admin plane under `/__strand/`: bucket quota, usage and purge
//! (spec 08 §22), the cold tier's status (`GET /__strand/cold`), and a
//! stream's integrity setsums (`GET /__strand/integrity/{bucket}/…`).

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use strand::{StreamCommand, StreamResponse};

use crate::body::read_limited;
use crate::errors::{ApiError, Layout};
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

fn json(status: StatusCode, value: &impl Serialize) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET /__strand/integrity/{bucket}/[{affinity}/]{stream}`: the stream's
/// integrity setsums as this node's machine holds them (spec 02 §5: one
/// item per contributing append; offsets are byte positions), so a client
/// can recompute them from the bytes it reads back and compare.
pub async fn integrity(
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

/// Serves `/__strand/{rest…}`.
pub async fn handle(
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
            let bytes = read_limited(body, 64 * 1024).await?;
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
            if responses.iter().all(StreamResponse::is_error)
                && let Some(first) = responses.first()
            {
                return Err(ApiError::from_machine(first, Layout::Bucketed));
            }
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        (&Method::GET, [kind, bucket]) if kind == "usage" => {
            match state.engine.bucket_usage(bucket).await? {
                Some(usage) => Ok(json(StatusCode::OK, &usage)),
                None => Err(ApiError::not_found(format!("bucket '{bucket}' not found"))),
            }
        }
        (&Method::DELETE, [kind, bucket]) if kind == "purge" => {
            let responses = state
                .engine
                .apply_all(StreamCommand::PurgeBucket {
                    bucket_id: bucket.clone(),
                })
                .await?;
            let mut report = PurgeReport {
                bucket_id: bucket.clone(),
                removed_streams: 0,
                pending_cold_gc_entries: 0,
            };
            for response in &responses {
                match response {
                    StreamResponse::BucketPurged {
                        removed_streams,
                        pending_cold_gc_entries,
                        ..
                    } => {
                        report.removed_streams += removed_streams;
                        report.pending_cold_gc_entries += pending_cold_gc_entries;
                    }
                    other => return Err(ApiError::from_machine(other, Layout::Bucketed)),
                }
            }
            Ok(json(StatusCode::OK, &report))
        }
        _ => Err(ApiError::not_found("no such admin route")),
    }
}
