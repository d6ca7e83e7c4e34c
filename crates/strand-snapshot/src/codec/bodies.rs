//! The MessagePack bodies of the group-level frames. Field names are the
//! `StreamSnapshot` field names, with the same legacy defaults as JSON.

use serde::{Deserialize, Serialize};
use strand_model::{ColdGcEntry, MachineOptions};
use strand_usage::{BucketQuotaSnapshot, BucketUsageSnapshot};

use crate::wire::{ForkUnpinSnapshot, SharedColdObjectOwnersSnapshot};

/// Frame 0, written.
#[derive(Serialize)]
pub(crate) struct BucketsOut<'a> {
    pub(crate) buckets: &'a [String],
    pub(crate) erased_buckets: &'a [String],
}

/// Frame 0, read: `buckets` is required, like in JSON.
#[derive(Deserialize)]
pub(crate) struct BucketsIn {
    pub(crate) buckets: Vec<String>,
    #[serde(default)]
    pub(crate) erased_buckets: Vec<String>,
}

/// The GC queue frame, written.
#[derive(Serialize)]
pub(crate) struct GcOut<'a> {
    pub(crate) pending_cold_gc: &'a [ColdGcEntry],
    pub(crate) next_cold_gc_seq: u64,
}

/// The GC queue frame, read.
#[derive(Deserialize)]
pub(crate) struct GcIn {
    #[serde(default)]
    pub(crate) pending_cold_gc: Vec<ColdGcEntry>,
    #[serde(default)]
    pub(crate) next_cold_gc_seq: u64,
}

/// The shared-owners frame, written.
#[derive(Serialize)]
pub(crate) struct OwnersOut<'a> {
    pub(crate) shared_cold_object_owners: &'a [SharedColdObjectOwnersSnapshot],
}

/// The shared-owners frame, read.
#[derive(Deserialize)]
pub(crate) struct OwnersIn {
    #[serde(default)]
    pub(crate) shared_cold_object_owners: Vec<SharedColdObjectOwnersSnapshot>,
}

/// The usage frame, written.
#[derive(Serialize)]
pub(crate) struct UsageOut<'a> {
    pub(crate) bucket_usage: &'a [BucketUsageSnapshot],
}

/// The usage frame, read.
#[derive(Deserialize)]
pub(crate) struct UsageIn {
    #[serde(default)]
    pub(crate) bucket_usage: Vec<BucketUsageSnapshot>,
}

/// The quotas frame, written. It also carries the group's machine options,
/// only for the corrected profile (an optional field: older readers ignore
/// it, and older files without it read as the reference profile).
#[derive(Serialize)]
pub(crate) struct QuotasOut<'a> {
    pub(crate) bucket_quotas: &'a [BucketQuotaSnapshot],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) machine_options: Option<MachineOptions>,
    /// Undelivered fork unpins (a strand extension), only when there are
    /// some.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(crate) fork_unpins: &'a [ForkUnpinSnapshot],
    /// The next fork pin id, only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) next_fork_pin: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if signature
fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// The quotas frame, read.
#[derive(Deserialize)]
pub(crate) struct QuotasIn {
    #[serde(default)]
    pub(crate) bucket_quotas: Vec<BucketQuotaSnapshot>,
    #[serde(default)]
    pub(crate) machine_options: Option<MachineOptions>,
    #[serde(default)]
    pub(crate) fork_unpins: Vec<ForkUnpinSnapshot>,
    #[serde(default)]
    pub(crate) next_fork_pin: u64,
}

/// The footer frame (both ways; every field required).
#[derive(Serialize, Deserialize)]
pub(crate) struct Footer {
    /// Number of frames before the footer.
    pub(crate) frames: u64,
    /// Number of stream frames.
    pub(crate) streams: u64,
    /// CRC-64/XZ over the little-endian CRCs of all frames before the
    /// footer, in order.
    pub(crate) checksum: u64,
}
