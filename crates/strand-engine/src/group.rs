//! One group's owner task and the lock around the group's
//! `StreamStateMachine`. Requests arrive through a bounded queue and are
//! served one at a time, so no lock is shared between groups. When the
//! lock is free, a request is served straight on the caller's task
//! instead ([`try_serve`]; queries aside), and so is an in-memory group's
//! write ([`try_write`]; a replicated group's goes to its log). The lock
//! keeps one command at a time either way, and no task ever waits for it
//! across an `await`.
//!
//! Every state change is a [`GroupEntry`] applied by
//! [`GroupCore::apply_entry`], the one function both engines share: the
//! in-memory engine applies an entry as it arrives; a replicated engine
//! proposes it to the group's [`GroupLog`] and applies it when the log
//! hands it back committed (a [`LogInput::Apply`]). Reads and waits stay
//! local.

use std::sync::Arc;

use strand::{BucketStreamId, MachineOptions, StreamCommand, StreamResponse, StreamStateMachine};
use tokio::sync::{mpsc, oneshot};

use crate::applier::LogInput;
use crate::error::{EngineError, Unavailable};
use crate::log::{EntryOutcome, GroupEntry, GroupLog};
use crate::ops::{
    HeadOutcome, ReadFrom, ReadOutcome, TransactionOutcome, WriteOutcome, WriteRequest,
};
use crate::replica::{Capture, ReplicaSlot};
use crate::waiters::{AppendNotice, WaiterTx, Waiters, Wake};

/// A query run on the group's machine inside its task.
pub(crate) type Query = Box<dyn FnOnce(&StreamStateMachine) + Send>;

/// Where a group sends a request's answer, or why it could not serve it.
pub(crate) type Answer<T> = oneshot::Sender<Result<T, EngineError>>;

/// One request to a group.
pub(crate) enum Op {
    /// Apply a command as it is.
    Apply {
        command: StreamCommand,
        reply: Answer<StreamResponse>,
    },
    /// Apply commands in order as one entry (one log entry when
    /// replicated).
    ApplyMany {
        commands: Vec<StreamCommand>,
        reply: Answer<Vec<StreamResponse>>,
    },
    /// Create a stream, creating its bucket in this group first.
    Create {
        command: StreamCommand,
        media_type_match: bool,
        reply: Answer<StreamResponse>,
    },
    /// An append, append-and-close or close.
    Write {
        request: Box<WriteRequest>,
        now_ms: u64,
        reply: Answer<WriteOutcome>,
    },
    /// Delete a stream that has not expired.
    Delete {
        stream_id: BucketStreamId,
        now_ms: u64,
        reply: Answer<StreamResponse>,
    },
    /// A stream's metadata; expiry applied, no renewal.
    Head {
        stream_id: BucketStreamId,
        now_ms: u64,
        reply: Answer<HeadOutcome>,
    },
    /// A read from the hot buffer, renewing the TTL when due; `through`
    /// is a fork reading through this stream (no expiry, no renewal).
    Read {
        stream_id: BucketStreamId,
        from: ReadFrom,
        max_len: usize,
        now_ms: u64,
        through: bool,
        reply: Answer<ReadReply>,
    },
    /// Park until the stream's tail passes `offset`, it closes or it goes
    /// (`WaiterTx::Once`), or follow its appends from `offset` on
    /// (`WaiterTx::Live`).
    Wait {
        stream_id: BucketStreamId,
        offset: u64,
        reply: WaiterTx,
    },
    /// Appends to several streams of one affinity group, all or nothing.
    Transaction {
        commands: Vec<StreamCommand>,
        reply: Answer<TransactionOutcome>,
    },
    /// A read-only query of the machine.
    Query(Query),
    /// How many readers are parked in the group now
    /// ([`crate::Engine::parked_waiters`]).
    Parked(Answer<usize>),
}

/// What a group answers a read with: the read, or (for a fork, below its
/// fork offset) where to continue it.
#[derive(Debug)]
pub(crate) enum ReadReply {
    /// The group's own bytes (or its error).
    Data(ReadOutcome),
    /// The range at `offset` is not in the hot buffer: a cold-tier read
    /// ([`crate::ColdReader`]) must serve it; `error` is the machine's
    /// answer when there is no cold tier.
    Cold {
        from: ReadFrom,
        error: StreamResponse,
    },
    /// `offset` lies below the stream's fork offset `cap`: read `source`.
    Inherited {
        source: BucketStreamId,
        cap: u64,
        offset: u64,
        content_type: String,
    },
}

/// What a read or head does once its access is applied: it gets the
/// machine and whether the stream is there, or why the access failed.
type AfterAccess = Box<dyn FnOnce(Result<(&StreamStateMachine, bool), EngineError>) + Send>;

/// Where a proposed entry's outcome goes.
pub(crate) enum Reply {
    Response(Answer<StreamResponse>),
    Many(Answer<Vec<StreamResponse>>),
    Write(Answer<WriteOutcome>),
    Transaction(Answer<TransactionOutcome>),
    /// Continue a read or head once its access entry is applied.
    Access(Box<dyn FnOnce(Result<bool, EngineError>) + Send>),
}

impl Reply {
    /// Sends an outcome, or the error the log failed the entry with (a
    /// mismatched outcome, which a correct log never produces, is answered
    /// as a failed log).
    pub(crate) fn send(self, outcome: Result<EntryOutcome, EngineError>) {
        let mismatch = |other: &EntryOutcome| {
            tracing::error!(
                ?other,
                "a log answered an entry with another kind of outcome"
            );
            EngineError::Unavailable(Unavailable::LogFailed)
        };
        match self {
            Reply::Response(tx) => {
                let _ = tx.send(outcome.and_then(|o| match o {
                    EntryOutcome::Response(r) => Ok(r),
                    other => Err(mismatch(&other)),
                }));
            }
            Reply::Many(tx) => {
                let _ = tx.send(outcome.and_then(|o| {
                    match o {
                        EntryOutcome::Batch(outcomes) => outcomes
                            .into_iter()
                            .map(|o| match o {
                                EntryOutcome::Response(r) => Ok(r),
                                other => Err(mismatch(&other)),
                            })
                            .collect(),
                        other => Err(mismatch(&other)),
                    }
                }));
            }
            Reply::Write(tx) => {
                let _ = tx.send(outcome.and_then(|o| match o {
                    EntryOutcome::Write(w) => Ok(w),
                    other => Err(mismatch(&other)),
                }));
            }
            Reply::Transaction(tx) => {
                let _ = tx.send(outcome.and_then(|o| match o {
                    EntryOutcome::Transaction(t) => Ok(t),
                    other => Err(mismatch(&other)),
                }));
            }
            Reply::Access(f) => f(outcome.and_then(|o| match o {
                EntryOutcome::Accessed(present) => Ok(present),
                other => Err(mismatch(&other)),
            })),
        }
    }
}

/// How a group applies its entries.
enum Backend {
    /// Applied as they arrive (the in-memory engine).
    Memory,
    /// Proposed to the group's log once it is attached.
    Replicated {
        log: Option<Arc<dyn GroupLog>>,
        /// The group's own queue, to continue reads after an access entry.
        requeue: mpsc::WeakSender<Op>,
    },
}

/// A group's state inside its task.
pub(crate) struct GroupCore {
    machine: StreamStateMachine,
    waiters: Waiters,
    backend: Backend,
    /// The group's index.
    group: usize,
    /// The node's copy of flushed bytes, for a replicated group
    /// (`crate::replica`).
    replica: ReplicaSlot,
    /// Whether the group's task has stopped: nothing is served on a
    /// caller's task any more ([`try_serve`]), so no reader parks after
    /// the parked ones were ended.
    stopped: bool,
}

/// Where a replicated engine's [`SegmentReplica`] is installed.
impl GroupCore {
    pub(crate) fn new(options: MachineOptions) -> Self {
        Self {
            machine: StreamStateMachine::with_options(options),
            waiters: Waiters::default(),
            backend: Backend::Memory,
            group: 0,
            replica: ReplicaSlot::default(),
            stopped: false,
        }
    }

    pub(crate) fn replicated(
        options: MachineOptions,
        requeue: mpsc::WeakSender<Op>,
        group: usize,
        replica: ReplicaSlot,
    ) -> Self {
        Self {
            backend: Backend::Replicated { log: None, requeue },
            group,
            replica,
            ..Self::new(options)
        }
    }

    /// Whether the group serves requests (a replicated group only once its
    /// log is attached).
    fn ready(&self) -> bool {
        match &self.backend {
            Backend::Memory => true,
            Backend::Replicated { log, .. } => log.is_some(),
        }
    }

    /// Applies an entry now (in memory) or proposes it to the log.
    fn submit(&mut self, entry: GroupEntry, reply: Reply) {
        match &self.backend {
            Backend::Memory => {
                let outcome = self.apply_entry(entry);
                reply.send(Ok(outcome));
            }
            Backend::Replicated { log: Some(log), .. } => {
                log.propose(entry, Box::new(move |outcome| reply.send(outcome)));
            }
            Backend::Replicated { log: None, .. } => {
                reply.send(Err(Unavailable::NotAttached.into()))
            }
        }
    }

    /// Applies one entry: the deterministic function of the machine's
    /// state and the entry that both engines share.
    pub(crate) fn apply_entry(&mut self, entry: GroupEntry) -> EntryOutcome {
        match entry {
            GroupEntry::Command(command) => EntryOutcome::Response(self.commit_kept(command)),
            GroupEntry::Create {
                command,
                media_type_match,
            } => EntryOutcome::Response(self.create(command, media_type_match)),
            GroupEntry::Write { request, now_ms } => {
                EntryOutcome::Write(self.write(*request, now_ms))
            }
            GroupEntry::Delete { stream_id, now_ms } => {
                EntryOutcome::Response(if self.access(&stream_id, now_ms, false) {
                    self.commit(StreamCommand::DeleteStream { stream_id })
                } else {
                    not_found(&stream_id)
                })
            }
            GroupEntry::Access {
                stream_id,
                now_ms,
                renew,
            } => EntryOutcome::Accessed(self.access(&stream_id, now_ms, renew)),
            GroupEntry::Transaction { commands } => {
                let touched: Vec<BucketStreamId> =
                    commands.iter().filter_map(touched_stream).collect();
                let outcome = self.machine.append_transaction(commands);
                if outcome.is_ok() {
                    for id in &touched {
                        self.waiters.wake(id);
                    }
                }
                EntryOutcome::Transaction(outcome)
            }
            GroupEntry::Batch(entries) => {
                EntryOutcome::Batch(entries.into_iter().map(|e| self.apply_entry(e)).collect())
            }
        }
    }

    /// [`commit`](Self::commit), handing the node's [`SegmentReplica`]
    /// the bytes an accepted `FlushCold` takes out of the hot buffer and
    /// what an `AckColdGc` reclaims.
    fn commit_kept(&mut self, command: StreamCommand) -> StreamResponse {
        // Appends and the rest pass straight through: no capture, no
        // handle clone.
        let capture = match self.replica.get() {
            Some(_) => Capture::before(&self.machine, &command),
            None => None,
        };
        let Some(capture) = capture else {
            return self.commit(command);
        };
        let response = self.commit(command);
        let accepted = matches!(
            response,
            StreamResponse::ColdFlushed { .. } | StreamResponse::ColdGcAcked { .. }
        );
        if let Some(replica) = self.replica.get() {
            capture.after(replica.as_ref(), self.group, accepted);
        }
        response
    }

    /// Applies a command and wakes the readers it may concern. With no
    /// reader parked in the group this is `machine.apply` alone.
    fn commit(&mut self, command: StreamCommand) -> StreamResponse {
        if self.waiters.is_empty() {
            return self.machine.apply(command);
        }
        let touched = touched_stream(&command);
        let purged = match &command {
            StreamCommand::PurgeBucket { bucket_id } => Some(bucket_id.clone()),
            _ => None,
        };
        let import = matches!(command, StreamCommand::ImportSnapshot { .. });
        // An inline append's bytes go straight to the readers parked at its
        // start (a `Bytes` clone).
        let appended = match (&command, &touched) {
            (StreamCommand::Append { payload, .. }, Some(id)) if self.waiters.has(id) => {
                Some(payload.clone())
            }
            _ => None,
        };
        let response = self.machine.apply(command);
        if let Some(id) = touched {
            match (&response, appended) {
                (
                    StreamResponse::Appended {
                        offset,
                        next_offset,
                        closed,
                        deduplicated: false,
                        ..
                    },
                    Some(payload),
                ) if next_offset.checked_sub(*offset) == u64::try_from(payload.len()).ok() => {
                    let notice = AppendNotice::new(*offset, *next_offset, payload, *closed);
                    self.waiters.wake_appended(&id, &notice);
                }
                _ => self.waiters.wake(&id),
            }
        }
        if let Some(bucket) = purged {
            self.waiters.wake_bucket(&bucket);
        }
        if import {
            self.waiters.wake_all(&Wake::Changed);
        }
        response
    }

    /// Applies expiry to a stream at `now_ms` (a replicated touch, so every
    /// replica removes it at the same point); `renew` also renews its TTL
    /// when a renewal is due. Returns whether the stream is (still) there.
    fn access(&mut self, id: &BucketStreamId, now_ms: u64, renew: bool) -> bool {
        match self.machine.access_requires_write(id, now_ms, renew) {
            Err(_) => false,
            Ok(false) => true,
            Ok(true) => {
                let response = self.commit(StreamCommand::TouchStreamAccess {
                    stream_id: id.clone(),
                    now_ms,
                    renew_ttl: renew,
                });
                !matches!(
                    response,
                    StreamResponse::Accessed { expired: true, .. } | StreamResponse::Error { .. }
                )
            }
        }
    }

    /// Runs `then` on the machine once the stream's access at `now_ms` is
    /// applied (with whether the stream is there): at once when the access
    /// changes nothing or the group is in memory, else after the log has
    /// applied the access entry (through the group's own queue).
    fn accessed(&mut self, id: BucketStreamId, now_ms: u64, renew: bool, then: AfterAccess) {
        let requeue = match &self.backend {
            Backend::Replicated { requeue, .. }
                if self.machine.access_requires_write(&id, now_ms, renew) == Ok(true) =>
            {
                requeue.clone()
            }
            _ => {
                let present = self.access(&id, now_ms, renew);
                then(Ok((&self.machine, present)));
                return;
            }
        };
        let entry = GroupEntry::Access {
            stream_id: id,
            now_ms,
            renew,
        };
        let resume = Box::new(move |present: Result<bool, EngineError>| {
            let present = match present {
                Ok(present) => present,
                Err(e) => return then(Err(e)),
            };
            // The continuation only reads, in the group's task; a group
            // whose task is gone drops it (the caller sees that).
            let Some(tx) = requeue.upgrade() else {
                return;
            };
            match tx.try_reserve() {
                Ok(permit) => permit.send(Op::Query(Box::new(move |m| then(Ok((m, present)))))),
                Err(mpsc::error::TrySendError::Full(())) => then(Err(EngineError::Busy)),
                Err(mpsc::error::TrySendError::Closed(())) => then(Err(EngineError::Shutdown)),
            }
        });
        self.submit(entry, Reply::Access(resume));
    }

    pub(crate) fn serve(&mut self, op: Op) {
        match op {
            Op::Apply { command, reply } => {
                self.submit(GroupEntry::Command(command), Reply::Response(reply));
            }
            Op::ApplyMany { commands, reply } => self.submit(
                GroupEntry::Batch(commands.into_iter().map(GroupEntry::Command).collect()),
                Reply::Many(reply),
            ),
            Op::Create {
                command,
                media_type_match,
                reply,
            } => self.submit(
                GroupEntry::Create {
                    command,
                    media_type_match,
                },
                Reply::Response(reply),
            ),
            Op::Write {
                request,
                now_ms,
                reply,
            } => self.submit(GroupEntry::Write { request, now_ms }, Reply::Write(reply)),
            Op::Delete {
                stream_id,
                now_ms,
                reply,
            } => self.submit(
                GroupEntry::Delete { stream_id, now_ms },
                Reply::Response(reply),
            ),
            Op::Head {
                stream_id,
                now_ms,
                reply,
            } => {
                let id = stream_id.clone();
                self.accessed(
                    stream_id,
                    now_ms,
                    false,
                    Box::new(move |accessed| {
                        let head = accessed.map(|(machine, present)| {
                            if present {
                                machine.head(&id).cloned()
                            } else {
                                None
                            }
                        });
                        let _ = reply.send(head);
                    }),
                );
            }
            Op::Read {
                stream_id,
                from,
                max_len,
                now_ms,
                through,
                reply,
            } => {
                if through {
                    // A fork reading through this stream: no access, no
                    // expiry, nothing to propose.
                    let _ = reply.send(Ok(read_through(&self.machine, &stream_id, from, max_len)));
                    return;
                }
                let id = stream_id.clone();
                self.accessed(
                    stream_id,
                    now_ms,
                    true,
                    Box::new(move |accessed| {
                        let outcome = accessed.map(|(machine, present)| {
                            if present {
                                read(machine, &id, from, max_len, now_ms)
                            } else {
                                ReadReply::Data(Err(not_found(&id)))
                            }
                        });
                        let _ = reply.send(outcome);
                    }),
                );
            }
            Op::Wait {
                stream_id,
                offset,
                reply,
            } => match self.machine.head(&stream_id) {
                Some(m) if m.tail_offset <= offset && m.status == strand::StreamStatus::Open => {
                    self.waiters.park(&stream_id, offset, reply);
                }
                _ => reply.finish(Wake::Changed),
            },
            Op::Transaction { commands, reply } => self.submit(
                GroupEntry::Transaction { commands },
                Reply::Transaction(reply),
            ),
            Op::Query(query) => query(&self.machine),
            Op::Parked(reply) => {
                let _ = reply.send(Ok(self.waiters.parked()));
            }
        }
    }

    /// Serves a message of the group's log.
    fn serve_log(&mut self, input: LogInput) {
        match input {
            LogInput::Attach(log) => {
                if let Backend::Replicated { log: slot, .. } = &mut self.backend {
                    *slot = Some(log);
                }
            }
            LogInput::Apply { entries, reply } => {
                let outcomes = entries.into_iter().map(|e| self.apply_entry(e)).collect();
                let _ = reply.send(outcomes);
            }
            LogInput::Snapshot { sink, reply } => {
                // The task pays for a clone of the state (a fifth of the
                // encoding's time: `snapshot_clone_machine` beside
                // `snapshot_encode_binary` in the machine's snapshot
                // bench); the encoding runs on a blocking thread while the
                // group goes on with the entries after the snapshot point.
                let machine = self.machine.clone();
                tokio::task::spawn_blocking(move || {
                    let _ = reply.send(crate::applier::encode_snapshot(&machine, sink));
                });
            }
            LogInput::Install { machine, reply } => {
                self.machine = *machine;
                if let Some(replica) = self.replica.get() {
                    replica.restored(self.group);
                }
                self.waiters.wake_all(&Wake::Changed);
                let _ = reply.send(());
            }
            LogInput::Reset { reply } => {
                self.machine = StreamStateMachine::with_options(self.machine.options());
                if let Some(replica) = self.replica.get() {
                    replica.restored(self.group);
                }
                self.waiters.wake_all(&Wake::Changed);
                let _ = reply.send(());
            }
        }
    }

    fn create(&mut self, mut command: StreamCommand, media_type_match: bool) -> StreamResponse {
        if let StreamCommand::CreateFork { stream_id, .. } = &command
            && strand::validate_bucket_id(&stream_id.bucket_id).is_ok()
            && !self.machine.bucket_exists(&stream_id.bucket_id)
        {
            let created = self.commit(StreamCommand::CreateBucket {
                bucket_id: stream_id.bucket_id.clone(),
            });
            if created.is_error() {
                return created;
            }
        }
        if let StreamCommand::CreateStream {
            stream_id,
            content_type,
            ..
        } = &mut command
        {
            if media_type_match
                && let Some(meta) = self.machine.head(stream_id)
                && same_media_type(content_type, &meta.content_type)
            {
                content_type.clone_from(&meta.content_type);
            }
            if strand::validate_bucket_id(&stream_id.bucket_id).is_ok()
                && !self.machine.bucket_exists(&stream_id.bucket_id)
            {
                let created = self.commit(StreamCommand::CreateBucket {
                    bucket_id: stream_id.bucket_id.clone(),
                });
                if created.is_error() {
                    return created;
                }
            }
        }
        self.commit(command)
    }

    fn write(&mut self, request: WriteRequest, now_ms: u64) -> WriteOutcome {
        let WriteRequest {
            stream_id,
            mut content_type,
            media_type_match,
            payload,
            close,
            stream_seq,
            producer,
            record_match,
        } = request;
        if media_type_match
            && !payload.is_empty()
            && let (Some(given), Some(meta)) = (&content_type, self.machine.head(&stream_id))
        {
            if !same_media_type(given, &meta.content_type) {
                // Decided here, before the machine's record-boundary checks
                // can call a JSON body on a binary stream invalid: the types
                // differ, whatever the body.
                let response = StreamResponse::error_at(
                    strand::StreamErrorCode::ContentTypeMismatch,
                    meta.tail_offset,
                    format!(
                        "content type {given:?} does not match the stream's {:?}",
                        meta.content_type
                    ),
                );
                return WriteOutcome {
                    response,
                    producer_position: None,
                };
            }
            if *given != meta.content_type {
                content_type = Some(meta.content_type.clone());
            }
        }
        // What looks the producer up after the command (the id is needed
        // after it only for that).
        let lookup = producer
            .as_ref()
            .map(|p| (stream_id.clone(), p.producer_id.clone()));
        let command = if close && payload.is_empty() {
            StreamCommand::Close {
                stream_id,
                stream_seq,
                producer,
                now_ms,
            }
        } else {
            StreamCommand::Append {
                stream_id,
                content_type,
                payload,
                close_after: close,
                stream_seq,
                producer,
                now_ms,
                record_match,
            }
        };
        let response = self.commit(command);
        let producer_position = lookup.and_then(|(id, p)| self.machine.producer_position(&id, &p));
        WriteOutcome {
            response,
            producer_position,
        }
    }

    /// Ends every parked reader (shutdown).
    pub(crate) fn shutdown(&mut self) {
        self.stopped = true;
        self.waiters.wake_all(&Wake::Shutdown);
    }
}

/// A hot read's answer, or the cold tier's turn when the range is not hot.
fn cold_or_data(from: ReadFrom, outcome: ReadOutcome) -> ReadReply {
    match outcome {
        Err(error) if error.error_code() == Some(strand::StreamErrorCode::InvalidColdFlush) => {
            ReadReply::Cold { from, error }
        }
        other => ReadReply::Data(other),
    }
}

fn content_type(machine: &StreamStateMachine, id: &BucketStreamId) -> String {
    machine
        .head(id)
        .map(|m| m.content_type.clone())
        .unwrap_or_default()
}

/// A read of a stream whose access has been applied. Below a fork's fork
/// offset it answers where to continue (`docs/forks.md` §6.2).
fn read(
    machine: &StreamStateMachine,
    id: &BucketStreamId,
    from: ReadFrom,
    max_len: usize,
    now_ms: u64,
) -> ReadReply {
    let offset = match from {
        ReadFrom::Start => machine.read_start_offset(id),
        ReadFrom::Tail => machine.head(id).map_or(0, |m| m.tail_offset),
        ReadFrom::Offset(offset) => offset,
        ReadFrom::Within(offset) => machine.whole_message_start(id, offset, max_len),
    };
    if let Some((source, cap)) = machine.fork_origin(id)
        && offset < cap
        && !machine.is_soft_deleted(id)
    {
        let start = machine.read_start_offset(id);
        if offset < start {
            return ReadReply::Data(Err(StreamResponse::error_at(
                strand::StreamErrorCode::StreamGone,
                start,
                format!("offset {offset} of stream '{id}' is below its first offset {start}"),
            )));
        }
        return ReadReply::Inherited {
            source,
            cap,
            offset,
            content_type: content_type(machine, id),
        };
    }
    let mut outcome = machine.read_hot_at(id, offset, max_len, now_ms);
    if let Ok(read) = outcome.as_mut() {
        machine.end_on_message(id, read);
    }
    // Below the hot start only the cold tier knows where messages start.
    let cold_from = match from {
        ReadFrom::Within(_) => ReadFrom::Within(offset),
        _ => ReadFrom::Offset(offset),
    };
    cold_or_data(cold_from, outcome)
}

/// A fork's read through this stream: no expiry, no renewal.
fn read_through(
    machine: &StreamStateMachine,
    id: &BucketStreamId,
    from: ReadFrom,
    max_len: usize,
) -> ReadReply {
    let offset = match from {
        ReadFrom::Offset(offset) => offset,
        ReadFrom::Within(offset) => machine.whole_message_start(id, offset, max_len),
        ReadFrom::Start => machine.read_start_offset(id),
        ReadFrom::Tail => machine.head(id).map_or(0, |m| m.tail_offset),
    };
    if let Some((source, cap)) = machine.fork_origin(id)
        && offset < cap
    {
        return ReadReply::Inherited {
            source,
            cap,
            offset,
            content_type: content_type(machine, id),
        };
    }
    cold_or_data(
        ReadFrom::Offset(offset),
        machine.read_hot_through(id, offset, max_len),
    )
}

/// The owner task's loop: serve requests until every sender is gone or
/// shutdown is signalled, then end the parked readers.
pub(crate) async fn run(
    core: SharedCore,
    rx: mpsc::Receiver<Op>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    unpins: Arc<tokio::sync::Notify>,
) {
    run_core(core, rx, None, shutdown, unpins).await;
}

/// The loop of a replicated group: entries are proposed to the log that
/// arrives through `log_rx`, and applied when the log hands them back.
pub(crate) async fn run_replicated(
    core: SharedCore,
    rx: mpsc::Receiver<Op>,
    log_rx: mpsc::UnboundedReceiver<LogInput>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    unpins: Arc<tokio::sync::Notify>,
) {
    run_core(core, rx, Some(log_rx), shutdown, unpins).await;
}

/// A group's state behind the lock its task takes, and the callers
/// served straight ([`try_serve`], [`try_write`]).
pub(crate) type SharedCore = Arc<std::sync::Mutex<GroupCore>>;

/// Wraps a group's state for [`run`].
pub(crate) fn shared(core: GroupCore) -> SharedCore {
    Arc::new(std::sync::Mutex::new(core))
}

/// Takes the group's lock (a panic that poisoned it left the machine as
/// every command does: applied whole or not at all).
#[cfg(test)]
fn locked(core: &SharedCore) -> std::sync::MutexGuard<'_, GroupCore> {
    core.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Applies a write of an in-memory group on the caller's task, when the
/// group's lock is free: the outcome the group's task would have given,
/// without the hop to it and back. `Err` hands the request back when the
/// lock is taken (the caller queues it instead, so no task ever blocks on
/// a busy group).
pub(crate) fn try_write(
    core: &SharedCore,
    request: Box<WriteRequest>,
    now_ms: u64,
    unpins: &tokio::sync::Notify,
) -> Result<WriteOutcome, Box<WriteRequest>> {
    let Some(mut core) = try_locked(core) else {
        return Err(request);
    };
    let outcome = core.write(*request, now_ms);
    signal_unpins(&core, unpins);
    Ok(outcome)
}

/// Serves `op` on the caller's task when the group's lock is free and
/// the group serves requests (a replicated one once its log is
/// attached), as the group's task would serve it: its answer
/// is on the op's reply channel when this returns (or a parked reader is
/// registered), without the hop to the group's task and back. `Err`
/// hands the op back when the lock is taken or the task has stopped (the
/// caller queues it instead), and for a query: its closure may run long,
/// and the group's task would wait for the lock all that time.
pub(crate) fn try_serve(
    core: &SharedCore,
    op: Op,
    unpins: &tokio::sync::Notify,
) -> Result<(), Box<Op>> {
    if matches!(op, Op::Query(_)) {
        return Err(Box::new(op));
    }
    let Some(mut core) = try_locked(core) else {
        return Err(Box::new(op));
    };
    if !core.ready() {
        return Err(Box::new(op));
    }
    core.serve(op);
    signal_unpins(&core, unpins);
    Ok(())
}

/// The group's lock, when it is free and the group's task still runs.
fn try_locked(core: &SharedCore) -> Option<std::sync::MutexGuard<'_, GroupCore>> {
    try_lock_any(core).filter(|core| !core.stopped)
}

/// The group's lock, when it is free (a panic that poisoned it left the
/// machine as every command does: applied whole or not at all).
fn try_lock_any(core: &SharedCore) -> Option<std::sync::MutexGuard<'_, GroupCore>> {
    match core.try_lock() {
        Ok(core) => Some(core),
        Err(std::sync::TryLockError::WouldBlock) => None,
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
    }
}

/// Removed forks leave unpins for their sources, which may live in other
/// groups: tells the engine, which delivers them.
fn signal_unpins(core: &GroupCore, unpins: &tokio::sync::Notify) {
    if core.machine.has_pending_fork_unpins() {
        unpins.notify_one();
    }
}

async fn run_core(
    core: SharedCore,
    mut rx: mpsc::Receiver<Op>,
    mut log_rx: Option<mpsc::UnboundedReceiver<LogInput>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    unpins: Arc<tokio::sync::Notify>,
) {
    loop {
        let ready = lock_yielding(&core).await.ready();
        tokio::select! {
            biased;
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            input = async {
                match log_rx.as_mut() {
                    Some(r) => r.recv().await,
                    None => std::future::pending().await,
                }
            } => match input {
                Some(input) => {
                    let mut core = lock_yielding(&core).await;
                    core.serve_log(input);
                    signal_unpins(&core, &unpins);
                }
                None => log_rx = None,
            },
            op = rx.recv(), if ready => match op {
                Some(op) => {
                    let mut core = lock_yielding(&core).await;
                    core.serve(op);
                    signal_unpins(&core, &unpins);
                }
                None => break,
            },
        }
    }
    lock_yielding(&core).await.shutdown();
}

/// Takes the group's lock for its task without parking the runtime's
/// thread: a caller on another task may hold it ([`try_write`] and
/// [`try_serve`] apply on the connection's task; a 16 MiB append holds it
/// for tens of milliseconds), and a worker blocked on it would run no
/// other task meanwhile. The task yields until the lock is free; no
/// holder keeps it across an await, so the wait is that one request.
async fn lock_yielding(core: &SharedCore) -> std::sync::MutexGuard<'_, GroupCore> {
    loop {
        if let Some(guard) = try_lock_any(core) {
            return guard;
        }
        tokio::task::yield_now().await;
    }
}

/// The stream a command changes, if it names exactly one.
fn touched_stream(command: &StreamCommand) -> Option<BucketStreamId> {
    use StreamCommand as C;
    match command {
        C::CreateStream { stream_id, .. }
        | C::CreateExternal { stream_id, .. }
        | C::Append { stream_id, .. }
        | C::AppendExternal { stream_id, .. }
        | C::AppendBatch { stream_id, .. }
        | C::Close { stream_id, .. }
        | C::DeleteStream { stream_id }
        | C::TouchStreamAccess { stream_id, .. }
        | C::AdvanceRetention { stream_id, .. } => Some(stream_id.clone()),
        _ => None,
    }
}

fn not_found(id: &BucketStreamId) -> StreamResponse {
    StreamResponse::error(
        strand::StreamErrorCode::StreamNotFound,
        format!("stream '{id}' not found"),
    )
}

/// Whether two content types name the same media type: the part before
/// the first `;`, trimmed, compared ignoring ASCII case.
pub fn same_media_type(a: &str, b: &str) -> bool {
    media_type(a).eq_ignore_ascii_case(media_type(b))
}

/// A content type's media type: the part before the first `;`, trimmed.
pub fn media_type(content_type: &str) -> &str {
    content_type
        .split(';')
        .next()
        .unwrap_or(content_type)
        .trim()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn media_types_compare_without_case_or_parameters() {
        assert!(same_media_type("TEXT/PLAIN", "text/plain"));
        assert!(same_media_type(
            "application/json; charset=utf-8",
            "application/json"
        ));
        assert!(!same_media_type("text/plain", "text/html"));
        assert_eq!(media_type(" a/b ;x=y"), "a/b");
    }

    fn append(id: &BucketStreamId, body: &'static [u8]) -> Box<WriteRequest> {
        Box::new(WriteRequest {
            stream_id: id.clone(),
            content_type: Some("text/plain".into()),
            media_type_match: true,
            payload: bytes::Bytes::from_static(body),
            close: false,
            stream_seq: None,
            producer: None,
            record_match: None,
        })
    }

    #[test]
    fn a_write_applies_on_the_callers_task_only_while_the_lock_is_free() {
        let core = shared(GroupCore::new(MachineOptions::corrected()));
        let unpins = tokio::sync::Notify::new();
        let id = BucketStreamId::new("acme", "log");
        let created = locked(&core).apply_entry(GroupEntry::Create {
            command: StreamCommand::CreateStream {
                stream_id: id.clone(),
                content_type: "text/plain".into(),
                initial_payload: bytes::Bytes::new(),
                close_after: false,
                stream_seq: None,
                producer: None,
                stream_ttl_seconds: None,
                stream_expires_at_ms: None,
                attrs: None,
                now_ms: 1_000,
            },
            media_type_match: true,
        });
        assert!(matches!(
            created,
            EntryOutcome::Response(StreamResponse::Created { .. })
        ));
        // Held (by the group's task, say): the request comes back untouched
        // and nothing is applied.
        let guard = locked(&core);
        let back = try_write(&core, append(&id, b"abc"), 1_000, &unpins).unwrap_err();
        assert_eq!(&back.payload[..], b"abc");
        drop(guard);
        assert_eq!(locked(&core).machine.head(&id).unwrap().tail_offset, 0);
        // Free: applied as the group's task applies it.
        let outcome = try_write(&core, back, 1_000, &unpins).unwrap();
        assert!(
            matches!(
                outcome.response,
                StreamResponse::Appended { next_offset: 3, .. }
            ),
            "{outcome:?}"
        );
        assert_eq!(locked(&core).machine.head(&id).unwrap().tail_offset, 3);
    }

    /// While a caller holds the group's lock, the group's task waits for
    /// it without taking the runtime's only worker thread: another task
    /// still runs, and the task serves its request once the lock is free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_groups_task_waits_for_a_held_lock_without_blocking_its_thread() {
        let core = shared(GroupCore::new(MachineOptions::corrected()));
        let (tx, rx) = mpsc::channel(8);
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let unpins = Arc::new(tokio::sync::Notify::new());
        // Held before the task starts: its first step is to take it.
        let guard = locked(&core);
        let task = tokio::spawn(run(Arc::clone(&core), rx, shutdown, unpins));
        let (reply, mut answer) = oneshot::channel();
        assert!(
            tx.try_send(Op::Head {
                stream_id: BucketStreamId::new("acme", "log"),
                now_ms: 1_000,
                reply,
            })
            .is_ok()
        );
        let (ran_tx, ran_rx) = std::sync::mpsc::channel();
        tokio::spawn(async move {
            let _ = ran_tx.send(());
        });
        // Blocking this (non-worker) thread is fine: it holds the lock.
        let ran = ran_rx.recv_timeout(std::time::Duration::from_secs(10));
        assert!(
            answer.try_recv().is_err(),
            "answered while the lock was held"
        );
        drop(guard);
        assert!(
            ran.is_ok(),
            "no other task ran while the group's task waited"
        );
        assert_eq!(answer.await.unwrap(), Ok(None));
        drop(tx);
        task.await.unwrap();
    }

    #[test]
    fn a_request_is_served_on_the_callers_task_only_while_the_lock_is_free() {
        let core = shared(GroupCore::new(MachineOptions::corrected()));
        let unpins = tokio::sync::Notify::new();
        let id = BucketStreamId::new("acme", "log");
        let head = |id: &BucketStreamId| {
            let (reply, rx) = oneshot::channel();
            let op = Op::Head {
                stream_id: id.clone(),
                now_ms: 1_000,
                reply,
            };
            (op, rx)
        };
        // Held: handed back, nothing answered.
        let guard = locked(&core);
        let (op, mut rx) = head(&id);
        let Err(back) = try_serve(&core, op, &unpins) else {
            panic!("served while the lock was held");
        };
        assert!(matches!(*back, Op::Head { .. }));
        assert!(rx.try_recv().is_err(), "not answered while held");
        drop(guard);
        // Free: answered before `try_serve` returns.
        assert!(try_serve(&core, *back, &unpins).is_ok());
        assert_eq!(rx.try_recv().unwrap(), Ok(None));
        // A query always goes to the group's task.
        let query = Op::Query(Box::new(|_| {}));
        assert!(matches!(
            try_serve(&core, query, &unpins).map_err(|op| *op),
            Err(Op::Query(_))
        ));
        // So does everything once the task stopped.
        locked(&core).shutdown();
        let (op, mut rx) = head(&id);
        assert!(try_serve(&core, op, &unpins).is_err());
        assert!(rx.try_recv().is_err());
    }
}
