//! The reported integrity view of one stream (`StreamIntegritySnapshot`,
//! spec 01 §11.2, semantics spec 02 §5.4).

use serde::{Deserialize, Serialize};

/// Hex digest of the empty setsum: 64 `'0'` characters.
///
/// `evicted_setsum` is always this value in every snapshot strand writes
/// (spec 02 §5.4, quirk §8.9).
pub const EMPTY_SETSUM_HEX: &str =
    "0000000000000000000000000000000000000000000000000000000000000000";

/// The integrity view of one stream, as written in `StreamSnapshotEntry.integrity`
/// and returned by `StreamStateMachine::integrity_snapshot`.
///
/// All fields are required on decode; unknown fields are ignored. There is no
/// per-append list (the JSON has no `records` key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamIntegritySnapshot {
    /// Hex digest of the live setsum. Always equal to `total_setsum` in output.
    pub live_setsum: String,
    /// Hex digest of the evicted setsum. Always [`EMPTY_SETSUM_HEX`] in output.
    pub evicted_setsum: String,
    /// Hex digest of the setsum over every contributing append since creation.
    pub total_setsum: String,
    /// The stream's retained offset (destructive-retention floor).
    pub live_start_offset: u64,
    /// The stream's tail offset (`StreamMetadata.tail_offset`).
    pub tail_offset: u64,
    /// Always equal to `total_records` in output.
    pub live_records: u64,
    /// Always `0` in output.
    pub evicted_records: u64,
    /// Number of contributing appends (one per non-empty append or batch payload).
    pub total_records: u64,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{IntegrityDomain, StreamIntegrity};

    #[test]
    fn json_empty() {
        let snap = StreamIntegrity::new().snapshot(0, 0);
        insta::assert_snapshot!(serde_json::to_string(&snap).unwrap());
    }

    #[test]
    fn json_two_appends_after_retention() {
        // Spec 02 §7.7-2 and §7.7-7: `bench/s`, `abc` then `de`, retained at 3.
        let domain = IntegrityDomain::new("bench", None, "s");
        let mut integrity = StreamIntegrity::new();
        integrity.append_inline(domain, 0, 3, b"abc");
        integrity.append_inline(domain, 3, 5, b"de");
        let snap = integrity.snapshot(3, 5);
        insta::assert_snapshot!(serde_json::to_string(&snap).unwrap());
    }

    #[test]
    fn json_field_order_and_roundtrip() {
        let snap = StreamIntegritySnapshot {
            live_setsum: "a".into(),
            evicted_setsum: "b".into(),
            total_setsum: "c".into(),
            live_start_offset: 1,
            tail_offset: 2,
            live_records: 3,
            evicted_records: 4,
            total_records: 5,
        };
        let json = serde_json::to_string(&snap).unwrap();
        assert_eq!(
            json,
            r#"{"live_setsum":"a","evicted_setsum":"b","total_setsum":"c","live_start_offset":1,"tail_offset":2,"live_records":3,"evicted_records":4,"total_records":5}"#
        );
        let back: StreamIntegritySnapshot = serde_json::from_str(&json).unwrap();
        assert_eq!(back, snap);
    }

    #[test]
    fn json_unknown_fields_ignored_and_every_field_required() {
        let full = r#"{"live_setsum":"a","evicted_setsum":"b","total_setsum":"c","live_start_offset":1,"tail_offset":2,"live_records":3,"evicted_records":4,"total_records":5,"records":[]}"#;
        assert!(serde_json::from_str::<StreamIntegritySnapshot>(full).is_ok());
        for field in [
            "live_setsum",
            "evicted_setsum",
            "total_setsum",
            "live_start_offset",
            "tail_offset",
            "live_records",
            "evicted_records",
            "total_records",
        ] {
            let mut value: serde_json::Value = serde_json::from_str(full).unwrap();
            value.as_object_mut().unwrap().remove(field);
            let err = serde_json::from_value::<StreamIntegritySnapshot>(value).unwrap_err();
            assert!(err.to_string().contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn json_has_no_records_key() {
        let domain = IntegrityDomain::new("b", None, "s");
        let mut integrity = StreamIntegrity::new();
        integrity.append_inline(domain, 0, 1, b"x");
        integrity.append_inline(domain, 1, 2, b"y");
        let value = serde_json::to_value(integrity.snapshot(0, 2)).unwrap();
        let object = value.as_object().unwrap();
        assert_eq!(object.len(), 8);
        assert!(!object.contains_key("records"));
    }
}
