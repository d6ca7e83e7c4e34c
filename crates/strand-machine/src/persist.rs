//! `snapshot()`, `restore()` and `ImportSnapshot` (spec 07 §3, §5, §6).

use bytes::Bytes;
use strand_model::{MachineOptions, StreamVisibleSnapshot, normalize_stream_attrs};
use strand_snapshot::{
    SharedColdObjectOwnersSnapshot, SnapshotTail, SnapshotValidator, StreamSnapshot,
    StreamSnapshotEntry, StreamSnapshotError,
};
use strand_usage::UsageLedger;

use crate::cold::{ColdState, StoredChunk};
use crate::fork::ForkState;
use crate::gc::GcQueue;
use crate::hot::{HotBuffer, HotChunk};
use crate::machine::StreamStateMachine;
use crate::producers::Producers;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::slot::{SlotData, SlotRare, StreamSlot};
use crate::ttl::TtlIndex;

fn entry_of(slot: &StreamSlot, corrected: bool) -> StreamSnapshotEntry {
    // Metadata and setsums as they are; every other field filled by
    // `refill_entry`, the one place that maps a slot to its entry.
    let mut entry = StreamSnapshotEntry {
        metadata: slot.metadata.clone(),
        attrs: None,
        hot_start_offset: 0,
        payload: Vec::new(),
        hot_segments: Vec::new(),
        cold_frontier_offset: 0,
        cold_index_generation: 0,
        cold_chunks: Vec::new(),
        external_segments: Vec::new(),
        message_records: Vec::new(),
        record_index: None,
        integrity: integrity_of(slot),
        retained_offset: None,
        visible_snapshot: None,
        producer_states: Vec::new(),
        cold_raw_frontier_offset: None,
        fork: None,
    };
    refill_fields(slot, corrected, &mut entry);
    entry
}

/// The hot buffer of a restored entry's segments. The validator checked
/// that each segment's offset and byte lengths are equal and that the
/// segments tile the payload, but, as the reference, lets them come
/// unordered, overlap and run past the tail (spec 07 §5, check 15): the
/// buffer takes them in offset order, each byte from the first segment
/// that holds it, none past the tail — the bytes a read can reach.
fn hot_buffer_of(
    segments: &[strand_model::HotPayloadSegment],
    payload: &Bytes,
    tail: u64,
) -> HotBuffer {
    let mut ordered: Vec<&strand_model::HotPayloadSegment> = segments.iter().collect();
    ordered.sort_by_key(|s| s.start_offset);
    let mut covered = 0u64;
    let mut chunks = Vec::with_capacity(ordered.len());
    for s in ordered {
        let start = s.start_offset.max(covered);
        let end = s.end_offset.min(tail);
        if start >= end {
            continue;
        }
        let skip = usize::try_from(start - s.start_offset).unwrap_or(usize::MAX);
        let take = usize::try_from(end - start).unwrap_or(usize::MAX);
        let Some(from) = s.payload_start.checked_add(skip) else {
            continue;
        };
        let Some(to) = from.checked_add(take).filter(|to| *to <= s.payload_end) else {
            continue;
        };
        chunks.push(HotChunk {
            start,
            bytes: payload.slice(from..to),
        });
        covered = end;
    }
    HotBuffer::from_chunks(chunks)
}

/// The stream's integrity setsums as its snapshot entry holds them.
fn integrity_of(slot: &StreamSlot) -> strand_integrity::StreamIntegritySnapshot {
    slot.integrity()
        .snapshot(slot.retained_offset(), slot.metadata.tail_offset)
}

/// Overwrites `entry` with `slot`'s snapshot entry, the same value as
/// `*entry = entry_of(slot, corrected)`, reusing the strings and vectors
/// `entry` already holds (the binary snapshot writer refills one entry
/// per stream, so similar streams allocate almost nothing).
fn refill_entry(slot: &StreamSlot, corrected: bool, entry: &mut StreamSnapshotEntry) {
    refill_metadata(&slot.metadata, &mut entry.metadata);
    entry.integrity = integrity_of(slot);
    refill_fields(slot, corrected, entry);
}

/// Every field of `slot`'s entry but the metadata and the setsums,
/// written into `entry`, keeping its vectors' capacity.
fn refill_fields(slot: &StreamSlot, corrected: bool, entry: &mut StreamSnapshotEntry) {
    // Destructured so that a new entry field fails to compile here.
    let StreamSnapshotEntry {
        metadata: _,
        attrs,
        hot_start_offset,
        payload,
        hot_segments,
        cold_frontier_offset,
        cold_index_generation,
        cold_chunks,
        external_segments,
        message_records,
        record_index,
        integrity: _,
        retained_offset,
        visible_snapshot,
        producer_states,
        cold_raw_frontier_offset,
        fork,
    } = entry;
    *attrs = slot.attrs().cloned();
    *hot_start_offset = slot.hot().public_start(slot.metadata.tail_offset);
    slot.hot().payload_into(payload);
    slot.hot().segments_into(hot_segments);
    *cold_frontier_offset = slot.cold_frontier();
    *cold_index_generation = 0;
    refill_chunks(cold_chunks, slot.cold().chunks());
    external_segments.clone_from_slice_or_extend(slot.cold().external());
    message_records.clone_from_slice_or_extend(slot.message_records());
    *record_index = slot.record_index.as_deref().cloned();
    *retained_offset = Some(slot.retained_offset());
    *visible_snapshot = slot.visible_snapshot().cloned();
    slot.producers().snapshot_into(producer_states);
    // Corrected profile: the raw frontier too, so restore is exact.
    *cold_raw_frontier_offset = corrected.then_some(slot.cold().raw_frontier);
    *fork = slot.fork().map(ForkState::to_snapshot);
}

/// `to.clone_from(from)` field by field, so the strings keep their
/// capacity (a derived `clone_from` would allocate new ones).
fn refill_metadata(from: &strand_model::StreamMetadata, to: &mut strand_model::StreamMetadata) {
    let strand_model::StreamMetadata {
        stream_id,
        content_type,
        status,
        tail_offset,
        last_stream_seq,
        stream_ttl_seconds,
        stream_expires_at_ms,
        created_at_ms,
        last_ttl_touch_at_ms,
    } = from;
    to.stream_id.bucket_id.clone_from(&stream_id.bucket_id);
    to.stream_id.stream_id.clone_from(&stream_id.stream_id);
    to.stream_id
        .affinity_key
        .clone_from(&stream_id.affinity_key);
    to.content_type.clone_from(content_type);
    to.status = *status;
    to.tail_offset = *tail_offset;
    to.last_stream_seq.clone_from(last_stream_seq);
    to.stream_ttl_seconds = *stream_ttl_seconds;
    to.stream_expires_at_ms = *stream_expires_at_ms;
    to.created_at_ms = *created_at_ms;
    to.last_ttl_touch_at_ms = *last_ttl_touch_at_ms;
}

/// `clear` + `extend_from_slice`: a vector overwritten with a slice's
/// clones, keeping its capacity.
trait Refill<T: Clone> {
    fn clone_from_slice_or_extend(&mut self, from: &[T]);
}

impl<T: Clone> Refill<T> for Vec<T> {
    fn clone_from_slice_or_extend(&mut self, from: &[T]) {
        self.clear();
        self.extend_from_slice(from);
    }
}

/// `out` holds `chunks` in the reference's form, reusing its entries'
/// strings.
fn refill_chunks(out: &mut Vec<strand_model::ColdChunkRef>, chunks: &[StoredChunk]) {
    out.truncate(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        match out.get_mut(i) {
            Some(entry) => chunk.write_into(entry),
            None => out.push(chunk.to_ref()),
        }
    }
}

/// A stream's restored cold state. The raw frontier is the written
/// `cold_raw_frontier_offset` (corrected snapshots) when it gives back the
/// validated effective frontier, else the effective frontier itself (the
/// reference rule, spec 07 §5.3).
fn restored_cold(
    effective: u64,
    raw: Option<u64>,
    retained: u64,
    chunks: Vec<strand_model::ColdChunkRef>,
    external: Vec<strand_model::ObjectPayloadRef>,
) -> ColdState {
    let mut cold = ColdState::restored(raw.unwrap_or(effective), chunks, external);
    if raw.is_some() && cold.frontier(retained) != effective {
        cold.raw_frontier = effective;
    }
    cold
}

impl StreamStateMachine {
    /// The whole group state in the reference's snapshot layout. Pure.
    pub fn snapshot(&self) -> StreamSnapshot {
        StreamSnapshot {
            streams: self.snapshot_entries().collect(),
            ..self.snapshot_without_streams()
        }
    }

    /// Builds a machine from a snapshot, validating it first (spec 07 §5).
    pub fn restore(snapshot: StreamSnapshot) -> Result<Self, StreamSnapshotError> {
        let (buckets, erased_buckets, streams, tail) = snapshot.into_parts();
        let mut restorer = MachineRestorer::new(buckets, erased_buckets)?;
        for entry in streams {
            restorer.push_entry(entry)?;
        }
        restorer.finish(tail)
    }

    /// The snapshot's stream entries, built one at a time in snapshot order
    /// (for streaming encoders that must not hold them all).
    pub fn snapshot_entries(&self) -> impl Iterator<Item = StreamSnapshotEntry> + '_ {
        let corrected = self.corrected();
        self.snapshot_slots()
            .into_iter()
            .map(move |slot| entry_of(slot, corrected))
    }

    /// The filler the reusing snapshot encoders take: each call writes the
    /// next stream's snapshot entry, in snapshot order, into the one entry
    /// they reuse (see [`refill_entry`]), or answers `false` at the end.
    pub(crate) fn snapshot_entry_filler(
        &self,
    ) -> impl FnMut(&mut Option<StreamSnapshotEntry>) -> bool + '_ {
        let corrected = self.corrected();
        let mut slots = self.snapshot_slots().into_iter();
        move |entry| match slots.next() {
            None => false,
            Some(slot) => {
                match entry {
                    Some(entry) => refill_entry(slot, corrected, entry),
                    None => *entry = Some(entry_of(slot, corrected)),
                }
                true
            }
        }
    }

    /// Everything of [`StreamStateMachine::snapshot`] except the stream
    /// entries (`streams` is empty).
    pub fn snapshot_without_streams(&self) -> StreamSnapshot {
        StreamSnapshot {
            buckets: self.buckets.iter().cloned().collect(),
            erased_buckets: self.erased.iter().cloned().collect(),
            streams: Vec::new(),
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
            machine_options: self.options.to_snapshot(),
            fork_unpins: self.fork_unpins.iter().cloned().collect(),
            next_fork_pin: self.next_fork_pin,
        }
    }

    /// Live slots in snapshot order: (bucket, stream), ties in arena order
    /// (reference) or by affinity key, `None` first (corrected: restore
    /// keeps that order, unlike the arena's).
    fn snapshot_slots(&self) -> Vec<&StreamSlot> {
        let mut slots: Vec<&StreamSlot> = self.registry.slots_in_arena_order().collect();
        if self.corrected() {
            slots.sort_by(|a, b| a.id().cmp(b.id()));
        } else {
            slots.sort_by(|a, b| {
                (&a.id().bucket_id, &a.id().stream_id).cmp(&(&b.id().bucket_id, &b.id().stream_id))
            });
        }
        slots
    }

    /// Installs `options` on a freshly restored machine, rebuilding the TTL
    /// index when its tie-break changes.
    pub(crate) fn install_options(&mut self, options: MachineOptions) {
        let rebuild = options.is_corrected() != self.corrected();
        self.options = MachineOptions {
            producer_receipt_limit: options.producer_receipt_limit.max(1),
            ..options
        };
        if rebuild {
            let mut ttl = TtlIndex::new(options.is_corrected());
            for (key, slot) in self.registry.keyed_slots() {
                ttl.push(&slot.metadata, key);
            }
            self.ttl = ttl;
        }
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
            Ok(mut machine) => {
                // The group keeps its own profile.
                machine.install_options(self.options);
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

/// Restores a machine incrementally, one stream entry at a time, with the
/// same checks in the same order as [`StreamStateMachine::restore`]. Lets a
/// streaming decoder hold only one entry beyond the machine itself.
#[derive(Debug)]
pub struct MachineRestorer {
    validator: SnapshotValidator,
    machine: StreamStateMachine,
    gauges: Vec<(String, u64)>,
}

impl MachineRestorer {
    /// Starts a restore with the snapshot's bucket lists (spec 07 §5.1).
    pub fn new(
        buckets: Vec<String>,
        erased_buckets: Vec<String>,
    ) -> Result<Self, StreamSnapshotError> {
        let validator = SnapshotValidator::new(&buckets, &erased_buckets)?;
        Ok(Self {
            validator,
            machine: StreamStateMachine {
                buckets: buckets.into_iter().collect(),
                erased: erased_buckets.into_iter().collect(),
                ..StreamStateMachine::default()
            },
            gauges: Vec::new(),
        })
    }

    /// Checks and installs the next stream entry (spec 07 §5.3).
    pub fn push_entry(&mut self, entry: StreamSnapshotEntry) -> Result<(), StreamSnapshotError> {
        let checked = self.validator.check_entry(&entry)?;
        let payload = Bytes::from(entry.payload);
        let hot = hot_buffer_of(&checked.hot_segments, &payload, entry.metadata.tail_offset);
        let mut producers = Producers::default();
        for state in entry.producer_states {
            producers.insert_restored(state);
        }
        let visible_snapshot = entry.visible_snapshot.map(|v| {
            Box::new(StreamVisibleSnapshot {
                digest: checked.visible_digest.clone().unwrap_or(v.digest),
                ..v
            })
        });
        let bucket_id = entry.metadata.stream_id.bucket_id.clone();
        let mut cold = restored_cold(
            entry.cold_frontier_offset,
            entry.cold_raw_frontier_offset,
            checked.retained_offset,
            entry.cold_chunks,
            entry.external_segments,
        );
        cold.retain_shared(&mut self.machine.shared, &bucket_id);
        let slot = StreamSlot::new(
            entry.metadata,
            entry.record_index,
            SlotData {
                hot,
                cold,
                message_records: entry.message_records,
                integrity: checked.integrity,
                retained_offset: checked.retained_offset,
                producers,
            },
            SlotRare {
                attrs: normalize_stream_attrs(entry.attrs).map(Box::new),
                visible_snapshot,
                fork: entry.fork.and_then(ForkState::from_snapshot),
            },
        );
        let m = &mut self.machine;
        if slot.soft_deleted() {
            m.soft_deleted_streams += 1;
        }
        m.add_hot_bytes(slot.hot().len());
        self.gauges.push((bucket_id, slot.retained_bytes()));
        m.insert_slot(slot);
        Ok(())
    }

    /// Installs the group-level parts and returns the machine (spec 07
    /// §5.4). Only the fork checks across entries (`docs/forks.md` §5) can
    /// fail, and only for snapshots with forks.
    pub fn finish(self, tail: SnapshotTail) -> Result<StreamStateMachine, StreamSnapshotError> {
        self.validator.check_forks(&tail.fork_unpins)?;
        let mut machine = self.machine;
        machine.fork_unpins = tail.fork_unpins.into_iter().collect();
        machine.next_fork_pin = tail.next_fork_pin;
        for owners in &tail.shared_cold_object_owners {
            machine
                .shared
                .merge_owners(&owners.s3_path, &owners.bucket_ids);
        }
        machine.gc = GcQueue::restored(tail.pending_cold_gc, tail.next_cold_gc_seq);
        machine.usage = UsageLedger::restore(
            self.gauges.iter().map(|(b, n)| (b.as_str(), *n)),
            &tail.bucket_usage,
            &tail.bucket_quotas,
        );
        machine.install_options(MachineOptions::from_snapshot(tail.machine_options));
        machine.debug_check_invariants();
        Ok(machine)
    }
}
