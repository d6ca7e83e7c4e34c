//! Starting an engine: its group tasks, then the engine's own background
//! work (the fork unpin janitor), and for a replicated engine the
//! [`GroupLink`]s its logs attach through.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::applier::{GroupApplier, LogInput};
use crate::clock::{Clock, SystemClock};
use crate::engine::{Engine, EngineConfig, Group};
use crate::group;
use crate::log::GroupLog;
use crate::replica::ReplicaSlot;

impl Engine {
    /// Starts an engine on the current tokio runtime with the system clock.
    pub fn start(config: EngineConfig) -> Self {
        Self::start_with_clock(config, Arc::new(SystemClock))
    }

    /// Starts an engine with the given clock (tests inject a
    /// [`ManualClock`](crate::ManualClock)).
    pub fn start_with_clock(config: EngineConfig, clock: Arc<dyn Clock>) -> Self {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let unpins = Arc::new(tokio::sync::Notify::new());
        let mut groups = Vec::new();
        let mut tasks = Vec::new();
        for _ in 0..config.groups.max(1) {
            let (tx, rx) = mpsc::channel(config.queue_depth.max(1));
            let core = group::shared(group::GroupCore::new(config.machine));
            tasks.push(tokio::spawn(group::run(
                Arc::clone(&core),
                rx,
                shutdown_rx.clone(),
                Arc::clone(&unpins),
            )));
            groups.push(Group::new(tx, config.queue_depth, core));
        }
        Self::from_parts(
            &config,
            clock,
            groups,
            tasks,
            (shutdown, shutdown_rx),
            (false, ReplicaSlot::default()),
            unpins,
        )
    }

    /// Starts an engine whose groups apply their state changes through a
    /// replicated log. Each returned [`GroupLink`] gives its log the
    /// [`GroupApplier`] that applies committed entries to the group's
    /// machine; a group serves no request until its log is attached
    /// ([`GroupLink::attach`]), but applies (replays) entries before.
    pub fn start_replicated(config: EngineConfig, clock: Arc<dyn Clock>) -> (Self, Vec<GroupLink>) {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let unpins = Arc::new(tokio::sync::Notify::new());
        let mut groups = Vec::new();
        let mut tasks = Vec::new();
        let mut appliers = Vec::new();
        let replica = ReplicaSlot::default();
        for index in 0..config.groups.max(1) {
            let (tx, rx) = mpsc::channel(config.queue_depth.max(1));
            let (log_tx, log_rx) = mpsc::unbounded_channel();
            let core = group::shared(group::GroupCore::replicated(
                config.machine,
                tx.downgrade(),
                index,
                Arc::clone(&replica),
            ));
            tasks.push(tokio::spawn(group::run_replicated(
                Arc::clone(&core),
                rx,
                log_rx,
                shutdown_rx.clone(),
                Arc::clone(&unpins),
            )));
            groups.push(Group::new(tx, config.queue_depth, core));
            appliers.push(GroupApplier::new(index, log_tx, Arc::clone(&replica)));
        }
        let engine = Self::from_parts(
            &config,
            clock,
            groups,
            tasks,
            (shutdown, shutdown_rx),
            (true, replica),
            unpins,
        );
        let links = appliers
            .into_iter()
            .map(|applier| GroupLink {
                applier,
                engine: engine.clone(),
            })
            .collect();
        (engine, links)
    }
}

/// One group of an engine started with [`Engine::start_replicated`]:
/// its log must be opened with the link's [`GroupApplier`] and then
/// attached; the group serves no request before.
#[derive(Debug)]
pub struct GroupLink {
    applier: GroupApplier,
    engine: Engine,
}

impl GroupLink {
    /// The group's index.
    pub fn group(&self) -> usize {
        self.applier.group()
    }

    /// The handle the group's log applies committed entries through.
    pub fn applier(&self) -> GroupApplier {
        self.applier.clone()
    }

    /// Attaches the group's log: from now on the group's state changes go
    /// through it.
    pub fn attach(self, log: Arc<dyn GroupLog>) {
        self.engine.set_log(self.applier.group(), Arc::clone(&log));
        self.applier.send(LogInput::Attach(log));
    }
}
