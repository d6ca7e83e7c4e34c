//! `snapshot()`, `restore()` and `ImportSnapshot` (spec 07 §3, §5, §6).

use bytes::Bytes;
use strand_model::{StreamVisibleSnapshot, normalize_stream_attrs};
use strand_snapshot::{
    SharedColdObjectOwnersSnapshot, SnapshotValidator, StreamSnapshot, StreamSnapshotEntry,
    StreamSnapshotError,
};
use strand_usage::UsageLedger;

use crate::cold::ColdState;
use crate::gc::GcQueue;
use crate::hot::{HotBuffer, HotChunk};
use crate::machine::StreamStateMachine;
use crate::producers::Producers;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::slot::StreamSlot;

fn entry_of(slot: &StreamSlot) -> StreamSnapshotEntry {
    StreamSnapshotEntry {
        metadata: slot.metadata.clone(),
        attrs: slot.attrs.clone(),
        hot_start_offset: slot.hot.public_start(slot.metadata.tail_offset),
        payload: slot.hot.payload(),
        hot_segments: slot.hot.segments(),
        cold_frontier_offset: slot.cold_frontier(),
        cold_index_generation: 0,
        cold_chunks: slot.cold.chunks.clone(),
        external_segments: slot.cold.external.clone(),
        message_records: slot.message_records.clone(),
        record_index: slot.record_index.clone(),
        integrity: slot
            .integrity
            .snapshot(slot.retained_offset, slot.metadata.tail_offset),
        retained_offset: Some(slot.retained_offset),
        visible_snapshot: slot.visible_snapshot.clone(),
        producer_states: slot.producers.snapshot(),
    }
}

impl StreamStateMachine {
    /// The whole group state in the reference's snapshot layout. Pure.
    pub fn snapshot(&self) -> StreamSnapshot {
        let mut slots: Vec<&StreamSlot> = self.registry.slots_in_arena_order().collect();
        // Stable: ties on (bucket, stream) keep arena order, as the reference.
        slots.sort_by(|a, b| {
            (&a.id().bucket_id, &a.id().stream_id).cmp(&(&b.id().bucket_id, &b.id().stream_id))
        });
        StreamSnapshot {
            buckets: self.buckets.iter().cloned().collect(),
            erased_buckets: self.erased.iter().cloned().collect(),
            streams: slots.into_iter().map(entry_of).collect(),
            pending_cold_gc: self.gc.entries().cloned().collect(),
            next_cold_gc_seq: self.gc.next_seq(),
            shared_cold_object_owners: self
                .shared
                .owner_report()
                .into_iter()
                .map(|(s3_path, bucket_ids)| SharedColdObjectOwnersSnapshot {
                    s3_path,
                    bucket_ids,
                })
                .collect(),
            bucket_usage: self.usage.usage_report(),
            bucket_quotas: self.usage.quota_report(),
        }
    }

    /// Builds a machine from a snapshot, validating it first (spec 07 §5).
    pub fn restore(snapshot: StreamSnapshot) -> Result<Self, StreamSnapshotError> {
        let StreamSnapshot {
            buckets,
            erased_buckets,
            streams,
            pending_cold_gc,
            next_cold_gc_seq,
            shared_cold_object_owners,
            bucket_usage,
            bucket_quotas,
        } = snapshot;
        let mut validator = SnapshotValidator::new(&buckets, &erased_buckets)?;
        let mut machine = Self {
            buckets: buckets.into_iter().collect(),
            erased: erased_buckets.into_iter().collect(),
            ..Self::default()
        };
        let mut gauges: Vec<(String, u64)> = Vec::with_capacity(streams.len());
        for entry in streams {
            let checked = validator.check_entry(&entry)?;
            let payload = Bytes::from(entry.payload);
            let hot = HotBuffer::from_chunks(checked.hot_segments.iter().map(|s| HotChunk {
                start: s.start_offset,
                end: s.end_offset,
                bytes: payload.slice(s.payload_start..s.payload_end),
            }));
            let mut producers = Producers::default();
            for state in entry.producer_states {
                producers.insert_restored(state);
            }
            let visible_snapshot = entry.visible_snapshot.map(|v| StreamVisibleSnapshot {
                digest: checked.visible_digest.clone().unwrap_or(v.digest),
                ..v
            });
            let bucket_id = entry.metadata.stream_id.bucket_id.clone();
            let shared_paths: Vec<String> = entry
                .cold_chunks
                .iter()
                .filter(|c| c.shared_object)
                .map(|c| c.s3_path.clone())
                .collect();
            let slot = StreamSlot {
                metadata: entry.metadata,
                attrs: normalize_stream_attrs(entry.attrs),
                hot,
                cold: ColdState {
                    raw_frontier: entry.cold_frontier_offset,
                    chunks: entry.cold_chunks,
                    external: entry.external_segments,
                },
                message_records: entry.message_records,
                record_index: entry.record_index,
                integrity: checked.integrity,
                retained_offset: checked.retained_offset,
                visible_snapshot,
                producers,
            };
            gauges.push((bucket_id.clone(), slot.retained_bytes()));
            machine.hot_bytes = machine.hot_bytes.saturating_add(slot.hot.len());
            machine.insert_slot(slot);
            for path in &shared_paths {
                machine.shared.retain(path, &bucket_id);
            }
        }
        for owners in &shared_cold_object_owners {
            machine
                .shared
                .merge_owners(&owners.s3_path, &owners.bucket_ids);
        }
        machine.gc = GcQueue::restored(pending_cold_gc, next_cold_gc_seq);
        machine.usage = UsageLedger::restore(
            gauges.iter().map(|(b, n)| (b.as_str(), *n)),
            &bucket_usage,
            &bucket_quotas,
        );
        Ok(machine)
    }

    /// `ImportSnapshot`: replaces an empty group's state (spec 07 §6).
    pub(crate) fn import_snapshot(&mut self, snapshot: StreamSnapshot) -> StreamResponse {
        if !self.buckets.is_empty() || !self.erased.is_empty() || self.registry.len() > 0 {
            return StreamResponse::error(
                StreamErrorCode::ImportConflict,
                format!(
                    "group already holds {} bucket(s); import needs an empty group",
                    self.buckets.len()
                ),
            );
        }
        let buckets = u64::try_from(snapshot.buckets.len()).unwrap_or(u64::MAX);
        let streams = u64::try_from(snapshot.streams.len()).unwrap_or(u64::MAX);
        match Self::restore(snapshot) {
            Ok(machine) => {
                *self = machine;
                StreamResponse::SnapshotImported { buckets, streams }
            }
            Err(e) => StreamResponse::error(
                StreamErrorCode::ImportInvalid,
                format!("snapshot import failed validation: {e}"),
            ),
        }
    }
}
