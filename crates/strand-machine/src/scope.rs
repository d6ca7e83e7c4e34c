//! Shared checks that map to plain error responses: the stream scope check,
//! and the producer, external-ref and retention-pair validators (spec 03 §2).

use strand_model::{
    BucketStreamId, ExternalPayloadRef, ExternalRefProblem, MAX_BUCKET_ID_BYTES,
    MAX_JS_SAFE_INTEGER, MAX_STREAM_PATH_BYTES, MIN_BUCKET_ID_BYTES, ProducerRequest,
    RESERVED_STREAM_ID, validate_bucket_id, validate_external_payload_ref,
    validate_producer_request, validate_retention_pair, validate_stream_id,
};

use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamResponse};

/// `StreamNotFound` for `id` (plain shape).
#[cold]
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
        // The usual request: an id starting with a visible ASCII character
        // is not blank, and both numbers are in range.
        Some(p)
            if p.producer_id
                .as_bytes()
                .first()
                .is_some_and(u8::is_ascii_graphic)
                && p.producer_epoch <= MAX_JS_SAFE_INTEGER
                && p.producer_seq <= MAX_JS_SAFE_INTEGER =>
        {
            Ok(())
        }
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

/// A one-pass check that accepts only ids both validators accept (spec 01
/// §16): no affinity key, a bucket id of 4–64 bytes of `[a-z0-9_-]`, a
/// stream id that is not empty, not `streams`, has no `/`, NUL or `..`, and
/// a path `bucket/stream` of at most 122 bytes. Anything else (false)
/// goes through the validators, which find the error and its message.
fn plainly_valid(id: &BucketStreamId) -> bool {
    let bucket = id.bucket_id.as_bytes();
    let stream = id.stream_id.as_bytes();
    if id.affinity_key.is_some()
        || !(MIN_BUCKET_ID_BYTES..=MAX_BUCKET_ID_BYTES).contains(&bucket.len())
        || stream.is_empty()
        || bucket.len() + 1 + stream.len() > MAX_STREAM_PATH_BYTES
        || id.stream_id == RESERVED_STREAM_ID
    {
        return false;
    }
    let bucket_ok = bucket
        .iter()
        .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    let mut previous_dot = false;
    let stream_ok = stream.iter().all(|&b| {
        let dot = b == b'.';
        let ok = b != b'/' && b != 0 && !(dot && previous_dot);
        previous_dot = dot;
        ok
    });
    bucket_ok && stream_ok
}

impl StreamStateMachine {
    /// The stream scope check (spec 03 §2.1): id syntax, then bucket state.
    pub(crate) fn check_scope(&self, id: &BucketStreamId) -> Result<(), StreamResponse> {
        if !plainly_valid(id) {
            check_bucket_id(&id.bucket_id)?;
            validate_stream_id(id).map_err(|reason| {
                StreamResponse::error(StreamErrorCode::InvalidStreamId, reason)
            })?;
        }
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use strand_model::{BucketStreamId, validate_bucket_id, validate_stream_id};

    use super::plainly_valid;

    fn both_validators_accept(id: &BucketStreamId) -> bool {
        validate_bucket_id(&id.bucket_id).is_ok() && validate_stream_id(id).is_ok()
    }

    #[test]
    fn known_ids() {
        for (bucket, stream, plain) in [
            ("bench", "s-000", true),
            ("ab_-09", "a.b.c", true),
            ("abc", "s", false),
            ("ABCD", "s", false),
            ("bench", "", false),
            ("bench", "streams", false),
            ("bench", "a/b", false),
            ("bench", "a..b", false),
            ("bench", "a\0b", false),
            ("bench", &"s".repeat(116), true),
            ("bench", &"s".repeat(117), false),
        ] {
            let id = BucketStreamId::new(bucket, stream);
            assert_eq!(plainly_valid(&id), plain, "{bucket}/{stream}");
            assert_eq!(both_validators_accept(&id), plain, "{bucket}/{stream}");
        }
        let keyed = BucketStreamId {
            affinity_key: Some("k".to_owned()),
            ..BucketStreamId::new("bench", "s")
        };
        assert!(!plainly_valid(&keyed));
    }

    /// The fast path of `check_producer` accepts exactly what the
    /// validator accepts.
    #[test]
    fn producer_check_agrees_with_the_validator() {
        use strand_model::{MAX_JS_SAFE_INTEGER, ProducerRequest, validate_producer_request};
        for id in [
            "writer", "w", " w", "\tw", "", " ", "\u{a0}", "\u{a0}x", "é", "-", "~x",
        ] {
            for n in [0, 1, MAX_JS_SAFE_INTEGER, MAX_JS_SAFE_INTEGER + 1, u64::MAX] {
                for (epoch, seq) in [(n, 0), (0, n), (n, n)] {
                    let p = ProducerRequest {
                        producer_id: id.to_owned(),
                        producer_epoch: epoch,
                        producer_seq: seq,
                    };
                    assert_eq!(
                        super::check_producer(Some(&p)).is_ok(),
                        validate_producer_request(&p).is_ok(),
                        "{p:?}"
                    );
                }
            }
        }
    }

    proptest! {
        /// Never accepts an id a validator rejects (and, without an
        /// affinity key, accepts every id both accept).
        #[test]
        fn agrees_with_the_validators(
            bucket in "[a-z0-9_\\-A.]{2,8}|[a-z]{60,70}",
            stream in "[a-z0-9./\\x00é-]{0,12}|s{100,125}|streams",
        ) {
            let id = BucketStreamId::new(bucket, stream);
            prop_assert_eq!(plainly_valid(&id), both_validators_accept(&id));
        }
    }
}
