//! The cold GC queue and shared cold object reference counts (spec 05 §8–§9).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use strand_model::{BucketStreamId, ColdGcEntry, ColdGcTarget};

/// FIFO of GC work plus its next sequence number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GcQueue {
    entries: VecDeque<ColdGcEntry>,
    next_seq: u64,
}

impl GcQueue {
    /// A queue restored verbatim from a snapshot.
    pub(crate) fn restored(entries: Vec<ColdGcEntry>, next_seq: u64) -> Self {
        Self {
            entries: entries.into(),
            next_seq,
        }
    }

    /// Enqueues one entry with the next sequence number.
    pub(crate) fn enqueue(&mut self, bucket_id: String, target: ColdGcTarget, not_before_ms: u64) {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.saturating_add(1);
        self.entries.push_back(ColdGcEntry {
            seq,
            bucket_id,
            not_before_ms,
            target,
        });
    }

    /// Enqueues the `Stream` entry of a removed stream.
    pub(crate) fn enqueue_stream(&mut self, stream_id: &BucketStreamId) {
        self.enqueue(
            stream_id.bucket_id.clone(),
            ColdGcTarget::Stream(stream_id.clone()),
            0,
        );
    }

    /// Removes front entries with `seq <= up_to_seq`; returns how many.
    pub(crate) fn ack(&mut self, up_to_seq: u64) -> u64 {
        let mut removed = 0u64;
        while self.entries.front().is_some_and(|e| e.seq <= up_to_seq) {
            self.entries.pop_front();
            removed += 1;
        }
        removed
    }

    /// The first `max` entries.
    pub(crate) fn batch(&self, max: usize) -> Vec<ColdGcEntry> {
        self.entries.iter().take(max).cloned().collect()
    }

    /// All entries in queue order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &ColdGcEntry> {
        self.entries.iter()
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Entries owned by `bucket_id` or by nobody (legacy).
    pub(crate) fn len_for_bucket(&self, bucket_id: &str) -> usize {
        self.entries
            .iter()
            .filter(|e| e.bucket_id == bucket_id || e.bucket_id.is_empty())
            .count()
    }

    /// The next sequence number.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }
}

/// Live reference counts and owner buckets of shared cold objects. The
/// counts' keys are also where the machine interns object paths: every
/// stored chunk of a shared object holds the same `Arc<str>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SharedObjects {
    refs: BTreeMap<Arc<str>, u64>,
    owners: BTreeMap<Arc<str>, BTreeSet<String>>,
}

impl SharedObjects {
    /// One more live reference to `path`, owned (also) by `bucket_id`;
    /// returns the interned path.
    pub(crate) fn retain(&mut self, path: &str, bucket_id: &str) -> Arc<str> {
        let interned = match self.refs.get_key_value(path) {
            Some((key, _)) => Arc::clone(key),
            None => Arc::from(path),
        };
        let count = self.refs.entry(Arc::clone(&interned)).or_insert(0);
        *count = count.saturating_add(1);
        let owners = self.owners.entry(Arc::clone(&interned)).or_default();
        if !owners.contains(bucket_id) {
            owners.insert(bucket_id.to_owned());
        }
        interned
    }

    /// Adds owners to a path that has live references (restore step 16).
    pub(crate) fn merge_owners(&mut self, path: &str, bucket_ids: &[String]) {
        let Some((interned, _)) = self.refs.get_key_value(path) else {
            return;
        };
        let owners = self.owners.entry(Arc::clone(interned)).or_default();
        owners.extend(bucket_ids.iter().cloned());
    }

    /// Releases one reference per listed path and enqueues `Paths` GC work
    /// for every path whose count reached zero, one entry per owner.
    pub(crate) fn release(
        &mut self,
        gc: &mut GcQueue,
        bucket_id: &str,
        paths: &[String],
        not_before_ms: u64,
    ) {
        let mut reclaim: Vec<(String, BTreeSet<String>)> = Vec::new();
        for path in paths {
            let Some(count) = self.refs.get_mut(path.as_str()) else {
                continue;
            };
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.refs.remove(path.as_str());
                let owners = self.owners.remove(path.as_str()).unwrap_or_default();
                reclaim.push((path.clone(), owners));
            }
        }
        for (path, owners) in reclaim {
            if owners.is_empty() {
                gc.enqueue(
                    bucket_id.to_owned(),
                    ColdGcTarget::Paths(vec![path]),
                    not_before_ms,
                );
            } else {
                for owner in owners {
                    gc.enqueue(
                        owner,
                        ColdGcTarget::Paths(vec![path.clone()]),
                        not_before_ms,
                    );
                }
            }
        }
    }

    /// `(path, sorted owners)` for every path with live references, sorted
    /// by path.
    pub(crate) fn owner_report(&self) -> Vec<(String, Vec<String>)> {
        self.owners
            .iter()
            .filter(|(path, _)| self.refs.contains_key(*path))
            .map(|(path, owners)| (path.to_string(), owners.iter().cloned().collect()))
            .collect()
    }
}
