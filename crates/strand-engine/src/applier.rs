//! The log's side of a group: how a replicated log applies committed
//! entries to the group's machine, snapshots it and restores it, always
//! through the group's owner task ([`GroupApplier`]).

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::error::EngineError;
use crate::log::{EntryOutcome, GroupEntry, GroupLog};
use crate::replica::ReplicaSlot;

/// A message from a group's log to its owner task.
pub(crate) enum LogInput {
    /// The log is ready: start serving requests through it.
    Attach(Arc<dyn GroupLog>),
    /// Apply committed entries, in order.
    Apply {
        entries: Vec<GroupEntry>,
        reply: oneshot::Sender<Vec<EntryOutcome>>,
    },
    /// Write the machine's binary snapshot into `sink`.
    Snapshot {
        sink: Box<dyn SnapshotSink>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// Replace the machine with one a snapshot restored.
    Install {
        machine: Box<strand::StreamStateMachine>,
        reply: oneshot::Sender<()>,
    },
    /// Replace the machine with an empty one of the same options.
    Reset { reply: oneshot::Sender<()> },
}

/// The handle a group's log uses to apply committed entries to the
/// group's machine, snapshot it and restore it. Every call is served by
/// the group's owner task in the order the calls were made. Cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct GroupApplier {
    group: usize,
    tx: mpsc::UnboundedSender<LogInput>,
    replica: ReplicaSlot,
}

impl GroupApplier {
    pub(crate) fn new(
        group: usize,
        tx: mpsc::UnboundedSender<LogInput>,
        replica: ReplicaSlot,
    ) -> Self {
        Self { group, tx, replica }
    }

    /// The group's index.
    pub fn group(&self) -> usize {
        self.group
    }

    /// Sends the group's task a message (a group that has stopped takes
    /// none).
    pub(crate) fn send(&self, input: LogInput) {
        let _ = self.tx.send(input);
    }

    /// Applies committed entries in order; one outcome per entry. With a
    /// [`SegmentReplica`](crate::SegmentReplica) installed, returns once
    /// it has settled what the entries handed it.
    ///
    /// # Errors
    /// [`EngineError::Shutdown`] when the group's task has ended.
    pub async fn apply(&self, entries: Vec<GroupEntry>) -> Result<Vec<EntryOutcome>, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(LogInput::Apply { entries, reply })
            .map_err(|_| EngineError::Shutdown)?;
        let outcomes = rx.await.map_err(|_| EngineError::Shutdown)?;
        if let Some(replica) = self.replica.get() {
            replica.settle(self.group).await;
        }
        Ok(outcomes)
    }

    /// Starts a snapshot of the machine's state after every entry applied
    /// so far (the request is queued now): the binary snapshot
    /// (`docs/snapshot-format.md`) is encoded into `sink` on a blocking
    /// thread, from a copy of the machine, so the group goes on serving
    /// meanwhile and the snapshot is never held whole in memory;
    /// [`PendingSnapshot::wait`] returns once [`SnapshotSink::finish`] has.
    pub fn snapshot_into(&self, sink: Box<dyn SnapshotSink>) -> PendingSnapshot {
        let (reply, rx) = oneshot::channel();
        match self.tx.send(LogInput::Snapshot { sink, reply }) {
            Ok(()) => PendingSnapshot(Some(rx)),
            Err(_) => PendingSnapshot(None),
        }
    }

    /// Replaces the machine with the one a snapshot (either format) read
    /// from `reader` restores; parked readers are woken to read again. A
    /// binary snapshot is decoded as it is read (on a blocking thread), so
    /// only the machine being built is held, not the snapshot's bytes.
    ///
    /// # Errors
    /// The snapshot's read, decode or restore error, or that the group
    /// stopped.
    pub async fn restore_from(&self, reader: Box<dyn std::io::Read + Send>) -> Result<(), String> {
        let machine = tokio::task::spawn_blocking(move || {
            strand::restore_from(std::io::BufReader::with_capacity(256 << 10, reader))
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| format!("the snapshot restore stopped: {e}"))??;
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(LogInput::Install {
                machine: Box::new(machine),
                reply,
            })
            .map_err(|_| "the group has stopped".to_owned())?;
        rx.await.map_err(|_| "the group has stopped".to_owned())
    }
}

impl GroupApplier {
    /// Replaces the machine with an empty one (the same options): the
    /// log forgot the group (this node is no longer one of its members)
    /// and starts it again from nothing. Parked readers are woken.
    ///
    /// # Errors
    /// The group has stopped.
    pub async fn reset(&self) -> Result<(), String> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(LogInput::Reset { reply })
            .map_err(|_| "the group has stopped".to_owned())?;
        rx.await.map_err(|_| "the group has stopped".to_owned())
    }
}

/// Where a group's snapshot goes (a file, for a durable group): the
/// encoder writes the binary snapshot into it on a blocking thread, then
/// calls [`finish`](SnapshotSink::finish) once.
pub trait SnapshotSink: std::io::Write + Send + 'static {
    /// Called once the whole snapshot is written (and flushed): make it
    /// durable. An error fails the snapshot.
    ///
    /// # Errors
    /// Whatever making the bytes durable failed with.
    fn finish(&mut self) -> std::io::Result<()>;
}

/// Encodes `machine`'s binary snapshot into `sink` (`write_snapshot`
/// flushes it), then finishes it.
pub(crate) fn encode_snapshot(
    machine: &strand::StreamStateMachine,
    mut sink: Box<dyn SnapshotSink>,
) -> Result<(), String> {
    strand::write_snapshot(machine, strand::SnapshotFormat::Binary, &mut sink)
        .map_err(|e| e.to_string())?;
    sink.finish().map_err(|e| e.to_string())
}

/// A snapshot requested from a group's task.
#[derive(Debug)]
pub struct PendingSnapshot(Option<oneshot::Receiver<Result<(), String>>>);

impl PendingSnapshot {
    /// Waits until the snapshot is written and finished.
    ///
    /// # Errors
    /// The codec's or the sink's error, or that the group stopped.
    pub async fn wait(self) -> Result<(), String> {
        match self.0 {
            Some(rx) => rx
                .await
                .unwrap_or_else(|_| Err("the group has stopped".to_owned())),
            None => Err("the group has stopped".to_owned()),
        }
    }
}
