//! strand: a deterministic Durable Streams state machine, wire-compatible
//! with `ursula-stream` 0.5.0-patch1.
//!
//! This facade only re-exports the public API of the layered crates under
//! the reference's names. It holds no logic of its own.
//!
//! ```
//! use strand::{BucketStreamId, StreamCommand, StreamResponse, StreamStateMachine};
//!
//! let mut machine = StreamStateMachine::new();
//! let created = machine.apply(StreamCommand::CreateBucket { bucket_id: "acme".into() });
//! assert_eq!(created, StreamResponse::BucketCreated { bucket_id: "acme".into() });
//! assert!(machine.bucket_exists("acme"));
//! assert!(machine.head(&BucketStreamId::new("acme", "events")).is_none());
//! ```

#![deny(missing_docs)]

// The README's examples run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub use strand_integrity::StreamIntegritySnapshot;
pub use strand_machine::{
    ColdFlushSlices, ForkProbe, HotRead, ListedStream, MachineRestorer, SnapshotTail,
    StreamCommand, StreamErrorCode, StreamErrorContext, StreamResponse, StreamStateMachine,
};
pub use strand_machine::{
    RestoreError, restore_from, restore_from_slice, restore_from_with_limits, write_snapshot,
};
pub use strand_model::{
    AppendStreamInput, BucketStreamId, COLD_INDEX_PAGE_SPAN_BYTES, CORRECTED_MAX_READ_BYTES,
    ColdChunkRef, ColdChunkRefV1, ColdFlushCandidate, ColdGcEntry, ColdGcTarget,
    DEFAULT_PRODUCER_RECEIPT_LIMIT, ExternalPayloadRef, ExternalPayloadRefV1, HotPayloadSegment,
    MachineOptions, MachineProfile, ObjectPayloadRef, ProducerAppendRecord, ProducerReceipt,
    ProducerRequest, ProducerRequestV1, ProducerSnapshot, StreamAttrs, StreamBatchAppend,
    StreamBatchAppendItem, StreamBootstrapPlan, StreamMessageRecord, StreamMetadata, StreamRead,
    StreamReadColdIndexSegment, StreamReadColdSegment, StreamReadObjectSegment, StreamReadPlan,
    StreamReadSegment, StreamStatus, StreamVisibleSnapshot, is_reserved_affinity_stream_id,
    validate_bucket_id, validate_stream_id,
};
pub use strand_records::{
    RecordIndexError, StreamRecordIndex, StreamRecordRange, canonical_json_record_ends,
    is_json_record_content_type,
};
pub use strand_snapshot::{
    CodecError, CollectSink, DEFAULT_MAX_FRAME_LEN, DecodeError, DecodeLimits, ForkOriginSnapshot,
    ForkPinSnapshot, ForkUnpinSnapshot, FrameRef, SharedColdObjectOwnersSnapshot, SnapshotFormat,
    SnapshotSink, SnapshotSummary, SnapshotValidator, StreamForkSnapshot, StreamSnapshot,
    StreamSnapshotEntry, StreamSnapshotError, decode_binary, decode_json, decode_json_slice,
    encode_binary, encode_json, sniff_format, validate_snapshot,
};
pub use strand_usage::{
    BucketQuota, BucketQuotaSnapshot, BucketUsage, BucketUsageSnapshot, COMMITTED_WRITE_UNIT_BYTES,
};
