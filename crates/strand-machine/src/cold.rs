//! Per-stream cold state and the derived cold frontier (spec 05 §2).

use strand_model::{ColdChunkRef, ObjectPayloadRef};

/// What the cold tier holds for one stream. The stored lists are rare (only
/// shared flushes and restores fill them), so they live behind one box.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ColdState {
    /// Last recorded cold end (assigned by flushes, raised by external data).
    pub(crate) raw_frontier: u64,
    lists: Option<Box<ColdLists>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ColdLists {
    /// Stored chunks: only `shared_object` flushes, or restored chunks.
    chunks: Vec<ColdChunkRef>,
    /// Stored external segments: filled by restore, and by external writes
    /// in the corrected profile.
    external: Vec<ObjectPayloadRef>,
}

impl ColdState {
    /// No cold data.
    pub(crate) const EMPTY: Self = Self {
        raw_frontier: 0,
        lists: None,
    };

    /// Cold state as a snapshot entry describes it.
    pub(crate) fn restored(
        raw_frontier: u64,
        chunks: Vec<ColdChunkRef>,
        external: Vec<ObjectPayloadRef>,
    ) -> Self {
        let lists = (!chunks.is_empty() || !external.is_empty())
            .then(|| Box::new(ColdLists { chunks, external }));
        Self {
            raw_frontier,
            lists,
        }
    }

    /// Stored cold chunks, in stored order.
    pub(crate) fn chunks(&self) -> &[ColdChunkRef] {
        self.lists.as_ref().map_or(&[], |l| l.chunks.as_slice())
    }

    /// Stored external segments, in stored order.
    pub(crate) fn external(&self) -> &[ObjectPayloadRef] {
        self.lists.as_ref().map_or(&[], |l| l.external.as_slice())
    }

    /// Stores a shared chunk. The list grows by an eighth when full, not
    /// by doubling: a stream's chunk references are most of what a
    /// flushed stream keeps in memory, and doubling left up to half of
    /// each list's capacity unused.
    pub(crate) fn push_chunk(&mut self, chunk: ColdChunkRef) {
        let chunks = &mut self.lists.get_or_insert_default().chunks;
        if chunks.len() == chunks.capacity() {
            chunks.reserve_exact((chunks.len() / 8).max(4));
        }
        chunks.push(chunk);
    }

    /// Stores an external segment (corrected profile).
    pub(crate) fn push_external(&mut self, segment: ObjectPayloadRef) {
        self.lists.get_or_insert_default().external.push(segment);
    }

    /// How many stored chunks equal one of `chunks` (what
    /// [`ColdState::remove_chunks`] would remove).
    pub(crate) fn count_chunks(&self, chunks: &[ColdChunkRef]) -> usize {
        self.chunks()
            .iter()
            .filter(|stored| chunks.contains(stored))
            .count()
    }

    /// Removes every stored chunk equal to one of `chunks`; returns how many.
    pub(crate) fn remove_chunks(&mut self, chunks: &[ColdChunkRef]) -> usize {
        let Some(lists) = self.lists.as_mut() else {
            return 0;
        };
        let before = lists.chunks.len();
        lists.chunks.retain(|stored| !chunks.contains(stored));
        before - lists.chunks.len()
    }

    /// True when the stream ever had cold objects (its removal enqueues a
    /// `Stream` GC entry).
    pub(crate) fn has_cold_objects(&self) -> bool {
        self.raw_frontier > 0 || !self.chunks().is_empty() || !self.external().is_empty()
    }

    /// The effective cold frontier for retained offset `retained`.
    pub(crate) fn frontier(&self, retained: u64) -> u64 {
        let base = self.raw_frontier.max(retained);
        let external = self.external();
        if external.is_empty() {
            return base;
        }
        let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(external.len() + 1);
        if base > retained {
            ranges.push((retained, base));
        }
        ranges.extend(external.iter().map(|s| (s.start_offset, s.end_offset)));
        walk_ranges(retained, &mut ranges)
    }

    /// Removes chunks and external segments that end at or below `retained`;
    /// returns the paths of the removed chunks in list order.
    pub(crate) fn drop_below(&mut self, retained: u64) -> Vec<String> {
        let mut dropped = Vec::new();
        if let Some(lists) = self.lists.as_mut() {
            lists.chunks.retain(|c| {
                if c.end_offset <= retained {
                    dropped.push(c.s3_path.clone());
                    false
                } else {
                    true
                }
            });
            lists.external.retain(|s| s.end_offset > retained);
        }
        dropped
    }

    /// Paths of stored shared chunks, in list order (duplicates kept).
    pub(crate) fn shared_paths(&self) -> Vec<String> {
        self.chunks()
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
