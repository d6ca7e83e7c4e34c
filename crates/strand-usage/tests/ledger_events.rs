//! Accounting events, bucket lifecycle and reports at ledger level
//! (spec 01 §12.2, 03 §3, §8, §10, 04 §9 examples, 05 E26).
#![allow(clippy::unwrap_used)]

use strand_usage::{BucketQuota, BucketUsage, UsageLedger};

const B: &str = "benchcmp";

fn usage(ledger: &UsageLedger, bucket: &str) -> BucketUsage {
    *ledger.usage(bucket).unwrap()
}

#[test]
fn empty_create_then_appends_retention_and_delete() {
    // 01 §12.2 first example; 04 §9 item 12; 05 E26.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 0, 0);
    let u = usage(&ledger, B);
    assert_eq!(u.stream_count, 1);
    assert_eq!(u.committed_append_bytes, 0);
    assert_eq!(u.committed_write_units, 1);
    assert_eq!(u.committed_records, 0);
    assert_eq!(u.retained_bytes, 0);

    ledger.record_append(B, 3, 1); // "abc"
    ledger.record_append(B, 2, 1); // "de"
    assert_eq!(
        usage(&ledger, B),
        BucketUsage {
            committed_append_bytes: 5,
            committed_records: 2,
            committed_write_units: 3,
            retained_bytes: 5,
            stream_count: 1,
        }
    );

    // Retention from 0 to 3.
    ledger.record_retention_advanced(B, 3);
    let u = usage(&ledger, B);
    assert_eq!(u.retained_bytes, 2);
    assert_eq!(u.committed_append_bytes, 5);

    // Delete: tail 5 − retained 3 = 2.
    ledger.record_stream_removed(B, 2);
    assert_eq!(
        usage(&ledger, B),
        BucketUsage {
            committed_append_bytes: 5,
            committed_records: 2,
            committed_write_units: 3,
            retained_bytes: 0,
            stream_count: 0,
        }
    );
}

#[test]
fn write_unit_rounding_append_and_batch() {
    // 01 §12.2 second example; 04 §9 item 13.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 0, 0); // 1 unit
    ledger.record_append(B, 10241, 1); // 2 units
    ledger.record_append(B, 5120 + 5120, 2); // one batch event: 1 unit
    let u = usage(&ledger, B);
    assert_eq!(u.committed_write_units, 4);
    assert_eq!(u.committed_append_bytes, 20481);
    assert_eq!(u.committed_records, 3);
    assert_eq!(u.retained_bytes, 20481);
}

#[test]
fn deduplicated_retry_is_not_an_event() {
    // 01 §12.2 third example; 04 §9 item 11: the machine records only the
    // first of two identical producer appends.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 0, 0);
    ledger.record_append(B, 4, 1);
    let u = usage(&ledger, B);
    assert_eq!(u.committed_append_bytes, 4);
    assert_eq!(u.committed_records, 1);
    assert_eq!(u.committed_write_units, 2);
}

#[test]
fn json_create_counts_records() {
    // 01 §12.2 fourth example: {"a":1}\n{"b":2}\n is 16 bytes, 2 records.
    assert_eq!("{\"a\":1}\n{\"b\":2}\n".len(), 16);
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 16, 2);
    assert_eq!(
        usage(&ledger, B),
        BucketUsage {
            committed_append_bytes: 16,
            committed_records: 2,
            committed_write_units: 1,
            retained_bytes: 16,
            stream_count: 1,
        }
    );
}

#[test]
fn create_sizes_write_units_sum_to_eight() {
    // 03 §10 "Usage": creates of 2, 2, 2, 2, 2, 10240 and 10241 bytes.
    let mut ledger = UsageLedger::new();
    for bytes in [2, 2, 2, 2, 2, 10240, 10241] {
        ledger.record_stream_created(B, bytes, 1);
    }
    let u = usage(&ledger, B);
    assert_eq!(u.committed_write_units, 8);
    assert_eq!(u.stream_count, 7);
    assert_eq!(u.retained_bytes, 10 + 10240 + 10241);
}

#[test]
fn created_then_immediately_swept() {
    // 03 §4.5 / §10: create `abc` with TTL 0, swept in the same apply.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 3, 1);
    ledger.record_stream_removed(B, 3);
    assert_eq!(
        usage(&ledger, B),
        BucketUsage {
            committed_append_bytes: 3,
            committed_records: 1,
            committed_write_units: 1,
            retained_bytes: 0,
            stream_count: 0,
        }
    );
}

#[test]
fn ttl_expiry_keeps_counters() {
    // 03 §10: the bucket already has 16 committed bytes; `xyz` created with a
    // TTL then expires → committed bytes 19, gauges drop the stream.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 16, 2);
    ledger.record_stream_created(B, 3, 1);
    ledger.record_stream_removed(B, 3);
    let u = usage(&ledger, B);
    assert_eq!(u.committed_append_bytes, 19);
    assert_eq!(u.stream_count, 1);
    assert_eq!(u.retained_bytes, 16);
}

#[test]
fn external_and_inline_appends_example_33() {
    // 04 §9 item 33: OCTET stream created with "abc", external 5 bytes,
    // inline "hi", external 1 byte with close_after → bytes 11, records 4,
    // units 4.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 3, 1);
    ledger.record_append(B, 5, 1);
    ledger.record_append(B, 2, 1);
    ledger.record_append(B, 1, 1);
    let u = usage(&ledger, B);
    assert_eq!(u.committed_append_bytes, 11);
    assert_eq!(u.committed_records, 4);
    assert_eq!(u.committed_write_units, 4);
}

#[test]
fn removal_and_retention_create_missing_entry_with_saturation() {
    // 03 §7.4 step 4: removal creates the entry with zeros if missing.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_removed("lost", 7);
    assert_eq!(usage(&ledger, "lost"), BucketUsage::default());
    ledger.record_retention_advanced("lost2", 9);
    assert_eq!(usage(&ledger, "lost2"), BucketUsage::default());
}

#[test]
fn counters_saturate() {
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, u64::MAX, u64::MAX);
    ledger.record_append(B, u64::MAX, 1);
    let u = usage(&ledger, B);
    assert_eq!(u.committed_append_bytes, u64::MAX);
    assert_eq!(u.committed_records, u64::MAX);
    assert_eq!(u.retained_bytes, u64::MAX);
    // 1801439850948199 units per u64::MAX-byte event (see write_units).
    assert_eq!(u.committed_write_units, 2 * 1_801_439_850_948_199);
    ledger.record_retention_advanced(B, 5);
    assert_eq!(usage(&ledger, B).retained_bytes, u64::MAX - 5);
}

#[test]
fn delete_bucket_keeps_usage_and_drops_quota() {
    // 03 §3.2 and §10 "Buckets".
    let mut ledger = UsageLedger::new();
    ledger.set_quota(
        B,
        BucketQuota {
            max_streams: Some(5),
            max_retained_bytes: None,
        },
    );
    ledger.record_stream_created(B, 0, 0); // s-1
    ledger.record_stream_removed(B, 0); // DeleteStream s-1
    let before = usage(&ledger, B);
    ledger.on_bucket_deleted(B);
    let after = usage(&ledger, B);
    assert_eq!(after, before);
    assert_eq!(after.stream_count, 0);
    assert_eq!(after.retained_bytes, 0);
    assert!(after.committed_write_units > 0);
    assert_eq!(ledger.quota(B), None);
    assert!(ledger.quota_report().is_empty());
    assert_eq!(ledger.usage_report().len(), 1);

    // Recreating the bucket touches nothing; a new create carries on.
    ledger.record_stream_created(B, 4, 1);
    let u = usage(&ledger, B);
    assert_eq!(u.committed_write_units, 2);
    assert_eq!(u.committed_append_bytes, 4);
    assert_eq!(u.stream_count, 1);
}

#[test]
fn purge_bucket() {
    // 03 §10: benchcmp has `orders` (3 bytes) and `journal`; other-tenant has
    // a stream; benchcmp has a quota.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 3, 1);
    ledger.record_stream_created(B, 0, 0);
    ledger.record_stream_created("other-tenant", 1, 1);
    ledger.set_quota(
        B,
        BucketQuota {
            max_streams: Some(10),
            max_retained_bytes: Some(100),
        },
    );
    // The machine removes each stream, then finishes the purge.
    ledger.record_stream_removed(B, 3);
    ledger.record_stream_removed(B, 0);
    ledger.on_bucket_purged(B);
    let u = usage(&ledger, B);
    assert_eq!(u.stream_count, 0);
    assert_eq!(u.retained_bytes, 0);
    assert!(u.committed_write_units > 0);
    assert_eq!(u.committed_append_bytes, 3);
    assert_eq!(ledger.quota(B), None);
    assert_eq!(usage(&ledger, "other-tenant").stream_count, 1);

    // Purging again removes nothing and changes nothing.
    let snapshot = ledger.clone();
    ledger.on_bucket_purged(B);
    assert_eq!(ledger, snapshot);
}

#[test]
fn purge_of_unknown_bucket_creates_no_entry() {
    // 03 §3.3 notes: if the bucket never had a usage entry, none is created.
    let mut ledger = UsageLedger::new();
    ledger.on_bucket_purged("ghost");
    assert_eq!(ledger.usage("ghost"), None);
    assert!(ledger.usage_report().is_empty());
    ledger.on_bucket_deleted("ghost");
    assert_eq!(ledger, UsageLedger::new());
}

#[test]
fn quota_for_missing_bucket_is_stored_and_reported() {
    // 03 §10: SetBucketQuota{nobkt, Some(1), None} → listed in the report.
    let mut ledger = UsageLedger::new();
    let quota = BucketQuota {
        max_streams: Some(1),
        max_retained_bytes: None,
    };
    ledger.set_quota("nobkt", quota);
    let report = ledger.quota_report();
    assert_eq!(report.len(), 1);
    assert_eq!(report[0].bucket_id, "nobkt");
    assert_eq!(report[0].quota, quota);
    // No usage entry is created by a quota.
    assert_eq!(ledger.usage("nobkt"), None);
}

#[test]
fn set_quota_replaces_and_unlimited_removes() {
    let mut ledger = UsageLedger::new();
    let first = BucketQuota {
        max_streams: Some(1),
        max_retained_bytes: None,
    };
    let second = BucketQuota {
        max_streams: None,
        max_retained_bytes: Some(9),
    };
    ledger.set_quota(B, first);
    ledger.set_quota(B, second);
    assert_eq!(ledger.quota(B), Some(&second));
    ledger.set_quota(B, BucketQuota::default());
    assert_eq!(ledger.quota(B), None);
    // Unlimited on a bucket without a record is a no-op.
    ledger.set_quota("x", BucketQuota::default());
    assert!(ledger.quota_report().is_empty());
    assert_eq!(ledger.remove_quota(B), None);
    ledger.set_quota(B, first);
    assert_eq!(ledger.remove_quota(B), Some(first));
}

#[test]
fn reports_are_sorted_byte_wise() {
    // 07 §10 item 11 bucket names, plus byte-wise tie cases.
    let mut ledger = UsageLedger::new();
    let limited = BucketQuota {
        max_streams: Some(1),
        max_retained_bytes: None,
    };
    for bucket in ["zzzz", "benchcmp", "aaaa", "a-b", "a"] {
        ledger.record_stream_created(bucket, 1, 1);
        ledger.set_quota(bucket, limited);
    }
    let expected = ["a", "a-b", "aaaa", "benchcmp", "zzzz"];
    let usage_ids: Vec<_> = ledger
        .usage_report()
        .into_iter()
        .map(|r| r.bucket_id)
        .collect();
    let quota_ids: Vec<_> = ledger
        .quota_report()
        .into_iter()
        .map(|r| r.bucket_id)
        .collect();
    assert_eq!(usage_ids, expected);
    assert_eq!(quota_ids, expected);
}

#[test]
fn report_serializes_as_snapshot_lists() {
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created("zzzz", 3, 1);
    ledger.record_stream_created("aaaa", 0, 0);
    ledger.set_quota(
        "nobkt",
        BucketQuota {
            max_streams: Some(2),
            max_retained_bytes: Some(6),
        },
    );
    let usage = serde_json::to_string(&ledger.usage_report()).unwrap();
    assert_eq!(
        usage,
        concat!(
            r#"[{"bucket_id":"aaaa","usage":{"committed_append_bytes":0,"committed_records":0,"committed_write_units":1,"retained_bytes":0,"stream_count":1}},"#,
            r#"{"bucket_id":"zzzz","usage":{"committed_append_bytes":3,"committed_records":1,"committed_write_units":1,"retained_bytes":3,"stream_count":1}}]"#
        )
    );
    insta::assert_snapshot!("usage_report", usage);
    let quotas = serde_json::to_string(&ledger.quota_report()).unwrap();
    assert_eq!(
        quotas,
        r#"[{"bucket_id":"nobkt","quota":{"max_streams":2,"max_retained_bytes":6}}]"#
    );
    insta::assert_snapshot!("quota_report", quotas);
}

#[test]
fn transaction_rollback_restores_or_removes_entry() {
    // 04 §7.3 step 2.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 3, 1);
    let prior = ledger.usage(B).copied();
    let prior_new = ledger.usage("fresh").copied();
    assert_eq!(prior_new, None);
    ledger.record_append(B, 5, 1);
    ledger.record_append("fresh", 5, 1);
    ledger.restore_usage_entry(B, prior);
    ledger.restore_usage_entry("fresh", prior_new);
    let mut expected = UsageLedger::new();
    expected.record_stream_created(B, 3, 1);
    assert_eq!(ledger, expected);
    assert_eq!(ledger.usage("fresh"), None);
}
