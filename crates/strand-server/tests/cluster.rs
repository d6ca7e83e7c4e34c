//! A 3-node loopback cluster of `strand-server` processes (`--node-id`,
//! `--peer`): writes through any node (a follower forwards to the leader),
//! kill -9 of the leader during writes, a new leader within seconds, no
//! acknowledged write lost or duplicated, and the old leader catching up
//! after its restart.
#![allow(clippy::unwrap_used)]

mod process;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use process::{Server, free_port, parse_offset, request, start_args};

fn node_args(dir: &Path, id: u64, ports: &[u16]) -> Vec<String> {
    let mut args = process::cluster_node_args(dir, id, ports);
    // Small chunks, so that a snapshot install takes many RPCs.
    args.extend([
        "--snapshot-every".to_owned(),
        "50".to_owned(),
        "--snapshot-chunk-bytes".to_owned(),
        "256".to_owned(),
    ]);
    args
}

/// Group 0's snapshot counters on the node at `addr`.
async fn snapshot_stats(addr: SocketAddr) -> serde_json::Value {
    let r = request(addr, "GET", "/__strand/health", &[], b"")
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["groups"][0]["snapshot"].clone()
}

/// The leader every node of `addrs` agrees on, once they do.
async fn agreed_leader(addrs: &[SocketAddr], deadline: Duration) -> Option<u64> {
    let until = Instant::now() + deadline;
    while Instant::now() < until {
        let mut leaders = Vec::new();
        for addr in addrs {
            if let Ok(r) = request(*addr, "GET", "/__strand/health", &[], b"").await
                && r.status == 200
            {
                let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                leaders.push(v["groups"][0]["leader"].as_u64());
            } else {
                leaders.push(None);
            }
        }
        if let Some(Some(first)) = leaders.first()
            && leaders.iter().all(|l| *l == Some(*first))
        {
            return Some(*first);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

fn token(seq: u64) -> Vec<u8> {
    format!("w-{seq};").into_bytes()
}

/// Appends `seq` through `addr`, retrying while the cluster has no leader
/// (503) or the node is unreachable; returns the acknowledged next offset.
async fn append(addr: SocketAddr, seq: u64) -> u64 {
    for _ in 0..1000 {
        let reply = request(
            addr,
            "POST",
            "/v1/stream/c",
            &[
                ("Content-Type", "text/plain".to_owned()),
                ("Producer-Id", "w".to_owned()),
                ("Producer-Epoch", "0".to_owned()),
                ("Producer-Seq", seq.to_string()),
            ],
            &token(seq),
        )
        .await;
        match reply {
            Ok(r) if r.status == 200 || r.status == 204 => {
                return parse_offset(r.header("stream-next-offset").unwrap());
            }
            Ok(r) if r.status == 503 => {}
            Ok(r) => panic!(
                "seq {seq}: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("seq {seq}: no answer for 20 s");
}

/// Polls `addr` until the stream holds exactly `expected` (followers apply
/// what the leader committed a little later).
async fn converges(addr: SocketAddr, expected: &[u8]) -> bool {
    for _ in 0..600 {
        if let Ok(r) = request(addr, "GET", "/v1/stream/c?offset=-1", &[], b"").await
            && r.status == 200
            && r.body == expected
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_survive_losing_the_leader() {
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes: Vec<Option<Server>> = (1..=3)
        .map(|id| Some(start_args(&node_args(tmp.path(), id, &ports))))
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.as_ref().unwrap().addr).collect();
    let leader = agreed_leader(&addrs, Duration::from_secs(60))
        .await
        .expect("the cluster elects a leader");

    // Create and write through a follower: it forwards to the leader.
    let follower = (1..=3u64).find(|id| *id != leader).unwrap();
    let via = addrs[(follower - 1) as usize];
    let r = request(
        via,
        "PUT",
        "/v1/stream/c",
        &[("Content-Type", "text/plain".to_owned())],
        b"",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let mut acked: Vec<(u64, u64)> = Vec::new();
    for seq in 0..150 {
        acked.push((seq, append(via, seq).await));
    }
    // Read-your-writes on the follower: a forwarded write is answered once
    // the follower has applied it, so it reads its own writes at once.
    let r = request(via, "GET", "/v1/stream/c?offset=-1", &[], b"")
        .await
        .unwrap();
    let own: Vec<u8> = (0..150).flat_map(token).collect();
    assert_eq!(r.body, own, "the follower reads its own forwarded writes");

    // kill -9 the leader; keep writing through a survivor.
    nodes[(leader - 1) as usize].take().unwrap().kill9();
    let killed = Instant::now();
    let survivors: Vec<SocketAddr> = (1..=3u64)
        .filter(|id| *id != leader)
        .map(|id| addrs[(id - 1) as usize])
        .collect();
    let first = append(survivors[0], 150).await;
    let failover = killed.elapsed();
    acked.push((150, first));
    for seq in 151..300 {
        acked.push((seq, append(survivors[1], seq).await));
    }
    let new_leader = agreed_leader(&survivors, Duration::from_secs(30))
        .await
        .expect("the survivors agree on a new leader");
    assert_ne!(new_leader, leader);

    // Every acknowledged append once, at its acknowledged offset.
    let mut expected = Vec::new();
    for (seq, next) in &acked {
        expected.extend_from_slice(&token(*seq));
        assert_eq!(*next, expected.len() as u64, "seq {seq} moved");
    }
    for addr in &survivors {
        assert!(converges(*addr, &expected).await, "{addr} holds every ack");
    }

    // The old leader restarts and catches up: the survivors snapshot every
    // 50 entries and keep 50, so its log (about 150 entries) is behind
    // their purge point and it installs a snapshot.
    let restarted = start_args(&node_args(tmp.path(), leader, &ports));
    assert!(
        converges(restarted.addr, &expected).await,
        "the old leader caught up"
    );
    // Through a snapshot sent in chunks of 256 B: installed from the
    // received file, which is now the node's current snapshot.
    let stats = snapshot_stats(restarted.addr).await;
    assert!(stats["installed"].as_u64().unwrap() >= 1, "{stats}");
    let snapshot_bytes = stats["bytes"].as_u64().unwrap();
    assert!(snapshot_bytes > 4 * 256, "{stats}");
    let group = tmp.path().join(format!("node-{leader}")).join("group-0");
    let files: Vec<String> = std::fs::read_dir(&group)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("snapshot"))
        .collect();
    let data: Vec<&String> = files.iter().filter(|n| n.ends_with(".data")).collect();
    assert_eq!(data.len(), 1, "{files:?}");
    assert_eq!(
        std::fs::metadata(group.join(data[0])).unwrap().len(),
        snapshot_bytes
    );
    assert!(
        files
            .iter()
            .all(|n| !n.ends_with(".recv") && !n.ends_with(".tmp")),
        "{files:?}"
    );
    eprintln!(
        "cluster: {} acknowledged appends, lost 0, duplicates 0; leader {leader} killed, first write acknowledged {failover:?} later by the survivors (new leader {new_leader})",
        acked.len()
    );
    restarted.kill9();
    for node in nodes.into_iter().flatten() {
        node.kill9();
    }
}
