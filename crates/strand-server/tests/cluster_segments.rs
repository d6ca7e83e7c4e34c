//! A 3-node cluster without object storage keeps flushed bytes on disk:
//! every node writes its own copy of each flushed object into its
//! `segments/` from its own hot bytes, a node rebuilt from an empty
//! directory fetches what its snapshot names from the others (and then
//! serves it alone), and the GC deletes the objects on every node.
#![allow(clippy::unwrap_used)]

use crate::{common, process};

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::{eventually, off};
use process::{Server, free_port, request, start_args};

fn node_args(dir: &Path, id: u64, ports: &[u16]) -> Vec<String> {
    let mut args = process::cluster_node_args(dir, id, ports);
    args.extend(
        [
            // Flush soon and in small pieces; repair and collect at once.
            "--cold-flush-bytes",
            "65536",
            "--cold-piece-bytes",
            "1",
            "--cold-flush-interval-ms",
            "20",
            "--cold-gc-interval-ms",
            "50",
            "--cold-repair-interval-ms",
            "200",
            // A log purged behind frequent snapshots: a rebuilt node gets
            // a snapshot, not the entries that held the bytes.
            "--snapshot-every",
            "20",
            "--admin-listen",
            "127.0.0.1:0",
        ]
        .map(str::to_owned),
    );
    args
}

/// Every node up and agreeing on group 0's leader.
async fn agreed_leader(addrs: &[SocketAddr]) -> u64 {
    eventually(
        "the cluster elects a leader",
        Duration::from_secs(60),
        || async {
            let mut leaders = Vec::new();
            for addr in addrs {
                match request(*addr, "GET", "/__strand/health", &[], b"").await {
                    Ok(r) if r.status == 200 => {
                        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                        leaders.push(v["groups"][0]["leader"].as_u64());
                    }
                    _ => leaders.push(None),
                }
            }
            match leaders.first() {
                Some(Some(first)) if leaders.iter().all(|l| *l == Some(*first)) => Some(*first),
                _ => None,
            }
        },
    )
    .await
}

async fn cold_report(addr: SocketAddr) -> serde_json::Value {
    let r = request(process::admin_addr(addr), "GET", "/__strand/cold", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    serde_json::from_slice(&r.body).unwrap()
}

/// The segment files under a node's `segments/` (no temporary ones).
fn segment_files(dir: &Path, id: u64) -> BTreeSet<String> {
    let root = dir.join(format!("node-{id}")).join("segments");
    let mut out = BTreeSet::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if !p.to_string_lossy().ends_with(".tmp") {
                out.insert(p.strip_prefix(&root).unwrap().display().to_string());
            }
        }
    }
    out
}

fn body(i: usize) -> Vec<u8> {
    (0..4096).map(|j| ((i * 31 + j * 7) % 251) as u8).collect()
}

/// Appends `count` distinct 4 KiB bodies to `/v1/stream/{name}` through
/// `addr` (as an idempotent producer, so a request answered 503 — no
/// leader for a moment while leaderships move, a member still joining —
/// is sent again without writing twice); answers the stream's bytes.
async fn fill(addr: SocketAddr, name: &str, count: usize) -> Vec<u8> {
    let path = format!("/v1/stream/{name}");
    let octets = || ("Content-Type", "application/octet-stream".to_owned());
    eventually(
        &format!("{name} created"),
        Duration::from_secs(30),
        || async {
            let r = request(addr, "PUT", &path, &[octets()], b"").await.ok()?;
            match r.status {
                201 => Some(()),
                503 => None,
                other => panic!("{name}: {other} {}", String::from_utf8_lossy(&r.body)),
            }
        },
    )
    .await;
    let mut all = Vec::new();
    for i in 0..count {
        let b = body(i);
        let headers = [
            octets(),
            ("Producer-Id", "fill".to_owned()),
            ("Producer-Epoch", "0".to_owned()),
            ("Producer-Seq", i.to_string()),
        ];
        eventually(&format!("append {i}"), Duration::from_secs(30), || async {
            let r = request(addr, "POST", &path, &headers, &b).await.ok()?;
            match r.status {
                200 | 204 => Some(()),
                503 => None,
                other => panic!("append {i}: {other} {}", String::from_utf8_lossy(&r.body)),
            }
        })
        .await;
        all.extend_from_slice(&b);
    }
    all
}

/// The whole stream as the node at `addr` serves it (page after page).
async fn read_all(addr: SocketAddr, name: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut offset = "-1".to_owned();
    for _ in 0..10_000 {
        let r = request(
            addr,
            "GET",
            &format!("/v1/stream/{name}?offset={offset}"),
            &[],
            b"",
        )
        .await
        .ok()?;
        if r.status != 200 {
            return None;
        }
        out.extend_from_slice(&r.body);
        if r.header("stream-up-to-date").is_some() {
            return Some(out);
        }
        offset = r.header("stream-next-offset")?.to_owned();
    }
    None
}

/// Waits until `check` holds, for up to 60 s ([`eventually`]).
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eventually(what, Duration::from_secs(60), || {
        let holds = check();
        async move { holds.await.then_some(()) }
    })
    .await;
}

/// Three nodes with their data directories under `dir`, their
/// addresses, and the leader they agree on.
async fn cluster(dir: &Path, ports: &[u16]) -> (Vec<Option<Server>>, Vec<SocketAddr>, u64) {
    let nodes: Vec<Option<Server>> = (1..=3)
        .map(|id| Some(start_args(&node_args(dir, id, ports))))
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.as_ref().unwrap().addr).collect();
    let leader = agreed_leader(&addrs).await;
    (nodes, addrs, leader)
}

/// Waits until every node holds the leader's objects, at least `min`.
async fn same_objects_everywhere(dir: &Path, leader: u64, min: usize) {
    until("every node holds the same objects", || async {
        let leader_files = segment_files(dir, leader);
        leader_files.len() >= min && (1..=3).all(|id| segment_files(dir, id) == leader_files)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_keeps_its_own_copy_and_a_rebuilt_node_fetches_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let (mut nodes, addrs, leader) = cluster(dir, &ports).await;
    let at = |id: u64| addrs[usize::try_from(id - 1).unwrap()];

    // 256 KiB and more than `--snapshot-every` entries.
    let expected = fill(at(leader), "s", 64).await;

    // Every node flushes (the leader) or applies the flushes (the others),
    // writing its own files; each serves the whole stream.
    for id in 1..=3u64 {
        until("every node holds flushed objects", || async move {
            cold_report(at(id)).await["flushed_chunks"].as_u64() > Some(0)
                || !segment_files(dir, id).is_empty()
        })
        .await;
    }
    until("the followers wrote their own copies", || async {
        let mut written = 0;
        for id in (1..=3u64).filter(|id| *id != leader) {
            written += cold_report(at(id)).await["replica_written"]
                .as_u64()
                .unwrap();
        }
        written >= 2
    })
    .await;
    // A follower serves what it has applied: wait until each has applied
    // every append (under load one may lag the leader a little).
    for id in 1..=3u64 {
        until(&format!("node {id} serves the whole stream"), || async {
            read_all(at(id), "s").await.as_deref() == Some(expected.as_slice())
        })
        .await;
    }
    same_objects_everywhere(dir, leader, 1).await;

    // A follower loses its whole directory and comes back empty.
    let lost = (1..=3u64).find(|id| *id != leader).unwrap();
    nodes[usize::try_from(lost - 1).unwrap()]
        .take()
        .unwrap()
        .kill9();
    std::fs::remove_dir_all(dir.join(format!("node-{lost}"))).unwrap();
    nodes[usize::try_from(lost - 1).unwrap()] = Some(start_args(&node_args(dir, lost, &ports)));
    until("the rebuilt node serves the stream", || async {
        read_all(at(lost), "s").await.as_deref() == Some(expected.as_slice())
    })
    .await;
    until("the rebuilt node holds every object", || async {
        segment_files(dir, lost) == segment_files(dir, leader)
    })
    .await;
    let report = cold_report(at(lost)).await;
    assert!(
        report["replica_fetched"].as_u64() > Some(0),
        "the rebuilt node fetched objects from its peers: {report}"
    );
    // The leader took the emptied log in its stride (openraft's
    // `loosen-follower-log-revert`): every node still takes writes.
    let mut expected = expected;
    for (n, id) in (1..=3u64).enumerate() {
        let b = body(1000 + n);
        until("a write through every node is acknowledged", || {
            let b = b.clone();
            async move {
                request(
                    at(id),
                    "POST",
                    "/v1/stream/s",
                    &[("Content-Type", "application/octet-stream".to_owned())],
                    &b,
                )
                .await
                .is_ok_and(|r| r.status == 204 || r.status == 200)
            }
        })
        .await;
        expected.extend_from_slice(&b);
    }
    until("the rebuilt node has every write", || async {
        read_all(at(lost), "s").await.as_deref() == Some(expected.as_slice())
    })
    .await;

    // Alone, it still serves every byte: they are its own files now.
    for id in (1..=3u64).filter(|id| *id != lost) {
        nodes[usize::try_from(id - 1).unwrap()]
            .take()
            .unwrap()
            .kill9();
    }
    assert_eq!(
        read_all(at(lost), "s").await.as_deref(),
        Some(expected.as_slice()),
        "the rebuilt node alone serves the stream from its own files"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_streams_objects_leave_every_node() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let (_nodes, addrs, leader) = cluster(dir, &ports).await;
    let at = |id: u64| addrs[usize::try_from(id - 1).unwrap()];
    fill(at(leader), "gone", 64).await;
    same_objects_everywhere(dir, leader, 1).await;
    let r = request(at(leader), "DELETE", "/v1/stream/gone", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 204);
    until("no node holds the deleted stream's objects", || async {
        (1..=3).all(|id| segment_files(dir, id).is_empty())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_or_truncated_copy_is_replaced_from_a_peer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let (mut nodes, addrs, leader) = cluster(dir, &ports).await;
    let at = |id: u64| addrs[usize::try_from(id - 1).unwrap()];
    let expected = fill(at(leader), "s", 64).await;
    same_objects_everywhere(dir, leader, 2).await;

    // One file flipped, one cut short, while the follower is down.
    let hurt = (1..=3u64).find(|id| *id != leader).unwrap();
    nodes[usize::try_from(hurt - 1).unwrap()]
        .take()
        .unwrap()
        .kill9();
    let root = dir.join(format!("node-{hurt}")).join("segments");
    let (sidecars, files): (Vec<String>, Vec<String>) = segment_files(dir, hurt)
        .into_iter()
        .partition(|f| f.ends_with(".starts"));
    let flipped = root.join(&files[0]);
    let mut bytes = std::fs::read(&flipped).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&flipped, bytes).unwrap();
    let cut = root.join(&files[1]);
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    // And a message-start sidecar cut short.
    let cut_sidecar = root.join(&sidecars[0]);
    let sidecar_len = std::fs::metadata(&cut_sidecar).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut_sidecar)
        .unwrap()
        .set_len(sidecar_len - 1)
        .unwrap();

    nodes[usize::try_from(hurt - 1).unwrap()] = Some(start_args(&node_args(dir, hurt, &ports)));
    // Until it holds its groups again it passes reads on: wait, so the
    // reads below are its own.
    until("the follower holds every group again", || async {
        let Ok(r) = request(at(hurt), "GET", "/__strand/health", &[], b"").await else {
            return false;
        };
        serde_json::from_slice::<serde_json::Value>(&r.body).is_ok_and(|v| {
            v["groups"]
                .as_array()
                .is_some_and(|g| g.iter().all(|g| g["held"] == true))
        })
    })
    .await;
    until("the follower serves every byte again", || async {
        read_all(at(hurt), "s").await.as_deref() == Some(expected.as_slice())
    })
    .await;
    // Each is whole again: fetched from a peer (the damage found on a
    // read or by the repair pass), or written again from the node's own
    // hot bytes when the flush that made it was in the log it replayed.
    let leader_root = dir.join(format!("node-{leader}")).join("segments");
    let whole = |name: &str| {
        std::fs::read(root.join(name)).ok() == std::fs::read(leader_root.join(name)).ok()
    };
    until("both files are whole again", || async {
        whole(&files[0]) && whole(&files[1])
    })
    .await;
    // Reads that need message starts (an offset inside a message) find
    // every sidecar whole again: the cut one comes from a peer.
    for i in 0..64u64 {
        let url = format!("/v1/stream/s?offset={}", off(i * 4096 + 1));
        let r = request(at(hurt), "GET", &url, &[], b"").await.unwrap();
        assert_eq!(r.status, 200, "{url}");
        assert!(
            r.body.starts_with(&body(usize::try_from(i).unwrap())),
            "{url} starts at its message"
        );
    }
    assert_eq!(
        std::fs::metadata(&cut_sidecar).unwrap().len(),
        sidecar_len,
        "the cut sidecar has its length again"
    );
    assert_eq!(
        std::fs::metadata(&cut).unwrap().len(),
        len,
        "the cut file has its length again"
    );
}

/// A cluster grown by joins keeps a copy of every flushed object on every
/// node, as a static one does: node 1 starts alone (a cluster of one: it
/// has a cluster token), flushes a stream's bytes to its segment files,
/// nodes 2 and 3 join and fetch those objects, write their own copies of
/// what is flushed afterwards, and serve both streams whole once node 1
/// is gone.
/// Waits until, as the node at `addr` sees it, nodes 1 to 3 vote in
/// every group, no change of voters half done (a group between {1, 2}
/// and {1, 2, 3} names all three as voters, but needs node 1 for a
/// majority of the old ones).
async fn voters_everywhere(addr: SocketAddr) {
    crate::cluster::cluster_status(addr, "three voters in every group", |v| {
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["voters"] == serde_json::json!([1, 2, 3]) && g.get("joint").is_none())
    })
    .await;
}

/// A node of a cluster grown by joins from node 1 (the cluster token in
/// `dir/cluster-token`), with the flushing and repair flags of the
/// static clusters above and placement rounds every 200 ms (joined
/// nodes are voters within a few seconds).
fn joining_args(dir: &Path, ports: &[u16], id: u64, groups: usize) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--listen".into(),
        format!("127.0.0.1:{}", ports[(id - 1) as usize]),
        "--data-dir".into(),
        dir.join(format!("node-{id}")).display().to_string(),
        "--node-id".into(),
        id.to_string(),
        "--groups".into(),
        groups.to_string(),
        "--cluster-token-file".into(),
        dir.join("cluster-token").display().to_string(),
    ];
    if id > 1 {
        args.extend(["--join".into(), format!("http://127.0.0.1:{}", ports[0])]);
    }
    let static_args = node_args(dir, id, ports);
    let flags = static_args
        .iter()
        .position(|a| a == "--cold-flush-bytes")
        .unwrap();
    args.extend(static_args[flags..].iter().cloned());
    args.extend(["--leader-balance-interval-ms".into(), "200".into()]);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_grown_by_joins_keeps_a_copy_on_every_node() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let token = dir.join("cluster-token");
    std::fs::write(&token, "a-cluster-token-of-enough-length").unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let args = |id: u64| joining_args(dir, &ports, id, 2);
    let mut nodes = vec![Some(start_args(&args(1)))];
    let first = nodes[0].as_ref().unwrap().addr;
    agreed_leader(&[first]).await;
    let before = fill(first, "before", 64).await;
    until("node 1 flushed the stream", || async {
        !segment_files(dir, 1).is_empty()
    })
    .await;
    for id in [2, 3] {
        nodes.push(Some(start_args(&args(id))));
    }
    let addrs: Vec<SocketAddr> = nodes.iter().flatten().map(|n| n.addr).collect();
    agreed_leader(&addrs).await;
    let after = fill(addrs[1], "after", 64).await;
    until("every node holds node 1's objects", || async {
        let all = segment_files(dir, 1);
        all.len() >= 2 && (2..=3).all(|id| segment_files(dir, id) == all)
    })
    .await;
    // Node 1 may go only once every group has all three voters: a group
    // still voting on {1, 2} would have no majority without it.
    voters_everywhere(addrs[1]).await;
    // And once every node's health is `ok` (it holds its groups, each
    // with a leader). Without this wait, under CPU load about one run in
    // ten had a node pass the reads on to node 1 after the kill and answer
    // 503 for the whole minute; with it, none in 40.
    for at in &addrs {
        until(&format!("{at} holds its groups"), || async {
            request(*at, "GET", "/__strand/health", &[], b"")
                .await
                .ok()
                .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
                .is_some_and(|health| health["status"] == "ok")
        })
        .await;
    }
    nodes[0].take().unwrap().kill9();
    for at in &addrs[1..] {
        for (name, want) in [("before", &before), ("after", &after)] {
            until(&format!("{name} whole on {at} without node 1"), || async {
                read_all(*at, name).await.as_ref() == Some(want)
            })
            .await;
        }
    }
}

/// Which groups' objects a node keeps a copy of: the first component of
/// its segment files' paths (`g001`, …).
fn groups_kept(dir: &Path, id: u64) -> BTreeSet<String> {
    segment_files(dir, id)
        .iter()
        .filter_map(|f| f.split('/').next().map(str::to_owned))
        .collect()
}

/// Whether node `id` forgot group `g`: the marker is in the group's
/// directory, which holds no snapshot and a log of its vote alone.
fn forgot(dir: &Path, id: u64, g: usize) -> bool {
    let group = dir.join(format!("node-{id}/group-{g}"));
    let files = |d: &Path| -> Vec<std::fs::DirEntry> {
        std::fs::read_dir(d)
            .map(|r| r.flatten().collect())
            .unwrap_or_default()
    };
    let log_bytes: u64 = files(&group.join("log"))
        .iter()
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum();
    let snapshots = files(&group)
        .iter()
        .filter(|f| f.file_name().to_string_lossy().ends_with(".data"))
        .count();
    group.join("forgotten").exists() && snapshots == 0 && log_bytes < 1024
}

/// A node the placement moves off a group deletes its copy of the
/// group's objects and forgets the group: three nodes (four groups,
/// every node a voter of each) hold flushed streams; a fourth joins and
/// takes three votes, so three groups each drop one of the first nodes.
/// Once the grace has passed, every group's objects are kept by exactly
/// its voters (the new node fetched its copies), each dropped node's
/// directory of the group holds nothing but its vote, and every node
/// still serves every stream whole. Then the fourth node leaves: the
/// groups come back to the nodes that forgot them, which serve them
/// whole again from their own state once the fourth is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_moved_off_a_group_deletes_its_copy() {
    const GROUPS: usize = 4;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let token = dir.join("cluster-token");
    std::fs::write(&token, "a-cluster-token-of-enough-length").unwrap();
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let args = |id: u64| joining_args(dir, &ports, id, GROUPS);
    let mut nodes = vec![start_args(&args(1))];
    agreed_leader(&[nodes[0].addr]).await;
    for id in [2, 3] {
        nodes.push(start_args(&args(id)));
    }
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    agreed_leader(&addrs).await;
    voters_everywhere(addrs[0]).await;
    let names: Vec<String> = (0..8).map(|i| format!("moved-{i}")).collect();
    let mut streams = Vec::new();
    for (i, name) in names.iter().enumerate() {
        streams.push(fill(addrs[i % 3], name, 24).await);
    }
    let flushed: BTreeSet<String> = (1..=GROUPS - 1).map(|g| format!("g{g:03}")).collect();
    until("every group but 0 flushed on every node", || async {
        (1..=3).all(|id| groups_kept(dir, id).is_superset(&flushed))
    })
    .await;
    nodes.push(start_args(&args(4)));
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    let status = crate::cluster::cluster_status(addrs[0], "node 4 votes in three groups", |v| {
        let groups = v["groups"].as_array().unwrap();
        groups
            .iter()
            .filter(|g| {
                g["voters"]
                    .as_array()
                    .unwrap()
                    .contains(&serde_json::json!(4))
            })
            .count()
            == 3
            && groups.iter().all(|g| {
                g["voters"].as_array().unwrap().len() == 3
                    && (g["group"] == 0 || g["learners"].as_array().unwrap().is_empty())
            })
    })
    .await;
    // Each group's objects end up on its voters only.
    let voters_of = |g: usize| -> BTreeSet<u64> {
        status["groups"][g]["voters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    let dropped: Vec<(usize, u64)> = (1..GROUPS)
        .flat_map(|g| {
            (1..=3u64)
                .filter(move |id| !voters_of(g).contains(id))
                .map(move |id| (g, id))
        })
        .collect();
    assert!(!dropped.is_empty(), "no node lost a vote: {status}");
    until("every group's objects kept by its voters only", || async {
        (1..GROUPS).all(|g| {
            let prefix = format!("g{g:03}");
            (1..=4u64)
                .all(|id| groups_kept(dir, id).contains(&prefix) == voters_of(g).contains(&id))
        })
    })
    .await;
    // The directories first, then each node's count (it counts a group
    // once its Raft node runs again on the new directory).
    until("every dropped node forgot its groups", || async {
        dropped.iter().all(|&(g, id)| forgot(dir, id, g))
    })
    .await;
    for id in 1..=3u64 {
        let count = dropped.iter().filter(|(_, n)| *n == id).count() as u64;
        until(
            &format!("node {id} counts {count} groups forgotten"),
            || async {
                let Ok(r) = request(
                    addrs[(id - 1) as usize],
                    "GET",
                    "/__strand/health",
                    &[],
                    b"",
                )
                .await
                else {
                    return false;
                };
                let health: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                health["balance"]["groups_forgotten"].as_u64() == Some(count)
            },
        )
        .await;
    }
    for at in &addrs {
        for (name, want) in names.iter().zip(&streams) {
            until(&format!("{name} whole on {at}"), || async {
                read_all(*at, name).await.as_ref() == Some(want)
            })
            .await;
        }
    }
    eprintln!(
        "groups dropped, (group, node): {dropped:?}; their copies deleted, the groups forgotten"
    );
    // A restart finds a forgotten group as it was left, nothing started in
    // its place: node 1 (which started the cluster alone) and each node
    // that forgot a group come back and serve every stream whole.
    let restarted: BTreeSet<u64> = dropped.iter().map(|(_, id)| *id).chain([1]).collect();
    for &id in &restarted {
        let at = (id - 1) as usize;
        nodes.remove(at).kill9();
        nodes.insert(at, start_args(&args(id)));
        for (name, want) in names.iter().zip(&streams) {
            until(&format!("{name} whole on node {id} restarted"), || async {
                read_all(addrs[at], name).await.as_ref() == Some(want)
            })
            .await;
        }
    }
    assert!(dropped.iter().all(|&(g, id)| forgot(dir, id, g)));
    // Node 4 leaves: its votes go back to the nodes that forgot the
    // groups, which receive them whole (a snapshot, then the log).
    crate::cluster::operate(process::admin_addr(addrs[0]), "/__strand/cluster/remove/4").await;
    voters_everywhere(addrs[0]).await;
    until("the returned groups' marks gone", || async {
        dropped
            .iter()
            .all(|&(g, id)| !dir.join(format!("node-{id}/group-{g}/forgotten")).exists())
    })
    .await;
    nodes.pop().unwrap().kill9();
    for at in &addrs[..3] {
        for (name, want) in names.iter().zip(&streams) {
            until(&format!("{name} whole on {at} without node 4"), || async {
                read_all(*at, name).await.as_ref() == Some(want)
            })
            .await;
        }
    }
}
