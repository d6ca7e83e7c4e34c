//! Why the engine could not serve a request, as opposed to a machine
//! answering it with an error (`StreamResponse::Error`).

use strand::StreamResponse;

/// Why the engine could not serve a request (as opposed to the machine
/// answering it with an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// A group's queue is full: back-pressure, retry later.
    #[error("the group's request queue is full")]
    Busy,
    /// The node parks as many live readers as it allows.
    #[error("too many live readers")]
    TooManyWaiters,
    /// The engine is shutting down.
    #[error("the engine is shutting down")]
    Shutdown,
    /// A replicated group cannot take writes now, for the reason given:
    /// retry later.
    #[error("the group cannot take writes now: {0}")]
    Unavailable(Unavailable),
}

/// Why a replicated group could not take a write
/// ([`EngineError::Unavailable`]). Whether the write was applied is
/// unknown for [`NoAnswer`](Unavailable::NoAnswer) and
/// [`Forwarding`](Unavailable::Forwarding) (it may still commit; a client
/// retrying with its producer headers is deduplicated); for the other
/// causes it was not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unavailable {
    /// The group has no leader this node knows of (an election is under
    /// way, or the node is cut off from a quorum).
    #[error("it has no leader")]
    NoLeader,
    /// The group's log is not attached yet (the node is starting).
    #[error("its log is not open yet")]
    NotAttached,
    /// The entry was handed to the leader on another node, and that
    /// exchange failed (the leader unreachable, refusing, or deposed).
    #[error("forwarding to its leader failed")]
    Forwarding,
    /// The log took the entry but did not answer in time.
    #[error("its log did not answer in time")]
    NoAnswer,
    /// The log refused the entry or failed (a write error stops a
    /// group's log).
    #[error("its log failed")]
    LogFailed,
    /// The group's task ended while the engine runs.
    #[error("its task has stopped")]
    Stopped,
    /// The group's log is waiting for disk space: its filesystem is full.
    /// What it took before is written once space is freed.
    #[error("its log is waiting for disk space")]
    DiskFull,
    /// This node does not hold the group, and no node that holds it
    /// answered a question about it.
    #[error("no node that holds it answered")]
    Remote,
    /// The entry was handed to the leader on another node, whose
    /// hot-memory limits keep it out until flushing catches up.
    #[error("its leader's hot memory is full until flushing catches up")]
    LeaderFull,
}

impl From<Unavailable> for EngineError {
    fn from(cause: Unavailable) -> Self {
        Self::Unavailable(cause)
    }
}

/// A command sent to every group (`Engine::apply_all`) that one group
/// did not take: the groups before it applied it, the groups after it were
/// not asked, and the failed group's own outcome is unknown when its log
/// did not confirm the command ([`EngineError::Unavailable`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the command was applied in {} of {groups} groups: group {group} did not take it ({error})",
    applied.len()
)]
pub struct FanOutError {
    /// The answers of groups `0..group`, which applied the command.
    pub applied: Vec<StreamResponse>,
    /// The group that failed.
    pub group: usize,
    /// How many groups the node has.
    pub groups: usize,
    /// Why the group failed.
    pub error: EngineError,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unavailable_group_says_why() {
        assert_eq!(
            EngineError::from(Unavailable::NoLeader).to_string(),
            "the group cannot take writes now: it has no leader"
        );
        assert_eq!(
            EngineError::Unavailable(Unavailable::Forwarding).to_string(),
            "the group cannot take writes now: forwarding to its leader failed"
        );
    }
}
