//! The subscription routes under `/v1/stream/__ds/` (PROTOCOL §6–7):
//!
//! | route | answer |
//! |---|---|
//! | `GET jwks.json` | the webhook signing keys (`application/jwk-set+json`) |
//! | `PUT subscriptions/{id}` | 201 created, 200 the same again, 409 another configuration |
//! | `GET`, `DELETE subscriptions/{id}` | the subscription; 204 |
//! | `POST subscriptions/{id}/streams`, `DELETE …/streams/{name}` | explicit streams added, removed: 204 |
//! | `POST subscriptions/{id}/callback` (webhook), `…/ack` (pull-wake) | acknowledgements with the wake's bearer token: 200 `{ok, next_wake}`, 409 `FENCED` for a stale wake |
//! | `POST subscriptions/{id}/claim`, `…/release` | a pull-wake claimed by a worker (409 `ALREADY_CLAIMED`), released: 204 |
//!
//! Errors are JSON: `{"error":{"code","message"}}`.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::model::{
    Event, Kind, Link, LinkType, MAX_EXPLICIT_STREAMS, MAX_ID_BYTES, Registry, Spec, Webhook,
};
use super::{Subscriptions, signing, token};
use crate::offsets;
use crate::reply::json;

/// A JSON error answer.
fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    json(
        status,
        &serde_json::json!({"error": {"code": code, "message": message.into()}}),
    )
}

/// `204` when the subscription was there, else `404`.
fn no_content_if(found: bool) -> Response {
    if found {
        StatusCode::NO_CONTENT.into_response()
    } else {
        not_found()
    }
}

/// `404 SUBSCRIPTION_NOT_FOUND`.
fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
        "subscription not found",
    )
}

/// Percent-encodes a path component (an id in a URL).
pub fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One linked stream as the API shows it.
pub fn stream_info(name: &str, link: &Link, tail: Option<u64>) -> serde_json::Value {
    let acked = link.acked.map_or_else(|| "-1".to_owned(), offsets::render);
    let mut info = serde_json::json!({
        "path": name,
        "link_type": link.link_type(),
        "acked_offset": acked,
    });
    if let Some(tail) = tail {
        info["tail_offset"] = serde_json::json!(offsets::render(tail));
        info["has_pending"] = serde_json::json!(link.pending(tail));
    }
    info
}

/// The body of `PUT …/subscriptions/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PutBody {
    #[serde(rename = "type")]
    kind: Kind,
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    streams: Vec<String>,
    #[serde(default)]
    webhook: Option<Webhook>,
    #[serde(default)]
    wake_stream: Option<String>,
    #[serde(default)]
    lease_ttl_ms: Option<u64>,
    #[serde(default)]
    description: Option<String>,
}

/// `{streams: [...]}`.
#[derive(Debug, Deserialize)]
struct StreamsBody {
    streams: Vec<String>,
}

/// An acknowledgement request.
#[derive(Debug, Deserialize)]
struct AckBody {
    wake_id: String,
    generation: u64,
    #[serde(default)]
    acks: Vec<AckItem>,
    #[serde(default)]
    done: bool,
}

#[derive(Debug, Deserialize)]
struct AckItem {
    #[serde(alias = "path")]
    stream: String,
    offset: String,
}

#[derive(Debug, Deserialize)]
struct ClaimBody {
    worker: String,
}

/// Answers a request under `/v1/stream/__ds/`; `rest` is the decoded
/// path after it.
pub async fn handle(
    subs: &std::sync::Arc<Subscriptions>,
    method: &Method,
    rest: &[String],
    headers: &HeaderMap,
    body: Body,
    bodies: &crate::body::BodyBudget,
    base_url: String,
) -> Response {
    let (bytes, _lease) = match bodies.read(body, 1 << 20).await {
        Ok(read) => read,
        // The budget stayed full: its 503, as the registry's own are.
        Err(e) if e.status == StatusCode::SERVICE_UNAVAILABLE => return e.into_response(),
        Err(e) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                e.message,
            );
        }
    };
    let result = match (method.clone(), rest) {
        (Method::GET, [file]) if file == "jwks.json" => jwks(subs).await,
        (m, [kind, id]) if kind == "subscriptions" => match m {
            Method::PUT => put(subs, id, &bytes, base_url).await,
            Method::GET | Method::HEAD => get(subs, id, &base_url).await,
            Method::DELETE => delete(subs, id).await,
            _ => Ok(error(
                StatusCode::METHOD_NOT_ALLOWED,
                "METHOD_NOT_ALLOWED",
                "use PUT, GET or DELETE",
            )),
        },
        (Method::POST, [kind, id, action]) if kind == "subscriptions" => match action.as_str() {
            "streams" => add_streams(subs, id, &bytes).await,
            "callback" | "ack" => acknowledge(subs, id, action, headers, &bytes).await,
            "claim" => claim(subs, id, &bytes).await,
            "release" => release(subs, id, headers, &bytes).await,
            _ => Ok(error(
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                "no such subscription route",
            )),
        },
        (Method::DELETE, [kind, id, streams, name])
            if kind == "subscriptions" && streams == "streams" =>
        {
            remove_stream(subs, id, name).await
        }
        _ => Ok(error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "no such subscription route",
        )),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

type Answer = Result<Response, crate::errors::ApiError>;

async fn jwks(subs: &Subscriptions) -> Answer {
    let seed = subs.seed().await?;
    let mut out = json(StatusCode::OK, &signing::SigningKey::from_seed(seed).jwks());
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/jwk-set+json"),
    );
    Ok(out)
}

fn valid_id(id: &str) -> Option<Response> {
    (id.is_empty() || id.len() > MAX_ID_BYTES).then(|| {
        error(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            format!("a subscription id is 1 to {MAX_ID_BYTES} bytes"),
        )
    })
}

/// Canonical names of streams a request lists, or the refusal.
fn canonical(subs: &Subscriptions, names: &[String]) -> Result<Vec<String>, Box<Response>> {
    if names.len() > MAX_EXPLICIT_STREAMS {
        return Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            format!("at most {MAX_EXPLICIT_STREAMS} streams at once"),
        )));
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let named = crate::names::mount_stream(subs.default_bucket(), name.trim_matches('/'))
            .map_err(|e| {
                error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_REQUEST",
                    format!("stream {name:?}: {}", e.message.trim_end()),
                )
            })?;
        out.push(named.name);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn invalid(message: impl Into<String>) -> Response {
    error(StatusCode::BAD_REQUEST, "INVALID_REQUEST", message)
}

async fn put(subs: &Subscriptions, id: &str, bytes: &[u8], base_url: String) -> Answer {
    if let Some(refused) = valid_id(id) {
        return Ok(refused);
    }
    let body: PutBody = match serde_json::from_slice(bytes) {
        Ok(body) => body,
        Err(e) => return Ok(invalid(format!("invalid subscription: {e}"))),
    };
    let lease_ttl_ms = body
        .lease_ttl_ms
        .unwrap_or(super::model::DEFAULT_LEASE_TTL_MS);
    if !(super::model::MIN_LEASE_TTL_MS..=super::model::MAX_LEASE_TTL_MS).contains(&lease_ttl_ms) {
        return Ok(invalid(format!(
            "lease_ttl_ms must be {} to {}",
            super::model::MIN_LEASE_TTL_MS,
            super::model::MAX_LEASE_TTL_MS
        )));
    }
    let streams = match canonical(subs, &body.streams) {
        Ok(streams) => streams,
        Err(refused) => return Ok(*refused),
    };
    if body.pattern.is_none() && streams.is_empty() {
        return Ok(invalid("a subscription needs a pattern or streams"));
    }
    match body.kind {
        Kind::Webhook => {
            let Some(hook) = &body.webhook else {
                return Ok(invalid("webhook subscriptions need webhook.url"));
            };
            if let Err(reason) = subs.policy().check(&hook.url).await {
                return Ok(error(
                    StatusCode::BAD_REQUEST,
                    "WEBHOOK_URL_REJECTED",
                    reason,
                ));
            }
        }
        Kind::PullWake => {
            let Some(wake) = &body.wake_stream else {
                return Ok(invalid("pull-wake subscriptions need wake_stream"));
            };
            if let Err(refused) = canonical(subs, std::slice::from_ref(wake)) {
                return Ok(*refused);
            }
        }
    }
    let spec = Spec {
        kind: body.kind,
        pattern: body.pattern,
        streams: streams.clone(),
        webhook: body.webhook,
        wake_stream: body.wake_stream,
        lease_ttl_ms,
        description: body.description,
    };
    // A webhook subscription shows its signing key's id: the secret exists
    // before it does.
    if spec.kind == Kind::Webhook {
        subs.seed().await?;
    }
    let mut explicit = Vec::with_capacity(streams.len());
    for name in &streams {
        explicit.push((name.clone(), subs.tail(name).await));
    }
    let created = subs
        .transact(|registry, now| match registry.subs.get(id) {
            Some(existing) if existing.spec == spec => Ok((vec![], Some(false))),
            Some(_) => Ok((vec![], None)),
            None => Ok((
                vec![Event::Put {
                    id: id.to_owned(),
                    spec: spec.clone(),
                    at_ms: now,
                    base_url: base_url.clone(),
                    explicit: explicit.clone(),
                }],
                Some(true),
            )),
        })
        .await?;
    let Some(created) = created else {
        return Ok(error(
            StatusCode::CONFLICT,
            "SUBSCRIPTION_ALREADY_EXISTS",
            "a subscription with this id and another configuration exists",
        ));
    };
    // Streams that exist already and match the pattern are linked now.
    if created && let Some(pattern) = &spec.pattern {
        subs.backfill(id, pattern).await?;
    }
    subs.poke();
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let seed = subs.seed().await?;
    let shown = subs
        .view(|registry| {
            registry
                .subs
                .get(id)
                .map(|sub| show(id, sub, &base_url, &seed))
        })
        .await?;
    Ok(match shown {
        Some(value) => json(status, &value),
        None => not_found(),
    })
}

/// A subscription as the API shows it (never a secret).
fn show(
    id: &str,
    sub: &super::model::Subscription,
    base_url: &str,
    seed: &[u8; 32],
) -> serde_json::Value {
    let streams: Vec<serde_json::Value> = sub
        .links
        .iter()
        .map(|(name, link)| stream_info(name, link, None))
        .collect();
    let mut out = serde_json::json!({
        "id": id,
        "subscription_id": id,
        "type": sub.spec.kind,
        "streams": streams,
        "lease_ttl_ms": sub.spec.lease_ttl_ms,
        "generation": sub.generation,
        "status": "active",
    });
    if let Some(pattern) = &sub.spec.pattern {
        out["pattern"] = serde_json::json!(pattern);
    }
    if let Some(description) = &sub.spec.description {
        out["description"] = serde_json::json!(description);
    }
    if let Some(wake) = &sub.spec.wake_stream {
        out["wake_stream"] = serde_json::json!(wake);
    }
    if let Some(hook) = &sub.spec.webhook {
        let key = signing::SigningKey::from_seed(*seed);
        out["webhook"] = serde_json::json!({
            "url": hook.url,
            "signing": {
                "alg": "ed25519",
                "kid": key.kid(),
                "jwks_url": format!("{}/v1/stream/__ds/jwks.json", base_url.trim_end_matches('/')),
            },
        });
    }
    out
}

async fn get(subs: &Subscriptions, id: &str, base_url: &str) -> Answer {
    // A webhook subscription's creation wrote the secret; a GET writes
    // nothing.
    let seed = subs
        .view(|registry| registry.seed)
        .await?
        .unwrap_or_default();
    let shown = subs
        .view(|registry| {
            registry
                .subs
                .get(id)
                .map(|sub| show(id, sub, base_url, &seed))
        })
        .await?;
    Ok(match shown {
        Some(value) => json(StatusCode::OK, &value),
        None => not_found(),
    })
}

async fn delete(subs: &Subscriptions, id: &str) -> Answer {
    let found = subs
        .transact(|registry, _| {
            Ok(if registry.subs.contains_key(id) {
                (vec![Event::Delete { id: id.to_owned() }], true)
            } else {
                (vec![], false)
            })
        })
        .await?;
    Ok(no_content_if(found))
}

async fn add_streams(subs: &Subscriptions, id: &str, bytes: &[u8]) -> Answer {
    let body: StreamsBody = match serde_json::from_slice(bytes) {
        Ok(body) => body,
        Err(e) => return Ok(invalid(format!("invalid body: {e}"))),
    };
    let names = match canonical(subs, &body.streams) {
        Ok(names) => names,
        Err(refused) => return Ok(*refused),
    };
    let mut tails = Vec::with_capacity(names.len());
    for name in &names {
        tails.push((name.clone(), Some(subs.tail(name).await)));
    }
    let found = subs
        .transact(|registry, _| {
            let Some(sub) = registry.subs.get(id) else {
                return Ok((vec![], false));
            };
            // A stream already linked keeps its acked offset.
            let streams = tails
                .iter()
                .map(|(name, tail)| (name.clone(), sub.links.get(name).map_or(*tail, |l| l.acked)))
                .collect();
            Ok((
                vec![Event::Link {
                    id: id.to_owned(),
                    link_type: LinkType::Explicit,
                    streams,
                }],
                true,
            ))
        })
        .await?;
    subs.poke();
    Ok(no_content_if(found))
}

async fn remove_stream(subs: &Subscriptions, id: &str, name: &str) -> Answer {
    let name = match canonical(subs, &[name.to_owned()]) {
        Ok(mut names) => names.pop().unwrap_or_default(),
        Err(refused) => return Ok(*refused),
    };
    let found = subs
        .transact(|registry, _| {
            Ok(if registry.subs.contains_key(id) {
                (
                    vec![Event::Unlink {
                        id: id.to_owned(),
                        stream: name.clone(),
                    }],
                    true,
                )
            } else {
                (vec![], false)
            })
        })
        .await?;
    Ok(no_content_if(found))
}

/// The bearer token of a request.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .map(str::trim)
}

/// The key callback tokens are checked with; `None` before the secret
/// exists (then no token was ever issued, and a refused request writes
/// nothing).
async fn token_key(subs: &Subscriptions) -> Result<Option<[u8; 32]>, crate::errors::ApiError> {
    Ok(subs
        .view(|registry| registry.seed)
        .await?
        .map(|seed| token::key(&seed)))
}

/// Checks a wake's token and fencing: the refusal when the request may
/// not act on the current wake (`wake`: its id and generation as the
/// request names them).
fn fenced(
    registry: &Registry,
    key: &[u8; 32],
    id: &str,
    headers: &HeaderMap,
    (wake_id, generation): (&str, u64),
    now: u64,
) -> Result<(), Box<Response>> {
    let refuse = |status, code, message| Err(Box::new(error(status, code, message)));
    let Some(sub) = registry.subs.get(id) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "SUBSCRIPTION_NOT_FOUND",
            "subscription not found",
        );
    };
    let Some(given) = bearer(headers) else {
        return refuse(StatusCode::UNAUTHORIZED, "TOKEN_INVALID", "no bearer token");
    };
    let issued = match token::check(key, given, id, now) {
        Ok(generation) => generation,
        Err(token::Refused::Expired) => {
            return refuse(StatusCode::UNAUTHORIZED, "TOKEN_EXPIRED", "token expired");
        }
        Err(token::Refused::Invalid) => {
            return refuse(StatusCode::UNAUTHORIZED, "TOKEN_INVALID", "token invalid");
        }
    };
    let current = sub.wake.as_ref().filter(|w| !w.expired(now));
    if issued != sub.generation
        || generation != sub.generation
        || current.is_none_or(|w| w.wake_id != wake_id)
    {
        return refuse(
            StatusCode::CONFLICT,
            "FENCED",
            "the wake's generation is stale",
        );
    }
    Ok(())
}

async fn acknowledge(
    subs: &Subscriptions,
    id: &str,
    action: &str,
    headers: &HeaderMap,
    bytes: &[u8],
) -> Answer {
    let body: AckBody = match serde_json::from_slice(bytes) {
        Ok(body) => body,
        Err(e) => return Ok(invalid(format!("invalid acknowledgement: {e}"))),
    };
    let mut acks = Vec::with_capacity(body.acks.len());
    for item in &body.acks {
        let Ok(offset) = offsets::parse_position(&item.offset) else {
            return Ok(error(
                StatusCode::CONFLICT,
                "INVALID_OFFSET",
                format!("offset {:?} is not an offset", item.offset),
            ));
        };
        let name = match canonical(subs, std::slice::from_ref(&item.stream)) {
            Ok(mut names) => names.pop().unwrap_or_default(),
            Err(refused) => return Ok(*refused),
        };
        let tail = subs.tail(&name).await;
        acks.push((name, offset, tail));
    }
    let Some(key) = token_key(subs).await? else {
        return Ok(error(
            StatusCode::UNAUTHORIZED,
            "TOKEN_INVALID",
            "token invalid",
        ));
    };
    let want_kind = if action == "ack" {
        Kind::PullWake
    } else {
        Kind::Webhook
    };
    let answer = subs
        .transact(|registry, now| {
            let wake = (body.wake_id.as_str(), body.generation);
            if let Err(refused) = fenced(registry, &key, id, headers, wake, now) {
                return Ok((vec![], Err(*refused)));
            }
            let sub = &registry.subs[id];
            if sub.spec.kind != want_kind {
                return Ok((
                    vec![],
                    Err(invalid(format!(
                        "use /{} for this subscription",
                        if want_kind == Kind::Webhook {
                            "ack"
                        } else {
                            "callback"
                        }
                    ))),
                ));
            }
            for (name, offset, tail) in &acks {
                let Some(link) = sub.links.get(name) else {
                    return Ok((
                        vec![],
                        Err(error(
                            StatusCode::CONFLICT,
                            "INVALID_OFFSET",
                            format!("stream {name:?} is not one of the subscription's"),
                        )),
                    ));
                };
                if link.acked.is_some_and(|a| *offset < a) {
                    return Ok((
                        vec![],
                        Err(error(
                            StatusCode::CONFLICT,
                            "INVALID_OFFSET",
                            "the offset goes back behind the acknowledged one",
                        )),
                    ));
                }
                if offset > tail {
                    return Ok((
                        vec![],
                        Err(error(
                            StatusCode::CONFLICT,
                            "INVALID_OFFSET",
                            "the offset is beyond the stream's tail",
                        )),
                    ));
                }
            }
            let event = Event::Ack {
                id: id.to_owned(),
                generation: body.generation,
                acks: acks.iter().map(|(n, o, _)| (n.clone(), *o)).collect(),
                done: body.done,
                expires_at_ms: (!body.done).then(|| now.saturating_add(sub.spec.lease_ttl_ms)),
            };
            // What is left to do once these acks count.
            let mut after = sub.clone();
            for (name, offset, _) in &acks {
                if let Some(link) = after.links.get_mut(name) {
                    link.acked = Some(*offset);
                }
            }
            let next = body.done
                && acks
                    .iter()
                    .any(|(name, _, tail)| after.links.get(name).is_some_and(|l| l.pending(*tail)));
            Ok((vec![event], Ok(next)))
        })
        .await?;
    match answer {
        Ok(next_wake) => {
            subs.poke();
            Ok(json(
                StatusCode::OK,
                &serde_json::json!({"ok": true, "next_wake": next_wake}),
            ))
        }
        Err(refused) => Ok(refused),
    }
}

async fn claim(subs: &std::sync::Arc<Subscriptions>, id: &str, bytes: &[u8]) -> Answer {
    let body: ClaimBody = match serde_json::from_slice(bytes) {
        Ok(body) => body,
        Err(e) => return Ok(invalid(format!("invalid claim: {e}"))),
    };
    // Streams written just before the claim count, linked or not yet.
    subs.link_written().await?;
    let names = subs
        .view(|registry| {
            registry
                .subs
                .get(id)
                .map(|sub| sub.links.keys().cloned().collect::<Vec<_>>())
        })
        .await?;
    let Some(names) = names else {
        return Ok(not_found());
    };
    let mut tails = Vec::with_capacity(names.len());
    for name in names {
        let tail = subs.tail(&name).await;
        tails.push((name, tail));
    }
    let kind = subs
        .view(|registry| registry.subs.get(id).map(|sub| sub.spec.kind))
        .await?;
    if kind != Some(Kind::PullWake) {
        return Ok(invalid("the subscription is not pull-wake"));
    }
    let seed = subs.seed().await?;
    let key = token::key(&seed);
    let answer = subs
        .transact(|registry, now| {
            let Some(sub) = registry.subs.get(id) else {
                return Ok((vec![], Err(not_found())));
            };
            if sub.spec.kind != Kind::PullWake {
                return Ok((vec![], Err(invalid("the subscription is not pull-wake"))));
            }
            let open = sub.wake.as_ref().filter(|w| !w.expired(now));
            if let Some(holder) = open.and_then(|w| w.holder.as_ref()) {
                return Ok((
                    vec![],
                    Err(json(
                        StatusCode::CONFLICT,
                        &serde_json::json!({"error": {
                            "code": "ALREADY_CLAIMED",
                            "message": "another worker holds the wake",
                            "current_holder": holder,
                            "generation": sub.generation,
                        }}),
                    )),
                ));
            }
            let pending = tails
                .iter()
                .any(|(name, tail)| sub.links.get(name).is_some_and(|l| l.pending(*tail)));
            if !pending {
                return Ok((
                    vec![],
                    Err(error(
                        StatusCode::CONFLICT,
                        "NO_PENDING_WORK",
                        "the subscription has no pending work",
                    )),
                ));
            }
            let mut events = Vec::new();
            let (generation, wake_id) = match open {
                Some(wake) => (sub.generation, wake.wake_id.clone()),
                None => {
                    let generation = sub.generation + 1;
                    let wake_id = super::new_wake_id();
                    events.push(Event::Wake {
                        id: id.to_owned(),
                        generation,
                        wake_id: wake_id.clone(),
                        snapshot: tails.clone(),
                        expires_at_ms: None,
                    });
                    (generation, wake_id)
                }
            };
            events.push(Event::Claim {
                id: id.to_owned(),
                generation,
                holder: body.worker.clone(),
                expires_at_ms: now.saturating_add(sub.spec.lease_ttl_ms),
            });
            let streams: Vec<serde_json::Value> = tails
                .iter()
                .filter_map(|(name, tail)| {
                    Some(stream_info(name, sub.links.get(name)?, Some(*tail)))
                })
                .collect();
            let answer = serde_json::json!({
                "wake_id": wake_id,
                "generation": generation,
                "token": token::issue(&key, id, generation, now),
                "streams": streams,
                "lease_ttl_ms": sub.spec.lease_ttl_ms,
            });
            Ok((events, Ok(answer)))
        })
        .await?;
    Ok(match answer {
        Ok(value) => json(StatusCode::OK, &value),
        Err(refused) => refused,
    })
}

#[derive(Debug, Deserialize)]
struct ReleaseBody {
    wake_id: String,
    generation: u64,
}

async fn release(subs: &Subscriptions, id: &str, headers: &HeaderMap, bytes: &[u8]) -> Answer {
    let body: ReleaseBody = match serde_json::from_slice(bytes) {
        Ok(body) => body,
        Err(e) => return Ok(invalid(format!("invalid release: {e}"))),
    };
    let Some(key) = token_key(subs).await? else {
        return Ok(error(
            StatusCode::UNAUTHORIZED,
            "TOKEN_INVALID",
            "token invalid",
        ));
    };
    let answer = subs
        .transact(|registry, now| {
            let wake = (body.wake_id.as_str(), body.generation);
            if let Err(refused) = fenced(registry, &key, id, headers, wake, now) {
                return Ok((vec![], Err(*refused)));
            }
            Ok((
                vec![Event::End {
                    id: id.to_owned(),
                    generation: body.generation,
                }],
                Ok(()),
            ))
        })
        .await?;
    subs.poke();
    Ok(match answer {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(refused) => refused,
    })
}
