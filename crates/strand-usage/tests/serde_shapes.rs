//! Serde JSON shapes of the usage and quota types (spec 01 §12.1, 07 §2.4).
#![allow(clippy::unwrap_used)]

use strand_usage::{BucketQuota, BucketQuotaSnapshot, BucketUsage, BucketUsageSnapshot};

fn sample_usage() -> BucketUsage {
    BucketUsage {
        committed_append_bytes: 1,
        committed_records: 2,
        committed_write_units: 3,
        retained_bytes: 4,
        stream_count: 5,
    }
}

#[test]
fn usage_serializes_in_declaration_order_with_new_name() {
    let json = serde_json::to_string(&sample_usage()).unwrap();
    // Exact text from 01 §12.1.
    assert_eq!(
        json,
        r#"{"committed_append_bytes":1,"committed_records":2,"committed_write_units":3,"retained_bytes":4,"stream_count":5}"#
    );
    insta::assert_snapshot!("usage", json);
}

#[test]
fn usage_round_trips() {
    let json = serde_json::to_string(&sample_usage()).unwrap();
    let back: BucketUsage = serde_json::from_str(&json).unwrap();
    assert_eq!(back, sample_usage());
}

#[test]
fn usage_default_is_all_zero() {
    let json = serde_json::to_string(&BucketUsage::default()).unwrap();
    assert_eq!(
        json,
        r#"{"committed_append_bytes":0,"committed_records":0,"committed_write_units":0,"retained_bytes":0,"stream_count":0}"#
    );
    insta::assert_snapshot!("usage_default", json);
}

#[test]
fn usage_legacy_name_is_read_and_written_under_new_name() {
    let input = r#"{"committed_append_bytes":1,"committed_records":2,"committed_write_units_10kib":3,"retained_bytes":4,"stream_count":5}"#;
    let usage: BucketUsage = serde_json::from_str(input).unwrap();
    assert_eq!(usage, sample_usage());
    assert_eq!(usage.committed_write_units, 3);
    let json = serde_json::to_string(&usage).unwrap();
    assert!(!json.contains("10kib"));
    insta::assert_snapshot!("usage_from_legacy_name", json);
}

#[test]
fn usage_legacy_name_alone_07_edge_case_23() {
    // 07 §10 item 23: `committed_write_units_10kib: 3` decodes to 3.
    let input = r#"{"committed_write_units_10kib":3,"committed_append_bytes":0,"committed_records":0,"retained_bytes":0,"stream_count":0}"#;
    let usage: BucketUsage = serde_json::from_str(input).unwrap();
    assert_eq!(usage.committed_write_units, 3);
}

#[test]
fn usage_without_either_unit_name_reads_zero() {
    let input =
        r#"{"committed_append_bytes":1,"committed_records":2,"retained_bytes":4,"stream_count":5}"#;
    let usage: BucketUsage = serde_json::from_str(input).unwrap();
    assert_eq!(
        usage,
        BucketUsage {
            committed_write_units: 0,
            ..sample_usage()
        }
    );
    insta::assert_snapshot!(
        "usage_without_units",
        serde_json::to_string(&usage).unwrap()
    );
}

#[test]
fn usage_with_both_unit_names_is_a_duplicate_field_error() {
    for input in [
        r#"{"committed_append_bytes":1,"committed_records":2,"committed_write_units":3,"committed_write_units_10kib":3,"retained_bytes":4,"stream_count":5}"#,
        r#"{"committed_append_bytes":1,"committed_records":2,"committed_write_units_10kib":7,"committed_write_units":3,"retained_bytes":4,"stream_count":5}"#,
    ] {
        let err = serde_json::from_str::<BucketUsage>(input).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("duplicate field `committed_write_units`"),
            "{err}"
        );
    }
    let err = serde_json::from_str::<BucketUsage>(
        r#"{"committed_append_bytes":1,"committed_records":2,"committed_write_units":3,"committed_write_units_10kib":3,"retained_bytes":4,"stream_count":5}"#,
    )
    .unwrap_err();
    insta::assert_snapshot!("usage_both_names_error", err.to_string());
}

#[test]
fn usage_requires_the_other_four_fields() {
    let fields = [
        ("committed_append_bytes", 1),
        ("committed_records", 2),
        ("retained_bytes", 4),
        ("stream_count", 5),
    ];
    for (missing, _) in fields {
        let body: Vec<String> = fields
            .iter()
            .filter(|(name, _)| *name != missing)
            .map(|(name, value)| format!("\"{name}\":{value}"))
            .collect();
        let input = format!("{{{}}}", body.join(","));
        let err = serde_json::from_str::<BucketUsage>(&input).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("missing field `{missing}`")),
            "{input}: {err}"
        );
    }
}

#[test]
fn usage_rejects_non_integer_counters_and_ignores_unknown_fields() {
    assert!(
        serde_json::from_str::<BucketUsage>(
            r#"{"committed_append_bytes":1.5,"committed_records":2,"retained_bytes":4,"stream_count":5}"#
        )
        .is_err()
    );
    assert!(
        serde_json::from_str::<BucketUsage>(
            r#"{"committed_append_bytes":"1","committed_records":2,"retained_bytes":4,"stream_count":5}"#
        )
        .is_err()
    );
    assert!(
        serde_json::from_str::<BucketUsage>(
            r#"{"committed_append_bytes":-1,"committed_records":2,"retained_bytes":4,"stream_count":5}"#
        )
        .is_err()
    );
    let usage: BucketUsage = serde_json::from_str(
        r#"{"committed_append_bytes":1,"committed_records":2,"committed_write_units":3,"retained_bytes":4,"stream_count":5,"extra":true}"#,
    )
    .unwrap();
    assert_eq!(usage, sample_usage());
}

#[test]
fn usage_u64_max_round_trips() {
    let usage = BucketUsage {
        committed_append_bytes: u64::MAX,
        committed_records: u64::MAX,
        committed_write_units: u64::MAX,
        retained_bytes: u64::MAX,
        stream_count: u64::MAX,
    };
    let json = serde_json::to_string(&usage).unwrap();
    assert_eq!(
        json,
        r#"{"committed_append_bytes":18446744073709551615,"committed_records":18446744073709551615,"committed_write_units":18446744073709551615,"retained_bytes":18446744073709551615,"stream_count":18446744073709551615}"#
    );
    assert_eq!(serde_json::from_str::<BucketUsage>(&json).unwrap(), usage);
}

#[test]
fn usage_snapshot_shape() {
    let record = BucketUsageSnapshot {
        bucket_id: "b".to_owned(),
        usage: sample_usage(),
    };
    let json = serde_json::to_string(&record).unwrap();
    assert_eq!(
        json,
        r#"{"bucket_id":"b","usage":{"committed_append_bytes":1,"committed_records":2,"committed_write_units":3,"retained_bytes":4,"stream_count":5}}"#
    );
    insta::assert_snapshot!("usage_snapshot", json);
    assert_eq!(
        serde_json::from_str::<BucketUsageSnapshot>(&json).unwrap(),
        record
    );
}

#[test]
fn usage_snapshot_requires_both_fields() {
    assert!(
        serde_json::from_str::<BucketUsageSnapshot>(
            r#"{"usage":{"committed_append_bytes":1,"committed_records":2,"retained_bytes":4,"stream_count":5}}"#
        )
        .is_err()
    );
    assert!(serde_json::from_str::<BucketUsageSnapshot>(r#"{"bucket_id":"b"}"#).is_err());
}

#[test]
fn usage_snapshot_accepts_legacy_name_inside() {
    let record: BucketUsageSnapshot = serde_json::from_str(
        r#"{"bucket_id":"acme","usage":{"committed_append_bytes":0,"committed_records":9,"committed_write_units_10kib":3,"retained_bytes":999,"stream_count":7}}"#,
    )
    .unwrap();
    assert_eq!(record.bucket_id, "acme");
    assert_eq!(record.usage.committed_write_units, 3);
    insta::assert_snapshot!(
        "usage_snapshot_from_legacy_name",
        serde_json::to_string(&record).unwrap()
    );
}

#[test]
fn quota_shapes() {
    let limited = BucketQuota {
        max_streams: Some(1),
        max_retained_bytes: None,
    };
    let json = serde_json::to_string(&limited).unwrap();
    assert_eq!(json, r#"{"max_streams":1,"max_retained_bytes":null}"#);
    insta::assert_snapshot!("quota", json);
    assert_eq!(serde_json::from_str::<BucketQuota>(&json).unwrap(), limited);

    let unlimited = serde_json::to_string(&BucketQuota::default()).unwrap();
    assert_eq!(
        unlimited,
        r#"{"max_streams":null,"max_retained_bytes":null}"#
    );
    insta::assert_snapshot!("quota_unlimited", unlimited);
}

#[test]
fn quota_empty_object_decodes_to_unlimited() {
    let quota: BucketQuota = serde_json::from_str("{}").unwrap();
    assert_eq!(quota, BucketQuota::default());
    assert!(quota.is_unlimited());
    insta::assert_snapshot!(
        "quota_from_empty_object",
        serde_json::to_string(&quota).unwrap()
    );
}

#[test]
fn quota_single_field_decodes_and_other_is_none() {
    let quota: BucketQuota = serde_json::from_str(r#"{"max_streams":4}"#).unwrap();
    assert_eq!(
        quota,
        BucketQuota {
            max_streams: Some(4),
            max_retained_bytes: None
        }
    );
    let quota: BucketQuota = serde_json::from_str(r#"{"max_retained_bytes":7}"#).unwrap();
    assert_eq!(
        quota,
        BucketQuota {
            max_streams: None,
            max_retained_bytes: Some(7)
        }
    );
    let quota: BucketQuota =
        serde_json::from_str(r#"{"max_streams":null,"max_retained_bytes":null}"#).unwrap();
    assert!(quota.is_unlimited());
}

#[test]
fn quota_snapshot_shape() {
    let record = BucketQuotaSnapshot {
        bucket_id: "b".to_owned(),
        quota: BucketQuota {
            max_streams: Some(1),
            max_retained_bytes: None,
        },
    };
    let json = serde_json::to_string(&record).unwrap();
    // Exact text from 01 §12.1.
    assert_eq!(
        json,
        r#"{"bucket_id":"b","quota":{"max_streams":1,"max_retained_bytes":null}}"#
    );
    insta::assert_snapshot!("quota_snapshot", json);
    assert_eq!(
        serde_json::from_str::<BucketQuotaSnapshot>(&json).unwrap(),
        record
    );
}

#[test]
fn quota_snapshot_requires_both_fields_but_quota_may_be_empty() {
    let record: BucketQuotaSnapshot =
        serde_json::from_str(r#"{"bucket_id":"ghost","quota":{}}"#).unwrap();
    assert!(record.quota.is_unlimited());
    insta::assert_snapshot!(
        "quota_snapshot_from_empty_quota",
        serde_json::to_string(&record).unwrap()
    );
    assert!(serde_json::from_str::<BucketQuotaSnapshot>(r#"{"bucket_id":"ghost"}"#).is_err());
    assert!(serde_json::from_str::<BucketQuotaSnapshot>(r#"{"quota":{}}"#).is_err());
}
