//! Snapshot codecs: the reference's JSON and strand's framed binary format,
//! behind one API, with format detection by content.
//!
//! * [`encode_json`] / [`decode_json`]: byte-identical to
//!   `serde_json::to_vec(&StreamSnapshot)` / `serde_json::from_slice`.
//! * [`encode_binary`] / [`decode_binary`]: the framed binary format below,
//!   streaming both ways (entries are written from an iterator and read into
//!   a [`SnapshotSink`], one at a time).
//! * [`detect_format`] / [`sniff_format`] / [`decode_snapshot`]: pick the
//!   codec from the first bytes.
//!
//! # Binary format, version 1
//!
//! All integers little-endian. `docs/snapshot-format.md` has the long form.
//!
//! ```text
//! file    := header frame* EOF
//! header  := magic[8] = 89 'S' 'T' 'R' 'S' 'N' 'A' 'P'
//!            version u16 = 1
//!            flags   u16 = 0          (no flag is defined; others reject)
//! frame   := kind u8 | index u64 | len u64 | crc u64 | body[len]
//! crc     := CRC-64/XZ (crc64fast) of kind ‖ index ‖ len ‖ body
//! ```
//!
//! Frames come in a fixed order, `index` counting from 0:
//!
//! | kind | name | body (MessagePack map, keys = `StreamSnapshot` field names) |
//! |---|---|---|
//! | 1 | buckets | `buckets` (required), `erased_buckets` |
//! | 2 | stream | one `StreamSnapshotEntry`, zero or more frames |
//! | 3 | gc-queue | `pending_cold_gc`, `next_cold_gc_seq` |
//! | 4 | shared-owners | `shared_cold_object_owners` |
//! | 5 | usage | `bucket_usage` |
//! | 6 | quotas | `bucket_quotas` |
//! | 7 | footer | `frames` (frames before it), `streams`, `checksum` |
//!
//! The footer's `checksum` is the CRC-64/XZ of the little-endian `crc`
//! fields of all frames before it, in order. Nothing may follow the footer.
//!
//! Bodies are MessagePack written by `rmp-serde` with structs as maps keyed
//! by field name (so a field added later with a serde default still
//! decodes, by the same legacy rules as JSON) and byte vectors as `bin`.
//!
//! # Failure reporting
//!
//! A decoder checks, per frame: the declared length against
//! [`DecodeLimits::max_frame_len`] (before allocating), the CRC, the index
//! (reordered, dropped or duplicated frames), the kind and its place in the
//! order, and that the body is exactly one value of the right shape. Each
//! failure is a distinct [`DecodeError`] variant naming the frame by
//! [`FrameRef`] (index, kind byte, offset).

mod bodies;
mod byte_array;
mod error;
mod format;
mod frame;
mod json;
mod json_reader;
pub(crate) mod payload_bytes;
mod reader;
mod sink;
mod writer;

use std::io::Read;

pub use error::{CodecError, DecodeError, FramePart};
pub use format::{
    BINARY_FORMAT_VERSION, BINARY_MAGIC, DEFAULT_MAX_FRAME_LEN, FILE_HEADER_LEN, FRAME_HEADER_LEN,
    FrameKind, FrameRef, SnapshotFormat, SniffedReader, detect_format, sniff_format,
};
pub use json::{decode_json, decode_json_slice, encode_json, encode_json_reusing};
pub use reader::{DecodeLimits, decode_binary};
pub use sink::{CollectSink, SnapshotSink};
pub use writer::{encode_binary, encode_binary_reusing};

use crate::wire::StreamSnapshot;

/// Reads a whole snapshot in either format, detected from its first bytes.
///
/// # Errors
///
/// [`DecodeError::UnknownFormat`] when it is neither, else the errors of
/// [`decode_json`] or [`decode_binary`].
pub fn decode_snapshot<R: Read>(
    r: R,
    limits: &DecodeLimits,
) -> Result<StreamSnapshot, DecodeError> {
    let (format, r) = sniff_format(r)?;
    match format {
        SnapshotFormat::Json => decode_json(r),
        SnapshotFormat::Binary => {
            let mut sink = CollectSink::new();
            decode_binary(r, &mut sink, limits)?;
            Ok(sink.into_snapshot())
        }
    }
}
