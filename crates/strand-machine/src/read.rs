//! Read planning and reads (spec 06 §5–§6).

use bytes::Bytes;
use strand_model::{
    BucketStreamId, COLD_INDEX_PAGE_SPAN_BYTES, CORRECTED_MAX_READ_BYTES, ObjectPayloadRef,
    StreamRead, StreamReadColdIndexSegment, StreamReadObjectSegment, StreamReadPlan,
    StreamReadSegment, StreamStatus,
};

use crate::hot::{to_u64, to_usize};
use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::scope::not_found;
use crate::slot::StreamSlot;
use crate::ttl::expired;

/// Cold-index pieces for `[x, y)`, split at page boundaries.
fn emit_pages(out: &mut Vec<(u64, StreamReadSegment)>, mut x: u64, y: u64) {
    while x < y {
        let page = x / COLD_INDEX_PAGE_SPAN_BYTES;
        let page_end = y.min(
            page.saturating_add(1)
                .saturating_mul(COLD_INDEX_PAGE_SPAN_BYTES),
        );
        out.push((
            x,
            StreamReadSegment::ColdIndex(StreamReadColdIndexSegment {
                generation: 0,
                page_id: page,
                read_start_offset: x,
                len: to_usize(page_end - x),
            }),
        ));
        x = page_end;
    }
}

/// Cold-index pieces for `[a, b)` minus the direct ranges `direct`.
fn emit_excluding(out: &mut Vec<(u64, StreamReadSegment)>, direct: &[(u64, u64)], a: u64, b: u64) {
    let mut c = a;
    for &(xs, xe) in direct {
        if xe <= c || xs >= b {
            continue;
        }
        emit_pages(out, c, xs.min(b));
        c = c.max(xe);
        if c >= b {
            return;
        }
    }
    emit_pages(out, c, b);
}

fn segment_len(segment: &StreamReadSegment) -> u64 {
    match segment {
        StreamReadSegment::ColdIndex(s) => to_u64(s.len),
        StreamReadSegment::Object(s) => to_u64(s.len),
        StreamReadSegment::Hot(bytes) => to_u64(bytes.len()),
    }
}

/// Pushes the part of `[start, stop)` inside `[offset, end)`, if any, as
/// an object segment; `object` is built only then.
fn object_piece(
    out: &mut Vec<(u64, StreamReadSegment)>,
    (start, stop): (u64, u64),
    object: impl FnOnce() -> ObjectPayloadRef,
    offset: u64,
    end: u64,
) {
    let s = start.max(offset);
    let e = stop.min(end);
    if s < e {
        out.push((
            s,
            StreamReadSegment::Object(StreamReadObjectSegment {
                object: object(),
                read_start_offset: s,
                len: to_usize(e - s),
            }),
        ));
    }
}

/// A read served from the hot buffer without copying: the payload is a
/// list of `Bytes` slices of the appended buffers, in offset order, whose
/// lengths add up to `next_offset - offset`. Serializable: a node asks
/// a page of a member holding the stream's group.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HotRead {
    /// Where the read starts.
    pub offset: u64,
    /// Where the next read should start.
    pub next_offset: u64,
    /// The stream's content type.
    pub content_type: String,
    /// The payload, as slices of the hot buffer.
    pub slices: Vec<Bytes>,
    /// Whether the read reached the stream's tail.
    pub up_to_date: bool,
    /// Whether the stream is closed.
    pub closed: bool,
}

impl HotRead {
    /// The payload length in bytes.
    pub fn len(&self) -> u64 {
        self.next_offset - self.offset
    }

    /// True when the read carries no bytes.
    pub fn is_empty(&self) -> bool {
        self.next_offset == self.offset
    }

    /// Ends the page at stream offset `end` when it lies strictly inside
    /// it (the bytes after it are dropped and `next_offset` becomes
    /// `end`); any other `end` leaves the page as it is. Answers whether
    /// it cut.
    pub fn truncate_at(&mut self, end: u64) -> bool {
        if end <= self.offset || end >= self.next_offset {
            return false;
        }
        let mut keep = to_usize(end - self.offset);
        self.slices.retain_mut(|slice| {
            if keep == 0 {
                return false;
            }
            if slice.len() > keep {
                slice.truncate(keep);
            }
            keep -= slice.len();
            true
        });
        self.next_offset = end;
        true
    }
}

impl StreamStateMachine {
    /// Ends a page that stops inside a message at that message's start,
    /// where the machine knows it ([`StreamStateMachine::message_bounds`]),
    /// so the offset it hands out is a message boundary. A page holding
    /// no whole message, or one that reached the tail, is kept.
    pub fn end_on_message(&self, stream_id: &BucketStreamId, read: &mut HotRead) {
        if read.up_to_date {
            return;
        }
        if let Some((end, _)) = self.message_bounds(stream_id, read.next_offset) {
            read.truncate_at(end);
        }
    }

    /// How far a read of `max_len` bytes may reach: the corrected profile
    /// caps it at [`CORRECTED_MAX_READ_BYTES`] (the caller continues from
    /// the returned `next_offset`).
    fn read_span(&self, max_len: usize) -> u64 {
        let span = to_u64(max_len);
        if self.corrected() {
            span.min(CORRECTED_MAX_READ_BYTES)
        } else {
            span
        }
    }

    /// The checks every read makes, in order (missing or expired stream,
    /// offset past the tail, offset below the retained offset), and the end
    /// of the range it may cover.
    ///
    /// `now_ms` is `None` for a fork reading through its source: expiry
    /// and soft deletion do not stop such reads (`docs/forks.md` §4).
    fn read_range(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
        now_ms: Option<u64>,
    ) -> Result<(&StreamSlot, u64), StreamResponse> {
        let slot = self
            .registry
            .get(stream_id)
            .ok_or_else(|| not_found(stream_id))?;
        if let Some(now_ms) = now_ms {
            if slot.soft_deleted() {
                return Err(StreamResponse::error(
                    StreamErrorCode::StreamSoftDeleted,
                    format!("stream '{stream_id}' was deleted; forks still read through it"),
                ));
            }
            if expired(&slot.metadata, now_ms) {
                return Err(not_found(stream_id));
            }
        }
        let tail = slot.metadata.tail_offset;
        if offset > tail {
            return Err(StreamResponse::error_at(
                StreamErrorCode::OffsetOutOfRange,
                tail,
                format!("offset {offset} is beyond stream '{stream_id}' tail {tail}"),
            ));
        }
        let retained = slot.retained_offset();
        if offset < retained {
            return Err(StreamResponse::error_at(
                StreamErrorCode::StreamGone,
                retained,
                format!(
                    "offset {offset} of stream '{stream_id}' is below retained offset {retained}"
                ),
            ));
        }
        let end = tail.min(offset.saturating_add(self.read_span(max_len)));
        Ok((slot, end))
    }

    /// Reads up to `max_len` bytes from `offset` out of the hot buffer
    /// without copying them, testing expiry against `now_ms`. Errors as
    /// [`read_plan_at`](Self::read_plan_at) does (`StreamNotFound`,
    /// `OffsetOutOfRange`, `StreamGone`); a range that is not entirely hot
    /// (flushed to the cold tier, or held in an external object) is
    /// `InvalidColdFlush` with `next_offset` at the hot start: such reads
    /// need [`read_plan_at`](Self::read_plan_at) and an object store.
    pub fn read_hot_at(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
        now_ms: u64,
    ) -> Result<HotRead, StreamResponse> {
        self.read_hot(stream_id, offset, max_len, Some(now_ms))
    }

    /// [`read_hot_at`](Self::read_hot_at) for a fork reading through this
    /// stream (`docs/forks.md` §4): the stream's expiry and soft deletion
    /// are ignored. The caller caps `max_len` at the fork offset and asks
    /// this stream's own source for offsets below its
    /// [`fork_origin`](Self::fork_origin).
    pub fn read_hot_through(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
    ) -> Result<HotRead, StreamResponse> {
        self.read_hot(stream_id, offset, max_len, None)
    }

    fn read_hot(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
        now_ms: Option<u64>,
    ) -> Result<HotRead, StreamResponse> {
        let (slot, end) = self.read_range(stream_id, offset, max_len, now_ms)?;
        let mut slices = Vec::new();
        let mut cursor = offset;
        for chunk in slot.hot().chunks() {
            if cursor >= end {
                break;
            }
            if chunk.end() <= cursor {
                continue;
            }
            if chunk.start > cursor {
                break;
            }
            let to = chunk.end().min(end);
            slices.push(
                chunk
                    .bytes
                    .slice(to_usize(cursor - chunk.start)..to_usize(to - chunk.start)),
            );
            cursor = to;
        }
        if cursor < end {
            return Err(StreamResponse::error_at(
                StreamErrorCode::InvalidColdFlush,
                cursor,
                format!("stream '{stream_id}' range {cursor}..{end} is not in the hot buffer"),
            ));
        }
        Ok(HotRead {
            offset,
            next_offset: end,
            content_type: slot.metadata.content_type.clone(),
            slices,
            up_to_date: end == slot.metadata.tail_offset,
            closed: slot.metadata.status == StreamStatus::Closed,
        })
    }

    /// `read_plan_at` at time 0.
    pub fn read_plan(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
    ) -> Result<StreamReadPlan, StreamResponse> {
        self.read_plan_at(stream_id, offset, max_len, 0)
    }

    /// Plans a read of up to `max_len` bytes from `offset`: cold-index,
    /// object and hot segments in offset order.
    pub fn read_plan_at(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
        now_ms: u64,
    ) -> Result<StreamReadPlan, StreamResponse> {
        self.plan_read(stream_id, offset, max_len, Some(now_ms))
    }

    /// [`read_plan_at`](Self::read_plan_at) for a fork reading through this
    /// stream, as [`read_hot_through`](Self::read_hot_through) is for hot
    /// reads: expiry and soft deletion are ignored.
    pub fn read_plan_through(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
    ) -> Result<StreamReadPlan, StreamResponse> {
        self.plan_read(stream_id, offset, max_len, None)
    }

    fn plan_read(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
        now_ms: Option<u64>,
    ) -> Result<StreamReadPlan, StreamResponse> {
        let (slot, end) = self.read_range(stream_id, offset, max_len, now_ms)?;
        let (tail, retained) = (slot.metadata.tail_offset, slot.retained_offset());

        let mut hot: Vec<(u64, StreamReadSegment)> = Vec::new();
        for chunk in slot.hot().chunks() {
            let s = chunk.start.max(offset);
            let e = chunk.end().min(end);
            if s < e {
                let from = to_usize(s - chunk.start);
                let to = to_usize(e - chunk.start);
                hot.push((s, StreamReadSegment::Hot(chunk.bytes[from..to].to_vec())));
            }
        }
        let cold_end = end.min(slot.cold().frontier(retained));
        let mut direct: Vec<(u64, u64)> = slot
            .cold()
            .chunks()
            .iter()
            .map(|c| (c.start_offset, c.end_offset))
            .chain(
                slot.cold()
                    .external()
                    .iter()
                    .map(|s| (s.start_offset, s.end_offset)),
            )
            .collect();
        direct.sort_unstable();

        let mut segments: Vec<(u64, StreamReadSegment)> = Vec::new();
        let mut cursor = offset;
        for (hs, bytes) in &hot {
            if cursor >= cold_end {
                break;
            }
            let he = hs.saturating_add(segment_len(bytes));
            if he <= cursor {
                continue;
            }
            emit_excluding(&mut segments, &direct, cursor, (*hs).min(cold_end));
            cursor = cursor.max(he);
        }
        emit_excluding(&mut segments, &direct, cursor, cold_end);
        for chunk in slot.cold().chunks() {
            let range = (chunk.start_offset, chunk.end_offset);
            object_piece(&mut segments, range, || chunk.payload_ref(), offset, end);
        }
        for ext in slot.cold().external() {
            let range = (ext.start_offset, ext.end_offset);
            object_piece(&mut segments, range, || ext.clone(), offset, end);
        }
        segments.extend(hot);
        segments.sort_by_key(|(start, _)| *start);

        let mut expected = offset;
        let mut covered = expected == end;
        for (start, segment) in &segments {
            let seg_end = start.saturating_add(segment_len(segment));
            if seg_end <= expected {
                continue;
            }
            if *start > expected {
                break;
            }
            expected = seg_end;
            if expected >= end {
                covered = true;
                break;
            }
        }
        if !covered {
            return Err(StreamResponse::error_at(
                StreamErrorCode::InvalidColdFlush,
                end,
                format!("missing payload segment metadata for stream '{stream_id}'"),
            ));
        }
        Ok(StreamReadPlan {
            offset,
            next_offset: end,
            content_type: slot.metadata.content_type.clone(),
            segments: segments.into_iter().map(|(_, s)| s).collect(),
            up_to_date: end == tail,
            closed: slot.metadata.status == StreamStatus::Closed,
            retained_record_range: None,
            record_range: None,
        })
    }

    /// Reads hot bytes; fails if any part of the range is cold. Tests
    /// expiry at time 0, like [`read_plan`](Self::read_plan); see
    /// [`read_at`](Self::read_at).
    pub fn read(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
    ) -> Result<StreamRead, StreamResponse> {
        self.read_at(stream_id, offset, max_len, 0)
    }

    /// [`read`](Self::read), testing expiry against the caller's `now_ms`
    /// (as [`read_plan_at`](Self::read_plan_at) does).
    pub fn read_at(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
        now_ms: u64,
    ) -> Result<StreamRead, StreamResponse> {
        let plan = self.read_plan_at(stream_id, offset, max_len, now_ms)?;
        let mut payload = Vec::new();
        for segment in &plan.segments {
            match segment {
                StreamReadSegment::Hot(bytes) => payload.extend_from_slice(bytes),
                _ => {
                    return Err(StreamResponse::error_at(
                        StreamErrorCode::InvalidColdFlush,
                        plan.next_offset,
                        "read needs the object payload store",
                    ));
                }
            }
        }
        Ok(StreamRead {
            offset: plan.offset,
            next_offset: plan.next_offset,
            content_type: plan.content_type,
            payload,
            up_to_date: plan.up_to_date,
            closed: plan.closed,
        })
    }
}
