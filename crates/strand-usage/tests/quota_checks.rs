//! Quota admission checks at ledger level (spec 03 §9–§10, 04 §2.9 and
//! examples 21/27).
#![allow(clippy::unwrap_used)]

use strand_usage::{BucketQuota, QuotaExceeded, QuotaLimit, UsageLedger};

const B: &str = "benchcmp";

fn quota(max_streams: Option<u64>, max_retained_bytes: Option<u64>) -> BucketQuota {
    BucketQuota {
        max_streams,
        max_retained_bytes,
    }
}

fn err(limit: QuotaLimit) -> Result<(), QuotaExceeded> {
    Err(QuotaExceeded {
        bucket_id: B.to_owned(),
        limit,
    })
}

#[test]
fn no_record_always_passes() {
    let mut ledger = UsageLedger::new();
    assert_eq!(ledger.check_create(B, u64::MAX), Ok(()));
    assert_eq!(ledger.check_append(B, u64::MAX), Ok(()));
    ledger.record_stream_created(B, u64::MAX, 1);
    assert_eq!(ledger.check_create(B, u64::MAX), Ok(()));
    assert_eq!(ledger.check_append(B, u64::MAX), Ok(()));
}

#[test]
fn quota_walkthrough_one_stream_four_bytes() {
    // 03 §10 Quotas first item; 04 §9 item 21.
    let mut ledger = UsageLedger::new();
    ledger.set_quota(B, quota(Some(1), Some(4)));
    assert_eq!(ledger.check_create(B, 0), Ok(())); // create `first`
    ledger.record_stream_created(B, 0, 0);
    assert_eq!(ledger.check_create(B, 0), err(QuotaLimit::MaxStreams(1))); // `second`
    assert_eq!(ledger.check_append(B, 4), Ok(())); // `abcd`
    ledger.record_append(B, 4, 1);
    assert_eq!(
        ledger.check_append(B, 1),
        err(QuotaLimit::MaxRetainedBytes(4))
    ); // `x`
    ledger.record_retention_advanced(B, 4); // publish at 4, retain 4
    assert_eq!(ledger.check_append(B, 2), Ok(())); // `yz`
    ledger.record_append(B, 2, 1);
    ledger.set_quota(B, BucketQuota::default());
    assert!(ledger.quota_report().is_empty());
    assert_eq!(ledger.check_create(B, 0), Ok(())); // `second` → Created
}

#[test]
fn lowered_retained_limit_blocks_even_empty_create() {
    // 03 §10: `a` holds 6 bytes, then quota (None, Some(3)).
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 6, 1);
    ledger.set_quota(B, quota(None, Some(3)));
    assert_eq!(
        ledger.check_create(B, 0),
        err(QuotaLimit::MaxRetainedBytes(3))
    );
    // A close carries no bytes and always passes.
    assert_eq!(ledger.check_append(B, 0), Ok(()));
    // max_streams Some(0) blocks every create.
    ledger.set_quota(B, quota(Some(0), None));
    assert_eq!(ledger.check_create(B, 0), err(QuotaLimit::MaxStreams(0)));
    let mut empty = UsageLedger::new();
    empty.set_quota(B, quota(Some(0), None));
    assert_eq!(empty.check_create(B, 0), err(QuotaLimit::MaxStreams(0)));
}

#[test]
fn closed_stream_at_limit() {
    // 03 §10: closed `a` (4 bytes) under (None, Some(4)); 04 §9 item 27
    // with 2 bytes under Some(2).
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 4, 1);
    ledger.set_quota(B, quota(None, Some(4)));
    assert_eq!(
        ledger.check_append(B, 1),
        err(QuotaLimit::MaxRetainedBytes(4))
    );
    assert_eq!(ledger.check_append(B, 0), Ok(()));

    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 2, 1);
    ledger.set_quota(B, quota(None, Some(2)));
    assert_eq!(
        ledger.check_append(B, 1),
        err(QuotaLimit::MaxRetainedBytes(2))
    );
}

#[test]
fn removal_frees_stream_headroom() {
    // 03 §10: quota (2, 6); `a` 4 bytes live, `b` 2 bytes expired but unswept.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 4, 1);
    ledger.record_stream_created(B, 2, 1);
    ledger.set_quota(B, quota(Some(2), Some(6)));
    assert_eq!(ledger.check_create(B, 0), err(QuotaLimit::MaxStreams(2)));
    ledger.record_stream_removed(B, 2); // the same command's sweep removes `b`
    assert_eq!(ledger.check_create(B, 0), Ok(()));
}

#[test]
fn reaching_the_limit_exactly_is_allowed() {
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 3, 1);
    ledger.set_quota(B, quota(Some(2), Some(4)));
    assert_eq!(ledger.check_create(B, 1), Ok(()));
    assert_eq!(
        ledger.check_create(B, 2),
        err(QuotaLimit::MaxRetainedBytes(4))
    );
    assert_eq!(ledger.check_append(B, 1), Ok(()));
    assert_eq!(
        ledger.check_append(B, 2),
        err(QuotaLimit::MaxRetainedBytes(4))
    );
}

#[test]
fn stream_count_checked_before_retained_bytes() {
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, 10, 1);
    ledger.set_quota(B, quota(Some(1), Some(1)));
    assert_eq!(ledger.check_create(B, 5), err(QuotaLimit::MaxStreams(1)));
    // Appends never consult max_streams.
    ledger.set_quota(B, quota(Some(0), None));
    assert_eq!(ledger.check_append(B, 5), Ok(()));
}

#[test]
fn retained_sum_saturates() {
    // retained + incoming saturates at u64::MAX, which is not > u64::MAX.
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created(B, u64::MAX - 1, 1);
    ledger.set_quota(B, quota(None, Some(u64::MAX)));
    assert_eq!(ledger.check_append(B, 5), Ok(()));
    assert_eq!(ledger.check_create(B, 5), Ok(()));
    ledger.set_quota(B, quota(None, Some(u64::MAX - 1)));
    assert_eq!(
        ledger.check_append(B, 5),
        err(QuotaLimit::MaxRetainedBytes(u64::MAX - 1))
    );
}

#[test]
fn quotas_are_per_bucket() {
    let mut ledger = UsageLedger::new();
    ledger.record_stream_created("other", 100, 1);
    ledger.set_quota(B, quota(Some(1), Some(10)));
    assert_eq!(ledger.check_create(B, 10), Ok(()));
    assert_eq!(ledger.check_create("other", 10), Ok(()));
}

#[test]
fn recreated_bucket_inherits_earlier_quota_but_deleted_bucket_loses_it() {
    // 03 §3.1: CreateBucket does not clear an earlier quota; 03 §3.2/§3.3:
    // DeleteBucket and PurgeBucket do.
    let mut ledger = UsageLedger::new();
    ledger.set_quota(B, quota(Some(0), None));
    assert_eq!(ledger.check_create(B, 0), err(QuotaLimit::MaxStreams(0)));
    ledger.on_bucket_deleted(B);
    assert_eq!(ledger.check_create(B, 0), Ok(()));
    ledger.set_quota(B, quota(Some(0), None));
    ledger.on_bucket_purged(B);
    assert_eq!(ledger.check_create(B, 0), Ok(()));
}

#[test]
fn error_message() {
    let mut ledger = UsageLedger::new();
    ledger.set_quota(B, quota(Some(0), None));
    let e = ledger.check_create(B, 0).unwrap_err();
    assert_eq!(e.bucket_id, B);
    insta::assert_snapshot!("quota_exceeded_streams", e.to_string());
}
