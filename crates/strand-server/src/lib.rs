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

pub mod body;
pub mod config;
pub mod cors;
pub mod errors;
pub mod headers;
pub mod json_mode;
pub mod live;
pub mod offsets;
pub mod query;
pub mod routes;
pub mod sse;
pub mod state;
pub mod time;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use strand::MachineOptions;
use strand_engine::{Engine, EngineConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use config::Config;
pub use state::AppState;

/// Builds the application: routes, CORS and request logging, over an
/// engine.
pub fn app(config: Arc<Config>, engine: Engine, shutdown: watch::Receiver<bool>) -> Router {
    let state = AppState {
        config,
        engine,
        shutdown,
    };
    routes::router(state)
        .layer(middleware::from_fn(cors::layer))
        .layer(middleware::from_fn(log_request))
}

async fn log_request(request: Request<Body>, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status();
    if status.is_server_error() {
        tracing::warn!(%method, %path, status = status.as_u16(), "request failed");
    } else {
        tracing::debug!(
            %method,
            %path,
            status = status.as_u16(),
            micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "request"
        );
    }
    response
}

/// The engine configuration a server configuration asks for.
pub fn engine_config(config: &Config) -> EngineConfig {
    EngineConfig {
        groups: config.groups.max(1),
        queue_depth: config.group_queue_depth.max(1),
        max_waiters: config.max_live_readers,
        // Every group runs the corrected profile (docs/profiles.md).
        machine: MachineOptions::corrected(),
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
    let (stop_tx, stop_rx) = watch::channel(false);
    let router = app(Arc::new(config), engine.clone(), stop_rx);
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
