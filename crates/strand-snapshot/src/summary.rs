//! Whole-snapshot validation without a state machine (for backup tools and
//! CLIs).

use crate::error::StreamSnapshotError;
use crate::validator::SnapshotValidator;
use crate::wire::StreamSnapshot;

/// Counts describing a snapshot that passed [`validate_snapshot`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotSummary {
    /// Number of active buckets (`buckets.len()`).
    pub buckets: u64,
    /// Number of erased buckets (`erased_buckets.len()`).
    pub erased_buckets: u64,
    /// Number of streams (`streams.len()`).
    pub streams: u64,
    /// Total hot payload bytes over all streams: what the restored group's
    /// hot-payload gauge would hold (saturating).
    pub hot_payload_bytes: u64,
    /// Total number of producer states over all streams.
    pub producers: u64,
    /// Number of pending cold GC entries (`pending_cold_gc.len()`).
    pub pending_cold_gc: u64,
}

fn count(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}

/// Runs every structural check restore runs (spec 07 §5.1–§5.9, §5.3 steps
/// 1–12) over `snapshot`, in restore's order, and summarizes it.
///
/// The group-level parts that restore takes without checks (shared owners,
/// GC queue, usage, quotas; §5.4) cannot fail and are only counted.
///
/// # Errors
///
/// The error restore would return for this snapshot.
pub fn validate_snapshot(
    snapshot: &StreamSnapshot,
) -> Result<SnapshotSummary, StreamSnapshotError> {
    let mut validator = SnapshotValidator::new(&snapshot.buckets, &snapshot.erased_buckets)?;
    let mut summary = SnapshotSummary {
        buckets: count(snapshot.buckets.len()),
        erased_buckets: count(snapshot.erased_buckets.len()),
        streams: count(snapshot.streams.len()),
        pending_cold_gc: count(snapshot.pending_cold_gc.len()),
        ..SnapshotSummary::default()
    };
    for entry in &snapshot.streams {
        validator.check_entry(entry)?;
        summary.hot_payload_bytes = summary
            .hot_payload_bytes
            .saturating_add(count(entry.payload.len()));
        summary.producers = summary
            .producers
            .saturating_add(count(entry.producer_states.len()));
    }
    validator.check_forks(&snapshot.fork_unpins)?;
    Ok(summary)
}
