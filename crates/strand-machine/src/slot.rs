//! One live stream's state (a registry slot).

use strand_integrity::{IntegrityDomain, StreamIntegrity};
use strand_model::{
    BucketStreamId, StreamAttrs, StreamMessageRecord, StreamMetadata, StreamVisibleSnapshot,
};
use strand_records::StreamRecordIndex;

use crate::cold::ColdState;
use crate::fork::ForkState;
use crate::hot::HotBuffer;
use crate::producers::Producers;

/// Everything the machine keeps for one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamSlot {
    pub(crate) metadata: StreamMetadata,
    pub(crate) attrs: Option<Box<StreamAttrs>>,
    pub(crate) hot: HotBuffer,
    pub(crate) cold: ColdState,
    pub(crate) message_records: BoxedVec<StreamMessageRecord>,
    pub(crate) record_index: Option<Box<StreamRecordIndex>>,
    pub(crate) integrity: StreamIntegrity,
    pub(crate) retained_offset: u64,
    pub(crate) visible_snapshot: Option<Box<StreamVisibleSnapshot>>,
    pub(crate) producers: Producers,
    /// Fork state (strand extension); `None` for most streams.
    pub(crate) fork: Option<Box<ForkState>>,
}

impl StreamSlot {
    /// The stream's id.
    pub(crate) fn id(&self) -> &BucketStreamId {
        &self.metadata.stream_id
    }

    /// Bytes this stream counts against its bucket's `retained_bytes`.
    pub(crate) fn retained_bytes(&self) -> u64 {
        self.metadata
            .tail_offset
            .saturating_sub(self.retained_offset)
    }

    /// The effective cold frontier at the current retained offset.
    pub(crate) fn cold_frontier(&self) -> u64 {
        self.cold.frontier(self.retained_offset)
    }
}

/// The integrity hashing domain of a stream id.
pub(crate) fn integrity_domain(id: &BucketStreamId) -> IntegrityDomain<'_> {
    IntegrityDomain::new(&id.bucket_id, id.affinity_key.as_deref(), &id.stream_id)
}

/// A vector that costs one pointer while empty (most streams' rare lists,
/// and an empty stream's message records).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
// One pointer instead of a 24-byte `Vec` in every stream slot.
#[allow(clippy::box_collection)]
pub(crate) struct BoxedVec<T>(Option<Box<Vec<T>>>);

impl<T> BoxedVec<T> {
    /// The vector, allocated on first use.
    pub(crate) fn vec_mut(&mut self) -> &mut Vec<T> {
        self.0.get_or_insert_default()
    }

    /// Keeps the first `len` elements.
    pub(crate) fn truncate(&mut self, len: usize) {
        if let Some(v) = self.0.as_mut() {
            v.truncate(len);
        }
    }
}

impl<T> From<Vec<T>> for BoxedVec<T> {
    fn from(v: Vec<T>) -> Self {
        Self((!v.is_empty()).then(|| Box::new(v)))
    }
}

impl<T> std::ops::Deref for BoxedVec<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}
