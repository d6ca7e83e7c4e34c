//! A group's proposer ([`RaftGroup`], the engine's `GroupLog`): the
//! group's entries go to openraft in the order they are proposed, batched
//! while earlier ones wait for their commit; a follower forwards them to
//! the leader.

use std::sync::Arc;
use std::time::Duration;

use openraft::Raft;
use strand_engine::{
    EngineError, EntryOutcome, GroupEntry, GroupLog, GroupStatus, LogFuture, ProposalDone,
    Unavailable,
};
use tokio::sync::mpsc;

use crate::balance::Balance;
use crate::holding::Holding;
use crate::lock::DirLock;
use crate::log_store::LogStore;
use crate::network::{ClusterLinks, PeerClient};
use crate::snapshot_file::SnapshotDir;
use crate::stats::{LogStats, RaftGroupMetrics, SnapshotStats};
use crate::types::TypeConfig;
use crate::wire::RaftMessage;

/// How a cluster's member reaches the others about a group: its links
/// and client, the leaders the members' views name, and which groups it
/// holds.
#[derive(Clone)]
pub(crate) struct Membership {
    pub(crate) links: Arc<ClusterLinks>,
    pub(crate) client: PeerClient,
    pub(crate) balance: Arc<Balance>,
    pub(crate) holding: Arc<Holding>,
}

/// A proposal waiting for the group's proposer: its entry, its answer,
/// and whether another member forwarded it (this node leading).
type Queued = (GroupEntry, ProposalDone, bool);

/// A group's Raft node, as the engine's `GroupLog`: proposals go to
/// openraft in the order they are made, outcomes come back from the state
/// machine.
pub(crate) struct RaftGroup {
    group: usize,
    /// What the group's Raft node runs on now (replaced whole when this
    /// node forgets the group, [`crate::forget`]).
    current: Arc<std::sync::RwLock<Current>>,
    /// The places of proposals on their way into openraft and waiting
    /// for their answer ([`IN_FLIGHT`]). A leadership transfer takes them
    /// all: then no proposal is in the log unanswered or still on its
    /// way into it (`client_write_ff` returns once the core has the
    /// entry, not once it appended it — one appended after the new
    /// leader caught up would make the old leader refuse it its vote),
    /// and none enters while the new leader catches up and campaigns.
    in_flight: Arc<tokio::sync::Semaphore>,
    /// The highest log index of an entry whose proposals were answered
    /// (set before they are): what a leader tells the member that
    /// forwarded an entry to wait for. openraft's `last_applied` metric
    /// is published after the answer, so it may still name an earlier
    /// entry — and a follower that waited only for that one would read
    /// without the write it just acknowledged.
    answered: Arc<std::sync::atomic::AtomicU64>,
    proposals: mpsc::UnboundedSender<Queued>,
    /// The data directory's lock, released when the last group stops.
    pub(crate) dir_lock: std::sync::Mutex<Option<Arc<DirLock>>>,
    /// How the group's Raft node is opened again from nothing, on a
    /// cluster's member (which may forget the group).
    pub(crate) reopen: Option<crate::start::GroupOpener>,
    /// Whether this node forgot the group and has not been made one of
    /// its voters since ([`crate::forget`]): it refuses its vote.
    pub(crate) forgotten: std::sync::atomic::AtomicBool,
    /// Taken while the Raft node is replaced or stopped; `true` once the
    /// group has stopped (it is not opened again then).
    pub(crate) stopping: Arc<tokio::sync::Mutex<bool>>,
}

/// A group's Raft node and the files it runs on.
#[derive(Clone)]
pub(crate) struct Current {
    pub(crate) raft: Raft<TypeConfig>,
    pub(crate) log: LogStore,
    /// The group's snapshot files, for its status.
    pub(crate) snapshots: Option<Arc<SnapshotDir>>,
}

impl std::fmt::Debug for RaftGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftGroup")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl RaftGroup {
    /// Wraps a group's Raft node and its log store; spawns the task that
    /// feeds it proposals in order. openraft 0.9 appends (and fsyncs)
    /// each entry it is given before it takes the next, so the task keeps
    /// at most two entries waiting for their commit and proposes what
    /// queued up meanwhile as one [`GroupEntry::Batch`] (up to 256
    /// proposals, 1 MiB of payload): one log record, one replication and
    /// one fsync per voter for all of them.
    /// With `cluster` (how this node reaches its peers, over the node's
    /// shared client), an entry proposed
    /// on a follower is forwarded to the group's leader (a `propose`
    /// message; the leader's own proposer batches it with the rest,
    /// [`RaftGroup::propose_forwarded`]) and answered with the leader's
    /// outcome once this node has applied it too (read-your-writes on the
    /// node a client talks to).
    pub(crate) fn start(group: usize, current: Current, cluster: Option<Membership>) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Queued>();
        let current = Arc::new(std::sync::RwLock::new(current));
        let now = Arc::clone(&current);
        // At most IN_FLIGHT proposals wait for their commit at a time;
        // what arrives meanwhile is proposed together, as one entry.
        let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
        let places = Arc::clone(&in_flight);
        let answered = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let answered_here = Arc::clone(&answered);
        tokio::spawn(async move {
            loop {
                // The first proposal, then a place (an idle proposer
                // holds none, so a transfer can take them all).
                let Some(first) = rx.recv().await else {
                    break;
                };
                let Ok(permit) = Arc::clone(&places).acquire_owned().await else {
                    break;
                };
                // Read with the place taken: a node forgetting the group
                // holds every place while it replaces the Raft node.
                let (proposer, disk) = {
                    let now = crate::sync::read(&now);
                    (now.raft.clone(), now.log.clone())
                };
                let (entry, mut dones, forwarded) = gather(first, &mut rx);
                if disk.waiting_for_space() {
                    // The log would only queue it behind the write that
                    // waits: refuse it now (nothing was applied).
                    answer_all(dones, Err(Unavailable::DiskFull.into()));
                    continue;
                }
                let copy = cluster.clone().map(|links| (links, entry.clone()));
                let submitted = proposer.client_write_ff(entry).await;
                match submitted {
                    Ok(answer) => {
                        let local = proposer.clone();
                        let answered = Arc::clone(&answered_here);
                        tokio::spawn(async move {
                            let outcome = match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
                                Err(_) => {
                                    tracing::warn!(
                                        group,
                                        "a proposal got no answer within {ANSWER_TIMEOUT:?}; answered unavailable"
                                    );
                                    Err(Unavailable::NoAnswer.into())
                                }
                                Ok(Ok(Ok(response))) => Ok(answer_with(&answered, response)),
                                Ok(Ok(Err(
                                    openraft::error::ClientWriteError::ForwardToLeader(f),
                                ))) => match copy {
                                    Some((membership, entry)) => {
                                        match keep_local(
                                            entry,
                                            std::mem::take(&mut dones),
                                            &forwarded,
                                        ) {
                                            // Every proposal was another
                                            // member's: answered already.
                                            None => Err(Unavailable::NoLeader.into()),
                                            Some((entry, kept)) => {
                                                dones = kept;
                                                let to = (&membership, group, &*answered);
                                                pass_on(&local, to, f, &entry).await
                                            }
                                        }
                                    }
                                    None => Err(Unavailable::NoLeader.into()),
                                },
                                Ok(Ok(Err(_))) => Err(Unavailable::LogFailed.into()),
                                // The core dropped the entry's responder:
                                // it has stopped (shut down, or its log
                                // failed).
                                Ok(Err(_)) => Err(EngineError::Unavailable(Unavailable::LogFailed)),
                            };
                            drop(permit);
                            answer_all(dones, outcome);
                        });
                    }
                    Err(openraft::error::Fatal::Stopped) => {
                        answer_all(dones, Err(EngineError::Shutdown));
                    }
                    // The core quit on a storage error (a failed log
                    // write) or a panic: the group takes no more writes.
                    Err(fatal) => {
                        tracing::error!(group, error = %fatal, "the group's raft core has stopped");
                        answer_all(dones, Err(Unavailable::LogFailed.into()));
                    }
                }
            }
        });
        Self {
            group,
            current,
            in_flight,
            answered,
            proposals: tx,
            dir_lock: std::sync::Mutex::new(None),
            reopen: None,
            forgotten: std::sync::atomic::AtomicBool::new(false),
            stopping: Arc::new(tokio::sync::Mutex::new(false)),
        }
    }

    /// Queues a proposal for the group's proposer (`forwarded`: another
    /// member's, which this node takes as the group's leader).
    fn queue(&self, entry: GroupEntry, done: ProposalDone, forwarded: bool) {
        if let Err(mpsc::error::SendError((_, done, _))) =
            self.proposals.send((entry, done, forwarded))
        {
            done(Err(EngineError::Shutdown));
        }
    }

    /// What the group's Raft node runs on now.
    pub(crate) fn current(&self) -> Current {
        crate::sync::read(&self.current).clone()
    }

    /// Replaces what the group's Raft node runs on (a node forgetting the
    /// group).
    pub(crate) fn replace(&self, current: Current) {
        *crate::sync::write(&self.current) = current;
    }

    /// The group's log store now.
    fn log(&self) -> LogStore {
        crate::sync::read(&self.current).log.clone()
    }

    /// The places of the group's proposals ([`IN_FLIGHT`] in all).
    pub(crate) fn places(&self) -> Arc<tokio::sync::Semaphore> {
        Arc::clone(&self.in_flight)
    }

    /// Hands the group's leadership from this node (`me`, its leader) to
    /// the voter `to`, which this node reaches at `addr`: new proposals
    /// wait; once `to` holds every entry this node has, it is asked to
    /// campaign (`elect`), and this node, whose log is no longer, grants
    /// it its vote, so it wins at once; then the proposals go on (to the
    /// new leader, forwarded). Answers how long proposals waited.
    ///
    /// With more than three voters, `to` needs a vote beyond this node's:
    /// the other voters refuse any candidate while their leader lease is
    /// fresh, and this node's heartbeats keep it fresh. So this node stops
    /// its heartbeats first and asks `to` to campaign in the window where
    /// their leases have run out but none of them has started an election
    /// of its own ([`lease_pause`]); proposals wait about a second longer.
    ///
    /// # Errors
    /// This node does not lead, `to` is not a voter, it did not catch up
    /// or win in time, or could not be reached; proposals go on then, and
    /// the group has a leader: this node, or whoever won an election.
    pub(crate) async fn transfer_leader(
        &self,
        me: crate::types::NodeId,
        to: crate::types::NodeId,
        addr: &str,
        token: Option<&str>,
        http: &crate::http::Http,
    ) -> Result<Duration, String> {
        let leads = |m: &openraft::RaftMetrics<u64, openraft::BasicNode>| {
            m.state == openraft::ServerState::Leader && m.current_leader == Some(me)
        };
        let voters = {
            let m = self.raft().metrics().borrow().clone();
            if !leads(&m) {
                return Err(format!("node {me} does not lead group {}", self.group));
            }
            let voters: Vec<_> = m.membership_config.membership().voter_ids().collect();
            if to == me || !voters.contains(&to) {
                return Err(format!(
                    "node {to} is not another voter of group {}",
                    self.group
                ));
            }
            voters.len()
        };
        let started = std::time::Instant::now();
        let permits = u32::try_from(IN_FLIGHT).unwrap_or(u32::MAX);
        let _held = tokio::time::timeout(
            TRANSFER_CATCH_UP,
            Arc::clone(&self.in_flight).acquire_many_owned(permits),
        )
        .await
        .map_err(|_| {
            format!(
                "proposals of group {} still wait for their commit",
                self.group
            )
        })?
        .map_err(|_| format!("group {}'s proposer has stopped", self.group))?;
        let raft = self.raft();
        raft.wait(Some(TRANSFER_CATCH_UP))
            .metrics(
                |m| {
                    let matched = m
                        .replication
                        .as_ref()
                        .and_then(|r| r.get(&to).copied().flatten())
                        .map(|l| l.index);
                    !leads(m) || (matched.is_some() && matched == m.last_log_index)
                },
                "the new leader holds every entry",
            )
            .await
            .map_err(|e| format!("node {to} did not catch up: {e}"))?;
        let lost = || format!("node {me} lost group {}'s leadership meanwhile", self.group);
        if !leads(&raft.metrics().borrow()) {
            return Err(lost());
        }
        let _quiet = if voters > crate::balance::HANDOFF_AT_ONCE_VOTERS {
            let quiet = Quiet::new(raft.clone());
            tokio::time::sleep(lease_pause(raft.config())).await;
            if !leads(&raft.metrics().borrow()) {
                return Err(lost());
            }
            Some(quiet)
        } else {
            None
        };
        http.post(
            addr,
            &RaftMessage::Elect.path(self.group),
            Vec::new(),
            token,
            TRANSFER_ELECTION,
        )
        .await
        .map_err(|e| format!("node {to} was not asked to campaign: {e}"))?;
        raft.wait(Some(TRANSFER_ELECTION))
            .metrics(|m| m.current_leader == Some(to), "the new leader elected")
            .await
            .map_err(|e| format!("node {to} did not win: {e}"))?;
        Ok(started.elapsed())
    }

    /// The group's Raft node now.
    pub(crate) fn raft(&self) -> Raft<TypeConfig> {
        crate::sync::read(&self.current).raft.clone()
    }

    /// Proposes an entry another member forwarded to this node (the
    /// group's leader) through the group's proposer, where it is batched
    /// with the entries proposed meanwhile; its outcome, and a log index
    /// at or past the entry's own ([`RaftGroup::answered`]: the forwarder
    /// waits until it has applied that far before it answers).
    pub(crate) async fn propose_forwarded(
        &self,
        entry: GroupEntry,
    ) -> Result<(EntryOutcome, u64), EngineError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.queue(
            entry,
            Box::new(move |outcome| {
                let _ = tx.send(outcome);
            }),
            true,
        );
        let outcome = rx.await.map_err(|_| EngineError::Shutdown)??;
        // Recorded before the outcome was sent: at or past the entry's.
        let index = self.answered.load(std::sync::atomic::Ordering::SeqCst);
        Ok((outcome, index))
    }

    /// Whether the group's log waits for disk space (its filesystem is
    /// full): what it is given now only queues behind that write.
    pub(crate) fn waiting_for_space(&self) -> bool {
        self.log().waiting_for_space()
    }

    /// The last log index the group's log purged, if any.
    pub(crate) fn purged_index(&self) -> Option<u64> {
        self.raft().metrics().borrow().purged.map(|l| l.index)
    }

    /// The group's log writer counters.
    pub(crate) fn log_stats(&self) -> LogStats {
        self.log().stats()
    }

    /// The group's Raft figures on this node, for metrics.
    pub(crate) fn metrics(&self) -> RaftGroupMetrics {
        let Current {
            raft,
            log,
            snapshots,
        } = self.current();
        let m = raft.metrics().borrow().clone();
        let leader = m.state == openraft::ServerState::Leader && m.current_leader == Some(m.id);
        let last = m.last_log_index.unwrap_or(0);
        let follower_lag = m
            .replication
            .as_ref()
            .map(|followers| {
                followers
                    .iter()
                    .filter(|(id, _)| **id != m.id)
                    .map(|(id, matched)| (*id, last.saturating_sub(matched.map_or(0, |l| l.index))))
                    .collect()
            })
            .unwrap_or_default();
        RaftGroupMetrics {
            group: self.group,
            leader,
            term: m.current_term,
            applied_index: m.last_applied.map(|l| l.index),
            committed_index: log.committed(),
            last_log_index: m.last_log_index,
            follower_lag,
            snapshot: snapshots.map(|s| s.stats()),
            log: log.stats(),
            fsyncs: log.fsync_histogram(),
        }
    }

    /// The group as this node sees it: membership, leader, term, indexes
    /// and, on the leader, each member's matched index.
    pub(crate) fn view(&self) -> crate::cluster::GroupView {
        let m = self.raft().metrics().borrow().clone();
        let membership = m.membership_config.membership();
        crate::cluster::GroupView {
            group: self.group,
            voters: membership.voter_ids().collect(),
            joint: match membership.get_joint_config().as_slice() {
                [_] | [] => Vec::new(),
                configs => configs
                    .iter()
                    .map(|c| c.iter().copied().collect())
                    .collect(),
            },
            learners: membership.learner_ids().collect(),
            leader: m.current_leader,
            term: m.current_term,
            applied_index: m.last_applied.map(|l| l.index),
            last_log_index: m.last_log_index,
            membership_index: m.membership_config.log_id().map(|l| l.index),
            matched: m
                .replication
                .as_ref()
                .map(|members| {
                    members
                        .iter()
                        .map(|(id, matched)| (*id, matched.map(|l| l.index)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The group's snapshots, when its files are known.
    pub(crate) fn snapshot_stats(&self) -> Option<SnapshotStats> {
        crate::sync::read(&self.current)
            .snapshots
            .as_ref()
            .map(|s| s.stats())
    }
}

/// How a leader's refusal of a forwarded entry starts when it did not
/// append it because it does not lead (the entry may go to the next
/// leader).
pub(crate) const NOT_LEADER: &str = "not the leader: ";

/// What a [`NOT_LEADER`] refusal of a forwarded entry says before the id
/// of the leader its node knows of.
const LEADER_IS: &str = "; its leader is node ";

/// The refusal of an entry forwarded to `me`, which does not lead
/// `group`; it names the leader `me` knows of, so the forwarder goes
/// there at once ([`leader_named`]) rather than waiting to learn it.
pub(crate) fn not_leader(
    me: crate::types::NodeId,
    group: usize,
    leader: Option<crate::types::NodeId>,
) -> String {
    match leader.filter(|&l| l != me) {
        Some(l) => format!("{NOT_LEADER}node {me} does not lead group {group}{LEADER_IS}{l}"),
        None => format!("{NOT_LEADER}node {me} does not lead group {group} and knows no leader"),
    }
}

/// The leader a [`not_leader`] refusal names, if any.
fn leader_named(refusal: &str) -> Option<crate::types::NodeId> {
    refusal
        .strip_prefix(NOT_LEADER)?
        .rsplit_once(LEADER_IS)?
        .1
        .parse()
        .ok()
}

/// How a leader's refusal of a forwarded entry starts when its limits
/// (the hot-memory budget) keep the entry out for now.
pub(crate) const REFUSED: &str = "refused for now: ";

/// A leader's refusal of a forwarded entry while its log waits for disk
/// space.
pub(crate) const DISK_FULL: &str = "the leader's log is waiting for disk space";

/// The group's heartbeats stopped while it lives: its followers' leader
/// leases run out (a leadership hand-off in a group of more than three
/// voters). Dropping it starts them again.
struct Quiet(Raft<TypeConfig>);

impl Quiet {
    fn new(raft: Raft<TypeConfig>) -> Self {
        raft.runtime_config().heartbeat(false);
        Self(raft)
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        self.0.runtime_config().heartbeat(true);
    }
}

/// How long a leader waits, once its heartbeats stopped, before the voter
/// it hands the group to campaigns. openraft 0.9 refuses a vote while a
/// voter heard from its leader within the lease (`election_timeout_max`)
/// and lets a follower start its own election only after the lease plus
/// its election timeout (at least `election_timeout_min`). The last
/// heartbeat left at most `heartbeat_interval` before they stopped, so
/// every other voter grants votes from `max` after the stop and none
/// campaigns before `max + min - heartbeat`: the pause ends in the middle
/// of that window. With the settings here the window runs from 900 to
/// 1,200 ms after the stop, and the pause ends at 1,050 ms.
fn lease_pause(config: &openraft::Config) -> Duration {
    let window = config
        .election_timeout_min
        .saturating_sub(config.heartbeat_interval);
    Duration::from_millis(config.election_timeout_max.saturating_add(window / 2))
}

/// How long a leadership transfer waits for its new leader to hold every
/// entry (proposals wait meanwhile).
const TRANSFER_CATCH_UP: Duration = Duration::from_secs(2);
/// How long a leadership transfer waits for its new leader to win.
const TRANSFER_ELECTION: Duration = Duration::from_secs(2);

/// Proposals of a group waiting for their commit at a time; the ones
/// that arrive meanwhile wait and are then proposed together.
pub(crate) const IN_FLIGHT: usize = 2;
/// How long a proposal waits for openraft's answer before it is answered
/// `Unavailable` and gives its place back. openraft 0.9 never answers an
/// entry that a deposed leader appended and then dropped by installing
/// the new leader's snapshot (it answers only applied or truncated
/// entries), so without this bound two such entries would stop the group's
/// proposals on this node for good. The entry may still commit later: a
/// client retrying with its producer headers is deduplicated.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);
/// The most proposals one log entry holds.
const MAX_BATCH: usize = 256;
/// A batch takes no more proposals once its payloads reach this many bytes.
const MAX_BATCH_BYTES: usize = 1 << 20;

/// The entry to propose for `first` and the proposals queued behind it
/// (up to [`MAX_BATCH`] of them and [`MAX_BATCH_BYTES`] of payload): the
/// entry itself when it is alone, else a [`GroupEntry::Batch`] of them in
/// order; and their callbacks, in the same order.
fn gather(
    first: Queued,
    rx: &mut mpsc::UnboundedReceiver<Queued>,
) -> (GroupEntry, Vec<ProposalDone>, Vec<bool>) {
    let (entry, done, forwarded) = first;
    let mut bytes = entry.payload_bytes();
    let mut entries = vec![entry];
    let mut dones = vec![done];
    let mut from = vec![forwarded];
    while entries.len() < MAX_BATCH && bytes < MAX_BATCH_BYTES {
        let Ok((entry, done, forwarded)) = rx.try_recv() else {
            break;
        };
        bytes = bytes.saturating_add(entry.payload_bytes());
        entries.push(entry);
        dones.push(done);
        from.push(forwarded);
    }
    (one_entry(entries), dones, from)
}

/// The entry proposing `entries` together: the one itself, or a batch.
fn one_entry(mut entries: Vec<GroupEntry>) -> GroupEntry {
    if entries.len() == 1 {
        entries.pop().unwrap_or(GroupEntry::Batch(Vec::new()))
    } else {
        GroupEntry::Batch(entries)
    }
}

/// Takes this node's own proposals (`entry`) to group `group`'s leader
/// once openraft said this node does not lead (`refusal`): the leader it
/// named; a group this node does not hold has none it knows of, so the
/// members' views name one (before a view does: any other member, one
/// that does not lead says so, and the next view is awaited); an
/// election under way (a hand-off, say) is waited for. A leader that is
/// this node writes the entry into its own log.
async fn pass_on(
    local: &Raft<TypeConfig>,
    (membership, group, answered): (&Membership, usize, &std::sync::atomic::AtomicU64),
    refusal: openraft::error::ForwardToLeader<crate::types::NodeId, openraft::BasicNode>,
    entry: &GroupEntry,
) -> Result<EntryOutcome, EngineError> {
    let Membership {
        links,
        client,
        balance,
        holding,
    } = membership;
    let me = local.metrics().borrow().id;
    let held = holding.holds(group, &local.metrics().borrow());
    let leader = if held {
        match refusal.leader_id.zip(refusal.leader_node) {
            Some((id, node)) => Some((id, links.addr_of(id, &node.addr))),
            None => local_leader_after(local, None)
                .await
                .map(|(id, recorded)| (id, links.addr_of(id, &recorded))),
        }
    } else {
        balance
            .leader_seen(group)
            .into_iter()
            .chain(links.addrs().into_keys())
            .filter(|&id| id != me)
            .find_map(|id| Some((id, links.get(id)?)))
    };
    match leader {
        // This node won the election: the entry was not appended; this
        // proposal keeps its place meanwhile.
        Some((id, _)) if id == me => write_here(local, answered, entry.clone()).await,
        Some(to) => {
            let how = Forward {
                client,
                links,
                balance: (!held).then_some(&**balance),
                holding,
                answered,
            };
            forward_to(local, &how, to, group, entry).await
        }
        None => Err(Unavailable::NoLeader.into()),
    }
}

/// Of an entry gathered from proposals that this node turned out not to
/// lead, keeps its own proposals (their entry and answers) for the
/// leader, and answers those other members forwarded ([`Unavailable::NoLeader`],
/// which the member hears as "not the leader", naming the one this node
/// knows): a forwarded entry is never forwarded a second time. (The
/// member may be the new leader itself, its own proposals' places all
/// taken by forwards waiting for this node: it writes the entry itself.)
/// `None` when no proposal was this node's.
fn keep_local(
    entry: GroupEntry,
    dones: Vec<ProposalDone>,
    forwarded: &[bool],
) -> Option<(GroupEntry, Vec<ProposalDone>)> {
    if !forwarded.contains(&true) {
        return Some((entry, dones));
    }
    let items = match entry {
        GroupEntry::Batch(items) if dones.len() > 1 => items,
        one => vec![one],
    };
    let mut kept = (Vec::new(), Vec::new());
    for ((item, done), &other) in items.into_iter().zip(dones).zip(forwarded) {
        if other {
            done(Err(Unavailable::NoLeader.into()));
        } else {
            kept.0.push(item);
            kept.1.push(done);
        }
    }
    (!kept.1.is_empty()).then(|| (one_entry(kept.0), kept.1))
}

/// The outcome of an entry this node appended, its log index recorded
/// first ([`RaftGroup::answered`]).
fn answer_with(
    answered: &std::sync::atomic::AtomicU64,
    response: openraft::raft::ClientWriteResponse<TypeConfig>,
) -> EntryOutcome {
    answered.fetch_max(response.log_id.index, std::sync::atomic::Ordering::SeqCst);
    response.data
}

/// Writes `entry` into this node's own log, for a proposal that was on
/// its way to the leader when this node became it (the proposal's place
/// is held meanwhile, as for any entry in this node's log); its outcome.
async fn write_here(
    local: &Raft<TypeConfig>,
    answered: &std::sync::atomic::AtomicU64,
    entry: GroupEntry,
) -> Result<EntryOutcome, EngineError> {
    match tokio::time::timeout(ANSWER_TIMEOUT, local.client_write(entry)).await {
        Ok(Ok(response)) => Ok(answer_with(answered, response)),
        Ok(Err(_)) => Err(Unavailable::NoLeader.into()),
        Err(_) => Err(Unavailable::NoAnswer.into()),
    }
}

/// Answers the proposals of one entry: each its own outcome of a batch's,
/// or all the same error.
fn answer_all(dones: Vec<ProposalDone>, outcome: Result<EntryOutcome, EngineError>) {
    match outcome {
        Ok(EntryOutcome::Batch(outcomes)) if dones.len() > 1 => {
            if outcomes.len() != dones.len() {
                // Cannot happen: a batch answers each of its entries.
                tracing::error!(
                    proposals = dones.len(),
                    outcomes = outcomes.len(),
                    "a batch's outcomes do not match its proposals"
                );
                for done in dones {
                    done(Err(Unavailable::LogFailed.into()));
                }
                return;
            }
            for (done, outcome) in dones.into_iter().zip(outcomes) {
                done(Ok(outcome));
            }
        }
        Ok(outcome) if dones.len() == 1 => {
            if let Some(done) = dones.into_iter().next() {
                done(Ok(outcome));
            }
        }
        Ok(_) => {
            tracing::error!("a batch was answered with a single outcome");
            for done in dones {
                done(Err(Unavailable::LogFailed.into()));
            }
        }
        Err(e) => {
            for done in dones {
                done(Err(e));
            }
        }
    }
}

/// How [`forward_to`] reaches the leader.
struct Forward<'a> {
    client: &'a PeerClient,
    links: &'a ClusterLinks,
    /// For a group this node does not hold: where the members' views say
    /// its leader is (this node's own Raft knows none, and it applies
    /// nothing of the group).
    balance: Option<&'a Balance>,
    /// Which groups this node holds: one it stops holding while it waits
    /// for a forwarded write's apply is answered without it.
    holding: &'a Holding,
    /// Where the index of the entry the leader answered is recorded
    /// ([`RaftGroup::answered`]), as for an entry this node appended.
    answered: &'a std::sync::atomic::AtomicU64,
}

/// Proposes an entry on the leader `(id, addr)`, then waits until this
/// node has applied it too, so a client reading from this node after the
/// answer sees its own write (a node that does not hold the group answers
/// at once: its requests for the group go to the members that do). A
/// leader that answers it no longer leads ([`NOT_LEADER`]: it did not
/// append the entry, as during a leadership hand-off) is followed to the
/// leader this node learns of next, twice at most; any other failure is
/// the answer.
async fn forward_to(
    local: &Raft<TypeConfig>,
    how: &Forward<'_>,
    (mut leader, mut addr): (crate::types::NodeId, String),
    group: usize,
    entry: &GroupEntry,
) -> Result<EntryOutcome, EngineError> {
    let (client, links) = (how.client, how.links);
    let body = rmp_serde::to_vec_named(entry).map_err(|_| Unavailable::Forwarding)?;
    let path = RaftMessage::Propose.path(group);
    let mut tries = 0;
    let (outcome, index) = loop {
        tries += 1;
        let answer = client
            .http
            .post(
                &addr,
                &path,
                body.clone(),
                links.token.as_deref(),
                Duration::from_secs(10),
            )
            .await
            .map_err(|e| {
                tracing::debug!(error = %e, "forwarding to the leader failed");
                Unavailable::Forwarding
            })?;
        let result: Result<(EntryOutcome, u64), String> =
            rmp_serde::from_slice(&answer).map_err(|_| Unavailable::Forwarding)?;
        match result {
            Ok(done) => break done,
            Err(e) if e.starts_with(NOT_LEADER) && tries < 3 => {
                // The node asked names the leader it knows of (it has
                // just handed its leadership off, say): there at once;
                // else the next one this node learns of.
                let named = leader_named(&e)
                    .filter(|&id| id != leader)
                    .and_then(|id| Some((id, links.get(id)?)));
                let next = match (named, how.balance) {
                    (Some(named), _) => Some(named),
                    (None, Some(balance)) => seen_leader_after(balance, group, leader).await,
                    (None, None) => local_leader_after(local, Some(leader)).await,
                };
                let Some((id, recorded)) = next else {
                    return Err(Unavailable::NoLeader.into());
                };
                if id == local.metrics().borrow().id {
                    // This node leads now: the entry goes into its own
                    // log (posting it to itself would wait for a place
                    // its own forwards may all hold).
                    return write_here(local, how.answered, entry.clone()).await;
                }
                leader = id;
                addr = links.addr_of(id, &recorded);
            }
            Err(e) if e == DISK_FULL => return Err(Unavailable::DiskFull.into()),
            Err(e) if e.starts_with(REFUSED) => {
                tracing::debug!(error = %e, "the leader's limits refused a forwarded entry");
                return Err(Unavailable::LeaderFull.into());
            }
            Err(e) => {
                tracing::debug!(error = %e, "the leader refused a forwarded entry");
                return Err(Unavailable::Forwarding.into());
            }
        }
    };
    how.answered
        .fetch_max(index, std::sync::atomic::Ordering::SeqCst);
    if how.balance.is_some() {
        return Ok(outcome);
    }
    // The entry is committed; without the local apply only read-your-writes
    // suffers, so a timeout here still answers with the outcome. A node
    // that stops holding the group meanwhile (its leader dropped it: it
    // applies no more of it) answers at once; its requests for the group
    // go to the members that hold it.
    let deadline = tokio::time::Instant::now() + APPLY_WAIT;
    loop {
        let applied = local
            .wait(Some(APPLY_WAIT_SLICE))
            .applied_index_at_least(Some(index), "forwarded write")
            .await;
        if applied.is_ok() || !how.holding.holds(group, &local.metrics().borrow()) {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::debug!(index, "a forwarded write is not applied here yet");
            break;
        }
    }
    Ok(outcome)
}

/// How long a follower waits to apply a write it forwarded before it
/// answers without it.
const APPLY_WAIT: Duration = Duration::from_secs(10);
/// How often that wait checks whether the node still holds the group.
const APPLY_WAIT_SLICE: Duration = Duration::from_millis(100);

/// The group's next leader after `leader` (`None`: any leader) as this
/// node's Raft learns of it (within 2 s), with the address its membership
/// recorded.
async fn local_leader_after(
    local: &Raft<TypeConfig>,
    leader: Option<crate::types::NodeId>,
) -> Option<(crate::types::NodeId, String)> {
    let next = local
        .wait(Some(Duration::from_secs(2)))
        .metrics(
            |m| m.current_leader.is_some_and(|l| Some(l) != leader),
            "the group's next leader",
        )
        .await
        .ok()?;
    let id = next.current_leader?;
    let recorded = next
        .membership_config
        .membership()
        .get_node(&id)
        .map(|n| n.addr.clone())
        .unwrap_or_default();
    Some((id, recorded))
}

/// The group's next leader after `leader` as the members' views name it
/// (the balancing rounds refresh them; within 3 s).
async fn seen_leader_after(
    balance: &Balance,
    group: usize,
    leader: crate::types::NodeId,
) -> Option<(crate::types::NodeId, String)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        if let Some(id) = balance.leader_seen(group).filter(|&l| l != leader) {
            return Some((id, String::new()));
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl GroupLog for RaftGroup {
    fn propose(&self, entry: GroupEntry, done: ProposalDone) {
        self.queue(entry, done, false);
    }

    fn status(&self) -> GroupStatus {
        let metrics = self.raft().metrics().borrow().clone();
        GroupStatus {
            group: self.group,
            leader: metrics.current_leader,
            applied_index: metrics.last_applied.map(|l| l.index),
            last_log_index: metrics.last_log_index,
        }
    }

    fn leads(&self) -> bool {
        let metrics = self.raft().metrics();
        let m = metrics.borrow();
        // A leader first commits a blank entry of its own term: once an
        // entry of the current term is applied, so is every entry any
        // earlier leader committed.
        m.state == openraft::ServerState::Leader
            && m.current_leader == Some(m.id)
            && m.last_applied
                .is_some_and(|applied| applied.leader_id.term == m.current_term)
    }

    fn shutdown(&self) -> LogFuture<()> {
        // Taken once: a second shutdown does not count again.
        let lock = match self.dir_lock.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        let stopping = Arc::clone(&self.stopping);
        let current = Arc::clone(&self.current);
        Box::pin(async move {
            // A group being forgotten stops once its new Raft node is in.
            let mut stopped = stopping.lock().await;
            *stopped = true;
            let Current {
                raft,
                log,
                snapshots,
            } = crate::sync::read(&current).clone();
            let _ = raft.shutdown().await;
            // Everything queued is written before the files are reopened;
            // a snapshot task still running keeps nothing.
            let _ = tokio::task::spawn_blocking(move || {
                log.close();
                if let Some(snapshots) = snapshots {
                    snapshots.close();
                }
            })
            .await;
            if let Some(lock) = lock {
                lock.group_stopped();
            }
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{NOT_LEADER, keep_local, leader_named, not_leader};
    use std::sync::{Arc, Mutex};
    use strand_engine::{EngineError, GroupEntry, ProposalDone, Unavailable};

    fn entry(n: u64) -> GroupEntry {
        GroupEntry::Delete {
            stream_id: strand::BucketStreamId::new("b", format!("s{n}")),
            now_ms: n,
        }
    }

    /// A proposal's answer, recorded under its number.
    fn done(n: u64, answers: &Arc<Mutex<Vec<(u64, bool)>>>) -> ProposalDone {
        let answers = Arc::clone(answers);
        Box::new(move |outcome| {
            let refused = matches!(
                outcome,
                Err(EngineError::Unavailable(Unavailable::NoLeader))
            );
            answers.lock().unwrap().push((n, refused));
        })
    }

    #[test]
    fn forwarded_proposals_are_answered_and_only_this_nodes_kept() {
        let answers = Arc::new(Mutex::new(Vec::new()));
        let batch = GroupEntry::Batch((0..4).map(entry).collect());
        let dones = (0..4).map(|n| done(n, &answers)).collect();
        let (kept, kept_dones) = keep_local(batch, dones, &[false, true, false, true]).unwrap();
        assert_eq!(kept, GroupEntry::Batch(vec![entry(0), entry(2)]));
        assert_eq!(kept_dones.len(), 2);
        assert_eq!(*answers.lock().unwrap(), [(1, true), (3, true)]);
        // One of this node's own left: the entry itself, no batch.
        let batch = GroupEntry::Batch((0..2).map(entry).collect());
        let dones = (0..2).map(|n| done(n, &answers)).collect();
        let (kept, _) = keep_local(batch, dones, &[true, false]).unwrap();
        assert_eq!(kept, entry(1));
        // Only forwarded ones: nothing left, every one answered.
        answers.lock().unwrap().clear();
        let forwarded = GroupEntry::Batch((0..2).map(entry).collect());
        assert!(keep_local(forwarded.clone(), vec![done(7, &answers)], &[true]).is_none());
        assert_eq!(*answers.lock().unwrap(), [(7, true)]);
        // None forwarded: as it was (a lone batch is not split).
        let (kept, dones) =
            keep_local(forwarded.clone(), vec![done(8, &answers)], &[false]).unwrap();
        assert_eq!((kept, dones.len()), (forwarded, 1));
    }

    #[test]
    fn a_refusal_names_the_leader_its_node_knows() {
        let named = not_leader(1, 3, Some(2));
        assert!(named.starts_with(NOT_LEADER), "{named}");
        assert_eq!(leader_named(&named), Some(2));
        // No leader, or itself (a stale view): nothing named.
        assert_eq!(leader_named(&not_leader(1, 3, None)), None);
        assert_eq!(leader_named(&not_leader(1, 3, Some(1))), None);
        // Only a refusal for not leading names one.
        assert_eq!(leader_named("refused for now: its leader is node 2"), None);
    }
}
