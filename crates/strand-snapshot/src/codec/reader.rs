//! The streaming binary decoder.

use std::io::{self, Read};

use serde::de::DeserializeOwned;

use super::bodies::{BucketsIn, Footer, GcIn, OwnersIn, QuotasIn, UsageIn};
use super::error::{DecodeError, FramePart};
use super::format::{
    BINARY_FORMAT_VERSION, BINARY_MAGIC, DEFAULT_MAX_FRAME_LEN, FILE_HEADER_LEN, FRAME_HEADER_LEN,
    FrameKind, FrameRef, read_full,
};
use super::frame::{BodyError, FrameHeader, decode_body, frame_crc};
use super::sink::SnapshotSink;
use crate::wire::SnapshotTail;
use crate::wire::StreamSnapshotEntry;

/// Bounds a decoder enforces before allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeLimits {
    /// The longest frame body accepted, in bytes. A frame header declaring
    /// more is rejected before anything is allocated for it. Default
    /// [`DEFAULT_MAX_FRAME_LEN`] (256 MiB): raise it for streams whose hot
    /// payload is larger.
    pub max_frame_len: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
        }
    }
}

impl DecodeLimits {
    /// These limits with another maximum frame body length.
    #[must_use]
    pub const fn with_max_frame_len(mut self, max_frame_len: u64) -> Self {
        self.max_frame_len = max_frame_len;
        self
    }
}

/// Bodies are read in pieces of at most this size, so a truncated input
/// never makes the decoder allocate the whole declared length.
const READ_CHUNK: usize = 1 << 20;

/// Reads frames one at a time into a reused buffer.
struct FrameReader<'l, R> {
    r: R,
    body: Vec<u8>,
    index: u64,
    offset: u64,
    limits: &'l DecodeLimits,
}

impl<R: Read> FrameReader<'_, R> {
    /// Reads and verifies the next frame (length limit, CRC, position);
    /// its body is left in `self.body`.
    fn next(&mut self) -> Result<(FrameRef, FrameHeader), DecodeError> {
        let start = self.offset;
        let mut bytes = [0u8; FRAME_HEADER_LEN];
        let n = read_full(&mut self.r, &mut bytes)?;
        if n < FRAME_HEADER_LEN {
            return Err(DecodeError::Truncated {
                index: self.index,
                kind: (n > 0).then_some(bytes[0]),
                offset: start,
                part: if n == 0 {
                    FramePart::Missing
                } else {
                    FramePart::Header
                },
            });
        }
        let header = FrameHeader::parse(&bytes);
        let frame = FrameRef {
            index: self.index,
            kind: header.kind,
            offset: start,
        };
        let limit = self.limits.max_frame_len;
        let len = match usize::try_from(header.len) {
            Ok(len) if header.len <= limit => len,
            _ => {
                return Err(DecodeError::FrameTooLarge {
                    frame,
                    len: header.len,
                    limit,
                });
            }
        };
        self.read_body(len).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => DecodeError::Truncated {
                index: frame.index,
                kind: Some(frame.kind),
                offset: start,
                part: FramePart::Body,
            },
            _ => DecodeError::Io(e),
        })?;
        let computed = frame_crc(header.kind, header.index, header.len, &self.body);
        if computed != header.crc {
            return Err(DecodeError::ChecksumMismatch {
                frame,
                stored: header.crc,
                computed,
            });
        }
        if header.index != self.index {
            return Err(DecodeError::OutOfSequence {
                frame,
                found: header.index,
            });
        }
        self.index += 1;
        self.offset = start
            .saturating_add(FRAME_HEADER_LEN as u64)
            .saturating_add(header.len);
        Ok((frame, header))
    }

    fn read_body(&mut self, len: usize) -> io::Result<()> {
        self.body.clear();
        while self.body.len() < len {
            let at = self.body.len();
            let n = (len - at).min(READ_CHUNK);
            self.body.resize(at + n, 0);
            self.r.read_exact(&mut self.body[at..])?;
        }
        Ok(())
    }

    fn decode<T: DeserializeOwned>(&self, frame: FrameRef) -> Result<T, DecodeError> {
        decode_body(&self.body).map_err(|e| match e {
            BodyError::Decode(source) => DecodeError::Body { frame, source },
            BodyError::Trailing(extra) => DecodeError::BodyTrailingBytes { frame, extra },
        })
    }

    /// Fails unless the input ends here.
    fn expect_end(&mut self) -> Result<(), DecodeError> {
        let mut probe = [0u8; 1];
        if read_full(&mut self.r, &mut probe)? == 0 {
            Ok(())
        } else {
            Err(DecodeError::TrailingData {
                offset: self.offset,
            })
        }
    }
}

fn read_file_header<R: Read>(r: &mut R) -> Result<(), DecodeError> {
    let mut raw = [0u8; FILE_HEADER_LEN];
    let n = read_full(r, &mut raw)?;
    let magic_len = n.min(BINARY_MAGIC.len());
    if raw[..magic_len] != BINARY_MAGIC[..magic_len] {
        return Err(DecodeError::BadMagic);
    }
    if n < FILE_HEADER_LEN {
        return Err(DecodeError::TruncatedHeader { len: n });
    }
    let version = u16::from_le_bytes([raw[8], raw[9]]);
    if version != BINARY_FORMAT_VERSION {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let flags = u16::from_le_bytes([raw[10], raw[11]]);
    if flags != 0 {
        return Err(DecodeError::UnsupportedFlags(flags));
    }
    Ok(())
}

/// Where the decoder is in the fixed frame order, with the group-level
/// parts read so far (handed to the sink only after the footer checks).
enum Stage {
    Buckets,
    Streams,
    Owners(GcIn),
    Usage(GcIn, OwnersIn),
    Quotas(GcIn, OwnersIn, UsageIn),
    Footer(GcIn, OwnersIn, UsageIn, QuotasIn),
}

impl Stage {
    const fn expected(&self) -> &'static str {
        match self {
            Self::Buckets => "a buckets frame",
            Self::Streams => "a stream or gc-queue frame",
            Self::Owners(..) => "a shared-owners frame",
            Self::Usage(..) => "a usage frame",
            Self::Quotas(..) => "a quotas frame",
            Self::Footer(..) => "the footer frame",
        }
    }
}

fn check_footer(
    frame: FrameRef,
    field: &'static str,
    stored: u64,
    computed: u64,
) -> Result<(), DecodeError> {
    if stored == computed {
        Ok(())
    } else {
        Err(DecodeError::FooterMismatch {
            frame,
            field,
            stored,
            computed,
        })
    }
}

/// Reads a binary snapshot and feeds it to `sink` as it goes.
///
/// Holds at most one frame body and one decoded entry beyond what the sink
/// keeps. Every frame is verified (length limit, CRC-64, position, kind in
/// the fixed order) before its contents reach the sink; the footer's counts
/// and checksum, and the end of input right after it, are verified before
/// [`SnapshotSink::finish`] is called. On an error, the sink may have
/// received part of the snapshot and should be discarded.
///
/// # Errors
///
/// A [`DecodeError`] naming the frame (index, kind, offset) where the input
/// went wrong, or [`DecodeError::Rejected`] with the sink's own error.
pub fn decode_binary<R, S>(mut r: R, sink: &mut S, limits: &DecodeLimits) -> Result<(), DecodeError>
where
    R: Read,
    S: SnapshotSink + ?Sized,
{
    read_file_header(&mut r)?;
    let mut reader = FrameReader {
        r,
        body: Vec::new(),
        index: 0,
        offset: FILE_HEADER_LEN as u64,
        limits,
    };
    let mut checksums = crc64fast::Digest::new();
    let mut streams = 0u64;
    let mut stage = Stage::Buckets;
    loop {
        let (frame, header) = reader.next()?;
        let kind = frame.kind().ok_or(DecodeError::UnknownKind { frame })?;
        let expected = stage.expected();
        let rejected = |source| DecodeError::Rejected { frame, source };
        stage = match (stage, kind) {
            (Stage::Buckets, FrameKind::Buckets) => {
                let b: BucketsIn = reader.decode(frame)?;
                sink.begin(b.buckets, b.erased_buckets).map_err(rejected)?;
                Stage::Streams
            }
            (Stage::Streams, FrameKind::Stream) => {
                let entry: StreamSnapshotEntry = reader.decode(frame)?;
                streams += 1;
                sink.entry(entry).map_err(rejected)?;
                Stage::Streams
            }
            (Stage::Streams, FrameKind::GcQueue) => Stage::Owners(reader.decode(frame)?),
            (Stage::Owners(gc), FrameKind::SharedOwners) => Stage::Usage(gc, reader.decode(frame)?),
            (Stage::Usage(gc, owners), FrameKind::Usage) => {
                Stage::Quotas(gc, owners, reader.decode(frame)?)
            }
            (Stage::Quotas(gc, owners, usage), FrameKind::Quotas) => {
                Stage::Footer(gc, owners, usage, reader.decode(frame)?)
            }
            (Stage::Footer(gc, owners, usage, quotas), FrameKind::Footer) => {
                let footer: Footer = reader.decode(frame)?;
                check_footer(frame, "frames", footer.frames, frame.index)?;
                check_footer(frame, "streams", footer.streams, streams)?;
                check_footer(frame, "checksum", footer.checksum, checksums.sum64())?;
                reader.expect_end()?;
                return sink
                    .finish(SnapshotTail {
                        pending_cold_gc: gc.pending_cold_gc,
                        next_cold_gc_seq: gc.next_cold_gc_seq,
                        shared_cold_object_owners: owners.shared_cold_object_owners,
                        bucket_usage: usage.bucket_usage,
                        bucket_quotas: quotas.bucket_quotas,
                        machine_options: quotas.machine_options,
                        fork_unpins: quotas.fork_unpins,
                        next_fork_pin: quotas.next_fork_pin,
                    })
                    .map_err(rejected);
            }
            _ => return Err(DecodeError::UnexpectedFrame { frame, expected }),
        };
        checksums.write(&header.crc.to_le_bytes());
    }
}
