//! One worker task per group: flush (plan → upload → `FlushCold`), GC
//! (the replicated queue → deletes → `AckColdGc`) and the orphan sweep,
//! one after another, so none of them races another's upload in the same
//! group. Plus the sampler of the hot-memory budget.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strand::{
    ColdChunkRef, ColdFlushSlices, ColdGcTarget, StreamCommand, StreamResponse, StreamStateMachine,
};
use strand_engine::{Engine, EngineError};
use tokio::sync::watch;

use crate::Shared;
use crate::names;
use crate::starts;
use crate::stats::ColdStats;
use crate::store::{ColdBackend, ColdError, ObjectInfo};

/// How a step ended.
enum Step {
    /// Nothing to do.
    Idle,
    /// Work done; more may wait.
    Progress,
    /// The store failed: back off.
    Failed,
    /// The engine is shutting down.
    Stop,
}

/// Sleeps `d`, or returns false early when the workers stop.
async fn pause(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *stop.borrow() {
        return false;
    }
    tokio::select! {
        () = tokio::time::sleep(d) => true,
        _ = stop.changed() => false,
    }
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Takes a budget sample: the node's and each group's `completed` first,
/// then each group's hot bytes.
pub(crate) async fn sample(shared: &Shared, engine: &Engine) -> Result<(), EngineError> {
    let groups = shared
        .group_budgets
        .get()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if shared.budget.limit().is_none() && groups.is_empty() {
        return Ok(());
    }
    let completed = shared.budget.sample_start();
    let group_completed: Vec<u64> = groups.iter().map(|b| b.sample_start()).collect();
    let mut total = 0u64;
    for group in 0..engine.group_count() {
        // A group this node does not hold is its members' to flush.
        let hot = if engine.holds_group(group) {
            engine
                .query_group(group, |m| m.total_hot_payload_bytes())
                .await?
        } else {
            0
        };
        if let (Some(budget), Some(done)) = (groups.get(group), group_completed.get(group)) {
            budget.record_sample(hot, *done);
        }
        total = total.saturating_add(hot);
    }
    shared.budget.record_sample(total, completed);
    Ok(())
}

/// Tells when this node gains or loses a group's lead, for the report.
struct Lead<'a> {
    stats: &'a ColdStats,
    group: usize,
    leading: bool,
}

impl Lead<'_> {
    fn set(&mut self, leading: bool) {
        if leading == self.leading {
            return;
        }
        self.leading = leading;
        if leading {
            ColdStats::add(&self.stats.leading_groups, 1);
            tracing::info!(
                group = self.group,
                "cold workers resume: this node leads the group"
            );
        } else {
            self.stats
                .leading_groups
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(
                group = self.group,
                "cold workers pause: another node leads the group"
            );
        }
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// The sampler: keeps the budget's bound tight while writes come in.
pub(crate) async fn run_sampler(
    shared: Arc<Shared>,
    engine: Engine,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if matches!(sample(&shared, &engine).await, Err(EngineError::Shutdown)) {
            return;
        }
        if !pause(&mut stop, shared.config.sample_interval).await {
            return;
        }
    }
}

/// The worker of one group.
pub(crate) async fn run_group(
    shared: Arc<Shared>,
    engine: Engine,
    group: usize,
    mut stop: watch::Receiver<bool>,
) {
    let config = &shared.config;
    let mut backoff = config.retry_min;
    let mut next_gc = Instant::now();
    let mut next_sweep = Instant::now() + config.sweep_interval;
    let mut lead = Lead {
        stats: &shared.stats,
        group,
        leading: false,
    };
    // How often a follower looks whether it became the group's leader.
    let follow_poll = config
        .flush_interval
        .clamp(Duration::from_millis(1), Duration::from_millis(100));
    let mut next_repair = Instant::now();
    let mut out = Dropped::default();
    loop {
        // Every node that keeps its own copy deletes what the group's GC
        // reclaimed and fetches what it lacks, leader or not, while it
        // holds the group; once out of it, it deletes its copy.
        if let Some(replica) = &shared.replica {
            let held = engine.holds_group(group);
            match replica_chores(&shared, replica, &engine, group, held, &mut next_repair).await {
                Step::Stop => return,
                Step::Idle | Step::Progress | Step::Failed => {}
            }
            out.note(&shared, &engine, group, held).await;
        }
        // Only the group's leader flushes, collects and sweeps, and only
        // once it has applied everything committed before its term: the
        // sweep lists the store against the applied state, so a
        // `FlushCold` another leader committed must be applied here
        // first. Followers apply the leader's entries.
        let leading = engine.leads_group(group);
        lead.set(leading);
        if !leading {
            if shared.replica.is_some() && Instant::now() >= next_sweep {
                if let Step::Stop = sweep_once(&shared, &engine, group).await {
                    return;
                }
                next_sweep = Instant::now() + config.sweep_interval;
            }
            if !pause(&mut stop, follow_poll).await {
                return;
            }
            continue;
        }
        let mut failed = false;
        let mut busy = false;
        match flush_once(&shared, &engine, group).await {
            Step::Stop => return,
            Step::Failed => failed = true,
            Step::Progress => busy = true,
            Step::Idle => {}
        }
        let now = Instant::now();
        if now >= next_gc {
            match gc_once(&shared, &engine, group).await {
                Step::Stop => return,
                Step::Failed => failed = true,
                Step::Progress => next_gc = now,
                Step::Idle => next_gc = now + config.gc_interval,
            }
        }
        if now >= next_sweep {
            match sweep_once(&shared, &engine, group).await {
                Step::Stop => return,
                Step::Failed => failed = true,
                Step::Progress | Step::Idle => next_sweep = now + config.sweep_interval,
            }
        }
        if failed {
            if !pause(&mut stop, backoff).await {
                return;
            }
            backoff = (backoff * 2).min(config.retry_max);
            continue;
        }
        backoff = config.retry_min;
        if busy {
            if *stop.borrow() {
                return;
            }
            tokio::task::yield_now().await;
            continue;
        }
        let wait = config.flush_interval.min(
            next_gc
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        );
        let group_pressure = async {
            match shared.group_budget(group) {
                Some(b) => b.pressured().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shared.budget.pressured() => {}
            () = group_pressure => {}
            _ = stop.changed() => return,
        }
    }
}

/// Applies a group-wide command, retrying while the group's queue is full.
async fn apply_retrying(
    engine: &Engine,
    group: usize,
    command: StreamCommand,
) -> Result<StreamResponse, EngineError> {
    loop {
        match engine.apply_in_group(group, command.clone()).await {
            Err(EngineError::Busy) => tokio::time::sleep(Duration::from_millis(5)).await,
            other => return other,
        }
    }
}

/// Which streams a flush takes, given the group's hot bytes: under
/// pressure (or holding four times `flush_min_bytes`) any stream; from
/// `flush_min_bytes` on only streams holding `piece_min_bytes`; below
/// it none (`None`). Largest streams first either way, so pieces are as
/// large as the hot bytes allow.
fn stream_floor(
    (flush_min, piece_min): (usize, usize),
    pressured: bool,
    group_hot: u64,
) -> Option<usize> {
    let flush_min = flush_min.max(1);
    let group_min = u64::try_from(flush_min).unwrap_or(u64::MAX);
    if pressured || group_hot >= group_min.saturating_mul(4) {
        Some(1)
    } else if group_hot >= group_min {
        Some(piece_min.clamp(1, flush_min))
    } else {
        None
    }
}

/// Plans one batch, uploads it as one object, commits its chunks.
async fn flush_once(shared: &Shared, engine: &Engine, group: usize) -> Step {
    let config = &shared.config;
    let pressured = shared.under_pressure(group);
    let (chunk, pack, count) = (
        config.chunk_max_bytes.max(1),
        config.pack_max_bytes.max(1),
        config.max_candidates.max(1),
    );
    let mins = (config.flush_min_bytes, config.piece_min_bytes);
    let planned = engine
        .query_group(group, move |m| {
            let Some(floor) = stream_floor(mins, pressured, m.total_hot_payload_bytes()) else {
                return Vec::new();
            };
            m.plan_largest_cold_flush_batch(floor, chunk, pack, count)
                .into_iter()
                .map(|p| {
                    let starts = m.message_starts(&p.stream_id, p.start_offset, p.end_offset);
                    (p, starts)
                })
                .collect()
        })
        .await;
    let pieces: Vec<(ColdFlushSlices, Vec<u64>)> = match planned {
        Err(EngineError::Shutdown) => return Step::Stop,
        Err(_) => return Step::Idle,
        Ok(c) => c,
    };
    let (Some((first, _)), Some((last, _))) = (pieces.first(), pieces.last()) else {
        return Step::Idle;
    };
    let started = Instant::now();
    let single = pieces.iter().all(|(c, _)| c.stream_id == first.stream_id);
    let name = if single {
        names::stream_object(group, &first.stream_id, first.start_offset, last.end_offset)
    } else {
        names::pack_object(group, engine.now_ms())
    };
    // The object is the pieces' slices of the hot buffers, in order: no
    // copy on the way to the store.
    let mut parts = Vec::with_capacity(pieces.iter().map(|(p, _)| p.slices.len()).sum());
    let mut placed = Vec::with_capacity(pieces.len());
    let mut size = 0u64;
    for (mut piece, starts) in pieces {
        let len = piece.end_offset.saturating_sub(piece.start_offset);
        parts.append(&mut piece.slices);
        placed.push((size, piece, starts));
        size = size.saturating_add(len);
    }
    // Where messages start goes first, so a readable object always has it.
    let sidecar = starts::positions(
        placed
            .iter()
            .map(|(at, piece, starts)| (*at, piece.start_offset, starts.as_slice())),
    );
    if let Some(positions) = sidecar.as_deref() {
        let sidecar = starts::sidecar_name(&name);
        if let Err(e) = shared
            .backend
            .put(&sidecar, starts::encode(positions))
            .await
        {
            shared.stats.failure("upload", &e);
            return Step::Failed;
        }
    }
    if let Err(e) = shared.backend.put_parts(&name, parts).await {
        shared.stats.failure("upload", &e);
        return Step::Failed;
    }
    shared.stats.success();
    ColdStats::add(&shared.stats.uploads, 1);
    ColdStats::add(&shared.stats.uploaded_bytes, size);
    // One `FlushCold` per piece, all of them one entry: one log record
    // and one fsync, and every replica applies the whole object's pieces
    // in one apply (a node that keeps its own copy writes it whole).
    let commands: Vec<StreamCommand> = placed
        .iter()
        .map(|(at, c, _)| StreamCommand::FlushCold {
            stream_id: c.stream_id.clone(),
            chunk: ColdChunkRef {
                start_offset: c.start_offset,
                end_offset: c.end_offset,
                s3_path: name.clone(),
                object_size: size,
                object_offset: *at,
                // Recorded (exclusive chunks are not), so reads find it.
                shared_object: true,
                payload_digest: c.payload_digest.clone(),
            },
        })
        .collect();
    let responses = loop {
        match engine.apply_many_in_group(group, commands.clone()).await {
            Err(EngineError::Busy) => tokio::time::sleep(Duration::from_millis(5)).await,
            Err(_) => return Step::Stop,
            Ok(r) => break r,
        }
    };
    let mut committed = 0u64;
    for ((_, c, _), response) in placed.iter().zip(responses) {
        if let StreamResponse::ColdFlushed { .. } = response {
            committed += 1;
            ColdStats::add(&shared.stats.flushed_chunks, 1);
            ColdStats::add(
                &shared.stats.flushed_bytes,
                c.end_offset.saturating_sub(c.start_offset),
            );
        } else {
            // The stream moved under the plan (its later pieces then
            // fail the same way).
            tracing::debug!(group, stream = %c.stream_id, ?response, "stale cold flush");
            ColdStats::add(&shared.stats.stale_chunks, 1);
        }
    }
    if committed == 0 {
        // Nothing references it: delete now rather than wait for the sweep.
        if let Err(e) = delete_object(&*shared.backend, &name).await {
            shared.stats.failure("delete unreferenced upload", &e);
        }
    }
    ColdStats::add(
        &shared.stats.flush_micros,
        u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
    );
    let _ = sample(shared, engine).await;
    if committed == 0 {
        // The state moved under the plan; do not spin on it.
        return Step::Idle;
    }
    Step::Progress
}

/// Every object the group holds as live, with its size (what a node's
/// segment store must hold).
pub(crate) fn live_objects(m: &StreamStateMachine) -> std::collections::BTreeMap<String, u64> {
    let live = referenced(m);
    let mut objects = m.referenced_cold_objects();
    objects.retain(|name, _| live.contains(name));
    objects
}

/// How long a node must have been out of a group (it does not hold it and
/// the placement gives it no vote) before it deletes its copy of the
/// group's objects, in repair intervals: the members that took its place
/// fetch theirs within one.
const DROPPED_GRACE_REPAIRS: u32 = 2;

/// Whether this node is out of its group, since when, and whether it
/// deleted its copy already.
#[derive(Default)]
struct Dropped {
    since: Option<Instant>,
    cleared: bool,
}

impl Dropped {
    /// Notes whether the node is out of `group` now, and deletes its copy
    /// of the group's objects once it has been out for the grace: a node
    /// the placement moved off a group keeps none of it. Should the group
    /// come back to it, it receives the group's state again and fetches
    /// the objects that state names.
    async fn note(&mut self, shared: &Shared, engine: &Engine, group: usize, held: bool) {
        if held || !engine.dropped_group(group) {
            self.since = None;
            if held {
                self.cleared = false;
            }
            return;
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        if self.cleared || since.elapsed() < shared.config.repair_interval * DROPPED_GRACE_REPAIRS {
            return;
        }
        let deleting = Deleting {
            what: "dropped group",
            counter: &shared.stats.gc_deleted,
            done: "deleted this node's copy of a group it no longer holds",
        };
        if delete_group_objects(shared, group, &deleting, |_| true)
            .await
            .is_some()
        {
            self.cleared = true;
        }
    }
}

/// A cluster node's own copy: deletes the objects of the GC entries its
/// group acknowledged, then, while it holds the group (`held`), after a
/// snapshot replaced the group's machine or every `repair_interval`,
/// fetches from a peer each object the group names that is missing here
/// or of the wrong length. (A group it does not hold has a state that is
/// being received or left behind: nothing is fetched for it.)
async fn replica_chores(
    shared: &Shared,
    replica: &crate::ReplicaSegments,
    engine: &Engine,
    group: usize,
    held: bool,
    next_repair: &mut Instant,
) -> Step {
    let mut step = Step::Idle;
    let reclaims = replica.take_reclaims(group);
    if !reclaims.is_empty() {
        // Listed before the live set is read: a file that a later flush
        // wrote under a reclaimed stream's prefix is then live already.
        let mut names = Vec::new();
        for target in reclaims {
            match target {
                ColdGcTarget::Paths(paths) => names.extend(paths),
                ColdGcTarget::Stream(id) => {
                    match shared.backend.list(&names::stream_prefix(group, &id)).await {
                        Ok(objects) => names.extend(objects.into_iter().map(|o| o.name)),
                        // The sweep deletes them later.
                        Err(e) => shared.stats.failure("replica gc list", &e),
                    }
                }
            }
        }
        let live = match engine.query_group(group, referenced).await {
            Err(EngineError::Shutdown) => return Step::Stop,
            Err(_) => return Step::Idle,
            Ok(l) => l,
        };
        for name in names {
            if starts::is_live(&live, &name) {
                continue;
            }
            match delete_object(&*shared.backend, &name).await {
                Ok(()) => ColdStats::add(&shared.stats.gc_deleted, 1),
                Err(e) => shared.stats.failure("replica gc delete", &e),
            }
        }
        step = Step::Progress;
    }
    if !held {
        return step;
    }
    let restored = replica.take_restored(group);
    if !restored && Instant::now() < *next_repair {
        return step;
    }
    *next_repair = Instant::now() + shared.config.repair_interval;
    let objects = match engine.query_group(group, live_objects).await {
        Err(EngineError::Shutdown) => return Step::Stop,
        Err(_) => return step,
        Ok(o) => o,
    };
    for (name, size) in objects {
        if replica.is_pending(&name) || replica.local().holds(&name, Some(size)) {
            continue;
        }
        let replace = replica.local().holds(&name, None);
        if replica.fetch(&name, Some(size), replace).await.is_err() {
            // Again soon: a peer may be down for a moment.
            *next_repair = Instant::now() + shared.config.retry_max;
            step = Step::Failed;
        }
    }
    step
}

/// Deletes an object and its message-start sidecar (a sidecar named
/// alone is deleted alone).
pub(crate) async fn delete_object(backend: &dyn ColdBackend, name: &str) -> Result<(), ColdError> {
    backend.delete(name).await?;
    if starts::object_of(name).is_none() {
        backend.delete(&starts::sidecar_name(name)).await?;
    }
    Ok(())
}

/// The object paths the group still references (live shared chunks).
pub(crate) fn referenced(m: &StreamStateMachine) -> HashSet<String> {
    m.snapshot_without_streams()
        .shared_cold_object_owners
        .into_iter()
        .map(|o| o.s3_path)
        .collect()
}

/// Reclaims the due entries at the front of the group's GC queue.
async fn gc_once(shared: &Shared, engine: &Engine, group: usize) -> Step {
    let batch = engine
        .query_group(group, |m| {
            let entries = m.pending_cold_gc_batch(64);
            let live = if entries.is_empty() {
                HashSet::new()
            } else {
                referenced(m)
            };
            (entries, live)
        })
        .await;
    let (entries, live) = match batch {
        Err(EngineError::Shutdown) => return Step::Stop,
        Err(_) => return Step::Idle,
        Ok(b) => b,
    };
    if entries.is_empty() {
        return Step::Idle;
    }
    let now_ms = engine.now_ms();
    let mut acked = None;
    let mut failed = false;
    'entries: for entry in &entries {
        if entry.not_before_ms > now_ms {
            break;
        }
        let names: Vec<String> = match &entry.target {
            ColdGcTarget::Paths(paths) => paths.clone(),
            ColdGcTarget::Stream(id) => {
                match shared.backend.list(&names::stream_prefix(group, id)).await {
                    Ok(objects) => objects.into_iter().map(|o| o.name).collect(),
                    Err(e) => {
                        shared.stats.failure("gc list", &e);
                        failed = true;
                        break 'entries;
                    }
                }
            }
        };
        for name in names {
            // A stream created again under the same name owns new objects
            // under the old prefix: never delete what is referenced.
            if starts::is_live(&live, &name) {
                continue;
            }
            if let Err(e) = delete_object(&*shared.backend, &name).await {
                shared.stats.failure("gc delete", &e);
                failed = true;
                break 'entries;
            }
            shared.stats.success();
            ColdStats::add(&shared.stats.gc_deleted, 1);
        }
        acked = Some(entry.seq);
    }
    if let Some(up_to_seq) = acked {
        match apply_retrying(engine, group, StreamCommand::AckColdGc { up_to_seq }).await {
            Ok(StreamResponse::ColdGcAcked { removed }) => {
                ColdStats::add(&shared.stats.gc_acked, removed);
            }
            Ok(_) => {}
            Err(_) => return Step::Stop,
        }
    }
    if failed {
        Step::Failed
    } else if acked.is_some() {
        Step::Progress
    } else {
        Step::Idle
    }
}

/// What a [`delete_group_objects`] pass is, for its counters and logs.
struct Deleting<'a> {
    /// The operation its store failures are recorded under (`… list`,
    /// `… delete`).
    what: &'a str,
    /// The counter the objects it deleted add to.
    counter: &'a std::sync::atomic::AtomicU64,
    /// What it logs when it deleted any.
    done: &'a str,
}

/// Deletes the objects under group `group`'s prefix that `chosen` picks
/// (one already gone counts as deleted by someone else); how many it
/// deleted, added to the pass's counter and logged. A failure of the
/// store is recorded as the pass's list or delete and ends the pass
/// (`None`): the next pass tries again.
async fn delete_group_objects(
    shared: &Shared,
    group: usize,
    pass: &Deleting<'_>,
    chosen: impl Fn(&ObjectInfo) -> bool,
) -> Option<u64> {
    let what = pass.what;
    let objects = match shared.backend.list(&names::group_prefix(group)).await {
        Ok(objects) => objects,
        Err(e) => {
            shared.stats.failure(&format!("{what} list"), &e);
            return None;
        }
    };
    let mut deleted = 0u64;
    for object in objects.iter().filter(|o| chosen(o)) {
        match delete_object(&*shared.backend, &object.name).await {
            Ok(()) => deleted += 1,
            Err(ColdError::NotFound(_)) => {}
            Err(e) => {
                shared.stats.failure(&format!("{what} delete"), &e);
                return None;
            }
        }
    }
    ColdStats::add(pass.counter, deleted);
    if deleted > 0 {
        tracing::info!(group, deleted, "{}", pass.done);
    }
    Some(deleted)
}

/// Deletes objects under the group's prefix that nothing references and
/// that are older than the grace period.
async fn sweep_once(shared: &Shared, engine: &Engine, group: usize) -> Step {
    let live = engine
        .query_group(group, |m| {
            let mut live = referenced(m);
            for entry in m.pending_cold_gc_batch(usize::MAX) {
                if let ColdGcTarget::Paths(paths) = entry.target {
                    live.extend(paths);
                }
            }
            live
        })
        .await;
    let live = match live {
        Err(EngineError::Shutdown) => return Step::Stop,
        Err(_) => return Step::Idle,
        Ok(l) => l,
    };
    let grace = u64::try_from(shared.config.orphan_grace.as_millis()).unwrap_or(u64::MAX);
    let now = wall_ms();
    let unreferenced = |o: &ObjectInfo| {
        !starts::is_live(&live, &o.name) && o.last_modified_ms.saturating_add(grace) <= now
    };
    let deleting = Deleting {
        what: "sweep",
        counter: &shared.stats.orphans_deleted,
        done: "cold orphan sweep deleted unreferenced objects",
    };
    let Some(deleted) = delete_group_objects(shared, group, &deleting, unreferenced).await else {
        return Step::Failed;
    };
    shared.stats.success();
    if deleted > 0 {
        Step::Progress
    } else {
        Step::Idle
    }
}

#[cfg(test)]
mod tests {
    use super::stream_floor;

    #[test]
    fn the_floor_follows_the_group_and_the_pressure() {
        let mins = (4096, 512);
        // Below the group's minimum nothing flushes, unless pressed.
        assert_eq!(stream_floor(mins, false, 4095), None);
        assert_eq!(stream_floor(mins, true, 0), Some(1));
        // From it on, only streams holding a piece's minimum.
        assert_eq!(stream_floor(mins, false, 4096), Some(512));
        // Four times it, or pressure: any stream.
        assert_eq!(stream_floor(mins, false, 4 * 4096), Some(1));
        assert_eq!(stream_floor(mins, true, 4096), Some(1));
        // The piece minimum never passes the group's.
        assert_eq!(stream_floor((100, 512), false, 100), Some(100));
        assert_eq!(stream_floor((0, 0), false, 1), Some(1));
    }
}
