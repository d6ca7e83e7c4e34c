//! Batch appends: `append_batch_borrowed` and `apply(AppendBatch)` (spec 04
//! §6).

use bytes::Bytes;
use strand_model::{
    BucketStreamId, ProducerAppendRecord, ProducerRequest, StreamBatchAppend,
    StreamBatchAppendItem, StreamStatus,
};
use strand_records::{
    PendingRecordAppend, batch_item_record_ranges, batch_record_ends, is_json_record_content_type,
    prepare_record_append, producer_record_bounds, push_message_records,
};

use crate::append::{check_content_type, quota_error, record_error, stream_closed};
use crate::machine::StreamStateMachine;
use crate::producers::Evaluation;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::scope::{check_producer, not_found};
use crate::slot::integrity_domain;
use crate::ttl::renew;

/// Batch payloads: the command's `Bytes` (kept) or borrowed slices (copied
/// once when accepted).
pub(crate) enum BatchPayloads<'a> {
    Owned(Vec<Bytes>),
    Borrowed(&'a [&'a [u8]]),
}

impl BatchPayloads<'_> {
    fn len(&self) -> usize {
        match self {
            Self::Owned(v) => v.len(),
            Self::Borrowed(v) => v.len(),
        }
    }

    fn slices(&self) -> Vec<&[u8]> {
        match self {
            Self::Owned(v) => v.iter().map(|b| b.as_ref()).collect(),
            Self::Borrowed(v) => v.to_vec(),
        }
    }

    fn into_bytes(self) -> Vec<Bytes> {
        match self {
            Self::Owned(v) => v,
            Self::Borrowed(v) => v.iter().map(|s| Bytes::copy_from_slice(s)).collect(),
        }
    }
}

fn empty_batch() -> StreamResponse {
    StreamResponse::error(
        StreamErrorCode::EmptyAppend,
        "batch must contain at least one payload",
    )
}

impl StreamStateMachine {
    /// Appends several payloads as one write (no TTL sweep).
    pub fn append_batch_borrowed(
        &mut self,
        stream_id: BucketStreamId,
        content_type: Option<&str>,
        payloads: &[&[u8]],
        producer: Option<ProducerRequest>,
        now_ms: u64,
    ) -> Result<StreamBatchAppend, StreamResponse> {
        let result = self.append_batch(
            stream_id,
            content_type,
            BatchPayloads::Borrowed(payloads),
            producer,
            now_ms,
        );
        self.debug_check_invariants();
        result
    }

    /// `apply(AppendBatch)`: the batch result mapped to one response.
    pub(crate) fn apply_append_batch(
        &mut self,
        stream_id: BucketStreamId,
        content_type: Option<&str>,
        payloads: Vec<Bytes>,
        producer: Option<ProducerRequest>,
        now_ms: u64,
    ) -> StreamResponse {
        match self.append_batch(
            stream_id,
            content_type,
            BatchPayloads::Owned(payloads),
            producer,
            now_ms,
        ) {
            Ok(batch) => match batch.items.last() {
                Some(last) => StreamResponse::Appended {
                    offset: last.offset,
                    next_offset: last.next_offset,
                    closed: last.closed,
                    deduplicated: last.deduplicated,
                    producer: None,
                },
                None => empty_batch(),
            },
            Err(e) => e,
        }
    }

    pub(crate) fn append_batch(
        &mut self,
        stream_id: BucketStreamId,
        content_type: Option<&str>,
        payloads: BatchPayloads<'_>,
        producer: Option<ProducerRequest>,
        now_ms: u64,
    ) -> Result<StreamBatchAppend, StreamResponse> {
        let id = &stream_id;
        if payloads.len() == 0 {
            return Err(empty_batch());
        }
        self.check_scope(id)?;
        check_producer(producer.as_ref())?;
        self.expire_if_due(id, now_ms);
        if let Some(slot) = self.registry.get(id)
            && let Evaluation::Duplicate(dup) =
                slot.producers()
                    .evaluate(producer.as_ref(), self.corrected(), true)?
        {
            return Ok(StreamBatchAppend {
                items: dup
                    .items
                    .iter()
                    .map(|item| StreamBatchAppendItem {
                        offset: item.start_offset,
                        next_offset: item.next_offset,
                        closed: item.closed,
                        deduplicated: true,
                    })
                    .collect(),
                deduplicated: true,
            });
        }
        let slot = self.registry.get(id).ok_or_else(|| not_found(id))?;
        let tail = slot.metadata.tail_offset;
        if slot.metadata.status == StreamStatus::Closed {
            return Err(stream_closed(id, tail));
        }
        check_content_type(slot, content_type, "batch must include content type")?;
        let ct = slot.metadata.content_type.as_str();
        let slices = payloads.slices();
        if slices.iter().any(|p| p.is_empty()) {
            return Err(StreamResponse::error(
                StreamErrorCode::EmptyAppend,
                "batch payloads must be non-empty",
            ));
        }
        let ends = batch_record_ends(ct, &slices).map_err(|e| record_error(e, tail))?;
        let pending = prepare_record_append(
            slot.record_index.as_deref(),
            is_json_record_content_type(ct),
            tail,
            ends.total_len,
            &ends.combined_ends,
        )
        .map_err(|e| record_error(e, tail))?;
        let item_ranges =
            batch_item_record_ranges(pending.as_ref().map(PendingRecordAppend::range), &ends);
        self.usage
            .check_append(&id.bucket_id, ends.total_len)
            .map_err(quota_error)?;
        self.check_capacity(&id.bucket_id, tail, ends.total_len)?;
        drop(slices);

        let (corrected, receipt_limit) = (self.corrected(), self.receipt_limit());
        let slot = self.registry.get_mut(id).ok_or_else(|| not_found(id))?;
        let mut records = Vec::with_capacity(ends.item_lens.len());
        let mut at = tail;
        for (len, range) in ends.item_lens.iter().zip(&item_ranges) {
            let start = at;
            at = at.saturating_add(*len);
            let (record_start, record_next) = producer_record_bounds(*range);
            records.push(ProducerAppendRecord {
                start_offset: start,
                next_offset: at,
                closed: false,
                record_start,
                record_next,
            });
        }
        slot.metadata.tail_offset = at;
        renew(&mut slot.metadata, now_ms, corrected);
        if let (Some(p), Some(last)) = (&producer, records.last()) {
            slot.data
                .make_mut()
                .producers
                .record(p, last, &records, receipt_limit);
        }
        if let (Some(p), Some(index)) = (pending, slot.record_index.as_deref_mut()) {
            index.commit_append(p);
        }
        let domain = integrity_domain(&slot.metadata.stream_id);
        let data = slot.data.make_mut();
        for ((bytes, record), item_ends) in payloads
            .into_bytes()
            .into_iter()
            .zip(&records)
            .zip(&ends.item_ends)
        {
            data.integrity
                .append_inline(domain, record.start_offset, record.next_offset, &bytes);
            data.hot.push(record.start_offset, bytes);
            push_message_records(
                &mut data.message_records,
                record.start_offset,
                record.next_offset,
                item_ends,
            );
        }
        self.add_hot_bytes(ends.total_len);
        self.usage
            .record_append(&id.bucket_id, ends.total_len, ends.appended_record_count());
        self.refresh_ttl_entry(id);
        Ok(StreamBatchAppend {
            items: records
                .iter()
                .map(|r| StreamBatchAppendItem {
                    offset: r.start_offset,
                    next_offset: r.next_offset,
                    closed: false,
                    deduplicated: false,
                })
                .collect(),
            deduplicated: false,
        })
    }
}
