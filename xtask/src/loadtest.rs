//! `cargo xtask loadtest [--compare] [--quick]`: the load scenarios of
//! `strand-bench` against strand-server, and with `--compare` also against
//! the node reference server (`@durable-streams/server` 0.3.7, pinned in
//! `tests/http-conformance/package-lock.json`) and the Rust community server
//! (`durable-streams-server` 0.3.0, installed with `cargo install --locked`
//! into `target/peers/`), one server at a time, each in memory, each
//! restarted for every scenario. Prints one table: every figure for each
//! server and strand's ratio to each peer. `--durable` adds strand-server
//! with `--data-dir` (a fresh directory per scenario, fsync on),
//! `--fsync-never` the same with `--fsync never`, and `--cluster` a
//! three-node durable loopback cluster (fresh directories
//! `target/loadtest/cluster-node-N`), the writers spread round-robin over
//! the three nodes (a follower forwards its writes to the group's
//! leader); `--cluster-leader` the same cluster with every writer on the
//! node that leads the most groups (node 1 initializes the groups and
//! usually leads them all). `--only TEXT` runs the scenarios whose name contains TEXT.
//! `--pin` runs every server on the last CPU this process may use and the
//! load tool on the others (`taskset`, Linux), so that the load tool cannot
//! take the server's CPU time: throughput is then what one core of server
//! gives, where unpinned both share every core and the load tool's own cost
//! caps the rate.
//! The write scenarios also show the durable nodes' group commit,
//! measured by their log counters (`GET /__strand/health`): log entries
//! per fsync and the mean fsync time, over every node.

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::http_conformance::{
    ServerGuard, command_on, log_tail, loopback_addr, pin_servers, prepare_packages,
    server_command, start_node, start_strand, start_strand_cluster, status_of, target_dir,
};
use crate::{cargo, run};

/// The Rust community server this compares against, pinned.
const PEER_CRATE: &str = "durable-streams-server";
const PEER_VERSION: &str = "0.3.0";
/// Idle timeout for live reads during the load runs (node's default).
const LONG_POLL_MS: u64 = 30_000;

/// Usage of the task.
pub(crate) const USAGE: &str = "cargo xtask loadtest [--compare] [--quick] [--durable] [--fsync-never] [--cluster] [--cluster-leader] [--only TEXT] [--pin]";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Strand,
    StrandDurable,
    StrandNoFsync,
    StrandCluster,
    StrandClusterLeader,
    Node,
    RustPeer,
}

impl Target {
    fn label(self) -> &'static str {
        match self {
            Target::Strand => "strand",
            Target::StrandDurable => "strand durable",
            Target::StrandNoFsync => "strand fsync never",
            Target::StrandCluster => "strand 3 nodes",
            Target::StrandClusterLeader => "strand 3 nodes, to leader",
            Target::Node => "node 0.3.7",
            Target::RustPeer => "rust 0.3.0",
        }
    }
}

/// One scenario: a name for the table, the bench arguments, and the
/// figures to show (JSON key, label, whether higher is better).
struct Scenario {
    name: String,
    args: Vec<String>,
    figures: &'static [(&'static str, &'static str, bool)],
}

const WRITE_FIGURES: &[(&str, &str, bool)] = &[
    ("appends_per_s", "appends/s", true),
    ("p50_ms", "p50 ms", false),
    ("p99_ms", "p99 ms", false),
    ("server_cpu_us_per_append", "server CPU us/append", false),
    (
        "client_cpu_us_per_request",
        "load tool CPU us/request",
        false,
    ),
    ("errors", "errors", false),
    ("appends_per_fsync", "appends per fsync", true),
    ("entries_per_fsync", "log entries per fsync", true),
    ("mean_fsync_ms", "mean fsync ms", false),
    ("fsyncs_per_append", "fsyncs per append (all nodes)", false),
];
const FANOUT_FIGURES: &[(&str, &str, bool)] = &[
    ("p50_ms", "p50 ms", false),
    ("p99_ms", "p99 ms", false),
    ("all_delivered", "every event to every subscriber", true),
    (
        "server_cpu_us_per_delivery",
        "server CPU us/delivery",
        false,
    ),
];
const CATCHUP_FIGURES: &[(&str, &str, bool)] = &[
    ("p99_ms", "p99 ms to up-to-date", false),
    ("mib_per_s", "MiB/s", true),
    ("server_cpu_us_per_request", "server CPU us/request", false),
    ("incomplete_streams", "incomplete streams", false),
];
const MEMORY_FIGURES: &[(&str, &str, bool)] = &[("bytes_per_stream", "RSS bytes/stream", false)];

fn scenarios(quick: bool) -> Vec<Scenario> {
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let secs = if quick { "3" } else { "10" };
    let mut out = vec![
        Scenario {
            name: "writes: 500 writers x 256 B".into(),
            args: s(&["writes", "--seconds", secs]),
            figures: WRITE_FIGURES,
        },
        Scenario {
            name: "writes: 500 streams x 100 B".into(),
            args: s(&["writes", "--body-bytes", "100", "--seconds", secs]),
            figures: WRITE_FIGURES,
        },
        Scenario {
            name: "writes, idempotent producers".into(),
            args: s(&["writes", "--producer", "--seconds", secs]),
            figures: WRITE_FIGURES,
        },
        Scenario {
            name: "writes, client batching (linger 5 ms)".into(),
            args: s(&["writes", "--linger-ms", "5", "--seconds", secs]),
            figures: WRITE_FIGURES,
        },
    ];
    let subscribers: &[&str] = if quick {
        &["50", "200"]
    } else {
        &["50", "200", "500", "1000"]
    };
    for n in subscribers {
        out.push(Scenario {
            name: format!("fan-out: {n} SSE subscribers, 50 appends/s"),
            args: s(&[
                "fanout",
                "--subscribers",
                n,
                "--seconds",
                if quick { "3" } else { "5" },
            ]),
            figures: FANOUT_FIGURES,
        });
    }
    out.push(Scenario {
        name: "catch-up: clients x 200 x 1 KiB".into(),
        args: s(&["catchup", "--clients", if quick { "100" } else { "1000" }]),
        figures: CATCHUP_FIGURES,
    });
    out.push(Scenario {
        name: "idle memory: empty streams".into(),
        args: s(&[
            "idle-memory",
            "--streams",
            if quick { "20000" } else { "100000" },
        ]),
        figures: MEMORY_FIGURES,
    });
    out
}

/// `cargo xtask loadtest ARGS`.
pub(crate) fn loadtest(root: &Path, args: &[String]) -> Result<(), String> {
    let (mut compare, mut quick, mut durable, mut no_fsync) = (false, false, false, false);
    let (mut cluster, mut cluster_leader, mut pin) = (false, false, false);
    let mut only: Option<String> = None;
    let mut args = args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--compare" => compare = true,
            "--quick" => quick = true,
            "--durable" => durable = true,
            "--fsync-never" => no_fsync = true,
            "--cluster" => cluster = true,
            "--cluster-leader" => cluster_leader = true,
            "--pin" => pin = true,
            "--only" => {
                only = Some(
                    args.next()
                        .ok_or_else(|| format!("--only needs a value; usage: {USAGE}"))?
                        .clone(),
                );
            }
            other => return Err(format!("unknown option `{other}`; usage: {USAGE}")),
        }
    }
    let mut build = cargo(root);
    build.args([
        "build",
        "--release",
        "-p",
        "strand-server",
        "-p",
        "strand-bench",
    ]);
    run(build)?;
    let load_cpus = if pin {
        let (servers, load) = pinned_cpus()?;
        println!("xtask: servers on CPU {servers}, the load tool on CPUs {load}");
        pin_servers(servers)?;
        Some(load)
    } else {
        None
    };
    let work = target_dir(root).join("loadtest");
    fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let mut targets = vec![Target::Strand];
    if durable {
        targets.push(Target::StrandDurable);
    }
    if no_fsync {
        targets.push(Target::StrandNoFsync);
    }
    if cluster {
        targets.push(Target::StrandCluster);
    }
    if cluster_leader {
        targets.push(Target::StrandClusterLeader);
    }
    if compare {
        prepare_packages(root, &target_dir(root).join("http-conformance"))?;
        ensure_peer(root)?;
        targets.extend([Target::Node, Target::RustPeer]);
    }
    let bench = target_dir(root).join("release").join("strand-bench");
    let mut scenarios = scenarios(quick);
    if let Some(text) = &only {
        scenarios.retain(|s| s.name.contains(text.as_str()));
        if scenarios.is_empty() {
            return Err(format!("no scenario's name contains `{text}`"));
        }
    }
    let mut results: BTreeMap<(usize, usize), Value> = BTreeMap::new();
    let mut raw = Vec::new();
    for (si, scenario) in scenarios.iter().enumerate() {
        for (ti, target) in targets.iter().enumerate() {
            println!("==> {} against {}", scenario.name, target.label());
            let mut servers = start(root, *target, &work)?;
            let outcome = match load_targets(*target, &servers) {
                Ok(load) => run_bench(
                    &bench,
                    load_cpus.as_deref(),
                    &servers,
                    &load,
                    &scenario.args,
                ),
                Err(e) => Err(e),
            };
            for server in &mut servers {
                server.check_running()?;
            }
            drop(servers);
            match outcome {
                Ok(value) => {
                    println!("    {value}");
                    raw.push(serde_json::json!({"target": target.label(), "scenario": scenario.name, "result": value}));
                    results.insert((si, ti), value);
                }
                Err(e) => {
                    println!("    failed: {e}");
                    raw.push(serde_json::json!({"target": target.label(), "scenario": scenario.name, "error": e}));
                }
            }
        }
    }
    let raw_path = work.join("results.json");
    fs::write(
        &raw_path,
        serde_json::to_vec_pretty(&raw).unwrap_or_default(),
    )
    .map_err(|e| format!("cannot write {}: {e}", raw_path.display()))?;
    print_table(&scenarios, &targets, &results);
    println!("raw results: {}", raw_path.display());
    Ok(())
}

/// Starts a target's server processes (three for the cluster).
fn start(root: &Path, target: Target, work: &Path) -> Result<Vec<ServerGuard>, String> {
    if matches!(target, Target::StrandCluster | Target::StrandClusterLeader) {
        // Fresh data directories for every scenario.
        return start_strand_cluster(root, work, LONG_POLL_MS, &[]);
    }
    start_one(root, target, work).map(|g| vec![g])
}

fn start_one(root: &Path, target: Target, work: &Path) -> Result<ServerGuard, String> {
    match target {
        Target::Strand => start_strand(root, LONG_POLL_MS, work.join("strand-server.log"), &[]),
        Target::StrandCluster | Target::StrandClusterLeader => {
            Err("the cluster is three processes".into())
        }
        Target::StrandDurable | Target::StrandNoFsync => {
            // A fresh data directory for every scenario.
            let data = work.join("durable-data");
            let _ = fs::remove_dir_all(&data);
            let mut extra = vec!["--data-dir".to_owned(), data.display().to_string()];
            if target == Target::StrandNoFsync {
                extra.extend(["--fsync".to_owned(), "never".to_owned()]);
            }
            start_strand(
                root,
                LONG_POLL_MS,
                work.join("strand-server-durable.log"),
                &extra,
            )
        }
        Target::Node => start_node(
            &target_dir(root).join("http-conformance"),
            LONG_POLL_MS,
            work.join("node-server.log"),
        ),
        Target::RustPeer => start_peer(root, work),
    }
}

/// The URLs the load goes to (every server, or for `--cluster-leader`
/// the node that leads the most groups) and the other nodes, whose log
/// counters count too.
fn load_targets(
    target: Target,
    servers: &[ServerGuard],
) -> Result<(Vec<String>, Vec<String>), String> {
    if target != Target::StrandClusterLeader {
        return Ok((servers.iter().map(|s| s.url.clone()).collect(), Vec::new()));
    }
    let first = servers.first().ok_or("no server")?;
    let health = get_json(loopback_addr(&first.url)?, "/__strand/health")?;
    let mut led: BTreeMap<u64, usize> = BTreeMap::new();
    for group in health["groups"].as_array().into_iter().flatten() {
        if let Some(leader) = group["leader"].as_u64() {
            *led.entry(leader).or_default() += 1;
        }
    }
    let (leader, groups) = led
        .iter()
        .max_by_key(|(_, n)| **n)
        .ok_or("no group has a leader")?;
    println!("    load on node {leader} (leader of {groups} groups)");
    let index = usize::try_from(*leader)
        .ok()
        .and_then(|l| l.checked_sub(1))
        .filter(|i| *i < servers.len())
        .ok_or_else(|| format!("leader {leader} is not a node of the cluster"))?;
    let others = servers
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != index)
        .map(|(_, s)| s.url.clone())
        .collect();
    Ok((vec![servers[index].url.clone()], others))
}

/// `GET path` over HTTP/1.1 (`Connection: close`), the body as JSON.
fn get_json(addr: std::net::SocketAddr, path: &str) -> Result<Value, String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    stream
        .take(1 << 20)
        .read_to_end(&mut raw)
        .map_err(|e| format!("read: {e}"))?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("a response without headers")?;
    serde_json::from_slice(&raw[split + 4..]).map_err(|e| format!("GET {path}: not JSON: {e}"))
}

/// For `--pin`: the CPU the servers run on (the last one this process may
/// use, from `Cpus_allowed_list` in `/proc/self/status`) and the list of
/// the others, for the load tool, both as `taskset -c` lists.
fn pinned_cpus() -> Result<(String, String), String> {
    let status = fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("--pin needs Linux's /proc/self/status: {e}"))?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or("--pin: /proc/self/status has no Cpus_allowed_list")?;
    let cpus = parse_cpu_list(list.trim())?;
    match cpus.split_last() {
        Some((last, rest)) if !rest.is_empty() => {
            let others: Vec<String> = rest.iter().map(u32::to_string).collect();
            Ok((last.to_string(), others.join(",")))
        }
        _ => Err(format!(
            "--pin needs at least two CPUs; this process may use `{}`",
            list.trim()
        )),
    }
}

/// The CPUs of a kernel CPU list such as `0-3,8,10-11`, in order.
fn parse_cpu_list(list: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("not a CPU list: `{list}`");
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>(), b.parse::<u32>()),
            None => (part.parse::<u32>(), part.parse::<u32>()),
        };
        let (first, last) = (first.map_err(|_| bad())?, last.map_err(|_| bad())?);
        if first > last || last - first > 4096 {
            return Err(bad());
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

fn run_bench(
    bench: &Path,
    cpus: Option<&str>,
    servers: &[ServerGuard],
    (load, stats): &(Vec<String>, Vec<String>),
    args: &[String],
) -> Result<Value, String> {
    let mut cmd = command_on(cpus, bench);
    for url in load {
        cmd.arg("--url").arg(url);
    }
    for url in stats {
        cmd.arg("--stats-url").arg(url);
    }
    for server in servers {
        cmd.arg("--server-pid").arg(server.pid().to_string());
    }
    let output = cmd
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bench.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .ok_or_else(|| {
            format!(
                "no RESULT line; stderr: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )
        })?;
    serde_json::from_str(line).map_err(|e| format!("bad RESULT line: {e}"))
}

fn peer_binary(root: &Path) -> PathBuf {
    target_dir(root).join("peers").join("bin").join(PEER_CRATE)
}

/// Installs the pinned Rust community server under `target/peers/` once.
fn ensure_peer(root: &Path) -> Result<(), String> {
    let stamp = target_dir(root)
        .join("peers")
        .join(format!("{PEER_CRATE}-{PEER_VERSION}.installed"));
    if peer_binary(root).is_file() && stamp.is_file() {
        return Ok(());
    }
    println!(
        "xtask: installing {PEER_CRATE} {PEER_VERSION} into target/peers (cargo install --locked)"
    );
    let mut cmd = cargo(root);
    cmd.args([
        "install",
        "--locked",
        "--force",
        &format!("{PEER_CRATE}@{PEER_VERSION}"),
        "--root",
    ])
    .arg(target_dir(root).join("peers"));
    run(cmd)?;
    fs::write(&stamp, PEER_VERSION).map_err(|e| format!("cannot write {}: {e}", stamp.display()))
}

/// Starts the Rust community server in memory on a free loopback port and
/// waits for `/healthz`.
fn start_peer(root: &Path, work: &Path) -> Result<ServerGuard, String> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let log = work.join("rust-peer.log");
    let file =
        fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let child = server_command(peer_binary(root))
        .env("DS_SERVER__BIND_ADDRESS", format!("127.0.0.1:{port}"))
        .env("DS_STORAGE__MODE", "memory")
        .env("DS_TRANSPORT__MODE", "http")
        // Its defaults cap all streams at 100 MiB and each at 10 MiB, which
        // the catch-up fill (1000 × 200 KiB) and ten seconds of batched
        // writes pass; strand-server in memory has no such cap, so the peer
        // gets room too (each server runs alone on a 24 GiB machine).
        .env("DS_LIMITS__MAX_MEMORY_BYTES", (16u64 << 30).to_string())
        .env("DS_LIMITS__MAX_STREAM_BYTES", (4u64 << 30).to_string())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start {PEER_CRATE}: {e}"))?;
    let url = format!("http://127.0.0.1:{port}");
    let mut guard = ServerGuard {
        name: "durable-streams-server",
        child,
        stdin: None,
        url: url.clone(),
        log: log.clone(),
    };
    let addr = loopback_addr(&url)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        guard.check_running()?;
        if status_of(addr, "GET /healthz") == Ok(200) {
            return Ok(guard);
        }
        thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "{PEER_CRATE} did not become healthy; {}",
        log_tail(&log)
    ))
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

fn show(v: Option<&Value>) -> String {
    match v {
        None => "-".into(),
        Some(Value::Bool(b)) => if *b { "yes" } else { "NO" }.into(),
        Some(Value::Number(n)) => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.abs() >= 100.0 || f.fract() == 0.0 {
                format!("{f:.0}")
            } else {
                format!("{f:.2}")
            }
        }
        Some(other) => other.to_string(),
    }
}

fn print_table(
    scenarios: &[Scenario],
    targets: &[Target],
    results: &BTreeMap<(usize, usize), Value>,
) {
    let mut header = format!("| {:<44} | {:<32} |", "scenario", "figure");
    for t in targets {
        header.push_str(&format!(" {:>10} |", t.label()));
    }
    for t in targets.iter().skip(1) {
        // The durable variants are compared by their flag, the peers by
        // their name.
        let short = match t {
            Target::StrandDurable => "durable",
            Target::StrandNoFsync => "no-fsync",
            Target::StrandCluster => "3-nodes",
            Target::StrandClusterLeader => "3n-leader",
            _ => t.label().split(' ').next().unwrap_or(""),
        };
        header.push_str(&format!(" strand/{short:<10} |"));
    }
    println!();
    println!("{header}");
    println!(
        "|{}|",
        header
            .chars()
            .skip(1)
            .map(|c| if c == '|' { '|' } else { '-' })
            .collect::<String>()
            .trim_end_matches('|')
    );
    for (si, scenario) in scenarios.iter().enumerate() {
        for (key, label, _higher) in scenario.figures {
            let mut row = format!("| {:<44} | {:<32} |", scenario.name, label);
            let values: Vec<Option<&Value>> = (0..targets.len())
                .map(|ti| results.get(&(si, ti)).and_then(|r| r.get(*key)))
                .collect();
            // Figures no server reported (the log counters of a run
            // without durable servers) would be a row of dashes.
            if values.iter().all(Option::is_none) {
                continue;
            }
            for v in &values {
                row.push_str(&format!(" {:>10} |", show(*v)));
            }
            for v in values.iter().skip(1) {
                let ratio = match (values[0].and_then(number), v.and_then(number)) {
                    (Some(a), Some(b))
                        if b != 0.0
                            && *key != "all_delivered"
                            && *key != "errors"
                            && *key != "incomplete_streams" =>
                    {
                        format!("{:.2}x", a / b)
                    }
                    _ => "-".into(),
                };
                row.push_str(&format!(" {:>17} |", ratio));
            }
            println!("{row}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_list;

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-1"), Ok(vec![0, 1]));
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert_eq!(parse_cpu_list("8,0-2,10-11"), Ok(vec![0, 1, 2, 8, 10, 11]));
        assert_eq!(parse_cpu_list("1,1"), Ok(vec![1]));
    }

    #[test]
    fn malformed_cpu_lists_are_errors() {
        for bad in ["x", "3-1", "0-", "-2", "0-99999", "1;2"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad} parsed");
        }
    }
}
