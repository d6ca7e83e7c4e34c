//! Groups this node does not hold: read-only questions answered by a node
//! that does.
//!
//! A cluster's node may not hold every group's state (a node that joined
//! holds a group only once the group's leader has added it). A question
//! that goes over every group — does a bucket exist, what does it use,
//! which streams does a listing show — is a [`GroupQuery`]: a typed,
//! serializable value with a pure function of one group's machine. The
//! engine answers it from its own machine when it holds the group, and
//! otherwise hands it, encoded (MessagePack), to the installed
//! [`RemoteGroups`] (the replication crate, which knows the cluster and
//! its transport), whose answer comes back encoded the same way. The
//! node that receives such a question answers it with
//! `Engine::answer_here`. A fork's read through a source in a group the
//! node does not hold goes the same way, one step of the chain at a time
//! ([`ReadStep`], answered with `Engine::answer_read_step`).

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strand::{
    BucketStreamId, BucketUsageSnapshot, ForkProbe, HotRead, StreamResponse, StreamStateMachine,
};

use crate::error::EngineError;

/// A read-only question to one group's machine that another node can
/// answer: the value travels as MessagePack, and so does its answer.
pub trait GroupQuery: Serialize + DeserializeOwned + Send + 'static {
    /// The question's name on the wire (unique among the queries a node
    /// answers).
    const KIND: &'static str;
    /// What the group answers.
    type Answer: Serialize + DeserializeOwned + Send + 'static;
    /// The answer of one group's machine.
    fn run(self, machine: &StreamStateMachine) -> Self::Answer;
}

/// The future a [`RemoteGroups`] answers with: the encoded answer.
pub type RemoteAnswer =
    Pin<Box<dyn Future<Output = Result<Vec<u8>, EngineError>> + Send + 'static>>;

/// Which groups this node holds, and how a question reaches a node that
/// holds one it does not (installed with `Engine::set_remote_groups`).
pub trait RemoteGroups: Send + Sync + 'static {
    /// Whether this node holds `group`'s state and may answer from it.
    fn holds(&self, group: usize) -> bool;
    /// Whether this node is out of `group`: it does not hold it and the
    /// cluster's placement gives it no vote in it, so what it kept of the
    /// group (copies of its flushed bytes) may go. `false` unless known.
    fn dropped(&self, group: usize) -> bool {
        let _ = group;
        false
    }
    /// Asks `group`'s leader the question `kind` (encoded as `query`);
    /// its encoded answer. Members that hold the group without leading it
    /// refuse ([`AnswerError::NotLeader`]), so the leader is found by
    /// asking on.
    fn ask(&self, group: usize, kind: &'static str, query: Vec<u8>) -> RemoteAnswer;
}

/// Why a question from another node was not answered
/// (`Engine::answer_here`).
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// This node does not hold the group (the asker tries another).
    #[error("this node does not hold group {0}")]
    NotHeld(usize),
    /// This node holds the group but does not lead it: its state may lag
    /// what the leader acknowledged (the asker tries another).
    #[error("this node does not lead group {0}")]
    NotLeader(usize),
    /// No such group.
    #[error("no group {0}")]
    NoSuchGroup(usize),
    /// The question could not be decoded.
    #[error("not a {kind} question: {error}")]
    Malformed {
        /// The question's kind.
        kind: &'static str,
        /// What the decoder said.
        error: String,
    },
    /// The group could not answer.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Whether a bucket exists in a group (`Engine::bucket_exists`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BucketExists {
    /// The bucket's id.
    pub bucket: String,
}

impl GroupQuery for BucketExists {
    const KIND: &'static str = "bucket-exists";
    type Answer = bool;
    fn run(self, machine: &StreamStateMachine) -> bool {
        machine.bucket_exists(&self.bucket)
    }
}

/// A bucket's usage in a group, if the group knows the bucket
/// (`Engine::bucket_usage`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BucketUsage {
    /// The bucket's id.
    pub bucket: String,
}

impl GroupQuery for BucketUsage {
    const KIND: &'static str = "bucket-usage";
    type Answer = Option<BucketUsageSnapshot>;
    fn run(self, machine: &StreamStateMachine) -> Option<BucketUsageSnapshot> {
        machine
            .bucket_usage_report()
            .into_iter()
            .find(|u| u.bucket_id == self.bucket)
    }
}

/// Whether a stream exists only for its forks (`Engine::is_soft_deleted`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SoftDeleted {
    /// The stream.
    pub stream: BucketStreamId,
}

impl GroupQuery for SoftDeleted {
    const KIND: &'static str = "soft-deleted";
    type Answer = bool;
    fn run(self, machine: &StreamStateMachine) -> bool {
        machine.is_soft_deleted(&self.stream)
    }
}

/// Where the message at `offset` of `stream` ends, and which JSON record
/// starts there (`StreamStateMachine::fork_probe`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProbeFork {
    /// The stream.
    pub stream: BucketStreamId,
    /// The offset.
    pub offset: u64,
}

impl GroupQuery for ProbeFork {
    const KIND: &'static str = "fork-probe";
    type Answer = ForkProbe;
    fn run(self, machine: &StreamStateMachine) -> ForkProbe {
        machine.fork_probe(&self.stream, self.offset)
    }
}

/// One step of a read through a fork chain, in the group that holds
/// `stream`: up to `max_len` bytes from `offset`, whatever tier holds
/// them, or where the stream inherits that offset from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadStep {
    /// The stream read.
    pub stream: BucketStreamId,
    /// From this offset.
    pub offset: u64,
    /// At most this many bytes.
    pub max_len: usize,
}

impl ReadStep {
    /// The question's name on the wire.
    pub const KIND: &'static str = "read-step";
}

/// A stream's read (`Engine::read`) in a group this node does not hold:
/// answered by a member that does, as its own reader's read (TTL renewal
/// included), with a [`StepAnswer::Data`] or [`StepAnswer::Refused`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadPage {
    /// The stream read.
    pub stream: BucketStreamId,
    /// Where the read starts.
    pub from: crate::ops::ReadFrom,
    /// At most this many bytes.
    pub max_len: usize,
}

impl ReadPage {
    /// The question's name on the wire.
    pub const KIND: &'static str = "read";
}

/// A stream's metadata (`Engine::head`) in a group this node does not
/// hold: answered by a member that does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeadOf {
    /// The stream.
    pub stream: BucketStreamId,
}

impl HeadOf {
    /// The question's name on the wire.
    pub const KIND: &'static str = "head";
}

/// What a [`ReadStep`] or a [`ReadPage`] found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StepAnswer {
    /// The stream's own bytes.
    Data(HotRead),
    /// The machine's refusal.
    Refused(StreamResponse),
    /// The offset lies below the stream's fork offset `cap`: read
    /// `source`.
    Inherited {
        /// The source stream.
        source: BucketStreamId,
        /// The fork offset.
        cap: u64,
        /// The fork's content type.
        content_type: String,
    },
}
