//! The group interface a replicated log implements.
//!
//! A group's state changes are [`GroupEntry`]s: engine-level operations
//! that carry everything they need (the edge clock's `now_ms` included) so
//! that applying one is a deterministic function of the machine's state and
//! the entry. The in-memory engine applies an entry as soon as its group
//! task receives it; a replicated engine hands it to the group's
//! [`GroupLog`], which orders it, makes it durable and feeds it back
//! through the group's [`GroupApplier`] once committed, where the same
//! function applies it. The engine knows no log format and no consensus:
//! the log knows no stream semantics.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strand::{BucketStreamId, StreamCommand, StreamResponse};
use tokio::sync::{mpsc, oneshot};

use crate::engine::EngineError;
use crate::ops::{TransactionOutcome, WriteOutcome, WriteRequest};

/// One replicated operation of a group. Every check that depends on the
/// machine's state (a media-type match, a missing bucket, expiry) happens
/// when the entry is applied, so replicas that apply the same entries end
/// in the same state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupEntry {
    /// A machine command applied as it is.
    Command(StreamCommand),
    /// Create a stream (a `CreateStream` command), creating its bucket in
    /// the group first when it is missing there; with `media_type_match`
    /// a content type naming the existing stream's media type counts as
    /// the same.
    Create {
        /// The `CreateStream` command.
        command: StreamCommand,
        /// Compare content types as media types.
        media_type_match: bool,
    },
    /// An append, append-and-close or close.
    Write {
        /// The write.
        request: Box<WriteRequest>,
        /// The edge clock's time of the request.
        now_ms: u64,
    },
    /// Delete a stream unless it has expired (then it is not found).
    Delete {
        /// The stream.
        stream_id: BucketStreamId,
        /// The edge clock's time of the request.
        now_ms: u64,
    },
    /// Apply expiry to a stream at `now_ms`, renewing its TTL with
    /// `renew` (the replicated half of a read or head).
    Access {
        /// The stream.
        stream_id: BucketStreamId,
        /// The edge clock's time of the request.
        now_ms: u64,
        /// Renew the stream's TTL when a renewal is due.
        renew: bool,
    },
    /// Appends to streams of one affinity group, all or nothing.
    Transaction {
        /// The `Append` commands.
        commands: Vec<StreamCommand>,
    },
    /// Entries proposed together as one log entry (the log's batching:
    /// one log record, one replication and one fsync for all of them),
    /// applied in order exactly as if each were its own entry; answered
    /// with an [`EntryOutcome::Batch`] of their outcomes in the same
    /// order.
    Batch(Vec<GroupEntry>),
}

impl GroupEntry {
    /// The payload bytes the entry carries (appended bodies), for a log
    /// that bounds its batches' size.
    pub fn payload_bytes(&self) -> usize {
        match self {
            Self::Write { request, .. } => request.payload.len(),
            Self::Command(command) => command_payload_bytes(command),
            Self::Transaction { commands } => commands.iter().map(command_payload_bytes).sum(),
            Self::Batch(entries) => entries.iter().map(Self::payload_bytes).sum(),
            Self::Create { command, .. } => command_payload_bytes(command),
            Self::Delete { .. } | Self::Access { .. } => 0,
        }
    }
}

/// The appended bytes a command carries.
fn command_payload_bytes(command: &StreamCommand) -> usize {
    match command {
        StreamCommand::Append { payload, .. } => payload.len(),
        StreamCommand::AppendBatch { payloads, .. } => payloads.iter().map(bytes::Bytes::len).sum(),
        StreamCommand::CreateStream {
            initial_payload, ..
        } => initial_payload.len(),
        _ => 0,
    }
}

/// What applying a [`GroupEntry`] answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryOutcome {
    /// The answer to a command, create or delete.
    Response(StreamResponse),
    /// The answer to a write.
    Write(WriteOutcome),
    /// The answer to a transaction.
    Transaction(TransactionOutcome),
    /// Whether the accessed stream is (still) there.
    Accessed(bool),
    /// An entry of the log's own (no machine change).
    Nothing,
    /// The outcomes of a [`GroupEntry::Batch`]'s entries, in order.
    Batch(Vec<EntryOutcome>),
}

/// Called once with the outcome of a proposed entry, or with why it was
/// not applied.
pub type ProposalDone = Box<dyn FnOnce(Result<EntryOutcome, EngineError>) + Send>;

/// A boxed future, for the log's asynchronous calls.
pub type LogFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A group's log, as the replicated engine sees it.
pub trait GroupLog: Send + Sync + 'static {
    /// Hands an entry to the log. Entries proposed one after another are
    /// ordered in that order. `done` is called with the outcome once the
    /// entry is committed and applied, or with an error (no leader:
    /// [`EngineError::Unavailable`]; shutting down).
    fn propose(&self, entry: GroupEntry, done: ProposalDone);
    /// The group's replication status, for health reports.
    fn status(&self) -> GroupStatus;
    /// Whether this node leads the group and has applied every entry
    /// committed before its term began: a node's background workers (the
    /// cold tier's flush, GC and orphan sweep, the fork unpin janitor)
    /// run only while it answers true, so they act on the complete state
    /// and only one node acts at a time (short of a deposed leader that
    /// has not noticed yet). A log without peers always leads.
    fn leads(&self) -> bool {
        true
    }
    /// Stops the log (the engine is shutting down).
    fn shutdown(&self) -> LogFuture<()>;
    /// Delivers a message of the log's own protocol from a peer node
    /// (`kind` names it; the bytes are the log's encoding) and returns
    /// the log's answer. The engine only carries it.
    fn message(&self, kind: &str, body: Vec<u8>) -> LogFuture<Result<Vec<u8>, String>> {
        let _ = (kind, body);
        Box::pin(async { Err("this group's log takes no peer messages".to_owned()) })
    }
}

/// A group's replication status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStatus {
    /// The group's index.
    pub group: usize,
    /// The node id of the group's leader, when it has one.
    pub leader: Option<u64>,
    /// The log index of the last applied entry.
    pub applied_index: Option<u64>,
    /// The last log index this node holds.
    pub last_log_index: Option<u64>,
    /// The log writer's counters (group commit: writes, fsyncs, entries),
    /// when the log keeps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogStats>,
    /// The group's snapshots on this node, when the log keeps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotStats>,
}

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
    /// [`GroupEntry::Batch`], none for the log's own (blank, membership)
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

/// A message from a group's log to its owner task.
pub(crate) enum LogInput {
    /// The log is ready: start serving requests through it.
    Attach(Arc<dyn GroupLog>),
    /// Apply committed entries, in order.
    Apply {
        entries: Vec<GroupEntry>,
        reply: oneshot::Sender<Vec<EntryOutcome>>,
    },
    /// Write the machine's binary snapshot into `sink`.
    Snapshot {
        sink: Box<dyn SnapshotSink>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// Replace the machine with one a snapshot restored.
    Install {
        machine: Box<strand::StreamStateMachine>,
        reply: oneshot::Sender<()>,
    },
}

/// The handle a group's log uses to apply committed entries to the
/// group's machine, snapshot it and restore it. Every call is served by
/// the group's owner task in the order the calls were made. Cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct GroupApplier {
    group: usize,
    tx: mpsc::UnboundedSender<LogInput>,
    replica: crate::group::ReplicaSlot,
}

impl GroupApplier {
    pub(crate) fn new(
        group: usize,
        tx: mpsc::UnboundedSender<LogInput>,
        replica: crate::group::ReplicaSlot,
    ) -> Self {
        Self { group, tx, replica }
    }

    /// The group's index.
    pub fn group(&self) -> usize {
        self.group
    }

    /// Applies committed entries in order; one outcome per entry. With a
    /// [`SegmentReplica`](crate::SegmentReplica) installed, returns once
    /// it has settled what the entries handed it.
    ///
    /// # Errors
    /// [`EngineError::Shutdown`] when the group's task has ended.
    pub async fn apply(&self, entries: Vec<GroupEntry>) -> Result<Vec<EntryOutcome>, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(LogInput::Apply { entries, reply })
            .map_err(|_| EngineError::Shutdown)?;
        let outcomes = rx.await.map_err(|_| EngineError::Shutdown)?;
        if let Some(replica) = self.replica.get() {
            replica.settle(self.group).await;
        }
        Ok(outcomes)
    }

    /// Starts a snapshot of the machine's state after every entry applied
    /// so far (the request is queued now): the binary snapshot
    /// (`docs/snapshot-format.md`) is encoded into `sink` on a blocking
    /// thread, from a copy of the machine, so the group goes on serving
    /// meanwhile and the snapshot is never held whole in memory;
    /// [`PendingSnapshot::wait`] returns once [`SnapshotSink::finish`] has.
    pub fn snapshot_into(&self, sink: Box<dyn SnapshotSink>) -> PendingSnapshot {
        let (reply, rx) = oneshot::channel();
        match self.tx.send(LogInput::Snapshot { sink, reply }) {
            Ok(()) => PendingSnapshot(Some(rx)),
            Err(_) => PendingSnapshot(None),
        }
    }

    /// Replaces the machine with the one a snapshot (either format) read
    /// from `reader` restores; parked readers are woken to read again. A
    /// binary snapshot is decoded as it is read (on a blocking thread), so
    /// only the machine being built is held, not the snapshot's bytes.
    ///
    /// # Errors
    /// The snapshot's read, decode or restore error, or that the group
    /// stopped.
    pub async fn restore_from(&self, reader: Box<dyn std::io::Read + Send>) -> Result<(), String> {
        let machine = tokio::task::spawn_blocking(move || {
            strand::restore_from(std::io::BufReader::with_capacity(256 << 10, reader))
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| format!("the snapshot restore stopped: {e}"))??;
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(LogInput::Install {
                machine: Box::new(machine),
                reply,
            })
            .map_err(|_| "the group has stopped".to_owned())?;
        rx.await.map_err(|_| "the group has stopped".to_owned())
    }
}

/// Where a group's snapshot goes (a file, for a durable group): the
/// encoder writes the binary snapshot into it on a blocking thread, then
/// calls [`finish`](SnapshotSink::finish) once.
pub trait SnapshotSink: std::io::Write + Send + 'static {
    /// Called once the whole snapshot is written (and flushed): make it
    /// durable. An error fails the snapshot.
    ///
    /// # Errors
    /// Whatever making the bytes durable failed with.
    fn finish(&mut self) -> std::io::Result<()>;
}

/// Encodes `machine`'s binary snapshot into `sink` (`write_snapshot`
/// flushes it), then finishes it.
pub(crate) fn encode_snapshot(
    machine: &strand::StreamStateMachine,
    mut sink: Box<dyn SnapshotSink>,
) -> Result<(), String> {
    strand::write_snapshot(machine, strand::SnapshotFormat::Binary, &mut sink)
        .map_err(|e| e.to_string())?;
    sink.finish().map_err(|e| e.to_string())
}

/// A snapshot requested from a group's task.
#[derive(Debug)]
pub struct PendingSnapshot(Option<oneshot::Receiver<Result<(), String>>>);

impl PendingSnapshot {
    /// Waits until the snapshot is written and finished.
    ///
    /// # Errors
    /// The codec's or the sink's error, or that the group stopped.
    pub async fn wait(self) -> Result<(), String> {
        match self.0 {
            Some(rx) => rx
                .await
                .unwrap_or_else(|_| Err("the group has stopped".to_owned())),
            None => Err("the group has stopped".to_owned()),
        }
    }
}

/// One group of an engine started with [`Engine::start_replicated`](crate::Engine::start_replicated):
/// its log must be opened with the link's [`GroupApplier`] and then
/// attached; the group serves no request before.
#[derive(Debug)]
pub struct GroupLink {
    pub(crate) applier: GroupApplier,
    pub(crate) engine: crate::Engine,
}

impl GroupLink {
    /// The group's index.
    pub fn group(&self) -> usize {
        self.applier.group
    }

    /// The handle the group's log applies committed entries through.
    pub fn applier(&self) -> GroupApplier {
        self.applier.clone()
    }

    /// Attaches the group's log: from now on the group's state changes go
    /// through it.
    pub fn attach(self, log: Arc<dyn GroupLog>) {
        self.engine.set_log(self.applier.group, Arc::clone(&log));
        let _ = self.applier.tx.send(LogInput::Attach(log));
    }
}
