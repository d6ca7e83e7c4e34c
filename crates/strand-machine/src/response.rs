//! `StreamResponse`, its error codes and error contexts (spec 01 §13–§15).

use serde::{Deserialize, Serialize};
use strand_model::{BucketStreamId, ProducerRequest, StreamRecordRange};

/// What a command (or a fallible query) answered. Every variant but
/// [`StreamResponse::Deleted`] is a struct variant; [`StreamResponse::Error`]
/// carries every failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamResponse {
    /// A bucket was created.
    BucketCreated {
        /// The new bucket.
        bucket_id: String,
    },
    /// `CreateBucket` named a bucket that is already active.
    BucketAlreadyExists {
        /// The existing bucket.
        bucket_id: String,
    },
    /// A bucket was deleted.
    BucketDeleted {
        /// The deleted bucket.
        bucket_id: String,
    },
    /// A bucket's quota was set or cleared.
    BucketQuotaSet {
        /// The bucket whose quota changed.
        bucket_id: String,
    },
    /// A stream was created.
    Created {
        /// The new stream.
        stream_id: BucketStreamId,
        /// Its tail after the initial payload.
        next_offset: u64,
        /// Whether it was created closed.
        closed: bool,
    },
    /// An idempotent create matched the existing stream.
    AlreadyExists {
        /// The stream's current tail.
        next_offset: u64,
        /// Whether the stream is closed.
        closed: bool,
        /// The stream's content type.
        content_type: String,
        /// The stream's sliding TTL.
        stream_ttl_seconds: Option<u64>,
        /// The stream's absolute expiry.
        stream_expires_at_ms: Option<u64>,
    },
    /// An append was accepted (or deduplicated).
    Appended {
        /// Where the appended bytes start.
        offset: u64,
        /// The tail after the append.
        next_offset: u64,
        /// Whether the stream is closed afterwards.
        closed: bool,
        /// Whether this was a producer retry answered from its receipt.
        deduplicated: bool,
        /// The producer request echoed back.
        producer: Option<ProducerRequest>,
    },
    /// A stream was closed (or a close was deduplicated).
    Closed {
        /// The stream's tail.
        next_offset: u64,
        /// Whether this was a producer retry answered from its receipt.
        deduplicated: bool,
        /// The producer request echoed back.
        producer: Option<ProducerRequest>,
    },
    /// A stream was deleted.
    Deleted,
    /// A hot prefix was committed to the cold tier.
    ColdFlushed {
        /// The public hot start after the flush.
        hot_start_offset: u64,
    },
    /// Cold chunks were compacted into one object.
    ColdCompacted {
        /// How many chunks were replaced.
        compacted_chunks: u64,
        /// Their total logical length.
        compacted_bytes: u64,
    },
    /// A visible snapshot was published.
    SnapshotPublished {
        /// The snapshot's stream offset.
        snapshot_offset: u64,
        /// Its digest (lowercase hex BLAKE3).
        snapshot_digest: String,
        /// The stream's record range, for JSON streams.
        record_range: Option<StreamRecordRange>,
    },
    /// Retention advanced.
    RetentionAdvanced {
        /// The new retained offset.
        retained_offset: u64,
        /// The stream's record range afterwards, for JSON streams.
        record_range: Option<StreamRecordRange>,
    },
    /// A stream's access time was touched.
    Accessed {
        /// Whether the TTL touch time changed.
        changed: bool,
        /// Whether the stream had expired (and was removed).
        expired: bool,
    },
    /// A stream's attributes were updated.
    AttrsUpdated {
        /// Whether the stored attributes changed.
        changed: bool,
    },
    /// Cold GC entries were acknowledged.
    ColdGcAcked {
        /// How many entries left the queue.
        removed: u64,
    },
    /// A bucket was purged and fenced.
    BucketPurged {
        /// The purged bucket.
        bucket_id: String,
        /// How many streams were removed.
        removed_streams: u64,
        /// Queue entries now pending for this bucket (legacy entries included).
        pending_cold_gc_entries: u64,
    },
    /// A snapshot was imported into an empty group.
    SnapshotImported {
        /// Entries in the imported `buckets` list.
        buckets: u64,
        /// Entries in the imported `streams` list.
        streams: u64,
    },
    /// A fork source was pinned (`PinForkSource`).
    ForkSourcePinned {
        /// The resolved fork offset.
        fork_offset: u64,
        /// The pin's id: the fork holds it until it unpins.
        pin: u64,
        /// The first offset the fork inherits.
        inherited_start: u64,
        /// The source's content type.
        content_type: String,
        /// The source's sliding TTL.
        stream_ttl_seconds: Option<u64>,
        /// The source's absolute expiry.
        stream_expires_at_ms: Option<u64>,
    },
    /// A fork's pin was dropped (`UnpinForkSource`).
    ForkSourceUnpinned {
        /// Whether the pin existed.
        unpinned: bool,
        /// Whether the source, soft-deleted and now without forks, was
        /// removed.
        removed: bool,
    },
    /// Outbox entries were acknowledged (`AckForkUnpins`).
    ForkUnpinsAcked {
        /// Entries still in the outbox.
        remaining: u64,
    },
    /// The command failed.
    Error {
        /// What went wrong.
        code: StreamErrorCode,
        /// A human-readable explanation (not part of the compatibility contract).
        message: String,
        /// The offset a client should resume from, where meaningful.
        next_offset: Option<u64>,
        /// Structured details.
        context: Vec<StreamErrorContext>,
    },
}

/// Why a command failed (spec 01 §14). Declaration order is part of the
/// contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StreamErrorCode {
    /// The bucket id is malformed.
    InvalidBucketId,
    /// The stream id is malformed or reserved.
    InvalidStreamId,
    /// The bucket does not exist.
    BucketNotFound,
    /// The bucket was purged, and its name may never be used again.
    BucketErased,
    /// The bucket still holds streams.
    BucketNotEmpty,
    /// The stream does not exist.
    StreamNotFound,
    /// The requested offset lies below the retained offset.
    StreamGone,
    /// A create conflicts with the existing stream's metadata.
    StreamAlreadyExistsConflict,
    /// An append with a body carried no content type.
    MissingContentType,
    /// The content type differs from the stream's.
    ContentTypeMismatch,
    /// The append carried no bytes.
    EmptyAppend,
    /// The stream is closed.
    StreamClosed,
    /// The stream sequence did not increase.
    StreamSeqConflict,
    /// The producer request is malformed.
    InvalidProducer,
    /// The producer epoch is older than the stored one.
    ProducerEpochStale,
    /// The producer sequence is out of order.
    ProducerSeqConflict,
    /// The TTL settings are invalid.
    InvalidRetention,
    /// The offset lies past the tail.
    OffsetOutOfRange,
    /// A cold-tier operation or reference is invalid.
    InvalidColdFlush,
    /// A snapshot publish or retention request is invalid.
    InvalidSnapshot,
    /// No visible snapshot exists at that offset.
    SnapshotNotFound,
    /// The request conflicts with the visible snapshot.
    SnapshotConflict,
    /// The stream attributes are invalid (too large).
    InvalidStreamAttrs,
    /// JSON record boundaries are invalid.
    InvalidRecordBoundaries,
    /// A record-match precondition failed.
    RecordPreconditionFailed,
    /// The import target group is not empty.
    ImportConflict,
    /// The import payload failed snapshot validation.
    ImportInvalid,
    /// A bucket quota would be exceeded.
    QuotaExceeded,
    /// The stream was deleted while forks still read through it
    /// (`docs/forks.md`): kept for them, gone for everyone else.
    StreamSoftDeleted,
    /// A fork request is invalid: the source is the fork itself or in
    /// another bucket, or the fork offset is not a usable position.
    InvalidFork,
    /// Retention cannot drop bytes that forks still read.
    StreamHasForks,
}

/// Structured details attached to some errors (spec 01 §15).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamErrorContext {
    /// The stream is closed.
    StreamClosed,
    /// A cold flush candidate no longer matches the stream.
    StaleColdFlushCandidate,
    /// The producer epoch is stale.
    ProducerEpochStale {
        /// The stored epoch.
        current_epoch: u64,
    },
    /// The producer sequence is out of order.
    ProducerSeqConflict {
        /// The sequence the machine expected.
        expected_seq: u64,
        /// The sequence it received.
        received_seq: u64,
    },
    /// A record-match precondition saw a different record tail.
    RecordTailMismatch {
        /// The stream's current next record.
        current_record: u64,
    },
}

impl StreamResponse {
    /// An error with no `next_offset` and no context (the "plain" shape).
    #[cold]
    pub fn error(code: StreamErrorCode, message: impl Into<String>) -> Self {
        Self::Error {
            code,
            message: message.into(),
            next_offset: None,
            context: Vec::new(),
        }
    }

    /// An error with a `next_offset` and no context.
    #[cold]
    pub fn error_at(code: StreamErrorCode, next_offset: u64, message: impl Into<String>) -> Self {
        Self::Error {
            code,
            message: message.into(),
            next_offset: Some(next_offset),
            context: Vec::new(),
        }
    }

    /// An error with an optional `next_offset` and the given context.
    #[cold]
    pub fn error_with(
        code: StreamErrorCode,
        next_offset: Option<u64>,
        context: Vec<StreamErrorContext>,
        message: impl Into<String>,
    ) -> Self {
        Self::Error {
            code,
            message: message.into(),
            next_offset,
            context,
        }
    }

    /// True for [`StreamResponse::Error`].
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Error { .. })
    }

    /// The error code, if this is an error.
    pub fn error_code(&self) -> Option<StreamErrorCode> {
        match self {
            Self::Error { code, .. } => Some(*code),
            _ => None,
        }
    }
}
