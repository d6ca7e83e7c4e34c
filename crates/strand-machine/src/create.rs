//! Creating streams: `CreateStream` and `CreateExternal` (spec 03 §4).

use bytes::Bytes;
use strand_integrity::StreamIntegrity;
use strand_model::{
    BucketStreamId, ExternalPayloadRef, ObjectPayloadRef, ProducerAppendRecord, ProducerRequest,
    StreamAttrs, StreamMetadata, StreamStatus, normalize_stream_attrs, validate_stream_attrs_size,
};
use strand_records::{
    appended_record_count, build_record_index, message_records_for_append, producer_record_bounds,
    record_range_of,
};

use crate::append::quota_error;
use crate::cold::ColdState;
use crate::hot::{HotBuffer, to_u64};
use crate::machine::StreamStateMachine;
use crate::producers::Producers;
use crate::response::{StreamErrorCode, StreamErrorContext, StreamResponse};
use crate::scope::{check_external_ref, check_producer, check_retention_pair};
use crate::slot::{SlotData, SlotRare, StreamSlot, integrity_domain};

/// The initial payload of a create.
pub(crate) enum InitialPayload {
    /// `CreateStream`: inline bytes kept as the first hot chunk.
    Inline(Bytes),
    /// `CreateExternal`: bytes living in an object.
    External(ExternalPayloadRef),
}

impl InitialPayload {
    fn len(&self) -> u64 {
        match self {
            Self::Inline(bytes) => to_u64(bytes.len()),
            Self::External(r) => r.payload_len,
        }
    }
}

/// The fields shared by both create commands.
pub(crate) struct CreateRequest {
    pub(crate) stream_id: BucketStreamId,
    pub(crate) content_type: String,
    pub(crate) initial: InitialPayload,
    pub(crate) record_ends: Vec<u64>,
    pub(crate) close_after: bool,
    pub(crate) stream_seq: Option<String>,
    pub(crate) producer: Option<ProducerRequest>,
    pub(crate) stream_ttl_seconds: Option<u64>,
    pub(crate) stream_expires_at_ms: Option<u64>,
    pub(crate) attrs: Option<StreamAttrs>,
    pub(crate) now_ms: u64,
}

impl StreamStateMachine {
    /// Runs a create's checks (in the order of its variant) and inserts the
    /// stream. For `CreateStream` the caller already derived `record_ends`.
    pub(crate) fn create_stream(&mut self, req: CreateRequest) -> StreamResponse {
        match self.try_create_stream(req) {
            Ok(response) | Err(response) => response,
        }
    }

    fn try_create_stream(&mut self, req: CreateRequest) -> Result<StreamResponse, StreamResponse> {
        let attrs = normalize_stream_attrs(req.attrs);
        if let InitialPayload::External(r) = &req.initial {
            check_external_ref(r)?;
        }
        self.check_scope(&req.stream_id)?;
        validate_stream_attrs_size(attrs.as_ref())
            .map_err(|reason| StreamResponse::error(StreamErrorCode::InvalidStreamAttrs, reason))?;
        check_retention_pair(req.stream_ttl_seconds, req.stream_expires_at_ms)?;
        check_producer(req.producer.as_ref())?;
        let len = req.initial.len();
        let record_index =
            build_record_index(&req.content_type, len, &req.record_ends).map_err(|e| {
                StreamResponse::error(StreamErrorCode::InvalidRecordBoundaries, e.to_string())
            })?;
        if let Some(p) = &req.producer
            && p.producer_seq != 0
        {
            return Err(StreamResponse::error_with(
                StreamErrorCode::ProducerSeqConflict,
                None,
                vec![StreamErrorContext::ProducerSeqConflict {
                    expected_seq: 0,
                    received_seq: p.producer_seq,
                }],
                format!(
                    "stream create expected producer sequence 0, received {}",
                    p.producer_seq
                ),
            ));
        }
        self.expire_if_due(&req.stream_id, req.now_ms);
        let status = if req.close_after {
            StreamStatus::Closed
        } else {
            StreamStatus::Open
        };
        if let Some(existing) = self.registry.get(&req.stream_id) {
            let m = &existing.metadata;
            let same = m.content_type == req.content_type
                && m.status == status
                && m.stream_ttl_seconds == req.stream_ttl_seconds
                && m.stream_expires_at_ms == req.stream_expires_at_ms
                && existing.attrs() == attrs.as_ref();
            if !same {
                return Err(StreamResponse::error(
                    StreamErrorCode::StreamAlreadyExistsConflict,
                    format!("stream '{}' exists with different metadata", req.stream_id),
                ));
            }
            return Ok(StreamResponse::AlreadyExists {
                next_offset: m.tail_offset,
                closed: m.status == StreamStatus::Closed,
                content_type: m.content_type.clone(),
                stream_ttl_seconds: m.stream_ttl_seconds,
                stream_expires_at_ms: m.stream_expires_at_ms,
            });
        }
        self.usage
            .check_create(&req.stream_id.bucket_id, len)
            .map_err(quota_error)?;
        self.check_capacity(&req.stream_id.bucket_id, 0, len)?;

        let metadata = StreamMetadata {
            stream_id: req.stream_id.clone(),
            content_type: req.content_type,
            status,
            tail_offset: len,
            last_stream_seq: req.stream_seq,
            stream_ttl_seconds: req.stream_ttl_seconds,
            stream_expires_at_ms: req.stream_expires_at_ms,
            created_at_ms: req.now_ms,
            last_ttl_touch_at_ms: req.now_ms,
        };
        let domain = integrity_domain(&req.stream_id);
        let mut integrity = StreamIntegrity::new();
        let mut hot = HotBuffer::default();
        let mut cold = ColdState::default();
        match req.initial {
            InitialPayload::Inline(bytes) => {
                if !bytes.is_empty() {
                    integrity.append_inline(domain, 0, len, &bytes);
                }
                hot.push(0, bytes);
            }
            InitialPayload::External(r) => {
                integrity.append_external(domain, 0, len, &r.s3_path, r.object_size);
                cold.raw_frontier = len;
                if self.corrected() && len > 0 {
                    // Corrected profile: keep the external object.
                    cold.push_external(ObjectPayloadRef {
                        start_offset: 0,
                        end_offset: len,
                        s3_path: r.s3_path.clone(),
                        object_size: r.object_size,
                        object_offset: 0,
                    });
                }
            }
        }
        let records = appended_record_count(&req.record_ends, len);
        let message_records = message_records_for_append(0, len, &req.record_ends);
        let mut producers = Producers::default();
        if let Some(p) = &req.producer {
            let range = record_range_of(record_index.as_ref()).ok().flatten();
            let (record_start, record_next) = producer_record_bounds(range);
            let item = ProducerAppendRecord {
                start_offset: 0,
                next_offset: len,
                closed: req.close_after,
                record_start,
                record_next,
            };
            producers.record(p, &item, std::slice::from_ref(&item), self.receipt_limit());
        }
        let hot_len = hot.len();
        let slot = StreamSlot::new(
            metadata,
            record_index,
            SlotData {
                hot,
                cold,
                message_records,
                integrity,
                retained_offset: 0,
                producers,
            },
            SlotRare {
                attrs: attrs.map(Box::new),
                ..SlotRare::default()
            },
        );
        self.insert_slot(slot);
        self.add_hot_bytes(hot_len);
        self.usage
            .record_stream_created(&req.stream_id.bucket_id, len, records);
        Ok(StreamResponse::Created {
            stream_id: req.stream_id,
            next_offset: len,
            closed: req.close_after,
        })
    }

    /// Registry insert plus its TTL index entry.
    pub(crate) fn insert_slot(&mut self, slot: StreamSlot) {
        let id = slot.id().clone();
        let key = self.registry.insert(slot);
        if let Some(slot) = self.registry.get(&id) {
            self.ttl.push(&slot.metadata, key);
        }
    }
}
