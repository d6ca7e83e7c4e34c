//! Rebuilding the ledger on restore/import (spec 07 §5.4 steps 18–19, §8,
//! §9 quirks 9–11, §10 items 1, 19, 20).
#![allow(clippy::unwrap_used)]

use strand_usage::{
    BucketQuota, BucketQuotaSnapshot, BucketUsage, BucketUsageSnapshot, QuotaLimit, UsageLedger,
};

fn usage_record(bucket_id: &str, usage: BucketUsage) -> BucketUsageSnapshot {
    BucketUsageSnapshot {
        bucket_id: bucket_id.to_owned(),
        usage,
    }
}

fn quota_record(
    bucket_id: &str,
    max_streams: Option<u64>,
    max_bytes: Option<u64>,
) -> BucketQuotaSnapshot {
    BucketQuotaSnapshot {
        bucket_id: bucket_id.to_owned(),
        quota: BucketQuota {
            max_streams,
            max_retained_bytes: max_bytes,
        },
    }
}

#[test]
fn example_c_legacy_names_ignored_gauges_unlimited_quota() {
    // 07 §8.4, with the usage/quota lists copied from the spec's JSON.
    let usage: Vec<BucketUsageSnapshot> = serde_json::from_str(
        r#"[{"bucket_id": "acme", "usage": {"committed_append_bytes": 0, "committed_records": 9,
             "committed_write_units_10kib": 3, "retained_bytes": 999, "stream_count": 7}}]"#,
    )
    .unwrap();
    let quotas: Vec<BucketQuotaSnapshot> = serde_json::from_str(
        r#"[{"bucket_id": "acme", "quota": {"max_streams": null, "max_retained_bytes": null}},
            {"bucket_id": "ghost", "quota": {"max_streams": 4}}]"#,
    )
    .unwrap();
    // One stream acme/tiered, tail 12, retained 0.
    let ledger = UsageLedger::restore([("acme", 12)], &usage, &quotas);
    assert_eq!(
        ledger.usage("acme"),
        Some(&BucketUsage {
            committed_append_bytes: 12,
            committed_records: 9,
            committed_write_units: 3,
            retained_bytes: 12,
            stream_count: 1,
        })
    );
    assert_eq!(ledger.quota("acme"), None);
    assert_eq!(
        ledger.quota("ghost"),
        Some(&BucketQuota {
            max_streams: Some(4),
            max_retained_bytes: None
        })
    );
    insta::assert_snapshot!(
        "restore_example_c_usage",
        serde_json::to_string(&ledger.usage_report()).unwrap()
    );
    insta::assert_snapshot!(
        "restore_example_c_quotas",
        serde_json::to_string(&ledger.quota_report()).unwrap()
    );
}

#[test]
fn example_a_and_b_without_usage_records() {
    // 07 §8.2: tail 5, retained 0, no bucket_usage → {5, 0, 0, 5, 1}.
    let ledger = UsageLedger::restore([("acme", 5)], &[], &[]);
    assert_eq!(
        ledger.usage("acme"),
        Some(&BucketUsage {
            committed_append_bytes: 5,
            committed_records: 0,
            committed_write_units: 0,
            retained_bytes: 5,
            stream_count: 1,
        })
    );
    assert!(ledger.quota_report().is_empty());
    // 07 §8.3: tail 5, retained 3 → retained 2, committed bytes 2.
    let ledger = UsageLedger::restore([("acme", 2)], &[], &[]);
    assert_eq!(
        ledger.usage("acme"),
        Some(&BucketUsage {
            committed_append_bytes: 2,
            committed_records: 0,
            committed_write_units: 0,
            retained_bytes: 2,
            stream_count: 1,
        })
    );
}

#[test]
fn gauges_sum_over_streams_and_buckets() {
    let ledger = UsageLedger::restore([("b", 3), ("a", 1), ("b", 4), ("b", 0)], &[], &[]);
    let b = ledger.usage("b").unwrap();
    assert_eq!(b.stream_count, 3);
    assert_eq!(b.retained_bytes, 7);
    let a = ledger.usage("a").unwrap();
    assert_eq!(a.stream_count, 1);
    assert_eq!(a.retained_bytes, 1);
    let ids: Vec<_> = ledger
        .usage_report()
        .into_iter()
        .map(|r| r.bucket_id)
        .collect();
    assert_eq!(ids, ["a", "b"]);
}

#[test]
fn gauges_saturate() {
    let ledger = UsageLedger::restore([("b", u64::MAX), ("b", 5)], &[], &[]);
    assert_eq!(ledger.usage("b").unwrap().retained_bytes, u64::MAX);
}

#[test]
fn duplicate_usage_records_last_wins() {
    let first = BucketUsage {
        committed_append_bytes: 1,
        committed_records: 1,
        committed_write_units: 1,
        retained_bytes: 0,
        stream_count: 0,
    };
    let second = BucketUsage {
        committed_append_bytes: 7,
        committed_records: 8,
        committed_write_units: 9,
        retained_bytes: 50,
        stream_count: 50,
    };
    let ledger = UsageLedger::restore(
        [("b", 2)],
        &[usage_record("b", first), usage_record("b", second)],
        &[],
    );
    assert_eq!(
        ledger.usage("b"),
        Some(&BucketUsage {
            committed_append_bytes: 7,
            committed_records: 8,
            committed_write_units: 9,
            retained_bytes: 2,
            stream_count: 1,
        })
    );
}

#[test]
fn usage_records_without_streams_keep_zero_gauges() {
    // 07 §9 quirk 11, §10 item 19 (purged bucket: zero gauges, counters kept).
    let purged = BucketUsage {
        committed_append_bytes: 3,
        committed_records: 1,
        committed_write_units: 2,
        retained_bytes: 0,
        stream_count: 0,
    };
    let stale_gauges = BucketUsage {
        retained_bytes: 40,
        stream_count: 4,
        ..purged
    };
    let ledger = UsageLedger::restore(
        std::iter::empty(),
        &[
            usage_record("benchcmp", purged),
            usage_record("unknown", stale_gauges),
        ],
        &[],
    );
    assert_eq!(ledger.usage("benchcmp"), Some(&purged));
    assert_eq!(ledger.usage("unknown"), Some(&purged));
}

#[test]
fn legacy_rule_applies_to_every_zero_entry() {
    // 07 §9 quirk 9: after the overlay, any entry with committed bytes 0
    // takes its recomputed retained bytes, even with bucket_usage present.
    let zero_bytes = BucketUsage {
        committed_append_bytes: 0,
        committed_records: 4,
        committed_write_units: 5,
        retained_bytes: 0,
        stream_count: 0,
    };
    let ledger = UsageLedger::restore(
        [("a", 6), ("c", 0)],
        &[usage_record("a", zero_bytes), usage_record("b", zero_bytes)],
        &[],
    );
    assert_eq!(ledger.usage("a").unwrap().committed_append_bytes, 6);
    assert_eq!(ledger.usage("a").unwrap().committed_records, 4);
    assert_eq!(ledger.usage("b").unwrap().committed_append_bytes, 0);
    assert_eq!(
        ledger.usage("c"),
        Some(&BucketUsage {
            stream_count: 1,
            ..BucketUsage::default()
        })
    );
}

#[test]
fn quota_duplicates_and_unknown_buckets() {
    // 07 §5.4 step 19, §9 quirk 10.
    let ledger = UsageLedger::restore(
        std::iter::empty(),
        &[],
        &[
            quota_record("a", Some(1), None),
            quota_record("a", None, None),
            quota_record("b", Some(1), None),
            quota_record("b", None, Some(9)),
            quota_record("nobkt", Some(3), Some(3)),
        ],
    );
    assert_eq!(
        ledger.quota("a"),
        Some(&BucketQuota {
            max_streams: Some(1),
            max_retained_bytes: None
        })
    );
    assert_eq!(
        ledger.quota("b"),
        Some(&BucketQuota {
            max_streams: None,
            max_retained_bytes: Some(9)
        })
    );
    assert!(ledger.quota("nobkt").is_some());
    // Quotas create no usage entries.
    assert!(ledger.usage_report().is_empty());
}

#[test]
fn usage_survives_round_trip() {
    // 07 §10 item 1: JSON create of 16 bytes, 2 records.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created("benchcmp", 16, 2);
    let restored = UsageLedger::restore(
        [("benchcmp", 16)],
        &ledger.usage_report(),
        &ledger.quota_report(),
    );
    assert_eq!(restored.usage_report(), ledger.usage_report());
    assert_eq!(
        restored.usage("benchcmp"),
        Some(&BucketUsage {
            committed_append_bytes: 16,
            committed_records: 2,
            committed_write_units: 1,
            retained_bytes: 16,
            stream_count: 1,
        })
    );
    assert_eq!(restored, ledger);
}

#[test]
fn purged_usage_survives_round_trip() {
    // 07 §10 item 19.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created("benchcmp", 3, 1);
    ledger.record_stream_created("benchcmp", 0, 0);
    ledger.set_quota(
        "benchcmp",
        BucketQuota {
            max_streams: Some(5),
            max_retained_bytes: None,
        },
    );
    ledger.record_stream_removed("benchcmp", 3);
    ledger.record_stream_removed("benchcmp", 0);
    ledger.on_bucket_purged("benchcmp");
    let restored = UsageLedger::restore(
        std::iter::empty(),
        &ledger.usage_report(),
        &ledger.quota_report(),
    );
    assert_eq!(restored, ledger);
}

#[test]
fn quota_survives_round_trip_and_is_enforced() {
    // 07 §10 item 20, 03 §10: quota max_streams 2 and one stream.
    let mut ledger = UsageLedger::new();
    ledger.set_quota(
        "benchcmp",
        BucketQuota {
            max_streams: Some(2),
            max_retained_bytes: None,
        },
    );
    ledger.record_stream_created("benchcmp", 0, 0);
    let mut restored = UsageLedger::restore(
        [("benchcmp", 0)],
        &ledger.usage_report(),
        &ledger.quota_report(),
    );
    assert_eq!(restored.quota_report(), ledger.quota_report());
    assert_eq!(restored.check_create("benchcmp", 0), Ok(()));
    restored.record_stream_created("benchcmp", 0, 0);
    assert_eq!(
        restored.check_create("benchcmp", 0).unwrap_err().limit,
        QuotaLimit::MaxStreams(2)
    );
}

#[test]
fn restore_discards_previous_ledger_contents() {
    // 07 §6 step 3: import replaces the whole ledger; leftovers disappear.
    let mut old = UsageLedger::new();
    old.record_stream_created("leftover", 1, 1);
    old.set_quota(
        "leftover",
        BucketQuota {
            max_streams: Some(1),
            max_retained_bytes: None,
        },
    );
    old = UsageLedger::restore([("acme", 5)], &[], &[]);
    assert_eq!(old.usage("leftover"), None);
    assert_eq!(old.quota("leftover"), None);
}
