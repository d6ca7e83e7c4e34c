//! Small validators tied to model types (spec 01 §17).
//!
//! Every failure maps to a plain error (no `next_offset`, no context); the
//! doc of each function names the error code its callers use.

use std::fmt;

use crate::constants::MAX_JS_SAFE_INTEGER;
use crate::proto::{ExternalPayloadRef, ProducerRequest};

/// Checks a producer request (spec 01 §17.1), in order: a blank
/// `producer_id` (after Unicode `trim`), an epoch above
/// [`MAX_JS_SAFE_INTEGER`], a sequence above it. Callers map `Err` to
/// `InvalidProducer`; an absent producer is never checked.
pub fn validate_producer_request(producer: &ProducerRequest) -> Result<(), String> {
    if producer.producer_id.trim().is_empty() {
        return Err("producer_id must not be empty".to_owned());
    }
    if producer.producer_epoch > MAX_JS_SAFE_INTEGER {
        return Err(format!(
            "producer_epoch {} exceeds the maximum {MAX_JS_SAFE_INTEGER}",
            producer.producer_epoch
        ));
    }
    if producer.producer_seq > MAX_JS_SAFE_INTEGER {
        return Err(format!(
            "producer_seq {} exceeds the maximum {MAX_JS_SAFE_INTEGER}",
            producer.producer_seq
        ));
    }
    Ok(())
}

/// Why an [`ExternalPayloadRef`] was rejected (spec 01 §17.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExternalRefProblem {
    /// `s3_path` is empty or only whitespace; callers use `InvalidColdFlush`.
    BlankPath,
    /// `payload_len` is 0; callers use `EmptyAppend`.
    EmptyPayload,
    /// `object_size < payload_len`; callers use `InvalidColdFlush`.
    ObjectSmallerThanPayload,
}

impl ExternalRefProblem {
    /// A human-readable reason, usable as the error message.
    pub fn message(self) -> &'static str {
        match self {
            Self::BlankPath => "external payload s3_path must not be empty",
            Self::EmptyPayload => "external payload must not be empty",
            Self::ObjectSmallerThanPayload => {
                "external payload object_size is smaller than payload_len"
            }
        }
    }
}

impl fmt::Display for ExternalRefProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ExternalRefProblem {}

/// Checks an external payload reference (spec 01 §17.2), in order: blank
/// path, zero `payload_len`, `object_size < payload_len`.
pub fn validate_external_payload_ref(
    payload: &ExternalPayloadRef,
) -> Result<(), ExternalRefProblem> {
    if payload.s3_path.trim().is_empty() {
        return Err(ExternalRefProblem::BlankPath);
    }
    if payload.payload_len == 0 {
        return Err(ExternalRefProblem::EmptyPayload);
    }
    if payload.object_size < payload.payload_len {
        return Err(ExternalRefProblem::ObjectSmallerThanPayload);
    }
    Ok(())
}

/// Checks a stream's retention pair (spec 01 §17.3), in order: both set, then
/// a TTL whose milliseconds (`ttl × 1000`) overflow `u64`. Callers map `Err`
/// to `InvalidRetention`.
pub fn validate_retention_pair(
    stream_ttl_seconds: Option<u64>,
    stream_expires_at_ms: Option<u64>,
) -> Result<(), String> {
    if stream_ttl_seconds.is_some() && stream_expires_at_ms.is_some() {
        return Err("stream_ttl_seconds and stream_expires_at_ms cannot both be set".to_owned());
    }
    if let Some(ttl) = stream_ttl_seconds
        && ttl.checked_mul(1000).is_none()
    {
        return Err(format!(
            "stream_ttl_seconds {ttl} is too large: its milliseconds overflow u64"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn producer(id: &str, epoch: u64, seq: u64) -> ProducerRequest {
        ProducerRequest {
            producer_id: id.to_owned(),
            producer_epoch: epoch,
            producer_seq: seq,
        }
    }

    #[test]
    fn producer_ok_at_limits() {
        assert_eq!(
            validate_producer_request(&producer("w", 9_007_199_254_740_991, 9_007_199_254_740_991)),
            Ok(())
        );
    }

    #[test]
    fn producer_blank_id() {
        for id in ["", "  ", "\t\n", "\u{3000}"] {
            let msg = validate_producer_request(&producer(id, 0, 0)).unwrap_err();
            assert!(msg.contains("producer_id"), "{id:?}: {msg}");
        }
    }

    #[test]
    fn producer_epoch_over_limit() {
        let msg = validate_producer_request(&producer("w", 9_007_199_254_740_992, 0)).unwrap_err();
        assert!(msg.contains("9007199254740992"), "{msg}");
        assert!(msg.contains("9007199254740991"), "{msg}");
        assert!(msg.contains("epoch"), "{msg}");
    }

    #[test]
    fn producer_seq_over_limit() {
        let msg = validate_producer_request(&producer("w", 0, u64::MAX)).unwrap_err();
        assert!(msg.contains("producer_seq"), "{msg}");
        assert!(msg.contains(&u64::MAX.to_string()), "{msg}");
    }

    #[test]
    fn producer_check_order_id_then_epoch_then_seq() {
        let msg = validate_producer_request(&producer(" ", u64::MAX, u64::MAX)).unwrap_err();
        assert!(msg.contains("producer_id"), "{msg}");
        let msg = validate_producer_request(&producer("w", u64::MAX, u64::MAX)).unwrap_err();
        assert!(msg.contains("producer_epoch"), "{msg}");
    }

    fn ext(path: &str, payload_len: u64, object_size: u64) -> ExternalPayloadRef {
        ExternalPayloadRef {
            s3_path: path.to_owned(),
            payload_len,
            object_size,
        }
    }

    #[test]
    fn external_ref_checks_in_order() {
        assert_eq!(validate_external_payload_ref(&ext("a/b", 5, 9)), Ok(()));
        assert_eq!(validate_external_payload_ref(&ext("a/b", 5, 5)), Ok(()));
        assert_eq!(
            validate_external_payload_ref(&ext(" ", 0, 0)),
            Err(ExternalRefProblem::BlankPath)
        );
        assert_eq!(
            validate_external_payload_ref(&ext("p", 0, 0)),
            Err(ExternalRefProblem::EmptyPayload)
        );
        assert_eq!(
            validate_external_payload_ref(&ext("p", 5, 4)),
            Err(ExternalRefProblem::ObjectSmallerThanPayload)
        );
    }

    #[test]
    fn external_ref_problem_display_is_message() {
        for problem in [
            ExternalRefProblem::BlankPath,
            ExternalRefProblem::EmptyPayload,
            ExternalRefProblem::ObjectSmallerThanPayload,
        ] {
            assert_eq!(problem.to_string(), problem.message());
            assert!(!problem.message().is_empty());
        }
    }

    #[test]
    fn retention_pair() {
        assert_eq!(validate_retention_pair(None, None), Ok(()));
        assert_eq!(validate_retention_pair(Some(3), None), Ok(()));
        assert_eq!(validate_retention_pair(None, Some(u64::MAX)), Ok(()));
        assert!(validate_retention_pair(Some(1), Some(1)).is_err());
        let max_ok = u64::MAX / 1000;
        assert_eq!(validate_retention_pair(Some(max_ok), None), Ok(()));
        let msg = validate_retention_pair(Some(max_ok + 1), None).unwrap_err();
        assert!(msg.contains(&(max_ok + 1).to_string()), "{msg}");
    }

    #[test]
    fn retention_both_set_checked_before_overflow() {
        let msg = validate_retention_pair(Some(u64::MAX), Some(1)).unwrap_err();
        assert!(msg.contains("both"), "{msg}");
    }
}
