//! strand-raft: strand's groups on openraft (pinned `=0.9.25`).
//!
//! It implements the group interface `strand-engine` defines: each group
//! of an engine started with `Engine::start_replicated` gets a Raft node
//! whose log store ([`LogStore`]: segment files of checksummed records,
//! group commit, torn-tail recovery), state machine ([`GroupStateMachine`]:
//! committed entries applied through the group's `GroupApplier`, binary
//! snapshots in the group's directory) and proposer (the group's
//! `GroupLog`) live here. [`start_durable`] opens a node's groups under a
//! data directory and returns the node ([`RaftNode`]): its engine, and the
//! Raft side the server needs (peer messages, counters).
//!
//! What it owns: the on-disk formats of the log and of the snapshot file's
//! Raft metadata, the Raft configuration, static membership and the
//! network between nodes (HTTP POSTs of MessagePack bodies to the peers'
//! listeners: append entries and votes of every group batched per peer to
//! `/__strand/raft/batch`, served by [`serve_batch`]; the rest
//! ([`RaftMessage`]) under `/__strand/raft/{group}/{name}`, served by
//! [`RaftNode::handle`]). What it must not know: stream semantics. It
//! moves `GroupEntry` values and `EntryOutcome`s without looking inside;
//! the engine decides what an entry does, with the same function in
//! memory and here, and the machine's snapshot is the machine's own
//! binary codec.
//!
//! Layout of a data directory:
//!
//! ```text
//! DIR/strand.lock               held (exclusive `flock`) while a node runs
//! DIR/strand-raft.json          node id and group count (checked at start)
//! DIR/group-N/log/NNNNNNNNNN.seg the group's log segments
//! DIR/group-N/snapshot.meta     which snapshot is current, with its Raft metadata
//! DIR/group-N/snapshot-S.data   the group's latest snapshot (the machine's binary snapshot)
//! ```

//!
//! Modules: `start` (options, startup, snapshot by bytes), `error` (why a
//! node could not start), `lock` (the
//! data directory's lock), `proposer` (a group's `GroupLog`), `node` (the
//! node handle and the receiving side of peer messages), `holding`
//! (which groups the node holds and may answer from), `asking`
//! (questions about groups this node does not hold, asked at members
//! that do: [`ASK_PATH`]), `wire` (message
//! kinds and the batch format), `batch` (the sending side of batches),
//! `network` (openraft's network over HTTP, segment fetches), `http` (the
//! peer HTTP client), `stats` (counters), `log_store` and `segment` (the
//! log), `state_machine` and `snapshot_file` (applying and snapshots),
//! `types` (openraft's type configuration), `sync` (small helpers).

mod asking;
mod balance;
mod batch;
mod cluster;
mod error;
mod forget;
mod holding;
mod http;
mod lock;
mod log_store;
mod network;
mod node;
mod placement;
mod proposer;
mod segment;
mod snapshot_file;
mod space;
mod start;
mod state_machine;
mod stats;
mod sync;
mod types;
mod wire;

pub use asking::ASK_PATH;
pub use balance::{BalanceStats, DEFAULT_BALANCE_INTERVAL_MS};
pub use batch::BATCHES_IN_FLIGHT;
pub use cluster::{
    ClusterStatus, DRAIN_PATH, DrainRequest, GroupStatusView, GroupView, MoveStatus, NodeState,
    NodeStatus, NodeView, REMOVE_PATH, ReplicaStatus, VIEW_PATH,
};
pub use error::StartError;
pub use holding::LEASE;
pub use log_store::{CACHE_BYTES, Fsync, LogStore, Recovery};
pub use network::ClusterLinks;
pub use node::{
    ForwardedGate, JOIN_PATH, JoinRequest, MessageError, RaftGroupStatus, RaftNode, RemoveError,
    serve_batch,
};
pub use placement::{DEFAULT_REPLICATION_FACTOR, MAX_REPLICATION_FACTOR, Placed, initial, plan};
pub use segment::LogError;
pub use start::{
    DEFAULT_DEAD_NODE_TIMEOUT_MS, DEFAULT_SNAPSHOT_CHUNK_BYTES, DEFAULT_SNAPSHOT_LOG_BYTES,
    DurableOptions, MAX_SNAPSHOT_CHUNK_BYTES, group_dir, start_durable,
};
pub use state_machine::{GroupStateMachine, SnapshotBuilder};
pub use stats::{
    FSYNC_BUCKETS_US, FsyncHistogram, LogStats, NetworkStats, RaftGroupMetrics, SnapshotStats,
};
pub use types::{NodeId, TypeConfig};
pub use wire::{
    BATCH_PATH, BatchRefused, CLUSTER_TOKEN_HEADER, MAX_BATCH_BODY, MAX_BATCH_MESSAGES,
    MAX_BATCHED_BYTES, RaftMessage, SEGMENT_PATH,
};
