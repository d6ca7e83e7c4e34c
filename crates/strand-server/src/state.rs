//! What every handler shares.

use std::sync::Arc;

use strand::BucketStreamId;
use strand_engine::Engine;
use tokio::sync::watch;

use crate::auth::Verifier;
use crate::config::Config;
use crate::cors::Origins;
use crate::limits::Limits;

/// What every request is served with: the node's [`Shared`] state and the
/// listener the request came in on. A clone is one reference count: a
/// connection clones it per request, and each handler's future holds it
/// (the futures hyper moves per request stay small).
#[derive(Clone)]
pub struct AppState {
    shared: Arc<Shared>,
    /// Which listener the request came in on.
    pub plane: Plane,
}

impl AppState {
    /// The state of the client listener.
    pub fn new(shared: Shared) -> Self {
        Self {
            shared: Arc::new(shared),
            plane: Plane::Client,
        }
    }

    /// The same state for requests that come in on `plane`.
    #[must_use]
    pub fn on(&self, plane: Plane) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            plane,
        }
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

/// The server's shared state: configuration, the engine, and the signal
/// that ends live reads at shutdown.
pub struct Shared {
    /// The configuration.
    pub config: Arc<Config>,
    /// The node's groups.
    pub engine: Engine,
    /// The Raft side of a durable node (peer messages, counters); `None`
    /// in memory.
    pub raft: Option<strand_raft::RaftNode>,
    /// Becomes `true` when the server starts shutting down.
    pub shutdown: watch::Receiver<bool>,
    /// The token verifier; `None` when authentication is off.
    pub verifier: Option<Arc<Verifier>>,
    /// The cluster token (`--cluster-token-file`) the Raft routes need;
    /// `None` when none is configured.
    pub cluster_token: Option<Arc<str>>,
    /// Which origins browsers may read responses from.
    pub origins: Arc<Origins>,
    /// Per-token request rate and live-reader limits.
    pub limits: Arc<Limits>,
    /// The cold tier (`--cold-dir`, `--cold-url`), if configured.
    pub cold: Option<strand_cold::ColdTier>,
    /// The data directory's free-space reserve; `None` in memory.
    pub disk: Option<Arc<strand_cold::DiskSpace>>,
    /// The server's own counters (`GET /metrics`).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The node's subscriptions (`/v1/stream/__ds/`).
    pub subs: Arc<crate::subs::Subscriptions>,
    /// The node's budget for request bodies (`--max-body-memory-bytes`).
    pub bodies: Arc<crate::body::BodyBudget>,
    /// The node's budget for its peers' Raft messages
    /// (`--max-peer-body-memory-bytes`), apart from clients' bodies.
    pub peer_bodies: Arc<crate::body::BodyBudget>,
    /// The client listener's URL (`--public-url`, else the address it is
    /// bound to), once the server listens.
    pub client_url: Option<Arc<str>>,
}

/// The listener a request came in on, which decides the routes it may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plane {
    /// The client listener (`--listen`): every route; the operator routes
    /// only with authentication on.
    Client,
    /// The admin listener (`--admin-listen`): the operator routes and
    /// health only.
    Admin,
}

/// How long a write that finds the hot memory full waits for the flushes
/// to make room before it is refused: a burst slows writers down rather
/// than failing them, and a node that cannot keep up still answers 503
/// within this bound. The waiting bodies are held in memory, at most half
/// the hot limit's bytes of them ([`strand_cold::ColdTier::admit_waiting`]).
pub const HOT_FULL_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Shared {
    /// Lets a write of `bytes` hot bytes into the group of `id` in under
    /// `--max-hot-bytes` and `--max-group-hot-bytes`, waiting up to
    /// [`HOT_FULL_WAIT`] for the flushes to make room, or refuses it with
    /// 503 and `Retry-After: 1` while flushing catches up (413 when it
    /// could never fit), or with 507 while the data directory's disk is
    /// within `--min-free-disk-bytes` of full.
    pub async fn admit(
        &self,
        id: &BucketStreamId,
        bytes: usize,
    ) -> Result<Option<strand_cold::TierAdmission<'_>>, crate::errors::ApiError> {
        use axum::http::StatusCode;
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        let group = self.engine.group_for(id);
        if self.raft.as_ref().is_some_and(|raft| !raft.holds(group)) {
            // The group's leader on another node takes the write, under
            // its own limits (`strand_raft::ForwardedGate`).
            return Ok(None);
        }
        if let Some(disk) = &self.disk
            && let Err(low) = disk.admit(bytes)
        {
            return Err(crate::errors::ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                format!(
                    "the data directory's disk has {} bytes free, less than the {} kept free \
                     (--min-free-disk-bytes) after this write; writes resume once space is \
                     freed, and reads go on",
                    low.free, low.reserve
                ),
            )
            .with_header(axum::http::header::RETRY_AFTER, "5"));
        }
        let Some(cold) = &self.cold else {
            return Ok(None);
        };
        let (status, message) = match cold.admit_waiting(group, bytes, HOT_FULL_WAIT).await {
            Ok(admission) => return Ok(Some(admission)),
            Err(refusal) => refused(cold, refusal),
        };
        let error = crate::errors::ApiError::new(status, message);
        Err(if status == StatusCode::SERVICE_UNAVAILABLE {
            error.with_header(axum::http::header::RETRY_AFTER, "1")
        } else {
            error
        })
    }
}

/// What a refusal of the hot-memory limits answers: its status and why.
pub(crate) fn refused(
    cold: &strand_cold::ColdTier,
    refusal: strand_cold::Refusal,
) -> (axum::http::StatusCode, &'static str) {
    use axum::http::StatusCode;
    use strand_cold::Refusal;
    match refusal {
        // It would never fit: waiting cannot help.
        Refusal::NodeTooLarge => (
            StatusCode::PAYLOAD_TOO_LARGE,
            "the body holds more bytes than the node's hot-memory limit (--max-hot-bytes)",
        ),
        Refusal::GroupTooLarge => (
            StatusCode::PAYLOAD_TOO_LARGE,
            "the body holds more bytes than a group's hot-memory limit (--max-group-hot-bytes)",
        ),
        Refusal::NodeFull if cold.failing() => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the node's hot memory is full (--max-hot-bytes) and the tier below it cannot \
             take bytes now (a full disk or an unreachable store: see GET /__strand/cold); \
             reads go on",
        ),
        Refusal::GroupFull if cold.failing() => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the stream's group's hot memory is full (--max-group-hot-bytes) and the tier \
             below it cannot take bytes now (a full disk or an unreachable store: see \
             GET /__strand/cold); reads go on",
        ),
        Refusal::NodeFull => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the node's hot memory is full (--max-hot-bytes); the cold tier is catching up",
        ),
        Refusal::GroupFull => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the stream's group's hot memory is full (--max-group-hot-bytes); the cold tier is catching up",
        ),
    }
}
