//! The stream registry: an id index plus a slot arena that reproduces the
//! reference's slot order (LIFO reuse of freed indices, versions) used by
//! snapshot ordering and TTL tie-breaks (spec 03 §7.1, 07 §3.2).

use std::collections::BTreeMap;

use strand_model::BucketStreamId;

use crate::slot::StreamSlot;

/// A slot arena key: index (from 1) and version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SlotKey {
    index: u32,
    version: u32,
}

impl SlotKey {
    /// The 64-bit ordinal the TTL index breaks ties with.
    pub(crate) fn ordinal(self) -> u64 {
        (u64::from(self.version) << 32) | u64::from(self.index)
    }
}

#[derive(Debug, Clone, Default)]
struct ArenaEntry {
    version: u32,
    slot: Option<Box<StreamSlot>>,
}

/// Live streams by id, in an arena with the reference's slot order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Registry {
    /// `arena[i]` holds index `i + 1`.
    arena: Vec<ArenaEntry>,
    /// Freed indices, most recent last.
    free: Vec<u32>,
    /// Every live id, ordered by (bucket, stream, affinity).
    ids: BTreeMap<BucketStreamId, SlotKey>,
}

impl Registry {
    /// Number of live streams.
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// The key of a live stream.
    pub(crate) fn key(&self, id: &BucketStreamId) -> Option<SlotKey> {
        self.ids.get(id).copied()
    }

    /// Whether a live stream has this id.
    pub(crate) fn contains(&self, id: &BucketStreamId) -> bool {
        self.ids.contains_key(id)
    }

    fn entry(&self, key: SlotKey) -> Option<&StreamSlot> {
        let i = usize::try_from(key.index).ok()?.checked_sub(1)?;
        let e = self.arena.get(i)?;
        if e.version != key.version {
            return None;
        }
        e.slot.as_deref()
    }

    fn entry_mut(&mut self, key: SlotKey) -> Option<&mut StreamSlot> {
        let i = usize::try_from(key.index).ok()?.checked_sub(1)?;
        let e = self.arena.get_mut(i)?;
        if e.version != key.version {
            return None;
        }
        e.slot.as_deref_mut()
    }

    /// The live stream with this id.
    pub(crate) fn get(&self, id: &BucketStreamId) -> Option<&StreamSlot> {
        self.entry(self.key(id)?)
    }

    /// The live stream with this id, mutably.
    pub(crate) fn get_mut(&mut self, id: &BucketStreamId) -> Option<&mut StreamSlot> {
        let key = self.key(id)?;
        self.entry_mut(key)
    }

    /// Inserts a new stream (its id must not be live); returns its key.
    pub(crate) fn insert(&mut self, slot: StreamSlot) -> SlotKey {
        let id = slot.id().clone();
        let key = if let Some(index) = self.free.pop() {
            let i = (index as usize) - 1;
            let e = &mut self.arena[i];
            e.version = e.version.wrapping_add(1);
            e.slot = Some(Box::new(slot));
            SlotKey {
                index,
                version: e.version,
            }
        } else {
            let index = u32::try_from(self.arena.len() + 1).unwrap_or(u32::MAX);
            self.arena.push(ArenaEntry {
                version: 1,
                slot: Some(Box::new(slot)),
            });
            SlotKey { index, version: 1 }
        };
        self.ids.insert(id, key);
        key
    }

    /// Removes a live stream, freeing its arena index.
    pub(crate) fn remove(&mut self, id: &BucketStreamId) -> Option<StreamSlot> {
        let key = self.ids.remove(id)?;
        let i = (key.index as usize).checked_sub(1)?;
        let e = self.arena.get_mut(i)?;
        let slot = e.slot.take()?;
        e.version = e.version.wrapping_add(1);
        self.free.push(key.index);
        Some(*slot)
    }

    /// Live streams in arena order (ascending index).
    pub(crate) fn slots_in_arena_order(&self) -> impl Iterator<Item = &StreamSlot> {
        self.arena.iter().filter_map(|e| e.slot.as_deref())
    }

    /// Live streams ordered by (bucket, stream, affinity with `None` first).
    pub(crate) fn slots_in_id_order(&self) -> impl Iterator<Item = &StreamSlot> {
        self.ids.values().filter_map(|key| self.entry(*key))
    }

    /// Ids of live streams in `bucket_id`, in id order.
    pub(crate) fn ids_in_bucket(&self, bucket_id: &str) -> Vec<BucketStreamId> {
        let from = BucketStreamId::new(bucket_id, "");
        self.ids
            .range(from..)
            .take_while(|(id, _)| id.bucket_id == bucket_id)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Whether any live stream belongs to `bucket_id`.
    pub(crate) fn bucket_has_streams(&self, bucket_id: &str) -> bool {
        let from = BucketStreamId::new(bucket_id, "");
        self.ids
            .range(from..)
            .next()
            .is_some_and(|(id, _)| id.bucket_id == bucket_id)
    }
}
