//! Structural validation of a snapshot, bucket lists first (spec 07 §5.1)
//! and then one stream entry at a time (§5.3 steps 1–12), in the exact
//! check order of the spec: the first failing check decides the error.

use std::collections::{BTreeMap, BTreeSet};

use strand_integrity::StreamIntegrity;
use strand_model::{BucketStreamId, HotPayloadSegment};

use crate::digest::visible_snapshot_digest;
use crate::error::StreamSnapshotError;
use crate::messages::message_records_tile;
use crate::payload::{PayloadSources, effective_hot_segments, segments_tile_payload};
use crate::wire::{ForkUnpinSnapshot, StreamForkSnapshot, StreamSnapshotEntry};

/// Checks the entries of one snapshot in list order, remembering the bucket
/// sets and the stream ids already accepted.
///
/// Build it with [`SnapshotValidator::new`], then call
/// [`SnapshotValidator::check_entry`] for each entry of `streams` in order.
/// Stop at the first error: that is restore's result. An entry that fails is
/// not remembered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotValidator {
    active: BTreeSet<String>,
    erased: BTreeSet<String>,
    streams: BTreeSet<BucketStreamId>,
    /// Accepted forks: fork → (source, pin, fork offset).
    origins: BTreeMap<BucketStreamId, (BucketStreamId, u64, u64)>,
    /// Accepted pins: (source, fork, pin) → fork offset.
    pins: BTreeMap<(BucketStreamId, BucketStreamId, u64), u64>,
}

/// What restore needs from one accepted entry and must not recompute.
///
/// Everything else of the entry (metadata, attrs, cold state, message
/// records, record index, producers) is installed from the entry itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedEntry {
    /// The stream's retained offset: `retained_offset` if given, else the
    /// visible snapshot offset, else 0 (step 3). Always `<= tail`.
    pub retained_offset: u64,
    /// The hot segments to build the hot buffer from, one chunk per segment
    /// in this order (step 6): the given segments, or the one synthesized
    /// legacy segment. They tile the payload exactly, so chunk `i` holds
    /// `payload[payload_start..payload_end]` of segment `i` (indices are in
    /// bounds) and their byte lengths add up to `payload.len()`.
    pub hot_segments: Vec<HotPayloadSegment>,
    /// The restored integrity state (step 9): total setsum and total record
    /// count of the entry.
    pub integrity: StreamIntegrity,
    /// The digest to store with the visible snapshot (step 12): the entry's
    /// digest when non-empty (never checked), otherwise the one computed by
    /// [`crate::visible_snapshot_digest`]. `None` exactly when the entry has
    /// no visible snapshot.
    pub visible_digest: Option<String>,
}

impl SnapshotValidator {
    /// Checks the bucket lists (spec 07 §5.1): all of `buckets` first
    /// (a repeat is `DuplicateBucket`), then `erased_buckets` in order, where
    /// an id that is active is `ActiveBucketErased` and a repeat is
    /// `DuplicateErasedBucket`. Id formats are not checked.
    ///
    /// # Errors
    ///
    /// The first failing check's error, as above.
    pub fn new(buckets: &[String], erased_buckets: &[String]) -> Result<Self, StreamSnapshotError> {
        let mut active = BTreeSet::new();
        for bucket in buckets {
            if !active.insert(bucket.clone()) {
                return Err(StreamSnapshotError::DuplicateBucket(bucket.clone()));
            }
        }
        let mut erased = BTreeSet::new();
        for bucket in erased_buckets {
            if active.contains(bucket) {
                return Err(StreamSnapshotError::ActiveBucketErased(bucket.clone()));
            }
            if !erased.insert(bucket.clone()) {
                return Err(StreamSnapshotError::DuplicateErasedBucket(bucket.clone()));
            }
        }
        Ok(Self {
            active,
            erased,
            streams: BTreeSet::new(),
            origins: BTreeMap::new(),
            pins: BTreeMap::new(),
        })
    }

    /// The active bucket ids.
    #[must_use]
    pub fn active_buckets(&self) -> &BTreeSet<String> {
        &self.active
    }

    /// The erased bucket ids.
    #[must_use]
    pub fn erased_buckets(&self) -> &BTreeSet<String> {
        &self.erased
    }

    /// The full ids of the entries accepted so far.
    #[must_use]
    pub fn accepted_streams(&self) -> &BTreeSet<BucketStreamId> {
        &self.streams
    }

    /// Runs spec 07 §5.3 steps 1–12 on one entry, in order:
    ///
    /// 1. the bucket is active (`MissingBucket`);
    /// 2. the visible snapshot offset is `<= tail` (`SnapshotOffsetOutOfRange`);
    /// 3. the retained offset is derived;
    /// 4. it is `<= tail` (`SnapshotOffsetOutOfRange` carrying the retained
    ///    offset, a reproduced quirk);
    /// 5. the record index validates against `(retained, tail)`
    ///    (`RecordBoundaryMismatch`);
    /// 6. legacy hot segments are synthesized;
    /// 7. the segments tile the payload and the payload sources cover
    ///    `[retained, tail)` (`PayloadLengthMismatch`);
    /// 8. message records tile `[retained, tail)` (`MessageBoundaryMismatch`);
    /// 9. integrity restores (`IntegrityMismatch`);
    /// 10. the full id was not accepted before (`DuplicateStream`);
    /// 11. producer ids are unique (`DuplicateProducer`, naming the second
    ///     occurrence);
    /// 12. the visible snapshot digest is filled when empty;
    /// 13. (strand extension, only with a `fork` field) the fork state is
    ///     well-formed: a soft-deleted stream has pins
    ///     (`SoftDeletedWithoutForks`), a fork origin names another stream
    ///     of the bucket with `inherited_start <= fork_offset <= retained`
    ///     (`InvalidFork`), pins name other streams of the bucket, sorted,
    ///     at offsets `<= tail` (`InvalidForkPin`).
    ///
    /// On success the id is remembered for step 10 of later entries.
    ///
    /// # Errors
    ///
    /// The first failing check's error, as above.
    pub fn check_entry(
        &mut self,
        entry: &StreamSnapshotEntry,
    ) -> Result<CheckedEntry, StreamSnapshotError> {
        let id = &entry.metadata.stream_id;
        let tail = entry.metadata.tail_offset;

        // Step 1.
        if !self.active.contains(&id.bucket_id) {
            return Err(StreamSnapshotError::MissingBucket(id.clone()));
        }
        // Step 2.
        if let Some(visible) = &entry.visible_snapshot
            && visible.offset > tail
        {
            return Err(StreamSnapshotError::SnapshotOffsetOutOfRange {
                stream_id: id.clone(),
                snapshot_offset: visible.offset,
                tail_offset: tail,
            });
        }
        // Step 3.
        let retained = entry
            .retained_offset
            .or_else(|| {
                entry
                    .visible_snapshot
                    .as_ref()
                    .map(|visible| visible.offset)
            })
            .unwrap_or(0);
        // Step 4.
        if retained > tail {
            return Err(StreamSnapshotError::SnapshotOffsetOutOfRange {
                stream_id: id.clone(),
                snapshot_offset: retained,
                tail_offset: tail,
            });
        }
        // Step 5.
        if let Some(index) = &entry.record_index
            && index.validate(retained, tail).is_err()
        {
            return Err(StreamSnapshotError::RecordBoundaryMismatch {
                stream_id: id.clone(),
            });
        }
        // Step 6.
        let hot_segments = effective_hot_segments(
            &entry.hot_segments,
            entry.payload.len(),
            entry.hot_start_offset,
            tail,
        );
        // Step 7.
        let sources = PayloadSources {
            cold_frontier_offset: entry.cold_frontier_offset,
            cold_chunks: &entry.cold_chunks,
            external_segments: &entry.external_segments,
            hot_segments: &hot_segments,
        };
        if !segments_tile_payload(&hot_segments, entry.payload.len())
            || !sources.cover(retained, tail)
        {
            return Err(StreamSnapshotError::PayloadLengthMismatch {
                stream_id: id.clone(),
                tail_offset: tail,
                payload_len: entry.payload.len(),
            });
        }
        // Step 8.
        if !message_records_tile(&entry.message_records, retained, tail) {
            return Err(StreamSnapshotError::MessageBoundaryMismatch {
                stream_id: id.clone(),
            });
        }
        // Step 9.
        let integrity = StreamIntegrity::restore(&entry.integrity).map_err(|_| {
            StreamSnapshotError::IntegrityMismatch {
                stream_id: id.clone(),
            }
        })?;
        // Step 10.
        if self.streams.contains(id) {
            return Err(StreamSnapshotError::DuplicateStream(id.clone()));
        }
        // Step 11.
        let mut producers = BTreeSet::new();
        for producer in &entry.producer_states {
            if !producers.insert(producer.producer_id.as_str()) {
                return Err(StreamSnapshotError::DuplicateProducer {
                    stream_id: id.clone(),
                    producer_id: producer.producer_id.clone(),
                });
            }
        }
        // Step 12.
        let visible_digest = entry.visible_snapshot.as_ref().map(|visible| {
            if visible.digest.is_empty() {
                visible_snapshot_digest(&visible.content_type, &visible.payload)
            } else {
                visible.digest.clone()
            }
        });

        // Step 13.
        if let Some(fork) = &entry.fork {
            self.check_fork(id, tail, retained, fork)?;
        }

        self.streams.insert(id.clone());
        Ok(CheckedEntry {
            retained_offset: retained,
            hot_segments,
            integrity,
            visible_digest,
        })
    }

    fn check_fork(
        &mut self,
        id: &BucketStreamId,
        tail: u64,
        retained: u64,
        fork: &StreamForkSnapshot,
    ) -> Result<(), StreamSnapshotError> {
        if fork.soft_deleted && fork.fork_pins.is_empty() {
            return Err(StreamSnapshotError::SoftDeletedWithoutForks(id.clone()));
        }
        if let Some(origin) = &fork.forked_from {
            let source = &origin.source_stream_id;
            if source == id
                || source.bucket_id != id.bucket_id
                || origin.inherited_start > origin.fork_offset
                || origin.fork_offset > retained
            {
                return Err(StreamSnapshotError::InvalidFork {
                    stream_id: id.clone(),
                });
            }
        }
        let mut previous: Option<(&BucketStreamId, u64)> = None;
        for pin in &fork.fork_pins {
            let fork_id = &pin.fork_stream_id;
            if fork_id == id
                || fork_id.bucket_id != id.bucket_id
                || pin.fork_offset > tail
                || previous.is_some_and(|p| p >= (fork_id, pin.pin))
            {
                return Err(StreamSnapshotError::InvalidForkPin {
                    stream_id: id.clone(),
                    fork_stream_id: Box::new(fork_id.clone()),
                });
            }
            previous = Some((fork_id, pin.pin));
        }
        if let Some(origin) = &fork.forked_from {
            self.origins.insert(
                id.clone(),
                (
                    origin.source_stream_id.clone(),
                    origin.pin,
                    origin.fork_offset,
                ),
            );
        }
        for pin in &fork.fork_pins {
            self.pins.insert(
                (id.clone(), pin.fork_stream_id.clone(), pin.pin),
                pin.fork_offset,
            );
        }
        Ok(())
    }

    /// The checks across entries, after the last one (strand extension,
    /// `docs/forks.md` §5), given the group's undelivered `unpins`: where a
    /// fork and its source are both in this snapshot, the source holds the
    /// fork's pin at the fork offset, and every pin of a fork in the
    /// snapshot is the fork's own or waits in `unpins` to be dropped
    /// (`ForkPinMismatch`); following fork origins through the snapshot
    /// never comes back to a stream (`ForkCycle`). Forks whose source lives
    /// in another group's snapshot are checked by the engine that owns both.
    ///
    /// # Errors
    ///
    /// The first failing check's error, in fork id order.
    pub fn check_forks(&self, unpins: &[ForkUnpinSnapshot]) -> Result<(), StreamSnapshotError> {
        for (fork, (source, pin, offset)) in &self.origins {
            if self.streams.contains(source)
                && self.pins.get(&(source.clone(), fork.clone(), *pin)) != Some(offset)
            {
                return Err(StreamSnapshotError::ForkPinMismatch {
                    stream_id: fork.clone(),
                    source_stream_id: Box::new(source.clone()),
                });
            }
        }
        for ((source, fork, pin), offset) in &self.pins {
            let own = self.origins.get(fork) == Some(&(source.clone(), *pin, *offset));
            let leaving = unpins.iter().any(|u| {
                u.source_stream_id == *source && u.fork_stream_id == *fork && u.pin == *pin
            });
            if self.streams.contains(fork) && !own && !leaving {
                return Err(StreamSnapshotError::ForkPinMismatch {
                    stream_id: fork.clone(),
                    source_stream_id: Box::new(source.clone()),
                });
            }
        }
        for start in self.origins.keys() {
            let mut seen = BTreeSet::new();
            let mut at = start;
            while let Some((source, _, _)) = self.origins.get(at) {
                if !seen.insert(at) || source == start {
                    return Err(StreamSnapshotError::ForkCycle(start.clone()));
                }
                at = source;
            }
        }
        Ok(())
    }
}
