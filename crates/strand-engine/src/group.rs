//! One group's owner task: the only code that touches the group's
//! `StreamStateMachine`. Requests arrive through a bounded queue and are
//! served one at a time, so no lock is shared between groups.
//!
//! Every state change goes through [`GroupCore::commit`], the seam where a
//! replicated engine proposes the command to the group's log instead of
//! applying it directly; reads and waits stay local.

use strand::{BucketStreamId, MachineOptions, StreamCommand, StreamResponse, StreamStateMachine};
use tokio::sync::{mpsc, oneshot};

use crate::ops::{
    HeadOutcome, ReadFrom, ReadOutcome, TransactionOutcome, WriteOutcome, WriteRequest,
};
use crate::waiters::{AppendNotice, Waiters, Wake};

/// A query run on the group's machine inside its task.
pub(crate) type Query = Box<dyn FnOnce(&StreamStateMachine) + Send>;

/// One request to a group.
pub(crate) enum Op {
    /// Apply a command as it is.
    Apply {
        command: StreamCommand,
        reply: oneshot::Sender<StreamResponse>,
    },
    /// Create a stream, creating its bucket in this group first.
    Create {
        command: StreamCommand,
        media_type_match: bool,
        reply: oneshot::Sender<StreamResponse>,
    },
    /// An append, append-and-close or close.
    Write {
        request: Box<WriteRequest>,
        now_ms: u64,
        reply: oneshot::Sender<WriteOutcome>,
    },
    /// Delete a stream that has not expired.
    Delete {
        stream_id: BucketStreamId,
        now_ms: u64,
        reply: oneshot::Sender<StreamResponse>,
    },
    /// A stream's metadata; expiry applied, no renewal.
    Head {
        stream_id: BucketStreamId,
        now_ms: u64,
        reply: oneshot::Sender<HeadOutcome>,
    },
    /// A read from the hot buffer, renewing the TTL when due; `through`
    /// is a fork reading through this stream (no expiry, no renewal).
    Read {
        stream_id: BucketStreamId,
        from: ReadFrom,
        max_len: usize,
        now_ms: u64,
        through: bool,
        reply: oneshot::Sender<ReadReply>,
    },
    /// Park until the stream's tail passes `offset`, it closes or it goes.
    Wait {
        stream_id: BucketStreamId,
        offset: u64,
        reply: oneshot::Sender<Wake>,
    },
    /// Appends to several streams of one affinity group, all or nothing.
    Transaction {
        commands: Vec<StreamCommand>,
        reply: oneshot::Sender<TransactionOutcome>,
    },
    /// A read-only query of the machine.
    Query(Query),
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
    Cold { offset: u64, error: StreamResponse },
    /// `offset` lies below the stream's fork offset `cap`: read `source`.
    Inherited {
        source: BucketStreamId,
        cap: u64,
        offset: u64,
        content_type: String,
    },
}

/// A group's state inside its task.
pub(crate) struct GroupCore {
    machine: StreamStateMachine,
    waiters: Waiters,
}

impl GroupCore {
    pub(crate) fn new(options: MachineOptions) -> Self {
        Self {
            machine: StreamStateMachine::with_options(options),
            waiters: Waiters::default(),
        }
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
                    let notice = AppendNotice {
                        offset: *offset,
                        next_offset: *next_offset,
                        payload,
                        closed: *closed,
                    };
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

    pub(crate) fn serve(&mut self, op: Op) {
        match op {
            Op::Apply { command, reply } => {
                let _ = reply.send(self.commit(command));
            }
            Op::Create {
                command,
                media_type_match,
                reply,
            } => {
                let _ = reply.send(self.create(command, media_type_match));
            }
            Op::Write {
                request,
                now_ms,
                reply,
            } => {
                let _ = reply.send(self.write(*request, now_ms));
            }
            Op::Delete {
                stream_id,
                now_ms,
                reply,
            } => {
                let response = if self.access(&stream_id, now_ms, false) {
                    self.commit(StreamCommand::DeleteStream { stream_id })
                } else {
                    not_found(&stream_id)
                };
                let _ = reply.send(response);
            }
            Op::Head {
                stream_id,
                now_ms,
                reply,
            } => {
                let head = if self.access(&stream_id, now_ms, false) {
                    self.machine.head(&stream_id).cloned()
                } else {
                    None
                };
                let _ = reply.send(head);
            }
            Op::Read {
                stream_id,
                from,
                max_len,
                now_ms,
                through,
                reply,
            } => {
                let answer = if through {
                    self.read_through(&stream_id, from, max_len)
                } else {
                    self.read(&stream_id, from, max_len, now_ms)
                };
                let _ = reply.send(answer);
            }
            Op::Wait {
                stream_id,
                offset,
                reply,
            } => match self.machine.head(&stream_id) {
                Some(m) if m.tail_offset <= offset && m.status == strand::StreamStatus::Open => {
                    self.waiters.park(&stream_id, offset, reply);
                }
                _ => {
                    let _ = reply.send(Wake::Changed);
                }
            },
            Op::Transaction { commands, reply } => {
                let touched: Vec<BucketStreamId> =
                    commands.iter().filter_map(touched_stream).collect();
                let outcome = self.machine.append_transaction(commands);
                if outcome.is_ok() {
                    for id in &touched {
                        self.waiters.wake(id);
                    }
                }
                let _ = reply.send(outcome);
            }
            Op::Query(query) => query(&self.machine),
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
            content_type = Some(meta.content_type.clone());
        }
        let producer_id = producer.as_ref().map(|p| p.producer_id.clone());
        let command = if close && payload.is_empty() {
            StreamCommand::Close {
                stream_id: stream_id.clone(),
                stream_seq,
                producer,
                now_ms,
            }
        } else {
            StreamCommand::Append {
                stream_id: stream_id.clone(),
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
        let producer_position = producer_id
            .as_deref()
            .and_then(|p| self.machine.producer_position(&stream_id, p));
        WriteOutcome {
            response,
            producer_position,
        }
    }

    fn read(
        &mut self,
        id: &BucketStreamId,
        from: ReadFrom,
        max_len: usize,
        now_ms: u64,
    ) -> ReadReply {
        if !self.access(id, now_ms, true) {
            return ReadReply::Data(Err(not_found(id)));
        }
        let offset = match from {
            ReadFrom::Start => self.machine.read_start_offset(id),
            ReadFrom::Tail => self.machine.head(id).map_or(0, |m| m.tail_offset),
            ReadFrom::Offset(offset) => offset,
        };
        if let Some((source, cap)) = self.machine.fork_origin(id)
            && offset < cap
            && !self.machine.is_soft_deleted(id)
        {
            let start = self.machine.read_start_offset(id);
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
                content_type: self.content_type(id),
            };
        }
        cold_or_data(
            offset,
            self.machine.read_hot_at(id, offset, max_len, now_ms),
        )
    }

    fn content_type(&self, id: &BucketStreamId) -> String {
        self.machine
            .head(id)
            .map(|m| m.content_type.clone())
            .unwrap_or_default()
    }

    /// A fork's read through this stream: no expiry, no renewal.
    fn read_through(&self, id: &BucketStreamId, from: ReadFrom, max_len: usize) -> ReadReply {
        let offset = match from {
            ReadFrom::Offset(offset) => offset,
            ReadFrom::Start => self.machine.read_start_offset(id),
            ReadFrom::Tail => self.machine.head(id).map_or(0, |m| m.tail_offset),
        };
        if let Some((source, cap)) = self.machine.fork_origin(id)
            && offset < cap
        {
            return ReadReply::Inherited {
                source,
                cap,
                offset,
                content_type: self.content_type(id),
            };
        }
        cold_or_data(offset, self.machine.read_hot_through(id, offset, max_len))
    }

    /// Ends every parked reader (shutdown).
    pub(crate) fn shutdown(&mut self) {
        self.waiters.wake_all(&Wake::Shutdown);
    }
}

/// A hot read's answer, or the cold tier's turn when the range is not hot.
fn cold_or_data(offset: u64, outcome: ReadOutcome) -> ReadReply {
    match outcome {
        Err(error) if error.error_code() == Some(strand::StreamErrorCode::InvalidColdFlush) => {
            ReadReply::Cold { offset, error }
        }
        other => ReadReply::Data(other),
    }
}

/// The owner task's loop: serve requests until every sender is gone or
/// shutdown is signalled, then end the parked readers.
pub(crate) async fn run(
    mut rx: mpsc::Receiver<Op>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    options: MachineOptions,
    unpins: std::sync::Arc<tokio::sync::Notify>,
) {
    let mut core = GroupCore::new(options);
    loop {
        tokio::select! {
            biased;
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            op = rx.recv() => match op {
                Some(op) => {
                    core.serve(op);
                    // Removed forks leave unpins for their sources, which
                    // may live in other groups: the engine delivers them.
                    if core.machine.has_pending_fork_unpins() {
                        unpins.notify_one();
                    }
                }
                None => break,
            },
        }
    }
    core.shutdown();
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
}
