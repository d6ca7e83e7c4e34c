//! `StreamRecordIndex`: record ordinals to byte offsets (spec 02 §2).

use serde::{Deserialize, Serialize};

use crate::{RecordIndexError, StreamRecordRange};

/// Maps record ordinals to absolute byte offsets for one JSON stream.
///
/// Record `first_record + i` starts at `record_offsets[i]`; record `k` ends
/// where record `k + 1` starts and the last record ends at the stream tail,
/// which the index does not store (every method that needs it takes it as an
/// argument).
///
/// Serde shape (spec 01 §11.1): `{"first_record":0,"record_offsets":[]}`;
/// both fields are required on input and unknown fields are ignored.
/// Decoding does **not** validate; restore paths call
/// [`StreamRecordIndex::validate`] (or [`crate::validate_restored_record_index`]).
///
/// Appends, retention and transaction rollback go through the
/// prepare/commit/rollback API in [`crate::PendingRecordAppend`],
/// [`crate::PendingRecordRetention`] and [`crate::RecordIndexCheckpoint`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRecordIndex {
    pub(crate) first_record: u64,
    pub(crate) record_offsets: Vec<u64>,
}

/// Whether `ends` are valid relative record ends for a payload of
/// `payload_len` bytes (spec 02 §2.4, `ends_cover`).
///
/// For `payload_len == 0` the list must be empty. Otherwise it must be
/// non-empty, end with exactly `payload_len`, not start with `0`, and be
/// strictly increasing.
#[must_use]
pub fn relative_ends_cover(payload_len: u64, ends: &[u64]) -> bool {
    if payload_len == 0 {
        return ends.is_empty();
    }
    match (ends.first(), ends.last()) {
        (Some(&first), Some(&last)) => {
            first != 0 && last == payload_len && ends.windows(2).all(|pair| pair[0] < pair[1])
        }
        _ => false,
    }
}

/// `len` as a `u64`, or `ArithmeticOverflow`.
pub(crate) fn len_u64(len: usize) -> Result<u64, RecordIndexError> {
    u64::try_from(len).map_err(|_| RecordIndexError::ArithmeticOverflow)
}

impl StreamRecordIndex {
    /// An empty index: `first_record = 0`, no offsets (spec 02 §2.5 method 1).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds an index from stored values and validates it against
    /// `(retained_offset, tail_offset)` with [`StreamRecordIndex::validate`]
    /// (spec 02 §2.5 method 2). `first_record` is not checked beyond range
    /// overflow.
    ///
    /// # Errors
    ///
    /// The error of [`StreamRecordIndex::validate`].
    pub fn restore(
        first_record: u64,
        record_offsets: Vec<u64>,
        retained_offset: u64,
        tail_offset: u64,
    ) -> Result<Self, RecordIndexError> {
        let index = Self {
            first_record,
            record_offsets,
        };
        index.validate(retained_offset, tail_offset)?;
        Ok(index)
    }

    /// The retained ordinal range `[first_record, first_record + len)`
    /// (spec 02 §2.5 method 3).
    ///
    /// # Errors
    ///
    /// [`RecordIndexError::ArithmeticOverflow`] if `next_record` overflows.
    pub fn range(&self) -> Result<StreamRecordRange, RecordIndexError> {
        let next_record = self
            .first_record
            .checked_add(len_u64(self.record_offsets.len())?)
            .ok_or(RecordIndexError::ArithmeticOverflow)?;
        Ok(StreamRecordRange {
            first_record: self.first_record,
            next_record,
        })
    }

    /// The stored start offsets of the retained records, in ordinal order
    /// (spec 02 §2.5 method 4).
    #[must_use]
    pub fn record_offsets(&self) -> &[u64] {
        &self.record_offsets
    }

    /// Appends the records of one payload that starts at `base_offset`
    /// (spec 02 §2.5 method 5): [`StreamRecordIndex::prepare_append`]
    /// followed by [`StreamRecordIndex::commit_append`]. Returns the range
    /// of the newly assigned ordinals. On error the index is unchanged.
    ///
    /// # Errors
    ///
    /// The error of [`StreamRecordIndex::prepare_append`].
    pub fn append_relative_ends(
        &mut self,
        base_offset: u64,
        payload_len: u64,
        relative_ends: &[u64],
    ) -> Result<StreamRecordRange, RecordIndexError> {
        let pending = self.prepare_append(base_offset, payload_len, relative_ends)?;
        Ok(self.commit_append(pending))
    }

    /// The start offset of `record`, or `tail_offset` for `next_record`
    /// (spec 02 §2.5 method 6). `tail_offset` is returned as given.
    ///
    /// # Errors
    ///
    /// In check order: `ArithmeticOverflow` (range), `RecordGone` (below the
    /// retained range), `RecordBeyondTail` (above `next_record`).
    pub fn offset_for(&self, record: u64, tail_offset: u64) -> Result<u64, RecordIndexError> {
        let range = self.range()?;
        if record < range.first_record {
            return Err(RecordIndexError::RecordGone {
                first_record: range.first_record,
                next_record: range.next_record,
            });
        }
        if record > range.next_record {
            return Err(RecordIndexError::RecordBeyondTail {
                next_record: range.next_record,
            });
        }
        if record == range.next_record {
            return Ok(tail_offset);
        }
        usize::try_from(record - range.first_record)
            .ok()
            .and_then(|position| self.record_offsets.get(position))
            .copied()
            .ok_or(RecordIndexError::InvalidBoundaries)
    }

    /// The ordinal of the record starting at `offset`, or `next_record` when
    /// `offset == tail_offset` (spec 02 §2.5 method 7). An offset below the
    /// retained range is `OffsetNotRecordBoundary`, not `RecordGone`.
    ///
    /// # Errors
    ///
    /// `ArithmeticOverflow` (range), then `OffsetNotRecordBoundary`.
    pub fn record_for_offset(
        &self,
        offset: u64,
        tail_offset: u64,
    ) -> Result<u64, RecordIndexError> {
        let range = self.range()?;
        if offset == tail_offset {
            return Ok(range.next_record);
        }
        let position = self
            .record_offsets
            .binary_search(&offset)
            .map_err(|_| RecordIndexError::OffsetNotRecordBoundary)?;
        range
            .first_record
            .checked_add(len_u64(position)?)
            .ok_or(RecordIndexError::ArithmeticOverflow)
    }

    /// Drops the records before `retained_offset` without renumbering the
    /// rest and returns the new `first_record` (spec 02 §2.5 method 8):
    /// [`StreamRecordIndex::prepare_retain`] followed by
    /// [`StreamRecordIndex::commit_retain`]. On error the index is unchanged.
    ///
    /// # Errors
    ///
    /// The error of [`StreamRecordIndex::prepare_retain`].
    pub fn retain_from_offset(
        &mut self,
        retained_offset: u64,
        tail_offset: u64,
    ) -> Result<u64, RecordIndexError> {
        let pending = self.prepare_retain(retained_offset, tail_offset)?;
        Ok(self.commit_retain(pending))
    }

    /// Checks the index against the stream's retained offset and tail
    /// (spec 02 §2.5 method 9). It does not compare with message records,
    /// payload bytes or the content type.
    ///
    /// # Errors
    ///
    /// In check order: `ArithmeticOverflow` (range); `InvalidBoundaries` if
    /// `retained_offset > tail_offset`, if the list is empty while
    /// `retained_offset != tail_offset`, if the first offset is not
    /// `retained_offset`, if some offset is `>= tail_offset`, or if the offsets
    /// are not strictly increasing.
    pub fn validate(&self, retained_offset: u64, tail_offset: u64) -> Result<(), RecordIndexError> {
        self.range()?;
        if retained_offset > tail_offset {
            return Err(RecordIndexError::InvalidBoundaries);
        }
        let Some(&first) = self.record_offsets.first() else {
            return if retained_offset == tail_offset {
                Ok(())
            } else {
                Err(RecordIndexError::InvalidBoundaries)
            };
        };
        let consistent = first == retained_offset
            && self
                .record_offsets
                .iter()
                .all(|&offset| offset < tail_offset)
            && self.record_offsets.windows(2).all(|pair| pair[0] < pair[1]);
        if consistent {
            Ok(())
        } else {
            Err(RecordIndexError::InvalidBoundaries)
        }
    }
}
