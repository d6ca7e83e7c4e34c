//! strand-cold: the cold tier of a strand node — object storage and the
//! workers that move stream bytes between the engine's hot buffers and it.
//!
//! It owns the one storage trait the node uses ([`ColdBackend`]: put,
//! ranged get, delete, list under a prefix) with its backends on the
//! `object_store` crate (local filesystem, in-memory, S3) and a
//! fault-injecting wrapper for tests; object naming ([`names`]); the
//! hot-memory budget that admits writes ([`HotBudget`]); and, per group,
//! the flush worker (`plan_largest_cold_flush_batch` → upload → `FlushCold`),
//! the GC worker (the replicated GC queue → deletes → `AckColdGc`), the
//! orphan sweep, and cold reads (the machine's read plan → ranged GETs),
//! which begin and end at whole messages through each object's
//! message-start sidecar ([`starts`]).
//!
//! It reaches state only through `strand-engine`'s public API (queries and
//! commands of [`Engine`]) and must not know HTTP or the Durable Streams
//! wire format: the server maps its answers to responses. Every object it
//! writes is recorded in the machine as a shared cold chunk before any
//! read can use it (upload first, then `FlushCold`), so the replicated
//! state, not the store's listing, says which objects are live.

pub mod budget;
pub mod local;
mod mapped;
pub mod names;
mod read;
pub mod replica;
pub mod space;
pub mod starts;
pub mod stats;
pub mod store;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use strand::{BucketStreamId, StreamErrorCode, StreamResponse};
use strand_engine::{ColdRead, ColdReader, Engine, ReadFrom, ReadOutcome};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use budget::{Admission, HotBudget};
pub use local::LocalSegments;
pub use read::ColdReadError;
pub use replica::{ReplicaSegments, ReplicaStats};
pub use space::{DiskSpace, LowDisk};
pub use stats::{ColdReport, ColdStats};
pub use store::{
    ColdBackend, ColdError, FaultCounts, FaultPlan, FaultyBackend, ObjectInfo, ObjectStoreBackend,
    SharedBackend,
};

/// How the cold tier runs.
#[derive(Debug, Clone)]
pub struct ColdConfig {
    /// A group flushes on its own (periodically) once its hot bytes reach
    /// this many; under memory pressure it flushes whatever it holds.
    pub flush_min_bytes: usize,
    /// Below the pressure mark, a stream's bytes join a flush only once it
    /// holds this many hot bytes (at most `flush_min_bytes`), so streams
    /// that grow slowly leave in large pieces; under pressure, or once the
    /// group holds four times `flush_min_bytes`, any stream's do. Either
    /// way the streams holding most go first.
    pub piece_min_bytes: usize,
    /// Largest piece of one stream in one flush.
    pub chunk_max_bytes: usize,
    /// Largest upload (one object, a pack of several streams' pieces).
    pub pack_max_bytes: usize,
    /// Most pieces in one upload.
    pub max_candidates: usize,
    /// How often each group looks for work when nothing presses.
    pub flush_interval: Duration,
    /// How often each group reads its GC queue.
    pub gc_interval: Duration,
    /// How often each group lists its objects for orphans.
    pub sweep_interval: Duration,
    /// An unreferenced object younger than this is left alone (an upload
    /// whose `FlushCold` may still commit).
    pub orphan_grace: Duration,
    /// How often each group of a cluster node that keeps its own copy
    /// ([`ReplicaSegments`]) checks that it holds every object its state
    /// names, fetching what it lacks from a peer (it also checks after
    /// every snapshot that replaced the group's machine).
    pub repair_interval: Duration,
    /// How often the hot-memory budget is sampled.
    pub sample_interval: Duration,
    /// First back-off after a store failure (doubles up to `retry_max`).
    pub retry_min: Duration,
    /// Longest back-off.
    pub retry_max: Duration,
    /// The node's hot-memory limit (`--max-hot-bytes`); `None` for none.
    pub max_hot_bytes: Option<u64>,
    /// Each group's hot-memory limit (`--max-group-hot-bytes`); `None`
    /// for none.
    pub max_group_hot_bytes: Option<u64>,
    /// Bytes of recently read cold ranges kept in memory.
    pub cache_bytes: usize,
}

impl Default for ColdConfig {
    fn default() -> Self {
        Self {
            flush_min_bytes: 4 * 1024 * 1024,
            piece_min_bytes: 64 * 1024,
            chunk_max_bytes: 4 * 1024 * 1024,
            pack_max_bytes: 16 * 1024 * 1024,
            max_candidates: 256,
            flush_interval: Duration::from_secs(1),
            gc_interval: Duration::from_secs(5),
            sweep_interval: Duration::from_secs(600),
            orphan_grace: Duration::from_secs(3600),
            repair_interval: Duration::from_secs(60),
            sample_interval: Duration::from_millis(10),
            retry_min: Duration::from_millis(50),
            retry_max: Duration::from_secs(5),
            max_hot_bytes: None,
            max_group_hot_bytes: None,
            cache_bytes: 32 * 1024 * 1024,
        }
    }
}

/// What the workers and readers share.
pub(crate) struct Shared {
    pub(crate) backend: SharedBackend,
    /// The same backend when it is the node's local segment store.
    pub(crate) local: Option<LocalSegments>,
    /// The same store when every node of a cluster keeps its own copy.
    pub(crate) replica: Option<ReplicaSegments>,
    pub(crate) config: ColdConfig,
    pub(crate) budget: HotBudget,
    /// One budget per group under `max_group_hot_bytes`, made when the
    /// tier first meets its engine (it knows the group count).
    pub(crate) group_budgets: std::sync::OnceLock<Vec<HotBudget>>,
    pub(crate) stats: ColdStats,
    pub(crate) cache: read::RangeCache,
    /// Loaded message-start sidecars ([`starts`]).
    pub(crate) starts: starts::StartsCache,
    /// Bytes of the writes waiting for room ([`ColdTier::admit_waiting`]).
    pub(crate) waiting: std::sync::atomic::AtomicU64,
}

impl Shared {
    /// Makes the per-group budgets for an engine of `groups` groups (once).
    pub(crate) fn init_groups(&self, groups: usize) {
        if let Some(limit) = self.config.max_group_hot_bytes {
            self.group_budgets
                .get_or_init(|| (0..groups).map(|_| HotBudget::new(Some(limit))).collect());
        }
    }

    /// The budget of `group`, under a per-group limit.
    pub(crate) fn group_budget(&self, group: usize) -> Option<&HotBudget> {
        self.group_budgets.get().and_then(|b| b.get(group))
    }

    /// Whether the node, or `group`, is at or above half its limit.
    pub(crate) fn under_pressure(&self, group: usize) -> bool {
        self.budget.under_pressure()
            || self
                .group_budget(group)
                .is_some_and(HotBudget::under_pressure)
    }
}

/// A write's place among the writes waiting for room; leaving it gives
/// its bytes back.
struct Waiting<'a> {
    total: &'a std::sync::atomic::AtomicU64,
    bytes: u64,
}

impl<'a> Waiting<'a> {
    /// Takes `bytes` of `total`, unless that would pass `share`.
    fn enter(total: &'a std::sync::atomic::AtomicU64, bytes: u64, share: u64) -> Option<Self> {
        use std::sync::atomic::Ordering;
        total
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                now.checked_add(bytes).filter(|after| *after <= share)
            })
            .ok()
            .map(|_| Self { total, bytes })
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.total
            .fetch_sub(self.bytes, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Why a write was not let in under the hot-memory limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The body alone is larger than the node's limit: it never fits.
    NodeTooLarge,
    /// The body alone is larger than its group's limit: it never fits.
    GroupTooLarge,
    /// The node's hot memory is full until flushing catches up.
    NodeFull,
    /// The group's hot memory is full until flushing catches up.
    GroupFull,
}

/// A write let in under the node's and its group's limits; dropping it
/// marks the write finished.
#[derive(Debug)]
pub struct TierAdmission<'a> {
    _node: Admission<'a>,
    _group: Option<Admission<'a>>,
}

/// A [`TierAdmission`] that keeps its tier alive instead of borrowing it,
/// so it can be held across tasks (an entry another node forwarded to
/// this group's leader, held while the entry is proposed); dropping it
/// marks the write finished.
pub struct OwnedAdmission {
    shared: Arc<Shared>,
    group: usize,
    node_bytes: u64,
    group_bytes: u64,
}

impl std::fmt::Debug for OwnedAdmission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedAdmission")
            .field("group", &self.group)
            .field("bytes", &self.node_bytes)
            .finish_non_exhaustive()
    }
}

impl Drop for OwnedAdmission {
    fn drop(&mut self) {
        self.shared.budget.complete(self.node_bytes);
        if let Some(budget) = self.shared.group_budget(self.group) {
            budget.complete(self.group_bytes);
        }
    }
}

/// A node's cold tier: a backend, its workers' configuration, the
/// hot-memory budget and the counters. Cheap to clone.
#[derive(Clone)]
pub struct ColdTier {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ColdTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdTier")
            .field("backend", &self.shared.backend.describe())
            .finish_non_exhaustive()
    }
}

/// The running workers of a [`ColdTier`].
#[derive(Debug)]
pub struct ColdWorkers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl ColdWorkers {
    /// Stops the workers between steps and waits for them. A flush whose
    /// upload finished but whose `FlushCold` did not commit leaves an
    /// orphan for the sweep.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

impl ColdTier {
    /// A cold tier over `backend`.
    pub fn new(backend: SharedBackend, config: ColdConfig) -> Self {
        Self::build(backend, (None, None), config)
    }

    /// A cold tier over the node's local segment store (the default tier
    /// of a durable node): [`ColdTier::check_segments`] can then check its
    /// files at start.
    pub fn local(segments: LocalSegments, config: ColdConfig) -> Self {
        Self::build(Arc::new(segments.clone()), (Some(segments), None), config)
    }

    /// A cold tier over a cluster node's own copy of its groups' flushed
    /// bytes (the default tier of a cluster without object storage): the
    /// engine must be given the same `replica`
    /// ([`Engine::set_segment_replica`]) before its logs replay.
    pub fn replicated(replica: ReplicaSegments, config: ColdConfig) -> Self {
        Self::build(
            Arc::new(replica.clone()),
            (Some(replica.local().clone()), Some(replica)),
            config,
        )
    }

    fn build(
        backend: SharedBackend,
        (local, replica): (Option<LocalSegments>, Option<ReplicaSegments>),
        config: ColdConfig,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                backend,
                local,
                replica,
                budget: HotBudget::new(config.max_hot_bytes),
                group_budgets: std::sync::OnceLock::new(),
                cache: read::RangeCache::new(config.cache_bytes),
                // A quarter of the range cache's bytes, in 4-byte positions.
                starts: starts::StartsCache::new((config.cache_bytes / 16).max(1024)),
                config,
                stats: ColdStats::default(),
                waiting: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// Starts one worker per group of `engine`, and the budget's sampler.
    /// A group's worker acts only while this node leads the group
    /// ([`Engine::leads_group`]): in a cluster the leader flushes and
    /// collects, and the followers apply its `FlushCold` and `AckColdGc`
    /// entries and read the same store.
    pub fn start(&self, engine: &Engine) -> ColdWorkers {
        self.shared.init_groups(engine.group_count());
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        for group in 0..engine.group_count() {
            tasks.push(tokio::spawn(worker::run_group(
                Arc::clone(&self.shared),
                engine.clone(),
                group,
                stop_rx.clone(),
            )));
        }
        tasks.push(tokio::spawn(worker::run_sampler(
            Arc::clone(&self.shared),
            engine.clone(),
            stop_rx,
        )));
        ColdWorkers { stop, tasks }
    }

    /// Checks, when the tier is the local segment store, that every
    /// object the engine's groups hold as live is a file of its length
    /// (without reading it: start-up time does not grow with the data).
    /// Answers how many objects were checked (0 for other backends).
    ///
    /// # Errors
    /// The first missing or damaged file, named; or the engine stopped.
    /// A cluster node's own copy ([`ColdTier::replicated`]) is not
    /// checked here: what it lacks, its workers fetch from a peer.
    pub async fn check_segments(&self, engine: &Engine) -> Result<usize, String> {
        let Some(local) = &self.shared.local else {
            return Ok(0);
        };
        if self.shared.replica.is_some() {
            return Ok(0);
        }
        let mut checked = 0;
        for group in 0..engine.group_count() {
            let objects = engine
                .query_group(group, worker::live_objects)
                .await
                .map_err(|e| e.to_string())?;
            let local = local.clone();
            checked += tokio::task::spawn_blocking(move || {
                local.check_objects(objects.iter().map(|(n, s)| (n.as_str(), *s)))
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        }
        Ok(checked)
    }

    /// The cluster node's own copy of its groups' flushed bytes, when the
    /// tier is one ([`ColdTier::replicated`]).
    pub fn replica(&self) -> Option<&ReplicaSegments> {
        self.shared.replica.as_ref()
    }

    /// The backend.
    pub fn backend(&self) -> &SharedBackend {
        &self.shared.backend
    }

    /// The configuration.
    pub fn config(&self) -> &ColdConfig {
        &self.shared.config
    }

    /// The node's hot-memory budget: writes ask it first.
    pub fn budget(&self) -> &HotBudget {
        &self.shared.budget
    }

    /// The hot-memory budget of `group` under `--max-group-hot-bytes`
    /// (once the tier met its engine: [`ColdTier::install`] or
    /// [`ColdTier::start`]).
    pub fn group_budget(&self, group: usize) -> Option<&HotBudget> {
        self.shared.group_budget(group)
    }

    /// Lets a write of `bytes` hot bytes into `group` in under the node's
    /// and the group's limits, or says why not.
    ///
    /// # Errors
    /// A body larger than a limit (it never fits), or a limit reached
    /// (the caller answers 503 with `Retry-After` while flushing works).
    pub fn admit(&self, group: usize, bytes: u64) -> Result<TierAdmission<'_>, Refusal> {
        self.admit_counted(group, bytes, true)
    }

    /// [`admit`](Self::admit); a full budget counts its refusal only when
    /// `count` says so.
    fn admit_counted(
        &self,
        group: usize,
        bytes: u64,
        count: bool,
    ) -> Result<TierAdmission<'_>, Refusal> {
        let node = &self.shared.budget;
        let group_budget = self.shared.group_budget(group);
        if node.limit().is_some_and(|limit| bytes > limit) {
            return Err(Refusal::NodeTooLarge);
        }
        if group_budget
            .and_then(HotBudget::limit)
            .is_some_and(|limit| bytes > limit)
        {
            return Err(Refusal::GroupTooLarge);
        }
        let group = match group_budget {
            Some(b) => Some(b.admit_counted(bytes, count).ok_or(Refusal::GroupFull)?),
            None => None,
        };
        // Dropping the group's admission on a refusal here marks it done:
        // the group's bound stays valid (it only overcounts).
        let node = node.admit_counted(bytes, count).ok_or(Refusal::NodeFull)?;
        Ok(TierAdmission {
            _node: node,
            _group: group,
        })
    }

    /// [`admit`](Self::admit), but a write that finds a limit reached
    /// while the tier is flushing (not failing) waits for the flushes to
    /// make room, up to `wait`: each sample of the hot bytes (every
    /// `sample_interval`, and after every flush) tries again. Under a
    /// burst, writes then slow down rather than fail. The bodies of the
    /// waiting writes are held in memory, so together they may hold at
    /// most half the limit (the node's, else the group's); a write past
    /// that is refused at once.
    ///
    /// # Errors
    /// As [`admit`](Self::admit), once `wait` has passed; at once for a
    /// body that never fits, while the tier below is failing, or when the
    /// waiting writes already hold their share.
    pub async fn admit_waiting(
        &self,
        group: usize,
        bytes: u64,
        wait: Duration,
    ) -> Result<TierAdmission<'_>, Refusal> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut waiting: Option<Waiting<'_>> = None;
        loop {
            // Registered before the attempt: a sample right after a
            // refusal still wakes this write.
            let sampled = self.shared.budget.sampled();
            // Refusals are counted once, when the write gives up.
            match self.admit_counted(group, bytes, false) {
                Err(Refusal::NodeFull | Refusal::GroupFull) if !self.failing() => {
                    if waiting.is_none() {
                        let share = self
                            .shared
                            .budget
                            .limit()
                            .or(self.shared.config.max_group_hot_bytes)
                            .map_or(0, |limit| limit / 2);
                        match Waiting::enter(&self.shared.waiting, bytes, share) {
                            Some(place) => waiting = Some(place),
                            None => return self.admit(group, bytes),
                        }
                    }
                    if tokio::time::timeout_at(deadline, sampled).await.is_err() {
                        return self.admit(group, bytes);
                    }
                }
                Err(Refusal::NodeFull | Refusal::GroupFull) => return self.admit(group, bytes),
                other => return other,
            }
        }
    }

    /// Bytes of the writes waiting for room now.
    pub fn waiting_bytes(&self) -> u64 {
        self.shared
            .waiting
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// [`admit`](Self::admit), as an admission that owns what it needs.
    ///
    /// # Errors
    /// As [`admit`](Self::admit).
    pub fn admit_owned(&self, group: usize, bytes: u64) -> Result<OwnedAdmission, Refusal> {
        let TierAdmission {
            _node: node,
            _group: in_group,
        } = self.admit(group, bytes)?;
        Ok(OwnedAdmission {
            shared: Arc::clone(&self.shared),
            group,
            node_bytes: node.into_bytes(),
            group_bytes: in_group.map_or(0, Admission::into_bytes),
        })
    }

    /// Whether the store's last operation failed (a full disk, an
    /// unreachable object store): flushing is stalled until it recovers.
    pub fn failing(&self) -> bool {
        ColdStats::get(&self.shared.stats.consecutive_failures) > 0
    }

    /// The counters.
    pub fn stats(&self) -> &ColdStats {
        &self.shared.stats
    }

    /// The status report.
    pub fn report(&self) -> ColdReport {
        ColdReport::build(
            &self.shared.stats,
            self.shared.backend.describe(),
            &self.shared.budget,
            self.shared.config.max_group_hot_bytes,
            self.shared
                .group_budgets
                .get()
                .map(Vec::as_slice)
                .unwrap_or_default(),
            self.shared.replica.as_ref().map(ReplicaSegments::stats),
        )
    }

    /// Reads up to `max_len` bytes of a stream from wherever they live:
    /// cold ranges by ranged GETs, then the hot bytes after them. For a
    /// read the engine's hot path refused (`InvalidColdFlush`): the caller
    /// tried [`Engine::read`] first, which also renewed the TTL.
    pub async fn read(
        &self,
        engine: &Engine,
        id: BucketStreamId,
        from: ReadFrom,
        max_len: usize,
    ) -> Result<ReadOutcome, ColdReadError> {
        read::read(&self.shared, engine, id, from, max_len, false).await
    }

    /// Installs this tier as `engine`'s [`ColdReader`], so every read the
    /// engine serves — a fork's reads through its sources included —
    /// reaches below the hot buffers. Answers whether it was installed
    /// (an engine takes one cold tier).
    pub fn install(&self, engine: &Engine) -> bool {
        self.shared.init_groups(engine.group_count());
        engine.set_cold_reader(Arc::new(self.clone()))
    }

    /// Takes a budget sample now (tests; the sampler does it on its own).
    pub async fn sample(&self, engine: &Engine) {
        let _ = worker::sample(&self.shared, engine).await;
    }
}

impl ColdReader for ColdTier {
    fn read_cold(
        &self,
        engine: Engine,
        stream_id: BucketStreamId,
        from: ReadFrom,
        max_len: usize,
        through: bool,
    ) -> ColdRead<'_> {
        Box::pin(async move {
            match read::read(&self.shared, &engine, stream_id, from, max_len, through).await {
                Ok(outcome) => Ok(outcome),
                Err(ColdReadError::Engine(e)) => Err(e),
                // A store failure is the range's answer for now: the
                // server turns it into 503 Retry-After.
                Err(other) => Ok(Err(StreamResponse::error(
                    StreamErrorCode::InvalidColdFlush,
                    format!("the cold tier cannot serve this range now: {other}"),
                ))),
            }
        })
    }
}
