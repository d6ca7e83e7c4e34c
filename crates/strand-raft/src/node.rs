//! A durable node as its server sees it ([`RaftNode`]): the engine, and
//! what only the Raft side knows — the peers' messages for its groups,
//! its counters, its traffic to its peers.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use strand_engine::{Engine, EntryOutcome, GroupEntry, GroupLog, GroupStatus};

use crate::balance::{Balance, BalanceStats};
use crate::cluster::{ClusterStatus, DRAIN_PATH, DrainRequest, NodeView, REMOVE_PATH, ask_view};
use crate::holding::Holding;
use crate::network::{ClusterLinks, PeerClient};
use crate::proposer::RaftGroup;
use crate::stats::{LogStats, NetworkStats, RaftGroupMetrics, SnapshotStats};
use crate::types::NodeId;
use crate::wire::{BatchRefused, RaftMessage, decode_batch, encode_answer};

/// A durable node started with [`start_durable`](crate::start_durable):
/// its engine, its groups' Raft nodes and its client to its peers. Cheap
/// to clone; every clone is the same node.
#[derive(Clone)]
pub struct RaftNode {
    engine: Engine,
    groups: Arc<[Arc<RaftGroup>]>,
    node_id: NodeId,
    /// The node's client to its peers, when it is a cluster's member (it
    /// then takes peer messages).
    peers: Option<PeerClient>,
    /// Where the node reaches its peers, when it is a cluster's member.
    links: Option<Arc<ClusterLinks>>,
    /// Its leadership hand-offs and drain.
    balance: Arc<Balance>,
    /// Voters per group.
    replication_factor: usize,
    /// Which groups the node holds ([`RaftNode::holds`]).
    holding: Arc<Holding>,
    /// What lets entries other nodes forward to this node in
    /// ([`RaftNode::set_forwarded_gate`]).
    gate: Arc<std::sync::OnceLock<ForwardedGate>>,
}

/// Lets the payload of an entry another node forwarded to this node (the
/// group's leader) in under this node's limits — `(group, payload
/// bytes)` — or refuses it with the reason (the forwarder answers 503);
/// what it lets in is held until the entry is committed.
pub type ForwardedGate = Arc<dyn Fn(usize, u64) -> Result<Box<dyn Send>, String> + Send + Sync>;

/// The path a member takes a node's request to join the cluster on
/// (a `POST` with the cluster token; JSON [`JoinRequest`] body, JSON
/// answer: every member's address, or why not).
pub const JOIN_PATH: &str = "/__strand/raft/join";

/// A node's request to join the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    /// The joining node's id.
    pub id: NodeId,
    /// Its URL as the members reach it.
    pub url: String,
}

/// Asks the member at `via` to admit this node (`id`, reached at `me`),
/// retrying for a minute while it cannot be reached or group 0 has no
/// leader; every member's address.
pub(crate) async fn ask_to_join(
    client: &PeerClient,
    links: &ClusterLinks,
    via: &str,
    id: NodeId,
    me: &str,
) -> Result<std::collections::BTreeMap<NodeId, String>, String> {
    let body = serde_json::to_vec(&JoinRequest {
        id,
        url: me.to_owned(),
    })
    .map_err(|e| e.to_string())?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let answer = client
            .http
            .post(
                via,
                JOIN_PATH,
                body.clone(),
                links.token.as_deref(),
                CHANGE_WAIT,
            )
            .await;
        let error = match answer {
            Ok(bytes) => match serde_json::from_slice::<Result<_, String>>(&bytes) {
                Ok(Ok(members)) => return Ok(members),
                Ok(Err(e)) if !e.starts_with(crate::proposer::NOT_LEADER) => return Err(e),
                Ok(Err(e)) => e,
                Err(e) => return Err(format!("not an answer to a join: {e}")),
            },
            // A refused token or a missing route is final.
            Err(e) if e.is_refusal() => return Err(e.to_string()),
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(error);
        }
        tracing::info!(via, error = %error, "the cluster did not admit this node yet; asking again");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// How long a removal waits for a member to take its drain.
const PEER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a removal's renewed leaving mark may take to reach the node
/// it removes (a node that does not answer is asked again next round).
const REMARK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// How long a removal waits for group 0's leader to make the change.
const CHANGE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a member was not removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoveError {
    /// No member has this id.
    #[error("node {0} is not a member")]
    NotMember(NodeId),
    /// This node has no peers.
    #[error("this node is not part of a cluster")]
    NotClustered,
    /// The cluster would have no member left.
    #[error("node {0} is the cluster's last member")]
    LastMember(NodeId),
    /// The change could not be made now.
    #[error("the member could not be removed now: {0}")]
    Unavailable(String),
}

impl std::fmt::Debug for RaftNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftNode")
            .field("groups", &self.groups.len())
            .field("cluster", &self.peers.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a peer's message was not handed to a group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// The node has no such group.
    #[error("no group {0} on this node")]
    NoSuchGroup(usize),
    /// The node is not a cluster's member: it takes no peer messages.
    #[error("this node is not part of a cluster")]
    NotClustered,
    /// The body is not the message it was sent as.
    #[error("a malformed raft message: {0}")]
    Malformed(String),
    /// The answer could not be encoded.
    #[error("the answer could not be encoded: {0}")]
    Encode(String),
}

/// A group's status on a durable node: the engine's replication status
/// and the group's log writer and snapshot counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftGroupStatus {
    /// Leader, applied and last log index.
    #[serde(flatten)]
    pub replication: GroupStatus,
    /// Whether this node holds the group's state and answers for it
    /// ([`RaftNode::holds`]); a member that does not passes the group's
    /// requests on to one that does.
    #[serde(default)]
    pub held: bool,
    /// The last log index this node purged from its log (its entries up
    /// to there are in a snapshot only: a member further behind catches
    /// up by installing one), if it purged any.
    #[serde(default)]
    pub purged_index: Option<u64>,
    /// The log writer's counters (group commit: writes, fsyncs, entries).
    pub log: LogStats,
    /// The group's snapshots on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotStats>,
}

impl RaftNode {
    pub(crate) fn new(
        engine: Engine,
        groups: Vec<Arc<RaftGroup>>,
        node_id: NodeId,
        peers: Option<(Arc<ClusterLinks>, PeerClient)>,
        (replication_factor, balance, holding): (usize, Arc<Balance>, Arc<Holding>),
    ) -> Self {
        let (links, peers) = peers.unzip();
        let groups: Arc<[Arc<RaftGroup>]> = groups.into();
        if let (Some(links), Some(client)) = (&links, &peers) {
            // Questions over groups this node does not hold go to members
            // that do.
            engine.set_remote_groups(Arc::new(crate::asking::Asker {
                me: node_id,
                holding: Arc::clone(&holding),
                groups: Arc::clone(&groups),
                links: Arc::clone(links),
                client: client.clone(),
                balance: Arc::clone(&balance),
            }));
        }
        Self {
            engine,
            groups,
            node_id,
            peers,
            links,
            balance,
            replication_factor,
            holding,
            gate: Arc::default(),
        }
    }

    /// Installs what lets forwarded entries in (the server's hot-memory
    /// budget): an entry proposed on another node reaches this one's log
    /// without passing its own admission. Answers whether it was
    /// installed (a node takes one).
    pub fn set_forwarded_gate(&self, gate: ForwardedGate) -> bool {
        self.gate.set(gate).is_ok()
    }

    /// Starts the node's placement rounds ([`crate::balance`]): every
    /// `interval` the groups it leads are moved towards the placement of
    /// `replication_factor` voters and a leadership may be handed off;
    /// with `None`, every default interval and no hand-offs. Nothing for
    /// a node without peers.
    pub(crate) fn start_balancing(
        &self,
        interval: Option<std::time::Duration>,
        replication_factor: usize,
        dead_after: Option<std::time::Duration>,
    ) {
        if let (Some(links), Some(client)) = (&self.links, &self.peers) {
            let balancer = crate::balance::Balancer {
                groups: Arc::downgrade(&self.groups),
                me: self.node_id,
                links: Arc::clone(links),
                client: client.clone(),
                balance: Arc::clone(&self.balance),
                factor: replication_factor,
                hand_offs: interval.is_some(),
                dead_after,
                holding: Arc::clone(&self.holding),
            };
            let every = interval.unwrap_or(std::time::Duration::from_millis(
                crate::balance::DEFAULT_BALANCE_INTERVAL_MS,
            ));
            tokio::spawn(balancer.run(every));
        }
    }

    /// Starts (`true`) or ends a drain of this node: while it drains, it
    /// hands off every leadership it holds (one per balancing round) and
    /// no member hands it one. A restart ends it.
    pub fn set_draining(&self, draining: bool) {
        if self.balance.draining() != draining {
            tracing::info!(node = self.node_id, draining, "drain changed");
        }
        self.balance.set_draining(draining);
    }

    /// Takes what a member asked under [`DRAIN_PATH`]: a drain started
    /// or ended ([`RaftNode::set_draining`]), or this node marked leaving
    /// the cluster (and draining) or no longer: while it leaves, every
    /// group's leader plans its voters without it, so its votes move to
    /// the other members before it leaves group 0. A restart clears it.
    pub fn take_drain(&self, request: DrainRequest) {
        match request {
            DrainRequest::Draining(draining) => self.set_draining(draining),
            DrainRequest::Leaving { leaving } => {
                if leaving {
                    self.set_draining(true);
                }
                if self.balance.leaving() != leaving {
                    tracing::info!(node = self.node_id, leaving, "leaving the cluster changed");
                }
                self.balance.set_leaving(leaving);
            }
        }
    }

    /// Starts or ends a drain of member `id`: this node's own
    /// ([`RaftNode::set_draining`]), or another's, asked over
    /// [`DRAIN_PATH`] within `timeout`.
    ///
    /// # Errors
    /// `id` is not a member, or did not take it.
    pub async fn drain(
        &self,
        id: NodeId,
        draining: bool,
        timeout: std::time::Duration,
    ) -> Result<(), String> {
        self.ask_drain(id, DrainRequest::Draining(draining), timeout)
            .await
    }

    /// [`RaftNode::take_drain`] on member `id`: here, or asked over
    /// [`DRAIN_PATH`] within `timeout`.
    async fn ask_drain(
        &self,
        id: NodeId,
        request: DrainRequest,
        timeout: std::time::Duration,
    ) -> Result<(), String> {
        if id == self.node_id {
            self.take_drain(request);
            return Ok(());
        }
        let (Some(links), Some(client)) = (&self.links, &self.peers) else {
            return Err(format!("node {id} is not a member: this node has no peers"));
        };
        let Some(addr) = links.get(id) else {
            return Err(format!("node {id} is not a member"));
        };
        let body = serde_json::to_vec(&request).map_err(|e| e.to_string())?;
        client
            .http
            .post(&addr, DRAIN_PATH, body, links.token.as_deref(), timeout)
            .await
            .map(|_| ())
            .map_err(|e| format!("node {id} did not take it: {e}"))
    }

    /// Takes member `id` out of the cluster (`strand cluster remove`).
    /// When it answers, it is drained and marked leaving first: within
    /// `wait` it leads no group, and within another `wait` every group
    /// but group 0 has moved its vote to another member (the groups'
    /// leaders plan without it), so taking it out loses no group a
    /// voter. Then the leader of group 0 takes it out of group 0's
    /// membership, the cluster's; every group's leader drops what is
    /// left of it. A node that does not answer is taken out at once (its
    /// votes then move after). A node that was removed already is no
    /// error.
    ///
    /// # Errors
    /// [`RemoveError`]: not a member, this node has no peers, the last
    /// member, or the change could not be made now (its votes still
    /// moving after `wait` among them: asked again, it goes on).
    pub async fn remove(&self, id: NodeId, wait: std::time::Duration) -> Result<(), RemoveError> {
        let Some(links) = &self.links else {
            return Err(RemoveError::NotClustered);
        };
        let members = self.members();
        if !members.contains(&id) {
            return if links.get(id).is_some() {
                Ok(())
            } else {
                Err(RemoveError::NotMember(id))
            };
        }
        if members.len() == 1 {
            return Err(RemoveError::LastMember(id));
        }
        // Its leaderships go first, then its votes, while it answers; a
        // node that does not answer leads nothing the others still follow.
        let leaving = DrainRequest::Leaving { leaving: true };
        // The mark lives in the node's memory: a node restarted meanwhile
        // has lost it, so each round of the waits below asks again.
        let ask_again = || async {
            let _ = self.ask_drain(id, leaving, REMARK_TIMEOUT).await;
        };
        if self.ask_drain(id, leaving, PEER_TIMEOUT).await.is_ok() {
            let deadline = tokio::time::Instant::now() + wait;
            while (0..self.groups.len()).any(|g| self.leader_of(g) == Some(id))
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                ask_again().await;
            }
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                let status = self.cluster_status(None, PEER_TIMEOUT).await;
                let voting: Vec<String> = status
                    .groups
                    .iter()
                    .filter(|g| g.group != 0 && g.voters.contains(&id))
                    .map(|g| g.group.to_string())
                    .collect();
                if voting.is_empty() {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(RemoveError::Unavailable(format!(
                        "node {id} still votes in group(s) {}: its votes are moving to the \
                         other members; ask again to take it out once they have",
                        voting.join(", ")
                    )));
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                ask_again().await;
            }
        }
        let body = serde_json::to_vec(&id).map_err(|e| RemoveError::Unavailable(e.to_string()))?;
        self.at_group0_leader(REMOVE_PATH, body, 3, false, || self.remove_here(id))
            .await
            .map_err(RemoveError::Unavailable)
    }

    /// Admits node `id`, reached at `url`, into the cluster (what a member
    /// answers under [`JOIN_PATH`]): on group 0's leader it becomes a
    /// learner of group 0, so every group's leader makes it a learner of
    /// its group and the placement gives it votes; elsewhere the request
    /// goes on to group 0's leader. Admitting a member again at the same
    /// URL changes nothing. The answer is every member's address.
    ///
    /// # Errors
    /// This node takes no members (no peers, or no cluster token), the id
    /// belongs to a member at another URL, or no leader of group 0 took
    /// it in time.
    pub async fn admit(
        &self,
        id: NodeId,
        url: &str,
    ) -> Result<std::collections::BTreeMap<NodeId, String>, String> {
        if self.links.is_none() {
            return Err(
                "this node takes no members: start it with --cluster-token-file (a cluster of one) or --peer"
                    .to_owned(),
            );
        }
        if url.is_empty() {
            return Err("a joining node must give its URL".to_owned());
        }
        let body = serde_json::to_vec(&JoinRequest {
            id,
            url: url.to_owned(),
        })
        .map_err(|e| e.to_string())?;
        self.at_group0_leader(JOIN_PATH, body, 5, true, || self.admit_here(id, url))
            .await
    }

    /// Runs `here` when this node leads group 0, else posts `body` under
    /// `path` to group 0's leader and reads its answer (JSON, `Ok` or
    /// `Err` with the reason); asks up to `tries` times, half a second
    /// apart, while group 0 has no leader or the node asked no longer
    /// leads it (its reason starts with
    /// [`NOT_LEADER`](crate::proposer::NOT_LEADER)), and, with
    /// `retry_unreachable`, while it does not answer.
    async fn at_group0_leader<T, F>(
        &self,
        path: &str,
        body: Vec<u8>,
        tries: usize,
        retry_unreachable: bool,
        here: impl Fn() -> F,
    ) -> Result<T, String>
    where
        T: serde::de::DeserializeOwned,
        F: std::future::Future<Output = Result<T, String>>,
    {
        let not_leader = crate::proposer::NOT_LEADER;
        let (Some(links), Some(client), Some(group0)) =
            (&self.links, &self.peers, self.groups.first())
        else {
            return Err("this node is not part of a cluster".to_owned());
        };
        for _ in 0..tries {
            let leader = group0.raft().metrics().borrow().current_leader;
            let result = match leader {
                Some(l) if l == self.node_id => here().await,
                Some(l) => match links.get(l) {
                    Some(addr) => match client
                        .http
                        .post(
                            &addr,
                            path,
                            body.clone(),
                            links.token.as_deref(),
                            CHANGE_WAIT,
                        )
                        .await
                    {
                        Ok(answer) => serde_json::from_slice(&answer)
                            .unwrap_or_else(|e| Err(format!("not an answer: {e}"))),
                        Err(e) if retry_unreachable => {
                            Err(format!("{not_leader}group 0's leader did not answer: {e}"))
                        }
                        Err(e) => Err(e.to_string()),
                    },
                    None => Err(format!("group 0's leader, node {l}, has no address here")),
                },
                None => Err(format!("{not_leader}group 0 has no leader")),
            };
            match result {
                Err(e) if e.starts_with(not_leader) => {
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                other => return other,
            }
        }
        Err("group 0's leadership kept moving".to_owned())
    }

    /// [`RaftNode::admit`] on group 0's leader.
    async fn admit_here(
        &self,
        id: NodeId,
        url: &str,
    ) -> Result<std::collections::BTreeMap<NodeId, String>, String> {
        let Some(group0) = self.groups.first() else {
            return Err("no groups".to_owned());
        };
        let raft = group0.raft();
        let m = raft.metrics().borrow().clone();
        if m.state != openraft::ServerState::Leader || m.current_leader != Some(self.node_id) {
            return Err(format!(
                "{}node {} does not lead group 0",
                crate::proposer::NOT_LEADER,
                self.node_id
            ));
        }
        let membership = m.membership_config.membership();
        match membership.get_node(&id) {
            Some(node) if node.addr == url => {}
            Some(node) => {
                return Err(format!(
                    "node id {id} belongs to a member at {}: give the new node another --node-id",
                    node.addr
                ));
            }
            None => {
                let added = tokio::time::timeout(
                    CHANGE_WAIT,
                    raft.add_learner(id, openraft::BasicNode::new(url), false),
                )
                .await
                .map_err(|_| "adding the member took too long".to_owned())?;
                added.map_err(|e| e.to_string())?;
                tracing::info!(node = id, url, "admitted a member");
            }
        }
        let links = self.links.as_ref();
        let m = raft.metrics().borrow().clone();
        Ok(m.membership_config
            .membership()
            .nodes()
            .map(|(n, node)| {
                let addr = links.map_or_else(|| node.addr.clone(), |l| l.addr_of(*n, &node.addr));
                (*n, addr)
            })
            .collect())
    }

    /// Takes member `id` out of group 0's membership, on group 0's leader
    /// (what [`REMOVE_PATH`] does).
    ///
    /// # Errors
    /// The reason, starting with a not-the-leader marker when this node
    /// does not lead group 0.
    pub async fn remove_here(&self, id: NodeId) -> Result<(), String> {
        crate::balance::remove_member(&self.groups, self.node_id, id, self.replication_factor).await
    }

    /// The cluster's members as this node knows them: group 0's
    /// membership, else (before it follows group 0) its `--peer` list.
    pub fn members(&self) -> std::collections::BTreeSet<NodeId> {
        let metrics: Vec<_> = self
            .groups
            .iter()
            .take(1)
            .map(|g| g.raft().metrics().borrow().clone())
            .collect();
        let members = crate::balance::registry(&metrics);
        if members.is_empty() {
            self.links
                .as_ref()
                .map(|l| l.addrs().keys().copied().collect())
                .unwrap_or_else(|| [self.node_id].into())
        } else {
            members
        }
    }

    /// Whether this node learned that the cluster removed it: it then
    /// serves no client requests.
    pub fn removed(&self) -> bool {
        self.balance.removed()
    }

    /// Whether this node holds group `group`'s state and may answer from
    /// it (`crate::holding`): its own log names it a member, it has
    /// applied up to that entry, and it leads the group or heard from
    /// its leader within the lease. A node that joined holds none of a
    /// group until the group's leader adds it and it received the log or
    /// a snapshot; a member the placement dropped from a group stops
    /// holding it. Meanwhile its state must not answer for the group. A
    /// node without peers holds every group.
    pub fn holds(&self, group: usize) -> bool {
        self.groups
            .get(group)
            .is_some_and(|g| self.holding.holds(group, &g.raft().metrics().borrow()))
    }

    /// Group `group`'s leader as this node knows it: its own Raft's for a
    /// group it holds, else the one the members' views named in the last
    /// balancing round (its own Raft's view of a group it does not hold
    /// is stale).
    fn leader_of(&self, group: usize) -> Option<NodeId> {
        if self.holds(group) {
            self.groups
                .get(group)
                .and_then(|g| g.raft().metrics().borrow().current_leader)
        } else {
            self.balance.leader_seen(group)
        }
    }

    /// Whether this node is still taking up its groups: it does not hold
    /// group 0 (every member follows it), or a group the placement gives
    /// it a vote in (before its first placement round: any group) is not
    /// held yet. Meanwhile it answers by passing
    /// requests on, and its health says `joining`.
    pub fn joining(&self) -> bool {
        if self.peers.is_none() {
            return false;
        }
        if !self.holds(0) {
            return true;
        }
        (1..self.groups.len()).any(|g| {
            // Before its first placement round a node cannot tell which
            // groups are its own: it counts as joining until it holds all.
            self.balance.planned(g).unwrap_or(true) && !self.holds(g)
        })
    }

    /// Whether this node holds every group ([`RaftNode::holds`]): false
    /// while a node that joined is still being added to the groups (or, on
    /// a static cluster's first start, before the groups' first leaders
    /// reached it), and for a member the placement gave some groups only.
    pub fn holds_every_group(&self) -> bool {
        (0..self.groups.len()).all(|g| self.holds(g))
    }

    /// Where to send a client request for group `group` that this node
    /// cannot answer itself (it does not hold every group yet): the
    /// group's leader as the members' views said in the last balancing
    /// round, else another member; its id and URL. `None` for a node
    /// without peers, or when no other member's address is known.
    pub fn forward_target(&self, group: usize) -> Option<(NodeId, String)> {
        let links = self.links.as_ref()?;
        let me = self.node_id;
        let leader = self.balance.leader_seen(group).filter(|l| *l != me);
        leader
            .into_iter()
            .chain(self.members().into_iter().filter(|m| *m != me))
            .find_map(|id| links.get(id).map(|url| (id, url)))
    }

    /// Where a request another member passed on for group `group` goes
    /// once more when this node holds the group but does not lead it:
    /// the leader its own Raft knows (id and URL). The member that passed
    /// it on sent it to the leader its views named, which has since
    /// handed the group off (or the views named none); a follower may not
    /// have applied what the leader answered that member a moment ago,
    /// while the leader has (a new one applied every entry committed
    /// before it), so the member's client reads its own writes. `None`
    /// when this node leads the group, does not hold it, or knows no
    /// other leader with an address.
    pub fn leader_target(&self, group: usize) -> Option<(NodeId, String)> {
        let links = self.links.as_ref()?;
        let g = self.groups.get(group)?;
        let leader = {
            let metrics = g.raft().metrics();
            let m = metrics.borrow();
            if !self.holding.holds(group, &m) {
                return None;
            }
            m.current_leader.filter(|&l| l != self.node_id)?
        };
        links.get(leader).map(|url| (leader, url))
    }

    /// The node's leadership hand-offs so far, and whether it drains.
    pub fn balance_stats(&self) -> BalanceStats {
        self.balance.stats()
    }

    /// Whether the node is a cluster's member (it has peers).
    pub fn has_peers(&self) -> bool {
        self.peers.is_some()
    }

    /// This node's id (`--node-id`).
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// What this node knows of its groups: each one's membership, leader,
    /// term and indexes (what it answers its peers under [`VIEW_PATH`](crate::VIEW_PATH)).
    pub fn view(&self) -> NodeView {
        NodeView {
            node: self.node_id,
            draining: self.balance.draining(),
            removed: self.balance.removed(),
            leaving: self.balance.leaving(),
            replication_factor: Some(self.replication_factor),
            moves: self.balance.moves(),
            groups: self.groups.iter().map(|g| g.view()).collect(),
        }
    }

    /// The cluster's status as this node puts it together: its own view
    /// and every peer's, asked for all at once, each within `timeout` (a
    /// peer that does not answer in time is `down`). `own_url` is this
    /// node's address for a node without peers (a cluster's member takes
    /// every address from its `--peer` list).
    pub async fn cluster_status(
        &self,
        own_url: Option<String>,
        timeout: std::time::Duration,
    ) -> ClusterStatus {
        let me = self.node_id;
        let mut views = vec![(me, Ok(self.view()))];
        let urls = match (&self.links, &self.peers) {
            (Some(links), Some(client)) => {
                let addrs = links.addrs();
                let asks =
                    addrs
                        .iter()
                        .filter(|(id, _)| **id != me)
                        .map(|(&id, addr)| async move {
                            let token = links.token.as_deref();
                            (id, ask_view(&client.http, (id, addr), token, timeout).await)
                        });
                views.extend(futures_util::future::join_all(asks).await);
                addrs
            }
            _ => own_url.map(|url| (me, url)).into_iter().collect(),
        };
        ClusterStatus::assemble(me, &urls, &views)
    }

    /// The node's engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The node's engine, without the rest.
    #[must_use]
    pub fn into_engine(self) -> Engine {
        self.engine
    }

    /// Each group's status, in group order.
    pub fn status(&self) -> Vec<RaftGroupStatus> {
        self.groups
            .iter()
            .enumerate()
            .map(|(at, g)| RaftGroupStatus {
                replication: g.status(),
                held: self.holds(at),
                purged_index: g.purged_index(),
                log: g.log_stats(),
                snapshot: g.snapshot_stats(),
            })
            .collect()
    }

    /// Each group's Raft figures on this node, in group order.
    pub fn metrics(&self) -> Vec<RaftGroupMetrics> {
        self.groups.iter().map(|g| g.metrics()).collect()
    }

    /// The node's Raft traffic to its peers since it started; `None` for a
    /// node without peers.
    pub fn network_stats(&self) -> Option<NetworkStats> {
        self.peers.as_ref().map(PeerClient::stats)
    }

    /// Hands a peer's message for group `group` to the group's Raft node
    /// and returns its answer (MessagePack, as the peer reads it).
    ///
    /// # Errors
    /// No such group, a node outside a cluster, a body that is not the
    /// message, or an answer that cannot be encoded. A refusal of the
    /// group's own (a `propose` on a follower) is an answer, not an error.
    pub async fn handle(
        &self,
        group: usize,
        message: RaftMessage,
        body: &[u8],
    ) -> Result<Vec<u8>, MessageError> {
        let group_node = self
            .groups
            .get(group)
            .ok_or(MessageError::NoSuchGroup(group))?;
        let raft = group_node.raft();
        if self.peers.is_none() {
            return Err(MessageError::NotClustered);
        }
        match message {
            RaftMessage::Append => {
                let taken = raft.append_entries(request(body)?).await;
                if matches!(&taken, Ok(r) if !matches!(r, openraft::raft::AppendEntriesResponse::HigherVote(_)))
                {
                    self.holding.heard(group);
                }
                answer(&taken)
            }
            RaftMessage::Vote => {
                let vote: openraft::raft::VoteRequest<NodeId> = request(body)?;
                if group_node.refuses_votes(self.node_id) {
                    // Forgotten (`crate::forget`): no vote until its log
                    // names it a voter again.
                    let refused = openraft::raft::VoteResponse {
                        vote: vote.vote,
                        vote_granted: false,
                        last_log_id: None,
                    };
                    return answer(&Ok::<_, openraft::error::RaftError<NodeId>>(refused));
                }
                answer(&raft.vote(vote).await)
            }
            RaftMessage::Snapshot => answer(&raft.install_snapshot(request(body)?).await),
            RaftMessage::Propose => {
                // Only the leader takes it; a forwarded entry is not
                // forwarded again.
                let entry: GroupEntry = request(body)?;
                let refused = |why: String| answer(&Err::<(EntryOutcome, u64), String>(why));
                // Borrowed, not cloned: this runs once per forwarded batch.
                let (leads, current) = {
                    let metrics = raft.metrics();
                    let m = metrics.borrow();
                    let leads = m.state == openraft::ServerState::Leader
                        && m.current_leader == Some(self.node_id);
                    (leads, m.current_leader)
                };
                if !leads {
                    return refused(crate::proposer::not_leader(self.node_id, group, current));
                }
                if group_node.waiting_for_space() {
                    // Refused now rather than queued behind the write
                    // that waits, as this node's own proposals are.
                    return refused(crate::proposer::DISK_FULL.to_owned());
                }
                let bytes = u64::try_from(entry.payload_bytes()).unwrap_or(u64::MAX);
                // Entries without payload (flushes among them) always
                // pass: they are what frees hot memory.
                let _admitted = match self.gate.get().filter(|_| bytes > 0) {
                    Some(gate) => match gate(group, bytes) {
                        Ok(admitted) => Some(admitted),
                        Err(why) => {
                            return refused(format!("{}{why}", crate::proposer::REFUSED));
                        }
                    },
                    None => None,
                };
                // Through the group's own proposer: the entry joins what
                // this node's clients and the other members propose
                // meanwhile in one log entry (one replication and one
                // fsync per voter for all of them).
                let outcome = group_node
                    .propose_forwarded(entry)
                    .await
                    .map_err(|e| match e {
                        strand_engine::EngineError::Unavailable(
                            strand_engine::Unavailable::DiskFull,
                        ) => crate::proposer::DISK_FULL.to_owned(),
                        // It lost the leadership before the entry went in:
                        // the entry was not appended; the member goes to
                        // the leader named.
                        strand_engine::EngineError::Unavailable(
                            strand_engine::Unavailable::NoLeader,
                        ) => {
                            let leader = raft.metrics().borrow().current_leader;
                            crate::proposer::not_leader(self.node_id, group, leader)
                        }
                        other => other.to_string(),
                    });
                answer(&outcome)
            }
            RaftMessage::Release => {
                self.holding
                    .release(group, &group_node.raft().metrics().borrow());
                tracing::info!(group, "released the group: its leader drops this node");
                answer(&Ok::<(), String>(()))
            }
            RaftMessage::Elect => {
                // The leader hands this node the leadership: campaign now
                // (it has made sure this node holds every entry).
                let started: Result<(), String> =
                    raft.trigger().elect().await.map_err(|e| e.to_string());
                answer(&started)
            }
        }
    }
}

/// Serves a batch a peer sent to `POST /__strand/raft/batch`: hands
/// every message to its group on `node` at once (the groups work
/// concurrently) and returns the stream of their answers, one frame each
/// as soon as it is ready (a big-endian `u32` length, then the MessagePack
/// array `[index, ok, body]`: the message's place in the batch, and the
/// group's answer or its error text), so one slow group holds up no other
/// group's answer. Without a node (a server in memory) every message is
/// answered that there is no such group.
///
/// # Errors
/// A body that is not a batch, or a batch of more than
/// [`MAX_BATCH_MESSAGES`](crate::MAX_BATCH_MESSAGES) messages; nothing is
/// delivered then.
pub fn serve_batch(
    node: Option<&RaftNode>,
    body: &[u8],
) -> Result<impl futures_util::Stream<Item = Bytes> + Send + 'static, BatchRefused> {
    use futures_util::StreamExt;
    let messages = decode_batch(body)?;
    let answers: futures_util::stream::FuturesUnordered<_> = messages
        .into_iter()
        .enumerate()
        .map(|(index, m)| {
            let node = node.cloned();
            async move {
                let answer = match node {
                    Some(node) => node.handle(m.group, m.kind, &m.body).await,
                    None => Err(MessageError::NoSuchGroup(m.group)),
                };
                encode_answer(index, &answer.map_err(|e| e.to_string()))
            }
        })
        .collect();
    // An answer that cannot be written (cannot happen: it was read from a
    // batch of bounded size) is left out; its sender times it out.
    Ok(answers.filter_map(|frame| std::future::ready(frame.ok().map(Bytes::from))))
}

fn answer<T: Serialize>(value: &T) -> Result<Vec<u8>, MessageError> {
    rmp_serde::to_vec_named(value).map_err(|e| MessageError::Encode(e.to_string()))
}

fn request<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, MessageError> {
    rmp_serde::from_slice(body).map_err(|e| MessageError::Malformed(e.to_string()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_join_request_and_answer_formats() {
        let request = JoinRequest {
            id: 6,
            url: "http://10.0.0.6:4437".to_owned(),
        };
        insta::assert_json_snapshot!("join_request", request);
        let admitted: Result<std::collections::BTreeMap<NodeId, String>, String> = Ok([
            (1, "http://10.0.0.1:4437".to_owned()),
            (6, "http://10.0.0.6:4437".to_owned()),
        ]
        .into());
        insta::assert_json_snapshot!("join_admitted", admitted);
        let refused: Result<std::collections::BTreeMap<NodeId, String>, String> =
            Err("node id 6 belongs to a member at http://10.0.0.7:4437".to_owned());
        insta::assert_json_snapshot!("join_refused", refused);
    }
}
