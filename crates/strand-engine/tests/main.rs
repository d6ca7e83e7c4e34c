//! The integration tests of strand-engine, one module per file of `tests/`, in
//! one binary, and their one way to wait for what another task does.

mod engine;
mod forks;

use std::time::{Duration, Instant};

use strand_engine::Engine;

/// Polls `check` until it answers `Some`, and returns that: how a test
/// waits for something another task does, instead of sleeping. Polls at
/// once, then every millisecond for 20 ms, then every 10 ms; panics naming
/// `what` once `deadline` has passed (keep it generous: tests share a
/// loaded machine).
pub(crate) async fn eventually<T, F>(
    what: &str,
    deadline: Duration,
    mut check: impl FnMut() -> F,
) -> T
where
    F: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(done) = check().await {
            return done;
        }
        let waited = started.elapsed();
        assert!(waited < deadline, "not within {deadline:?}: {what}");
        // Quick polls for what is about to happen, fewer for what takes
        // longer (a flush, an election).
        let pause = if waited < Duration::from_millis(20) {
            1
        } else {
            10
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Waits until exactly `n` readers are parked in `engine`'s groups.
pub(crate) async fn parked(engine: &Engine, n: usize) {
    eventually(
        &format!("{n} parked readers"),
        Duration::from_secs(10),
        || async { (engine.parked_waiters().await.expect("the engine runs") == n).then_some(()) },
    )
    .await;
}
