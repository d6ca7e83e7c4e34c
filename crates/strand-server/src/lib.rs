//! strand-server: the Durable Streams HTTP protocol on strand's state
//! machines.
//!
//! It owns HTTP: the configuration from the command line (`config`),
//! connections below HTTP with their timeouts (`conn`) and TLS (`tls`),
//! request parsing and validation (`headers`, `query`, `offsets`, `body`),
//! stream names under the mount and their ids (`names`), the stream a
//! request targets (`target`), read answers' bodies (`page`), the
//! protocol's subscriptions (`subs`),
//! the JSON mode's wire form (`json_mode`), SSE framing (`sse`), live
//! reads (`live`), instants in headers and the long-poll cursor (`time`),
//! CORS and security headers (`cors`), tokens and rights (`auth`),
//! per-token rate and reader limits (`limits`), the status mapping
//! (`errors`), small response builders (`reply`), Prometheus metrics
//! (`metrics`), what every handler
//! shares (`state`) and the routes
//! (`routes`: the Durable Streams mount, the bucketed layout, the admin
//! plane, the Raft transport). State, concurrency and
//! wake-ups belong to `strand-engine`, object storage and the flush and GC
//! workers to `strand-cold`; this crate never touches a machine directly.
//!
//! Public modules are the ones other programs use (the binary, the tests,
//! the fuzz checks); the rest are private, so `unreachable_pub` and the
//! dead-code lints see every item that nothing uses.

pub mod auth;
pub mod body;
pub mod config;
mod conn;
mod console;
pub mod cors;
mod errors;
pub mod headers;
pub mod json_mode;
mod lean;
pub mod limits;
mod listing;
mod live;
mod log_limit;
pub mod metrics;
mod names;
pub mod offsets;
mod page;
pub mod proxy;
pub mod query;
mod reply;
pub mod routes;
pub mod sse;
pub mod state;
pub mod subs;
mod target;
pub mod time;
pub mod tls;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as AutoBuilder;
use hyper_util::server::graceful::GracefulShutdown;
use strand::MachineOptions;
use strand_engine::{Engine, EngineConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use config::{Cli, Command, Config};
pub use state::AppState;

/// A started node: its engine and, for a durable node, its Raft side
/// (the peers' messages, the log and network counters in health).
#[derive(Debug, Clone)]
pub struct Node {
    /// The node's groups.
    pub engine: Engine,
    /// The Raft side of a durable node; `None` in memory.
    pub raft: Option<strand_raft::RaftNode>,
}

impl From<Engine> for Node {
    fn from(engine: Engine) -> Self {
        Self { engine, raft: None }
    }
}

impl From<strand_raft::RaftNode> for Node {
    fn from(raft: strand_raft::RaftNode) -> Self {
        Self {
            engine: raft.engine().clone(),
            raft: Some(raft),
        }
    }
}

/// Builds the application (routes, CORS and request logging) over a
/// node's engine (an [`Engine`] or a started [`Node`]).
pub fn app(
    config: Arc<Config>,
    node: impl Into<Node>,
    shutdown: watch::Receiver<bool>,
    verifier: Option<auth::Verifier>,
    cold: Option<strand_cold::ColdTier>,
    cluster_token: Option<String>,
) -> Router {
    routes::router(app_state(
        config,
        node.into(),
        shutdown,
        verifier,
        cold,
        cluster_token,
        None,
    ))
}

/// The state every request is served with (see [`app`]).
fn app_state(
    config: Arc<Config>,
    Node { engine, raft }: Node,
    shutdown: watch::Receiver<bool>,
    verifier: Option<auth::Verifier>,
    cold: Option<strand_cold::ColdTier>,
    cluster_token: Option<String>,
    client_url: Option<String>,
) -> AppState {
    let origins = cors::Origins::for_config(&config.cors_origin, config.listen.ip().is_loopback());
    // The engine reads below its hot buffers through the cold tier: a
    // stream's own reads and a fork's reads through its sources alike.
    if let Some(tier) = &cold {
        tier.install(&engine);
        // What other nodes forward to this node's groups passes the same
        // hot-memory limits as what its own clients write.
        if let Some(raft) = &raft {
            let tier = tier.clone();
            raft.set_forwarded_gate(Arc::new(move |group, bytes| {
                match tier.admit_owned(group, bytes) {
                    Ok(admitted) => Ok(Box::new(admitted) as Box<dyn Send>),
                    Err(refusal) => Err(state::refused(&tier, refusal).1.to_owned()),
                }
            }));
        }
    }
    let subs = subs::Subscriptions::new(
        engine.clone(),
        &config.default_bucket,
        config.webhook_policy(),
    );
    // The dispatcher links written streams to subscriptions and delivers
    // their wakes; it ends with the server.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(Arc::clone(&subs).run(shutdown.clone()));
    }
    AppState::new(state::Shared {
        engine,
        raft,
        metrics: Arc::new(metrics::Metrics::new()),
        bodies: Arc::new(body::BodyBudget::new(config.max_body_memory_bytes)),
        peer_bodies: Arc::new(body::BodyBudget::for_peers(
            config.max_peer_body_memory_bytes,
        )),
        shutdown,
        subs,
        limits: Arc::new(limits::Limits::new(
            config.rate_limit_per_token,
            config.max_live_readers_per_token,
        )),
        verifier: verifier.map(Arc::new),
        cluster_token: cluster_token.map(Arc::from),
        origins: Arc::new(origins),
        disk: config
            .effective_data_dir()
            .filter(|_| config.min_free_disk_bytes > 0)
            .map(|dir| {
                Arc::new(strand_cold::DiskSpace::new(
                    &dir,
                    config.min_free_disk_bytes,
                ))
            }),
        config,
        cold,
        client_url: client_url.map(Arc::from),
    })
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

/// Starts the engine a configuration asks for: durable in its data
/// directory (recovering the groups' snapshots and logs first; the
/// directory is created if missing), or in memory with `--memory`.
///
/// # Errors
/// A durable node that cannot start (a damaged log names its file and
/// offset).
pub async fn start_engine(config: &Config) -> Result<Node, String> {
    start_engine_with(config, None).await
}

/// [`start_engine`] for the cold tier `cold` will serve beside it: a
/// cluster node's own copy of its flushed bytes
/// ([`strand_cold::ColdTier::replica`]) must meet the engine before the
/// logs replay.
///
/// # Errors
/// As [`start_engine`].
pub async fn start_engine_with(
    config: &Config,
    cold: Option<&strand_cold::ColdTier>,
) -> Result<Node, String> {
    let engine_config = engine_config(config);
    match &config.effective_data_dir() {
        None if !config.peers.is_empty() || config.join.is_some() => {
            Err("--peer and --join need a data directory: drop --memory".to_owned())
        }
        None => Ok(Engine::start(engine_config).into()),
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create the data directory {}: {e}", dir.display()))?;
            let mut options = strand_raft::DurableOptions::new(dir);
            options.fsync = match config.fsync {
                config::FsyncMode::Always => strand_raft::Fsync::Always,
                config::FsyncMode::Never => strand_raft::Fsync::Never,
            };
            options.snapshot_every = config.snapshot_every.max(1);
            options.snapshot_log_bytes = config.snapshot_log_bytes.max(1);
            options.snapshot_chunk_bytes = config.snapshot_chunk_bytes;
            options.node_id = config.node_id;
            options.peers = config.peers.iter().cloned().collect();
            if options.peers.len() != config.peers.len() {
                return Err("a --peer node id is given twice".to_owned());
            }
            options.cluster_token = config.cluster_token()?;
            options.balance_interval = (config.leader_balance_interval_ms > 0)
                .then(|| std::time::Duration::from_millis(config.leader_balance_interval_ms));
            options.replication_factor = config.replication_factor;
            options.dead_node_timeout = (config.dead_node_timeout_ms > 0)
                .then(|| std::time::Duration::from_millis(config.dead_node_timeout_ms));
            options.join.clone_from(&config.join);
            options.advertise.clone_from(&config.advertise_url);
            options.segment_replica = cold
                .and_then(strand_cold::ColdTier::replica)
                .map(|r| Arc::new(r.clone()) as Arc<dyn strand_engine::SegmentReplica>);
            if (options.peers.len() > 1 || options.join.is_some())
                && options.cluster_token.is_none()
                && (config.auth_secret_file.is_some() || config.auth_jwks_file.is_some())
            {
                // Without a cluster secret the Raft routes would be the
                // one open door of an authenticated cluster.
                return Err(
                    "--peer with authentication needs --cluster-token-file: the Raft traffic under /__strand/raft/ is authenticated with the cluster token"
                        .to_owned(),
                );
            }
            strand_raft::start_durable(
                engine_config,
                Arc::new(strand_engine::SystemClock),
                &options,
            )
            .await
            .map(Node::from)
            .map_err(|e| format!("--data-dir {}: {e}", dir.display()))
        }
    }
}

/// Sets `--advertise-url` (the address a cluster's members reach this
/// node at) to `http://ADDR` of the client listener when it is not given
/// and the listener has a specific address.
pub fn advertise_by_default(config: &mut Config, addr: std::net::SocketAddr) {
    if config.advertise_url.is_none() && !addr.ip().is_unspecified() {
        config.advertise_url = Some(format!("http://{addr}"));
    }
}

/// Connections the kernel queues before the server accepts them (it caps
/// the figure at `net.core.somaxconn`). tokio's `TcpListener::bind` asks
/// for 1024; a thousand clients connecting at once overflowed that queue,
/// and each overflowed connect waited a 1 s SYN retry.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds the server's listening socket (address reuse on, as
/// `TcpListener::bind` does) with a [`LISTEN_BACKLOG`]-deep accept queue.
///
/// # Errors
///
/// The socket, bind or listen error.
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// The sockets a server accepts connections on: the client listener
/// (every route) and, with `--admin-listen`, the admin listener (the
/// operator routes and health only).
#[derive(Debug)]
pub struct Listeners {
    /// Where clients connect.
    pub client: TcpListener,
    /// Where operators connect, if a second listener is configured.
    pub admin: Option<TcpListener>,
}

impl From<TcpListener> for Listeners {
    fn from(client: TcpListener) -> Self {
        Self {
            client,
            admin: None,
        }
    }
}

/// Serves on `listeners` until `signal` completes: then stops accepting,
/// ends live reads, lets in-flight requests finish, and stops the engine.
pub async fn serve(
    config: Config,
    listeners: impl Into<Listeners>,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let cold = config.cold_tier().map_err(std::io::Error::other)?;
    let listeners = listeners.into();
    let mut config = config;
    if let Ok(addr) = listeners.client.local_addr() {
        advertise_by_default(&mut config, addr);
    }
    let node = start_engine_with(&config, cold.as_ref())
        .await
        .map_err(std::io::Error::other)?;
    serve_with_cold(config, listeners, node, cold, signal).await
}

/// [`serve`] with an engine (or [`Node`]) the caller built (tests inject a
/// clock); the cold tier is the one the configuration asks for.
pub async fn serve_with_engine(
    config: Config,
    listeners: impl Into<Listeners>,
    engine: impl Into<Node>,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let cold = config.cold_tier().map_err(std::io::Error::other)?;
    serve_with_cold(config, listeners, engine, cold, signal).await
}

/// [`serve_with_engine`] with a cold tier the caller built (tests wrap
/// its backend): its workers run beside the engine while the server does.
pub async fn serve_with_cold(
    config: Config,
    listeners: impl Into<Listeners>,
    node: impl Into<Node>,
    cold: Option<strand_cold::ColdTier>,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let node = node.into();
    let engine = node.engine.clone();
    let listeners = listeners.into();
    let verifier = config.verifier().map_err(std::io::Error::other)?;
    config
        .check_admin_listen(verifier.is_some())
        .map_err(std::io::Error::other)?;
    config.check_limits().map_err(std::io::Error::other)?;
    let cluster_token = config.cluster_token().map_err(std::io::Error::other)?;
    let tls = tls::acceptor(&config).map_err(std::io::Error::other)?;
    if let Some(tier) = &cold {
        tier.check_segments(&engine)
            .await
            .map_err(std::io::Error::other)?;
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let workers = cold.as_ref().map(|c| c.start(&engine));
    let client_url = match (&config.public_url, listeners.client.local_addr()) {
        (Some(public), _) => Some(public.trim_end_matches('/').to_owned()),
        (None, Ok(addr)) => {
            let scheme = if tls.is_some() { "https" } else { "http" };
            Some(format!("{scheme}://{addr}"))
        }
        (None, Err(_)) => None,
    };
    let state = app_state(
        Arc::new(config),
        node,
        stop_rx,
        verifier,
        cold,
        cluster_token,
        client_url,
    );
    let acceptor = Acceptor {
        connections: Arc::new(tokio::sync::Semaphore::new(
            state.config.max_connections.max(1),
        )),
        refusals: Arc::new(log_limit::LogLimit::new(1_000)),
        graceful: GracefulShutdown::new(),
        tls,
        timeouts: state.config.timeouts(),
        engine: state.config.http_engine,
        lean_stop: watch::channel(false).0,
    };
    let admin_state = state.on(state::Plane::Admin);
    let mut signal = std::pin::pin!(signal);
    {
        let client = acceptor.accept_loop(listeners.client, state);
        let admin = async {
            match listeners.admin {
                Some(listener) => acceptor.accept_loop(listener, admin_state).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut signal => {}
            () = client => {}
            () = admin => {}
        }
    }
    // Stop accepting (the listeners are gone), end live reads, let
    // in-flight requests finish, then stop the groups.
    let _ = stop_tx.send(true);
    acceptor.lean_stop.send_replace(true);
    acceptor.graceful.shutdown().await;
    // Every lean connection holds a receiver until it ends.
    acceptor.lean_stop.closed().await;
    if let Some(workers) = workers {
        workers.stop().await;
    }
    engine.shutdown().await;
    Ok(())
}

/// What the accept loops of one server share.
struct Acceptor {
    connections: Arc<tokio::sync::Semaphore>,
    /// Connections refused at the connection limit: logged at most once a
    /// second.
    refusals: Arc<log_limit::LogLimit>,
    graceful: GracefulShutdown,
    tls: Option<tokio_rustls::TlsAcceptor>,
    timeouts: conn::Timeouts,
    /// `--http-engine`: who serves plaintext HTTP/1.1.
    engine: config::HttpEngine,
    /// Turns true when the server stops: lean connections then close once
    /// their request in service is answered (hyper's are told by
    /// `graceful`).
    lean_stop: watch::Sender<bool>,
}

impl Acceptor {
    /// Accepts connections on `listener` and serves each with `state` until
    /// the future is dropped.
    async fn accept_loop(&self, listener: TcpListener, state: AppState) {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // Out of descriptors and the like: back off, go on.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = Arc::clone(&self.connections).try_acquire_owned() else {
                if let Some(held_back) = self.refusals.admit(std::time::Instant::now()) {
                    tracing::warn!(
                        limit = state.config.max_connections,
                        refused = held_back + 1,
                        "connection limit reached (--max-connections); closing new connections"
                    );
                }
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let watch = conn::Watch::new();
            let io = conn::WatchedIo::new(stream, Arc::clone(&watch), permit);
            // The routes are matched in `routes::serve`; a hyper service
            // calls it straight, with no axum router in between.
            let state = state.clone();
            let service_watch = Arc::clone(&watch);
            let lean = (self.tls.is_none() && self.engine == config::HttpEngine::Lean)
                .then(|| (state.clone(), self.lean_stop.subscribe()));
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let state = state.clone();
                let guard = service_watch.request();
                let request = request.map(|body| {
                    axum::body::Body::new(conn::TrackedBody::new(body, &service_watch))
                });
                async move {
                    // Boxed: hyper moves the service's future into its
                    // dispatcher, and the routes' future is kilobytes.
                    let response = Box::pin(routes::serve(state, request)).await;
                    Ok::<_, Infallible>(response.map(|body| conn::Guarded::new(body, guard)))
                }
            });
            let lean_stop = lean.as_ref().map(|(_, stop)| stop.clone());
            let watcher = self.graceful.watcher();
            let tls = self.tls.clone();
            let timeouts = self.timeouts;
            tokio::spawn(async move {
                let mut builder = AutoBuilder::new(TokioExecutor::new());
                // A client that shuts its side after sending a request
                // still gets the answer.
                builder
                    .http1()
                    .half_close(true)
                    .max_buf_size(conn::MAX_CONNECTION_BUFFER);
                let served = async {
                    if let Some((state, stop)) = &lean {
                        let mut io = io;
                        return match lean::serve(&mut io, &watch, state, stop).await {
                            Ok(lean::Served::Done) => Ok(()),
                            Ok(lean::Served::Http2(read)) => {
                                let conn =
                                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                                        .serve_connection(
                                            TokioIo::new(lean::Rewound::new(read, io)),
                                            service,
                                        );
                                watcher.watch(conn).await.map_err(Into::into)
                            }
                            Err(e) => Err(e.into()),
                        };
                    }
                    match tls {
                        None => {
                            let conn =
                                builder.serve_connection_with_upgrades(TokioIo::new(io), service);
                            watcher.watch(conn.into_owned()).await
                        }
                        Some(acceptor) => match acceptor.accept(io).await {
                            Ok(tls_stream) => {
                                let conn = builder.serve_connection_with_upgrades(
                                    TokioIo::new(tls_stream),
                                    service,
                                );
                                watcher.watch(conn.into_owned()).await
                            }
                            Err(e) => {
                                tracing::debug!(error = %e, "TLS handshake failed");
                                Ok(())
                            }
                        },
                    }
                };
                tokio::select! {
                    result = served => {
                        if let Err(e) = result {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                    }
                    why = watch.expired(timeouts) => {
                        tracing::debug!(reason = why.as_str(), "connection closed");
                    }
                    () = idle_after_stop(&watch, lean_stop) => {
                        tracing::debug!("idle connection closed: the server stops");
                    }
                }
            });
        }
    }
}

/// Completes when a lean connection (`stop` is its receiver) may be closed
/// because the server stops; never for hyper's (`None`), which its
/// graceful shutdown closes.
async fn idle_after_stop(watch: &conn::Watch, stop: Option<watch::Receiver<bool>>) {
    match stop {
        Some(mut stop) => watch.idle_after(&mut stop).await,
        None => std::future::pending().await,
    }
}
