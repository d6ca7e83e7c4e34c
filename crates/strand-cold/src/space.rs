//! Free-space reserves on a filesystem (`--min-free-disk-bytes`).
//!
//! A durable node's Raft log, snapshots and segment files share one
//! filesystem. If the log cannot write, its group stops until the node
//! restarts, so the server refuses writes (`507`) while the filesystem
//! holds less than the reserve, and the segment store keeps half of it for
//! the log: what is already in memory may still be flushed, and the log
//! always has room for the flushes', deletes' and snapshots' small
//! records. Both ask a [`DiskSpace`].

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Bytes an unprivileged writer may still use on the filesystem holding
/// `path` (statvfs: available blocks times the fragment size).
///
/// # Errors
/// When the filesystem cannot be queried.
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    let st = rustix::fs::statvfs(path).map_err(io::Error::from)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// How long a sample far above the reserve is trusted.
const FRESH_MS: u64 = 100;

/// The free space of the filesystem holding a data directory, sampled on
/// demand: a sample, less the bytes admitted since, is reused for
/// 100 ms while it is more than twice the reserve; closer to the
/// reserve every write takes a new one.
#[derive(Debug)]
pub struct DiskSpace {
    dir: PathBuf,
    reserve: u64,
    started: Instant,
    /// The last sample and when it was taken (milliseconds since
    /// `started`, plus one: 0 means never).
    free: AtomicU64,
    sampled_at: AtomicU64,
    /// Bytes admitted since the last sample.
    since: AtomicU64,
}

/// A write refused for want of space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LowDisk {
    /// Free bytes when it was refused.
    pub free: u64,
    /// The reserve.
    pub reserve: u64,
}

impl DiskSpace {
    /// The reserve of `reserve` bytes on the filesystem holding `dir`.
    pub fn new(dir: &Path, reserve: u64) -> Self {
        Self {
            dir: dir.to_path_buf(),
            reserve,
            started: Instant::now(),
            free: AtomicU64::new(0),
            sampled_at: AtomicU64::new(0),
            since: AtomicU64::new(0),
        }
    }

    /// The reserve in bytes.
    pub fn reserve(&self) -> u64 {
        self.reserve
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1)
    }

    /// Free bytes now, or at most 100 ms ago when that was far
    /// above the reserve. A filesystem that cannot be queried counts as
    /// having room (the write itself will say what is wrong).
    pub fn free(&self) -> u64 {
        let at = self.sampled_at.load(Ordering::Acquire);
        let now = self.now_ms();
        let estimate = self
            .free
            .load(Ordering::Acquire)
            .saturating_sub(self.since.load(Ordering::Acquire));
        if at != 0 && now.saturating_sub(at) < FRESH_MS && estimate / 2 > self.reserve {
            return estimate;
        }
        let free = free_bytes(&self.dir).unwrap_or(u64::MAX);
        self.free.store(free, Ordering::Release);
        self.since.store(0, Ordering::Release);
        self.sampled_at.store(now, Ordering::Release);
        free
    }

    /// Lets a write of `bytes` in, or says why not: the filesystem would
    /// hold less than the reserve after it.
    ///
    /// # Errors
    /// [`LowDisk`] when the write would pass into the reserve.
    pub fn admit(&self, bytes: u64) -> Result<(), LowDisk> {
        if self.reserve == 0 {
            return Ok(());
        }
        let free = self.free();
        if free < self.reserve.saturating_add(bytes) {
            return Err(LowDisk {
                free,
                reserve: self.reserve,
            });
        }
        self.since.fetch_add(bytes, Ordering::AcqRel);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_beyond_the_disk_refuses_and_none_admits() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_bytes(dir.path()).unwrap();
        assert!(free > 0);
        let space = DiskSpace::new(dir.path(), u64::MAX / 2);
        let refused = space.admit(1).unwrap_err();
        assert_eq!(refused.reserve, u64::MAX / 2);
        assert!(refused.free > 0 && refused.free < u64::MAX / 2);
        assert!(DiskSpace::new(dir.path(), 0).admit(u64::MAX).is_ok());
        // A small reserve admits a small write, not one larger than the disk.
        let space = DiskSpace::new(dir.path(), 1);
        assert!(space.admit(1).is_ok());
        assert!(space.admit(u64::MAX / 2).is_err());
    }
}
