//! Record queries over an optional index (spec 02 §3.7).
//!
//! The state machine answers `Ok(None)` for an unknown stream itself and
//! passes the slot's index (and tail) to these helpers otherwise. None of
//! them mutates anything or checks expiry.

use crate::{RecordIndexError, StreamRecordIndex, StreamRecordRange};

/// `record_range`: `Ok(None)` without an index, else the index's range.
///
/// # Errors
///
/// `ArithmeticOverflow` from [`StreamRecordIndex::range`].
pub fn record_range_of(
    index: Option<&StreamRecordIndex>,
) -> Result<Option<StreamRecordRange>, RecordIndexError> {
    index.map(StreamRecordIndex::range).transpose()
}

/// `offset_for_record`: `Ok(None)` without an index, else
/// [`StreamRecordIndex::offset_for`]`(record, tail_offset)`.
///
/// # Errors
///
/// The error of [`StreamRecordIndex::offset_for`], unchanged.
pub fn offset_for_record(
    index: Option<&StreamRecordIndex>,
    record: u64,
    tail_offset: u64,
) -> Result<Option<u64>, RecordIndexError> {
    index
        .map(|index| index.offset_for(record, tail_offset))
        .transpose()
}

/// Step 3–4 of `record_range_for_append` (after the producer lookup):
/// `Ok(None)` without an index, else `{record_for_offset(start_offset),
/// record_for_offset(next_offset)}`, the first error returned.
///
/// # Errors
///
/// The first error of [`StreamRecordIndex::record_for_offset`].
pub fn record_range_for_offsets(
    index: Option<&StreamRecordIndex>,
    start_offset: u64,
    next_offset: u64,
    tail_offset: u64,
) -> Result<Option<StreamRecordRange>, RecordIndexError> {
    let Some(index) = index else {
        return Ok(None);
    };
    let first_record = index.record_for_offset(start_offset, tail_offset)?;
    let next_record = index.record_for_offset(next_offset, tail_offset)?;
    Ok(Some(StreamRecordRange {
        first_record,
        next_record,
    }))
}
