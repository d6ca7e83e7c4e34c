//! Starting a durable node: the data directory (its lock and
//! description), each group's log, state machine and Raft node, and the
//! task that snapshots a group by log bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Raft, SnapshotPolicy};
use strand_engine::{Clock, Engine, EngineConfig};

use crate::error::StartError;
use crate::lock::DirLock;
use crate::log_store::{Fsync, LogStore};
use crate::network::{ClusterLinks, HttpNetwork, PeerClient, PeerSegments, Unconnected};
use crate::node::RaftNode;
use crate::proposer::RaftGroup;
use crate::segment::LogError;
use crate::state_machine::GroupStateMachine;
use crate::types::{NodeId, TypeConfig};

/// The default [`DurableOptions::snapshot_chunk_bytes`]: 3 MiB.
pub const DEFAULT_SNAPSHOT_CHUNK_BYTES: u64 = 3 << 20;

/// The largest [`DurableOptions::snapshot_chunk_bytes`]: 64 MiB (a peer
/// takes Raft messages of at most 256 MiB).
pub const MAX_SNAPSHOT_CHUNK_BYTES: u64 = 64 << 20;

/// The default [`DurableOptions::snapshot_log_bytes`]: 64 MiB. A restart
/// replays at most this many bytes of each group's log (a single node
/// keeps nothing behind its snapshots), so it bounds the time to ready;
/// while a group's snapshot still holds its hot bytes, each snapshot
/// rewrites them, so a much smaller figure multiplies what large appends
/// write.
pub const DEFAULT_SNAPSHOT_LOG_BYTES: u64 = 64 << 20;

/// The default [`DurableOptions::dead_node_timeout`]: five minutes.
pub const DEFAULT_DEAD_NODE_TIMEOUT_MS: u64 = 300_000;

/// How a durable node is set up.
#[derive(Debug, Clone)]
pub struct DurableOptions {
    /// The data directory.
    pub data_dir: PathBuf,
    /// When the log calls fsync.
    pub fsync: Fsync,
    /// This node's id.
    pub node_id: NodeId,
    /// A group takes a snapshot (and purges its log) after this many
    /// entries.
    pub snapshot_every: u64,
    /// A group also takes a snapshot once the entries it applied since its
    /// last snapshot hold this many bytes of log records, however few they
    /// are; after a snapshot a cluster node's log keeps at most half as
    /// many bytes of the entries it covers (and at most
    /// `min(snapshot_every, 1000)` of them) for followers a little behind,
    /// a single node's none. Default [`DEFAULT_SNAPSHOT_LOG_BYTES`].
    pub snapshot_log_bytes: u64,
    /// The size of the chunks a leader sends a snapshot to a follower in
    /// (each one RPC; the snapshot is read from its file chunk by chunk).
    /// Default [`DEFAULT_SNAPSHOT_CHUNK_BYTES`].
    pub snapshot_chunk_bytes: u64,
    /// How long a single node's startup waits for every group to elect
    /// itself (a cluster's node does not wait: its peers may not be up).
    pub leader_timeout: Duration,
    /// The cluster's members, this node included: node id → the peer's
    /// HTTP address (`http://host:port`) as this node reaches it. Empty
    /// for a single node. The lowest id records its list in the
    /// membership when it initializes the groups, but each node sends to
    /// the addresses of its own list, so nodes may reach one another
    /// through different addresses (a proxy, another interface).
    pub peers: BTreeMap<NodeId, String>,
    /// The cluster's shared secret, sent with every message to a peer
    /// (header [`CLUSTER_TOKEN_HEADER`](crate::CLUSTER_TOKEN_HEADER)); the receiving server checks it.
    pub cluster_token: Option<String>,
    /// The node's own copy of its groups' flushed bytes, if it keeps one
    /// (a cluster without object storage every node reads): installed on
    /// the engine before the logs replay, and, in a cluster, connected to
    /// the peers it fetches missing objects from ([`SEGMENT_PATH`](crate::SEGMENT_PATH)).
    pub segment_replica: Option<Arc<dyn strand_engine::SegmentReplica>>,
    /// How often a cluster's node looks for a leadership to hand off
    /// (leadership balancing and drains); `None` never (a drain then
    /// moves nothing).
    pub balance_interval: Option<Duration>,
    /// How many voters each of a cluster's groups has (every member when
    /// there are fewer): a new cluster's groups start with the voters of
    /// the placement plan ([`plan`](crate::plan)), and each group's leader moves them
    /// towards it as the plan changes; the other members follow the
    /// group as learners. The same on every node. Default
    /// [`DEFAULT_REPLICATION_FACTOR`](crate::DEFAULT_REPLICATION_FACTOR).
    pub replication_factor: usize,
    /// How long a cluster's member may not answer before the leader of
    /// group 0 removes it and its votes move to the others (only while
    /// at least `replication_factor` members remain); `None` never.
    pub dead_node_timeout: Option<Duration>,
    /// A member's URL to join the cluster through, on the node's first
    /// start (`--join`): the node asks it to be admitted, then receives
    /// the groups as a learner. Later starts need none (the data
    /// directory remembers, `strand-cluster.json`).
    pub join: Option<String>,
    /// This node's own URL as the other members reach it (recorded in
    /// the membership when it joins or starts a cluster of one).
    pub advertise: Option<String>,
}

impl DurableOptions {
    /// Options for a single node in `data_dir`, fsync on.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            fsync: Fsync::Always,
            node_id: 1,
            snapshot_every: 20_000,
            snapshot_log_bytes: DEFAULT_SNAPSHOT_LOG_BYTES,
            snapshot_chunk_bytes: DEFAULT_SNAPSHOT_CHUNK_BYTES,
            leader_timeout: Duration::from_secs(30),
            peers: BTreeMap::new(),
            cluster_token: None,
            segment_replica: None,
            balance_interval: Some(Duration::from_millis(
                crate::balance::DEFAULT_BALANCE_INTERVAL_MS,
            )),
            replication_factor: crate::placement::DEFAULT_REPLICATION_FACTOR,
            dead_node_timeout: Some(Duration::from_millis(DEFAULT_DEAD_NODE_TIMEOUT_MS)),
            join: None,
            advertise: None,
        }
    }
}

/// The data directory's description.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct DirInfo {
    format: u32,
    node_id: NodeId,
    groups: usize,
}

fn check_dir(options: &DurableOptions, groups: usize) -> Result<(), StartError> {
    let path = options.data_dir.join("strand-raft.json");
    let dir_err = |reason: String| StartError::DataDir {
        path: path.clone(),
        reason,
    };
    let want = DirInfo {
        format: 1,
        node_id: options.node_id,
        groups,
    };
    match std::fs::read(&path) {
        Ok(bytes) => {
            let have: DirInfo =
                serde_json::from_slice(&bytes).map_err(|e| dir_err(format!("unreadable: {e}")))?;
            if have != want {
                return Err(dir_err(format!(
                    "the directory holds node {} with {} groups (format {}); started as node {} with {} groups",
                    have.node_id, have.groups, have.format, want.node_id, want.groups
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&options.data_dir)
                .map_err(|e| LogError::io(&options.data_dir, e))?;
            let bytes = serde_json::to_vec_pretty(&want).map_err(|e| dir_err(e.to_string()))?;
            let tmp = options.data_dir.join("strand-raft.json.tmp");
            std::fs::write(&tmp, bytes)
                .and_then(|()| std::fs::File::open(&tmp).and_then(|f| f.sync_all()))
                .and_then(|()| std::fs::rename(&tmp, &path))
                .and_then(|()| std::fs::File::open(&options.data_dir).and_then(|d| d.sync_all()))
                .map_err(|e| LogError::io(&path, e))?;
            Ok(())
        }
        Err(e) => Err(LogError::io(&path, e).into()),
    }
}

/// The openraft configuration of every group.
fn raft_config(options: &DurableOptions, cluster: bool) -> Result<openraft::Config, String> {
    openraft::Config {
        cluster_name: "strand".to_owned(),
        // A replication RPC times out after one heartbeat interval: 150 ms
        // leaves room for a connection, an fsync and a busy machine.
        heartbeat_interval: 150,
        election_timeout_min: 450,
        election_timeout_max: 900,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_every.max(1)),
        // A follower further behind than this catches up by snapshot; a
        // single node has no follower, so it keeps nothing behind its
        // snapshots (and a restart reads only the log after them).
        max_in_snapshot_log_to_keep: if cluster {
            options.snapshot_every.clamp(1, 1000)
        } else {
            0
        },
        max_payload_entries: 1024,
        snapshot_max_chunk_size: options
            .snapshot_chunk_bytes
            .clamp(1, MAX_SNAPSHOT_CHUNK_BYTES),
        ..Default::default()
    }
    .validate()
    .map_err(|e| e.to_string())
}

/// Opens every group of a durable node under `options.data_dir` (a
/// one-voter Raft group per engine group), replays snapshots and logs,
/// waits for each group to elect itself, and returns the node (its engine
/// is [`RaftNode::engine`]).
///
/// # Errors
/// A damaged log ([`LogError::Corrupt`] names the file and offset), a
/// snapshot that does not restore, a data directory made for another
/// node or group count, or a group that elects no leader in time.
pub async fn start_durable(
    config: EngineConfig,
    clock: Arc<dyn Clock>,
    options: &DurableOptions,
) -> Result<RaftNode, StartError> {
    let groups = config.groups.max(1);
    let lock = Arc::new(DirLock::take(&options.data_dir, groups)?);
    check_dir(options, groups)?;
    // Whether this node joined (or is joining) a cluster through another
    // member, as its data directory remembers.
    let joined = read_join(&options.data_dir)?;
    if options.join.is_some() && options.peers.len() > 1 {
        return Err(StartError::Raft {
            group: 0,
            reason: "--join and --peer do not go together: a node joins through one member and learns the others"
                .to_owned(),
        });
    }
    let join_via = joined.clone().or_else(|| options.join.clone());
    // A node without peers is a cluster of one others may join when it
    // has a cluster token and an address to give them.
    let open =
        options.peers.len() <= 1 && options.cluster_token.is_some() && options.advertise.is_some();
    let cluster = options.peers.len() > 1 || join_via.is_some() || open;
    let raft_config = Arc::new(
        raft_config(options, cluster).map_err(|reason| StartError::Raft { group: 0, reason })?,
    );
    if options.peers.len() > 1 && !options.peers.contains_key(&options.node_id) {
        return Err(StartError::Raft {
            group: 0,
            reason: format!("--node-id {} is not one of the peers", options.node_id),
        });
    }
    let cluster_links = cluster.then(|| {
        let mut addrs = options.peers.clone();
        if let Some(me) = &options.advertise {
            addrs.entry(options.node_id).or_insert_with(|| me.clone());
        }
        Arc::new(ClusterLinks::new(addrs, options.cluster_token.clone()))
    });
    let (engine, links) = Engine::start_replicated(config, clock);
    // One pool of peer connections for every group of the node.
    let client = PeerClient::new(options.cluster_token.as_deref());
    // Leadership moves, and the leaders the members last saw (a group
    // this node does not hold forwards its proposals there).
    let balance: Arc<crate::balance::Balance> = Arc::default();
    // Which groups the node holds (a cluster's member: those it follows).
    let holding = Arc::new(crate::holding::Holding::new(
        options.node_id,
        groups,
        cluster,
    ));
    if let Some(replica) = &options.segment_replica {
        engine.set_segment_replica(Arc::clone(replica));
        if let Some(links) = &cluster_links {
            replica.connect(Arc::new(PeerSegments {
                node_id: options.node_id,
                links: Arc::clone(links),
                client: client.clone(),
            }));
        }
    }
    // A new cluster's voters per group; the lowest of a group's voters
    // initializes it.
    let members: std::collections::BTreeSet<NodeId> = options.peers.keys().copied().collect();
    let placement = crate::placement::initial(groups, &members, options.replication_factor);
    let mut rafts = Vec::new();
    let mut groups = Vec::new();
    for link in links {
        let group = link.group();
        let raft_err = |e: &dyn std::fmt::Display| StartError::Raft {
            group,
            reason: e.to_string(),
        };
        let limit = options.snapshot_log_bytes.max(1);
        let opener = GroupOpener {
            group,
            dir: group_dir(&options.data_dir, group),
            fsync: options.fsync,
            node_id: options.node_id,
            config: Arc::clone(&raft_config),
            network: cluster_links.clone().map(|links| (links, client.clone())),
            applier: link.applier(),
            snapshot_limit: limit,
            // What the log keeps behind a snapshot, for followers a
            // little behind; a single node has none.
            snapshot_keep: if cluster { limit / 2 } else { 0 },
        };
        let forgotten = crate::forget::settle(&opener.dir)?;
        if forgotten && !cluster {
            return Err(StartError::DataDir {
                path: opener.dir.clone(),
                reason: format!(
                    "this node forgot group {group} as a member of a cluster (it holds none of it): start it as that cluster's member"
                ),
            });
        }
        let opened = opener.open().await?;
        if opened.recovery.truncated.is_some() || opened.recovery.records > 0 {
            tracing::info!(group, recovery = ?opened.recovery, "log recovered");
        }
        let raft = opened.raft.clone();
        let initialized = raft.is_initialized().await.map_err(|e| raft_err(&e))?;
        // A single node initializes itself; a cluster's group is
        // initialized once, by the lowest of its planned voters, with
        // them (the leader adds the other members as learners).
        // Group 0's membership is the cluster's (every member joins it),
        // so all of them start as its voters; its leader then lowers
        // them to the plan's.
        let voters = if group == 0 {
            members.clone()
        } else {
            placement.get(group).cloned().unwrap_or_default()
        };
        let first = voters.first().copied();
        if initialized && options.join.is_some() && joined.is_none() {
            return Err(StartError::DataDir {
                path: options.data_dir.clone(),
                reason: "the directory holds a node of its own cluster: --join needs an empty data directory"
                    .to_owned(),
            });
        }
        let statics = options.peers.len() > 1;
        // A joining node initializes nothing: the members send it the
        // groups.
        let initializes = if statics {
            first == Some(options.node_id)
        } else {
            join_via.is_none()
        };
        // A group this node forgot is not started again here: its
        // members hold it, and send it back should it come back.
        if !initialized && initializes && !forgotten {
            let members: BTreeMap<NodeId, BasicNode> = if statics {
                options
                    .peers
                    .iter()
                    .filter(|(id, _)| voters.contains(id))
                    .map(|(id, url)| (*id, BasicNode::new(url.clone())))
                    .collect()
            } else {
                let me = BasicNode::new(options.advertise.clone().unwrap_or_default());
                [(options.node_id, me)].into_iter().collect()
            };
            raft.initialize(members).await.map_err(|e| raft_err(&e))?;
        }
        let mut raft_group = RaftGroup::start(
            group,
            opened.current(),
            cluster_links
                .clone()
                .map(|links| crate::proposer::Membership {
                    links,
                    client: client.clone(),
                    balance: Arc::clone(&balance),
                    holding: Arc::clone(&holding),
                }),
        );
        raft_group.dir_lock = std::sync::Mutex::new(Some(Arc::clone(&lock)));
        if cluster {
            raft_group.reopen = Some(opener);
            raft_group.set_forgotten(forgotten);
        }
        let raft_group = Arc::new(raft_group);
        link.attach(Arc::clone(&raft_group) as Arc<dyn strand_engine::GroupLog>);
        groups.push(raft_group);
        if !forgotten {
            rafts.push((group, raft));
        }
    }
    if options.peers.len() <= 1 && join_via.is_none() {
        for (group, raft) in rafts {
            // A node that started its cluster alone leads the groups only
            // it is a member of; others joined since may lead the rest
            // (a restart of that first node must not wait for them).
            let alone = raft
                .metrics()
                .borrow()
                .membership_config
                .membership()
                .nodes()
                .all(|(id, _)| *id == options.node_id);
            if !alone {
                continue;
            }
            raft.wait(Some(options.leader_timeout))
                .current_leader(options.node_id, "startup")
                .await
                .map_err(|e| StartError::Raft {
                    group,
                    reason: format!("no leader elected: {e}"),
                })?;
            // Every entry of its log is committed (its own vote is the
            // quorum): it answers nothing before it applied them all, so
            // a read right after a restart sees every acknowledged write.
            let last = raft.metrics().borrow().last_log_index;
            raft.wait(Some(options.leader_timeout))
                .applied_index_at_least(last, "startup")
                .await
                .map_err(|e| StartError::Raft {
                    group,
                    reason: format!("the log was not applied in time: {e}"),
                })?;
        }
    }
    if let (Some(via), Some(links)) = (&join_via, &cluster_links) {
        let Some(me) = options.advertise.clone() else {
            return Err(StartError::Raft {
                group: 0,
                reason: "joining a cluster needs this node's own URL (--advertise-url)".to_owned(),
            });
        };
        write_join(&options.data_dir, via)?;
        if joined.is_none() || !initialized_somewhere(&groups).await {
            let members = crate::node::ask_to_join(&client, links, via, options.node_id, &me)
                .await
                .map_err(|reason| StartError::Raft {
                    group: 0,
                    reason: format!("joining the cluster through {via}: {reason}"),
                })?;
            for (id, addr) in &members {
                links.learn(*id, addr);
            }
            tracing::info!(via = %via, members = ?members.keys().collect::<Vec<_>>(), "joined the cluster");
        }
    }
    let node = RaftNode::new(
        engine,
        groups,
        options.node_id,
        cluster_links.map(|links| (links, client)),
        (options.replication_factor, balance, holding),
    );
    node.start_balancing(
        options.balance_interval,
        options.replication_factor,
        options.dead_node_timeout,
    );
    Ok(node)
}

/// How a group's Raft node is opened on its directory: at start, and
/// again from nothing when the node forgets the group
/// ([`crate::forget`]).
#[derive(Clone)]
pub(crate) struct GroupOpener {
    pub(crate) group: usize,
    /// The group's directory (its log in `log/`, its snapshots beside).
    pub(crate) dir: PathBuf,
    pub(crate) fsync: Fsync,
    pub(crate) node_id: NodeId,
    pub(crate) config: Arc<openraft::Config>,
    /// How the node reaches its peers, when it has any.
    pub(crate) network: Option<(Arc<ClusterLinks>, PeerClient)>,
    /// The group's task in the engine.
    pub(crate) applier: strand_engine::GroupApplier,
    /// Log bytes after which a snapshot is asked for.
    pub(crate) snapshot_limit: u64,
    /// Log bytes a purge keeps behind a snapshot.
    pub(crate) snapshot_keep: u64,
}

/// A group's Raft node as [`GroupOpener::open`] opened it.
pub(crate) struct Opened {
    pub(crate) raft: Raft<TypeConfig>,
    pub(crate) log: LogStore,
    pub(crate) snapshots: Arc<crate::snapshot_file::SnapshotDir>,
    pub(crate) recovery: crate::log_store::Recovery,
}

impl Opened {
    /// What the group's proposer runs on.
    pub(crate) fn current(&self) -> crate::proposer::Current {
        crate::proposer::Current {
            raft: self.raft.clone(),
            log: self.log.clone(),
            snapshots: Some(Arc::clone(&self.snapshots)),
        }
    }
}

impl GroupOpener {
    /// Opens the group's log and state machine (restoring the machine
    /// from its snapshot; openraft replays the log after it) and starts
    /// its Raft node and the task that snapshots it by log bytes.
    pub(crate) async fn open(&self) -> Result<Opened, StartError> {
        let group = self.group;
        let raft_err = |e: &dyn std::fmt::Display| StartError::Raft {
            group,
            reason: e.to_string(),
        };
        let (log, recovery) = LogStore::open(&self.dir.join("log"), self.fsync)?;
        if self.network.is_none() {
            log.read_alone();
        }
        let mut sm = GroupStateMachine::open(&self.dir, self.applier.clone())
            .await
            .map_err(|reason| StartError::Snapshot { group, reason })?;
        sm.share_space(log.space());
        let snapshots = sm.files();
        let raft = if let Some((links, client)) = &self.network {
            Raft::new(
                self.node_id,
                Arc::clone(&self.config),
                HttpNetwork {
                    group,
                    links: Arc::clone(links),
                    client: client.clone(),
                },
                log.clone(),
                sm,
            )
            .await
        } else {
            Raft::new(
                self.node_id,
                Arc::clone(&self.config),
                Unconnected,
                log.clone(),
                sm,
            )
            .await
        }
        .map_err(|e| raft_err(&e))?;
        tokio::spawn(snapshot_by_bytes(
            group,
            raft.clone(),
            log.clone(),
            self.snapshot_limit,
            self.snapshot_keep,
        ));
        Ok(Opened {
            raft,
            log,
            snapshots,
            recovery,
        })
    }
}

/// How long a snapshot this node asked for may take before it may ask
/// again (openraft drops the request when a snapshot is being built; the
/// one being built then usually ends the wait first).
const SNAPSHOT_RETRY: Duration = Duration::from_secs(60);

/// Watches a group's log by bytes, beside openraft's own policy (every
/// `snapshot_every` entries): asks for a snapshot once the entries applied
/// since the last one hold `limit` bytes of log records (one request at a
/// time: the next only once the snapshot moved, or after
/// [`SNAPSHOT_RETRY`]), and after each new snapshot purges the log so that
/// at most `keep` bytes of the entries it covers stay (openraft delays a
/// purge while a replication still reads those entries). Ends when the
/// node shuts down.
async fn snapshot_by_bytes(
    group: usize,
    raft: Raft<TypeConfig>,
    log: LogStore,
    limit: u64,
    keep: u64,
) {
    let mut metrics = raft.data_metrics();
    let mut purged_for = None;
    let mut asked: Option<(Option<openraft::LogId<NodeId>>, std::time::Instant)> = None;
    loop {
        let (snapshot, applied) = {
            let m = metrics.borrow_and_update();
            (m.snapshot, m.last_applied)
        };
        if snapshot != purged_for {
            purged_for = snapshot;
            if let Some(upto) = snapshot.and_then(|s| log.purge_point(s.index, keep)) {
                tracing::debug!(group, upto, "purging the log by bytes");
                if raft.trigger().purge_log(upto).await.is_err() {
                    break;
                }
            }
        }
        if let Some((at, since)) = asked
            && (snapshot != at || since.elapsed() >= SNAPSHOT_RETRY)
        {
            asked = None;
        }
        if asked.is_none() {
            let bytes = log.bytes_between(snapshot.map(|s| s.index), applied.map(|a| a.index));
            if bytes >= limit {
                tracing::debug!(group, bytes, "snapshot by bytes");
                if raft.trigger().snapshot().await.is_err() {
                    break;
                }
                asked = Some((snapshot, std::time::Instant::now()));
            }
        }
        if metrics.changed().await.is_err() {
            break;
        }
    }
}

/// The file a node that joined a cluster keeps in its data directory:
/// the member it joined through, so later starts need no `--join`.
const JOIN_FILE: &str = "strand-cluster.json";

/// What [`JOIN_FILE`] holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct JoinInfo {
    format: u32,
    join: String,
}

/// The URL this node joined its cluster through, if it did.
fn read_join(dir: &Path) -> Result<Option<String>, StartError> {
    let path = dir.join(JOIN_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice::<JoinInfo>(&bytes)
            .map(|info| Some(info.join))
            .map_err(|e| StartError::DataDir {
                path,
                reason: format!("unreadable: {e}"),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LogError::io(&path, e).into()),
    }
}

/// Records that this node joins its cluster through `via` (before it
/// asks, so a start interrupted after the cluster admitted it still
/// knows it is a member).
fn write_join(dir: &Path, via: &str) -> Result<(), StartError> {
    let path = dir.join(JOIN_FILE);
    if read_join(dir)?.is_some() {
        return Ok(());
    }
    let info = JoinInfo {
        format: 1,
        join: via.to_owned(),
    };
    let bytes = serde_json::to_vec_pretty(&info).map_err(|e| StartError::DataDir {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    let tmp = dir.join(format!("{JOIN_FILE}.tmp"));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::File::open(&tmp).and_then(|f| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .and_then(|()| std::fs::File::open(dir).and_then(|d| d.sync_all()))
        .map_err(|e| LogError::io(&path, e))?;
    Ok(())
}

/// Whether group 0 holds any state on this node (the cluster sent it
/// something since it asked to join).
async fn initialized_somewhere(groups: &[Arc<RaftGroup>]) -> bool {
    match groups.first() {
        Some(g) => g.raft().is_initialized().await.unwrap_or(false),
        None => false,
    }
}

/// A group's directory under a data directory.
pub fn group_dir(data_dir: &Path, group: usize) -> PathBuf {
    data_dir.join(format!("group-{group}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_join_file_format() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_join(dir.path()).unwrap(), None);
        write_join(dir.path(), "http://10.0.0.1:4437").unwrap();
        let text = std::fs::read_to_string(dir.path().join(JOIN_FILE)).unwrap();
        insta::assert_snapshot!(text);
        // Written once: a later start keeps the member it joined through.
        write_join(dir.path(), "http://10.0.0.9:4437").unwrap();
        assert_eq!(
            read_join(dir.path()).unwrap().as_deref(),
            Some("http://10.0.0.1:4437")
        );
        std::fs::write(dir.path().join(JOIN_FILE), b"{").unwrap();
        let error = read_join(dir.path()).unwrap_err().to_string();
        assert!(error.contains("strand-cluster.json"), "{error}");
    }
}
