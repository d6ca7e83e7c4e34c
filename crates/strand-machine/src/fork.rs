//! Forks (a strand extension, `docs/forks.md`): pins on sources, fork
//! creation, soft deletion and the outbox of unpins that other groups must
//! receive.
//!
//! A fork is an ordinary stream whose offsets start at its fork offset
//! (its retained offset) and whose bytes below it are read through its
//! source, which may live in another group. The source holds one pin per
//! fork: while it has pins it cannot drop those bytes (retention stops),
//! and deleting or expiring it only soft-deletes it. Removing a fork puts
//! an unpin in this group's outbox; the engine delivers it to the source's
//! group and acknowledges it here.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use strand_model::{
    BucketStreamId, StreamAttrs, StreamMetadata, StreamStatus, normalize_stream_attrs,
    validate_stream_attrs_size,
};
use strand_records::StreamRecordIndex;
use strand_snapshot::{ForkOriginSnapshot, ForkPinSnapshot, ForkUnpinSnapshot, StreamForkSnapshot};

use crate::append::{InlineAppend, Payload, quota_error};
use crate::cold::ColdState;
use crate::hot::to_u64;
use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::scope::{check_retention_pair, not_found};
use crate::slot::{SlotData, SlotRare, StreamSlot};

/// Where a fork branches off its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ForkOrigin {
    pub(crate) source: BucketStreamId,
    pub(crate) fork_offset: u64,
    pub(crate) pin: u64,
    pub(crate) sub_offset: u64,
    pub(crate) inherited_start: u64,
}

/// A stream's fork state; absent (`None` in the slot) for the streams that
/// have nothing to do with forks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ForkState {
    /// Set on a fork while it still reads through its source.
    pub(crate) origin: Option<ForkOrigin>,
    /// The forks reading through this stream, by fork id and pin id:
    /// their offsets.
    pub(crate) pins: BTreeMap<(BucketStreamId, u64), u64>,
    /// Deleted (or expired) while pinned.
    pub(crate) soft_deleted: bool,
}

impl ForkState {
    fn is_empty(&self) -> bool {
        self.origin.is_none() && self.pins.is_empty() && !self.soft_deleted
    }

    pub(crate) fn to_snapshot(&self) -> StreamForkSnapshot {
        StreamForkSnapshot {
            forked_from: self.origin.as_ref().map(|o| ForkOriginSnapshot {
                source_stream_id: o.source.clone(),
                fork_offset: o.fork_offset,
                pin: o.pin,
                sub_offset: o.sub_offset,
                inherited_start: o.inherited_start,
            }),
            fork_pins: self
                .pins
                .iter()
                .map(|((fork, pin), offset)| ForkPinSnapshot {
                    fork_stream_id: fork.clone(),
                    pin: *pin,
                    fork_offset: *offset,
                })
                .collect(),
            soft_deleted: self.soft_deleted,
        }
    }

    pub(crate) fn from_snapshot(s: StreamForkSnapshot) -> Option<Box<Self>> {
        let state = Self {
            origin: s.forked_from.map(|o| ForkOrigin {
                source: o.source_stream_id,
                fork_offset: o.fork_offset,
                pin: o.pin,
                sub_offset: o.sub_offset,
                inherited_start: o.inherited_start,
            }),
            pins: s
                .fork_pins
                .into_iter()
                .map(|p| ((p.fork_stream_id, p.pin), p.fork_offset))
                .collect(),
            soft_deleted: s.soft_deleted,
        };
        (!state.is_empty()).then(|| Box::new(state))
    }
}

impl StreamSlot {
    /// Whether the stream was deleted while forks read through it.
    pub(crate) fn soft_deleted(&self) -> bool {
        self.fork().is_some_and(|f| f.soft_deleted)
    }

    /// Whether forks read through the stream.
    pub(crate) fn pinned(&self) -> bool {
        self.fork().is_some_and(|f| !f.pins.is_empty())
    }

    /// The fork origin, while the stream still reads through its source.
    pub(crate) fn origin(&self) -> Option<&ForkOrigin> {
        self.fork().and_then(|f| f.origin.as_ref())
    }

    /// The first readable offset: a fork's inherited start, else the
    /// retained offset.
    pub(crate) fn logical_start(&self) -> u64 {
        match self.origin() {
            Some(o) => o.inherited_start,
            None => self.retained_offset(),
        }
    }

    /// Takes the fork origin when retention reached `retained`, past the
    /// fork offset (the inherited range is no longer readable).
    pub(crate) fn release_origin_below(&mut self, retained: u64) -> Option<ForkOrigin> {
        let fork = self.fork_state_mut()?;
        if fork.origin.as_ref()?.fork_offset >= retained {
            return None;
        }
        let origin = fork.origin.take();
        self.tidy_fork();
        origin
    }

    fn fork_mut(&mut self) -> &mut ForkState {
        self.fork_or_default()
    }

    /// Drops the fork state once nothing is left in it.
    fn tidy_fork(&mut self) {
        if self.fork().is_some_and(ForkState::is_empty) {
            self.clear_fork();
        }
    }
}

/// What a fork probe found at an offset (`StreamStateMachine::fork_probe`).
/// Serializable: a node asks it of a member holding the stream's group.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ForkProbe {
    /// The stream is missing (or expired and not pinned).
    Missing,
    /// The offset is in the stream's own range (or is its tail).
    Own {
        /// The end of the message that contains the offset (or starts at
        /// it); `None` at the tail or where boundaries are not kept.
        message_end: Option<u64>,
        /// The JSON record ordinal starting at the offset, for a stream
        /// with a record index.
        record: Option<u64>,
        /// The stream's tail.
        tail: u64,
    },
    /// The offset lies below the fork offset: ask the source.
    Inherited {
        /// The source stream.
        source: BucketStreamId,
        /// The fork offset, the end of what the stream inherits.
        cap: u64,
    },
}

impl StreamStateMachine {
    /// Whether the stream exists but was soft-deleted (deleted or expired
    /// while forks read through it).
    pub fn is_soft_deleted(&self, stream_id: &BucketStreamId) -> bool {
        self.registry
            .get(stream_id)
            .is_some_and(StreamSlot::soft_deleted)
    }

    /// The stream's fork origin while it reads through its source: source
    /// id and fork offset.
    pub fn fork_origin(&self, stream_id: &BucketStreamId) -> Option<(BucketStreamId, u64)> {
        let origin = self.registry.get(stream_id)?.origin()?;
        Some((origin.source.clone(), origin.fork_offset))
    }

    /// The first readable offset of a stream: a fork's inherited start,
    /// else its retained offset (0 when missing).
    pub fn read_start_offset(&self, stream_id: &BucketStreamId) -> u64 {
        self.registry
            .get(stream_id)
            .map_or(0, StreamSlot::logical_start)
    }

    /// What the stream holds at `offset`, for fork creation: message end
    /// and record ordinal in its own range, or where to ask below its fork
    /// offset. Expiry and soft deletion are ignored (forks read through
    /// such streams).
    pub fn fork_probe(&self, stream_id: &BucketStreamId, offset: u64) -> ForkProbe {
        let Some(slot) = self.registry.get(stream_id) else {
            return ForkProbe::Missing;
        };
        if let Some(o) = slot.origin()
            && offset < o.fork_offset
        {
            return ForkProbe::Inherited {
                source: o.source.clone(),
                cap: o.fork_offset,
            };
        }
        let tail = slot.metadata.tail_offset;
        let message_end = slot
            .message_records()
            .iter()
            .find(|r| r.start_offset <= offset && offset < r.end_offset)
            .map(|r| r.end_offset);
        let record = slot
            .record_index
            .as_deref()
            .and_then(|index| record_at(index, offset, tail));
        ForkProbe::Own {
            message_end,
            record,
            tail,
        }
    }

    /// Undelivered fork unpins, oldest key first, at most `max`.
    pub fn pending_fork_unpins(&self, max: usize) -> Vec<ForkUnpinSnapshot> {
        self.fork_unpins.iter().take(max).cloned().collect()
    }

    /// Whether the fork-unpin outbox holds entries.
    pub fn has_pending_fork_unpins(&self) -> bool {
        !self.fork_unpins.is_empty()
    }

    /// Removes a stream that is not pinned, or soft-deletes a pinned one.
    /// Returns false when it was not live (or already soft-deleted).
    pub(crate) fn retire_stream(&mut self, id: &BucketStreamId) -> bool {
        let Some(slot) = self.registry.get_mut(id) else {
            return false;
        };
        if slot.soft_deleted() {
            return false;
        }
        if slot.pinned() {
            slot.fork_mut().soft_deleted = true;
            self.soft_deleted_streams += 1;
            return true;
        }
        self.remove_stream_state(id)
    }

    /// Side effect of removing a slot that was a fork: its source must drop
    /// the pin.
    pub(crate) fn queue_unpin(&mut self, fork: &BucketStreamId, origin: &ForkOrigin) {
        self.fork_unpins.insert(ForkUnpinSnapshot {
            source_stream_id: origin.source.clone(),
            fork_stream_id: fork.clone(),
            pin: origin.pin,
        });
    }

    /// Drops the outbox entries of a purged bucket (its sources are purged
    /// in every group).
    pub(crate) fn drop_unpins_of_bucket(&mut self, bucket_id: &str) {
        self.fork_unpins
            .retain(|u| u.source_stream_id.bucket_id != bucket_id);
    }

    pub(crate) fn pin_fork_source(
        &mut self,
        id: &BucketStreamId,
        fork: &BucketStreamId,
        fork_offset: Option<u64>,
        now_ms: u64,
    ) -> StreamResponse {
        if let Err(e) = self.check_scope(id) {
            return e;
        }
        if fork == id || fork.bucket_id != id.bucket_id {
            return StreamResponse::error(
                StreamErrorCode::InvalidFork,
                format!("stream '{fork}' cannot fork '{id}': a fork lives in its source's bucket"),
            );
        }
        if self.expire_if_due(id, now_ms) && !self.is_soft_deleted(id) {
            return not_found(id);
        }
        let Some(slot) = self.registry.get_mut(id) else {
            return not_found(id);
        };
        if slot.soft_deleted() {
            return soft_deleted(id);
        }
        let tail = slot.metadata.tail_offset;
        let offset = fork_offset.unwrap_or(tail);
        if offset > tail {
            return StreamResponse::error_at(
                StreamErrorCode::OffsetOutOfRange,
                tail,
                format!("fork offset {offset} is beyond stream '{id}' tail {tail}"),
            );
        }
        let start = slot.logical_start();
        if offset < start {
            return StreamResponse::error_at(
                StreamErrorCode::StreamGone,
                start,
                format!("fork offset {offset} of stream '{id}' is below its first offset {start}"),
            );
        }
        let meta = &slot.metadata;
        let (content_type, ttl, expires) = (
            meta.content_type.clone(),
            meta.stream_ttl_seconds,
            meta.stream_expires_at_ms,
        );
        let pin = self.next_fork_pin;
        self.next_fork_pin = pin.saturating_add(1);
        slot.fork_mut().pins.insert((fork.clone(), pin), offset);
        StreamResponse::ForkSourcePinned {
            fork_offset: offset,
            pin,
            inherited_start: start,
            content_type,
            stream_ttl_seconds: ttl,
            stream_expires_at_ms: expires,
        }
    }

    pub(crate) fn unpin_fork_source(
        &mut self,
        id: &BucketStreamId,
        fork: &BucketStreamId,
        pin: u64,
    ) -> StreamResponse {
        let Some(slot) = self.registry.get_mut(id) else {
            return StreamResponse::ForkSourceUnpinned {
                unpinned: false,
                removed: false,
            };
        };
        let unpinned = slot
            .fork_state_mut()
            .is_some_and(|f| f.pins.remove(&(fork.clone(), pin)).is_some());
        let remove = slot.soft_deleted() && !slot.pinned();
        slot.tidy_fork();
        let removed = remove && self.remove_stream_state(id);
        StreamResponse::ForkSourceUnpinned { unpinned, removed }
    }

    pub(crate) fn ack_fork_unpins(&mut self, unpins: &[ForkUnpinSnapshot]) -> StreamResponse {
        for u in unpins {
            self.fork_unpins.remove(u);
        }
        StreamResponse::ForkUnpinsAcked {
            remaining: to_u64(self.fork_unpins.len()),
        }
    }

    pub(crate) fn create_fork(&mut self, req: CreateForkRequest) -> StreamResponse {
        match self.try_create_fork(req) {
            Ok(r) | Err(r) => r,
        }
    }

    fn try_create_fork(
        &mut self,
        req: CreateForkRequest,
    ) -> Result<StreamResponse, StreamResponse> {
        let id = req.stream_id.clone();
        self.check_scope(&id)?;
        if req.source == id || req.source.bucket_id != id.bucket_id {
            return Err(StreamResponse::error(
                StreamErrorCode::InvalidFork,
                format!(
                    "stream '{id}' cannot fork '{}': a fork lives in its source's bucket",
                    req.source
                ),
            ));
        }
        if req.inherited_start > req.fork_offset {
            return Err(StreamResponse::error(
                StreamErrorCode::InvalidFork,
                "the inherited start lies beyond the fork offset",
            ));
        }
        let attrs = normalize_stream_attrs(req.attrs);
        validate_stream_attrs_size(attrs.as_ref())
            .map_err(|reason| StreamResponse::error(StreamErrorCode::InvalidStreamAttrs, reason))?;
        check_retention_pair(req.stream_ttl_seconds, req.stream_expires_at_ms)?;
        self.expire_if_due(&id, req.now_ms);
        if let Some(existing) = self.registry.get(&id) {
            if existing.soft_deleted() {
                return Err(soft_deleted(&id));
            }
            let m = &existing.metadata;
            let same_origin = existing.origin().is_some_and(|o| {
                o.source == req.source
                    && (!req.fork_offset_given || o.fork_offset == req.fork_offset)
                    && o.sub_offset == req.sub_offset
            });
            let closed = m.status == StreamStatus::Closed;
            let same = same_origin
                && m.content_type == req.content_type
                && closed == req.close_after
                && m.stream_ttl_seconds == req.stream_ttl_seconds
                && m.stream_expires_at_ms == req.stream_expires_at_ms
                && existing.attrs() == attrs.as_ref();
            if !same {
                return Err(StreamResponse::error(
                    StreamErrorCode::StreamAlreadyExistsConflict,
                    format!("stream '{id}' exists with different metadata"),
                ));
            }
            return Ok(StreamResponse::AlreadyExists {
                next_offset: m.tail_offset,
                closed,
                content_type: m.content_type.clone(),
                stream_ttl_seconds: m.stream_ttl_seconds,
                stream_expires_at_ms: m.stream_expires_at_ms,
            });
        }
        let len = to_u64(req.prefix.len() + req.initial_payload.len());
        self.usage
            .check_create(&id.bucket_id, len)
            .map_err(quota_error)?;
        self.check_capacity(&id.bucket_id, req.fork_offset, len)?;

        let f = req.fork_offset;
        let record_index = if strand_records::is_json_record_content_type(&req.content_type) {
            let first = req.first_record.unwrap_or(0);
            let index = StreamRecordIndex::restore(first, Vec::new(), f, f).map_err(|e| {
                StreamResponse::error(StreamErrorCode::InvalidRecordBoundaries, e.to_string())
            })?;
            Some(index)
        } else {
            None
        };
        let metadata = StreamMetadata {
            stream_id: id.clone(),
            content_type: req.content_type.clone(),
            status: StreamStatus::Open,
            tail_offset: f,
            last_stream_seq: None,
            stream_ttl_seconds: req.stream_ttl_seconds,
            stream_expires_at_ms: req.stream_expires_at_ms,
            created_at_ms: req.now_ms,
            last_ttl_touch_at_ms: req.now_ms,
        };
        let mut cold = ColdState::default();
        // The effective frontier of a stream retained from `f` is `f`; the
        // raw one is set to match, so a restored fork is the same fork.
        cold.raw_frontier = f;
        let slot = StreamSlot::new(
            metadata,
            record_index,
            SlotData {
                cold,
                retained_offset: f,
                ..SlotData::default()
            },
            SlotRare {
                attrs: attrs.map(Box::new),
                visible_snapshot: None,
                fork: Some(Box::new(ForkState {
                    origin: Some(ForkOrigin {
                        source: req.source.clone(),
                        fork_offset: f,
                        pin: req.pin,
                        sub_offset: req.sub_offset,
                        inherited_start: req.inherited_start,
                    }),
                    pins: BTreeMap::new(),
                    soft_deleted: false,
                })),
            },
        );
        self.insert_slot(slot);
        self.usage.record_stream_created(&id.bucket_id, 0, 0);
        let content_type = req.content_type.clone();
        let steps = [
            (req.prefix, false),
            (req.initial_payload, false),
            (Bytes::new(), req.close_after),
        ];
        for (payload, close) in steps {
            if payload.is_empty() && !close {
                continue;
            }
            let r = self.append_inline(InlineAppend {
                stream_id: id.clone(),
                content_type: (!close).then_some(content_type.as_str()),
                payload: Payload::Owned(payload),
                close_after: close,
                stream_seq: None,
                producer: None,
                now_ms: req.now_ms,
                record_match: None,
            });
            if r.is_error() {
                self.remove_unqueued(&id);
                return Err(r);
            }
        }
        let (next_offset, closed) = self.registry.get(&id).map_or((f, false), |s| {
            (
                s.metadata.tail_offset,
                s.metadata.status == StreamStatus::Closed,
            )
        });
        Ok(StreamResponse::Created {
            stream_id: id,
            next_offset,
            closed,
        })
    }

    /// Removes a fork whose creation failed half-way, without queueing an
    /// unpin (the engine rolls its pin back itself).
    fn remove_unqueued(&mut self, id: &BucketStreamId) {
        if let Some(slot) = self.registry.get_mut(id) {
            slot.clear_fork();
        }
        self.remove_stream_state(id);
    }

    /// Whether no stream of the group is soft-deleted.
    pub(crate) fn fork_state_is_empty(&self) -> bool {
        self.soft_deleted_streams == 0
    }

    /// Whether `id` names a live, soft-deleted stream: commands that
    /// address it directly answer `StreamSoftDeleted`.
    pub(crate) fn soft_deleted_guard(&self, id: &BucketStreamId) -> Result<(), StreamResponse> {
        if self.is_soft_deleted(id) {
            Err(soft_deleted(id))
        } else {
            Ok(())
        }
    }
}

/// The fields of `CreateFork`.
pub(crate) struct CreateForkRequest {
    pub(crate) stream_id: BucketStreamId,
    pub(crate) source: BucketStreamId,
    pub(crate) fork_offset: u64,
    pub(crate) fork_offset_given: bool,
    pub(crate) pin: u64,
    pub(crate) sub_offset: u64,
    pub(crate) inherited_start: u64,
    pub(crate) first_record: Option<u64>,
    pub(crate) content_type: String,
    pub(crate) prefix: Bytes,
    pub(crate) initial_payload: Bytes,
    pub(crate) close_after: bool,
    pub(crate) stream_ttl_seconds: Option<u64>,
    pub(crate) stream_expires_at_ms: Option<u64>,
    pub(crate) attrs: Option<StreamAttrs>,
    pub(crate) now_ms: u64,
}

/// The ordinal of the record starting at `offset`, or the next ordinal at
/// the tail.
fn record_at(index: &StreamRecordIndex, offset: u64, tail: u64) -> Option<u64> {
    let range = index.range().ok()?;
    if offset == tail {
        return Some(range.next_record);
    }
    let position = index.record_offsets().binary_search(&offset).ok()?;
    range.first_record.checked_add(to_u64(position))
}

fn soft_deleted(id: &BucketStreamId) -> StreamResponse {
    StreamResponse::error(
        StreamErrorCode::StreamSoftDeleted,
        format!("stream '{id}' was deleted; forks still read through it"),
    )
}

/// The outbox type.
pub(crate) type UnpinOutbox = BTreeSet<ForkUnpinSnapshot>;
