//! Which groups a cluster's node holds: whose state it may answer from.
//!
//! A node holds a group when its own log names it a member (voter or
//! learner), it has applied the log up to that membership entry (so its
//! machine has the group's history up to its admission), and the group
//! still counts it in: it leads the group, or it heard from the group's
//! leader (an append or heartbeat) within [`LEASE`]. A member dropped from
//! a group may never learn it from its own log (the leader stops sending
//! to it once the change commits); it stops holding the group when the
//! leader tells it so before the change ([`Holding::release`]), and at the
//! latest when the leader's messages have stopped for a lease — and after
//! a restart, before the first message from a leader. A node without
//! peers holds every group.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::types::NodeId;

/// How long after the last message from a group's leader a follower
/// still answers from its own state (openraft's leader sends a heartbeat
/// every 150 ms; an election takes about a second).
pub const LEASE: Duration = Duration::from_secs(3);

type Metrics = openraft::RaftMetrics<NodeId, openraft::BasicNode>;

/// The groups a node holds (shared by its groups' proposers, the engine's
/// questions and the server's routing).
#[derive(Debug)]
pub(crate) struct Holding {
    me: NodeId,
    /// Whether the node is a cluster's member (else it holds every group).
    clustered: bool,
    start: Instant,
    /// Per group: when the leader was last heard, in milliseconds since
    /// `start`, plus one (0: never).
    heard: Vec<AtomicU64>,
    /// Per group: the index of the membership entry current when the
    /// leader said this node is being dropped, plus one (0: none).
    released: Vec<AtomicU64>,
}

impl Holding {
    pub(crate) fn new(me: NodeId, groups: usize, clustered: bool) -> Self {
        Self {
            me,
            clustered,
            start: Instant::now(),
            heard: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            released: (0..groups).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Records a message from `group`'s leader (an append or heartbeat it
    /// took).
    pub(crate) fn heard(&self, group: usize) {
        if let Some(at) = self.heard.get(group) {
            at.store(self.now_ms().saturating_add(1), Ordering::Relaxed);
        }
    }

    /// The leader of `group` is about to drop this node (its membership
    /// is `metrics`'): it stops holding the group now, until a later
    /// membership names it again.
    pub(crate) fn release(&self, group: usize, metrics: &Metrics) {
        if let Some(released) = self.released.get(group) {
            let index = membership_index(metrics);
            released.fetch_max(index.saturating_add(1), Ordering::Relaxed);
        }
    }

    /// Whether this node holds `group`, whose metrics on this node are
    /// `metrics`.
    pub(crate) fn holds(&self, group: usize, metrics: &Metrics) -> bool {
        if !self.clustered {
            return true;
        }
        let stored = &metrics.membership_config;
        let member = stored.membership().nodes().any(|(id, _)| *id == self.me);
        let applied = stored.log_id().as_ref().map(|l| l.index)
            <= metrics.last_applied.as_ref().map(|l| l.index);
        let released = self
            .released
            .get(group)
            .is_some_and(|r| membership_index(metrics) < r.load(Ordering::Relaxed));
        if !member || !applied || released {
            return false;
        }
        if self.led(group, metrics) {
            return true;
        }
        self.heard.get(group).is_some_and(|at| {
            let at = at.load(Ordering::Relaxed);
            at > 0 && self.now_ms().saturating_sub(at - 1) <= lease_ms()
        })
    }

    /// Whether this node leads `group` now (its metrics are `metrics`).
    /// A leader counts as having heard from the group's leader: when it
    /// steps down (a hand-off, an election), it goes on holding the group
    /// for a lease from its last moment as leader, as a follower does
    /// from the last heartbeat, instead of sending every read elsewhere
    /// while the new leader is not elected yet (they would find no
    /// member that answers: 503).
    pub(crate) fn led(&self, group: usize, metrics: &Metrics) -> bool {
        let leads = metrics.state == openraft::ServerState::Leader
            && metrics.current_leader == Some(self.me);
        if leads {
            self.heard(group);
        }
        leads
    }
}

fn lease_ms() -> u64 {
    u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX)
}

/// The index of the entry of the membership in `metrics` (0 for the
/// initial one).
fn membership_index(metrics: &Metrics) -> u64 {
    metrics
        .membership_config
        .log_id()
        .as_ref()
        .map_or(0, |l| l.index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    /// Node `me`'s metrics of a group whose voters are 1, 2 and 3, the
    /// membership applied, led by `leader`.
    fn metrics(me: NodeId, leader: Option<NodeId>) -> Metrics {
        let mut m = Metrics::new_initial(me);
        let at = openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), 1);
        let voters: BTreeSet<NodeId> = [1, 2, 3].into();
        m.membership_config = Arc::new(openraft::StoredMembership::new(
            Some(at),
            openraft::Membership::new(vec![voters], None),
        ));
        m.last_applied = Some(openraft::LogId::new(
            openraft::CommittedLeaderId::new(1, 1),
            5,
        ));
        m.current_leader = leader;
        if leader == Some(me) {
            m.state = openraft::ServerState::Leader;
        }
        m
    }

    #[test]
    fn a_leader_that_steps_down_holds_the_group_for_a_lease() {
        let holding = Holding::new(1, 2, true);
        assert!(holding.holds(0, &metrics(1, Some(1))), "it leads");
        // Deposed, the new leader not elected yet: it heard from no other
        // leader, but its own leadership counts as the last word.
        assert!(holding.holds(0, &metrics(1, None)));
        // A group it never led and whose leader it never heard: not held.
        assert!(!holding.holds(1, &metrics(1, None)));
        holding.heard(1);
        assert!(holding.holds(1, &metrics(1, Some(2))));
    }

    #[test]
    fn a_node_outside_the_membership_never_holds() {
        let holding = Holding::new(4, 1, true);
        holding.heard(0);
        assert!(!holding.holds(0, &metrics(4, Some(1))));
        assert!(Holding::new(4, 1, false).holds(0, &metrics(4, None)));
    }
}
