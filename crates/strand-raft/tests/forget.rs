//! A member that forgot a group refuses its vote in it: with its log gone
//! it would grant any candidate its vote, among them a stale member of a
//! configuration that still counted it.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use openraft::Vote;
use openraft::error::RaftError;
use openraft::raft::{VoteRequest, VoteResponse};
use strand_engine::{EngineConfig, ManualClock};
use strand_raft::{DurableOptions, NodeId, RaftMessage, group_dir, start_durable};

fn two_groups() -> EngineConfig {
    EngineConfig {
        groups: 2,
        ..EngineConfig::default()
    }
}

/// Leaves the marker a forget leaves in group `group`'s directory.
fn mark_forgotten(dir: &std::path::Path, group: usize) {
    std::fs::create_dir_all(group_dir(dir, group)).unwrap();
    std::fs::write(group_dir(dir, group).join("forgotten"), b"").unwrap();
}

/// Asks node `node`'s group `group` for its vote as node 3 in term 7.
async fn ask_vote(node: &strand_raft::RaftNode, group: usize) -> VoteResponse<NodeId> {
    let request = VoteRequest::new(Vote::new(7, 3), None);
    let body = rmp_serde::to_vec_named(&request).unwrap();
    let answer = node.handle(group, RaftMessage::Vote, &body).await.unwrap();
    let answer: Result<VoteResponse<NodeId>, RaftError<NodeId>> =
        rmp_serde::from_slice(&answer).unwrap();
    answer.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_group_refuses_its_vote_and_the_others_grant_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Group 1 was forgotten before this start (the marker a forget
    // leaves); group 0 was not.
    mark_forgotten(dir, 1);
    // Three members on loopback ports nothing listens on: node 1 would
    // initialize the groups, so node 2's are empty.
    let peers = (1..=3u64)
        .map(|id| (id, format!("http://127.0.0.1:{}", 9 + id)))
        .collect();
    let options = DurableOptions {
        node_id: 2,
        peers,
        ..DurableOptions::new(dir)
    };
    let node = start_durable(two_groups(), Arc::new(ManualClock::new(1_000)), &options)
        .await
        .unwrap();
    let refused = ask_vote(&node, 1).await;
    assert!(!refused.vote_granted, "{refused:?}");
    let granted = ask_vote(&node, 0).await;
    assert!(granted.vote_granted, "{granted:?}");
    // The refusal is not a vote: asked again, group 1 still refuses, and
    // the marker stays until its log names this node a voter.
    assert!(!ask_vote(&node, 1).await.vote_granted);
    assert!(group_dir(dir, 1).join("forgotten").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_group_is_refused_outside_a_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    mark_forgotten(dir, 1);
    let error = start_durable(
        two_groups(),
        Arc::new(ManualClock::new(1_000)),
        &DurableOptions::new(dir),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("group-1") && error.contains("forgot group 1"),
        "{error}"
    );
}
