//! Rebuilding a ledger from a group snapshot (spec 07 §5.4 steps 18–19).

use crate::ledger::UsageLedger;
use crate::quota::BucketQuotaSnapshot;
use crate::usage::BucketUsageSnapshot;

impl UsageLedger {
    /// Builds the ledger of a restored (or imported) machine.
    ///
    /// * `streams`: one `(bucket_id, tail_offset − retained_offset)` pair per
    ///   restored stream slot. Gauges are recomputed from these alone:
    ///   each pair adds 1 to its bucket's `stream_count` and the byte count to
    ///   its `retained_bytes` (saturating).
    /// * `bucket_usage`: the snapshot's usage records, in list order. Each
    ///   one takes (or creates, with zero gauges) its bucket's entry and sets
    ///   the three monotonic counters; its gauges are ignored. With
    ///   duplicates the last record wins. Records for buckets with no
    ///   streams (unknown or erased names too) are kept.
    /// * Legacy rule: afterwards every entry whose `committed_append_bytes`
    ///   is 0 gets its `retained_bytes` there.
    /// * `bucket_quotas`: in list order, unlimited records are skipped and
    ///   any other record replaces an earlier one for the same bucket (so a
    ///   later unlimited duplicate does not clear an earlier limit). Records
    ///   for unknown buckets are kept.
    #[must_use]
    pub fn restore<'a, I>(
        streams: I,
        bucket_usage: &[BucketUsageSnapshot],
        bucket_quotas: &[BucketQuotaSnapshot],
    ) -> Self
    where
        I: IntoIterator<Item = (&'a str, u64)>,
    {
        let mut ledger = Self::new();
        for (bucket_id, retained_bytes) in streams {
            let usage = ledger.usage.entry(bucket_id.to_owned()).or_default();
            usage.stream_count = usage.stream_count.saturating_add(1);
            usage.retained_bytes = usage.retained_bytes.saturating_add(retained_bytes);
        }
        for record in bucket_usage {
            let usage = ledger.usage.entry(record.bucket_id.clone()).or_default();
            usage.committed_append_bytes = record.usage.committed_append_bytes;
            usage.committed_records = record.usage.committed_records;
            usage.committed_write_units = record.usage.committed_write_units;
        }
        for usage in ledger.usage.values_mut() {
            if usage.committed_append_bytes == 0 {
                usage.committed_append_bytes = usage.retained_bytes;
            }
        }
        for record in bucket_quotas {
            if !record.quota.is_unlimited() {
                ledger.quotas.insert(record.bucket_id.clone(), record.quota);
            }
        }
        ledger
    }
}
