//! strand-testkit: test support shared by strand's integration tests and
//! `xtask`, which are different crates and so cannot share a module.
//!
//! It holds [`ChildGuard`], the one way those start a process they must
//! stop: a [`Child`] that is killed and reaped when the guard is dropped,
//! so no server (or moto, or node) outlives the test or the xtask run that
//! started it, whether that returns, fails with `?` or panics; and
//! [`eventually`] / [`eventually_blocking`], the one way a test waits for
//! what another task or process does: a condition polled with a deadline.
//!
//! It depends on no strand crate (and on tokio's clock alone), and only
//! tests and tools may depend on it: no library or binary crate of strand
//! does.

mod wait;

pub use wait::{eventually, eventually_blocking};

use std::io;
use std::ops::{Deref, DerefMut};
use std::process::{Child, ExitStatus};

/// A child process killed (`SIGKILL` on Unix) and reaped when dropped.
///
/// The guard dereferences to its [`Child`], so the child's own methods and
/// fields (`id()`, `try_wait()`, `stdout.take()`) work on it unchanged.
/// Waiting for the child through it is fine: a child that has exited, or
/// has been waited for, is not signalled again (`std` remembers its exit
/// status and never kills a reaped process, whose id may have been reused).
///
/// ```
/// use std::process::Command;
/// use strand_testkit::ChildGuard;
///
/// # fn main() -> std::io::Result<()> {
/// let server = ChildGuard::new(Command::new("sleep").arg("60").spawn()?);
/// assert!(server.id() > 0);
/// // A failed assertion or an early return here stops it just the same.
/// drop(server); // killed and reaped
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
}

impl ChildGuard {
    /// Guards `child` from now on.
    pub fn new(child: Child) -> Self {
        Self { child }
    }

    /// Kills the child and waits for it now, returning how it ended; the
    /// errors are those of [`Child::kill`] and [`Child::wait`]. A child that
    /// had already exited is only reaped, and its own status returned.
    /// Dropping the guard afterwards does nothing more.
    pub fn kill_and_wait(&mut self) -> io::Result<ExitStatus> {
        self.child.kill()?;
        self.child.wait()
    }
}

impl From<Child> for ChildGuard {
    fn from(child: Child) -> Self {
        Self::new(child)
    }
}

impl Deref for ChildGuard {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.child
    }
}

impl DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for ChildGuard {
    /// Kills and reaps the child, ignoring errors: a child that is gone
    /// already leaves nothing to stop, and a drop must not panic (it may
    /// run while a failed test unwinds).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::process::ExitStatusExt;
    use std::path::Path;
    use std::process::{Command, Stdio};

    use super::ChildGuard;

    fn sleeper() -> ChildGuard {
        ChildGuard::new(
            Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    /// Whether a process `pid` exists at all (a zombie still does).
    fn exists(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_dropped_guard_kills_and_reaps_its_child() {
        let guard = sleeper();
        let pid = guard.id();
        assert!(exists(pid));
        drop(guard);
        assert!(!exists(pid), "process {pid} outlived its guard");
    }

    #[test]
    fn a_panic_kills_the_child_too() {
        let pid = std::sync::Mutex::new(None);
        let unwound = std::panic::catch_unwind(|| {
            let guard = sleeper();
            *pid.lock().unwrap() = Some(guard.id());
            panic!("a failed assertion");
        });
        assert!(unwound.is_err());
        let pid = pid.lock().unwrap().unwrap();
        assert!(!exists(pid), "process {pid} outlived the panic");
    }

    #[test]
    fn kill_and_wait_reports_the_kill() {
        let mut guard = sleeper();
        let status = guard.kill_and_wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{status:?}");
        // Again, and the drop after it: nothing left to do, no error.
        assert_eq!(guard.kill_and_wait().unwrap().signal(), Some(9));
    }

    #[test]
    fn a_child_that_exited_is_only_reaped() {
        let mut guard = ChildGuard::new(Command::new("true").spawn().unwrap());
        assert!(guard.wait().unwrap().success());
        assert!(guard.kill_and_wait().unwrap().success());
    }

    #[test]
    fn the_child_is_reachable_through_the_guard() {
        let mut guard: ChildGuard = Command::new("sleep")
            .arg("600")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
            .into();
        assert!(guard.stdout.take().is_some());
        assert!(guard.try_wait().unwrap().is_none());
    }
}
