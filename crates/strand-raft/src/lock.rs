//! The data directory's lock: one node per data directory.

use std::path::Path;

use crate::error::StartError;
use crate::segment::LogError;

/// The data directory's lock: an exclusive `flock` on `DIR/strand.lock`,
/// taken before anything in the directory is read and held until every
/// group of the node has shut down (or the process ends: the kernel drops
/// it with the descriptor, so a killed node leaves no stale lock).
#[derive(Debug)]
pub(crate) struct DirLock {
    file: std::sync::Mutex<Option<std::fs::File>>,
    /// Groups still running; the last one to shut down releases the lock.
    running: std::sync::atomic::AtomicUsize,
}

impl DirLock {
    /// Takes the lock of `dir` for a node of `groups` groups.
    pub(crate) fn take(dir: &Path, groups: usize) -> Result<Self, StartError> {
        std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        let path = dir.join("strand.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| LogError::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Self {
                file: std::sync::Mutex::new(Some(file)),
                running: std::sync::atomic::AtomicUsize::new(groups),
            }),
            Err(std::fs::TryLockError::WouldBlock) => Err(StartError::Locked {
                dir: dir.to_path_buf(),
                lock: path,
            }),
            Err(std::fs::TryLockError::Error(e)) => Err(LogError::io(&path, e).into()),
        }
    }

    /// One group has shut down.
    pub(crate) fn group_stopped(&self) {
        use std::sync::atomic::Ordering;
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            let file = match self.file.lock() {
                Ok(mut guard) => guard.take(),
                Err(poisoned) => poisoned.into_inner().take(),
            };
            // Closing the descriptor releases the lock.
            drop(file);
        }
    }
}
