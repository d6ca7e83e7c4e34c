//! The state-machine adapter: committed entries go to the group's owner
//! task (through its [`GroupApplier`]), which applies them to the group's
//! `StreamStateMachine` with the same function the in-memory engine uses;
//! the outcomes go back to the proposers. Snapshots are the machine's
//! binary snapshot (`docs/snapshot-format.md`), encoded straight into a
//! file of the group's directory and read from files when sent, received
//! or restored ([`crate::snapshot_file`]): never held whole in memory.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, StorageError,
    StorageIOError, StoredMembership,
};
use strand_engine::{EntryOutcome, GroupApplier, GroupEntry, PendingSnapshot};

use crate::snapshot_file::{BuildSink, Meta, SnapshotDir, SnapshotFile};
use crate::space::SpaceWait;
use crate::types::{NodeId, TypeConfig};

/// One group's state machine, as openraft sees it.
pub struct GroupStateMachine {
    applier: GroupApplier,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    files: Arc<SnapshotDir>,
    /// Snapshots built since start (for unique snapshot ids).
    built: Arc<AtomicU64>,
    /// The group's waits for disk space, shared with its log.
    space: Arc<SpaceWait>,
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

impl GroupStateMachine {
    /// Opens the group's state machine: restores the machine from the
    /// current snapshot in `dir` when there is one (the log replays what
    /// follows), reading the file as it decodes.
    ///
    /// # Errors
    /// Damaged snapshot files (see `snapshot_file`) or a snapshot that
    /// does not restore; the message names the file.
    pub async fn open(dir: &Path, applier: GroupApplier) -> Result<Self, String> {
        let owned = dir.to_path_buf();
        let (files, found) = tokio::task::spawn_blocking(move || SnapshotDir::open(&owned))
            .await
            .map_err(|e| e.to_string())??;
        let mut sm = Self {
            applier,
            last_applied: None,
            membership: StoredMembership::default(),
            files: Arc::new(files),
            built: Arc::new(AtomicU64::new(0)),
            space: Arc::default(),
        };
        if let Some((meta, file)) = found {
            sm.applier
                .restore_from(Box::new(file))
                .await
                .map_err(|e| format!("{}: the snapshot: {e}", dir.display()))?;
            sm.last_applied = meta.last_log_id;
            sm.membership = meta.last_membership;
        }
        Ok(sm)
    }

    /// Shares the group's waits for disk space (its log's): a snapshot
    /// write that finds the disk full waits, and the group takes no new
    /// writes meanwhile.
    pub(crate) fn share_space(&mut self, space: Arc<SpaceWait>) {
        self.space = space;
    }

    /// The group's snapshot files (for its status).
    pub(crate) fn files(&self) -> Arc<SnapshotDir> {
        Arc::clone(&self.files)
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogId<NodeId>> {
        self.last_applied
    }
}

/// Builds a snapshot of the state after the entries applied when it was
/// asked for.
pub struct SnapshotBuilder {
    data: Option<(u64, PendingSnapshot)>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    files: Arc<SnapshotDir>,
    /// Snapshots built since start (for unique snapshot ids).
    built: Arc<AtomicU64>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let (seq, pending) = match self.data.take() {
            Some(data) => data,
            None => return Err(snap_err("the snapshot was already built")),
        };
        let tmp = self.files.building_path(seq);
        if let Err(e) = pending.wait().await {
            self.files.discard(&tmp);
            return Err(snap_err(e));
        }
        let counter = self.built.fetch_add(1, Ordering::Relaxed) + 1;
        let snapshot_id = match &self.last_applied {
            Some(l) => format!("{}-{}-{counter}", l.leader_id, l.index),
            None => format!("none-{counter}"),
        };
        let meta = Meta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id,
        };
        let files = Arc::clone(&self.files);
        let meta_w = meta.clone();
        let (file, current) =
            tokio::task::spawn_blocking(move || files.commit(seq, &tmp, &meta_w, false))
                .await
                .map_err(snap_err)?
                .map_err(snap_err)?;
        tracing::debug!(current, snapshot = %meta.snapshot_id, "snapshot written");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(SnapshotFile::reading(file)),
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
        // Without a file to write into, the builder fails when asked.
        let data = match self.files.building(Arc::clone(&self.space)) {
            Ok((seq, sink)) => {
                let sink: Box<BuildSink> = Box::new(sink);
                Some((seq, self.applier.snapshot_into(sink)))
            }
            Err(e) => {
                tracing::warn!(error = %e, "no file for a snapshot");
                None
            }
        };
        SnapshotBuilder {
            data,
            last_applied: self.last_applied,
            membership: self.membership.clone(),
            files: Arc::clone(&self.files),
            built: Arc::clone(&self.built),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<SnapshotFile>, StorageError<NodeId>> {
        let files = Arc::clone(&self.files);
        let file = tokio::task::spawn_blocking(move || files.receiving())
            .await
            .map_err(snap_err)?
            .map_err(snap_err)?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StorageError<NodeId>> {
        let (file, received) = snapshot.into_received();
        let Some((seq, path)) = received else {
            return Err(snap_err("installing a snapshot that was not received"));
        };
        let file = file.into_std().await;
        let synced = tokio::task::spawn_blocking(move || {
            file.sync_all().map(|()| file).map_err(|e| e.to_string())
        })
        .await
        .map_err(snap_err)?;
        if let Err(e) = synced {
            self.files.discard(&path);
            return Err(snap_err(e));
        }
        // Restored from the durable file first; it becomes the current
        // snapshot only when it restored (a crash in between restarts from
        // the previous snapshot and the log, which still holds what it
        // covers: openraft purges only after this returns).
        let reader = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                self.files.discard(&path);
                return Err(snap_err(format!("{}: {e}", path.display())));
            }
        };
        if let Err(e) = self.applier.restore_from(Box::new(reader)).await {
            self.files.discard(&path);
            return Err(sm_err(e));
        }
        let files = Arc::clone(&self.files);
        let meta_w = meta.clone();
        tokio::task::spawn_blocking(move || files.commit(seq, &path, &meta_w, true))
            .await
            .map_err(snap_err)?
            .map_err(snap_err)?;
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let files = Arc::clone(&self.files);
        let found = tokio::task::spawn_blocking(move || files.current())
            .await
            .map_err(snap_err)?
            .map_err(snap_err)?;
        Ok(found.map(|(meta, file)| Snapshot {
            meta,
            snapshot: Box::new(SnapshotFile::reading(file)),
        }))
    }
}
