//! The local segment store: a [`ColdBackend`] over files under the data
//! directory, the default tier below the hot buffers of a durable node.
//!
//! Each object is one file at its name (the names of [`crate::names`]
//! are `/`-separated `[A-Za-z0-9._~-]` parts, never `.` or `..`): its
//! bytes, then a 16-byte trailer
//!
//! ```text
//! trailer := magic "STRSEG01" (8 bytes) ‖ crc: u64 LE
//! crc     := CRC-64/XZ (crc64fast) of the object's bytes
//! ```
//!
//! so a file is `object_size + 16` bytes long. A put writes a temporary
//! file beside the final name, syncs it, renames it into place and syncs
//! the directory: a crash leaves either no object or the whole one (plus,
//! at worst, a temporary file the orphan sweep deletes). Positions in an
//! object are positions in the file. Files read stay open and mapped: a
//! range the page cache holds is answered with the mapped pages (the
//! crate's `mapped` module), any other with a positional read on the
//! blocking pool, so the heap holds at most what an uncached read returns.
//!
//! A damaged file is never served: the first read of an object in a
//! process that did not write it checks the whole file against its
//! trailer (a length that does not match, a wrong magic or a wrong
//! checksum is an error naming the file), and [`LocalSegments::check_objects`] checks, at start, that every
//! object the state machines reference is there with its length.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::future::BoxFuture;

use crate::mapped::Mapped;
use crate::space::DiskSpace;
use crate::store::{ColdBackend, ColdError, ObjectInfo};

/// The trailer's magic.
const MAGIC: &[u8; 8] = b"STRSEG01";
/// Bytes after an object's content.
pub const TRAILER_LEN: u64 = 16;

/// The buffer small parts of a file gather in before they are written.
const WRITE_BUFFER: usize = 256 * 1024;
/// The suffix of files being written.
const TMP: &str = ".tmp";

/// Files under one directory, as a [`ColdBackend`].
#[derive(Debug, Clone)]
pub struct LocalSegments {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    /// The free bytes a write must leave on the filesystem (for the Raft
    /// log), if any.
    space: Option<DiskSpace>,
    /// Objects whose whole file passed its check in this process.
    verified: Mutex<HashSet<String>>,
    /// Some verified files, open for reads ([`OPEN_FILES`] at most).
    open: Mutex<HashMap<String, Arc<OpenSegment>>>,
}

/// A verified segment file open for reads, and its mapping when mapping
/// it succeeded.
#[derive(Debug)]
struct OpenSegment {
    file: File,
    /// The object's length: the file's, without the trailer.
    content: u64,
    map: Option<Arc<Mapped>>,
}

impl OpenSegment {
    /// Whether `range` lies inside the object (not in the trailer).
    fn content_holds(&self, range: &Range<u64>) -> bool {
        range.start <= range.end && range.end <= self.content
    }

    /// `range` without a thread hop, when the page cache holds all of it:
    /// the mapped pages themselves, or (unmapped) a copy of them.
    fn read_cached(&self, range: &Range<u64>) -> Option<Bytes> {
        match &self.map {
            Some(map) => map.resident(range),
            None => read_cached(&self.file, range),
        }
    }
}

/// Verified segment files kept open for reads.
const OPEN_FILES: usize = 256;

/// The largest read tried on the caller's thread: a range the page cache
/// holds whole is copied without a hop to the blocking pool.
const FAST_READ_BYTES: usize = 1 << 20;

/// Reads `range` of `file` only if the page cache holds all of it
/// (`preadv2` with `RWF_NOWAIT`); `None` sends the read to the blocking
/// pool.
fn read_cached(file: &File, range: &Range<u64>) -> Option<Bytes> {
    let len = usize::try_from(range.end.checked_sub(range.start)?).ok()?;
    if len > FAST_READ_BYTES {
        return None;
    }
    let mut buf = vec![0u8; len];
    let n = rustix::io::preadv2(
        file,
        &mut [io::IoSliceMut::new(&mut buf)],
        range.start,
        rustix::io::ReadWriteFlags::NOWAIT,
    )
    .ok()?;
    (n == len).then(|| Bytes::from(buf))
}

fn io_err(path: &Path, what: &str, e: &io::Error) -> ColdError {
    ColdError::Store(format!("{what} {}: {e}", path.display()))
}

fn damaged(path: &Path, why: impl std::fmt::Display) -> ColdError {
    ColdError::Damaged(format!("damaged segment file {}: {why}", path.display()))
}

/// Checks a whole segment file's bytes (`file`: the object's bytes, then
/// the trailer) against its trailer, and against `size` when known;
/// answers the object's bytes.
///
/// # Errors
/// [`ColdError::Damaged`], naming the object.
pub(crate) fn check_file(name: &str, file: &Bytes, size: Option<u64>) -> Result<Bytes, ColdError> {
    let bad = |why: String| ColdError::Damaged(format!("segment file of {name}: {why}"));
    let len = file.len() as u64;
    let Some(content) = len.checked_sub(TRAILER_LEN) else {
        return Err(bad(format!("{len} bytes, shorter than a trailer")));
    };
    if let Some(size) = size
        && size != content
    {
        return Err(bad(format!("{content} bytes, {size} expected")));
    }
    let at = usize::try_from(content).map_err(|_| bad("too large".to_owned()))?;
    let (bytes, trailer) = file.split_at(at);
    if trailer.get(..8) != Some(MAGIC.as_slice()) {
        return Err(bad("no trailer (torn or not a segment)".to_owned()));
    }
    let mut want = [0u8; 8];
    want.copy_from_slice(trailer.get(8..16).unwrap_or(&[0; 8]));
    let mut digest = crc64fast::Digest::new();
    digest.write(bytes);
    if digest.sum64() != u64::from_le_bytes(want) {
        return Err(bad("checksum mismatch".to_owned()));
    }
    Ok(file.slice(..at))
}

/// Whether `name` is a relative path of safe parts.
fn valid(name: &str) -> bool {
    !name.is_empty()
        && name.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'))
        })
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn wall_ms(meta: &fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl LocalSegments {
    /// The store rooted at `dir` (created if missing).
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(dir: &Path) -> Result<Self, ColdError> {
        Self::open_keeping_free(dir, 0)
    }

    /// Opens the store in `dir` like [`LocalSegments::open`]; a write that
    /// would leave fewer than `reserve` bytes free on the filesystem fails
    /// (like a full disk) before it writes anything, so what shares the
    /// filesystem, the node's Raft log, keeps that much room.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn open_keeping_free(dir: &Path, reserve: u64) -> Result<Self, ColdError> {
        fs::create_dir_all(dir).map_err(|e| io_err(dir, "cannot create", &e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                root: dir.to_path_buf(),
                space: (reserve > 0).then(|| DiskSpace::new(dir, reserve)),
                verified: Mutex::new(HashSet::new()),
                open: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    fn path(&self, name: &str) -> Result<PathBuf, ColdError> {
        if !valid(name) {
            return Err(ColdError::InvalidName(name.to_owned()));
        }
        Ok(self.inner.root.join(name))
    }

    /// Checks that every `(name, object_size)` is a file of the right
    /// length, without reading it.
    ///
    /// # Errors
    /// The first object missing or of the wrong length, named with its
    /// file.
    pub fn check_objects<'a>(
        &self,
        objects: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Result<usize, ColdError> {
        let mut checked = 0;
        for (name, size) in objects {
            let path = self.path(name)?;
            let meta = fs::metadata(&path).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => ColdError::Store(format!(
                    "missing segment file {}: the state references it",
                    path.display()
                )),
                _ => io_err(&path, "cannot inspect", &e),
            })?;
            let want = size.saturating_add(TRAILER_LEN);
            if meta.len() != want {
                return Err(damaged(
                    &path,
                    format!("{} bytes long, {want} expected", meta.len()),
                ));
            }
            checked += 1;
        }
        Ok(checked)
    }

    /// Whether `name` is a file here, of `size` bytes of content when
    /// given (a stat: nothing is read).
    pub fn holds(&self, name: &str, size: Option<u64>) -> bool {
        let Ok(path) = self.path(name) else {
            return false;
        };
        fs::metadata(path).is_ok_and(|m| {
            m.is_file() && size.is_none_or(|s| m.len() == s.saturating_add(TRAILER_LEN))
        })
    }

    /// The whole file of `name` (content and trailer) once it passed its
    /// check; `None` when there is no such file.
    ///
    /// # Errors
    /// A file that cannot be read, or a damaged one.
    pub fn whole_file(&self, name: &str) -> Result<Option<Bytes>, ColdError> {
        let path = self.path(name)?;
        let bytes = match fs::read(&path) {
            Ok(b) => Bytes::from(b),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path, "cannot read", &e)),
        };
        check_file(name, &bytes, None)?;
        Ok(Some(bytes))
    }

    fn put_blocking(&self, name: &str, parts: &[Bytes]) -> Result<(), ColdError> {
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let path = self.path(name)?;
        if let Some(space) = &self.inner.space
            && let Err(low) = space.admit(len.saturating_add(TRAILER_LEN))
        {
            return Err(ColdError::Store(format!(
                "the disk holding {} has {} bytes free: a segment of {} bytes \
                 would leave less than the {} kept free for the Raft log",
                self.inner.root.display(),
                low.free,
                len.saturating_add(TRAILER_LEN),
                low.reserve
            )));
        }
        let dir = path.parent().unwrap_or(&self.inner.root).to_path_buf();
        if !dir.is_dir() {
            fs::create_dir_all(&dir).map_err(|e| io_err(&dir, "cannot create", &e))?;
            // Make the new directories' entries durable, innermost first.
            let mut at = dir.as_path();
            while at != self.inner.root {
                let Some(parent) = at.parent() else { break };
                sync_dir(parent).map_err(|e| io_err(parent, "cannot sync", &e))?;
                at = parent;
            }
        }
        let tmp = path.with_file_name(format!(
            "{}{TMP}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
        let result = (|| {
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            // Small parts (many streams' pieces of a pack) gather in a
            // bounded buffer; large ones go straight to the file.
            let mut out = std::io::BufWriter::with_capacity(WRITE_BUFFER, file);
            let mut digest = crc64fast::Digest::new();
            for part in parts {
                digest.write(part);
                out.write_all(part)?;
            }
            let mut trailer = [0u8; 16];
            trailer[..8].copy_from_slice(MAGIC);
            trailer[8..].copy_from_slice(&digest.sum64().to_le_bytes());
            out.write_all(&trailer)?;
            let file = out
                .into_inner()
                .map_err(std::io::IntoInnerError::into_error)?;
            file.sync_all()?;
            fs::rename(&tmp, &path)?;
            sync_dir(&dir)
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(io_err(&path, "cannot write", &e));
        }
        // This process wrote the bytes its trailer sums: the first read
        // need not read the whole file back to check them (a catch-up of
        // freshly flushed data read every byte twice). Files of an earlier
        // process are still checked on their first read.
        if let Ok(mut v) = self.inner.verified.lock() {
            v.insert(name.to_owned());
        }
        Ok(())
    }

    /// Checks the whole file of `name` against its trailer once per
    /// process (unless this process wrote it).
    fn verify(&self, name: &str, path: &Path, file: &File) -> Result<(), ColdError> {
        if self.inner.verified.lock().is_ok_and(|v| v.contains(name)) {
            return Ok(());
        }
        let len = file
            .metadata()
            .map_err(|e| io_err(path, "cannot inspect", &e))?
            .len();
        let Some(content) = len.checked_sub(TRAILER_LEN) else {
            return Err(damaged(
                path,
                format!("{len} bytes, shorter than a trailer"),
            ));
        };
        let mut trailer = [0u8; 16];
        file.read_exact_at(&mut trailer, content)
            .map_err(|e| io_err(path, "cannot read", &e))?;
        if &trailer[..8] != MAGIC {
            return Err(damaged(path, "no trailer (torn or not a segment)"));
        }
        let mut want = [0u8; 8];
        want.copy_from_slice(&trailer[8..]);
        let mut digest = crc64fast::Digest::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < content {
            let n = usize::try_from((content - at).min(buf.len() as u64)).unwrap_or(buf.len());
            let chunk = buf.get_mut(..n).unwrap_or_default();
            file.read_exact_at(chunk, at)
                .map_err(|e| io_err(path, "cannot read", &e))?;
            digest.write(chunk);
            at += n as u64;
        }
        if digest.sum64() != u64::from_le_bytes(want) {
            return Err(damaged(path, "checksum mismatch"));
        }
        if let Ok(mut v) = self.inner.verified.lock() {
            v.insert(name.to_owned());
        }
        Ok(())
    }

    /// The open, verified file of `name`, if it is kept open.
    fn open_segment(&self, name: &str) -> Option<Arc<OpenSegment>> {
        self.inner.open.lock().ok()?.get(name).cloned()
    }

    fn get_blocking(&self, name: &str, range: Range<u64>) -> Result<Bytes, ColdError> {
        let path = self.path(name)?;
        let segment = match self.open_segment(name) {
            Some(segment) => segment,
            None => {
                let file = File::open(&path).map_err(|e| match e.kind() {
                    io::ErrorKind::NotFound => ColdError::NotFound(name.to_owned()),
                    _ => io_err(&path, "cannot open", &e),
                })?;
                self.verify(name, &path, &file)?;
                let content = file
                    .metadata()
                    .map_err(|e| io_err(&path, "cannot inspect", &e))?
                    .len()
                    .saturating_sub(TRAILER_LEN);
                // A file that cannot be mapped (the process's mapping
                // limit) is read with copies instead.
                let map = match Mapped::map(&file) {
                    Ok(map) => Some(map),
                    Err(e) => {
                        tracing::debug!(path = %path.display(), error = %e, "segment file not mapped");
                        None
                    }
                };
                let segment = Arc::new(OpenSegment { file, content, map });
                if let Ok(mut open) = self.inner.open.lock() {
                    if open.len() >= OPEN_FILES
                        && let Some(old) = open.keys().next().cloned()
                    {
                        open.remove(&old);
                    }
                    open.insert(name.to_owned(), Arc::clone(&segment));
                }
                segment
            }
        };
        if !segment.content_holds(&range) {
            return Err(ColdError::Store(format!(
                "range {range:?} of {}: the object holds {} bytes",
                path.display(),
                segment.content
            )));
        }
        if let Some(bytes) = segment.read_cached(&range) {
            return Ok(bytes);
        }
        let len = usize::try_from(range.end.saturating_sub(range.start))
            .map_err(|_| damaged(&path, "range too large"))?;
        let mut buf = vec![0u8; len];
        segment
            .file
            .read_exact_at(&mut buf, range.start)
            .map_err(|e| io_err(&path, "cannot read", &e))?;
        Ok(Bytes::from(buf))
    }

    fn delete_blocking(&self, name: &str) -> Result<(), ColdError> {
        let path = self.path(name)?;
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(&path, "cannot delete", &e)),
        }
        if let Ok(mut v) = self.inner.verified.lock() {
            v.remove(name);
        }
        if let Ok(mut open) = self.inner.open.lock() {
            open.remove(name);
        }
        // Empty directories of deleted streams go too (best effort: a
        // directory that is not empty stays).
        let mut at = path.parent();
        while let Some(dir) = at {
            if dir == self.inner.root || fs::remove_dir(dir).is_err() {
                break;
            }
            at = dir.parent();
        }
        Ok(())
    }

    fn list_blocking(&self, prefix: &str) -> Result<Vec<ObjectInfo>, ColdError> {
        let start = if prefix.is_empty() {
            self.inner.root.clone()
        } else {
            self.path(prefix)?
        };
        let mut out = Vec::new();
        let mut dirs = vec![start];
        while let Some(dir) = dirs.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&dir, "cannot list", &e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io_err(&dir, "cannot list", &e))?;
                let path = entry.path();
                let meta = match entry.metadata() {
                    Ok(m) => m,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_err(&path, "cannot inspect", &e)),
                };
                if meta.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let Ok(rel) = path.strip_prefix(&self.inner.root) else {
                    continue;
                };
                let name = rel.to_string_lossy().replace('\\', "/");
                out.push(ObjectInfo {
                    name,
                    size: meta.len().saturating_sub(TRAILER_LEN),
                    last_modified_ms: wall_ms(&meta),
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ColdError> + Send + 'static,
) -> Result<T, ColdError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ColdError::Store(format!("segment store task failed: {e}")))?
}

impl ColdBackend for LocalSegments {
    fn put(&self, name: &str, bytes: Bytes) -> BoxFuture<'_, Result<(), ColdError>> {
        self.put_parts(name, vec![bytes])
    }

    fn put_parts(&self, name: &str, parts: Vec<Bytes>) -> BoxFuture<'_, Result<(), ColdError>> {
        let this = self.clone();
        let name = name.to_owned();
        Box::pin(blocking(move || this.put_blocking(&name, &parts)))
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> BoxFuture<'_, Result<Bytes, ColdError>> {
        let this = self.clone();
        let name = name.to_owned();
        Box::pin(async move {
            if range.is_empty() {
                return Ok(Bytes::new());
            }
            // Bytes the page cache holds come without a thread hop.
            if let Some(segment) = this.open_segment(&name)
                && segment.content_holds(&range)
                && let Some(bytes) = segment.read_cached(&range)
            {
                return Ok(bytes);
            }
            blocking(move || this.get_blocking(&name, range)).await
        })
    }

    fn delete(&self, name: &str) -> BoxFuture<'_, Result<(), ColdError>> {
        let this = self.clone();
        let name = name.to_owned();
        Box::pin(blocking(move || this.delete_blocking(&name)))
    }

    fn list(&self, prefix: &str) -> BoxFuture<'_, Result<Vec<ObjectInfo>, ColdError>> {
        let this = self.clone();
        let prefix = prefix.to_owned();
        Box::pin(blocking(move || this.list_blocking(&prefix)))
    }

    fn describe(&self) -> String {
        format!("local segments:{}", self.inner.root.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, LocalSegments) {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = LocalSegments::open(&dir.path().join("segments")).expect("open");
        (dir, s)
    }

    #[tokio::test]
    async fn a_write_into_the_reserve_fails_before_writing_anything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("segments");
        let free = crate::space::free_bytes(dir.path()).expect("statvfs");
        // A reserve of more than the whole filesystem has free.
        let s = LocalSegments::open_keeping_free(&root, free.saturating_mul(2)).expect("open");
        let e = s
            .put("g000/p/a.pack", Bytes::from_static(b"abc"))
            .await
            .expect_err("refused");
        assert!(e.to_string().contains("kept free for the Raft log"), "{e}");
        assert!(s.list("").await.expect("list").is_empty());
        // A reserve the filesystem has room for takes the write.
        let s = LocalSegments::open_keeping_free(&root, 1).expect("open");
        s.put("g000/p/a.pack", Bytes::from_static(b"abc"))
            .await
            .expect("put");
    }

    #[tokio::test]
    async fn read_files_stay_open_until_deleted_and_cached_reads_match() {
        let (_d, s) = store();
        let body = Bytes::from((0..=255u8).cycle().take(10_000).collect::<Vec<u8>>());
        s.put("g000/p/a.pack", body.clone()).await.expect("put");
        assert!(s.open_segment("g000/p/a.pack").is_none());
        assert_eq!(
            s.get_range("g000/p/a.pack", 10..20).await.expect("get"),
            body.slice(10..20)
        );
        let segment = s.open_segment("g000/p/a.pack").expect("kept open");
        assert_eq!(segment.content, 10_000);
        // Mapped: a range the page cache holds (a file just written and
        // read) comes from the mapping, byte-exact.
        assert!(segment.map.is_some(), "mapped");
        assert_eq!(
            segment.read_cached(&(100..300)).expect("cached"),
            body.slice(100..300)
        );
        // The copying path, for a file that could not be mapped: where the
        // filesystem reads without waiting it serves the same bytes.
        if let Some(bytes) = read_cached(&segment.file, &(100..300)) {
            assert_eq!(bytes, body.slice(100..300));
        }
        assert_eq!(
            read_cached(&segment.file, &(0..(FAST_READ_BYTES as u64 + 1))),
            None
        );
        assert_eq!(
            s.get_range("g000/p/a.pack", 9_990..10_000)
                .await
                .expect("get"),
            body.slice(9_990..10_000)
        );
        // The trailer is not the object's: a range into it is refused.
        let e = s
            .get_range("g000/p/a.pack", 9_990..10_001)
            .await
            .expect_err("past the object");
        assert!(e.to_string().contains("holds 10000 bytes"), "{e}");
        s.delete("g000/p/a.pack").await.expect("delete");
        assert!(s.open_segment("g000/p/a.pack").is_none());
        assert!(matches!(
            s.get_range("g000/p/a.pack", 0..1).await,
            Err(ColdError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn objects_round_trip_with_ranges_listing_and_delete() {
        let (_d, s) = store();
        let body = Bytes::from((0..=255u8).cycle().take(10_000).collect::<Vec<u8>>());
        s.put("g000/p/a.pack", body.clone()).await.expect("put");
        s.put("g000/s/b/x/1.bin", Bytes::from_static(b"hello"))
            .await
            .expect("put");
        assert_eq!(
            s.get_range("g000/p/a.pack", 100..300).await.expect("get"),
            body.slice(100..300)
        );
        assert_eq!(
            s.get_range("g000/s/b/x/1.bin", 0..5).await.expect("get"),
            Bytes::from_static(b"hello")
        );
        let listed = s.list("g000").await.expect("list");
        let names: Vec<_> = listed.iter().map(|o| (o.name.as_str(), o.size)).collect();
        assert_eq!(names, [("g000/p/a.pack", 10_000), ("g000/s/b/x/1.bin", 5)]);
        assert_eq!(s.list("g000/s/b/x").await.expect("list").len(), 1);
        assert!(s.list("g001").await.expect("list").is_empty());
        s.delete("g000/s/b/x/1.bin").await.expect("delete");
        s.delete("g000/s/b/x/1.bin").await.expect("delete twice");
        assert!(!s.root().join("g000/s").exists(), "empty dirs removed");
        assert!(matches!(
            s.get_range("g000/s/b/x/1.bin", 0..1).await,
            Err(ColdError::NotFound(_))
        ));
        assert_eq!(
            s.check_objects([("g000/p/a.pack", 10_000)]).expect("check"),
            1
        );
    }

    #[tokio::test]
    async fn unsafe_names_are_refused() {
        let (_d, s) = store();
        for name in ["", "../x", "a/../b", "/abs", "a//b", "a/./b", "sp ace"] {
            assert!(
                matches!(
                    s.put(name, Bytes::from_static(b"x")).await,
                    Err(ColdError::InvalidName(_))
                ),
                "{name:?}"
            );
        }
    }

    #[tokio::test]
    async fn damaged_files_are_refused_naming_the_file() {
        let (_d, s) = store();
        let body = Bytes::from(vec![7u8; 4096]);
        for name in ["g000/p/flip.pack", "g000/p/cut.pack"] {
            s.put(name, body.clone()).await.expect("put");
        }
        // A flipped byte: the checksum catches it on the first read of a
        // process that did not write the file (the next one, here a store
        // opened again on the same directory).
        let flip = s.root().join("g000/p/flip.pack");
        let mut bytes = fs::read(&flip).expect("read");
        bytes[100] ^= 1;
        fs::write(&flip, bytes).expect("write");
        let s = LocalSegments::open(s.root()).expect("open again");
        let err = s
            .get_range("g000/p/flip.pack", 0..10)
            .await
            .expect_err("refused");
        assert!(
            err.to_string().contains("checksum mismatch") && err.to_string().contains("flip.pack"),
            "{err}"
        );
        // A cut file: the start-up check and the read both refuse it.
        let cut = s.root().join("g000/p/cut.pack");
        let f = OpenOptions::new().write(true).open(&cut).expect("open");
        f.set_len(1000).expect("truncate");
        let err = s
            .check_objects([("g000/p/cut.pack", 4096)])
            .expect_err("refused");
        assert!(err.to_string().contains("cut.pack"), "{err}");
        assert!(err.to_string().contains("1000 bytes long"), "{err}");
        let err = s
            .get_range("g000/p/cut.pack", 0..10)
            .await
            .expect_err("refused");
        assert!(err.to_string().contains("cut.pack"), "{err}");
        let err = s
            .check_objects([("g000/p/gone.pack", 1)])
            .expect_err("refused");
        assert!(err.to_string().contains("missing segment file"), "{err}");
    }
}
