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
    /// Which origins browsers may read responses from.
    pub origins: Arc<Origins>,
    /// Per-token request rate and live-reader limits.
    pub limits: Arc<Limits>,
}
