//! One live stream's state (a registry slot).
//!
//! An empty stream is most of a group's streams, so a slot keeps inline
//! only what every stream has: its public metadata, its record index (every
//! JSON stream has one from creation) and two pointers. What the first
//! write creates (hot buffer, integrity, producers, cold state, message
//! records, retained offset) lives in one [`SlotData`] box, and what few
//! streams ever have (attributes, a visible snapshot, fork state) in one
//! [`SlotRare`] box; both are absent until needed, and an absent box reads
//! as its default.

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
    pub(crate) record_index: Option<Box<StreamRecordIndex>>,
    /// What writes build; absent while the stream holds nothing.
    pub(crate) data: Lazy<SlotData>,
    /// Rarely set state; absent for most streams.
    pub(crate) rare: Lazy<SlotRare>,
}

/// The state a stream's writes build (all default for a new empty stream).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SlotData {
    pub(crate) hot: HotBuffer,
    pub(crate) integrity: StreamIntegrity,
    pub(crate) message_records: Vec<StreamMessageRecord>,
    pub(crate) producers: Producers,
    pub(crate) cold: ColdState,
    pub(crate) retained_offset: u64,
}

/// The state few streams have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SlotRare {
    pub(crate) attrs: Option<Box<StreamAttrs>>,
    pub(crate) visible_snapshot: Option<Box<StreamVisibleSnapshot>>,
    /// Fork state (strand extension).
    pub(crate) fork: Option<Box<ForkState>>,
}

impl SlotRare {
    fn is_empty(&self) -> bool {
        self.attrs.is_none() && self.visible_snapshot.is_none() && self.fork.is_none()
    }
}

/// A `T` that costs one null pointer while it is `T::default()`: allocated
/// by the first [`Lazy::make_mut`], read as the default while absent.
/// Equality treats an absent value and a default one alike.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lazy<T>(Option<Box<T>>);

impl<T: Default + PartialEq> Lazy<T> {
    /// Holds `value`, allocating only when it is not the default.
    pub(crate) fn new(value: T) -> Self {
        Self((value != T::default()).then(|| Box::new(value)))
    }

    /// The value, if allocated.
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }

    /// The value, mutably, if allocated.
    pub(crate) fn get_mut(&mut self) -> Option<&mut T> {
        self.0.as_deref_mut()
    }

    /// The value, mutably, allocated (as the default) on first use.
    pub(crate) fn make_mut(&mut self) -> &mut T {
        self.0.get_or_insert_default()
    }

    /// Drops the allocation when `empty` says the value holds nothing.
    pub(crate) fn tidy(&mut self, empty: impl FnOnce(&T) -> bool) {
        if self.0.as_deref().is_some_and(empty) {
            self.0 = None;
        }
    }
}

impl<T: Default + PartialEq> PartialEq for Lazy<T> {
    fn eq(&self, other: &Self) -> bool {
        match (self.get(), other.get()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => true,
            (Some(v), None) | (None, Some(v)) => *v == T::default(),
        }
    }
}

impl<T: Default + Eq> Eq for Lazy<T> {}

/// What an absent [`SlotData`] reads as, field by field.
static EMPTY_HOT: HotBuffer = HotBuffer::EMPTY;
static EMPTY_COLD: ColdState = ColdState::EMPTY;
static EMPTY_PRODUCERS: Producers = Producers::EMPTY;

impl StreamSlot {
    /// A slot from its parts; the boxes are allocated only for non-default
    /// parts.
    pub(crate) fn new(
        metadata: StreamMetadata,
        record_index: Option<StreamRecordIndex>,
        data: SlotData,
        rare: SlotRare,
    ) -> Self {
        Self {
            metadata,
            record_index: record_index.map(Box::new),
            data: Lazy::new(data),
            rare: Lazy::new(rare),
        }
    }

    /// The stream's id.
    pub(crate) fn id(&self) -> &BucketStreamId {
        &self.metadata.stream_id
    }

    /// The hot buffer.
    pub(crate) fn hot(&self) -> &HotBuffer {
        self.data.get().map_or(&EMPTY_HOT, |d| &d.hot)
    }

    /// The cold state.
    pub(crate) fn cold(&self) -> &ColdState {
        self.data.get().map_or(&EMPTY_COLD, |d| &d.cold)
    }

    /// Message records, in offset order.
    pub(crate) fn message_records(&self) -> &[StreamMessageRecord] {
        self.data
            .get()
            .map_or(&[], |d| d.message_records.as_slice())
    }

    /// The integrity state (`Copy`).
    pub(crate) fn integrity(&self) -> StreamIntegrity {
        self.data
            .get()
            .map_or_else(StreamIntegrity::new, |d| d.integrity)
    }

    /// The destructive-retention floor.
    pub(crate) fn retained_offset(&self) -> u64 {
        self.data.get().map_or(0, |d| d.retained_offset)
    }

    /// The producers.
    pub(crate) fn producers(&self) -> &Producers {
        self.data.get().map_or(&EMPTY_PRODUCERS, |d| &d.producers)
    }

    /// The stream's attributes.
    pub(crate) fn attrs(&self) -> Option<&StreamAttrs> {
        self.rare.get().and_then(|r| r.attrs.as_deref())
    }

    /// Replaces the stream's attributes.
    pub(crate) fn set_attrs(&mut self, attrs: Option<StreamAttrs>) {
        match attrs {
            Some(a) => self.rare.make_mut().attrs = Some(Box::new(a)),
            None => {
                if let Some(r) = self.rare.get_mut() {
                    r.attrs = None;
                }
                self.rare.tidy(SlotRare::is_empty);
            }
        }
    }

    /// The visible snapshot checkpoint.
    pub(crate) fn visible_snapshot(&self) -> Option<&StreamVisibleSnapshot> {
        self.rare.get().and_then(|r| r.visible_snapshot.as_deref())
    }

    /// Replaces the visible snapshot checkpoint.
    pub(crate) fn set_visible_snapshot(&mut self, snapshot: StreamVisibleSnapshot) {
        self.rare.make_mut().visible_snapshot = Some(Box::new(snapshot));
    }

    /// The fork state.
    pub(crate) fn fork(&self) -> Option<&ForkState> {
        self.rare.get().and_then(|r| r.fork.as_deref())
    }

    /// The fork state, mutably, if any.
    pub(crate) fn fork_state_mut(&mut self) -> Option<&mut ForkState> {
        self.rare.get_mut().and_then(|r| r.fork.as_deref_mut())
    }

    /// The fork state, mutably, created empty on first use.
    pub(crate) fn fork_or_default(&mut self) -> &mut ForkState {
        self.rare.make_mut().fork.get_or_insert_default()
    }

    /// Drops the fork state (and the rare box when nothing else is in it).
    pub(crate) fn clear_fork(&mut self) {
        if let Some(r) = self.rare.get_mut() {
            r.fork = None;
        }
        self.rare.tidy(SlotRare::is_empty);
    }

    /// Bytes this stream counts against its bucket's `retained_bytes`.
    pub(crate) fn retained_bytes(&self) -> u64 {
        self.metadata
            .tail_offset
            .saturating_sub(self.retained_offset())
    }

    /// The effective cold frontier at the current retained offset.
    pub(crate) fn cold_frontier(&self) -> u64 {
        self.cold().frontier(self.retained_offset())
    }
}

/// The integrity hashing domain of a stream id.
pub(crate) fn integrity_domain(id: &BucketStreamId) -> IntegrityDomain<'_> {
    IntegrityDomain::new(&id.bucket_id, id.affinity_key.as_deref(), &id.stream_id)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use bytes::Bytes;
    use strand_model::{BucketStreamId, StreamAttrs, StreamMetadata};

    use super::StreamSlot;
    use crate::command::StreamCommand;
    use crate::machine::StreamStateMachine;

    fn append(id: &BucketStreamId, payload: &'static [u8]) -> StreamCommand {
        StreamCommand::Append {
            stream_id: id.clone(),
            content_type: Some("text/plain".into()),
            payload: Bytes::from_static(payload),
            close_after: false,
            stream_seq: None,
            producer: None,
            now_ms: 2,
            record_match: None,
        }
    }

    fn machine_with(ids: &[&BucketStreamId]) -> StreamStateMachine {
        let mut m = StreamStateMachine::new();
        m.apply(StreamCommand::CreateBucket {
            bucket_id: "acme".into(),
        });
        for id in ids {
            let r = m.apply(StreamCommand::CreateStream {
                stream_id: (*id).clone(),
                content_type: "text/plain".into(),
                initial_payload: Bytes::new(),
                close_after: false,
                stream_seq: None,
                producer: None,
                stream_ttl_seconds: None,
                stream_expires_at_ms: None,
                attrs: None,
                now_ms: 1,
            });
            assert!(!r.is_error(), "{r:?}");
        }
        m
    }

    fn boxes(m: &StreamStateMachine, id: &BucketStreamId) -> (bool, bool) {
        let slot = m.registry.get(id).unwrap();
        (slot.data.get().is_some(), slot.rare.get().is_some())
    }

    #[test]
    fn an_empty_streams_slot_is_its_metadata_and_three_pointers() {
        assert_eq!(
            size_of::<StreamSlot>(),
            size_of::<StreamMetadata>() + 3 * size_of::<usize>()
        );
    }

    #[test]
    fn the_boxes_come_with_what_they_hold_and_go_with_it() {
        let (a, b) = (
            BucketStreamId::new("acme", "a"),
            BucketStreamId::new("acme", "b"),
        );
        let mut m = machine_with(&[&a, &b]);
        assert_eq!(boxes(&m, &a), (false, false));

        // A failed transaction leaves a stream it gave a first write to as
        // empty as before.
        let failed = m.append_transaction(vec![append(&a, b"x"), append(&b, b"")]);
        assert!(failed.is_err());
        assert_eq!(boxes(&m, &a), (false, false));
        assert_eq!(m.head(&a).unwrap().tail_offset, 0);

        assert!(!m.apply(append(&a, b"xyz")).is_error());
        assert_eq!(boxes(&m, &a), (true, false));

        let attrs = |title: Option<&str>| StreamCommand::UpdateStreamAttrs {
            stream_id: b.clone(),
            attrs: title.map(|t| StreamAttrs {
                title: Some(t.into()),
                ..StreamAttrs::default()
            }),
            now_ms: 3,
        };
        assert!(!m.apply(attrs(Some("t"))).is_error());
        assert_eq!(boxes(&m, &b), (false, true));
        assert_eq!(m.stream_attrs(&b).unwrap().title.as_deref(), Some("t"));
        assert!(!m.apply(attrs(None)).is_error());
        assert_eq!(boxes(&m, &b), (false, false));
    }
}
