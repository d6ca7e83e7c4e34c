//! Live-read waiters parked per stream. A waiter costs one entry in its
//! stream's list and no CPU until that stream changes; waking a stream's
//! readers touches only that stream's list. A reader parked exactly at the
//! tail that an append extends is handed the appended bytes with its wake,
//! so it need not come back to the group to read them.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use strand::BucketStreamId;
use tokio::sync::{mpsc, oneshot};

/// Notices a subscription holds before the group gives up on its reader.
pub(crate) const SUBSCRIPTION_NOTICES: usize = 16;

/// An append, as a reader parked at its start offset receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendNotice {
    /// Where the appended bytes start (the reader's offset).
    pub offset: u64,
    /// The tail after the append.
    pub next_offset: u64,
    /// The appended bytes, exactly as stored (a `Bytes` clone, no copy).
    pub payload: Bytes,
    /// Whether the append closed the stream.
    pub closed: bool,
    /// What the first reader woken with this notice made of it, for the
    /// others to reuse ([`NoticeRendering`]).
    pub rendering: NoticeRendering,
}

impl AppendNotice {
    /// A notice of `payload` appended at `offset`, not rendered yet.
    pub fn new(offset: u64, next_offset: u64, payload: Bytes, closed: bool) -> Self {
        Self {
            offset,
            next_offset,
            payload,
            closed,
            rendering: NoticeRendering::default(),
        }
    }
}

/// A rendering of one [`AppendNotice`], made once by the first reader that
/// needs it and shared by every reader woken with the same notice (every
/// clone of a notice shares it): an HTTP server encodes an append's
/// server-sent events once for all of a stream's subscribers rather than
/// once per subscriber. The engine only carries it; what it holds is the
/// reader's own type.
///
/// A rendering follows from the notice, so it takes no part in comparing
/// notices.
#[derive(Clone, Default)]
pub struct NoticeRendering(Arc<OnceLock<Box<dyn Any + Send + Sync>>>);

impl NoticeRendering {
    /// The rendering, made by `render` unless a reader made one already;
    /// `None` when the one made is of another type than `T`.
    pub fn get_or_init<T: Any + Send + Sync>(&self, render: impl FnOnce() -> T) -> Option<&T> {
        self.0.get_or_init(|| Box::new(render())).downcast_ref()
    }
}

impl PartialEq for NoticeRendering {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for NoticeRendering {}

impl std::fmt::Debug for NoticeRendering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoticeRendering")
            .field("rendered", &self.0.get().is_some())
            .finish()
    }
}

/// Why a parked reader was woken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The stream changed (append, close, delete, expiry): read again.
    Changed,
    /// An append starting at the reader's offset: these are its bytes.
    Appended(AppendNotice),
    /// The engine is shutting down: end the live read.
    Shutdown,
}

struct Waiter {
    offset: u64,
    tx: WaiterTx,
}

/// How a parked reader is told.
pub(crate) enum WaiterTx {
    /// One wake, then the reader parks again if it wants to (long-poll).
    Once(oneshot::Sender<Wake>),
    /// A subscription (SSE): each append at the reader's offset is queued
    /// and the reader stays parked at the append's end; anything else — a
    /// change it must read, a full queue (the reader fell behind), the end
    /// of the stream — ends it, and the reader reads and subscribes again.
    Live(mpsc::Sender<Wake>),
}

impl WaiterTx {
    fn is_closed(&self) -> bool {
        match self {
            Self::Once(tx) => tx.is_closed(),
            Self::Live(tx) => tx.is_closed(),
        }
    }

    /// Tells the reader `wake`, which ends its wait.
    pub(crate) fn finish(self, wake: Wake) {
        match self {
            Self::Once(tx) => {
                let _ = tx.send(wake);
            }
            // A full queue needs no last message: the reader finds the
            // channel closed after the queued notices.
            Self::Live(tx) => {
                let _ = tx.try_send(wake);
            }
        }
    }
}

/// The waiters of one group, by stream.
#[derive(Default)]
pub(crate) struct Waiters {
    by_stream: HashMap<BucketStreamId, Vec<Waiter>>,
    /// An empty list whose room [`Waiters::wake_appended`] swaps in for
    /// the subscriptions it keeps, so waking a stream's subscribers per
    /// append allocates nothing and leaves the map's entry in place.
    spare: Vec<Waiter>,
}

impl Waiters {
    /// Whether no reader is parked in this group (the write path then skips
    /// the wake-up bookkeeping entirely).
    pub(crate) fn is_empty(&self) -> bool {
        self.by_stream.is_empty()
    }

    /// Whether readers are parked on `id`.
    pub(crate) fn has(&self, id: &BucketStreamId) -> bool {
        self.by_stream.contains_key(id)
    }

    /// Parks a waiter at `offset` on a stream. Entries of readers that gave
    /// up (their receiver dropped) are pruned whenever a list doubles, so a
    /// stream that never changes does not collect them without bound.
    pub(crate) fn park(&mut self, id: &BucketStreamId, offset: u64, tx: WaiterTx) {
        let list = match self.by_stream.get_mut(id) {
            Some(list) => list,
            None => self.by_stream.entry(id.clone()).or_default(),
        };
        if list.len() >= 16 && list.len().is_power_of_two() {
            list.retain(|w| !w.tx.is_closed());
        }
        list.push(Waiter { offset, tx });
    }

    /// Wakes every waiter of one stream to read again.
    pub(crate) fn wake(&mut self, id: &BucketStreamId) {
        if let Some(list) = self.by_stream.remove(id) {
            for w in list {
                w.tx.finish(Wake::Changed);
            }
        }
    }

    /// Wakes every waiter of one stream after an append: those parked at
    /// its start get its bytes, the others read again. Subscriptions at its
    /// start stay parked at its end (unless it closed the stream or their
    /// queue is full).
    pub(crate) fn wake_appended(&mut self, id: &BucketStreamId, notice: &AppendNotice) {
        let Some(kept) = self.by_stream.get_mut(id) else {
            return;
        };
        let mut list = std::mem::replace(kept, std::mem::take(&mut self.spare));
        for w in list.drain(..) {
            match w.tx {
                WaiterTx::Live(tx) if w.offset == notice.offset && !notice.closed => {
                    if tx.try_send(Wake::Appended(notice.clone())).is_ok() {
                        kept.push(Waiter {
                            offset: notice.next_offset,
                            tx: WaiterTx::Live(tx),
                        });
                    }
                }
                tx if w.offset == notice.offset => tx.finish(Wake::Appended(notice.clone())),
                tx => tx.finish(Wake::Changed),
            }
        }
        if kept.is_empty() {
            self.by_stream.remove(id);
        }
        self.spare = list;
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
    pub(crate) fn wake_all(&mut self, wake: &Wake) {
        for (_, list) in self.by_stream.drain() {
            for w in list {
                w.tx.finish(wake.clone());
            }
        }
    }

    /// Readers parked now (entries whose reader already left are not
    /// counted).
    pub(crate) fn parked(&self) -> usize {
        self.by_stream
            .values()
            .flatten()
            .filter(|w| !w.tx.is_closed())
            .count()
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
        w.park(&a, 0, WaiterTx::Once(tx1));
        w.park(&b, 0, WaiterTx::Once(tx2));
        assert_eq!(w.parked(), 2);
        w.wake(&a);
        assert_eq!(rx1.try_recv(), Ok(Wake::Changed));
        assert!(rx2.try_recv().is_err());
        assert_eq!(w.len(), 1);
        w.wake_all(&Wake::Shutdown);
        assert_eq!(rx2.try_recv(), Ok(Wake::Shutdown));
        assert!(w.is_empty());
    }

    #[test]
    fn an_append_hands_its_bytes_to_readers_at_its_start() {
        let mut w = Waiters::default();
        let a = BucketStreamId::new("b", "a");
        let (at_tail, mut rx_tail) = oneshot::channel();
        let (behind, mut rx_behind) = oneshot::channel();
        w.park(&a, 5, WaiterTx::Once(at_tail));
        w.park(&a, 3, WaiterTx::Once(behind));
        let notice = AppendNotice::new(5, 7, Bytes::from_static(b"xy"), false);
        w.wake_appended(&a, &notice);
        assert_eq!(rx_tail.try_recv(), Ok(Wake::Appended(notice)));
        assert_eq!(rx_behind.try_recv(), Ok(Wake::Changed));
    }

    fn notice(offset: u64, next_offset: u64, closed: bool) -> AppendNotice {
        AppendNotice::new(
            offset,
            next_offset,
            Bytes::from(vec![b'x'; (next_offset - offset) as usize]),
            closed,
        )
    }

    #[test]
    fn every_reader_of_a_notice_shares_one_rendering() {
        let mut w = Waiters::default();
        let a = BucketStreamId::new("b", "a");
        let (tx1, mut rx1) = mpsc::channel(SUBSCRIPTION_NOTICES);
        let (tx2, mut rx2) = mpsc::channel(SUBSCRIPTION_NOTICES);
        w.park(&a, 5, WaiterTx::Live(tx1));
        w.park(&a, 5, WaiterTx::Live(tx2));
        w.wake_appended(&a, &notice(5, 7, false));
        let (Ok(Wake::Appended(first)), Ok(Wake::Appended(second))) =
            (rx1.try_recv(), rx2.try_recv())
        else {
            panic!("both subscriptions get the notice");
        };
        let mut made = 0;
        let one = first.rendering.get_or_init(|| {
            made += 1;
            String::from("event")
        });
        assert_eq!(one.map(String::as_str), Some("event"));
        let two = second.rendering.get_or_init(|| {
            made += 1;
            String::from("again")
        });
        assert_eq!(two.map(String::as_str), Some("event"), "made once");
        assert_eq!(made, 1);
        // Another type than the one made is refused, not confused.
        assert_eq!(second.rendering.get_or_init(|| 7_u32), None);
        // A new notice starts unrendered.
        assert!(format!("{:?}", notice(7, 9, false).rendering).contains("rendered: false"));
    }

    #[test]
    fn a_subscription_follows_consecutive_appends() {
        let mut w = Waiters::default();
        let a = BucketStreamId::new("b", "a");
        let (tx, mut rx) = mpsc::channel(SUBSCRIPTION_NOTICES);
        w.park(&a, 5, WaiterTx::Live(tx));
        for k in 0..3 {
            w.wake_appended(&a, &notice(5 + 2 * k, 7 + 2 * k, false));
        }
        for k in 0..3 {
            assert_eq!(
                rx.try_recv(),
                Ok(Wake::Appended(notice(5 + 2 * k, 7 + 2 * k, false)))
            );
        }
        assert!(rx.try_recv().is_err());
        assert_eq!(w.len(), 1, "still parked, at 11");
        // An append elsewhere than its offset (it missed one) ends it.
        w.wake_appended(&a, &notice(12, 13, false));
        assert_eq!(rx.try_recv(), Ok(Wake::Changed));
        assert!(w.is_empty());
    }

    #[test]
    fn a_subscription_ends_on_a_change_a_close_or_a_full_queue() {
        let a = BucketStreamId::new("b", "a");
        // A change (close without bytes, delete, ...): told, then ended.
        let mut w = Waiters::default();
        let (tx, mut rx) = mpsc::channel(SUBSCRIPTION_NOTICES);
        w.park(&a, 0, WaiterTx::Live(tx));
        w.wake(&a);
        assert_eq!(rx.try_recv(), Ok(Wake::Changed));
        assert!(w.is_empty());
        assert!(rx.try_recv().is_err() && rx.is_closed());
        // An append that closes the stream: its bytes, then the end.
        let (tx, mut rx) = mpsc::channel(SUBSCRIPTION_NOTICES);
        w.park(&a, 0, WaiterTx::Live(tx));
        w.wake_appended(&a, &notice(0, 4, true));
        assert_eq!(rx.try_recv(), Ok(Wake::Appended(notice(0, 4, true))));
        assert!(w.is_empty());
        // A reader that does not drain its queue is dropped once it is
        // full; it finds every queued notice, then the end.
        let (tx, mut rx) = mpsc::channel(SUBSCRIPTION_NOTICES);
        w.park(&a, 0, WaiterTx::Live(tx));
        let total = SUBSCRIPTION_NOTICES as u64 + 3;
        for k in 0..total {
            w.wake_appended(&a, &notice(k, k + 1, false));
        }
        assert!(w.is_empty());
        for k in 0..SUBSCRIPTION_NOTICES as u64 {
            assert_eq!(rx.try_recv(), Ok(Wake::Appended(notice(k, k + 1, false))));
        }
        assert_eq!(rx.try_recv(), Err(mpsc::error::TryRecvError::Disconnected));
    }

    #[test]
    fn abandoned_waiters_are_pruned() {
        let mut w = Waiters::default();
        let a = BucketStreamId::new("b", "a");
        for _ in 0..1000 {
            let (tx, rx) = oneshot::channel();
            drop(rx);
            w.park(&a, 0, WaiterTx::Once(tx));
        }
        assert!(w.len() < 64, "{} entries kept", w.len());
        assert_eq!(w.parked(), 0, "every reader left");
    }
}
