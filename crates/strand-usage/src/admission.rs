//! Quota admission checks for creates and appends (spec 03 §9, 04 §2.9).

use crate::ledger::UsageLedger;
use crate::quota::{QuotaExceeded, QuotaLimit};
use crate::usage::BucketUsage;

impl UsageLedger {
    /// The bucket's usage, or zeros if it has no entry.
    fn usage_or_zero(&self, bucket_id: &str) -> BucketUsage {
        self.usage(bucket_id).copied().unwrap_or_default()
    }

    /// Create quota (03 §9.1), for a create of `incoming_bytes` initial bytes.
    ///
    /// Passes when the bucket has no quota record. Otherwise, in order:
    /// `max_streams = Some(m)` and `stream_count >= m` fails; then
    /// `max_retained_bytes = Some(r)` and `retained_bytes + incoming_bytes > r`
    /// (saturating add) fails, even for `incoming_bytes == 0`.
    ///
    /// # Errors
    ///
    /// [`QuotaExceeded`] naming the first violated limit.
    pub fn check_create(&self, bucket_id: &str, incoming_bytes: u64) -> Result<(), QuotaExceeded> {
        let Some(quota) = self.quota(bucket_id) else {
            return Ok(());
        };
        let usage = self.usage_or_zero(bucket_id);
        if let Some(max) = quota.max_streams
            && usage.stream_count >= max
        {
            return Err(exceeded(bucket_id, QuotaLimit::MaxStreams(max)));
        }
        check_retained(bucket_id, usage, quota.max_retained_bytes, incoming_bytes)
    }

    /// Append quota (03 §9.2, 04 §2.9), for an append (or a whole batch) of
    /// `incoming_bytes` bytes.
    ///
    /// Passes when `incoming_bytes == 0` or the bucket has no quota record.
    /// Otherwise `max_retained_bytes = Some(r)` and
    /// `retained_bytes + incoming_bytes > r` (saturating add) fails.
    /// `max_streams` is not consulted.
    ///
    /// # Errors
    ///
    /// [`QuotaExceeded`] with [`QuotaLimit::MaxRetainedBytes`].
    pub fn check_append(&self, bucket_id: &str, incoming_bytes: u64) -> Result<(), QuotaExceeded> {
        if incoming_bytes == 0 {
            return Ok(());
        }
        let Some(quota) = self.quota(bucket_id) else {
            return Ok(());
        };
        let usage = self.usage_or_zero(bucket_id);
        check_retained(bucket_id, usage, quota.max_retained_bytes, incoming_bytes)
    }
}

fn check_retained(
    bucket_id: &str,
    usage: BucketUsage,
    max_retained_bytes: Option<u64>,
    incoming_bytes: u64,
) -> Result<(), QuotaExceeded> {
    match max_retained_bytes {
        Some(max) if usage.retained_bytes.saturating_add(incoming_bytes) > max => {
            Err(exceeded(bucket_id, QuotaLimit::MaxRetainedBytes(max)))
        }
        _ => Ok(()),
    }
}

#[cold]
fn exceeded(bucket_id: &str, limit: QuotaLimit) -> QuotaExceeded {
    QuotaExceeded {
        bucket_id: bucket_id.to_owned(),
        limit,
    }
}
