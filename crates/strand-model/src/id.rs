//! [`BucketStreamId`], the identity of a stream (spec 01 §4).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::constants::RESERVED_AFFINITY_STREAM_IDS;

/// Identity of a stream: its bucket, its local stream id and an optional
/// affinity key.
///
/// JSON: `{"bucket_id":"bkt1","stream_id":"s1"}`, plus
/// `"affinity_key":"aff"` when the key is present. A missing or `null`
/// `affinity_key` reads as `None`.
///
/// Equality, hashing and ordering use all three fields; `None` and `Some("")`
/// are different keys. The derived ordering compares `bucket_id`, then
/// `stream_id`, then `affinity_key` (`None` first); it exists for strand's
/// deterministic iteration and is not the reference's snapshot sort order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BucketStreamId {
    /// The bucket that owns the stream.
    pub bucket_id: String,
    /// The stream's local id inside its bucket (and affinity path).
    pub stream_id: String,
    /// Optional affinity key, a path segment between bucket and stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_key: Option<String>,
}

impl BucketStreamId {
    /// Builds an id without an affinity key.
    pub fn new(bucket_id: impl Into<String>, stream_id: impl Into<String>) -> Self {
        Self {
            bucket_id: bucket_id.into(),
            stream_id: stream_id.into(),
            affinity_key: None,
        }
    }

    /// Builds an id with an affinity key. Note the argument order: the
    /// affinity key is the **second** argument, the stream id the third.
    pub fn with_affinity(
        bucket_id: impl Into<String>,
        affinity_key: impl Into<String>,
        stream_id: impl Into<String>,
    ) -> Self {
        Self {
            bucket_id: bucket_id.into(),
            stream_id: stream_id.into(),
            affinity_key: Some(affinity_key.into()),
        }
    }
}

impl fmt::Display for BucketStreamId {
    /// `bucket/stream`, or `bucket/affinity/stream`, joined without escaping.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.affinity_key {
            Some(key) => write!(f, "{}/{}/{}", self.bucket_id, key, self.stream_id),
            None => write!(f, "{}/{}", self.bucket_id, self.stream_id),
        }
    }
}

/// True for exactly the six local stream ids reserved under an affinity path:
/// `$transaction`, `append-batch`, `attrs`, `bootstrap`, `retention`,
/// `snapshot` (exact, case-sensitive comparison).
pub fn is_reserved_affinity_stream_id(stream_id: &str) -> bool {
    RESERVED_AFFINITY_STREAM_IDS.contains(&stream_id)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn constructors_place_fields() {
        let plain = BucketStreamId::new("bkt1", "s1");
        assert_eq!(plain.bucket_id, "bkt1");
        assert_eq!(plain.stream_id, "s1");
        assert_eq!(plain.affinity_key, None);
        let aff = BucketStreamId::with_affinity("bkt1", "aff", "s1");
        assert_eq!(aff.stream_id, "s1");
        assert_eq!(aff.affinity_key.as_deref(), Some("aff"));
    }

    #[test]
    fn display_forms() {
        assert_eq!(BucketStreamId::new("bkt1", "s1").to_string(), "bkt1/s1");
        assert_eq!(
            BucketStreamId::with_affinity("bkt1", "aff", "s1").to_string(),
            "bkt1/aff/s1"
        );
        assert_eq!(BucketStreamId::new("a/b", "c").to_string(), "a/b/c");
    }

    #[test]
    fn none_and_empty_affinity_differ() {
        assert_ne!(
            BucketStreamId::new("b", "s"),
            BucketStreamId::with_affinity("b", "", "s")
        );
    }

    #[test]
    fn ordering_is_bucket_then_stream_then_affinity_none_first() {
        let mut ids = vec![
            BucketStreamId::with_affinity("b", "a", "s"),
            BucketStreamId::new("b", "t"),
            BucketStreamId::new("b", "s"),
            BucketStreamId::new("a", "z"),
        ];
        ids.sort();
        assert_eq!(
            ids,
            vec![
                BucketStreamId::new("a", "z"),
                BucketStreamId::new("b", "s"),
                BucketStreamId::with_affinity("b", "a", "s"),
                BucketStreamId::new("b", "t"),
            ]
        );
    }

    #[test]
    fn reserved_affinity_names() {
        for name in [
            "$transaction",
            "append-batch",
            "attrs",
            "bootstrap",
            "retention",
            "snapshot",
        ] {
            assert!(is_reserved_affinity_stream_id(name), "{name}");
        }
        for name in ["streams", "Attrs", "snapshot ", "", "transaction"] {
            assert!(!is_reserved_affinity_stream_id(name), "{name}");
        }
    }
}
