//! The bucketed layout's extension routes (spec 08 §22), each one machine
//! command or query: `append-batch`, `$transaction`, visible snapshots,
//! retention, attrs and bootstrap.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::IntoResponse;
use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use strand::{BucketStreamId, ProducerRequest, StreamAttrs, StreamCommand, StreamResponse};
use strand_engine::ReadFrom;

use crate::errors::{ApiError, ApiResult, Layout};
use crate::headers as h;
use crate::offsets;

use crate::reply::json;
use crate::state::AppState;

/// An extension route on a stream (or, for transactions, an affinity
/// group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extension {
    /// `…/append-batch`.
    AppendBatch(BucketStreamId),
    /// `/{bucket}/{affinity}/$transaction`.
    Transaction {
        /// The bucket.
        bucket: String,
        /// The affinity key.
        affinity: String,
    },
    /// `…/snapshot` (the latest) or `…/snapshot/{offset}`.
    Snapshot(BucketStreamId, Option<String>),
    /// `…/retention/{offset}`.
    Retention(BucketStreamId, String),
    /// `…/attrs`.
    Attrs(BucketStreamId),
    /// `…/bootstrap`.
    Bootstrap(BucketStreamId),
}

impl Extension {
    /// The stream whose group the extension's request needs (a
    /// transaction's: any stream of its affinity group).
    pub(crate) fn placement(&self) -> BucketStreamId {
        match self {
            Self::AppendBatch(id)
            | Self::Snapshot(id, _)
            | Self::Retention(id, _)
            | Self::Attrs(id)
            | Self::Bootstrap(id) => id.clone(),
            Self::Transaction { bucket, affinity } => {
                BucketStreamId::with_affinity(bucket, affinity, "placement")
            }
        }
    }
}

fn id_of(bucket: &str, parts: &[String]) -> Option<BucketStreamId> {
    match parts {
        [stream] => Some(BucketStreamId::new(bucket, stream.as_str())),
        [affinity, stream] => Some(BucketStreamId::with_affinity(
            bucket,
            affinity.as_str(),
            stream.as_str(),
        )),
        _ => None,
    }
}

/// Recognises an extension route among the segments after the bucket.
/// The route names are reserved stream ids under an affinity path (spec
/// 01 §16.2), so `/{bucket}/{x}/attrs` can only mean the attrs of `x`.
pub fn classify(bucket: &str, rest: &[String]) -> Option<Extension> {
    let (last, before) = rest.split_last()?;
    match last.as_str() {
        "append-batch" => id_of(bucket, before).map(Extension::AppendBatch),
        "$transaction" => match before {
            [affinity] => Some(Extension::Transaction {
                bucket: bucket.to_owned(),
                affinity: affinity.clone(),
            }),
            _ => None,
        },
        "snapshot" => id_of(bucket, before).map(|id| Extension::Snapshot(id, None)),
        "attrs" => id_of(bucket, before).map(Extension::Attrs),
        "bootstrap" => id_of(bucket, before).map(Extension::Bootstrap),
        _ => {
            let (kind, stream) = before.split_last()?;
            let id = id_of(bucket, stream)?;
            match kind.as_str() {
                "snapshot" => Some(Extension::Snapshot(id, Some(last.clone()))),
                "retention" => Some(Extension::Retention(id, last.clone())),
                _ => None,
            }
        }
    }
}

/// An offset in a path: a rendered offset (`digits_digits`) or plain
/// decimal digits.
fn path_offset(text: &str) -> Result<u64, ApiError> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map_err(|_| ApiError::bad_request(format!("offset {text:?} is too large")));
    }
    offsets::parse_position(text)
        .map_err(|_| ApiError::bad_request(format!("invalid offset {text:?}")))
}

fn not_allowed(method: &Method) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method {method} is not allowed here"),
    )
}

fn machine(response: &StreamResponse) -> ApiError {
    ApiError::from_machine(response, Layout::Bucketed)
}

/// Serves an extension route.
pub async fn handle(
    state: &AppState,
    extension: Extension,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult {
    match extension {
        Extension::AppendBatch(id) if method == Method::POST => {
            append_batch(state, id, headers, body).await
        }
        Extension::Transaction { bucket, affinity } if method == Method::POST => {
            transaction(state, &bucket, &affinity, body).await
        }
        Extension::Snapshot(id, offset) => snapshot(state, id, offset, method, headers, body).await,
        Extension::Retention(id, offset) if method == Method::PUT => {
            let retained_offset = path_offset(&offset)?;
            let now_ms = state.engine.now_ms();
            let response = state
                .engine
                .apply(
                    &id,
                    StreamCommand::AdvanceRetention {
                        stream_id: id.clone(),
                        retained_offset,
                        now_ms,
                    },
                )
                .await?;
            match response {
                StreamResponse::RetentionAdvanced {
                    retained_offset,
                    record_range,
                } => Ok(json(
                    StatusCode::OK,
                    &serde_json::json!({
                        "retained_offset": offsets::render(retained_offset),
                        "record_range": record_range,
                    }),
                )),
                other => Err(machine(&other)),
            }
        }
        Extension::Attrs(id) => attrs(state, id, method, body).await,
        Extension::Bootstrap(id) if method == Method::GET => bootstrap(state, id).await,
        _ => Err(not_allowed(method)),
    }
}

/// Splits an `append-batch` body: repeated big-endian u32 length, then
/// that many payload bytes.
pub fn split_frames(body: &Bytes) -> Result<Vec<Bytes>, ApiError> {
    let mut frames = Vec::new();
    let mut at = 0usize;
    while at < body.len() {
        let Some(len) = body.get(at..at + 4) else {
            return Err(ApiError::bad_request(
                "append-batch body ends inside a frame length",
            ));
        };
        let len = usize::try_from(u32::from_be_bytes([len[0], len[1], len[2], len[3]]))
            .map_err(|_| ApiError::bad_request("frame too large"))?;
        let start = at + 4;
        let end = start
            .checked_add(len)
            .filter(|e| *e <= body.len())
            .ok_or_else(|| ApiError::bad_request("append-batch body ends inside a frame"))?;
        frames.push(body.slice(start..end));
        at = end;
    }
    if frames.is_empty() {
        return Err(ApiError::bad_request("append-batch body holds no frame"));
    }
    Ok(frames)
}

#[derive(Serialize)]
struct FrameResult {
    offset: String,
    next_offset: String,
}

async fn append_batch(
    state: &AppState,
    id: BucketStreamId,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult {
    let producer = h::producer(headers).map_err(ApiError::bad_request)?;
    let content_type = h::single(headers, &header::CONTENT_TYPE)
        .map_err(ApiError::bad_request)?
        .map(str::to_owned);
    let minimal = h::text(headers, &h::PREFER)
        .map_err(ApiError::bad_request)?
        .is_some_and(|p| {
            p.split(',')
                .any(|x| x.trim().eq_ignore_ascii_case("return=minimal"))
        });
    let (body, _lease) = state.bodies.read(body, state.config.max_body_bytes).await?;
    let frames = split_frames(&body)?;
    let _admission = state.admit(&id, body.len()).await?;
    let lengths: Vec<u64> = frames
        .iter()
        .map(|f| u64::try_from(f.len()).unwrap_or(u64::MAX))
        .collect();
    let now_ms = state.engine.now_ms();
    let response = state
        .engine
        .apply(
            &id,
            StreamCommand::AppendBatch {
                stream_id: id.clone(),
                content_type,
                payloads: frames,
                producer,
                now_ms,
            },
        )
        .await?;
    let StreamResponse::Appended {
        next_offset,
        closed,
        deduplicated,
        ..
    } = response
    else {
        return Err(machine(&response));
    };
    let mut out = if minimal {
        StatusCode::NO_CONTENT.into_response()
    } else {
        // The frames landed back to back, ending at `next_offset`.
        let total: u64 = lengths.iter().sum();
        let mut at = next_offset.saturating_sub(total);
        let results: Vec<FrameResult> = lengths
            .iter()
            .map(|len| {
                let r = FrameResult {
                    offset: offsets::render(at),
                    next_offset: offsets::render(at + len),
                };
                at += len;
                r
            })
            .collect();
        json(StatusCode::OK, &results)
    };
    let hs = out.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&offsets::render(next_offset)) {
        hs.insert(h::NEXT_OFFSET, v);
    }
    if closed {
        hs.insert(h::CLOSED, HeaderValue::from_static("true"));
    }
    if deduplicated {
        hs.insert(h::DEDUPLICATED, HeaderValue::from_static("true"));
    }
    Ok(out)
}

/// One append of a `$transaction` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TransactionAppend {
    /// The stream id within the affinity group.
    stream: String,
    /// The payload's content type.
    content_type: String,
    /// The payload as text…
    #[serde(default)]
    body: Option<String>,
    /// …or as standard base64.
    #[serde(default)]
    body_base64: Option<String>,
    /// A stream-sequence token.
    #[serde(default)]
    stream_seq: Option<String>,
    /// An idempotent producer.
    #[serde(default)]
    producer: Option<ProducerRequest>,
}

async fn transaction(state: &AppState, bucket: &str, affinity: &str, body: Body) -> ApiResult {
    let (bytes, _lease) = state.bodies.read(body, state.config.max_body_bytes).await?;
    let appends: Vec<TransactionAppend> = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("invalid $transaction body: {e}")))?;
    if appends.is_empty() {
        return Err(ApiError::bad_request(
            "a transaction needs at least one append",
        ));
    }
    let now_ms = state.engine.now_ms();
    let mut commands = Vec::with_capacity(appends.len());
    let mut ids = Vec::with_capacity(appends.len());
    for a in appends {
        let payload = match (a.body, a.body_base64) {
            (Some(text), None) => Bytes::from(text),
            (None, Some(b64)) => Bytes::from(
                base64::engine::general_purpose::STANDARD
                    .decode(b64.as_bytes())
                    .map_err(|e| ApiError::bad_request(format!("invalid body_base64: {e}")))?,
            ),
            _ => {
                return Err(ApiError::bad_request(
                    "each append needs exactly one of body, body_base64",
                ));
            }
        };
        let id = BucketStreamId::with_affinity(bucket, affinity, a.stream.as_str());
        ids.push(a.stream);
        commands.push(StreamCommand::Append {
            stream_id: id,
            content_type: Some(a.content_type),
            payload,
            close_after: false,
            stream_seq: a.stream_seq,
            producer: a.producer,
            now_ms,
            record_match: None,
        });
    }
    let placement = Extension::Transaction {
        bucket: bucket.to_owned(),
        affinity: affinity.to_owned(),
    }
    .placement();
    let _admission = state.admit(&placement, bytes.len()).await?;
    let outcome = state.engine.transaction(&placement, commands).await?;
    let responses = outcome.map_err(|e| machine(&e))?;
    let results: Vec<serde_json::Value> = ids
        .iter()
        .zip(&responses)
        .map(|(stream, r)| match r {
            StreamResponse::Appended {
                offset,
                next_offset,
                deduplicated,
                ..
            } => serde_json::json!({
                "stream": stream,
                "offset": offsets::render(*offset),
                "next_offset": offsets::render(*next_offset),
                "deduplicated": deduplicated,
            }),
            other => serde_json::json!({ "stream": stream, "response": other }),
        })
        .collect();
    Ok(json(StatusCode::OK, &results))
}

async fn snapshot(
    state: &AppState,
    id: BucketStreamId,
    offset: Option<String>,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult {
    let offset = offset.as_deref().map(path_offset).transpose()?;
    match (method, offset) {
        (&Method::PUT, Some(snapshot_offset)) => {
            let content_type = h::single(headers, &header::CONTENT_TYPE)
                .map_err(ApiError::bad_request)?
                .unwrap_or("application/octet-stream")
                .to_owned();
            let expected_digest = h::single(headers, &h::SNAPSHOT_MATCH)
                .map_err(ApiError::bad_request)?
                .map(str::to_owned);
            let (payload, _lease) = state.bodies.read(body, state.config.max_body_bytes).await?;
            let now_ms = state.engine.now_ms();
            let response = state
                .engine
                .apply(
                    &id,
                    StreamCommand::PublishSnapshot {
                        stream_id: id.clone(),
                        snapshot_offset,
                        content_type,
                        payload,
                        expected_digest,
                        now_ms,
                    },
                )
                .await?;
            match response {
                StreamResponse::SnapshotPublished {
                    snapshot_offset,
                    snapshot_digest,
                    record_range,
                } => Ok(json(
                    StatusCode::CREATED,
                    &serde_json::json!({
                        "snapshot_offset": offsets::render(snapshot_offset),
                        "snapshot_digest": snapshot_digest,
                        "record_range": record_range,
                    }),
                )),
                other => Err(machine(&other)),
            }
        }
        (&Method::GET, which) => {
            let query_id = id.clone();
            let found = state
                .engine
                .query(&id, move |m| match which {
                    None => m.latest_snapshot(&query_id).and_then(|s| {
                        s.ok_or_else(|| {
                            StreamResponse::error(
                                strand::StreamErrorCode::SnapshotNotFound,
                                "the stream has no visible snapshot",
                            )
                        })
                    }),
                    Some(at) => m.read_snapshot(&query_id, at),
                })
                .await?
                .map_err(|e| machine(&e))?;
            let mut out = (StatusCode::OK, Bytes::from(found.payload)).into_response();
            let hs = out.headers_mut();
            for (name, value) in [
                (header::CONTENT_TYPE, found.content_type),
                (h::SNAPSHOT_OFFSET, offsets::render(found.offset)),
                (h::SNAPSHOT_DIGEST, found.digest),
            ] {
                if let Ok(v) = HeaderValue::from_str(&value) {
                    hs.insert(name, v);
                }
            }
            Ok(out)
        }
        (&Method::DELETE, Some(at)) => {
            let query_id = id.clone();
            let response = state
                .engine
                .query(&id, move |m| m.delete_snapshot(&query_id, at))
                .await?;
            // The machine never deletes: the latest snapshot is a conflict,
            // any other offset holds none.
            Err(machine(&response))
        }
        _ => Err(not_allowed(method)),
    }
}

async fn attrs(state: &AppState, id: BucketStreamId, method: &Method, body: Body) -> ApiResult {
    match *method {
        Method::GET => {
            let query_id = id.clone();
            let found = state
                .engine
                .query(&id, move |m| {
                    m.head(&query_id)
                        .map(|_| m.stream_attrs(&query_id).cloned().unwrap_or_default())
                })
                .await?;
            match found {
                Some(attrs) => Ok(json(StatusCode::OK, &attrs)),
                None => Err(ApiError::not_found(format!("stream '{id}' not found"))),
            }
        }
        Method::PUT => {
            let (bytes, _lease) = state.bodies.read(body, state.config.max_body_bytes).await?;
            let attrs: Option<StreamAttrs> = if bytes.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                Some(
                    serde_json::from_slice(&bytes)
                        .map_err(|e| ApiError::bad_request(format!("invalid attributes: {e}")))?,
                )
            };
            // A hashed stream of the mount keeps its name (listings show it).
            let query_id = id.clone();
            let kept = state
                .engine
                .query(&id, move |m| {
                    crate::names::kept_name(&query_id, m.stream_attrs(&query_id)).map(str::to_owned)
                })
                .await?;
            let attrs = match kept {
                Some(name) => crate::names::with_name(&id, &name, attrs),
                None => attrs,
            };
            let now_ms = state.engine.now_ms();
            let response = state
                .engine
                .apply(
                    &id,
                    StreamCommand::UpdateStreamAttrs {
                        stream_id: id.clone(),
                        attrs,
                        now_ms,
                    },
                )
                .await?;
            match response {
                StreamResponse::AttrsUpdated { changed } => Ok(json(
                    StatusCode::OK,
                    &serde_json::json!({ "changed": changed }),
                )),
                other => Err(machine(&other)),
            }
        }
        _ => Err(not_allowed(method)),
    }
}

/// The bootstrap plan as `multipart/mixed`: the visible snapshot part (if
/// any), then one part per message record after it.
async fn bootstrap(state: &AppState, id: BucketStreamId) -> ApiResult {
    let query_id = id.clone();
    let plan = state
        .engine
        .query(&id, move |m| m.bootstrap_plan(&query_id))
        .await?
        .map_err(|e| machine(&e))?;
    let from = plan.snapshot.as_ref().map_or(0, |s| s.offset);
    let span = usize::try_from(plan.next_offset.saturating_sub(from)).unwrap_or(usize::MAX);
    if span > state.config.read_page_bytes() {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the updates after the snapshot ({span} bytes) exceed one read page; \
                 publish a newer snapshot or read the stream"
            ),
        ));
    }
    let read = crate::live::read_outcome(state, &id, ReadFrom::Offset(from), span)
        .await?
        .map_err(|e| match (e.error_code(), &e) {
            (
                Some(strand::StreamErrorCode::InvalidColdFlush),
                StreamResponse::Error { message, .. },
            ) if state.cold.is_some() => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message.clone())
                    .with_header(header::RETRY_AFTER, "1")
            }
            (Some(strand::StreamErrorCode::InvalidColdFlush), _) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "part of this stream is in the cold tier, which this server does not serve \
                 (start it with --cold-dir or --cold-url)",
            ),
            _ => machine(&e),
        })?;
    let boundary = format!("strand-bootstrap-{}", offsets::render(plan.next_offset));
    let mut out = BytesMut::new();
    let part = |out: &mut BytesMut, content_type: &str, extra: &str, bytes: &[u8]| {
        out.put_slice(
            format!("--{boundary}\r\nContent-Type: {content_type}\r\n{extra}\r\n").as_bytes(),
        );
        out.put_slice(bytes);
        out.put_slice(b"\r\n");
    };
    if let Some(s) = &plan.snapshot {
        let extra = format!(
            "Stream-Snapshot-Offset: {}\r\nStream-Snapshot-Digest: {}\r\n",
            offsets::render(s.offset),
            s.digest
        );
        part(&mut out, &s.content_type, &extra, &s.payload);
    }
    let mut bytes = BytesMut::with_capacity(span);
    for slice in &read.slices {
        bytes.put_slice(slice);
    }
    for record in &plan.updates {
        let start = usize::try_from(record.start_offset.saturating_sub(from)).unwrap_or(usize::MAX);
        let end = usize::try_from(record.end_offset.saturating_sub(from)).unwrap_or(usize::MAX);
        let Some(slice) = bytes.get(start..end) else {
            continue;
        };
        let extra = format!(
            "Stream-Offset: {}\r\nStream-Next-Offset: {}\r\n",
            offsets::render(record.start_offset),
            offsets::render(record.end_offset)
        );
        part(&mut out, &plan.content_type, &extra, slice);
    }
    out.put_slice(format!("--{boundary}--\r\n").as_bytes());
    let mut response = (StatusCode::OK, out.freeze()).into_response();
    let hs = response.headers_mut();
    let content_type = format!("multipart/mixed; boundary={boundary}");
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (h::NEXT_OFFSET, offsets::render(plan.next_offset)),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            hs.insert(name, v);
        }
    }
    if plan.up_to_date {
        hs.insert(h::UP_TO_DATE, HeaderValue::from_static("true"));
    }
    if plan.closed {
        hs.insert(h::CLOSED, HeaderValue::from_static("true"));
    }
    Ok(response)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn segs(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn routes_are_recognised() {
        let b = "acme";
        assert_eq!(
            classify(b, &segs(&["s", "append-batch"])),
            Some(Extension::AppendBatch(BucketStreamId::new(b, "s")))
        );
        assert_eq!(
            classify(b, &segs(&["k", "s", "snapshot", "12"])),
            Some(Extension::Snapshot(
                BucketStreamId::with_affinity(b, "k", "s"),
                Some("12".into())
            ))
        );
        assert_eq!(
            classify(b, &segs(&["k", "$transaction"])),
            Some(Extension::Transaction {
                bucket: b.into(),
                affinity: "k".into()
            })
        );
        assert_eq!(classify(b, &segs(&["s"])), None);
        assert_eq!(classify(b, &segs(&["k", "s"])), None);
        assert_eq!(classify(b, &segs(&["a", "b", "c", "attrs"])), None);
    }

    #[test]
    fn frames_split_and_refuse() {
        let body = Bytes::from_static(b"\0\0\0\x02ab\0\0\0\x01c");
        assert_eq!(
            split_frames(&body).unwrap(),
            [Bytes::from_static(b"ab"), Bytes::from_static(b"c")]
        );
        assert!(split_frames(&Bytes::from_static(b"\0\0\0\x05ab")).is_err());
        assert!(split_frames(&Bytes::from_static(b"\0\0")).is_err());
        assert!(split_frames(&Bytes::new()).is_err());
    }
}
