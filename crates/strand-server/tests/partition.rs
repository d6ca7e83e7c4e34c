//! A network partition in a 3-node loopback cluster of `strand-server`
//! processes. Every node reaches every other through a one-way TCP proxy
//! of this test (node A's `--peer B=...` names the proxy of A→B; its
//! entry for itself is its real listener), so the test can cut any node
//! off: a blocked proxy closes new connections at once and stalls the
//! open ones (their bytes are held, then dropped when the block ends).
//!
//! The cluster runs with authentication on and a cluster token, so the
//! Raft traffic is authenticated too. The scenario: writes through the
//! leader; a follower cut off while the majority keeps acknowledging
//! writes, and writes sent to the cut-off follower never acknowledged;
//! heal, and it catches up; then the leader cut off alone: writes sent to
//! it are never acknowledged while it is cut off, the other two elect a
//! new leader and keep acknowledging; heal. Each write sent to a cut-off
//! node (a probe, its own idempotent producer) is retried after the heal
//! until acknowledged: deduplicated if it was committed meanwhile (the
//! cut-off leader forwards its pending writes to the new leader once it
//! hears of it), appended if not. At the end every node holds the same
//! bytes: every acknowledged write exactly once at its acknowledged
//! offset, nothing else.
//!
//! `cargo xtask faults` runs more partition rounds and writes
//! (`STRAND_PARTITION_ROUNDS`, `STRAND_PARTITION_WRITES`).
#![allow(clippy::unwrap_used)]

use crate::{common, process};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::eventually;
use process::{Reply, Server, free_port, parse_offset, request, start_args};
use strand_server::auth::{Claims, Right, sign_hs256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const SECRET: &[u8] = b"partition-test-secret-0123456789";
const CLUSTER_TOKEN: &str = "partition-cluster-token-0123456789";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A proxy's state: `epoch` counts the blocks, so a connection knows
/// whether a block began after it opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LinkState {
    blocked: bool,
    epoch: u64,
}

/// One direction of one node pair: a listener whose connections are
/// forwarded to the target node's real listener.
struct Link {
    port: u16,
    state: watch::Sender<LinkState>,
}

impl Link {
    async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (state, rx) = watch::channel(LinkState {
            blocked: false,
            epoch: 0,
        });
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let now = *rx.borrow();
                if now.blocked {
                    // Refused: closed at once.
                    drop(client);
                    continue;
                }
                let rx = rx.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(
                        pipe(cr, sw, rx.clone(), now.epoch),
                        pipe(sr, cw, rx, now.epoch)
                    );
                });
            }
        });
        Self { port, state }
    }

    fn set_blocked(&self, blocked: bool) {
        self.state.send_modify(|s| {
            if blocked && !s.blocked {
                s.epoch += 1;
            }
            s.blocked = blocked;
        });
    }
}

/// Copies one direction of a proxied connection until either end closes.
/// Once a block begins (the epoch moves past `epoch`), nothing more is
/// forwarded: the connection stalls until the block ends, then is
/// dropped without delivering what it held.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut state: watch::Receiver<LinkState>,
    epoch: u64,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if state.borrow().epoch != epoch {
            // Cut off: stall while the block lasts, then drop.
            while state.borrow().blocked {
                if state.changed().await.is_err() {
                    return;
                }
            }
            return;
        }
        tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => {
                    let _ = to.shutdown().await;
                    return;
                }
                Ok(n) => {
                    if state.borrow().epoch != epoch {
                        continue;
                    }
                    if to.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            },
            changed = state.changed() => if changed.is_err() {
                return;
            },
        }
    }
}

/// The cluster's proxies: `links[(a, b)]` carries node a's traffic to b.
struct Net {
    links: BTreeMap<(u64, u64), Link>,
}

impl Net {
    /// Cuts `node` off from the others, both ways.
    fn isolate(&self, node: u64) {
        for ((a, b), link) in &self.links {
            if *a == node || *b == node {
                link.set_blocked(true);
            }
        }
    }

    fn heal(&self) {
        for link in self.links.values() {
            link.set_blocked(false);
        }
    }
}

fn node_args(dir: &Path, id: u64, ports: &[u16], net: &Net) -> Vec<String> {
    let mut args: Vec<String> = [
        "--listen",
        &format!("127.0.0.1:{}", ports[(id - 1) as usize]),
        "--groups",
        "1",
        "--data-dir",
        &dir.join(format!("node-{id}")).display().to_string(),
        "--node-id",
        &id.to_string(),
        "--snapshot-every",
        "50",
        "--auth-secret-file",
        &dir.join("secret").display().to_string(),
        "--cluster-token-file",
        &dir.join("cluster-token").display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for peer in 1..=3u64 {
        let port = if peer == id {
            ports[(id - 1) as usize]
        } else {
            net.links[&(id, peer)].port
        };
        args.push("--peer".to_owned());
        args.push(format!("{peer}=http://127.0.0.1:{port}"));
    }
    args
}

fn bearer() -> String {
    let claims = Claims {
        sub: "partition".into(),
        exp: 4_102_444_800,
        grants: [("default".to_owned(), vec![Right::Read, Right::Write])]
            .into_iter()
            .collect(),
    };
    format!("Bearer {}", sign_hs256(SECRET, &claims).unwrap())
}

/// One request with a deadline; `None` when it got no answer in time (or
/// the connection failed).
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
    within: Duration,
) -> Option<Reply> {
    let mut all = vec![("Authorization", bearer())];
    all.extend(headers.iter().cloned());
    match tokio::time::timeout(within, request(addr, method, path, &all, body)).await {
        Ok(Ok(reply)) => Some(reply),
        _ => None,
    }
}

/// The leader every node of `addrs` reports, once they agree (`what`
/// names the wait).
async fn agreed_leader(addrs: &[SocketAddr], deadline: Duration, what: &str) -> u64 {
    eventually(what, deadline, || async {
        let mut leaders = Vec::new();
        for addr in addrs {
            let health = send(
                *addr,
                "GET",
                "/__strand/health",
                &[],
                b"",
                Duration::from_secs(2),
            )
            .await;
            leaders.push(match health {
                Some(r) if r.status == 200 => {
                    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                    v["groups"][0]["leader"].as_u64()
                }
                _ => None,
            });
        }
        match leaders.first() {
            Some(Some(first)) if leaders.iter().all(|l| *l == Some(*first)) => Some(*first),
            _ => None,
        }
    })
    .await
}

/// The stream as `addr` holds it.
async fn read(addr: SocketAddr) -> Option<Vec<u8>> {
    let r = send(
        addr,
        "GET",
        "/v1/stream/p?offset=-1",
        &[],
        b"",
        Duration::from_secs(5),
    )
    .await?;
    (r.status == 200).then_some(r.body)
}

/// Sends one idempotent write (`producer` at `seq`) until it is
/// acknowledged, through `addrs` in turn, retrying on 503 and on no
/// answer; returns the acknowledged next offset.
async fn write_until_acked(
    addrs: &[SocketAddr],
    producer: &str,
    seq: u64,
    token: &str,
    retries: &mut u64,
) -> u64 {
    let mut attempts = 0usize;
    let next = eventually(
        &format!("{token} acknowledged"),
        Duration::from_secs(60),
        || {
            let addr = addrs[(attempts + seq as usize) % addrs.len()];
            attempts += 1;
            async move {
                let reply = send(
                    addr,
                    "POST",
                    "/v1/stream/p",
                    &[
                        ("Content-Type", "text/plain".to_owned()),
                        ("Producer-Id", producer.to_owned()),
                        ("Producer-Epoch", "0".to_owned()),
                        ("Producer-Seq", seq.to_string()),
                    ],
                    token.as_bytes(),
                    Duration::from_secs(3),
                )
                .await;
                match reply {
                    Some(r) if r.status == 200 || r.status == 204 => {
                        Some(parse_offset(r.header("stream-next-offset").unwrap()))
                    }
                    Some(r) if r.status == 503 => None,
                    Some(r) => panic!("{token}: {} {}", r.status, String::from_utf8_lossy(&r.body)),
                    None => None,
                }
            }
        },
    )
    .await;
    *retries += attempts as u64 - 1;
    next
}

/// Every acknowledged write: the majority's writer (producer `w`) and the
/// probes once retried after the heal.
#[derive(Default)]
struct Acks {
    seq: u64,
    /// `(token, acknowledged next offset)`.
    acked: Vec<(String, u64)>,
    retries: u64,
}

impl Acks {
    /// The writer's next write.
    async fn write(&mut self, addrs: &[SocketAddr]) {
        let seq = self.seq;
        let token = format!("w{seq};");
        let next = write_until_acked(addrs, "w", seq, &token, &mut self.retries).await;
        self.acked.push((token, next));
        self.seq += 1;
    }

    /// The bytes every node must hold: the acknowledged writes in offset
    /// order, each ending where it was acknowledged (so none is missing,
    /// doubled or moved).
    fn expected(&self) -> Vec<u8> {
        let mut sorted = self.acked.clone();
        sorted.sort_by_key(|(_, next)| *next);
        let mut body = Vec::new();
        for (token, next) in &sorted {
            body.extend_from_slice(token.as_bytes());
            assert_eq!(
                body.len() as u64,
                *next,
                "{token} was acknowledged at {next}: the acknowledged writes overlap or leave a gap"
            );
        }
        body
    }
}

/// The writes sent to a cut-off node, and how it answered them.
#[derive(Debug, Default)]
struct Probes {
    /// `(producer, token)`, each its own producer at sequence 0.
    sent: Vec<(String, String)>,
    unavailable: u64,
    timed_out: u64,
    /// Probes found committed after the heal, before their retry.
    landed: u64,
}

/// Sends `n` writes to the cut-off node at `addr`, each given `within` to
/// answer: none may be acknowledged (a 2xx fails the test).
async fn probe(addr: SocketAddr, name: String, n: u64, within: Duration, probes: &mut Probes) {
    for k in 0..n {
        let producer = format!("{name}-{k}");
        let token = format!("{producer};");
        let reply = send(
            addr,
            "POST",
            "/v1/stream/p",
            &[
                ("Content-Type", "text/plain".to_owned()),
                ("Producer-Id", producer.clone()),
                ("Producer-Epoch", "0".to_owned()),
                ("Producer-Seq", "0".to_owned()),
            ],
            token.as_bytes(),
            within,
        )
        .await;
        probes.sent.push((producer, token));
        match reply {
            None => probes.timed_out += 1,
            Some(r) if r.status == 503 => probes.unavailable += 1,
            Some(r) => panic!(
                "a write sent to the cut-off node got {} {} (a minority must not acknowledge)",
                r.status,
                String::from_utf8_lossy(&r.body)
            ),
        }
    }
}

/// After the heal, each probe is retried (same producer, same sequence)
/// until acknowledged: one that was committed meanwhile (a cut-off leader
/// forwards its pending writes to the new leader once it hears of it) is
/// deduplicated, one that was not is appended now; either way it then
/// counts as an acknowledged write.
async fn retry_probes(addrs: &[SocketAddr], probes: &mut Probes, from: usize, acks: &mut Acks) {
    let now = read(addrs[0]).await.unwrap_or_default();
    let now = String::from_utf8(now).unwrap();
    for (producer, token) in &probes.sent[from..] {
        if now.contains(token.as_str()) {
            probes.landed += 1;
        }
        let next = write_until_acked(addrs, producer, 0, token, &mut acks.retries).await;
        acks.acked.push((token.clone(), next));
    }
}

/// Polls until `addr` holds exactly `expected` (`what` names the wait).
async fn caught_up(addr: SocketAddr, expected: &[u8], what: &str) {
    eventually(what, Duration::from_secs(30), || async {
        read(addr)
            .await
            .is_some_and(|b| b == expected)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_never_acknowledges_and_catches_up_after_the_partition() {
    let rounds = env_or("STRAND_PARTITION_ROUNDS", 1);
    let writes = env_or("STRAND_PARTITION_WRITES", 30);
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("secret"), SECRET).unwrap();
    std::fs::write(tmp.path().join("cluster-token"), CLUSTER_TOKEN).unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut links = BTreeMap::new();
    for a in 1..=3u64 {
        for b in 1..=3u64 {
            if a != b {
                links.insert((a, b), Link::start(ports[(b - 1) as usize]).await);
            }
        }
    }
    let net = Net { links };
    // Killed when dropped, at the end or when the test panics.
    let nodes: Vec<Server> = (1..=3)
        .map(|id| start_args(&node_args(tmp.path(), id, &ports, &net)))
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    let addr_of = |id: u64| addrs[(id - 1) as usize];
    let mut leader = agreed_leader(
        &addrs,
        Duration::from_secs(60),
        "the cluster elects a leader",
    )
    .await;

    // Without the client's token the cluster refuses; with it, a create.
    let r = request(addr_of(leader), "PUT", "/v1/stream/p", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 401);
    let r = send(
        addr_of(leader),
        "PUT",
        "/v1/stream/p",
        &[("Content-Type", "text/plain".to_owned())],
        b"",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let mut acks = Acks::default();
    for _ in 0..10 {
        acks.write(&[addr_of(leader)]).await;
    }
    let mut follower_probes = Probes::default();
    let mut leader_probes = Probes::default();
    let mut follower_catch_up = Vec::new();
    let mut leader_catch_up = Vec::new();
    let mut failovers = Vec::new();
    for round in 0..rounds {
        // A follower cut off; the majority goes on.
        let cut = (1..=3u64).find(|id| *id != leader).unwrap();
        let majority: Vec<SocketAddr> = (1..=3u64).filter(|id| *id != cut).map(addr_of).collect();
        net.isolate(cut);
        let first_probe = follower_probes.sent.len();
        let probing = probe(
            addr_of(cut),
            format!("f{round}"),
            3,
            Duration::from_secs(1),
            &mut follower_probes,
        );
        let writing = async {
            for _ in 0..writes {
                acks.write(&majority).await;
            }
        };
        tokio::join!(probing, writing);
        let expected = acks.expected();
        let held = read(addr_of(cut)).await.unwrap_or_default();
        assert!(
            held.len() < expected.len() && expected.starts_with(&held),
            "the cut-off follower holds writes it cannot have received"
        );
        net.heal();
        let healed = Instant::now();
        caught_up(
            addr_of(cut),
            &expected,
            "the follower catches up after the heal",
        )
        .await;
        follower_catch_up.push(healed.elapsed());
        retry_probes(&majority, &mut follower_probes, first_probe, &mut acks).await;

        // The leader cut off alone: it is the minority now.
        let old = agreed_leader(&addrs, Duration::from_secs(30), "one leader after the heal").await;
        let majority: Vec<SocketAddr> = (1..=3u64).filter(|id| *id != old).map(addr_of).collect();
        net.isolate(old);
        let cut_at = Instant::now();
        let first_probe = leader_probes.sent.len();
        let probing = probe(
            addr_of(old),
            format!("l{round}"),
            3,
            Duration::from_secs(1),
            &mut leader_probes,
        );
        let writing = async {
            acks.write(&majority).await;
            let failover = cut_at.elapsed();
            for _ in 1..writes {
                acks.write(&majority).await;
            }
            failover
        };
        let ((), failover) = tokio::join!(probing, writing);
        failovers.push(failover);
        let new_leader = agreed_leader(
            &majority,
            Duration::from_secs(30),
            "the majority agrees on a leader",
        )
        .await;
        assert_ne!(new_leader, old, "the cut-off leader cannot stay the leader");
        let held = read(addr_of(old)).await.unwrap_or_default();
        assert!(
            acks.expected().starts_with(&held),
            "the cut-off leader serves bytes nobody acknowledged"
        );
        net.heal();
        let healed = Instant::now();
        leader = agreed_leader(&addrs, Duration::from_secs(30), "one leader after the heal").await;
        retry_probes(&majority, &mut leader_probes, first_probe, &mut acks).await;
        let expected = acks.expected();
        for addr in &addrs {
            caught_up(
                *addr,
                &expected,
                &format!("{addr} holds every acknowledged write once, at its offset"),
            )
            .await;
        }
        leader_catch_up.push(healed.elapsed());
    }
    // The retried probes hold no second copy; every node the same bytes.
    let expected = acks.expected();
    for addr in &addrs {
        assert_eq!(read(*addr).await.unwrap(), expected, "{addr}");
    }
    let probes = follower_probes.sent.len() + leader_probes.sent.len();
    eprintln!(
        "partition: {} acknowledged writes ({} of them probes retried after the heal; {} retries), \
         lost 0, duplicates 0; cut-off follower: {} probes, {} answered 503, {} timed out, \
         none acknowledged, caught up in {:?}; cut-off leader: {} probes, {} answered 503, \
         {} timed out, none acknowledged ({} committed after the heal, before their retry), \
         majority acknowledged again {:?} after the cut, all nodes equal {:?} after the heal; \
         {:?} in all",
        acks.acked.len(),
        probes,
        acks.retries,
        follower_probes.sent.len(),
        follower_probes.unavailable,
        follower_probes.timed_out,
        follower_catch_up,
        leader_probes.sent.len(),
        leader_probes.unavailable,
        leader_probes.timed_out,
        leader_probes.landed,
        failovers,
        leader_catch_up,
        started.elapsed(),
    );
    drop(nodes);
}

/// A partition during a membership change: five nodes of four groups
/// (three voters each), every pair through a proxy, a cluster token,
/// producers writing through nodes that stay connected. Each round
/// drains a member, asks group 0's leader itself to remove it, and cuts
/// that leader off from everyone a few milliseconds later — before, while
/// or after it changes group 0's membership (0 ms, then 20 ms). The
/// others elect a new leader of group 0; whatever the cut leader had
/// begun either completes there (a new leader finishes a joint
/// configuration) or never happened, and after the heal the removal,
/// asked again, completes: every group has three voters spread over the
/// members left and one leader. Every acknowledged append is then on
/// every member once, at its offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_during_a_membership_change() {
    use crate::cluster::{Writers, all_ready, cluster_status, leaderships, node_state, operate};
    const NODES: u64 = 5;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("cluster-token"), CLUSTER_TOKEN).unwrap();
    let ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let mut links = BTreeMap::new();
    for a in 1..=NODES {
        for b in 1..=NODES {
            if a != b {
                links.insert((a, b), Link::start(ports[(b - 1) as usize]).await);
            }
        }
    }
    let net = Net { links };
    let args = |id: u64| {
        let mut args: Vec<String> = [
            "--listen",
            &format!("127.0.0.1:{}", ports[(id - 1) as usize]),
            "--groups",
            "4",
            "--data-dir",
            &tmp.path().join(format!("node-{id}")).display().to_string(),
            "--node-id",
            &id.to_string(),
            "--cluster-token-file",
            &tmp.path().join("cluster-token").display().to_string(),
            "--admin-listen",
            "127.0.0.1:0",
            "--leader-balance-interval-ms",
            "200",
            "--dead-node-timeout-ms",
            "0",
        ]
        .map(str::to_owned)
        .to_vec();
        for peer in 1..=NODES {
            let port = if peer == id {
                ports[(id - 1) as usize]
            } else {
                net.links[&(id, peer)].port
            };
            args.push("--peer".to_owned());
            args.push(format!("{peer}=http://127.0.0.1:{port}"));
        }
        args
    };
    let mut nodes: Vec<Option<Server>> =
        (1..=NODES).map(|id| Some(start_args(&args(id)))).collect();
    let addrs: Vec<SocketAddr> = nodes.iter().flatten().map(|n| n.addr).collect();
    all_ready(&addrs, Duration::from_secs(90)).await;
    let settled = |members: Vec<u64>| {
        move |v: &serde_json::Value| {
            let mut votes = BTreeMap::new();
            let shaped = v["groups"].as_array().unwrap().iter().all(|g| {
                let voters = g["voters"].as_array().unwrap();
                let learners = g["learners"].as_array().unwrap();
                for id in voters {
                    *votes.entry(id.as_u64().unwrap()).or_insert(0usize) += 1;
                }
                voters.len() == 3
                    && voters
                        .iter()
                        .all(|v| v.as_u64().is_some_and(|v| members.contains(&v)))
                    && learners.len() == crate::cluster::settled_learners(g, members.len())
                    && voters.contains(&g["leader"])
            });
            let counts: Vec<usize> = members
                .iter()
                .map(|m| votes.get(m).copied().unwrap_or(0))
                .collect();
            shaped
                && counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1
                && members.iter().all(|&m| node_state(v, m) == "up")
        }
    };
    let mut members: Vec<u64> = (1..=NODES).collect();
    cluster_status(addrs[0], "placed", settled(members.clone())).await;
    // Producers write through nodes 1 and 2, which stay members and are
    // never cut off (each round cuts a leader among nodes 3 to 5, below).
    let writers = Writers::start(&addrs[..2], 4);
    for (round, delay_ms) in [0u64, 20].into_iter().enumerate() {
        // Group 0's leadership goes to one of nodes 3 to 5 (the one cut
        // off), the member to remove is another of them.
        let status = cluster_status(addrs[0], "group 0 led", |v| {
            v["groups"][0]["leader"].as_u64().is_some()
        })
        .await;
        let leader = status["groups"][0]["leader"].as_u64().unwrap();
        let cut = if leader >= 3 && members.contains(&leader) {
            leader
        } else {
            // Drain nodes 1 and 2 until group 0's leadership is elsewhere.
            for id in [1, 2] {
                operate(
                    process::admin_addr(addrs[0]),
                    &format!("/__strand/cluster/drain/{id}"),
                )
                .await;
            }
            let status = cluster_status(addrs[0], "group 0 led by node 3 to 5", |v| {
                let (counts, all_led) = leaderships(v);
                all_led && counts[&1] == 0 && counts[&2] == 0
            })
            .await;
            for id in [1, 2] {
                operate(
                    process::admin_addr(addrs[0]),
                    &format!("/__strand/cluster/undrain/{id}"),
                )
                .await;
            }
            status["groups"][0]["leader"].as_u64().unwrap()
        };
        let gone = *members
            .iter()
            .find(|&&m| m >= 3 && m != cut)
            .expect("another member among nodes 3 to 5");
        // It leads nothing, so the removal goes straight to group 0.
        let admin_of = |id: u64| process::admin_addr(addrs[(id - 1) as usize]);
        operate(admin_of(1), &format!("/__strand/cluster/drain/{gone}")).await;
        cluster_status(addrs[0], "the member to remove leads nothing", |v| {
            let (counts, all_led) = leaderships(v);
            all_led && counts[&gone] == 0
        })
        .await;
        writers.take_longest();
        let started = Instant::now();
        let path = format!("/__strand/cluster/remove/{gone}");
        let to = admin_of(cut);
        let asked = tokio::spawn(async move { request(to, "POST", &path, &[], b"").await });
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        net.isolate(cut);
        // The others go on: group 0 gets a leader among them.
        cluster_status(addrs[0], "a new leader of group 0", |v| {
            v["groups"][0]["leader"].as_u64().is_some_and(|l| l != cut)
        })
        .await;
        let during = writers.take_longest();
        net.heal();
        let first = asked.await.unwrap().map(|r| r.status);
        // Asked again after the heal (or for the first time), it completes.
        operate(admin_of(1), &format!("/__strand/cluster/remove/{gone}")).await;
        members.retain(|&m| m != gone);
        let status = cluster_status(addrs[0], "the removal completes", |v| {
            settled(members.clone())(v) && node_state(v, gone) == "removed"
        })
        .await;
        nodes[(gone - 1) as usize].take().unwrap().kill9();
        eprintln!(
            "round {round}: node {cut} (group 0's leader) cut off {delay_ms} ms after it was asked \
             to remove node {gone}: its answer {first:?}; settled after {:?}; longest wait for an \
             ack while cut off {during:?}; group 0 now led by {}",
            started.elapsed(),
            status["groups"][0]["leader"]
        );
    }
    let live: Vec<SocketAddr> = members.iter().map(|&m| addrs[(m - 1) as usize]).collect();
    let (total, _) = writers.stop_and_verify(&live).await;
    eprintln!("membership partition: {total} acknowledged appends, lost 0, duplicates 0");
    for node in nodes.into_iter().flatten() {
        node.kill9();
    }
}
