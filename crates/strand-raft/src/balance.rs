//! Leadership balancing and drains on a cluster's node.
//!
//! Every member is a voter of every group, so what is left to spread is
//! the leaders' work. Only groups of at most [`MAX_HANDOFF_VOTERS`]
//! voters are handed off (a three-node cluster today). Each node, once per interval, looks at the groups
//! it leads and hands one of them to the least-loaded other member when
//! it leads at least two more than that member (so leaderships end with a
//! max − min of at most 1 per node), or, while it is draining, hands one
//! off whatever the counts. A member takes leaderships only while it
//! answers its view and is not draining itself. A group is moved only
//! once its leader has held it past the leader lease, one move at a time per
//! node, and never to a member that does not hold every entry (the
//! transfer waits for it: [`RaftGroup::transfer_leader`]). Rounds of
//! different nodes may move leaderships to the same member at once; each
//! move still lowers the spread's sum of squares, so the counts settle.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cluster::{MoveStatus, NodeView, ask_view};
use crate::network::{ClusterLinks, PeerClient};
use crate::proposer::RaftGroup;
use crate::types::NodeId;

/// How long a node must have led a group before it hands the group off:
/// longer than the leader lease (openraft's `election_timeout_max`, 900 ms
/// here), during which a new leader refuses to vote for anyone, so a
/// hand-off would only start an election.
const MIN_TENURE: Duration = Duration::from_millis(1100);

/// The most voters a group may have for its leadership to be handed off:
/// the new leader wins with its own vote and the old leader's (whose
/// lease has expired), a majority of three; in a larger group the other
/// voters, whose leases the leader keeps fresh, refuse it (openraft 0.9
/// has no leadership transfer that bypasses their lease).
pub const MAX_HANDOFF_VOTERS: usize = 3;

/// How long a round waits for each peer's view.
const VIEW_TIMEOUT: Duration = Duration::from_secs(1);

/// The default interval between two balancing rounds of a node.
pub const DEFAULT_BALANCE_INTERVAL_MS: u64 = 1000;

/// A node's leadership moves: whether it is draining, the move under way,
/// and counters.
#[derive(Debug, Default)]
pub(crate) struct Balance {
    draining: AtomicBool,
    moving: Mutex<Option<MoveStatus>>,
    rounds: AtomicU64,
    moved: AtomicU64,
    failed: AtomicU64,
    held_us_max: AtomicU64,
}

/// A node's leadership moves so far (in `GET /__strand/health` of a
/// cluster's node).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalanceStats {
    /// Whether the node is draining (handing off every leadership).
    pub draining: bool,
    /// Balancing rounds run.
    pub rounds: u64,
    /// Leaderships this node handed to another member.
    pub moved: u64,
    /// Hand-offs that did not complete (the group kept or found a leader).
    pub failed: u64,
    /// The longest time a hand-off held the group's proposals back, in
    /// microseconds.
    pub held_us_max: u64,
}

impl Balance {
    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub(crate) fn set_draining(&self, draining: bool) {
        self.draining.store(draining, Ordering::Relaxed);
    }

    pub(crate) fn moves(&self) -> Vec<MoveStatus> {
        crate::sync::lock(&self.moving).iter().cloned().collect()
    }

    pub(crate) fn stats(&self) -> BalanceStats {
        BalanceStats {
            draining: self.draining(),
            rounds: self.rounds.load(Ordering::Relaxed),
            moved: self.moved.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            held_us_max: self.held_us_max.load(Ordering::Relaxed),
        }
    }
}

/// What a round needs of the node.
pub(crate) struct Balancer {
    pub(crate) groups: Weak<[Arc<RaftGroup>]>,
    pub(crate) me: NodeId,
    pub(crate) links: Arc<ClusterLinks>,
    pub(crate) client: PeerClient,
    pub(crate) balance: Arc<Balance>,
}

impl Balancer {
    /// Runs a round every `interval` until the node's groups are gone.
    pub(crate) async fn run(self, interval: Duration) {
        let mut before: Vec<(Option<NodeId>, Instant)> = Vec::new();
        loop {
            tokio::time::sleep(interval).await;
            let Some(groups) = self.groups.upgrade() else {
                return;
            };
            self.round(&groups, &mut before).await;
            self.balance.rounds.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One round: at most one leadership handed off.
    async fn round(&self, groups: &[Arc<RaftGroup>], before: &mut Vec<(Option<NodeId>, Instant)>) {
        let me = self.me;
        let now = Instant::now();
        let metrics: Vec<_> = groups
            .iter()
            .map(|g| g.raft().metrics().borrow().clone())
            .collect();
        let leaders: Vec<Option<NodeId>> = metrics.iter().map(|m| m.current_leader).collect();
        // Since when each group has had the leader it has now (as far as
        // this node saw).
        let since: Vec<(Option<NodeId>, Instant)> = leaders
            .iter()
            .enumerate()
            .map(|(i, l)| match before.get(i) {
                Some(&(was, at)) if was == *l => (was, at),
                _ => (*l, now),
            })
            .collect();
        *before = since.clone();
        // Groups this node has led long enough.
        let mine: Vec<usize> = (0..groups.len())
            .filter(|&i| {
                metrics[i].state == openraft::ServerState::Leader
                    && leaders[i] == Some(me)
                    && now.duration_since(since[i].1) >= MIN_TENURE
                    && metrics[i]
                        .membership_config
                        .membership()
                        .voter_ids()
                        .count()
                        <= MAX_HANDOFF_VOTERS
            })
            .collect();
        if mine.is_empty() {
            return;
        }
        let views = futures_util::future::join_all(
            self.links
                .addrs
                .iter()
                .filter(|(id, _)| **id != me)
                .map(|(&id, addr)| async move { (id, self.view_of(id, addr).await) }),
        )
        .await;
        let count = |n: NodeId| leaders.iter().filter(|l| **l == Some(n)).count();
        let Some((to, their)) = views
            .iter()
            .filter(|(_, v)| v.as_ref().is_some_and(|v| !v.draining))
            .map(|(id, _)| (*id, count(*id)))
            .min_by_key(|&(id, c)| (c, id))
        else {
            return;
        };
        if !self.balance.draining() && count(me) < their + 2 {
            return;
        }
        // The group whose new leader is closest to holding every entry.
        let Some(&group) = mine.iter().max_by_key(|&&i| {
            metrics[i]
                .replication
                .as_ref()
                .and_then(|r| r.get(&to).copied().flatten())
                .map(|l| l.index)
        }) else {
            return;
        };
        let Some(addr) = self.links.addrs.get(&to) else {
            return;
        };
        *crate::sync::lock(&self.balance.moving) = Some(MoveStatus {
            group,
            kind: "leader".to_owned(),
            from: Some(me),
            to: Some(to),
        });
        let result = groups[group]
            .transfer_leader(me, to, addr, self.links.token.as_deref(), &self.client.http)
            .await;
        *crate::sync::lock(&self.balance.moving) = None;
        match result {
            Ok(held) => {
                self.balance.moved.fetch_add(1, Ordering::Relaxed);
                let us = u64::try_from(held.as_micros()).unwrap_or(u64::MAX);
                self.balance.held_us_max.fetch_max(us, Ordering::Relaxed);
                tracing::info!(
                    group,
                    from = me,
                    to,
                    held_ms = held.as_secs_f64() * 1000.0,
                    "handed the group's leadership off"
                );
            }
            Err(e) => {
                self.balance.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(group, from = me, to, error = %e, "a leadership hand-off failed");
            }
        }
    }

    /// Member `id`'s view, if it answers as itself.
    async fn view_of(&self, id: NodeId, addr: &str) -> Option<NodeView> {
        let token = self.links.token.as_deref();
        ask_view(&self.client.http, (id, addr), token, VIEW_TIMEOUT)
            .await
            .ok()
    }
}
