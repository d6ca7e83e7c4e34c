//! A node's counters: each group's log writer ([`LogStats`]) and
//! snapshots ([`SnapshotStats`]), and the node's Raft traffic to its peers
//! ([`NetworkStats`]), reported by `RaftNode::status` and
//! `RaftNode::network_stats`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// A group's snapshots on one node since it started, and the current one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotStats {
    /// Snapshots this node built from its own machine.
    pub built: u64,
    /// Snapshots this node received from a leader and installed.
    pub installed: u64,
    /// The log index the current snapshot covers, when there is one.
    pub index: Option<u64>,
    /// The current snapshot's size in bytes (0 without one).
    pub bytes: u64,
}

/// A group's log writer counters since the node started: how many
/// entries shared each write and each fsync (group commit), and what the
/// fsyncs cost. Every field only grows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogStats {
    /// Batches written, one `write` call each.
    pub writes: u64,
    /// Entry records written.
    pub entries: u64,
    /// Proposals those entries hold: one per entry, each proposal of a
    /// [`GroupEntry::Batch`](strand_engine::GroupEntry::Batch), none for the log's own (blank, membership)
    /// entries. With writes only, the appends written.
    pub proposals: u64,
    /// Bytes written.
    pub bytes: u64,
    /// fsync calls (none with `--fsync never`).
    pub fsyncs: u64,
    /// Entry records written by the batches that were fsynced: the
    /// log entries that shared the `fsyncs`.
    pub synced_entries: u64,
    /// Proposals held by those entries: the appends that shared the
    /// `fsyncs`.
    pub synced_proposals: u64,
    /// Time spent in fsync, in microseconds.
    pub fsync_us: u64,
    /// The longest fsync, in microseconds.
    pub fsync_max_us: u64,
    /// Writes that found the disk full and waited for space before they
    /// were written (the group took no writes meanwhile).
    #[serde(default)]
    pub space_waits: u64,
}

impl LogStats {
    /// The field-wise sum of two counter sets (`fsync_max_us`: the larger).
    #[must_use]
    pub fn combined(self, other: Self) -> Self {
        Self {
            writes: self.writes.saturating_add(other.writes),
            entries: self.entries.saturating_add(other.entries),
            proposals: self.proposals.saturating_add(other.proposals),
            synced_proposals: self.synced_proposals.saturating_add(other.synced_proposals),
            bytes: self.bytes.saturating_add(other.bytes),
            fsyncs: self.fsyncs.saturating_add(other.fsyncs),
            synced_entries: self.synced_entries.saturating_add(other.synced_entries),
            fsync_us: self.fsync_us.saturating_add(other.fsync_us),
            fsync_max_us: self.fsync_max_us.max(other.fsync_max_us),
            space_waits: self.space_waits.saturating_add(other.space_waits),
        }
    }

    /// Entries per fsync (`synced_entries / fsyncs`), when there was one.
    pub fn entries_per_fsync(&self) -> Option<f64> {
        (self.fsyncs > 0).then(|| self.synced_entries as f64 / self.fsyncs as f64)
    }

    /// Proposals (appends) per fsync (`synced_proposals / fsyncs`), when
    /// there was one.
    pub fn proposals_per_fsync(&self) -> Option<f64> {
        (self.fsyncs > 0).then(|| self.synced_proposals as f64 / self.fsyncs as f64)
    }

    /// The mean fsync time in microseconds, when there was one.
    pub fn mean_fsync_us(&self) -> Option<f64> {
        (self.fsyncs > 0).then(|| self.fsync_us as f64 / self.fsyncs as f64)
    }
}

/// A node's Raft traffic to its peers since it started (each counter
/// only grows), in `GET /__strand/health` under `network`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkStats {
    /// Raft messages (append entries, votes, snapshot chunks) sent to
    /// peers.
    pub raft_messages_sent: u64,
    /// HTTP requests that carried them: one per batch, one per message
    /// sent alone.
    pub raft_requests_sent: u64,
    /// Batches (`POST /__strand/raft/batch`) sent.
    pub raft_batches_sent: u64,
    /// Messages those batches carried.
    pub raft_batched_messages: u64,
    /// Messages that got no answer: the peer unreachable or too slow,
    /// the queue to it full.
    pub raft_messages_failed: u64,
}

impl NetworkStats {
    /// Messages per batch, when any batch was sent.
    #[must_use]
    pub fn messages_per_batch(&self) -> Option<f64> {
        (self.raft_batches_sent > 0)
            .then(|| self.raft_batched_messages as f64 / self.raft_batches_sent as f64)
    }

    /// Messages per HTTP request, when any was sent.
    #[must_use]
    pub fn messages_per_request(&self) -> Option<f64> {
        (self.raft_requests_sent > 0)
            .then(|| self.raft_messages_sent as f64 / self.raft_requests_sent as f64)
    }
}

/// The live counters behind [`NetworkStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) messages: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) batched: AtomicU64,
    pub(crate) failed: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> NetworkStats {
        NetworkStats {
            raft_messages_sent: self.messages.load(Ordering::Relaxed),
            raft_requests_sent: self.requests.load(Ordering::Relaxed),
            raft_batches_sent: self.batches.load(Ordering::Relaxed),
            raft_batched_messages: self.batched.load(Ordering::Relaxed),
            raft_messages_failed: self.failed.load(Ordering::Relaxed),
        }
    }

    /// One message sent by itself, in its own request.
    pub(crate) fn sent_alone(&self, ok: bool) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `n` messages got no answer.
    pub(crate) fn failed(&self, n: usize) {
        self.failed.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// The upper bounds, in microseconds, of the fsync duration histogram
/// ([`FsyncHistogram`]).
pub const FSYNC_BUCKETS_US: [u64; 12] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];

/// How long a log's fsyncs took: counts per duration bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsyncHistogram {
    /// `counts[i]`: fsyncs that took more than `FSYNC_BUCKETS_US[i - 1]`
    /// (0 for `i = 0`) and at most `FSYNC_BUCKETS_US[i]` µs; the last
    /// element counts the ones above every bound.
    pub counts: [u64; FSYNC_BUCKETS_US.len() + 1],
    /// Their total time, in microseconds.
    pub sum_us: u64,
}

impl FsyncHistogram {
    /// The bucket-wise sum of two histograms.
    #[must_use]
    pub fn combined(mut self, other: Self) -> Self {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a = a.saturating_add(b);
        }
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self
    }

    /// How many fsyncs it counts.
    pub fn count(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// A group's Raft figures on one node, for metrics
/// ([`RaftNode::metrics`](crate::RaftNode::metrics)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftGroupMetrics {
    /// The group's index.
    pub group: usize,
    /// Whether this node leads the group.
    pub leader: bool,
    /// The current term.
    pub term: u64,
    /// The log index of the last applied entry.
    pub applied_index: Option<u64>,
    /// The log index of the last entry known committed.
    pub committed_index: Option<u64>,
    /// The last log index this node holds.
    pub last_log_index: Option<u64>,
    /// On the leader: how many entries each follower (by its node id)
    /// lacks;
    /// empty elsewhere.
    pub follower_lag: std::collections::BTreeMap<u64, u64>,
    /// The group's snapshots on this node.
    pub snapshot: Option<SnapshotStats>,
    /// The log writer's counters.
    pub log: LogStats,
    /// The log writer's fsyncs by duration.
    pub fsyncs: FsyncHistogram,
}
