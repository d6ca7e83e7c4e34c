//! The Raft transport's routes (`POST /__strand/raft/…`): a peer's
//! messages for this node's groups, batches of them, and whole segment
//! files for a peer that lacks one; each needs the cluster token. Every
//! body is read inside the node's budget for peer messages
//! (`--max-peer-body-memory-bytes`, apart from clients' bodies) and
//! stays counted until its answer is sent.

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::body::BodyLease;
use crate::config::MAX_PEER_MESSAGE_BYTES;
use crate::state::AppState;

/// A peer's body of at most `limit` bytes, read inside the node's budget
/// for peer messages, with its lease (the bytes stay counted until it is
/// dropped); or the answer refusing it: 413 for a longer body, 503 with
/// `Retry-After` when the budget stays full for a second, 400 for a body
/// that cannot be read.
async fn peer_body(
    state: &AppState,
    request: Request,
    limit: usize,
) -> Result<(Bytes, BodyLease), Response> {
    state
        .peer_bodies
        .read_transient(request.into_body(), limit)
        .await
        .map_err(IntoResponse::into_response)
}

/// Whether a request may use the Raft routes: with a cluster token
/// configured it must carry it (401 without, 403 with another); without
/// one they are open only while client authentication is off (a cluster
/// with authentication needs the token, so an authenticated node without
/// one has no peers to hear from). A refusal is its status and message.
pub(super) fn allowed(
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

/// `POST /__strand/raft/{group}/{name}`: a peer's Raft message
/// ([`strand_raft::RaftMessage`]) for one of this node's groups; 404 for a
/// message or group the node does not have (a node in memory has none,
/// a single durable node takes no peer messages), 400 for a body that is
/// not the message.
pub(super) async fn message(state: &AppState, rest: &str, request: Request) -> Response {
    let not_found = |what: &str| (StatusCode::NOT_FOUND, format!("{what}\n")).into_response();
    let Some((group, name)) = rest.split_once('/') else {
        return not_found("no such raft route");
    };
    let Some(message) = strand_raft::RaftMessage::from_name(name) else {
        return not_found("no such raft route");
    };
    let (Ok(group), Some(raft)) = (group.parse::<usize>(), state.raft.as_ref()) else {
        return not_found("no such group");
    };
    let (body, _lease) = match peer_body(state, request, MAX_PEER_MESSAGE_BYTES).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    match raft.handle(group, message, &body).await {
        Ok(answer) => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/msgpack")],
            answer,
        )
            .into_response(),
        Err(
            e @ (strand_raft::MessageError::NoSuchGroup(_)
            | strand_raft::MessageError::NotClustered),
        ) => not_found(&e.to_string()),
        Err(e @ strand_raft::MessageError::Malformed(_)) => {
            (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

/// `POST /__strand/raft/batch`: a peer's Raft messages for several of
/// this node's groups at once (`strand_raft::serve_batch`): 200 with one
/// answer frame per message, each sent as soon as its group answers; 413 for a body over `strand_raft::MAX_BATCH_BODY`
/// or more than `strand_raft::MAX_BATCH_MESSAGES` messages, 400 for a
/// body that is not a batch.
pub(super) async fn batch(state: &AppState, request: Request) -> Response {
    let (body, lease) = match peer_body(state, request, strand_raft::MAX_BATCH_BODY).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    match strand_raft::serve_batch(state.raft.as_ref(), &body) {
        Ok(answers) => {
            use futures_util::StreamExt;
            // The messages are answered while the answers stream out: the
            // batch's bytes stay counted until the last one is sent.
            let answers = answers.map(move |answer| {
                let _held = &lease;
                Ok::<_, std::convert::Infallible>(answer)
            });
            (
                StatusCode::OK,
                [(axum::http::header::CONTENT_TYPE, "application/msgpack")],
                Body::from_stream(answers),
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
pub(super) async fn segment(state: &AppState, request: Request) -> Response {
    let Some(replica) = state.cold.as_ref().and_then(strand_cold::ColdTier::replica) else {
        return (StatusCode::NOT_FOUND, "this node keeps no segment files\n").into_response();
    };
    let (body, _lease) = match peer_body(state, request, 4096).await {
        Ok(read) => read,
        Err(refused) => return refused,
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

/// `POST /__strand/raft/view`: this node's view of its groups
/// ([`strand_raft::NodeView`], JSON), which a peer puts together with its
/// own for `GET /__strand/cluster`; 404 on a node without Raft (in
/// memory).
pub(super) fn view(state: &AppState) -> Response {
    match &state.raft {
        Some(raft) => crate::reply::json(StatusCode::OK, &raft.view()),
        None => (StatusCode::NOT_FOUND, "this node runs no Raft groups\n").into_response(),
    }
}

/// `POST /__strand/raft/drain`: a peer asks this node to start (`true`)
/// or end (`false`) its drain, or to leave the cluster or not
/// (`{"leaving": true|false}`; `strand_raft::DrainRequest`); 200 (the
/// peer client takes 200 only), 400 for another body, 404 on a node
/// without Raft.
pub(super) async fn drain(state: &AppState, request: Request) -> Response {
    match node_and_body::<strand_raft::DrainRequest>(
        state,
        request,
        64,
        "true, false or {\"leaving\": true|false}",
    )
    .await
    {
        Ok((raft, asked)) => {
            raft.take_drain(asked);
            StatusCode::OK.into_response()
        }
        Err(refused) => refused,
    }
}

/// `POST /__strand/raft/remove`: a member asks this node, as group 0's
/// leader, to take node `id` (a JSON number) out of the cluster; 200
/// with the outcome as JSON (`{"Ok": null}` or `{"Err": "why"}`, the
/// reason starting with a not-the-leader marker when this node does not
/// lead group 0), 400 for another body, 404 on a node without Raft.
pub(super) async fn remove(state: &AppState, request: Request) -> Response {
    match node_and_body::<u64>(state, request, 64, "a node id").await {
        Ok((raft, id)) => crate::reply::json(StatusCode::OK, &raft.remove_here(id).await),
        Err(refused) => refused,
    }
}

/// `POST /__strand/raft/join`: a new node asks to join the cluster
/// (`strand_raft::JoinRequest`, JSON); 200 with the outcome as JSON
/// (`{"Ok": {id: url, …}}`, every member's address, or `{"Err": "why"}`),
/// 400 for another body, 404 on a node without Raft.
pub(super) async fn join(state: &AppState, request: Request) -> Response {
    match node_and_body::<strand_raft::JoinRequest>(state, request, 4096, "a join request").await {
        Ok((raft, join)) => {
            crate::reply::json(StatusCode::OK, &raft.admit(join.id, &join.url).await)
        }
        Err(refused) => refused,
    }
}

/// The node's Raft side and a member's JSON body of at most `limit`
/// bytes, or the answer refusing it: 404 on a node without Raft, 413 for
/// a longer body, 400 for a body that is not `what`.
async fn node_and_body<'a, T: serde::de::DeserializeOwned>(
    state: &'a AppState,
    request: Request,
    limit: usize,
    what: &str,
) -> Result<(&'a strand_raft::RaftNode, T), Response> {
    let Some(raft) = &state.raft else {
        return Err((StatusCode::NOT_FOUND, "this node runs no Raft groups\n").into_response());
    };
    let (body, _lease) = peer_body(state, request, limit).await?;
    let value = serde_json::from_slice(&body).map_err(|_| {
        (StatusCode::BAD_REQUEST, format!("the body is not {what}\n")).into_response()
    })?;
    Ok((raft, value))
}

/// `POST /__strand/raft/ask/{group}/{kind}`: another member's question
/// about a group it does not hold ([`strand_raft::ASK_PATH`]), answered
/// from this node's machine: `200` and the answer (MessagePack, as the
/// question); `503` when this
/// node does not hold the group either, `404` for a kind or group it does
/// not know, `400` for a body that is not the question.
pub(super) async fn ask(state: &AppState, rest: &str, request: Request) -> Response {
    use strand_engine::{
        AnswerError, BucketExists, BucketUsage, GroupQuery, HeadOf, ProbeFork, ReadPage, ReadStep,
        SoftDeleted,
    };
    let text = |status: StatusCode, what: String| (status, format!("{what}\n")).into_response();
    let Some((group, kind)) = rest.split_once('/') else {
        return text(StatusCode::NOT_FOUND, "no such question".to_owned());
    };
    let Ok(group) = group.parse::<usize>() else {
        return text(StatusCode::NOT_FOUND, "no such group".to_owned());
    };
    // A question is small: a listing's cursor and prefix at most.
    let (body, _lease) = match peer_body(state, request, 64 << 10).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let engine = &state.engine;
    let answer = match kind {
        BucketExists::KIND => engine.answer_here::<BucketExists>(group, &body).await,
        BucketUsage::KIND => engine.answer_here::<BucketUsage>(group, &body).await,
        SoftDeleted::KIND => engine.answer_here::<SoftDeleted>(group, &body).await,
        ProbeFork::KIND => engine.answer_here::<ProbeFork>(group, &body).await,
        ReadStep::KIND => engine.answer_read_step(group, &body).await,
        ReadPage::KIND => engine.answer_read(group, &body).await,
        HeadOf::KIND => engine.answer_head(group, &body).await,
        crate::listing::ListScan::KIND => {
            engine
                .answer_here::<crate::listing::ListScan>(group, &body)
                .await
        }
        _ => return text(StatusCode::NOT_FOUND, format!("no question {kind}")),
    };
    match answer {
        Ok(json) => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/msgpack")],
            json,
        )
            .into_response(),
        Err(e @ AnswerError::NoSuchGroup(_)) => text(StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ AnswerError::Malformed { .. }) => text(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e @ (AnswerError::NotHeld(_) | AnswerError::NotLeader(_) | AnswerError::Engine(_))) => {
            text(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }
    }
}
