//! The `StreamStateMachine` struct: the group state every handler module
//! works on.

use std::collections::BTreeSet;

use strand_usage::UsageLedger;

use crate::gc::{GcQueue, SharedObjects};
use crate::registry::Registry;
use crate::ttl::TtlIndex;

/// One replicated group's Durable Streams state. Deterministic: the same
/// commands give the same responses and snapshots on every replica.
#[derive(Debug, Clone, Default)]
pub struct StreamStateMachine {
    /// Active bucket ids.
    pub(crate) buckets: BTreeSet<String>,
    /// Purged bucket ids: permanent fences.
    pub(crate) erased: BTreeSet<String>,
    /// Live streams.
    pub(crate) registry: Registry,
    /// Expiry entries of streams with a TTL or absolute expiry.
    pub(crate) ttl: TtlIndex,
    /// Sum of every live stream's hot buffer length.
    pub(crate) hot_bytes: u64,
    /// Pending cold-object reclamation.
    pub(crate) gc: GcQueue,
    /// Reference counts and owners of shared cold objects.
    pub(crate) shared: SharedObjects,
    /// Per-bucket usage counters and quotas.
    pub(crate) usage: UsageLedger,
}

impl StreamStateMachine {
    /// An empty group: no buckets, no streams.
    pub fn new() -> Self {
        Self::default()
    }
}
