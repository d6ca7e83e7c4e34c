//! A replicated group's own copy of its flushed bytes.
//!
//! In a cluster whose cold tier is each node's local segment store (no
//! object storage every node reads), the leader writes a flush's object
//! into its own store before it commits the `FlushCold` entries; every
//! other node must hold the same bytes before it drops them from its hot
//! buffer. A [`SegmentReplica`] installed on a replicated engine
//! ([`Engine::set_segment_replica`](crate::Engine::set_segment_replica))
//! gets, as the group's task applies a `FlushCold` the machine accepts,
//! the piece's bytes out of that node's own hot buffer (the machine checks
//! them against the chunk's digest), and, as it applies an `AckColdGc`,
//! what the leader reclaimed. The group's applier then awaits
//! [`SegmentReplica::settle`] before it reports the entries applied, so a
//! snapshot the log takes afterwards never names a file the node does not
//! hold durably.

use std::sync::Arc;

use bytes::Bytes;
use strand::{BucketStreamId, ColdChunkRef, ColdGcTarget, StreamCommand, StreamStateMachine};

use crate::log::LogFuture;

/// The bytes one accepted `FlushCold` took out of this node's hot buffer.
#[derive(Debug, Clone)]
pub struct FlushedPiece {
    /// The chunk the command recorded.
    pub chunk: ColdChunkRef,
    /// Its bytes, as slices of the hot buffer, in order.
    pub bytes: Vec<Bytes>,
    /// The stream offsets in the chunk where a message starts, ascending,
    /// as the machine knew them before the flush merged them away
    /// (`StreamStateMachine::message_starts`; empty for a JSON stream).
    pub message_starts: Vec<u64>,
}

/// What one applied `AckColdGc` reclaimed: the GC queue's entries it
/// acknowledged. Whoever deletes their objects must check, when it
/// deletes, that the group does not reference them again (a stream created
/// again under the same name writes under the same prefix).
#[derive(Debug, Clone, Default)]
pub struct Reclaimed {
    /// The acknowledged entries' targets.
    pub targets: Vec<ColdGcTarget>,
}

/// A node's store of its own copy of its groups' flushed bytes.
pub trait SegmentReplica: Send + Sync + std::fmt::Debug + 'static {
    /// Called by group `group`'s task as it applies an accepted
    /// `FlushCold`, before the bytes leave the hot buffer. Must not block:
    /// keep the bytes and write them in [`settle`](Self::settle).
    fn flushed(&self, group: usize, piece: FlushedPiece);

    /// Called by group `group`'s task as it applies an `AckColdGc` that
    /// acknowledged queue entries. Must not block.
    fn reclaimed(&self, group: usize, reclaimed: Reclaimed);

    /// Called by group `group`'s task when a snapshot replaced its machine
    /// (at start, or installed from the leader): the objects it names may
    /// be missing here. Must not block.
    fn restored(&self, group: usize) {
        let _ = group;
    }

    /// Makes what [`flushed`](Self::flushed) and
    /// [`reclaimed`](Self::reclaimed) handed over for `group` durable
    /// (awaited after every apply of the group).
    fn settle(&self, group: usize) -> LogFuture<()>;

    /// Gives the replica a way to fetch objects it lacks from the other
    /// nodes of its cluster (called once, by the log, when it has peers).
    fn connect(&self, peers: Arc<dyn SegmentPeers>) {
        let _ = peers;
    }
}

/// How a node fetches an object's segment file from the other nodes.
pub trait SegmentPeers: Send + Sync + std::fmt::Debug + 'static {
    /// The whole segment file of object `name` (its bytes and trailer)
    /// from the first other node that has it, at most `limit` bytes.
    ///
    /// # Errors
    /// Why no node gave it (each node's answer, in one message).
    fn fetch(&self, name: &str, limit: u64) -> LogFuture<Result<Bytes, String>>;
}

/// The hot bytes `[start, end)` of a stream, if all of them are hot.
fn hot_range(
    machine: &StreamStateMachine,
    stream_id: &BucketStreamId,
    start: u64,
    end: u64,
) -> Option<Vec<Bytes>> {
    let mut out = Vec::new();
    let mut at = start;
    while at < end {
        let want = usize::try_from(end - at).unwrap_or(usize::MAX);
        let read = machine.read_hot_through(stream_id, at, want).ok()?;
        if read.next_offset <= at {
            return None;
        }
        let mut got = read.next_offset.min(end) - at;
        for slice in read.slices {
            if got == 0 {
                break;
            }
            let take = usize::try_from(got).unwrap_or(usize::MAX).min(slice.len());
            out.push(slice.slice(..take));
            got -= take as u64;
        }
        at = read.next_offset.min(end);
    }
    Some(out)
}

/// What a command hands the replica once the machine applied it.
pub(crate) enum Capture {
    /// A `FlushCold`'s piece, handed over if the machine accepts it.
    Flush(ColdChunkRef, Option<Vec<Bytes>>, Vec<u64>),
    /// The GC entries an `AckColdGc` acknowledges.
    Gc(Vec<ColdGcTarget>),
}

impl Capture {
    /// What to keep of `command` before the machine applies it.
    pub(crate) fn before(machine: &StreamStateMachine, command: &StreamCommand) -> Option<Self> {
        match command {
            StreamCommand::FlushCold { stream_id, chunk } => Some(Self::Flush(
                chunk.clone(),
                hot_range(machine, stream_id, chunk.start_offset, chunk.end_offset),
                machine.message_starts(stream_id, chunk.start_offset, chunk.end_offset),
            )),
            StreamCommand::AckColdGc { up_to_seq } => {
                let targets: Vec<ColdGcTarget> = machine
                    .pending_cold_gc_batch(usize::MAX)
                    .into_iter()
                    .take_while(|e| e.seq <= *up_to_seq)
                    .map(|e| e.target)
                    .collect();
                (!targets.is_empty()).then_some(Self::Gc(targets))
            }
            _ => None,
        }
    }

    /// Hands the capture over once the machine answered `accepted`.
    pub(crate) fn after(self, replica: &dyn SegmentReplica, group: usize, accepted: bool) {
        if !accepted {
            return;
        }
        match self {
            Self::Flush(chunk, Some(bytes), message_starts) => replica.flushed(
                group,
                FlushedPiece {
                    chunk,
                    bytes,
                    message_starts,
                },
            ),
            Self::Flush(chunk, None, _) => tracing::error!(
                group,
                object = %chunk.s3_path,
                "an accepted FlushCold's bytes were not hot here: this node's copy of the object must come from a peer"
            ),
            Self::Gc(targets) => replica.reclaimed(group, Reclaimed { targets }),
        }
    }
}

/// Where a replicated engine keeps its [`SegmentReplica`] once installed,
/// shared by the engine, its group tasks and their appliers.
pub(crate) type ReplicaSlot = Arc<std::sync::OnceLock<Arc<dyn SegmentReplica>>>;
