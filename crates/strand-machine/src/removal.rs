//! Removing streams: the shared `remove_stream_state`, lazy expiry of one
//! stream and the bounded TTL sweep (spec 03 §7.2–§7.4).

use strand_model::{BucketStreamId, TTL_EXPIRY_SWEEP_MAX_STREAMS_PER_WRITE};

use crate::machine::StreamStateMachine;
use crate::registry::SlotKey;
use crate::ttl::{TtlIndex, expired, expiry};

impl StreamStateMachine {
    /// Removes a stream with every side effect: hot gauge, usage gauges, cold
    /// GC work and shared-object releases. Returns false if it was not live.
    pub(crate) fn remove_stream_state(&mut self, id: &BucketStreamId) -> bool {
        let Some(slot) = self.registry.remove(id) else {
            return false;
        };
        if let Some(origin) = slot.origin() {
            self.queue_unpin(id, origin);
        }
        if slot.soft_deleted() {
            self.soft_deleted_streams = self.soft_deleted_streams.saturating_sub(1);
        }
        self.remove_hot_bytes(slot.hot().len());
        let shared_paths = slot.cold().shared_paths();
        self.usage
            .record_stream_removed(&id.bucket_id, slot.retained_bytes());
        if slot.cold().has_cold_objects() {
            self.gc.enqueue_stream(id);
        }
        self.shared
            .release(&mut self.gc, &id.bucket_id, &shared_paths, 0);
        true
    }

    /// Lazy expiry: removes the stream if it exists and has expired at
    /// `now_ms`; returns whether it was removed.
    pub(crate) fn expire_if_due(&mut self, id: &BucketStreamId, now_ms: u64) -> bool {
        match self.registry.key(id) {
            Some(key) => self.expire_at_if_due(key, id, now_ms),
            None => false,
        }
    }

    /// [`Self::expire_if_due`] for the stream `id` found under `key`.
    pub(crate) fn expire_at_if_due(
        &mut self,
        key: SlotKey,
        id: &BucketStreamId,
        now_ms: u64,
    ) -> bool {
        let due = self
            .registry
            .slot(key)
            .is_some_and(|slot| expired(&slot.metadata, now_ms));
        due && self.retire_stream(id)
    }

    /// Pushes a TTL index entry for the stream's current expiry.
    pub(crate) fn refresh_ttl_entry(&mut self, id: &BucketStreamId) {
        match self.registry.key(id) {
            Some(key) => self.refresh_ttl_entry_at(key),
            None => self.compact_ttl_index(),
        }
    }

    /// [`Self::refresh_ttl_entry`] for the stream under `key`, without
    /// hashing its id again.
    pub(crate) fn refresh_ttl_entry_at(&mut self, key: SlotKey) {
        if let Some(slot) = self.registry.slot(key) {
            self.ttl.push(&slot.metadata, key);
        }
        self.compact_ttl_index();
    }

    /// Corrected profile: rebuilds the TTL index once stale entries dominate.
    #[inline]
    pub(crate) fn compact_ttl_index(&mut self) {
        // Corrected profile: every renewal leaves a stale entry behind, so
        // the index would grow with touches, not streams. Rebuilt from the
        // live streams once stale entries dominate; stale entries never
        // remove anything, so the sweep order of live ones is unchanged.
        if self.corrected() && self.ttl.len() > 2 * self.registry.len() + 1024 {
            let mut ttl = TtlIndex::new(true);
            for (key, slot) in self.registry.keyed_slots() {
                ttl.push(&slot.metadata, key);
            }
            self.ttl = ttl;
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
                !slot.soft_deleted()
                    && expiry(&slot.metadata) == Some(at)
                    && expired(&slot.metadata, now_ms)
            });
            if live && self.retire_stream(&id) {
                removed += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use bytes::Bytes;
    use strand_model::{BucketStreamId, MachineProfile};

    use crate::command::StreamCommand;
    use crate::machine::StreamStateMachine;

    /// Touches of one TTL stream: the reference's index keeps one entry per
    /// renewal, the corrected one stays bounded by the live streams.
    fn touched(profile: MachineProfile, touches: u64) -> usize {
        let id = BucketStreamId::new("acme", "s");
        let mut m = StreamStateMachine::with_profile(profile);
        m.apply(StreamCommand::CreateBucket {
            bucket_id: "acme".into(),
        });
        let r = m.apply(StreamCommand::CreateStream {
            stream_id: id.clone(),
            content_type: "text/plain".into(),
            initial_payload: Bytes::new(),
            close_after: false,
            stream_seq: None,
            producer: None,
            stream_ttl_seconds: Some(3_600),
            stream_expires_at_ms: None,
            attrs: None,
            now_ms: 1,
        });
        assert!(!r.is_error(), "{r:?}");
        for now in 2..2 + touches {
            m.apply(StreamCommand::TouchStreamAccess {
                stream_id: id.clone(),
                now_ms: now,
                renew_ttl: true,
            });
        }
        m.ttl.len()
    }

    #[test]
    fn the_corrected_ttl_index_does_not_grow_with_touches() {
        assert_eq!(touched(MachineProfile::Reference, 5_000), 5_001);
        assert!(touched(MachineProfile::Corrected, 5_000) <= 1_027);
    }
}
