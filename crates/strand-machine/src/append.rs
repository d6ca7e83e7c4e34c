//! Inline appends (`Append`, `append_borrowed`, `Close`) and external
//! appends (`AppendExternal`) (spec 04 §3–§5).

use bytes::Bytes;
use strand_model::{
    AppendStreamInput, BucketStreamId, ExternalPayloadRef, ObjectPayloadRef, ProducerAppendRecord,
    ProducerRequest, StreamStatus,
};
use strand_records::{
    PendingRecordAppend, RecordWriteError, appended_record_count, check_record_precondition,
    is_json_record_content_type, prepare_record_append, producer_record_bounds,
    push_message_records,
};

use crate::ends::inline_record_ends;
use crate::hot::to_u64;
use crate::machine::StreamStateMachine;
use crate::producers::{Duplicate, Evaluation};
use crate::registry::SlotKey;
use crate::response::{StreamErrorCode, StreamErrorContext, StreamResponse};
use crate::scope::{check_external_ref, check_producer, not_found};
use crate::slot::{StreamSlot, integrity_domain};
use crate::ttl::renew;

/// An inline payload: the command's `Bytes` (kept without copying) or a
/// borrowed slice (copied once when accepted).
pub(crate) enum Payload<'a> {
    Owned(Bytes),
    Borrowed(&'a [u8]),
}

impl Payload<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Self::Owned(b) => b,
            Self::Borrowed(s) => s,
        }
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Self::Owned(b) => b,
            Self::Borrowed(s) => Bytes::copy_from_slice(s),
        }
    }
}

/// One inline append request.
pub(crate) struct InlineAppend<'a> {
    pub(crate) stream_id: BucketStreamId,
    pub(crate) content_type: Option<&'a str>,
    pub(crate) payload: Payload<'a>,
    pub(crate) close_after: bool,
    pub(crate) stream_seq: Option<String>,
    pub(crate) producer: Option<ProducerRequest>,
    pub(crate) now_ms: u64,
    pub(crate) record_match: Option<u64>,
}

/// One external append request.
pub(crate) struct ExternalAppend {
    pub(crate) stream_id: BucketStreamId,
    pub(crate) content_type: Option<String>,
    pub(crate) payload: ExternalPayloadRef,
    pub(crate) record_ends: Vec<u64>,
    pub(crate) close_after: bool,
    pub(crate) stream_seq: Option<String>,
    pub(crate) producer: Option<ProducerRequest>,
    pub(crate) now_ms: u64,
    pub(crate) record_match: Option<u64>,
}

/// Maps a record rejection to its response (spec 02 §3.9).
#[cold]
pub(crate) fn record_error(e: RecordWriteError, tail: u64) -> StreamResponse {
    let code = if e.is_precondition_failure() {
        StreamErrorCode::RecordPreconditionFailed
    } else {
        StreamErrorCode::InvalidRecordBoundaries
    };
    let next = e.reports_tail().then_some(tail);
    let context = e
        .current_record()
        .map(|current_record| vec![StreamErrorContext::RecordTailMismatch { current_record }])
        .unwrap_or_default();
    StreamResponse::error_with(code, next, context, e.to_string())
}

/// `StreamClosed` with the tail and its context.
#[cold]
pub(crate) fn stream_closed(id: &BucketStreamId, tail: u64) -> StreamResponse {
    StreamResponse::error_with(
        StreamErrorCode::StreamClosed,
        Some(tail),
        vec![StreamErrorContext::StreamClosed],
        format!("stream '{id}' is closed"),
    )
}

/// `ContentTypeMismatch` with the tail.
#[cold]
pub(crate) fn content_type_mismatch(expected: &str, got: &str, tail: u64) -> StreamResponse {
    StreamResponse::error_at(
        StreamErrorCode::ContentTypeMismatch,
        tail,
        format!("content type '{got}' does not match stream content type '{expected}'"),
    )
}

/// `MissingContentType` / `ContentTypeMismatch` for a write with a body.
pub(crate) fn check_content_type(
    slot: &StreamSlot,
    content_type: Option<&str>,
    missing: &str,
) -> Result<(), StreamResponse> {
    let Some(ct) = content_type else {
        return Err(StreamResponse::error(
            StreamErrorCode::MissingContentType,
            missing,
        ));
    };
    if ct != slot.metadata.content_type {
        return Err(content_type_mismatch(
            &slot.metadata.content_type,
            ct,
            slot.metadata.tail_offset,
        ));
    }
    Ok(())
}

/// Maps an admission-check failure to `QuotaExceeded`.
#[cold]
pub(crate) fn quota_error(e: strand_usage::QuotaExceeded) -> StreamResponse {
    StreamResponse::error(StreamErrorCode::QuotaExceeded, e.to_string())
}

impl StreamStateMachine {
    /// Corrected profile: refuses a write of `len` bytes at `tail` whose
    /// stream offsets or bucket `retained_bytes` gauge would pass
    /// `u64::MAX` (the reference saturates both, and its gauges then drift
    /// from the live streams). `QuotaExceeded`; always passes in the
    /// reference profile.
    pub(crate) fn check_capacity(
        &self,
        bucket_id: &str,
        tail: u64,
        len: u64,
    ) -> Result<(), StreamResponse> {
        if !self.corrected() || len == 0 {
            return Ok(());
        }
        let gauge = self.usage.usage(bucket_id).map_or(0, |u| u.retained_bytes);
        if tail.checked_add(len).is_none() || gauge.checked_add(len).is_none() {
            return Err(StreamResponse::error(
                StreamErrorCode::QuotaExceeded,
                format!(
                    "a write of {len} bytes would overflow the offsets or the retained bytes of bucket '{bucket_id}'"
                ),
            ));
        }
        Ok(())
    }
}

/// The first mutation steps shared by inline and external appends: tail,
/// stream sequence, TTL renewal, close. Returns whether the stream is now
/// closed.
fn advance_tail(
    slot: &mut StreamSlot,
    next_offset: u64,
    stream_seq: Option<String>,
    close_after: bool,
    now_ms: u64,
    corrected: bool,
) -> bool {
    slot.metadata.tail_offset = next_offset;
    if stream_seq.is_some() {
        slot.metadata.last_stream_seq = stream_seq;
    }
    renew(&mut slot.metadata, now_ms, corrected);
    if close_after {
        slot.metadata.status = StreamStatus::Closed;
    }
    slot.metadata.status == StreamStatus::Closed
}

/// Records a producer's single-item write (inline, external or close).
fn record_single(
    slot: &mut StreamSlot,
    producer: Option<&ProducerRequest>,
    span: (u64, u64),
    closed: bool,
    range: Option<strand_model::StreamRecordRange>,
    receipt_limit: Option<usize>,
) {
    if let Some(p) = producer {
        let (record_start, record_next) = producer_record_bounds(range);
        let item = ProducerAppendRecord {
            start_offset: span.0,
            next_offset: span.1,
            closed,
            record_start,
            record_next,
        };
        slot.data
            .make_mut()
            .producers
            .record(p, &item, std::slice::from_ref(&item), receipt_limit);
    }
}

/// The stream-sequence check (spec 04 §2.10).
pub(crate) fn check_stream_seq(slot: &StreamSlot, seq: Option<&str>) -> Result<(), StreamResponse> {
    if let (Some(incoming), Some(last)) = (seq, slot.metadata.last_stream_seq.as_deref())
        && incoming <= last
    {
        return Err(StreamResponse::error_at(
            StreamErrorCode::StreamSeqConflict,
            slot.metadata.tail_offset,
            format!("stream sequence '{incoming}' is not greater than last sequence '{last}'"),
        ));
    }
    Ok(())
}

/// The answer to a deduplicated retry by `producer`.
fn duplicate_appended(dup: &Duplicate, producer: Option<ProducerRequest>) -> StreamResponse {
    StreamResponse::Appended {
        offset: dup.offset,
        next_offset: dup.next_offset,
        closed: dup.closed,
        deduplicated: true,
        producer: producer.map(|p| dup.echo(p)),
    }
}

impl StreamStateMachine {
    /// Scope, producer validation, existence and lazy expiry: the common
    /// prefix of the inline and external paths.
    fn append_prefix(
        &mut self,
        id: &BucketStreamId,
        producer: Option<&ProducerRequest>,
        now_ms: u64,
    ) -> Result<(), StreamResponse> {
        self.check_scope(id)?;
        check_producer(producer)?;
        if !self.registry.contains(id) {
            return Err(not_found(id));
        }
        if self.expire_if_due(id, now_ms) {
            return Err(not_found(id));
        }
        Ok(())
    }

    /// Appends inline bytes (public `append_borrowed`; `apply(Append)`).
    pub fn append_borrowed(&mut self, input: AppendStreamInput<'_>) -> StreamResponse {
        let response = self.append_inline(InlineAppend {
            stream_id: input.stream_id,
            content_type: input.content_type,
            payload: Payload::Borrowed(input.payload),
            close_after: input.close_after,
            stream_seq: input.stream_seq,
            producer: input.producer,
            now_ms: input.now_ms,
            record_match: input.record_match,
        });
        self.debug_check_invariants();
        response
    }

    pub(crate) fn append_inline(&mut self, req: InlineAppend<'_>) -> StreamResponse {
        match self.try_append_inline(req) {
            Ok(r) | Err(r) => r,
        }
    }

    fn try_append_inline(
        &mut self,
        req: InlineAppend<'_>,
    ) -> Result<StreamResponse, StreamResponse> {
        let id = &req.stream_id;
        self.check_scope(id)?;
        check_producer(req.producer.as_ref())?;
        // One hash of the id for the whole append: every later access to
        // the slot goes through its key.
        let Some(key) = self.registry.key(id) else {
            return Err(not_found(id));
        };
        if self.expire_at_if_due(key, id, req.now_ms) {
            return Err(not_found(id));
        }
        let slot = self.registry.slot(key).ok_or_else(|| not_found(id))?;
        let payload = req.payload.as_slice();
        let len = to_u64(payload.len());
        let tail = slot.metadata.tail_offset;
        if let Evaluation::Duplicate(dup) =
            slot.producers()
                .evaluate(req.producer.as_ref(), self.corrected(), false)?
        {
            if payload.is_empty() {
                return Ok(StreamResponse::Closed {
                    next_offset: dup.next_offset,
                    deduplicated: true,
                    producer: req.producer.map(|p| dup.echo(p)),
                });
            }
            return Ok(duplicate_appended(&dup, req.producer));
        }
        check_record_precondition(slot.record_index.as_deref(), req.record_match)
            .map_err(|e| record_error(e, tail))?;
        let json_stream = is_json_record_content_type(&slot.metadata.content_type);
        // Compared once: the record ends and the content-type check both
        // need it.
        let same_type = req.content_type == Some(slot.metadata.content_type.as_str());
        let ends = inline_record_ends(req.content_type, same_type, json_stream, payload)
            .map_err(|e| record_error(e, tail))?;
        let ends = ends.as_slice();
        let pending =
            prepare_record_append(slot.record_index.as_deref(), json_stream, tail, len, ends)
                .map_err(|e| record_error(e, tail))?;
        self.usage
            .check_append(&id.bucket_id, len)
            .map_err(quota_error)?;
        self.check_capacity(&id.bucket_id, tail, len)?;
        if slot.metadata.status == StreamStatus::Closed {
            if req.close_after && len == 0 {
                return Ok(StreamResponse::Closed {
                    next_offset: tail,
                    deduplicated: false,
                    producer: None,
                });
            }
            return Err(stream_closed(id, tail));
        }
        if len == 0 && !req.close_after {
            return Err(StreamResponse::error(
                StreamErrorCode::EmptyAppend,
                "payload must be non-empty unless closing",
            ));
        }
        // The request's own content type passes the check.
        if len > 0 && !same_type {
            check_content_type(
                slot,
                req.content_type,
                "append with a body must include content type",
            )?;
        }
        check_stream_seq(slot, req.stream_seq.as_deref())?;
        let close_after = req.close_after;
        let producer = req.producer;
        let bytes = req.payload.into_bytes();
        Ok(self.commit_inline(
            key,
            id,
            bytes,
            ends,
            pending,
            close_after,
            req.stream_seq,
            producer,
            req.now_ms,
        ))
    }

    /// The mutation steps of an inline append to the stream under `key`
    /// (found by the checks, nothing changed since), whose id is `id`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn commit_inline(
        &mut self,
        key: SlotKey,
        id: &BucketStreamId,
        bytes: Bytes,
        ends: &[u64],
        pending: Option<PendingRecordAppend>,
        close_after: bool,
        stream_seq: Option<String>,
        producer: Option<ProducerRequest>,
        now_ms: u64,
    ) -> StreamResponse {
        let len = to_u64(bytes.len());
        let (corrected, receipt_limit) = (self.corrected(), self.receipt_limit());
        let Some(slot) = self.registry.slot_mut(key) else {
            return not_found(id);
        };
        let offset = slot.metadata.tail_offset;
        let next_offset = offset.saturating_add(len);
        let closed = advance_tail(
            slot,
            next_offset,
            stream_seq,
            close_after,
            now_ms,
            corrected,
        );
        let range = pending.as_ref().map(PendingRecordAppend::range);
        record_single(
            slot,
            producer.as_ref(),
            (offset, next_offset),
            closed,
            range,
            receipt_limit,
        );
        if len == 0 {
            self.refresh_ttl_entry_at(key);
            return StreamResponse::Closed {
                next_offset,
                deduplicated: false,
                producer,
            };
        }
        if let (Some(p), Some(index)) = (pending, slot.record_index.as_deref_mut()) {
            index.commit_append(p);
        }
        let domain = integrity_domain(&slot.metadata.stream_id);
        let data = slot.data.make_mut();
        data.integrity
            .append_inline(domain, offset, next_offset, &bytes);
        data.hot.push(offset, bytes);
        push_message_records(&mut data.message_records, offset, next_offset, ends);
        let records = appended_record_count(ends, len);
        // `refresh_ttl_entry_at(key)` without finding the slot again.
        self.ttl.push(&slot.metadata, key);
        self.add_hot_bytes(len);
        self.usage.record_append(&id.bucket_id, len, records);
        self.compact_ttl_index();
        StreamResponse::Appended {
            offset,
            next_offset,
            closed: close_after,
            deduplicated: false,
            producer,
        }
    }

    /// `AppendExternal` (spec 04 §5).
    pub(crate) fn append_external(&mut self, req: ExternalAppend) -> StreamResponse {
        match self.try_append_external(req) {
            Ok(r) | Err(r) => r,
        }
    }

    fn try_append_external(
        &mut self,
        req: ExternalAppend,
    ) -> Result<StreamResponse, StreamResponse> {
        check_external_ref(&req.payload)?;
        let id = &req.stream_id;
        self.append_prefix(id, req.producer.as_ref(), req.now_ms)?;
        let slot = self.registry.get(id).ok_or_else(|| not_found(id))?;
        let tail = slot.metadata.tail_offset;
        let len = req.payload.payload_len;
        if let Evaluation::Duplicate(dup) =
            slot.producers()
                .evaluate(req.producer.as_ref(), self.corrected(), false)?
        {
            return Ok(duplicate_appended(&dup, req.producer));
        }
        check_record_precondition(slot.record_index.as_deref(), req.record_match)
            .map_err(|e| record_error(e, tail))?;
        let json_stream = is_json_record_content_type(&slot.metadata.content_type);
        let pending = prepare_record_append(
            slot.record_index.as_deref(),
            json_stream,
            tail,
            len,
            &req.record_ends,
        )
        .map_err(|e| record_error(e, tail))?;
        if slot.metadata.status == StreamStatus::Closed {
            return Err(stream_closed(id, tail));
        }
        check_content_type(
            slot,
            req.content_type.as_deref(),
            "append with a body must include content type",
        )?;
        check_stream_seq(slot, req.stream_seq.as_deref())?;
        let offset = tail;
        let next_offset = offset.saturating_add(len);
        self.usage
            .check_append(&id.bucket_id, len)
            .map_err(quota_error)?;
        self.check_capacity(&id.bucket_id, offset, len)?;

        let (corrected, receipt_limit) = (self.corrected(), self.receipt_limit());
        let slot = self.registry.get_mut(id).ok_or_else(|| not_found(id))?;
        let closed = advance_tail(
            slot,
            next_offset,
            req.stream_seq,
            req.close_after,
            req.now_ms,
            corrected,
        );
        let range = pending.as_ref().map(PendingRecordAppend::range);
        record_single(
            slot,
            req.producer.as_ref(),
            (offset, next_offset),
            closed,
            range,
            receipt_limit,
        );
        if let (Some(p), Some(index)) = (pending, slot.record_index.as_deref_mut()) {
            index.commit_append(p);
        }
        let domain = integrity_domain(&slot.metadata.stream_id);
        let data = slot.data.make_mut();
        data.cold.raw_frontier = data.cold.raw_frontier.max(next_offset);
        if corrected && next_offset > offset {
            // Corrected profile: keep the external object, so snapshots and
            // reads see it (the reference keeps it only in the setsum).
            data.cold.push_external(ObjectPayloadRef {
                start_offset: offset,
                end_offset: next_offset,
                s3_path: req.payload.s3_path.clone(),
                object_size: req.payload.object_size,
                object_offset: 0,
            });
        }
        data.integrity.append_external(
            domain,
            offset,
            next_offset,
            &req.payload.s3_path,
            req.payload.object_size,
        );
        push_message_records(
            &mut data.message_records,
            offset,
            next_offset,
            &req.record_ends,
        );
        let bytes = next_offset - offset;
        let records = appended_record_count(&req.record_ends, bytes);
        self.usage.record_append(&id.bucket_id, bytes, records);
        self.refresh_ttl_entry(id);
        Ok(StreamResponse::Appended {
            offset,
            next_offset,
            closed: req.close_after,
            deduplicated: false,
            producer: req.producer,
        })
    }
}
