//! A cluster's status: what one node knows of its groups ([`NodeView`],
//! which a node answers its peers under [`VIEW_PATH`]) and the status
//! put together from every member's view ([`ClusterStatus`], the JSON of
//! the server's `GET /__strand/cluster`).
//!
//! The names in the JSON are a contract: scripts read them. A node is
//! `up`, `draining`, `down` or `removed` (the cluster's membership, group
//! 0's, no longer holds it); the moves are leaderships handed off,
//! learners added or dropped and voters changed ([`crate::balance`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::types::NodeId;

/// The path a node answers its own [`NodeView`] under (a `POST` with the
/// cluster token and an empty body; JSON answer).
pub const VIEW_PATH: &str = "/__strand/raft/view";

/// The path a node takes a drain (`true`) or its end (`false`) on, as a
/// JSON boolean body (a `POST` with the cluster token).
pub const DRAIN_PATH: &str = "/__strand/raft/drain";

/// What a member asks of another under [`DRAIN_PATH`] (JSON): `true` or
/// `false` starts or ends a drain; `{"leaving": true}` also marks the
/// node leaving the cluster (its votes move to the other members;
/// `false`, or ending the drain, clears it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DrainRequest {
    /// Start (`true`) or end a drain.
    Draining(bool),
    /// Mark the node leaving (and draining), or clear the mark.
    Leaving {
        /// Whether it leaves.
        leaving: bool,
    },
}

/// The path the leader of group 0 takes a member's removal on, as a JSON
/// node id body (a `POST` with the cluster token).
pub const REMOVE_PATH: &str = "/__strand/raft/remove";

/// One group as one node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupView {
    /// The group's index.
    pub group: usize,
    /// The voters of the membership this node holds (while a change of
    /// voters is half done: the old ones and the new ones).
    pub voters: Vec<NodeId>,
    /// While a change of voters is half done (a joint configuration):
    /// the old voters, then the new ones; the group needs a majority of
    /// each to elect a leader or commit. Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joint: Vec<Vec<NodeId>>,
    /// The learners of that membership (non-voting replicas).
    pub learners: Vec<NodeId>,
    /// The leader this node knows of, if any.
    pub leader: Option<NodeId>,
    /// The term this node is in.
    pub term: u64,
    /// The last log index this node applied.
    pub applied_index: Option<u64>,
    /// The last log index this node holds.
    pub last_log_index: Option<u64>,
    /// On the leader: the last log index each member (this node included)
    /// is known to hold; empty elsewhere.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub matched: BTreeMap<NodeId, Option<u64>>,
    /// The log index of the entry of the membership this node holds
    /// (`None`: it holds none, or it is an older node that does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membership_index: Option<u64>,
}

/// What one node knows of its groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeView {
    /// The node's id.
    pub node: NodeId,
    /// Whether it is draining (handing off every leadership, taking none).
    #[serde(default)]
    pub draining: bool,
    /// Whether it learned that the cluster removed it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
    /// Whether it is leaving the cluster (`strand cluster remove`): the
    /// groups' leaders plan their voters without it, so its votes move
    /// before it leaves group 0.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leaving: bool,
    /// Its `--replication-factor` (every member should have the same),
    /// when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_factor: Option<usize>,
    /// The leadership it is handing off now, if any.
    #[serde(default)]
    pub moves: Vec<MoveStatus>,
    /// Its groups, in group order.
    pub groups: Vec<GroupView>,
}

/// Whether a member is serving, as the node that answered sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum NodeState {
    /// It answered.
    Up,
    /// It answered, and is draining: handing off every leadership it
    /// holds and taking none.
    Draining,
    /// It did not answer (stopped, unreachable, or refusing the token).
    Down,
    /// It is no longer a member: the cluster's membership (group 0's)
    /// does not hold it (`strand cluster remove`, or it stayed
    /// unreachable past the dead-node timeout). It serves no requests;
    /// it comes back only with an empty data directory and `--join`.
    Removed,
}

/// One member of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The node's id.
    pub id: NodeId,
    /// Where the answering node reaches it (its `--peer` entry), when
    /// known.
    pub url: Option<String>,
    /// `up`, `draining`, `down` or `removed`.
    pub state: NodeState,
    /// Why it is `down`: what asking it for its view ended with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One replica of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaStatus {
    /// The node holding it.
    pub node: NodeId,
    /// The last log index it applied (`null` when it did not answer).
    pub applied_index: Option<u64>,
    /// How many log entries it lacks behind the leader's last (`null`
    /// without a leader, or when neither the leader nor the replica
    /// said).
    pub lag: Option<u64>,
}

/// One group of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStatusView {
    /// The group's index.
    pub group: usize,
    /// Its voters (while a change of voters is half done: the old ones
    /// and the new ones).
    pub voters: Vec<NodeId>,
    /// While a change of voters is half done: the old voters, then the
    /// new ones, each a set the group needs a majority of (a member lost
    /// now may leave the group without one). Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joint: Vec<Vec<NodeId>>,
    /// Its learners.
    pub learners: Vec<NodeId>,
    /// Its leader, when the answering members agree on one in the latest
    /// term they know.
    pub leader: Option<NodeId>,
    /// The latest term a member reported.
    pub term: u64,
    /// Each voter, then each learner.
    pub replicas: Vec<ReplicaStatus>,
}

/// A change of placement under way: a leadership a node hands off, a
/// member added to a group as a learner, or a group's voters changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveStatus {
    /// The group it moves.
    pub group: usize,
    /// What moves: `leader` (a hand-off), `learner` (a member starts
    /// following the group) or `voter` (a vote moves from one member to
    /// another, or a voter is added or dropped).
    pub kind: String,
    /// The node it leaves, if any.
    pub from: Option<NodeId>,
    /// The node it goes to, if any.
    pub to: Option<NodeId>,
}

/// The cluster as one node put it together from every member's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// The node that answered.
    pub node: NodeId,
    /// Every member, by id.
    pub nodes: Vec<NodeStatus>,
    /// Every group, in group order.
    pub groups: Vec<GroupStatusView>,
    /// The changes of placement under way.
    pub moves: Vec<MoveStatus>,
}

/// Asks member `id`, reached at `addr`, for its view ([`VIEW_PATH`],
/// within `timeout`); an answer that is not a view, or the view of
/// another node, is an error.
pub(crate) async fn ask_view(
    http: &crate::http::Http,
    (id, addr): (NodeId, &str),
    token: Option<&str>,
    timeout: std::time::Duration,
) -> Result<NodeView, String> {
    let body = http
        .post(addr, VIEW_PATH, Vec::new(), token, timeout)
        .await
        .map_err(|e| e.to_string())?;
    let view =
        serde_json::from_slice::<NodeView>(&body).map_err(|e| format!("not a node's view: {e}"))?;
    if view.node == id {
        Ok(view)
    } else {
        Err(format!("answered as node {}", view.node))
    }
}

impl ClusterStatus {
    /// Puts the status together: `me` is the answering node, `urls` its
    /// address of each member (its `--peer` list; its own entry may be
    /// the only one), `views` what each member answered (`me`'s own view
    /// among them), or why it did not.
    ///
    /// A group's membership and leader come from the view of the latest
    /// term (the leader's own, when it answered); a replica's applied
    /// index from its own view; its lag from the leader's matched index,
    /// else from the difference of the two last log indexes.
    #[must_use]
    pub fn assemble(
        me: NodeId,
        urls: &BTreeMap<NodeId, String>,
        views: &[(NodeId, Result<NodeView, String>)],
    ) -> Self {
        let answered: BTreeMap<NodeId, &NodeView> = views
            .iter()
            .filter_map(|(id, v)| v.as_ref().ok().map(|v| (*id, v)))
            .collect();
        let group_count = answered.values().map(|v| v.groups.len()).max().unwrap_or(0);
        let mut members: BTreeSet<NodeId> = urls.keys().copied().collect();
        members.insert(me);
        members.extend(views.iter().map(|(id, _)| *id));
        let groups: Vec<GroupStatusView> = (0..group_count)
            .map(|group| {
                let status = group_status(group, &answered);
                members.extend(status.voters.iter().chain(&status.learners).copied());
                status
            })
            .collect();
        // The cluster's membership is group 0's.
        let registry: Option<BTreeSet<NodeId>> = groups
            .first()
            .filter(|g| !g.voters.is_empty())
            .map(|g| g.voters.iter().chain(&g.learners).copied().collect());
        let nodes = members
            .into_iter()
            .map(|id| {
                let answer = views.iter().find(|(v, _)| *v == id).map(|(_, a)| a);
                let gone = registry.as_ref().is_some_and(|r| !r.contains(&id));
                let (state, error) = match answer {
                    Some(Ok(view)) if view.removed || gone => (NodeState::Removed, None),
                    _ if gone => (NodeState::Removed, None),
                    Some(Ok(view)) if view.draining => (NodeState::Draining, None),
                    Some(Ok(_)) => (NodeState::Up, None),
                    Some(Err(e)) => (NodeState::Down, Some(e.clone())),
                    None => (NodeState::Down, Some("not asked".to_owned())),
                };
                NodeStatus {
                    id,
                    url: urls.get(&id).cloned(),
                    state,
                    error,
                }
            })
            .collect();
        let moves = answered.values().flat_map(|v| v.moves.clone()).collect();
        Self {
            node: me,
            nodes,
            groups,
            moves,
        }
    }
}

/// Group `group` from the answering members' views.
fn group_status(group: usize, answered: &BTreeMap<NodeId, &NodeView>) -> GroupStatusView {
    let seen: Vec<(NodeId, &GroupView)> = answered
        .iter()
        .filter_map(|(id, v)| v.groups.iter().find(|g| g.group == group).map(|g| (*id, g)))
        .collect();
    let term = seen.iter().map(|(_, g)| g.term).max().unwrap_or(0);
    // The leader of the latest term, as the members in it say; the
    // leader's own view is the one that knows the membership best.
    let latest: Vec<&(NodeId, &GroupView)> = seen.iter().filter(|(_, g)| g.term == term).collect();
    let leader = latest.iter().find_map(|(_, g)| g.leader);
    let leaders_view = leader.and_then(|l| latest.iter().find(|(id, _)| *id == l).map(|(_, g)| *g));
    let basis = leaders_view.or_else(|| latest.first().map(|(_, g)| *g));
    let voters = basis.map(|g| g.voters.clone()).unwrap_or_default();
    let joint = basis.map(|g| g.joint.clone()).unwrap_or_default();
    let learners = basis.map(|g| g.learners.clone()).unwrap_or_default();
    let leader_last = leaders_view.and_then(|g| g.last_log_index);
    let replicas = voters
        .iter()
        .chain(&learners)
        .map(|&node| {
            let own = seen.iter().find(|(id, _)| *id == node).map(|(_, g)| *g);
            let matched = leaders_view.and_then(|g| g.matched.get(&node).copied());
            let lag = match (leaders_view, matched) {
                (Some(_), Some(m)) => Some(behind(leader_last, m)),
                (Some(_), None) => own.map(|g| behind(leader_last, g.last_log_index)),
                (None, _) => None,
            };
            ReplicaStatus {
                node,
                applied_index: own.and_then(|g| g.applied_index),
                lag,
            }
        })
        .collect();
    GroupStatusView {
        group,
        voters,
        joint,
        learners,
        leader,
        term,
        replicas,
    }
}

/// Entries from `have` up to `last`.
fn behind(last: Option<u64>, have: Option<u64>) -> u64 {
    last.unwrap_or(0).saturating_sub(have.unwrap_or(0))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn view(node: NodeId, term: u64, leader: Option<NodeId>, last: u64) -> GroupView {
        GroupView {
            group: 0,
            voters: vec![1, 2, 3],
            joint: Vec::new(),
            learners: Vec::new(),
            leader,
            term,
            applied_index: Some(last),
            last_log_index: Some(last),
            membership_index: None,
            matched: if leader == Some(node) {
                [(1, Some(last)), (2, Some(last - 2)), (3, None)]
                    .into_iter()
                    .collect()
            } else {
                BTreeMap::new()
            },
        }
    }

    fn urls() -> BTreeMap<NodeId, String> {
        (1..=3)
            .map(|id| (id, format!("http://127.0.0.1:700{id}")))
            .collect()
    }

    #[test]
    fn a_cluster_with_a_member_down() {
        let views = vec![
            (
                1,
                Ok(NodeView {
                    node: 1,
                    draining: false,
                    removed: false,
                    leaving: false,
                    replication_factor: None,
                    moves: Vec::new(),
                    groups: vec![view(1, 4, Some(1), 40)],
                }),
            ),
            (
                2,
                Ok(NodeView {
                    node: 2,
                    draining: false,
                    removed: false,
                    leaving: false,
                    replication_factor: None,
                    moves: Vec::new(),
                    groups: vec![view(2, 4, Some(1), 38)],
                }),
            ),
            (3, Err("connection refused".to_owned())),
        ];
        let status = ClusterStatus::assemble(2, &urls(), &views);
        insta::assert_json_snapshot!(status);
    }

    #[test]
    fn the_latest_term_decides_the_leader() {
        // Node 3 was deposed (term 2) and still names itself; node 2 is
        // the leader of term 5, and its membership is the one shown.
        let mut stale = view(3, 2, Some(3), 10);
        stale.voters = vec![3];
        let mut fresh = view(2, 5, Some(2), 12);
        fresh.voters = vec![1, 2, 3];
        // Half way from {2, 3} to {1, 2, 3}.
        fresh.joint = vec![vec![2, 3], vec![1, 2, 3]];
        let views = vec![
            (
                2,
                Ok(NodeView {
                    node: 2,
                    draining: false,
                    removed: false,
                    leaving: false,
                    replication_factor: None,
                    moves: Vec::new(),
                    groups: vec![fresh],
                }),
            ),
            (
                3,
                Ok(NodeView {
                    node: 3,
                    draining: true,
                    removed: false,
                    leaving: false,
                    replication_factor: None,
                    moves: Vec::new(),
                    groups: vec![stale],
                }),
            ),
        ];
        let status = ClusterStatus::assemble(3, &urls(), &views);
        let g = &status.groups[0];
        assert_eq!(g.leader, Some(2));
        assert_eq!(g.term, 5);
        assert_eq!(g.voters, vec![1, 2, 3]);
        assert_eq!(g.joint, vec![vec![2, 3], vec![1, 2, 3]]);
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(
            json["groups"][0]["joint"],
            serde_json::json!([[2, 3], [1, 2, 3]])
        );
        // Node 1 neither answered nor was asked: down, no applied index;
        // its lag comes from the leader's matched index (all of 12).
        assert_eq!(status.nodes[0].state, NodeState::Down);
        assert_eq!(status.nodes[0].error.as_deref(), Some("not asked"));
        assert_eq!(g.replicas[0].applied_index, None);
        assert_eq!(g.replicas[0].lag, Some(0));
        // Node 3's applied index is its own (of its old term); the leader
        // has matched nothing of it yet.
        assert_eq!(g.replicas[2].applied_index, Some(10));
        assert_eq!(g.replicas[2].lag, Some(12));
        // Node 3 answered that it is draining.
        assert_eq!(status.nodes[2].state, NodeState::Draining);
    }

    #[test]
    fn no_leader_no_lag() {
        let views = vec![(
            1,
            Ok(NodeView {
                node: 1,
                draining: false,
                removed: false,
                leaving: false,
                replication_factor: None,
                moves: Vec::new(),
                groups: vec![view(1, 3, None, 7)],
            }),
        )];
        let status = ClusterStatus::assemble(1, &BTreeMap::new(), &views);
        assert_eq!(status.nodes.len(), 3, "the voters are members: {status:?}");
        assert_eq!(status.nodes[0].url, None);
        assert!(status.groups[0].replicas.iter().all(|r| r.lag.is_none()));
        assert_eq!(status.groups[0].replicas[0].applied_index, Some(7));
    }

    #[test]
    fn a_node_out_of_group_zero_is_removed() {
        let mut group = view(1, 5, Some(1), 9);
        group.voters = vec![1, 2];
        let one = NodeView {
            node: 1,
            draining: false,
            removed: false,
            leaving: false,
            replication_factor: None,
            moves: Vec::new(),
            groups: vec![group],
        };
        let mut stale = view(3, 4, None, 7);
        stale.voters = vec![1, 2, 3];
        let three = NodeView {
            node: 3,
            draining: false,
            removed: true,
            leaving: false,
            replication_factor: None,
            moves: Vec::new(),
            groups: vec![stale],
        };
        let views = vec![(1, Ok(one)), (2, Err("refused".to_owned())), (3, Ok(three))];
        let status = ClusterStatus::assemble(1, &urls(), &views);
        let states: Vec<_> = status.nodes.iter().map(|n| (n.id, n.state)).collect();
        assert_eq!(
            states,
            [
                (1, NodeState::Up),
                (2, NodeState::Down),
                (3, NodeState::Removed)
            ]
        );
        assert_eq!(status.groups[0].voters, [1, 2]);
        let json = serde_json::to_value(&status.nodes[2]).unwrap();
        assert_eq!(json["state"], "removed");
        // What a node answers its peers under VIEW_PATH.
        let mut answer = views[2].1.clone().unwrap();
        answer.replication_factor = Some(3);
        insta::assert_json_snapshot!("node_view_removed", answer);
    }

    /// What a member posts under DRAIN_PATH: a bare boolean (what every
    /// earlier strand sends) or the leaving mark, and a node's view that
    /// shows it leaving.
    #[test]
    fn drain_requests_and_a_leaving_view_keep_their_shape() {
        let forms = [
            DrainRequest::Draining(true),
            DrainRequest::Draining(false),
            DrainRequest::Leaving { leaving: true },
            DrainRequest::Leaving { leaving: false },
        ];
        let json: Vec<String> = forms
            .iter()
            .map(|f| serde_json::to_string(f).unwrap())
            .collect();
        insta::assert_json_snapshot!("drain_requests", json);
        for (form, text) in forms.iter().zip(&json) {
            assert_eq!(serde_json::from_str::<DrainRequest>(text).unwrap(), *form);
        }
        assert!(serde_json::from_str::<DrainRequest>("\"leaving\"").is_err());
        let leaving = NodeView {
            node: 4,
            draining: true,
            removed: false,
            leaving: true,
            replication_factor: Some(3),
            moves: Vec::new(),
            groups: Vec::new(),
        };
        insta::assert_json_snapshot!("node_view_leaving", leaving);
    }
}
