//! strand-server: the Durable Streams HTTP protocol on strand's state
//! machines.
//!
//! It owns HTTP: request parsing and validation (`headers`, `query`,
//! `offsets`, `body`), the JSON mode's wire form (`json_mode`), SSE framing
//! (`sse`), live reads (`live`), CORS and security headers (`cors`), the
//! status mapping (`errors`) and the routes (`routes`: the Durable Streams
//! mount, the bucketed layout, the admin plane). State, concurrency and
//! wake-ups belong to `strand-engine`; this crate never touches a machine
//! directly.

pub mod auth;
pub mod body;
pub mod config;
pub mod cors;
pub mod errors;
pub mod headers;
pub mod json_mode;
pub mod limits;
pub mod live;
pub mod offsets;
pub mod query;
pub mod routes;
pub mod sse;
pub mod state;
pub mod time;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use strand_engine::{Engine, EngineConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use config::{Cli, Command, Config};
pub use state::AppState;

/// Builds the application (routes, CORS and request logging) over an
/// engine.
pub fn app(
    config: Arc<Config>,
    engine: Engine,
    shutdown: watch::Receiver<bool>,
    verifier: Option<auth::Verifier>,
) -> Router {
    let origins = cors::Origins::for_config(&config.cors_origin, config.listen.ip().is_loopback());
    routes::router(AppState {
        engine,
        shutdown,
        limits: Arc::new(limits::Limits::new(
            config.rate_limit_per_token,
            config.max_live_readers_per_token,
        )),
        verifier: verifier.map(Arc::new),
        origins: Arc::new(origins),
        config,
    })
}

/// The engine configuration a server configuration asks for.
pub fn engine_config(config: &Config) -> EngineConfig {
    EngineConfig {
        groups: config.groups.max(1),
        queue_depth: config.group_queue_depth.max(1),
        max_waiters: config.max_live_readers,
    }
}

/// Serves on `listener` until `signal` completes: then stops accepting,
/// ends live reads, lets in-flight requests finish, and stops the engine.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let engine = Engine::start(engine_config(&config));
    serve_with_engine(config, listener, engine, signal).await
}

/// [`serve`] with an engine the caller built (tests inject a clock).
pub async fn serve_with_engine(
    config: Config,
    listener: TcpListener,
    engine: Engine,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let verifier = config.verifier().map_err(std::io::Error::other)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let router = app(Arc::new(config), engine.clone(), stop_rx, verifier);
    let graceful = async move {
        signal.await;
        let _ = stop_tx.send(true);
    };
    let result = axum::serve(listener, router)
        .with_graceful_shutdown(graceful)
        .await;
    engine.shutdown().await;
    result
}
