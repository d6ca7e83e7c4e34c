//! The TTL index: a min-heap of `(expires_at_ms, bucket, stream, slot key)`
//! entries (spec 03 §7.1). Entries are only removed by popping; stale ones
//! are recognised and discarded then.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use strand_model::{BucketStreamId, StreamMetadata};

use crate::registry::SlotKey;

/// The expiry instant of a stream, if it has one.
pub(crate) fn expiry(metadata: &StreamMetadata) -> Option<u64> {
    if let Some(at) = metadata.stream_expires_at_ms {
        return Some(at);
    }
    metadata.stream_ttl_seconds.map(|ttl| {
        metadata
            .last_ttl_touch_at_ms
            .saturating_add(ttl.saturating_mul(1000))
    })
}

/// Whether the stream has expired at `now_ms` (inclusive boundary).
pub(crate) fn expired(metadata: &StreamMetadata, now_ms: u64) -> bool {
    expiry(metadata).is_some_and(|at| now_ms >= at)
}

/// Whether a sliding-TTL stream is due for renewal (quarter-TTL interval).
pub(crate) fn renewal_due(metadata: &StreamMetadata, now_ms: u64) -> bool {
    let (Some(ttl), None) = (metadata.stream_ttl_seconds, metadata.stream_expires_at_ms) else {
        return false;
    };
    let ttl_ms = ttl.saturating_mul(1000);
    let interval = ttl_ms.div_ceil(4).max(1);
    now_ms.saturating_sub(metadata.last_ttl_touch_at_ms) >= interval
}

/// Renews a sliding TTL (sets the touch time, possibly backwards); returns
/// whether the touch time changed. With `forward_only` (corrected profile)
/// a `now_ms` before the stored touch time changes nothing.
pub(crate) fn renew(metadata: &mut StreamMetadata, now_ms: u64, forward_only: bool) -> bool {
    if forward_only && now_ms < metadata.last_ttl_touch_at_ms {
        return false;
    }
    if metadata.stream_ttl_seconds.is_some() && metadata.stream_expires_at_ms.is_none() {
        let changed = metadata.last_ttl_touch_at_ms != now_ms;
        metadata.last_ttl_touch_at_ms = now_ms;
        changed
    } else {
        false
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct TtlEntry {
    expires_at_ms: u64,
    stream_id: BucketStreamId,
    key: SlotKey,
    /// Tie-break before the affinity key: the slot key's ordinal in the
    /// reference profile, 0 in the corrected one (whose ties then follow the
    /// affinity key, which restore preserves, unlike slot keys).
    tie: u64,
}

impl Ord for TtlEntry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.expires_at_ms
            .cmp(&other.expires_at_ms)
            .then_with(|| self.stream_id.bucket_id.cmp(&other.stream_id.bucket_id))
            .then_with(|| self.stream_id.stream_id.cmp(&other.stream_id.stream_id))
            .then_with(|| self.tie.cmp(&other.tie))
            // Full ties (same key) only happen for duplicate entries; keep
            // the order total for the heap.
            .then_with(|| {
                self.stream_id
                    .affinity_key
                    .cmp(&other.stream_id.affinity_key)
            })
    }
}

impl PartialOrd for TtlEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The min-heap of expiry entries.
#[derive(Debug, Clone, Default)]
pub(crate) struct TtlIndex {
    heap: BinaryHeap<Reverse<TtlEntry>>,
    /// Corrected profile: ties ignore slot keys.
    by_id: bool,
}

impl TtlIndex {
    /// Pushes an entry for the stream's current expiry, if it has one.
    pub(crate) fn push(&mut self, metadata: &StreamMetadata, key: SlotKey) {
        if let Some(expires_at_ms) = expiry(metadata) {
            self.heap.push(Reverse(TtlEntry {
                expires_at_ms,
                stream_id: metadata.stream_id.clone(),
                key,
                tie: if self.by_id { 0 } else { key.ordinal() },
            }));
        }
    }

    /// An empty index whose ties follow stream ids (corrected profile) or
    /// slot keys (reference).
    pub(crate) fn new(by_id: bool) -> Self {
        Self {
            heap: BinaryHeap::new(),
            by_id,
        }
    }

    /// Every entry's expiry and stream, stale ones included.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (u64, &BucketStreamId)> {
        self.heap
            .iter()
            .map(|Reverse(e)| (e.expires_at_ms, &e.stream_id))
    }

    /// Number of entries, stale ones included.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Pops the smallest entry due at `now_ms`, if any, returning its stream
    /// id, slot key and expiry. The caller decides whether it is stale.
    pub(crate) fn pop_due(&mut self, now_ms: u64) -> Option<(BucketStreamId, SlotKey, u64)> {
        let due = self
            .heap
            .peek()
            .is_some_and(|Reverse(e)| e.expires_at_ms <= now_ms);
        if !due {
            return None;
        }
        self.heap
            .pop()
            .map(|Reverse(e)| (e.stream_id, e.key, e.expires_at_ms))
    }
}
