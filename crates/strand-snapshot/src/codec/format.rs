//! Format constants, frame kinds and format detection.

use std::fmt;
use std::io::{self, Read};

use super::error::DecodeError;

/// The first 8 bytes of every binary snapshot: `0x89` (not ASCII, so never
/// the start of a JSON document) followed by `STRSNAP`.
pub const BINARY_MAGIC: [u8; 8] = *b"\x89STRSNAP";

/// The binary format version this crate writes and reads.
pub const BINARY_FORMAT_VERSION: u16 = 1;

/// Length of the file header: magic (8), version (`u16` LE), flags (`u16`
/// LE).
pub const FILE_HEADER_LEN: usize = 12;

/// Length of a frame header: kind (`u8`), index (`u64` LE), body length
/// (`u64` LE), CRC-64 (`u64` LE).
pub const FRAME_HEADER_LEN: usize = 25;

/// Default for [`DecodeLimits::max_frame_len`](super::DecodeLimits): 256 MiB.
pub const DEFAULT_MAX_FRAME_LEN: u64 = 256 << 20;

/// The two snapshot encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SnapshotFormat {
    /// The reference's serde JSON (`serde_json::to_vec(&StreamSnapshot)`).
    Json,
    /// strand's framed binary format (MessagePack frame bodies).
    Binary,
}

impl fmt::Display for SnapshotFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Json => "json",
            Self::Binary => "binary",
        })
    }
}

const fn is_json_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Detects the format from the first bytes of a snapshot.
///
/// Binary needs the whole 8-byte [`BINARY_MAGIC`]; JSON is recognised by
/// its first non-whitespace byte being `{`. Returns `None` when the prefix
/// is neither (or too short to tell).
pub fn detect_format(prefix: &[u8]) -> Option<SnapshotFormat> {
    if prefix.starts_with(&BINARY_MAGIC) {
        return Some(SnapshotFormat::Binary);
    }
    match prefix.iter().find(|b| !is_json_whitespace(**b)) {
        Some(b'{') => Some(SnapshotFormat::Json),
        _ => None,
    }
}

/// A reader positioned at the start of a snapshot whose format has been
/// detected: the sniffed prefix followed by the rest of the input.
pub type SniffedReader<R> = io::Chain<io::Cursor<Vec<u8>>, R>;

/// Reads just enough of `r` to detect the format and returns it with a
/// reader that replays the consumed bytes. Leading JSON whitespace is
/// dropped.
///
/// # Errors
///
/// [`DecodeError::UnknownFormat`] when the input is neither format (an
/// empty input included), [`DecodeError::Io`] on a read error.
pub fn sniff_format<R: Read>(mut r: R) -> Result<(SnapshotFormat, SniffedReader<R>), DecodeError> {
    let mut buf = [0u8; BINARY_MAGIC.len()];
    loop {
        let n = read_full(&mut r, &mut buf)?;
        let prefix = &buf[..n];
        if let Some(format) = detect_format(prefix) {
            return Ok((format, io::Cursor::new(prefix.to_vec()).chain(r)));
        }
        if n < buf.len() || !prefix.iter().all(|b| is_json_whitespace(*b)) {
            return Err(DecodeError::UnknownFormat);
        }
        // Only JSON whitespace so far: drop it and keep looking.
    }
}

/// Fills `buf` from `r` until it is full or `r` ends; returns how many
/// bytes were read.
pub(crate) fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// What a frame holds. The byte value is the frame header's `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// `buckets` and `erased_buckets` (always frame 0).
    Buckets = 1,
    /// One [`StreamSnapshotEntry`](crate::StreamSnapshotEntry).
    Stream = 2,
    /// `pending_cold_gc` and `next_cold_gc_seq`.
    GcQueue = 3,
    /// `shared_cold_object_owners`.
    SharedOwners = 4,
    /// `bucket_usage`.
    Usage = 5,
    /// `bucket_quotas`.
    Quotas = 6,
    /// Frame counts and the checksum over all frame checksums (last frame).
    Footer = 7,
}

impl FrameKind {
    /// The kind with this header byte, if any.
    pub const fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Self::Buckets,
            2 => Self::Stream,
            3 => Self::GcQueue,
            4 => Self::SharedOwners,
            5 => Self::Usage,
            6 => Self::Quotas,
            7 => Self::Footer,
            _ => return None,
        })
    }

    /// The header byte of this kind.
    pub const fn byte(self) -> u8 {
        self as u8
    }

    /// A short lowercase name (`stream`, `gc-queue`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Buckets => "buckets",
            Self::Stream => "stream",
            Self::GcQueue => "gc-queue",
            Self::SharedOwners => "shared-owners",
            Self::Usage => "usage",
            Self::Quotas => "quotas",
            Self::Footer => "footer",
        }
    }
}

impl fmt::Display for FrameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Names one frame of a binary snapshot in an error: its position in the
/// frame sequence, the kind byte its header carries (possibly unknown) and
/// the byte offset of its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRef {
    /// Zero-based position in the frame sequence.
    pub index: u64,
    /// The header's kind byte.
    pub kind: u8,
    /// Byte offset of the frame header from the start of the snapshot.
    pub offset: u64,
}

impl FrameRef {
    /// The frame's kind, if the byte names one.
    pub const fn kind(&self) -> Option<FrameKind> {
        FrameKind::from_byte(self.kind)
    }
}

impl fmt::Display for FrameRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind() {
            Some(kind) => write!(f, "frame {} ({kind}", self.index)?,
            None => write!(f, "frame {} (unknown kind 0x{:02x}", self.index, self.kind)?,
        }
        write!(f, ", at byte {})", self.offset)
    }
}
