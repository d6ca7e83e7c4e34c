//! The openraft type configuration of a strand group.

use strand_engine::{EntryOutcome, GroupEntry};

/// A node's id.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// A strand group's Raft types: entries are the engine's
    /// `GroupEntry`, responses its `EntryOutcome`, snapshots the machine's
    /// binary snapshot in a file (`snapshot_file`).
    pub TypeConfig:
        D = GroupEntry,
        R = EntryOutcome,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = crate::snapshot_file::SnapshotFile,
        AsyncRuntime = openraft::TokioRuntime,
);
