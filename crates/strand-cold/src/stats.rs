//! Counters of the cold tier and the JSON status report built from them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::HotBudget;

/// The cold tier's counters (monotonic unless noted).
#[derive(Debug, Default)]
pub struct ColdStats {
    /// Stream bytes whose `FlushCold` committed.
    pub flushed_bytes: AtomicU64,
    /// Chunks whose `FlushCold` committed.
    pub flushed_chunks: AtomicU64,
    /// Objects uploaded.
    pub uploads: AtomicU64,
    /// Bytes uploaded.
    pub uploaded_bytes: AtomicU64,
    /// Time spent uploading and committing flushes, in microseconds.
    pub flush_micros: AtomicU64,
    /// Chunks the machine refused as stale (the stream changed meanwhile).
    pub stale_chunks: AtomicU64,
    /// Failed uploads, deletes, lists and reads.
    pub store_errors: AtomicU64,
    /// Store failures in a row (0 when the last operation succeeded).
    pub consecutive_failures: AtomicU64,
    /// GC entries acknowledged.
    pub gc_acked: AtomicU64,
    /// Objects deleted by GC.
    pub gc_deleted: AtomicU64,
    /// Orphans deleted by the sweep.
    pub orphans_deleted: AtomicU64,
    /// Cold reads served.
    pub cold_reads: AtomicU64,
    /// Bytes served from the cold tier.
    pub cold_read_bytes: AtomicU64,
    /// Ranges served from the cache.
    pub cache_hits: AtomicU64,
    /// Groups whose workers act now (this node leads them); a gauge.
    pub leading_groups: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl ColdStats {
    /// Adds to a counter.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Records a failed store operation: a `tracing` warning, the counters
    /// and the last error.
    pub(crate) fn failure(&self, what: &str, error: &dyn std::fmt::Display) {
        let row = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        self.store_errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(operation = what, failures_in_a_row = row, error = %error, "cold store operation failed");
        let text = format!("{what}: {error}");
        match self.last_error.lock() {
            Ok(mut g) => *g = Some(text),
            Err(p) => *p.into_inner() = Some(text),
        }
    }

    /// Records a successful store operation.
    pub(crate) fn success(&self) {
        self.consecutive_failures.store(0, Ordering::Relaxed);
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// The last store error, if any.
    pub fn last_error(&self) -> Option<String> {
        match self.last_error.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

/// What `GET /__strand/cold` answers.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ColdReport {
    /// The backend (`local:DIR`, `s3://…`, `memory`).
    pub backend: String,
    /// False while store operations keep failing.
    pub healthy: bool,
    /// Store failures in a row.
    pub consecutive_failures: u64,
    /// The last store error.
    pub last_error: Option<String>,
    /// `--max-hot-bytes`, if set.
    pub max_hot_bytes: Option<u64>,
    /// The admission bound on the node's hot bytes.
    pub hot_bytes_bound: u64,
    /// Writes refused with 503 because the limit was reached.
    pub refused_writes: u64,
    /// `--max-group-hot-bytes`, if set.
    pub max_group_hot_bytes: Option<u64>,
    /// The admission bound on each group's hot bytes, in group order
    /// (empty without a per-group limit).
    pub group_hot_bytes_bounds: Vec<u64>,
    /// Writes refused with 503 because their group's limit was reached.
    pub group_refused_writes: u64,
    /// Groups this node leads, whose flush, GC and sweep it runs (every
    /// group on a single node; in a cluster, the ones it is leader of).
    pub leading_groups: u64,
    /// Stream bytes flushed (committed).
    pub flushed_bytes: u64,
    /// Chunks flushed (committed).
    pub flushed_chunks: u64,
    /// Objects uploaded.
    pub uploads: u64,
    /// Bytes uploaded.
    pub uploaded_bytes: u64,
    /// Time spent uploading and committing flushes, in ms.
    pub flush_ms: u64,
    /// Chunks refused as stale.
    pub stale_chunks: u64,
    /// Failed store operations.
    pub store_errors: u64,
    /// GC entries acknowledged.
    pub gc_acked: u64,
    /// Objects deleted by GC.
    pub gc_deleted: u64,
    /// Orphans deleted.
    pub orphans_deleted: u64,
    /// Cold reads served.
    pub cold_reads: u64,
    /// Bytes read from the cold tier.
    pub cold_read_bytes: u64,
    /// Ranges served from the cache.
    pub cache_hits: u64,
    /// Objects this cluster node wrote into its own copy from its own hot
    /// bytes (0 without one).
    pub replica_written: u64,
    /// Objects this cluster node fetched from a peer into its own copy.
    pub replica_fetched: u64,
    /// Writes and fetches of its own copy that failed.
    pub replica_failures: u64,
}

impl ColdReport {
    pub(crate) fn build(
        stats: &ColdStats,
        backend: String,
        budget: &HotBudget,
        max_group_hot_bytes: Option<u64>,
        groups: &[HotBudget],
        replica: Option<&crate::ReplicaStats>,
    ) -> Self {
        let replica_get = |f: fn(&crate::ReplicaStats) -> &AtomicU64| {
            replica.map_or(0, |r| f(r).load(Ordering::Relaxed))
        };
        let failures = ColdStats::get(&stats.consecutive_failures);
        Self {
            backend,
            healthy: failures == 0,
            consecutive_failures: failures,
            last_error: stats.last_error(),
            max_hot_bytes: budget.limit(),
            hot_bytes_bound: budget.estimate(),
            refused_writes: budget.refused(),
            max_group_hot_bytes,
            group_hot_bytes_bounds: groups.iter().map(HotBudget::estimate).collect(),
            group_refused_writes: groups.iter().map(HotBudget::refused).sum(),
            leading_groups: ColdStats::get(&stats.leading_groups),
            flushed_bytes: ColdStats::get(&stats.flushed_bytes),
            flushed_chunks: ColdStats::get(&stats.flushed_chunks),
            uploads: ColdStats::get(&stats.uploads),
            uploaded_bytes: ColdStats::get(&stats.uploaded_bytes),
            flush_ms: ColdStats::get(&stats.flush_micros) / 1000,
            stale_chunks: ColdStats::get(&stats.stale_chunks),
            store_errors: ColdStats::get(&stats.store_errors),
            gc_acked: ColdStats::get(&stats.gc_acked),
            gc_deleted: ColdStats::get(&stats.gc_deleted),
            orphans_deleted: ColdStats::get(&stats.orphans_deleted),
            cold_reads: ColdStats::get(&stats.cold_reads),
            cold_read_bytes: ColdStats::get(&stats.cold_read_bytes),
            cache_hits: ColdStats::get(&stats.cache_hits),
            replica_written: replica_get(|r| &r.written),
            replica_fetched: replica_get(|r| &r.fetched),
            replica_failures: replica_get(|r| &r.failures),
        }
    }
}
