//! strand-raft: strand's groups on openraft (pinned `=0.9.25`).
//!
//! It implements the group interface `strand-engine` defines: each group
//! of an engine started with `Engine::start_replicated` gets a Raft node
//! whose log store ([`LogStore`]: segment files of checksummed records,
//! group commit, torn-tail recovery), state machine ([`GroupStateMachine`]:
//! committed entries applied through the group's `GroupApplier`, binary
//! snapshots in the group's directory) and proposer ([`RaftGroup`], the
//! `GroupLog`) live here. [`start_durable`] opens a node's groups under a
//! data directory and returns the engine.
//!
//! What it owns: the on-disk formats of the log and of the snapshot file's
//! Raft metadata, the Raft configuration, static membership and the
//! network between nodes (HTTP POSTs of MessagePack bodies to the peers'
//! listeners: append entries and votes of every group batched per peer to
//! `/__strand/raft/batch`, served by [`serve_batch`]; the rest under
//! `/__strand/raft/{group}/{kind}`; the server routes them back in through
//! `Engine::log_message`). What it must not know: stream semantics. It
//! moves `GroupEntry` values and `EntryOutcome`s without looking inside;
//! the engine decides what an entry does, with the same function in
//! memory and here, and the machine's snapshot is the machine's own
//! binary codec.
//!
//! Layout of a data directory:
//!
//! ```text
//! DIR/strand.lock               held (exclusive `flock`) while a node runs
//! DIR/strand-raft.json          node id and group count (checked at start)
//! DIR/group-N/log/NNNNNNNNNN.seg the group's log segments
//! DIR/group-N/snapshot.meta     which snapshot is current, with its Raft metadata
//! DIR/group-N/snapshot-S.data   the group's latest snapshot (the machine's binary snapshot)
//! ```

mod batch;
mod log_store;
mod network;
mod segment;
mod snapshot_file;
mod state_machine;
mod types;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Raft, SnapshotPolicy};
use strand_engine::{
    Clock, Engine, EngineConfig, EngineError, EntryOutcome, GroupEntry, GroupLog, GroupStatus,
    LogFuture, ProposalDone,
};
use tokio::sync::mpsc;

pub use batch::{
    BATCH_PATH, BATCHES_IN_FLIGHT, BatchRefused, MAX_BATCH_BODY, MAX_BATCH_MESSAGES,
    MAX_BATCHED_BYTES, NetworkStats, serve_batch,
};
pub use log_store::{CACHE_BYTES, Fsync, LogStore, Recovery};
pub use network::{CLUSTER_TOKEN_HEADER, ClusterLinks, SEGMENT_PATH};
pub use segment::LogError;
pub use state_machine::{GroupStateMachine, SnapshotBuilder};
pub use types::{NodeId, TypeConfig};

/// The default [`DurableOptions::snapshot_chunk_bytes`]: 3 MiB.
pub const DEFAULT_SNAPSHOT_CHUNK_BYTES: u64 = 3 << 20;

/// The largest [`DurableOptions::snapshot_chunk_bytes`]: 64 MiB (a peer
/// takes Raft messages of at most 256 MiB).
pub const MAX_SNAPSHOT_CHUNK_BYTES: u64 = 64 << 20;

/// The default [`DurableOptions::snapshot_log_bytes`]: 256 MiB. While a
/// group's snapshot still holds its hot bytes, each snapshot rewrites them
/// all, so a smaller figure multiplies what large appends write.
pub const DEFAULT_SNAPSHOT_LOG_BYTES: u64 = 256 << 20;

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
    /// are; after a snapshot the log keeps at most half as many bytes of
    /// the entries it covers (and at most `min(snapshot_every, 1000)` of
    /// them). Default [`DEFAULT_SNAPSHOT_LOG_BYTES`].
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
    /// (header [`CLUSTER_TOKEN_HEADER`]); the receiving server checks it.
    pub cluster_token: Option<String>,
    /// The node's own copy of its groups' flushed bytes, if it keeps one
    /// (a cluster without object storage every node reads): installed on
    /// the engine before the logs replay, and, in a cluster, connected to
    /// the peers it fetches missing objects from ([`SEGMENT_PATH`]).
    pub segment_replica: Option<Arc<dyn strand_engine::SegmentReplica>>,
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
        }
    }
}

/// Why a durable node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A log directory could not be opened.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Another process holds the data directory's lock.
    #[error(
        "{} is in use by another process (it holds the lock {}); two nodes cannot share one data directory",
        dir.display(),
        lock.display()
    )]
    Locked {
        /// The data directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The data directory's description does not match the configuration.
    #[error("{}: {reason}", path.display())]
    DataDir {
        /// The description file.
        path: PathBuf,
        /// What does not match.
        reason: String,
    },
    /// A group's snapshot could not be restored.
    #[error("group {group}: {reason}")]
    Snapshot {
        /// The group.
        group: usize,
        /// The error.
        reason: String,
    },
    /// openraft refused to start.
    #[error("group {group}: raft: {reason}")]
    Raft {
        /// The group.
        group: usize,
        /// The error.
        reason: String,
    },
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

/// The data directory's lock: an exclusive `flock` on `DIR/strand.lock`,
/// taken before anything in the directory is read and held until every
/// group of the node has shut down (or the process ends: the kernel drops
/// it with the descriptor, so a killed node leaves no stale lock).
#[derive(Debug)]
struct DirLock {
    file: std::sync::Mutex<Option<std::fs::File>>,
    /// Groups still running; the last one to shut down releases the lock.
    running: std::sync::atomic::AtomicUsize,
}

impl DirLock {
    fn take(dir: &Path, groups: usize) -> Result<Self, StartError> {
        std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        let path = dir.join("strand.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| LogError::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Self {
                file: std::sync::Mutex::new(Some(file)),
                running: std::sync::atomic::AtomicUsize::new(groups),
            }),
            Err(std::fs::TryLockError::WouldBlock) => Err(StartError::Locked {
                dir: dir.to_path_buf(),
                lock: path,
            }),
            Err(std::fs::TryLockError::Error(e)) => Err(LogError::io(&path, e).into()),
        }
    }

    /// One group has shut down.
    fn group_stopped(&self) {
        use std::sync::atomic::Ordering;
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            let file = match self.file.lock() {
                Ok(mut guard) => guard.take(),
                Err(poisoned) => poisoned.into_inner().take(),
            };
            // Closing the descriptor releases the lock.
            drop(file);
        }
    }
}

/// The openraft configuration of every group.
fn raft_config(options: &DurableOptions) -> Result<openraft::Config, String> {
    openraft::Config {
        cluster_name: "strand".to_owned(),
        // A replication RPC times out after one heartbeat interval: 150 ms
        // leaves room for a connection, an fsync and a busy machine.
        heartbeat_interval: 150,
        election_timeout_min: 450,
        election_timeout_max: 900,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_every.max(1)),
        // A follower further behind than this catches up by snapshot.
        max_in_snapshot_log_to_keep: options.snapshot_every.clamp(1, 1000),
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
/// waits for each group to elect itself, and returns the engine.
///
/// # Errors
/// A damaged log ([`LogError::Corrupt`] names the file and offset), a
/// snapshot that does not restore, a data directory made for another
/// node or group count, or a group that elects no leader in time.
pub async fn start_durable(
    config: EngineConfig,
    clock: Arc<dyn Clock>,
    options: &DurableOptions,
) -> Result<Engine, StartError> {
    let groups = config.groups.max(1);
    let lock = Arc::new(DirLock::take(&options.data_dir, groups)?);
    check_dir(options, groups)?;
    let raft_config =
        Arc::new(raft_config(options).map_err(|reason| StartError::Raft { group: 0, reason })?);
    let cluster = options.peers.len() > 1;
    if cluster && !options.peers.contains_key(&options.node_id) {
        return Err(StartError::Raft {
            group: 0,
            reason: format!("--node-id {} is not one of the peers", options.node_id),
        });
    }
    let cluster_links = cluster.then(|| {
        Arc::new(ClusterLinks {
            addrs: options.peers.clone(),
            token: options.cluster_token.clone(),
        })
    });
    let (engine, links) = Engine::start_replicated(config, clock);
    // One pool of peer connections for every group of the node.
    let client = network::PeerClient::new(options.cluster_token.as_deref());
    if let Some(replica) = &options.segment_replica {
        engine.set_segment_replica(Arc::clone(replica));
        if let Some(links) = &cluster_links {
            replica.connect(Arc::new(network::PeerSegments {
                node_id: options.node_id,
                links: Arc::clone(links),
                client: client.clone(),
            }));
        }
    }
    let mut rafts = Vec::new();
    for link in links {
        let group = link.group();
        let raft_err = |e: &dyn std::fmt::Display| StartError::Raft {
            group,
            reason: e.to_string(),
        };
        let dir = group_dir(&options.data_dir, group);
        let (log, recovery) = LogStore::open(&dir.join("log"), options.fsync)?;
        let log_handle = log.clone();
        if recovery.truncated.is_some() || recovery.records > 0 {
            tracing::info!(group, ?recovery, "log recovered");
        }
        let sm = GroupStateMachine::open(&dir, link.applier())
            .await
            .map_err(|reason| StartError::Snapshot { group, reason })?;
        let snapshot_files = sm.files();
        let raft = if let Some(cluster_links) = &cluster_links {
            Raft::new(
                options.node_id,
                Arc::clone(&raft_config),
                network::HttpNetwork {
                    group,
                    links: Arc::clone(cluster_links),
                    client: client.clone(),
                },
                log,
                sm,
            )
            .await
        } else {
            Raft::new(
                options.node_id,
                Arc::clone(&raft_config),
                network::Unconnected,
                log,
                sm,
            )
            .await
        }
        .map_err(|e| raft_err(&e))?;
        tokio::spawn(snapshot_by_bytes(
            group,
            raft.clone(),
            log_handle.clone(),
            options.snapshot_log_bytes.max(1),
        ));
        let initialized = raft.is_initialized().await.map_err(|e| raft_err(&e))?;
        // A single node initializes itself; a cluster is initialized once,
        // by its lowest node id, with every member.
        let first = options.peers.keys().next().copied();
        if !initialized && (!cluster || first == Some(options.node_id)) {
            let members: BTreeMap<NodeId, BasicNode> = if cluster {
                options
                    .peers
                    .iter()
                    .map(|(id, url)| (*id, BasicNode::new(url.clone())))
                    .collect()
            } else {
                [(options.node_id, BasicNode::default())]
                    .into_iter()
                    .collect()
            };
            raft.initialize(members).await.map_err(|e| raft_err(&e))?;
        }
        let mut raft_group = RaftGroup::start(
            group,
            raft.clone(),
            log_handle,
            cluster_links.clone().map(|links| (links, client.clone())),
        );
        raft_group.dir_lock = std::sync::Mutex::new(Some(Arc::clone(&lock)));
        raft_group.snapshots = Some(snapshot_files);
        link.attach(Arc::new(raft_group));
        rafts.push((group, raft));
    }
    if !cluster {
        for (group, raft) in rafts {
            raft.wait(Some(options.leader_timeout))
                .current_leader(options.node_id, "startup")
                .await
                .map_err(|e| StartError::Raft {
                    group,
                    reason: format!("no leader elected: {e}"),
                })?;
        }
    }
    Ok(engine)
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
/// at most `limit / 2` bytes of the entries it covers stay (openraft
/// delays a purge while a replication still reads those entries). Ends
/// when the node shuts down.
async fn snapshot_by_bytes(group: usize, raft: Raft<TypeConfig>, log: LogStore, limit: u64) {
    let keep = limit / 2;
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

/// A group's directory under a data directory.
pub fn group_dir(data_dir: &Path, group: usize) -> PathBuf {
    data_dir.join(format!("group-{group}"))
}

/// A group's Raft node, as the engine's `GroupLog`: proposals go to
/// openraft in the order they are made, outcomes come back from the state
/// machine.
pub struct RaftGroup {
    group: usize,
    raft: Raft<TypeConfig>,
    log: LogStore,
    /// The node's client to its peers, when the group has some (it then
    /// takes peer messages).
    peers: Option<network::PeerClient>,
    proposals: mpsc::UnboundedSender<(GroupEntry, ProposalDone)>,
    /// The data directory's lock, released when the last group stops.
    dir_lock: std::sync::Mutex<Option<Arc<DirLock>>>,
    /// The group's snapshot files, for its status.
    snapshots: Option<Arc<snapshot_file::SnapshotDir>>,
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
    /// With `cluster` (how this node reaches its peers), an entry proposed
    /// on a follower is forwarded to the group's leader (a `propose`
    /// message) and answered with the leader's outcome once this node has
    /// applied it too (read-your-writes on the node a client talks to).
    pub fn new(
        group: usize,
        raft: Raft<TypeConfig>,
        log: LogStore,
        cluster: Option<Arc<ClusterLinks>>,
    ) -> Self {
        Self::start(
            group,
            raft,
            log,
            cluster.map(|links| {
                let client = network::PeerClient::new(links.token.as_deref());
                (links, client)
            }),
        )
    }

    /// [`RaftGroup::new`], forwarding (when `cluster` is some) over the
    /// node's shared peer client.
    fn start(
        group: usize,
        raft: Raft<TypeConfig>,
        log: LogStore,
        cluster: Option<(Arc<ClusterLinks>, network::PeerClient)>,
    ) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<(GroupEntry, ProposalDone)>();
        let proposer = raft.clone();
        let peers = cluster.as_ref().map(|(_, client)| client.clone());
        tokio::spawn(async move {
            // At most IN_FLIGHT proposals wait for their commit at a time;
            // what arrives meanwhile is proposed together, as one entry.
            let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
            loop {
                let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
                    break;
                };
                let Some(first) = rx.recv().await else {
                    break;
                };
                let (entry, dones) = gather(first, &mut rx);
                let copy = cluster.clone().map(|links| (links, entry.clone()));
                match proposer.client_write_ff(entry).await {
                    Ok(answer) => {
                        let local = proposer.clone();
                        tokio::spawn(async move {
                            let outcome = match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
                                Err(_) => {
                                    tracing::warn!(
                                        group,
                                        "a proposal got no answer within {ANSWER_TIMEOUT:?}; answered unavailable"
                                    );
                                    Err(EngineError::Unavailable)
                                }
                                Ok(Ok(Ok(response))) => Ok(response.data),
                                Ok(Ok(Err(
                                    openraft::error::ClientWriteError::ForwardToLeader(f),
                                ))) => match (copy, f.leader_id, f.leader_node) {
                                    (Some(((links, client), entry)), Some(id), Some(node)) => {
                                        let addr = links.addr_of(id, &node.addr);
                                        forward_to(&local, &client, &addr, &links, group, &entry)
                                            .await
                                    }
                                    _ => Err(EngineError::Unavailable),
                                },
                                Ok(Ok(Err(_))) => Err(EngineError::Unavailable),
                                Ok(Err(_)) => Err(EngineError::Shutdown),
                            };
                            drop(permit);
                            answer_all(dones, outcome);
                        });
                    }
                    Err(_) => answer_all(dones, Err(EngineError::Shutdown)),
                }
            }
        });
        Self {
            group,
            raft,
            log,
            peers,
            proposals: tx,
            dir_lock: std::sync::Mutex::new(None),
            snapshots: None,
        }
    }

    /// The group's Raft node.
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }
}

/// Proposals of a group waiting for their commit at a time; the ones
/// that arrive meanwhile wait and are then proposed together.
const IN_FLIGHT: usize = 2;
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
    first: (GroupEntry, ProposalDone),
    rx: &mut mpsc::UnboundedReceiver<(GroupEntry, ProposalDone)>,
) -> (GroupEntry, Vec<ProposalDone>) {
    let (entry, done) = first;
    let mut bytes = entry.payload_bytes();
    let mut entries = vec![entry];
    let mut dones = vec![done];
    while entries.len() < MAX_BATCH && bytes < MAX_BATCH_BYTES {
        let Ok((entry, done)) = rx.try_recv() else {
            break;
        };
        bytes = bytes.saturating_add(entry.payload_bytes());
        entries.push(entry);
        dones.push(done);
    }
    let entry = if entries.len() == 1 {
        entries.pop().unwrap_or(GroupEntry::Batch(Vec::new()))
    } else {
        GroupEntry::Batch(entries)
    };
    (entry, dones)
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
                    done(Err(EngineError::Unavailable));
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
                done(Err(EngineError::Unavailable));
            }
        }
        Err(e) => {
            for done in dones {
                done(Err(e));
            }
        }
    }
}

/// Proposes an entry on the leader at `addr`, then waits until this node
/// has applied it too, so a client reading from this node after the
/// answer sees its own write.
async fn forward_to(
    local: &Raft<TypeConfig>,
    client: &network::PeerClient,
    addr: &str,
    links: &ClusterLinks,
    group: usize,
    entry: &GroupEntry,
) -> Result<EntryOutcome, EngineError> {
    let body = rmp_serde::to_vec_named(entry).map_err(|_| EngineError::Unavailable)?;
    let path = format!("/__strand/raft/{group}/propose");
    let answer = client
        .post(
            addr,
            &path,
            body,
            links.token.as_deref(),
            Duration::from_secs(10),
        )
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, "forwarding to the leader failed");
            EngineError::Unavailable
        })?;
    let result: Result<(EntryOutcome, u64), String> =
        rmp_serde::from_slice(&answer).map_err(|_| EngineError::Unavailable)?;
    let (outcome, index) = result.map_err(|e| {
        tracing::debug!(error = %e, "the leader refused a forwarded entry");
        EngineError::Unavailable
    })?;
    // The entry is committed; without the local apply only read-your-writes
    // suffers, so a timeout here still answers with the outcome.
    if let Err(e) = local
        .wait(Some(Duration::from_secs(10)))
        .applied_index_at_least(Some(index), "forwarded write")
        .await
    {
        tracing::debug!(error = %e, index, "a forwarded write is not applied here yet");
    }
    Ok(outcome)
}

/// The message kind that asks a group's log for the node's
/// [`NetworkStats`] (all groups of a node share them).
const NETWORK_STATS: &str = "network-stats";

/// The node's Raft traffic to its peers ([`NetworkStats`]); `None` for an
/// engine whose groups have no peers (in memory, a single durable node).
pub async fn network_stats(engine: &Engine) -> Option<NetworkStats> {
    let answer = engine
        .log_message(0, NETWORK_STATS, Vec::new())
        .await
        .ok()?;
    rmp_serde::from_slice(&answer).ok()
}

fn encode_answer<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, String> {
    rmp_serde::to_vec_named(value).map_err(|e| e.to_string())
}

fn decode_request<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    rmp_serde::from_slice(body).map_err(|e| format!("a malformed raft message: {e}"))
}

impl GroupLog for RaftGroup {
    fn message(&self, kind: &str, body: Vec<u8>) -> LogFuture<Result<Vec<u8>, String>> {
        let raft = self.raft.clone();
        let kind = kind.to_owned();
        let peers = self.peers.clone();
        Box::pin(async move {
            let Some(peers) = peers else {
                return Err("this node is not part of a cluster".to_owned());
            };
            match kind.as_str() {
                NETWORK_STATS => encode_answer(&peers.stats()),
                "append" => encode_answer(&raft.append_entries(decode_request(&body)?).await),
                "vote" => encode_answer(&raft.vote(decode_request(&body)?).await),
                "snapshot" => encode_answer(&raft.install_snapshot(decode_request(&body)?).await),
                "propose" => {
                    // Only the leader takes it; a forwarded entry is not
                    // forwarded again.
                    let entry: GroupEntry = decode_request(&body)?;
                    let answer: Result<(EntryOutcome, u64), String> =
                        match raft.client_write(entry).await {
                            Ok(response) => Ok((response.data, response.log_id.index)),
                            Err(e) => Err(e.to_string()),
                        };
                    encode_answer(&answer)
                }
                other => Err(format!("unknown raft message kind {other:?}")),
            }
        })
    }

    fn propose(&self, entry: GroupEntry, done: ProposalDone) {
        if let Err(mpsc::error::SendError((_, done))) = self.proposals.send((entry, done)) {
            done(Err(EngineError::Shutdown));
        }
    }

    fn status(&self) -> GroupStatus {
        let metrics = self.raft.metrics().borrow().clone();
        GroupStatus {
            group: self.group,
            leader: metrics.current_leader,
            applied_index: metrics.last_applied.map(|l| l.index),
            last_log_index: metrics.last_log_index,
            log: Some(self.log.stats()),
            snapshot: self.snapshots.as_ref().map(|s| s.stats()),
        }
    }

    fn leads(&self) -> bool {
        let metrics = self.raft.metrics();
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
        let raft = self.raft.clone();
        let log = self.log.clone();
        // Taken once: a second shutdown does not count again.
        let lock = match self.dir_lock.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        let snapshots = self.snapshots.clone();
        Box::pin(async move {
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
