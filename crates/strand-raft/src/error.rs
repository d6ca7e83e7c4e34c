//! Why a durable node could not start.

use std::path::PathBuf;

use crate::segment::LogError;

/// Why a durable node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A log directory could not be opened.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Another process holds the data directory's lock.
    #[error(
        "{} is in use by another process (it holds the lock {}); two nodes cannot share one data directory",
        dir.display(),
        lock.display()
    )]
    Locked {
        /// The data directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The data directory's description does not match the configuration.
    #[error("{}: {reason}", path.display())]
    DataDir {
        /// The description file.
        path: PathBuf,
        /// What does not match.
        reason: String,
    },
    /// A group's snapshot could not be restored.
    #[error("group {group}: {reason}")]
    Snapshot {
        /// The group.
        group: usize,
        /// The error.
        reason: String,
    },
    /// openraft refused to start.
    #[error("group {group}: raft: {reason}")]
    Raft {
        /// The group.
        group: usize,
        /// The error.
        reason: String,
    },
}
