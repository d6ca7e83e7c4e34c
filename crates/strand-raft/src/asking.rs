//! Questions about groups this node does not hold, asked at the members
//! that do ([`strand_engine::RemoteGroups`]).
//!
//! A node holds a group once its own log names it a member (voter or
//! learner); a node that joined holds none until each group's leader has
//! added it. The engine answers a question over a group it does not hold
//! ([`strand_engine::GroupQuery`]) by posting it to [`ASK_PATH`] on
//! another member — the group's leader as the last balancing round's
//! views said, then the other members in turn — which answers from its
//! own machine or refuses (`503`) when it does not hold the group either.

use std::sync::Arc;
use std::time::Duration;

use strand_engine::{EngineError, RemoteAnswer, RemoteGroups, Unavailable};

use crate::balance::Balance;
use crate::network::{ClusterLinks, PeerClient};
use crate::types::NodeId;

/// The route a member answers another's questions on:
/// `POST /__strand/raft/ask/{group}/{kind}` with the cluster token, the
/// question as the body (MessagePack); `200` and the answer, `503` when it
/// does not hold the group, `404` for a kind or group it does not know,
/// `400` for a body that is not the question.
pub const ASK_PATH: &str = "/__strand/raft/ask";

/// How long one member may take to answer a question.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// A cluster member's [`RemoteGroups`].
pub(crate) struct Asker {
    pub(crate) me: NodeId,
    pub(crate) holding: Arc<crate::holding::Holding>,
    /// The node's groups (their metrics, as this node's Raft reports
    /// them).
    pub(crate) groups: Arc<[Arc<crate::proposer::RaftGroup>]>,
    pub(crate) links: Arc<ClusterLinks>,
    pub(crate) client: PeerClient,
    pub(crate) balance: Arc<Balance>,
}

impl Asker {
    /// Who to ask about `group`, in order: its leader as this node's own
    /// Raft knows it (when it holds the group) and as last seen in the
    /// members' views, then every other member (only the leader answers;
    /// the others refuse at once); each with its URL.
    fn targets(&self, group: usize) -> Vec<(NodeId, String)> {
        let me = self.me;
        let own = self.groups.get(group).and_then(|g| {
            let metrics = g.raft().metrics();
            let m = metrics.borrow();
            self.holding
                .holds(group, &m)
                .then_some(m.current_leader)
                .flatten()
        });
        let mut ids: Vec<NodeId> = Vec::new();
        for id in own.into_iter().chain(self.balance.leader_seen(group)) {
            if id != me && !ids.contains(&id) {
                ids.push(id);
            }
        }
        let members: Vec<NodeId> = match self.groups.first() {
            Some(group0) => {
                crate::balance::registry(std::slice::from_ref(&*group0.raft().metrics().borrow()))
            }
            None => Default::default(),
        }
        .into_iter()
        .chain(self.links.addrs().into_keys())
        .collect();
        for id in members {
            if id != me && !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids.into_iter()
            .filter_map(|id| self.links.get(id).map(|url| (id, url)))
            .collect()
    }
}

impl RemoteGroups for Asker {
    fn holds(&self, group: usize) -> bool {
        self.groups
            .get(group)
            .is_some_and(|g| self.holding.holds(group, &g.raft().metrics().borrow()))
    }

    fn dropped(&self, group: usize) -> bool {
        !self.holds(group) && self.balance.planned(group) == Some(false)
    }

    fn ask(&self, group: usize, kind: &'static str, query: Vec<u8>) -> RemoteAnswer {
        let targets = self.targets(group);
        let client = self.client.clone();
        let token = self.links.token.clone();
        let path = format!("{ASK_PATH}/{group}/{kind}");
        Box::pin(async move {
            for (id, url) in targets {
                match client
                    .http
                    .post(&url, &path, query.clone(), token.as_deref(), ASK_TIMEOUT)
                    .await
                {
                    Ok(answer) => return Ok(answer.to_vec()),
                    Err(e) => {
                        tracing::debug!(group, kind, node = id, error = %e, "a member did not answer a question");
                    }
                }
            }
            Err(EngineError::Unavailable(Unavailable::Remote))
        })
    }
}
