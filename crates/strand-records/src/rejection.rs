//! `RecordWriteError`: why a write path rejects a command for record reasons
//! (spec 02 §3.9).

use crate::RecordIndexError;

/// A record-related rejection of a write command.
///
/// Write paths never expose a [`RecordIndexError`]; the helpers of this crate
/// return this type instead and the state machine turns it into a response:
///
/// | variant | code | `next_offset` | `context` |
/// |---|---|---|---|
/// | [`RecordTailMismatch`](Self::RecordTailMismatch) | `RecordPreconditionFailed` | `Some(tail)` | `[RecordTailMismatch { current_record }]` |
/// | [`RetentionNotRecordBoundary`](Self::RetentionNotRecordBoundary) | `InvalidRecordBoundaries` | `Some(tail)` | `[]` |
/// | every other variant | `InvalidRecordBoundaries` | `None` | `[]` |
///
/// [`RecordWriteError::is_precondition_failure`],
/// [`RecordWriteError::reports_tail`] and
/// [`RecordWriteError::current_record`] give those three facts; the
/// `Display` text is the response message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordWriteError {
    /// A JSON-typed payload is not newline-terminated
    /// ([`crate::canonical_json_record_ends`] failed).
    #[error("application/json payload must use canonical newline boundaries")]
    NonCanonicalJsonPayload,
    /// Record ends were given for a non-JSON stream (at create) or for a
    /// non-JSON stream without a record index (at append).
    #[error("binary streams cannot carry JSON record boundaries")]
    BoundariesOnNonJsonStream,
    /// The record ends do not match the payload or the index (prepare
    /// failed); also used for an overflow while combining batch ends.
    #[error("record boundaries do not match the canonical JSON payload: {0}")]
    BoundaryMismatch(RecordIndexError),
    /// `record_match` was given for a stream without a record index.
    #[error("record-match requires active JSON record coordinates")]
    RecordMatchWithoutIndex,
    /// The record index could not compute its range while checking
    /// `record_match`.
    #[error("record index is invalid: {0}")]
    InvalidRecordIndex(RecordIndexError),
    /// `record_match` differs from the stream's `next_record`.
    #[error("record tail is {current_record}, expected {expected_record}")]
    RecordTailMismatch {
        /// The stream's current `next_record`.
        current_record: u64,
        /// The `record_match` of the command.
        expected_record: u64,
    },
    /// The retention offset is neither a retained record start nor the tail.
    #[error("retention offset is not a retained record boundary: {0}")]
    RetentionNotRecordBoundary(RecordIndexError),
}

impl RecordWriteError {
    /// `true` when the response code is `RecordPreconditionFailed`; `false`
    /// when it is `InvalidRecordBoundaries`.
    #[must_use]
    pub fn is_precondition_failure(&self) -> bool {
        matches!(self, Self::RecordTailMismatch { .. })
    }

    /// `true` when the response carries `next_offset: Some(tail)`; `false`
    /// when it carries `None`.
    #[must_use]
    pub fn reports_tail(&self) -> bool {
        matches!(
            self,
            Self::RecordTailMismatch { .. } | Self::RetentionNotRecordBoundary(_)
        )
    }

    /// `Some(current_record)` when the response context is
    /// `[RecordTailMismatch { current_record }]`; `None` when it is empty.
    #[must_use]
    pub fn current_record(&self) -> Option<u64> {
        match self {
            Self::RecordTailMismatch { current_record, .. } => Some(*current_record),
            _ => None,
        }
    }
}
