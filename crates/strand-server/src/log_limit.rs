//! Log lines that could come thousands of times a second under load (a
//! failed request, a refused connection): one per interval goes out, with
//! how many were held back since the last.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Lets one log line through per interval and counts the ones held back.
pub(crate) struct LogLimit {
    interval_ms: u64,
    /// When the last line went out, in ms after [`log_epoch`]; `u64::MAX`
    /// before the first.
    last_ms: AtomicU64,
    held_back: AtomicU64,
}

impl LogLimit {
    pub(crate) const fn new(interval_ms: u64) -> Self {
        Self {
            interval_ms,
            last_ms: AtomicU64::new(u64::MAX),
            held_back: AtomicU64::new(0),
        }
    }

    /// `Some(lines held back since the last one)` when a line may go out
    /// at `now`, else `None` (and the line is counted as held back).
    pub(crate) fn admit(&self, now: Instant) -> Option<u64> {
        let now_ms = u64::try_from(now.saturating_duration_since(log_epoch()).as_millis())
            .unwrap_or(u64::MAX - 1);
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == u64::MAX || now_ms.saturating_sub(last) >= self.interval_ms;
        if due
            && self
                .last_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.held_back.swap(0, Ordering::Relaxed));
        }
        self.held_back.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// The instant the rate limits of log lines count from.
fn log_epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_a_second_with_the_count_left_out() {
        let limit = LogLimit::new(1_000);
        let t0 = log_epoch() + std::time::Duration::from_secs(10);
        let ms = |n| t0 + std::time::Duration::from_millis(n);
        assert_eq!(limit.admit(t0), Some(0), "the first line goes out");
        assert_eq!(limit.admit(ms(1)), None);
        assert_eq!(limit.admit(ms(999)), None);
        assert_eq!(limit.admit(ms(1_000)), Some(2), "two held back");
        assert_eq!(limit.admit(ms(1_500)), None);
        assert_eq!(limit.admit(ms(5_000)), Some(1));
        assert_eq!(limit.admit(ms(6_000)), Some(0));
    }
}
