//! The cold tier on durable nodes, through the `strand-server` binary:
//! a node whose hot data was partly flushed restarts (after SIGKILL and
//! after SIGTERM) and reads every byte back, keeps flushing, and its
//! orphan sweep deletes only unreferenced old objects; and a 3-node
//! cluster sharing one `--cold-dir`, where only the leader flushes and
//! every node reads the flushed ranges.
#![allow(clippy::unwrap_used)]

use crate::{common, process};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::eventually;
use process::{Server, eventually_blocking, free_port, parse_offset, start_args};
use strand_server::offsets::render as off;

/// The byte at `offset` of stream `s`: different per stream and place.
fn byte_at(s: usize, offset: u64) -> u8 {
    b'a' + u8::try_from((s as u64 * 11 + offset * 7 + offset / 97) % 26).unwrap()
}

fn bytes(s: usize, range: std::ops::Range<u64>) -> Vec<u8> {
    range.map(|o| byte_at(s, o)).collect()
}

/// Tiny flush thresholds, so a few hundred KiB pass through the tiers
/// (and every stream's bytes join a flush, however few it holds).
const TINY_FLUSHES: [&str; 10] = [
    "--cold-flush-bytes",
    "16384",
    "--cold-piece-bytes",
    "1",
    "--cold-chunk-bytes",
    "16384",
    "--cold-pack-bytes",
    "65536",
    "--cold-flush-interval-ms",
    "5",
];

/// The flags of a node with a tiny flush threshold.
fn cold_args(cold: &Path) -> Vec<String> {
    let mut args: Vec<String> = TINY_FLUSHES.iter().map(|s| (*s).to_owned()).collect();
    args.extend(
        [
            "--admin-listen",
            "127.0.0.1:0",
            "--cold-dir",
            &cold.display().to_string(),
            "--cold-gc-interval-ms",
            "50",
            // Large enough never to refuse; set so the hot gauge is sampled.
            "--max-hot-bytes",
            "67108864",
            "--cold-sweep-interval-ms",
            "100",
            "--cold-orphan-grace-ms",
            "600000",
        ]
        .iter()
        .map(|s| (*s).to_owned()),
    );
    args
}

/// [`request`] with a 5-second bound: a node that never answers is an
/// error like an unreachable one.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<process::Reply> {
    tokio::time::timeout(
        Duration::from_secs(5),
        process::request(addr, method, path, headers, body),
    )
    .await
    .unwrap_or_else(|_| Err(std::io::Error::other("no answer in 5 s")))
}

/// `GET /__strand/cold` of the server at `addr` (on its admin listener).
async fn cold_report(addr: SocketAddr) -> Option<serde_json::Value> {
    let r = request(process::admin_addr(addr), "GET", "/__strand/cold", &[], b"")
        .await
        .ok()?;
    (r.status == 200).then(|| serde_json::from_slice(&r.body).unwrap())
}

/// Polls `addr`'s cold report until `ok` holds (at most `secs`).
async fn report_until(
    addr: SocketAddr,
    secs: u64,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    eventually(
        &format!("{addr}: the cold report gets there"),
        Duration::from_secs(secs),
        || async { cold_report(addr).await.filter(|v| ok(v)) },
    )
    .await
}

/// Sends a request again while it answers 503 or the node is unreachable.
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> process::Reply {
    eventually(
        &format!("{method} {path} on {addr}: an answer other than 503"),
        Duration::from_secs(30),
        || async {
            request(addr, method, path, headers, body)
                .await
                .ok()
                .filter(|r| r.status != 503)
        },
    )
    .await
}

fn text() -> Vec<(&'static str, String)> {
    vec![("Content-Type", "text/plain".to_owned())]
}

async fn create(addr: SocketAddr, s: usize) {
    let r = send(addr, "PUT", &format!("/v1/stream/s{s}"), &text(), b"").await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

/// Appends `[from, to)` of stream `s` in pieces of `piece` bytes.
async fn fill(addr: SocketAddr, s: usize, from: u64, to: u64, piece: u64) {
    let mut at = from;
    while at < to {
        let end = (at + piece).min(to);
        let path = format!("/v1/stream/s{s}");
        let r = send(addr, "POST", &path, &text(), &bytes(s, at..end)).await;
        assert_eq!(
            r.status,
            204,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(parse_offset(r.header("stream-next-offset").unwrap()), end);
        at = end;
    }
}

/// Catch-up reads of stream `s` from `from` (`None`: `-1`, on the
/// Durable Streams mount) to the tail. Reads from an offset go through the
/// bucketed layout, which reads exact byte offsets (the mount reads an
/// offset inside a hot message from the message's start).
async fn read_from(addr: SocketAddr, s: usize, from: Option<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = from.map_or_else(|| "-1".to_owned(), off);
    let stream = if from.is_some() {
        format!("/default/s{s}")
    } else {
        format!("/v1/stream/s{s}")
    };
    for _ in 0..1_000 {
        let path = format!("{stream}?offset={offset}");
        let r = send(addr, "GET", &path, &[], b"").await;
        assert_eq!(
            r.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        out.extend_from_slice(&r.body);
        offset = r.header("stream-next-offset").unwrap().to_owned();
        if r.header("stream-up-to-date") == Some("true") {
            return out;
        }
    }
    panic!("s{s} never caught up");
}

/// Every stream of `lens` reads back byte-exact from `addr`: from `-1`
/// and from offsets inside it (across the cold/hot boundary).
async fn verify(addr: SocketAddr, lens: &[u64]) {
    for (s, len) in lens.iter().copied().enumerate() {
        assert!(
            read_from(addr, s, None).await == bytes(s, 0..len),
            "{addr} s{s}: catch-up from -1 differs"
        );
        for from in [1, len / 3, len / 2 + 17, len - 1] {
            assert!(
                read_from(addr, s, Some(from)).await == bytes(s, from..len),
                "{addr} s{s}: catch-up from {from} differs"
            );
        }
    }
}

/// The nodes of a test, each taken out when the test stops it; every node
/// still held is killed when `Nodes` drops (each [`Server`] guards its
/// process), so a failed assertion does not leave processes behind.
struct Nodes(Vec<Option<Server>>);

impl Nodes {
    fn addr(&self, i: usize) -> SocketAddr {
        self.0[i].as_ref().unwrap().addr
    }

    fn take(&mut self, i: usize) -> Server {
        self.0[i].take().unwrap()
    }
}

/// Sends SIGTERM and waits (bounded) for a clean exit.
fn terminate(mut server: Server) {
    let pid = server.child.id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    // A node that does not stop is killed when `server` drops.
    let exit = eventually_blocking(
        "the node stops after SIGTERM",
        Duration::from_secs(10),
        || server.child.try_wait().unwrap(),
    );
    assert!(exit.success(), "SIGTERM: {exit:?}");
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

fn set_age(path: &Path, age: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_flushed_durable_node_restarts_with_every_byte() {
    const STREAMS: usize = 6;
    const FLUSHED: u64 = 48 * 1024;
    const HOT: u64 = 1024;
    let tmp = tempfile::tempdir().unwrap();
    let (data, cold) = (tmp.path().join("data"), tmp.path().join("cold"));
    let mut args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--groups",
        "2",
        "--data-dir",
        &data.display().to_string(),
        "--snapshot-every",
        "40",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(cold_args(&cold));
    // Never refuses; set so the report has each group's hot bytes.
    args.extend(["--max-group-hot-bytes".to_owned(), "67108864".to_owned()]);

    // 1. Append, let most of it flush, append a little more that stays hot.
    let mut node = Nodes(vec![Some(start_args(&args))]);
    for s in 0..STREAMS {
        create(node.addr(0), s).await;
        fill(node.addr(0), s, 0, FLUSHED, 8 * 1024).await;
    }
    let total = STREAMS as u64 * FLUSHED;
    report_until(node.addr(0), 10, |r| {
        r["flushed_bytes"].as_u64().unwrap() + 2 * 16 * 1024 >= total
    })
    .await;
    let mut lens = vec![FLUSHED; STREAMS];
    // A group drains whole once it reaches the threshold, so a round may
    // flush everything: append small rounds until some bytes stay hot once
    // the flushes are done (no group holds the 16 KiB threshold).
    let mut before = serde_json::Value::Null;
    for _round in 0..5 {
        for (s, len) in lens.iter_mut().enumerate() {
            fill(node.addr(0), s, *len, *len + HOT, 1024).await;
            *len += HOT;
        }
        before = report_until(node.addr(0), 10, |r| {
            r["group_hot_bytes_bounds"]
                .as_array()
                .unwrap()
                .iter()
                .all(|b| b.as_u64().unwrap() < 16 * 1024)
        })
        .await;
        if before["hot_bytes_bound"].as_u64().unwrap() > 0 {
            break;
        }
    }
    assert!(before["hot_bytes_bound"].as_u64().unwrap() > 0, "{before}");
    let flushed_before = before["flushed_bytes"].as_u64().unwrap();
    let objects_before = files(&cold).len();
    assert!(objects_before > 0 && flushed_before > 0);

    // 2. SIGKILL; the restarted node holds every byte, cold and hot.
    node.take(0).kill9();
    node.0[0] = Some(start_args(&args));
    verify(node.addr(0), &lens).await;

    // 3. It keeps flushing: more bytes per stream pass the threshold.
    for (s, len) in lens.iter_mut().enumerate() {
        fill(node.addr(0), s, *len, *len + 32 * 1024, 8 * 1024).await;
        *len += 32 * 1024;
    }
    let after = report_until(node.addr(0), 10, |r| {
        r["flushed_bytes"].as_u64().unwrap() >= STREAMS as u64 * 16 * 1024
    })
    .await;
    assert_eq!(after["leading_groups"], 2);

    // 4. SIGTERM, then age every object past the orphan grace and plant
    // two unreferenced objects (an upload whose `FlushCold` never
    // committed): an old one, which the sweep deletes, and a young one,
    // which it leaves alone. Nothing the machine references goes.
    terminate(node.take(0));
    for f in files(&cold) {
        set_age(&f, Duration::from_secs(7200));
    }
    let old_orphan = cold.join("g000/p/0000000000001-00000000deadbeef.pack");
    let young_orphan = cold.join("g001/p/0000000000002-00000000feedf00d.pack");
    for orphan in [&old_orphan, &young_orphan] {
        std::fs::create_dir_all(orphan.parent().unwrap()).unwrap();
        std::fs::write(orphan, b"never committed").unwrap();
    }
    set_age(&old_orphan, Duration::from_secs(7200));
    node.0[0] = Some(start_args(&args));
    let swept = report_until(node.addr(0), 10, |r| {
        r["orphans_deleted"].as_u64().unwrap() >= 1
    })
    .await;
    // Let a few more sweeps run (every 100 ms) before reading: the young
    // orphan must outlive them, and a sweep that deletes nothing shows in
    // no counter to wait for.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!old_orphan.exists(), "the old orphan is swept");
    assert!(young_orphan.exists(), "a young unreferenced object stays");
    verify(node.addr(0), &lens).await;

    // 5. GC after the restart: delete the last stream; its GC entries are
    // reclaimed and acknowledged, and every other stream still reads back.
    let gone = STREAMS - 1;
    let r = send(
        node.addr(0),
        "DELETE",
        &format!("/v1/stream/s{gone}"),
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    report_until(node.addr(0), 10, |r| r["gc_acked"].as_u64().unwrap() >= 1).await;
    assert!(
        !files(&cold)
            .iter()
            .any(|f| f.to_string_lossy().contains(&format!("/s{gone}/")))
    );
    verify(node.addr(0), &lens[..gone]).await;
    let report = cold_report(node.addr(0)).await.unwrap();
    assert!(report["cold_reads"].as_u64().unwrap() > 0);
    assert_eq!(report["store_errors"], 0);
    eprintln!(
        "cold restart: {STREAMS} streams, {} bytes each at the end; {flushed_before} bytes flushed in {objects_before} objects before SIGKILL, {} orphans swept after SIGTERM and restart, {} objects now",
        lens[0],
        swept["orphans_deleted"],
        files(&cold).len(),
    );
}

fn node_args(dir: &Path, id: u64, ports: &[u16]) -> Vec<String> {
    let mut args = process::cluster_node_args(dir, id, ports);
    // One store for the whole cluster.
    args.extend(cold_args(&dir.join("cold")));
    args
}

/// The node every one of `addrs` names as the group's leader, once they
/// agree and that node's cold workers run.
async fn leader(addrs: &[(u64, SocketAddr)]) -> u64 {
    eventually(
        "an agreed leader running its cold workers",
        Duration::from_secs(30),
        || async {
            let mut named = Vec::new();
            for (_, addr) in addrs {
                let leader = match request(*addr, "GET", "/__strand/health", &[], b"").await {
                    Ok(r) if r.status == 200 => {
                        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                        v["groups"][0]["leader"].as_u64()
                    }
                    _ => None,
                };
                named.push(leader);
            }
            if let Some(Some(first)) = named.first()
                && named.iter().all(|l| *l == Some(*first))
                && let Some((_, addr)) = addrs.iter().find(|(id, _)| id == first)
                && cold_report(*addr)
                    .await
                    .is_some_and(|r| r["leading_groups"] == 1)
            {
                return Some(*first);
            }
            None
        },
    )
    .await
}

/// Reads until `addr` holds every stream of `lens` (a follower applies a
/// little later), then checks them byte-exact.
async fn converge_and_verify(addr: SocketAddr, lens: &[u64]) {
    for (s, len) in lens.iter().copied().enumerate() {
        eventually(
            &format!("{addr} holds the {len} bytes of s{s}"),
            Duration::from_secs(30),
            || async { (read_from(addr, s, None).await.len() as u64 == len).then_some(()) },
        )
        .await;
    }
    verify(addr, lens).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_only_the_leader_flushes_and_every_node_reads_cold() {
    const STREAMS: usize = 3;
    const PART: u64 = 48 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes = Nodes(
        (1..=3)
            .map(|id| Some(start_args(&node_args(tmp.path(), id, &ports))))
            .collect(),
    );
    let all: Vec<(u64, SocketAddr)> = (1..=3u64)
        .map(|id| (id, nodes.addr(id as usize - 1)))
        .collect();
    let addr_of = |id: u64| all[(id - 1) as usize].1;
    let first = leader(&all).await;
    let follower = all.iter().find(|(id, _)| *id != first).unwrap().1;

    // Writes through a follower (it forwards them); the leader flushes.
    for s in 0..STREAMS {
        create(follower, s).await;
        fill(follower, s, 0, PART, 8 * 1024).await;
    }
    let mut lens = vec![PART; STREAMS];
    let total = STREAMS as u64 * PART;
    report_until(addr_of(first), 10, |r| {
        r["flushed_bytes"].as_u64().unwrap() + 16 * 1024 >= total
    })
    .await;
    for (id, addr) in &all {
        converge_and_verify(*addr, &lens).await;
        let r = cold_report(*addr).await.unwrap();
        if *id == first {
            assert!(r["uploads"].as_u64().unwrap() > 0);
        } else {
            // Followers applied the leader's flushes and read its objects.
            assert_eq!(r["uploads"], 0, "node {id} uploaded: {r}");
            assert_eq!(r["leading_groups"], 0);
            assert!(r["cold_reads"].as_u64().unwrap() > 0, "node {id}: {r}");
        }
    }

    // kill -9 the leader: a survivor leads, flushes the new bytes.
    nodes.take((first - 1) as usize).kill9();
    let survivors: Vec<(u64, SocketAddr)> =
        all.iter().copied().filter(|(id, _)| *id != first).collect();
    let second = leader(&survivors).await;
    assert_ne!(second, first);
    for (s, len) in lens.iter_mut().enumerate() {
        fill(survivors[0].1, s, *len, *len + PART, 8 * 1024).await;
        *len += PART;
    }
    let flushed = report_until(addr_of(second), 10, |r| {
        r["flushed_bytes"].as_u64().unwrap() + 16 * 1024 >= total
    })
    .await;
    for (id, addr) in &survivors {
        converge_and_verify(*addr, &lens).await;
        if *id != second {
            assert_eq!(cold_report(*addr).await.unwrap()["uploads"], 0);
        }
    }
    eprintln!(
        "cold cluster: node {first} led and flushed, then was killed; node {second} took over and uploaded {} objects ({} bytes); followers uploaded none and served their cold reads from the shared store",
        flushed["uploads"], flushed["flushed_bytes"],
    );
}

/// The flags of a durable single node that keeps its older bytes in its
/// own segment store (no `--cold-dir`): tiny thresholds and a 128 KiB
/// hot budget, so a few hundred KiB pass through every tier.
fn local_args(data: &Path) -> Vec<String> {
    [
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--groups",
        "2",
        "--data-dir",
        &data.display().to_string(),
        "--snapshot-every",
        "40",
        "--max-hot-bytes",
        "131072",
    ]
    .iter()
    .chain(TINY_FLUSHES.iter())
    .map(|s| (*s).to_owned())
    .collect()
}

/// The segment files of a data directory.
fn segment_files(data: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = files(&data.join("segments"))
        .into_iter()
        .filter(|p| !p.to_string_lossy().ends_with(".tmp"))
        .collect();
    out.sort();
    out
}

/// Starts the binary with `args`, expecting it to exit before its ready
/// line; answers what it wrote to stderr.
fn start_refused(args: &[String]) -> String {
    // Held by a `Server`, whose drop kills it if it does not exit.
    let mut server = Server {
        child: strand_testkit::ChildGuard::new(
            std::process::Command::new(env!("CARGO_BIN_EXE_strand-server"))
                .args(args)
                .env("STRAND_LOG", "off")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        ),
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let status = eventually_blocking("the refused server stops", Duration::from_secs(60), || {
        server.child.try_wait().unwrap()
    });
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let child = &mut server.child;
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "it started: {stdout}");
    assert!(!stdout.contains("listening on"), "{stdout}");
    stderr
}

/// A durable single node on a fresh data directory with
/// [`local_args`], and `streams` streams created on it.
async fn start_local(streams: usize) -> (tempfile::TempDir, PathBuf, Vec<String>, Nodes) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let args = local_args(&data);
    let node = Nodes(vec![Some(start_args(&args))]);
    for s in 0..streams {
        create(node.addr(0), s).await;
    }
    (tmp, data, args, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_node_keeps_older_bytes_in_its_own_segment_files() {
    const STREAMS: usize = 3;
    const LEN: u64 = 96 * 1024;
    // 1. Three times the hot budget goes in; the budget holds (writes
    // beyond it wait for the flush: `send` retries their 503s) and the
    // older bytes are in segment files under the data directory.
    let (_tmp, data, args, mut node) = start_local(STREAMS).await;
    for s in 0..STREAMS {
        fill(node.addr(0), s, 0, LEN, 4 * 1024).await;
    }
    let report = report_until(node.addr(0), 10, |r| {
        r["flushed_bytes"].as_u64().unwrap() >= STREAMS as u64 * LEN - 2 * 16 * 1024
    })
    .await;
    assert!(
        report["backend"]
            .as_str()
            .unwrap()
            .starts_with("local segments:"),
        "{report}"
    );
    assert_eq!(report["max_hot_bytes"], 131_072);
    assert!(report["hot_bytes_bound"].as_u64().unwrap() <= 131_072);
    assert!(!segment_files(&data).is_empty());
    let lens = vec![LEN; STREAMS];
    verify(node.addr(0), &lens).await;

    // 2. kill -9: the restarted node reads every byte from its files and
    // its log, and keeps writing and flushing.
    node.take(0).kill9();
    node.0[0] = Some(start_args(&args));
    verify(node.addr(0), &lens).await;
    let mut lens = lens;
    for (s, len) in lens.iter_mut().enumerate() {
        fill(node.addr(0), s, *len, *len + 48 * 1024, 4 * 1024).await;
        *len += 48 * 1024;
    }
    report_until(node.addr(0), 10, |r| {
        r["flushed_bytes"].as_u64().unwrap() >= STREAMS as u64 * 32 * 1024
    })
    .await;
    verify(node.addr(0), &lens).await;

    // 3. A clean stop and start: the same bytes again.
    terminate(node.take(0));
    node.0[0] = Some(start_args(&args));
    verify(node.addr(0), &lens).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_segment_file_is_never_served_and_a_cut_one_stops_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let args = local_args(&data);
    let node = start_args(&args);
    create(node.addr, 0).await;
    fill(node.addr, 0, 0, 64 * 1024, 4 * 1024).await;
    report_until(node.addr, 10, |r| {
        r["flushed_bytes"].as_u64().unwrap() >= 32 * 1024
    })
    .await;
    node.kill9();
    let files = segment_files(&data);
    let first = files.first().unwrap().clone();

    // 1. A flipped byte (the length unchanged): the node starts, and the
    // range is refused rather than served wrong.
    let mut bytes = std::fs::read(&first).unwrap();
    bytes[10] ^= 0x20;
    std::fs::write(&first, &bytes).unwrap();
    let node = start_args(&args);
    let r = request(node.addr, "GET", "/v1/stream/s0?offset=-1", &[], b"")
        .await
        .unwrap();
    let body = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(r.status, 503, "{body}");
    assert!(body.contains("checksum mismatch"), "{body}");
    node.kill9();

    // 2. A file cut short: the start stops with an error naming it.
    bytes[10] ^= 0x20;
    std::fs::write(&first, &bytes[..bytes.len() - 100]).unwrap();
    let stderr = start_refused(&args);
    let name = first.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        stderr.contains("damaged segment file") && stderr.contains(&name),
        "{stderr}"
    );

    // 3. Whole again, the node serves every byte.
    std::fs::write(&first, &bytes).unwrap();
    let node = start_args(&args);
    verify(node.addr, &[64 * 1024]).await;
    node.kill9();
}

/// Appends bodies of `piece` bytes to stream 0 from offset 0 until one
/// is not acknowledged (at most `most` of them): the bytes acknowledged
/// and that first other answer.
async fn append_until_refused(addr: SocketAddr, piece: u64, most: usize) -> (u64, process::Reply) {
    let mut acked = 0u64;
    for _ in 0..most {
        let end = acked + piece;
        let r = request(
            addr,
            "POST",
            "/v1/stream/s0",
            &text(),
            &bytes(0, acked..end),
        )
        .await
        .unwrap();
        if r.status != 204 {
            return (acked, r);
        }
        acked = end;
    }
    panic!("{most} appends of {piece} bytes were all acknowledged");
}

/// A small tmpfs mounted on a directory for one test, unmounted when
/// dropped (after the node using it was killed).
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "mounting a {size} tmpfs on {} (this test needs root, as CI has)",
            dir.display()
        );
        Self(dir.to_path_buf())
    }

    fn resize(&self, size: &str) {
        let status = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(status.success(), "resizing the tmpfs to {size}");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_keeps_reads_and_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // The segment store on a 128 KiB filesystem: it fills after a few
    // flushes (the log stays on the main disk). No reserve: the store
    // itself meets ENOSPC.
    let disk = SmallDisk::mount(&data.join("segments"), "128k");
    let mut args = local_args(&data);
    args.extend(["--min-free-disk-bytes", "0"].map(str::to_owned));
    let mut node = Nodes(vec![Some(start_args(&args))]);
    let addr = node.addr(0);
    create(addr, 0).await;

    // 1. Append until a write is refused: flushing stalls on ENOSPC and
    // the hot budget fills. Every append before it was acknowledged.
    let (acked, refusal) = append_until_refused(addr, 4 * 1024, 512).await;
    assert_eq!(
        refusal.status,
        503,
        "{}",
        String::from_utf8_lossy(&refusal.body)
    );
    assert_eq!(refusal.header("retry-after"), Some("1"));
    let message = String::from_utf8_lossy(&refusal.body).into_owned();
    assert!(message.contains("cannot take bytes"), "{message}");
    let report = cold_report(addr).await.unwrap();
    assert!(
        report["last_error"]
            .as_str()
            .unwrap()
            .contains("No space left on device"),
        "{report}"
    );
    assert!(acked > 128 * 1024, "only {acked} bytes went in");

    // 2. Reads go on, byte-exact, across the files and the hot buffer.
    verify(addr, &[acked]).await;

    // 3. Space comes back: flushing resumes and so do writes.
    disk.resize("8m");
    let more = acked + 256 * 1024;
    fill(addr, 0, acked, more, 4 * 1024).await;
    report_until(addr, 10, |r| r["consecutive_failures"] == 0).await;
    verify(addr, &[more]).await;

    // 4. And after kill -9, every acknowledged byte is still there.
    node.take(0).kill9();
    node.0[0] = Some(start_args(&args));
    verify(node.addr(0), &[more]).await;
    drop(node);
    drop(disk);
}

/// The whole data directory (Raft log, snapshots, segment files) on a
/// small filesystem: writes get 507 while it is within the reserve of
/// full, before the log runs out of room (which would stop the group);
/// reads go on, the log still writes (a delete), writes resume once space
/// is freed, and after kill -9 every acknowledged byte is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nearly_full_data_disk_refuses_writes_with_507_and_keeps_its_log() {
    const PIECE: u64 = 64 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let disk = SmallDisk::mount(&data, "16m");
    let mut args = local_args(&data);
    args.extend(["--min-free-disk-bytes", "4194304"].map(str::to_owned));
    // A hot budget of 32 appends, so flushing keeps up with one writer.
    let hot = args.iter().position(|a| a == "--max-hot-bytes").unwrap() + 1;
    args[hot] = (32 * PIECE).to_string();
    let mut node = Nodes(vec![Some(start_args(&args))]);
    let addr = node.addr(0);
    create(addr, 0).await;
    create(addr, 1).await;

    // 1. Append until a write is refused; every one before it was
    // acknowledged. 16 MiB hold at most 256 such appends.
    let (acked, refusal) = append_until_refused(addr, PIECE, 400).await;
    assert_eq!(
        refusal.status,
        507,
        "{}",
        String::from_utf8_lossy(&refusal.body)
    );
    assert_eq!(refusal.header("retry-after"), Some("5"));
    let message = String::from_utf8_lossy(&refusal.body).into_owned();
    assert!(message.contains("--min-free-disk-bytes"), "{message}");
    assert!(acked >= 4 * 1024 * 1024, "only {acked} bytes went in");

    // 2. Reads go on, byte-exact, and the log still takes records: a
    // delete commits (and frees nothing yet, but needs the log).
    verify(addr, &[acked]).await;
    let r = send(addr, "DELETE", "/v1/stream/s1", &[], b"").await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));

    // 3. Space comes back: writes resume without a restart.
    disk.resize("64m");
    let more = acked + 16 * PIECE;
    fill(addr, 0, acked, more, PIECE).await;
    verify(addr, &[more]).await;

    // 4. And after kill -9, every acknowledged byte is still there.
    node.take(0).kill9();
    node.0[0] = Some(start_args(&args));
    verify(node.addr(0), &[more]).await;
    let r = send(node.addr(0), "HEAD", "/v1/stream/s1", &[], b"").await;
    assert_eq!(r.status, 404);
    drop(node);
    drop(disk);
}

/// Without the reserve, a full disk under the Raft log makes the log wait
/// for space instead of failing: the write it holds waits, new writes to
/// the group get 507, reads go on, and once space is freed the waiting
/// write is acknowledged and writes resume without a restart; after
/// kill -9 every acknowledged write is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_log_disk_waits_for_space_and_writes_resume_without_a_restart() {
    full_disk_waits_for_space("1000000").await;
}

/// The same when a snapshot is what finds the disk full: its write waits
/// (the group's core goes on), new writes get 507 meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_on_a_full_disk_waits_for_space_and_writes_resume() {
    full_disk_waits_for_space("40").await;
}

/// A node whose data directory is an 8 MiB disk, without the reserve,
/// snapshotting every `snapshot_every` entries, appended to until its
/// log or a snapshot waits for space; then the disk grows.
async fn full_disk_waits_for_space(snapshot_every: &str) {
    const PIECE: u64 = 64 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let disk = SmallDisk::mount(&data, "8m");
    let mut args = local_args(&data);
    args.extend(["--min-free-disk-bytes", "0"].map(str::to_owned));
    // Nothing flushes (the bytes stay hot), so the log and the snapshots
    // are what fill the disk.
    for (flag, value) in [
        ("--max-hot-bytes", "1073741824"),
        ("--cold-flush-bytes", "1073741824"),
        ("--snapshot-every", snapshot_every),
    ] {
        let at = args.iter().position(|a| a == flag).unwrap() + 1;
        args[at] = value.to_owned();
    }
    let mut node = Nodes(vec![Some(start_args(&args))]);
    let addr = node.addr(0);
    create(addr, 0).await;

    // 1. One writer appends until told to stop or refused: once the log
    // (or a snapshot) finds the disk full, the append in flight is held,
    // waiting for space, or refused with 507. 8 MiB hold at most 128 such
    // appends.
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (Arc::clone(&acked), Arc::clone(&stop));
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let at = acked.load(Ordering::SeqCst);
                let body = bytes(0, at..at + PIECE);
                let r = request(addr, "POST", "/v1/stream/s0", &text(), &body)
                    .await
                    .unwrap();
                if r.status == 507 {
                    return;
                }
                assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
                acked.store(at + PIECE, Ordering::SeqCst);
            }
        })
    };
    eventually(
        "the log waits for space",
        Duration::from_secs(60),
        || async {
            let r = request(addr, "GET", "/__strand/health", &[], b"")
                .await
                .ok()?;
            let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
            (v["log"]["space_waits"].as_u64() >= Some(1)).then_some(())
        },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let held = acked.load(Ordering::SeqCst);
    assert!(held > 0, "no append went in before the disk filled");

    // 2. The node is up: a new append to the group is refused at once
    // with 507 and changes nothing; reads of what it holds go on.
    let refused = request(
        addr,
        "POST",
        "/v1/stream/s0",
        &text(),
        &bytes(0, held + PIECE..held + 2 * PIECE),
    )
    .await
    .unwrap();
    let message = String::from_utf8_lossy(&refused.body).into_owned();
    assert_eq!(refused.status, 507, "{message}");
    assert!(message.contains("waiting for disk space"), "{message}");
    assert_eq!(refused.header("retry-after"), Some("5"));
    assert_eq!(tail_of(addr, 0).await, held);
    verify(addr, &[held]).await;

    // 3. Space comes back: a waiting append is acknowledged, and the
    // group takes writes again without a restart.
    disk.resize("64m");
    writer.await.unwrap();
    let acked = acked.load(Ordering::SeqCst);
    assert!(
        acked == held || acked == held + PIECE,
        "{acked} after {held}"
    );
    assert_eq!(tail_of(addr, 0).await, acked);
    // The waiting write retries within a second of the space coming back.
    let r = eventually(
        "writes resume once space is freed",
        Duration::from_secs(30),
        || async {
            let body = bytes(0, acked..acked + PIECE);
            let r = request(addr, "POST", "/v1/stream/s0", &text(), &body)
                .await
                .ok()?;
            (r.status != 507).then_some(r)
        },
    )
    .await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let acked = acked + PIECE;
    let more = acked + 16 * PIECE;
    fill(addr, 0, acked, more, PIECE).await;
    verify(addr, &[more]).await;

    // 4. After kill -9, every acknowledged byte is there.
    node.take(0).kill9();
    node.0[0] = Some(start_args(&args));
    let addr = node.addr(0);
    assert_eq!(tail_of(addr, 0).await, more);
    verify(addr, &[more]).await;
    drop(node);
    drop(disk);
}

/// The tail of stream `s` (HEAD).
async fn tail_of(addr: SocketAddr, s: usize) -> u64 {
    let r = send(addr, "HEAD", &format!("/v1/stream/s{s}"), &[], b"").await;
    assert_eq!(r.status, 200);
    parse_offset(r.header("stream-next-offset").unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_flushing_to_segment_files_loses_no_acknowledged_byte() {
    const STREAMS: usize = 4;
    const PIECE: u64 = 2 * 1024;
    let (_tmp, data, args, mut node) = start_local(STREAMS).await;
    let mut acked = [0u64; STREAMS];
    for round in 0..4 {
        let addr = node.addr(0);
        let flushed_before = cold_report(addr).await.unwrap()["flushed_bytes"]
            .as_u64()
            .unwrap();
        // Writers append until the node dies under them; each knows what
        // was acknowledged.
        let writers: Vec<_> = (0..STREAMS)
            .map(|s| {
                let from = acked[s];
                tokio::spawn(async move {
                    let mut len = from;
                    for _ in 0..2_000 {
                        let body = bytes(s, len..len + PIECE);
                        let path = format!("/v1/stream/s{s}");
                        match request(addr, "POST", &path, &text(), &body).await {
                            Ok(r) if r.status == 204 => len += PIECE,
                            Ok(r) if r.status == 503 => {}
                            _ => break,
                        }
                    }
                    len
                })
            })
            .collect();
        // Kill it once flushes are under way in this round.
        report_until(addr, 10, |r| {
            r["flushed_bytes"].as_u64().unwrap() >= flushed_before + 64 * 1024
        })
        .await;
        node.take(0).kill9();
        for (s, w) in writers.into_iter().enumerate() {
            acked[s] = w.await.unwrap();
        }
        // Every acknowledged byte is back; an append in flight at the
        // kill may have landed too, whole.
        node.0[0] = Some(start_args(&args));
        for (s, len) in acked.iter_mut().enumerate() {
            let got = read_from(node.addr(0), s, None).await;
            assert!(
                got.len() as u64 >= *len && (got.len() as u64).is_multiple_of(PIECE),
                "round {round} s{s}: {} bytes read, {len} acknowledged",
                got.len()
            );
            assert!(
                got == bytes(s, 0..got.len() as u64),
                "round {round} s{s}: bytes differ"
            );
            *len = tail_of(node.addr(0), s).await;
        }
    }
    assert!(segment_files(&data).len() > 1);
}
