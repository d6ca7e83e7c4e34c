//! Per-stream cold state and the derived cold frontier (spec 05 §2).

use std::sync::{Arc, OnceLock};

use strand_model::{ColdChunkRef, ObjectPayloadRef};

use crate::gc::SharedObjects;

/// What the cold tier holds for one stream. The stored lists are rare (only
/// shared flushes and restores fill them), so they live behind one box.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ColdState {
    /// Last recorded cold end (assigned by flushes, raised by external data).
    pub(crate) raw_frontier: u64,
    lists: Option<Box<ColdLists>>,
}

#[derive(Debug, Default)]
struct ColdLists {
    /// Stored chunks: only `shared_object` flushes, or restored chunks.
    chunks: Vec<StoredChunk>,
    /// Stored external segments: filled by restore, and by external writes
    /// in the corrected profile.
    external: Vec<ObjectPayloadRef>,
    /// `chunks` in the reference's form, built by the first
    /// [`ColdState::chunk_refs`] after a change (only the reference's
    /// `cold_chunks` query asks for it) and dropped by the next change.
    view: OnceLock<Vec<ColdChunkRef>>,
}

impl Clone for ColdLists {
    fn clone(&self) -> Self {
        Self {
            chunks: self.chunks.clone(),
            external: self.external.clone(),
            view: OnceLock::new(),
        }
    }
}

impl PartialEq for ColdLists {
    fn eq(&self, other: &Self) -> bool {
        self.chunks == other.chunks && self.external == other.external
    }
}

impl Eq for ColdLists {}

/// A stored cold chunk, held in less memory than a [`ColdChunkRef`]: a
/// flushed piece of a stream keeps one for as long as it is retained, so
/// on a node with many streams they add up. The object path is shared by
/// every piece of the same object (interned through the machine's shared
/// object counts), and a canonical digest (64 lowercase hex digits) is
/// kept as its 32 bytes. Every other digest string is kept as written, so
/// [`StoredChunk::to_ref`] gives back exactly the chunk that was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredChunk {
    pub(crate) start_offset: u64,
    pub(crate) end_offset: u64,
    object_size: u64,
    object_offset: u64,
    path: Arc<str>,
    digest: ChunkDigest,
    pub(crate) shared_object: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ChunkDigest {
    /// A canonical digest, as bytes.
    Bytes([u8; 32]),
    /// Any other string (the empty digest of legacy chunks included).
    Text(Box<str>),
}

impl ChunkDigest {
    fn new(text: String) -> Self {
        canonical_digest(&text).map_or_else(|| Self::Text(text.into_boxed_str()), Self::Bytes)
    }

    fn matches(&self, text: &str) -> bool {
        match self {
            Self::Bytes(bytes) => canonical_digest(text).is_some_and(|b| b == *bytes),
            Self::Text(own) => **own == *text,
        }
    }

    fn write_into(&self, out: &mut String) {
        out.clear();
        match self {
            Self::Bytes(bytes) => out.push_str(blake3::Hash::from_bytes(*bytes).to_hex().as_str()),
            Self::Text(own) => out.push_str(own),
        }
    }
}

/// The 32 bytes of a digest written as exactly 64 lowercase hex digits.
fn canonical_digest(text: &str) -> Option<[u8; 32]> {
    let hex = text.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

impl StoredChunk {
    /// Stores `chunk`. Its object is named by `interned` when that is the
    /// same path (shared with the other chunks of the object), else by a
    /// path of its own.
    pub(crate) fn new(mut chunk: ColdChunkRef, interned: Option<Arc<str>>) -> Self {
        let path = match interned {
            Some(path) if *path == *chunk.s3_path => path,
            _ => Arc::from(std::mem::take(&mut chunk.s3_path)),
        };
        Self {
            start_offset: chunk.start_offset,
            end_offset: chunk.end_offset,
            object_size: chunk.object_size,
            object_offset: chunk.object_offset,
            path,
            digest: ChunkDigest::new(chunk.payload_digest),
            shared_object: chunk.shared_object,
        }
    }

    /// The object's path.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The size of the whole object.
    pub(crate) fn object_size(&self) -> u64 {
        self.object_size
    }

    /// True when this is the chunk `chunk` describes, field by field.
    pub(crate) fn matches(&self, chunk: &ColdChunkRef) -> bool {
        self.start_offset == chunk.start_offset
            && self.end_offset == chunk.end_offset
            && self.object_size == chunk.object_size
            && self.object_offset == chunk.object_offset
            && self.shared_object == chunk.shared_object
            && *self.path == *chunk.s3_path
            && self.digest.matches(&chunk.payload_digest)
    }

    /// The chunk in the reference's form.
    pub(crate) fn to_ref(&self) -> ColdChunkRef {
        let mut out = ColdChunkRef::default();
        self.write_into(&mut out);
        out
    }

    /// Writes the chunk into `out`, reusing its strings' buffers.
    pub(crate) fn write_into(&self, out: &mut ColdChunkRef) {
        out.start_offset = self.start_offset;
        out.end_offset = self.end_offset;
        out.s3_path.clear();
        out.s3_path.push_str(&self.path);
        out.object_size = self.object_size;
        out.object_offset = self.object_offset;
        out.shared_object = self.shared_object;
        self.digest.write_into(&mut out.payload_digest);
    }

    /// Where the chunk's bytes are, for a read plan.
    pub(crate) fn payload_ref(&self) -> ObjectPayloadRef {
        ObjectPayloadRef {
            start_offset: self.start_offset,
            end_offset: self.end_offset,
            s3_path: self.path.to_string(),
            object_size: self.object_size,
            object_offset: self.object_offset,
        }
    }
}

impl ColdState {
    /// No cold data.
    pub(crate) const EMPTY: Self = Self {
        raw_frontier: 0,
        lists: None,
    };

    /// Cold state as a snapshot entry describes it. The chunks' paths are
    /// their own until [`ColdState::retain_shared`] interns them.
    pub(crate) fn restored(
        raw_frontier: u64,
        chunks: Vec<ColdChunkRef>,
        external: Vec<ObjectPayloadRef>,
    ) -> Self {
        let lists = (!chunks.is_empty() || !external.is_empty()).then(|| {
            Box::new(ColdLists {
                chunks: chunks
                    .into_iter()
                    .map(|c| StoredChunk::new(c, None))
                    .collect(),
                external,
                view: OnceLock::new(),
            })
        });
        Self {
            raw_frontier,
            lists,
        }
    }

    /// Stored cold chunks, in stored order.
    pub(crate) fn chunks(&self) -> &[StoredChunk] {
        self.lists.as_ref().map_or(&[], |l| l.chunks.as_slice())
    }

    /// Stored cold chunks in the reference's form, in stored order. Built
    /// on first use after a change and kept until the next one, so only
    /// streams someone asked about pay for the long form.
    pub(crate) fn chunk_refs(&self) -> &[ColdChunkRef] {
        self.lists.as_ref().map_or(&[], |l| {
            l.view
                .get_or_init(|| l.chunks.iter().map(StoredChunk::to_ref).collect())
                .as_slice()
        })
    }

    /// Stored external segments, in stored order.
    pub(crate) fn external(&self) -> &[ObjectPayloadRef] {
        self.lists.as_ref().map_or(&[], |l| l.external.as_slice())
    }

    /// The lists, about to change: the reference-form view is dropped.
    fn lists_mut(&mut self) -> &mut ColdLists {
        let lists = self.lists.get_or_insert_default();
        lists.view.take();
        lists
    }

    /// Stores a shared chunk, counting a reference to its object in
    /// `shared` (whose interned path the chunk then shares). The list
    /// grows by an eighth when full, not by doubling: a stream's chunk
    /// references are most of what a flushed stream keeps in memory, and
    /// doubling left up to half of each list's capacity unused.
    pub(crate) fn push_shared_chunk(
        &mut self,
        chunk: ColdChunkRef,
        shared: &mut SharedObjects,
        bucket_id: &str,
    ) {
        let path = shared.retain(&chunk.s3_path, bucket_id);
        let chunks = &mut self.lists_mut().chunks;
        if chunks.len() == chunks.capacity() {
            chunks.reserve_exact((chunks.len() / 8).max(4));
        }
        chunks.push(StoredChunk::new(chunk, Some(path)));
    }

    /// Counts a reference in `shared` for every stored shared chunk (a
    /// restored stream), sharing the interned paths.
    pub(crate) fn retain_shared(&mut self, shared: &mut SharedObjects, bucket_id: &str) {
        let Some(lists) = self.lists.as_mut() else {
            return;
        };
        for chunk in lists.chunks.iter_mut().filter(|c| c.shared_object) {
            chunk.path = shared.retain(&chunk.path, bucket_id);
        }
    }

    /// Stores an external segment (corrected profile).
    pub(crate) fn push_external(&mut self, segment: ObjectPayloadRef) {
        self.lists_mut().external.push(segment);
    }

    /// How many stored chunks equal one of `chunks` (what
    /// [`ColdState::remove_chunks`] would remove).
    pub(crate) fn count_chunks(&self, chunks: &[ColdChunkRef]) -> usize {
        self.chunks()
            .iter()
            .filter(|stored| chunks.iter().any(|c| stored.matches(c)))
            .count()
    }

    /// Removes every stored chunk equal to one of `chunks`; returns how many.
    pub(crate) fn remove_chunks(&mut self, chunks: &[ColdChunkRef]) -> usize {
        if self.lists.is_none() {
            return 0;
        }
        let lists = self.lists_mut();
        let before = lists.chunks.len();
        lists
            .chunks
            .retain(|stored| !chunks.iter().any(|c| stored.matches(c)));
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
        if self.lists.is_some() {
            let lists = self.lists_mut();
            lists.chunks.retain(|c| {
                if c.end_offset <= retained {
                    dropped.push(c.path().to_owned());
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
            .map(|c| c.path().to_owned())
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

// A stored chunk stays at 96 bytes: its strings are shared or inline.
const _: () = assert!(std::mem::size_of::<StoredChunk>() <= 96);

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(path: &str, start: u64, digest: &str) -> ColdChunkRef {
        ColdChunkRef {
            start_offset: start,
            end_offset: start + 10,
            s3_path: path.to_owned(),
            object_size: 100,
            object_offset: start,
            shared_object: true,
            payload_digest: digest.to_owned(),
        }
    }

    #[test]
    fn every_digest_string_comes_back_as_written() {
        let canonical = blake3::hash(b"piece").to_hex().to_string();
        let digests = [
            canonical.clone(),
            canonical.to_uppercase(),
            String::new(),
            canonical[..63].to_owned(),
            format!("{canonical}0"),
            "zz".repeat(32),
            "é".repeat(32),
        ];
        for digest in digests {
            let original = chunk("g/000/p/a.pack", 5, &digest);
            let stored = StoredChunk::new(original.clone(), None);
            assert_eq!(stored.to_ref(), original, "{digest:?}");
            assert!(stored.matches(&original), "{digest:?}");
            let mut other = original.clone();
            other.payload_digest.push('0');
            assert!(!stored.matches(&other), "{digest:?}");
            let mut reused = chunk("a much longer path than the other one", 1, "x");
            stored.write_into(&mut reused);
            assert_eq!(reused, original, "{digest:?}");
        }
        let stored = StoredChunk::new(chunk("p", 0, &canonical), None);
        assert!(matches!(stored.digest, ChunkDigest::Bytes(_)));
        assert!(!stored.matches(&chunk("p", 0, &canonical.to_uppercase())));
    }

    #[test]
    fn pieces_of_one_object_share_its_path() {
        let mut shared = SharedObjects::default();
        let (mut a, mut b) = (ColdState::default(), ColdState::default());
        a.push_shared_chunk(chunk("obj", 0, ""), &mut shared, "bucket");
        b.push_shared_chunk(chunk("obj", 10, ""), &mut shared, "bucket");
        assert!(Arc::ptr_eq(&a.chunks()[0].path, &b.chunks()[0].path));
        let mut restored = ColdState::restored(20, vec![chunk("obj", 20, "")], Vec::new());
        restored.retain_shared(&mut shared, "bucket");
        assert!(Arc::ptr_eq(&a.chunks()[0].path, &restored.chunks()[0].path));
    }

    #[test]
    fn the_reference_view_follows_every_change() {
        let mut shared = SharedObjects::default();
        let mut cold = ColdState::default();
        assert!(cold.chunk_refs().is_empty());
        cold.push_shared_chunk(chunk("one", 0, ""), &mut shared, "b");
        assert_eq!(cold.chunk_refs(), &[chunk("one", 0, "")]);
        cold.push_shared_chunk(chunk("two", 10, ""), &mut shared, "b");
        assert_eq!(
            cold.chunk_refs(),
            &[chunk("one", 0, ""), chunk("two", 10, "")]
        );
        assert_eq!(cold.remove_chunks(&[chunk("one", 0, "")]), 1);
        assert_eq!(cold.chunk_refs(), &[chunk("two", 10, "")]);
        assert_eq!(cold.drop_below(20), vec!["two".to_owned()]);
        assert!(cold.chunk_refs().is_empty());
        // A clone does not carry the view, and equality ignores it.
        cold.push_shared_chunk(chunk("three", 20, ""), &mut shared, "b");
        let _ = cold.chunk_refs();
        let copy = cold.clone();
        assert_eq!(copy, cold);
        assert_eq!(copy.chunk_refs(), cold.chunk_refs());
    }
}
