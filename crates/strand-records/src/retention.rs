//! Record helpers of retention and restore (spec 02 §3.5, §3.8).

use crate::{PendingRecordRetention, RecordIndexError, RecordWriteError, StreamRecordIndex};

/// Validates a retention against the stream's index without changing it
/// (spec 02 §3.5 steps 1–2).
///
/// Without an index: `Ok(None)`. With one:
/// [`StreamRecordIndex::prepare_retain`]`(retained_offset, tail_offset)`.
///
/// Called by `AdvanceRetention` after area 05's checks (current floor,
/// checkpoint existence, offset ≤ checkpoint, no-op when equal to the current
/// floor, message-boundary alignment) and **before any mutation**. While
/// compacting the retained prefix, apply the result with
/// [`StreamRecordIndex::commit_retain`] on the slot's index. This replaces
/// the reference's clone-then-replace without copying the index.
///
/// # Errors
///
/// [`RecordWriteError::RetentionNotRecordBoundary`] if the offset is neither
/// a stored record start nor the tail (or `first_record` would overflow):
/// `InvalidRecordBoundaries`, `next_offset: Some(tail)`, `context: []`.
pub fn prepare_record_retention(
    index: Option<&StreamRecordIndex>,
    retained_offset: u64,
    tail_offset: u64,
) -> Result<Option<PendingRecordRetention>, RecordWriteError> {
    index
        .map(|index| index.prepare_retain(retained_offset, tail_offset))
        .transpose()
        .map_err(RecordWriteError::RetentionNotRecordBoundary)
}

/// The record-index check of restore and `ImportSnapshot` (spec 02 §3.8):
/// [`StreamRecordIndex::validate`]`(retained_offset, tail_offset)` when an
/// index is present, `Ok(())` when it is absent.
///
/// Called after the bucket, visible-snapshot-offset and retained-offset range
/// checks and **before** the payload / hot-segment, message-record and
/// integrity checks. Map any error to
/// `StreamSnapshotError::RecordBoundaryMismatch { stream_id }`. The index is
/// then installed as is; content type and message records are not
/// cross-checked.
///
/// # Errors
///
/// The error of [`StreamRecordIndex::validate`].
pub fn validate_restored_record_index(
    index: Option<&StreamRecordIndex>,
    retained_offset: u64,
    tail_offset: u64,
) -> Result<(), RecordIndexError> {
    match index {
        Some(index) => index.validate(retained_offset, tail_offset),
        None => Ok(()),
    }
}
