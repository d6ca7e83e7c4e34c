//! `BucketUsage`, its snapshot record and the write-unit arithmetic (spec 01 §12).

use serde::{Deserialize, Serialize};

/// Size in bytes of one write unit counted in
/// [`BucketUsage::committed_write_units`] (10 × 1024).
pub const COMMITTED_WRITE_UNIT_BYTES: u64 = 10240;

/// Write units charged for one accounting event carrying `bytes` bytes:
/// `max(1, ceil(bytes / 10240))`.
///
/// Even an empty event costs one unit: 0 → 1, 10240 → 1, 10241 → 2.
#[must_use]
pub fn write_units(bytes: u64) -> u64 {
    bytes.div_ceil(COMMITTED_WRITE_UNIT_BYTES).max(1)
}

/// Usage of one bucket in one state machine (one Raft group).
///
/// The first three fields are monotonic counters; `retained_bytes` and
/// `stream_count` are gauges that track live state.
///
/// On input `committed_write_units` may be absent (then 0) or given under its
/// legacy name `committed_write_units_10kib`; giving both names is a
/// duplicate-field decode error. Output always uses the new name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketUsage {
    /// Total bytes ever committed by creates and non-deduplicated appends.
    pub committed_append_bytes: u64,
    /// Total records ever committed by creates and non-deduplicated appends.
    pub committed_records: u64,
    /// Total write units ever charged (see [`write_units`]).
    #[serde(default, alias = "committed_write_units_10kib")]
    pub committed_write_units: u64,
    /// Bytes currently retained by the bucket's live streams
    /// (sum of `tail_offset − retained_offset`).
    pub retained_bytes: u64,
    /// Number of live streams of the bucket (expired but unswept included).
    pub stream_count: u64,
}

impl BucketUsage {
    /// Adds one committed event of `bytes` bytes and `records` records: the
    /// three counters and `retained_bytes` grow, all saturating.
    pub(crate) fn commit(&mut self, bytes: u64, records: u64) {
        self.committed_append_bytes = self.committed_append_bytes.saturating_add(bytes);
        self.committed_records = self.committed_records.saturating_add(records);
        self.committed_write_units = self
            .committed_write_units
            .saturating_add(write_units(bytes));
        self.retained_bytes = self.retained_bytes.saturating_add(bytes);
    }
}

/// One entry of the usage report and of a group snapshot's `bucket_usage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketUsageSnapshot {
    /// The bucket id.
    pub bucket_id: String,
    /// That bucket's usage.
    pub usage: BucketUsage,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_units_examples_from_spec() {
        // 03 §8: 0 → 1, 1 → 1, 10240 → 1, 10241 → 2, 20480 → 2, 20481 → 3.
        assert_eq!(write_units(0), 1);
        assert_eq!(write_units(1), 1);
        assert_eq!(write_units(10240), 1);
        assert_eq!(write_units(10241), 2);
        assert_eq!(write_units(20480), 2);
        assert_eq!(write_units(20481), 3);
    }

    #[test]
    fn write_units_does_not_overflow() {
        // ceil((2^64 − 1) / 10240) computed independently: (2^64 − 1) / 10240
        // = 1801439850948198 remainder 10239 (nonzero), so +1.
        assert_eq!(u64::MAX / 10240, 1_801_439_850_948_198);
        assert_eq!(write_units(u64::MAX), 1_801_439_850_948_199);
    }

    #[test]
    fn constant_value() {
        assert_eq!(COMMITTED_WRITE_UNIT_BYTES, 10 * 1024);
    }

    #[test]
    fn commit_saturates() {
        let mut usage = BucketUsage {
            committed_append_bytes: u64::MAX - 1,
            committed_records: u64::MAX,
            committed_write_units: u64::MAX,
            retained_bytes: u64::MAX - 2,
            stream_count: 0,
        };
        usage.commit(5, 1);
        assert_eq!(usage.committed_append_bytes, u64::MAX);
        assert_eq!(usage.committed_records, u64::MAX);
        assert_eq!(usage.committed_write_units, u64::MAX);
        assert_eq!(usage.retained_bytes, u64::MAX);
        assert_eq!(usage.stream_count, 0);
    }
}
