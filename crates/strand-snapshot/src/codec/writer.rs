//! The streaming binary encoder.

use std::borrow::Borrow;
use std::io::Write;

use serde::Serialize;

use super::bodies::{BucketsOut, Footer, GcOut, OwnersOut, QuotasOut, UsageOut};
use super::error::CodecError;
use super::format::{
    BINARY_FORMAT_VERSION, BINARY_MAGIC, FILE_HEADER_LEN, FRAME_HEADER_LEN, FrameKind, FrameRef,
};
use super::frame::{FrameHeader, encode_body};
use crate::wire::{StreamSnapshot, StreamSnapshotEntry};

/// Writes frames one at a time; holds only the current frame's body.
struct FrameWriter<W> {
    w: W,
    body: Vec<u8>,
    index: u64,
    offset: u64,
    checksums: crc64fast::Digest,
}

impl<W: Write> FrameWriter<W> {
    fn start(mut w: W) -> Result<Self, CodecError> {
        let mut header = [0u8; FILE_HEADER_LEN];
        header[..8].copy_from_slice(&BINARY_MAGIC);
        header[8..10].copy_from_slice(&BINARY_FORMAT_VERSION.to_le_bytes());
        // bytes 10..12: flags, none defined
        w.write_all(&header)?;
        Ok(Self {
            w,
            body: Vec::new(),
            index: 0,
            offset: FILE_HEADER_LEN as u64,
            checksums: crc64fast::Digest::new(),
        })
    }

    fn frame<T: Serialize + ?Sized>(
        &mut self,
        kind: FrameKind,
        value: &T,
    ) -> Result<(), CodecError> {
        let frame = FrameRef {
            index: self.index,
            kind: kind.byte(),
            offset: self.offset,
        };
        encode_body(&mut self.body, value)
            .map_err(|source| CodecError::Encode { frame, source })?;
        let header = FrameHeader::for_body(kind.byte(), self.index, &self.body);
        self.w.write_all(&header.to_bytes())?;
        self.w.write_all(&self.body)?;
        if kind != FrameKind::Footer {
            self.checksums.write(&header.crc.to_le_bytes());
        }
        self.index += 1;
        self.offset = self
            .offset
            .saturating_add(FRAME_HEADER_LEN as u64)
            .saturating_add(header.len);
        Ok(())
    }
}

/// Writes a snapshot in the framed binary format.
///
/// The group-level fields come from `head` (its `streams` are ignored); the
/// stream entries come from `entries`, one frame each, in the order given —
/// so a caller can produce them lazily and only one entry (and its encoded
/// frame) is held at a time. Pass `&snapshot.streams` to write a whole
/// [`StreamSnapshot`]. The writer is flushed at the end; wrap an unbuffered
/// writer in a `BufWriter`.
///
/// # Errors
///
/// [`CodecError::Io`] when the writer fails, [`CodecError::Encode`] when a
/// frame body cannot be encoded (a byte string over 4 GiB).
pub fn encode_binary<W, I>(w: W, head: &StreamSnapshot, entries: I) -> Result<(), CodecError>
where
    W: Write,
    I: IntoIterator,
    I::Item: Borrow<StreamSnapshotEntry>,
{
    let mut out = start(w, head)?;
    let mut streams = 0u64;
    for entry in entries {
        out.frame(FrameKind::Stream, entry.borrow())?;
        streams += 1;
    }
    finish(out, head, streams)
}

/// Like [`encode_binary`], with the stream entries written into one entry
/// that is reused: `fill` is called with it before each stream frame
/// (`None` the first time) and either overwrites it with the next stream's
/// entry and returns `true`, or returns `false` when there are no more.
/// A caller that overwrites the entry's strings and vectors in place
/// (`clear` and `extend`) keeps their capacity from one stream to the
/// next, so a snapshot of many similar streams allocates almost nothing
/// per stream. The bytes are the same as [`encode_binary`]'s for the same
/// entries.
///
/// # Errors
///
/// As [`encode_binary`].
pub fn encode_binary_reusing<W, F>(
    w: W,
    head: &StreamSnapshot,
    mut fill: F,
) -> Result<(), CodecError>
where
    W: Write,
    F: FnMut(&mut Option<StreamSnapshotEntry>) -> bool,
{
    let mut out = start(w, head)?;
    let mut streams = 0u64;
    let mut entry = None;
    while fill(&mut entry) {
        if let Some(entry) = &entry {
            out.frame(FrameKind::Stream, entry)?;
            streams += 1;
        }
    }
    finish(out, head, streams)
}

/// The file header and the buckets frame.
fn start<W: Write>(w: W, head: &StreamSnapshot) -> Result<FrameWriter<W>, CodecError> {
    let mut out = FrameWriter::start(w)?;
    out.frame(
        FrameKind::Buckets,
        &BucketsOut {
            buckets: &head.buckets,
            erased_buckets: &head.erased_buckets,
        },
    )?;
    Ok(out)
}

/// The group-level frames after the streams, the footer, and the flush.
fn finish<W: Write>(
    mut out: FrameWriter<W>,
    head: &StreamSnapshot,
    streams: u64,
) -> Result<(), CodecError> {
    // Destructured so that a new snapshot field fails to compile here.
    let StreamSnapshot {
        buckets: _,
        erased_buckets: _,
        streams: _,
        pending_cold_gc,
        next_cold_gc_seq,
        shared_cold_object_owners,
        bucket_usage,
        bucket_quotas,
        machine_options,
        fork_unpins,
        next_fork_pin,
    } = head;
    out.frame(
        FrameKind::GcQueue,
        &GcOut {
            pending_cold_gc,
            next_cold_gc_seq: *next_cold_gc_seq,
        },
    )?;
    out.frame(
        FrameKind::SharedOwners,
        &OwnersOut {
            shared_cold_object_owners,
        },
    )?;
    out.frame(FrameKind::Usage, &UsageOut { bucket_usage })?;
    out.frame(
        FrameKind::Quotas,
        &QuotasOut {
            bucket_quotas,
            machine_options: *machine_options,
            fork_unpins,
            next_fork_pin: *next_fork_pin,
        },
    )?;
    let footer = Footer {
        frames: out.index,
        streams,
        checksum: out.checksums.sum64(),
    };
    out.frame(FrameKind::Footer, &footer)?;
    out.w.flush()?;
    Ok(())
}
