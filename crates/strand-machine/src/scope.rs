//! Shared checks that map to plain error responses: the stream scope check,
//! and the producer, external-ref and retention-pair validators (spec 03 §2).

use strand_model::{
    BucketStreamId, ExternalPayloadRef, ExternalRefProblem, ProducerRequest, validate_bucket_id,
    validate_external_payload_ref, validate_producer_request, validate_retention_pair,
    validate_stream_id,
};

use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamResponse};

/// `StreamNotFound` for `id` (plain shape).
pub(crate) fn not_found(id: &BucketStreamId) -> StreamResponse {
    StreamResponse::error(
        StreamErrorCode::StreamNotFound,
        format!("stream '{id}' does not exist"),
    )
}

/// Validates an optional producer request (`InvalidProducer`).
pub(crate) fn check_producer(producer: Option<&ProducerRequest>) -> Result<(), StreamResponse> {
    match producer {
        None => Ok(()),
        Some(p) => validate_producer_request(p)
            .map_err(|reason| StreamResponse::error(StreamErrorCode::InvalidProducer, reason)),
    }
}

/// Validates an external payload reference.
pub(crate) fn check_external_ref(payload: &ExternalPayloadRef) -> Result<(), StreamResponse> {
    validate_external_payload_ref(payload).map_err(|problem| {
        let code = match problem {
            ExternalRefProblem::EmptyPayload => StreamErrorCode::EmptyAppend,
            _ => StreamErrorCode::InvalidColdFlush,
        };
        StreamResponse::error(code, problem.to_string())
    })
}

/// Validates the TTL / absolute-expiry pair (`InvalidRetention`).
pub(crate) fn check_retention_pair(
    ttl_seconds: Option<u64>,
    expires_at_ms: Option<u64>,
) -> Result<(), StreamResponse> {
    validate_retention_pair(ttl_seconds, expires_at_ms)
        .map_err(|reason| StreamResponse::error(StreamErrorCode::InvalidRetention, reason))
}

/// Validates a bucket id (`InvalidBucketId`).
pub(crate) fn check_bucket_id(bucket_id: &str) -> Result<(), StreamResponse> {
    validate_bucket_id(bucket_id)
        .map_err(|reason| StreamResponse::error(StreamErrorCode::InvalidBucketId, reason))
}

impl StreamStateMachine {
    /// The stream scope check (spec 03 §2.1): id syntax, then bucket state.
    pub(crate) fn check_scope(&self, id: &BucketStreamId) -> Result<(), StreamResponse> {
        check_bucket_id(&id.bucket_id)?;
        validate_stream_id(id)
            .map_err(|reason| StreamResponse::error(StreamErrorCode::InvalidStreamId, reason))?;
        self.check_bucket_active(&id.bucket_id)
    }

    /// `BucketErased` / `BucketNotFound` unless the bucket is active.
    pub(crate) fn check_bucket_active(&self, bucket_id: &str) -> Result<(), StreamResponse> {
        if self.buckets.contains(bucket_id) {
            Ok(())
        } else if self.erased.contains(bucket_id) {
            Err(StreamResponse::error(
                StreamErrorCode::BucketErased,
                format!("bucket '{bucket_id}' was permanently erased"),
            ))
        } else {
            Err(StreamResponse::error(
                StreamErrorCode::BucketNotFound,
                format!("bucket '{bucket_id}' does not exist"),
            ))
        }
    }
}
