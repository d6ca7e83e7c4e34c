//! One bucket's live streams ordered by path (`affinity/stream`, or
//! `stream` without an affinity key), for listings: arena indices only, 4
//! bytes a stream, in sorted chunks of at most [`CHUNK`] so an insert or
//! removal moves at most a chunk. Comparisons read the ids from the
//! registry's arena (the caller passes the lookup), so no path is stored
//! twice; ties (two ids with one path, which validation never lets in)
//! are broken by arena index, so the order is total.

use std::cmp::Ordering;
use std::ops::Bound;

use strand_model::BucketStreamId;

/// The most indices a chunk holds before it splits.
const CHUNK: usize = 256;

/// The bytes of an id's path, without building it.
fn path_bytes(id: &BucketStreamId) -> impl Iterator<Item = u8> + '_ {
    let affinity = id.affinity_key.as_deref().map(str::as_bytes);
    affinity
        .into_iter()
        .flat_map(|a| a.iter().copied().chain(std::iter::once(b'/')))
        .chain(id.stream_id.bytes())
}

/// An id's path against a path given as text.
pub(crate) fn cmp_path_str(id: &BucketStreamId, path: &str) -> Ordering {
    path_bytes(id).cmp(path.bytes())
}

/// An id's path, built.
pub(crate) fn path_of(id: &BucketStreamId) -> String {
    match &id.affinity_key {
        Some(affinity) => format!("{affinity}/{}", id.stream_id),
        None => id.stream_id.clone(),
    }
}

/// The ordered indices of one bucket.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathIndex {
    /// Sorted, none empty, each at most `CHUNK` long after an insert.
    chunks: Vec<Vec<u32>>,
}

impl PathIndex {
    /// How many streams it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    /// Whether it holds none.
    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// `(path, index)` order of two indices; `id` reads an index's id.
    fn cmp<'a>(id: &impl Fn(u32) -> Option<&'a BucketStreamId>, a: u32, b: u32) -> Ordering {
        match (id(a), id(b)) {
            (Some(x), Some(y)) => path_bytes(x).cmp(path_bytes(y)).then(a.cmp(&b)),
            _ => a.cmp(&b),
        }
    }

    /// The chunk and position where `index` is or would go.
    fn locate<'a>(
        &self,
        id: &impl Fn(u32) -> Option<&'a BucketStreamId>,
        index: u32,
    ) -> (usize, usize) {
        let chunk = self
            .chunks
            .partition_point(|c| {
                c.last()
                    .is_some_and(|&last| Self::cmp(id, last, index) == Ordering::Less)
            })
            .min(self.chunks.len().saturating_sub(1));
        let position = self.chunks.get(chunk).map_or(0, |c| {
            c.partition_point(|&i| Self::cmp(id, i, index) == Ordering::Less)
        });
        (chunk, position)
    }

    /// Adds `index` (whose id `id` already reads).
    pub(crate) fn insert<'a>(
        &mut self,
        id: impl Fn(u32) -> Option<&'a BucketStreamId>,
        index: u32,
    ) {
        if self.chunks.is_empty() {
            self.chunks.push(vec![index]);
            return;
        }
        let (chunk, position) = self.locate(&id, index);
        let c = &mut self.chunks[chunk];
        c.insert(position, index);
        if c.len() > CHUNK {
            let tail = c.split_off(c.len() / 2);
            self.chunks.insert(chunk + 1, tail);
        }
    }

    /// Removes `index` (whose id `id` still reads); false when absent.
    pub(crate) fn remove<'a>(
        &mut self,
        id: impl Fn(u32) -> Option<&'a BucketStreamId>,
        index: u32,
    ) -> bool {
        if self.chunks.is_empty() {
            return false;
        }
        let (chunk, position) = self.locate(&id, index);
        let c = &mut self.chunks[chunk];
        if c.get(position) != Some(&index) {
            return false;
        }
        c.remove(position);
        if c.is_empty() {
            self.chunks.remove(chunk);
        }
        true
    }

    /// The indices from the first path not below `from`, in order.
    pub(crate) fn range_from<'a, 'b>(
        &'b self,
        id: impl Fn(u32) -> Option<&'a BucketStreamId>,
        from: Bound<&str>,
    ) -> impl Iterator<Item = u32> + 'b {
        let before = |i: u32| match (id(i), from) {
            (_, Bound::Unbounded) | (None, _) => false,
            (Some(x), Bound::Included(p)) => cmp_path_str(x, p) == Ordering::Less,
            (Some(x), Bound::Excluded(p)) => cmp_path_str(x, p) != Ordering::Greater,
        };
        let chunk = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|&last| before(last)));
        let position = self
            .chunks
            .get(chunk)
            .map_or(0, |c| c.partition_point(|&i| before(i)));
        self.chunks
            .iter()
            .skip(chunk)
            .enumerate()
            .flat_map(move |(n, c)| c[if n == 0 { position } else { 0 }..].iter().copied())
    }

    /// Every index, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.chunks.iter().flatten().copied()
    }

    /// Checks the order and the chunks' shape.
    pub(crate) fn check<'a>(
        &self,
        id: impl Fn(u32) -> Option<&'a BucketStreamId>,
    ) -> Result<(), String> {
        if self.chunks.iter().any(Vec::is_empty) {
            return Err("an empty chunk".into());
        }
        let all: Vec<u32> = self.iter().collect();
        if let Some(w) = all
            .windows(2)
            .find(|w| Self::cmp(&id, w[0], w[1]) != Ordering::Less)
        {
            return Err(format!("indices {} and {} out of path order", w[0], w[1]));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ordered_through_splits_and_removals() {
        let ids: Vec<BucketStreamId> = (0..2000u32)
            .map(|n| {
                // A spread of paths, affinity ones among them.
                let k = (n * 7919) % 2000;
                if k % 3 == 0 {
                    BucketStreamId::with_affinity("b", format!("a{}", k % 10), format!("s{k}"))
                } else {
                    BucketStreamId::new("b", format!("s{k}"))
                }
            })
            .collect();
        let id = |i: u32| ids.get(i as usize);
        let mut index = PathIndex::default();
        for i in 0..2000 {
            index.insert(id, i);
        }
        index.check(id).unwrap();
        assert_eq!(index.len(), 2000);
        for i in (0..2000).step_by(3) {
            assert!(index.remove(id, i));
        }
        assert!(!index.remove(id, 0));
        index.check(id).unwrap();
        let mut sorted: Vec<String> = (0..2000)
            .filter(|i| i % 3 != 0)
            .map(|i| path_of(&ids[i as usize]))
            .collect();
        sorted.sort();
        let listed: Vec<String> = index.iter().map(|i| path_of(&ids[i as usize])).collect();
        assert_eq!(listed, sorted);
        // Ranges from any bound.
        for bound in ["", "a5/", "a5/s1", "s1", "s5", "zzz"] {
            let from: Vec<String> = index
                .range_from(id, Bound::Included(bound))
                .map(|i| path_of(&ids[i as usize]))
                .collect();
            let want: Vec<String> = sorted
                .iter()
                .filter(|p| p.as_str() >= bound)
                .cloned()
                .collect();
            assert_eq!(from, want, "{bound}");
            let after: Vec<String> = index
                .range_from(id, Bound::Excluded(bound))
                .map(|i| path_of(&ids[i as usize]))
                .collect();
            let want: Vec<String> = sorted
                .iter()
                .filter(|p| p.as_str() > bound)
                .cloned()
                .collect();
            assert_eq!(after, want, "after {bound}");
        }
        for i in 0..2000 {
            index.remove(id, i);
        }
        assert!(index.is_empty());
    }
}
