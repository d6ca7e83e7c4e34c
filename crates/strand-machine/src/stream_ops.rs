//! Stream commands other than create and appends: delete, attrs update,
//! access touch, and the `access_requires_write` query (spec 03 §5–§6).

use strand_model::{
    BucketStreamId, StreamAttrs, normalize_stream_attrs, validate_stream_attrs_size,
};

use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::scope::not_found;
use crate::ttl::{expired, renew, renewal_due};

impl StreamStateMachine {
    pub(crate) fn delete_stream(&mut self, id: &BucketStreamId) -> StreamResponse {
        if let Err(e) = self.check_scope(id) {
            return e;
        }
        if !self.retire_stream(id) {
            return not_found(id);
        }
        StreamResponse::Deleted
    }

    pub(crate) fn update_stream_attrs(
        &mut self,
        id: &BucketStreamId,
        attrs: Option<StreamAttrs>,
        now_ms: u64,
    ) -> StreamResponse {
        if let Err(e) = self.check_scope(id) {
            return e;
        }
        if self.expire_if_due(id, now_ms) {
            return not_found(id);
        }
        let Some(slot) = self.registry.get_mut(id) else {
            return not_found(id);
        };
        let attrs = normalize_stream_attrs(attrs);
        if let Err(reason) = validate_stream_attrs_size(attrs.as_ref()) {
            return StreamResponse::error(StreamErrorCode::InvalidStreamAttrs, reason);
        }
        let changed = slot.attrs() != attrs.as_ref();
        if changed {
            slot.set_attrs(attrs);
        }
        StreamResponse::AttrsUpdated { changed }
    }

    pub(crate) fn touch_stream_access(
        &mut self,
        id: &BucketStreamId,
        now_ms: u64,
        renew_ttl: bool,
    ) -> StreamResponse {
        if let Err(e) = self.check_scope(id) {
            return e;
        }
        if !self.registry.contains(id) {
            return not_found(id);
        }
        if self.expire_if_due(id, now_ms) {
            return StreamResponse::Accessed {
                changed: true,
                expired: true,
            };
        }
        let mut changed = false;
        let corrected = self.corrected();
        if let Some(slot) = self.registry.get_mut(id)
            && renew_ttl
            && slot.metadata.stream_ttl_seconds.is_some()
        {
            changed = renew(&mut slot.metadata, now_ms, corrected);
        }
        if changed {
            self.refresh_ttl_entry(id);
        }
        StreamResponse::Accessed {
            changed,
            expired: false,
        }
    }

    /// Whether an access at `now_ms` must go through a replicated
    /// `TouchStreamAccess` write (spec 06 §3.2). Mutates nothing.
    pub fn access_requires_write(
        &self,
        stream_id: &BucketStreamId,
        now_ms: u64,
        renew_ttl: bool,
    ) -> Result<bool, StreamResponse> {
        self.check_scope(stream_id)?;
        let slot = self
            .registry
            .get(stream_id)
            .ok_or_else(|| not_found(stream_id))?;
        if slot.soft_deleted() {
            return Ok(false);
        }
        if expired(&slot.metadata, now_ms) {
            return Ok(true);
        }
        Ok(renew_ttl && renewal_due(&slot.metadata, now_ms))
    }
}
