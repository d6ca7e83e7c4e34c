//! The on-disk Raft log of one group: segment files of checksummed records
//! (`segment`), written by one writer thread that batches whatever is
//! queued into one write and one fsync (group commit).
//!
//! Records: an entry, the vote, the committed log id, a truncation (drop
//! entries from an index on) and a purge (drop entries up to a log id).
//! Every new segment starts with the current vote, committed id and purge
//! point, so a segment whose entries are all purged can be deleted whole.
//!
//! Memory holds an index of the entries, not the entries: per entry its
//! log id, segment, offset and record length ([`Slot`], in a `VecDeque`:
//! indexes are contiguous), plus a cache of the newest entries bounded in
//! bytes ([`CACHE_BYTES`]) that also holds every entry the writer thread
//! has not written yet. A read (openraft's replication, apply, and the
//! replay after a restart all go through [`RaftLogReader`]) takes what it
//! can from the cache and reads the rest back from the segment files:
//! positional reads on a few cached read-only handles, each record's
//! checksum checked, then decoded. Recovery scans the segments in order
//! and builds the index, decoding only each entry's log id; the cache
//! starts empty.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::{Bound, RangeBounds};
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

use strand_engine::GroupEntry;

use crate::space::SpaceWait;
use crate::stats::{FSYNC_BUCKETS_US, FsyncHistogram, LogStats};
use crate::sync::lock;

use crate::segment::{
    HEADER_LEN, LogError, Tail, check_record, encode_record, encode_record_with, scan,
};
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

/// A segment grows to about this size before the next one starts. Purges
/// free the disk a whole segment at a time, so this is the slack of the
/// log's size on disk beyond what the snapshot limits keep.
const SEGMENT_BYTES: u64 = 16 << 20;

/// The cache of the log's newest entries keeps at most this many bytes
/// (of their records) of entries already written; entries the writer has
/// not written yet stay cached whatever their size. Apply reads entries
/// moments after they are written, so a small tail serves it; a decoded
/// batch of small appends takes about twice its record's bytes in memory
/// (its commands, their ids and strings), so every MiB here costs a group
/// about 2 MiB of heap. Followers further behind read the segment files.
pub const CACHE_BYTES: u64 = 2 << 20;

/// A limited read (`limited_get_log_entries`: what a leader sends a
/// follower in one append) returns at most this many bytes of records,
/// and at least one entry.
const READ_BYTES: u64 = 4 << 20;

/// Read-only segment handles kept open for reads.
const OPEN_FILES: usize = 8;

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
    /// Each entry record's log id and offset in `bytes`, so the writer can
    /// tell the index where it landed.
    located: Vec<(LogId<NodeId>, u64)>,
    done: Option<Done>,
}

/// One entry of the index.
#[derive(Debug, Clone, Copy)]
struct Slot {
    log_id: LogId<NodeId>,
    /// The segment holding the entry's record; 0 (no segment has that
    /// number) until the writer thread has written it.
    seg: u64,
    /// The record's byte offset in its segment.
    offset: u64,
    /// The record's length, header included.
    len: u32,
    /// Record bytes of the entries up to this one, counted from an
    /// arbitrary origin (differences between slots are what count).
    end: u64,
}

/// Where to read one entry's record.
#[derive(Debug, Clone, Copy)]
struct Located {
    index: u64,
    log_id: LogId<NodeId>,
    seg: u64,
    offset: u64,
    len: u32,
}

/// The store's state in memory: the index of its entries, the cache of
/// the newest ones, the vote and ids.
struct Mem {
    /// The index of `slots[0]` (when there are none, of the next entry).
    first: u64,
    slots: VecDeque<Slot>,
    /// `end` of the entry before `slots[0]`.
    base: u64,
    /// The newest entries, `cache_first..first + slots.len()`, each with
    /// its record length.
    cache: VecDeque<(Entry<TypeConfig>, u64)>,
    cache_first: u64,
    cache_bytes: u64,
    /// The bytes of written entries the cache keeps.
    cache_limit: u64,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

impl Mem {
    fn new(cache_limit: u64) -> Self {
        Self {
            first: 0,
            slots: VecDeque::new(),
            base: 0,
            cache: VecDeque::new(),
            cache_first: 0,
            cache_bytes: 0,
            cache_limit,
            vote: None,
            committed: None,
            last_purged: None,
        }
    }

    /// The index after the last entry.
    fn next(&self) -> u64 {
        self.first + self.slots.len() as u64
    }

    fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.slots.back().map(|s| s.log_id).or(self.last_purged)
    }

    fn slot(&self, index: u64) -> Option<&Slot> {
        let at = usize::try_from(index.checked_sub(self.first)?).ok()?;
        self.slots.get(at)
    }

    /// Adds an entry to the index (`seg` 0: not written yet). The index
    /// must follow the last one's.
    fn push(
        &mut self,
        log_id: LogId<NodeId>,
        seg: u64,
        offset: u64,
        len: u64,
    ) -> Result<(), String> {
        let index = log_id.index;
        if self.slots.is_empty() {
            self.first = index;
            if self.cache.is_empty() {
                self.cache_first = index;
            }
        } else if index != self.next() {
            return Err(format!(
                "entry {index} appended where entry {} was expected",
                self.next()
            ));
        }
        let end = self.slots.back().map_or(self.base, |s| s.end) + len;
        self.slots.push_back(Slot {
            log_id,
            seg,
            offset,
            len: u32::try_from(len).unwrap_or(u32::MAX),
            end,
        });
        Ok(())
    }

    /// Adds an entry not written yet: to the index and to the cache.
    fn append(&mut self, entry: Entry<TypeConfig>, len: u64) -> Result<(), String> {
        self.push(*entry.get_log_id(), 0, 0, len)?;
        self.cache.push_back((entry, len));
        self.cache_bytes += len;
        Ok(())
    }

    /// Drops the entries from `since` on.
    fn truncate(&mut self, since: u64) {
        let keep = since
            .saturating_sub(self.first)
            .min(self.slots.len() as u64);
        self.slots.truncate(keep as usize);
        let next = self.next();
        while self.cache_first + self.cache.len() as u64 > next {
            match self.cache.pop_back() {
                Some((_, len)) => self.cache_bytes -= len,
                None => break,
            }
        }
        if self.cache.is_empty() {
            self.cache_first = next;
        }
    }

    /// Drops the entries up to `upto` (inclusive).
    fn purge(&mut self, upto: LogId<NodeId>) {
        let gone = (upto.index + 1)
            .saturating_sub(self.first)
            .min(self.slots.len() as u64);
        for slot in self.slots.drain(..gone as usize) {
            self.base = slot.end;
        }
        self.first = self.first.max(upto.index + 1);
        while self.cache_first < self.first {
            match self.cache.pop_front() {
                Some((_, len)) => {
                    self.cache_bytes -= len;
                    self.cache_first += 1;
                }
                None => {
                    self.cache_first = self.first;
                }
            }
        }
        self.last_purged = Some(upto);
    }

    /// The writer thread wrote entry `log_id`'s record at `offset` of
    /// segment `seg`.
    fn located(&mut self, log_id: LogId<NodeId>, seg: u64, offset: u64) {
        let Some(at) = log_id
            .index
            .checked_sub(self.first)
            .and_then(|at| usize::try_from(at).ok())
        else {
            return;
        };
        // A slot of another log id: truncated since and replaced.
        if let Some(slot) = self.slots.get_mut(at)
            && slot.log_id == log_id
            && slot.seg == 0
        {
            slot.seg = seg;
            slot.offset = offset;
        }
    }

    /// Drops the oldest cached entries while the cache is over its limit
    /// and they are written.
    fn evict(&mut self) {
        while self.cache_bytes > self.cache_limit {
            if self.slot(self.cache_first).is_none_or(|s| s.seg == 0) {
                break;
            }
            match self.cache.pop_front() {
                Some((_, len)) => {
                    self.cache_bytes -= len;
                    self.cache_first += 1;
                }
                None => break,
            }
        }
    }

    /// Record bytes of the entries up to `index`, from the same origin as
    /// the slots' `end` (the entries purged count as none).
    fn bytes_upto(&self, index: Option<u64>) -> u64 {
        match index {
            None => self.base,
            Some(i) if i < self.first => self.base,
            Some(i) => self
                .slot(i)
                .or(self.slots.back())
                .map_or(self.base, |s| s.end),
        }
    }
}

/// Read-only handles of segments, the most recently used last.
struct SegmentFiles {
    dir: PathBuf,
    open: Mutex<VecDeque<(u64, Arc<File>)>>,
}

impl SegmentFiles {
    /// A handle of segment `seq`, opened when none is kept.
    fn get(&self, seq: u64) -> std::io::Result<Arc<File>> {
        let mut open = lock(&self.open);
        if let Some(at) = open.iter().position(|(s, _)| *s == seq) {
            let kept = open.remove(at);
            if let Some((s, file)) = kept {
                open.push_back((s, Arc::clone(&file)));
                return Ok(file);
            }
        }
        let file = Arc::new(File::open(segment_path(&self.dir, seq))?);
        open.push_back((seq, Arc::clone(&file)));
        while open.len() > OPEN_FILES {
            open.pop_front();
        }
        Ok(file)
    }

    /// Closes the kept handle of segment `seq` (deleted: its space is
    /// freed once no read holds it).
    fn forget(&self, seq: u64) {
        lock(&self.open).retain(|(s, _)| *s != seq);
    }

    fn clear(&self) {
        lock(&self.open).clear();
    }
}

/// Reads `buf.len()` bytes at `offset`.
#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Reads `buf.len()` bytes at `offset`.
#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                let (_, rest) = std::mem::take(&mut buf).split_at_mut(n);
                buf = rest;
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

struct Shared {
    mem: Arc<Mutex<Mem>>,
    files: Arc<SegmentFiles>,
    tx: Mutex<Option<std_mpsc::Sender<Job>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    counters: Arc<Counters>,
    space: Arc<SpaceWait>,
    /// The capacity a batch of entry records starts with: a little more
    /// than the last batch took (at most [`JOB_HINT_MAX`]).
    job_hint: std::sync::atomic::AtomicUsize,
    /// The committed log id saved and not written yet ([`Pending`]).
    committed: Pending,
    /// Whether this node alone reads the log ([`LogStore::read_alone`]).
    alone: std::sync::atomic::AtomicBool,
}

/// The newest committed log id openraft saved, which the writer thread
/// writes with its next batch that holds (or follows) the entry it names:
/// saving it sends no job and wakes no thread. A committed id that lags
/// after a crash only means fewer entries are applied before the leader
/// commits again; one naming an entry the log does not hold would stop
/// the group's start, so it is never written ahead of its entry.
type Pending = Arc<Mutex<Option<Option<LogId<NodeId>>>>>;

/// The most a batch of entry records reserves ahead of its records.
const JOB_HINT_MAX: usize = 1 << 20;

/// The most the writer's batch buffer keeps between batches: a batch
/// written from the same memory as the last one needs no fresh pages
/// (the server's allocator hands freed pages back to the system at once).
const BATCH_BUFFER_KEPT: usize = 1 << 20;

impl Shared {
    /// Reads entries back from their segments, in order. An entry purged
    /// meanwhile (its segment may be gone) is left out: purges drop a
    /// prefix, so what is returned stays contiguous.
    ///
    /// # Errors
    /// The index of an entry that cannot be read, and why.
    fn read_back(&self, wanted: &[Located]) -> Result<Vec<Entry<TypeConfig>>, (u64, String)> {
        let mut out = Vec::with_capacity(wanted.len());
        for at in wanted {
            match self.read_one(at) {
                Ok(entry) => out.push(entry),
                Err(_) if at.index < lock(&self.mem).first => out.clear(),
                Err(reason) => return Err((at.index, reason)),
            }
        }
        Ok(out)
    }

    fn read_one(&self, at: &Located) -> Result<Entry<TypeConfig>, String> {
        let path = segment_path(&self.files.dir, at.seg);
        let fail = |reason: String| {
            format!(
                "{}: log record at byte {} (entry {}): {reason}",
                path.display(),
                at.offset,
                at.index
            )
        };
        let file = self.files.get(at.seg).map_err(|e| fail(e.to_string()))?;
        let mut buf = vec![0u8; at.len as usize];
        read_at(&file, &mut buf, at.offset).map_err(|e| fail(e.to_string()))?;
        let (kind, body) = check_record(&buf).map_err(fail)?;
        if kind != KIND_ENTRY {
            return Err(fail(format!("a record of kind {kind}, not an entry")));
        }
        let entry: Entry<TypeConfig> = rmp_serde::from_slice(body)
            .map_err(|e| fail(format!("an intact record that does not decode: {e}")))?;
        if entry.log_id != at.log_id {
            return Err(fail(format!(
                "holds entry {} where the index has {}",
                entry.log_id, at.log_id
            )));
        }
        Ok(entry)
    }
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
    /// fsyncs by duration: `fsync_buckets[i]` counts those that took at
    /// most `FSYNC_BUCKETS_US[i]` µs and more than the bound before it;
    /// the last slot the ones above every bound.
    fsync_buckets: [AtomicU64; FSYNC_BUCKETS_US.len() + 1],
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
            let bucket = FSYNC_BUCKETS_US.partition_point(|bound| *bound < us);
            self.fsync_buckets[bucket].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn fsync_histogram(&self) -> FsyncHistogram {
        FsyncHistogram {
            counts: std::array::from_fn(|i| self.fsync_buckets[i].load(Ordering::Relaxed)),
            sum_us: self.fsync_us.load(Ordering::Relaxed),
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
            space_waits: 0,
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
    /// Entries the recovered log holds (indexed, not in memory).
    pub entries: usize,
    /// A torn tail that was truncated: the file, offset and reason.
    pub truncated: Option<(PathBuf, u64, String)>,
}

/// The sizes a log store works with (tests shrink them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizes {
    /// [`SEGMENT_BYTES`].
    pub(crate) segment: u64,
    /// [`CACHE_BYTES`].
    pub(crate) cache: u64,
}

impl Default for Sizes {
    fn default() -> Self {
        Self {
            segment: SEGMENT_BYTES,
            cache: CACHE_BYTES,
        }
    }
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
    /// Opens (or creates) the log in `dir`, recovering what it holds: the
    /// index of its entries (the entries stay on disk).
    ///
    /// # Errors
    /// An I/O error, or a damaged record that is not a torn tail
    /// ([`LogError::Corrupt`] names the file and byte offset).
    pub fn open(dir: &Path, fsync: Fsync) -> Result<(Self, Recovery), LogError> {
        Self::open_sized(dir, fsync, Sizes::default())
    }

    /// [`LogStore::open`] with other segment and cache sizes.
    pub(crate) fn open_sized(
        dir: &Path,
        fsync: Fsync,
        sizes: Sizes,
    ) -> Result<(Self, Recovery), LogError> {
        std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        let mut seqs: Vec<u64> = Vec::new();
        for item in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
            let item = item.map_err(|e| LogError::io(dir, e))?;
            let name = item.file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(".seg")
                && let Ok(seq) = stem.parse::<u64>()
                && seq > 0
            {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let mut mem = Mem::new(sizes.cache);
        let mut recovery = Recovery::default();
        let mut seg_max: BTreeMap<u64, Option<u64>> = BTreeMap::new();
        let mut current_len = 0u64;
        let mut gap = None;
        for (i, &seq) in seqs.iter().enumerate() {
            let path = segment_path(dir, seq);
            let bytes = std::fs::read(&path).map_err(|e| LogError::io(&path, e))?;
            let last = i + 1 == seqs.len();
            let (records, tail) = scan(&path, &bytes, last)?;
            let mut max = None;
            for record in &records {
                let len = (HEADER_LEN + 1 + record.body.len()) as u64;
                let at = At {
                    path: &path,
                    seq,
                    offset: record.offset,
                    len,
                };
                replay(&mut mem, &at, record.kind, record.body, &mut gap)?;
                if record.kind == KIND_ENTRY {
                    max = mem.next().checked_sub(1).max(max);
                }
            }
            recovery.records += records.len();
            seg_max.insert(seq, max);
            current_len = bytes.len() as u64;
            drop(records);
            drop(bytes);
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
        if let Some((path, offset, index)) = gap {
            let covered = mem.last_purged.map(|p| p.index + 1);
            if !mem.slots.is_empty() && covered != Some(mem.first) {
                return Err(corrupt(
                    &path,
                    offset,
                    format!(
                        "entry {index} follows a gap no purge record covers (entries after {:?} are missing)",
                        mem.last_purged.map(|p| p.index)
                    ),
                ));
            }
        }
        recovery.segments = seqs.len();
        recovery.entries = mem.slots.len();
        mem.cache_first = mem.next();
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
        let space = Arc::new(SpaceWait::default());
        let mem = Arc::new(Mutex::new(mem));
        let files = Arc::new(SegmentFiles {
            dir: dir.to_path_buf(),
            open: Mutex::new(VecDeque::new()),
        });
        let shared = Arc::new(Shared {
            mem: Arc::clone(&mem),
            files: Arc::clone(&files),
            tx: Mutex::new(None),
            writer: Mutex::new(None),
            counters: Arc::clone(&counters),
            space: Arc::clone(&space),
            job_hint: std::sync::atomic::AtomicUsize::new(0),
            committed: Pending::default(),
            alone: std::sync::atomic::AtomicBool::new(false),
        });
        let (tx, rx) = std_mpsc::channel();
        let writer = Writer {
            dir: dir.to_path_buf(),
            fsync,
            committed: Arc::clone(&shared.committed),
            file,
            seq,
            len: current_len,
            segment_bytes: sizes.segment,
            seg_max,
            header,
            counters,
            space,
            mem,
            files,
            batch_buffer: Vec::new(),
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

    /// The entries the log holds (on disk or cached), for tests and tools.
    pub fn entry_count(&self) -> usize {
        self.mem().slots.len()
    }

    /// The entries the cache holds, for tests and tools.
    pub fn cached_entries(&self) -> usize {
        self.mem().cache.len()
    }

    /// The record bytes of the entries the cache holds, for tests and
    /// tools: at most [`CACHE_BYTES`] once the writer has written them.
    pub fn cached_bytes(&self) -> u64 {
        self.mem().cache_bytes
    }

    /// The record bytes of the entries after index `after` up to index
    /// `upto` (both `None` for "before the first entry"), as far as the
    /// log still holds them.
    pub fn bytes_between(&self, after: Option<u64>, upto: Option<u64>) -> u64 {
        let mem = self.mem();
        mem.bytes_upto(upto).saturating_sub(mem.bytes_upto(after))
    }

    /// The index to purge up to (inclusive) so that at most `keep` bytes
    /// of records of the entries up to `snapshot` stay in the log; `None`
    /// when they already fit.
    pub fn purge_point(&self, snapshot: u64, keep: u64) -> Option<u64> {
        let mem = self.mem();
        if snapshot < mem.first {
            return None;
        }
        let covered = mem.bytes_upto(Some(snapshot));
        if covered - mem.base <= keep {
            return None;
        }
        let target = covered - keep;
        let at = mem.slots.partition_point(|s| s.end < target) as u64;
        Some((mem.first + at).min(snapshot))
    }

    /// The writer thread's counters since the log was opened: batches,
    /// entries and bytes written, fsyncs and their time (recovery's
    /// truncation and new segments' headers are not counted).
    pub fn stats(&self) -> LogStats {
        LogStats {
            space_waits: self.shared.space.waits(),
            ..self.shared.counters.stats()
        }
    }

    /// The writer thread's fsyncs by duration since the log was opened.
    pub fn fsync_histogram(&self) -> FsyncHistogram {
        self.shared.counters.fsync_histogram()
    }

    /// The log index of the last entry known committed (as openraft last
    /// saved it), when there is one.
    pub fn committed(&self) -> Option<u64> {
        self.mem().committed.map(|c| c.index)
    }

    /// The vote held, for tests and tools.
    pub fn vote(&self) -> Option<Vote<NodeId>> {
        self.mem().vote
    }

    /// True while the log waits for disk space to write (its filesystem
    /// is full): what was sent to it is neither written nor lost, and
    /// it is written once space is freed. New writes should be refused
    /// meanwhile.
    pub fn waiting_for_space(&self) -> bool {
        self.shared.space.waiting()
    }

    /// The group's waits for disk space, shared with its snapshot builder.
    pub(crate) fn space(&self) -> Arc<SpaceWait> {
        Arc::clone(&self.shared.space)
    }

    /// Tells the store that no other member reads its entries (a single
    /// node's group): then applying takes written entries out of the
    /// cache instead of copying them (openraft applies them once, through
    /// `try_get_log_entries`), and any later read of them reads their
    /// segment. A cluster's group keeps them cached for its followers.
    pub(crate) fn read_alone(&self) {
        self.shared.alone.store(true, Ordering::Relaxed);
    }

    /// Stops the writer thread once it has written what is queued, and
    /// waits for it (blocking). Later writes fail, and a write waiting
    /// for disk space fails instead of waiting on.
    pub fn close(&self) {
        self.shared.space.close();
        lock(&self.shared.tx).take();
        let handle = lock(&self.shared.writer).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
        self.shared.files.clear();
    }

    /// The entries of `range` the log holds, in order, at most `limit`
    /// bytes of records of them (and at least one): the cached ones from
    /// the cache, the others read back from their segments on a blocking
    /// thread.
    ///
    /// With `take`, written entries at the front of the cache are moved
    /// out of it, not copied ([`LogStore::read_alone`]).
    async fn read<RB: RangeBounds<u64>>(
        &self,
        range: RB,
        limit: u64,
        take: bool,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let mut on_disk = Vec::new();
        let mut cached = Vec::new();
        {
            let mut mem = self.mem();
            let start = match range.start_bound() {
                Bound::Included(s) => *s,
                Bound::Excluded(s) => s.saturating_add(1),
                Bound::Unbounded => 0,
            }
            .max(mem.first);
            let end = match range.end_bound() {
                Bound::Included(e) => e.saturating_add(1),
                Bound::Excluded(e) => *e,
                Bound::Unbounded => u64::MAX,
            }
            .min(mem.next());
            let mut bytes = 0u64;
            for index in start..end {
                let Some(slot) = mem.slot(index).copied() else {
                    break;
                };
                let len = u64::from(slot.len);
                if bytes > 0 && bytes.saturating_add(len) > limit {
                    break;
                }
                bytes += len;
                if take && index == mem.cache_first && slot.seg != 0 {
                    match mem.cache.pop_front() {
                        Some((entry, len)) => {
                            mem.cache_bytes -= len;
                            mem.cache_first += 1;
                            cached.push(entry);
                        }
                        None => break,
                    }
                } else if index >= mem.cache_first {
                    let at = (index - mem.cache_first) as usize;
                    match mem.cache.get(at) {
                        Some((entry, _)) => cached.push(entry.clone()),
                        None => break,
                    }
                } else if slot.seg == 0 {
                    // Cannot happen: only written entries leave the cache.
                    return Err(StorageError::IO {
                        source: StorageIOError::read_log_at_index(
                            index,
                            AnyError::error("an entry neither cached nor written"),
                        ),
                    });
                } else {
                    on_disk.push(Located {
                        index,
                        log_id: slot.log_id,
                        seg: slot.seg,
                        offset: slot.offset,
                        len: slot.len,
                    });
                }
            }
        }
        if on_disk.is_empty() {
            return Ok(cached);
        }
        let shared = Arc::clone(&self.shared);
        let mut entries = tokio::task::spawn_blocking(move || shared.read_back(&on_disk))
            .await
            .map_err(|e| StorageError::IO {
                source: StorageIOError::read_logs(AnyError::error(e)),
            })?
            .map_err(|(index, reason)| StorageError::IO {
                source: StorageIOError::read_log_at_index(index, AnyError::error(reason)),
            })?;
        entries.extend(cached);
        Ok(entries)
    }

    /// Appends entries: each goes into the index and the cache at once,
    /// and to the writer thread, which calls `done` once they are on disk.
    ///
    /// # Errors
    /// An entry that does not encode or follow the log, or a stopped
    /// writer.
    fn append_entries<I>(&self, entries: I, done: Done) -> Result<(), String>
    where
        I: IntoIterator<Item = Entry<TypeConfig>>,
    {
        // About as large as the last batch: the records are serialized
        // straight into it, with few reallocations on the way.
        let mut bytes = Vec::with_capacity(self.shared.job_hint.load(Ordering::Relaxed));
        let mut located = Vec::new();
        let mut max_index = None;
        let (mut count, mut proposals) = (0u64, 0u64);
        {
            let mut mem = self.mem();
            for entry in entries {
                let at = bytes.len();
                encode_record_with(KIND_ENTRY, &mut bytes, |out| {
                    rmp_serde::encode::write_named(out, &entry)
                })?;
                let log_id = *entry.get_log_id();
                max_index = Some(log_id.index);
                count += 1;
                proposals += proposals_in(&entry);
                mem.append(entry, (bytes.len() - at) as u64)?;
                located.push((log_id, at as u64));
            }
        }
        self.shared.job_hint.store(
            bytes
                .len()
                .saturating_add(bytes.len() / 4)
                .min(JOB_HINT_MAX),
            Ordering::Relaxed,
        );
        let job = Job {
            bytes,
            kind: KIND_ENTRY,
            max_index,
            purge_upto: None,
            sync: true,
            record_len: 0,
            entries: count,
            proposals,
            located,
            done: Some(done),
        };
        self.send(job)
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

/// An entry record's log id, decoded without its payload (which is
/// skipped over, not copied).
#[derive(serde::Deserialize)]
struct EntryHead {
    log_id: LogId<NodeId>,
}

/// Where a recovered record is: segment `seq` at `path`, `len` bytes at
/// `offset`.
struct At<'a> {
    path: &'a Path,
    seq: u64,
    offset: u64,
    len: u64,
}

/// The first entry found after a gap at the start of the log left after
/// purges: its file, offset and index.
type Gap = Option<(PathBuf, u64, u64)>;

/// Applies one recovered record to the index and state.
fn replay(
    mem: &mut Mem,
    at: &At<'_>,
    kind: u8,
    body: &[u8],
    gap: &mut Gap,
) -> Result<(), LogError> {
    let At {
        path,
        seq,
        offset,
        len,
    } = *at;
    match kind {
        KIND_ENTRY => {
            let head: EntryHead = decode(path, offset, body)?;
            let index = head.log_id.index;
            let expected = if mem.slots.is_empty() {
                mem.last_purged.map(|l| l.index + 1)
            } else {
                Some(mem.next())
            };
            // The oldest segment left may start after a gap its own
            // header's purge record does not cover: segments are deleted
            // once a later purge record (in a later position of the log)
            // covers them. The end of recovery checks that one did.
            let gap_at_start =
                mem.slots.is_empty() && expected.is_some_and(|expected| index > expected);
            if gap_at_start && gap.is_none() {
                *gap = Some((path.to_path_buf(), offset, index));
            } else if let Some(expected) = expected
                && index != expected
            {
                return Err(corrupt(
                    path,
                    offset,
                    format!("entry {index} where entry {expected} was expected"),
                ));
            }
            mem.push(head.log_id, seq, offset, len)
                .map_err(|e| corrupt(path, offset, e))?;
        }
        KIND_VOTE => mem.vote = Some(decode(path, offset, body)?),
        KIND_COMMITTED => mem.committed = decode(path, offset, body)?,
        KIND_TRUNCATE => {
            let since: LogId<NodeId> = decode(path, offset, body)?;
            mem.truncate(since.index);
        }
        KIND_PURGE => {
            let upto: LogId<NodeId> = decode(path, offset, body)?;
            mem.purge(upto);
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
    /// A segment grows to about this size before the next one starts.
    segment_bytes: u64,
    /// Each segment's highest entry index.
    seg_max: BTreeMap<u64, Option<u64>>,
    /// The latest vote, committed and purge records (for a new segment).
    header: [Option<Vec<u8>>; 3],
    counters: Arc<Counters>,
    /// The group's waits for disk space.
    space: Arc<SpaceWait>,
    /// The store's index, told where each entry landed.
    mem: Arc<Mutex<Mem>>,
    /// The readers' handles, closed when their segment is deleted.
    files: Arc<SegmentFiles>,
    /// The committed log id to write with a batch.
    committed: Pending,
    /// The last batch's buffer, empty, for the next one
    /// ([`BATCH_BUFFER_KEPT`]).
    batch_buffer: Vec<u8>,
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
                && self.len >= self.segment_bytes
                && let Err(e) = self.roll()
            {
                tracing::error!(dir = %self.dir.display(), error = %e, "cannot start a new log segment");
            }
        }
        // Closing: the last committed id goes to disk with what was queued.
        if let Some(record) = self.committed_record(&[]) {
            let written = self
                .write_waiting_for_space(&record)
                .and_then(|()| self.file.sync_data().map_err(|e| e.to_string()));
            if let Err(e) = written {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot write the committed log id");
            }
        }
    }

    /// The record of the pending committed log id, taken, when the log
    /// holds its entry: written before (located in the index), purged, or
    /// among `placed` (this batch's entries, which go first).
    fn committed_record(&mut self, placed: &[(LogId<NodeId>, u64)]) -> Option<Vec<u8>> {
        let mut pending = lock(&self.committed);
        let committed = (*pending)?;
        if let Some(id) = committed {
            let held = placed.iter().any(|(p, _)| *p == id) || {
                let mem = lock(&self.mem);
                id.index < mem.first
                    || mem
                        .slot(id.index)
                        .is_some_and(|s| s.log_id == id && s.seg != 0)
            };
            if !held {
                return None;
            }
        }
        *pending = None;
        drop(pending);
        let record = single(KIND_COMMITTED, &encode(&committed).ok()?, false).bytes;
        self.header[1] = Some(record.clone());
        Some(record)
    }

    fn write_batch(&mut self, batch: &mut [Job]) -> Result<(), String> {
        // Empty: it is cleared before it is kept.
        let mut buf = std::mem::take(&mut self.batch_buffer);
        let mut sync = false;
        let mut purge = None;
        let mut placed = Vec::new();
        let (mut entries, mut proposals) = (0u64, 0u64);
        for job in batch.iter_mut() {
            let at = self.len + buf.len() as u64;
            placed.extend(job.located.drain(..).map(|(id, rel)| (id, at + rel)));
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
        if let Some(record) = self.committed_record(&placed) {
            buf.extend_from_slice(&record);
        }
        self.write_waiting_for_space(&buf)?;
        self.len += buf.len() as u64;
        if !placed.is_empty() {
            // Readable from here on (the page cache serves positional
            // reads before the fsync), so the cache may let them go.
            let mut mem = lock(&self.mem);
            for (log_id, offset) in placed {
                mem.located(log_id, self.seq, offset);
            }
            mem.evict();
        }
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
        if buf.capacity() <= BATCH_BUFFER_KEPT {
            buf.clear();
            self.batch_buffer = buf;
        }
        Ok(())
    }

    /// Writes `buf` at the end of the segment. A write the filesystem
    /// refuses for want of space is cut off and tried again until it fits
    /// or the log closes ([`SpaceWait::retry`]): the batch's entries were
    /// not acknowledged, so waiting loses nothing, and openraft, which
    /// stops a group whose log write fails, sees a slow disk instead. Any
    /// other error fails the batch.
    fn write_waiting_for_space(&mut self, buf: &[u8]) -> Result<(), String> {
        let (file, len, dir) = (&mut self.file, self.len, &self.dir);
        self.space
            .retry("log write", &segment_path(dir, self.seq), || {
                file.write_all(buf).map_err(|e| {
                    // A failed write may leave part of the batch behind:
                    // cut it off, so a later write starts where the index
                    // thinks it does and recovery never meets a torn
                    // record with whole ones after it. If that fails too,
                    // the write is not tried again.
                    match file.set_len(len) {
                        Ok(()) => e,
                        Err(t) => std::io::Error::other(format!(
                            "{e}; cutting the failed write off failed: {t}"
                        )),
                    }
                })
            })
            .map_err(|e| e.to_string())
    }

    /// Starts the next segment with the header records.
    fn roll(&mut self) -> Result<(), String> {
        let seq = self.seq + 1;
        let path = segment_path(&self.dir, seq);
        // A roll that failed before (a full disk) may have left the file
        // with part of its header: it holds no entry, and appending after
        // it would put a torn record before whole ones.
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
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
                    self.files.forget(seq);
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
        let alone = self.shared.alone.load(Ordering::Relaxed);
        self.read(range, u64::MAX, alone).await
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        self.read(start..end, READ_BYTES, false).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let mem = self.mem();
        Ok(LogState {
            last_purged_log_id: mem.last_purged,
            last_log_id: mem.last_log_id(),
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
        // Written with the writer's next batch ([`Pending`]): not waited
        // for, and no job of its own.
        *lock(&self.shared.committed) = Some(committed);
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
        self.append_entries(
            entries,
            Box::new(move |r| {
                callback.log_io_completed(r.map_err(std::io::Error::other));
            }),
        )
        .map_err(io_err)
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let job = single(KIND_TRUNCATE, &encode(&log_id).map_err(io_err)?, true);
        self.mem().truncate(log_id.index);
        self.send_wait(job).await.map_err(io_err)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        // Synced: older segments are deleted right after it is written.
        let mut job = single(KIND_PURGE, &encode(&log_id).map_err(io_err)?, true);
        job.purge_upto = Some(log_id.index);
        self.mem().purge(log_id);
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
        located: Vec::new(),
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
        // Each fsync lands in exactly one bucket of the histogram.
        let fsyncs = log.fsync_histogram();
        assert_eq!(fsyncs.count(), 2);
        assert_eq!(fsyncs.sum_us, stats.fsync_us);
        assert_eq!(fsyncs.combined(fsyncs).count(), 4);
        log.close();
    }

    #[test]
    fn fsync_durations_fall_in_the_bucket_bounding_them() {
        let counters = Counters::default();
        for us in [0, 100, 101, 1_000_000, 1_000_001, u64::MAX] {
            counters.batch(1, 1, 1, Some(std::time::Duration::from_micros(us)));
        }
        let h = counters.fsync_histogram();
        let last = FSYNC_BUCKETS_US.len();
        assert_eq!(h.counts[0], 2, "{h:?}");
        assert_eq!(h.counts[1], 1, "{h:?}");
        assert_eq!(h.counts[last - 1], 1, "{h:?}");
        assert_eq!(h.counts[last], 2, "{h:?}");
        assert_eq!(h.count(), 6);
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

/// The index, the cache and reads back from the segment files.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod disk {
    use super::*;

    use bytes::Bytes;
    use openraft::CommittedLeaderId;
    use strand::BucketStreamId;
    use strand_engine::WriteRequest;

    /// Entry `index` of `term`: an append of `size` bytes that depend on
    /// both.
    fn entry(index: u64, term: u64, size: usize) -> Entry<TypeConfig> {
        let payload: Vec<u8> = (0..size as u64)
            .map(|i| (i.wrapping_mul(31) ^ index.wrapping_mul(7) ^ term) as u8)
            .collect();
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(GroupEntry::Write {
                request: Box::new(WriteRequest {
                    stream_id: BucketStreamId::new("acme", format!("s{}", index % 3)),
                    content_type: None,
                    media_type_match: true,
                    payload: Bytes::from(payload),
                    close: false,
                    stream_seq: None,
                    producer: None,
                    record_match: None,
                }),
                now_ms: index,
            }),
        }
    }

    fn entries(range: std::ops::Range<u64>, term: u64, size: usize) -> Vec<Entry<TypeConfig>> {
        range.map(|i| entry(i, term, size)).collect()
    }

    /// Appends and waits until the writer has written them.
    async fn append(log: &LogStore, entries: Vec<Entry<TypeConfig>>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        log.append_entries(
            entries,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )
        .unwrap();
        rx.await.unwrap().unwrap();
    }

    /// Entries compared by their encoding, byte for byte.
    fn assert_same(got: &[Entry<TypeConfig>], want: &[Entry<TypeConfig>]) {
        let ids = |es: &[Entry<TypeConfig>]| es.iter().map(|e| e.log_id.index).collect::<Vec<_>>();
        assert_eq!(ids(got), ids(want));
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g.log_id, w.log_id);
            assert!(
                encode(g).unwrap() == encode(w).unwrap(),
                "entry {} differs",
                w.log_id.index
            );
        }
    }

    fn small(cache: u64) -> Sizes {
        Sizes {
            segment: 1 << 20,
            cache,
        }
    }

    fn segments(dir: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "seg"))
            .collect();
        out.sort();
        out
    }

    const KIB: usize = 1 << 10;

    #[test]
    fn an_index_slot_is_small() {
        assert!(
            std::mem::size_of::<Slot>() <= 56,
            "{}",
            std::mem::size_of::<Slot>()
        );
    }

    #[tokio::test]
    async fn a_log_read_alone_gives_written_entries_up_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Never, small(1 << 20)).unwrap();
        let want = entries(0..10, 1, KIB);
        append(&log, want[..6].to_vec()).await;
        let mut reader = log.clone();
        // Shared with followers: reads copy.
        assert_same(&reader.try_get_log_entries(0..4).await.unwrap(), &want[..4]);
        assert_eq!(log.cached_entries(), 6);
        log.read_alone();
        // Alone: what apply reads leaves the cache; a limited read (a
        // follower's) still copies.
        assert_same(
            &reader.limited_get_log_entries(0, 2).await.unwrap(),
            &want[..2],
        );
        assert_eq!(log.cached_entries(), 6);
        assert_same(&reader.try_get_log_entries(0..4).await.unwrap(), &want[..4]);
        assert_eq!(log.cached_entries(), 2);
        // Read again, from the segment, byte-exact; then the rest, across.
        assert_same(&reader.try_get_log_entries(0..6).await.unwrap(), &want[..6]);
        assert_eq!(log.cached_entries(), 0);
        append(&log, want[6..].to_vec()).await;
        assert_same(&reader.try_get_log_entries(..).await.unwrap(), &want);
        assert_eq!(log.cached_entries(), 0);
        log.close();
    }

    #[tokio::test]
    async fn a_committed_id_is_written_with_or_after_its_entry() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = LogStore::open_sized(dir.path(), Fsync::Always, small(1 << 20)).unwrap();
        append(&log, entries(0..3, 1, 16)).await;
        // Entry 2 is written: the id goes with the next batch, or at close.
        let two = Some(entry(2, 1, 16).log_id);
        log.save_committed(two).await.unwrap();
        assert_eq!(log.read_committed().await.unwrap(), two);
        // Entry 4 is not in the log yet: its id waits for it.
        let four = Some(entry(4, 1, 16).log_id);
        log.save_committed(four).await.unwrap();
        append(&log, entries(3..4, 1, 16)).await;
        log.close();
        let (mut log, _) = LogStore::open_sized(dir.path(), Fsync::Always, small(1 << 20)).unwrap();
        assert_eq!(log.read_committed().await.unwrap(), None);
        // The next batch after the entry carries it; so does closing.
        log.save_committed(two).await.unwrap();
        append(&log, entries(4..5, 1, 16)).await;
        log.save_committed(four).await.unwrap();
        append(&log, entries(5..6, 1, 16)).await;
        log.close();
        let (mut log, _) = LogStore::open_sized(dir.path(), Fsync::Always, small(1 << 20)).unwrap();
        assert_eq!(log.read_committed().await.unwrap(), four);
        let five = Some(entry(5, 1, 16).log_id);
        log.save_committed(five).await.unwrap();
        log.close();
        let (mut log, _) = LogStore::open_sized(dir.path(), Fsync::Always, small(1 << 20)).unwrap();
        assert_eq!(log.read_committed().await.unwrap(), five);
        log.close();
    }

    #[tokio::test]
    async fn entries_that_left_the_cache_read_back_byte_exact() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Never, small(256 << 10)).unwrap();
        // 80 entries of 64 KiB: 5 MiB over 1 MiB segments, a 256 KiB cache.
        let want = entries(0..80, 1, 64 * KIB);
        for chunk in want.chunks(5) {
            append(&log, chunk.to_vec()).await;
        }
        assert_eq!(log.entry_count(), 80);
        assert!(log.cached_bytes() <= 256 << 10, "{}", log.cached_bytes());
        assert!(log.cached_entries() < 5, "{}", log.cached_entries());
        assert!(segments(dir.path()).len() >= 3);
        let mut reader = log.clone();
        let got = reader.try_get_log_entries(0..80).await.unwrap();
        assert_same(&got, &want);
        // Any range, disk and cache together, bounds of either kind.
        let got = reader.try_get_log_entries(30..=79).await.unwrap();
        assert_same(&got, &want[30..]);
        let got = reader.try_get_log_entries(..3).await.unwrap();
        assert_same(&got, &want[..3]);
        // Beyond the log: nothing, not an error.
        assert!(reader.try_get_log_entries(80..90).await.unwrap().is_empty());
        // A limited read stops at READ_BYTES (4 MiB of 64 KiB entries).
        let got = reader.limited_get_log_entries(0, 80).await.unwrap();
        assert!(!got.is_empty() && got.len() < 80, "{}", got.len());
        assert_same(&got, &want[..got.len()]);
        log.close();
    }

    #[tokio::test]
    async fn a_limited_read_returns_at_least_one_entry() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Never, small(0)).unwrap();
        let want = entries(0..2, 1, (READ_BYTES as usize) + KIB);
        append(&log, want.clone()).await;
        let mut reader = log.clone();
        let got = reader.limited_get_log_entries(0, 2).await.unwrap();
        assert_same(&got, &want[..1]);
        log.close();
    }

    #[tokio::test]
    async fn a_reopened_log_indexes_its_entries_and_reads_them_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        let want = entries(0..40, 1, 48 * KIB);
        {
            let (log, _) = LogStore::open_sized(dir.path(), Fsync::Always, small(1 << 20)).unwrap();
            for chunk in want.chunks(7) {
                append(&log, chunk.to_vec()).await;
            }
            log.close();
        }
        let (log, recovery) =
            LogStore::open_sized(dir.path(), Fsync::Always, small(1 << 20)).unwrap();
        assert_eq!(recovery.entries, 40);
        assert_eq!(recovery.records, 40);
        assert!(recovery.truncated.is_none());
        assert_eq!((log.entry_count(), log.cached_entries()), (40, 0));
        let mut store = log.clone();
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id, Some(want[39].log_id));
        let got = store.try_get_log_entries(0..40).await.unwrap();
        assert_same(&got, &want);
        // The log goes on where it stopped.
        let more = entries(40..45, 2, KIB);
        append(&log, more.clone()).await;
        let got = store.try_get_log_entries(38..45).await.unwrap();
        assert_same(&got[..2], &want[38..]);
        assert_same(&got[2..], &more);
        log.close();
    }

    #[tokio::test]
    async fn truncate_and_purge_keep_the_index_the_cache_and_the_files_in_step() {
        let dir = tempfile::tempdir().unwrap();
        let sizes = Sizes {
            segment: 256 << 10,
            cache: 128 << 10,
        };
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Always, sizes).unwrap();
        let mut store = log.clone();
        let first = entries(0..30, 1, 64 * KIB);
        for chunk in first.chunks(3) {
            append(&log, chunk.to_vec()).await;
        }
        // A new leader's entries replace 20.. (openraft truncates first).
        store.truncate(first[20].log_id).await.unwrap();
        assert_eq!(log.entry_count(), 20);
        let second = entries(20..26, 2, 32 * KIB);
        append(&log, second.clone()).await;
        let mut want: Vec<Entry<TypeConfig>> = first[..20].to_vec();
        want.extend(second.iter().cloned());
        assert_same(&store.try_get_log_entries(0..26).await.unwrap(), &want);
        // A truncation of cached entries, then of written ones only.
        store.truncate(want[24].log_id).await.unwrap();
        want.truncate(24);
        assert_same(&store.try_get_log_entries(0..30).await.unwrap(), &want);
        let before = segments(dir.path()).len();
        store.purge(want[14].log_id).await.unwrap();
        // The purge record is written (and old segments deleted) once a
        // later write went through the writer behind it.
        store.save_vote(&Vote::new(2, 1)).await.unwrap();
        let after = segments(dir.path()).len();
        assert!(after < before, "{before} → {after} segments");
        assert_eq!(log.entry_count(), 9);
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(want[14].log_id));
        assert_same(
            &store.try_get_log_entries(0..30).await.unwrap(),
            &want[15..],
        );
        log.close();
        // The records replay to the same log.
        let (log, recovery) = LogStore::open_sized(dir.path(), Fsync::Always, sizes).unwrap();
        assert_eq!(recovery.entries, 9);
        let mut store = log.clone();
        assert_same(
            &store.try_get_log_entries(0..30).await.unwrap(),
            &want[15..],
        );
        assert_eq!(log.vote(), Some(Vote::new(2, 1)));
        log.close();
    }

    /// Found by a 1 GiB load: the oldest segment left after purges
    /// starts with the purge record of when it began, older than the
    /// purge that deleted the segments before it. The log must reopen.
    #[tokio::test]
    async fn a_log_purged_in_steps_across_segment_rolls_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let sizes = Sizes {
            segment: 128 << 10,
            cache: 64 << 10,
        };
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Always, sizes).unwrap();
        let mut store = log.clone();
        let all = entries(0..60, 1, 16 * KIB);
        for (n, chunk) in all.chunks(4).enumerate() {
            append(&log, chunk.to_vec()).await;
            // Purge behind the writes, as snapshots do: each new segment
            // starts with the purge known then.
            if n % 3 == 2 {
                let upto = (n * 4).saturating_sub(6);
                store.purge(all[upto].log_id).await.unwrap();
            }
        }
        store.purge(all[52].log_id).await.unwrap();
        store.save_vote(&Vote::new(1, 1)).await.unwrap();
        let want = &all[53..];
        assert_same(&store.try_get_log_entries(0..60).await.unwrap(), want);
        log.close();
        let (log, recovery) = LogStore::open_sized(dir.path(), Fsync::Always, sizes).unwrap();
        assert_eq!(recovery.entries, 7);
        let mut store = log.clone();
        assert_same(&store.try_get_log_entries(0..60).await.unwrap(), want);
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(all[52].log_id));
        log.close();
    }

    /// kill -9 while a segment rolls: the new segment exists but its
    /// header records (vote, committed, purge) are cut short. The log
    /// reopens with every entry, and the vote survives the later purges
    /// that delete the segments written before the roll.
    #[tokio::test]
    async fn a_roll_cut_short_by_a_crash_loses_neither_entries_nor_the_vote() {
        let dir = tempfile::tempdir().unwrap();
        let sizes = Sizes {
            segment: 64 << 10,
            cache: 64 << 10,
        };
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Always, sizes).unwrap();
        let mut store = log.clone();
        store.save_vote(&Vote::new(3, 1)).await.unwrap();
        let all = entries(0..40, 3, 16 * KIB);
        // Exactly one segment's worth: the writer rolls after the last.
        append(&log, all[..4].to_vec()).await;
        log.close();
        let segs = segments(dir.path());
        assert_eq!(segs.len(), 2, "{segs:?}");
        let header = std::fs::metadata(&segs[1]).unwrap().len();
        assert!(header > 0);
        for cut in [0, 1, header / 2, header - 1] {
            let copy = tempfile::tempdir().unwrap();
            for seg in &segs {
                std::fs::copy(seg, copy.path().join(seg.file_name().unwrap())).unwrap();
            }
            let torn = copy.path().join(segs[1].file_name().unwrap());
            std::fs::OpenOptions::new()
                .write(true)
                .open(&torn)
                .unwrap()
                .set_len(cut)
                .unwrap();
            let (log, recovery) = LogStore::open_sized(copy.path(), Fsync::Always, sizes).unwrap();
            assert_eq!(recovery.entries, 4, "cut at {cut}");
            let mut store = log.clone();
            assert_same(&store.try_get_log_entries(0..40).await.unwrap(), &all[..4]);
            // Writing on, purging behind: the segments before the cut one
            // are deleted, and the vote must live on in a newer one.
            for (n, chunk) in all[4..].chunks(4).enumerate() {
                append(&log, chunk.to_vec()).await;
                store.purge(all[4 * n + 3].log_id).await.unwrap();
            }
            log.close();
            assert!(!copy.path().join(segs[0].file_name().unwrap()).exists());
            let (log, _) = LogStore::open_sized(copy.path(), Fsync::Always, sizes).unwrap();
            let mut store = log.clone();
            assert_eq!(
                store.read_vote().await.unwrap(),
                Some(Vote::new(3, 1)),
                "cut at {cut}"
            );
            assert_same(&store.try_get_log_entries(0..40).await.unwrap(), &all[36..]);
            log.close();
        }
    }

    #[tokio::test]
    async fn a_gap_no_purge_record_covers_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let sizes = Sizes {
            segment: 64 << 10,
            cache: 64 << 10,
        };
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Always, sizes).unwrap();
        let mut store = log.clone();
        let all = entries(0..24, 1, 16 * KIB);
        append(&log, all[..4].to_vec()).await;
        store.purge(all[1].log_id).await.unwrap();
        append(&log, all[4..].to_vec()).await;
        store.save_vote(&Vote::new(1, 1)).await.unwrap();
        log.close();
        // A segment in the middle goes missing: entries after the purge
        // point are lost, which no later purge record explains.
        let segs = segments(dir.path());
        assert!(segs.len() >= 3, "{segs:?}");
        std::fs::remove_file(&segs[0]).unwrap();
        let err = LogStore::open_sized(dir.path(), Fsync::Always, sizes).unwrap_err();
        assert!(err.to_string().contains("gap"), "{err}");
    }

    #[tokio::test]
    async fn a_purge_past_the_end_of_the_log_empties_it() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Never, small(1 << 20)).unwrap();
        let mut store = log.clone();
        append(&log, entries(0..5, 1, KIB)).await;
        // A follower that installed a snapshot beyond its log.
        let snapshot = entry(9, 1, 0).log_id;
        store.purge(snapshot).await.unwrap();
        assert_eq!((log.entry_count(), log.cached_entries()), (0, 0));
        assert!(store.try_get_log_entries(0..20).await.unwrap().is_empty());
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id, Some(snapshot));
        let next = entries(10..12, 1, KIB);
        append(&log, next.clone()).await;
        assert_same(&store.try_get_log_entries(0..20).await.unwrap(), &next);
        log.close();
        let (log, recovery) =
            LogStore::open_sized(dir.path(), Fsync::Never, small(1 << 20)).unwrap();
        assert_eq!(recovery.entries, 2);
        assert_same(
            &log.clone().try_get_log_entries(0..20).await.unwrap(),
            &next,
        );
        log.close();
    }

    #[tokio::test]
    async fn bytes_are_counted_per_entry_and_purge_points_keep_a_bounded_tail() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Never, small(1 << 20)).unwrap();
        append(&log, entries(0..10, 1, 10 * KIB)).await;
        let one = log.bytes_between(Some(0), Some(1));
        assert!(one > 10 * KIB as u64 && one < 11 * KIB as u64, "{one}");
        assert_eq!(log.bytes_between(None, Some(9)), 10 * one);
        assert_eq!(log.bytes_between(Some(3), Some(7)), 4 * one);
        assert_eq!(log.bytes_between(Some(3), Some(100)), 6 * one);
        assert_eq!(log.bytes_between(Some(7), Some(3)), 0);
        // Keep at most 2.5 entries' bytes of the 8 up to the snapshot at 7:
        // purge up to 5, keeping 6 and 7.
        assert_eq!(log.purge_point(7, 5 * one / 2), Some(5));
        assert_eq!(log.purge_point(7, 2 * one), Some(5));
        assert_eq!(log.purge_point(7, 8 * one), None);
        assert_eq!(log.purge_point(7, 0), Some(7));
        log.clone().purge(entry(5, 1, 0).log_id).await.unwrap();
        assert_eq!(log.bytes_between(None, Some(9)), 4 * one);
        assert_eq!(log.purge_point(7, 2 * one), None);
        assert_eq!(log.purge_point(3, 0), None);
        log.close();
    }

    /// The offset of each record of a segment file.
    fn record_offsets(bytes: &[u8]) -> Vec<usize> {
        let mut at = 0;
        let mut out = Vec::new();
        while at + HEADER_LEN <= bytes.len() {
            out.push(at);
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            at += HEADER_LEN + len;
        }
        out
    }

    #[tokio::test]
    async fn a_damaged_record_read_back_is_an_error_naming_the_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = LogStore::open_sized(dir.path(), Fsync::Always, small(0)).unwrap();
        append(&log, entries(0..10, 1, 8 * KIB)).await;
        assert_eq!(log.cached_entries(), 0);
        let seg = segment_path(dir.path(), 1);
        let mut bytes = std::fs::read(&seg).unwrap();
        let offset = record_offsets(&bytes)[4];
        bytes[offset + HEADER_LEN + 100] ^= 0x10;
        std::fs::write(&seg, &bytes).unwrap();
        let mut reader = log.clone();
        assert_eq!(reader.try_get_log_entries(0..4).await.unwrap().len(), 4);
        let err = reader.try_get_log_entries(0..10).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&seg.display().to_string()), "{text}");
        assert!(text.contains(&format!("at byte {offset}")), "{text}");
        assert!(text.contains("checksum"), "{text}");
        log.close();
    }

    #[tokio::test]
    async fn a_torn_last_record_is_truncated_and_the_rest_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let want = entries(0..6, 1, 20 * KIB);
        {
            let (log, _) = LogStore::open_sized(dir.path(), Fsync::Always, small(0)).unwrap();
            append(&log, want.clone()).await;
            log.close();
        }
        let seg = segment_path(dir.path(), 1);
        let bytes = std::fs::read(&seg).unwrap();
        let last = *record_offsets(&bytes).last().unwrap();
        std::fs::write(&seg, &bytes[..last + 5000]).unwrap();
        let (log, recovery) = LogStore::open_sized(dir.path(), Fsync::Always, small(0)).unwrap();
        let (file, offset, _) = recovery.truncated.unwrap();
        assert_eq!((file, offset), (seg.clone(), last as u64));
        assert_eq!(recovery.entries, 5);
        assert_same(
            &log.clone().try_get_log_entries(0..6).await.unwrap(),
            &want[..5],
        );
        // The entry is appended again after the truncated bytes.
        append(&log, want[5..].to_vec()).await;
        assert_same(&log.clone().try_get_log_entries(0..6).await.unwrap(), &want);
        log.close();
    }
}
