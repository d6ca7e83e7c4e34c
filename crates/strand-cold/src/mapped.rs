//! Segment files mapped into memory, so that a read the page cache holds
//! is answered with the cached pages themselves: the response is written
//! from them to the socket, without copying the bytes into the heap first
//! (and without zeroing a buffer for them).
//!
//! This module holds the crate's only `unsafe` code: the mapping itself
//! and the `mincore` residency check. What makes it sound is an invariant
//! of [`crate::LocalSegments`]: a segment file is never written after it is
//! renamed into place. A put writes a temporary file and renames it over
//! the name (a mapping keeps the old file), a delete unlinks it (a mapping
//! keeps it alive until unmapped), so the bytes under a mapping never
//! change. A process that truncates a node's segment file while the node
//! runs breaks that contract (as it would break any database's files);
//! `docs/durability.md` says so.
//!
//! Only pages the page cache holds are handed out ([`Mapped::resident`]),
//! so serving them does no disk I/O on a runtime thread; a range that is
//! not cached is read on the blocking pool, as before.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

/// A whole file, mapped read-only.
#[derive(Debug)]
pub(crate) struct Mapped {
    map: memmap2::Mmap,
}

/// Pages checked per `mincore` call (a stack buffer of one byte each).
const PAGES_PER_CHECK: usize = 256;

fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| rustix::param::page_size().max(1))
}

impl Mapped {
    /// Maps `file` read-only.
    ///
    /// # Errors
    /// The mapping failed (an empty file, or the process's mapping limit).
    pub(crate) fn map(file: &File) -> io::Result<Arc<Self>> {
        // SAFETY: the mapped file is a segment file, never written after
        // it was renamed into place and never truncated by strand (module
        // documentation), so the memory behind the mapping does not change
        // while it is mapped.
        let map = unsafe { memmap2::Mmap::map(file) }?;
        Ok(Arc::new(Self { map }))
    }

    /// The bytes of `range` sharing the mapping, when the page cache holds
    /// every page of it; `None` when some page is not cached or the range
    /// is not inside the file.
    pub(crate) fn resident(self: &Arc<Self>, range: &Range<u64>) -> Option<Bytes> {
        let start = usize::try_from(range.start).ok()?;
        let end = usize::try_from(range.end).ok()?;
        if start >= end || end > self.map.len() {
            return None;
        }
        let page = page_size();
        let base = self.map.as_ptr() as usize;
        // The mapping starts on a page, so rounding down stays inside it.
        let mut at = (base + start) & !(page - 1);
        let stop = base + end;
        let mut cached = [0u8; PAGES_PER_CHECK];
        while at < stop {
            let len = (stop - at).min(PAGES_PER_CHECK * page);
            let pages = len.div_ceil(page);
            // SAFETY: `[at, at + len)` lies inside the mapping (`at` is
            // page-aligned at or after its start, `at + len <= stop`, the
            // end of `range`, which is inside it), and `cached` has room
            // for the `pages <= PAGES_PER_CHECK` bytes mincore writes.
            let rc = unsafe { libc::mincore(at as *mut libc::c_void, len, cached.as_mut_ptr()) };
            if rc != 0 || cached.get(..pages)?.iter().any(|b| b & 1 == 0) {
                return None;
            }
            at += len;
        }
        Some(Bytes::from_owner(MappedRange {
            map: Arc::clone(self),
            range: start..end,
        }))
    }
}

/// A range of a mapping, as the owner of a [`Bytes`].
struct MappedRange {
    map: Arc<Mapped>,
    range: Range<usize>,
}

impl AsRef<[u8]> for MappedRange {
    fn as_ref(&self) -> &[u8] {
        self.map.map.get(self.range.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file of `content` (synced) in a new temporary directory, opened
    /// for reading; the directory lives as long as the guard.
    fn file_of(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(content).unwrap();
        f.sync_all().unwrap();
        let file = File::open(&path).unwrap();
        (dir, path, file)
    }

    #[test]
    fn a_cached_range_is_served_from_the_mapping_byte_exact() {
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (_dir, _, file) = file_of(&content);
        // Just written: the page cache holds it.
        let map = Mapped::map(&file).unwrap();
        for range in [0..1u64, 5..4_100, 4_095..4_097, 12_345..200_000, 0..200_000] {
            let got = map.resident(&range).unwrap();
            let want = content
                .get(range.start as usize..range.end as usize)
                .unwrap();
            assert_eq!(&got[..], want, "{range:?}");
        }
        // Slices of the answer stay inside it.
        let part = map.resident(&(100..300)).unwrap().slice(50..60);
        assert_eq!(&part[..], content.get(150..160).unwrap());
    }

    #[test]
    fn ranges_outside_the_file_or_empty_are_refused() {
        let (_dir, _, file) = file_of(&[7u8; 5000]);
        let map = Mapped::map(&file).unwrap();
        assert!(map.resident(&(4_000..5_001)).is_none());
        assert!(map.resident(&(10..10)).is_none());
        assert!(map.resident(&(u64::MAX - 1..u64::MAX)).is_none());
        assert_eq!(map.resident(&(4_000..5_000)).unwrap().len(), 1_000);
    }

    #[test]
    fn pages_the_page_cache_dropped_are_not_handed_out() {
        let (_dir, _, file) = file_of(&[3u8; 64 * 1024]);
        let map = Mapped::map(&file).unwrap();
        assert!(map.resident(&(0..65_536)).is_some());
        // Clean pages leave the page cache on request (the temporary
        // directory is on a disk filesystem here, not tmpfs).
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        assert!(map.resident(&(0..65_536)).is_none());
    }

    #[test]
    fn the_mapping_outlives_the_file_name() {
        let (_dir, path, file) = file_of(b"still here");
        let map = Mapped::map(&file).unwrap();
        let bytes = map.resident(&(0..10)).unwrap();
        drop(map);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(&bytes[..], b"still here");
    }
}
