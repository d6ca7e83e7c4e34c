//! The `StreamStateMachine` struct: the group state every handler module
//! works on.

use std::collections::BTreeSet;

use strand_model::{MachineOptions, MachineProfile};
use strand_usage::UsageLedger;

use crate::fork::UnpinOutbox;
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
    /// The profile and its options (part of the group's state).
    pub(crate) options: MachineOptions,
    /// Fork unpins for sources in any group, not yet delivered.
    pub(crate) fork_unpins: UnpinOutbox,
    /// How many live slots are soft-deleted (0 spares the per-command
    /// lookup).
    pub(crate) soft_deleted_streams: usize,
    /// The id of the next fork pin this group gives out.
    pub(crate) next_fork_pin: u64,
}

impl StreamStateMachine {
    /// An empty group in the reference profile: no buckets, no streams.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty group in `profile`, with the default options.
    pub fn with_profile(profile: MachineProfile) -> Self {
        Self::with_options(MachineOptions::with_profile(profile))
    }

    /// An empty group with these options. A receipt limit of 0 counts as 1.
    pub fn with_options(options: MachineOptions) -> Self {
        let mut machine = Self::default();
        machine.install_options(options);
        machine
    }

    /// The group's options.
    pub fn options(&self) -> MachineOptions {
        self.options
    }

    /// The group's profile.
    pub fn profile(&self) -> MachineProfile {
        self.options.profile
    }

    /// Whether the group runs the corrected profile.
    #[inline]
    pub(crate) fn corrected(&self) -> bool {
        self.options.profile == MachineProfile::Corrected
    }

    /// The receipt limit a producer record uses: `None` (unbounded) for
    /// the reference profile.
    #[inline]
    pub(crate) fn receipt_limit(&self) -> Option<usize> {
        self.corrected()
            .then(|| usize::try_from(self.options.producer_receipt_limit).unwrap_or(usize::MAX))
    }
}
