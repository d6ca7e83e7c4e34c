//! The integration tests of strand-engine, one module per file of `tests/`, in
//! one binary, and their one way to wait for what another task does.

mod engine;
mod forks;

use std::time::{Duration, Instant};

use strand_engine::Engine;

/// Polls `check` until it answers `Some`, and returns that: how a test
/// waits for something another task does, instead of sleeping. Polls at
/// once, then every few milliseconds (up to 20 ms apart); panics naming
/// `what` once `deadline` has passed (keep it generous: tests share a
/// loaded machine).
pub(crate) async fn eventually<T>(
    what: &str,
    deadline: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let until = Instant::now() + deadline;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(done) = check().await {
            return done;
        }
        assert!(Instant::now() < until, "not within {deadline:?}: {what}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Waits until exactly `n` readers are parked in `engine`'s groups.
pub(crate) async fn parked(engine: &Engine, n: usize) {
    eventually(
        &format!("{n} parked readers"),
        Duration::from_secs(10),
        async || (engine.parked_waiters().await.expect("the engine runs") == n).then_some(()),
    )
    .await;
}
