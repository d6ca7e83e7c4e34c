//! `cargo xtask profile [--quick] [--hyper] [--only TEXT]`: where a server's time
//! per append goes, strand against Electric's server, side by side in one
//! run (performance issue). For each write scenario of `loadtest` (500
//! writers × 256 B, × 100 B, with idempotent producers) and each server —
//! strand-server in memory (`--memory`) and durable (`--data-dir`, fsync
//! on), Electric's `durable-streams` 0.1.5 with `--durability memory` and
//! `wal` (and with `--hyper` strand-server's two modes again with
//! `--http-engine hyper`) — it runs `strand-bench writes` three times on a fresh server:
//!
//! 1. plain, with `perf stat -p PID` counting software events (task
//!    clock, context switches, CPU migrations, `sched:sched_wakeup` —
//!    wakeups the server's threads made — and page faults) and the
//!    server's user and system CPU from `/proc/PID/stat`;
//! 2. with uprobes on the allocator's entry points (strand: mimalloc's
//!    `mi_malloc_aligned`, `mi_zalloc_aligned`, `mi_realloc_aligned`;
//!    Electric: glibc's `malloc`, `calloc`, `realloc`), counting
//!    allocations (the probes slow the server, so this run's time is not
//!    used);
//! 3. under `strace -c -f`, counting system calls (which slows it too).
//!
//! Every count is divided by the appends of its own run. Instructions
//! per append need hardware counters, which this VM does not expose
//! (`perf stat -e instructions` answers `<not supported>`); the table says
//! so rather than guess. Needs `perf` and `strace` (Linux, root for the
//! probes); not part of `ci`. Results: a table on stdout and
//! `target/profile/results.json`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::loadtest::{
    ELECTRIC, Target, build_server_and_bench, ensure_peer, peer_binary, run_bench, start_one,
};
use crate::target_dir;

/// Usage of the task.
pub(crate) const USAGE: &str = "cargo xtask profile [--quick] [--hyper] [--only TEXT]";

const TARGETS: [Target; 4] = [
    Target::Strand,
    Target::StrandDurable,
    Target::Electric,
    Target::ElectricWal,
];

/// The targets `--hyper` adds.
const HYPER_TARGETS: [Target; 2] = [Target::StrandHyper, Target::StrandDurableHyper];

/// Software events perf counts in the plain run.
const EVENTS: &str = "task-clock,context-switches,cpu-migrations,sched:sched_wakeup,page-faults";

/// `cargo xtask profile ARGS`.
pub(crate) fn profile(root: &Path, args: &[String]) -> Result<(), String> {
    let mut quick = false;
    let mut hyper = false;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--hyper" => hyper = true,
            "--only" => {
                only = Some(
                    it.next()
                        .ok_or_else(|| format!("--only needs a value; usage: {USAGE}"))?
                        .clone(),
                );
            }
            other => return Err(format!("unknown option `{other}`; usage: {USAGE}")),
        }
    }
    for tool in ["perf", "strace"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Err(format!("`{tool}` is needed (and root, for perf's probes)"));
        }
    }
    build_server_and_bench(root)?;
    ensure_peer(root, &ELECTRIC)?;
    let work = target_dir(root).join("profile");
    fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let strand = target_dir(root).join("release").join("strand-server");
    let strand_probes = probes(
        &strand,
        "strand_alloc",
        &[
            "mi_malloc_aligned",
            "mi_zalloc_aligned",
            "mi_realloc_aligned",
        ],
    )?;
    let libc = libc_path()?;
    let libc_probes = probes(&libc, "libc_alloc", &["malloc", "calloc", "realloc"])?;
    // Electric links glibc dynamically; strand's allocator is linked in.
    if !peer_binary(root, &ELECTRIC).is_file() {
        return Err("Electric's server is not installed".into());
    }
    let secs = if quick { "3" } else { "10" };
    let scenarios: Vec<(&str, Vec<String>)> = [
        ("writes: 500 writers x 256 B", vec!["writes"]),
        (
            "writes: 500 streams x 100 B",
            vec!["writes", "--body-bytes", "100"],
        ),
        ("writes, idempotent producers", vec!["writes", "--producer"]),
    ]
    .into_iter()
    .filter(|(name, _)| only.as_deref().is_none_or(|o| name.contains(o)))
    .map(|(name, a)| {
        let mut a: Vec<String> = a.into_iter().map(str::to_owned).collect();
        a.extend(["--seconds".to_owned(), secs.to_owned()]);
        (name, a)
    })
    .collect();
    if scenarios.is_empty() {
        return Err("no scenario matches --only".into());
    }
    let bench = target_dir(root).join("release").join("strand-bench");
    let mut results = Vec::new();
    for (name, bench_args) in &scenarios {
        let mut row = Vec::new();
        let extra: &[Target] = if hyper { &HYPER_TARGETS } else { &[] };
        for &target in TARGETS.iter().chain(extra) {
            println!("==> {name} against {}", target.label());
            let alloc_events = if !matches!(target, Target::Electric | Target::ElectricWal) {
                &strand_probes
            } else {
                &libc_probes
            };
            let figures = profile_one(root, &work, &bench, target, bench_args, alloc_events)?;
            println!("    {figures}");
            row.push(figures);
        }
        print_table(name, &row);
        results.push(json!({"scenario": name, "targets": row}));
    }
    let path = work.join("results.json");
    fs::write(
        &path,
        serde_json::to_vec_pretty(&results).unwrap_or_default(),
    )
    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("raw results: {}", path.display());
    Ok(())
}

/// The three runs of one scenario against one server.
fn profile_one(
    root: &Path,
    work: &Path,
    bench: &Path,
    target: Target,
    args: &[String],
    alloc_events: &str,
) -> Result<Value, String> {
    // 1. Plain: time and software events.
    let (plain, counts, cpu) = with_server(root, work, target, |pid, s| {
        let out = work.join("perf-plain.txt");
        let perf = spawn_perf(pid, EVENTS, &out)?;
        let before = proc_cpu(pid)?;
        let result = run_bench(bench, None, s, &(vec![s[0].url.clone()], Vec::new()), args);
        let after = proc_cpu(pid)?;
        stop(perf)?;
        let result = result?;
        Ok((
            result,
            read_perf(&out)?,
            (after.0 - before.0, after.1 - before.1),
        ))
    })?;
    let appends = plain["appends"].as_f64().unwrap_or(0.0).max(1.0);
    let per = |event: &str| counts.get(event).map(|c| c / appends);
    let ticks = ticks_per_second();
    let user_us = cpu.0 as f64 / ticks * 1e6 / appends;
    let sys_us = cpu.1 as f64 / ticks * 1e6 / appends;
    // 2. Allocations.
    let (alloc_appends, allocs) = with_server(root, work, target, |pid, s| {
        let out = work.join("perf-alloc.txt");
        let perf = spawn_perf(pid, alloc_events, &out)?;
        let result = run_bench(bench, None, s, &(vec![s[0].url.clone()], Vec::new()), args);
        stop(perf)?;
        let result = result?;
        let total: f64 = read_perf(&out)?.values().sum();
        Ok((result["appends"].as_f64().unwrap_or(0.0).max(1.0), total))
    })?;
    // 3. System calls.
    let (strace_appends, syscalls) = with_server(root, work, target, |pid, s| {
        let out = work.join("strace.txt");
        let strace = Command::new("strace")
            .args(["-c", "-f", "-q", "-o"])
            .arg(&out)
            .args(["-p", &pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start strace: {e}"))?;
        // strace attaches to every thread before the load starts.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let result = run_bench(bench, None, s, &(vec![s[0].url.clone()], Vec::new()), args);
        stop(strace)?;
        let result = result?;
        Ok((
            result["appends"].as_f64().unwrap_or(0.0).max(1.0),
            read_strace(&out)?,
        ))
    })?;
    let total_calls = syscalls.first().map_or(0.0, |(_, n)| *n);
    let top: Vec<Value> = syscalls
        .iter()
        .skip(1)
        .take(6)
        .map(|(name, n)| json!({"syscall": name, "per_append": round(n / strace_appends)}))
        .collect();
    Ok(json!({
        "target": target.label(),
        "appends_per_s": plain["appends_per_s"],
        "p99_ms": plain["p99_ms"],
        "server_cpu_us_per_append": plain["server_cpu_us_per_append"],
        "user_us_per_append": round(user_us),
        "system_us_per_append": round(sys_us),
        "context_switches_per_append": per("context-switches").map(round),
        "wakeups_per_append": per("sched:sched_wakeup").map(round),
        "migrations_per_append": per("cpu-migrations").map(round),
        "page_faults_per_append": per("page-faults").map(round),
        "allocations_per_append": round(allocs / alloc_appends),
        "syscalls_per_append": round(total_calls / strace_appends),
        "top_syscalls": top,
        "instructions_per_append": Value::Null,
    }))
}

fn round(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Runs `f` with a fresh server of `target` (its pid and guards), then
/// stops the server and removes Electric's data.
fn with_server<T>(
    root: &Path,
    work: &Path,
    target: Target,
    f: impl FnOnce(u32, &[crate::servers::ServerGuard]) -> Result<T, String>,
) -> Result<T, String> {
    let mut server = start_one(root, target, work)?;
    let pid = server.pid();
    let servers = std::slice::from_ref(&server);
    let out = f(pid, servers);
    server.check_running()?;
    drop(server);
    if let Some(data) = target.electric_data(work) {
        let _ = fs::remove_dir_all(data);
    }
    out
}

fn spawn_perf(pid: u32, events: &str, out: &Path) -> Result<Child, String> {
    Command::new("perf")
        .args([
            "stat",
            "-x",
            ";",
            "-e",
            events,
            "-p",
            &pid.to_string(),
            "-o",
        ])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start perf: {e}"))
}

/// Stops perf or strace with SIGINT (so it writes its summary) and waits.
fn stop(mut child: Child) -> Result<(), String> {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    child
        .wait()
        .map(|_| ())
        .map_err(|e| format!("waiting for the profiler: {e}"))
}

/// `perf stat -x ';'` output: value;unit;event;…
fn read_perf(path: &Path) -> Result<std::collections::BTreeMap<String, f64>, String> {
    let text =
        fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = std::collections::BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let fields: Vec<&str> = line.split(';').collect();
        if let (Some(v), Some(event)) = (fields.first(), fields.get(2))
            && let Ok(v) = v.parse::<f64>()
        {
            *out.entry((*event).to_owned()).or_insert(0.0) += v;
        }
    }
    if out.is_empty() {
        return Err(format!("perf counted nothing: {text}"));
    }
    Ok(out)
}

/// `strace -c` output: the total first, then each syscall by calls,
/// most first.
fn read_strace(path: &Path) -> Result<Vec<(String, f64)>, String> {
    let text =
        fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut rows: Vec<(String, f64)> = Vec::new();
    let mut total = None;
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // % time, seconds, usecs/call, calls, [errors], syscall
        if fields.len() < 5 || fields[0].starts_with('%') || fields[0].starts_with('-') {
            continue;
        }
        let name = fields[fields.len() - 1];
        let Ok(calls) = fields[3].parse::<f64>() else {
            continue;
        };
        if name == "total" {
            total = Some(calls);
        } else {
            rows.push((name.to_owned(), calls));
        }
    }
    let total = total.ok_or_else(|| format!("no total in strace's summary: {text}"))?;
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    rows.insert(0, ("total".to_owned(), total));
    Ok(rows)
}

/// The process's user and system CPU ticks (`/proc/PID/stat` fields 14
/// and 15, every thread included).
fn proc_cpu(pid: u32) -> Result<(u64, u64), String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("cannot read /proc/{pid}/stat: {e}"))?;
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let get = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    // After the command: state is field 3, so utime (14) is index 11.
    match (get(11), get(12)) {
        (Some(u), Some(s)) => Ok((u, s)),
        _ => Err(format!("unexpected /proc/{pid}/stat: {stat}")),
    }
}

fn ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(100.0)
}

/// Adds uprobes `GROUP:FUNCTION` on `binary` (replacing earlier ones of
/// the group) and answers the events to count.
fn probes(binary: &Path, group: &str, functions: &[&str]) -> Result<String, String> {
    let _ = Command::new("perf")
        .args(["probe", "-q", "-d", &format!("{group}:*")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let mut events = Vec::new();
    for f in functions {
        let output = Command::new("perf")
            .args(["probe", "-x"])
            .arg(binary)
            .args(["-a", &format!("{group}:{f}={f}")])
            .output()
            .map_err(|e| format!("cannot run perf probe: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "perf probe could not place {group}:{f} on {} (root is needed; `perf probe -l` \
                 lists probes that may be in the way): {}",
                binary.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        events.push(format!("{group}:{f}"));
    }
    Ok(events.join(","))
}

/// The glibc Electric's server loads.
fn libc_path() -> Result<PathBuf, String> {
    for p in [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib64/libc.so.6",
    ] {
        if Path::new(p).is_file() {
            return Ok(PathBuf::from(p));
        }
    }
    Err("cannot find glibc's libc.so.6".into())
}

fn print_table(name: &str, row: &[Value]) {
    println!();
    println!("{name}");
    let figures = [
        ("appends/s", "appends_per_s"),
        ("p99 ms", "p99_ms"),
        ("server CPU µs / append", "server_cpu_us_per_append"),
        ("  user µs / append", "user_us_per_append"),
        ("  system µs / append", "system_us_per_append"),
        ("context switches / append", "context_switches_per_append"),
        ("wakeups by the server / append", "wakeups_per_append"),
        ("CPU migrations / append", "migrations_per_append"),
        ("page faults / append", "page_faults_per_append"),
        ("allocations / append", "allocations_per_append"),
        ("system calls / append", "syscalls_per_append"),
    ];
    print!("| figure |");
    for r in row {
        print!(" {} |", r["target"].as_str().unwrap_or("?"));
    }
    println!();
    println!("|---|{}", "---|".repeat(row.len()));
    for (label, key) in figures {
        print!("| {label} |");
        for r in row {
            print!(" {} |", r[key]);
        }
        println!();
    }
    print!("| most frequent system calls / append |");
    for r in row {
        let top: Vec<String> = r["top_syscalls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                format!(
                    "{} {}",
                    t["syscall"].as_str().unwrap_or("?"),
                    t["per_append"]
                )
            })
            .collect();
        print!(" {} |", top.join(", "));
    }
    println!();
    println!();
}
