//! Request bodies, read whole up to the configured limit, inside the
//! node-wide budget ([`BodyBudget`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::errors::ApiError;

/// Bodies up to this size are copied into a buffer of their own.
///
/// hyper hands a small body over as a slice of the connection's read
/// buffer. Appends keep their bytes in the hot buffer, so a kept slice
/// would pin that whole buffer (8 KiB or more for a 256-byte append) and
/// make hyper allocate a fresh one for the next request: measured, a third
/// of the server's CPU went to faulting in those pages. One copy of a small
/// body is far cheaper. Larger bodies arrive in several frames, which
/// `to_bytes` already gathers into one buffer of their own.
pub(crate) const COPY_BELOW: usize = 1 << 20;

/// How long a request waits for room in the node's body budget
/// (`--max-body-memory-bytes`) before it is refused with 503: a burst of
/// large uploads slows down rather than failing, and a node that stays
/// full still answers within this bound.
pub(crate) const BODY_BUDGET_WAIT: Duration = Duration::from_secs(1);

/// The node's budget for request bodies: the bytes of the bodies being
/// received, and held by their requests until each is answered, together
/// at most `--max-body-memory-bytes`. Without it every connection could
/// hold a body of `--max-body-bytes` at once.
#[derive(Debug)]
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    limit: usize,
    refused: AtomicU64,
    /// The flag that sets the limit, named in refusals.
    flag: &'static str,
}

impl BodyBudget {
    /// A budget of `limit` bytes for clients' request bodies
    /// (`--max-body-memory-bytes`).
    #[must_use]
    pub fn new(limit: usize) -> Self {
        Self::with_flag(limit, "--max-body-memory-bytes")
    }

    /// A budget of `limit` bytes for peers' Raft messages
    /// (`--max-peer-body-memory-bytes`).
    #[must_use]
    pub fn for_peers(limit: usize) -> Self {
        Self::with_flag(limit, "--max-peer-body-memory-bytes")
    }

    /// A budget of `limit` bytes, set by `flag` (named in refusals).
    fn with_flag(limit: usize, flag: &'static str) -> Self {
        let limit = limit.min(Semaphore::MAX_PERMITS);
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
            refused: AtomicU64::new(0),
            flag,
        }
    }

    /// Bytes of request bodies held now.
    pub fn held(&self) -> usize {
        self.limit.saturating_sub(self.permits.available_permits())
    }

    /// Requests refused because the budget stayed full.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Reads a body of at most `limit` bytes inside the budget; a longer
    /// one is 413 and is not buffered beyond the limit, and one that finds
    /// no room within [`BODY_BUDGET_WAIT`] is 503 with `Retry-After: 1`.
    /// The result owns its allocation (see [`COPY_BELOW`]); its bytes stay
    /// counted until the returned [`BodyLease`] is dropped.
    pub(crate) async fn read(
        &self,
        body: Body,
        limit: usize,
    ) -> Result<(Bytes, BodyLease), ApiError> {
        self.read_body(body, limit, true).await
    }

    /// [`BodyBudget::read`] for a body that is decoded and dropped, not
    /// kept (a peer's Raft message): a small body stays a slice of the
    /// connection's buffer rather than being copied out of it.
    pub(crate) async fn read_transient(
        &self,
        body: Body,
        limit: usize,
    ) -> Result<(Bytes, BodyLease), ApiError> {
        self.read_body(body, limit, false).await
    }

    async fn read_body(
        &self,
        body: Body,
        limit: usize,
        copy_small: bool,
    ) -> Result<(Bytes, BodyLease), ApiError> {
        let mut lease = BodyLease {
            permit: None,
            bytes: 0,
        };
        let mut body = body;
        // A body that announces its length is reserved whole and at once,
        // so requests never hold part of the budget while waiting for more.
        if let Some(exact) = axum::body::HttpBody::size_hint(&body).exact() {
            let exact = usize::try_from(exact).unwrap_or(usize::MAX);
            if exact > limit {
                return Err(too_large(limit));
            }
            self.grow(&mut lease, exact).await?;
        }
        let mut first: Option<Bytes> = None;
        let mut rest: Option<BytesMut> = None;
        let mut total = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                ApiError::bad_request(format!("could not read the request body: {e}"))
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            total = total.saturating_add(data.len());
            if total > limit {
                return Err(too_large(limit));
            }
            let missing = total.saturating_sub(lease.bytes);
            self.grow(&mut lease, missing).await?;
            match (&mut first, &mut rest) {
                (None, None) => first = Some(data),
                (Some(head), None) => {
                    let mut joined = BytesMut::with_capacity(lease.bytes.max(total));
                    joined.extend_from_slice(head);
                    joined.extend_from_slice(&data);
                    first = None;
                    rest = Some(joined);
                }
                (_, Some(joined)) => joined.extend_from_slice(&data),
            }
        }
        let bytes = match (first, rest) {
            (_, Some(joined)) => joined.freeze(),
            (Some(one), None) if copy_small && one.len() < COPY_BELOW => {
                Bytes::copy_from_slice(&one)
            }
            (Some(one), None) => one,
            (None, None) => Bytes::new(),
        };
        Ok((bytes, lease))
    }

    /// Adds `more` bytes to `lease`, waiting up to [`BODY_BUDGET_WAIT`].
    async fn grow(&self, lease: &mut BodyLease, more: usize) -> Result<(), ApiError> {
        if more == 0 {
            return Ok(());
        }
        let refuse = |budget: &Self| {
            budget.refused.fetch_add(1, Ordering::Relaxed);
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the node is receiving more request bodies than it holds at once \
                     ({} bytes, {}); try again",
                    budget.limit, budget.flag
                ),
            )
            .with_header(axum::http::header::RETRY_AFTER, "1")
        };
        let Ok(n) = u32::try_from(more) else {
            return Err(refuse(self));
        };
        if lease.bytes.saturating_add(more) > self.limit {
            return Err(refuse(self));
        }
        let permit = match Arc::clone(&self.permits).try_acquire_many_owned(n) {
            Ok(permit) => permit,
            Err(_) => {
                let wait = Arc::clone(&self.permits).acquire_many_owned(n);
                match tokio::time::timeout(BODY_BUDGET_WAIT, wait).await {
                    Ok(Ok(permit)) => permit,
                    _ => return Err(refuse(self)),
                }
            }
        };
        match &mut lease.permit {
            Some(held) => held.merge(permit),
            None => lease.permit = Some(permit),
        }
        lease.bytes += more;
        Ok(())
    }
}

/// A request body's share of the [`BodyBudget`], given back when dropped.
#[derive(Debug)]
pub(crate) struct BodyLease {
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body is larger than {limit} bytes"),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::convert::Infallible;

    use axum::body::Body;
    use axum::http::StatusCode;
    use bytes::Bytes;

    use super::BodyBudget;

    /// A body of `frames` with no length announced (as a chunked upload).
    fn chunked(frames: &[&'static [u8]]) -> Body {
        let frames: Vec<Result<Bytes, Infallible>> =
            frames.iter().map(|f| Ok(Bytes::from_static(f))).collect();
        Body::from_stream(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_body_is_counted_until_its_lease_is_dropped() {
        let budget = BodyBudget::new(100);
        let (bytes, lease) = budget.read(Body::from("0123456789"), 50).await.unwrap();
        assert_eq!(&bytes[..], b"0123456789");
        assert_eq!(budget.held(), 10);
        drop(lease);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn chunked_frames_are_joined_and_counted_as_they_arrive() {
        let budget = BodyBudget::new(100);
        let (bytes, lease) = budget
            .read(chunked(&[b"abc", b"", b"defg", b"h"]), 50)
            .await
            .unwrap();
        assert_eq!(&bytes[..], b"abcdefgh");
        assert_eq!(budget.held(), 8);
        drop(lease);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_413_and_gives_its_bytes_back() {
        let budget = BodyBudget::new(100);
        // Announced: refused before any byte is reserved.
        let err = budget
            .read(Body::from(vec![7u8; 60]), 50)
            .await
            .unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
        // Chunked: refused at the frame that crosses the limit.
        let err = budget
            .read(chunked(&[&[1; 30], &[2; 30]]), 50)
            .await
            .unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(budget.held(), 0);
        assert_eq!(budget.refused(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_budget_refuses_with_503_after_its_wait() {
        let budget = BodyBudget::new(16);
        let (_, held) = budget.read(Body::from(vec![0u8; 12]), 16).await.unwrap();
        let err = budget.read(Body::from(vec![1u8; 8]), 16).await.unwrap_err();
        assert_eq!(err.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            err.message.contains("--max-body-memory-bytes"),
            "{}",
            err.message
        );
        assert!(
            err.headers
                .iter()
                .any(|(name, value)| name == axum::http::header::RETRY_AFTER && value == "1")
        );
        assert_eq!(budget.refused(), 1);
        // The refused request held nothing; the first still holds its bytes.
        assert_eq!(budget.held(), 12);
        drop(held);
        let (bytes, _lease) = budget.read(Body::from(vec![1u8; 8]), 16).await.unwrap();
        assert_eq!(bytes.len(), 8);
    }

    #[tokio::test]
    async fn a_waiting_body_goes_on_once_room_is_freed() {
        let budget = std::sync::Arc::new(BodyBudget::new(16));
        let (_, held) = budget.read(Body::from(vec![0u8; 12]), 16).await.unwrap();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let waiting = tokio::spawn({
            let budget = std::sync::Arc::clone(&budget);
            async move {
                let _ = started_tx.send(());
                budget
                    .read(Body::from(vec![1u8; 8]), 16)
                    .await
                    .map(|(b, _)| b.len())
            }
        });
        started_rx.await.unwrap();
        drop(held);
        assert_eq!(waiting.await.unwrap().unwrap(), 8);
        assert_eq!(budget.refused(), 0);
    }
}
