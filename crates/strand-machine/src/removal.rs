//! Removing streams: the shared `remove_stream_state`, lazy expiry of one
//! stream and the bounded TTL sweep (spec 03 §7.2–§7.4).

use strand_model::{BucketStreamId, TTL_EXPIRY_SWEEP_MAX_STREAMS_PER_WRITE};

use crate::machine::StreamStateMachine;
use crate::ttl::{expired, expiry};

impl StreamStateMachine {
    /// Removes a stream with every side effect: hot gauge, usage gauges, cold
    /// GC work and shared-object releases. Returns false if it was not live.
    pub(crate) fn remove_stream_state(&mut self, id: &BucketStreamId) -> bool {
        let Some(slot) = self.registry.remove(id) else {
            return false;
        };
        self.hot_bytes = self.hot_bytes.saturating_sub(slot.hot.len());
        let shared_paths = slot.cold.shared_paths();
        self.usage
            .record_stream_removed(&id.bucket_id, slot.retained_bytes());
        if slot.cold.has_cold_objects() {
            self.gc.enqueue_stream(id);
        }
        self.shared
            .release(&mut self.gc, &id.bucket_id, &shared_paths, 0);
        true
    }

    /// Lazy expiry: removes the stream if it exists and has expired at
    /// `now_ms`; returns whether it was removed.
    pub(crate) fn expire_if_due(&mut self, id: &BucketStreamId, now_ms: u64) -> bool {
        let due = self
            .registry
            .get(id)
            .is_some_and(|slot| expired(&slot.metadata, now_ms));
        due && self.remove_stream_state(id)
    }

    /// Pushes a TTL index entry for the stream's current expiry.
    pub(crate) fn refresh_ttl_entry(&mut self, id: &BucketStreamId) {
        if let (Some(key), Some(slot)) = (self.registry.key(id), self.registry.get(id)) {
            self.ttl.push(&slot.metadata, key);
        }
    }

    /// The sweep after a write: removes up to 256 expired streams in TTL
    /// index order, discarding stale entries on the way.
    pub(crate) fn sweep_expired_streams(&mut self, now_ms: u64) {
        let mut removed = 0usize;
        while removed < TTL_EXPIRY_SWEEP_MAX_STREAMS_PER_WRITE {
            let Some((id, key, at)) = self.ttl.pop_due(now_ms) else {
                break;
            };
            if self.registry.key(&id) != Some(key) {
                continue;
            }
            let live = self.registry.get(&id).is_some_and(|slot| {
                expiry(&slot.metadata) == Some(at) && expired(&slot.metadata, now_ms)
            });
            if live && self.remove_stream_state(&id) {
                removed += 1;
            }
        }
    }
}
