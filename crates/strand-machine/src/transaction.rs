//! Multi-stream append transactions: all-or-nothing appends to streams
//! sharing one bucket and affinity key (spec 04 §7).

use std::collections::BTreeMap;

use strand_integrity::StreamIntegrity;
use strand_model::{BucketStreamId, StreamMetadata};
use strand_records::RecordIndexCheckpoint;
use strand_usage::BucketUsage;

use crate::append::{InlineAppend, Payload};
use crate::command::StreamCommand;
use crate::machine::StreamStateMachine;
use crate::producers::ProducerState;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::scope::not_found;
use crate::slot::SlotData;
use crate::ttl::expired;

/// What rolling back one stream needs.
struct StreamUndo {
    metadata: StreamMetadata,
    hot_chunks: usize,
    message_records: usize,
    index: Option<RecordIndexCheckpoint>,
    integrity: StreamIntegrity,
    producers: BTreeMap<String, Option<ProducerState>>,
}

fn invalid(message: &str) -> StreamResponse {
    StreamResponse::error(StreamErrorCode::InvalidStreamId, message)
}

impl StreamStateMachine {
    /// Applies appends to several streams of one bucket and affinity key;
    /// on the first error every change is rolled back. No TTL sweep.
    pub fn append_transaction(
        &mut self,
        commands: Vec<StreamCommand>,
    ) -> Result<Vec<StreamResponse>, StreamResponse> {
        let result = self.transaction(commands);
        self.debug_check_invariants();
        result
    }

    fn transaction(
        &mut self,
        commands: Vec<StreamCommand>,
    ) -> Result<Vec<StreamResponse>, StreamResponse> {
        let Some(StreamCommand::Append {
            stream_id: first, ..
        }) = commands.first()
        else {
            return Err(invalid(
                "transaction must contain at least one append command",
            ));
        };
        if first.affinity_key.is_none() {
            return Err(invalid("transaction streams must use path affinity"));
        }
        let (bucket, affinity) = (first.bucket_id.clone(), first.affinity_key.clone());

        let mut undo: BTreeMap<BucketStreamId, StreamUndo> = BTreeMap::new();
        let mut usage_undo: BTreeMap<String, Option<BucketUsage>> = BTreeMap::new();
        for command in &commands {
            let StreamCommand::Append {
                stream_id,
                producer,
                now_ms,
                ..
            } = command
            else {
                return Err(invalid("transaction contains a non-append command"));
            };
            if stream_id.bucket_id != bucket || stream_id.affinity_key != affinity {
                return Err(invalid(
                    "transaction streams must share one bucket and affinity key",
                ));
            }
            let slot = self
                .registry
                .get(stream_id)
                .ok_or_else(|| not_found(stream_id))?;
            if expired(&slot.metadata, *now_ms) {
                return Err(not_found(stream_id));
            }
            usage_undo
                .entry(stream_id.bucket_id.clone())
                .or_insert_with(|| self.usage.usage(&stream_id.bucket_id).copied());
            let entry = undo.entry(stream_id.clone()).or_insert_with(|| StreamUndo {
                metadata: slot.metadata.clone(),
                hot_chunks: slot.hot().chunk_count(),
                message_records: slot.message_records().len(),
                index: slot.record_index.as_deref().map(|i| i.checkpoint()),
                integrity: slot.integrity(),
                producers: BTreeMap::new(),
            });
            if let Some(p) = producer {
                entry
                    .producers
                    .entry(p.producer_id.clone())
                    .or_insert_with(|| slot.producers().get(&p.producer_id).cloned());
            }
        }
        let hot_bytes = self.hot_bytes;

        let mut responses = Vec::with_capacity(commands.len());
        for command in commands {
            let StreamCommand::Append {
                stream_id,
                content_type,
                payload,
                close_after,
                stream_seq,
                producer,
                now_ms,
                record_match,
            } = command
            else {
                continue;
            };
            let response = self.append_inline(InlineAppend {
                stream_id,
                content_type: content_type.as_deref(),
                payload: Payload::Owned(payload),
                close_after,
                stream_seq,
                producer,
                now_ms,
                record_match,
            });
            if response.is_error() {
                self.hot_bytes = hot_bytes;
                for (bucket_id, prior) in usage_undo {
                    self.usage.restore_usage_entry(&bucket_id, prior);
                }
                for (id, u) in undo {
                    let Some(slot) = self.registry.get_mut(&id) else {
                        continue;
                    };
                    slot.metadata = u.metadata;
                    if let (Some(index), Some(checkpoint)) =
                        (slot.record_index.as_deref_mut(), u.index)
                    {
                        index.rollback(checkpoint);
                    }
                    if let Some(data) = slot.data.get_mut() {
                        data.hot.truncate(u.hot_chunks);
                        data.message_records.truncate(u.message_records);
                        data.integrity = u.integrity;
                        for (producer_id, state) in u.producers {
                            data.producers.put(producer_id, state);
                        }
                    }
                    // A stream the transaction gave its first write to
                    // goes back to holding nothing.
                    slot.data.tidy(|d| *d == SlotData::default());
                }
                return Err(response);
            }
            responses.push(response);
        }
        Ok(responses)
    }
}
