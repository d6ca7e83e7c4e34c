//! Storage, cold-tier and GC value types (spec 01 §8).

use serde::{Deserialize, Serialize};

use crate::id::BucketStreamId;
use crate::proto::ColdChunkRef;

/// A byte range of a stream served from an object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectPayloadRef {
    /// First logical stream offset covered.
    pub start_offset: u64,
    /// Logical stream offset just past the range.
    pub end_offset: u64,
    /// Object path.
    pub s3_path: String,
    /// Size of the whole object.
    pub object_size: u64,
    /// Byte position of the range inside the object; absent reads as 0.
    #[serde(default)]
    pub object_offset: u64,
}

impl From<&ColdChunkRef> for ObjectPayloadRef {
    /// Copies the offsets, path, object size and object offset; drops
    /// `shared_object` and `payload_digest`.
    fn from(chunk: &ColdChunkRef) -> Self {
        Self {
            start_offset: chunk.start_offset,
            end_offset: chunk.end_offset,
            s3_path: chunk.s3_path.clone(),
            object_size: chunk.object_size,
            object_offset: chunk.object_offset,
        }
    }
}

/// Where one hot chunk's bytes sit in a stream's concatenated hot payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HotPayloadSegment {
    /// First logical stream offset of the chunk.
    pub start_offset: u64,
    /// Logical stream offset just past the chunk.
    pub end_offset: u64,
    /// Start index in the concatenated hot payload.
    pub payload_start: usize,
    /// End index (exclusive) in the concatenated hot payload.
    pub payload_end: usize,
}

/// One entry of the cold GC queue: objects to reclaim once acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColdGcEntry {
    /// Queue sequence number.
    pub seq: u64,
    /// Owning bucket; empty on legacy entries with no known owner.
    pub bucket_id: String,
    /// Earliest wall-clock time (ms) the objects may be reclaimed; 0 means
    /// immediately. Absent reads as 0.
    #[serde(default)]
    pub not_before_ms: u64,
    /// What to reclaim.
    pub target: ColdGcTarget,
}

/// What a [`ColdGcEntry`] reclaims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColdGcTarget {
    /// Everything stored under the stream's cold prefix.
    Stream(BucketStreamId),
    /// Specific object paths.
    Paths(Vec<String>),
}

/// One message boundary: the byte range of one append.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamMessageRecord {
    /// First offset of the message.
    pub start_offset: u64,
    /// Offset just past the message.
    pub end_offset: u64,
}

/// A published checkpoint of a stream's state at some offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamVisibleSnapshot {
    /// Stream offset the snapshot describes.
    pub offset: u64,
    /// Content type of the snapshot payload.
    pub content_type: String,
    /// Snapshot payload bytes (a JSON array of numbers).
    pub payload: Vec<u8>,
    /// Lowercase hex BLAKE3 over `le_u64(len(content_type)) ++ content_type ++
    /// payload`. Absent (legacy) reads as `""`.
    #[serde(default)]
    pub digest: String,
}
