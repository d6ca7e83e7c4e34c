//! A group's snapshots on disk. The machine's binary snapshot
//! (`docs/snapshot-format.md`) is written straight into a data file as it
//! is encoded, sent to followers from that file in openraft's chunks, and
//! received into a file chunk by chunk: no snapshot is ever held whole in
//! memory. Files in the group's directory:
//!
//! * `snapshot-{seq}.data` — a snapshot's bytes (`seq`: a local counter,
//!   never a name that came from the network);
//! * `snapshot.meta` — which data file is current, its length and the
//!   Raft metadata it covers (`STRDSNM1`, then MessagePack); replaced
//!   atomically (temporary file, fsync, rename, directory fsync) only
//!   after the data file it names is durable;
//! * `snapshot-{seq}.data.{run}.tmp` / `….recv` — a snapshot being built /
//!   received (`run`: a number drawn when the directory is opened, so a
//!   previous opening's late task never touches this one's files); removed
//!   at startup (they were never current);
//! * `snapshot.bin` — the single-file layout of earlier versions
//!   (`STRDSNP1`, metadata, bytes): converted to the layout above at
//!   startup.

use std::io::{Read, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use openraft::{BasicNode, SnapshotMeta};
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use crate::space::SpaceWait;
use crate::sync::lock;
use crate::types::NodeId;

/// Raft's metadata of a snapshot.
pub(crate) type Meta = SnapshotMeta<NodeId, BasicNode>;

const META_MAGIC: &[u8; 8] = b"STRDSNM1";
const LEGACY_MAGIC: &[u8; 8] = b"STRDSNP1";
const META_FILE: &str = "snapshot.meta";
const LEGACY_FILE: &str = "snapshot.bin";
/// The largest `snapshot.meta` read (the metadata holds the membership:
/// a few hundred bytes).
const MAX_META: u64 = 1 << 20;

/// A snapshot's bytes as openraft reads and writes them: an open file.
/// One being received also knows where it lives, so that installing it
/// can make it the current snapshot.
#[derive(Debug)]
pub struct SnapshotFile {
    file: tokio::fs::File,
    received: Option<(u64, PathBuf)>,
}

impl AsyncRead for SnapshotFile {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.file).poll_read(cx, buf)
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.file).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.file).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.file).poll_shutdown(cx)
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(mut self: Pin<&mut Self>, position: SeekFrom) -> std::io::Result<()> {
        Pin::new(&mut self.file).start_seek(position)
    }

    fn poll_complete(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<u64>> {
        Pin::new(&mut self.file).poll_complete(cx)
    }
}

impl SnapshotFile {
    /// A file to read a snapshot from.
    pub(crate) fn reading(file: std::fs::File) -> Self {
        Self {
            file: tokio::fs::File::from_std(file),
            received: None,
        }
    }

    /// The received file's number and path, when this file was received.
    pub(crate) fn into_received(self) -> (tokio::fs::File, Option<(u64, PathBuf)>) {
        (self.file, self.received)
    }
}

/// The encoder's sink of a snapshot being built: a temporary data file,
/// fsynced when the encoding is done.
pub(crate) struct BuildSink {
    file: std::fs::File,
    path: PathBuf,
    /// The group's waits for disk space: a write the filesystem refuses
    /// for want of room is tried again until it fits.
    space: Arc<SpaceWait>,
}

impl Write for BuildSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // A failed `write` wrote nothing, so trying it again is exact.
        let file = &mut self.file;
        self.space
            .retry("snapshot write", &self.path, || file.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl strand_engine::SnapshotSink for BuildSink {
    fn finish(&mut self) -> std::io::Result<()> {
        self.file.sync_all()
    }
}

/// What is current.
#[derive(Debug, Default)]
struct DirState {
    /// The next data file number.
    next_seq: u64,
    /// The current snapshot: its metadata, data file number and length.
    current: Option<(Meta, u64, u64)>,
    /// Snapshots built and installed since start.
    built: u64,
    installed: u64,
}

/// The snapshot files of one group's directory. Every change happens
/// under one lock, so a snapshot being built and one being installed never
/// undo each other.
#[derive(Debug)]
pub(crate) struct SnapshotDir {
    dir: PathBuf,
    /// This opening's number, in the names of its unfinished files.
    run: u64,
    /// Held by a commit; `true` once closed.
    commits: Mutex<bool>,
    state: Mutex<DirState>,
}

/// A number that differs between openings of a directory (in one process
/// or across restarts): the clock's nanoseconds mixed with the process id
/// and a per-process counter.
fn run_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static OPENED: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let count = OPENED.fetch_add(1, Ordering::Relaxed);
    nanos ^ (u64::from(std::process::id()) << 32) ^ count.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn data_name(seq: u64) -> String {
    format!("snapshot-{seq:020}.data")
}

/// The number of a data file, temporary or not, from its name.
fn seq_of(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("snapshot-")?;
    let digits = rest.split('.').next()?;
    if digits.len() != 20 {
        return None;
    }
    digits.parse().ok()
}

/// An I/O error as text naming `path`.
pub(crate) fn io_at(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// Makes directory `dir`'s entries durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), String> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir))
}

/// `snapshot.meta`: magic, data file number, data length, metadata length,
/// metadata.
fn encode_meta(seq: u64, len: u64, meta: &Meta) -> Result<Vec<u8>, String> {
    let meta_bytes = rmp_serde::to_vec_named(meta).map_err(|e| e.to_string())?;
    let meta_len = u32::try_from(meta_bytes.len()).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(28 + meta_bytes.len());
    out.extend_from_slice(META_MAGIC);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&meta_len.to_le_bytes());
    out.extend_from_slice(&meta_bytes);
    Ok(out)
}

fn decode_meta(path: &Path, bytes: &[u8]) -> Result<(u64, u64, Meta), String> {
    let bad = |why: &str| {
        format!(
            "{}: not a strand-raft snapshot index: {why}",
            path.display()
        )
    };
    let field = |at: usize, n: usize| bytes.get(at..at + n).ok_or_else(|| bad("cut short"));
    if field(0, 8)? != META_MAGIC {
        return Err(bad("bad magic"));
    }
    let u64_at = |at: usize| -> Result<u64, String> {
        let mut b = [0u8; 8];
        b.copy_from_slice(field(at, 8)?);
        Ok(u64::from_le_bytes(b))
    };
    let seq = u64_at(8)?;
    let len = u64_at(16)?;
    let mut b = [0u8; 4];
    b.copy_from_slice(field(24, 4)?);
    let meta_len = u32::from_le_bytes(b) as usize;
    if bytes.len() != 28 + meta_len {
        return Err(bad("wrong length"));
    }
    let meta: Meta =
        rmp_serde::from_slice(&bytes[28..]).map_err(|e| bad(&format!("metadata: {e}")))?;
    Ok((seq, len, meta))
}

/// Writes `bytes` to `dir/name` atomically: a temporary file, synced,
/// renamed over the old one, then the directory synced.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = std::fs::File::create(&tmp).map_err(io_at(&tmp))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io_at(&tmp))?;
    let path = dir.join(name);
    std::fs::rename(&tmp, &path).map_err(io_at(&path))?;
    sync_dir(dir)
}

/// Reads `snapshot.meta`, if there is one.
fn read_meta(dir: &Path) -> Result<Option<(u64, u64, Meta)>, String> {
    let path = dir.join(META_FILE);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_at(&path)(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_META + 1)
        .read_to_end(&mut bytes)
        .map_err(io_at(&path))?;
    if bytes.len() as u64 > MAX_META {
        return Err(format!(
            "{}: not a strand-raft snapshot index: too long",
            path.display()
        ));
    }
    decode_meta(&path, &bytes).map(Some)
}

/// Converts the earlier single-file layout (`snapshot.bin`) into a data
/// file and `snapshot.meta`, then removes it.
fn convert_legacy(dir: &Path, seq: u64) -> Result<(), String> {
    let path = dir.join(LEGACY_FILE);
    let mut file = std::fs::File::open(&path).map_err(io_at(&path))?;
    let bad = |why: &str| format!("{}: not a strand-raft snapshot file: {why}", path.display());
    let mut head = [0u8; 12];
    file.read_exact(&mut head).map_err(|_| bad("cut short"))?;
    if &head[..8] != LEGACY_MAGIC {
        return Err(bad("bad magic"));
    }
    let meta_len = u64::from(u32::from_le_bytes([head[8], head[9], head[10], head[11]]));
    if meta_len > MAX_META {
        return Err(bad("metadata too long"));
    }
    let mut meta_bytes = Vec::new();
    (&mut file)
        .take(meta_len)
        .read_to_end(&mut meta_bytes)
        .map_err(io_at(&path))?;
    if meta_bytes.len() as u64 != meta_len {
        return Err(bad("metadata cut short"));
    }
    let meta: Meta =
        rmp_serde::from_slice(&meta_bytes).map_err(|e| bad(&format!("metadata: {e}")))?;
    let data = dir.join(data_name(seq));
    let mut out = std::fs::File::create(&data).map_err(io_at(&data))?;
    let len = std::io::copy(&mut file, &mut out).map_err(io_at(&data))?;
    out.sync_all().map_err(io_at(&data))?;
    sync_dir(dir)?;
    write_atomically(dir, META_FILE, &encode_meta(seq, len, &meta)?)?;
    std::fs::remove_file(&path).map_err(io_at(&path))?;
    sync_dir(dir)?;
    tracing::info!(dir = %dir.display(), "converted snapshot.bin to the streamed snapshot layout");
    Ok(())
}

impl SnapshotDir {
    /// Opens the snapshot files of `dir` (created when missing): removes
    /// what was being built or received, converts the earlier layout and
    /// every data file but the current one. Returns the current snapshot's
    /// metadata and an open data file, if there is one.
    ///
    /// # Errors
    /// An unreadable `snapshot.meta`, a data file it names that is missing
    /// or of another length than recorded, or an I/O error.
    pub(crate) fn open(dir: &Path) -> Result<(Self, Option<(Meta, std::fs::File)>), String> {
        std::fs::create_dir_all(dir).map_err(io_at(dir))?;
        let mut max_seq = 0u64;
        let mut data_files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_at(dir))? {
            let entry = entry.map_err(io_at(dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(seq) = seq_of(name) else { continue };
            max_seq = max_seq.max(seq);
            if name.ends_with(".tmp") || name.ends_with(".recv") {
                let path = entry.path();
                std::fs::remove_file(&path).map_err(io_at(&path))?;
                tracing::debug!(file = %path.display(), "removed an unfinished snapshot");
            } else if name.ends_with(".data") {
                data_files.push((seq, entry.path()));
            }
        }
        let mut next_seq = max_seq + 1;
        if read_meta(dir)?.is_none() && dir.join(LEGACY_FILE).exists() {
            convert_legacy(dir, next_seq)?;
            data_files.push((next_seq, dir.join(data_name(next_seq))));
            next_seq += 1;
        }
        let current = read_meta(dir)?;
        let mut opened = None;
        if let Some((seq, len, meta)) = &current {
            let path = dir.join(data_name(*seq));
            let file = std::fs::File::open(&path).map_err(|e| {
                format!(
                    "{}: the current snapshot's data file cannot be opened: {e}",
                    path.display()
                )
            })?;
            let found = file.metadata().map_err(io_at(&path))?.len();
            if found != *len {
                return Err(format!(
                    "{}: the snapshot's data file holds {found} bytes, {len} were written",
                    path.display()
                ));
            }
            opened = Some((meta.clone(), file));
        }
        let current_seq = current.as_ref().map(|(seq, _, _)| *seq);
        for (seq, path) in data_files {
            if Some(seq) != current_seq {
                std::fs::remove_file(&path).map_err(io_at(&path))?;
            }
        }
        let state = DirState {
            next_seq,
            current: current.map(|(seq, len, meta)| (meta, seq, len)),
            ..DirState::default()
        };
        Ok((
            Self {
                dir: dir.to_path_buf(),
                run: run_number(),
                commits: Mutex::new(false),
                state: Mutex::new(state),
            },
            opened,
        ))
    }

    fn take_seq(&self) -> u64 {
        let mut state = lock(&self.state);
        let seq = state.next_seq;
        state.next_seq += 1;
        seq
    }

    /// A new temporary data file for a snapshot being built, and its
    /// number.
    pub(crate) fn building(&self, space: Arc<SpaceWait>) -> Result<(u64, BuildSink), String> {
        let seq = self.take_seq();
        let path = self.building_path(seq);
        let file = std::fs::File::create(&path).map_err(io_at(&path))?;
        Ok((seq, BuildSink { file, path, space }))
    }

    /// A new file to receive a snapshot into.
    pub(crate) fn receiving(&self) -> Result<SnapshotFile, String> {
        let seq = self.take_seq();
        let path = self
            .dir
            .join(format!("{}.{:016x}.recv", data_name(seq), self.run));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(io_at(&path))?;
        Ok(SnapshotFile {
            file: tokio::fs::File::from_std(file),
            received: Some((seq, path)),
        })
    }

    /// Makes the finished (synced) file `from` data file `seq` and, unless
    /// a snapshot at least as recent is current already, the current
    /// snapshot with `meta`: the index is replaced only once the data file
    /// is durable under its name; the data file it replaces is removed.
    /// Returns the data file opened for reading, and whether it became
    /// current (when not, it is removed; the open file still reads).
    /// `installed` says which of the two it was, for [`Self::stats`].
    pub(crate) fn commit(
        &self,
        seq: u64,
        from: &Path,
        meta: &Meta,
        installed: bool,
    ) -> Result<(std::fs::File, bool), String> {
        // Commits happen one at a time, and none after `close`.
        let closed = lock(&self.commits);
        if *closed {
            self.discard(from);
            return Err("the group has stopped; the snapshot is not kept".to_owned());
        }
        let path = self.dir.join(data_name(seq));
        std::fs::rename(from, &path).map_err(io_at(&path))?;
        let file = std::fs::File::open(&path).map_err(io_at(&path))?;
        let len = file.metadata().map_err(io_at(&path))?.len();
        let newer = {
            let mut state = lock(&self.state);
            if installed {
                state.installed += 1;
            } else {
                state.built += 1;
            }
            match &state.current {
                Some((current, _, _)) => meta.last_log_id > current.last_log_id,
                None => true,
            }
        };
        if !newer {
            std::fs::remove_file(&path).map_err(io_at(&path))?;
            return Ok((file, false));
        }
        sync_dir(&self.dir)?;
        write_atomically(&self.dir, META_FILE, &encode_meta(seq, len, meta)?)?;
        // Replaced under the state lock, removed after: a reader that saw
        // the old number has opened its file already.
        let old = lock(&self.state).current.replace((meta.clone(), seq, len));
        if let Some((_, old, _)) = old {
            let old = self.dir.join(data_name(old));
            if let Err(e) = std::fs::remove_file(&old) {
                tracing::warn!(file = %old.display(), error = %e, "an old snapshot could not be removed");
            }
        }
        drop(closed);
        Ok((file, true))
    }

    /// Stops every later commit (the group is shutting down): a snapshot
    /// task still running afterwards removes its file instead of making it
    /// current. Waits for a commit in progress.
    pub(crate) fn close(&self) {
        *lock(&self.commits) = true;
    }

    /// The path of data file `seq` while it is being built.
    pub(crate) fn building_path(&self, seq: u64) -> PathBuf {
        self.dir
            .join(format!("{}.{:016x}.tmp", data_name(seq), self.run))
    }

    /// Removes a file that will not become a snapshot.
    pub(crate) fn discard(&self, path: &Path) {
        if let Err(e) = std::fs::remove_file(path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(file = %path.display(), error = %e, "an unfinished snapshot could not be removed");
        }
    }

    /// The counters and the current snapshot's index and size.
    pub(crate) fn stats(&self) -> crate::stats::SnapshotStats {
        let state = lock(&self.state);
        crate::stats::SnapshotStats {
            built: state.built,
            installed: state.installed,
            index: state
                .current
                .as_ref()
                .and_then(|(meta, _, _)| meta.last_log_id.map(|l| l.index)),
            bytes: state.current.as_ref().map_or(0, |(_, _, len)| *len),
        }
    }

    /// The current snapshot: its metadata and its data file, open.
    pub(crate) fn current(&self) -> Result<Option<(Meta, std::fs::File)>, String> {
        let state = lock(&self.state);
        match &state.current {
            None => Ok(None),
            Some((meta, seq, _)) => {
                let path = self.dir.join(data_name(*seq));
                let file = std::fs::File::open(&path).map_err(io_at(&path))?;
                Ok(Some((meta.clone(), file)))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn meta(index: u64) -> Meta {
        Meta {
            last_log_id: Some(openraft::LogId::new(
                openraft::CommittedLeaderId::new(1, 1),
                index,
            )),
            last_membership: openraft::StoredMembership::default(),
            snapshot_id: format!("s{index}"),
        }
    }

    fn build(dir: &SnapshotDir, bytes: &[u8], m: &Meta) -> bool {
        use strand_engine::SnapshotSink;
        let (seq, mut sink) = dir.building(Arc::default()).unwrap();
        sink.write_all(bytes).unwrap();
        sink.finish().unwrap();
        dir.commit(seq, &dir.building_path(seq), m, false)
            .unwrap()
            .1
    }

    fn read_current(dir: &SnapshotDir) -> Option<(Meta, Vec<u8>)> {
        dir.current().unwrap().map(|(m, mut f)| {
            let mut out = Vec::new();
            f.read_to_end(&mut out).unwrap();
            (m, out)
        })
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_newer_snapshot_replaces_the_current_one_and_an_older_one_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, found) = SnapshotDir::open(tmp.path()).unwrap();
        assert!(found.is_none());
        assert!(build(&dir, b"first", &meta(5)));
        assert!(build(&dir, b"second", &meta(9)));
        assert!(!build(&dir, b"stale", &meta(7)));
        assert_eq!(
            dir.stats(),
            crate::stats::SnapshotStats {
                built: 3,
                installed: 0,
                index: Some(9),
                bytes: 6
            }
        );
        let (m, bytes) = read_current(&dir).unwrap();
        assert_eq!(m, meta(9));
        assert_eq!(bytes, b"second");
        // One data file and the index: the replaced and the stale ones are
        // gone.
        assert_eq!(names(tmp.path()), vec![data_name(2), META_FILE.to_owned()]);
        drop(dir);
        let (_, found) = SnapshotDir::open(tmp.path()).unwrap();
        let (m, mut file) = found.unwrap();
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).unwrap();
        assert_eq!((m, bytes), (meta(9), b"second".to_vec()));
    }

    #[test]
    fn unfinished_files_are_removed_at_startup_and_numbers_are_not_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, _) = SnapshotDir::open(tmp.path()).unwrap();
        assert!(build(&dir, b"kept", &meta(3)));
        let (seq, _sink) = dir.building(Arc::default()).unwrap();
        let received = dir.receiving().unwrap();
        let (_, recv) = received.into_received();
        let recv_seq = recv.unwrap().0;
        drop(dir);
        let (dir, found) = SnapshotDir::open(tmp.path()).unwrap();
        assert!(found.is_some());
        assert_eq!(names(tmp.path()), vec![data_name(1), META_FILE.to_owned()]);
        let (next, _sink) = dir.building(Arc::default()).unwrap();
        assert!(next > seq.max(recv_seq));
    }

    #[test]
    fn a_late_task_of_an_earlier_opening_leaves_this_openings_files_alone() {
        use strand_engine::SnapshotSink;
        let tmp = tempfile::tempdir().unwrap();
        let (old, _) = SnapshotDir::open(tmp.path()).unwrap();
        let (new, _) = SnapshotDir::open(tmp.path()).unwrap();
        // Both hand out the same number next, under different names.
        let (old_seq, _old_sink) = old.building(Arc::default()).unwrap();
        let (new_seq, mut new_sink) = new.building(Arc::default()).unwrap();
        assert_eq!(old_seq, new_seq);
        assert_ne!(old.building_path(old_seq), new.building_path(new_seq));
        // The earlier opening's build fails and cleans up after itself.
        old.discard(&old.building_path(old_seq));
        new_sink.write_all(b"still here").unwrap();
        new_sink.finish().unwrap();
        let (_, current) = new
            .commit(new_seq, &new.building_path(new_seq), &meta(4), false)
            .unwrap();
        assert!(current);
        assert_eq!(read_current(&new).unwrap().1, b"still here");
        // Once closed, a late build keeps nothing and removes its file.
        new.close();
        let (seq, mut sink) = new.building(Arc::default()).unwrap();
        sink.write_all(b"late").unwrap();
        sink.finish().unwrap();
        let path = new.building_path(seq);
        assert!(new.commit(seq, &path, &meta(9), false).is_err());
        assert!(!path.exists());
        assert_eq!(read_current(&new).unwrap().0, meta(4));
    }

    #[test]
    fn a_data_file_of_the_wrong_length_is_a_startup_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, _) = SnapshotDir::open(tmp.path()).unwrap();
        assert!(build(&dir, b"0123456789", &meta(3)));
        drop(dir);
        let path = tmp.path().join(data_name(1));
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(4).unwrap();
        let err = SnapshotDir::open(tmp.path()).unwrap_err();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("holds 4 bytes, 10 were written"), "{err}");
        std::fs::remove_file(&path).unwrap();
        let err = SnapshotDir::open(tmp.path()).unwrap_err();
        assert!(err.contains("cannot be opened"), "{err}");
    }

    #[test]
    fn a_damaged_index_is_a_startup_error() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(META_FILE), b"STRDSNM1 short").unwrap();
        let err = SnapshotDir::open(tmp.path()).unwrap_err();
        assert!(err.contains("snapshot.meta"), "{err}");
        std::fs::write(
            tmp.path().join(META_FILE),
            b"garbage garbage garbage garbage",
        )
        .unwrap();
        let err = SnapshotDir::open(tmp.path()).unwrap_err();
        assert!(err.contains("bad magic"), "{err}");
    }

    #[test]
    fn the_single_file_layout_is_converted() {
        let tmp = tempfile::tempdir().unwrap();
        let m = meta(11);
        let meta_bytes = rmp_serde::to_vec_named(&m).unwrap();
        let mut legacy = LEGACY_MAGIC.to_vec();
        legacy.extend_from_slice(&u32::try_from(meta_bytes.len()).unwrap().to_le_bytes());
        legacy.extend_from_slice(&meta_bytes);
        legacy.extend_from_slice(b"machine bytes");
        std::fs::write(tmp.path().join(LEGACY_FILE), &legacy).unwrap();
        let (dir, found) = SnapshotDir::open(tmp.path()).unwrap();
        let (found_meta, mut file) = found.unwrap();
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).unwrap();
        assert_eq!((found_meta, bytes), (m.clone(), b"machine bytes".to_vec()));
        assert!(!tmp.path().join(LEGACY_FILE).exists());
        assert_eq!(read_current(&dir).unwrap().0, m);
        // A cut legacy file is an error, not an empty state.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(LEGACY_FILE), &legacy[..10]).unwrap();
        let err = SnapshotDir::open(tmp.path()).unwrap_err();
        assert!(err.contains("snapshot.bin"), "{err}");
    }

    #[test]
    fn file_numbers_are_parsed_only_from_our_names() {
        assert_eq!(seq_of(&data_name(42)), Some(42));
        assert_eq!(seq_of(&format!("{}.00ab.tmp", data_name(7))), Some(7));
        assert_eq!(seq_of("snapshot-12.data"), None);
        assert_eq!(seq_of("snapshot.meta"), None);
        assert_eq!(seq_of("snapshot-../../x.data"), None);
    }
}
