//! Waiting for what another task or process does, by polling a condition
//! with a deadline — never by sleeping a fixed time.

use std::future::Future;
use std::time::Duration;

/// How long to pause after a poll that found nothing, `waited` into the
/// wait: every millisecond for what is about to happen, then every 10 ms
/// for what takes longer (a flush, an election).
fn pause(waited: Duration) -> Duration {
    if waited < Duration::from_millis(20) {
        Duration::from_millis(1)
    } else {
        Duration::from_millis(10)
    }
}

/// Polls `check` until it answers `Some`, and returns that. Polls at once,
/// then every millisecond for 20 ms, then every 10 ms, on tokio's clock
/// (so a test on paused time advances it); panics naming `what` once
/// `deadline` has passed (keep it generous: tests share a loaded machine).
///
/// # Panics
/// When `deadline` passes first.
pub async fn eventually<T, F>(what: &str, deadline: Duration, mut check: impl FnMut() -> F) -> T
where
    F: Future<Output = Option<T>>,
{
    let started = tokio::time::Instant::now();
    loop {
        if let Some(done) = check().await {
            return done;
        }
        let waited = started.elapsed();
        assert!(waited < deadline, "not within {deadline:?}: {what}");
        tokio::time::sleep(pause(waited)).await;
    }
}

/// [`eventually`] for a caller without a runtime (a child's exit, a
/// socket's queues): the same polls, on the thread.
///
/// # Panics
/// When `deadline` passes first.
pub fn eventually_blocking<T>(
    what: &str,
    deadline: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let started = std::time::Instant::now();
    loop {
        if let Some(done) = check() {
            return done;
        }
        let waited = started.elapsed();
        assert!(waited < deadline, "not within {deadline:?}: {what}");
        std::thread::sleep(pause(waited));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn it_returns_what_the_check_found() {
        let mut polls = 0;
        let found = eventually("the third poll", Duration::from_secs(1), || {
            polls += 1;
            let n = polls;
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(found, 3);
        assert_eq!(
            eventually_blocking("at once", Duration::ZERO, || Some(7)),
            7
        );
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "not within 50ms: never")]
    async fn it_panics_at_the_deadline() {
        eventually("never", Duration::from_millis(50), || async { None::<()> }).await;
    }
}
