//! The three proto-derived wire structs and their aliases (spec 01 §5).
//!
//! Protobuf encoding is not part of strand; only the serde JSON shape matters.

use serde::{Deserialize, Serialize};

/// Identifies an idempotent producer write: who, which epoch, which sequence.
///
/// JSON: `{"producer_id":"w","producer_epoch":1,"producer_seq":2}`. Every
/// field is required on input.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerRequestV1 {
    /// The producer's id; must not be blank.
    pub producer_id: String,
    /// The producer's epoch; a higher epoch fences older ones.
    pub producer_epoch: u64,
    /// The write's sequence number within the epoch.
    pub producer_seq: u64,
}

/// A payload that already lives in object storage, appended by reference.
///
/// JSON: `{"s3_path":"a/b","payload_len":5,"object_size":9}`. Every field is
/// required on input.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalPayloadRefV1 {
    /// Object path; must not be blank.
    pub s3_path: String,
    /// Number of payload bytes the reference contributes to the stream.
    pub payload_len: u64,
    /// Size of the whole object; at least `payload_len`.
    pub object_size: u64,
}

/// A slice of a stream flushed to an object in the cold tier.
///
/// The serde default sits on the container, so every field may be absent on
/// input (`{}` is the all-default chunk). Output always has all seven fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ColdChunkRefV1 {
    /// First logical stream offset covered by the slice.
    pub start_offset: u64,
    /// Logical stream offset just past the slice.
    pub end_offset: u64,
    /// Object path.
    pub s3_path: String,
    /// Size of the whole object.
    pub object_size: u64,
    /// Byte position of this slice inside the physical object.
    pub object_offset: u64,
    /// True when the object may hold slices of several streams.
    pub shared_object: bool,
    /// Lowercase hex BLAKE3 of the slice; empty on legacy refs.
    pub payload_digest: String,
}

/// The producer request type used throughout strand.
pub type ProducerRequest = ProducerRequestV1;

/// The external payload reference type used throughout strand.
pub type ExternalPayloadRef = ExternalPayloadRefV1;

/// The cold chunk reference type used throughout strand.
pub type ColdChunkRef = ColdChunkRefV1;
