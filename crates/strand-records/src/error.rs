//! The error type of the record index (spec 01 §11.1, 02 §2.3).

use serde::{Deserialize, Serialize};

/// Why a record-index operation failed.
///
/// Query methods return it unchanged. Write paths never expose it: they turn
/// it into `InvalidRecordBoundaries` (see [`crate::RecordWriteError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum RecordIndexError {
    /// Relative ends do not cover the payload, new records would not start
    /// strictly after the existing ones, or a validation failed.
    #[error("record boundaries are invalid")]
    InvalidBoundaries,
    /// A `u64` addition overflowed (`first_record + count`, `base + end`).
    #[error("record index arithmetic overflowed")]
    ArithmeticOverflow,
    /// The asked ordinal is below the retained range; the fields carry the
    /// current range.
    #[error("record is gone: retained records are [{first_record}, {next_record})")]
    RecordGone {
        /// Ordinal of the first retained record.
        first_record: u64,
        /// Ordinal one past the last record.
        next_record: u64,
    },
    /// The asked ordinal is above `next_record`.
    #[error("record is beyond the tail: next record is {next_record}")]
    RecordBeyondTail {
        /// Ordinal one past the last record.
        next_record: u64,
    },
    /// The offset is neither a stored record start offset nor the tail.
    #[error("offset is not a record boundary")]
    OffsetNotRecordBoundary,
}
