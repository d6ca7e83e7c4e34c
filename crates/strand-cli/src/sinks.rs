//! The [`SnapshotSink`]s the commands read snapshots into: one that
//! restores a state machine ([`RestoreSink`]) and one that only validates
//! and keeps the group-level parts ([`ValidateSink`]). Both count what
//! they see ([`Counts`]).

use serde::Serialize;
use strand::{
    MachineRestorer, SnapshotSink, SnapshotTail, SnapshotValidator, StreamSnapshot,
    StreamSnapshotEntry, StreamSnapshotError, StreamStateMachine,
};

fn count(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}

/// Counts describing a snapshot, gathered while it is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Counts {
    /// Active buckets.
    pub(crate) buckets: u64,
    /// Erased (purged) buckets.
    pub(crate) erased_buckets: u64,
    /// Streams.
    pub(crate) streams: u64,
    /// Hot payload bytes over all streams.
    pub(crate) hot_bytes: u64,
    /// Producer states over all streams.
    pub(crate) producers: u64,
    /// Pending cold GC entries.
    pub(crate) pending_cold_gc: u64,
}

impl Counts {
    fn begin(&mut self, buckets: &[String], erased: &[String]) {
        self.buckets = count(buckets.len());
        self.erased_buckets = count(erased.len());
    }

    fn entry(&mut self, entry: &StreamSnapshotEntry) {
        self.streams = self.streams.saturating_add(1);
        self.hot_bytes = self.hot_bytes.saturating_add(count(entry.payload.len()));
        self.producers = self
            .producers
            .saturating_add(count(entry.producer_states.len()));
    }

    /// One line: `N buckets, N streams, N bytes hot, N producers, N
    /// pending GC entries`.
    pub(crate) fn line(&self) -> String {
        format!(
            "{} buckets, {} streams, {} bytes hot, {} producers, {} pending GC entries",
            self.buckets, self.streams, self.hot_bytes, self.producers, self.pending_cold_gc
        )
    }
}

/// Restores a [`StreamStateMachine`] through a [`MachineRestorer`]: the
/// same checks, in the same order, as `StreamStateMachine::restore`.
#[derive(Debug, Default)]
pub(crate) struct RestoreSink {
    restorer: Option<MachineRestorer>,
    machine: Option<StreamStateMachine>,
    counts: Counts,
}

impl RestoreSink {
    /// The restorer. The decoders always call `begin` first; an entry
    /// without it is checked against no buckets at all (and fails
    /// `MissingBucket`).
    fn take_restorer(&mut self) -> Result<MachineRestorer, StreamSnapshotError> {
        match self.restorer.take() {
            Some(restorer) => Ok(restorer),
            None => MachineRestorer::new(Vec::new(), Vec::new()),
        }
    }

    /// The restored machine (`None` if the snapshot never finished) and the
    /// counts.
    pub(crate) fn into_parts(self) -> (Option<StreamStateMachine>, Counts) {
        (self.machine, self.counts)
    }
}

impl SnapshotSink for RestoreSink {
    fn begin(
        &mut self,
        buckets: Vec<String>,
        erased_buckets: Vec<String>,
    ) -> Result<(), StreamSnapshotError> {
        self.counts.begin(&buckets, &erased_buckets);
        self.restorer = Some(MachineRestorer::new(buckets, erased_buckets)?);
        Ok(())
    }

    fn entry(&mut self, entry: StreamSnapshotEntry) -> Result<(), StreamSnapshotError> {
        self.counts.entry(&entry);
        let restorer = self.take_restorer()?;
        self.restorer.insert(restorer).push_entry(entry)
    }

    fn finish(&mut self, tail: SnapshotTail) -> Result<(), StreamSnapshotError> {
        self.counts.pending_cold_gc = count(tail.pending_cold_gc.len());
        let restorer = self.take_restorer()?;
        self.machine = Some(restorer.finish(tail)?);
        Ok(())
    }
}

/// Validates a snapshot with restore's checks ([`SnapshotValidator`])
/// without building a machine, keeping only the group-level parts (the
/// snapshot minus its streams) and the counts. Memory: the stream ids seen
/// so far, not their contents.
#[derive(Debug, Default)]
pub(crate) struct ValidateSink {
    validator: Option<SnapshotValidator>,
    head: StreamSnapshot,
    counts: Counts,
}

impl ValidateSink {
    /// The snapshot without its streams, and the counts.
    pub(crate) fn into_parts(self) -> (StreamSnapshot, Counts) {
        (self.head, self.counts)
    }
}

impl SnapshotSink for ValidateSink {
    fn begin(
        &mut self,
        buckets: Vec<String>,
        erased_buckets: Vec<String>,
    ) -> Result<(), StreamSnapshotError> {
        self.counts.begin(&buckets, &erased_buckets);
        self.validator = Some(SnapshotValidator::new(&buckets, &erased_buckets)?);
        self.head.buckets = buckets;
        self.head.erased_buckets = erased_buckets;
        Ok(())
    }

    fn entry(&mut self, entry: StreamSnapshotEntry) -> Result<(), StreamSnapshotError> {
        self.counts.entry(&entry);
        self.validator
            .get_or_insert_with(SnapshotValidator::default)
            .check_entry(&entry)?;
        Ok(())
    }

    fn finish(&mut self, tail: SnapshotTail) -> Result<(), StreamSnapshotError> {
        self.counts.pending_cold_gc = count(tail.pending_cold_gc.len());
        if let Some(validator) = &self.validator {
            validator.check_forks(&tail.fork_unpins)?;
        }
        tail.install(&mut self.head);
        Ok(())
    }
}
