//! `cargo xtask apps`: the Durable Streams protocol's ecosystem libraries
//! run against a server on loopback, one check per library.
//!
//! The checks live in `tests/apps/`: `yjs.mjs`
//! (`@durable-streams/y-durable-streams` with `yjs`), `aisdk.mjs`
//! (`@durable-streams/aisdk-transport` with the AI SDK's mock model),
//! `state.mjs` (`@durable-streams/state`'s StreamDB) and `python/check.py`
//! (the PyPI client `durable-streams`). Each takes the server's base URL,
//! bounds itself at 30 s, and exits 0 on success or non-zero after printing
//! `NAME: what failed` on stderr. Every version is pinned:
//! `tests/apps/package-lock.json` for npm, `tests/apps/python/requirements.txt`
//! (every transitive package, `==`) for Python.
//!
//! The npm files are copied to `target/apps/`, where `npm ci` runs when
//! `node_modules` is missing or the lockfile changed (as for
//! `http-conformance`); the Python check gets its own virtualenv in
//! `target/apps/venv`, rebuilt when missing or when the requirements file
//! changed. The server is a release `strand-server --memory` (or the debug
//! one with `--debug-build`, as `cargo xtask ci` runs it); with
//! `--flushed` a durable one (a fresh `target/apps/flushed-data`) that
//! moves every appended byte to its segment files within milliseconds
//! (`--cold-flush-bytes 1 --cold-piece-bytes 1 --cold-flush-interval-ms
//! 5`), so the libraries read what they wrote back from disk, offsets they
//! compute included (`ci` runs both); with `--cluster` a durable cluster
//! of `--nodes N` (3 to 9, default 3; each group has three voters, the
//! other members follow it as learners) whose leaderships move the whole
//! time (each node in turn drained, then undrained, balancing every
//! 200 ms; the checks talk to node 2, which forwards writes to whichever
//! node leads); or, with
//! `--server node`, the node reference server `@durable-streams/server`
//! (pinned in the same lockfile). Each check's output goes to
//! `target/apps/NAME.log`; the run prints one line per check and
//! `apps: N passed, M failed`, and fails when any check did.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::npm::install_npm_packages;
use crate::servers::{
    ServerGuard, start_node, start_strand, start_strand_cluster, status_of, use_debug_build,
};
use crate::{run, target_dir};

/// Usage of the task, for errors and `cargo xtask help`.
pub(crate) const USAGE: &str = "cargo xtask apps [--server strand|node] [--only NAME] [--debug-build] [--flushed] [--cluster [--nodes N]]";

/// The idle long-poll timeout given to the server (as `http-conformance`).
const LONG_POLL_TIMEOUT_MS: u64 = 500;
/// A check that has not exited after this long is killed and fails (each
/// bounds itself at 30 s; this is the backstop).
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// The npm files of `tests/apps/` copied into the work directory.
const NPM_FILES: [&str; 7] = [
    "package.json",
    "package-lock.json",
    "common.mjs",
    "yjs.mjs",
    "aisdk.mjs",
    "state.mjs",
    "client.mjs",
];
/// The requirements the virtualenv was last built from (inside the venv, so
/// that a removed venv also removes it).
const INSTALLED_REQUIREMENTS: &str = ".strand-installed-requirements.txt";

/// How a check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    /// `node SCRIPT URL` in the work directory.
    Node(&'static str),
    /// The virtualenv's python with `tests/apps/python/check.py URL`.
    Python,
}

/// One check: its name (for `--only` and the report) and how it runs.
#[derive(Debug, Clone, Copy)]
struct Check {
    name: &'static str,
    runner: Runner,
}

/// Every check, in the order they run.
const CHECKS: [Check; 5] = [
    Check {
        name: "yjs",
        runner: Runner::Node("yjs.mjs"),
    },
    Check {
        name: "aisdk",
        runner: Runner::Node("aisdk.mjs"),
    },
    Check {
        name: "state",
        runner: Runner::Node("state.mjs"),
    },
    Check {
        name: "client",
        runner: Runner::Node("client.mjs"),
    },
    Check {
        name: "python",
        runner: Runner::Python,
    },
];

/// Which server the checks run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Strand,
    Node,
}

#[derive(Debug)]
struct Options {
    server: Server,
    only: Option<String>,
    debug_build: bool,
    flushed: bool,
    cluster: bool,
    /// Nodes of the `--cluster` (3 to 9).
    nodes: usize,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        server: Server::Strand,
        only: None,
        debug_build: false,
        flushed: false,
        cluster: false,
        nodes: 3,
    };
    crate::parse_flags(args, USAGE, |flag, value, inline| {
        match flag {
            "--server" => {
                options.server = match value("`strand` or `node`")?.as_str() {
                    "strand" => Server::Strand,
                    "node" => Server::Node,
                    other => {
                        return Err(format!(
                            "unknown server `{other}` (strand or node); usage: {USAGE}"
                        ));
                    }
                }
            }
            "--only" => {
                let name = value("a check's name")?;
                if !CHECKS.iter().any(|c| c.name == name) {
                    return Err(format!(
                        "no check named `{name}` (one of {}); usage: {USAGE}",
                        CHECKS.map(|c| c.name).join(", ")
                    ));
                }
                options.only = Some(name);
            }
            "--debug-build" if !inline => options.debug_build = true,
            "--flushed" if !inline => options.flushed = true,
            "--cluster" if !inline => options.cluster = true,
            "--nodes" => {
                options.nodes = match value("a number of nodes, 3 to 9")?.parse() {
                    Ok(n @ 3..=9) => n,
                    _ => return Err(format!("--nodes takes 3 to 9; usage: {USAGE}")),
                };
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(options)
}

/// `cargo xtask apps ARGS`.
pub(crate) fn apps(root: &Path, args: &[String]) -> Result<(), String> {
    let options = parse_options(args)?;
    if options.debug_build {
        use_debug_build();
    }
    let checks: Vec<Check> = CHECKS
        .into_iter()
        .filter(|c| options.only.as_deref().is_none_or(|only| only == c.name))
        .collect();
    let work = target_dir(root).join("apps");
    let source = root.join("tests").join("apps");

    // The npm packages hold the node checks and the node reference server.
    let needs_npm =
        options.server == Server::Node || checks.iter().any(|c| c.runner != Runner::Python);
    if needs_npm {
        let t = Instant::now();
        let mut files: Vec<PathBuf> = NPM_FILES.iter().map(|name| source.join(name)).collect();
        files.push(
            root.join("tests")
                .join("http-conformance")
                .join("node-server.mjs"),
        );
        install_npm_packages(&files, &work, "the apps'")?;
        println!(
            "apps: npm packages ready in {:.1}s",
            t.elapsed().as_secs_f64()
        );
    }
    let python = if checks.iter().any(|c| c.runner == Runner::Python) {
        let t = Instant::now();
        let python = ensure_venv(&source.join("python"), &work.join("venv"))?;
        println!(
            "apps: python venv ready in {:.1}s",
            t.elapsed().as_secs_f64()
        );
        Some(python)
    } else {
        None
    };

    if (options.flushed || options.cluster) && options.server != Server::Strand {
        return Err(format!(
            "--flushed and --cluster are strand's; usage: {USAGE}"
        ));
    }
    if options.flushed && options.cluster {
        return Err(format!("--flushed or --cluster, not both; usage: {USAGE}"));
    }
    if options.nodes != 3 && !options.cluster {
        return Err(format!("--nodes goes with --cluster; usage: {USAGE}"));
    }
    let mut extra: Vec<String> = Vec::new();
    if options.flushed {
        let data = work.join("flushed-data");
        let _ = fs::remove_dir_all(&data);
        extra.push("--data-dir".into());
        extra.push(data.display().to_string());
        for (flag, value) in [
            ("--cold-flush-bytes", "1"),
            ("--cold-piece-bytes", "1"),
            ("--cold-flush-interval-ms", "5"),
        ] {
            extra.push(flag.into());
            extra.push(value.into());
        }
    }
    let mut servers = match options.server {
        Server::Strand if options.cluster => start_strand_cluster(
            root,
            &work,
            LONG_POLL_TIMEOUT_MS,
            &[
                "--admin-listen",
                "127.0.0.1:0",
                "--leader-balance-interval-ms",
                "200",
            ]
            .map(str::to_owned),
            options.nodes,
        )?,
        Server::Strand => vec![start_strand(
            root,
            LONG_POLL_TIMEOUT_MS,
            work.join(if options.flushed {
                "strand-server-flushed.log"
            } else {
                "strand-server.log"
            }),
            &extra,
        )?],
        Server::Node => vec![start_node(
            &work,
            LONG_POLL_TIMEOUT_MS,
            work.join("node-server.log"),
        )?],
    };
    // The cluster's checks talk to node 2.
    let at = if options.cluster { 1 } else { 0 };
    let (name, url) = (servers[at].name, servers[at].url.clone());
    let churn = if options.cluster {
        Some(Churn::start(&servers)?)
    } else {
        None
    };
    let mode = if options.flushed {
        " (durable, every byte flushed to segment files)".to_owned()
    } else if options.cluster {
        format!(
            " (node 2 of a {}-node cluster whose leaderships keep moving)",
            options.nodes
        )
    } else {
        String::new()
    };
    println!("apps: {name} at {url}{mode}");

    let (mut passed, mut failed) = (0, 0);
    // Against the cluster the checks go round until every node has been
    // drained once meanwhile (at most 20 rounds).
    let rounds = if churn.is_some() { 20 } else { 1 };
    for round in 0..rounds {
        if churn
            .as_ref()
            .is_some_and(|c| round > 0 && c.drains() >= servers.len() as u64)
        {
            break;
        }
        if churn.is_some() {
            println!("apps: round {}", round + 1);
        }
        for check in &checks {
            let log = work.join(format!("{}.log", check.name));
            let mut cmd = match check.runner {
                Runner::Node(script) => {
                    let mut cmd = Command::new("node");
                    cmd.current_dir(&work).arg(script);
                    cmd
                }
                Runner::Python => {
                    let Some(python) = &python else {
                        return Err("the python check has no virtualenv".into());
                    };
                    let mut cmd = Command::new(python);
                    cmd.current_dir(&work)
                        .arg(source.join("python").join("check.py"))
                        .env("PYTHONDONTWRITEBYTECODE", "1");
                    cmd
                }
            };
            cmd.arg(&url);
            let started = Instant::now();
            let outcome = run_check(cmd, &log, CHECK_TIMEOUT);
            let secs = started.elapsed().as_secs_f64();
            // A server that died during the check explains its failure.
            let outcome =
                outcome.and_then(|()| servers.iter_mut().try_for_each(ServerGuard::check_running));
            match outcome {
                Ok(()) => {
                    passed += 1;
                    println!("apps: {} ok ({secs:.1} s)", check.name);
                }
                Err(e) => {
                    failed += 1;
                    println!(
                        "apps: {} FAILED: {e} ({secs:.1} s; log {})",
                        check.name,
                        log.display()
                    );
                }
            }
        }
    }
    if let Some(churn) = churn {
        let (drains, moved) = churn.stop(&servers);
        println!("apps: meanwhile {drains} drains, {moved} leadership hand-offs in the cluster");
        if moved == 0 {
            failed += 1;
            println!("apps: FAILED: no leadership moved during the checks");
        }
    }
    drop::<Vec<ServerGuard>>(servers);
    println!("apps: {passed} passed, {failed} failed");
    if failed == 0 {
        Ok(())
    } else {
        // Already reported; an empty message keeps the summary last.
        Err(String::new())
    }
}

/// Moves a cluster's leaderships while the checks run: each node in turn
/// is drained (it hands off every leadership) and, 1.2 s later,
/// undrained (balancing gives it its share back).
struct Churn {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    drains: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: thread::JoinHandle<()>,
}

impl Churn {
    fn start(servers: &[ServerGuard]) -> Result<Self, String> {
        let admins = servers
            .iter()
            .map(|s| admin_addr(&s.log))
            .collect::<Result<Vec<_>, _>>()?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let drains = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let count = std::sync::Arc::clone(&drains);
        let thread = thread::spawn(move || {
            // Bounded: at most 2 000 drains (50 minutes).
            for turn in 0..2_000usize {
                if flag.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let (k, admin) = (turn % admins.len(), admins[turn % admins.len()]);
                let node = k + 1;
                if status_of(admin, &format!("POST /__strand/cluster/drain/{node}")) == Ok(204) {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                thread::sleep(Duration::from_millis(1200));
                let _ = status_of(admin, &format!("POST /__strand/cluster/undrain/{node}"));
                thread::sleep(Duration::from_millis(300));
            }
        });
        Ok(Self {
            stop,
            drains,
            thread,
        })
    }

    /// The drains made so far.
    fn drains(&self) -> u64 {
        self.drains.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops it; the drains it made and the hand-offs the nodes counted.
    fn stop(self, servers: &[ServerGuard]) -> (u64, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let drains = std::sync::Arc::clone(&self.drains);
        let _ = self.thread.join();
        let drains = drains.load(std::sync::atomic::Ordering::Relaxed);
        let moved = servers
            .iter()
            .filter_map(|s| {
                let addr = s.url.strip_prefix("http://")?.parse().ok()?;
                crate::loadtest::get_json(addr, "/__strand/health").ok()
            })
            .filter_map(|health| health["balance"]["moved"].as_u64())
            .sum();
        (drains, moved)
    }
}

/// The admin listener a strand-server printed in its log
/// (`strand-server admin listening on http://ADDR`).
fn admin_addr(log: &Path) -> Result<std::net::SocketAddr, String> {
    let text =
        fs::read_to_string(log).map_err(|e| format!("cannot read {}: {e}", log.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("strand-server admin listening on http://"))
        .and_then(|a| a.trim().parse().ok())
        .ok_or_else(|| format!("{} names no admin listener", log.display()))
}

/// Runs one check with its stdout and stderr in `log`, killed after
/// `timeout`; on failure returns its message (the last line it
/// printed that starts with its name, else its last line, else its status).
pub(crate) fn run_check(mut cmd: Command, log: &Path, timeout: Duration) -> Result<(), String> {
    let file =
        fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = file
        .try_clone()
        .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                // Gone already, or killed now: either way it failed.
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "still running after {}s, killed",
                    timeout.as_secs()
                ));
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for {shown}: {e}")),
        }
    };
    if status.success() {
        return Ok(());
    }
    let output = fs::read_to_string(log).unwrap_or_default();
    Err(failure_message(&output).unwrap_or_else(|| format!("exited with {status}")))
}

/// The message of a failed check's output: its last `NAME: …` line (the
/// checks' own report), else its last non-empty line.
fn failure_message(output: &str) -> Option<String> {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    let own = lines.iter().rev().find(|line| {
        CHECKS
            .iter()
            .any(|c| line.starts_with(&format!("{}: ", c.name)))
    });
    own.or(lines.last()).map(|line| {
        let line = CHECKS
            .iter()
            .find_map(|c| line.strip_prefix(&format!("{}: ", c.name)))
            .unwrap_or(line);
        line.to_owned()
    })
}

/// Builds `venv` from `python_dir/requirements.txt` when it is missing or
/// was built from other requirements: `python3 -m venv`, `pip install
/// --no-deps -r` (every package is pinned there), `pip check`. Returns the
/// venv's python.
fn ensure_venv(python_dir: &Path, venv: &Path) -> Result<PathBuf, String> {
    let requirements = python_dir.join("requirements.txt");
    let wanted = fs::read(&requirements)
        .map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let bin = venv.join("bin");
    let python = bin.join("python");
    let stamp = venv.join(INSTALLED_REQUIREMENTS);
    if python.is_file() && fs::read(&stamp).ok().as_deref() == Some(wanted.as_slice()) {
        return Ok(python);
    }
    println!(
        "xtask: building the python check's virtualenv {} from {}",
        venv.display(),
        requirements.display()
    );
    match fs::remove_dir_all(venv) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", venv.display())),
    }
    let mut create = Command::new("python3");
    create.arg("-m").arg("venv").arg(venv).stdin(Stdio::null());
    run(create)?;
    let mut install = Command::new(bin.join("pip"));
    install
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "-r",
        ])
        .arg(&requirements)
        .stdin(Stdio::null());
    run(install)?;
    let mut check = Command::new(bin.join("pip"));
    check
        .args(["check", "--disable-pip-version-check"])
        .stdin(Stdio::null());
    run(check)?;
    fs::write(&stamp, &wanted).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(python)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_parse() -> Result<(), String> {
        let o = parse_options(&args(&[]))?;
        assert_eq!(o.server, Server::Strand);
        assert!(o.only.is_none() && !o.debug_build);
        let o = parse_options(&args(&["--server", "node", "--only=yjs", "--debug-build"]))?;
        assert_eq!(o.server, Server::Node);
        assert_eq!(o.only.as_deref(), Some("yjs"));
        assert!(o.debug_build);
        assert!(parse_options(&args(&["--only", "nope"])).is_err());
        assert!(parse_options(&args(&["--server", "electric"])).is_err());
        assert!(parse_options(&args(&["--server"])).is_err());
        Ok(())
    }

    #[test]
    fn failure_messages() {
        let out = "[YjsServer] noise\nyjs: timed out waiting for bob\n";
        assert_eq!(
            failure_message(out).as_deref(),
            Some("timed out waiting for bob")
        );
        assert_eq!(failure_message("boom\n\n").as_deref(), Some("boom"));
        assert_eq!(failure_message(""), None);
    }
}
