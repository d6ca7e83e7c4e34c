//! Live-read waiters parked per stream. A waiter costs one entry in its
//! stream's list and no CPU until that stream changes; waking a stream's
//! readers touches only that stream's list.

use std::collections::HashMap;

use strand::BucketStreamId;
use tokio::sync::oneshot;

/// Why a parked reader was woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The stream changed (append, close, delete, expiry): read again.
    Changed,
    /// The engine is shutting down: end the live read.
    Shutdown,
}

/// The waiters of one group, by stream.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    by_stream: HashMap<BucketStreamId, Vec<oneshot::Sender<Wake>>>,
}

impl Waiters {
    /// Parks a waiter on a stream. Entries of readers that gave up (their
    /// receiver dropped) are pruned whenever a list doubles, so a stream
    /// that never changes does not collect them without bound.
    pub(crate) fn park(&mut self, id: &BucketStreamId, tx: oneshot::Sender<Wake>) {
        let list = match self.by_stream.get_mut(id) {
            Some(list) => list,
            None => self.by_stream.entry(id.clone()).or_default(),
        };
        if list.len() >= 16 && list.len().is_power_of_two() {
            list.retain(|w| !w.is_closed());
        }
        list.push(tx);
    }

    /// Wakes every waiter of one stream.
    pub(crate) fn wake(&mut self, id: &BucketStreamId) {
        if let Some(list) = self.by_stream.remove(id) {
            for tx in list {
                let _ = tx.send(Wake::Changed);
            }
        }
    }

    /// Wakes every waiter of a bucket (purge).
    pub(crate) fn wake_bucket(&mut self, bucket_id: &str) {
        let ids: Vec<BucketStreamId> = self
            .by_stream
            .keys()
            .filter(|id| id.bucket_id == bucket_id)
            .cloned()
            .collect();
        for id in ids {
            self.wake(&id);
        }
    }

    /// Wakes every waiter with `wake`.
    pub(crate) fn wake_all(&mut self, wake: Wake) {
        for (_, list) in self.by_stream.drain() {
            for tx in list {
                let _ = tx.send(wake);
            }
        }
    }

    /// Parked entries (including ones whose reader already left).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_stream.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_reaches_only_the_streams_waiters() {
        let mut w = Waiters::default();
        let a = BucketStreamId::new("b", "a");
        let b = BucketStreamId::new("b", "b");
        let (tx1, mut rx1) = oneshot::channel();
        let (tx2, mut rx2) = oneshot::channel();
        w.park(&a, tx1);
        w.park(&b, tx2);
        w.wake(&a);
        assert_eq!(rx1.try_recv(), Ok(Wake::Changed));
        assert!(rx2.try_recv().is_err());
        assert_eq!(w.len(), 1);
        w.wake_all(Wake::Shutdown);
        assert_eq!(rx2.try_recv(), Ok(Wake::Shutdown));
    }

    #[test]
    fn abandoned_waiters_are_pruned() {
        let mut w = Waiters::default();
        let a = BucketStreamId::new("b", "a");
        for _ in 0..1000 {
            let (tx, rx) = oneshot::channel();
            drop(rx);
            w.park(&a, tx);
        }
        assert!(w.len() < 64, "{} entries kept", w.len());
    }
}
