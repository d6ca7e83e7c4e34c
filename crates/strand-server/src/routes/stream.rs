//! The stream resource: create (PUT), append and close (POST), metadata
//! (HEAD), delete (DELETE) and reads (GET, with `live` handed to
//! [`crate::live`]). Shared by the Durable Streams mount and the bucketed
//! layout.

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::IntoResponse;
use bytes::Bytes;
use strand::{StreamCommand, StreamMetadata, StreamResponse, StreamStatus};
use strand_engine::{ReadFrom, WriteRequest};

use crate::errors::{ApiError, ApiResult};
use crate::headers::{self as h, parse_decimal, parse_rfc3339_ms};
use crate::json_mode::{self, JsonError};
use crate::live::{self, read_from};
use crate::offsets;
use crate::query::ReadQuery;
use crate::reply::set_header;
use crate::state::AppState;
use crate::target::StreamRequest;
use crate::time::render_rfc3339_ms;

/// The default content type of a stream created without one.
pub(super) const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

/// Dispatches by method.
pub(super) async fn handle(
    state: AppState,
    target: StreamRequest,
    method: Method,
    query: Option<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult {
    match method {
        Method::PUT => Box::pin(create(&state, &target, &headers, body)).await,
        Method::POST => append(&state, &target, &headers, body).await,
        Method::GET => {
            let query = ReadQuery::parse(query.as_deref())?;
            Box::pin(read(&state, &target, &headers, query)).await
        }
        Method::HEAD => Box::pin(head(&state, &target)).await,
        Method::DELETE => Box::pin(delete(&state, &target)).await,
        _ => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {method} is not allowed on a stream"),
        )
        .with_header(header::ALLOW, "GET, POST, PUT, DELETE, HEAD, OPTIONS")),
    }
}

/// Whether a content type is shaped `type/subtype` (parameters allowed).
fn well_formed_content_type(ct: &str) -> bool {
    let media = strand_engine::media_type(ct);
    match media.split_once('/') {
        Some((t, s)) => {
            let token =
                |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_graphic() && b != b'/');
            token(t) && token(s)
        }
        None => false,
    }
}

fn is_json(ct: &str) -> bool {
    strand::is_json_record_content_type(ct)
}

fn json_body(body: &[u8], allow_empty: bool) -> Result<Bytes, ApiError> {
    json_mode::encode_body(body, allow_empty).map_err(|e| match e {
        JsonError::Invalid(why) => ApiError::bad_request(format!("invalid JSON body: {why}")),
        JsonError::EmptyArray => ApiError::bad_request("an empty JSON array appends nothing"),
    })
}

fn closed_flag(headers: &HeaderMap) -> Result<bool, ApiError> {
    Ok(h::single(headers, &h::CLOSED)
        .map_err(ApiError::bad_request)?
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")))
}

/// A create's expiry headers, `(Stream-TTL, Stream-Expires-At)`: each
/// well formed, and not both.
fn expiry_headers(headers: &HeaderMap) -> Result<(Option<u64>, Option<u64>), ApiError> {
    let ttl = match h::single(headers, &h::TTL).map_err(ApiError::bad_request)? {
        None => None,
        Some(v) => Some(parse_decimal(v).ok_or_else(|| {
            ApiError::bad_request("Stream-TTL must be a non-negative whole number of seconds")
        })?),
    };
    let expires = match h::single(headers, &h::EXPIRES_AT).map_err(ApiError::bad_request)? {
        None => None,
        Some(v) => Some(parse_rfc3339_ms(v.trim()).ok_or_else(|| {
            ApiError::bad_request("Stream-Expires-At must be an RFC 3339 timestamp")
        })?),
    };
    if ttl.is_some() && expires.is_some() {
        return Err(ApiError::bad_request(
            "Stream-TTL and Stream-Expires-At cannot both be set",
        ));
    }
    Ok((ttl, expires))
}

/// A create's `Stream-Attrs`, a JSON attributes object.
fn attrs_header(headers: &HeaderMap) -> Result<Option<strand::StreamAttrs>, ApiError> {
    match h::single(headers, &h::ATTRS).map_err(ApiError::bad_request)? {
        None => Ok(None),
        Some(v) => serde_json::from_str(v).map(Some).map_err(|e| {
            ApiError::bad_request(format!(
                "Stream-Attrs must be a JSON attributes object: {e}"
            ))
        }),
    }
}

async fn create(
    state: &AppState,
    target: &StreamRequest,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult {
    if headers.contains_key(h::FORKED_FROM) {
        return create_fork(state, target, headers, body).await;
    }
    if headers.contains_key(h::FORK_OFFSET) || headers.contains_key(h::FORK_SUB_OFFSET) {
        return Err(ApiError::bad_request(
            "Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From",
        ));
    }
    let content_type =
        match h::single(headers, &header::CONTENT_TYPE).map_err(ApiError::bad_request)? {
            Some(ct) if well_formed_content_type(ct) => ct.trim().to_owned(),
            _ => DEFAULT_CONTENT_TYPE.to_owned(),
        };
    let (ttl, expires) = expiry_headers(headers)?;
    let closed = closed_flag(headers)?;
    let (body, _lease) = state.bodies.read(body, state.config.max_body_bytes).await?;
    let payload = if is_json(&content_type) && !body.is_empty() {
        json_body(&body, true)?
    } else {
        body
    };
    let stream_seq = h::single(headers, &h::SEQ)
        .map_err(ApiError::bad_request)?
        .map(str::to_owned);
    let given_attrs = attrs_header(headers)?;
    let attrs = crate::names::with_name(&target.id, &target.name, given_attrs.clone());
    let now_ms = state.engine.now_ms();
    let initial_len = payload.len();
    let command = StreamCommand::CreateStream {
        stream_id: target.id.clone(),
        content_type: content_type.clone(),
        initial_payload: payload,
        close_after: closed,
        stream_seq,
        producer: None,
        stream_ttl_seconds: ttl,
        stream_expires_at_ms: expires,
        attrs: attrs.clone(),
        now_ms,
    };
    let _admission = state.admit(&target.id, initial_len).await?;
    let mut response = state.engine.create_stream(command.clone(), true).await?;
    if attrs != given_attrs && predates_names(state, &target.id, attrs, &response).await? {
        let mut command = command;
        if let StreamCommand::CreateStream { attrs, .. } = &mut command {
            *attrs = given_attrs;
        }
        response = state.engine.create_stream(command, true).await?;
    }
    created_response(&state.config, &response, content_type, headers, target)
}

/// Whether a create (or fork) that carried a hashed stream's name in
/// `attrs` was refused only because the stream exists from before hashed
/// streams kept their names (`names::created_without_name`).
async fn predates_names(
    state: &AppState,
    id: &strand::BucketStreamId,
    attrs: Option<strand::StreamAttrs>,
    response: &StreamResponse,
) -> Result<bool, ApiError> {
    if !matches!(
        response,
        StreamResponse::Error {
            code: strand::StreamErrorCode::StreamAlreadyExistsConflict,
            ..
        }
    ) {
        return Ok(false);
    }
    let query_id = id.clone();
    let existing = state
        .engine
        .query(id, move |m| m.stream_attrs(&query_id).cloned())
        .await?;
    Ok(crate::names::created_without_name(
        existing.as_ref(),
        attrs.as_ref(),
    ))
}

/// The answer to a create or fork create.
fn created_response(
    config: &crate::config::Config,
    response: &StreamResponse,
    content_type: String,
    headers: &HeaderMap,
    target: &StreamRequest,
) -> ApiResult {
    let (status, next_offset, closed, content_type) = match response.clone() {
        StreamResponse::Created {
            next_offset,
            closed,
            ..
        } => (StatusCode::CREATED, next_offset, closed, content_type),
        StreamResponse::AlreadyExists {
            next_offset,
            closed,
            content_type,
            ..
        } => (StatusCode::OK, next_offset, closed, content_type),
        StreamResponse::Error {
            code: strand::StreamErrorCode::StreamSoftDeleted,
            message,
            ..
        } => return Err(ApiError::new(StatusCode::CONFLICT, message)),
        other => return Err(ApiError::from_machine(&other, target.layout)),
    };
    let mut out = status.into_response();
    let hs = out.headers_mut();
    set_header(hs, header::CONTENT_TYPE, &content_type);
    set_header(hs, h::NEXT_OFFSET, offsets::render(next_offset));
    if closed {
        set_header(hs, h::CLOSED, "true");
    }
    if status == StatusCode::CREATED {
        set_header(hs, header::LOCATION, location(config, headers, target));
    }
    Ok(out)
}

/// `PUT` with `Stream-Forked-From` (spec 08 §14, `docs/forks.md` §7).
async fn create_fork(
    state: &AppState,
    target: &StreamRequest,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult {
    let from = h::single(headers, &h::FORKED_FROM)
        .map_err(ApiError::bad_request)?
        .unwrap_or_default();
    // The read right on the source was checked with the route's own
    // (`routes::dispatch`).
    let source = crate::routes::stream_for_path(from, &state.config.default_bucket)?.id;
    let fork_offset = match h::single(headers, &h::FORK_OFFSET).map_err(ApiError::bad_request)? {
        None => None,
        Some(v) => Some(offsets::parse_position(v.trim()).map_err(|_| {
            ApiError::bad_request(
                "Stream-Fork-Offset must be an offset like 0000000000000000_0000000000000000",
            )
        })?),
    };
    let sub_offset = match h::single(headers, &h::FORK_SUB_OFFSET).map_err(ApiError::bad_request)? {
        None => 0,
        Some(v) => parse_decimal(v.trim()).ok_or_else(|| {
            ApiError::bad_request(
                "Stream-Fork-Sub-Offset must be a whole number without sign or leading zeros",
            )
        })?,
    };
    if sub_offset > 0 && fork_offset.is_none() {
        return Err(ApiError::bad_request(
            "Stream-Fork-Sub-Offset needs Stream-Fork-Offset",
        ));
    }
    let given_type =
        match h::single(headers, &header::CONTENT_TYPE).map_err(ApiError::bad_request)? {
            Some(ct) if well_formed_content_type(ct) => Some(ct.trim().to_owned()),
            _ => None,
        };
    let (ttl, expires) = expiry_headers(headers)?;
    let closed = closed_flag(headers)?;
    let given_attrs = attrs_header(headers)?;
    let attrs = crate::names::with_name(&target.id, &target.name, given_attrs.clone());
    // The source's content type decides the fork's and how its body is
    // stored; a soft-deleted source cannot be forked.
    // Asked of the source group's leader: the client may have created
    // the source through another member a moment ago.
    let Some(meta) = state.engine.head_at_leader(source.clone()).await? else {
        if state.engine.is_soft_deleted(source.clone()).await? {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("stream '{source}' was deleted; it cannot be forked"),
            ));
        }
        return Err(ApiError::not_found(format!("stream '{source}' not found")));
    };
    if let Some(given) = &given_type
        && !strand_engine::same_media_type(given, &meta.content_type)
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "content type {given:?} does not match the source's {:?}",
                meta.content_type
            ),
        ));
    }
    let (body, _lease) = state.bodies.read(body, state.config.max_body_bytes).await?;
    let payload = if is_json(&meta.content_type) && !body.is_empty() {
        json_body(&body, true)?
    } else {
        body
    };
    let mut request = strand_engine::ForkRequest {
        stream_id: target.id.clone(),
        source_id: source,
        fork_offset,
        sub_offset,
        stream_ttl_seconds: ttl,
        stream_expires_at_ms: expires,
        close: closed,
        initial_payload: payload,
        attrs: attrs.clone(),
    };
    let mut response = state.engine.create_fork(request.clone()).await?;
    if attrs != given_attrs && predates_names(state, &target.id, attrs, &response).await? {
        request.attrs = given_attrs;
        response = state.engine.create_fork(request).await?;
    }
    let response = match response {
        StreamResponse::Error {
            code: strand::StreamErrorCode::StreamSoftDeleted,
            message,
            ..
        } => return Err(ApiError::new(StatusCode::CONFLICT, message)),
        StreamResponse::Error {
            code: strand::StreamErrorCode::StreamGone,
            message,
            ..
        } => return Err(ApiError::bad_request(message)),
        other => other,
    };
    created_response(&state.config, &response, meta.content_type, headers, target)
}

/// The URL of a created stream: `--public-url` and the path when that is
/// set (what clients see through a proxy), else the server's own scheme
/// (https with TLS) and the request's host (its `Host` header, or the
/// authority of an HTTP/2 request), else the listen address.
fn location(config: &crate::config::Config, headers: &HeaderMap, target: &StreamRequest) -> String {
    let base = base_url(config, headers, target.authority.as_ref());
    format!("{base}{}", target.path)
}

/// The URL clients reach this server at, without a trailing slash: the
/// public URL, else the request's `Host` (or an HTTP/2 request's
/// authority), else the listen address; `https` with TLS.
pub(crate) fn base_url(
    config: &crate::config::Config,
    headers: &HeaderMap,
    authority: Option<&axum::http::uri::Authority>,
) -> String {
    if let Some(public) = &config.public_url {
        return public.trim_end_matches('/').to_owned();
    }
    let scheme = if config.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    match headers.get(header::HOST).and_then(|v| v.to_str().ok()) {
        Some(host) => format!("{scheme}://{host}"),
        None => match authority {
            Some(authority) => format!("{scheme}://{authority}"),
            None => format!("{scheme}://{}", config.listen),
        },
    }
}

async fn append(
    state: &AppState,
    target: &StreamRequest,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult {
    let close = closed_flag(headers)?;
    let producer = h::producer(headers).map_err(ApiError::bad_request)?;
    let stream_seq = h::single(headers, &h::SEQ)
        .map_err(ApiError::bad_request)?
        .map(str::to_owned);
    let content_type = h::single(headers, &header::CONTENT_TYPE)
        .map_err(ApiError::bad_request)?
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    let record_match =
        match h::single(headers, &h::RECORD_MATCH).map_err(ApiError::bad_request)? {
            None => None,
            Some(v) => Some(parse_decimal(v.trim()).ok_or_else(|| {
                ApiError::bad_request("Stream-Record-Match must be a record number")
            })?),
        };
    let (body, _lease) = state.bodies.read(body, state.config.max_body_bytes).await?;
    if body.is_empty() && !close {
        return Err(ApiError::bad_request(
            "an append needs a body (or Stream-Closed: true)",
        ));
    }
    if !body.is_empty() && content_type.is_none() {
        return Err(ApiError::bad_request(
            "an append with a body needs a Content-Type",
        ));
    }
    let payload = match &content_type {
        Some(ct) if is_json(ct) && !body.is_empty() => match json_body(&body, false) {
            Ok(payload) => payload,
            Err(error) => return Err(mismatch_or(state, target, ct, error).await),
        },
        _ => body,
    };
    let has_producer = producer.is_some();
    let payload_len = payload.len();
    let _admission = state.admit(&target.id, payload_len).await?;
    let outcome = state
        .engine
        .write(WriteRequest {
            stream_id: target.id.clone(),
            content_type,
            media_type_match: true,
            payload,
            close,
            stream_seq,
            producer,
            record_match,
        })
        .await?;
    let position = outcome.producer_position;
    let (status, next_offset, closed, producer_echo) = match outcome.response {
        StreamResponse::Appended {
            next_offset,
            closed,
            deduplicated,
            producer,
            ..
        } => {
            if !deduplicated && payload_len > 0 {
                state.metrics.appended(payload_len);
            }
            let status = if has_producer && !deduplicated {
                StatusCode::OK
            } else {
                StatusCode::NO_CONTENT
            };
            // A duplicate answers with the highest accepted sequence.
            let echo = match (deduplicated, position, producer) {
                (true, Some((epoch, seq)), _) => Some((epoch, seq)),
                (_, _, Some(p)) => Some((p.producer_epoch, p.producer_seq)),
                _ => None,
            };
            (status, next_offset, closed, echo)
        }
        StreamResponse::Closed {
            next_offset,
            deduplicated,
            producer,
        } => {
            let echo = match (deduplicated, position, producer) {
                (true, Some((epoch, seq)), _) => Some((epoch, seq)),
                (_, _, Some(p)) => Some((p.producer_epoch, p.producer_seq)),
                (_, Some(pos), None) if has_producer => Some(pos),
                _ => None,
            };
            (StatusCode::NO_CONTENT, next_offset, true, echo)
        }
        other => return Err(ApiError::from_machine(&other, target.layout)),
    };
    let mut out = status.into_response();
    let hs = out.headers_mut();
    set_header(hs, h::NEXT_OFFSET, offsets::render(next_offset));
    if closed {
        set_header(hs, h::CLOSED, "true");
    }
    if let Some((epoch, seq)) = producer_echo {
        set_header(hs, h::PRODUCER_EPOCH, epoch.to_string());
        set_header(hs, h::PRODUCER_SEQ, seq.to_string());
    }
    Ok(out)
}

/// A JSON body that did not parse is a content-type mismatch (409) when
/// the stream is not a JSON stream at all; else the parse error stands.
async fn mismatch_or(
    state: &AppState,
    target: &StreamRequest,
    given: &str,
    error: ApiError,
) -> ApiError {
    match state.engine.head(target.id.clone()).await {
        Ok(Some(meta)) if !strand_engine::same_media_type(given, &meta.content_type) => {
            ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "content type {given:?} does not match the stream's {:?}",
                    meta.content_type
                ),
            )
            .with_header(h::NEXT_OFFSET, offsets::render(meta.tail_offset))
        }
        Ok(None) => ApiError::not_found(format!("stream '{}' not found", target.id)),
        _ => error,
    }
}

/// Headers describing a stream's metadata (HEAD, and beside reads).
fn metadata_headers(hs: &mut HeaderMap, meta: &StreamMetadata) {
    set_header(hs, header::CONTENT_TYPE, &meta.content_type);
    set_header(hs, h::NEXT_OFFSET, offsets::render(meta.tail_offset));
    if meta.status == StreamStatus::Closed {
        set_header(hs, h::CLOSED, "true");
    }
    if let Some(ttl) = meta.stream_ttl_seconds {
        set_header(hs, h::TTL, ttl.to_string());
    }
    if let Some(at) = meta.stream_expires_at_ms {
        set_header(hs, h::EXPIRES_AT, render_rfc3339_ms(at));
    }
}

async fn head(state: &AppState, target: &StreamRequest) -> ApiResult {
    let Some(meta) = state.engine.head(target.id.clone()).await? else {
        if state.engine.is_soft_deleted(target.id.clone()).await? {
            return Err(ApiError::new(
                StatusCode::GONE,
                format!("stream '{}' was deleted", target.id),
            ));
        }
        return Err(ApiError::not_found(format!(
            "stream '{}' not found",
            target.id
        )));
    };
    let mut out = StatusCode::OK.into_response();
    let hs = out.headers_mut();
    metadata_headers(hs, &meta);
    set_header(hs, header::CACHE_CONTROL, "no-store");
    set_header(
        hs,
        header::ETAG,
        etag(
            meta.tail_offset,
            meta.tail_offset,
            meta.status == StreamStatus::Closed,
        ),
    );
    Ok(out)
}

async fn delete(state: &AppState, target: &StreamRequest) -> ApiResult {
    match state.engine.delete(target.id.clone()).await? {
        StreamResponse::Deleted => Ok(StatusCode::NO_CONTENT.into_response()),
        other => Err(ApiError::from_machine(&other, target.layout)),
    }
}

/// The entity tag of a read: where it started, where it ended, and
/// whether it ended a closed stream.
pub(super) fn etag(offset: u64, next_offset: u64, closed_end: bool) -> String {
    format!(
        "\"{}:{}{}\"",
        offsets::render(offset),
        offsets::render(next_offset),
        if closed_end { ":c" } else { "" }
    )
}

async fn read(
    state: &AppState,
    target: &StreamRequest,
    headers: &HeaderMap,
    query: ReadQuery,
) -> ApiResult {
    match query.live.as_deref() {
        None => {}
        Some("long-poll") => return live::long_poll(state, target, query).await,
        Some("sse") => return live::sse(state, target, query).await,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "live must be long-poll or sse, not {other:?}"
            )));
        }
    }
    let from = read_from(query.offset.as_deref(), target.layout)?;
    let page = live::read_page(state, target, from).await?;
    let closed_end = page.closed && page.up_to_date;
    let mut out = page.body.into_response_body(StatusCode::OK);
    let hs = out.headers_mut();
    set_header(hs, header::CONTENT_TYPE, &page.content_type);
    set_header(hs, h::NEXT_OFFSET, offsets::render(page.next_offset));
    if page.up_to_date {
        set_header(hs, h::UP_TO_DATE, "true");
    }
    if closed_end {
        set_header(hs, h::CLOSED, "true");
    }
    if from == ReadFrom::Tail {
        set_header(hs, header::CACHE_CONTROL, "no-store");
        return Ok(out);
    }
    let tag = etag(page.offset, page.next_offset, closed_end);
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let caching = live::cache_control(state);
    if matches {
        let mut not_modified = StatusCode::NOT_MODIFIED.into_response();
        set_header(not_modified.headers_mut(), header::ETAG, &tag);
        set_header(not_modified.headers_mut(), header::CACHE_CONTROL, caching);
        return Ok(not_modified);
    }
    set_header(hs, header::ETAG, &tag);
    set_header(hs, header::CACHE_CONTROL, caching);
    Ok(out)
}
