//! The on-disk Raft log of one group: segment files of checksummed records
//! (`segment`), written by one writer thread that batches whatever is
//! queued into one write and one fsync (group commit).
//!
//! Records: an entry, the vote, the committed log id, a truncation (drop
//! entries from an index on) and a purge (drop entries up to a log id).
//! Every new segment starts with the current vote, committed id and purge
//! point, so a segment whose entries are all purged can be deleted whole.
//! Recovery replays the segments in order into memory; entries stay in
//! memory until purged (after a snapshot).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, Entry, EntryPayload, LogId, LogState, RaftLogId, RaftLogReader, StorageError,
    StorageIOError, Vote,
};

use strand_engine::{GroupEntry, LogStats};

use crate::segment::{LogError, Tail, encode_record, scan};
use crate::types::{NodeId, TypeConfig};

/// When the log store calls fsync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    /// After every batch of appends, before they are acknowledged (the
    /// default: an acknowledged write survives a crash of the machine).
    #[default]
    Always,
    /// Never. Writes survive a crash of the process (they are in the page
    /// cache), not of the machine: unsafe, for benchmarks only.
    Never,
}

const KIND_ENTRY: u8 = 1;
const KIND_VOTE: u8 = 2;
const KIND_COMMITTED: u8 = 3;
const KIND_TRUNCATE: u8 = 4;
const KIND_PURGE: u8 = 5;

/// A segment grows to about this size before the next one starts.
const SEGMENT_BYTES: u64 = 64 << 20;

/// A completion callback of the writer thread.
type Done = Box<dyn FnOnce(Result<(), String>) + Send>;

/// One unit of work for the writer thread.
struct Job {
    /// Encoded records.
    bytes: Vec<u8>,
    /// What the records are (for the segment's header state).
    kind: u8,
    /// The highest entry index among the records.
    max_index: Option<u64>,
    /// For a purge: entries up to this index may go.
    purge_upto: Option<u64>,
    /// Whether the job must be durable before `done`.
    sync: bool,
    /// For a job of one record: its length.
    record_len: usize,
    /// Entry records among the records.
    entries: u64,
    /// Proposals those entries hold ([`proposals_in`]).
    proposals: u64,
    done: Option<Done>,
}

/// The entries, vote and ids the store holds, in memory.
#[derive(Default)]
struct Mem {
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

struct Shared {
    mem: Mutex<Mem>,
    tx: Mutex<Option<std_mpsc::Sender<Job>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    counters: Arc<Counters>,
}

/// The writer thread's counters ([`LogStats`]), updated once per batch.
#[derive(Debug, Default)]
struct Counters {
    writes: AtomicU64,
    entries: AtomicU64,
    bytes: AtomicU64,
    fsyncs: AtomicU64,
    synced_entries: AtomicU64,
    proposals: AtomicU64,
    synced_proposals: AtomicU64,
    fsync_us: AtomicU64,
    fsync_max_us: AtomicU64,
}

impl Counters {
    /// Counts one batch written: its entries and bytes, and the fsync's
    /// duration when it was synced.
    fn batch(&self, entries: u64, proposals: u64, bytes: u64, fsync: Option<std::time::Duration>) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.entries.fetch_add(entries, Ordering::Relaxed);
        self.proposals.fetch_add(proposals, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(took) = fsync {
            let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
            self.fsyncs.fetch_add(1, Ordering::Relaxed);
            self.synced_entries.fetch_add(entries, Ordering::Relaxed);
            self.synced_proposals
                .fetch_add(proposals, Ordering::Relaxed);
            self.fsync_us.fetch_add(us, Ordering::Relaxed);
            self.fsync_max_us.fetch_max(us, Ordering::Relaxed);
        }
    }

    fn stats(&self) -> LogStats {
        LogStats {
            writes: self.writes.load(Ordering::Relaxed),
            entries: self.entries.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            synced_entries: self.synced_entries.load(Ordering::Relaxed),
            proposals: self.proposals.load(Ordering::Relaxed),
            synced_proposals: self.synced_proposals.load(Ordering::Relaxed),
            fsync_us: self.fsync_us.load(Ordering::Relaxed),
            fsync_max_us: self.fsync_max_us.load(Ordering::Relaxed),
        }
    }
}

/// One group's Raft log on disk. Cheap to clone (clones are log readers of
/// the same store).
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").finish_non_exhaustive()
    }
}

/// What recovery found, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Segment files read.
    pub segments: usize,
    /// Records replayed.
    pub records: usize,
    /// A torn tail that was truncated: the file, offset and reason.
    pub truncated: Option<(PathBuf, u64, String)>,
}

fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:010}.seg"))
}

fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LogError::io(dir, e))
}

fn corrupt(path: &Path, offset: u64, reason: String) -> LogError {
    LogError::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason,
    }
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, recovering what it holds.
    ///
    /// # Errors
    /// An I/O error, or a damaged record that is not a torn tail
    /// ([`LogError::Corrupt`] names the file and byte offset).
    pub fn open(dir: &Path, fsync: Fsync) -> Result<(Self, Recovery), LogError> {
        std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        let mut seqs: Vec<u64> = Vec::new();
        for item in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
            let item = item.map_err(|e| LogError::io(dir, e))?;
            let name = item.file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(".seg")
                && let Ok(seq) = stem.parse::<u64>()
            {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let mut mem = Mem::default();
        let mut recovery = Recovery::default();
        let mut seg_max: BTreeMap<u64, Option<u64>> = BTreeMap::new();
        let mut current_len = 0u64;
        for (i, &seq) in seqs.iter().enumerate() {
            let path = segment_path(dir, seq);
            let bytes = std::fs::read(&path).map_err(|e| LogError::io(&path, e))?;
            let last = i + 1 == seqs.len();
            let (records, tail) = scan(&path, &bytes, last)?;
            let mut max = None;
            for record in &records {
                replay(&mut mem, &path, record.offset, record.kind, record.body)?;
                if record.kind == KIND_ENTRY {
                    max = mem.entries.keys().next_back().copied().max(max);
                }
            }
            recovery.records += records.len();
            seg_max.insert(seq, max);
            current_len = bytes.len() as u64;
            if let Tail::Torn { offset, reason } = tail {
                tracing::warn!(
                    file = %path.display(),
                    offset,
                    reason = %reason,
                    "the log's last record is torn or corrupt: truncating it (it was never acknowledged)"
                );
                let file = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| LogError::io(&path, e))?;
                file.set_len(offset)
                    .and_then(|()| file.sync_all())
                    .map_err(|e| LogError::io(&path, e))?;
                current_len = offset;
                recovery.truncated = Some((path.clone(), offset, reason));
            }
        }
        recovery.segments = seqs.len();
        let (seq, fresh) = match seqs.last() {
            Some(&s) => (s, false),
            None => (1, true),
        };
        let path = segment_path(dir, seq);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| LogError::io(&path, e))?;
        if fresh {
            sync_dir(dir)?;
            seg_max.insert(seq, None);
        }
        let header = header_records(&mem);
        let counters = Arc::new(Counters::default());
        let shared = Arc::new(Shared {
            mem: Mutex::new(mem),
            tx: Mutex::new(None),
            writer: Mutex::new(None),
            counters: Arc::clone(&counters),
        });
        let (tx, rx) = std_mpsc::channel();
        let writer = Writer {
            dir: dir.to_path_buf(),
            fsync,
            file,
            seq,
            len: current_len,
            seg_max,
            header,
            counters,
        };
        let handle = std::thread::Builder::new()
            .name("strand-log".to_owned())
            .spawn(move || writer.run(&rx))
            .map_err(|e| LogError::io(dir, e))?;
        *lock(&shared.tx) = Some(tx);
        *lock(&shared.writer) = Some(handle);
        Ok((Self { shared }, recovery))
    }

    fn mem(&self) -> MutexGuard<'_, Mem> {
        lock(&self.shared.mem)
    }

    fn send(&self, job: Job) -> Result<(), String> {
        match lock(&self.shared.tx).as_ref() {
            Some(tx) => tx
                .send(job)
                .map_err(|_| "the log writer has stopped".to_owned()),
            None => Err("the log is closed".to_owned()),
        }
    }

    /// Sends a job and waits until it is written (and synced, if asked).
    async fn send_wait(&self, mut job: Job) -> Result<(), String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        job.done = Some(Box::new(move |r| {
            let _ = tx.send(r);
        }));
        self.send(job)?;
        rx.await
            .unwrap_or_else(|_| Err("the log writer has stopped".to_owned()))
    }

    /// The entries held in memory, for tests and tools.
    pub fn entry_count(&self) -> usize {
        self.mem().entries.len()
    }

    /// The writer thread's counters since the log was opened: batches,
    /// entries and bytes written, fsyncs and their time (recovery's
    /// truncation and new segments' headers are not counted).
    pub fn stats(&self) -> LogStats {
        self.shared.counters.stats()
    }

    /// The vote held, for tests and tools.
    pub fn vote(&self) -> Option<Vote<NodeId>> {
        self.mem().vote
    }

    /// Stops the writer thread once it has written what is queued, and
    /// waits for it (blocking). Later writes fail.
    pub fn close(&self) {
        lock(&self.shared.tx).take();
        let handle = lock(&self.shared.writer).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn decode<T: serde::de::DeserializeOwned>(
    path: &Path,
    offset: u64,
    body: &[u8],
) -> Result<T, LogError> {
    rmp_serde::from_slice(body).map_err(|e| {
        corrupt(
            path,
            offset,
            format!("an intact record that does not decode: {e}"),
        )
    })
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, String> {
    rmp_serde::to_vec_named(value).map_err(|e| e.to_string())
}

/// Applies one recovered record to the in-memory state.
fn replay(mem: &mut Mem, path: &Path, offset: u64, kind: u8, body: &[u8]) -> Result<(), LogError> {
    match kind {
        KIND_ENTRY => {
            let entry: Entry<TypeConfig> = decode(path, offset, body)?;
            let index = entry.get_log_id().index;
            let expected = mem
                .entries
                .keys()
                .next_back()
                .map(|i| i + 1)
                .or_else(|| mem.last_purged.map(|l| l.index + 1));
            if let Some(expected) = expected
                && index != expected
            {
                return Err(corrupt(
                    path,
                    offset,
                    format!("entry {index} where entry {expected} was expected"),
                ));
            }
            mem.entries.insert(index, entry);
        }
        KIND_VOTE => mem.vote = Some(decode(path, offset, body)?),
        KIND_COMMITTED => mem.committed = decode(path, offset, body)?,
        KIND_TRUNCATE => {
            let since: LogId<NodeId> = decode(path, offset, body)?;
            mem.entries.split_off(&since.index);
        }
        KIND_PURGE => {
            let upto: LogId<NodeId> = decode(path, offset, body)?;
            let keep = mem.entries.split_off(&(upto.index + 1));
            mem.entries = keep;
            mem.last_purged = Some(upto);
        }
        other => {
            return Err(corrupt(
                path,
                offset,
                format!("unknown record kind {other}"),
            ));
        }
    }
    Ok(())
}

/// The records a new segment starts with: the state it would otherwise
/// need older segments for.
fn header_records(mem: &Mem) -> [Option<Vec<u8>>; 3] {
    let record = |kind, body: Result<Vec<u8>, String>| {
        body.ok().map(|b| {
            let mut out = Vec::new();
            encode_record(kind, &b, &mut out);
            out
        })
    };
    [
        mem.vote.as_ref().and_then(|v| record(KIND_VOTE, encode(v))),
        mem.committed
            .as_ref()
            .and_then(|c| record(KIND_COMMITTED, encode(&Some(*c)))),
        mem.last_purged
            .as_ref()
            .and_then(|p| record(KIND_PURGE, encode(p))),
    ]
}

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    fsync: Fsync,
    file: File,
    seq: u64,
    len: u64,
    /// Each segment's highest entry index.
    seg_max: BTreeMap<u64, Option<u64>>,
    /// The latest vote, committed and purge records (for a new segment).
    header: [Option<Vec<u8>>; 3],
    counters: Arc<Counters>,
}

impl Writer {
    fn run(mut self, rx: &std_mpsc::Receiver<Job>) {
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < 4096 {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            let result = self.write_batch(&mut batch);
            if let Err(e) = &result {
                tracing::error!(dir = %self.dir.display(), error = %e, "log write failed");
            }
            for job in batch {
                if let Some(done) = job.done {
                    done(result.clone());
                }
            }
            if result.is_ok()
                && self.len >= SEGMENT_BYTES
                && let Err(e) = self.roll()
            {
                tracing::error!(dir = %self.dir.display(), error = %e, "cannot start a new log segment");
            }
        }
    }

    fn write_batch(&mut self, batch: &mut [Job]) -> Result<(), String> {
        let mut buf = Vec::new();
        let mut sync = false;
        let mut purge = None;
        let (mut entries, mut proposals) = (0u64, 0u64);
        for job in batch.iter_mut() {
            buf.append(&mut job.bytes);
            sync |= job.sync;
            entries += job.entries;
            proposals += job.proposals;
            if let Some(max) = job.max_index
                && let Some(slot) = self.seg_max.get_mut(&self.seq)
            {
                *slot = Some(slot.map_or(max, |m| m.max(max)));
            }
            let slot = match job.kind {
                KIND_VOTE => Some(0),
                KIND_COMMITTED => Some(1),
                KIND_PURGE => Some(2),
                _ => None,
            };
            if let Some(slot) = slot {
                // The job holds exactly one record of its kind.
                let start = buf.len().saturating_sub(job.record_len);
                self.header[slot] = Some(buf[start..].to_vec());
            }
            if job.purge_upto.is_some() {
                purge = job.purge_upto;
            }
        }
        self.file.write_all(&buf).map_err(|e| e.to_string())?;
        self.len += buf.len() as u64;
        let mut fsync = None;
        if sync && self.fsync == Fsync::Always {
            let started = Instant::now();
            self.file.sync_data().map_err(|e| e.to_string())?;
            fsync = Some(started.elapsed());
        }
        self.counters
            .batch(entries, proposals, buf.len() as u64, fsync);
        if let Some(upto) = purge {
            self.delete_purged(upto);
        }
        Ok(())
    }

    /// Starts the next segment with the header records.
    fn roll(&mut self) -> Result<(), String> {
        let seq = self.seq + 1;
        let path = segment_path(&self.dir, seq);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut buf = Vec::new();
        for record in self.header.iter().flatten() {
            buf.extend_from_slice(record);
        }
        file.write_all(&buf)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        sync_dir(&self.dir).map_err(|e| e.to_string())?;
        self.file = file;
        self.seq = seq;
        self.len = buf.len() as u64;
        self.seg_max.insert(seq, None);
        Ok(())
    }

    /// Deletes the oldest segments whose entries are all purged (never the
    /// current one).
    fn delete_purged(&mut self, upto: u64) {
        let deletable: Vec<u64> = self
            .seg_max
            .iter()
            .take_while(|(seq, max)| **seq != self.seq && max.is_none_or(|m| m <= upto))
            .map(|(seq, _)| *seq)
            .collect();
        for seq in deletable {
            let path = segment_path(&self.dir, seq);
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    self.seg_max.remove(&seq);
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "cannot delete a purged log segment");
                    break;
                }
            }
        }
    }
}

fn io_err(e: String) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::write_logs(AnyError::error(e)),
    }
}

fn vote_err(e: String) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::write_vote(AnyError::error(e)),
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        Ok(self
            .mem()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let mem = self.mem();
        let last = mem
            .entries
            .values()
            .next_back()
            .map(|e| *e.get_log_id())
            .or(mem.last_purged);
        Ok(LogState {
            last_purged_log_id: mem.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let job = single(KIND_VOTE, &encode(vote).map_err(vote_err)?, true);
        self.send_wait(job).await.map_err(vote_err)?;
        self.mem().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.mem().vote)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        // Not waited for: a committed id that lags after a crash only means
        // fewer entries are re-applied before the leader commits again.
        let job = single(KIND_COMMITTED, &encode(&committed).map_err(io_err)?, false);
        self.send(job).map_err(io_err)?;
        self.mem().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.mem().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut bytes = Vec::new();
        let mut max_index = None;
        let (mut count, mut proposals) = (0u64, 0u64);
        {
            let mut mem = self.mem();
            for entry in entries {
                let body = encode(&entry).map_err(io_err)?;
                encode_record(KIND_ENTRY, &body, &mut bytes);
                let index = entry.get_log_id().index;
                max_index = Some(index);
                count += 1;
                proposals += proposals_in(&entry);
                mem.entries.insert(index, entry);
            }
        }
        let job = Job {
            bytes,
            kind: KIND_ENTRY,
            max_index,
            purge_upto: None,
            sync: true,
            record_len: 0,
            entries: count,
            proposals,
            done: Some(Box::new(move |r| {
                callback.log_io_completed(r.map_err(std::io::Error::other));
            })),
        };
        self.send(job).map_err(io_err)
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let job = single(KIND_TRUNCATE, &encode(&log_id).map_err(io_err)?, true);
        self.mem().entries.split_off(&log_id.index);
        self.send_wait(job).await.map_err(io_err)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        // Synced: older segments are deleted right after it is written.
        let mut job = single(KIND_PURGE, &encode(&log_id).map_err(io_err)?, true);
        job.purge_upto = Some(log_id.index);
        {
            let mut mem = self.mem();
            let keep = mem.entries.split_off(&(log_id.index + 1));
            mem.entries = keep;
            mem.last_purged = Some(log_id);
        }
        self.send(job).map_err(io_err)
    }
}

/// The proposals an entry holds: each of a batch's, one for any other
/// entry of the engine's, none for the log's own.
fn proposals_in(entry: &Entry<TypeConfig>) -> u64 {
    match &entry.payload {
        EntryPayload::Normal(GroupEntry::Batch(entries)) => entries.len() as u64,
        EntryPayload::Normal(_) => 1,
        EntryPayload::Blank | EntryPayload::Membership(_) => 0,
    }
}

/// A job of one record.
fn single(kind: u8, body: &[u8], sync: bool) -> Job {
    let mut bytes = Vec::new();
    encode_record(kind, body, &mut bytes);
    let record_len = bytes.len();
    Job {
        bytes,
        kind,
        max_index: None,
        purge_upto: None,
        sync,
        record_len,
        entries: 0,
        proposals: 0,
        done: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries_job(n: u64) -> Job {
        let mut job = single(KIND_ENTRY, b"x", true);
        job.entries = n;
        job.proposals = 2 * n;
        job
    }

    #[tokio::test]
    async fn counters_count_batches_entries_and_fsyncs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = LogStore::open(dir.path(), Fsync::Always).expect("open");
        assert_eq!(log.stats(), LogStats::default());
        log.send_wait(entries_job(3)).await.expect("write");
        log.send_wait(entries_job(2)).await.expect("write");
        // Not synced: counted as a write, not as an fsync.
        log.send_wait(single(KIND_COMMITTED, b"y", false))
            .await
            .expect("write");
        let stats = log.stats();
        assert_eq!(stats.writes, 3);
        assert_eq!(stats.entries, 5);
        assert_eq!(stats.fsyncs, 2);
        assert_eq!(stats.synced_entries, 5);
        assert_eq!((stats.proposals, stats.synced_proposals), (10, 10));
        assert_eq!(stats.proposals_per_fsync(), Some(5.0));
        assert!(stats.fsync_max_us <= stats.fsync_us);
        assert_eq!(stats.bytes, 3 * (crate::segment::HEADER_LEN as u64 + 2));
        assert_eq!(stats.entries_per_fsync(), Some(2.5));
        log.close();
    }

    #[tokio::test]
    async fn fsync_never_counts_writes_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = LogStore::open(dir.path(), Fsync::Never).expect("open");
        log.send_wait(entries_job(4)).await.expect("write");
        let stats = log.stats();
        assert_eq!((stats.writes, stats.entries, stats.fsyncs), (1, 4, 0));
        assert_eq!(stats.synced_entries, 0);
        assert_eq!(stats.entries_per_fsync(), None);
        log.close();
    }
}
