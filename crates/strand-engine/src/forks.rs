//! Forks across groups (`docs/forks.md` §6): a fork usually lives in
//! another group than its source, so the engine runs the steps the machines
//! cannot — pin the source, create the fork, read a fork's inherited range
//! through its source chain, and deliver the unpins that removed forks
//! leave in their group's outbox.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strand::{
    BucketStreamId, ForkProbe, ForkUnpinSnapshot, HotRead, StreamAttrs, StreamCommand,
    StreamErrorCode, StreamResponse,
};
use tokio::sync::{Notify, watch};

use crate::engine::{Engine, WeakEngine};
use crate::error::EngineError;
use crate::ops::ReadOutcome;
use crate::remote::{ProbeFork, SoftDeleted, StepAnswer};

/// The longest fork chain a read follows (a fork of a fork of …).
pub const MAX_FORK_DEPTH: usize = 64;

/// Bytes a sub-offset prefix may take from the source.
const MAX_PREFIX_BYTES: usize = 64 * 1024 * 1024;

/// A request to create a fork.
#[derive(Debug, Clone)]
pub struct ForkRequest {
    /// The fork to create.
    pub stream_id: BucketStreamId,
    /// The stream it forks (same bucket).
    pub source_id: BucketStreamId,
    /// The fork offset; `None` is the source's tail.
    pub fork_offset: Option<u64>,
    /// Take the first `sub_offset` bytes (binary) or JSON values of the
    /// source after the fork offset as the fork's first message (0: none).
    pub sub_offset: u64,
    /// A sliding TTL; with neither this nor `stream_expires_at_ms` the
    /// fork inherits the source's TTL or expiry.
    pub stream_ttl_seconds: Option<u64>,
    /// An absolute expiry in milliseconds.
    pub stream_expires_at_ms: Option<u64>,
    /// Create the fork closed.
    pub close: bool,
    /// Initial bytes after the prefix, already in stored form.
    pub initial_payload: Bytes,
    /// Stream attributes.
    pub attrs: Option<StreamAttrs>,
}

fn invalid_fork(message: impl Into<String>) -> StreamResponse {
    StreamResponse::error(StreamErrorCode::InvalidFork, message)
}

impl Engine {
    /// Whether a stream exists only for its forks (deleted or expired
    /// while forks read through it).
    pub async fn is_soft_deleted(&self, stream_id: BucketStreamId) -> Result<bool, EngineError> {
        let id = stream_id.clone();
        self.ask(self.group_for(&stream_id), SoftDeleted { stream: id })
            .await
    }

    /// Creates a fork (`docs/forks.md` §6.1): pins the source in its
    /// group, resolves the sub-offset prefix through the source chain, and
    /// creates the fork in its own group; a failed create gives the pin
    /// back. Answers like `CreateStream` (`Created`, `AlreadyExists` or an
    /// error), or with the pin's error (`StreamNotFound`,
    /// `StreamSoftDeleted`, `OffsetOutOfRange`, `StreamGone`,
    /// `InvalidFork`).
    pub async fn create_fork(&self, request: ForkRequest) -> Result<StreamResponse, EngineError> {
        let fork = request.stream_id.clone();
        let source = request.source_id.clone();
        if fork == source || fork.bucket_id != source.bucket_id {
            return Ok(invalid_fork(format!(
                "stream '{fork}' cannot fork '{source}': a fork lives in its source's bucket"
            )));
        }
        let pinned = self
            .apply(
                &source,
                StreamCommand::PinForkSource {
                    stream_id: source.clone(),
                    fork_stream_id: fork.clone(),
                    fork_offset: request.fork_offset,
                    now_ms: self.now_ms(),
                },
            )
            .await?;
        let StreamResponse::ForkSourcePinned {
            fork_offset,
            pin,
            inherited_start,
            content_type,
            stream_ttl_seconds,
            stream_expires_at_ms,
        } = pinned
        else {
            return Ok(pinned);
        };
        let created = self
            .finish_fork(
                &request,
                (fork_offset, pin),
                inherited_start,
                content_type,
                (stream_ttl_seconds, stream_expires_at_ms),
            )
            .await;
        // Only a fork that was created holds the new pin: an idempotent
        // repeat (the fork holds its first pin) and a failure give it back.
        if !matches!(created, Ok(StreamResponse::Created { .. })) {
            let _ = self
                .apply(
                    &source,
                    StreamCommand::UnpinForkSource {
                        stream_id: source.clone(),
                        fork_stream_id: fork.clone(),
                        pin,
                    },
                )
                .await;
        }
        created
    }

    async fn finish_fork(
        &self,
        request: &ForkRequest,
        (fork_offset, pin): (u64, u64),
        inherited_start: u64,
        content_type: String,
        source_expiry: (Option<u64>, Option<u64>),
    ) -> Result<StreamResponse, EngineError> {
        let source = &request.source_id;
        let json = strand::is_json_record_content_type(&content_type);
        if json && fork_offset > inherited_start {
            let before = match self
                .read_through_range(source, fork_offset - 1, fork_offset)
                .await?
            {
                Ok(bytes) => bytes,
                Err(e) => return Ok(e),
            };
            if before.as_ref() != b"\n" {
                return Ok(invalid_fork(format!(
                    "fork offset {fork_offset} is not on a JSON value boundary"
                )));
            }
        }
        let (message_end, record) = match self.probe_chain(source, fork_offset).await? {
            Ok(found) => found,
            Err(e) => return Ok(e),
        };
        let prefix = if request.sub_offset == 0 {
            Bytes::new()
        } else if json {
            match self
                .json_prefix(source, fork_offset, request.sub_offset)
                .await?
            {
                Ok(prefix) => prefix,
                Err(e) => return Ok(e),
            }
        } else {
            let Some(end) = message_end else {
                return Ok(invalid_fork(format!(
                    "no message starts at fork offset {fork_offset}"
                )));
            };
            let available = end - fork_offset;
            if request.sub_offset > available {
                return Ok(invalid_fork(format!(
                    "sub-offset {} overshoots the message's {available} bytes",
                    request.sub_offset
                )));
            }
            match self
                .read_through_range(source, fork_offset, fork_offset + request.sub_offset)
                .await?
            {
                Ok(prefix) => prefix,
                Err(e) => return Ok(e),
            }
        };
        let (ttl, expires) =
            if request.stream_ttl_seconds.is_some() || request.stream_expires_at_ms.is_some() {
                (request.stream_ttl_seconds, request.stream_expires_at_ms)
            } else {
                source_expiry
            };
        let command = StreamCommand::CreateFork {
            stream_id: request.stream_id.clone(),
            source_stream_id: source.clone(),
            fork_offset,
            fork_offset_given: request.fork_offset.is_some(),
            pin,
            sub_offset: request.sub_offset,
            inherited_start,
            first_record: if json { record } else { None },
            content_type,
            prefix,
            initial_payload: request.initial_payload.clone(),
            close_after: request.close,
            stream_ttl_seconds: ttl,
            stream_expires_at_ms: expires,
            attrs: request.attrs.clone(),
            now_ms: self.now_ms(),
        };
        self.create_stream(command, false).await
    }

    /// Where the message at `offset` ends and which JSON record starts
    /// there, following the fork chain down from `stream`.
    async fn probe_chain(
        &self,
        stream: &BucketStreamId,
        offset: u64,
    ) -> Result<Result<(Option<u64>, Option<u64>), StreamResponse>, EngineError> {
        let mut owner = stream.clone();
        let mut cap = u64::MAX;
        for _ in 0..=MAX_FORK_DEPTH {
            let id = owner.clone();
            let group = self.group_for(&owner);
            match self.ask(group, ProbeFork { stream: id, offset }).await? {
                ForkProbe::Missing => {
                    return Ok(Err(StreamResponse::error(
                        StreamErrorCode::StreamNotFound,
                        format!("stream '{owner}' not found"),
                    )));
                }
                ForkProbe::Own {
                    message_end,
                    record,
                    ..
                } => return Ok(Ok((message_end.map(|end| end.min(cap)), record))),
                ForkProbe::Inherited { source, cap: c } => {
                    owner = source;
                    cap = cap.min(c);
                }
            }
        }
        Ok(Err(invalid_fork("the fork chain is too deep")))
    }

    /// The first `count` JSON values (stored lines) at `offset`.
    async fn json_prefix(
        &self,
        source: &BucketStreamId,
        offset: u64,
        count: u64,
    ) -> Result<Result<Bytes, StreamResponse>, EngineError> {
        let mut out = BytesMut::new();
        let mut lines = 0u64;
        let mut at = offset;
        while lines < count {
            let page = match self.read_stitched(source, at, 64 * 1024, None).await? {
                Ok(page) => page,
                Err(e) => return Ok(Err(e)),
            };
            if page.is_empty() {
                break;
            }
            'slices: for slice in &page.slices {
                for (i, b) in slice.iter().enumerate() {
                    if *b == b'\n' {
                        lines += 1;
                        if lines == count {
                            out.extend_from_slice(&slice[..=i]);
                            break 'slices;
                        }
                    }
                }
                out.extend_from_slice(slice);
            }
            if out.len() > MAX_PREFIX_BYTES {
                return Ok(Err(invalid_fork("the sub-offset prefix is too large")));
            }
            at = page.next_offset;
            if page.up_to_date {
                break;
            }
        }
        if lines < count {
            return Ok(Err(invalid_fork(format!(
                "sub-offset {count} overshoots the {lines} values after the fork offset"
            ))));
        }
        Ok(Ok(out.freeze()))
    }

    /// The bytes `[from, to)` of `stream`, read through forks.
    async fn read_through_range(
        &self,
        stream: &BucketStreamId,
        from: u64,
        to: u64,
    ) -> Result<Result<Bytes, StreamResponse>, EngineError> {
        let want = usize::try_from(to - from).unwrap_or(usize::MAX);
        if want > MAX_PREFIX_BYTES {
            return Ok(Err(invalid_fork("the sub-offset prefix is too large")));
        }
        let mut out = BytesMut::with_capacity(want);
        let mut at = from;
        while at < to {
            let span = usize::try_from(to - at).unwrap_or(usize::MAX);
            let page = match self.read_stitched(stream, at, span, None).await? {
                Ok(page) => page,
                Err(e) => return Ok(Err(e)),
            };
            if page.is_empty() {
                break;
            }
            for slice in &page.slices {
                out.extend_from_slice(slice);
            }
            at = page.next_offset;
        }
        Ok(Ok(out.freeze()))
    }

    /// Reads `top` from `offset` through its fork chain: each offset is
    /// read in the stream that owns it, capped at the fork offsets above
    /// it, until the page is full or `top`'s own range is reached.
    /// `content_type` names the page's type (`top`'s) when known.
    pub(crate) async fn read_stitched(
        &self,
        top: &BucketStreamId,
        offset: u64,
        max_len: usize,
        content_type: Option<String>,
    ) -> Result<ReadOutcome, EngineError> {
        let home = self.group_for(top);
        let mut slices = Vec::new();
        let mut at = offset;
        let mut remaining = max_len;
        let mut page_type = content_type;
        for _ in 0..2 * MAX_FORK_DEPTH + 2 {
            let mut owner = top.clone();
            let mut cap = u64::MAX;
            let mut hops = 0usize;
            let read: HotRead = loop {
                let span = usize::try_from(cap.saturating_sub(at))
                    .unwrap_or(usize::MAX)
                    .min(remaining);
                match self.read_step(&owner, at, span, home).await? {
                    StepAnswer::Data(page) => break page,
                    StepAnswer::Refused(e) => return Ok(Err(e)),
                    StepAnswer::Inherited {
                        source,
                        cap: c,
                        content_type,
                    } => {
                        if owner == *top && page_type.is_none() {
                            page_type = Some(content_type);
                        }
                        owner = source;
                        cap = cap.min(c);
                        hops += 1;
                        if hops > MAX_FORK_DEPTH {
                            return Ok(Err(invalid_fork("the fork chain is too deep")));
                        }
                    }
                }
            };
            let got = usize::try_from(read.len()).unwrap_or(usize::MAX);
            slices.extend(read.slices);
            if owner == *top {
                let content_type = page_type.unwrap_or(read.content_type);
                return Ok(Ok(HotRead {
                    offset,
                    next_offset: read.next_offset,
                    content_type,
                    slices,
                    up_to_date: read.up_to_date,
                    closed: read.closed,
                }));
            }
            at = read.next_offset;
            remaining = remaining.saturating_sub(got);
            if remaining == 0 || got == 0 {
                return Ok(Ok(HotRead {
                    offset,
                    next_offset: at,
                    content_type: page_type.unwrap_or(read.content_type),
                    slices,
                    up_to_date: false,
                    closed: false,
                }));
            }
        }
        Ok(Err(invalid_fork("the fork chain is too deep")))
    }
}

/// How long the unpin janitor waits before retrying deliveries that failed.
const RETRY: Duration = Duration::from_secs(1);

/// The engine's unpin janitor: whenever a group reports outbox entries
/// (and once a second while deliveries fail, or while a group this node
/// does not lead holds some), delivers each to its source's group, then
/// acknowledges the delivered ones. It acts only on the groups this node
/// leads ([`Engine::leads_group`]): in a cluster the leader delivers and
/// the followers apply what it proposed.
pub(crate) async fn deliver_unpins(
    engine: WeakEngine,
    notify: Arc<Notify>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut retry = false;
    loop {
        tokio::select! {
            _ = notify.notified() => {}
            _ = tokio::time::sleep(RETRY), if retry => {}
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
        }
        let Some(engine) = engine.upgrade() else {
            return;
        };
        retry = !engine.deliver_unpins_once().await;
    }
}

impl Engine {
    /// One pass of the janitor; false when some delivery must be retried.
    async fn deliver_unpins_once(&self) -> bool {
        // A group this node does not lead is its leader's to deliver
        // (followers apply the replicated unpins); look again later in
        // case this node becomes its leader.
        let mut waiting = false;
        for _round in 0..MAX_FORK_DEPTH {
            let mut any = false;
            for group in 0..self.group_count() {
                if !self.leads_group(group) {
                    // A group this node does not hold is not its to watch.
                    if !self.holds_group(group) {
                        continue;
                    }
                    let pending = self
                        .query_group(group, |m| !m.pending_fork_unpins(1).is_empty())
                        .await;
                    waiting |= pending.unwrap_or(false);
                    continue;
                }
                let Ok(batch) = self
                    .query_group(group, |m| m.pending_fork_unpins(256))
                    .await
                else {
                    return false;
                };
                if batch.is_empty() {
                    continue;
                }
                any = true;
                let mut delivered: Vec<ForkUnpinSnapshot> = Vec::with_capacity(batch.len());
                for unpin in batch {
                    let command = StreamCommand::UnpinForkSource {
                        stream_id: unpin.source_stream_id.clone(),
                        fork_stream_id: unpin.fork_stream_id.clone(),
                        pin: unpin.pin,
                    };
                    match self.apply(&unpin.source_stream_id, command).await {
                        Ok(_) => delivered.push(unpin),
                        Err(_) => return false,
                    }
                }
                let ack = StreamCommand::AckForkUnpins { unpins: delivered };
                if self.apply_in_group(group, ack).await.is_err() {
                    return false;
                }
            }
            if !any {
                return !waiting;
            }
        }
        !waiting
    }
}
