//! The integration tests of strand-engine, one module per file of `tests/`, in
//! one binary, and their one way to wait for what another task does.

mod engine;
mod forks;
mod remote;

use std::time::Duration;

use strand_engine::Engine;

pub(crate) use strand_testkit::eventually;

/// Waits until exactly `n` readers are parked in `engine`'s groups.
pub(crate) async fn parked(engine: &Engine, n: usize) {
    eventually(
        &format!("{n} parked readers"),
        Duration::from_secs(10),
        || async { (engine.parked_waiters().await.expect("the engine runs") == n).then_some(()) },
    )
    .await;
}
