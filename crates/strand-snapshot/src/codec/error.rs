//! Encode and decode errors of the snapshot codecs.

use std::io;

use super::format::{FrameKind, FrameRef};
use crate::error::StreamSnapshotError;

/// Why writing a snapshot failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The writer failed.
    #[error("writing the snapshot failed: {0}")]
    Io(#[from] io::Error),
    /// A frame body could not be encoded as MessagePack.
    #[error("{frame}: MessagePack encoding failed: {source}")]
    Encode {
        /// The frame being written.
        frame: FrameRef,
        /// The encoder's error.
        source: rmp_serde::encode::Error,
    },
    /// A value could not be encoded as JSON.
    #[error("JSON encoding failed: {0}")]
    Json(#[source] serde_json::Error),
}

impl From<serde_json::Error> for CodecError {
    fn from(e: serde_json::Error) -> Self {
        if e.is_io() {
            Self::Io(io::Error::from(e))
        } else {
            Self::Json(e)
        }
    }
}

/// Which part of a frame the input ended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FramePart {
    /// No byte of the frame is present.
    Missing,
    /// Inside the 25-byte frame header.
    Header,
    /// Inside the frame body.
    Body,
}

impl std::fmt::Display for FramePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Missing => "before",
            Self::Header => "inside the header of",
            Self::Body => "inside the body of",
        })
    }
}

/// Why reading a snapshot failed. Every error about the binary format names
/// the frame it was found in.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The reader failed (other than by ending early).
    #[error("reading the snapshot failed: {0}")]
    Io(#[from] io::Error),
    /// The input is neither JSON nor the binary format.
    #[error("not a snapshot: neither a JSON object nor the binary snapshot magic")]
    UnknownFormat,
    /// The JSON snapshot does not decode as a `StreamSnapshot`.
    #[error("invalid JSON snapshot: {0}")]
    Json(#[source] serde_json::Error),
    /// The binary input does not start with [`BINARY_MAGIC`](super::BINARY_MAGIC).
    #[error("not a binary snapshot: bad magic bytes")]
    BadMagic,
    /// The binary input ends inside its 12-byte file header.
    #[error("binary snapshot truncated inside its file header ({len} of 12 bytes)")]
    TruncatedHeader {
        /// Bytes present.
        len: usize,
    },
    /// The file header names a format version this crate cannot read.
    #[error("unsupported binary snapshot version {0}")]
    UnsupportedVersion(u16),
    /// The file header sets flags this crate does not know.
    #[error("unsupported binary snapshot flags 0x{0:04x}")]
    UnsupportedFlags(u16),
    /// The input ends before or inside a frame.
    #[error("binary snapshot truncated: input ends {part} frame {index}{} at byte {offset}", kind_suffix(*.kind))]
    Truncated {
        /// The frame's position in the sequence.
        index: u64,
        /// Its kind byte, when the header's first byte is present.
        kind: Option<u8>,
        /// Byte offset where the frame starts.
        offset: u64,
        /// Which part of the frame is incomplete.
        part: FramePart,
    },
    /// A frame declares a body longer than [`DecodeLimits::max_frame_len`](super::DecodeLimits).
    #[error("{frame}: declared length {len} exceeds the limit of {limit} bytes")]
    FrameTooLarge {
        /// The frame.
        frame: FrameRef,
        /// The declared body length.
        len: u64,
        /// The configured limit.
        limit: u64,
    },
    /// A frame's bytes do not match its CRC-64 (a flipped bit, a damaged
    /// header or a wrong length).
    #[error("{frame}: checksum mismatch (stored {stored:016x}, computed {computed:016x})")]
    ChecksumMismatch {
        /// The frame.
        frame: FrameRef,
        /// The CRC-64 in the header.
        stored: u64,
        /// The CRC-64 of the bytes read.
        computed: u64,
    },
    /// A frame's header carries another position than where it was found
    /// (frames reordered, dropped or duplicated).
    #[error("{frame}: out of sequence, the frame says it is frame {found}")]
    OutOfSequence {
        /// The frame, at the position where it was found.
        frame: FrameRef,
        /// The index written in its header.
        found: u64,
    },
    /// A frame's kind byte names no known kind.
    #[error("{frame}: unknown frame kind")]
    UnknownKind {
        /// The frame.
        frame: FrameRef,
    },
    /// A known frame kind at a position where another one is required.
    #[error("{frame}: unexpected here, expected {expected}")]
    UnexpectedFrame {
        /// The frame.
        frame: FrameRef,
        /// What the position requires.
        expected: &'static str,
    },
    /// A frame body is not the MessagePack value its kind requires.
    #[error("{frame}: invalid frame body: {source}")]
    Body {
        /// The frame.
        frame: FrameRef,
        /// The MessagePack decoder's error.
        source: rmp_serde::decode::Error,
    },
    /// A frame body holds bytes after its MessagePack value.
    #[error("{frame}: {extra} unexpected byte(s) after the frame's value")]
    BodyTrailingBytes {
        /// The frame.
        frame: FrameRef,
        /// How many bytes follow the value.
        extra: u64,
    },
    /// The footer's counts or checksum disagree with the frames read.
    #[error("{frame}: footer {field} is {stored}, but the frames read give {computed}")]
    FooterMismatch {
        /// The footer frame.
        frame: FrameRef,
        /// `frames`, `streams` or `checksum`.
        field: &'static str,
        /// The footer's value.
        stored: u64,
        /// The value computed from the frames read.
        computed: u64,
    },
    /// Bytes follow the footer.
    #[error("binary snapshot has trailing bytes after the footer, at byte {offset}")]
    TrailingData {
        /// Offset of the first byte after the footer.
        offset: u64,
    },
    /// The sink (for example a restoring state machine) rejected the
    /// frame's contents.
    #[error("{frame}: rejected: {source}")]
    Rejected {
        /// The frame whose contents were rejected.
        frame: FrameRef,
        /// The sink's validation error.
        source: StreamSnapshotError,
    },
}

fn kind_suffix(kind: Option<u8>) -> String {
    match kind.map(|k| (k, FrameKind::from_byte(k))) {
        Some((_, Some(kind))) => format!(" ({kind})"),
        Some((byte, None)) => format!(" (unknown kind 0x{byte:02x})"),
        None => String::new(),
    }
}
