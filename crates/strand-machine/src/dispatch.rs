//! `apply`: hands each command to its handler, then runs the TTL sweep for
//! the ten command kinds that have one (spec 01 §9.4).

use strand_records::canonical_json_record_ends;

use crate::append::{ExternalAppend, InlineAppend, Payload};
use crate::command::StreamCommand;
use crate::create::{CreateRequest, InitialPayload};
use crate::fork::CreateForkRequest;
use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamResponse};
use strand_model::BucketStreamId;

impl StreamStateMachine {
    /// Applies one replicated command and returns its response.
    pub fn apply(&mut self, command: StreamCommand) -> StreamResponse {
        if !self.fork_state_is_empty()
            && let Some(id) = addressed_stream(&command)
            && let Err(e) = self.soft_deleted_guard(id)
        {
            return e;
        }
        let (response, sweep_at) = self.dispatch(command);
        if let Some(now_ms) = sweep_at {
            self.sweep_expired_streams(now_ms);
        }
        self.debug_check_invariants();
        response
    }

    /// Runs the handler; returns the response and the sweep time, if the
    /// command kind sweeps.
    fn dispatch(&mut self, command: StreamCommand) -> (StreamResponse, Option<u64>) {
        match command {
            StreamCommand::CreateBucket { bucket_id } => (self.create_bucket(bucket_id), None),
            StreamCommand::DeleteBucket { bucket_id } => (self.delete_bucket(bucket_id), None),
            StreamCommand::PurgeBucket { bucket_id } => (self.purge_bucket(bucket_id), None),
            StreamCommand::SetBucketQuota {
                bucket_id,
                max_streams,
                max_retained_bytes,
            } => (
                self.set_bucket_quota(bucket_id, max_streams, max_retained_bytes),
                None,
            ),
            StreamCommand::CreateStream {
                stream_id,
                content_type,
                initial_payload,
                close_after,
                stream_seq,
                producer,
                stream_ttl_seconds,
                stream_expires_at_ms,
                attrs,
                now_ms,
            } => {
                let response = match canonical_json_record_ends(&content_type, &initial_payload) {
                    Err(_) => StreamResponse::error(
                        StreamErrorCode::InvalidRecordBoundaries,
                        "application/json payload must use canonical newline boundaries",
                    ),
                    Ok(record_ends) => self.create_stream(CreateRequest {
                        stream_id,
                        content_type,
                        initial: InitialPayload::Inline(initial_payload),
                        record_ends,
                        close_after,
                        stream_seq,
                        producer,
                        stream_ttl_seconds,
                        stream_expires_at_ms,
                        attrs,
                        now_ms,
                    }),
                };
                (response, Some(now_ms))
            }
            StreamCommand::CreateExternal {
                stream_id,
                content_type,
                initial_payload,
                record_ends,
                close_after,
                stream_seq,
                producer,
                stream_ttl_seconds,
                stream_expires_at_ms,
                attrs,
                now_ms,
            } => (
                self.create_stream(CreateRequest {
                    stream_id,
                    content_type,
                    initial: InitialPayload::External(initial_payload),
                    record_ends,
                    close_after,
                    stream_seq,
                    producer,
                    stream_ttl_seconds,
                    stream_expires_at_ms,
                    attrs,
                    now_ms,
                }),
                Some(now_ms),
            ),
            StreamCommand::Append {
                stream_id,
                content_type,
                payload,
                close_after,
                stream_seq,
                producer,
                now_ms,
                record_match,
            } => (
                self.append_inline(InlineAppend {
                    stream_id,
                    content_type: content_type.as_deref(),
                    payload: Payload::Owned(payload),
                    close_after,
                    stream_seq,
                    producer,
                    now_ms,
                    record_match,
                }),
                Some(now_ms),
            ),
            StreamCommand::AppendExternal {
                stream_id,
                content_type,
                payload,
                record_ends,
                close_after,
                stream_seq,
                producer,
                now_ms,
                record_match,
            } => (
                self.append_external(ExternalAppend {
                    stream_id,
                    content_type,
                    payload,
                    record_ends,
                    close_after,
                    stream_seq,
                    producer,
                    now_ms,
                    record_match,
                }),
                Some(now_ms),
            ),
            StreamCommand::AppendBatch {
                stream_id,
                content_type,
                payloads,
                producer,
                now_ms,
            } => (
                self.apply_append_batch(
                    stream_id,
                    content_type.as_deref(),
                    payloads,
                    producer,
                    now_ms,
                ),
                Some(now_ms),
            ),
            StreamCommand::Close {
                stream_id,
                stream_seq,
                producer,
                now_ms,
            } => (
                self.append_inline(InlineAppend {
                    stream_id,
                    content_type: None,
                    payload: Payload::Borrowed(&[]),
                    close_after: true,
                    stream_seq,
                    producer,
                    now_ms,
                    record_match: None,
                }),
                Some(now_ms),
            ),
            StreamCommand::PublishSnapshot {
                stream_id,
                snapshot_offset,
                content_type,
                payload,
                expected_digest,
                now_ms,
            } => (
                self.publish_snapshot(
                    &stream_id,
                    snapshot_offset,
                    content_type,
                    payload,
                    expected_digest,
                    now_ms,
                ),
                Some(now_ms),
            ),
            StreamCommand::AdvanceRetention {
                stream_id,
                retained_offset,
                now_ms,
            } => (
                self.advance_retention(&stream_id, retained_offset, now_ms),
                Some(now_ms),
            ),
            StreamCommand::TouchStreamAccess {
                stream_id,
                now_ms,
                renew_ttl,
            } => (
                self.touch_stream_access(&stream_id, now_ms, renew_ttl),
                Some(now_ms),
            ),
            StreamCommand::UpdateStreamAttrs {
                stream_id,
                attrs,
                now_ms,
            } => (
                self.update_stream_attrs(&stream_id, attrs, now_ms),
                Some(now_ms),
            ),
            StreamCommand::FlushCold { stream_id, chunk } => {
                (self.flush_cold(&stream_id, chunk), None)
            }
            StreamCommand::CompactCold {
                stream_id,
                old_chunks,
                replacement,
                gc_not_before_ms,
            } => (
                self.compact_cold(&stream_id, old_chunks, replacement, gc_not_before_ms),
                None,
            ),
            StreamCommand::DeleteStream { stream_id } => (self.delete_stream(&stream_id), None),
            StreamCommand::AckColdGc { up_to_seq } => (
                StreamResponse::ColdGcAcked {
                    removed: self.gc.ack(up_to_seq),
                },
                None,
            ),
            StreamCommand::ImportSnapshot { snapshot } => (self.import_snapshot(*snapshot), None),
            StreamCommand::PinForkSource {
                stream_id,
                fork_stream_id,
                fork_offset,
                now_ms,
            } => (
                self.pin_fork_source(&stream_id, &fork_stream_id, fork_offset, now_ms),
                Some(now_ms),
            ),
            StreamCommand::CreateFork {
                stream_id,
                source_stream_id,
                fork_offset,
                fork_offset_given,
                pin,
                sub_offset,
                inherited_start,
                first_record,
                content_type,
                prefix,
                initial_payload,
                close_after,
                stream_ttl_seconds,
                stream_expires_at_ms,
                attrs,
                now_ms,
            } => (
                self.create_fork(CreateForkRequest {
                    stream_id,
                    source: source_stream_id,
                    fork_offset,
                    fork_offset_given,
                    pin,
                    sub_offset,
                    inherited_start,
                    first_record,
                    content_type,
                    prefix,
                    initial_payload,
                    close_after,
                    stream_ttl_seconds,
                    stream_expires_at_ms,
                    attrs,
                    now_ms,
                }),
                Some(now_ms),
            ),
            StreamCommand::UnpinForkSource {
                stream_id,
                fork_stream_id,
                pin,
            } => (
                self.unpin_fork_source(&stream_id, &fork_stream_id, pin),
                None,
            ),
            StreamCommand::AckForkUnpins { unpins } => (self.ack_fork_unpins(&unpins), None),
        }
    }
}

/// The stream a command addresses directly, which a soft-deleted stream
/// refuses (`docs/forks.md` §4). Cold maintenance and unpins still reach it.
fn addressed_stream(command: &StreamCommand) -> Option<&BucketStreamId> {
    use StreamCommand as C;
    match command {
        C::CreateStream { stream_id, .. }
        | C::CreateExternal { stream_id, .. }
        | C::Append { stream_id, .. }
        | C::AppendExternal { stream_id, .. }
        | C::AppendBatch { stream_id, .. }
        | C::Close { stream_id, .. }
        | C::PublishSnapshot { stream_id, .. }
        | C::AdvanceRetention { stream_id, .. }
        | C::TouchStreamAccess { stream_id, .. }
        | C::UpdateStreamAttrs { stream_id, .. }
        | C::DeleteStream { stream_id }
        | C::PinForkSource { stream_id, .. }
        | C::CreateFork { stream_id, .. } => Some(stream_id),
        _ => None,
    }
}
