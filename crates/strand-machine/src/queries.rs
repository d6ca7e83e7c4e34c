//! Read-only accessors, record-coordinate queries, visible snapshots and
//! bootstrap plans, group reports (spec 06 §1–§4, §7).

use strand_integrity::StreamIntegritySnapshot;
use strand_model::{
    BucketStreamId, ColdChunkRef, ColdGcEntry, HotPayloadSegment, ObjectPayloadRef,
    ProducerRequest, StreamAttrs, StreamBootstrapPlan, StreamMetadata, StreamRecordRange,
    StreamStatus, StreamVisibleSnapshot,
};
use strand_records::{
    RecordIndexError, offset_for_record, record_range_for_offsets, record_range_of,
};
use strand_usage::{BucketQuotaSnapshot, BucketUsageSnapshot};

use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::scope::not_found;

/// A stream as [`StreamStateMachine::streams_by_path`] lists it.
#[derive(Debug, Clone, Copy)]
pub struct ListedStream<'a> {
    /// Its head (the id is `metadata.stream_id`).
    pub metadata: &'a StreamMetadata,
    /// Its attributes, if any.
    pub attrs: Option<&'a StreamAttrs>,
    /// The first offset still readable (retention's start).
    pub retained_offset: u64,
}

impl ListedStream<'_> {
    /// Its path inside the bucket: `affinity/stream`, or `stream` without
    /// an affinity key.
    pub fn path(&self) -> String {
        crate::path_index::path_of(&self.metadata.stream_id)
    }
}

impl StreamStateMachine {
    /// The stream's metadata (no expiry check).
    pub fn head(&self, stream_id: &BucketStreamId) -> Option<&StreamMetadata> {
        self.registry
            .get(stream_id)
            .filter(|s| !s.soft_deleted())
            .map(|s| &s.metadata)
    }

    /// The stream's metadata at `now_ms`; an expired stream is removed first
    /// (this query mutates).
    pub fn head_at(&mut self, stream_id: &BucketStreamId, now_ms: u64) -> Option<&StreamMetadata> {
        self.expire_if_due(stream_id, now_ms);
        self.registry.get(stream_id).map(|s| &s.metadata)
    }

    /// The live streams of `bucket_id` in path order — a path is
    /// `affinity/stream`, or `stream` without an affinity key — from the
    /// lower bound `from` (`Bound::Unbounded` for the first). Streams
    /// expired at `now_ms` but not yet removed, and soft-deleted ones, are
    /// skipped. The machine keeps its streams ordered by path (4 bytes a
    /// stream), so a page of a listing costs its length, not the bucket's
    /// size.
    pub fn streams_by_path<'a>(
        &'a self,
        bucket_id: &str,
        from: std::ops::Bound<&str>,
        now_ms: u64,
    ) -> impl Iterator<Item = ListedStream<'a>> + 'a {
        self.registry
            .paths_from(bucket_id, from)
            .filter(move |slot| {
                !slot.soft_deleted() && !crate::ttl::expired(&slot.metadata, now_ms)
            })
            .map(|slot| ListedStream {
                metadata: &slot.metadata,
                attrs: slot.attrs(),
                retained_offset: slot.retained_offset(),
            })
    }

    /// The stream's attributes, if any.
    pub fn stream_attrs(&self, stream_id: &BucketStreamId) -> Option<&StreamAttrs> {
        self.registry.get(stream_id).and_then(|s| s.attrs())
    }

    /// First hot byte offset; the tail when the hot buffer is empty; 0 for a
    /// missing stream.
    pub fn hot_start_offset(&self, stream_id: &BucketStreamId) -> u64 {
        self.registry
            .get(stream_id)
            .map_or(0, |s| s.hot().public_start(s.metadata.tail_offset))
    }

    /// The `[start, end)` of the message holding `offset`, where the
    /// machine knows it: in a JSON stream the record holding it (the record
    /// index spans every retained record); in other streams the message
    /// while it is still hot (below the hot start, flushing has merged the
    /// message records into one). `None` for a missing stream, an offset at
    /// or beyond the tail, and an offset whose message is not known.
    pub fn message_bounds(&self, stream_id: &BucketStreamId, offset: u64) -> Option<(u64, u64)> {
        let slot = self.registry.get(stream_id)?;
        let tail = slot.metadata.tail_offset;
        if offset >= tail {
            return None;
        }
        if let Some(index) = slot.record_index.as_deref() {
            let starts = index.record_offsets();
            let after = starts.partition_point(|&start| start <= offset);
            let start = *starts.get(after.checked_sub(1)?)?;
            let end = starts.get(after).copied().unwrap_or(tail);
            return Some((start, end));
        }
        if offset < slot.hot().public_start(tail) {
            return None;
        }
        let records = slot.message_records();
        let after = records.partition_point(|r| r.start_offset <= offset);
        let record = records.get(after.checked_sub(1)?)?;
        (offset < record.end_offset).then_some((record.start_offset, record.end_offset))
    }

    /// The offsets in `[from, to)` where a hot message of a non-JSON
    /// stream starts, ascending (what a cold tier keeps beside the bytes a
    /// flush takes, so reads below the hot start can still begin at whole
    /// messages). The first may be where an earlier flush cut a message.
    /// Empty for a missing stream and for a JSON stream, whose record
    /// index spans every retained record
    /// ([`StreamStateMachine::message_bounds`]).
    pub fn message_starts(&self, stream_id: &BucketStreamId, from: u64, to: u64) -> Vec<u64> {
        let Some(slot) = self.registry.get(stream_id) else {
            return Vec::new();
        };
        if slot.record_index.is_some() {
            return Vec::new();
        }
        let from = from.max(slot.hot().public_start(slot.metadata.tail_offset));
        let records = slot.message_records();
        let first = records.partition_point(|r| r.start_offset < from);
        records
            .get(first..)
            .unwrap_or_default()
            .iter()
            .map(|r| r.start_offset)
            .take_while(|&start| start < to)
            .collect()
    }

    /// Where a read asked for at `offset` starts when reads begin at whole
    /// messages (the Durable Streams protocol's reading of an offset a
    /// client computed, such as one past a snapshot's offset): the tail
    /// for an offset beyond it, the start of the message holding `offset`
    /// ([`StreamStateMachine::message_bounds`]) when a page of `max_len`
    /// bytes holds that whole message, else `offset` itself (a page that
    /// could not reach past the message would be asked for again and
    /// again). A missing stream keeps `offset`.
    pub fn whole_message_start(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
    ) -> u64 {
        let Some(slot) = self.registry.get(stream_id) else {
            return offset;
        };
        let tail = slot.metadata.tail_offset;
        if offset >= tail {
            return tail;
        }
        match self.message_bounds(stream_id, offset) {
            Some((start, end)) if end - start <= crate::hot::to_u64(max_len) => start,
            _ => offset,
        }
    }

    /// The destructive-retention floor; 0 for a missing stream.
    pub fn retained_offset(&self, stream_id: &BucketStreamId) -> u64 {
        self.registry
            .get(stream_id)
            .map_or(0, |s| s.retained_offset())
    }

    /// Stored cold chunks (shared chunks and restored ones).
    pub fn cold_chunks(&self, stream_id: &BucketStreamId) -> &[ColdChunkRef] {
        self.registry
            .get(stream_id)
            .map_or(&[], |s| s.cold().chunk_refs())
    }

    /// Every object a stored cold chunk of any stream names, with the
    /// object's size, sorted by name (what a node's segment store must
    /// hold).
    pub fn referenced_cold_objects(&self) -> std::collections::BTreeMap<String, u64> {
        let mut out = std::collections::BTreeMap::new();
        for (_, slot) in self.registry.keyed_slots() {
            for chunk in slot.cold().chunks() {
                out.entry(chunk.path().to_owned())
                    .or_insert(chunk.object_size());
            }
        }
        out
    }

    /// Stored external segments (only ever filled by restore).
    pub fn external_segments(&self, stream_id: &BucketStreamId) -> &[ObjectPayloadRef] {
        self.registry
            .get(stream_id)
            .map_or(&[], |s| s.cold().external())
    }

    /// One segment per hot chunk.
    pub fn hot_segments(&self, stream_id: &BucketStreamId) -> Vec<HotPayloadSegment> {
        self.registry
            .get(stream_id)
            .map(|s| s.hot().segments())
            .unwrap_or_default()
    }

    /// Bytes held in the stream's hot buffer.
    pub fn hot_payload_len(&self, stream_id: &BucketStreamId) -> Result<u64, StreamResponse> {
        self.registry
            .get(stream_id)
            .map(|s| s.hot().len())
            .ok_or_else(|| not_found(stream_id))
    }

    /// Hot bytes held by every live stream of the group.
    pub fn total_hot_payload_bytes(&self) -> u64 {
        self.hot_bytes
    }

    /// Whether the bucket is active.
    pub fn bucket_exists(&self, bucket_id: &str) -> bool {
        self.buckets.contains(bucket_id)
    }

    /// Per-bucket usage, sorted by bucket id.
    pub fn bucket_usage_report(&self) -> Vec<BucketUsageSnapshot> {
        self.usage.usage_report()
    }

    /// Per-bucket quotas, sorted by bucket id.
    pub fn bucket_quota_report(&self) -> Vec<BucketQuotaSnapshot> {
        self.usage.quota_report()
    }

    /// The first `max` pending cold GC entries, in queue order.
    pub fn pending_cold_gc_batch(&self, max: usize) -> Vec<ColdGcEntry> {
        self.gc.batch(max)
    }

    /// Number of pending cold GC entries.
    pub fn pending_cold_gc_len(&self) -> usize {
        self.gc.len()
    }

    /// Pending entries owned by `bucket_id` or by no bucket (legacy).
    pub fn pending_cold_gc_len_for_bucket(&self, bucket_id: &str) -> usize {
        self.gc.len_for_bucket(bucket_id)
    }

    /// The stream's integrity setsums.
    pub fn integrity_snapshot(
        &self,
        stream_id: &BucketStreamId,
    ) -> Result<StreamIntegritySnapshot, StreamResponse> {
        let slot = self
            .registry
            .get(stream_id)
            .ok_or_else(|| not_found(stream_id))?;
        Ok(slot
            .integrity()
            .snapshot(slot.retained_offset(), slot.metadata.tail_offset))
    }

    /// The stream's retained record range (JSON streams with coordinates).
    pub fn record_range(
        &self,
        stream_id: &BucketStreamId,
    ) -> Result<Option<StreamRecordRange>, RecordIndexError> {
        match self.registry.get(stream_id) {
            Some(slot) => record_range_of(slot.record_index.as_deref()),
            None => Ok(None),
        }
    }

    /// The start offset of record `record` (the tail for `next_record`).
    pub fn offset_for_record(
        &self,
        stream_id: &BucketStreamId,
        record: u64,
    ) -> Result<Option<u64>, RecordIndexError> {
        match self.registry.get(stream_id) {
            Some(slot) => offset_for_record(
                slot.record_index.as_deref(),
                record,
                slot.metadata.tail_offset,
            ),
            None => Ok(None),
        }
    }

    /// The record range of a committed append, from its byte range.
    pub fn record_range_for_append(
        &self,
        stream_id: &BucketStreamId,
        start_offset: u64,
        next_offset: u64,
        producer: Option<&ProducerRequest>,
    ) -> Result<Option<StreamRecordRange>, RecordIndexError> {
        let Some(slot) = self.registry.get(stream_id) else {
            return Ok(None);
        };
        if let Some(p) = producer
            && let Some(items) = slot.producers().last_items(&p.producer_id)
            && let Some(item) = items
                .iter()
                .find(|i| i.start_offset == start_offset && i.next_offset == next_offset)
            && let (Some(first_record), Some(next_record)) = (item.record_start, item.record_next)
        {
            return Ok(Some(StreamRecordRange {
                first_record,
                next_record,
            }));
        }
        record_range_for_offsets(
            slot.record_index.as_deref(),
            start_offset,
            next_offset,
            slot.metadata.tail_offset,
        )
    }

    /// The latest visible snapshot, if one was published.
    pub fn latest_snapshot(
        &self,
        stream_id: &BucketStreamId,
    ) -> Result<Option<StreamVisibleSnapshot>, StreamResponse> {
        self.registry
            .get(stream_id)
            .map(|s| s.visible_snapshot().cloned())
            .ok_or_else(|| not_found(stream_id))
    }

    /// The visible snapshot at exactly `snapshot_offset`.
    pub fn read_snapshot(
        &self,
        stream_id: &BucketStreamId,
        snapshot_offset: u64,
    ) -> Result<StreamVisibleSnapshot, StreamResponse> {
        match self.latest_snapshot(stream_id)? {
            Some(s) if s.offset == snapshot_offset => Ok(s),
            _ => Err(StreamResponse::error(
                StreamErrorCode::SnapshotNotFound,
                format!("no visible snapshot at offset {snapshot_offset} for stream '{stream_id}'"),
            )),
        }
    }

    /// What a new reader needs: the visible snapshot and the message
    /// records after it.
    pub fn bootstrap_plan(
        &self,
        stream_id: &BucketStreamId,
    ) -> Result<StreamBootstrapPlan, StreamResponse> {
        let slot = self
            .registry
            .get(stream_id)
            .ok_or_else(|| not_found(stream_id))?;
        let snapshot = slot.visible_snapshot().cloned();
        let from = snapshot.as_ref().map_or(0, |s| s.offset);
        let updates = slot
            .message_records()
            .iter()
            .filter(|r| r.start_offset >= from)
            .cloned()
            .collect();
        Ok(StreamBootstrapPlan {
            snapshot,
            updates,
            next_offset: slot.metadata.tail_offset,
            content_type: slot.metadata.content_type.clone(),
            up_to_date: true,
            closed: slot.metadata.status == StreamStatus::Closed,
        })
    }

    /// The `(epoch, last accepted seq)` of one producer on a stream, if the
    /// stream exists and the producer has state there. A front end uses it
    /// to answer a deduplicated retry with the producer's highest accepted
    /// sequence rather than the retried one.
    pub fn producer_position(
        &self,
        stream_id: &BucketStreamId,
        producer_id: &str,
    ) -> Option<(u64, u64)> {
        self.registry
            .get(stream_id)?
            .producers()
            .position(producer_id)
    }
}
