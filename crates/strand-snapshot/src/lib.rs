//! The group snapshot wire types, their structural validation (spec area
//! 07) and the snapshot codecs (the reference JSON and strand's framed
//! binary format).
//!
//! This crate owns what a snapshot looks like, which snapshots are
//! well-formed, and how they become bytes and back. It must not know how a
//! state machine is built from one.
//!
//! * Wire types: [`StreamSnapshot`], [`StreamSnapshotEntry`],
//!   [`SharedColdObjectOwnersSnapshot`] (spec 07 §2, exact serde shapes).
//! * [`StreamSnapshotError`] with the exact `Display` texts of spec 07 §4.
//! * [`SnapshotValidator`]: the bucket checks of §5.1 and, per entry, the
//!   checks of §5.3 steps 1–12 in their exact order, returning a
//!   [`CheckedEntry`] with the values restore installs.
//! * [`validate_snapshot`]: all of that over a whole snapshot, returning a
//!   [`SnapshotSummary`].
//! * [`visible_snapshot_digest`]: the visible-snapshot digest (spec 05 §6.1).
//! * Codecs (module `codec`, re-exported here): the reference's JSON
//!   ([`encode_json`], [`decode_json`], byte-identical to serde JSON) and
//!   strand's framed binary format ([`encode_binary`], [`decode_binary`]
//!   into a [`SnapshotSink`]), with [`detect_format`]. The binary layout is
//!   documented in the `codec` module and in `docs/snapshot-format.md`.
//!
//! # How restore uses it
//!
//! ```text
//! let mut validator = SnapshotValidator::new(&snap.buckets, &snap.erased_buckets)?;
//! for entry in snap.streams {
//!     let checked = validator.check_entry(&entry)?;   // steps 1-12
//!     // step 13-15: build and insert the slot from `entry` + `checked`
//! }
//! // steps 16-19: owners, GC queue, usage, quotas (no failure possible)
//! ```

#![deny(missing_docs)]

// The README's examples run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub mod codec;
mod digest;
mod error;
mod messages;
mod payload;
mod summary;
mod validator;
mod wire;

pub use codec::{
    BINARY_FORMAT_VERSION, BINARY_MAGIC, CodecError, CollectSink, DEFAULT_MAX_FRAME_LEN,
    DecodeError, DecodeLimits, FILE_HEADER_LEN, FRAME_HEADER_LEN, FrameKind, FramePart, FrameRef,
    SnapshotFormat, SnapshotSink, SniffedReader, decode_binary, decode_json, decode_json_slice,
    decode_snapshot, detect_format, encode_binary, encode_binary_reusing, encode_json,
    encode_json_reusing, sniff_format,
};
pub use digest::visible_snapshot_digest;
pub use error::StreamSnapshotError;
pub use summary::{SnapshotSummary, validate_snapshot};
pub use validator::{CheckedEntry, SnapshotValidator};
pub use wire::{
    ForkOriginSnapshot, ForkPinSnapshot, ForkUnpinSnapshot, SharedColdObjectOwnersSnapshot,
    SnapshotTail, StreamForkSnapshot, StreamSnapshot, StreamSnapshotEntry,
};
