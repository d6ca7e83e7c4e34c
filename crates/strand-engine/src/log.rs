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

use serde::{Deserialize, Serialize};
use strand::{BucketStreamId, StreamCommand, StreamResponse};

use crate::error::EngineError;
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
}
