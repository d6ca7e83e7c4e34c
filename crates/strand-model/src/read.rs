//! Query and planning result types (spec 01 §10; meaning in spec 06, 05, 04).
//!
//! The reference has no serde on these; strand adds plain derives so traces can
//! record them.

use serde::{Deserialize, Serialize};

use crate::id::BucketStreamId;
use crate::proto::ColdChunkRef;
use crate::record_range::StreamRecordRange;
use crate::storage::{ObjectPayloadRef, StreamMessageRecord, StreamVisibleSnapshot};

/// The result of `read`: the bytes of `[offset, next_offset)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRead {
    /// Requested start offset.
    pub offset: u64,
    /// Offset just past the returned bytes.
    pub next_offset: u64,
    /// The stream's content type.
    pub content_type: String,
    /// The bytes read.
    pub payload: Vec<u8>,
    /// True when `next_offset` is the stream's tail.
    pub up_to_date: bool,
    /// True when the stream is closed.
    pub closed: bool,
}

/// The result of `read_plan`: where each piece of `[offset, next_offset)` lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReadPlan {
    /// Requested start offset.
    pub offset: u64,
    /// Planned end offset.
    pub next_offset: u64,
    /// The stream's content type.
    pub content_type: String,
    /// Segments sorted by start offset.
    pub segments: Vec<StreamReadSegment>,
    /// True when `next_offset` is the stream's tail.
    pub up_to_date: bool,
    /// True when the stream is closed.
    pub closed: bool,
    /// Retained record range; always `None` in the reference's plans.
    pub retained_record_range: Option<StreamRecordRange>,
    /// Record range of the plan; always `None` in the reference's plans.
    pub record_range: Option<StreamRecordRange>,
}

/// A range served from the cold index, within one index page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReadColdIndexSegment {
    /// Cold-index generation (always 0 in the reference).
    pub generation: u64,
    /// Index page: `read_start_offset / COLD_INDEX_PAGE_SPAN_BYTES`.
    pub page_id: u64,
    /// First stream offset to read.
    pub read_start_offset: u64,
    /// Number of bytes to read.
    pub len: usize,
}

/// A range served from a stored object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReadObjectSegment {
    /// The object holding the range.
    pub object: ObjectPayloadRef,
    /// First stream offset to read.
    pub read_start_offset: u64,
    /// Number of bytes to read.
    pub len: usize,
}

/// A range served from a cold chunk. Exported for compatibility, but never
/// built by any strand API (a reference quirk).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReadColdSegment {
    /// The chunk holding the range.
    pub chunk: ColdChunkRef,
    /// First stream offset to read.
    pub read_start_offset: u64,
    /// Number of bytes to read.
    pub len: usize,
}

/// One piece of a read plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamReadSegment {
    /// Served from the cold index.
    ColdIndex(StreamReadColdIndexSegment),
    /// Served from a stored object.
    Object(StreamReadObjectSegment),
    /// Hot bytes, inline.
    Hot(Vec<u8>),
}

/// The result of `bootstrap_plan`: the latest snapshot and the messages after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamBootstrapPlan {
    /// The latest visible snapshot, if any.
    pub snapshot: Option<StreamVisibleSnapshot>,
    /// Message ranges after the snapshot.
    pub updates: Vec<StreamMessageRecord>,
    /// The stream's tail offset.
    pub next_offset: u64,
    /// The stream's content type.
    pub content_type: String,
    /// True when the plan reaches the tail.
    pub up_to_date: bool,
    /// True when the stream is closed.
    pub closed: bool,
}

/// A planned cold flush: hot bytes `[start_offset, end_offset)` of one stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColdFlushCandidate {
    /// The stream to flush.
    pub stream_id: BucketStreamId,
    /// First offset to flush.
    pub start_offset: u64,
    /// Offset just past the flushed bytes.
    pub end_offset: u64,
    /// The bytes to flush.
    pub payload: Vec<u8>,
    /// Lowercase hex BLAKE3 of `payload` (64 characters).
    pub payload_digest: String,
}

/// The result of a batch append.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamBatchAppend {
    /// One entry per batch item, in order.
    pub items: Vec<StreamBatchAppendItem>,
    /// True when the whole batch was a producer retry.
    pub deduplicated: bool,
}

/// The outcome of one batch item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamBatchAppendItem {
    /// Offset where the item starts.
    pub offset: u64,
    /// Offset just past the item.
    pub next_offset: u64,
    /// Whether the stream is closed after the item.
    pub closed: bool,
    /// Whether the item was a producer retry.
    pub deduplicated: bool,
}
