//! The state-machine adapter: committed entries go to the group's owner
//! task (through its [`GroupApplier`]), which applies them to the group's
//! `StreamStateMachine` with the same function the in-memory engine uses;
//! the outcomes go back to the proposers. Snapshots are the machine's
//! binary snapshot (`docs/snapshot-format.md`), kept in one file under the
//! group's directory beside the Raft metadata it covers.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use strand_engine::{EntryOutcome, GroupApplier, GroupEntry, PendingSnapshot};

use crate::types::{NodeId, TypeConfig};

const MAGIC: &[u8; 8] = b"STRDSNP1";

type Meta = SnapshotMeta<NodeId, BasicNode>;

/// Snapshots built since start (for unique snapshot ids).
#[derive(Default)]
struct Current {
    counter: u64,
}

/// One group's state machine, as openraft sees it.
pub struct GroupStateMachine {
    applier: GroupApplier,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    dir: PathBuf,
    current: Arc<Mutex<Current>>,
}

impl std::fmt::Debug for GroupStateMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupStateMachine")
            .field("last_applied", &self.last_applied)
            .finish_non_exhaustive()
    }
}

fn sm_err(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::write_state_machine(AnyError::error(e.to_string())),
    }
}

fn snap_err(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::write_snapshot(None, AnyError::error(e.to_string())),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join("snapshot.bin")
}

/// Reads the snapshot file: its metadata and the machine's bytes.
fn read_snapshot_file(dir: &Path) -> Result<Option<(Meta, Vec<u8>)>, String> {
    let path = snapshot_path(dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let bad = |why: &str| format!("{}: not a strand-raft snapshot file: {why}", path.display());
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(bad("bad magic"));
    }
    let meta_len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    let body = 12usize.saturating_add(meta_len);
    if bytes.len() < body {
        return Err(bad("metadata cut short"));
    }
    let meta: Meta =
        rmp_serde::from_slice(&bytes[12..body]).map_err(|e| bad(&format!("metadata: {e}")))?;
    Ok(Some((meta, bytes[body..].to_vec())))
}

/// Writes the snapshot file atomically: a temporary file, synced, renamed
/// over the old one, then the directory synced.
fn write_snapshot_file(dir: &Path, meta: &Meta, data: &[u8]) -> Result<(), String> {
    use std::io::Write;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let meta_bytes = rmp_serde::to_vec_named(meta).map_err(|e| e.to_string())?;
    let meta_len = u32::try_from(meta_bytes.len()).map_err(|e| e.to_string())?;
    let tmp = dir.join("snapshot.bin.tmp");
    let mut file = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    file.write_all(MAGIC)
        .and_then(|()| file.write_all(&meta_len.to_le_bytes()))
        .and_then(|()| file.write_all(&meta_bytes))
        .and_then(|()| file.write_all(data))
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    let path = snapshot_path(dir);
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

impl GroupStateMachine {
    /// Opens the group's state machine: restores the machine from the
    /// snapshot in `dir` when there is one (the log replays what follows).
    ///
    /// # Errors
    /// An unreadable snapshot file or one that does not restore.
    pub async fn open(dir: &Path, applier: GroupApplier) -> Result<Self, String> {
        let mut sm = Self {
            applier,
            last_applied: None,
            membership: StoredMembership::default(),
            dir: dir.to_path_buf(),
            current: Arc::new(Mutex::new(Current::default())),
        };
        if let Some((meta, data)) = read_snapshot_file(dir)? {
            sm.applier
                .restore(data)
                .await
                .map_err(|e| format!("{}: {e}", snapshot_path(dir).display()))?;
            sm.last_applied = meta.last_log_id;
            sm.membership = meta.last_membership;
        }
        Ok(sm)
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogId<NodeId>> {
        self.last_applied
    }
}

/// Builds a snapshot of the state after the entries applied when it was
/// asked for.
pub struct SnapshotBuilder {
    data: Option<PendingSnapshot>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    dir: PathBuf,
    current: Arc<Mutex<Current>>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let data = match self.data.take() {
            Some(pending) => pending.wait().await.map_err(snap_err)?,
            None => return Err(snap_err("the snapshot was already built")),
        };
        let counter = {
            let mut current = lock(&self.current);
            current.counter += 1;
            current.counter
        };
        let snapshot_id = match &self.last_applied {
            Some(l) => format!("{}-{}-{counter}", l.leader_id, l.index),
            None => format!("none-{counter}"),
        };
        let meta = Meta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id,
        };
        let dir = self.dir.clone();
        let (meta_w, data) = tokio::task::spawn_blocking(move || {
            write_snapshot_file(&dir, &meta, &data).map(|()| (meta, data))
        })
        .await
        .map_err(snap_err)?
        .map_err(snap_err)?;
        tracing::debug!(dir = %self.dir.display(), bytes = data.len(), "snapshot written");
        Ok(Snapshot {
            meta: meta_w,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for GroupStateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<EntryOutcome>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut outcomes = Vec::new();
        let mut normal: Vec<GroupEntry> = Vec::new();
        let mut slots: Vec<usize> = Vec::new();
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => outcomes.push(EntryOutcome::Nothing),
                EntryPayload::Normal(e) => {
                    slots.push(outcomes.len());
                    outcomes.push(EntryOutcome::Nothing);
                    normal.push(e);
                }
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m);
                    outcomes.push(EntryOutcome::Nothing);
                }
            }
        }
        if !normal.is_empty() {
            let applied = self.applier.apply(normal).await.map_err(sm_err)?;
            for (slot, outcome) in slots.into_iter().zip(applied) {
                outcomes[slot] = outcome;
            }
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Queued now, behind every entry applied so far and before any
        // later one: the snapshot is exactly the state at `last_applied`.
        SnapshotBuilder {
            data: Some(self.applier.snapshot()),
            last_applied: self.last_applied,
            membership: self.membership.clone(),
            dir: self.dir.clone(),
            current: Arc::clone(&self.current),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let dir = self.dir.clone();
        let meta_w = meta.clone();
        let data = tokio::task::spawn_blocking(move || {
            write_snapshot_file(&dir, &meta_w, &data).map(|()| data)
        })
        .await
        .map_err(snap_err)?
        .map_err(snap_err)?;
        self.applier.restore(data).await.map_err(sm_err)?;
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let dir = self.dir.clone();
        let found = tokio::task::spawn_blocking(move || read_snapshot_file(&dir))
            .await
            .map_err(snap_err)?
            .map_err(snap_err)?;
        Ok(found.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
