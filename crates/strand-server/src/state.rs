//! What every handler shares.

use std::sync::Arc;

use strand_engine::Engine;
use tokio::sync::watch;

use crate::auth::Verifier;
use crate::config::Config;
use crate::cors::Origins;
use crate::limits::Limits;

/// The server's shared state: configuration, the engine, and the signal
/// that ends live reads at shutdown.
#[derive(Clone)]
pub struct AppState {
    /// The configuration.
    pub config: Arc<Config>,
    /// The node's groups.
    pub engine: Engine,
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
}

impl AppState {
    /// Lets a write of `bytes` hot bytes in under `--max-hot-bytes`, or
    /// refuses it with 503 and `Retry-After: 1` while flushing catches up
    /// (413 when it could never fit).
    pub fn admit(
        &self,
        bytes: usize,
    ) -> Result<Option<strand_cold::Admission<'_>>, crate::errors::ApiError> {
        let Some(cold) = &self.cold else {
            return Ok(None);
        };
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        if cold.budget().limit().is_some_and(|limit| bytes > limit) {
            // It would never fit: waiting cannot help.
            return Err(crate::errors::ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "the body holds more bytes than the node's hot-memory limit (--max-hot-bytes)",
            ));
        }
        match cold.budget().admit(bytes) {
            Some(admission) => Ok(Some(admission)),
            None => Err(crate::errors::ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "the node's hot memory is full (--max-hot-bytes); the cold tier is catching up",
            )
            .with_header("retry-after", "1")),
        }
    }
}
