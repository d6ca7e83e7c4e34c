//! The per-group usage ledger: usage entries, quota records, the four
//! accounting events and the sorted reports (spec 01 §12.2, 03 §8–9).

use std::collections::BTreeMap;

use crate::quota::{BucketQuota, BucketQuotaSnapshot};
use crate::usage::{BucketUsage, BucketUsageSnapshot};

/// Per-bucket usage and quota records of one state machine (one Raft group).
///
/// The ledger knows nothing about streams: callers pass bucket ids and
/// byte/record counts. Both maps are keyed by bucket id in byte-wise order,
/// so reports come out sorted ascending by `bucket_id`.
///
/// Usage entries are created with zeros by the first accounting event that
/// touches a bucket and are never removed by any command (the only way to
/// drop one is [`UsageLedger::restore_usage_entry`], used to roll back an
/// append transaction). All arithmetic saturates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageLedger {
    pub(crate) usage: BTreeMap<String, BucketUsage>,
    pub(crate) quotas: BTreeMap<String, BucketQuota>,
}

impl UsageLedger {
    /// An empty ledger: no usage entries, no quota records.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The bucket's entry, created with zeros if it has none.
    fn entry(&mut self, bucket_id: &str) -> &mut BucketUsage {
        // Look up before inserting: the hot path (an existing bucket) must
        // not allocate a key.
        if !self.usage.contains_key(bucket_id) {
            self.usage
                .insert(bucket_id.to_owned(), BucketUsage::default());
        }
        self.usage
            .get_mut(bucket_id)
            .expect("entry was just ensured")
    }

    /// Accounting event: a stream was created (`Created` answered, inline or
    /// external) with `bytes` initial bytes and `records` records.
    ///
    /// `stream_count += 1`, `committed_append_bytes += bytes`,
    /// `committed_records += records`, `committed_write_units +=
    /// write_units(bytes)` (at least 1, even for an empty create) and
    /// `retained_bytes += bytes`.
    pub fn record_stream_created(&mut self, bucket_id: &str, bytes: u64, records: u64) {
        let usage = self.entry(bucket_id);
        usage.stream_count = usage.stream_count.saturating_add(1);
        usage.commit(bytes, records);
    }

    /// Accounting event: one accepted, non-deduplicated append of `bytes`
    /// bytes and `records` records. A whole batch is one event carrying the
    /// sums of its items.
    ///
    /// `committed_append_bytes += bytes`, `committed_records += records`,
    /// `committed_write_units += write_units(bytes)`, `retained_bytes += bytes`.
    ///
    /// Do not call it for closes, close-only appends or deduplicated
    /// replays: those are not accounting events (an event with 0 bytes would
    /// still charge one write unit).
    pub fn record_append(&mut self, bucket_id: &str, bytes: u64, records: u64) {
        // One lookup on the hot path (an existing bucket), not the two of
        // `entry`.
        if let Some(usage) = self.usage.get_mut(bucket_id) {
            usage.commit(bytes, records);
        } else {
            self.entry(bucket_id).commit(bytes, records);
        }
    }

    /// Accounting event: a stream's retained offset advanced by
    /// `released_bytes` (`q − p`). `retained_bytes -= released_bytes`.
    ///
    /// Do not call it for a no-op retention (`q == p`); the machine never
    /// reaches the mutation then.
    pub fn record_retention_advanced(&mut self, bucket_id: &str, released_bytes: u64) {
        let usage = self.entry(bucket_id);
        usage.retained_bytes = usage.retained_bytes.saturating_sub(released_bytes);
    }

    /// Accounting event: a stream was removed (delete, TTL expiry, purge, or
    /// an expired predecessor replaced on create). `retained_bytes` is the
    /// stream's `tail_offset − retained_offset`.
    ///
    /// `stream_count -= 1`, `retained_bytes -= retained_bytes`; the counters
    /// are untouched.
    pub fn record_stream_removed(&mut self, bucket_id: &str, retained_bytes: u64) {
        let usage = self.entry(bucket_id);
        usage.stream_count = usage.stream_count.saturating_sub(1);
        usage.retained_bytes = usage.retained_bytes.saturating_sub(retained_bytes);
    }

    /// `SetBucketQuota`: an unlimited quota removes the bucket's record;
    /// any other quota inserts or replaces it. Limits are not checked against
    /// current usage, and the bucket need not exist.
    pub fn set_quota(&mut self, bucket_id: &str, quota: BucketQuota) {
        if quota.is_unlimited() {
            self.quotas.remove(bucket_id);
        } else {
            self.quotas.insert(bucket_id.to_owned(), quota);
        }
    }

    /// Removes the bucket's quota record, returning it if there was one.
    pub fn remove_quota(&mut self, bucket_id: &str) -> Option<BucketQuota> {
        self.quotas.remove(bucket_id)
    }

    /// `DeleteBucket` (after its checks passed): the quota record is
    /// removed; the usage entry is kept unchanged.
    pub fn on_bucket_deleted(&mut self, bucket_id: &str) {
        self.remove_quota(bucket_id);
    }

    /// `PurgeBucket`, called after every stream of the bucket was removed
    /// through [`UsageLedger::record_stream_removed`]: the quota record is
    /// removed; the usage entry is kept (never created if absent).
    pub fn on_bucket_purged(&mut self, bucket_id: &str) {
        self.remove_quota(bucket_id);
    }

    /// The bucket's usage entry, if one exists.
    #[must_use]
    pub fn usage(&self, bucket_id: &str) -> Option<&BucketUsage> {
        self.usage.get(bucket_id)
    }

    /// The bucket's quota record, if one is stored.
    #[must_use]
    pub fn quota(&self, bucket_id: &str) -> Option<&BucketQuota> {
        self.quotas.get(bucket_id)
    }

    /// Puts a bucket's usage entry back to a value captured earlier with
    /// [`UsageLedger::usage`]: `Some(u)` stores `u`, `None` removes the
    /// entry. Only for rolling back an append transaction (04 §7.3).
    pub fn restore_usage_entry(&mut self, bucket_id: &str, prior: Option<BucketUsage>) {
        match prior {
            Some(usage) => {
                self.usage.insert(bucket_id.to_owned(), usage);
            }
            None => {
                self.usage.remove(bucket_id);
            }
        }
    }

    /// `bucket_usage_report()`: one record per usage entry, sorted ascending
    /// by bucket id (byte-wise). Also what `snapshot()` stores.
    #[must_use]
    pub fn usage_report(&self) -> Vec<BucketUsageSnapshot> {
        self.usage
            .iter()
            .map(|(bucket_id, usage)| BucketUsageSnapshot {
                bucket_id: bucket_id.clone(),
                usage: *usage,
            })
            .collect()
    }

    /// `bucket_quota_report()`: one record per stored quota, sorted ascending
    /// by bucket id (byte-wise). Also what `snapshot()` stores.
    #[must_use]
    pub fn quota_report(&self) -> Vec<BucketQuotaSnapshot> {
        self.quotas
            .iter()
            .map(|(bucket_id, quota)| BucketQuotaSnapshot {
                bucket_id: bucket_id.clone(),
                quota: *quota,
            })
            .collect()
    }
}
