//! Groups this node does not hold: read-only questions answered by a node
//! that does.
//!
//! A cluster's node may not hold every group's state (a node that joined
//! holds a group only once the group's leader has added it). A question
//! that goes over every group — does a bucket exist, what does it use,
//! which streams does a listing show — is a [`GroupQuery`]: a typed,
//! serializable value with a pure function of one group's machine. The
//! engine answers it from its own machine when it holds the group, and
//! otherwise hands it, encoded, to the installed [`RemoteGroups`] (the
//! replication crate, which knows the cluster and its transport), whose
//! answer comes back encoded the same way. The node that receives such a
//! question answers it with `Engine::answer_here`.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strand::{BucketUsageSnapshot, StreamStateMachine};

use crate::error::EngineError;

/// A read-only question to one group's machine that another node can
/// answer: the value travels as JSON, and so does its answer.
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
    /// Asks a node that holds `group` the question `kind` (encoded as
    /// `query`); its encoded answer.
    fn ask(&self, group: usize, kind: &'static str, query: Vec<u8>) -> RemoteAnswer;
}

/// Why a question from another node was not answered
/// (`Engine::answer_here`).
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// This node does not hold the group (the asker tries another).
    #[error("this node does not hold group {0}")]
    NotHeld(usize),
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
