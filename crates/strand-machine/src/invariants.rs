//! [`StreamStateMachine::check_invariants`]: what must hold between any two
//! commands, whatever the commands were. Debug builds check it after every
//! state-changing call (`apply`, the borrowed appends, transactions and
//! restore), the property tests and the `command_sequence` fuzz target
//! call it explicitly: an accounting slip shows up at the command that
//! made it, not as a wrong answer much later.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use strand_model::BucketStreamId;

use crate::machine::StreamStateMachine;
use crate::ttl::expiry;

impl StreamStateMachine {
    /// Checks the machine's internal consistency:
    ///
    /// * the node's hot-byte count is the sum of every stream's hot chunks,
    ///   and each stream's chunks are ordered, do not overlap and end at or
    ///   before its tail;
    /// * every stream's retained offset is at or below its tail, and a
    ///   JSON stream's record index is valid over `[retained, tail)`;
    /// * every stream with an expiry has an entry for it in the TTL index
    ///   (unless forks keep it past its expiry);
    /// * the count of soft-deleted streams matches the registry;
    /// * the registry's path index holds every live stream, once, under its
    ///   own path;
    /// * in the corrected profile, every bucket's usage gauges
    ///   (`stream_count`, `retained_bytes`) equal their recomputation from
    ///   the streams (the reference profile's drift, a quirk it keeps).
    ///
    /// # Errors
    ///
    /// The first broken invariant, described with the stream it concerns.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut hot_total = 0u64;
        let mut soft_deleted = 0usize;
        let mut gauges: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let ttl_entries: HashSet<(u64, &BucketStreamId)> = self.ttl.entries().collect();
        for slot in self.registry.slots_in_arena_order() {
            let id = &slot.metadata.stream_id;
            let tail = slot.metadata.tail_offset;
            let mut previous_end: Option<u64> = None;
            for chunk in slot.hot().chunks() {
                if previous_end.is_some_and(|end| chunk.start < end) {
                    return Err(format!(
                        "stream '{id}': hot chunk at {} overlaps the previous one ending at {}",
                        chunk.start,
                        previous_end.unwrap_or_default()
                    ));
                }
                previous_end = Some(chunk.end());
                hot_total = hot_total
                    .checked_add(crate::hot::to_u64(chunk.bytes.len()))
                    .ok_or("hot bytes overflow a u64")?;
            }
            if let Some(end) = previous_end
                && end > tail
            {
                return Err(format!(
                    "stream '{id}': hot chunks end at {end}, beyond the tail {tail}"
                ));
            }
            let retained = slot.retained_offset();
            if retained > tail {
                return Err(format!(
                    "stream '{id}': retained offset {retained} is beyond the tail {tail}"
                ));
            }
            if let Some(index) = slot.record_index.as_deref() {
                index
                    .validate(retained, tail)
                    .map_err(|e| format!("stream '{id}': record index: {e}"))?;
            }
            // A stream forks still read is kept past its expiry, its
            // entry spent.
            if let Some(at) = expiry(&slot.metadata)
                && !slot.pinned()
                && !ttl_entries.contains(&(at, id))
            {
                return Err(format!(
                    "stream '{id}': expires at {at} but the TTL index has no entry for it"
                ));
            }
            if slot.soft_deleted() {
                soft_deleted += 1;
            }
            let gauge = gauges.entry(id.bucket_id.as_str()).or_default();
            gauge.0 += 1;
            gauge.1 = gauge.1.saturating_add(tail - retained);
        }
        if hot_total != self.hot_bytes {
            return Err(format!(
                "the node counts {} hot bytes, its streams hold {hot_total}",
                self.hot_bytes
            ));
        }
        self.check_path_index()?;
        if soft_deleted != self.soft_deleted_streams {
            return Err(format!(
                "{} soft-deleted streams counted, {soft_deleted} in the registry",
                self.soft_deleted_streams
            ));
        }
        // The reference profile's gauges drift (they saturate: see
        // `docs/profiles.md`); the corrected profile's never do.
        if !self.corrected() {
            return Ok(());
        }
        for bucket in &self.buckets {
            let usage = self.usage.usage(bucket).copied().unwrap_or_default();
            if !gauges.contains_key(bucket.as_str())
                && (usage.stream_count != 0 || usage.retained_bytes != 0)
            {
                return Err(format!(
                    "bucket '{bucket}': usage counts {} streams and {} retained bytes, it has none",
                    usage.stream_count, usage.retained_bytes
                ));
            }
        }
        for (bucket, &(streams, retained_bytes)) in &gauges {
            let usage = self.usage.usage(bucket).copied().unwrap_or_default();
            if usage.stream_count != streams || usage.retained_bytes != retained_bytes {
                return Err(format!(
                    "bucket '{bucket}': usage counts {} streams and {} retained bytes, \
                     its streams are {streams} holding {retained_bytes}",
                    usage.stream_count, usage.retained_bytes
                ));
            }
        }
        Ok(())
    }

    /// Counts `n` more hot bytes. The count is the sum of every stream's
    /// hot chunks, so it cannot overflow: debug builds assert it, release
    /// builds saturate rather than wrap.
    #[inline]
    #[track_caller]
    pub(crate) fn add_hot_bytes(&mut self, n: u64) {
        debug_assert!(
            self.hot_bytes.checked_add(n).is_some(),
            "hot bytes {} + {n} overflow",
            self.hot_bytes
        );
        self.hot_bytes = self.hot_bytes.saturating_add(n);
    }

    /// Counts `n` fewer hot bytes: bytes the count holds, so debug builds
    /// assert it does not go below zero (an accounting error), release
    /// builds saturate.
    #[inline]
    #[track_caller]
    pub(crate) fn remove_hot_bytes(&mut self, n: u64) {
        debug_assert!(
            self.hot_bytes >= n,
            "removing {n} hot bytes of {} counted",
            self.hot_bytes
        );
        self.hot_bytes = self.hot_bytes.saturating_sub(n);
    }

    fn check_path_index(&self) -> Result<(), String> {
        self.registry.check_path_index()
    }

    /// [`StreamStateMachine::check_invariants`] in debug builds: panics on
    /// a broken invariant (a bug in the machine, never bad input).
    #[inline]
    #[track_caller]
    pub(crate) fn debug_check_invariants(&self) {
        #[cfg(debug_assertions)]
        if DEBUG_CHECKS.load(Ordering::Relaxed)
            && let Err(broken) = self.check_invariants()
        {
            panic!("machine invariant broken: {broken}");
        }
    }
}

/// Whether debug builds check the invariants after every change.
static DEBUG_CHECKS: AtomicBool = AtomicBool::new(true);

/// Turns the debug builds' invariant check after every change off or on
/// for the whole process (on by default). Only for tests that measure the
/// machine itself, such as its allocations per append, which the check's
/// own work would distort.
#[doc(hidden)]
pub fn set_debug_invariant_checks(enabled: bool) {
    DEBUG_CHECKS.store(enabled, Ordering::Relaxed);
}
