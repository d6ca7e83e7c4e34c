//! Stream status, metadata and attributes (spec 01 §6).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::constants::MAX_STREAM_ATTRS_BYTES;
use crate::id::BucketStreamId;

/// Whether a stream still accepts appends. JSON: `"Open"` / `"Closed"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamStatus {
    /// The stream accepts appends.
    Open,
    /// The stream was closed; appends fail with `StreamClosed`.
    Closed,
}

/// The head of a stream: identity, content type, status, length and TTL.
///
/// `None` options are written as `null`, never skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamMetadata {
    /// The stream's identity.
    pub stream_id: BucketStreamId,
    /// Content type fixed at creation.
    pub content_type: String,
    /// Open or closed.
    pub status: StreamStatus,
    /// Logical length: offset of the next byte to be appended. Never goes down.
    pub tail_offset: u64,
    /// Last accepted stream-sequence token.
    pub last_stream_seq: Option<String>,
    /// Sliding TTL in seconds; exclusive with `stream_expires_at_ms`.
    pub stream_ttl_seconds: Option<u64>,
    /// Absolute expiry instant in milliseconds.
    pub stream_expires_at_ms: Option<u64>,
    /// `now_ms` of the creating command.
    pub created_at_ms: u64,
    /// `now_ms` at creation, moved forward by TTL renewal.
    pub last_ttl_touch_at_ms: u64,
}

/// User-visible stream attributes: an optional title and free-form metadata.
///
/// JSON leaves out a `None` title and an empty metadata map, so the default
/// value is `{}`. Metadata keys are written in ascending byte order at every
/// level (serde_json's sorted map).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamAttrs {
    /// Optional title. `Some("")` counts as a title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Free-form JSON metadata.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl StreamAttrs {
    /// True exactly when there is no title and no metadata entry.
    pub fn is_empty(&self) -> bool {
        self.title.is_none() && self.metadata.is_empty()
    }

    /// Byte length of the compact serde_json encoding of these attrs, the
    /// measure the size limit applies to.
    ///
    /// Encoding a `StreamAttrs` cannot fail; if it ever did, the length is
    /// reported as `usize::MAX` so that the size check rejects it, as the
    /// reference does.
    pub fn encoded_len(&self) -> usize {
        serde_json::to_vec(self).map_or(usize::MAX, |bytes| bytes.len())
    }

    /// Checks the encoded size against [`MAX_STREAM_ATTRS_BYTES`] (inclusive).
    /// Callers map `Err` to `InvalidStreamAttrs`.
    pub fn check_encoded_size(&self) -> Result<(), String> {
        let len = self.encoded_len();
        if len > MAX_STREAM_ATTRS_BYTES {
            return Err(format!(
                "stream attrs encode to {len} bytes, more than the {MAX_STREAM_ATTRS_BYTES}-byte limit"
            ));
        }
        Ok(())
    }
}

/// Normalizes optional attrs: `Some(empty)` becomes `None`; anything else is
/// returned unchanged. Every caller applies this before storing or comparing.
pub fn normalize_stream_attrs(attrs: Option<StreamAttrs>) -> Option<StreamAttrs> {
    attrs.filter(|attrs| !attrs.is_empty())
}

/// The size check as callers run it (spec 01 §6.3): on the normalized value,
/// so `None` and empty attrs always pass. Callers map `Err` to
/// `InvalidStreamAttrs`.
pub fn validate_stream_attrs_size(attrs: Option<&StreamAttrs>) -> Result<(), String> {
    match attrs {
        Some(attrs) if !attrs.is_empty() => attrs.check_encoded_size(),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn titled(title: &str) -> StreamAttrs {
        StreamAttrs {
            title: Some(title.to_owned()),
            metadata: Map::new(),
        }
    }

    #[test]
    fn is_empty_rules() {
        assert!(StreamAttrs::default().is_empty());
        assert!(!titled("").is_empty());
        let mut meta = Map::new();
        meta.insert("k".to_owned(), Value::Null);
        assert!(
            !StreamAttrs {
                title: None,
                metadata: meta
            }
            .is_empty()
        );
    }

    #[test]
    fn normalization() {
        assert_eq!(normalize_stream_attrs(None), None);
        assert_eq!(normalize_stream_attrs(Some(StreamAttrs::default())), None);
        assert_eq!(normalize_stream_attrs(Some(titled(""))), Some(titled("")));
    }

    #[test]
    fn limit_title_16372_is_exactly_16384_and_accepted() {
        let attrs = titled(&"x".repeat(16372));
        assert_eq!(attrs.encoded_len(), 16384);
        assert_eq!(attrs.check_encoded_size(), Ok(()));
        assert_eq!(validate_stream_attrs_size(Some(&attrs)), Ok(()));
    }

    #[test]
    fn limit_title_16373_is_16385_and_rejected() {
        let attrs = titled(&"x".repeat(16373));
        assert_eq!(attrs.encoded_len(), 16385);
        let msg = attrs.check_encoded_size().unwrap_err();
        assert!(msg.contains("16385"), "{msg}");
        assert!(msg.contains("16384"), "{msg}");
        assert!(validate_stream_attrs_size(Some(&attrs)).is_err());
    }

    #[test]
    fn escapes_count_at_encoded_width() {
        let attrs = titled("é\n/\u{1}");
        assert_eq!(
            serde_json::to_string(&attrs).unwrap(),
            "{\"title\":\"é\\n/\\u0001\"}"
        );
        assert_eq!(attrs.encoded_len(), 23);
    }

    #[test]
    fn none_and_empty_always_pass() {
        assert_eq!(validate_stream_attrs_size(None), Ok(()));
        assert_eq!(
            validate_stream_attrs_size(Some(&StreamAttrs::default())),
            Ok(())
        );
    }

    #[test]
    fn metadata_equality_ignores_insertion_order_but_not_number_kind() {
        let a: StreamAttrs = serde_json::from_str(r#"{"metadata":{"a":1,"b":2}}"#).unwrap();
        let b: StreamAttrs = serde_json::from_str(r#"{"metadata":{"b":2,"a":1}}"#).unwrap();
        assert_eq!(a, b);
        let c: StreamAttrs = serde_json::from_str(r#"{"metadata":{"a":1.0,"b":2}}"#).unwrap();
        assert_ne!(a, c);
    }
}
