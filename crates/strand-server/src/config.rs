//! The server's configuration, as the command line fills it.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;

/// strand-server: the Durable Streams HTTP protocol on strand's state
/// machine, in memory, one node.
#[derive(Debug, Clone, Parser)]
#[command(name = "strand-server", version, about)]
pub struct Config {
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1:4437")]
    pub listen: SocketAddr,
    /// How long an idle long-poll (or an SSE response between keep-alive
    /// controls) waits for data, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub long_poll_timeout_ms: u64,
    /// The bucket that `/v1/stream/{name}` streams live in.
    #[arg(long, default_value = "default")]
    pub default_bucket: String,
    /// Number of groups (state machines, one owner task each).
    #[arg(long, default_value_t = 4)]
    pub groups: usize,
    /// Largest request body accepted, in bytes (larger ones get 413).
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Largest catch-up response page, in bytes (JSON pages grow to hold at
    /// least one whole value).
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    pub max_read_bytes: usize,
    /// Live readers (long-poll and SSE) parked at once on this node; more
    /// get 503.
    #[arg(long, default_value_t = 10_000)]
    pub max_live_readers: usize,
    /// Requests a group's queue holds before writes get 503.
    #[arg(long, default_value_t = 4096)]
    pub group_queue_depth: usize,
    /// Longest an SSE response stays open, in milliseconds; clients resume
    /// from the last control event's offset.
    #[arg(long, default_value_t = 300_000)]
    pub sse_max_duration_ms: u64,
}

impl Config {
    /// A configuration with every default, listening on `listen`.
    pub fn for_listen(listen: SocketAddr) -> Self {
        let mut config = Self::parse_from(["strand-server"]);
        config.listen = listen;
        config
    }

    /// The long-poll timeout.
    pub fn long_poll_timeout(&self) -> Duration {
        Duration::from_millis(self.long_poll_timeout_ms.max(1))
    }

    /// The page size for reads: at least one body longer than the largest
    /// accepted one, so a page that starts on a value boundary always holds
    /// a whole JSON value.
    pub fn read_page_bytes(&self) -> usize {
        self.max_read_bytes
            .max(self.max_body_bytes.saturating_add(1))
    }
}
