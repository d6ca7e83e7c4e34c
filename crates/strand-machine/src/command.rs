//! `StreamCommand`: the replicated command enum and its `Display` strings
//! (spec 01 §9).

use std::fmt;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use strand_model::{
    BucketStreamId, ColdChunkRef, ExternalPayloadRef, ProducerRequest, StreamAttrs,
};
use strand_snapshot::{ForkUnpinSnapshot, StreamSnapshot};

/// One command of the replicated log. Externally tagged in serde JSON:
/// `{"<Variant>":{<fields in declaration order>}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamCommand {
    /// Create a bucket.
    CreateBucket {
        /// The bucket to create.
        bucket_id: String,
    },
    /// Delete an empty bucket.
    DeleteBucket {
        /// The bucket to delete.
        bucket_id: String,
    },
    /// Create a stream with an inline initial payload.
    CreateStream {
        /// The stream to create.
        stream_id: BucketStreamId,
        /// Its content type (not validated).
        content_type: String,
        /// The initial bytes.
        initial_payload: Bytes,
        /// Create it closed.
        close_after: bool,
        /// The initial stream-sequence token.
        stream_seq: Option<String>,
        /// The creating producer (must be at sequence 0).
        producer: Option<ProducerRequest>,
        /// A sliding TTL in seconds.
        stream_ttl_seconds: Option<u64>,
        /// An absolute expiry in milliseconds.
        stream_expires_at_ms: Option<u64>,
        /// Stream attributes.
        #[serde(default)]
        attrs: Option<StreamAttrs>,
        /// The command's wall-clock time.
        now_ms: u64,
    },
    /// Create a stream whose initial payload lives in an object.
    CreateExternal {
        /// The stream to create.
        stream_id: BucketStreamId,
        /// Its content type (not validated).
        content_type: String,
        /// The object holding the initial bytes.
        initial_payload: ExternalPayloadRef,
        /// JSON record ends relative to the payload start.
        #[serde(default)]
        record_ends: Vec<u64>,
        /// Create it closed.
        close_after: bool,
        /// The initial stream-sequence token.
        stream_seq: Option<String>,
        /// The creating producer (must be at sequence 0).
        producer: Option<ProducerRequest>,
        /// A sliding TTL in seconds.
        stream_ttl_seconds: Option<u64>,
        /// An absolute expiry in milliseconds.
        stream_expires_at_ms: Option<u64>,
        /// Stream attributes.
        #[serde(default)]
        attrs: Option<StreamAttrs>,
        /// The command's wall-clock time.
        now_ms: u64,
    },
    /// Append inline bytes.
    Append {
        /// The target stream.
        stream_id: BucketStreamId,
        /// The payload's content type (required for a non-empty payload).
        content_type: Option<String>,
        /// The bytes to append.
        payload: Bytes,
        /// Close the stream after this append.
        close_after: bool,
        /// A stream-sequence token that must increase.
        stream_seq: Option<String>,
        /// An idempotent producer request.
        producer: Option<ProducerRequest>,
        /// The command's wall-clock time.
        now_ms: u64,
        /// Append only if the stream's next record equals this.
        record_match: Option<u64>,
    },
    /// Append bytes that live in an object.
    AppendExternal {
        /// The target stream.
        stream_id: BucketStreamId,
        /// The payload's content type.
        content_type: Option<String>,
        /// The object holding the bytes.
        payload: ExternalPayloadRef,
        /// JSON record ends relative to the payload start.
        #[serde(default)]
        record_ends: Vec<u64>,
        /// Close the stream after this append.
        close_after: bool,
        /// A stream-sequence token that must increase.
        stream_seq: Option<String>,
        /// An idempotent producer request.
        producer: Option<ProducerRequest>,
        /// The command's wall-clock time.
        now_ms: u64,
        /// Append only if the stream's next record equals this.
        record_match: Option<u64>,
    },
    /// Append several inline payloads as one write.
    AppendBatch {
        /// The target stream.
        stream_id: BucketStreamId,
        /// The payloads' content type.
        content_type: Option<String>,
        /// The payloads, each non-empty.
        payloads: Vec<Bytes>,
        /// An idempotent producer request covering the whole batch.
        producer: Option<ProducerRequest>,
        /// The command's wall-clock time.
        now_ms: u64,
    },
    /// Publish a visible snapshot (checkpoint) of a stream.
    PublishSnapshot {
        /// The target stream.
        stream_id: BucketStreamId,
        /// The stream offset the snapshot describes.
        snapshot_offset: u64,
        /// The snapshot's content type.
        content_type: String,
        /// The snapshot bytes.
        payload: Bytes,
        /// Compare-and-swap precondition on the current snapshot's digest.
        #[serde(default)]
        expected_digest: Option<String>,
        /// The command's wall-clock time.
        now_ms: u64,
    },
    /// Drop the stream's prefix below an offset.
    AdvanceRetention {
        /// The target stream.
        stream_id: BucketStreamId,
        /// The new retained offset.
        retained_offset: u64,
        /// The command's wall-clock time.
        now_ms: u64,
    },
    /// Record an access and optionally renew the sliding TTL.
    TouchStreamAccess {
        /// The target stream.
        stream_id: BucketStreamId,
        /// The command's wall-clock time.
        now_ms: u64,
        /// Renew the sliding TTL.
        renew_ttl: bool,
    },
    /// Replace a stream's attributes.
    UpdateStreamAttrs {
        /// The target stream.
        stream_id: BucketStreamId,
        /// The new attributes (`None` clears them).
        attrs: Option<StreamAttrs>,
        /// The command's wall-clock time.
        now_ms: u64,
    },
    /// Commit a hot prefix to the cold tier.
    FlushCold {
        /// The target stream.
        stream_id: BucketStreamId,
        /// The object now holding the prefix.
        chunk: ColdChunkRef,
    },
    /// Replace a run of cold chunks by one object.
    CompactCold {
        /// The target stream.
        stream_id: BucketStreamId,
        /// The chunks being replaced, in offset order.
        old_chunks: Vec<ColdChunkRef>,
        /// The replacement object.
        replacement: ColdChunkRef,
        /// Earliest time the old objects may be reclaimed.
        gc_not_before_ms: u64,
    },
    /// Close a stream (an empty closing append).
    Close {
        /// The target stream.
        stream_id: BucketStreamId,
        /// A stream-sequence token that must increase.
        stream_seq: Option<String>,
        /// An idempotent producer request.
        producer: Option<ProducerRequest>,
        /// The command's wall-clock time.
        now_ms: u64,
    },
    /// Delete a stream.
    DeleteStream {
        /// The stream to delete.
        stream_id: BucketStreamId,
    },
    /// Remove every stream of a bucket and fence its name forever.
    PurgeBucket {
        /// The bucket to purge.
        bucket_id: String,
    },
    /// Acknowledge cold GC entries up to a sequence number.
    AckColdGc {
        /// The highest acknowledged sequence number.
        up_to_seq: u64,
    },
    /// Replace an empty group's state by a snapshot.
    ImportSnapshot {
        /// The snapshot to import.
        snapshot: Box<StreamSnapshot>,
    },
    /// Set or clear a bucket's quota.
    SetBucketQuota {
        /// The bucket.
        bucket_id: String,
        /// The most streams the bucket may hold in this group.
        max_streams: Option<u64>,
        /// The most retained bytes the bucket may hold in this group.
        max_retained_bytes: Option<u64>,
    },
    /// Pin a stream as the source of a fork (a strand extension,
    /// `docs/forks.md` §3.1): its bytes below the fork offset stay
    /// readable, and retention cannot drop them, until the fork unpins.
    PinForkSource {
        /// The source stream.
        stream_id: BucketStreamId,
        /// The fork that will read through it (same bucket, any group).
        fork_stream_id: BucketStreamId,
        /// The fork offset; `None` is the source's tail.
        fork_offset: Option<u64>,
        /// The command's wall-clock time.
        now_ms: u64,
    },
    /// Create a fork of a pinned source (`docs/forks.md` §3.2): a stream
    /// whose offsets start at the fork offset and whose bytes below it are
    /// read through the source.
    CreateFork {
        /// The fork to create.
        stream_id: BucketStreamId,
        /// Its source (pinned by `PinForkSource` first).
        source_stream_id: BucketStreamId,
        /// The fork offset.
        fork_offset: u64,
        /// Whether the request named the fork offset (an idempotent create
        /// without one matches any offset).
        fork_offset_given: bool,
        /// The pin `PinForkSource` gave out for this fork.
        pin: u64,
        /// The sub-offset the fork was asked for (0: none).
        sub_offset: u64,
        /// The first offset the fork inherits.
        inherited_start: u64,
        /// The JSON record ordinal at the fork offset, for a JSON stream.
        first_record: Option<u64>,
        /// Its content type (the source's).
        content_type: String,
        /// The sub-offset prefix: the fork's first own message.
        prefix: Bytes,
        /// The initial bytes, after the prefix, as a second message.
        initial_payload: Bytes,
        /// Create it closed.
        close_after: bool,
        /// A sliding TTL in seconds.
        stream_ttl_seconds: Option<u64>,
        /// An absolute expiry in milliseconds.
        stream_expires_at_ms: Option<u64>,
        /// Stream attributes.
        #[serde(default)]
        attrs: Option<StreamAttrs>,
        /// The command's wall-clock time.
        now_ms: u64,
    },
    /// Drop a fork's pin on its source (`docs/forks.md` §3.3); a
    /// soft-deleted source without pins left is removed.
    UnpinForkSource {
        /// The source stream.
        stream_id: BucketStreamId,
        /// The fork that went away.
        fork_stream_id: BucketStreamId,
        /// The pin it held.
        pin: u64,
    },
    /// Remove delivered entries from the group's fork-unpin outbox.
    AckForkUnpins {
        /// The delivered entries.
        unpins: Vec<ForkUnpinSnapshot>,
    },
}

impl StreamCommand {
    /// The variant's name, which is also its serde tag (`"CreateBucket"`,
    /// `"Append"`, ...): for logs, metrics and per-kind summaries.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CreateBucket { .. } => "CreateBucket",
            Self::DeleteBucket { .. } => "DeleteBucket",
            Self::CreateStream { .. } => "CreateStream",
            Self::CreateExternal { .. } => "CreateExternal",
            Self::Append { .. } => "Append",
            Self::AppendExternal { .. } => "AppendExternal",
            Self::AppendBatch { .. } => "AppendBatch",
            Self::PublishSnapshot { .. } => "PublishSnapshot",
            Self::AdvanceRetention { .. } => "AdvanceRetention",
            Self::TouchStreamAccess { .. } => "TouchStreamAccess",
            Self::UpdateStreamAttrs { .. } => "UpdateStreamAttrs",
            Self::FlushCold { .. } => "FlushCold",
            Self::CompactCold { .. } => "CompactCold",
            Self::Close { .. } => "Close",
            Self::DeleteStream { .. } => "DeleteStream",
            Self::PurgeBucket { .. } => "PurgeBucket",
            Self::AckColdGc { .. } => "AckColdGc",
            Self::ImportSnapshot { .. } => "ImportSnapshot",
            Self::SetBucketQuota { .. } => "SetBucketQuota",
            Self::PinForkSource { .. } => "PinForkSource",
            Self::CreateFork { .. } => "CreateFork",
            Self::UnpinForkSource { .. } => "UnpinForkSource",
            Self::AckForkUnpins { .. } => "AckForkUnpins",
        }
    }
}

impl fmt::Display for StreamCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CreateBucket { bucket_id } => write!(f, "create_bucket:{bucket_id}"),
            Self::DeleteBucket { bucket_id } => write!(f, "delete_bucket:{bucket_id}"),
            Self::CreateStream { stream_id, .. } => write!(f, "create_stream:{stream_id}"),
            Self::CreateExternal {
                stream_id,
                initial_payload,
                ..
            } => write!(
                f,
                "create_external:{stream_id}:{} bytes",
                initial_payload.payload_len
            ),
            Self::Append {
                stream_id, payload, ..
            } => write!(f, "append:{stream_id}:{} bytes", payload.len()),
            Self::AppendExternal {
                stream_id, payload, ..
            } => write!(
                f,
                "append_external:{stream_id}:{} bytes",
                payload.payload_len
            ),
            Self::AppendBatch {
                stream_id,
                payloads,
                ..
            } => write!(f, "append_batch:{stream_id}:{} items", payloads.len()),
            Self::PublishSnapshot {
                stream_id,
                snapshot_offset,
                payload,
                ..
            } => write!(
                f,
                "publish_snapshot:{stream_id}:{snapshot_offset}:{} bytes",
                payload.len()
            ),
            Self::AdvanceRetention {
                stream_id,
                retained_offset,
                ..
            } => write!(f, "advance_retention:{stream_id}:{retained_offset}"),
            Self::TouchStreamAccess {
                stream_id,
                renew_ttl,
                ..
            } => write!(f, "touch_stream_access:{stream_id}:renew_ttl={renew_ttl}"),
            Self::UpdateStreamAttrs { stream_id, .. } => {
                write!(f, "update_stream_attrs:{stream_id}")
            }
            Self::FlushCold { stream_id, chunk } => write!(
                f,
                "flush_cold:{stream_id}:{}..{}",
                chunk.start_offset, chunk.end_offset
            ),
            Self::CompactCold {
                stream_id,
                old_chunks,
                replacement,
                ..
            } => write!(
                f,
                "compact_cold:{stream_id}:{} chunks:{}..{}",
                old_chunks.len(),
                replacement.start_offset,
                replacement.end_offset
            ),
            Self::Close { stream_id, .. } => write!(f, "close_stream:{stream_id}"),
            Self::DeleteStream { stream_id } => write!(f, "delete_stream:{stream_id}"),
            Self::PurgeBucket { bucket_id } => write!(f, "purge_bucket:{bucket_id}"),
            Self::AckColdGc { up_to_seq } => write!(f, "ack_cold_gc:up_to_seq={up_to_seq}"),
            Self::ImportSnapshot { snapshot } => write!(
                f,
                "import_snapshot:buckets={}:streams={}",
                snapshot.buckets.len(),
                snapshot.streams.len()
            ),
            Self::SetBucketQuota { bucket_id, .. } => write!(f, "set_bucket_quota:{bucket_id}"),
            Self::PinForkSource {
                stream_id,
                fork_stream_id,
                ..
            } => write!(f, "pin_fork_source:{stream_id}:{fork_stream_id}"),
            Self::CreateFork {
                stream_id,
                source_stream_id,
                fork_offset,
                ..
            } => write!(
                f,
                "create_fork:{stream_id}:{source_stream_id}@{fork_offset}"
            ),
            Self::UnpinForkSource {
                stream_id,
                fork_stream_id,
                pin,
            } => write!(f, "unpin_fork_source:{stream_id}:{fork_stream_id}#{pin}"),
            Self::AckForkUnpins { unpins } => write!(f, "ack_fork_unpins:{}", unpins.len()),
        }
    }
}
