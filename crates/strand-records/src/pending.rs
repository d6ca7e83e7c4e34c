//! Prepare / commit / rollback of index changes (spec 02 §2.6).
//!
//! Every write path validates first and mutates later, so index changes are
//! split in two:
//!
//! * **prepare** borrows the index immutably, runs every check and computes
//!   the change (a [`PendingRecordAppend`] or [`PendingRecordRetention`]);
//!   it costs O(new records) for appends and O(log n) for retention, and never
//!   copies `record_offsets`;
//! * **commit** applies a pending change to the *same* index and cannot fail.
//!   A pending change must be committed to the index it was prepared from,
//!   with no other index mutation in between; dropping it instead abandons it
//!   at no cost (nothing was changed).
//!
//! Append transactions take a [`RecordIndexCheckpoint`] before their first
//! command and [`StreamRecordIndex::rollback`] to it if any command fails.

use crate::index::len_u64;
use crate::{RecordIndexError, StreamRecordIndex, StreamRecordRange, relative_ends_cover};

/// A validated, not yet applied index append: the range of the new ordinals
/// and the absolute start offset of each new record.
///
/// Only [`StreamRecordIndex::prepare_append`] creates one. Apply it with
/// [`StreamRecordIndex::commit_append`], or drop it to abandon the append.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a pending append does nothing until it is committed"]
pub struct PendingRecordAppend {
    range: StreamRecordRange,
    start_offsets: StartOffsets,
}

/// Start offsets kept inline up to this many records: a typical append
/// holds a few records, and preparing it then allocates nothing.
const INLINE_STARTS: usize = 8;

/// The new records' start offsets: inline for few records, on the heap
/// beyond [`INLINE_STARTS`]. Compares and prints as the plain list.
#[derive(Clone)]
enum StartOffsets {
    Inline {
        len: usize,
        buf: [u64; INLINE_STARTS],
    },
    Heap(Vec<u64>),
}

impl StartOffsets {
    fn with_capacity(n: usize) -> Self {
        if n <= INLINE_STARTS {
            Self::Inline {
                len: 0,
                buf: [0; INLINE_STARTS],
            }
        } else {
            Self::Heap(Vec::with_capacity(n))
        }
    }

    fn push(&mut self, offset: u64) {
        match self {
            Self::Inline { len, buf } => {
                if let Some(slot) = buf.get_mut(*len) {
                    *slot = offset;
                    *len += 1;
                } else {
                    let mut heap = buf.to_vec();
                    heap.push(offset);
                    *self = Self::Heap(heap);
                }
            }
            Self::Heap(v) => v.push(offset),
        }
    }

    fn as_slice(&self) -> &[u64] {
        match self {
            Self::Inline { len, buf } => buf.get(..*len).unwrap_or(&[]),
            Self::Heap(v) => v,
        }
    }
}

impl PartialEq for StartOffsets {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for StartOffsets {}

impl std::fmt::Debug for StartOffsets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl PendingRecordAppend {
    /// The ordinals the append will assign: `{old next_record, old
    /// next_record + n}`. For an empty payload this is the empty range at
    /// `next_record`.
    #[must_use]
    pub fn range(&self) -> StreamRecordRange {
        self.range
    }

    /// The absolute start offsets the append will add, one per new record.
    #[must_use]
    pub fn start_offsets(&self) -> &[u64] {
        self.start_offsets.as_slice()
    }
}

/// A validated, not yet applied retention: how many leading records to drop
/// and the resulting `first_record`.
///
/// Only [`StreamRecordIndex::prepare_retain`] creates one. Apply it with
/// [`StreamRecordIndex::commit_retain`], or drop it to abandon it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a pending retention does nothing until it is committed"]
pub struct PendingRecordRetention {
    drop_count: usize,
    first_record: u64,
}

impl PendingRecordRetention {
    /// The number of leading records that will be dropped.
    #[must_use]
    pub fn dropped_records(&self) -> usize {
        self.drop_count
    }

    /// The `first_record` after the retention.
    #[must_use]
    pub fn first_record(&self) -> u64 {
        self.first_record
    }
}

/// The number of stored offsets at some point in time; rolling back to it
/// truncates the records appended since (spec 02 §2.6, §3.3.6).
///
/// `first_record` is not saved: appends never change it. A checkpoint is only
/// meaningful for appends; do not retain records between taking a checkpoint
/// and rolling back to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordIndexCheckpoint {
    len: usize,
}

impl RecordIndexCheckpoint {
    /// The number of stored offsets when the checkpoint was taken.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index had no stored offsets when the checkpoint was taken.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl StreamRecordIndex {
    /// Validates an append of a payload of `payload_len` bytes at
    /// `base_offset` with the given relative ends, without changing the
    /// index (spec 02 §2.6 *prepare*).
    ///
    /// A zero-length prepare (`payload_len == 0`, no ends) gives the empty
    /// range at `next_record`, provided check 4 passes.
    ///
    /// # Errors
    ///
    /// In check order:
    /// 1. `InvalidBoundaries` if the ends do not cover the payload
    ///    ([`relative_ends_cover`]);
    /// 2. `ArithmeticOverflow` if the current range overflows;
    /// 3. `ArithmeticOverflow` if `next_record + n` overflows;
    /// 4. `InvalidBoundaries` if the last stored offset is `>= base_offset`;
    /// 5. `ArithmeticOverflow` if `base_offset + end` overflows for one of the
    ///    ends used as a start offset (every end but the last).
    pub fn prepare_append(
        &self,
        base_offset: u64,
        payload_len: u64,
        relative_ends: &[u64],
    ) -> Result<PendingRecordAppend, RecordIndexError> {
        if !relative_ends_cover(payload_len, relative_ends) {
            return Err(RecordIndexError::InvalidBoundaries);
        }
        let first_record = self.range()?.next_record;
        let next_record = first_record
            .checked_add(len_u64(relative_ends.len())?)
            .ok_or(RecordIndexError::ArithmeticOverflow)?;
        if self
            .record_offsets
            .last()
            .is_some_and(|&last| last >= base_offset)
        {
            return Err(RecordIndexError::InvalidBoundaries);
        }
        let mut start_offsets = StartOffsets::with_capacity(relative_ends.len());
        if let Some((_, leading_ends)) = relative_ends.split_last() {
            start_offsets.push(base_offset);
            for &end in leading_ends {
                let start = base_offset
                    .checked_add(end)
                    .ok_or(RecordIndexError::ArithmeticOverflow)?;
                start_offsets.push(start);
            }
        }
        Ok(PendingRecordAppend {
            range: StreamRecordRange {
                first_record,
                next_record,
            },
            start_offsets,
        })
    }

    /// Applies a pending append and returns its range (spec 02 §2.6
    /// *commit*). Costs O(new records); cannot fail.
    ///
    /// `pending` must come from [`StreamRecordIndex::prepare_append`] on this
    /// same index, with no other mutation of the index in between.
    pub fn commit_append(&mut self, pending: PendingRecordAppend) -> StreamRecordRange {
        let PendingRecordAppend {
            range,
            start_offsets,
        } = pending;
        self.record_offsets
            .extend_from_slice(start_offsets.as_slice());
        range
    }

    /// Validates dropping the records before `retained_offset` without
    /// changing the index (spec 02 §2.5 method 8, steps 1–2).
    ///
    /// If `retained_offset == tail_offset` every record is dropped; otherwise
    /// `retained_offset` must be a stored start offset, and the records before
    /// it are dropped. Retaining from the first stored offset drops nothing.
    ///
    /// # Errors
    ///
    /// `OffsetNotRecordBoundary` if `retained_offset` is neither the tail nor
    /// a stored offset (an offset before the first stored one included);
    /// `ArithmeticOverflow` if `first_record + dropped` overflows.
    pub fn prepare_retain(
        &self,
        retained_offset: u64,
        tail_offset: u64,
    ) -> Result<PendingRecordRetention, RecordIndexError> {
        let drop_count = if retained_offset == tail_offset {
            self.record_offsets.len()
        } else {
            self.record_offsets
                .binary_search(&retained_offset)
                .map_err(|_| RecordIndexError::OffsetNotRecordBoundary)?
        };
        let first_record = self
            .first_record
            .checked_add(len_u64(drop_count)?)
            .ok_or(RecordIndexError::ArithmeticOverflow)?;
        Ok(PendingRecordRetention {
            drop_count,
            first_record,
        })
    }

    /// Applies a pending retention and returns the new `first_record`
    /// (spec 02 §2.5 method 8, steps 3–4). Cannot fail.
    ///
    /// `pending` must come from [`StreamRecordIndex::prepare_retain`] on this
    /// same index, with no other mutation of the index in between.
    pub fn commit_retain(&mut self, pending: PendingRecordRetention) -> u64 {
        let drop_count = pending.drop_count.min(self.record_offsets.len());
        self.record_offsets.drain(..drop_count);
        self.first_record = pending.first_record;
        self.first_record
    }

    /// The current number of stored offsets, to roll back to later
    /// (spec 02 §2.6 *checkpoint*).
    #[must_use]
    pub fn checkpoint(&self) -> RecordIndexCheckpoint {
        RecordIndexCheckpoint {
            len: self.record_offsets.len(),
        }
    }

    /// Truncates the stored offsets back to `checkpoint` (spec 02 §2.6
    /// *rollback*). `first_record` is untouched. Rolling back to a checkpoint
    /// longer than the current list does nothing.
    pub fn rollback(&mut self, checkpoint: RecordIndexCheckpoint) {
        self.record_offsets.truncate(checkpoint.len);
    }
}
