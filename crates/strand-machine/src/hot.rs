//! The per-stream hot buffer: payload bytes still held in memory (spec 05
//! §1). Chunks keep the command's `Bytes` without copying.

use std::collections::VecDeque;

use bytes::Bytes;
use strand_model::HotPayloadSegment;

/// One hot chunk: the bytes of stream offsets `[start, start + len)`. The
/// end is not stored: every append pushes a chunk, and 40 bytes a chunk
/// rather than 48 is less memory to fill and to move when the list grows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HotChunk {
    pub(crate) start: u64,
    pub(crate) bytes: Bytes,
}

impl HotChunk {
    /// The stream offset after the chunk's last byte.
    #[inline]
    pub(crate) fn end(&self) -> u64 {
        self.start.saturating_add(to_u64(self.bytes.len()))
    }
}

/// The ordered chunk list of one stream plus its byte count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HotBuffer {
    chunks: VecDeque<HotChunk>,
}

/// Lossless `u64` → `usize` on 64-bit targets; saturates elsewhere.
pub(crate) fn to_usize(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

/// `usize` → `u64`, saturating (lossless on every supported target).
pub(crate) fn to_u64(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

impl HotBuffer {
    /// No chunks.
    pub(crate) const EMPTY: Self = Self {
        chunks: VecDeque::new(),
    };

    /// Total bytes held (summed: an empty stream keeps no counter).
    pub(crate) fn len(&self) -> u64 {
        self.chunks
            .iter()
            .map(|c| to_u64(c.bytes.len()))
            .fold(0, u64::saturating_add)
    }

    /// Number of chunks.
    pub(crate) fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The chunks in order.
    pub(crate) fn chunks(&self) -> impl Iterator<Item = &HotChunk> {
        self.chunks.iter()
    }

    /// Appends a chunk starting at `start`; an empty payload is a no-op.
    pub(crate) fn push(&mut self, start: u64, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        self.chunks.push_back(HotChunk { start, bytes });
    }

    /// Drops chunks beyond the first `count` (append-transaction rollback).
    pub(crate) fn truncate(&mut self, count: usize) {
        self.chunks.truncate(count);
    }

    /// The public hot start: the first chunk's start, or `tail` when empty.
    pub(crate) fn public_start(&self, tail: u64) -> u64 {
        self.chunks.front().map_or(tail, |c| c.start)
    }

    /// The internal hot start: the first chunk's start, or 0 when empty.
    pub(crate) fn internal_start(&self) -> u64 {
        self.chunks.front().map_or(0, |c| c.start)
    }

    /// The bytes of all chunks, concatenated in chunk order, written into
    /// `out` (its capacity kept).
    pub(crate) fn payload_into(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(to_usize(self.len()));
        for chunk in &self.chunks {
            out.extend_from_slice(&chunk.bytes);
        }
    }

    /// [`HotBuffer::segments`] written into `out` (its capacity kept).
    pub(crate) fn segments_into(&self, out: &mut Vec<HotPayloadSegment>) {
        out.clear();
        let mut at = 0usize;
        out.extend(self.chunks.iter().map(|chunk| {
            let start = at;
            at = at.saturating_add(chunk.bytes.len());
            HotPayloadSegment {
                start_offset: chunk.start,
                end_offset: chunk.end(),
                payload_start: start,
                payload_end: at,
            }
        }));
    }

    /// One segment per chunk, with positions inside the concatenation
    /// [`HotBuffer::payload_into`] writes.
    pub(crate) fn segments(&self) -> Vec<HotPayloadSegment> {
        let mut out = Vec::with_capacity(self.chunks.len());
        self.segments_into(&mut out);
        out
    }

    /// Bytes at or after `from`, summed over all chunks.
    pub(crate) fn remaining_len_from(&self, from: u64) -> u64 {
        self.chunks
            .iter()
            .filter(|c| c.end() > from)
            .map(|c| c.end() - c.start.max(from))
            .fold(0u64, u64::saturating_add)
    }

    /// Whether the chunks contiguously cover `[start, end)` from the first
    /// chunk on.
    pub(crate) fn covers_prefix(&self, start: u64, end: u64) -> bool {
        let Some(first) = self.chunks.front() else {
            return false;
        };
        if first.start != start {
            return false;
        }
        let mut covered = start;
        for chunk in &self.chunks {
            if chunk.start != covered {
                return false;
            }
            if chunk.end() >= end {
                return true;
            }
            covered = chunk.end();
        }
        false
    }

    /// Collects up to `max` contiguous bytes from `from`; `None` when fewer
    /// than `min` are available. The start of the result is always `from`.
    pub(crate) fn collect_from(
        &self,
        from: u64,
        min: usize,
        max: usize,
    ) -> Option<(u64, u64, Vec<u8>)> {
        let (start, end, slices) = self.slices_from(from, min, max)?;
        let mut out = Vec::with_capacity(slices.iter().map(Bytes::len).sum());
        for slice in &slices {
            out.extend_from_slice(slice);
        }
        Some((start, end, out))
    }

    /// [`HotBuffer::collect_from`] as slices of the chunks (no copy).
    pub(crate) fn slices_from(
        &self,
        from: u64,
        min: usize,
        max: usize,
    ) -> Option<(u64, u64, Vec<Bytes>)> {
        let mut out: Vec<Bytes> = Vec::new();
        let mut len = 0usize;
        for chunk in &self.chunks {
            if chunk.end() <= from {
                continue;
            }
            if chunk.start > from.saturating_add(to_u64(len)) || len >= max {
                break;
            }
            let skip = if chunk.start < from {
                to_usize(from - chunk.start)
            } else {
                0
            };
            let available = chunk.bytes.len().saturating_sub(skip);
            let take = available.min(max - len);
            out.push(chunk.bytes.slice(skip..skip + take));
            len += take;
            if take < available {
                break;
            }
        }
        if len < min {
            return None;
        }
        Some((from, from.saturating_add(to_u64(len)), out))
    }

    /// Lowercase hex BLAKE3 of the contiguous hot bytes `[start, end)`, or
    /// `None` when they are not all held contiguously.
    pub(crate) fn digest_prefix(&self, start: u64, end: u64) -> Option<String> {
        let len = to_usize(end.checked_sub(start)?);
        let (_, got_end, slices) = self.slices_from(start, len, len)?;
        if got_end != end {
            return None;
        }
        Some(digest_slices(&slices))
    }

    /// Drops every byte below `end` (only the front chunk is ever trimmed);
    /// returns how many bytes left the buffer.
    pub(crate) fn flush_prefix(&mut self, end: u64) -> u64 {
        let mut removed = 0u64;
        while self.chunks.front().is_some_and(|c| c.end() <= end) {
            if let Some(chunk) = self.chunks.pop_front() {
                removed = removed.saturating_add(to_u64(chunk.bytes.len()));
            }
        }
        if let Some(first) = self.chunks.front_mut()
            && first.start < end
        {
            let cut = to_usize(end - first.start).min(first.bytes.len());
            first.bytes = first.bytes.slice(cut..);
            first.start = end;
            removed = removed.saturating_add(to_u64(cut));
        }
        if self.chunks.is_empty() {
            // A flushed stream keeps no list of the size it once needed:
            // with many streams those lists were most of the memory the
            // hot bytes' bookkeeping held.
            self.chunks = VecDeque::new();
        }
        removed
    }

    /// Rebuilds a buffer from restored chunks (bytes already sliced).
    pub(crate) fn from_chunks(chunks: impl IntoIterator<Item = HotChunk>) -> Self {
        Self {
            chunks: chunks.into_iter().collect(),
        }
    }
}

/// How many bytes of small slices [`digest_slices`] gathers before it
/// hashes them: BLAKE3 hashes several 1 KiB chunks at once (SIMD) only
/// when one update spans them, and hot buffers hold one slice per append.
const DIGEST_RUN: usize = 16 << 10;

/// Lowercase hex BLAKE3 of `slices` in order, as `FlushCold` checks a
/// piece's bytes.
pub(crate) fn digest_slices(slices: &[Bytes]) -> String {
    let mut hasher = blake3::Hasher::new();
    let mut run: Vec<u8> = Vec::new();
    for slice in slices {
        if slice.len() >= DIGEST_RUN {
            hasher.update(&run);
            run.clear();
            hasher.update(slice);
            continue;
        }
        if run.capacity() == 0 {
            run.reserve(DIGEST_RUN * 2);
        }
        run.extend_from_slice(slice);
        if run.len() >= DIGEST_RUN {
            hasher.update(&run);
            run.clear();
        }
    }
    hasher.update(&run);
    hasher.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(parts: &[(u64, &str)]) -> HotBuffer {
        let mut b = HotBuffer::default();
        for (start, s) in parts {
            b.push(*start, Bytes::copy_from_slice(s.as_bytes()));
        }
        b
    }

    #[test]
    fn digests_of_slices_equal_the_digest_of_their_bytes() {
        // Small slices gathered into runs, large ones hashed as they are,
        // in every mix: the digest is that of the concatenation.
        let sizes = [
            0usize,
            1,
            255,
            256,
            1024,
            1025,
            4095,
            16 << 10,
            (16 << 10) + 7,
            70_000,
        ];
        for (i, _) in sizes.iter().enumerate() {
            let mut slices = Vec::new();
            let mut whole = Vec::new();
            for (j, &len) in sizes.iter().cycle().skip(i).take(40).enumerate() {
                let bytes: Vec<u8> = (0..len).map(|k| (k * 31 + j) as u8).collect();
                whole.extend_from_slice(&bytes);
                slices.push(Bytes::from(bytes));
            }
            assert_eq!(
                digest_slices(&slices),
                blake3::hash(&whole).to_hex().to_string()
            );
        }
        assert_eq!(digest_slices(&[]), blake3::hash(b"").to_hex().to_string());
    }

    #[test]
    fn collect_stops_at_gaps_and_limits() {
        let b = buffer(&[(0, "0123456789"), (20, "abcde")]);
        assert_eq!(b.collect_from(0, 1, 100).map(|c| c.1), Some(10));
        assert_eq!(b.collect_from(0, 11, 100), None);
        let (s, e, bytes) = b.collect_from(2, 1, 4).expect("bytes");
        assert_eq!((s, e, bytes.as_slice()), (2, 6, &b"2345"[..]));
        assert_eq!(b.remaining_len_from(0), 15);
        assert_eq!(b.remaining_len_from(5), 10);
    }

    #[test]
    fn flush_prefix_trims_front_only() {
        let mut b = buffer(&[(0, "ab"), (2, "cd"), (4, "ef")]);
        assert_eq!(b.flush_prefix(3), 3);
        assert_eq!(b.internal_start(), 3);
        let mut payload = Vec::new();
        b.payload_into(&mut payload);
        assert_eq!(payload, b"def");
        assert_eq!(b.len(), 3);
        assert!(b.covers_prefix(3, 6));
        assert!(!b.covers_prefix(3, 7));
    }

    #[test]
    fn empty_collect_with_zero_min_is_the_empty_candidate() {
        let b = HotBuffer::default();
        assert_eq!(b.collect_from(7, 0, 10), Some((7, 7, Vec::new())));
        assert_eq!(b.public_start(9), 9);
        assert_eq!(b.internal_start(), 0);
    }
}
