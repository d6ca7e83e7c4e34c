//! Per-stream cold state and the derived cold frontier (spec 05 §2).

use strand_model::{ColdChunkRef, ObjectPayloadRef};

/// What the cold tier holds for one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ColdState {
    /// Last recorded cold end (assigned by flushes, raised by external data).
    pub(crate) raw_frontier: u64,
    /// Stored chunks: only `shared_object` flushes, or restored chunks.
    pub(crate) chunks: Vec<ColdChunkRef>,
    /// Stored external segments: only ever filled by restore.
    pub(crate) external: Vec<ObjectPayloadRef>,
}

impl ColdState {
    /// True when the stream ever had cold objects (its removal enqueues a
    /// `Stream` GC entry).
    pub(crate) fn has_cold_objects(&self) -> bool {
        self.raw_frontier > 0 || !self.chunks.is_empty() || !self.external.is_empty()
    }

    /// The effective cold frontier for retained offset `retained`.
    pub(crate) fn frontier(&self, retained: u64) -> u64 {
        let base = self.raw_frontier.max(retained);
        if self.external.is_empty() {
            return base;
        }
        let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(self.external.len() + 1);
        if base > retained {
            ranges.push((retained, base));
        }
        ranges.extend(self.external.iter().map(|s| (s.start_offset, s.end_offset)));
        walk_ranges(retained, &mut ranges)
    }

    /// Removes chunks and external segments that end at or below `retained`;
    /// returns the paths of the removed chunks in list order.
    pub(crate) fn drop_below(&mut self, retained: u64) -> Vec<String> {
        let mut dropped = Vec::new();
        self.chunks.retain(|c| {
            if c.end_offset <= retained {
                dropped.push(c.s3_path.clone());
                false
            } else {
                true
            }
        });
        self.external.retain(|s| s.end_offset > retained);
        dropped
    }

    /// Paths of stored shared chunks, in list order (duplicates kept).
    pub(crate) fn shared_paths(&self) -> Vec<String> {
        self.chunks
            .iter()
            .filter(|c| c.shared_object)
            .map(|c| c.s3_path.clone())
            .collect()
    }
}

/// Sorts `ranges` and advances a cursor from `start` through every range
/// that touches it; returns the final cursor.
pub(crate) fn walk_ranges(start: u64, ranges: &mut [(u64, u64)]) -> u64 {
    ranges.sort_unstable();
    let mut frontier = start;
    for &(s, e) in ranges.iter() {
        if e <= frontier {
            continue;
        }
        if s > frontier {
            break;
        }
        frontier = e;
    }
    frontier
}
