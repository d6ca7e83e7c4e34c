//! A cluster node's own copy of its groups' flushed bytes: the local
//! segment store of a node whose cluster has no object storage every node
//! reads (`--cold-url`).
//!
//! The group's leader writes each flush's object into its own store
//! before it commits the flush (one entry holding every piece's
//! `FlushCold`). Every node, as its group task applies that entry, hands
//! [`ReplicaSegments`] each accepted piece's bytes out of its *own* hot
//! buffer (the machine has checked them against the piece's digest); once
//! the group's task has applied the entry, the applier awaits
//! [`SegmentReplica::settle`], which writes every object this node does
//! not hold yet (the pieces at their offsets, zeros where a piece was
//! refused as stale and so is never read), synced, before the log goes
//! on: a snapshot never names an object this node does not hold. Until
//! then reads find the pieces in memory.
//!
//! What a node lacks (it was rebuilt from an empty directory and received
//! a snapshot; a write failed; a file is damaged) it fetches from another
//! node ([`SegmentPeers`]): on a read that finds no file, and in the
//! repair pass the group's worker runs after each snapshot install and
//! every [`ColdConfig::repair_interval`](crate::ColdConfig::repair_interval).
//! A fetched file is checked against its trailer before it is kept.
//!
//! Deletes: the GC queue's entries an `AckColdGc` acknowledged are queued
//! here and carried out by the group's worker on every node (between its
//! uploads, never during one), and each node's worker sweeps its own
//! store for orphans.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use strand::ColdGcTarget;
use strand_engine::{FlushedPiece, LogFuture, Reclaimed, SegmentPeers, SegmentReplica};

use crate::local::{LocalSegments, TRAILER_LEN};
use crate::store::{ColdBackend, ColdError, ObjectInfo};

/// The largest object a read fetches from a peer without knowing its size.
const FETCH_LIMIT: u64 = 1 << 30;

/// One object whose pieces wait to be written.
#[derive(Debug)]
struct Pending {
    group: usize,
    size: u64,
    /// `(offset in the object, bytes)`, in the order handed over.
    pieces: Vec<(u64, Vec<Bytes>)>,
    /// `(offset in the object, the chunk's first stream offset, the
    /// stream offsets where its messages start)`, one per piece.
    starts: Vec<(u64, u64, Vec<u64>)>,
}

impl Pending {
    /// The object's message-start sidecar, when its pieces have starts.
    fn sidecar(&self) -> Option<Bytes> {
        let positions = crate::starts::positions(
            self.starts
                .iter()
                .map(|(at, start, starts)| (*at, *start, starts.as_slice())),
        )?;
        Some(crate::starts::encode(&positions))
    }

    /// `range` of the object, if one piece holds all of it.
    fn read(&self, range: &Range<u64>) -> Option<Bytes> {
        for (at, slices) in &self.pieces {
            let len: u64 = slices.iter().map(|s| s.len() as u64).sum();
            if range.start < *at || range.end > at.saturating_add(len) {
                continue;
            }
            let mut out = BytesMut::with_capacity(usize::try_from(range.end - range.start).ok()?);
            let mut pos = *at;
            for slice in slices {
                let end = pos + slice.len() as u64;
                let from = range.start.max(pos);
                let to = range.end.min(end);
                if from < to {
                    let a = usize::try_from(from - pos).ok()?;
                    let b = usize::try_from(to - pos).ok()?;
                    out.extend_from_slice(slice.get(a..b)?);
                }
                pos = end;
            }
            return Some(out.freeze());
        }
        None
    }

    /// The object's bytes as parts: pieces at their offsets, zeros
    /// between them.
    fn parts(&self) -> Vec<Bytes> {
        let mut pieces: Vec<&(u64, Vec<Bytes>)> = self.pieces.iter().collect();
        pieces.sort_by_key(|(at, _)| *at);
        let mut parts = Vec::new();
        let mut pos = 0u64;
        for (at, slices) in pieces {
            if *at < pos {
                continue;
            }
            if *at > pos {
                parts.push(zeros(*at - pos));
                pos = *at;
            }
            for slice in slices {
                pos += slice.len() as u64;
                parts.push(slice.clone());
            }
        }
        if self.size > pos {
            parts.push(zeros(self.size - pos));
        }
        parts
    }
}

/// `range` of an object held whole in memory.
fn slice_of(name: &str, bytes: &Bytes, range: &Range<u64>) -> Result<Bytes, ColdError> {
    let from = usize::try_from(range.start).unwrap_or(usize::MAX);
    let to = usize::try_from(range.end).unwrap_or(usize::MAX);
    if from > to || to > bytes.len() {
        return Err(ColdError::Store(format!(
            "range {range:?} is outside object {name} of {} bytes",
            bytes.len()
        )));
    }
    Ok(bytes.slice(from..to))
}

fn zeros(n: u64) -> Bytes {
    Bytes::from(vec![0u8; usize::try_from(n).unwrap_or(0)])
}

/// The replica's counters.
#[derive(Debug, Default)]
pub struct ReplicaStats {
    /// Objects this node wrote from its own hot bytes.
    pub written: AtomicU64,
    /// Objects fetched from a peer.
    pub fetched: AtomicU64,
    /// Writes, fetches and deletes that failed.
    pub failures: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    local: LocalSegments,
    pending: Mutex<HashMap<String, Pending>>,
    /// GC entries acknowledged per group, for the group's worker.
    reclaims: Mutex<HashMap<usize, Vec<ColdGcTarget>>>,
    /// Groups whose machine a snapshot replaced since their last repair.
    restored: Mutex<HashSet<usize>>,
    peers: OnceLock<Arc<dyn SegmentPeers>>,
    /// One fetch at a time (each holds a whole object in memory).
    fetching: tokio::sync::Mutex<()>,
    stats: ReplicaStats,
}

/// The local segment store of a cluster node, kept by every node from its
/// own applied state (see the module's documentation). Cheap to clone.
#[derive(Debug, Clone)]
pub struct ReplicaSegments {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ReplicaSegments {
    /// The replica over `local`.
    pub fn new(local: LocalSegments) -> Self {
        Self {
            inner: Arc::new(Inner {
                local,
                pending: Mutex::new(HashMap::new()),
                reclaims: Mutex::new(HashMap::new()),
                restored: Mutex::new(HashSet::new()),
                peers: OnceLock::new(),
                fetching: tokio::sync::Mutex::new(()),
                stats: ReplicaStats::default(),
            }),
        }
    }

    /// The store underneath.
    pub fn local(&self) -> &LocalSegments {
        &self.inner.local
    }

    /// The counters.
    pub fn stats(&self) -> &ReplicaStats {
        &self.inner.stats
    }

    /// Whether an object's pieces wait to be written.
    pub(crate) fn is_pending(&self, name: &str) -> bool {
        lock(&self.inner.pending).contains_key(name)
    }

    /// Takes the GC entries acknowledged in `group` since the last call.
    pub(crate) fn take_reclaims(&self, group: usize) -> Vec<ColdGcTarget> {
        lock(&self.inner.reclaims)
            .remove(&group)
            .unwrap_or_default()
    }

    /// Whether a snapshot replaced `group`'s machine since the last call.
    pub(crate) fn take_restored(&self, group: usize) -> bool {
        lock(&self.inner.restored).remove(&group)
    }

    /// The whole segment file of `name` (bytes and trailer), for a peer
    /// that lacks it; `None` when this node does not hold it whole.
    ///
    /// # Errors
    /// A file that cannot be read or fails its check.
    pub async fn segment_file(&self, name: &str) -> Result<Option<Bytes>, ColdError> {
        let local = self.inner.local.clone();
        let name = name.to_owned();
        tokio::task::spawn_blocking(move || local.whole_file(&name))
            .await
            .map_err(|e| ColdError::Store(format!("segment store task failed: {e}")))?
    }

    /// Fetches object `name` from a peer and keeps it, replacing a
    /// damaged file (`replace`); `size` is the object's when known.
    ///
    /// # Errors
    /// No peer (a single node), no peer that gave a whole file, or the
    /// local write failed.
    pub(crate) async fn fetch(
        &self,
        name: &str,
        size: Option<u64>,
        replace: bool,
    ) -> Result<(), ColdError> {
        let Some(peers) = self.inner.peers.get() else {
            return Err(ColdError::NotFound(name.to_owned()));
        };
        let _one = self.inner.fetching.lock().await;
        if !replace && self.inner.local.holds(name, size) {
            return Ok(());
        }
        let limit = size.map_or(FETCH_LIMIT, |s| s.saturating_add(TRAILER_LEN));
        let result = async {
            let file = peers
                .fetch(name, limit)
                .await
                .map_err(|e| ColdError::Store(format!("object {name}: no peer gave it: {e}")))?;
            let content = crate::local::check_file(name, &file, size)?;
            if replace {
                self.inner.local.delete(name).await?;
            }
            self.inner.local.put_parts(name, vec![content]).await
        }
        .await;
        if result.is_ok() && crate::starts::object_of(name).is_none() {
            self.fetch_sidecar(peers.as_ref(), name).await;
        }
        match &result {
            Ok(()) => {
                self.inner.stats.fetched.fetch_add(1, Ordering::Relaxed);
                tracing::info!(object = name, "segment file fetched from a peer");
            }
            Err(e) => {
                self.inner.stats.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(object = name, error = %e, "segment file fetch failed");
            }
        }
        result
    }

    /// Brings the message-start sidecar of a fetched object along when a
    /// peer has one (an object written before sidecars, or one of JSON
    /// streams only, has none; either way its reads then start exactly
    /// where asked).
    async fn fetch_sidecar(&self, peers: &dyn SegmentPeers, object: &str) {
        let name = crate::starts::sidecar_name(object);
        let limit =
            crate::starts::HEADER_LEN + 4 * u64::from(crate::starts::MAX_POSITIONS) + TRAILER_LEN;
        let kept = match peers.fetch(&name, limit).await {
            Ok(file) => match crate::local::check_file(&name, &file, None) {
                Ok(content) => self.inner.local.put_parts(&name, vec![content]).await,
                Err(e) => Err(e),
            },
            Err(why) => {
                tracing::debug!(object, error = %why, "no message-start sidecar from a peer");
                return;
            }
        };
        if let Err(e) = kept {
            tracing::warn!(object, error = %e, "cannot keep the message-start sidecar of a fetched object");
        }
    }

    async fn settle_group(&self, group: usize) {
        let names: Vec<String> = lock(&self.inner.pending)
            .iter()
            .filter(|(_, p)| p.group == group)
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            let (parts, size, sidecar) = match lock(&self.inner.pending).get(&name) {
                Some(p) => (p.parts(), p.size, p.sidecar()),
                None => continue,
            };
            // The leader wrote its own before it committed.
            if !self.inner.local.holds(&name, Some(size)) {
                // Message starts first, as the leader writes them.
                let written = match sidecar {
                    Some(sidecar) => {
                        let sidecar_name = crate::starts::sidecar_name(&name);
                        self.inner.local.put(&sidecar_name, sidecar).await
                    }
                    None => Ok(()),
                };
                match written {
                    Ok(()) => self.inner.local.put_parts(&name, parts).await,
                    Err(e) => Err(e),
                }
                .map_or_else(
                    |e| {
                        // The object comes from a peer when it is read or
                        // repaired.
                        self.inner.stats.failures.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(group, object = %name, error = %e, "cannot write this node's copy of a flushed object");
                    },
                    |()| {
                        self.inner.stats.written.fetch_add(1, Ordering::Relaxed);
                    },
                );
            }
            lock(&self.inner.pending).remove(&name);
        }
    }
}

impl SegmentReplica for ReplicaSegments {
    fn flushed(&self, group: usize, piece: FlushedPiece) {
        let chunk = piece.chunk;
        let mut pending = lock(&self.inner.pending);
        let entry = pending.entry(chunk.s3_path).or_insert_with(|| Pending {
            group,
            size: chunk.object_size,
            pieces: Vec::new(),
            starts: Vec::new(),
        });
        entry.pieces.push((chunk.object_offset, piece.bytes));
        if !piece.message_starts.is_empty() {
            entry.starts.push((
                chunk.object_offset,
                chunk.start_offset,
                piece.message_starts,
            ));
        }
    }

    fn reclaimed(&self, group: usize, reclaimed: Reclaimed) {
        lock(&self.inner.reclaims)
            .entry(group)
            .or_default()
            .extend(reclaimed.targets);
    }

    fn restored(&self, group: usize) {
        lock(&self.inner.restored).insert(group);
    }

    fn settle(&self, group: usize) -> LogFuture<()> {
        let this = self.clone();
        Box::pin(async move {
            let any = lock(&this.inner.pending).values().any(|p| p.group == group);
            if any {
                this.settle_group(group).await;
            }
        })
    }

    fn connect(&self, peers: Arc<dyn SegmentPeers>) {
        let _ = self.inner.peers.set(peers);
    }
}

impl ColdBackend for ReplicaSegments {
    fn put(&self, name: &str, bytes: Bytes) -> BoxFuture<'_, Result<(), ColdError>> {
        self.inner.local.put(name, bytes)
    }

    fn put_parts(&self, name: &str, parts: Vec<Bytes>) -> BoxFuture<'_, Result<(), ColdError>> {
        self.inner.local.put_parts(name, parts)
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> BoxFuture<'_, Result<Bytes, ColdError>> {
        let name = name.to_owned();
        Box::pin(async move {
            if let Some(object) = crate::starts::object_of(&name) {
                // A sidecar: from the pending object's pieces, else this
                // node's file (never a peer: an object fetched from one
                // brought its sidecar along, and objects without one are
                // read without).
                let pending = lock(&self.inner.pending).get(object).map(Pending::sidecar);
                return match pending {
                    Some(Some(sidecar)) => slice_of(&name, &sidecar, &range),
                    Some(None) => Err(ColdError::NotFound(name)),
                    None => match self.inner.local.get_range(&name, range.clone()).await {
                        Err(ColdError::Damaged(why)) if self.inner.peers.get().is_some() => {
                            tracing::warn!(object = %name, error = %why, "replacing a damaged sidecar from a peer");
                            self.fetch(&name, None, true).await?;
                            self.inner.local.get_range(&name, range).await
                        }
                        other => other,
                    },
                };
            }
            if let Some(bytes) = lock(&self.inner.pending)
                .get(&name)
                .and_then(|p| p.read(&range))
            {
                return Ok(bytes);
            }
            match self.inner.local.get_range(&name, range.clone()).await {
                Err(ColdError::NotFound(_)) if self.inner.peers.get().is_some() => {
                    self.fetch(&name, None, false).await?;
                }
                Err(ColdError::Damaged(why)) if self.inner.peers.get().is_some() => {
                    tracing::warn!(object = %name, error = %why, "replacing a damaged segment file from a peer");
                    self.fetch(&name, None, true).await?;
                }
                other => return other,
            }
            self.inner.local.get_range(&name, range).await
        })
    }

    fn delete(&self, name: &str) -> BoxFuture<'_, Result<(), ColdError>> {
        self.inner.local.delete(name)
    }

    fn list(&self, prefix: &str) -> BoxFuture<'_, Result<Vec<ObjectInfo>, ColdError>> {
        self.inner.local.list(prefix)
    }

    fn describe(&self) -> String {
        format!("replicated {}", self.inner.local.describe())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use strand::ColdChunkRef;

    fn store() -> (tempfile::TempDir, ReplicaSegments) {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalSegments::open(dir.path()).unwrap();
        (dir, ReplicaSegments::new(local))
    }

    fn piece(name: &str, size: u64, at: u64, bytes: &[&'static [u8]]) -> FlushedPiece {
        let len: u64 = bytes.iter().map(|b| b.len() as u64).sum();
        FlushedPiece {
            chunk: ColdChunkRef {
                start_offset: 100,
                end_offset: 100 + len,
                s3_path: name.to_owned(),
                object_size: size,
                object_offset: at,
                shared_object: true,
                payload_digest: String::new(),
            },
            bytes: bytes.iter().map(|b| Bytes::from_static(b)).collect(),
            message_starts: Vec::new(),
        }
    }

    #[tokio::test]
    async fn message_starts_are_served_pending_then_written_beside_the_object() {
        let (_dir, replica) = store();
        let name = "g000/p/2-b.pack";
        let sidecar = crate::starts::sidecar_name(name);
        // Stream offsets [100, 104) at object position 4, messages at 100
        // and 102; the piece at 0 has no starts (a JSON stream).
        let mut with = piece(name, 8, 4, &[b"wx", b"yz"]);
        with.message_starts = vec![100, 102];
        replica.flushed(0, with);
        replica.flushed(0, piece(name, 8, 0, &[b"abcd"]));
        let want = crate::starts::encode(&[4, 6]);
        let len = want.len() as u64;
        assert_eq!(replica.get_range(&sidecar, 0..len).await.unwrap(), want);
        assert!(replica.get_range(&sidecar, 0..len + 1).await.is_err());
        replica.settle(0).await;
        assert!(replica.local().holds(&sidecar, Some(len)));
        assert_eq!(replica.get_range(&sidecar, 0..len).await.unwrap(), want);
        // An object without starts has no sidecar, pending or written.
        let other = "g000/p/3-c.pack";
        replica.flushed(0, piece(other, 4, 0, &[b"abcd"]));
        let other_sidecar = crate::starts::sidecar_name(other);
        assert!(matches!(
            replica.get_range(&other_sidecar, 0..12).await,
            Err(ColdError::NotFound(_))
        ));
        replica.settle(0).await;
        assert!(!replica.local().holds(&other_sidecar, None));
        assert!(matches!(
            replica.get_range(&other_sidecar, 0..12).await,
            Err(ColdError::NotFound(_))
        ));
    }

    #[derive(Debug)]
    struct Peers(Mutex<Result<Bytes, String>>);

    impl SegmentPeers for Peers {
        fn fetch(&self, _name: &str, _limit: u64) -> LogFuture<Result<Bytes, String>> {
            let answer = lock(&self.0).clone();
            Box::pin(async move { answer })
        }
    }

    #[tokio::test]
    async fn pieces_are_served_from_memory_then_written_whole_with_zeros_between() {
        let (_dir, replica) = store();
        let name = "g000/p/1-a.pack";
        // Pieces at 0 and 8 of a 12-byte object; 4..8 was a stale piece.
        replica.flushed(0, piece(name, 12, 8, &[b"wx", b"yz"]));
        replica.flushed(0, piece(name, 12, 0, &[b"ab", b"cd"]));
        assert!(replica.is_pending(name));
        assert_eq!(&replica.get_range(name, 1..3).await.unwrap()[..], b"bc");
        assert_eq!(&replica.get_range(name, 9..12).await.unwrap()[..], b"xyz");
        // A group's settle leaves the others' pieces alone.
        replica.settle(1).await;
        assert!(replica.is_pending(name));
        replica.settle(0).await;
        assert!(!replica.is_pending(name));
        assert!(replica.local().holds(name, Some(12)));
        assert_eq!(
            &replica.get_range(name, 0..12).await.unwrap()[..],
            b"abcd\0\0\0\0wxyz"
        );
        assert_eq!(replica.stats().written.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn an_object_the_node_already_holds_is_not_written_again() {
        let (_dir, replica) = store();
        let name = "g000/p/2-b.pack";
        replica
            .put(name, Bytes::from_static(b"leader"))
            .await
            .unwrap();
        replica.flushed(0, piece(name, 6, 0, &[b"leader"]));
        replica.settle(0).await;
        assert_eq!(replica.stats().written.load(Ordering::Relaxed), 0);
        assert_eq!(&replica.get_range(name, 0..6).await.unwrap()[..], b"leader");
    }

    #[tokio::test]
    async fn a_missing_object_is_fetched_from_a_peer_only_when_whole() {
        let (_dir, replica) = store();
        let name = "g000/p/3-c.pack";
        // Without peers a missing object is not found.
        assert!(matches!(
            replica.get_range(name, 0..2).await,
            Err(ColdError::NotFound(_))
        ));
        let (_other, source) = store();
        source
            .put(name, Bytes::from_static(b"from a peer"))
            .await
            .unwrap();
        let good = source.segment_file(name).await.unwrap().unwrap();
        let mut torn = good.to_vec();
        torn[3] ^= 1;
        let peers = Arc::new(Peers(Mutex::new(Ok(Bytes::from(torn)))));
        replica.connect(Arc::clone(&peers) as Arc<dyn SegmentPeers>);
        // A damaged file from the peer is refused and not kept.
        let refused = replica.get_range(name, 0..4).await.unwrap_err();
        assert!(
            refused.to_string().contains("checksum mismatch"),
            "{refused}"
        );
        assert!(!replica.local().holds(name, None));
        *lock(&peers.0) = Ok(good);
        assert_eq!(
            &replica.get_range(name, 5..11).await.unwrap()[..],
            b"a peer"
        );
        assert!(replica.local().holds(name, Some(11)));
        assert_eq!(replica.stats().fetched.load(Ordering::Relaxed), 1);
        assert_eq!(replica.stats().failures.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_damaged_file_is_replaced_from_a_peer() {
        let (dir, replica) = store();
        let name = "g000/p/4-d.pack";
        replica
            .put(name, Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        let good = replica.segment_file(name).await.unwrap().unwrap();
        let path = dir.path().join(name);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[0] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        // The next process finds it damaged on its first read.
        let replica = ReplicaSegments::new(LocalSegments::open(dir.path()).unwrap());
        replica.connect(Arc::new(Peers(Mutex::new(Ok(good)))));
        assert_eq!(&replica.get_range(name, 0..3).await.unwrap()[..], b"012");
        assert_eq!(replica.stats().fetched.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn reclaims_and_restores_are_kept_per_group() {
        let (_dir, replica) = store();
        replica.reclaimed(
            2,
            Reclaimed {
                targets: vec![ColdGcTarget::Paths(vec!["g002/p/x.pack".to_owned()])],
            },
        );
        replica.restored(2);
        assert!(replica.take_reclaims(1).is_empty());
        assert_eq!(replica.take_reclaims(2).len(), 1);
        assert!(replica.take_reclaims(2).is_empty());
        assert!(!replica.take_restored(1));
        assert!(replica.take_restored(2));
        assert!(!replica.take_restored(2));
    }
}
