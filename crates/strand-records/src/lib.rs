//! JSON record boundaries and the per-stream record index (spec area 02
//! §1–4).
//!
//! This crate owns how byte offsets map to record numbers. It must not know
//! about buckets, producers, integrity, usage or the state machine.
//!
//! Contents:
//! * JSON record content types and canonical newline boundaries
//!   ([`is_json_record_content_type`], [`canonical_json_record_ends`]);
//! * [`StreamRecordIndex`] with its public methods and its
//!   prepare/commit/rollback API ([`PendingRecordAppend`],
//!   [`PendingRecordRetention`], [`RecordIndexCheckpoint`]);
//! * pure helpers the state machine calls at fixed points of each write
//!   path ([`payload_record_ends`], [`build_record_index`],
//!   [`check_record_precondition`], [`prepare_record_append`],
//!   [`batch_record_ends`], [`prepare_record_retention`],
//!   [`validate_restored_record_index`]), returning [`RecordWriteError`];
//! * record queries over an optional index ([`record_range_of`],
//!   [`offset_for_record`], [`record_range_for_offsets`]);
//! * message records and usage record counts ([`message_records_for_append`],
//!   [`appended_record_count`]).
//!
//! # How the state machine uses the index on an append
//!
//! 1. At the record-precondition step: [`check_record_precondition`].
//! 2. At the boundary step: [`payload_record_ends`] (inline) or
//!    [`batch_record_ends`] (batch), then [`prepare_record_append`] with the
//!    slot's index borrowed immutably. Keep the returned
//!    `Option<PendingRecordAppend>`; its range feeds the producer record.
//! 3. If a later check fails, drop the pending append: nothing changed.
//! 4. At the mutation step, for a non-empty payload, commit it on the same
//!    slot's index with [`StreamRecordIndex::commit_append`] (O(new records)).
//! 5. Append transactions take [`StreamRecordIndex::checkpoint`] of each
//!    touched stream's index before the first command and call
//!    [`StreamRecordIndex::rollback`] if any command fails.

#![deny(missing_docs)]

// The README's examples run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod append_path;
mod content_type;
mod error;
mod index;
mod message_records;
mod pending;
mod queries;
mod rejection;
mod retention;

pub use append_path::{
    BatchRecordEnds, batch_item_record_ranges, batch_record_ends, build_record_index,
    check_record_precondition, payload_record_ends, prepare_record_append, producer_record_bounds,
};
pub use content_type::{canonical_json_record_ends, is_json_record_content_type};
pub use error::RecordIndexError;
pub use index::{StreamRecordIndex, relative_ends_cover};
pub use message_records::{
    appended_record_count, message_records_for_append, push_message_records,
};
pub use pending::{PendingRecordAppend, PendingRecordRetention, RecordIndexCheckpoint};
pub use queries::{offset_for_record, record_range_for_offsets, record_range_of};
pub use rejection::RecordWriteError;
pub use retention::{prepare_record_retention, validate_restored_record_index};
pub use strand_model::StreamRecordRange;
