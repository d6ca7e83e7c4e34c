//! Forgetting a group: a cluster's member that the placement moved off
//! a group drops what it kept of it — the group's Raft log, snapshots and
//! machine — without a restart, and starts the group's Raft node again
//! from nothing (as a node that never held it), so that the group comes
//! back to it whole, as any new member's does, should the placement give
//! it the group again.
//!
//! When: the balancing round ([`crate::balance`]) forgets a group once
//! the node does not hold it, the placement gives it no vote in it, and
//! the group's leader (its own view, the freshest of the members') has a
//! committed and applied membership naming this node neither voter nor
//! learner: no configuration the group can still use counts on this
//! node's copy, so dropping it costs no durability.
//!
//! Votes: a node that forgot a group refuses its vote in it until its
//! log names it one of the group's voters again. With its log gone it
//! would otherwise grant its vote to any candidate — among them a stale
//! member still using a configuration that counted this node, which
//! could then win with votes that no longer vouch for any entry. (A
//! forgotten group's vote record is kept, so a stale leader of a lower
//! term is refused as before.)
//!
//! Files: the new directory (the marker [`FORGOTTEN_FILE`] and a log
//! holding only the vote) is written beside the group's as
//! `group-N.new`, then the group's directory is moved to `group-N.old`,
//! the new one into its place, and the old one deleted; [`settle`]
//! finishes or undoes a swap a crash interrupted, so a start finds either
//! the old directory (the group is forgotten again later) or the new one.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use openraft::storage::RaftLogStorage;

use crate::error::StartError;
use crate::log_store::{Fsync, LogStore};
use crate::proposer::{Current, IN_FLIGHT, RaftGroup};
use crate::segment::LogError;
use crate::snapshot_file::{io_at as at, sync_dir};
use crate::types::NodeId;

/// The marker in a group's directory that this node forgot the group
/// (it refuses its vote until a log naming it a voter came back).
pub(crate) const FORGOTTEN_FILE: &str = "forgotten";

/// How long forgetting waits for the group's proposals on their way to
/// finish.
const PROPOSALS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    dir.with_file_name(name)
}

fn sync_parent(dir: &Path) -> std::io::Result<()> {
    match dir.parent() {
        Some(parent) => std::fs::File::open(parent)?.sync_all(),
        None => Ok(()),
    }
}

fn remove_all(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Finishes or undoes a swap of the group directory `dir` that a crash
/// interrupted (see the module's text) and answers whether this node
/// forgot the group.
///
/// # Errors
/// The directories could not be moved or deleted.
pub(crate) fn settle(dir: &Path) -> Result<bool, StartError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |e: std::io::Error| StartError::from(LogError::io(&path, e))
    };
    let fresh = sibling(dir, ".new");
    let old = sibling(dir, ".old");
    if fresh.exists() {
        if dir.exists() {
            // The swap had not begun: the group's directory is whole.
            remove_all(&fresh).map_err(io(&fresh))?;
        } else {
            // The old directory was moved away: the new one goes in.
            std::fs::rename(&fresh, dir).map_err(io(dir))?;
            sync_parent(dir).map_err(io(dir))?;
        }
    }
    if dir.exists() {
        remove_all(&old).map_err(io(&old))?;
    } else if old.exists() {
        // Not reached by a swap (the new directory is moved in before the
        // old one is deleted); kept whole rather than lost.
        std::fs::rename(&old, dir).map_err(io(dir))?;
    }
    Ok(dir.join(FORGOTTEN_FILE).exists())
}

/// Writes the directory that replaces group directory `dir`: the marker
/// and a log holding only `vote`; its path.
async fn write_fresh(dir: &Path, vote: Option<openraft::Vote<NodeId>>) -> Result<PathBuf, String> {
    let fresh = sibling(dir, ".new");
    remove_all(&fresh).map_err(at(&fresh))?;
    std::fs::create_dir_all(&fresh).map_err(at(&fresh))?;
    let marker = fresh.join(FORGOTTEN_FILE);
    std::fs::write(&marker, b"")
        .and_then(|()| std::fs::File::open(&marker)?.sync_all())
        .map_err(at(&marker))?;
    if let Some(vote) = vote {
        let (mut log, _) =
            LogStore::open(&fresh.join("log"), Fsync::Always).map_err(|e| e.to_string())?;
        let saved = log.save_vote(&vote).await.map_err(|e| e.to_string());
        let closing = log.clone();
        tokio::task::spawn_blocking(move || closing.close())
            .await
            .map_err(|e| e.to_string())?;
        saved?;
    }
    sync_dir(&fresh)?;
    Ok(fresh)
}

/// Moves `fresh` into group directory `dir`'s place and deletes the old
/// one.
fn swap_in(dir: &Path, fresh: &Path) -> Result<(), String> {
    let old = sibling(dir, ".old");
    remove_all(&old).map_err(at(&old))?;
    std::fs::rename(dir, &old).map_err(at(dir))?;
    std::fs::rename(fresh, dir).map_err(at(dir))?;
    sync_parent(dir).map_err(at(dir))?;
    remove_all(&old).map_err(at(&old))
}

impl RaftGroup {
    /// Forgets the group on this node (see the module's text): stops its
    /// Raft node, empties its machine, replaces its directory with one
    /// holding only its vote, and starts its Raft node again on it.
    /// Proposals made meanwhile wait, then go on through the new node
    /// (which forwards them).
    ///
    /// # Errors
    /// A node without peers, a group that stopped, or a file that could
    /// not be written; the group's Raft node runs again on whatever
    /// directory it has then (a start settles it the same way).
    pub(crate) async fn forget(&self) -> Result<(), String> {
        let Some(opener) = &self.reopen else {
            return Err("a node without peers keeps its groups".to_owned());
        };
        let stopped = self.stopping.lock().await;
        if *stopped {
            return Err("the group has stopped".to_owned());
        }
        let permits = u32::try_from(IN_FLIGHT).unwrap_or(u32::MAX);
        let _places =
            tokio::time::timeout(PROPOSALS_WAIT, self.places().acquire_many_owned(permits))
                .await
                .map_err(|_| "proposals still wait for their answer".to_owned())?
                .map_err(|_| "the group's proposer has stopped".to_owned())?;
        let Current {
            raft,
            log,
            snapshots,
        } = self.current();
        let vote = log.vote();
        if let Err(e) = raft.shutdown().await {
            tracing::debug!(group = opener.group, error = %e, "the group's raft node had stopped");
        }
        tokio::task::spawn_blocking(move || {
            log.close();
            if let Some(snapshots) = snapshots {
                snapshots.close();
            }
        })
        .await
        .map_err(|e| e.to_string())?;
        let dropped = async {
            opener.applier.reset().await?;
            let fresh = write_fresh(&opener.dir, vote).await?;
            let dir = opener.dir.clone();
            tokio::task::spawn_blocking(move || swap_in(&dir, &fresh))
                .await
                .map_err(|e| e.to_string())?
        }
        .await;
        let forgotten = match crate::forget::settle(&opener.dir) {
            Ok(forgotten) => forgotten,
            Err(e) => {
                tracing::error!(group = opener.group, error = %e, "a forgotten group's directory");
                false
            }
        };
        // Open again whatever the directory holds now: the fresh one, or
        // (the swap failed) the old one, replayed into the machine.
        let opened = opener.open().await.map_err(|e| e.to_string());
        match opened {
            Ok(opened) => {
                self.replace(opened.current());
                self.forgotten.store(forgotten, Ordering::SeqCst);
            }
            Err(e) => {
                tracing::error!(group = opener.group, error = %e, "the group's raft node could not be opened again; it stays stopped until a restart");
                return Err(e);
            }
        }
        dropped
    }

    /// Marks whether this node forgot the group (at start: the marker).
    pub(crate) fn set_forgotten(&self, forgotten: bool) {
        self.forgotten.store(forgotten, Ordering::SeqCst);
    }

    /// Whether this node refuses its vote in the group: it forgot the
    /// group and its log does not name it a voter again yet. Once it does,
    /// the mark goes (and its file).
    pub(crate) fn refuses_votes(&self, me: NodeId) -> bool {
        if !self.forgotten.load(Ordering::SeqCst) {
            return false;
        }
        let voter = self
            .raft()
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .any(|id| id == me);
        if !voter {
            return true;
        }
        self.forgotten.store(false, Ordering::SeqCst);
        if let Some(opener) = &self.reopen {
            let marker = opener.dir.join(FORGOTTEN_FILE);
            if let Err(e) = std::fs::remove_file(&marker)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(file = %marker.display(), error = %e, "cannot delete a forgotten group's marker");
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn settle_finishes_or_undoes_an_interrupted_swap() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("group-3");
        let fresh = sibling(&dir, ".new");
        let old = sibling(&dir, ".old");
        let put = |d: &Path, what: &str| {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("what"), what).unwrap();
        };
        let what = |d: &Path| std::fs::read_to_string(d.join("what")).unwrap();
        // Nothing begun: nothing to do.
        put(&dir, "old");
        assert!(!settle(&dir).unwrap());
        // The new directory written, the swap not begun: it goes.
        put(&fresh, "new");
        std::fs::write(fresh.join(FORGOTTEN_FILE), b"").unwrap();
        assert!(!settle(&dir).unwrap());
        assert_eq!(what(&dir), "old");
        assert!(!fresh.exists());
        // The old directory moved away: the new one goes in.
        std::fs::rename(&dir, &old).unwrap();
        put(&fresh, "new");
        std::fs::write(fresh.join(FORGOTTEN_FILE), b"").unwrap();
        assert!(settle(&dir).unwrap());
        assert_eq!(what(&dir), "new");
        assert!(!old.exists() && !fresh.exists());
        // Moved in, the old one not deleted yet.
        put(&old, "old");
        assert!(settle(&dir).unwrap());
        assert!(!old.exists());
        assert_eq!(what(&dir), "new");
        // A lone old directory is kept whole.
        std::fs::remove_dir_all(&dir).unwrap();
        put(&old, "old");
        assert!(!settle(&dir).unwrap());
        assert_eq!(what(&dir), "old");
    }
}
