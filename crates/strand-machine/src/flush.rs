//! Cold tier commands and flush planning: `FlushCold`, `CompactCold`,
//! `plan_cold_flush`, `plan_next_cold_flush_batch` (spec 05 §3–§5).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use strand_model::{BucketStreamId, ColdChunkRef, ColdFlushCandidate, ColdGcTarget};

use crate::hot::{HotBuffer, digest_slices, to_u64};
use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamErrorContext, StreamResponse};
use crate::retention::compact_message_records;
use crate::scope::not_found;
use crate::slot::StreamSlot;

/// Orders slots by (bucket, stream, affinity with `None` first): the
/// reference's order, with its affinity ties broken deterministically.
struct ById<'a>(&'a StreamSlot);

impl PartialEq for ById<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.id() == other.0.id()
    }
}

impl Eq for ById<'_> {}

impl PartialOrd for ById<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ById<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.id().cmp(other.0.id())
    }
}

fn invalid(message: &str) -> StreamResponse {
    StreamResponse::error(StreamErrorCode::InvalidColdFlush, message)
}

fn invalid_at(tail: u64, message: &str) -> StreamResponse {
    StreamResponse::error_at(StreamErrorCode::InvalidColdFlush, tail, message)
}

fn stale(tail: u64, message: String) -> StreamResponse {
    StreamResponse::error_with(
        StreamErrorCode::InvalidColdFlush,
        Some(tail),
        vec![StreamErrorContext::StaleColdFlushCandidate],
        message,
    )
}

fn candidate(
    id: &BucketStreamId,
    (start, end, payload): (u64, u64, Vec<u8>),
) -> ColdFlushCandidate {
    let payload_digest = blake3::hash(&payload).to_hex().to_string();
    ColdFlushCandidate {
        stream_id: id.clone(),
        start_offset: start,
        end_offset: end,
        payload,
        payload_digest,
    }
}

/// One stream's piece of a flush planned by
/// [`StreamStateMachine::plan_largest_cold_flush_batch`]: the bytes
/// `[start_offset, end_offset)` as slices of the hot buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColdFlushSlices {
    /// The stream.
    pub stream_id: BucketStreamId,
    /// The first offset of the piece (the stream's hot start).
    pub start_offset: u64,
    /// The offset after its last byte.
    pub end_offset: u64,
    /// The bytes, in order: slices shared with the hot buffer, or one copy
    /// when they are many small ones.
    pub slices: Vec<bytes::Bytes>,
    /// Lowercase hex BLAKE3 of the bytes, as `FlushCold` checks them.
    pub payload_digest: String,
}

/// Slices averaging less than this are copied into one buffer: hashing,
/// checksumming and writing many tiny slices costs more than the copy.
const SMALL_SLICE: usize = 4096;

/// `slices` (of `len` bytes in all) as they are, or as one buffer when
/// they are many and small.
fn gather_small(slices: Vec<bytes::Bytes>, len: usize) -> Vec<bytes::Bytes> {
    if slices.len() < 2 || len / slices.len() >= SMALL_SLICE {
        return slices;
    }
    let mut one = Vec::with_capacity(len);
    for s in &slices {
        one.extend_from_slice(s);
    }
    vec![bytes::Bytes::from(one)]
}

/// The hot bytes of `slot` a flush may take (from its public hot start).
fn hot_remaining(slot: &StreamSlot) -> u64 {
    let hot = slot.hot();
    hot.remaining_len_from(hot.public_start(slot.metadata.tail_offset))
}

/// `collect_from` at `from` as a candidate of stream `id`.
fn plan_from(
    id: &BucketStreamId,
    hot: &HotBuffer,
    from: u64,
    min: usize,
    max: usize,
) -> Option<ColdFlushCandidate> {
    hot.collect_from(from, min, max).map(|c| candidate(id, c))
}

impl StreamStateMachine {
    pub(crate) fn flush_cold(
        &mut self,
        id: &BucketStreamId,
        chunk: ColdChunkRef,
    ) -> StreamResponse {
        if let Err(e) = self.check_scope(id) {
            return e;
        }
        if chunk.s3_path.trim().is_empty() {
            return invalid("cold chunk path must not be empty");
        }
        if chunk.object_size == 0 {
            return invalid("cold chunk object size must be greater than zero");
        }
        let corrected = self.corrected();
        let Some(slot) = self.registry.get_mut(id) else {
            return not_found(id);
        };
        let tail = slot.metadata.tail_offset;
        let (start, end) = (chunk.start_offset, chunk.end_offset);
        if end <= start {
            return invalid_at(tail, "cold chunk must cover at least one byte");
        }
        let inside = chunk
            .object_offset
            .checked_add(end - start)
            .is_some_and(|e| e <= chunk.object_size);
        if !inside {
            return invalid_at(tail, "cold chunk slice lies outside its physical object");
        }
        if !chunk.shared_object && chunk.object_offset != 0 {
            return invalid_at(tail, "exclusive cold chunk must start at object offset 0");
        }
        if end > tail {
            return stale(
                tail,
                format!("cold chunk end {end} is beyond stream '{id}' tail {tail}"),
            );
        }
        if slot.hot().internal_start() != start {
            return stale(tail, "cold chunk must start at the hot prefix".into());
        }
        if !slot.hot().covers_prefix(start, end) {
            return stale(
                tail,
                "cold chunk does not cover contiguous hot payload".into(),
            );
        }
        if !chunk.payload_digest.is_empty()
            && slot.hot().digest_prefix(start, end).as_deref()
                != Some(chunk.payload_digest.as_str())
        {
            return stale(tail, "cold chunk payload is stale".into());
        }
        let data = slot.data.make_mut();
        let removed = data.hot.flush_prefix(end);
        data.cold.raw_frontier = if corrected {
            // Corrected profile: never lower the frontier below data the
            // chunk does not cover (external appends above it).
            data.cold.raw_frontier.max(end)
        } else {
            end
        };
        let retained = data.retained_offset;
        compact_message_records(&mut data.message_records, retained, end);
        let hot_start = data.hot.public_start(tail);
        if chunk.shared_object {
            data.cold
                .push_shared_chunk(chunk, &mut self.shared, &id.bucket_id);
        }
        self.remove_hot_bytes(removed);
        StreamResponse::ColdFlushed {
            hot_start_offset: hot_start,
        }
    }

    pub(crate) fn compact_cold(
        &mut self,
        id: &BucketStreamId,
        old_chunks: Vec<ColdChunkRef>,
        replacement: ColdChunkRef,
        gc_not_before_ms: u64,
    ) -> StreamResponse {
        if let Err(e) = self.check_scope(id) {
            return e;
        }
        let corrected = self.corrected();
        let Some(slot) = self.registry.get_mut(id) else {
            return not_found(id);
        };
        let Some(first) = old_chunks.first() else {
            return invalid("compaction needs at least one input chunk");
        };
        if old_chunks.len() == 1 && !first.shared_object {
            return invalid("compaction needs two raw chunks or one shared chunk");
        }
        if replacement.s3_path.trim().is_empty() || replacement.object_size == 0 {
            return invalid("replacement object is invalid");
        }
        let all_shared = old_chunks.iter().all(|c| c.shared_object);
        let any_shared = old_chunks.iter().any(|c| c.shared_object);
        if any_shared != all_shared || replacement.shared_object || replacement.object_offset != 0 {
            return invalid("compaction inputs must be all shared or all raw, into a raw object");
        }
        let mut expected = first.start_offset;
        let mut bytes = 0u64;
        for c in &old_chunks {
            if c.start_offset != expected
                || c.end_offset <= c.start_offset
                || (!c.shared_object && c.object_size != c.end_offset - c.start_offset)
            {
                return invalid("compaction inputs are not contiguous");
            }
            expected = c.end_offset;
            bytes = bytes.saturating_add(c.end_offset - c.start_offset);
        }
        if replacement.start_offset != first.start_offset
            || replacement.end_offset != expected
            || replacement.object_size != bytes
        {
            return invalid("replacement does not match the compacted range");
        }
        if all_shared && corrected && slot.cold().count_chunks(&old_chunks) != old_chunks.len() {
            // Corrected profile: a failed compaction changes nothing.
            return invalid("compaction input no longer matches stream state");
        }
        if all_shared {
            let removed = slot
                .data
                .get_mut()
                .map_or(0, |d| d.cold.remove_chunks(&old_chunks));
            if removed != old_chunks.len() {
                // Quirk: the matching chunks stay removed, refs unreleased.
                return invalid("compaction input no longer matches stream state");
            }
        }
        let (shared, exclusive): (Vec<&ColdChunkRef>, Vec<&ColdChunkRef>) =
            old_chunks.iter().partition(|c| c.shared_object);
        let shared_paths: Vec<String> = shared.iter().map(|c| c.s3_path.clone()).collect();
        let exclusive_paths: Vec<String> = exclusive.iter().map(|c| c.s3_path.clone()).collect();
        if !exclusive_paths.is_empty() {
            self.gc.enqueue(
                id.bucket_id.clone(),
                ColdGcTarget::Paths(exclusive_paths),
                gc_not_before_ms,
            );
        }
        self.shared
            .release(&mut self.gc, &id.bucket_id, &shared_paths, gc_not_before_ms);
        StreamResponse::ColdCompacted {
            compacted_chunks: to_u64(old_chunks.len()),
            compacted_bytes: bytes,
        }
    }

    /// Plans the next flush of one stream's hot prefix (read-only).
    pub fn plan_cold_flush(
        &self,
        stream_id: &BucketStreamId,
        min_hot_bytes: usize,
        max_flush_bytes: usize,
    ) -> Result<Option<ColdFlushCandidate>, StreamResponse> {
        if max_flush_bytes == 0 {
            return Ok(None);
        }
        let slot = self
            .registry
            .get(stream_id)
            .ok_or_else(|| not_found(stream_id))?;
        let from = slot.hot().public_start(slot.metadata.tail_offset);
        Ok(plan_from(
            stream_id,
            slot.hot(),
            from,
            min_hot_bytes,
            max_flush_bytes,
        ))
    }

    /// Previews the next flush candidates across the whole group
    /// (read-only). Streams are visited in (bucket, stream, affinity) order:
    /// one pass collects the streams with hot bytes into a heap (O(streams)),
    /// and only the streams actually drained are popped from it, so a call
    /// costs O(streams + candidates · log streams), never a sort per
    /// candidate.
    pub fn plan_next_cold_flush_batch(
        &self,
        min_hot_bytes: usize,
        max_flush_bytes: usize,
        max_batch_bytes: usize,
        max_candidates: usize,
    ) -> Result<Vec<ColdFlushCandidate>, StreamResponse> {
        let mut candidates = Vec::new();
        if max_candidates == 0 || max_flush_bytes == 0 || max_batch_bytes == 0 {
            return Ok(candidates);
        }
        // Streams with hot bytes, smallest id first. Heapify is O(n) and only
        // the streams actually drained are popped.
        let mut initial = 0u64;
        let mut hot_streams: Vec<Reverse<ById<'_>>> = Vec::new();
        for slot in self.registry.slots_in_arena_order() {
            let remaining = hot_remaining(slot);
            if remaining > 0 {
                initial = initial.saturating_add(remaining);
                hot_streams.push(Reverse(ById(slot)));
            }
        }
        let mut heap = BinaryHeap::from(hot_streams);
        // Group drain rule: below the minimum nothing is planned; at or above
        // it every candidate only needs one byte.
        if initial < to_u64(min_hot_bytes) {
            return Ok(candidates);
        }
        let mut batch_bytes = 0usize;
        'streams: while let Some(Reverse(ById(slot))) = heap.pop() {
            let mut from = slot.hot().public_start(slot.metadata.tail_offset);
            while candidates.len() < max_candidates {
                let Some(c) = plan_from(slot.id(), slot.hot(), from, 1, max_flush_bytes) else {
                    continue 'streams;
                };
                let Some(next) = batch_bytes.checked_add(c.payload.len()) else {
                    break 'streams;
                };
                if !candidates.is_empty() && next > max_batch_bytes {
                    break 'streams;
                }
                from = c.end_offset;
                batch_bytes = next;
                candidates.push(c);
                if batch_bytes >= max_batch_bytes {
                    break 'streams;
                }
            }
            break;
        }
        Ok(candidates)
    }

    /// Previews a flush batch that drains the streams holding the most hot
    /// bytes first (strand's own planner; the reference visits streams in
    /// id order). Only streams holding at least `min_stream_bytes` hot bytes
    /// are planned, largest first, ties in (bucket, stream, affinity)
    /// order; each stream gives pieces of at most `max_flush_bytes` from its
    /// hot prefix on, and the batch stops at `max_candidates` pieces or
    /// once it holds `max_batch_bytes` (it always takes a first piece).
    /// Pieces are slices of the hot buffer, not copies, except that many
    /// small appends' bytes are gathered into one buffer per piece.
    ///
    /// Draining the largest streams keeps each flushed piece as large as
    /// the hot bytes allow, so a group of many small streams leaves few
    /// cold-chunk references per byte. One pass over the streams heapifies
    /// those that qualify (O(streams)); only the drained ones are popped.
    pub fn plan_largest_cold_flush_batch(
        &self,
        min_stream_bytes: usize,
        max_flush_bytes: usize,
        max_batch_bytes: usize,
        max_candidates: usize,
    ) -> Vec<ColdFlushSlices> {
        let mut pieces = Vec::new();
        if max_candidates == 0 || max_flush_bytes == 0 || max_batch_bytes == 0 {
            return pieces;
        }
        let floor = to_u64(min_stream_bytes.max(1));
        let mut qualified: Vec<(u64, Reverse<ById<'_>>)> = Vec::new();
        for slot in self.registry.slots_in_arena_order() {
            let remaining = hot_remaining(slot);
            if remaining >= floor {
                qualified.push((remaining, Reverse(ById(slot))));
            }
        }
        let mut heap = BinaryHeap::from(qualified);
        let mut batch_bytes = 0usize;
        'streams: while let Some((_, Reverse(ById(slot)))) = heap.pop() {
            let mut from = slot.hot().public_start(slot.metadata.tail_offset);
            while pieces.len() < max_candidates {
                let Some((start, end, slices)) = slot.hot().slices_from(from, 1, max_flush_bytes)
                else {
                    continue 'streams;
                };
                let len = usize::try_from(end - start).unwrap_or(usize::MAX);
                let Some(next) = batch_bytes.checked_add(len) else {
                    break 'streams;
                };
                if !pieces.is_empty() && next > max_batch_bytes {
                    break 'streams;
                }
                let slices = gather_small(slices, len);
                from = end;
                batch_bytes = next;
                pieces.push(ColdFlushSlices {
                    stream_id: slot.id().clone(),
                    start_offset: start,
                    end_offset: end,
                    payload_digest: digest_slices(&slices),
                    slices,
                });
                if batch_bytes >= max_batch_bytes {
                    break 'streams;
                }
            }
            break;
        }
        pieces
    }
}
