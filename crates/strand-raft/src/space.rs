//! Waiting for disk space: a group's log writer and snapshot builder try
//! a write the filesystem refused for want of room again until it fits,
//! instead of failing (which would stop the group's Raft core), and say
//! meanwhile that the group should take no new writes.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// The first pause before a refused write is tried again; it doubles up
/// to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// One group's writers' waits for disk space.
#[derive(Debug, Default)]
pub(crate) struct SpaceWait {
    /// Writers waiting now.
    waiting: AtomicUsize,
    /// Writes that waited, since start.
    waits: AtomicU64,
    /// Set when the log closes: a waiting writer gives up.
    closing: AtomicBool,
}

impl SpaceWait {
    /// True while a writer of the group waits for space.
    pub(crate) fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }

    /// Writes that found the disk full and waited, since start.
    pub(crate) fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// Makes waiting writers give up (their writes fail).
    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Runs `attempt` (blocking) until it succeeds or fails for another
    /// reason than a full filesystem (`ENOSPC`, `EDQUOT`), pausing 50 ms,
    /// doubling to 1 s, between tries; `what` and `path` name the write in
    /// the node's log. `attempt` must leave nothing behind when it fails:
    /// a retried write starts where the failed one did.
    pub(crate) fn retry<T>(
        &self,
        what: &str,
        path: &Path,
        mut attempt: impl FnMut() -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        let mut pause = FIRST_PAUSE;
        let mut waited = false;
        let result = loop {
            match attempt() {
                Err(e) if out_of_space(&e) && !self.closing.load(Ordering::Relaxed) => {
                    if !waited {
                        waited = true;
                        self.waits.fetch_add(1, Ordering::Relaxed);
                        self.waiting.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(file = %path.display(), error = %e, "the disk is full: the {what} waits for space");
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                other => break other,
            }
        };
        if waited {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            if result.is_ok() {
                tracing::info!(file = %path.display(), "the {what} is written: the disk had space again");
            }
        }
        result
    }
}

/// True for the errors of a filesystem without room: no space, or the
/// quota spent.
fn out_of_space(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn a_full_disk_is_waited_out_and_other_errors_are_not() {
        let space = SpaceWait::default();
        let mut tries = 0;
        let done = space.retry("test write", Path::new("f"), || {
            tries += 1;
            if tries < 3 {
                // Another thread would see the wait here.
                Err(Error::from(ErrorKind::StorageFull))
            } else {
                Ok(tries)
            }
        });
        assert_eq!(done.unwrap(), 3);
        assert_eq!(space.waits(), 1);
        assert!(!space.waiting());

        let mut tries = 0;
        let failed = space.retry("test write", Path::new("f"), || -> std::io::Result<()> {
            tries += 1;
            Err(Error::from(ErrorKind::PermissionDenied))
        });
        assert_eq!(failed.unwrap_err().kind(), ErrorKind::PermissionDenied);
        assert_eq!(tries, 1);

        space.close();
        let given_up = space.retry("test write", Path::new("f"), || -> std::io::Result<()> {
            Err(Error::from(ErrorKind::QuotaExceeded))
        });
        assert_eq!(given_up.unwrap_err().kind(), ErrorKind::QuotaExceeded);
        assert!(!space.waiting());
    }
}
