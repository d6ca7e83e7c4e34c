//! The node's hot-memory budget (`--max-hot-bytes`): an upper bound on
//! the hot bytes the engine holds, checked before every write, so the
//! engine's gauge never passes the limit.
//!
//! The bound is `S + admitted_now − completed_at_sample`: a sample `S` of
//! the groups' hot bytes is taken after reading `completed` (the bytes of
//! writes that had returned), and `admitted` counts the bytes of every
//! write let in. A write that returned before the sample is inside `S`;
//! one still running then, or let in later, is inside
//! `admitted_now − completed_at_sample`. Flushes only lower the truth, so
//! any sample, however old, gives a valid bound; a fresh one makes it
//! tight again.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// A write let in under the budget; dropping it marks the write finished.
#[derive(Debug)]
pub struct Admission<'a> {
    budget: &'a HotBudget,
    bytes: u64,
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.budget.complete(self.bytes);
    }
}

impl Admission<'_> {
    /// The bytes let in, with marking them finished left to the caller
    /// ([`HotBudget::complete`]).
    pub(crate) fn into_bytes(self) -> u64 {
        let bytes = self.bytes;
        std::mem::forget(self);
        bytes
    }
}

/// The hot-memory budget of a node.
#[derive(Debug)]
pub struct HotBudget {
    limit: Option<u64>,
    admitted: AtomicU64,
    completed: AtomicU64,
    /// `(hot bytes sampled, completed before the sample)`.
    sample: Mutex<(u64, u64)>,
    refused: AtomicU64,
    pressure: Notify,
    /// Told of every sample ([`HotBudget::sampled`]).
    samples: Notify,
}

impl HotBudget {
    /// A budget of `limit` bytes; `None` admits everything.
    pub fn new(limit: Option<u64>) -> Self {
        Self {
            limit,
            admitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            sample: Mutex::new((0, 0)),
            refused: AtomicU64::new(0),
            pressure: Notify::new(),
            samples: Notify::new(),
        }
    }

    /// Marks `bytes` let in earlier as finished.
    pub(crate) fn complete(&self, bytes: u64) {
        self.completed.fetch_add(bytes, Ordering::SeqCst);
    }

    /// The limit, if any.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    fn sample(&self) -> (u64, u64) {
        match self.sample.lock() {
            Ok(g) => *g,
            Err(p) => *p.into_inner(),
        }
    }

    /// The current upper bound on the node's hot bytes.
    pub fn estimate(&self) -> u64 {
        let (hot, completed) = self.sample();
        hot.saturating_add(
            self.admitted
                .load(Ordering::SeqCst)
                .saturating_sub(completed),
        )
    }

    /// Whether the bound is at or above half the limit: the flush workers
    /// then flush whatever the planner offers.
    pub fn under_pressure(&self) -> bool {
        self.limit.is_some_and(|limit| self.estimate() >= limit / 2)
    }

    /// Lets a write of `bytes` in, or refuses it (the caller answers 503
    /// with `Retry-After`) when the bound would pass the limit.
    pub fn admit(&self, bytes: u64) -> Option<Admission<'_>> {
        self.admit_counted(bytes, true)
    }

    /// [`admit`](Self::admit); a refusal is counted only when `count`
    /// says so (a write that will try again is refused once, at its end).
    pub(crate) fn admit_counted(&self, bytes: u64, count: bool) -> Option<Admission<'_>> {
        let Some(limit) = self.limit else {
            return Some(Admission {
                budget: self,
                bytes: 0,
            });
        };
        let (hot, completed) = self.sample();
        let mut admitted = self.admitted.load(Ordering::SeqCst);
        loop {
            let bound = hot
                .saturating_add(admitted.saturating_sub(completed))
                .saturating_add(bytes);
            if bound >= limit / 2 {
                self.pressure.notify_waiters();
            }
            if bound > limit {
                if count {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                }
                return None;
            }
            match self.admitted.compare_exchange(
                admitted,
                admitted.saturating_add(bytes),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    return Some(Admission {
                        budget: self,
                        bytes,
                    });
                }
                Err(now) => admitted = now,
            }
        }
    }

    /// Reads `completed` before a sample is taken; hand it to
    /// [`HotBudget::record_sample`] with the hot bytes read afterwards.
    pub fn sample_start(&self) -> u64 {
        self.completed.load(Ordering::SeqCst)
    }

    /// Records a sample: `hot` bytes read after `completed` was.
    pub fn record_sample(&self, hot: u64, completed: u64) {
        let mut g = match self.sample.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        // Keep the newer of two racing samples (either is a valid bound).
        if completed >= g.1 {
            *g = (hot, completed);
        }
        drop(g);
        self.samples.notify_waiters();
    }

    /// A future that resolves at the next sample recorded after this call
    /// (a write refused now may fit then); it is registered at once, so a
    /// sample between this call and its first poll is not missed.
    pub fn sampled(&self) -> impl std::future::Future<Output = ()> + '_ {
        let mut notified = Box::pin(self.samples.notified());
        notified.as_mut().enable();
        notified
    }

    /// Writes refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Resolves when a write found the bound at or above half the limit.
    pub async fn pressured(&self) {
        self.pressure.notified().await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_counts_running_and_later_writes() {
        let b = HotBudget::new(Some(100));
        let a = b.admit(40).unwrap();
        assert_eq!(b.estimate(), 40);
        assert!(b.admit(70).is_none());
        assert_eq!(b.refused(), 1);
        // A sample taken while `a` runs does not forget it.
        let c0 = b.sample_start();
        b.record_sample(0, c0);
        assert_eq!(b.estimate(), 40);
        drop(a);
        // Once it returned, a fresh sample holds it (here: flushed to 10).
        let c1 = b.sample_start();
        b.record_sample(10, c1);
        assert_eq!(b.estimate(), 10);
        let _x = b.admit(90).unwrap();
        assert!(b.admit(1).is_none());
        assert!(b.under_pressure());
        assert!(HotBudget::new(None).admit(u64::MAX).is_some());
    }
}
