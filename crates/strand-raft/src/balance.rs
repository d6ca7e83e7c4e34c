//! Leadership balancing and drains on a cluster's node.
//!
//! The placement spreads each group's voters; what is left to spread is
//! the leaders' work. Each node, once per interval, looks at the groups
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

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use openraft::ChangeMembers;
use serde::{Deserialize, Serialize};

use crate::cluster::{GroupView, MoveStatus, NodeView, ask_view};
use crate::network::{ClusterLinks, PeerClient};
use crate::placement::{Placed, plan};
use crate::proposer::RaftGroup;
use crate::types::NodeId;

/// How long a node must have led a group before it hands the group off:
/// longer than the leader lease (openraft's `election_timeout_max`, 900 ms
/// here), during which a new leader refuses to vote for anyone, so a
/// hand-off would only start an election.
const MIN_TENURE: Duration = Duration::from_millis(1100);

/// The most voters a group may have for its leadership to be handed off
/// at once: the new leader wins with its own vote and the old leader's
/// (whose lease has expired), a majority of three. In a larger group the
/// other voters, whose leases the leader keeps fresh, would refuse it
/// (openraft 0.9 has no leadership transfer that bypasses their lease),
/// so there the old leader first lets their leases run out
/// ([`RaftGroup::transfer_leader`]).
pub(crate) const HANDOFF_AT_ONCE_VOTERS: usize = 3;

/// How long a round waits for each peer's view.
const VIEW_TIMEOUT: Duration = Duration::from_secs(1);

/// The default interval between two balancing rounds of a node.
pub const DEFAULT_BALANCE_INTERVAL_MS: u64 = 1000;

/// A node's leadership moves: whether it is draining, the move under way,
/// and counters.
#[derive(Debug, Default)]
pub(crate) struct Balance {
    draining: AtomicBool,
    /// Whether the node is leaving the cluster: its votes move first.
    leaving: AtomicBool,
    removed: AtomicBool,
    moving: Mutex<Option<MoveStatus>>,
    rounds: AtomicU64,
    moved: AtomicU64,
    failed: AtomicU64,
    held_us_max: AtomicU64,
    voters_moved: AtomicU64,
    forgotten: AtomicU64,
    /// Each group's leader as the last round's views said (the view of
    /// the latest term that names one).
    leaders_seen: Mutex<Vec<Option<NodeId>>>,
    /// Per group, whether the last round's plan gives this node a vote
    /// (`None` before a round had a plan).
    planned: Mutex<Option<Vec<bool>>>,
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
    /// Voter changes this node made to groups it leads (placement).
    #[serde(default)]
    pub voters_moved: u64,
    /// Groups this node forgot since it started: the placement moved it
    /// off them, and it dropped their log, snapshots and state.
    #[serde(default)]
    pub groups_forgotten: u64,
}

impl Balance {
    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub(crate) fn set_draining(&self, draining: bool) {
        self.draining.store(draining, Ordering::Relaxed);
        if !draining {
            self.set_leaving(false);
        }
    }

    /// Whether the node is leaving the cluster (its votes move first).
    pub(crate) fn leaving(&self) -> bool {
        self.leaving.load(Ordering::Relaxed)
    }

    pub(crate) fn set_leaving(&self, leaving: bool) {
        self.leaving.store(leaving, Ordering::Relaxed);
    }

    /// Whether this node learned that the cluster removed it.
    pub(crate) fn removed(&self) -> bool {
        self.removed.load(Ordering::Relaxed)
    }

    pub(crate) fn moves(&self) -> Vec<MoveStatus> {
        crate::sync::lock(&self.moving).iter().cloned().collect()
    }

    /// Group `group`'s leader as the last round's views said, if any.
    pub(crate) fn leader_seen(&self, group: usize) -> Option<NodeId> {
        crate::sync::lock(&self.leaders_seen)
            .get(group)
            .copied()
            .flatten()
    }

    /// Keeps each group's leader from the views of `groups` groups: the
    /// one named in the view of the latest term.
    fn note_leaders(&self, groups: usize, views: &[(NodeId, Option<NodeView>)]) {
        let seen: Vec<Option<NodeId>> = (0..groups)
            .map(|g| {
                views
                    .iter()
                    .filter_map(|(_, v)| v.as_ref()?.groups.get(g))
                    .filter(|v| v.leader.is_some())
                    .max_by_key(|v| v.term)
                    .and_then(|v| v.leader)
            })
            .collect();
        *crate::sync::lock(&self.leaders_seen) = seen;
    }

    /// Keeps which groups `plan` gives `me` a vote in.
    fn note_plan(&self, me: NodeId, plan: Option<&[BTreeSet<NodeId>]>) {
        if let Some(plan) = plan {
            let mine = plan.iter().map(|voters| voters.contains(&me)).collect();
            *crate::sync::lock(&self.planned) = Some(mine);
        }
    }

    /// Whether the last round's plan gives this node a vote in `group`;
    /// `None` before a round had a plan.
    pub(crate) fn planned(&self, group: usize) -> Option<bool> {
        crate::sync::lock(&self.planned)
            .as_ref()
            .map(|p| p.get(group).copied().unwrap_or(false))
    }

    pub(crate) fn stats(&self) -> BalanceStats {
        BalanceStats {
            draining: self.draining(),
            rounds: self.rounds.load(Ordering::Relaxed),
            moved: self.moved.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            held_us_max: self.held_us_max.load(Ordering::Relaxed),
            voters_moved: self.voters_moved.load(Ordering::Relaxed),
            groups_forgotten: self.forgotten.load(Ordering::Relaxed),
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
    /// The replication factor: voters per group.
    pub(crate) factor: usize,
    /// Whether leaderships are handed off (`--leader-balance-interval-ms`
    /// above 0); placement goes on either way.
    pub(crate) hand_offs: bool,
    /// How long a member may not answer before the leader of group 0
    /// removes it (`None`: never).
    pub(crate) dead_after: Option<Duration>,
    /// Which groups the node holds.
    pub(crate) holding: Arc<crate::holding::Holding>,
}

/// What a node's rounds remember from one to the next.
#[derive(Default)]
struct Memory {
    /// Each group's leader and since when this node has seen it lead.
    since: Vec<(Option<NodeId>, Instant)>,
    /// While this node leads group 0: when each member last answered
    /// (since this node leads it, at the earliest).
    seen: BTreeMap<NodeId, Instant>,
    /// The members whose replication factor differs from this node's, as
    /// last logged.
    mismatched: BTreeMap<NodeId, usize>,
    /// Since when each group this node may forget has been so
    /// ([`forgettable`]).
    out_since: BTreeMap<usize, Instant>,
}

/// A group's metrics as openraft reports them.
type Metrics = openraft::RaftMetrics<NodeId, openraft::BasicNode>;

/// How far behind the leader's last log index a learner may be when it
/// is made a voter (it then holds nearly every entry, so the new voter
/// set commits at once).
const VOTER_CATCH_UP_ENTRIES: u64 = 64;

/// How long a membership change may take before the round gives up on
/// it (the change goes on in the group; the next round sees where it
/// ended).
const CHANGE_TIMEOUT: Duration = Duration::from_secs(10);

impl Balancer {
    /// Runs a round every `interval` until the node's groups are gone.
    pub(crate) async fn run(self, interval: Duration) {
        let mut memory = Memory::default();
        loop {
            tokio::time::sleep(interval).await;
            let Some(groups) = self.groups.upgrade() else {
                return;
            };
            self.round(&groups, &mut memory).await;
            self.balance.rounds.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One round: every member asked for its view (whether this node
    /// was removed; on group 0's leader, which members stopped
    /// answering), then at most one membership change, else at most one
    /// leadership handed off.
    async fn round(&self, groups: &[Arc<RaftGroup>], memory: &mut Memory) {
        let me = self.me;
        let now = Instant::now();
        let metrics: Vec<Metrics> = groups
            .iter()
            .map(|g| g.raft().metrics().borrow().clone())
            .collect();
        // A leader's own lease on its groups is renewed each round, even
        // while no request asks (`Holding::led`).
        for (group, m) in metrics.iter().enumerate() {
            self.holding.led(group, m);
        }
        let leaders: Vec<Option<NodeId>> = metrics.iter().map(|m| m.current_leader).collect();
        // Since when each group has had the leader it has now (as far as
        // this node saw).
        let since: Vec<(Option<NodeId>, Instant)> = leaders
            .iter()
            .enumerate()
            .map(|(i, l)| match memory.since.get(i) {
                Some(&(was, at)) if was == *l => (was, at),
                _ => (*l, now),
            })
            .collect();
        memory.since.clone_from(&since);
        // Members that joined become known by their recorded address.
        if let Some(group0) = metrics.first() {
            for (id, node) in group0.membership_config.membership().nodes() {
                self.links.learn(*id, &node.addr);
            }
        }
        let addrs = self.links.addrs();
        let views = futures_util::future::join_all(
            addrs
                .iter()
                .filter(|(id, _)| **id != me)
                .map(|(&id, addr)| async move { (id, self.view_of(id, addr).await) }),
        )
        .await;
        self.balance.note_leaders(groups.len(), &views);
        self.compare_factors(&views, &mut memory.mismatched);
        if self.notice_removal(&views) {
            // Its groups stop, so a node removed while it was down does
            // not campaign with the voters of its stale memberships.
            for group in groups {
                if let Err(e) = group.raft().shutdown().await {
                    tracing::debug!(error = %e, "a removed node's group was stopped already");
                }
            }
        }
        if self.balance.removed() {
            return;
        }
        if self
            .remove_dead(groups, &metrics, &views, &mut memory.seen)
            .await
        {
            return;
        }
        let known = known_groups(groups, me, &views);
        // Members leaving the cluster get no votes: theirs move first.
        let leaving: BTreeSet<NodeId> = views
            .iter()
            .filter(|(_, v)| v.as_ref().is_some_and(|v| v.leaving))
            .map(|(id, _)| *id)
            .chain(self.balance.leaving().then_some(me))
            .collect();
        let plan = self.plan(&metrics, &known, &leaving);
        self.balance.note_plan(me, plan.as_deref());
        self.forget_one(groups, &metrics, &known, &mut memory.out_since)
            .await;
        if self.place(groups, &metrics, plan.as_deref()).await || !self.hand_offs {
            return;
        }
        // Who leads each group: this node's own Raft knows only the groups
        // it holds; the freshest views know the rest.
        let leaders: Vec<Option<NodeId>> = known.iter().map(|k| k.as_ref()?.leader).collect();
        // Groups this node has led long enough.
        let mine: Vec<usize> = (0..groups.len())
            .filter(|&i| leads(&metrics[i], me) && now.duration_since(since[i].1) >= MIN_TENURE)
            .collect();
        if mine.is_empty() {
            return;
        }
        let count = |n: NodeId| leaders.iter().filter(|l| **l == Some(n)).count();
        let takes = |n: NodeId| {
            views
                .iter()
                .any(|(id, v)| *id == n && v.as_ref().is_some_and(|v| !v.draining))
        };
        // A group the plan takes this node's vote from goes first (its
        // new leader then changes its voters); else, while draining, any;
        // else one whose other voter leads two fewer groups than this
        // node. The new leader is the voter leading the fewest, the
        // group the one where that voter holds the most entries.
        let matched = |g: usize, to: NodeId| {
            metrics[g]
                .replication
                .as_ref()
                .and_then(|r| r.get(&to).copied().flatten())
                .map(|l| l.index)
        };
        let plan = plan.as_deref();
        let leaving = |g: usize| plan.is_some_and(|p| !p[g].contains(&me));
        let Some((group, to)) = mine
            .iter()
            .flat_map(|&g| {
                voters(&metrics[g])
                    .into_iter()
                    .filter(move |&to| to != me)
                    .filter(|&to| takes(to))
                    .filter(move |&to| plan.is_none_or(|p| p[g].contains(&to)))
                    .map(move |to| (g, to))
            })
            .min_by_key(|&(g, to)| (!leaving(g), count(to), Reverse(matched(g, to)), to))
        else {
            return;
        };
        if !leaving(group) && !self.balance.draining() && count(me) < count(to) + 2 {
            return;
        }
        let Some(addr) = self.links.get(to) else {
            return;
        };
        self.moving(Some(MoveStatus {
            group,
            kind: "leader".to_owned(),
            from: Some(me),
            to: Some(to),
        }));
        // It holds the group for a lease from here on, through the
        // election it starts.
        self.holding
            .led(group, &groups[group].raft().metrics().borrow());
        let result = groups[group]
            .transfer_leader(
                me,
                to,
                &addr,
                self.links.token.as_deref(),
                &self.client.http,
            )
            .await;
        self.moving(None);
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

    /// Makes a membership change ([`timed`]), shown as the move under
    /// way meanwhile and logged as `what`; whether it was made.
    async fn change<T, E: std::fmt::Display>(
        &self,
        status: MoveStatus,
        what: &str,
        change: impl std::future::Future<Output = Result<T, E>>,
    ) -> bool {
        let group = status.group;
        self.moving(Some(status));
        let result = timed(change).await;
        self.moving(None);
        match &result {
            Ok(()) => tracing::info!(group, what, "changed the group's membership"),
            Err(e) => tracing::warn!(group, what, error = %e, "a membership change failed"),
        }
        result.is_ok()
    }

    /// Records the move under way (`None`: none).
    fn moving(&self, status: Option<MoveStatus>) {
        *crate::sync::lock(&self.balance.moving) = status;
    }

    /// Each group's planned voters ([`crate::placement::plan`]), once the
    /// freshest views (`known`, [`known_groups`]) name every group's
    /// voters: a node holds only some groups, so its own Raft does not
    /// know the others' memberships.
    fn plan(
        &self,
        metrics: &[Metrics],
        known: &[Option<GroupView>],
        leaving: &BTreeSet<NodeId>,
    ) -> Option<Vec<BTreeSet<NodeId>>> {
        let placed: Vec<Placed> = known
            .iter()
            .map(|k| {
                let k = k.as_ref().filter(|k| !k.voters.is_empty())?;
                Some(Placed {
                    voters: k.voters.iter().copied().collect(),
                    leader: k.leader,
                })
            })
            .collect::<Option<_>>()?;
        let mut members = registry(metrics);
        members.retain(|id| !leaving.contains(id));
        if members.is_empty() {
            return None;
        }
        Some(plan(&placed, &members, self.factor))
    }

    /// Moves one group this node leads towards the placement: a member
    /// that does not follow it yet is added as a learner, else its voters
    /// become the planned ones once every new voter holds nearly every
    /// entry (a group whose plan drops this node is handed off instead).
    /// Whether it changed a membership (or tried).
    async fn place(
        &self,
        groups: &[Arc<RaftGroup>],
        metrics: &[Metrics],
        plan: Option<&[BTreeSet<NodeId>]>,
    ) -> bool {
        let me = self.me;
        // A change left half done (its leader lost the group between the
        // joint configuration and the new one) is finished first: the
        // joint configuration's last half becomes the configuration.
        for g in (0..metrics.len()).filter(|&g| leads(&metrics[g], me) && changing(&metrics[g])) {
            let membership = metrics[g].membership_config.membership();
            let Some(target) = membership.get_joint_config().last().cloned() else {
                continue;
            };
            let what = format!("finish the change of voters to {target:?}");
            let raft = groups[g].raft();
            let change = raft.change_membership(target, true);
            self.change(mv(g, "voter", None, None), &what, change).await;
            return true;
        }
        let led: Vec<usize> = (0..metrics.len())
            .filter(|&g| leads(&metrics[g], me) && !changing(&metrics[g]))
            .collect();
        let members = registry(metrics);
        for &g in led.iter().filter(|&&g| g != 0) {
            let membership = metrics[g].membership_config.membership();
            // A planned voter that does not follow the group yet (only
            // the planned voters follow a group; with no plan yet, none
            // is added).
            let joining = plan
                .and_then(|p| p.get(g))
                .and_then(|want| want.iter().find(|id| membership.get_node(id).is_none()))
                .and_then(|&id| Some((id, self.addr_of(&metrics[0], id)?)));
            if let Some((id, addr)) = joining {
                let raft = groups[g].raft();
                let change = raft.add_learner(id, openraft::BasicNode::new(addr), false);
                let what = format!("add node {id} as a learner");
                self.change(mv(g, "learner", None, Some(id)), &what, change)
                    .await;
                return true;
            }
            // A learner the cluster removed (its vote went first), or one
            // the plan gives no vote (a voter that left stays a learner
            // until then): it is told first, so it stops answering for
            // the group before it stops hearing of it.
            let gone = membership.learner_ids().find(|id| {
                !members.contains(id)
                    || plan.and_then(|p| p.get(g)).is_some_and(|w| !w.contains(id))
            });
            if let Some(gone) = gone {
                if members.contains(&gone) {
                    self.release(g, gone).await;
                }
                let raft = groups[g].raft();
                let change =
                    raft.change_membership(ChangeMembers::RemoveNodes([gone].into()), false);
                let what = format!("drop learner {gone}");
                self.change(mv(g, "learner", Some(gone), None), &what, change)
                    .await;
                return true;
            }
        }
        let Some(plan) = plan else {
            return false;
        };
        for &g in &led {
            let m = &metrics[g];
            let now = voters(m);
            let want = &plan[g];
            if *want == now || !want.contains(&me) {
                continue;
            }
            let last = m.last_log_index.unwrap_or(0);
            let membership = m.membership_config.membership();
            let ready = want.iter().all(|n| {
                now.contains(n)
                    || (membership.get_node(n).is_some()
                        && m.replication
                            .as_ref()
                            .and_then(|r| r.get(n).copied().flatten())
                            .is_some_and(|l| l.index + VOTER_CATCH_UP_ENTRIES >= last))
            });
            if !ready {
                continue;
            }
            let from = now.difference(want).next().copied();
            let to = want.difference(&now).next().copied();
            let what = format!("change the voters to {want:?}");
            let raft = groups[g].raft();
            let change = raft.change_membership(want.clone(), true);
            if self.change(mv(g, "voter", from, to), &what, change).await {
                self.balance.voters_moved.fetch_add(1, Ordering::Relaxed);
            }
            return true;
        }
        false
    }

    /// Forgets the first group this node has been out of for
    /// [`FORGET_AFTER`] ([`forgettable`], `crate::forget`).
    async fn forget_one(
        &self,
        groups: &[Arc<RaftGroup>],
        metrics: &[Metrics],
        known: &[Option<GroupView>],
        out_since: &mut BTreeMap<usize, Instant>,
    ) {
        // A group given back clears its mark once this node votes in it.
        for group in groups {
            group.refuses_votes(self.me);
        }
        let now = Instant::now();
        let out: BTreeSet<usize> = (1..groups.len())
            .filter(|&g| {
                forgettable(
                    self.me,
                    &metrics[g],
                    known.get(g).and_then(Option::as_ref),
                    self.balance.planned(g),
                    self.holding.holds(g, &metrics[g]),
                )
            })
            .collect();
        out_since.retain(|g, _| out.contains(g));
        for &g in &out {
            out_since.entry(g).or_insert(now);
        }
        let Some(group) = out.iter().copied().find(|g| {
            out_since
                .get(g)
                .is_some_and(|at| now.duration_since(*at) >= FORGET_AFTER)
        }) else {
            return;
        };
        out_since.remove(&group);
        match groups[group].forget().await {
            Ok(()) => {
                self.balance.forgotten.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    group,
                    "forgot a group this node no longer holds: its log, snapshots and state are gone"
                );
            }
            Err(e) => tracing::warn!(group, error = %e, "could not forget a group"),
        }
    }

    /// Tells member `id` that this node (group `group`'s leader) drops it
    /// from the group ([`crate::RaftMessage::Release`]): it stops
    /// answering for the group from its own state. A member that does not
    /// answer stops at the latest when its lease runs out.
    async fn release(&self, group: usize, id: NodeId) {
        let Some(addr) = self.links.get(id) else {
            return;
        };
        let path = crate::wire::RaftMessage::Release.path(group);
        if let Err(e) = self
            .client
            .http
            .post(
                &addr,
                &path,
                Vec::new(),
                self.links.token.as_deref(),
                VIEW_TIMEOUT,
            )
            .await
        {
            tracing::debug!(group, node = id, error = %e, "a dropped learner was not told");
        }
    }

    /// Where member `id` is reached: this node's `--peer` entry for it,
    /// else the address group 0's membership recorded.
    fn addr_of(&self, group0: &Metrics, id: NodeId) -> Option<String> {
        let recorded = group0
            .membership_config
            .membership()
            .get_node(&id)
            .map(|n| n.addr.clone())
            .unwrap_or_default();
        let addr = self.links.addr_of(id, &recorded);
        (!addr.is_empty()).then_some(addr)
    }

    /// Logs the members whose `--replication-factor` differs from this
    /// node's (groups led by nodes that disagree aim at different voter
    /// counts), whenever that set changes.
    fn compare_factors(
        &self,
        views: &[(NodeId, Option<NodeView>)],
        mismatched: &mut BTreeMap<NodeId, usize>,
    ) {
        let now = other_factors(self.factor, views);
        if now != *mismatched && !now.is_empty() {
            tracing::warn!(
                mine = self.factor,
                theirs = ?now,
                "members run with another --replication-factor: give every member the same"
            );
        }
        *mismatched = now;
    }

    /// Marks this node removed when the freshest view of group 0 among
    /// the members that answered (the latest term with a leader, then
    /// the longest log) no longer holds it; whether it was not marked
    /// before.
    fn notice_removal(&self, views: &[(NodeId, Option<NodeView>)]) -> bool {
        let latest = views
            .iter()
            .filter_map(|(_, v)| v.as_ref()?.groups.first())
            .filter(|g| g.leader.is_some() && !g.voters.is_empty())
            .max_by_key(|g| (g.term, g.last_log_index));
        let Some(group0) = latest else {
            return false;
        };
        if group0.voters.contains(&self.me) || group0.learners.contains(&self.me) {
            return false;
        }
        let newly = !self.balance.removed.swap(true, Ordering::Relaxed);
        if newly {
            tracing::error!(
                node = self.me,
                "this node was removed from the cluster: it serves no requests; to add it \
                 back, start it with an empty data directory and --join"
            );
        }
        newly
    }

    /// On group 0's leader: removes a member that has not answered for
    /// longer than the dead-node timeout, when the others are still at
    /// least the replication factor. Whether it tried.
    async fn remove_dead(
        &self,
        groups: &[Arc<RaftGroup>],
        metrics: &[Metrics],
        views: &[(NodeId, Option<NodeView>)],
        seen: &mut BTreeMap<NodeId, Instant>,
    ) -> bool {
        let Some(after) = self.dead_after else {
            return false;
        };
        if !metrics.first().is_some_and(|m| leads(m, self.me)) {
            seen.clear();
            return false;
        }
        let now = Instant::now();
        let members = registry(metrics);
        seen.retain(|id, _| members.contains(id));
        for &id in members.iter().filter(|&&id| id != self.me) {
            let answered = views.iter().any(|(v, answer)| *v == id && answer.is_some());
            if answered {
                seen.insert(id, now);
            } else {
                seen.entry(id).or_insert(now);
            }
        }
        let Some((&dead, &last)) = seen
            .iter()
            .filter(|&(_, &at)| now.duration_since(at) > after)
            .min_by_key(|&(_, &at)| at)
        else {
            return false;
        };
        if members.len() <= self.factor {
            return false;
        }
        tracing::warn!(
            node = dead,
            unanswered_s = now.duration_since(last).as_secs(),
            "a member stopped answering for longer than the dead-node timeout: removing it"
        );
        match remove_member(groups, self.me, dead, self.factor).await {
            Ok(()) => {
                seen.remove(&dead);
            }
            Err(e) => tracing::warn!(node = dead, error = %e, "removing a dead member failed"),
        }
        true
    }

    /// Member `id`'s view, if it answers as itself.
    async fn view_of(&self, id: NodeId, addr: &str) -> Option<NodeView> {
        let token = self.links.token.as_deref();
        ask_view(&self.client.http, (id, addr), token, VIEW_TIMEOUT)
            .await
            .ok()
    }
}

/// Each group as the freshest view of it says (this node's own and the
/// members' answers this round): the latest term, the view of the node
/// that leads in it before the others, then the longest log. `None` for
/// a group no view names voters of.
fn known_groups(
    groups: &[Arc<RaftGroup>],
    me: NodeId,
    views: &[(NodeId, Option<NodeView>)],
) -> Vec<Option<GroupView>> {
    groups
        .iter()
        .enumerate()
        .map(|(g, group)| {
            let own = group.view();
            std::iter::once((me, &own))
                .chain(
                    views
                        .iter()
                        .filter_map(|(id, v)| Some((*id, v.as_ref()?.groups.get(g)?))),
                )
                .filter(|(_, v)| !v.voters.is_empty())
                .max_by_key(|(id, v)| (v.term, v.leader == Some(*id), v.last_log_index))
                .map(|(_, v)| v.clone())
        })
        .collect()
}

/// How long a node must have been out of a group ([`forgettable`])
/// before it forgets it.
const FORGET_AFTER: Duration = Duration::from_secs(10);

/// Whether node `me` may forget group (other than 0) whose metrics on
/// `me` are `own` (see `crate::forget`): it does not hold the group
/// (`held`) or lead it, the plan gives it no vote, its log or snapshot
/// holds something, and `known` — the freshest view of the group — is
/// its leader's (the only view with matched indexes), no older than
/// `me`'s term, with a membership that is applied there (so committed)
/// and names `me` neither voter nor learner.
pub(crate) fn forgettable(
    me: NodeId,
    own: &Metrics,
    known: Option<&GroupView>,
    planned: Option<bool>,
    held: bool,
) -> bool {
    let Some(view) = known else {
        return false;
    };
    let committed = view
        .membership_index
        .is_some_and(|at| view.applied_index >= Some(at));
    !held
        && planned == Some(false)
        && own.current_leader != Some(me)
        && (own.last_log_index.is_some() || own.snapshot.is_some())
        && !view.matched.is_empty()
        && view.leader.is_some_and(|l| l != me)
        && view.term >= own.current_term
        && committed
        && !view.voters.contains(&me)
        && !view.learners.contains(&me)
}

/// The cluster's members: the nodes of group 0's membership (voters and
/// learners), as this node holds it; a member joins and leaves the
/// cluster by joining and leaving group 0. Empty while this node knows
/// none (it does not follow group 0 yet).
pub(crate) fn registry(metrics: &[Metrics]) -> BTreeSet<NodeId> {
    metrics.first().map_or_else(BTreeSet::new, |m| {
        m.membership_config
            .membership()
            .nodes()
            .map(|(id, _)| *id)
            .collect()
    })
}

/// On group 0's leader `me`: takes member `id` out of the cluster — its
/// vote in group 0 goes to another member first (by the plan without
/// it), then it leaves group 0's membership; every other group's leader
/// then moves its vote and drops it ([`Balancer::place`]). A node that is
/// no member is already out.
///
/// # Errors
/// This node does not lead group 0 (the text starts with
/// [`NOT_LEADER`](crate::proposer::NOT_LEADER)), `id` is this node or the
/// last member, or a change failed.
pub(crate) async fn remove_member(
    groups: &[Arc<RaftGroup>],
    me: NodeId,
    id: NodeId,
    factor: usize,
) -> Result<(), String> {
    let Some(group0) = groups.first() else {
        return Err("no groups".to_owned());
    };
    let metrics: Vec<Metrics> = groups
        .iter()
        .map(|g| g.raft().metrics().borrow().clone())
        .collect();
    let m = &metrics[0];
    if !leads(m, me) {
        return Err(format!(
            "{}node {me} does not lead group 0",
            crate::proposer::NOT_LEADER
        ));
    }
    let members = registry(&metrics);
    if !members.contains(&id) {
        return Ok(());
    }
    if id == me {
        return Err(format!(
            "node {me} leads group 0: its leadership moves first (drain it)"
        ));
    }
    let rest: BTreeSet<NodeId> = members.iter().copied().filter(|&n| n != id).collect();
    if rest.is_empty() {
        return Err(format!("node {id} is the cluster's last member"));
    }
    // Voters the plan drops stay learners (`retain`): only `id` leaves.
    let raft = group0.raft();
    if voters(m).contains(&id) {
        let want = plan(&placed(&metrics), &rest, factor).swap_remove(0);
        when_free(|| raft.change_membership(ChangeMembers::ReplaceAllVoters(want.clone()), true))
            .await?;
    }
    when_free(|| raft.change_membership(ChangeMembers::RemoveNodes([id].into()), false)).await?;
    tracing::info!(node = id, "removed a member from the cluster");
    Ok(())
}

/// A membership change given at most [`CHANGE_TIMEOUT`] (it goes on in
/// the group after that); why it was not made.
async fn timed<T, E: std::fmt::Display>(
    change: impl std::future::Future<Output = Result<T, E>>,
) -> Result<(), String> {
    match tokio::time::timeout(CHANGE_TIMEOUT, change).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the change took too long".to_owned()),
    }
}

/// [`timed`] for an operator's change of group 0: while another change
/// of the group is under way (the balancer's own: a learner added, a
/// voter moved), it is tried again until that one is done, within
/// [`CHANGE_TIMEOUT`] overall, instead of failing the operator's request.
async fn when_free<T, N, F, Fut>(mut change: F) -> Result<(), String>
where
    N: openraft::Node,
    F: FnMut() -> Fut,
    Fut: std::future::Future<
            Output = Result<
                T,
                openraft::error::RaftError<NodeId, openraft::error::ClientWriteError<NodeId, N>>,
            >,
        >,
{
    use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
    let deadline = tokio::time::Instant::now() + CHANGE_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, change()).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(busy),
            )))) => {
                if tokio::time::Instant::now() + CHANGE_RETRY >= deadline {
                    return Err(busy.to_string());
                }
                tokio::time::sleep(CHANGE_RETRY).await;
            }
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("the change took too long".to_owned()),
        }
    }
}

/// The pause before a change that found another under way is tried again.
const CHANGE_RETRY: Duration = Duration::from_millis(100);

/// The groups as the planner sees them: each one's voters and leader.
fn placed(metrics: &[Metrics]) -> Vec<Placed> {
    metrics
        .iter()
        .map(|m| Placed {
            voters: voters(m),
            leader: m.current_leader,
        })
        .collect()
}

/// The members whose views give a replication factor other than `mine`.
fn other_factors(mine: usize, views: &[(NodeId, Option<NodeView>)]) -> BTreeMap<NodeId, usize> {
    views
        .iter()
        .filter_map(|(id, v)| Some((*id, v.as_ref()?.replication_factor?)))
        .filter(|(_, factor)| *factor != mine)
        .collect()
}

/// A move of `kind` in `group`, from and to the nodes given.
fn mv(group: usize, kind: &str, from: Option<NodeId>, to: Option<NodeId>) -> MoveStatus {
    MoveStatus {
        group,
        kind: kind.to_owned(),
        from,
        to,
    }
}

/// Whether `me` leads the group.
fn leads(m: &Metrics, me: NodeId) -> bool {
    m.state == openraft::ServerState::Leader && m.current_leader == Some(me)
}

/// The group's voters.
fn voters(m: &Metrics) -> BTreeSet<NodeId> {
    m.membership_config.membership().voter_ids().collect()
}

/// Whether a membership change is half done (a joint configuration).
fn changing(m: &Metrics) -> bool {
    m.membership_config.membership().get_joint_config().len() > 1
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn view(node: NodeId, factor: Option<usize>) -> NodeView {
        NodeView {
            node,
            draining: false,
            removed: false,
            leaving: false,
            replication_factor: factor,
            moves: Vec::new(),
            groups: Vec::new(),
        }
    }

    #[test]
    fn members_with_another_replication_factor_are_named() {
        let views = vec![
            (2, Some(view(2, Some(3)))),
            (3, Some(view(3, Some(5)))),
            (4, None),
            (5, Some(view(5, None))),
        ];
        assert_eq!(other_factors(3, &views), [(3, 5)].into());
        assert_eq!(other_factors(5, &views), [(2, 3)].into());
    }

    #[test]
    fn a_group_is_forgotten_only_once_its_leader_committed_a_membership_without_the_node() {
        let mut own = Metrics::new_initial(2);
        own.current_term = 3;
        own.last_log_index = Some(40);
        let leader = GroupView {
            group: 1,
            voters: vec![1, 3, 4],
            joint: Vec::new(),
            learners: Vec::new(),
            leader: Some(1),
            term: 3,
            applied_index: Some(50),
            last_log_index: Some(50),
            matched: [(1, Some(50)), (3, Some(50)), (4, Some(48))].into(),
            membership_index: Some(45),
        };
        assert!(forgettable(2, &own, Some(&leader), Some(false), false));
        // What this node knows of itself.
        assert!(!forgettable(2, &own, Some(&leader), Some(false), true));
        assert!(!forgettable(2, &own, Some(&leader), Some(true), false));
        assert!(!forgettable(2, &own, Some(&leader), None, false));
        let mut leading = own.clone();
        leading.current_leader = Some(2);
        assert!(!forgettable(2, &leading, Some(&leader), Some(false), false));
        let mut empty = own.clone();
        empty.last_log_index = None;
        assert!(!forgettable(2, &empty, Some(&leader), Some(false), false));
        // What the leader's view says.
        assert!(!forgettable(2, &own, None, Some(false), false));
        let differs = |change: &dyn Fn(&mut GroupView)| {
            let mut view = leader.clone();
            change(&mut view);
            forgettable(2, &own, Some(&view), Some(false), false)
        };
        assert!(!differs(&|v| v.voters.push(2)), "still a voter");
        assert!(!differs(&|v| v.learners.push(2)), "still a learner");
        assert!(!differs(&|v| v.applied_index = Some(44)), "not committed");
        assert!(!differs(&|v| v.membership_index = None), "an older node");
        assert!(!differs(&|v| v.matched.clear()), "not a leader's view");
        assert!(!differs(&|v| v.leader = Some(2)), "names this node");
        assert!(!differs(&|v| v.term = 2), "older than this node's term");
    }

    #[tokio::test]
    #[allow(clippy::result_large_err)] // openraft's own error type
    async fn an_operators_change_waits_for_one_under_way_and_fails_on_others() {
        use openraft::error::{
            ChangeMembershipError, ClientWriteError, EmptyMembership, InProgress, RaftError,
        };
        type Answer = Result<(), RaftError<NodeId, ClientWriteError<NodeId, openraft::BasicNode>>>;
        let busy = || -> Answer {
            Err(RaftError::APIError(
                ClientWriteError::ChangeMembershipError(ChangeMembershipError::InProgress(
                    InProgress {
                        committed: None,
                        membership_log_id: None,
                    },
                )),
            ))
        };
        // Two tries find a change under way, the third is made.
        let tries = std::cell::Cell::new(0);
        let made = when_free(|| {
            tries.set(tries.get() + 1);
            let answer = if tries.get() < 3 { busy() } else { Ok(()) };
            async move { answer }
        })
        .await;
        assert_eq!(made, Ok(()));
        assert_eq!(tries.get(), 3);
        // Any other refusal is the answer at once.
        tries.set(0);
        let refused = when_free(|| {
            tries.set(tries.get() + 1);
            let answer: Answer = Err(RaftError::APIError(
                ClientWriteError::ChangeMembershipError(ChangeMembershipError::EmptyMembership(
                    EmptyMembership {},
                )),
            ));
            async move { answer }
        })
        .await;
        assert!(refused.is_err());
        assert_eq!(tries.get(), 1);
    }
}
