//! The network of a one-voter group: there is no peer to reach, so every
//! RPC fails as unreachable (openraft never sends one while the node is
//! the only member).

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
