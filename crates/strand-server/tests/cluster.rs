//! A 3-node loopback cluster of `strand-server` processes (`--node-id`,
//! `--peer`): writes through any node (a follower forwards to the leader),
//! kill -9 of the leader during writes, a new leader within seconds, no
//! acknowledged write lost or duplicated, and the old leader catching up
//! after its restart.
#![allow(clippy::unwrap_used)]

use crate::{common, process};

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::eventually;
use process::{Server, free_port, parse_offset, request, start_args};

fn node_args(dir: &Path, id: u64, ports: &[u16]) -> Vec<String> {
    let mut args = process::cluster_node_args(dir, id, ports);
    // Small chunks, so that a snapshot install takes many RPCs.
    args.extend([
        "--snapshot-every".to_owned(),
        "50".to_owned(),
        "--snapshot-chunk-bytes".to_owned(),
        "256".to_owned(),
        // The operator routes (`GET /__strand/cluster`).
        "--admin-listen".to_owned(),
        "127.0.0.1:0".to_owned(),
    ]);
    args
}

/// `GET /__strand/cluster` on the node at `addr` (its admin listener),
/// once `ready` accepts it; `what` names the wait.
pub(crate) async fn cluster_status(
    addr: SocketAddr,
    what: &str,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let admin = process::admin_addr(addr);
    // The last status seen, for the message when the wait fails.
    let last = std::sync::Mutex::new(String::new());
    let what = format!("{what} (the last status seen follows)");
    let found =
        std::panic::AssertUnwindSafe(eventually(&what, Duration::from_secs(30), || async {
            let r = request(admin, "GET", "/__strand/cluster", &[], b"")
                .await
                .ok()?;
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            if ready(&v) {
                return Some(v);
            }
            *last.lock().unwrap() = v.to_string();
            None
        }));
    match futures_util::FutureExt::catch_unwind(found).await {
        Ok(v) => v,
        Err(panic) => {
            eprintln!("last cluster status: {}", last.lock().unwrap());
            std::panic::resume_unwind(panic)
        }
    }
}

/// `POST path` on `admin` (an operator route), which must answer 204.
pub(crate) async fn operate(admin: SocketAddr, path: &str) {
    let r = request(admin, "POST", path, &[], b"").await.unwrap();
    assert_eq!(
        r.status,
        204,
        "{path}: {}",
        String::from_utf8_lossy(&r.body)
    );
}

/// How many learners group `g` of a settled placement over `members`
/// members has: group 0 (the cluster's own, followed by every member)
/// the members without a vote, every other group none (only its voters
/// hold it).
pub(crate) fn settled_learners(g: &serde_json::Value, members: usize) -> usize {
    if g["group"] == 0 {
        members.saturating_sub(3)
    } else {
        0
    }
}

/// The `state` of node `id` in a cluster status.
pub(crate) fn node_state(status: &serde_json::Value, id: u64) -> &str {
    status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .and_then(|n| n["state"].as_str())
        .unwrap_or("missing")
}

/// Group 0 as the node at `addr` reports it under `/__strand/health`.
async fn group0(addr: SocketAddr) -> serde_json::Value {
    let r = request(addr, "GET", "/__strand/health", &[], b"")
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["groups"][0].clone()
}

/// Group 0's snapshot counters on the node at `addr`.
async fn snapshot_stats(addr: SocketAddr) -> serde_json::Value {
    group0(addr).await["snapshot"].clone()
}

/// The leader every node of `addrs` agrees on, once they do (`what`
/// names the wait).
async fn agreed_leader(addrs: &[SocketAddr], deadline: Duration, what: &str) -> u64 {
    eventually(what, deadline, || async {
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
        match leaders.first() {
            Some(Some(first)) if leaders.iter().all(|l| *l == Some(*first)) => Some(*first),
            _ => None,
        }
    })
    .await
}

fn token(seq: u64) -> Vec<u8> {
    format!("w-{seq};").into_bytes()
}

/// Appends `seq` through `addr`, retrying while the cluster has no leader
/// (503) or the node is unreachable; returns the acknowledged next offset.
async fn append(addr: SocketAddr, seq: u64) -> u64 {
    produce_as(addr, "c", "w", seq, &token(seq)).await
}

/// Polls `addr` until the stream holds exactly `expected` (followers apply
/// what the leader committed a little later); `what` names the wait.
async fn converges(addr: SocketAddr, expected: &[u8], what: &str) {
    eventually(what, Duration::from_secs(60), || async {
        let r = request(addr, "GET", "/v1/stream/c?offset=-1", &[], b"")
            .await
            .ok()?;
        (r.status == 200 && r.body == expected).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_survive_losing_the_leader() {
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes: Vec<Option<Server>> = (1..=3)
        .map(|id| Some(start_args(&node_args(tmp.path(), id, &ports))))
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.as_ref().unwrap().addr).collect();
    let leader = agreed_leader(
        &addrs,
        Duration::from_secs(60),
        "the cluster elects a leader",
    )
    .await;

    // Create and write through a follower: it forwards to the leader.
    let follower = (1..=3u64).find(|id| *id != leader).unwrap();
    let via = addrs[(follower - 1) as usize];

    // The cluster's status, as the follower puts it together: three
    // members up at their --peer addresses, the group's three voters and
    // the leader every node agreed on, each replica's applied index.
    let status = cluster_status(via, "every member answers the follower", |v| {
        (1..=3).all(|id| node_state(v, id) == "up")
    })
    .await;
    assert_eq!(status["node"], follower, "{status}");
    for (i, port) in ports.iter().enumerate() {
        assert_eq!(status["nodes"][i]["id"], i as u64 + 1, "{status}");
        assert_eq!(
            status["nodes"][i]["url"],
            format!("http://127.0.0.1:{port}"),
            "{status}"
        );
    }
    let group = &status["groups"][0];
    assert_eq!(group["voters"], serde_json::json!([1, 2, 3]), "{status}");
    assert_eq!(group["learners"], serde_json::json!([]), "{status}");
    assert_eq!(group["leader"], leader, "{status}");
    let replicas = group["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 3, "{status}");
    assert!(
        replicas.iter().all(|r| r["applied_index"].is_u64()),
        "{status}"
    );
    assert_eq!(status["moves"], serde_json::json!([]), "{status}");
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
    let old_last = group0(addrs[(leader - 1) as usize]).await["last_log_index"]
        .as_u64()
        .unwrap();
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
    let new_leader = agreed_leader(
        &survivors,
        Duration::from_secs(30),
        "the survivors agree on a new leader",
    )
    .await;
    assert_ne!(new_leader, leader);
    // A survivor reports the killed node down and the new leader.
    let status = cluster_status(survivors[0], "the killed leader shows down", |v| {
        node_state(v, leader) == "down" && v["groups"][0]["leader"] == new_leader
    })
    .await;
    let gone = status["groups"][0]["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["node"] == leader)
        .unwrap();
    assert!(gone["applied_index"].is_null(), "{status}");
    assert!(gone["lag"].as_u64().unwrap() > 0, "{status}");

    // Every acknowledged append once, at its acknowledged offset.
    let mut expected = Vec::new();
    for (seq, next) in &acked {
        expected.extend_from_slice(&token(*seq));
        assert_eq!(*next, expected.len() as u64, "seq {seq} moved");
    }
    for addr in &survivors {
        converges(*addr, &expected, &format!("{addr} holds every ack")).await;
    }

    // The old leader restarts and catches up: the survivors snapshot every
    // 50 entries and keep 50, so once the new leader's log is purged past
    // the old leader's last entry (snapshots are built in the background:
    // waited for), the old leader installs a snapshot.
    let new_leader_addr = addrs[(new_leader - 1) as usize];
    eventually(
        "the new leader purges its log past the old leader's last entry",
        Duration::from_secs(30),
        || async {
            let purged = group0(new_leader_addr).await["purged_index"].as_u64()?;
            (purged > old_last).then_some(())
        },
    )
    .await;
    let restarted = start_args(&node_args(tmp.path(), leader, &ports));
    converges(restarted.addr, &expected, "the old leader catches up").await;
    // Up again, and (asked on the restarted node) caught up with the
    // leader once nothing is written.
    cluster_status(
        restarted.addr,
        "the restarted node shows up, caught up",
        |v| {
            (1..=3).all(|id| node_state(v, id) == "up")
                && v["groups"][0]["replicas"]
                    .as_array()
                    .is_some_and(|r| r.iter().all(|r| r["lag"] == 0))
        },
    )
    .await;
    // Through a snapshot sent in chunks of 256 B: installed from the
    // received file, which is now the node's current snapshot. A later
    // snapshot may still be on its way (a `.recv` file while it arrives),
    // so the directory is checked once it is at rest: one data file, of
    // the size the node reports, and nothing unfinished.
    let group = tmp.path().join(format!("node-{leader}")).join("group-0");
    let (stats, files) = eventually(
        "the restarted node's snapshot directory at rest",
        Duration::from_secs(30),
        || async {
            let stats = snapshot_stats(restarted.addr).await;
            let files: Vec<String> = std::fs::read_dir(&group)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("snapshot"))
                .collect();
            let data: Vec<&String> = files.iter().filter(|n| n.ends_with(".data")).collect();
            let at_rest = data.len() == 1
                && files
                    .iter()
                    .all(|n| !n.ends_with(".recv") && !n.ends_with(".tmp"))
                && std::fs::metadata(group.join(data[0])).map(|m| m.len()).ok()
                    == stats["bytes"].as_u64();
            at_rest.then_some((stats, files))
        },
    )
    .await;
    assert!(stats["installed"].as_u64().unwrap() >= 1, "{stats}");
    let snapshot_bytes = stats["bytes"].as_u64().unwrap();
    assert!(snapshot_bytes > 4 * 256, "{stats}");
    let data: Vec<&String> = files.iter().filter(|n| n.ends_with(".data")).collect();
    assert_eq!(data.len(), 1, "{files:?}");
    assert_eq!(
        std::fs::metadata(group.join(data[0])).unwrap().len(),
        snapshot_bytes,
        "{files:?} {stats}"
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

/// The arguments of node `id` of a cluster whose nodes run `groups` groups.
fn grouped_node_args(dir: &Path, id: u64, ports: &[u16], groups: usize) -> Vec<String> {
    let mut args = process::cluster_node_args(dir, id, ports);
    let at = args.iter().position(|a| a == "--groups").unwrap();
    args[at + 1] = groups.to_string();
    args
}

/// Waits until every node of `addrs` reports a leader for each group.
pub(crate) async fn all_ready(addrs: &[SocketAddr], deadline: Duration) {
    eventually("every group elects a leader", deadline, || async {
        let mut ready = 0;
        for addr in addrs {
            if let Ok(r) = request(*addr, "GET", "/__strand/health", &[], b"").await
                && r.status == 200
            {
                ready += 1;
            }
        }
        (ready == addrs.len()).then_some(())
    })
    .await;
}

/// The `network` counters of `GET /__strand/health` summed over `addrs`:
/// (messages sent, batches, messages in batches).
async fn network_totals(addrs: &[SocketAddr]) -> (u64, u64, u64) {
    let mut total = (0, 0, 0);
    for addr in addrs {
        let r = request(*addr, "GET", "/__strand/health", &[], b"")
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let n = &v["network"];
        total.0 += n["raft_messages_sent"].as_u64().unwrap();
        total.1 += n["raft_batches_sent"].as_u64().unwrap();
        total.2 += n["raft_batched_messages"].as_u64().unwrap();
    }
    total
}

/// One append to `path` through `addr`, retried while the group has no
/// leader (503) or the node does not answer.
async fn append_to(addr: SocketAddr, path: &str, body: &[u8]) {
    let what = format!("{path}: an append acknowledged");
    eventually(&what, Duration::from_secs(60), || async {
        match request(
            addr,
            "POST",
            path,
            &[("Content-Type", "text/plain".to_owned())],
            body,
        )
        .await
        {
            Ok(r) if r.status == 200 || r.status == 204 => Some(()),
            Ok(r) if r.status == 503 => None,
            Ok(r) => panic!("{path}: {} {}", r.status, String::from_utf8_lossy(&r.body)),
            Err(_) => None,
        }
    })
    .await;
}

/// With several groups, the Raft messages of every group to the same peer
/// go together in `/__strand/raft/batch` requests: under concurrent
/// writes to several groups a batch carries more than one message, and
/// every node ends up with every write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_groups_batch_their_raft_messages() {
    const STREAMS: usize = 8;
    const WRITES: usize = 25;
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let nodes: Vec<Server> = (1..=3)
        .map(|id| start_args(&grouped_node_args(tmp.path(), id, &ports, 4)))
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(60)).await;
    for s in 0..STREAMS {
        let r = request(
            addrs[s % 3],
            "PUT",
            &format!("/v1/stream/b{s}"),
            &[("Content-Type", "text/plain".to_owned())],
            b"",
        )
        .await
        .unwrap();
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    let before = network_totals(&addrs).await;
    let writers: Vec<_> = (0..STREAMS)
        .map(|s| {
            let addr = addrs[s % 3];
            tokio::spawn(async move {
                for w in 0..WRITES {
                    append_to(
                        addr,
                        &format!("/v1/stream/b{s}"),
                        format!("{w};").as_bytes(),
                    )
                    .await;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let after = network_totals(&addrs).await;
    let batches = after.1 - before.1;
    let batched = after.2 - before.2;
    assert!(after.0 > before.0, "raft messages were sent");
    assert!(batches > 0, "the messages went in batches");
    let per_batch = batched as f64 / batches as f64;
    eprintln!(
        "batching: {} messages, {batches} batches, {per_batch:.2} messages per batch",
        after.0 - before.0
    );
    assert!(per_batch > 1.0, "{per_batch} messages per batch");
    let expected: Vec<u8> = (0..WRITES)
        .flat_map(|w| format!("{w};").into_bytes())
        .collect();
    for s in 0..STREAMS {
        for addr in &addrs {
            let path = format!("/v1/stream/b{s}?offset=-1");
            eventually(
                &format!("{addr} holds every write of b{s}"),
                Duration::from_secs(30),
                || async {
                    let r = request(*addr, "GET", &path, &[], b"").await.unwrap();
                    (r.status == 200 && r.body == expected).then_some(())
                },
            )
            .await;
        }
    }
    for node in nodes {
        node.kill9();
    }
}

/// A follower that is down while the leader takes more bytes than the
/// leader's log cache holds ([`strand_raft::CACHE_BYTES`]) catches up
/// from the leader's log files once it is back: the entries it lacks are
/// read back from the segments and replicated, and no snapshot is built
/// or sent (the snapshot limits are far away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_log_cache_catches_up_from_the_log_files() {
    const BODY: usize = 64 << 10;
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let args = |id: u64| {
        let mut args = process::cluster_node_args(tmp.path(), id, &ports);
        args.extend(
            [
                "--snapshot-every",
                "1000000",
                "--snapshot-log-bytes",
                "1073741824",
            ]
            .map(str::to_owned),
        );
        args
    };
    let mut nodes: Vec<Option<Server>> = (1..=3).map(|id| Some(start_args(&args(id)))).collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.as_ref().unwrap().addr).collect();
    let leader = agreed_leader(
        &addrs,
        Duration::from_secs(60),
        "the cluster elects a leader",
    )
    .await;
    let via = addrs[(leader - 1) as usize];
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
    let follower = (1..=3u64).find(|id| *id != leader).unwrap();
    nodes[(follower - 1) as usize].take().unwrap().kill9();
    // Half as much again as the leader's cache, in 64 KiB appends.
    let appends = (strand_raft::CACHE_BYTES as usize * 3 / 2).div_ceil(BODY);
    let mut expected = Vec::with_capacity(appends * BODY);
    for i in 0..appends {
        let body = vec![b'a' + (i % 26) as u8; BODY];
        append_to(via, "/v1/stream/c", &body).await;
        expected.extend_from_slice(&body);
    }
    let back = start_args(&args(follower));
    converges(back.addr, &expected, "the follower catches up").await;
    for addr in [back.addr, via] {
        let stats = snapshot_stats(addr).await;
        assert_eq!(stats["built"].as_u64(), Some(0), "{addr}: {stats}");
        assert_eq!(stats["installed"].as_u64(), Some(0), "{addr}: {stats}");
    }
    back.kill9();
    for node in nodes.into_iter().flatten() {
        node.kill9();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_durable_node_is_a_cluster_of_one() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data").display().to_string();
    let node = start_args(
        &[
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            &data,
            "--groups",
            "2",
            "--admin-listen",
            "127.0.0.1:0",
        ]
        .map(str::to_owned),
    );
    let status = cluster_status(node.addr, "the node's groups have a leader", |v| {
        v["groups"]
            .as_array()
            .is_some_and(|g| g.len() == 2 && g.iter().all(|g| g["leader"] == 1))
    })
    .await;
    assert_eq!(
        status["nodes"],
        serde_json::json!([{"id": 1, "url": format!("http://{}", node.addr), "state": "up"}]),
        "{status}"
    );
    for g in status["groups"].as_array().unwrap() {
        assert_eq!(g["voters"], serde_json::json!([1]), "{status}");
        assert!(g["term"].as_u64().unwrap() >= 1, "{status}");
        assert_eq!(g["replicas"][0]["lag"], 0, "{status}");
        assert!(g["replicas"][0]["applied_index"].is_u64(), "{status}");
    }
    // The view a peer would ask for is behind the cluster token's gate,
    // on the client listener only.
    let r = request(node.addr, "POST", "/__strand/raft/view", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let view: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(view["node"], 1, "{view}");
    assert_eq!(view["groups"].as_array().unwrap().len(), 2, "{view}");
    node.kill9();
}

/// Leaderships per node in a cluster status (`GET /__strand/cluster`):
/// how many groups each listed node leads, by node id (ids need not be
/// 1 to N: after removals and joins they are not), and whether every
/// group has a leader among them.
pub(crate) fn leaderships(
    status: &serde_json::Value,
) -> (std::collections::BTreeMap<u64, usize>, bool) {
    let mut counts: std::collections::BTreeMap<u64, usize> = status["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_u64())
        .map(|id| (id, 0))
        .collect();
    let mut all_led = true;
    for g in status["groups"].as_array().unwrap() {
        match g["leader"].as_u64().and_then(|id| counts.get_mut(&id)) {
            Some(count) => *count += 1,
            None => all_led = false,
        }
    }
    (counts, all_led)
}

/// Appends `body` to `stream` through `addr` as producer `stream`'s
/// `seq` ([`produce_as`]).
async fn produce(addr: SocketAddr, stream: &str, seq: u64, body: &[u8]) -> u64 {
    produce_as(addr, stream, stream, seq, body).await
}

/// Appends `body` to `stream` through `addr` as `producer`'s `seq`,
/// retrying while a group has no leader or moves it (503) or the node is
/// unreachable; the acknowledged next offset.
async fn produce_as(addr: SocketAddr, stream: &str, producer: &str, seq: u64, body: &[u8]) -> u64 {
    let what = format!("{stream} seq {seq} acknowledged");
    eventually(&what, Duration::from_secs(60), || async {
        let reply = request(
            addr,
            "POST",
            &format!("/v1/stream/{stream}"),
            &[
                ("Content-Type", "text/plain".to_owned()),
                ("Producer-Id", producer.to_owned()),
                ("Producer-Epoch", "0".to_owned()),
                ("Producer-Seq", seq.to_string()),
            ],
            body,
        )
        .await;
        match reply {
            Ok(r) if r.status == 200 || r.status == 204 => {
                Some(parse_offset(r.header("stream-next-offset").unwrap()))
            }
            Ok(r) if r.status == 503 => None,
            Ok(r) => panic!(
                "{stream} seq {seq}: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ),
            Err(_) => None,
        }
    })
    .await
}

/// Groups of the balancing tests' nodes.
const BALANCED_GROUPS: usize = 6;

/// The arguments of node `id` of a balancing test's cluster: six groups,
/// an admin listener, a balancing round every 200 ms.
fn balanced_node_args(dir: &Path, id: u64, ports: &[u16]) -> Vec<String> {
    let mut args = grouped_node_args(dir, id, ports, BALANCED_GROUPS);
    args.extend(
        [
            "--admin-listen",
            "127.0.0.1:0",
            "--leader-balance-interval-ms",
            "200",
        ]
        .map(str::to_owned),
    );
    args
}

/// Starts a balancing test's three nodes (`balanced_node_args`) in
/// `dir` and waits until all are ready; the nodes and their addresses.
async fn start_balanced(dir: &Path) -> (Vec<Server>, Vec<SocketAddr>) {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let nodes: Vec<Server> = (1..=3)
        .map(|id| start_args(&balanced_node_args(dir, id, &ports)))
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(60)).await;
    (nodes, addrs)
}

/// Whether every group has a leader and the leaderships per node differ
/// by one at most.
fn spread(status: &serde_json::Value) -> bool {
    let (counts, all_led) = leaderships(status);
    all_led && counts.values().max().unwrap() - counts.values().min().unwrap() <= 1
}

/// Drains node 1 through the admin listener `admin` and waits until the
/// node at `at` reports it draining and every group led by another; the
/// status then.
async fn drain_node_1(admin: SocketAddr, at: SocketAddr) -> serde_json::Value {
    operate(admin, "/__strand/cluster/drain/1").await;
    cluster_status(at, "node 1 drains", |v| {
        let (counts, all_led) = leaderships(v);
        all_led && counts[&1] == 0 && node_state(v, 1) == "draining"
    })
    .await
}

/// Ends node 1's drain through `admin` and waits until the node at `at`
/// reports it up and leading again, with `balanced` holding.
async fn undrain_node_1(
    admin: SocketAddr,
    at: SocketAddr,
    balanced: impl Fn(&serde_json::Value) -> bool,
) {
    operate(admin, "/__strand/cluster/undrain/1").await;
    cluster_status(at, "node 1 leads again", |v| {
        balanced(v) && node_state(v, 1) == "up" && leaderships(v).0[&1] >= 1
    })
    .await;
}

/// The leadership hand-offs the nodes at `addrs` made, failed and the
/// longest time one held its group's proposals (µs), from their health.
async fn hand_offs(addrs: &[SocketAddr]) -> (u64, u64, u64) {
    let (mut moved, mut failed, mut held_us_max) = (0, 0, 0);
    for addr in addrs {
        let r = request(*addr, "GET", "/__strand/health", &[], b"")
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        moved += v["balance"]["moved"].as_u64().unwrap();
        failed += v["balance"]["failed"].as_u64().unwrap();
        held_us_max = held_us_max.max(v["balance"]["held_us_max"].as_u64().unwrap());
    }
    (moved, failed, held_us_max)
}

/// What one producer did: its stream, each acknowledged body with the
/// next offset it was acknowledged at, and the longest wait for one.
type Produced = (String, Vec<(String, u64)>, Duration);

/// A producer per stream (`p0`, `p1`, …), each appending through every
/// node in turn until stopped, retrying while a group has no leader.
pub(crate) struct Writers {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Produced>>,
    /// The longest wait for one acknowledgement since the last
    /// [`Writers::take_longest`], in microseconds.
    longest_us: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Writers {
    pub(crate) fn start(addrs: &[SocketAddr], streams: usize) -> Self {
        Self::start_as("p", addrs, streams)
    }

    /// [`Writers::start`] with streams named `{prefix}0`, `{prefix}1`, …;
    /// each stream's creation retried while the node answers 503.
    pub(crate) fn start_as(prefix: &str, addrs: &[SocketAddr], streams: usize) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let longest_us = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let tasks = (0..streams)
            .map(|s| {
                let addrs = addrs.to_vec();
                let stop = std::sync::Arc::clone(&stop);
                let longest_us = std::sync::Arc::clone(&longest_us);
                let stream = format!("{prefix}{s}");
                tokio::spawn(async move {
                    let created = format!("{stream} created");
                    eventually(&created, Duration::from_secs(60), || async {
                        let r = request(
                            addrs[s % addrs.len()],
                            "PUT",
                            &format!("/v1/stream/{stream}"),
                            &[("Content-Type", "text/plain".to_owned())],
                            b"",
                        )
                        .await
                        .ok()?;
                        match r.status {
                            503 => None,
                            // 200: created by an earlier try whose answer was lost.
                            200 | 201 => Some(()),
                            other => panic!("{other} {}", String::from_utf8_lossy(&r.body)),
                        }
                    })
                    .await;
                    let mut acked = Vec::new();
                    // The longest wait for one acknowledgement.
                    let mut longest = Duration::ZERO;
                    for seq in 0..100_000u64 {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let body = format!("{stream}-{seq};");
                        let via = addrs[(seq as usize + s) % addrs.len()];
                        let sent = Instant::now();
                        let next = produce(via, &stream, seq, body.as_bytes()).await;
                        longest = longest.max(sent.elapsed());
                        longest_us.fetch_max(
                            sent.elapsed().as_micros() as u64,
                            std::sync::atomic::Ordering::Relaxed,
                        );
                        acked.push((body, next));
                    }
                    (stream, acked, longest)
                })
            })
            .collect();
        Self {
            stop,
            tasks,
            longest_us,
        }
    }

    /// The longest wait for one acknowledgement since the last call (how
    /// long writes to a group were unavailable at most meanwhile).
    pub(crate) fn take_longest(&self) -> Duration {
        Duration::from_micros(
            self.longest_us
                .swap(0, std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Stops the producers, then checks that every node holds every
    /// acknowledged append once, at its acknowledged offset; the number
    /// of appends and the longest wait for one.
    pub(crate) async fn stop_and_verify(self, addrs: &[SocketAddr]) -> (usize, Duration) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut total = 0;
        let mut longest = Duration::ZERO;
        for task in self.tasks {
            let (stream, acked, wait) = task.await.unwrap();
            longest = longest.max(wait);
            let mut expected = Vec::new();
            for (body, next) in &acked {
                expected.extend_from_slice(body.as_bytes());
                assert_eq!(*next, expected.len() as u64, "{stream}: {body} moved");
            }
            total += acked.len();
            for addr in addrs {
                eventually(
                    &format!("{addr} holds every ack of {stream}"),
                    Duration::from_secs(60),
                    || async {
                        let r = request(
                            *addr,
                            "GET",
                            &format!("/v1/stream/{stream}?offset=-1"),
                            &[],
                            b"",
                        )
                        .await
                        .ok()?;
                        (r.status == 200 && r.body == expected).then_some(())
                    },
                )
                .await;
            }
        }
        (total, longest)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaderships_spread_and_a_drained_node_hands_them_off() {
    const STREAMS: usize = 6;
    let tmp = tempfile::tempdir().unwrap();
    let (nodes, addrs) = start_balanced(tmp.path()).await;

    // A producer per stream writes through every node in turn the whole
    // time, while leaderships move under it.
    let writers = Writers::start(&addrs, STREAMS);

    // Balanced: two leaderships per node (node 1 first led them all).
    let balanced = spread;
    let status = cluster_status(addrs[1], "the leaderships spread", balanced).await;
    eprintln!("balanced: {:?}", leaderships(&status).0);

    // Drain node 1: it hands off every leadership and is reported draining.
    let admin = process::admin_addr(addrs[2]);
    let status = drain_node_1(admin, addrs[0]).await;
    let (counts, _) = leaderships(&status);
    assert_eq!(counts[&2] + counts[&3], BALANCED_GROUPS, "{status}");
    assert!(counts[&2].abs_diff(counts[&3]) <= 1, "{status}");
    // Drained, it takes none back while the others balance.
    let r = request(admin, "POST", "/__strand/cluster/drain/9", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));

    // Undrained, it gets its share back.
    undrain_node_1(admin, addrs[0], balanced).await;

    // Every acknowledged append once, at its acknowledged offset, on
    // every node.
    let (total, _) = writers.stop_and_verify(&addrs).await;
    let (moved, failed, held_us_max) = hand_offs(&addrs).await;
    assert!(
        moved >= 4 + 2,
        "two moves to balance, two to drain at least: {moved}"
    );
    eprintln!(
        "leadership moves: {total} acknowledged appends, lost 0, duplicates 0; {moved} hand-offs \
         ({failed} failed), proposals held at most {:.1} ms",
        held_us_max as f64 / 1000.0
    );
    for node in nodes {
        node.kill9();
    }
}

/// A client that talks to one member reads its own writes there, in the
/// groups that member follows or does not hold, while leaderships move:
/// an acknowledged append is in every read that follows it. (A leader
/// told a forwarding follower to wait for the index its `last_applied`
/// metric named, which openraft publishes after answering the entry; the
/// follower then read before applying the append it had just
/// acknowledged. It showed under CPU contention, a few reads in a
/// thousand.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reads_its_own_writes_through_any_member() {
    let tmp = tempfile::tempdir().unwrap();
    let (nodes, addrs) = start_balanced(tmp.path()).await;
    // Clients at once (two per member), each appending to its streams and
    // reading back after every append; the streams spread over the
    // groups, so each member follows most of the ones it is asked about.
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let via = addrs[c % 3];
            tokio::spawn(async move {
                let mut stale = Vec::new();
                for i in 0..25 {
                    let stream = format!("ryw-{c}-{i}");
                    let path = format!("/v1/stream/{stream}");
                    create_text(via, &stream).await;
                    let mut want = Vec::new();
                    for seq in 0..4u64 {
                        let body = format!("{c}.{i}.{seq};");
                        produce_as(via, &stream, "ryw", seq, body.as_bytes()).await;
                        want.extend_from_slice(body.as_bytes());
                        let r = request(via, "GET", &format!("{path}?offset=-1"), &[], b"")
                            .await
                            .unwrap();
                        if r.status != 200 || r.body != want {
                            stale.push(format!(
                                "{stream} after seq {seq}: {} {:?}",
                                r.status,
                                String::from_utf8_lossy(&r.body)
                            ));
                        }
                    }
                }
                stale
            })
        })
        .collect();
    let mut stale = Vec::new();
    for client in clients {
        stale.extend(client.await.unwrap());
    }
    assert!(
        stale.is_empty(),
        "reads that missed an append acknowledged just before: {stale:?}"
    );
    for node in nodes {
        node.kill9();
    }
}

/// Creates the text stream `/v1/stream/{stream}` through `via`, asking
/// again while it answers 503 (a group without a leader for a moment).
async fn create_text(via: SocketAddr, stream: &str) {
    let path = format!("/v1/stream/{stream}");
    eventually(
        &format!("{stream} created"),
        Duration::from_secs(60),
        || async {
            let r = request(
                via,
                "PUT",
                &path,
                &[("Content-Type", "text/plain".to_owned())],
                b"",
            )
            .await
            .ok()?;
            match r.status {
                201 => Some(()),
                503 => None,
                other => panic!("{stream}: {other} {}", String::from_utf8_lossy(&r.body)),
            }
        },
    )
    .await;
}

/// A client behind a load balancer writes through one member and reads
/// on through another, from the next offset its append returned: the
/// answer never names a next offset behind the one it asked from (which
/// would send the client back over bytes it has). A follower learns of a
/// commit only with the leader's next message, up to a heartbeat later,
/// so right after the append its tail of the stream may be the old one;
/// a read at an offset past a member's tail goes to the group's leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_through_another_member_never_goes_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (nodes, addrs) = start_balanced(tmp.path()).await;
    let offset_text = |v: u64| format!("{:016}_{:016}", v / 10u64.pow(16), v % 10u64.pow(16));
    let mut stale = Vec::new();
    for i in 0..12usize {
        let stream = format!("lb-{i}");
        let path = format!("/v1/stream/{stream}");
        create_text(addrs[0], &stream).await;
        for seq in 0..4u64 {
            let (writer, reader) = (
                addrs[(i + seq as usize) % 3],
                addrs[(i + seq as usize + 1) % 3],
            );
            let body = format!("{i}.{seq};");
            let next = produce_as(writer, &stream, "lb", seq, body.as_bytes()).await;
            let r = request(
                reader,
                "GET",
                &format!("{path}?offset={}", offset_text(next)),
                &[],
                b"",
            )
            .await
            .unwrap();
            let answered = r.header("stream-next-offset").map(parse_offset);
            if r.status != 200 || !r.body.is_empty() || answered != Some(next) {
                stale.push(format!(
                    "{stream} seq {seq}: {} {:?}, next offset {answered:?} (want {next})",
                    r.status,
                    String::from_utf8_lossy(&r.body)
                ));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "reads through another member behind the offset asked from: {stale:?}"
    );
    for node in nodes {
        node.kill9();
    }
}

/// A rolling restart with drains: each node in turn is drained (it leads
/// no group), killed and started again, and caught up, while producers
/// write through every node; `STRAND_ROLLING_ROUNDS` passes over the
/// nodes (1; `cargo xtask faults` runs more).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_with_drains_loses_nothing() {
    let rounds = std::env::var("STRAND_ROLLING_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes: Vec<Option<Server>> = (1..=3)
        .map(|id| Some(start_args(&balanced_node_args(tmp.path(), id, &ports))))
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().flatten().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(60)).await;
    let writers = Writers::start(&addrs, 6);
    for round in 0..rounds {
        for id in 1..=3u64 {
            let at = (id - 1) as usize;
            let other = addrs[(at + 1) % 3];
            operate(
                process::admin_addr(other),
                &format!("/__strand/cluster/drain/{id}"),
            )
            .await;
            let drained = Instant::now();
            cluster_status(other, &format!("round {round}: node {id} drains"), |v| {
                let (counts, all_led) = leaderships(v);
                all_led && counts[&id] == 0
            })
            .await;
            let took = drained.elapsed();
            // Stopped while it leads nothing: no group loses its leader.
            nodes[at].take().unwrap().kill9();
            nodes[at] = Some(start_args(&balanced_node_args(tmp.path(), id, &ports)));
            // Up again (a restart ends the drain) and caught up.
            cluster_status(other, &format!("round {round}: node {id} back"), |v| {
                node_state(v, id) == "up"
                    && leaderships(v).1
                    && v["groups"].as_array().is_some_and(|groups| {
                        groups.iter().all(|g| {
                            g["replicas"]
                                .as_array()
                                .is_some_and(|r| r.iter().all(|r| r["lag"].as_u64() == Some(0)))
                        })
                    })
            })
            .await;
            eprintln!("rolling restart: round {round}, node {id} drained in {took:?}");
        }
    }
    let (total, longest) = writers.stop_and_verify(&addrs).await;
    eprintln!(
        "rolling restart: {rounds} round(s) over 3 nodes, {total} acknowledged appends, lost 0, \
         duplicates 0; the longest wait for one acknowledgement {longest:?}"
    );
    for node in nodes.into_iter().flatten() {
        node.kill9();
    }
}

/// In groups of four voters (`--replication-factor 4`) the new leader
/// needs a vote beyond the old leader's, which the other voters refuse
/// while their leader lease is fresh: the old leader stops its
/// heartbeats first. Leaderships spread, a drain takes every one off a
/// node and an undrain gives it its share back, while producers write
/// through every node; every acknowledged append reads back once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_of_four_voters_hand_off_their_leaderships() {
    const STREAMS: usize = 6;
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let nodes: Vec<Server> = (1..=4)
        .map(|id| {
            let mut args = balanced_node_args(tmp.path(), id, &ports);
            args.extend(["--replication-factor", "4"].map(str::to_owned));
            start_args(&args)
        })
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(60)).await;
    let writers = Writers::start(&addrs, STREAMS);

    let four_voters = |v: &serde_json::Value| {
        v["groups"].as_array().is_some_and(|g| {
            g.iter()
                .all(|g| g["voters"] == serde_json::json!([1, 2, 3, 4]))
        })
    };
    let balanced = |v: &serde_json::Value| four_voters(v) && spread(v);
    let status = cluster_status(addrs[1], "the leaderships spread", balanced).await;
    eprintln!("balanced: {:?}", leaderships(&status).0);

    let admin = process::admin_addr(addrs[1]);
    let status = drain_node_1(admin, addrs[0]).await;
    eprintln!("drained: {:?}", leaderships(&status).0);
    undrain_node_1(admin, addrs[0], balanced).await;

    let (total, _) = writers.stop_and_verify(&addrs).await;
    let (moved, failed, held_us_max) = hand_offs(&addrs).await;
    // Spreading six leaderships over four nodes takes three moves or
    // more, the drain one or more, the undrain one or more.
    assert!(moved >= 5, "hand-offs: {moved}");
    eprintln!(
        "four voters: {total} acknowledged appends, lost 0, duplicates 0; {moved} hand-offs \
         ({failed} failed), proposals held at most {:.1} ms",
        held_us_max as f64 / 1000.0
    );
    for node in nodes {
        node.kill9();
    }
}

/// Five nodes, sixteen groups, the default replication factor of three:
/// each group has three voters and no other replica (group 0, the
/// cluster's own, has the other two nodes as learners), every node votes
/// in 9 or 10 groups, the leaderships end spread (at most one apart), and
/// producers writing through every node meanwhile lose nothing (every
/// acknowledged append is read once through every node, which passes a
/// read for a group it does not hold on to one that does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_place_three_voters_per_group() {
    const NODES: u64 = 5;
    const GROUPS: usize = 16;
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let nodes: Vec<Server> = (1..=NODES)
        .map(|id| {
            let mut args = balanced_node_args(tmp.path(), id, &ports);
            let at = args.iter().position(|a| a == "--groups").unwrap();
            args[at + 1] = GROUPS.to_string();
            start_args(&args)
        })
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(90)).await;
    let writers = Writers::start(&addrs, 8);
    let placed = |v: &serde_json::Value| {
        let groups = v["groups"].as_array().unwrap();
        let mut votes = [0usize; NODES as usize];
        let shaped = groups.len() == GROUPS
            && groups.iter().all(|g| {
                let voters = g["voters"].as_array().unwrap();
                let learners = g["learners"].as_array().unwrap();
                for id in voters {
                    votes[(id.as_u64().unwrap() - 1) as usize] += 1;
                }
                voters.len() == 3
                    && learners.len() == settled_learners(g, 5)
                    && voters.contains(&g["leader"])
                    && g["replicas"]
                        .as_array()
                        .is_some_and(|r| r.iter().all(|r| r["lag"].as_u64().is_some()))
            });
        let (counts, all_led) = leaderships(v);
        shaped
            && votes.iter().all(|&n| n == 9 || n == 10)
            && all_led
            && counts.values().max().unwrap() - counts.values().min().unwrap() <= 1
    };
    let status = cluster_status(addrs[4], "three voters per group, spread", placed).await;
    eprintln!(
        "five nodes, sixteen groups: leaderships {:?}",
        leaderships(&status).0
    );
    // Every node answers the same placement.
    let again = cluster_status(addrs[0], "node 1 agrees", placed).await;
    for (a, b) in status["groups"]
        .as_array()
        .unwrap()
        .iter()
        .zip(again["groups"].as_array().unwrap())
    {
        assert_eq!(a["voters"], b["voters"], "{status}\n{again}");
    }
    let (total, longest) = writers.stop_and_verify(&addrs).await;
    eprintln!(
        "five nodes: {total} acknowledged appends, lost 0, duplicates 0; the longest wait for \
         one acknowledgement {longest:?}"
    );
    for node in nodes {
        node.kill9();
    }
}

/// A member restarted while it is being removed is still removed: its
/// leaving mark (kept in memory) is gone after the restart, and the
/// removal, which waits for its votes to move, asks it again to leave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_restarted_during_its_removal_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let args = |id: u64| balanced_node_args(tmp.path(), id, &ports);
    let mut nodes: Vec<Option<Server>> = (1..=4).map(|id| Some(start_args(&args(id)))).collect();
    let addrs: Vec<SocketAddr> = nodes.iter().flatten().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(90)).await;
    let votes_of_4 = |v: &serde_json::Value| {
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["voters"].as_array().unwrap().iter().any(|n| n == 4))
            .count()
    };
    cluster_status(addrs[0], "three voters per group, node 4 among them", |v| {
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["voters"].as_array().unwrap().len() == 3)
            && votes_of_4(v) >= 2
    })
    .await;

    let admin = process::admin_addr(addrs[0]);
    let removal = tokio::spawn(async move {
        request(admin, "POST", "/__strand/cluster/remove/4", &[], b"").await
    });
    // Once node 4 has taken the mark (it reports draining), it restarts
    // at once, with its votes still moving.
    let status = cluster_status(addrs[1], "node 4 leaves", |v| {
        node_state(v, 4) == "draining"
    })
    .await;
    eprintln!("node 4 restarts with {} votes left", votes_of_4(&status));
    nodes[3].take().unwrap().kill9();
    nodes[3] = Some(start_args(&args(4)));

    let r = removal.await.unwrap().unwrap();
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    cluster_status(addrs[1], "node 4 is out of every group", |v| {
        node_state(v, 4) == "removed" && votes_of_4(v) == 0
    })
    .await;
    for node in nodes.into_iter().flatten() {
        node.kill9();
    }
}

/// A removed member and a dead one lose their votes: on five nodes of
/// eight groups (three voters each), `POST /__strand/cluster/remove/5`
/// drains node 5 and takes it out (its votes move, no group holds it,
/// it answers 503 `removed`); node 4, killed, is removed once it has not
/// answered for the dead-node timeout (6 s here: a busy test machine can
/// keep a live node from answering for a few seconds) and every group is
/// back to three voters; started again, it learns that it was removed and
/// serves nothing. Producers writing through nodes 1 to 3 meanwhile lose
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_and_a_dead_member_lose_their_votes() {
    const NODES: u64 = 5;
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let args = |id: u64| {
        let mut args = balanced_node_args(tmp.path(), id, &ports);
        let at = args.iter().position(|a| a == "--groups").unwrap();
        args[at + 1] = "8".to_owned();
        args.extend(["--dead-node-timeout-ms", "6000"].map(str::to_owned));
        args
    };
    let mut nodes: Vec<Option<Server>> =
        (1..=NODES).map(|id| Some(start_args(&args(id)))).collect();
    let addrs: Vec<SocketAddr> = nodes.iter().flatten().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(90)).await;
    let holds = |g: &serde_json::Value, id: u64| {
        ["voters", "learners"]
            .iter()
            .any(|k| g[k].as_array().unwrap().iter().any(|n| n == id))
    };
    cluster_status(
        addrs[0],
        "three voters per group, learners in group 0 only",
        |v| {
            v["groups"].as_array().unwrap().iter().all(|g| {
                g["voters"].as_array().unwrap().len() == 3
                    && g["learners"].as_array().unwrap().len() == settled_learners(g, 5)
            })
        },
    )
    .await;
    let writers = Writers::start(&addrs[..3], 6);

    // Removed: drained, then out of every group.
    let admin = process::admin_addr(addrs[0]);
    let started = Instant::now();
    operate(admin, "/__strand/cluster/remove/5").await;
    let status = cluster_status(addrs[1], "node 5 leaves every group", |v| {
        node_state(v, 5) == "removed"
            && v["groups"].as_array().unwrap().iter().all(|g| {
                !holds(g, 5) && g["voters"].as_array().unwrap().len() == 3 && !g["leader"].is_null()
            })
    })
    .await;
    eprintln!("node 5 removed in {:?}", started.elapsed());
    assert_eq!(node_state(&status, 4), "up", "{status}");
    eventually(
        "node 5 knows it was removed",
        Duration::from_secs(30),
        || async {
            let r = request(addrs[4], "GET", "/__strand/health", &[], b"")
                .await
                .ok()?;
            let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
            (r.status == 503 && v["status"] == "removed").then_some(())
        },
    )
    .await;
    let r = request(addrs[4], "GET", "/v1/stream/p0?offset=-1", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert!(String::from_utf8_lossy(&r.body).contains("removed"));
    // Removing it again changes nothing; a stranger is no member.
    operate(admin, "/__strand/cluster/remove/5").await;
    let r = request(admin, "POST", "/__strand/cluster/remove/9", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));

    // Dead: node 4 stops answering and is removed after the timeout.
    let killed = Instant::now();
    nodes[3].take().unwrap().kill9();
    let status = cluster_status(addrs[2], "node 4's votes move", |v| {
        node_state(v, 4) == "removed"
            && v["groups"].as_array().unwrap().iter().all(|g| {
                g["voters"] == serde_json::json!([1, 2, 3])
                    && !holds(g, 4)
                    && !g["leader"].is_null()
            })
    })
    .await;
    eprintln!(
        "node 4 removed {:?} after it was killed (timeout 6 s): {}",
        killed.elapsed(),
        status["groups"]
    );
    // Back, it is told it was removed and serves nothing.
    nodes[3] = Some(start_args(&args(4)));
    let back = nodes[3].as_ref().unwrap().addr;
    eventually(
        "node 4 knows it was removed",
        Duration::from_secs(30),
        || async {
            let r = request(back, "GET", "/__strand/health", &[], b"")
                .await
                .ok()?;
            let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
            (r.status == 503 && v["status"] == "removed").then_some(())
        },
    )
    .await;
    let r = request(back, "POST", "/v1/stream/p0", &[], b"x")
        .await
        .unwrap();
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));

    let (total, longest) = writers.stop_and_verify(&addrs[..3]).await;
    eprintln!(
        "remove and dead-node removal: {total} acknowledged appends, lost 0, duplicates 0; the \
         longest wait for one acknowledgement {longest:?}"
    );
    for node in nodes.into_iter().flatten() {
        node.kill9();
    }
}

/// The arguments of node `id` of a cluster that grows by joins: its port
/// of `ports`, `groups` groups, `dir/node-{id}`, the cluster token
/// `dir/cluster-token` (written by the caller), balancing rounds every
/// `interval_ms`, and `--join` through node `join` when given.
fn joining_args(
    dir: &Path,
    ports: &[u16],
    groups: usize,
    id: u64,
    join: Option<u64>,
    interval_ms: u64,
) -> Vec<String> {
    let port = |id: u64| ports[(id - 1) as usize];
    let mut args: Vec<String> = vec![
        "--listen".into(),
        format!("127.0.0.1:{}", port(id)),
        "--groups".into(),
        groups.to_string(),
        "--data-dir".into(),
        dir.join(format!("node-{id}")).display().to_string(),
        "--node-id".into(),
        id.to_string(),
        "--cluster-token-file".into(),
        dir.join("cluster-token").display().to_string(),
        "--leader-balance-interval-ms".into(),
        interval_ms.to_string(),
    ];
    if let Some(via) = join {
        args.push("--join".into());
        args.push(format!("http://127.0.0.1:{}", port(via)));
    }
    args
}

/// A cluster grows from one node: node 1 starts alone (a cluster of one,
/// since it has a cluster token), nodes 2, 3 and 4 start with their own
/// `--node-id`, an empty `--data-dir` and `--join` (node 3 through node
/// 2, which passes it on to group 0's leader); each receives the groups
/// as a learner and placement gives it votes until every group has three
/// voters and the four nodes six votes each. A joined node's restart
/// needs no `--join`. A producer writing through node 1 the whole time
/// loses nothing, and every node holds every acknowledged append.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_grows_from_one_node_by_joins() {
    const GROUPS: usize = 8;
    let tmp = tempfile::tempdir().unwrap();
    let token = tmp.path().join("cluster-token");
    std::fs::write(&token, "a-cluster-token-of-enough-length").unwrap();
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let args = |id: u64, join: Option<u64>| {
        let mut args = joining_args(tmp.path(), &ports, GROUPS, id, join, 200);
        args.extend(["--admin-listen", "127.0.0.1:0"].map(str::to_owned));
        args
    };
    let mut nodes = vec![Some(start_args(&args(1, None)))];
    let first = nodes[0].as_ref().unwrap().addr;
    all_ready(&[first], Duration::from_secs(30)).await;
    let writers = Writers::start(&[first], 4);
    for (id, via) in [(2, 1), (3, 2), (4, 1)] {
        nodes.push(Some(start_args(&args(id, Some(via)))));
    }
    let addrs: Vec<SocketAddr> = nodes.iter().flatten().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(90)).await;
    let spread = |v: &serde_json::Value| {
        let mut votes = [0usize; 4];
        let placed = v["nodes"].as_array().unwrap().len() == 4
            && v["groups"].as_array().unwrap().iter().all(|g| {
                for id in g["voters"].as_array().unwrap() {
                    votes[(id.as_u64().unwrap() - 1) as usize] += 1;
                }
                g["voters"].as_array().unwrap().len() == 3
                    && g["learners"].as_array().unwrap().len() == settled_learners(g, 4)
            });
        let (counts, all_led) = leaderships(v);
        placed
            && votes == [6; 4]
            && all_led
            && counts.values().max().unwrap() - counts.values().min().unwrap() <= 1
            && (1..=4).all(|id| node_state(v, id) == "up")
    };
    let status = cluster_status(addrs[3], "four members, three voters per group", spread).await;
    eprintln!(
        "joined: leaderships {:?}, moves {}",
        leaderships(&status).0,
        status["moves"]
    );
    // A joined node restarts without --join, a member still.
    nodes[2].take().unwrap().kill9();
    nodes[2] = Some(start_args(&args(3, None)));
    cluster_status(addrs[0], "node 3 back", |v| {
        spread(v)
            && v["groups"].as_array().unwrap().iter().all(|g| {
                g["replicas"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|r| r["lag"].as_u64() == Some(0))
            })
    })
    .await;
    let (total, longest) = writers.stop_and_verify(&addrs).await;
    eprintln!(
        "joins: {total} acknowledged appends, lost 0, duplicates 0; the longest wait for one \
         acknowledgement {longest:?}"
    );
    for node in nodes.into_iter().flatten() {
        node.kill9();
    }
}

/// Membership changes under producer load, on five nodes of eight groups
/// (three voters each): a sixth node joins, a node is drained and
/// undrained, one is removed, one is killed and removed after the
/// dead-node timeout (6 s), and the four left restart one at a time with
/// drains (`STRAND_ROLLING_ROUNDS` passes; `cargo xtask faults` runs
/// more). After each step every group has three voters spread evenly and
/// a leader; every acknowledged append is then on every member once, at
/// its offset. Prints the longest wait for one acknowledgement per step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_changes_under_load_lose_nothing() {
    const GROUPS: usize = 8;
    let rounds = std::env::var("STRAND_ROLLING_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..6).map(|_| free_port()).collect();
    let args = |id: u64| {
        let mut args = if id == 6 {
            // Not in the --peer lists: it joins through node 2.
            [
                "--listen",
                &format!("127.0.0.1:{}", ports[5]),
                "--data-dir",
                &tmp.path().join("node-6").display().to_string(),
                "--node-id",
                "6",
                "--join",
                &format!("http://127.0.0.1:{}", ports[1]),
                "--admin-listen",
                "127.0.0.1:0",
                "--leader-balance-interval-ms",
                "200",
                "--groups",
                "",
            ]
            .map(str::to_owned)
            .to_vec()
        } else {
            balanced_node_args(tmp.path(), id, &ports[..5])
        };
        let at = args.iter().position(|a| a == "--groups").unwrap();
        args[at + 1] = GROUPS.to_string();
        args.extend(["--dead-node-timeout-ms", "6000"].map(str::to_owned));
        args
    };
    let mut nodes: Vec<Option<Server>> = (1..=5).map(|id| Some(start_args(&args(id)))).collect();
    let addrs: Vec<SocketAddr> = nodes.iter().flatten().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(90)).await;
    // Members after every step, and whether the placement settled on them.
    let settled = |members: Vec<u64>| {
        move |v: &serde_json::Value| {
            let groups = v["groups"].as_array().unwrap();
            let mut votes = std::collections::BTreeMap::new();
            let shaped = groups.iter().all(|g| {
                let voters = g["voters"].as_array().unwrap();
                let learners = g["learners"].as_array().unwrap();
                for id in voters {
                    *votes.entry(id.as_u64().unwrap()).or_insert(0usize) += 1;
                }
                voters.len() == 3
                    && learners.len() == settled_learners(g, members.len())
                    && voters
                        .iter()
                        .chain(learners)
                        .all(|n| members.contains(&n.as_u64().unwrap()))
                    && voters.contains(&g["leader"])
            });
            let low = members
                .iter()
                .map(|m| votes.get(m).copied().unwrap_or(0))
                .min();
            let high = members
                .iter()
                .map(|m| votes.get(m).copied().unwrap_or(0))
                .max();
            shaped
                && high.zip(low).is_some_and(|(h, l)| h - l <= 1)
                && members.iter().all(|&m| node_state(v, m) == "up")
        }
    };
    cluster_status(addrs[0], "placed on five", settled(vec![1, 2, 3, 4, 5])).await;
    let writers = Writers::start(&[addrs[0], addrs[1], addrs[4]], 6);
    writers.take_longest();
    let mut report = Vec::new();

    // A sixth node joins through node 2.
    let started = Instant::now();
    nodes.push(Some(start_args(&args(6))));
    let sixth = nodes[5].as_ref().unwrap().addr;
    // Producers writing through node 6 from its start: while it joins,
    // it passes their appends on.
    let through_sixth = Writers::start_as("j", &[sixth], 2);
    cluster_status(
        addrs[0],
        "node 6 takes its share",
        settled(vec![1, 2, 3, 4, 5, 6]),
    )
    .await;
    report.push(("join node 6", started.elapsed(), writers.take_longest()));
    // Every append acknowledged through node 6 while it joined is on
    // every node once, at its offset.
    let mut six: Vec<SocketAddr> = addrs.clone();
    six.push(sixth);
    let (joined_total, joined_longest) = through_sixth.stop_and_verify(&six).await;
    report.push((
        "writes through node 6 while it joined",
        started.elapsed(),
        joined_longest,
    ));

    // Node 2 is drained, then undrained.
    let admin = process::admin_addr(addrs[0]);
    let started = Instant::now();
    operate(admin, "/__strand/cluster/drain/2").await;
    cluster_status(addrs[0], "node 2 drains", |v| {
        let (counts, all_led) = leaderships(v);
        all_led && counts[&2] == 0
    })
    .await;
    operate(admin, "/__strand/cluster/undrain/2").await;
    report.push(("drain node 2", started.elapsed(), writers.take_longest()));

    // Node 3 is removed.
    let started = Instant::now();
    operate(admin, "/__strand/cluster/remove/3").await;
    cluster_status(addrs[0], "node 3 leaves", |v| {
        settled(vec![1, 2, 4, 5, 6])(v) && node_state(v, 3) == "removed"
    })
    .await;
    report.push(("remove node 3", started.elapsed(), writers.take_longest()));
    nodes[2].take().unwrap().kill9();

    // Node 4 dies and is removed after the dead-node timeout.
    let started = Instant::now();
    nodes[3].take().unwrap().kill9();
    cluster_status(addrs[0], "node 4's votes move", |v| {
        settled(vec![1, 2, 5, 6])(v) && node_state(v, 4) == "removed"
    })
    .await;
    report.push((
        "kill node 4 (6 s timeout)",
        started.elapsed(),
        writers.take_longest(),
    ));

    // The four left restart one at a time, each drained first.
    let live: Vec<(u64, usize)> = vec![(1, 0), (2, 1), (5, 4), (6, 5)];
    let live_addrs: Vec<SocketAddr> = live
        .iter()
        .map(|&(_, at)| nodes[at].as_ref().unwrap().addr)
        .collect();
    for round in 0..rounds {
        for (k, &(id, at)) in live.iter().enumerate() {
            let other = live_addrs[(k + 1) % live.len()];
            let started = Instant::now();
            operate(
                process::admin_addr(other),
                &format!("/__strand/cluster/drain/{id}"),
            )
            .await;
            cluster_status(other, &format!("round {round}: node {id} drains"), |v| {
                let (counts, all_led) = leaderships(v);
                all_led && counts[&id] == 0
            })
            .await;
            nodes[at].take().unwrap().kill9();
            let mut again = args(id);
            if id == 6 {
                // Its restart needs no --join.
                let at = again.iter().position(|a| a == "--join").unwrap();
                again.drain(at..at + 2);
            }
            nodes[at] = Some(start_args(&again));
            cluster_status(other, &format!("round {round}: node {id} back"), |v| {
                settled(vec![1, 2, 5, 6])(v)
                    && v["groups"].as_array().unwrap().iter().all(|g| {
                        g["replicas"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .all(|r| r["lag"].as_u64() == Some(0))
                    })
            })
            .await;
            report.push((
                "restart a node with a drain",
                started.elapsed(),
                writers.take_longest(),
            ));
        }
    }
    let (total, _) = writers.stop_and_verify(&live_addrs).await;
    let total = total + joined_total;
    assert_eq!(live_addrs[3], sixth);
    for (step, took, longest) in &report {
        eprintln!("membership: {step}: settled in {took:?}; longest wait for an ack {longest:?}");
    }
    eprintln!("membership changes: {total} acknowledged appends, lost 0, duplicates 0");
    for node in nodes.into_iter().flatten() {
        node.kill9();
    }
}

/// Reads the start of an SSE answer from `addr` until it holds `want`
/// (10 s at most); answers what it read.
async fn sse_until(addr: SocketAddr, path: &str, want: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains(want) {
            let n = conn.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "{path}: the answer ended: {}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap_or_else(|_| panic!("{path}: no `{want}` within 10 s"));
    String::from_utf8_lossy(&got).into_owned()
}

/// A node that joined answers for a group only through a member that
/// holds it until it holds every group itself: node 1 alone holds 16
/// streams over 8 groups, node 2 joins, and node 1 (leader of every
/// group, one membership change per round of 1 s) adds it to the groups
/// one by one. Meanwhile node 2's health says `joining` (503), and its
/// answers to reads, an append, an SSE read and a listing are node 1's,
/// passed on (never its empty state's `404` or empty list) for the
/// groups it does not hold yet, and answered from its own state for those
/// it does; a listing and the bucket routes it answers itself, asking
/// node 1 about the groups it does not hold, a fork in a group it holds
/// reads its source (in one it does not) through node 1, and a
/// subscription it makes reads and appends to the registry in a group
/// it does not hold through node 1. Once it holds every group it answers
/// every stream whole itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_node_answers_through_a_member_until_it_holds_every_group() {
    const GROUPS: usize = 8;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("cluster-token"),
        "a-cluster-token-of-enough-length",
    )
    .unwrap();
    let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let args = |id: u64| joining_args(tmp.path(), &ports, GROUPS, id, (id == 2).then_some(1), 1000);
    let first = start_args(&args(1));
    all_ready(&[first.addr], Duration::from_secs(30)).await;
    let streams: Vec<String> = (0..16).map(|i| format!("/v1/stream/joining-{i}")).collect();
    let text = [("Content-Type", "text/plain".to_owned())];
    for (i, path) in streams.iter().enumerate() {
        let r = request(first.addr, "PUT", path, &text, b"").await.unwrap();
        assert_eq!(r.status, 201, "{path}");
        append_to(first.addr, path, format!("body of {i}").as_bytes()).await;
    }
    let r = request(first.addr, "PUT", "/acme", &[], b"").await.unwrap();
    assert_eq!(r.status, 201);
    // A fork in group 1 of a source in group 7: node 1 adds node 2 to
    // the groups in order, so for a few seconds node 2 holds the fork's
    // group and not its source's.
    let in_group = |g: usize| {
        (0..)
            .map(|i| format!("s{i}"))
            .find(|n| {
                strand_engine::group_of(&strand::BucketStreamId::new("acme", n.as_str()), GROUPS)
                    == g
            })
            .unwrap()
    };
    let (source, fork) = (
        format!("/acme/{}", in_group(7)),
        format!("/acme/{}", in_group(1)),
    );
    let r = request(first.addr, "PUT", &source, &text, b"inherited")
        .await
        .unwrap();
    assert_eq!(r.status, 201);
    let forked = [
        ("Content-Type", "text/plain".to_owned()),
        ("Stream-Forked-From", source.clone()),
    ];
    let r = request(first.addr, "PUT", &fork, &forked, b", own")
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    // A subscription node 1 made: the registry holds it before node 2
    // joins.
    let json = [("Content-Type", "application/json".to_owned())];
    let r = request(first.addr, "PUT", "/v1/stream/wake-pool", &json, b"[]")
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let spec = serde_json::json!({
        "type": "pull-wake",
        "pattern": "events/*",
        "wake_stream": "wake-pool",
        "lease_ttl_ms": 60_000,
    });
    let made_before = "/v1/stream/__ds/subscriptions/made-before";
    let r = request(
        first.addr,
        "PUT",
        made_before,
        &json,
        spec.to_string().as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let second = start_args(&args(2));
    let health = || async {
        let r = request(second.addr, "GET", "/__strand/health", &[], b"")
            .await
            .ok()?;
        let body = String::from_utf8_lossy(&r.body).into_owned();
        Some((r.status, body.contains("\"status\":\"joining\"")))
    };
    eventually(
        "node 2 says it is joining",
        Duration::from_secs(30),
        || async {
            health()
                .await
                .and_then(|(status, joining)| (status == 503 && joining).then_some(()))
        },
    )
    .await;
    let held = |g: usize| async move {
        let r = request(second.addr, "GET", "/__strand/health", &[], b"")
            .await
            .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
        v["groups"][g]["held"].as_bool()
    };
    // A subscription made through node 2 before it holds the registry's
    // group: it reads the registry at node 1 and its events go to the
    // group's leader there.
    let registry = strand_engine::group_of(
        &strand::BucketStreamId::new("__strand", "subscriptions"),
        GROUPS,
    );
    assert_ne!(registry, 0, "node 2 holds group 0 from its start");
    let r = request(second.addr, "GET", made_before, &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let subscription = "/v1/stream/__ds/subscriptions/made-while-joining";
    let r = request(
        second.addr,
        "PUT",
        subscription,
        &json,
        spec.to_string().as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let r = request(first.addr, "GET", subscription, &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        held(registry).await,
        Some(false),
        "node 2 took the registry's group too soon for this test"
    );
    // While it joins: every read answered whole, through node 1.
    let (mut passed_on, mut refused) = (0u32, 0u32);
    for (i, path) in streams.iter().enumerate() {
        let r = request(second.addr, "GET", &format!("{path}?offset=-1"), &[], b"")
            .await
            .unwrap();
        match r.status {
            200 => {
                assert_eq!(r.body, format!("body of {i}").as_bytes(), "{path}");
                passed_on += 1;
            }
            503 => refused += 1,
            other => panic!(
                "{path} on node 2: {other} {}",
                String::from_utf8_lossy(&r.body)
            ),
        }
    }
    let r = request(
        second.addr,
        "POST",
        &streams[0],
        &text,
        b", appended through node 2",
    )
    .await
    .unwrap();
    assert!(
        r.status == 200 || r.status == 204,
        "append: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    let sse = sse_until(
        second.addr,
        &format!("{}?offset=-1&live=sse", streams[1]),
        "event: control",
    )
    .await;
    assert!(sse.starts_with("HTTP/1.1 200"), "{sse}");
    assert!(sse.contains("data:body of 1"), "{sse}");
    let list = request(
        second.addr,
        "GET",
        "/__strand/streams/default?prefix=joining-",
        &[],
        b"",
    )
    .await
    .unwrap();
    let listed = String::from_utf8_lossy(&list.body);
    assert_eq!(list.status, 200, "{listed}");
    assert!(
        streams
            .iter()
            .all(|p| listed.contains(p.trim_start_matches("/v1/stream/"))),
        "{listed}"
    );
    // A bucket's existence, asked about every group it does not hold,
    // and a bucket created in every group: its commands for the groups
    // it does not hold go to their leader.
    let r = request(second.addr, "PUT", "/made-while-joining", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    for (bucket, want) in [
        ("/acme", 200),
        ("/made-while-joining", 200),
        ("/nosuch", 404),
    ] {
        let r = request(second.addr, "GET", bucket, &[], b"").await.unwrap();
        assert_eq!(
            r.status,
            want,
            "{bucket}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    // The fork read on node 2 while it holds the fork's group and not
    // the source's: its own bytes from its state, the inherited ones
    // from node 1, one response.
    eventually("node 2 holds group 1", Duration::from_secs(30), || async {
        (held(1).await == Some(true)).then_some(())
    })
    .await;
    let r = request(second.addr, "GET", &format!("{fork}?offset=-1"), &[], b"")
        .await
        .unwrap();
    assert_eq!(
        held(7).await,
        Some(false),
        "node 2 took group 7 too soon for this test"
    );
    assert_eq!(
        (r.status, String::from_utf8_lossy(&r.body).into_owned()),
        (200, "inherited, own".to_owned()),
        "{fork} on node 2"
    );
    let still = health().await;
    assert_eq!(
        still.map(|h| h.1),
        Some(true),
        "node 2 joined too soon for this test"
    );
    assert!(
        passed_on >= 12,
        "{passed_on} reads passed on, {refused} refused"
    );
    // Then node 2 answers every stream itself.
    eventually(
        "node 2 holds every group",
        Duration::from_secs(60),
        || async {
            health()
                .await
                .and_then(|(status, _)| (status == 200).then_some(()))
        },
    )
    .await;
    // The bucket made through node 2 exists in every group: a second PUT
    // creates it in none (200, not 201).
    let r = request(second.addr, "PUT", "/made-while-joining", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    for (i, path) in streams.iter().enumerate() {
        let r = request(second.addr, "GET", &format!("{path}?offset=-1"), &[], b"")
            .await
            .unwrap();
        let mut want = format!("body of {i}");
        if i == 0 {
            want.push_str(", appended through node 2");
        }
        assert_eq!(
            (r.status, r.body),
            (200, want.into_bytes()),
            "{path} on node 2"
        );
    }
    eprintln!(
        "joining: {passed_on} reads passed on to node 1, {refused} refused, then node 2 held every group"
    );
    first.kill9();
    second.kill9();
}

/// The value of the unlabelled counter `name` in a scrape of `/metrics`
/// on the node at `addr` (its admin listener).
async fn counter(addr: SocketAddr, name: &str) -> u64 {
    let r = request(process::admin_addr(addr), "GET", "/metrics", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let text = String::from_utf8_lossy(&r.body).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} is not in the scrape:\n{text}"))
}

/// An append through a member that does not hold its stream's group is
/// proposed there and reaches the group's leader as a log entry — no
/// request is passed on (`strand_requests_passed_on_total` stays) —
/// while a read is passed on; and the leader lets forwarded bytes in
/// under its own hot-memory limit: with the cold tier unreachable, the
/// appends through the other member stop at the leader's limit with a
/// 503 that says so, and the leader's hot bytes stay within it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_through_a_member_without_the_group_reach_its_leader_as_entries() {
    const NODES: u64 = 4;
    const GROUPS: usize = 4;
    const LIMIT: usize = 256 * 1024;
    const BODY: usize = 16 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    // Nothing listens on port 1: every upload fails, nothing leaves the
    // hot buffers.
    let env = [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
    ];
    let nodes: Vec<Server> = (1..=NODES)
        .map(|id| {
            let mut args = grouped_node_args(tmp.path(), id, &ports, GROUPS);
            args.extend(
                [
                    "--admin-listen",
                    "127.0.0.1:0",
                    "--leader-balance-interval-ms",
                    "200",
                    "--cold-url",
                    "s3://unreachable/strand",
                    "--max-hot-bytes",
                    &LIMIT.to_string(),
                ]
                .map(str::to_owned),
            );
            process::start_args_env(&args, &env)
        })
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(90)).await;
    let status = cluster_status(addrs[0], "three voters per group", |v| {
        v["groups"].as_array().unwrap().iter().all(|g| {
            g["voters"].as_array().unwrap().len() == 3
                && g["learners"].as_array().unwrap().len() == settled_learners(g, 4)
                && g["leader"].as_u64().is_some()
        })
    })
    .await;
    // Group 1, the member without a vote in it, and its leader.
    let group = &status["groups"][1];
    let voters = group["voters"].as_array().unwrap();
    let outside = (1..=NODES)
        .find(|id| !voters.contains(&serde_json::json!(id)))
        .unwrap();
    let leader = group["leader"].as_u64().unwrap();
    let (via, at_leader) = (addrs[(outside - 1) as usize], addrs[(leader - 1) as usize]);
    eventually(
        "the member without a vote holds nothing of group 1",
        Duration::from_secs(30),
        || async {
            let r = request(via, "GET", "/__strand/health", &[], b"")
                .await
                .ok()?;
            let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
            (v["groups"][1]["held"] == false).then_some(())
        },
    )
    .await;
    let name = (0..)
        .map(|i| format!("forwarded-{i}"))
        .find(|n| {
            strand_engine::group_of(&strand::BucketStreamId::new("default", n.as_str()), GROUPS)
                == 1
        })
        .unwrap();
    let path = format!("/v1/stream/{name}");
    let text = [("Content-Type", "text/plain".to_owned())];
    let r = request(via, "PUT", &path, &text, b"").await.unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let passed_on = counter(via, "strand_requests_passed_on_total").await;
    assert!(passed_on >= 1, "the create was passed on");
    // Appends until the leader's limit refuses one.
    let mut acked = Vec::new();
    // Another 503 (a busy machine's forwarding timeout, an election) is
    // retried with the same body and producer sequence: one that went in
    // after all is deduplicated.
    let mut other_503 = 0;
    let refusal = loop {
        assert!(
            acked.len() <= 2 * LIMIT,
            "{} bytes acknowledged, past the leader's limit of {LIMIT}",
            acked.len()
        );
        let seq = acked.len() / BODY;
        let body = vec![b'a' + (seq % 26) as u8; BODY];
        let produced = [
            ("Content-Type", "text/plain".to_owned()),
            ("Producer-Id", "through-a-non-voter".to_owned()),
            ("Producer-Epoch", "0".to_owned()),
            ("Producer-Seq", seq.to_string()),
        ];
        let r = request(via, "POST", &path, &produced, &body).await.unwrap();
        let text_of = String::from_utf8_lossy(&r.body).into_owned();
        match r.status {
            200 | 204 => acked.extend_from_slice(&body),
            503 if text_of.contains("hot memory is full") => break text_of,
            503 if other_503 < 20 => {
                other_503 += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => panic!("append: {other} {text_of}"),
        }
    };
    assert!(refusal.contains("leader's hot memory is full"), "{refusal}");
    assert!(
        !acked.is_empty() && acked.len() <= LIMIT,
        "{} bytes acknowledged",
        acked.len()
    );
    assert_eq!(
        counter(via, "strand_requests_passed_on_total").await,
        passed_on,
        "no append was passed on"
    );
    assert!(counter(at_leader, "strand_hot_bytes").await <= LIMIT as u64);
    // A read is passed on, and finds every acknowledged byte.
    let r = request(via, "GET", &format!("{path}?offset=-1"), &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == acked, "{} bytes read", r.body.len());
    assert_eq!(
        counter(via, "strand_requests_passed_on_total").await,
        passed_on + 1
    );
    eprintln!(
        "through node {outside} (no vote in group 1; leader node {leader}): {} bytes acknowledged, then: {refusal}",
        acked.len()
    );
    for node in nodes {
        node.kill9();
    }
}
