//! Where a streaming decoder delivers a snapshot, part by part.

use crate::error::StreamSnapshotError;
use crate::wire::{SnapshotTail, StreamSnapshot, StreamSnapshotEntry};

/// Receives a snapshot in order: [`begin`](Self::begin) once, then
/// [`entry`](Self::entry) per stream, then [`finish`](Self::finish) once —
/// only after the whole input has been verified. An error from any method
/// stops decoding; the decoder reports it as
/// [`DecodeError::Rejected`](super::DecodeError::Rejected).
pub trait SnapshotSink {
    /// The bucket lists (the first frame).
    ///
    /// # Errors
    ///
    /// A validation error that stops decoding.
    fn begin(
        &mut self,
        buckets: Vec<String>,
        erased_buckets: Vec<String>,
    ) -> Result<(), StreamSnapshotError>;

    /// The next stream entry, in snapshot order.
    ///
    /// # Errors
    ///
    /// A validation error that stops decoding.
    fn entry(&mut self, entry: StreamSnapshotEntry) -> Result<(), StreamSnapshotError>;

    /// The group-level parts that follow the streams.
    ///
    /// # Errors
    ///
    /// A validation error (the decoder reports it against the footer).
    fn finish(&mut self, tail: SnapshotTail) -> Result<(), StreamSnapshotError>;
}

/// A [`SnapshotSink`] that collects everything into a [`StreamSnapshot`]
/// (no validation: exactly what a JSON decode would give).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectSink {
    snapshot: StreamSnapshot,
}

impl CollectSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The snapshot collected so far.
    pub fn snapshot(&self) -> &StreamSnapshot {
        &self.snapshot
    }

    /// Takes the collected snapshot.
    pub fn into_snapshot(self) -> StreamSnapshot {
        self.snapshot
    }
}

impl SnapshotSink for CollectSink {
    fn begin(
        &mut self,
        buckets: Vec<String>,
        erased_buckets: Vec<String>,
    ) -> Result<(), StreamSnapshotError> {
        self.snapshot.buckets = buckets;
        self.snapshot.erased_buckets = erased_buckets;
        Ok(())
    }

    fn entry(&mut self, entry: StreamSnapshotEntry) -> Result<(), StreamSnapshotError> {
        self.snapshot.streams.push(entry);
        Ok(())
    }

    fn finish(&mut self, tail: SnapshotTail) -> Result<(), StreamSnapshotError> {
        tail.install(&mut self.snapshot);
        Ok(())
    }
}
