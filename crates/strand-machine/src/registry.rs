//! The stream registry: a slot arena that reproduces the reference's slot
//! order (LIFO reuse of freed indices, versions) used by snapshot ordering
//! and TTL tie-breaks (spec 03 §7.1, 07 §3.2), plus an id index that stores
//! only arena indices (the id itself lives once, in the slot's metadata,
//! and the version in the arena), and an ordered index of each bucket's
//! streams by path (`[affinity/]stream`) for listings.

use std::collections::BTreeMap;

use ahash::RandomState;
use hashbrown::HashTable;
use strand_model::BucketStreamId;

use crate::path_index::PathIndex;
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

    fn position(self) -> usize {
        (self.index as usize).saturating_sub(1)
    }
}

#[derive(Debug, Clone, Default)]
struct ArenaEntry {
    version: u32,
    slot: Option<Box<StreamSlot>>,
}

/// Fixed seeds: the table is never iterated for output, but fixed seeds keep
/// even its internal layout identical on every replica.
fn hasher() -> RandomState {
    RandomState::with_seeds(
        0x243f_6a88_85a3_08d3,
        0x1319_8a2e_0370_7344,
        0xa409_3822_299f_31d0,
        0x082e_fa98_ec4e_6c89,
    )
}

/// Live streams by id, in an arena with the reference's slot order.
#[derive(Debug, Clone)]
pub(crate) struct Registry {
    /// `arena[i]` holds index `i + 1`.
    arena: Vec<ArenaEntry>,
    /// Freed indices, most recent last.
    free: Vec<u32>,
    /// Arena indices (from 1) of live slots, hashed by the slot's id: 4
    /// bytes a bucket, the version is the arena's.
    index: HashTable<u32>,
    hasher: RandomState,
    /// Live streams per bucket ordered by path (`[affinity/]stream`), as
    /// arena indices. Not part of any format: kept as streams come and go.
    by_path: BTreeMap<String, PathIndex>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            arena: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            hasher: hasher(),
            by_path: BTreeMap::new(),
        }
    }
}

/// The live slot at arena index `index` (from 1).
fn live_at(arena: &[ArenaEntry], index: u32) -> Option<&StreamSlot> {
    arena
        .get((index as usize).saturating_sub(1))?
        .slot
        .as_deref()
}

fn slot_at(arena: &[ArenaEntry], key: SlotKey) -> Option<&StreamSlot> {
    let e = arena.get(key.position())?;
    if e.version != key.version {
        return None;
    }
    e.slot.as_deref()
}

impl Registry {
    /// Number of live streams.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// The key of a live stream.
    pub(crate) fn key(&self, id: &BucketStreamId) -> Option<SlotKey> {
        let hash = self.hasher.hash_one(id);
        let arena = &self.arena;
        let index = *self
            .index
            .find(hash, |i| live_at(arena, *i).is_some_and(|s| s.id() == id))?;
        let version = arena.get((index as usize).saturating_sub(1))?.version;
        Some(SlotKey { index, version })
    }

    /// Whether a live stream has this id.
    pub(crate) fn contains(&self, id: &BucketStreamId) -> bool {
        self.key(id).is_some()
    }

    /// The live stream with this id.
    pub(crate) fn get(&self, id: &BucketStreamId) -> Option<&StreamSlot> {
        slot_at(&self.arena, self.key(id)?)
    }

    /// The live stream under `key` (from [`Registry::key`]): no hashing.
    pub(crate) fn slot(&self, key: SlotKey) -> Option<&StreamSlot> {
        slot_at(&self.arena, key)
    }

    /// The live stream under `key`, mutably: no hashing.
    pub(crate) fn slot_mut(&mut self, key: SlotKey) -> Option<&mut StreamSlot> {
        let e = self.arena.get_mut(key.position())?;
        if e.version != key.version {
            return None;
        }
        e.slot.as_deref_mut()
    }

    /// The live stream with this id, mutably.
    pub(crate) fn get_mut(&mut self, id: &BucketStreamId) -> Option<&mut StreamSlot> {
        let key = self.key(id)?;
        let e = self.arena.get_mut(key.position())?;
        e.slot.as_deref_mut()
    }

    /// Inserts a new stream (its id must not be live); returns its key.
    pub(crate) fn insert(&mut self, slot: StreamSlot) -> SlotKey {
        let hash = self.hasher.hash_one(slot.id());
        let bucket = slot.id().bucket_id.clone();
        let key = if let Some(index) = self.free.pop() {
            let key = SlotKey { index, version: 0 };
            let e = &mut self.arena[key.position()];
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
        let (arena, hasher) = (&self.arena, &self.hasher);
        self.index.insert_unique(hash, key.index, |i| {
            live_at(arena, *i).map_or(0, |s| hasher.hash_one(s.id()))
        });
        let arena = &self.arena;
        self.by_path
            .entry(bucket)
            .or_default()
            .insert(|i| live_at(arena, i).map(StreamSlot::id), key.index);
        key
    }

    /// Removes a live stream, freeing its arena index.
    pub(crate) fn remove(&mut self, id: &BucketStreamId) -> Option<StreamSlot> {
        let hash = self.hasher.hash_one(id);
        let arena = &self.arena;
        let entry = self
            .index
            .find_entry(hash, |i| live_at(arena, *i).is_some_and(|s| s.id() == id))
            .ok()?;
        let (index, _) = entry.remove();
        // Out of the path index while the slot still names its path.
        if let Some(paths) = self.by_path.get_mut(&id.bucket_id) {
            paths.remove(|i| live_at(arena, i).map(StreamSlot::id), index);
            if paths.is_empty() {
                self.by_path.remove(&id.bucket_id);
            }
        }
        let e = self.arena.get_mut((index as usize).saturating_sub(1))?;
        let slot = e.slot.take()?;
        e.version = e.version.wrapping_add(1);
        self.free.push(index);
        Some(*slot)
    }

    /// Live streams with their keys, in arena order.
    pub(crate) fn keyed_slots(&self) -> impl Iterator<Item = (SlotKey, &StreamSlot)> {
        self.arena.iter().enumerate().filter_map(|(i, e)| {
            let slot = e.slot.as_deref()?;
            let index = u32::try_from(i + 1).ok()?;
            Some((
                SlotKey {
                    index,
                    version: e.version,
                },
                slot,
            ))
        })
    }

    /// Live streams in arena order (ascending index).
    pub(crate) fn slots_in_arena_order(&self) -> impl Iterator<Item = &StreamSlot> {
        self.arena.iter().filter_map(|e| e.slot.as_deref())
    }

    /// Ids of live streams in `bucket_id`, ordered by (stream, affinity with
    /// `None` first).
    pub(crate) fn ids_in_bucket(&self, bucket_id: &str) -> Vec<BucketStreamId> {
        let mut ids: Vec<BucketStreamId> = self
            .paths_from(bucket_id, std::ops::Bound::Unbounded)
            .map(|s| s.id().clone())
            .collect();
        ids.sort();
        ids
    }

    /// Whether any live stream belongs to `bucket_id`.
    pub(crate) fn bucket_has_streams(&self, bucket_id: &str) -> bool {
        self.by_path.contains_key(bucket_id)
    }

    /// Live streams of `bucket_id` in path order, from the lower bound
    /// `from`. No hashing, no sort: a range of the ordered index.
    pub(crate) fn paths_from<'a>(
        &'a self,
        bucket_id: &str,
        from: std::ops::Bound<&str>,
    ) -> impl Iterator<Item = &'a StreamSlot> + 'a {
        let arena = &self.arena;
        self.by_path
            .get(bucket_id)
            .map(|paths| paths.range_from(|i| live_at(arena, i).map(StreamSlot::id), from))
            .into_iter()
            .flatten()
            .filter_map(|index| live_at(arena, index))
    }

    /// Checks that the path index holds every live stream once, under its
    /// own bucket, in path order.
    pub(crate) fn check_path_index(&self) -> Result<(), String> {
        let arena = &self.arena;
        let id = |i: u32| live_at(arena, i).map(StreamSlot::id);
        let mut listed = 0usize;
        for (bucket, paths) in &self.by_path {
            if paths.is_empty() {
                return Err(format!("bucket '{bucket}' has an empty path index"));
            }
            paths
                .check(id)
                .map_err(|e| format!("bucket '{bucket}' path index: {e}"))?;
            for index in paths.iter() {
                let slot = live_at(arena, index)
                    .ok_or_else(|| format!("bucket '{bucket}' lists free slot {index}"))?;
                if slot.id().bucket_id != *bucket {
                    return Err(format!("bucket '{bucket}' lists stream '{}'", slot.id()));
                }
                listed += 1;
            }
        }
        if listed != self.len() {
            return Err(format!(
                "the path index lists {listed} streams, the registry holds {}",
                self.len()
            ));
        }
        Ok(())
    }
}
