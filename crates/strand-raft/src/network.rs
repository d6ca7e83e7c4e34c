//! The networks between nodes. A one-voter group's ([`Unconnected`]) has
//! no peer to reach, so every RPC fails as unreachable (openraft never
//! sends one while the node is the only member); a cluster's
//! ([`HttpNetwork`]) sends each RPC to the peer's listener, at the address
//! this node's own peer list gives, with the cluster token, through the
//! node's one [`PeerClient`] (a pooled keep-alive HTTP/1.1 client shared by
//! every group).
//!
//! Append entries and votes of every group to the same peer are batched
//! (`crate::batch`): they queue for that peer and go together, up to 64
//! messages or 4 MiB in one `POST /__strand/raft/batch`, at most 4
//! batches in flight per peer, each message still bound by its own
//! `hard_ttl`. Snapshot chunks, messages over 4 MiB, and every message to
//! a peer that does not know the batch route (404: an older node) go alone
//! to `/__strand/raft/{group}/{kind}`, as do forwarded proposals.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use crate::batch::Batcher;
use crate::http::Http;
use crate::stats::{Counters, NetworkStats};
use crate::types::{NodeId, TypeConfig};
use crate::wire::{RaftMessage, SEGMENT_PATH};

/// A network with no peers.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Unconnected;

#[derive(Debug, thiserror::Error)]
#[error("this node has no peers")]
struct NoPeers;

fn unreachable<E: std::error::Error>() -> RPCError<NodeId, BasicNode, E> {
    RPCError::Unreachable(Unreachable::new(&NoPeers))
}

impl RaftNetworkFactory<TypeConfig> for Unconnected {
    type Network = Unconnected;

    async fn new_client(&mut self, _target: NodeId, _node: &BasicNode) -> Self::Network {
        Unconnected
    }
}

impl RaftNetwork<TypeConfig> for Unconnected {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        Err(unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        Err(unreachable())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        Err(unreachable())
    }
}

/// How this node reaches the other members of its cluster: each member's
/// address as *this* node's `--peer` list gives it (nodes may reach one
/// another through different addresses, such as a proxy; the addresses in
/// the replicated membership are only a fallback), and the cluster token
/// sent with every message.
#[derive(Debug, Default)]
pub struct ClusterLinks {
    /// Node id → `http://host:port` this node sends that member's
    /// messages to: its `--peer` list, and the members it learned of
    /// since (nodes that joined).
    addrs: std::sync::RwLock<BTreeMap<NodeId, String>>,
    /// The shared secret every message carries in
    /// [`CLUSTER_TOKEN_HEADER`](crate::CLUSTER_TOKEN_HEADER); `None` sends none.
    pub token: Option<String>,
}

impl ClusterLinks {
    /// Links to the members of `addrs`, with the cluster token `token`.
    pub fn new(addrs: BTreeMap<NodeId, String>, token: Option<String>) -> Self {
        Self {
            addrs: std::sync::RwLock::new(addrs),
            token,
        }
    }

    /// Every member's address as this node knows it.
    pub fn addrs(&self) -> BTreeMap<NodeId, String> {
        self.addrs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Member `id`'s address, if this node knows one.
    pub fn get(&self, id: NodeId) -> Option<String> {
        self.addrs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    /// Records member `id`'s address unless this node has one already
    /// (its own `--peer` entry wins over what the membership recorded);
    /// an empty address is ignored.
    pub(crate) fn learn(&self, id: NodeId, addr: &str) {
        if addr.is_empty() {
            return;
        }
        let mut addrs = self
            .addrs
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        addrs.entry(id).or_insert_with(|| addr.to_owned());
    }

    /// The address of `target`: this node's own entry for it, else the one
    /// the membership recorded.
    pub(crate) fn addr_of(&self, target: NodeId, recorded: &str) -> String {
        self.get(target).unwrap_or_else(|| recorded.to_owned())
    }
}

/// The network of a cluster: Raft RPCs of group `group` are HTTP POSTs to
/// the peer's listener, bodies in MessagePack: append entries and votes
/// batched with every other group's to the same peer
/// (`/__strand/raft/batch`), snapshot chunks alone under
/// `/__strand/raft/{group}/snapshot` (and `propose` for a follower
/// forwarding a client's entry to the leader), over the node's
/// [`PeerClient`], to the addresses and with the token of its
/// [`ClusterLinks`].
#[derive(Debug, Clone)]
pub(crate) struct HttpNetwork {
    pub(crate) group: usize,
    pub(crate) links: Arc<ClusterLinks>,
    pub(crate) client: PeerClient,
}

/// One peer of one group.
#[derive(Debug, Clone)]
pub(crate) struct HttpPeer {
    group: usize,
    target: NodeId,
    addr: String,
    links: Arc<ClusterLinks>,
    client: PeerClient,
}

impl RaftNetworkFactory<TypeConfig> for HttpNetwork {
    type Network = HttpPeer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Self::Network {
        HttpPeer {
            group: self.group,
            target,
            addr: self.links.addr_of(target, &node.addr),
            links: Arc::clone(&self.links),
            client: self.client.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Transport(String);

/// A node's client to its peers, shared by all its groups: the pooled
/// [`Http`] client, the node-wide [`Batcher`] over it, and the traffic
/// counters ([`NetworkStats`]). Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct PeerClient {
    /// The pooled client, for messages sent alone (a forwarded proposal,
    /// a snapshot chunk).
    pub(crate) http: Http,
    batcher: Batcher,
    counters: Arc<Counters>,
}

impl PeerClient {
    /// A client with an empty pool (connections open on first use) whose
    /// batches carry `token`.
    pub(crate) fn new(token: Option<&str>) -> Self {
        let http = Http::new();
        let counters = Arc::new(Counters::default());
        Self {
            batcher: Batcher::new(http.clone(), token, Arc::clone(&counters)),
            http,
            counters,
        }
    }

    /// The node's Raft traffic so far.
    pub(crate) fn stats(&self) -> NetworkStats {
        self.counters.snapshot()
    }
}

/// How long one segment file fetch may take.
const SEGMENT_FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// How a cluster node fetches a segment file it lacks: from each other
/// member in turn (`POST` [`SEGMENT_PATH`] with the cluster token).
#[derive(Debug)]
pub(crate) struct PeerSegments {
    pub(crate) node_id: NodeId,
    pub(crate) links: Arc<ClusterLinks>,
    pub(crate) client: PeerClient,
}

impl strand_engine::SegmentPeers for PeerSegments {
    fn fetch(&self, name: &str, limit: u64) -> strand_engine::LogFuture<Result<Bytes, String>> {
        let name = name.to_owned();
        let links = Arc::clone(&self.links);
        let http = self.client.http.clone();
        let me = self.node_id;
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        Box::pin(async move {
            let mut errors = Vec::new();
            for (id, addr) in links.addrs().iter().filter(|(id, _)| **id != me) {
                match http
                    .post_limited(
                        addr,
                        SEGMENT_PATH,
                        (name.clone().into_bytes(), links.token.as_deref()),
                        SEGMENT_FETCH_TIMEOUT,
                        limit,
                    )
                    .await
                {
                    Ok(file) => return Ok(file),
                    Err(e) => errors.push(format!("node {id}: {e}")),
                }
            }
            if errors.is_empty() {
                errors.push("no other node".to_owned());
            }
            Err(errors.join("; "))
        })
    }
}

impl HttpPeer {
    async fn call<Req, Resp, E>(
        &self,
        kind: RaftMessage,
        rpc: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: serde::Serialize,
        Resp: serde::de::DeserializeOwned,
        E: std::error::Error + serde::de::DeserializeOwned,
    {
        let body = rmp_serde::to_vec_named(rpc)
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&Transport(e.to_string()))))?;
        let answer = if Batcher::takes(kind, body.len()) {
            self.client
                .batcher
                .send(&self.addr, self.group, kind, body, option.hard_ttl())
                .await
        } else {
            let path = kind.path(self.group);
            let answer = self
                .client
                .http
                .post(
                    &self.addr,
                    &path,
                    body,
                    self.links.token.as_deref(),
                    option.hard_ttl(),
                )
                .await;
            self.client.counters.sent_alone(answer.is_ok());
            answer.map_err(|e| e.to_string())
        }
        .map_err(|e| RPCError::Unreachable(Unreachable::new(&Transport(e))))?;
        let result: Result<Resp, RaftError<NodeId, E>> = rmp_serde::from_slice(&answer)
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&Transport(e.to_string()))))?;
        result.map_err(|e| RPCError::RemoteError(openraft::error::RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for HttpPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RaftMessage::Append, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call(RaftMessage::Snapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RaftMessage::Vote, &rpc, &option).await
    }
}
