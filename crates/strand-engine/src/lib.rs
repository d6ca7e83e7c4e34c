//! strand-engine: a node's groups of `StreamStateMachine`s, independent of
//! any transport.
//!
//! It owns placement (which group holds a stream, spec 08 §23), one owner
//! task per group (requests reach a group only through its bounded queue;
//! no lock is shared between groups), the edge clock (time read once per
//! request and carried inside the command), and live-read waiters parked per
//! stream and woken by that stream's append, close or delete. Reads come out
//! of the hot buffer as `Bytes` slices, never copied.
//!
//! It must not know HTTP, headers or the Durable Streams wire format: the
//! server crate parses requests into the typed calls of [`Engine`] and
//! renders what they answer. Every state change is a [`GroupEntry`] that
//! one function applies: the in-memory engine ([`Engine::start`]) applies
//! it at once; a replicated engine ([`Engine::start_replicated`]) proposes
//! it to the group's [`GroupLog`] (implemented by `strand-raft`, which
//! this crate does not know) and applies it when the log hands it back
//! committed through the group's [`GroupApplier`]. The [`Engine`]
//! interface is the same for both.
//!
//! Modules: `engine` (the [`Engine`] handle and its requests), `start`
//! (constructors, [`GroupLink`]), `group` (a group's owner task and the
//! one apply function), `log` (the [`GroupLog`] interface and
//! [`GroupEntry`]), `applier` (the log's side: [`GroupApplier`],
//! snapshots), `error` ([`EngineError`]), `ops` (typed requests and
//! outcomes), `forks` (fork steps across groups and the unpin janitor),
//! `waiters` (parked live readers), `replica` (a node's copy of flushed
//! bytes), `remote` (questions to groups this node may not hold) and
//! `asking` (asking and answering them), `placement`, `clock`. No module
//! imports one that imports it back: `engine` builds on `group`, `log`,
//! `applier` and `remote`; `forks`, `asking` and `start` build on
//! `engine`.

mod applier;
mod asking;
mod clock;
mod engine;
mod error;
mod forks;
mod group;
mod log;
mod ops;
mod placement;
mod remote;
mod replica;
mod start;
mod waiters;

pub use applier::{GroupApplier, PendingSnapshot, SnapshotSink};
pub use clock::{Clock, ManualClock, SystemClock};
pub use engine::{
    ColdRead, ColdReader, Engine, EngineConfig, Subscription, WaitOutcome, WaiterPermit,
};
pub use error::{EngineError, FanOutError, Unavailable};
pub use forks::{ForkRequest, MAX_FORK_DEPTH};
pub use group::{media_type, same_media_type};
pub use log::{EntryOutcome, GroupEntry, GroupLog, GroupStatus, LogFuture, ProposalDone};
pub use ops::{HeadOutcome, ReadFrom, ReadOutcome, TransactionOutcome, WriteOutcome, WriteRequest};
pub use placement::{fnv1a64, group_of, placement_hash};
pub use remote::{
    AnswerError, BucketExists, BucketUsage, GroupQuery, HeadOf, ProbeFork, ReadPage, ReadStep,
    RemoteAnswer, RemoteGroups, SoftDeleted, StepAnswer,
};
pub use replica::{FlushedPiece, Reclaimed, SegmentPeers, SegmentReplica};
pub use start::GroupLink;
pub use waiters::{AppendNotice, NoticeRendering};
