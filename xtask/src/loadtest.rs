//! `cargo xtask loadtest [--compare] [--quick]`: the load scenarios of
//! `strand-bench` against strand-server, and with `--compare` also against
//! the node reference server (`@durable-streams/server` 0.3.7, pinned in
//! `tests/http-conformance/package-lock.json`), the Rust community server
//! (`durable-streams-server` 0.3.0, installed with `cargo install --locked`
//! into `target/peers/`) and Electric's Rust server (crate
//! `durable-streams` 0.1.5, whose binary has the same name, installed the
//! same way into its own root `target/peers/electric-0.1.5/`) twice: with
//! `--durability memory` and with `--durability wal` (group-commit
//! fdatasync). Electric's server keeps its streams in files in both modes
//! (memory mode only skips the WAL and fsync), so each run of it gets a
//! fresh `--data-dir` under `target/loadtest/`, removed when it stops; the
//! other servers run in memory. One server at a time, each restarted for
//! every scenario. Prints one table: every figure for each server and
//! strand's ratio to each peer. `--durable` adds strand-server
//! with `--data-dir` (a fresh directory per scenario, fsync on),
//! `--fsync-never` the same with `--fsync never`, and `--cluster` a
//! three-node durable loopback cluster (fresh directories
//! `target/loadtest/cluster-node-N`), the writers spread round-robin over
//! the three nodes (a follower forwards its writes to the group's
//! leader); `--cluster-leader` the same cluster with every writer on the
//! node that leads the most groups (node 1 initializes the groups and
//! usually leads them all). strand-server serves with its default HTTP
//! engine (`lean`); `--hyper` adds it with `--http-engine hyper` (and,
//! with `--durable`, the durable node with it too). `--only TEXT` runs the scenarios whose name contains TEXT.
//! `--pin` runs every server on the last CPU this process may use and the
//! load tool on the others (`taskset`, Linux), so that the load tool cannot
//! take the server's CPU time: throughput is then what one core of server
//! gives, where unpinned both share every core and the load tool's own cost
//! caps the rate.
//! The write scenarios also show the durable nodes' group commit,
//! measured by their log counters (`GET /__strand/health`): log entries
//! per fsync and the mean fsync time, over every node.
//! The `resident` scenarios append a fixed number of bytes round-robin
//! over many streams and measure the growth of the server's anonymous
//! resident memory (`RssAnon` in `/proc/PID/status`: heap, not page
//! cache) per appended byte and per append, between a checkpoint and the
//! end: *large*, 64 KiB bodies over 100 streams, 2 GiB with the checkpoint
//! at 1 GiB (`--quick`: 256 MiB, 128 MiB), 8 writers
//! (`--resident-writers-large N`); *small*, 256 B bodies over 10,000
//! streams, 1 GiB with the checkpoint at 512 MiB (`--quick`: 64 MiB,
//! 32 MiB), 500 writers (`--resident-writers-small N`). strand-bench stops
//! appending when the server's VmRSS reaches 12 GiB (half this machine's
//! memory), and the table's `every byte appended in time` then says NO.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::npm::prepare_packages;
use crate::servers::{
    ServerGuard, command_on, free_port, loopback_addr, pin_servers, server_command, spawn_polled,
    start_node, start_strand, start_strand_cluster,
};
use crate::{cargo, run, target_dir};

/// A peer server installed from crates.io with `cargo install --locked`,
/// pinned, into its own root under the target directory.
pub(crate) struct PeerCrate {
    krate: &'static str,
    version: &'static str,
    /// The binary `cargo install` puts in `ROOT/bin`.
    binary: &'static str,
    /// The install root, relative to the target directory.
    root: &'static str,
}

/// The Rust community server this compares against.
const RUST_PEER: PeerCrate = PeerCrate {
    krate: "durable-streams-server",
    version: "0.3.0",
    binary: "durable-streams-server",
    root: "peers",
};

/// Electric's Rust server: a binary of the same name, so another root.
pub(crate) const ELECTRIC: PeerCrate = PeerCrate {
    krate: "durable-streams",
    version: "0.1.5",
    binary: "durable-streams-server",
    root: "peers/electric-0.1.5",
};

/// Idle timeout for live reads during the load runs (node's default).
const LONG_POLL_MS: u64 = 30_000;

/// Usage of the task.
pub(crate) const USAGE: &str = "cargo xtask loadtest [--compare] [--quick] [--durable] [--fsync-never] [--cluster] [--cluster-leader] [--floors] [--hyper] [--only TEXT] [--targets NAME,…] [--pin] [--resident-writers-large N] [--resident-writers-small N]";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Strand,
    StrandDurable,
    /// strand-server in memory with `--http-engine hyper`.
    StrandHyper,
    /// strand-server with `--data-dir` and `--http-engine hyper`.
    StrandDurableHyper,
    StrandNoFsync,
    StrandCluster,
    StrandClusterLeader,
    Node,
    RustPeer,
    Electric,
    ElectricWal,
    /// `strand-floor --http hyper`: hyper's HTTP/1.1 connection answering
    /// writes and passing them to SSE subscribers, with nothing stored
    /// (write and fan-out scenarios only).
    FloorHyper,
    /// `strand-floor --http lean`: a minimal keep-alive loop answering
    /// writes and writing them to SSE subscribers' sockets, with nothing
    /// stored (write and fan-out scenarios only).
    FloorLean,
}

impl Target {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Target::Strand => "strand",
            Target::StrandDurable => "strand durable",
            Target::StrandHyper => "strand hyper HTTP",
            Target::StrandDurableHyper => "strand durable, hyper HTTP",
            Target::StrandNoFsync => "strand fsync never",
            Target::StrandCluster => "strand 3 nodes",
            Target::StrandClusterLeader => "strand 3 nodes, to leader",
            Target::Node => "node 0.3.7",
            Target::RustPeer => "rust 0.3.0",
            Target::Electric => "electric 0.1.5 memory",
            Target::ElectricWal => "electric 0.1.5 wal",
            Target::FloorHyper => "floor: hyper, nothing stored",
            Target::FloorLean => "floor: lean HTTP, nothing stored",
        }
    }

    /// The name in a ratio column's header, `strand/NAME`.
    fn short(self) -> &'static str {
        match self {
            Target::Strand => "strand",
            Target::StrandDurable => "durable",
            Target::StrandHyper => "hyper",
            Target::StrandDurableHyper => "durable-hyper",
            Target::StrandNoFsync => "no-fsync",
            Target::StrandCluster => "3-nodes",
            Target::StrandClusterLeader => "3n-leader",
            Target::Node => "node",
            Target::RustPeer => "rust",
            Target::Electric => "electric",
            Target::ElectricWal => "electric-wal",
            Target::FloorHyper => "hyper-floor",
            Target::FloorLean => "lean-floor",
        }
    }

    /// Electric's data directory for a run of this target, if it is
    /// Electric's server.
    pub(crate) fn electric_data(self, work: &Path) -> Option<PathBuf> {
        match self {
            Target::Electric => Some(work.join("electric-data")),
            Target::ElectricWal => Some(work.join("electric-wal-data")),
            _ => None,
        }
    }

    /// Whether the target serves `scenario` (a floor answers writes and
    /// passes them to subscribers, and stores nothing to read back).
    fn serves(self, scenario: &Scenario) -> bool {
        !matches!(self, Target::FloorHyper | Target::FloorLean)
            || std::ptr::eq(scenario.figures, WRITE_FIGURES)
            || std::ptr::eq(scenario.figures, FANOUT_FIGURES)
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
    ("appended_mib_per_s", "appended MiB/s", true),
    ("p50_ms", "p50 ms", false),
    ("p99_ms", "p99 ms", false),
    ("server_cpu_us_per_append", "server CPU us/append", false),
    (
        "busiest_server_share",
        "busiest node's share of the CPU",
        false,
    ),
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
const RESIDENT_FIGURES: &[(&str, &str, bool)] = &[
    (
        "anon_bytes_per_appended_byte",
        "RssAnon bytes per appended byte",
        false,
    ),
    ("anon_bytes_per_append", "RssAnon bytes per append", false),
    (
        "anon_bytes_per_append_fitted",
        "RssAnon bytes per append, fitted",
        false,
    ),
    ("anon_growth_total", "RssAnon growth, whole run (B)", false),
    (
        "vm_rss_bytes_per_appended_byte",
        "VmRSS bytes per appended byte",
        false,
    ),
    ("appended_mib_per_s", "appended MiB/s", true),
    ("finished", "every byte appended in time", true),
    ("errors", "errors", false),
    ("retries", "retries (503/507)", false),
];
/// Figures that are counts or yes/no: no ratio.
const NO_RATIO: &[&str] = &[
    "all_delivered",
    "errors",
    "incomplete_streams",
    "finished",
    "retries",
];

/// Concurrent writers of the two `resident` shapes.
#[derive(Debug, Clone, Copy)]
struct ResidentWriters {
    large: usize,
    small: usize,
}

impl Default for ResidentWriters {
    fn default() -> Self {
        Self {
            large: 8,
            small: 500,
        }
    }
}

/// The `resident` scenario of one shape: `streams` streams, bodies of
/// `body` bytes, `total` bytes with the checkpoint at `checkpoint`
/// (sizes as strand-bench parses them, e.g. `64KiB`).
fn resident_scenario(
    shape: &str,
    streams: usize,
    body: &str,
    (total, checkpoint): (&str, &str),
    writers: usize,
) -> Scenario {
    let spaced = |size: &str| {
        let digits = size.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        format!("{digits} {}", &size[digits.len()..])
    };
    Scenario {
        name: format!(
            "resident {shape}: {} x {streams} streams, {}",
            spaced(body),
            spaced(total)
        ),
        args: [
            "resident",
            "--streams",
            &streams.to_string(),
            "--body-bytes",
            body,
            "--total-bytes",
            total,
            "--checkpoint-bytes",
            checkpoint,
            "--writers",
            &writers.to_string(),
        ]
        .iter()
        .map(|x| (*x).to_owned())
        .collect(),
        figures: RESIDENT_FIGURES,
    }
}

fn scenarios(quick: bool, writers: ResidentWriters) -> Vec<Scenario> {
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
        Scenario {
            name: "writes: 8 writers x 64 KiB over 100 streams".into(),
            args: s(&[
                "writes",
                "--streams",
                "100",
                "--writers",
                "8",
                "--body-bytes",
                "65536",
                "--seconds",
                secs,
            ]),
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
        name: "catch-up: clients x 200 x 1 KiB, read 5 times".into(),
        // Five reads of every stream: one lasts a quarter of a second,
        // too short for a steady figure.
        args: s(&[
            "catchup",
            "--clients",
            if quick { "100" } else { "1000" },
            "--rounds",
            if quick { "1" } else { "5" },
        ]),
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
    out.push(resident_scenario(
        "large",
        100,
        "64KiB",
        if quick {
            ("256MiB", "128MiB")
        } else {
            ("2GiB", "1GiB")
        },
        writers.large,
    ));
    out.push(resident_scenario(
        "small",
        10_000,
        "256B",
        if quick {
            ("64MiB", "32MiB")
        } else {
            ("1GiB", "512MiB")
        },
        writers.small,
    ));
    out
}

/// `cargo xtask loadtest ARGS`.
pub(crate) fn loadtest(root: &Path, args: &[String]) -> Result<(), String> {
    let (mut compare, mut quick, mut durable, mut no_fsync) = (false, false, false, false);
    let (mut cluster, mut cluster_leader, mut pin, mut floors) = (false, false, false, false);
    let mut hyper = false;
    let mut only: Option<String> = None;
    let mut keep: Option<Vec<String>> = None;
    let mut writers = ResidentWriters::default();
    let mut args = args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--compare" => compare = true,
            "--quick" => quick = true,
            "--durable" => durable = true,
            "--fsync-never" => no_fsync = true,
            "--cluster" => cluster = true,
            "--cluster-leader" => cluster_leader = true,
            "--floors" => floors = true,
            "--hyper" => hyper = true,
            "--pin" => pin = true,
            "--only" => {
                only = Some(
                    args.next()
                        .ok_or_else(|| format!("--only needs a value; usage: {USAGE}"))?
                        .clone(),
                );
            }
            "--targets" => {
                let list = args
                    .next()
                    .ok_or_else(|| format!("--targets needs a value; usage: {USAGE}"))?;
                keep = Some(list.split(',').map(str::to_owned).collect());
            }
            "--resident-writers-large" | "--resident-writers-small" => {
                let n = args
                    .next()
                    .and_then(|v| v.parse::<usize>().ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{a} needs a positive number; usage: {USAGE}"))?;
                if a == "--resident-writers-large" {
                    writers.large = n;
                } else {
                    writers.small = n;
                }
            }
            other => return Err(format!("unknown option `{other}`; usage: {USAGE}")),
        }
    }
    build_server_and_bench(root)?;
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
    if hyper {
        targets.push(Target::StrandHyper);
    }
    if durable {
        targets.push(Target::StrandDurable);
        if hyper {
            targets.push(Target::StrandDurableHyper);
        }
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
        targets.extend([
            Target::Node,
            Target::RustPeer,
            Target::Electric,
            Target::ElectricWal,
        ]);
    }
    if floors {
        targets.extend([Target::FloorHyper, Target::FloorLean]);
    }
    if let Some(keep) = &keep {
        // The servers the flags chose, narrowed to the named ones (their
        // ratio-column names: strand, durable, electric-wal, …); the
        // first one left is what the ratios compare against.
        if let Some(unknown) = keep
            .iter()
            .find(|name| !targets.iter().any(|t| t.short() == name.as_str()))
        {
            let chosen: Vec<&str> = targets.iter().map(|t| t.short()).collect();
            return Err(format!(
                "--targets: `{unknown}` is not among the servers the flags chose ({})",
                chosen.join(", ")
            ));
        }
        targets.retain(|t| keep.iter().any(|name| name == t.short()));
    }
    if targets.contains(&Target::Node) {
        prepare_packages(root, &target_dir(root).join("http-conformance"))?;
    }
    if targets.contains(&Target::RustPeer) {
        ensure_peer(root, &RUST_PEER)?;
    }
    if targets.contains(&Target::Electric) || targets.contains(&Target::ElectricWal) {
        ensure_peer(root, &ELECTRIC)?;
    }
    let bench = target_dir(root).join("release").join("strand-bench");
    let mut scenarios = scenarios(quick, writers);
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
            if !target.serves(scenario) {
                continue;
            }
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
            // Nothing reads Electric's files afterwards; up to a few GiB.
            if let Some(data) = target.electric_data(&work) {
                let _ = fs::remove_dir_all(data);
            }
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

/// Builds the release strand-server and strand-bench (together, so both
/// commands that load a server reuse one build).
pub(crate) fn build_server_and_bench(root: &Path) -> Result<(), String> {
    let mut build = cargo(root);
    build.args([
        "build",
        "--release",
        "-p",
        "strand-server",
        "-p",
        "strand-bench",
    ]);
    run(build)
}

/// Starts a target's server processes (three for the cluster).
fn start(root: &Path, target: Target, work: &Path) -> Result<Vec<ServerGuard>, String> {
    if matches!(target, Target::StrandCluster | Target::StrandClusterLeader) {
        // Fresh data directories for every scenario.
        return start_strand_cluster(root, work, LONG_POLL_MS, &[], 3);
    }
    start_one(root, target, work).map(|g| vec![g])
}

pub(crate) fn start_one(root: &Path, target: Target, work: &Path) -> Result<ServerGuard, String> {
    match target {
        Target::Strand => start_strand(root, LONG_POLL_MS, work.join("strand-server.log"), &[]),
        Target::StrandHyper => start_strand(
            root,
            LONG_POLL_MS,
            work.join("strand-server-hyper.log"),
            &["--http-engine".to_owned(), "hyper".to_owned()],
        ),
        Target::StrandCluster | Target::StrandClusterLeader => {
            Err("the cluster is three processes".into())
        }
        Target::StrandDurable | Target::StrandDurableHyper | Target::StrandNoFsync => {
            // A fresh data directory for every scenario.
            let data = work.join("durable-data");
            let _ = fs::remove_dir_all(&data);
            let mut extra = vec!["--data-dir".to_owned(), data.display().to_string()];
            if target == Target::StrandNoFsync {
                extra.extend(["--fsync".to_owned(), "never".to_owned()]);
            }
            if target == Target::StrandDurableHyper {
                extra.extend(["--http-engine".to_owned(), "hyper".to_owned()]);
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
        Target::Electric | Target::ElectricWal => start_electric(root, target, work),
        Target::FloorHyper | Target::FloorLean => start_floor(root, target, work),
    }
}

/// Starts `strand-floor` (built with strand-bench) on a free loopback
/// port, with hyper or the lean loop, and waits for it to answer.
fn start_floor(root: &Path, target: Target, work: &Path) -> Result<ServerGuard, String> {
    let port = free_port()?;
    let http = if target == Target::FloorHyper {
        "hyper"
    } else {
        "lean"
    };
    let mut cmd = server_command(target_dir(root).join("release").join("strand-floor"));
    cmd.args(["--http", http, "--listen", &format!("127.0.0.1:{port}")]);
    spawn_polled(
        "strand-floor",
        cmd,
        port,
        &work.join(format!("floor-{http}.log")),
        "GET /",
    )
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
pub(crate) fn get_json(addr: std::net::SocketAddr, path: &str) -> Result<Value, String> {
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

pub(crate) fn run_bench(
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

pub(crate) fn peer_binary(root: &Path, peer: &PeerCrate) -> PathBuf {
    target_dir(root)
        .join(peer.root)
        .join("bin")
        .join(peer.binary)
}

/// Installs a pinned peer server under `target/ROOT/` once (a marker file
/// beside its `bin/` says which version is there).
pub(crate) fn ensure_peer(root: &Path, peer: &PeerCrate) -> Result<(), String> {
    let PeerCrate {
        krate,
        version,
        root: dir,
        ..
    } = peer;
    let install_root = target_dir(root).join(dir);
    let stamp = install_root.join(format!("{krate}-{version}.installed"));
    if peer_binary(root, peer).is_file() && stamp.is_file() {
        return Ok(());
    }
    println!("xtask: installing {krate} {version} into target/{dir} (cargo install --locked)");
    let mut cmd = cargo(root);
    cmd.args([
        "install",
        "--locked",
        "--force",
        &format!("{krate}@{version}"),
        "--root",
    ])
    .arg(&install_root);
    run(cmd)?;
    fs::write(&stamp, version).map_err(|e| format!("cannot write {}: {e}", stamp.display()))
}

/// Starts the Rust community server in memory on a free loopback port and
/// waits for `/healthz`.
fn start_peer(root: &Path, work: &Path) -> Result<ServerGuard, String> {
    let port = free_port()?;
    let mut cmd = server_command(peer_binary(root, &RUST_PEER));
    cmd.env("DS_SERVER__BIND_ADDRESS", format!("127.0.0.1:{port}"))
        .env("DS_STORAGE__MODE", "memory")
        .env("DS_TRANSPORT__MODE", "http")
        // Its defaults cap all streams at 100 MiB and each at 10 MiB, which
        // the catch-up fill (1000 × 200 KiB) and ten seconds of batched
        // writes pass; strand-server in memory has no such cap, so the peer
        // gets room too (each server runs alone on a 24 GiB machine).
        .env("DS_LIMITS__MAX_MEMORY_BYTES", (16u64 << 30).to_string())
        .env("DS_LIMITS__MAX_STREAM_BYTES", (4u64 << 30).to_string())
        .env("RUST_LOG", "warn");
    spawn_polled(
        "durable-streams-server",
        cmd,
        port,
        &work.join("rust-peer.log"),
        "GET /healthz",
    )
}

/// Starts Electric's server on a free loopback port with a fresh data
/// directory, `--durability memory` or (for [`Target::ElectricWal`])
/// `wal`, and waits for `/health`.
fn start_electric(root: &Path, target: Target, work: &Path) -> Result<ServerGuard, String> {
    let data = target
        .electric_data(work)
        .ok_or("not a target of Electric's server")?;
    let durability = if target == Target::ElectricWal {
        "wal"
    } else {
        "memory"
    };
    start_electric_at(
        root,
        &data,
        durability,
        LONG_POLL_MS,
        &work.join(format!("electric-{durability}.log")),
    )
}

/// Starts Electric's installed server ([`ensure_peer`] with [`ELECTRIC`])
/// on a free loopback port with `--durability DURABILITY`, the data
/// directory `data` emptied first, and the idle long-poll timeout
/// `long_poll_ms`; its output goes to `log`. Waits for `GET /health`.
pub(crate) fn start_electric_at(
    root: &Path,
    data: &Path,
    durability: &str,
    long_poll_ms: u64,
    log: &Path,
) -> Result<ServerGuard, String> {
    let _ = fs::remove_dir_all(data);
    fs::create_dir_all(data).map_err(|e| format!("cannot create {}: {e}", data.display()))?;
    let port = free_port()?;
    let mut cmd = server_command(peer_binary(root, &ELECTRIC));
    cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .arg("--data-dir")
        .arg(data)
        .args([
            "--durability",
            durability,
            "--long-poll-timeout-ms",
            &long_poll_ms.to_string(),
        ])
        .env("RUST_LOG", "warn");
    spawn_polled(
        "electric durable-streams-server",
        cmd,
        port,
        log,
        "GET /health",
    )
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
            } else if f.abs() < 0.01 {
                // Bytes of memory per appended byte can be this small.
                format!("{f:.1e}")
            } else {
                format!("{f:.2}")
            }
        }
        Some(other) => other.to_string(),
    }
}

/// strand's figure over a peer's, as `N.NNx`; `-` for counts and yes/no
/// figures, a peer's zero, or a negative figure (memory that shrank).
fn ratio(key: &str, strand: Option<&Value>, peer: Option<&Value>) -> String {
    match (strand.and_then(number), peer.and_then(number)) {
        (Some(a), Some(b)) if a >= 0.0 && b > 0.0 && !NO_RATIO.contains(&key) => {
            format!("{:.2}x", a / b)
        }
        _ => "-".into(),
    }
}

fn print_table(
    scenarios: &[Scenario],
    targets: &[Target],
    results: &BTreeMap<(usize, usize), Value>,
) {
    // Every column as wide as its header or widest cell.
    let name_width = scenarios
        .iter()
        .map(|s| s.name.len())
        .chain([44])
        .max()
        .unwrap_or(44);
    let figure_width = scenarios
        .iter()
        .flat_map(|s| s.figures.iter().map(|f| f.1.len()))
        .chain([32])
        .max()
        .unwrap_or(32);
    let value_widths: Vec<usize> = targets.iter().map(|t| t.label().len().max(10)).collect();
    // The durable variants are compared by their flag, the peers by
    // their name.
    let ratio_headers: Vec<String> = targets
        .iter()
        .skip(1)
        .map(|t| format!("strand/{}", t.short()))
        .collect();
    let ratio_widths: Vec<usize> = ratio_headers.iter().map(|h| h.len().max(17)).collect();
    let mut header = format!(
        "| {:<name_width$} | {:<figure_width$} |",
        "scenario", "figure"
    );
    for (t, w) in targets.iter().zip(&value_widths) {
        header.push_str(&format!(" {:>w$} |", t.label()));
    }
    for (h, w) in ratio_headers.iter().zip(&ratio_widths) {
        header.push_str(&format!(" {h:<w$} |"));
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
            let mut row = format!(
                "| {:<name_width$} | {:<figure_width$} |",
                scenario.name, label
            );
            let values: Vec<Option<&Value>> = (0..targets.len())
                .map(|ti| results.get(&(si, ti)).and_then(|r| r.get(*key)))
                .collect();
            // Figures no server reported (the log counters of a run
            // without durable servers) would be a row of dashes.
            if values.iter().all(|v| v.is_none_or(Value::is_null)) {
                continue;
            }
            for (v, w) in values.iter().zip(&value_widths) {
                row.push_str(&format!(" {:>w$} |", show(*v)));
            }
            for (v, w) in values.iter().skip(1).zip(&ratio_widths) {
                row.push_str(&format!(" {:>w$} |", ratio(key, values[0], *v)));
            }
            println!("{row}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn resident_scenarios_are_named_and_shaped() {
        let all = scenarios(true, ResidentWriters::default());
        let resident: Vec<&Scenario> = all.iter().filter(|s| s.name.contains("resident")).collect();
        let names: Vec<&str> = resident.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "resident large: 64 KiB x 100 streams, 256 MiB",
                "resident small: 256 B x 10000 streams, 64 MiB",
            ]
        );
        assert_eq!(
            resident[1].args.join(" "),
            "resident --streams 10000 --body-bytes 256B --total-bytes 64MiB \
             --checkpoint-bytes 32MiB --writers 500"
        );
        let full = scenarios(false, ResidentWriters { large: 3, small: 7 });
        let large = full
            .iter()
            .find(|s| s.name.starts_with("resident large"))
            .expect("the large shape");
        assert_eq!(large.name, "resident large: 64 KiB x 100 streams, 2 GiB");
        assert_eq!(
            large.args.join(" "),
            "resident --streams 100 --body-bytes 64KiB --total-bytes 2GiB \
             --checkpoint-bytes 1GiB --writers 3"
        );
    }

    #[test]
    fn ratios_skip_counts_zeros_and_shrinkage() {
        let (one, two) = (serde_json::json!(1.0), serde_json::json!(2.0));
        let (zero, shrank) = (serde_json::json!(0), serde_json::json!(-4));
        assert_eq!(ratio("p99_ms", Some(&one), Some(&two)), "0.50x");
        assert_eq!(ratio("errors", Some(&one), Some(&two)), "-");
        assert_eq!(ratio("retries", Some(&one), Some(&two)), "-");
        assert_eq!(ratio("p99_ms", Some(&one), Some(&zero)), "-");
        assert_eq!(ratio("p99_ms", Some(&shrank), Some(&two)), "-");
        assert_eq!(ratio("p99_ms", None, Some(&one)), "-");
        assert_eq!(show(Some(&serde_json::json!(0.000_123_4))), "1.2e-4");
        assert_eq!(show(Some(&serde_json::json!(1.0117))), "1.01");
        assert_eq!(show(Some(&serde_json::json!(-167_936))), "-167936");
    }
}
