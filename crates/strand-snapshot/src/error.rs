//! `StreamSnapshotError` (spec 01 §11.4, spec 07 §4).

use strand_model::BucketStreamId;

/// Why a snapshot was rejected by restore / `ImportSnapshot`.
///
/// The `Display` texts are part of the contract (spec 07 §4). A
/// [`BucketStreamId`] prints as `bucket/stream` or `bucket/affinity/stream`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamSnapshotError {
    /// A bucket id appears twice in `buckets`.
    #[error("snapshot contains duplicate bucket '{0}'")]
    DuplicateBucket(String),
    /// A bucket id appears twice in `erased_buckets`.
    #[error("snapshot contains duplicate erased bucket '{0}'")]
    DuplicateErasedBucket(String),
    /// A bucket id is listed in both `buckets` and `erased_buckets`.
    #[error("snapshot bucket '{0}' is both active and erased")]
    ActiveBucketErased(String),
    /// Two entries have the same full stream id (affinity key included).
    #[error("snapshot contains duplicate stream '{0}'")]
    DuplicateStream(BucketStreamId),
    /// One entry lists a producer id twice.
    #[error("snapshot stream '{stream_id}' contains duplicate producer '{producer_id}'")]
    DuplicateProducer {
        /// The stream.
        stream_id: BucketStreamId,
        /// The repeated producer id.
        producer_id: String,
    },
    /// A stream's bucket is not an active bucket of the snapshot.
    #[error("snapshot stream '{0}' references a missing bucket")]
    MissingBucket(BucketStreamId),
    /// Hot segments do not tile the payload, a cold chunk or external ref is
    /// invalid, or the payload sources leave a gap in `[retained, tail)`.
    #[error(
        "snapshot stream '{stream_id}' tail offset {tail_offset} does not match payload length {payload_len}"
    )]
    PayloadLengthMismatch {
        /// The stream.
        stream_id: BucketStreamId,
        /// `metadata.tail_offset`.
        tail_offset: u64,
        /// Length of the entry's `payload`.
        payload_len: usize,
    },
    /// Message records do not tile `[retained, tail)`.
    #[error("snapshot stream '{stream_id}' has inconsistent message boundaries")]
    MessageBoundaryMismatch {
        /// The stream.
        stream_id: BucketStreamId,
    },
    /// The record index fails validation against `(retained, tail)`.
    #[error("snapshot stream '{stream_id}' has inconsistent record boundaries")]
    RecordBoundaryMismatch {
        /// The stream.
        stream_id: BucketStreamId,
    },
    /// A setsum does not parse or `live + evicted != total`.
    #[error("snapshot stream '{stream_id}' has inconsistent integrity setsums")]
    IntegrityMismatch {
        /// The stream.
        stream_id: BucketStreamId,
    },
    /// The visible snapshot offset is beyond the tail, or (quirk, spec 07
    /// §5.3 step 4) the retained offset is; `snapshot_offset` then holds the
    /// retained offset.
    #[error(
        "snapshot stream '{stream_id}' visible snapshot offset {snapshot_offset} is beyond tail offset {tail_offset}"
    )]
    SnapshotOffsetOutOfRange {
        /// The stream.
        stream_id: BucketStreamId,
        /// The visible snapshot offset, or the retained offset.
        snapshot_offset: u64,
        /// `metadata.tail_offset`.
        tail_offset: u64,
    },
    /// A soft-deleted stream has no fork pinning it (`docs/forks.md` §5).
    #[error("snapshot stream '{0}' is soft-deleted but no fork reads it")]
    SoftDeletedWithoutForks(BucketStreamId),
    /// A fork origin names the stream itself or another bucket, or its
    /// offsets are out of order (`inherited_start <= fork_offset <=
    /// retained`).
    #[error("snapshot stream '{stream_id}' has an invalid fork origin")]
    InvalidFork {
        /// The fork.
        stream_id: BucketStreamId,
    },
    /// A pin names the stream itself or another bucket, is listed twice or
    /// out of order, or lies beyond the tail.
    #[error("snapshot stream '{stream_id}' has an invalid pin for fork '{fork_stream_id}'")]
    InvalidForkPin {
        /// The pinned source.
        stream_id: BucketStreamId,
        /// The fork the pin names.
        fork_stream_id: Box<BucketStreamId>,
    },
    /// A fork and its source are both in the snapshot, but the source does
    /// not pin the fork at its fork offset (or a pin names a fork of
    /// another source).
    #[error(
        "snapshot fork '{stream_id}' and its source '{source_stream_id}' disagree about their pin"
    )]
    ForkPinMismatch {
        /// The fork.
        stream_id: BucketStreamId,
        /// Its source.
        source_stream_id: Box<BucketStreamId>,
    },
    /// Following fork origins inside the snapshot comes back to a stream.
    #[error("snapshot fork '{0}' is its own ancestor")]
    ForkCycle(BucketStreamId),
}
