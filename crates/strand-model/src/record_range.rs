//! [`StreamRecordRange`], a half-open range of JSON record ordinals (spec 01 §11.1).
//!
//! It lives in the model crate because read plans carry it; the records crate
//! re-exports it.

use serde::{Deserialize, Serialize};

/// Record ordinals `[first_record, next_record)`.
///
/// JSON: `{"first_record":0,"next_record":2}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StreamRecordRange {
    /// First record ordinal in the range.
    pub first_record: u64,
    /// Record ordinal just past the range.
    pub next_record: u64,
}
