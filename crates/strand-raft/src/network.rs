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
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::CONTENT_TYPE;
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use crate::batch::{Batcher, Counters, NetworkStats};
use crate::types::{NodeId, TypeConfig};

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

/// The header that carries the cluster token on every message between
/// nodes (`/__strand/raft/...`).
pub const CLUSTER_TOKEN_HEADER: &str = "strand-cluster-token";

/// How this node reaches the other members of its cluster: each member's
/// address as *this* node's `--peer` list gives it (nodes may reach one
/// another through different addresses, such as a proxy; the addresses in
/// the replicated membership are only a fallback), and the cluster token
/// sent with every message.
#[derive(Debug, Clone, Default)]
pub struct ClusterLinks {
    /// Node id → `http://host:port` this node sends that member's
    /// messages to.
    pub addrs: BTreeMap<NodeId, String>,
    /// The shared secret every message carries in
    /// [`CLUSTER_TOKEN_HEADER`]; `None` sends none.
    pub token: Option<String>,
}

impl ClusterLinks {
    /// The address of `target`: this node's own entry for it, else the one
    /// the membership recorded.
    pub(crate) fn addr_of(&self, target: NodeId, recorded: &str) -> String {
        self.addrs
            .get(&target)
            .cloned()
            .unwrap_or_else(|| recorded.to_owned())
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

/// `host:port` of a peer URL (`http://host:port[/]`).
pub(crate) fn host_port(url: &str) -> &str {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    rest.split('/').next().unwrap_or(rest)
}

/// The largest answer a peer may send (a snapshot install's answer is
/// small; this only bounds a misbehaving peer).
const MAX_ANSWER: usize = 64 << 20;

/// The HTTP client of a node's Raft traffic, shared by all its groups
/// (and by its batcher): hyper-util's pooled client, which keeps the
/// connections to each peer alive and reuses an idle one for the next
/// request (a request finding none idle opens one more; at most 64 idle
/// per peer are kept, each for at most a minute). Cheap to clone.
#[derive(Clone)]
pub(crate) struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http").finish_non_exhaustive()
    }
}

/// The start of [`Http::post`]'s error for a peer that has no such route
/// (an older node without `/__strand/raft/batch`).
pub(crate) const NOT_FOUND: &str = "status 404";

impl Http {
    /// A client with an empty pool (connections open on first use).
    pub(crate) fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(std::time::Duration::from_secs(2)));
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(std::time::Duration::from_secs(60))
            .pool_max_idle_per_host(64)
            .build(connector);
        Self { client }
    }

    /// One POST to the peer at `addr` (`http://host:port`), with the
    /// cluster token when there is one; the answer's body when it is 200
    /// (any other status is an error starting `status NNN`).
    /// Fails after `timeout` (the connection in use is then dropped, not
    /// reused).
    pub(crate) async fn post(
        &self,
        addr: &str,
        path: &str,
        body: Vec<u8>,
        token: Option<&str>,
        timeout: std::time::Duration,
    ) -> Result<Bytes, String> {
        self.post_limited(addr, path, (body, token), timeout, MAX_ANSWER)
            .await
    }
}

impl Http {
    /// [`Http::post`] for an answer that streams: hands each piece of a
    /// 200 answer's body to `each` as it arrives (an error from `each`
    /// ends the exchange with it), at most [`MAX_ANSWER`] bytes in all.
    /// Fails after `timeout`, keeping what `each` was given by then.
    pub(crate) async fn post_streaming(
        &self,
        addr: &str,
        path: &str,
        body: Vec<u8>,
        token: Option<&str>,
        timeout: std::time::Duration,
        each: impl FnMut(Bytes) -> Result<(), String>,
    ) -> Result<(), String> {
        self.exchange(addr, path, (body, token), timeout, MAX_ANSWER, each)
            .await
    }

    /// [`Http::post`] for an answer of up to `limit` bytes (a segment
    /// file).
    pub(crate) async fn post_limited(
        &self,
        addr: &str,
        path: &str,
        (body, token): (Vec<u8>, Option<&str>),
        timeout: std::time::Duration,
        limit: usize,
    ) -> Result<Bytes, String> {
        let mut answer = bytes::BytesMut::new();
        self.exchange(addr, path, (body, token), timeout, limit, |piece| {
            answer.extend_from_slice(&piece);
            Ok(())
        })
        .await?;
        Ok(answer.freeze())
    }

    async fn exchange(
        &self,
        addr: &str,
        path: &str,
        (body, token): (Vec<u8>, Option<&str>),
        timeout: std::time::Duration,
        limit: usize,
        mut each: impl FnMut(Bytes) -> Result<(), String>,
    ) -> Result<(), String> {
        let host = host_port(addr);
        let exchange = async {
            let mut request = Request::post(format!("http://{host}{path}"))
                .header(CONTENT_TYPE, "application/msgpack");
            if let Some(token) = token {
                request = request.header(CLUSTER_TOKEN_HEADER, token);
            }
            let request = request
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| format!("{host}: {e}"))?;
            let response =
                self.client.request(request).await.map_err(
                    |e| match std::error::Error::source(&e) {
                        Some(cause) => format!("{host}: {e}: {cause}"),
                        None => format!("{host}: {e}"),
                    },
                )?;
            let status = response.status();
            let mut answer = Limited::new(response.into_body(), limit);
            if status != StatusCode::OK {
                let text = answer
                    .collect()
                    .await
                    .map_err(|e| format!("{host}: {e}"))?
                    .to_bytes();
                return Err(format!(
                    "status {}: {}",
                    status.as_u16(),
                    String::from_utf8_lossy(&text).trim()
                ));
            }
            while let Some(frame) = answer.frame().await {
                let frame = frame.map_err(|e| format!("{host}: {e}"))?;
                if let Ok(data) = frame.into_data() {
                    each(data)?;
                }
            }
            Ok(())
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| format!("{addr}: timed out"))?
    }
}

/// A node's client to its peers, shared by all its groups: the pooled
/// [`Http`] client, the node-wide [`Batcher`] over it, and the traffic
/// counters ([`NetworkStats`]). Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct PeerClient {
    http: Http,
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

    /// One POST of a message sent alone (a forwarded proposal, a
    /// snapshot chunk): [`Http::post`].
    pub(crate) async fn post(
        &self,
        addr: &str,
        path: &str,
        body: Vec<u8>,
        token: Option<&str>,
        timeout: std::time::Duration,
    ) -> Result<Bytes, String> {
        self.http.post(addr, path, body, token, timeout).await
    }

    /// The node's Raft traffic so far.
    pub(crate) fn stats(&self) -> NetworkStats {
        self.counters.snapshot()
    }
}

/// The path a node serves its segment files to its peers on (POST, the
/// object's name as the body).
pub const SEGMENT_PATH: &str = "/__strand/raft/segment";

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
            for (id, addr) in links.addrs.iter().filter(|(id, _)| **id != me) {
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
        kind: &'static str,
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
            let path = format!("/__strand/raft/{}/{kind}", self.group);
            let answer = self
                .client
                .post(
                    &self.addr,
                    &path,
                    body,
                    self.links.token.as_deref(),
                    option.hard_ttl(),
                )
                .await;
            self.client.counters.sent_alone(answer.is_ok());
            answer
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
        self.call("append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call("snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("vote", &rpc, &option).await
    }
}
