//! The networks between nodes. A one-voter group's ([`Unconnected`]) has
//! no peer to reach, so every RPC fails as unreachable (openraft never
//! sends one while the node is the only member); a cluster's
//! ([`HttpNetwork`]) POSTs each RPC to the peer's listener, at the address
//! this node's own peer list gives, with the cluster token.

use std::collections::BTreeMap;
use std::sync::Arc;

use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

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
/// the peer's listener under `/__strand/raft/{group}/{kind}`, bodies in
/// MessagePack (`kind`: `append`, `vote`, `snapshot`, and `propose` for a
/// follower forwarding a client's entry to the leader).
#[derive(Debug, Clone)]
pub(crate) struct HttpNetwork {
    pub(crate) group: usize,
    pub(crate) links: Arc<ClusterLinks>,
}

/// One peer of one group.
#[derive(Debug, Clone)]
pub(crate) struct HttpPeer {
    group: usize,
    target: NodeId,
    addr: String,
    links: Arc<ClusterLinks>,
}

impl RaftNetworkFactory<TypeConfig> for HttpNetwork {
    type Network = HttpPeer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Self::Network {
        HttpPeer {
            group: self.group,
            target,
            addr: self.links.addr_of(target, &node.addr),
            links: Arc::clone(&self.links),
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

/// One POST on its own connection, with the cluster token when there is
/// one; the answer's body when it is 200.
pub(crate) async fn post(
    addr: &str,
    path: &str,
    body: &[u8],
    token: Option<&str>,
    timeout: std::time::Duration,
) -> Result<Vec<u8>, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let host = host_port(addr);
        let mut stream = tokio::net::TcpStream::connect(host)
            .await
            .map_err(|e| format!("{host}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let auth = token
            .map(|t| format!("{CLUSTER_TOKEN_HEADER}: {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/msgpack\r\n{auth}Content-Length: {}\r\n\r\n",
            body.len()
        );
        stream
            .write_all(head.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        stream.write_all(body).await.map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .await
            .map_err(|e| e.to_string())?;
        parse_response(&raw)
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("{addr}: timed out"))?
}

fn parse_response(raw: &[u8]) -> Result<Vec<u8>, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("a response without headers")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("a response without a status")?;
    let chunked = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked")
        })
    });
    let mut body = raw[split + 4..].to_vec();
    if chunked {
        body = dechunk(&body).ok_or("a malformed chunked body")?;
    }
    if status != 200 {
        return Err(format!(
            "status {status}: {}",
            String::from_utf8_lossy(&body).trim()
        ));
    }
    Ok(body)
}

fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = raw.windows(2).position(|w| w == b"\r\n")?;
        let size_text = String::from_utf8_lossy(&raw[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        let start = eol + 2;
        out.extend_from_slice(raw.get(start..start + size)?);
        raw = raw.get(start + size + 2..)?;
    }
}

impl HttpPeer {
    async fn call<Req, Resp, E>(
        &self,
        kind: &str,
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
        let path = format!("/__strand/raft/{}/{kind}", self.group);
        let answer = post(
            &self.addr,
            &path,
            &body,
            self.links.token.as_deref(),
            option.hard_ttl(),
        )
        .await
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
