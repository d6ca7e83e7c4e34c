//! Serde shapes of the snapshot wire types (spec 01 §11.3, spec 07 §2):
//! field order, defaults, `null` options, required fields.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::full_entry;
use serde_json::{Value, json};
use strand_model::{BucketStreamId, ColdGcEntry, ColdGcTarget};
use strand_snapshot::{
    SharedColdObjectOwnersSnapshot, StreamSnapshot, StreamSnapshotEntry, validate_snapshot,
};
use strand_usage::{BucketQuota, BucketQuotaSnapshot, BucketUsage, BucketUsageSnapshot};

fn full_snapshot() -> StreamSnapshot {
    StreamSnapshot {
        buckets: vec!["acme".into()],
        erased_buckets: vec!["old".into()],
        streams: vec![full_entry()],
        pending_cold_gc: vec![
            ColdGcEntry {
                seq: 4,
                bucket_id: "acme".into(),
                not_before_ms: 1000,
                target: ColdGcTarget::Stream(BucketStreamId::new("acme", "gone")),
            },
            ColdGcEntry {
                seq: 5,
                bucket_id: String::new(),
                not_before_ms: 0,
                target: ColdGcTarget::Paths(vec!["old/x.bin".into()]),
            },
        ],
        next_cold_gc_seq: 6,
        shared_cold_object_owners: vec![SharedColdObjectOwnersSnapshot {
            s3_path: "_packs/p1.bin".into(),
            bucket_ids: vec!["acme".into(), "old".into()],
        }],
        bucket_usage: vec![BucketUsageSnapshot {
            bucket_id: "acme".into(),
            usage: BucketUsage {
                committed_append_bytes: 12,
                committed_records: 3,
                committed_write_units: 1,
                retained_bytes: 12,
                stream_count: 1,
            },
        }],
        bucket_quotas: vec![BucketQuotaSnapshot {
            bucket_id: "acme".into(),
            quota: BucketQuota {
                max_streams: Some(4),
                max_retained_bytes: None,
            },
        }],
        machine_options: None,
        fork_unpins: Vec::new(),
        next_fork_pin: 0,
    }
}

#[test]
fn default_snapshot_json() {
    let text = serde_json::to_string(&StreamSnapshot::default()).unwrap();
    // Spec 01 §11.3.
    assert_eq!(
        text,
        r#"{"buckets":[],"erased_buckets":[],"streams":[],"pending_cold_gc":[],"next_cold_gc_seq":0,"shared_cold_object_owners":[],"bucket_usage":[],"bucket_quotas":[]}"#
    );
    insta::assert_snapshot!(text);
}

#[test]
fn full_snapshot_json() {
    let snap = full_snapshot();
    let text = serde_json::to_string(&snap).unwrap();
    insta::assert_snapshot!(text);
    let back: StreamSnapshot = serde_json::from_str(&text).unwrap();
    assert_eq!(back, snap);
}

#[test]
fn full_snapshot_is_valid() {
    let summary = validate_snapshot(&full_snapshot()).unwrap();
    assert_eq!(summary.streams, 1);
    assert_eq!(summary.erased_buckets, 1);
    assert_eq!(summary.hot_payload_bytes, 3);
    assert_eq!(summary.producers, 1);
    assert_eq!(summary.pending_cold_gc, 2);
}

#[test]
fn shared_owners_default_json() {
    let text = serde_json::to_string(&SharedColdObjectOwnersSnapshot::default()).unwrap();
    insta::assert_snapshot!(text);
}

#[test]
fn none_options_are_written_as_null() {
    let mut entry = full_entry();
    entry.attrs = None;
    entry.record_index = None;
    entry.retained_offset = None;
    entry.visible_snapshot = None;
    let value = serde_json::to_value(&entry).unwrap();
    for field in [
        "attrs",
        "record_index",
        "retained_offset",
        "visible_snapshot",
    ] {
        assert_eq!(value[field], Value::Null, "{field}");
    }
    assert_eq!(value.as_object().unwrap().len(), 15);
}

#[test]
fn top_level_required_and_default_fields() {
    let minimal: StreamSnapshot = serde_json::from_str(r#"{"buckets":[],"streams":[]}"#).unwrap();
    assert_eq!(minimal, StreamSnapshot::default());
    for field in ["buckets", "streams"] {
        let mut value = serde_json::to_value(StreamSnapshot::default()).unwrap();
        value.as_object_mut().unwrap().remove(field);
        let err = serde_json::from_value::<StreamSnapshot>(value).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("missing field `{field}`")),
            "{err}"
        );
    }
}

#[test]
fn entry_required_fields() {
    for field in [
        "metadata",
        "hot_start_offset",
        "payload",
        "hot_segments",
        "cold_chunks",
        "external_segments",
        "message_records",
        "integrity",
        "producer_states",
    ] {
        let mut value = serde_json::to_value(full_entry()).unwrap();
        value.as_object_mut().unwrap().remove(field);
        let err = serde_json::from_value::<StreamSnapshotEntry>(value).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("missing field `{field}`")),
            "{err}"
        );
    }
}

#[test]
fn entry_defaulted_fields() {
    let mut value = serde_json::to_value(full_entry()).unwrap();
    for field in [
        "attrs",
        "cold_frontier_offset",
        "cold_index_generation",
        "record_index",
        "retained_offset",
        "visible_snapshot",
    ] {
        value.as_object_mut().unwrap().remove(field);
    }
    value["unknown_extra"] = json!([1, 2]);
    let entry: StreamSnapshotEntry = serde_json::from_value(value).unwrap();
    let expected = StreamSnapshotEntry {
        attrs: None,
        cold_frontier_offset: 0,
        cold_index_generation: 0,
        record_index: None,
        retained_offset: None,
        visible_snapshot: None,
        ..full_entry()
    };
    assert_eq!(entry, expected);
}

#[test]
fn shared_owner_fields_are_required() {
    for field in ["s3_path", "bucket_ids"] {
        let mut value = json!({"s3_path": "p", "bucket_ids": ["a"]});
        value.as_object_mut().unwrap().remove(field);
        let err = serde_json::from_value::<SharedColdObjectOwnersSnapshot>(value).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("missing field `{field}`")),
            "{err}"
        );
    }
}

#[test]
fn payload_is_an_array_of_numbers() {
    let value = serde_json::to_value(full_entry()).unwrap();
    assert_eq!(value["payload"], json!([120, 121, 122]));
    let mut bad = value;
    bad["payload"] = json!("xyz");
    assert!(serde_json::from_value::<StreamSnapshotEntry>(bad).is_err());
}
