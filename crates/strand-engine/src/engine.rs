//! The engine: a node's groups, each behind its owner task, and the
//! routing of requests to them.

use std::sync::{Arc, Weak};
use std::time::Duration;

use strand::{
    BucketStreamId, BucketUsageSnapshot, MachineOptions, StreamCommand, StreamResponse,
    StreamStateMachine,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::error::{EngineError, FanOutError, Unavailable};
use crate::group::{Answer, Op, ReadReply, Reply};
use crate::log::GroupEntry;
use crate::log::{GroupLog, GroupStatus};
use crate::ops::{
    HeadOutcome, ReadFrom, ReadOutcome, TransactionOutcome, WriteOutcome, WriteRequest,
};
use crate::placement::group_of;
use crate::replica::ReplicaSlot;
use crate::waiters::{AppendNotice, SUBSCRIPTION_NOTICES, WaiterTx, Wake};

/// The future a [`ColdReader`] answers with.
pub type ColdRead<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ReadOutcome, EngineError>> + Send + 'a>,
>;

/// A cold tier the engine hands reads that reach below a hot buffer
/// (installed with [`Engine::set_cold_reader`]; the engine cannot depend
/// on the crate that implements it).
pub trait ColdReader: Send + Sync + 'static {
    /// Reads up to `max_len` bytes of `stream_id` from `from` (an offset,
    /// or with [`ReadFrom::Within`] an offset the read may move back to the
    /// start of the message holding it), whatever tier holds them, as one
    /// page. `through` is a fork reading through the stream: expiry and
    /// soft deletion must not stop it (the machine's `read_plan_through`);
    /// otherwise it is a reader's own read (`read_plan_at`).
    fn read_cold(
        &self,
        engine: Engine,
        stream_id: BucketStreamId,
        from: ReadFrom,
        max_len: usize,
        through: bool,
    ) -> ColdRead<'_>;
}

/// How an engine is sized.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Number of groups (state machines); at least 1.
    pub groups: usize,
    /// Requests a group's queue holds before callers get
    /// [`EngineError::Busy`].
    pub queue_depth: usize,
    /// Live readers (long-poll and SSE) the node parks at once.
    pub max_waiters: usize,
    /// The options every group's state machine is created with
    /// (`docs/profiles.md`). The default is the corrected profile: the
    /// engine is a long-running service, where the reference's harmful
    /// quirks lose data or memory.
    pub machine: MachineOptions,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            groups: 4,
            queue_depth: 4096,
            max_waiters: 10_000,
            machine: MachineOptions::corrected(),
        }
    }
}

/// What a live-read wait ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The stream changed (or is gone): read again.
    Changed,
    /// An append started at the waited offset: its bytes, so the reader
    /// need not read them again.
    Appended(AppendNotice),
    /// Nothing happened before the deadline.
    TimedOut,
    /// The engine is shutting down.
    Shutdown,
}

/// A reader following one stream's appends ([`Engine::subscribe`]).
#[derive(Debug)]
pub struct Subscription {
    rx: mpsc::Receiver<Wake>,
    /// Where the next append must start to continue the reader's bytes.
    offset: u64,
}

impl Subscription {
    /// The next thing that happened to the stream, or
    /// [`WaitOutcome::TimedOut`] after `timeout` (the subscription then
    /// stays). [`WaitOutcome::Appended`] carries the next bytes in order
    /// and the subscription stays unless they closed the stream. Every
    /// other outcome ends it: [`WaitOutcome::Changed`] when the stream
    /// changed otherwise, when the reader fell more than a few appends
    /// behind, or when the group dropped it; read from the last offset and
    /// subscribe again.
    pub async fn next(&mut self, timeout: Duration) -> WaitOutcome {
        match tokio::time::timeout(timeout, self.rx.recv()).await {
            Err(_) => WaitOutcome::TimedOut,
            Ok(wake) => self.outcome(wake),
        }
    }

    /// [`next`](Self::next) with no timeout of its own, for a reader that
    /// keeps one timer across many events (waiting with a new timeout for
    /// each event registers a timer each time); never
    /// [`WaitOutcome::TimedOut`]. Cancel-safe: a notice is taken only
    /// when the future completes.
    pub async fn next_event(&mut self) -> WaitOutcome {
        let wake = self.rx.recv().await;
        self.outcome(wake)
    }

    fn outcome(&mut self, wake: Option<Wake>) -> WaitOutcome {
        match wake {
            Some(Wake::Appended(notice)) if notice.offset == self.offset => {
                self.offset = notice.next_offset;
                WaitOutcome::Appended(notice)
            }
            Some(Wake::Appended(_) | Wake::Changed) | None => WaitOutcome::Changed,
            Some(Wake::Shutdown) => WaitOutcome::Shutdown,
        }
    }
}

/// A permit to park one live reader; dropping it frees the place.
#[derive(Debug)]
pub struct WaiterPermit(#[allow(dead_code)] OwnedSemaphorePermit);

/// A group as the engine holds it: its owner task's request queue.
pub(crate) struct Group {
    pub(crate) tx: mpsc::Sender<Op>,
    /// Places for the writes proposed straight to the group's log
    /// ([`Engine::write`]), as many as its queue holds: past them a write
    /// is refused as busy, as a full queue refuses it.
    proposing: Semaphore,
    /// The group's state, which its task serves from, and callers too
    /// when its lock is free ([`Engine::call`], [`Engine::write`]).
    core: crate::group::SharedCore,
}

impl Group {
    pub(crate) fn new(
        tx: mpsc::Sender<Op>,
        queue_depth: usize,
        core: crate::group::SharedCore,
    ) -> Self {
        Self {
            tx,
            proposing: Semaphore::new(queue_depth.max(1)),
            core,
        }
    }
}

/// A node's groups of state machines. Cheap to clone; every clone talks to
/// the same groups.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

/// An [`Engine`] that does not keep it alive ([`Engine::downgrade`]).
#[derive(Clone)]
pub(crate) struct WeakEngine(Weak<Inner>);

impl WeakEngine {
    /// The engine, while any [`Engine`] handle to it is left.
    pub(crate) fn upgrade(&self) -> Option<Engine> {
        self.0.upgrade().map(|inner| Engine { inner })
    }
}

struct Inner {
    groups: Vec<Group>,
    clock: Arc<dyn Clock>,
    waiters: Arc<Semaphore>,
    shutdown: watch::Sender<bool>,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
    cold: std::sync::OnceLock<Arc<dyn ColdReader>>,
    /// The groups this node holds, and how it asks about the others.
    remote: std::sync::OnceLock<Arc<dyn crate::remote::RemoteGroups>>,
    /// Each group's log, for a replicated engine (set when attached).
    logs: Vec<std::sync::OnceLock<Arc<dyn GroupLog>>>,
    /// Whether the groups apply through logs ([`Engine::start_replicated`]).
    replicated: bool,
    /// The node's copy of flushed bytes, shared with the groups' tasks and
    /// appliers (a replicated engine's, once installed).
    replica: ReplicaSlot,
    /// Tells the fork janitor that a group has unpins to deliver.
    unpins: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("groups", &self.inner.groups.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Puts an engine together from its started group tasks (`start.rs`
    /// starts them) and starts its fork unpin janitor.
    pub(crate) fn from_parts(
        config: &EngineConfig,
        clock: Arc<dyn Clock>,
        groups: Vec<Group>,
        tasks: Vec<JoinHandle<()>>,
        (shutdown, shutdown_rx): (watch::Sender<bool>, watch::Receiver<bool>),
        (replicated, replica): (bool, ReplicaSlot),
        unpins: Arc<tokio::sync::Notify>,
    ) -> Self {
        let logs = groups.iter().map(|_| std::sync::OnceLock::new()).collect();
        let engine = Self {
            inner: Arc::new(Inner {
                groups,
                clock,
                waiters: Arc::new(Semaphore::new(config.max_waiters)),
                shutdown,
                tasks: std::sync::Mutex::new(tasks),
                cold: std::sync::OnceLock::new(),
                remote: std::sync::OnceLock::new(),
                logs,
                replicated,
                replica,
                unpins: Arc::clone(&unpins),
            }),
        };
        // The fork unpin janitor (`forks.rs`), woken by the groups through
        // `unpins`; it ends with the engine.
        let janitor = tokio::spawn(crate::forks::deliver_unpins(
            engine.downgrade(),
            unpins,
            shutdown_rx,
        ));
        engine.add_task(janitor);
        engine
    }

    /// Adds a task [`Engine::shutdown`] waits for.
    pub(crate) fn add_task(&self, task: JoinHandle<()>) {
        match self.inner.tasks.lock() {
            Ok(mut tasks) => tasks.push(task),
            Err(poisoned) => poisoned.into_inner().push(task),
        }
    }

    /// A handle that does not keep the engine alive (for its own
    /// background tasks, which end once every [`Engine`] is gone).
    pub(crate) fn downgrade(&self) -> WeakEngine {
        WeakEngine(Arc::downgrade(&self.inner))
    }

    pub(crate) fn set_log(&self, group: usize, log: Arc<dyn GroupLog>) {
        if let Some(slot) = self.inner.logs.get(group) {
            let _ = slot.set(log);
        }
    }

    /// Installs the node's [`SegmentReplica`](crate::SegmentReplica) on a
    /// replicated engine, before its logs replay: from then on every
    /// group hands it the bytes its accepted `FlushCold`s take out of the
    /// hot buffers, and its appliers await it. Only the first call takes
    /// effect; it answers whether it did (an in-memory engine takes none).
    pub fn set_segment_replica(&self, replica: Arc<dyn crate::SegmentReplica>) -> bool {
        self.inner.replicated && self.inner.replica.set(replica).is_ok()
    }

    /// Whether the engine's groups are replicated (started with
    /// [`Engine::start_replicated`]).
    pub fn is_replicated(&self) -> bool {
        self.inner.logs.iter().any(|l| l.get().is_some())
    }

    /// Each group's replication status, in group order; empty for an
    /// in-memory engine.
    pub fn group_status(&self) -> Vec<GroupStatus> {
        self.inner
            .logs
            .iter()
            .filter_map(|l| l.get().map(|log| log.status()))
            .collect()
    }

    /// Whether this node's background workers should act on `group` now:
    /// always for an in-memory engine; for a replicated one, while this
    /// node leads the group and has applied everything committed before
    /// its term ([`GroupLog::leads`]); never before the log is attached.
    pub fn leads_group(&self, group: usize) -> bool {
        match self.inner.logs.get(group).and_then(|l| l.get()) {
            Some(log) => log.leads(),
            None => !self.inner.replicated && group < self.inner.groups.len(),
        }
    }

    /// The number of groups.
    pub fn group_count(&self) -> usize {
        self.inner.groups.len()
    }

    /// The edge clock's time, read once per request.
    pub fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// The group that owns a stream.
    pub fn group_for(&self, id: &BucketStreamId) -> usize {
        group_of(id, self.inner.groups.len())
    }

    /// Group `group` (any index names one).
    fn group(&self, group: usize) -> &Group {
        &self.inner.groups[group % self.inner.groups.len()]
    }

    /// Sends a group a request and waits for its answer.
    pub(crate) async fn call<R>(
        &self,
        group: usize,
        op: impl FnOnce(Answer<R>) -> Op,
    ) -> Result<R, EngineError> {
        let (tx, rx) = oneshot::channel();
        let mut op = op(tx);
        let g = self.group(group);
        // The group serves it on this task when its lock is free (as an
        // in-memory group applies writes: [`Engine::write`]); once the
        // engine shuts down, through the queue, which the group's task
        // closes as it stops.
        if !*self.inner.shutdown.borrow() {
            match crate::group::try_serve(&g.core, op, &self.inner.unpins) {
                Ok(()) => return self.answered(rx).await,
                Err(busy) => op = *busy,
            }
        }
        match g.tx.try_send(op) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return Err(EngineError::Busy),
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(EngineError::Shutdown),
        }
        self.answered(rx).await
    }

    /// The answer a group or its log sends on `rx`.
    async fn answered<R>(
        &self,
        rx: oneshot::Receiver<Result<R, EngineError>>,
    ) -> Result<R, EngineError> {
        // A failed proposal answers why; a reply dropped unanswered while
        // the engine runs means the group's task (or its log) is gone.
        rx.await.unwrap_or_else(|_| {
            Err(if *self.inner.shutdown.borrow() {
                EngineError::Shutdown
            } else {
                EngineError::Unavailable(Unavailable::Stopped)
            })
        })
    }

    /// Applies a command in the group of `placement` (the stream it names,
    /// or any id of the affinity group it concerns).
    pub async fn apply(
        &self,
        placement: &BucketStreamId,
        command: StreamCommand,
    ) -> Result<StreamResponse, EngineError> {
        self.call(self.group_for(placement), |reply| Op::Apply {
            command,
            reply,
        })
        .await
    }

    /// Applies a command in one group by index (group-wide commands a
    /// worker issues for its group, such as `AckColdGc`).
    pub async fn apply_in_group(
        &self,
        group: usize,
        command: StreamCommand,
    ) -> Result<StreamResponse, EngineError> {
        self.call(group, |reply| Op::Apply { command, reply }).await
    }

    /// Applies commands in one group by index, in order, as one entry (in
    /// a replicated group: one log entry, so every replica applies all of
    /// them in the same apply); one answer per command.
    ///
    /// # Errors
    /// As [`Engine::apply_in_group`], for all of them at once.
    pub async fn apply_many_in_group(
        &self,
        group: usize,
        commands: Vec<StreamCommand>,
    ) -> Result<Vec<StreamResponse>, EngineError> {
        self.call(group, |reply| Op::ApplyMany { commands, reply })
            .await
    }

    /// Applies a command in every group, in group order (bucket-wide
    /// commands: create, quota, purge), and stops at the first group that
    /// does not take it: the error then says which groups applied it.
    ///
    /// # Errors
    /// A [`FanOutError`] naming the group that failed, with the answers of
    /// the groups before it (which did apply the command).
    pub async fn apply_all(
        &self,
        command: StreamCommand,
    ) -> Result<Vec<StreamResponse>, FanOutError> {
        let groups = self.inner.groups.len();
        let mut out = Vec::with_capacity(groups);
        for group in 0..groups {
            let command = command.clone();
            match self.call(group, |reply| Op::Apply { command, reply }).await {
                Ok(response) => out.push(response),
                Err(error) => {
                    return Err(FanOutError {
                        applied: out,
                        group,
                        groups,
                        error,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Creates a stream (a `CreateStream` command), creating its bucket in
    /// the stream's group first when the bucket is missing there. With
    /// `media_type_match`, a content type naming the existing stream's media
    /// type (case-insensitive, parameters ignored) counts as the same, so
    /// an idempotent create does not conflict on spelling.
    pub async fn create_stream(
        &self,
        command: StreamCommand,
        media_type_match: bool,
    ) -> Result<StreamResponse, EngineError> {
        let group = match &command {
            StreamCommand::CreateStream { stream_id, .. }
            | StreamCommand::CreateFork { stream_id, .. } => self.group_for(stream_id),
            _ => 0,
        };
        self.call(group, |reply| Op::Create {
            command,
            media_type_match,
            reply,
        })
        .await
    }

    /// An append, append-and-close or close, timed by the edge clock.
    ///
    /// A replicated group's write goes straight to its log, from the
    /// caller's task: the group's task would only pass it on (its entry
    /// is checked as it applies), and skipping it saves a hop per append.
    /// Writes keep one order per group, the log's; as many wait for their
    /// answer at a time as the group's queue holds (more are busy).
    ///
    /// An in-memory group's write applies on the caller's task when the
    /// group's lock is free, for the same reason; when the group's task
    /// holds it, the write joins the group's queue. Either way the group
    /// applies one command at a time.
    pub async fn write(&self, request: WriteRequest) -> Result<WriteOutcome, EngineError> {
        let now_ms = self.now_ms();
        let group = self.group_for(&request.stream_id);
        let mut request = Box::new(request);
        let g = self.group(group);
        if !self.inner.replicated {
            if *self.inner.shutdown.borrow() {
                return Err(EngineError::Shutdown);
            }
            match crate::group::try_write(&g.core, request, now_ms, &self.inner.unpins) {
                Ok(outcome) => return Ok(outcome),
                Err(busy) => request = busy,
            }
        }
        if let Some(log) = self.inner.logs.get(group).and_then(|l| l.get()) {
            let Ok(_place) = g.proposing.try_acquire() else {
                return Err(EngineError::Busy);
            };
            let (tx, rx) = oneshot::channel();
            log.propose(
                GroupEntry::Write { request, now_ms },
                Box::new(move |outcome| Reply::Write(tx).send(outcome)),
            );
            return self.answered(rx).await;
        }
        self.call(group, |reply| Op::Write {
            request,
            now_ms,
            reply,
        })
        .await
    }

    /// Appends to several streams of one affinity group in one step: every
    /// command must be an `Append` to a stream with the same bucket and
    /// affinity key (so they share a group); on the first error nothing
    /// is applied. It is one entry of the group's log.
    pub async fn transaction(
        &self,
        placement: &BucketStreamId,
        commands: Vec<StreamCommand>,
    ) -> Result<TransactionOutcome, EngineError> {
        self.call(self.group_for(placement), |reply| Op::Transaction {
            commands,
            reply,
        })
        .await
    }

    /// Deletes a stream; an expired stream is not found.
    pub async fn delete(&self, stream_id: BucketStreamId) -> Result<StreamResponse, EngineError> {
        let now_ms = self.now_ms();
        self.call(self.group_for(&stream_id), |reply| Op::Delete {
            stream_id,
            now_ms,
            reply,
        })
        .await
    }

    /// A stream's metadata, `None` when missing or expired (asked at a
    /// member that holds the stream's group when this node does not).
    /// Does not renew a TTL.
    pub async fn head(&self, stream_id: BucketStreamId) -> Result<HeadOutcome, EngineError> {
        let group = self.group_for(&stream_id);
        if !self.holds_group(group) {
            return self.head_elsewhere(group, stream_id).await;
        }
        let now_ms = self.now_ms();
        self.call(group, |reply| Op::Head {
            stream_id,
            now_ms,
            reply,
        })
        .await
    }

    /// Reads up to `max_len` bytes, renewing the stream's TTL when due (a
    /// stream of a group this node does not hold is read at a member that
    /// holds it).
    ///
    /// A fork's read below its fork offset continues through its source
    /// (and the source's source), so the page may join bytes of several
    /// streams; it never crosses a fork offset without reaching it.
    pub async fn read(
        &self,
        stream_id: BucketStreamId,
        from: ReadFrom,
        max_len: usize,
    ) -> Result<ReadOutcome, EngineError> {
        let group = self.group_for(&stream_id);
        if !self.holds_group(group) {
            return self.read_elsewhere(group, stream_id, from, max_len).await;
        }
        let now_ms = self.now_ms();
        let reply = self
            .call(group, |reply| Op::Read {
                stream_id: stream_id.clone(),
                from,
                max_len,
                now_ms,
                through: false,
                reply,
            })
            .await?;
        match reply {
            ReadReply::Data(outcome) => Ok(outcome),
            ReadReply::Cold { from, error } => {
                self.read_cold(stream_id, from, max_len, false, error).await
            }
            ReadReply::Inherited {
                offset,
                content_type,
                ..
            } => {
                self.read_stitched(&stream_id, offset, max_len, Some(content_type))
                    .await
            }
        }
    }

    /// One read of `stream_id` in its group, for fork stitching.
    pub(crate) async fn read_once(
        &self,
        stream_id: &BucketStreamId,
        offset: u64,
        max_len: usize,
        through: bool,
    ) -> Result<ReadReply, EngineError> {
        let now_ms = self.now_ms();
        self.call(self.group_for(stream_id), |reply| Op::Read {
            stream_id: stream_id.clone(),
            from: ReadFrom::Offset(offset),
            max_len,
            now_ms,
            through,
            reply,
        })
        .await
    }

    /// The slot of the installed [`RemoteGroups`](crate::RemoteGroups).
    pub(crate) fn remote(&self) -> &std::sync::OnceLock<Arc<dyn crate::remote::RemoteGroups>> {
        &self.inner.remote
    }

    /// Installs the cold tier that serves reads below the hot buffers.
    /// Only the first call takes effect; it answers whether it did.
    pub fn set_cold_reader(&self, reader: Arc<dyn ColdReader>) -> bool {
        self.inner.cold.set(reader).is_ok()
    }

    /// A read the hot buffer could not serve, through the installed cold
    /// tier; without one, `error` (the machine's answer) stands.
    pub(crate) async fn read_cold(
        &self,
        stream_id: BucketStreamId,
        from: ReadFrom,
        max_len: usize,
        through: bool,
        error: StreamResponse,
    ) -> Result<ReadOutcome, EngineError> {
        match self.inner.cold.get() {
            Some(cold) => {
                cold.read_cold(self.clone(), stream_id, from, max_len, through)
                    .await
            }
            None => Ok(Err(error)),
        }
    }

    /// Takes a place for one live reader, or fails when the node's limit is
    /// reached.
    pub fn waiter_permit(&self) -> Result<WaiterPermit, EngineError> {
        Arc::clone(&self.inner.waiters)
            .try_acquire_owned()
            .map(WaiterPermit)
            .map_err(|_| EngineError::TooManyWaiters)
    }

    /// Waits until the stream's tail passes `offset`, it closes or goes
    /// away, or `timeout` passes. Costs no CPU while parked. When an inline
    /// append starting exactly at `offset` ends the wait, its bytes come
    /// with it ([`WaitOutcome::Appended`]).
    pub async fn wait(
        &self,
        stream_id: BucketStreamId,
        offset: u64,
        timeout: Duration,
    ) -> Result<WaitOutcome, EngineError> {
        let (tx, rx) = oneshot::channel();
        self.park(stream_id, offset, WaiterTx::Once(tx))?;
        match tokio::time::timeout(timeout, rx).await {
            Err(_) => Ok(WaitOutcome::TimedOut),
            Ok(Ok(Wake::Changed)) => Ok(WaitOutcome::Changed),
            Ok(Ok(Wake::Appended(notice))) => Ok(WaitOutcome::Appended(notice)),
            Ok(Ok(Wake::Shutdown)) | Ok(Err(_)) => Ok(WaitOutcome::Shutdown),
        }
    }

    /// Follows a stream's appends from `offset` on, as an SSE reader does:
    /// unlike [`Engine::wait`], the reader stays parked after an append at
    /// its offset and gets the next one's bytes too, without asking the
    /// group again. See [`Subscription::next`] for when it ends.
    pub fn subscribe(
        &self,
        stream_id: BucketStreamId,
        offset: u64,
    ) -> Result<Subscription, EngineError> {
        let (tx, rx) = mpsc::channel(SUBSCRIPTION_NOTICES);
        self.park(stream_id, offset, WaiterTx::Live(tx))?;
        Ok(Subscription { rx, offset })
    }

    /// Hands a waiter to its stream's group.
    fn park(
        &self,
        stream_id: BucketStreamId,
        offset: u64,
        reply: WaiterTx,
    ) -> Result<(), EngineError> {
        let sender = &self.inner.groups[self.group_for(&stream_id)].tx;
        sender
            .try_send(Op::Wait {
                stream_id,
                offset,
                reply,
            })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => EngineError::Busy,
                mpsc::error::TrySendError::Closed(_) => EngineError::Shutdown,
            })
    }

    /// Runs a read-only query on the machine of `placement`'s group.
    pub async fn query<R: Send + 'static>(
        &self,
        placement: &BucketStreamId,
        f: impl FnOnce(&StreamStateMachine) -> R + Send + 'static,
    ) -> Result<R, EngineError> {
        self.query_group(self.group_for(placement), f).await
    }

    /// Runs a read-only query on one group's machine.
    pub async fn query_group<R: Send + 'static>(
        &self,
        group: usize,
        f: impl FnOnce(&StreamStateMachine) -> R + Send + 'static,
    ) -> Result<R, EngineError> {
        self.call(group, |reply| {
            Op::Query(Box::new(move |machine| {
                let _ = reply.send(Ok(f(machine)));
            }))
        })
        .await
    }

    /// Hot bytes held by every group this node holds together.
    pub async fn hot_bytes(&self) -> Result<u64, EngineError> {
        let mut total = 0u64;
        for group in 0..self.inner.groups.len() {
            if !self.holds_group(group) {
                continue;
            }
            total = total.saturating_add(
                self.query_group(group, |m| m.total_hot_payload_bytes())
                    .await?,
            );
        }
        Ok(total)
    }

    /// Stops every group: parked readers are woken with
    /// [`WaitOutcome::Shutdown`], queued requests are dropped, and the
    /// owner tasks end. Waits for them.
    pub async fn shutdown(&self) {
        // Stop the logs first: they apply through the group tasks.
        for log in self.inner.logs.iter().filter_map(|l| l.get()) {
            log.shutdown().await;
        }
        let _ = self.inner.shutdown.send(true);
        let tasks: Vec<JoinHandle<()>> = match self.inner.tasks.lock() {
            Ok(mut guard) => guard.drain(..).collect(),
            Err(poisoned) => poisoned.into_inner().drain(..).collect(),
        };
        for task in tasks {
            let _ = task.await;
        }
    }

    /// Live readers parked in the groups now: [`Engine::wait`]s and
    /// [`Subscription`]s their stream's group holds (one whose reader gave
    /// up is not counted). Each group answers after the requests already
    /// in its queue, so a reader handed to its group before this call is
    /// counted. An observation, for tests that must know a reader waits
    /// before they act.
    pub async fn parked_waiters(&self) -> Result<usize, EngineError> {
        let mut parked = 0;
        for group in 0..self.inner.groups.len() {
            parked += self.call(group, Op::Parked).await?;
        }
        Ok(parked)
    }
}

pub(crate) fn add_usage(
    mut a: BucketUsageSnapshot,
    b: &BucketUsageSnapshot,
) -> BucketUsageSnapshot {
    let (x, y) = (&mut a.usage, &b.usage);
    x.committed_append_bytes = x
        .committed_append_bytes
        .saturating_add(y.committed_append_bytes);
    x.committed_records = x.committed_records.saturating_add(y.committed_records);
    x.committed_write_units = x
        .committed_write_units
        .saturating_add(y.committed_write_units);
    x.retained_bytes = x.retained_bytes.saturating_add(y.retained_bytes);
    x.stream_count = x.stream_count.saturating_add(y.stream_count);
    a
}
