//! Id validation (spec 01 §16).
//!
//! Both validators return a human-readable reason on failure. The state
//! machine maps a bucket failure to `InvalidBucketId` and a stream failure to
//! `InvalidStreamId`. All lengths are UTF-8 byte lengths.

use crate::constants::{
    MAX_BUCKET_ID_BYTES, MAX_STREAM_PATH_BYTES, MIN_BUCKET_ID_BYTES, RESERVED_STREAM_ID,
};
use crate::id::{BucketStreamId, is_reserved_affinity_stream_id};

/// Checks a bucket id: 4 to 64 bytes, then only `a`–`z`, `0`–`9`, `_`, `-`.
///
/// The length check runs first, so a 6-byte non-ASCII id fails on its
/// character set, not its length.
pub fn validate_bucket_id(bucket_id: &str) -> Result<(), String> {
    let len = bucket_id.len();
    if !(MIN_BUCKET_ID_BYTES..=MAX_BUCKET_ID_BYTES).contains(&len) {
        return Err(format!(
            "bucket_id must be between {MIN_BUCKET_ID_BYTES} and {MAX_BUCKET_ID_BYTES} bytes, got {len}"
        ));
    }
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-';
    if !bucket_id.bytes().all(allowed) {
        return Err("bucket_id must match [a-z0-9_-]+".to_owned());
    }
    Ok(())
}

/// Checks a stream id (spec 01 §16.2), in this order: the affinity key's
/// segment check, the stream id's segment check, the reserved `streams` name,
/// the names reserved under an affinity path, then the 122-byte combined
/// length `bucket/[affinity/]stream`.
///
/// The bucket id is not validated here; only its length counts.
pub fn validate_stream_id(stream_id: &BucketStreamId) -> Result<(), String> {
    if let Some(key) = &stream_id.affinity_key {
        check_segment("affinity_key", key)?;
    }
    let local = stream_id.stream_id.as_str();
    check_segment("stream_id", local)?;
    if local == RESERVED_STREAM_ID {
        return Err(format!("stream_id '{RESERVED_STREAM_ID}' is reserved"));
    }
    if stream_id.affinity_key.is_some() && is_reserved_affinity_stream_id(local) {
        return Err(format!(
            "stream_id '{local}' is reserved under an affinity path"
        ));
    }
    let affinity_len = stream_id
        .affinity_key
        .as_ref()
        .map_or(0, |key| key.len().saturating_add(1));
    let combined = stream_id
        .bucket_id
        .len()
        .saturating_add(1)
        .saturating_add(affinity_len)
        .saturating_add(local.len());
    if combined > MAX_STREAM_PATH_BYTES {
        return Err(format!(
            "stream path must be at most {MAX_STREAM_PATH_BYTES} bytes, got {combined}"
        ));
    }
    Ok(())
}

/// The per-segment check shared by `stream_id` and `affinity_key`.
fn check_segment(field: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("{field} must not be empty"));
    }
    if value.len() > MAX_STREAM_PATH_BYTES {
        return Err(format!(
            "{field} must be at most {MAX_STREAM_PATH_BYTES} bytes, got {}",
            value.len()
        ));
    }
    if value.contains('/') || value.contains('\0') || value.contains("..") {
        return Err(format!("{field} must not contain '/', NUL or '..'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn err_bucket(id: &str) -> String {
        validate_bucket_id(id).unwrap_err()
    }

    fn err_stream(id: &BucketStreamId) -> String {
        validate_stream_id(id).unwrap_err()
    }

    // --- §16.3 bucket ids ---

    #[test]
    fn bucket_abc_fails_on_length() {
        let msg = err_bucket("abc");
        assert!(msg.contains("between 4 and 64"), "{msg}");
        assert!(msg.contains("got 3"), "{msg}");
    }

    #[test]
    fn bucket_abcd_ok() {
        assert_eq!(validate_bucket_id("abcd"), Ok(()));
    }

    #[test]
    fn bucket_uppercase_fails_on_charset() {
        assert!(err_bucket("ABCD").contains("[a-z0-9_-]"));
    }

    #[test]
    fn bucket_dot_fails_on_charset() {
        assert!(err_bucket("ab.d").contains("[a-z0-9_-]"));
    }

    #[test]
    fn bucket_64_ok_65_fails_on_length() {
        assert_eq!(validate_bucket_id(&"a".repeat(64)), Ok(()));
        let msg = err_bucket(&"a".repeat(65));
        assert!(msg.contains("got 65"), "{msg}");
    }

    #[test]
    fn bucket_underscore_dash_digits_ok() {
        assert_eq!(validate_bucket_id("ab_-09"), Ok(()));
    }

    #[test]
    fn bucket_non_ascii_fails_on_charset_not_length() {
        assert_eq!("ééé".len(), 6);
        assert!(err_bucket("ééé").contains("[a-z0-9_-]"));
    }

    #[test]
    fn bucket_other_rejected_bytes() {
        for id in ["ab/d", "ab d", "abc\0", ""] {
            assert!(validate_bucket_id(id).is_err(), "{id:?}");
        }
    }

    // --- §16.3 stream ids ---

    #[test]
    fn streams_is_reserved() {
        assert!(err_stream(&BucketStreamId::new("bkt1", "streams")).contains("reserved"));
    }

    #[test]
    fn streams_is_reserved_with_affinity_too() {
        let id = BucketStreamId::with_affinity("bkt1", "aff", "streams");
        assert!(err_stream(&id).contains("reserved"));
    }

    #[test]
    fn affinity_id_ok() {
        let id = BucketStreamId::with_affinity("test", "run-42", "queue");
        assert_eq!(validate_stream_id(&id), Ok(()));
    }

    #[test]
    fn affinity_combined_123_fails() {
        let id = BucketStreamId::with_affinity("test", "a".repeat(112), "queue");
        let msg = err_stream(&id);
        assert!(msg.contains("122"), "{msg}");
        assert!(msg.contains("123"), "{msg}");
    }

    #[test]
    fn affinity_reserved_names() {
        for s in [
            "append-batch",
            "attrs",
            "bootstrap",
            "retention",
            "snapshot",
            "$transaction",
        ] {
            let id = BucketStreamId::with_affinity("test", "run-42", s);
            assert!(err_stream(&id).contains("affinity"), "{s}");
        }
    }

    #[test]
    fn affinity_reserved_names_allowed_without_affinity() {
        assert_eq!(
            validate_stream_id(&BucketStreamId::new("test", "snapshot")),
            Ok(())
        );
        assert_eq!(
            validate_stream_id(&BucketStreamId::new("bkt1", "$transaction")),
            Ok(())
        );
    }

    #[test]
    fn double_dot_forbidden() {
        let msg = err_stream(&BucketStreamId::new("bkt1", "a..b"));
        assert!(msg.contains("'..'"), "{msg}");
    }

    #[test]
    fn slash_and_nul_forbidden() {
        assert!(validate_stream_id(&BucketStreamId::new("bkt1", "a/b")).is_err());
        assert!(validate_stream_id(&BucketStreamId::new("bkt1", "a\0b")).is_err());
        assert!(validate_stream_id(&BucketStreamId::with_affinity("bkt1", "x/y", "s")).is_err());
    }

    #[test]
    fn empty_stream_id() {
        let msg = err_stream(&BucketStreamId::new("bkt1", ""));
        assert!(msg.contains("stream_id must not be empty"), "{msg}");
    }

    #[test]
    fn empty_affinity_key() {
        let msg = err_stream(&BucketStreamId::with_affinity("bkt1", "", "x"));
        assert!(msg.contains("affinity_key must not be empty"), "{msg}");
    }

    #[test]
    fn affinity_key_checked_before_stream_id() {
        let msg = err_stream(&BucketStreamId::with_affinity("bkt1", "", ""));
        assert!(msg.starts_with("affinity_key"), "{msg}");
    }

    #[test]
    fn affinity_key_streams_is_fine() {
        let id = BucketStreamId::with_affinity("bkt1", "streams", "x");
        assert_eq!(validate_stream_id(&id), Ok(()));
    }

    #[test]
    fn bucket_not_validated_here() {
        assert_eq!(validate_stream_id(&BucketStreamId::new("BK", "x")), Ok(()));
    }

    #[test]
    fn combined_122_ok_123_fails() {
        let ok = BucketStreamId::new("bkt1", "a".repeat(117));
        assert_eq!(validate_stream_id(&ok), Ok(()));
        let bad = BucketStreamId::new("bkt1", "a".repeat(118));
        let msg = err_stream(&bad);
        assert!(msg.contains("stream path"), "{msg}");
        assert!(msg.contains("123"), "{msg}");
    }

    #[test]
    fn segment_length_checked_before_combined() {
        let msg = err_stream(&BucketStreamId::new("", "x".repeat(123)));
        assert!(msg.starts_with("stream_id must be at most 122"), "{msg}");
        assert!(msg.contains("got 123"), "{msg}");
    }

    #[test]
    fn permissive_characters_allowed() {
        for s in ["A b.c$", "é", "tab\there", "x.y"] {
            assert_eq!(
                validate_stream_id(&BucketStreamId::new("bkt1", s)),
                Ok(()),
                "{s:?}"
            );
        }
    }
}
