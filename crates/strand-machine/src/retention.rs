//! Visible snapshots and destructive retention: `PublishSnapshot`,
//! `AdvanceRetention`, prefix compaction and `delete_snapshot` (spec 05
//! §6–§7).

use bytes::Bytes;
use strand_model::{BucketStreamId, StreamMessageRecord, StreamRecordRange, StreamVisibleSnapshot};
use strand_records::{prepare_record_retention, record_range_of};
use strand_snapshot::visible_snapshot_digest;

use crate::append::record_error;
use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::scope::not_found;
use crate::slot::StreamSlot;

/// Rewrites message records so everything below `frontier` is one record
/// starting at `base` (spec 05 §7.4).
pub(crate) fn compact_message_records(
    records: &mut Vec<StreamMessageRecord>,
    base: u64,
    frontier: u64,
) {
    let f = frontier.max(base);
    let mut out = Vec::with_capacity(records.len() + 1);
    if f > base {
        out.push(StreamMessageRecord {
            start_offset: base,
            end_offset: f,
        });
    }
    for r in records.iter() {
        if r.end_offset <= f {
            continue;
        }
        let s = r.start_offset.max(f).max(base);
        if r.end_offset > s {
            out.push(StreamMessageRecord {
                start_offset: s,
                end_offset: r.end_offset,
            });
        }
    }
    *records = out;
}

/// Whether `offset` is an acceptable snapshot/retention point relative to
/// `base` (spec 05 §6.4).
fn aligned(slot: &StreamSlot, offset: u64, base: u64) -> bool {
    offset == base
        || offset <= slot.cold().frontier(base)
        || offset <= slot.hot().internal_start()
        || slot
            .message_records()
            .iter()
            .any(|r| r.end_offset == offset)
}

/// The stream's record range with errors mapped to `None`.
fn current_record_range(slot: &StreamSlot) -> Option<StreamRecordRange> {
    record_range_of(slot.record_index.as_deref()).ok().flatten()
}

impl StreamStateMachine {
    pub(crate) fn publish_snapshot(
        &mut self,
        id: &BucketStreamId,
        snapshot_offset: u64,
        content_type: String,
        payload: Bytes,
        expected_digest: Option<String>,
        now_ms: u64,
    ) -> StreamResponse {
        if let Err(e) = self.check_scope(id) {
            return e;
        }
        if content_type.trim().is_empty() {
            return StreamResponse::error(
                StreamErrorCode::InvalidSnapshot,
                "snapshot content type must not be empty",
            );
        }
        if !self.registry.contains(id) || self.expire_if_due(id, now_ms) {
            return not_found(id);
        }
        let Some(slot) = self.registry.get_mut(id) else {
            return not_found(id);
        };
        let tail = slot.metadata.tail_offset;
        let retained = slot.retained_offset();
        if snapshot_offset < retained {
            return StreamResponse::error_at(
                StreamErrorCode::StreamGone,
                retained,
                format!("snapshot offset {snapshot_offset} is below retained offset {retained}"),
            );
        }
        if snapshot_offset > tail {
            return conflict(
                tail,
                format!("snapshot offset {snapshot_offset} is beyond tail {tail}"),
            );
        }
        let digest = visible_snapshot_digest(&content_type, &payload);
        if let Some(expected) = &expected_digest
            && slot
                .visible_snapshot()
                .is_none_or(|current| &current.digest != expected)
        {
            return conflict(tail, "snapshot digest precondition failed".into());
        }
        if let Some(current) = slot.visible_snapshot() {
            if snapshot_offset < current.offset {
                return conflict(tail, "snapshot is older than the latest snapshot".into());
            }
            if snapshot_offset == current.offset {
                if current.digest == digest {
                    return StreamResponse::SnapshotPublished {
                        snapshot_offset,
                        snapshot_digest: digest,
                        record_range: current_record_range(slot),
                    };
                }
                return conflict(tail, "a different snapshot exists at this offset".into());
            }
        }
        if !aligned(slot, snapshot_offset, retained) {
            return StreamResponse::error_at(
                StreamErrorCode::InvalidSnapshot,
                tail,
                format!("snapshot offset {snapshot_offset} is not on a committed message boundary"),
            );
        }
        let record_range = current_record_range(slot);
        slot.set_visible_snapshot(StreamVisibleSnapshot {
            offset: snapshot_offset,
            content_type,
            payload: payload.to_vec(),
            digest: digest.clone(),
        });
        StreamResponse::SnapshotPublished {
            snapshot_offset,
            snapshot_digest: digest,
            record_range,
        }
    }

    pub(crate) fn advance_retention(
        &mut self,
        id: &BucketStreamId,
        r: u64,
        now_ms: u64,
    ) -> StreamResponse {
        if let Err(e) = self.check_scope(id) {
            return e;
        }
        if !self.registry.contains(id) || self.expire_if_due(id, now_ms) {
            return not_found(id);
        }
        let Some(slot) = self.registry.get_mut(id) else {
            return not_found(id);
        };
        let tail = slot.metadata.tail_offset;
        let current = slot.retained_offset();
        if r < current {
            return conflict(
                tail,
                format!("retention offset {r} is older than {current}"),
            );
        }
        let Some(checkpoint) = slot.visible_snapshot().map(|s| s.offset) else {
            return conflict(tail, "retention needs a published snapshot".into());
        };
        if r > checkpoint {
            return conflict(
                tail,
                format!("retention offset {r} is beyond the latest snapshot {checkpoint}"),
            );
        }
        if r == current {
            return StreamResponse::RetentionAdvanced {
                retained_offset: r,
                record_range: current_record_range(slot),
            };
        }
        if slot.pinned() {
            return StreamResponse::error_at(
                StreamErrorCode::StreamHasForks,
                tail,
                format!("retention of stream '{id}' cannot drop bytes its forks read"),
            );
        }
        if !aligned(slot, r, current) {
            return StreamResponse::error_at(
                StreamErrorCode::InvalidSnapshot,
                tail,
                format!("retention offset {r} is not on a committed message boundary"),
            );
        }
        let pending = match prepare_record_retention(slot.record_index.as_deref(), r, tail) {
            Ok(p) => p,
            Err(e) => return record_error(e, tail),
        };
        // Frontier from the state before compaction, with the new offset.
        let frontier = slot.cold().frontier(r).max(slot.hot().internal_start());
        if let (Some(p), Some(index)) = (pending, slot.record_index.as_deref_mut()) {
            index.commit_retain(p);
        }
        let data = slot.data.make_mut();
        data.retained_offset = r;
        compact_message_records(&mut data.message_records, r, frontier);
        data.integrity.evict_before(r);
        let dropped_paths = data.cold.drop_below(r);
        let removed_hot = data.hot.flush_prefix(r);
        let record_range = current_record_range(slot);
        // A fork retained past its fork offset no longer reads through its
        // source: it lets go of it.
        let released = slot.release_origin_below(r);
        if let Some(origin) = &released {
            self.queue_unpin(id, origin);
        }
        self.usage
            .record_retention_advanced(&id.bucket_id, r - current);
        self.shared
            .release(&mut self.gc, &id.bucket_id, &dropped_paths, 0);
        self.remove_hot_bytes(removed_hot);
        StreamResponse::RetentionAdvanced {
            retained_offset: r,
            record_range,
        }
    }

    /// Never deletes anything: answers `SnapshotConflict` for the latest
    /// visible snapshot and `SnapshotNotFound` otherwise (spec 05 §6.3).
    pub fn delete_snapshot(
        &self,
        stream_id: &BucketStreamId,
        snapshot_offset: u64,
    ) -> StreamResponse {
        let Some(slot) = self.registry.get(stream_id) else {
            return not_found(stream_id);
        };
        match slot.visible_snapshot() {
            Some(s) if s.offset == snapshot_offset => StreamResponse::error(
                StreamErrorCode::SnapshotConflict,
                "snapshot is the latest visible snapshot",
            ),
            _ => StreamResponse::error(
                StreamErrorCode::SnapshotNotFound,
                format!("no visible snapshot at offset {snapshot_offset} for stream '{stream_id}'"),
            ),
        }
    }
}

fn conflict(tail: u64, message: String) -> StreamResponse {
    StreamResponse::error_at(StreamErrorCode::SnapshotConflict, tail, message)
}
