//! The group snapshot wire types (spec 01 §11.3, spec 07 §2).
//!
//! Fields are declared in wire order; serde writes them in that order. No
//! type denies unknown fields, so extra fields of older or newer versions are
//! ignored on decode.

use serde::{Deserialize, Serialize};
use strand_integrity::StreamIntegritySnapshot;
use strand_model::{
    BucketStreamId, ColdChunkRef, ColdGcEntry, HotPayloadSegment, MachineOptions, ObjectPayloadRef,
    ProducerSnapshot, StreamAttrs, StreamMessageRecord, StreamMetadata, StreamVisibleSnapshot,
};
use strand_records::StreamRecordIndex;
use strand_usage::{BucketQuotaSnapshot, BucketUsageSnapshot};

/// The whole state of one group (one state machine), as written by
/// `snapshot()` and read by `restore()` / `ImportSnapshot` (spec 07 §2.1).
///
/// `buckets` and `streams` are required on decode; every other field
/// defaults to empty / `0` when absent (legacy snapshots, spec 07 §8.1).
/// The default value has every list empty and `next_cold_gc_seq` 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamSnapshot {
    /// Active bucket ids. `snapshot()` writes them sorted ascending.
    pub buckets: Vec<String>,
    /// Erased (purged) bucket ids, fenced against re-creation.
    #[serde(default)]
    pub erased_buckets: Vec<String>,
    /// One entry per live stream.
    pub streams: Vec<StreamSnapshotEntry>,
    /// The cold GC queue, front to back.
    #[serde(default)]
    pub pending_cold_gc: Vec<ColdGcEntry>,
    /// The cold GC queue's next sequence number.
    #[serde(default)]
    pub next_cold_gc_seq: u64,
    /// Owner buckets of shared cold objects.
    #[serde(default)]
    pub shared_cold_object_owners: Vec<SharedColdObjectOwnersSnapshot>,
    /// The usage ledger. Only the monotonic counters are restored; gauges are
    /// recomputed from the streams.
    #[serde(default)]
    pub bucket_usage: Vec<BucketUsageSnapshot>,
    /// Stored quota records.
    #[serde(default)]
    pub bucket_quotas: Vec<BucketQuotaSnapshot>,
    /// The group's machine options; absent (`None`) for the reference
    /// profile, so reference snapshots are byte-identical to the
    /// reference's (see `docs/profiles.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_options: Option<MachineOptions>,
    /// Fork unpins not yet delivered to their sources (a strand extension,
    /// `docs/forks.md`): absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fork_unpins: Vec<ForkUnpinSnapshot>,
    /// The id the group gives its next fork pin: absent while 0 (no fork
    /// ever pinned a stream of the group).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub next_fork_pin: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if signature
fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// The buckets that own one shared cold object (spec 07 §2.2). Both fields
/// are required on decode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedColdObjectOwnersSnapshot {
    /// The shared object's path.
    pub s3_path: String,
    /// Owner bucket ids. `snapshot()` writes them sorted ascending.
    pub bucket_ids: Vec<String>,
}

/// One stream of a [`StreamSnapshot`] (spec 07 §2.3, §3.3).
///
/// Absent on decode: `attrs`, `record_index`, `retained_offset` and
/// `visible_snapshot` give `None`; `cold_frontier_offset` and
/// `cold_index_generation` give `0`. Every other field is required.
/// `None` options are written as `null`, never skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamSnapshotEntry {
    /// The stream's metadata, verbatim.
    pub metadata: StreamMetadata,
    /// The stream's attributes. Restore turns an empty value into `None`.
    #[serde(default)]
    pub attrs: Option<StreamAttrs>,
    /// Start offset of the first hot chunk, or the tail when there is none.
    /// Restore only uses it to synthesize a legacy hot segment.
    pub hot_start_offset: u64,
    /// The bytes of all hot chunks, concatenated in chunk order. JSON
    /// writes an array of numbers (the derived `Vec<u8>` shape); binary
    /// formats write one byte string.
    #[serde(with = "crate::codec::payload_bytes")]
    pub payload: Vec<u8>,
    /// One segment per hot chunk, mapping stream offsets to `payload`
    /// positions. Empty with a non-empty payload means "legacy": one segment
    /// `hot_start_offset..tail` is synthesized.
    pub hot_segments: Vec<HotPayloadSegment>,
    /// The effective cold frontier; restore installs it as the raw frontier.
    #[serde(default)]
    pub cold_frontier_offset: u64,
    /// Always written as 0 and ignored on restore.
    #[serde(default)]
    pub cold_index_generation: u64,
    /// Stored cold chunks (in live state only shared ones).
    pub cold_chunks: Vec<ColdChunkRef>,
    /// Stored external segments (always empty in reference snapshots).
    pub external_segments: Vec<ObjectPayloadRef>,
    /// Message records tiling `[retained, tail)`.
    pub message_records: Vec<StreamMessageRecord>,
    /// The JSON record index, if the stream has one.
    #[serde(default)]
    pub record_index: Option<StreamRecordIndex>,
    /// The stream's integrity setsums.
    pub integrity: StreamIntegritySnapshot,
    /// The retained offset. `None` is legacy: it is derived from the visible
    /// snapshot offset, else 0.
    #[serde(default)]
    pub retained_offset: Option<u64>,
    /// The stream's visible snapshot (checkpoint), if any.
    pub visible_snapshot: Option<StreamVisibleSnapshot>,
    /// Idempotent producer states, sorted by producer id in output.
    pub producer_states: Vec<ProducerSnapshot>,
    /// The raw cold frontier, written only by the corrected profile so that
    /// restore is exact (absent in reference snapshots; restore then uses
    /// `cold_frontier_offset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_raw_frontier_offset: Option<u64>,
    /// The stream's fork state (a strand extension, `docs/forks.md`):
    /// absent for a stream that is neither a fork nor read by one, so
    /// snapshots without forks stay the reference's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<StreamForkSnapshot>,
}

/// A stream's fork state in a snapshot (`docs/forks.md` §5).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamForkSnapshot {
    /// The stream this one is a fork of, when it is a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOriginSnapshot>,
    /// The forks that read through this stream, sorted by fork id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fork_pins: Vec<ForkPinSnapshot>,
    /// Deleted while forks still read through it: kept for them, invisible
    /// to everyone else.
    #[serde(default, skip_serializing_if = "is_false")]
    pub soft_deleted: bool,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if signature
fn is_false(value: &bool) -> bool {
    !*value
}

/// Where a fork branches off (`docs/forks.md` §2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOriginSnapshot {
    /// The source stream (same bucket; any group).
    pub source_stream_id: BucketStreamId,
    /// The fork offset: source bytes below it are the fork's.
    pub fork_offset: u64,
    /// The source's pin this fork holds (an id of the source's group).
    #[serde(default)]
    pub pin: u64,
    /// The sub-offset the fork was created with (0 when none).
    #[serde(default)]
    pub sub_offset: u64,
    /// The first offset the fork inherits (the source chain's first
    /// retained byte when the fork was made).
    #[serde(default)]
    pub inherited_start: u64,
}

/// One fork reading through a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPinSnapshot {
    /// The fork.
    pub fork_stream_id: BucketStreamId,
    /// The pin's id in this group (a fork re-created under the same id
    /// holds a new pin).
    #[serde(default)]
    pub pin: u64,
    /// Its fork offset in this stream.
    pub fork_offset: u64,
}

/// A fork that went away whose source (maybe in another group) still has
/// to drop its pin: the group's outbox, drained by the engine.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ForkUnpinSnapshot {
    /// The source holding the pin.
    pub source_stream_id: BucketStreamId,
    /// The fork that is gone.
    pub fork_stream_id: BucketStreamId,
    /// The pin it held.
    #[serde(default)]
    pub pin: u64,
}

/// The group-level parts of a snapshot that follow its stream entries (in
/// both codecs' order): the GC queue, shared owners, usage and quotas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotTail {
    /// The cold GC queue, front to back.
    pub pending_cold_gc: Vec<ColdGcEntry>,
    /// The queue's next sequence number.
    pub next_cold_gc_seq: u64,
    /// Owner buckets of shared cold objects.
    pub shared_cold_object_owners: Vec<SharedColdObjectOwnersSnapshot>,
    /// Monotonic usage counters per bucket.
    pub bucket_usage: Vec<BucketUsageSnapshot>,
    /// Quota records per bucket.
    pub bucket_quotas: Vec<BucketQuotaSnapshot>,
    /// The group's machine options (`None`: reference profile).
    pub machine_options: Option<MachineOptions>,
    /// Undelivered fork unpins (empty without forks).
    pub fork_unpins: Vec<ForkUnpinSnapshot>,
    /// The group's next fork pin id (0 without forks).
    pub next_fork_pin: u64,
}

impl SnapshotTail {
    /// Stores these parts into `snapshot`.
    pub fn install(self, snapshot: &mut StreamSnapshot) {
        snapshot.pending_cold_gc = self.pending_cold_gc;
        snapshot.next_cold_gc_seq = self.next_cold_gc_seq;
        snapshot.shared_cold_object_owners = self.shared_cold_object_owners;
        snapshot.bucket_usage = self.bucket_usage;
        snapshot.bucket_quotas = self.bucket_quotas;
        snapshot.machine_options = self.machine_options;
        snapshot.fork_unpins = self.fork_unpins;
        snapshot.next_fork_pin = self.next_fork_pin;
    }
}

impl StreamSnapshot {
    /// Splits the snapshot into its bucket lists, its stream entries and its
    /// tail, in the order restore and the codecs consume them.
    pub fn into_parts(
        self,
    ) -> (
        Vec<String>,
        Vec<String>,
        Vec<StreamSnapshotEntry>,
        SnapshotTail,
    ) {
        let StreamSnapshot {
            buckets,
            erased_buckets,
            streams,
            pending_cold_gc,
            next_cold_gc_seq,
            shared_cold_object_owners,
            bucket_usage,
            bucket_quotas,
            machine_options,
            fork_unpins,
            next_fork_pin,
        } = self;
        let tail = SnapshotTail {
            pending_cold_gc,
            next_cold_gc_seq,
            shared_cold_object_owners,
            bucket_usage,
            bucket_quotas,
            machine_options,
            fork_unpins,
            next_fork_pin,
        };
        (buckets, erased_buckets, streams, tail)
    }
}
