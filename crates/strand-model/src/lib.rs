//! Identifiers, stream metadata and the plain value types that cross strand's
//! wire: producers, cold and external references, GC entries, and the
//! read/plan results.
//!
//! This crate owns the exact serde shapes of those types (spec area 01) and
//! the id and small model validators (spec 01 §16, §17). It knows nothing
//! about how streams change: no record index, no integrity hashing, no usage
//! accounting, no state machine.

#![deny(missing_docs)]

// The README's examples run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod checks;
mod constants;
mod id;
mod producer;
mod profile;
mod proto;
mod read;
mod record_range;
mod storage;
mod stream;
mod validate;

pub use checks::{
    ExternalRefProblem, validate_external_payload_ref, validate_producer_request,
    validate_retention_pair,
};
pub use constants::{
    COLD_INDEX_PAGE_SPAN_BYTES, MAX_BUCKET_ID_BYTES, MAX_JS_SAFE_INTEGER, MAX_STREAM_ATTRS_BYTES,
    MAX_STREAM_PATH_BYTES, MIN_BUCKET_ID_BYTES, RESERVED_AFFINITY_STREAM_IDS, RESERVED_STREAM_ID,
    TTL_EXPIRY_SWEEP_MAX_STREAMS_PER_WRITE,
};
pub use id::{BucketStreamId, is_reserved_affinity_stream_id};
pub use producer::{AppendStreamInput, ProducerAppendRecord, ProducerReceipt, ProducerSnapshot};
pub use profile::{
    CORRECTED_MAX_READ_BYTES, DEFAULT_PRODUCER_RECEIPT_LIMIT, MachineOptions, MachineProfile,
};
pub use proto::{
    ColdChunkRef, ColdChunkRefV1, ExternalPayloadRef, ExternalPayloadRefV1, ProducerRequest,
    ProducerRequestV1,
};
pub use read::{
    ColdFlushCandidate, StreamBatchAppend, StreamBatchAppendItem, StreamBootstrapPlan, StreamRead,
    StreamReadColdIndexSegment, StreamReadColdSegment, StreamReadObjectSegment, StreamReadPlan,
    StreamReadSegment,
};
pub use record_range::StreamRecordRange;
pub use storage::{
    ColdGcEntry, ColdGcTarget, HotPayloadSegment, ObjectPayloadRef, StreamMessageRecord,
    StreamVisibleSnapshot,
};
pub use stream::{
    StreamAttrs, StreamMetadata, StreamStatus, normalize_stream_attrs, validate_stream_attrs_size,
};
pub use validate::{validate_bucket_id, validate_stream_id};
