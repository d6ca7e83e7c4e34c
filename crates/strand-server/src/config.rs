//! The server's configuration, as the command line fills it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

mod file;

pub use file::{KEYS, Key, Kind, LoadError, Loaded, load};

/// strand-server: the Durable Streams HTTP protocol on strand's state
/// machine, durable on disk (`./strand-data` or `--data-dir`) or in memory
/// (`--memory`).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "strand-server",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Serve (the default) with this configuration.
    #[command(flatten)]
    pub config: Config,
    /// Read settings from this TOML file (every flag has a key; see
    /// `docs/strand.example.toml`). Flags and `STRAND_*` environment
    /// variables override it; an unknown key is refused.
    #[arg(long = "config", value_name = "FILE", env = "STRAND_CONFIG")]
    pub config_file: Option<PathBuf>,
    /// Print the effective configuration (flags over environment over
    /// `--config` file over defaults) as TOML, secrets redacted, and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Or run a tool instead of serving.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Tools beside the server.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Print an HS256 token for operators and scripts.
    Token(TokenArgs),
}

/// `strand-server token`.
#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// The shared secret the server checks tokens with (`--auth-secret-file`).
    #[arg(long)]
    pub secret_file: PathBuf,
    /// The bucket (or `bucket/stream-prefix`, or `*`) the token grants rights on.
    #[arg(long)]
    pub bucket: String,
    /// Comma-separated rights: read, write, admin.
    #[arg(long, value_delimiter = ',', required = true)]
    pub rights: Vec<crate::auth::Right>,
    /// How long the token is valid.
    #[arg(long, default_value_t = 3600)]
    pub ttl_seconds: u64,
    /// Who the token speaks for (the `sub` claim, logged with requests).
    #[arg(long, default_value = "operator")]
    pub subject: String,
}

/// How the server runs.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Address to listen on (loopback by default).
    #[arg(long, env = "STRAND_LISTEN", default_value = "127.0.0.1:4437")]
    pub listen: SocketAddr,
    /// How long an idle long-poll (or an SSE response between keep-alive
    /// controls) waits for data, in milliseconds.
    #[arg(long, env = "STRAND_LONG_POLL_TIMEOUT_MS", default_value_t = 30_000)]
    pub long_poll_timeout_ms: u64,
    /// The bucket that `/v1/stream/{name}` streams live in.
    #[arg(long, env = "STRAND_DEFAULT_BUCKET", default_value = "default")]
    pub default_bucket: String,
    /// Threads that run the server's tasks; 0 = one per CPU this process
    /// may use. With one, the server runs every task on a single thread in
    /// arrival order (tokio's current-thread scheduler): a one-worker
    /// work-stealing scheduler parks the tasks that overflow its 256-slot
    /// queue where they wait many turns, which gave about 1 % of requests
    /// 65 ms of latency under load on one CPU.
    #[arg(long, env = "STRAND_WORKER_THREADS", default_value_t = 0)]
    pub worker_threads: usize,
    /// Number of groups (state machines, one owner task each).
    #[arg(long, env = "STRAND_GROUPS", default_value_t = 4)]
    pub groups: usize,
    /// Largest request body accepted, in bytes (larger ones get 413).
    #[arg(long, env = "STRAND_MAX_BODY_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Bytes of request bodies the node holds at once, being received or
    /// waiting for their answer; a request that finds no room within a
    /// second gets 503 with `Retry-After: 1`. At least --max-body-bytes.
    #[arg(long, env = "STRAND_MAX_BODY_MEMORY_BYTES", default_value_t = 256 * 1024 * 1024)]
    pub max_body_memory_bytes: usize,
    /// Bytes of the cluster's peer messages (Raft traffic) the node holds
    /// at once, apart from clients' bodies so that neither can starve the
    /// other; a message that finds no room within a second gets 503 and
    /// its sender tries again. At least 256 MiB, the largest message.
    #[arg(
        long,
        env = "STRAND_MAX_PEER_BODY_MEMORY_BYTES",
        default_value_t = 512 * 1024 * 1024
    )]
    pub max_peer_body_memory_bytes: usize,
    /// Largest catch-up response page, in bytes (JSON pages grow to hold at
    /// least one whole value).
    #[arg(long, env = "STRAND_MAX_READ_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_read_bytes: usize,
    /// Live readers (long-poll and SSE) parked at once on this node; more
    /// get 503.
    #[arg(long, env = "STRAND_MAX_LIVE_READERS", default_value_t = 10_000)]
    pub max_live_readers: usize,
    /// Requests a group's queue holds before writes get 503.
    #[arg(long, env = "STRAND_GROUP_QUEUE_DEPTH", default_value_t = 4096)]
    pub group_queue_depth: usize,
    /// Turn on authentication with HS256 tokens signed with this shared
    /// secret (every route but `GET /__strand/health` then needs a token).
    #[arg(long, env = "STRAND_AUTH_SECRET_FILE")]
    pub auth_secret_file: Option<PathBuf>,
    /// Turn on authentication with EdDSA / RS256 tokens checked against the
    /// public keys of this JWKS file.
    #[arg(long, env = "STRAND_AUTH_JWKS_FILE")]
    pub auth_jwks_file: Option<PathBuf>,
    /// Serve TLS with this certificate chain (PEM); needs `--tls-key`.
    /// HTTP/2 and HTTP/1.1 are offered by ALPN.
    #[arg(long, env = "STRAND_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, env = "STRAND_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM).
    #[arg(long, env = "STRAND_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,
    /// Most concurrent connections; further ones are closed at once (and
    /// the refusals logged, at most once a second).
    #[arg(long, env = "STRAND_MAX_CONNECTIONS", default_value_t = 20_000)]
    pub max_connections: usize,
    /// Which HTTP/1.1 server serves plaintext connections: `lean` (the
    /// default: strand's own, which spends less CPU per request) or
    /// `hyper` (hyper's server). TLS and HTTP/2 are always served by hyper.
    #[arg(long, env = "STRAND_HTTP_ENGINE", value_enum, default_value_t = HttpEngine::Lean)]
    pub http_engine: HttpEngine,
    /// A request head must arrive whole within this many milliseconds of
    /// its first byte, or the connection is closed.
    #[arg(long, env = "STRAND_REQUEST_HEAD_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_head_timeout_ms: u64,
    /// A request body may pause this many milliseconds between bytes
    /// before the connection is closed (an upload that keeps making
    /// progress is never cut).
    #[arg(long, env = "STRAND_BODY_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_ms: u64,
    /// A response write may wait this many milliseconds for the client to
    /// read before the connection is closed.
    #[arg(long, env = "STRAND_SEND_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub send_timeout_ms: u64,
    /// A connection with no request in progress is closed after this many
    /// milliseconds (a long-poll or SSE response in progress is not idle).
    #[arg(long, env = "STRAND_IDLE_TIMEOUT_MS", default_value_t = 90_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_ms: u64,
    /// The URL clients reach this server at, when a proxy stands between
    /// them (`https://streams.example.com`, optionally with a path
    /// prefix): `Location` headers are built from it instead of the
    /// request's host.
    #[arg(
        long,
        env = "STRAND_PUBLIC_URL",
        hide_env_values = true,
        value_parser = parse_public_url
    )]
    pub public_url: Option<String>,
    /// Serve the operator routes (`/__strand/purge`, `quota`, `usage`,
    /// `cold`) on this second address as well. Without authentication it
    /// must be a loopback address, and it is the only place they are
    /// served; with authentication they need a token with the admin right
    /// on either listener.
    #[arg(long, env = "STRAND_ADMIN_LISTEN")]
    pub admin_listen: Option<SocketAddr>,
    /// Serve a non-loopback address without authentication, deliberately
    /// (silences the startup warning).
    #[arg(long, env = "STRAND_ALLOW_UNAUTHENTICATED", value_parser = BoolishValueParser::new())]
    pub allow_unauthenticated: bool,
    /// Requests per second one token (subject) may make, with a burst of
    /// as many; more get 429 with `Retry-After`. 0 = no limit. Applies
    /// with authentication on.
    #[arg(long, env = "STRAND_RATE_LIMIT_PER_TOKEN", default_value_t = 0)]
    pub rate_limit_per_token: u64,
    /// Concurrent live readers (long-poll, SSE) one token may hold; more
    /// get 429. 0 = no limit. Applies with authentication on.
    #[arg(
        long,
        env = "STRAND_MAX_LIVE_READERS_PER_TOKEN",
        default_value_t = 1_000
    )]
    pub max_live_readers_per_token: usize,
    /// An origin browsers may read responses from (repeatable, or
    /// comma-separated; `*` for any). Default: any origin on a loopback
    /// bind, none elsewhere.
    #[arg(long, env = "STRAND_CORS_ORIGIN", value_delimiter = ',')]
    pub cors_origin: Vec<String>,
    /// Longest an SSE response stays open, in milliseconds; clients resume
    /// from the last control event's offset.
    #[arg(long, env = "STRAND_SSE_MAX_DURATION_MS", default_value_t = 300_000)]
    pub sse_max_duration_ms: u64,
    /// Keep the cold tier in this directory (the local filesystem
    /// backend): the flush workers move hot bytes there and reads fetch
    /// them back.
    #[arg(long, env = "STRAND_COLD_DIR", conflicts_with = "cold_url")]
    pub cold_dir: Option<PathBuf>,
    /// Keep the cold tier in S3: `s3://bucket/prefix`, with credentials,
    /// region and endpoint from the usual AWS environment variables
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL`).
    #[arg(long, env = "STRAND_COLD_URL", hide_env_values = true)]
    pub cold_url: Option<String>,
    /// The node's hot-memory limit in bytes: above half of it the flush
    /// workers flush whatever the planner offers; a write that would pass
    /// it gets 503 with `Retry-After: 1`. Needs a tier below the hot
    /// buffers. Default on a durable node: 64 MiB (a durable node keeps
    /// its older bytes in the data directory's `segments/`, each node of
    /// a cluster its own copy, unless `--cold-dir` or `--cold-url` says
    /// otherwise).
    #[arg(long, env = "STRAND_MAX_HOT_BYTES")]
    pub max_hot_bytes: Option<u64>,
    /// Each group's hot-memory limit in bytes: above half of it the
    /// group's flush worker flushes whatever the planner offers; a write
    /// to the group that would pass it gets 503 with `Retry-After: 1`, a
    /// body larger than it 413. Needs a cold tier.
    #[arg(long, env = "STRAND_MAX_GROUP_HOT_BYTES")]
    pub max_group_hot_bytes: Option<u64>,
    /// A group flushes on its own once its hot bytes reach this many.
    #[arg(long, env = "STRAND_COLD_FLUSH_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub cold_flush_bytes: usize,
    /// Below the memory-pressure mark a stream's bytes join such a flush
    /// only once it holds this many (at most `--cold-flush-bytes`), so
    /// slowly growing streams leave memory in large pieces.
    #[arg(long, env = "STRAND_COLD_PIECE_BYTES", default_value_t = 64 * 1024)]
    pub cold_piece_bytes: usize,
    /// Largest piece of one stream in one flush, in bytes.
    #[arg(long, env = "STRAND_COLD_CHUNK_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub cold_chunk_bytes: usize,
    /// Largest flush upload (one object; several small streams share a
    /// pack), in bytes.
    #[arg(long, env = "STRAND_COLD_PACK_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub cold_pack_bytes: usize,
    /// How often each group looks for flush work, in milliseconds.
    #[arg(long, env = "STRAND_COLD_FLUSH_INTERVAL_MS", default_value_t = 1_000)]
    pub cold_flush_interval_ms: u64,
    /// How often each group reads its cold GC queue, in milliseconds.
    #[arg(long, env = "STRAND_COLD_GC_INTERVAL_MS", default_value_t = 5_000)]
    pub cold_gc_interval_ms: u64,
    /// How often each group lists its objects for orphans, in
    /// milliseconds.
    #[arg(long, env = "STRAND_COLD_SWEEP_INTERVAL_MS", default_value_t = 600_000)]
    pub cold_sweep_interval_ms: u64,
    /// An unreferenced object younger than this (in milliseconds) is not
    /// an orphan yet.
    #[arg(long, env = "STRAND_COLD_ORPHAN_GRACE_MS", default_value_t = 3_600_000)]
    pub cold_orphan_grace_ms: u64,
    /// How often each group of a cluster node checks that its own
    /// `segments/` holds every object its state names, fetching what it
    /// lacks from a peer, in milliseconds (it also checks after each
    /// snapshot install).
    #[arg(long, env = "STRAND_COLD_REPAIR_INTERVAL_MS", default_value_t = 60_000)]
    pub cold_repair_interval_ms: u64,
    /// Keep every group durable in this directory (created if missing): a
    /// Raft group per group (openraft), its log and snapshots on disk,
    /// recovered at start. Default: `./strand-data`, unless `--memory`.
    #[arg(long, env = "STRAND_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Keep everything in memory instead of a data directory: nothing
    /// survives the process (tests, benchmarks, throwaway servers).
    #[arg(
        long,
        env = "STRAND_MEMORY",
        value_parser = BoolishValueParser::new(),
        conflicts_with = "data_dir"
    )]
    pub memory: bool,
    /// When the log is synced to disk (with `--data-dir`): `always` (a
    /// write is acknowledged only after its log record is fsynced; many
    /// writes share one fsync) or `never` (UNSAFE: acknowledged writes can
    /// be lost when the machine crashes; for benchmarks only).
    #[arg(long, env = "STRAND_FSYNC", value_enum, default_value_t = FsyncMode::Always)]
    pub fsync: FsyncMode,
    /// Free bytes kept on the data directory's filesystem: writes get 507
    /// while it holds fewer (reads, deletes and everything else go on), and
    /// the segment store leaves half of it to the Raft log, which stops its
    /// group if it cannot write. 0 turns the reserve off.
    #[arg(long, env = "STRAND_MIN_FREE_DISK_BYTES", default_value_t = DEFAULT_MIN_FREE_DISK_BYTES)]
    pub min_free_disk_bytes: u64,
    /// Log entries between a group's snapshots (with `--data-dir`); the
    /// log is purged up to each snapshot.
    #[arg(long, env = "STRAND_SNAPSHOT_EVERY", default_value_t = 20_000)]
    pub snapshot_every: u64,
    /// A group also snapshots once the entries it applied since its last
    /// snapshot hold this many bytes of log records, however few entries
    /// that is (with `--data-dir`); a cluster node's log then keeps at most
    /// half as many bytes behind the snapshot (for followers a little
    /// behind), a single node's none. A restart replays at most this many
    /// bytes of each group's log.
    #[arg(long, env = "STRAND_SNAPSHOT_LOG_BYTES", default_value_t = strand_raft::DEFAULT_SNAPSHOT_LOG_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub snapshot_log_bytes: u64,
    /// The chunk size, in bytes, a leader sends a group's snapshot to a
    /// follower in (one Raft RPC each, read from the snapshot's file);
    /// 256 B to 64 MiB.
    #[arg(long, env = "STRAND_SNAPSHOT_CHUNK_BYTES", default_value_t = strand_raft::DEFAULT_SNAPSHOT_CHUNK_BYTES,
          value_parser = clap::value_parser!(u64).range(256..=strand_raft::MAX_SNAPSHOT_CHUNK_BYTES))]
    pub snapshot_chunk_bytes: u64,
    /// This node's id in a cluster (with `--data-dir` and `--peer`).
    #[arg(long, env = "STRAND_NODE_ID", default_value_t = 1)]
    pub node_id: u64,
    /// A cluster member, `ID=http://HOST:PORT` (its HTTP listen address),
    /// repeated (or comma-separated) for every member including this node
    /// (with `--data-dir`).
    /// Raft traffic between nodes goes over the same listener under
    /// `/__strand/raft/`.
    /// Each node sends to the addresses of its own list, so nodes may
    /// reach one another through different addresses (a proxy).
    #[arg(
        long = "peer",
        env = "STRAND_PEER",
        hide_env_values = true,
        value_delimiter = ',',
        value_parser = parse_peer
    )]
    pub peers: Vec<(u64, String)>,
    /// The cluster's shared secret: a file holding one token of at least
    /// 16 printable ASCII characters (surrounding whitespace ignored),
    /// the same on every node. Each node sends it with every Raft message
    /// and forwarded write (header `strand-cluster-token`), and refuses
    /// `/__strand/raft/` requests without it (401) or with another (403),
    /// whether client authentication is on or off. Required for `--peer`
    /// with authentication on.
    #[arg(long, env = "STRAND_CLUSTER_TOKEN_FILE")]
    pub cluster_token_file: Option<PathBuf>,
    /// How often a cluster's node looks for a group leadership to hand
    /// off, in milliseconds: to the least-loaded member when it leads two
    /// more groups than that member, or any while it drains
    /// (`strand cluster drain`). 0 never hands one off.
    #[arg(long, env = "STRAND_LEADER_BALANCE_INTERVAL_MS",
          default_value_t = strand_raft::DEFAULT_BALANCE_INTERVAL_MS)]
    pub leader_balance_interval_ms: u64,
    /// How many voters each group of a cluster has (every member when
    /// there are fewer; at most 9): the leader of each group moves its
    /// voters so that every member votes in as many groups as another,
    /// give or take one; the other members follow the group as learners.
    /// The same on every node.
    #[arg(long, env = "STRAND_REPLICATION_FACTOR",
          default_value_t = strand_raft::DEFAULT_REPLICATION_FACTOR,
          value_parser = parse_replication_factor)]
    pub replication_factor: usize,
    /// How long a cluster's member may stay unreachable, in milliseconds,
    /// before the leader of group 0 removes it from the cluster and its
    /// votes move to the other members (only while at least
    /// `--replication-factor` members remain). A removed node that comes
    /// back serves nothing and says so. 0 never removes one.
    #[arg(long, env = "STRAND_DEAD_NODE_TIMEOUT_MS",
          default_value_t = strand_raft::DEFAULT_DEAD_NODE_TIMEOUT_MS)]
    pub dead_node_timeout_ms: u64,
    /// Join an existing cluster through this member's URL
    /// (`http://host:port`), on this node's first start with an empty
    /// `--data-dir` and its own `--node-id` (with the cluster's
    /// `--cluster-token-file`); later starts need none. The node then
    /// receives the groups and, as placement spreads them, votes.
    #[arg(long, env = "STRAND_JOIN", hide_env_values = true, value_parser = parse_peer_url)]
    pub join: Option<String>,
    /// This node's URL as the other members reach it (`http://host:port`),
    /// recorded in the cluster's membership when it joins or starts a
    /// cluster of one. Default: `http://` and the listening address, when
    /// that is a specific address.
    #[arg(
        long,
        env = "STRAND_ADVERTISE_URL",
        hide_env_values = true,
        value_parser = parse_peer_url
    )]
    pub advertise_url: Option<String>,
    /// Webhook targets in this CIDR are allowed even though they are not
    /// public (repeatable, or comma-separated). Without it only publicly
    /// routable addresses are.
    #[arg(
        long = "webhook-allow",
        env = "STRAND_WEBHOOK_ALLOW",
        value_delimiter = ',',
        value_parser = parse_cidr
    )]
    pub webhook_allow: Vec<ipnet::IpNet>,
}

/// The data directory of a server started without `--data-dir` or
/// `--memory`, relative to its working directory.
pub const DEFAULT_DATA_DIR: &str = "strand-data";

/// The largest message a peer sends on the cluster's Raft routes (a
/// snapshot chunk, or an entry too large to batch), and so the least
/// `--max-peer-body-memory-bytes` may be.
pub const MAX_PEER_MESSAGE_BYTES: usize = 256 << 20;

/// The local segment store's directory inside the data directory.
pub const SEGMENTS_DIR: &str = "segments";

/// The hot-memory limit of a durable node that has a tier below its hot
/// buffers and no `--max-hot-bytes`: 64 MiB.
pub const DEFAULT_MAX_HOT_BYTES: u64 = 64 * 1024 * 1024;

/// The free space a durable node keeps on its data directory's filesystem
/// (`--min-free-disk-bytes`): 256 MiB, room for a log segment, a snapshot
/// of a full hot budget and the flushes already in memory.
pub const DEFAULT_MIN_FREE_DISK_BYTES: u64 = 256 * 1024 * 1024;

/// Checks `--public-url`: `http://` or `https://`, a host, no query or
/// fragment; a trailing `/` is dropped.
fn parse_public_url(text: &str) -> Result<String, String> {
    let url = text.trim().trim_end_matches('/');
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("{text:?}: expected http:// or https:// and a host"))?;
    if rest.is_empty() || rest.starts_with('/') || url.contains(['?', '#', ' ']) {
        return Err(format!(
            "{text:?}: expected http(s)://HOST[:PORT][/PREFIX] without a query"
        ));
    }
    Ok(url.to_owned())
}

/// A replication factor: 1 to [`strand_raft::MAX_REPLICATION_FACTOR`].
fn parse_replication_factor(text: &str) -> Result<usize, String> {
    let value: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of voters"))?;
    if (1..=strand_raft::MAX_REPLICATION_FACTOR).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "a replication factor is 1 to {}, not {value}",
            strand_raft::MAX_REPLICATION_FACTOR
        ))
    }
}

/// Parses a CIDR (`10.1.0.0/16`, `fd00::/8`) or a single address (as a
/// /32 or /128).
fn parse_cidr(text: &str) -> Result<ipnet::IpNet, String> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{text:?}: expected a CIDR such as 10.1.0.0/16 or fd00::/8"))
}

/// Parses `ID=http://HOST:PORT`.
/// A member's URL: `http://HOST:PORT` (a trailing `/` dropped).
fn parse_peer_url(text: &str) -> Result<String, String> {
    let url = text.trim().trim_end_matches('/');
    let host = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{text:?}: the address must start with http://"))?;
    if host.is_empty() || host.contains('/') {
        return Err(format!("{text:?}: expected http://HOST:PORT"));
    }
    Ok(url.to_owned())
}

fn parse_peer(text: &str) -> Result<(u64, String), String> {
    let (id, url) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected ID=http://HOST:PORT"))?;
    let id: u64 = id
        .trim()
        .parse()
        .map_err(|e| format!("{text:?}: the node id: {e}"))?;
    let url = url.trim().trim_end_matches('/');
    let host = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{text:?}: the address must start with http://"))?;
    if host.is_empty() || host.contains('/') {
        return Err(format!("{text:?}: expected http://HOST:PORT"));
    }
    Ok((id, url.to_owned()))
}

/// `--http-engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HttpEngine {
    /// hyper's HTTP/1.1 and HTTP/2 server.
    Hyper,
    /// strand's own HTTP/1.1 connection loop (the `lean` module); a
    /// connection that opens with HTTP/2's preface goes to hyper.
    Lean,
}

/// `--fsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FsyncMode {
    /// Sync every batch of log records before acknowledging it.
    Always,
    /// Never sync (unsafe; benchmarks only).
    Never,
}

impl Config {
    /// A configuration with every default, listening on `listen`: no
    /// `STRAND_*` environment variable and no file applies.
    pub fn for_listen(listen: SocketAddr) -> Self {
        let matches = Cli::command()
            .mut_args(|arg| arg.env(None))
            .get_matches_from(["strand-server"]);
        let mut config = match Cli::from_arg_matches(&matches) {
            Ok(cli) => cli.config,
            Err(e) => e.exit(),
        };
        config.listen = listen;
        config
    }

    /// Which webhook targets subscriptions may name (`--webhook-allow`).
    pub fn webhook_policy(&self) -> crate::subs::webhook::WebhookPolicy {
        crate::subs::webhook::WebhookPolicy::new(self.webhook_allow.clone())
    }

    /// The startup warning for a non-loopback address served without
    /// authentication, unless `--allow-unauthenticated` asks for it.
    pub fn unauthenticated_warning(&self, auth_on: bool) -> Option<String> {
        (!self.listen.ip().is_loopback() && !auth_on && !self.allow_unauthenticated).then(|| {
            format!(
                "warning: listening on {} without authentication: anyone who can reach it may \
                 read, write and purge every stream (--auth-secret-file or --auth-jwks-file \
                 turns authentication on; --allow-unauthenticated silences this)",
                self.listen
            )
        })
    }

    /// The token verifier the configuration asks for; `None` when
    /// authentication is off.
    pub fn verifier(&self) -> Result<Option<crate::auth::Verifier>, String> {
        crate::auth::Verifier::from_files(
            self.auth_secret_file.as_deref(),
            self.auth_jwks_file.as_deref(),
        )
    }

    /// The cluster token of `--cluster-token-file`; `None` without it.
    ///
    /// # Errors
    /// An unreadable file, or a token shorter than 16 characters or
    /// holding anything but printable ASCII.
    pub fn cluster_token(&self) -> Result<Option<String>, String> {
        let Some(path) = &self.cluster_token_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--cluster-token-file {}: {e}", path.display()))?;
        let token = text.trim();
        if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "--cluster-token-file {}: the token must be at least 16 printable ASCII characters, without spaces",
                path.display()
            ));
        }
        Ok(Some(token.to_owned()))
    }

    /// Where the node keeps its data: `--data-dir`, or [`DEFAULT_DATA_DIR`]
    /// when none is given; `None` with `--memory`.
    pub fn effective_data_dir(&self) -> Option<PathBuf> {
        if self.memory {
            return None;
        }
        Some(
            self.data_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
        )
    }

    /// The connection timeouts (`crate::conn`).
    pub fn timeouts(&self) -> crate::conn::Timeouts {
        crate::conn::Timeouts {
            head: Duration::from_millis(self.request_head_timeout_ms.max(1)),
            body: Duration::from_millis(self.body_timeout_ms.max(1)),
            send: Duration::from_millis(self.send_timeout_ms.max(1)),
            idle: Duration::from_millis(self.idle_timeout_ms.max(1)),
        }
    }

    /// Refuses limits that contradict each other: a body budget smaller
    /// than the largest body, which could never be received.
    ///
    /// # Errors
    /// The message for the operator.
    pub fn check_limits(&self) -> Result<(), String> {
        if self.max_body_memory_bytes < self.max_body_bytes {
            return Err(format!(
                "--max-body-memory-bytes {} is less than --max-body-bytes {}: a body of the \
                 largest size could never be received; raise the first or lower the second",
                self.max_body_memory_bytes, self.max_body_bytes
            ));
        }
        if self.max_peer_body_memory_bytes < MAX_PEER_MESSAGE_BYTES {
            return Err(format!(
                "--max-peer-body-memory-bytes {} is less than {MAX_PEER_MESSAGE_BYTES}, the \
                 largest message a peer sends: it could never be received; raise it",
                self.max_peer_body_memory_bytes
            ));
        }
        Ok(())
    }

    /// Refuses an `--admin-listen` address that would open the operator
    /// routes to the network: without authentication it must be loopback.
    ///
    /// # Errors
    /// The message for the operator.
    pub fn check_admin_listen(&self, auth_on: bool) -> Result<(), String> {
        match self.admin_listen {
            Some(addr) if !auth_on && !addr.ip().is_loopback() => Err(format!(
                "--admin-listen {addr}: without authentication the admin listener must be a \
                 loopback address (anyone who reaches it may purge every bucket); turn \
                 authentication on (--auth-secret-file or --auth-jwks-file) to serve it elsewhere"
            )),
            _ => Ok(()),
        }
    }

    /// The long-poll timeout.
    pub fn long_poll_timeout(&self) -> Duration {
        Duration::from_millis(self.long_poll_timeout_ms.max(1))
    }

    /// The cold tier's configuration.
    pub fn cold_config(&self) -> strand_cold::ColdConfig {
        strand_cold::ColdConfig {
            flush_min_bytes: self.cold_flush_bytes.max(1),
            piece_min_bytes: self.cold_piece_bytes.max(1),
            chunk_max_bytes: self.cold_chunk_bytes.max(1),
            pack_max_bytes: self.cold_pack_bytes.max(1),
            flush_interval: Duration::from_millis(self.cold_flush_interval_ms.max(1)),
            gc_interval: Duration::from_millis(self.cold_gc_interval_ms.max(1)),
            sweep_interval: Duration::from_millis(self.cold_sweep_interval_ms.max(1)),
            orphan_grace: Duration::from_millis(self.cold_orphan_grace_ms),
            repair_interval: Duration::from_millis(self.cold_repair_interval_ms.max(1)),
            max_hot_bytes: self.effective_max_hot_bytes(),
            max_group_hot_bytes: self.max_group_hot_bytes,
            ..strand_cold::ColdConfig::default()
        }
    }

    /// The node's hot-memory limit: `--max-hot-bytes`, or
    /// [`DEFAULT_MAX_HOT_BYTES`] on a durable node with a tier below the
    /// hot buffers.
    pub fn effective_max_hot_bytes(&self) -> Option<u64> {
        self.max_hot_bytes.or_else(|| {
            self.effective_data_dir()
                .is_some()
                .then_some(DEFAULT_MAX_HOT_BYTES)
        })
    }

    /// The cold tier the configuration asks for: `--cold-dir` or
    /// `--cold-url`; else, on a durable node, the local segment store in
    /// the data directory's `segments/` (on a cluster's member — `--peer`,
    /// `--join` or a cluster token — each node's own copy:
    /// [`strand_cold::ReplicaSegments`]); else `None` (in memory).
    pub fn cold_tier(&self) -> Result<Option<strand_cold::ColdTier>, String> {
        if self.cold_dir.is_none()
            && self.cold_url.is_none()
            && let Some(dir) = self.effective_data_dir()
        {
            let dir = dir.join(SEGMENTS_DIR);
            let segments =
                strand_cold::LocalSegments::open_keeping_free(&dir, self.min_free_disk_bytes / 2)
                    .map_err(|e| format!("the segment store {}: {e}", dir.display()))?;
            // The page cache keeps recently read segment bytes: a heap
            // cache of ranges would hold them twice.
            let config = strand_cold::ColdConfig {
                cache_bytes: 0,
                ..self.cold_config()
            };
            // A cluster's member: static peers, a join, or a cluster token
            // (a cluster of one that others may join, or a joined node
            // restarting without --join).
            if !self.peers.is_empty() || self.join.is_some() || self.cluster_token_file.is_some() {
                let replica = strand_cold::ReplicaSegments::new(segments);
                return Ok(Some(strand_cold::ColdTier::replicated(replica, config)));
            }
            return Ok(Some(strand_cold::ColdTier::local(segments, config)));
        }
        let backend: strand_cold::SharedBackend = match (&self.cold_dir, &self.cold_url) {
            (Some(dir), _) => std::sync::Arc::new(
                strand_cold::ObjectStoreBackend::local(dir)
                    .map_err(|e| format!("--cold-dir {}: {e}", dir.display()))?,
            ),
            (None, Some(url)) => std::sync::Arc::new(
                strand_cold::ObjectStoreBackend::s3(url)
                    .map_err(|e| format!("--cold-url {url}: {e}"))?,
            ),
            (None, None) => {
                if self.max_hot_bytes.is_some() {
                    return Err(
                        "--max-hot-bytes needs a cold tier (--cold-dir or --cold-url)".to_owned(),
                    );
                }
                if self.max_group_hot_bytes.is_some() {
                    return Err(
                        "--max-group-hot-bytes needs a cold tier (--cold-dir or --cold-url)"
                            .to_owned(),
                    );
                }
                return Ok(None);
            }
        };
        Ok(Some(strand_cold::ColdTier::new(
            backend,
            self.cold_config(),
        )))
    }

    /// The page size for reads: at least one body longer than the largest
    /// accepted one, so a page that starts on a value boundary always holds
    /// a whole JSON value.
    pub fn read_page_bytes(&self) -> usize {
        self.max_read_bytes
            .max(self.max_body_bytes.saturating_add(1))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_body_budget_below_the_largest_body_is_refused() {
        let mut c = Config::for_listen("127.0.0.1:4437".parse().unwrap());
        assert!(c.check_limits().is_ok());
        c.max_body_memory_bytes = c.max_body_bytes;
        assert!(c.check_limits().is_ok());
        c.max_body_memory_bytes = c.max_body_bytes - 1;
        let message = c.check_limits().unwrap_err();
        assert!(message.contains("--max-body-memory-bytes"), "{message}");
        assert!(message.contains("--max-body-bytes"), "{message}");
    }

    #[test]
    fn a_peer_budget_below_the_largest_peer_message_is_refused() {
        let mut c = Config::for_listen("127.0.0.1:4437".parse().unwrap());
        c.max_peer_body_memory_bytes = MAX_PEER_MESSAGE_BYTES;
        assert!(c.check_limits().is_ok());
        c.max_peer_body_memory_bytes = MAX_PEER_MESSAGE_BYTES - 1;
        let message = c.check_limits().unwrap_err();
        assert!(
            message.contains("--max-peer-body-memory-bytes"),
            "{message}"
        );
    }

    #[test]
    fn only_unauthenticated_public_binds_warn() {
        let mut c = Config::for_listen("0.0.0.0:4437".parse().unwrap());
        assert!(
            c.unauthenticated_warning(false)
                .unwrap()
                .contains("0.0.0.0:4437")
        );
        assert!(c.unauthenticated_warning(true).is_none());
        c.allow_unauthenticated = true;
        assert!(c.unauthenticated_warning(false).is_none());
        let local = Config::for_listen("127.0.0.1:4437".parse().unwrap());
        assert!(local.unauthenticated_warning(false).is_none());
        let v6 = Config::for_listen("[::1]:4437".parse().unwrap());
        assert!(v6.unauthenticated_warning(false).is_none());
    }

    #[test]
    fn webhook_allow_takes_cidrs() {
        let none = Cli::parse_from(["strand-server"]).config;
        assert!(none.webhook_allow.is_empty());
        assert!(!none.webhook_policy().allows("127.0.0.1".parse().unwrap()));
        let cli = Cli::parse_from([
            "strand-server",
            "--webhook-allow",
            "127.0.0.0/8",
            "--webhook-allow=fd00::/8",
            "--webhook-allow",
            "10.1.2.3",
        ]);
        let policy = cli.config.webhook_policy();
        for allowed in ["127.0.0.1", "fd00::1", "10.1.2.3"] {
            assert!(policy.allows(allowed.parse().unwrap()), "{allowed}");
        }
        assert!(!policy.allows("10.1.2.4".parse().unwrap()));
        assert!(Cli::try_parse_from(["strand-server", "--webhook-allow", "nope"]).is_err());
        assert!(Cli::try_parse_from(["strand-server", "--webhook-allow", "10.0.0.0/33"]).is_err());
    }
}
