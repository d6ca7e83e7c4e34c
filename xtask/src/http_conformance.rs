//! `cargo xtask http-conformance`: the official Durable Streams HTTP suite
//! (`@durable-streams/server-conformance-tests`, pinned in
//! `tests/http-conformance/package-lock.json`) against a server on loopback.
//!
//! The package files are copied to `target/http-conformance/`, where
//! `npm ci` runs when `node_modules` is missing or the lockfile changed. The
//! server is `strand-server` (built in release) or, to check this runner, the
//! node reference server (`tests/http-conformance/node-server.mjs`), or, to
//! compare, Electric's Rust server (`--server electric`: crate
//! `durable-streams` 0.1.5, installed once into
//! `target/peers/electric-0.1.5/` by the install code `cargo xtask loadtest`
//! uses, run with `--durability memory` and a fresh data directory). vitest
//! writes a JSON report that is summarised per area (top-level `describe`
//! block); the last line is `http-conformance: N passed, M failed`.
//!
//! `--subscriptions` also runs the suite's opt-in tests of the reserved
//! subscription API (webhooks, pull-wake). One of them registers a webhook
//! at `10.0.0.1` and expects a refusal, and a server that failed to refuse
//! would send a request there, so these run only inside a network
//! namespace that has nothing but loopback: everything that needs the
//! network (npm ci, the build) happens first, then this binary runs itself
//! again under `unshare --net --map-root-user` with a hidden flag, and
//! inside, before anything else, checks that `lo` is its only interface.
//! When no namespace can be had the run is refused, never done outside.
//!
//! `package.json` pins `vite` 8.3.8 beside vitest: vite 8.4.0 names an
//! optional Windows package the registry does not serve, and `npm ci` then
//! rejects the lockfile as out of sync.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{cargo, loadtest, run};

/// The idle long-poll timeout given to the server, and told to the suite.
const LONG_POLL_TIMEOUT_MS: u64 = 500;
/// How long a server may take to print its `listening on` line.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long strand-server may take to answer its health check after that.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);
/// The files of `tests/http-conformance/` the run needs.
const PACKAGE_FILES: [&str; 4] = [
    "package.json",
    "package-lock.json",
    "conformance.test.mjs",
    "node-server.mjs",
];
/// The test file vitest runs.
const TEST_FILE: &str = "conformance.test.mjs";
/// The lockfile `npm ci` last installed from (inside `node_modules`, so that
/// a removed `node_modules` also removes it).
const INSTALLED_LOCK: &str = "node_modules/.strand-installed-lock.json";

/// Which server the suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    /// `target/release/strand-server`.
    Strand,
    /// The node reference server `@durable-streams/server`.
    Node,
    /// Electric's Rust server (crate `durable-streams` 0.1.5), installed
    /// into `target/peers/electric-0.1.5` as `cargo xtask loadtest` does.
    Electric,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Strand => "strand-server",
            Server::Node => "node reference server",
            Server::Electric => "electric durable-streams-server",
        }
    }
}

/// The command line of `cargo xtask http-conformance`.
#[derive(Debug)]
struct Options {
    server: Server,
    keep: bool,
    auth: bool,
    durable: bool,
    cluster: bool,
    /// `--subscriptions`: the opt-in subscription tests too, in a network
    /// namespace.
    subscriptions: bool,
    /// The hidden `--inside-netns`: this process is the run inside the
    /// namespace that `--subscriptions` made.
    inside_netns: bool,
    allow_fail_areas: Vec<String>,
}

/// Usage of the task, for errors and `cargo xtask help`.
pub(crate) const USAGE: &str = "cargo xtask http-conformance [--server strand|node|electric] [--auth] [--durable] [--cluster] [--subscriptions] [--debug-build] [--keep] [--allow-fail-area PREFIX]...";

/// Set by `--debug-build`: run the debug `strand-server` that
/// `cargo test --workspace` builds instead of a release build. `cargo xtask
/// ci` uses it after its tests step, which saves compiling the whole
/// dependency tree a second time in release on a fresh checkout.
static DEBUG_BUILD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs the debug `strand-server` from now on, as `--debug-build` does
/// (for `cargo xtask apps --debug-build`).
pub(crate) fn use_debug_build() {
    DEBUG_BUILD.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Set inside the network namespace of `--subscriptions`: the outer run
/// has built `strand-server` already, and cargo gets no network here.
static PREBUILT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The hidden flag of the run inside the network namespace.
const INSIDE_NETNS_FLAG: &str = "--inside-netns";

/// Set by `cargo xtask loadtest --pin`: the CPUs (a `taskset -c` list) on
/// which every server this process starts runs; unset, the kernel places
/// them. A server started pinned sizes its thread pools to those CPUs.
static SERVER_CPUS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Runs every server started from now on on `cpus` (a `taskset -c` list).
pub(crate) fn pin_servers(cpus: String) -> Result<(), String> {
    SERVER_CPUS
        .set(cpus)
        .map_err(|_| "the servers' CPUs are already set".to_owned())
}

/// A command that runs `program` on `cpus` when given (through `taskset`,
/// which execs it, so the child's process id is the program's), or plainly.
pub(crate) fn command_on(cpus: Option<&str>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match cpus {
        Some(cpus) => {
            let mut cmd = Command::new("taskset");
            cmd.arg("-c").arg(cpus).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

/// A command that starts the server `program`, on the pinned CPUs if any.
pub(crate) fn server_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    command_on(SERVER_CPUS.get().map(String::as_str), program)
}

/// Builds the `strand-server` binary the run uses and returns its path:
/// `cargo build --release -p strand-server`, or with `--debug-build`
/// `cargo test --workspace --no-run` (the tests step's own build, so nothing
/// is rebuilt after it).
fn build_strand(root: &Path) -> Result<PathBuf, String> {
    let mut build = cargo(root);
    if PREBUILT.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(strand_binary(root));
    }
    if DEBUG_BUILD.load(std::sync::atomic::Ordering::Relaxed) {
        build.args(["test", "--workspace", "--no-run"]);
    } else {
        build.args(["build", "--release", "-p", "strand-server"]);
    }
    run(build)?;
    Ok(strand_binary(root))
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        server: Server::Strand,
        keep: false,
        auth: false,
        durable: false,
        cluster: false,
        subscriptions: false,
        inside_netns: false,
        allow_fail_areas: Vec::new(),
    };
    crate::parse_flags(args, USAGE, |flag, value, inline| {
        match flag {
            "--server" => {
                options.server = match value("`strand`, `node` or `electric`")?.as_str() {
                    "strand" => Server::Strand,
                    "node" => Server::Node,
                    "electric" => Server::Electric,
                    other => {
                        return Err(format!(
                            "unknown server `{other}` (strand, node or electric); usage: {USAGE}"
                        ));
                    }
                }
            }
            "--allow-fail-area" => options.allow_fail_areas.push(value("an area prefix")?),
            "--keep" if !inline => options.keep = true,
            "--auth" if !inline => options.auth = true,
            "--durable" if !inline => options.durable = true,
            "--cluster" if !inline => options.cluster = true,
            "--subscriptions" if !inline => options.subscriptions = true,
            INSIDE_NETNS_FLAG if !inline => options.inside_netns = true,
            "--debug-build" if !inline => use_debug_build(),
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(options)
}

/// Cargo's target directory: `CARGO_TARGET_DIR` (relative to the workspace
/// root when relative), or `target/`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    }
}

/// `cargo xtask http-conformance ARGS`.
pub(crate) fn http_conformance(root: &Path, args: &[String]) -> Result<(), String> {
    let options = parse_options(args)?;
    let work = target_dir(root).join("http-conformance");
    if options.inside_netns && !options.subscriptions {
        return Err(format!(
            "{INSIDE_NETNS_FLAG} is internal to --subscriptions"
        ));
    }
    if options.subscriptions && !options.inside_netns {
        return run_in_netns(root, &work, args, &options);
    }
    if options.inside_netns {
        only_loopback()?;
        PREBUILT.store(true, std::sync::atomic::Ordering::Relaxed);
        println!("xtask: in a network namespace with loopback only");
    }
    prepare_packages(root, &work)?;

    if options.auth && options.server != Server::Strand {
        return Err("--auth runs against strand-server only".into());
    }
    let secret = work.join("auth-secret");
    let mut extra: Vec<String> = if options.auth {
        write_secret(&secret)?;
        vec!["--auth-secret-file".into(), secret.display().to_string()]
    } else {
        Vec::new()
    };
    if options.durable {
        if options.server != Server::Strand {
            return Err("--durable runs against strand-server only".into());
        }
        // A fresh data directory: strand-server --data-dir, fsync on.
        let data = work.join("durable-data");
        match fs::remove_dir_all(&data) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove {}: {e}", data.display())),
        }
        extra.extend(["--data-dir".into(), data.display().to_string()]);
    }
    if options.subscriptions {
        // The suite's webhook receivers listen on 127.0.0.1.
        extra.extend(["--webhook-allow".into(), "127.0.0.0/8".into()]);
    }
    if options.cluster && (options.server != Server::Strand || options.auth) {
        return Err("--cluster runs against strand-server without --auth only".into());
    }
    // With --cluster: nodes 1 and 3 of a three-node cluster run beside the
    // node under test (node 2), killed when the run ends.
    let mut cluster_guards = Vec::new();
    if options.cluster {
        let (node2, others) = start_cluster(root, &work, &extra)?;
        cluster_guards = others;
        extra = node2;
    }
    let mut server = match options.server {
        Server::Strand if options.cluster => {
            let mut cmd = Command::new(build_strand(root)?);
            cmd.current_dir(root).args(&extra);
            let guard = spawn_server(
                Server::Strand,
                cmd,
                work.join("strand-server.log"),
                "strand-server listening on ",
            )?;
            for other in &cluster_guards {
                wait_healthy(other)?;
            }
            wait_healthy(&guard)?;
            guard
        }
        Server::Strand => start_strand(
            root,
            LONG_POLL_TIMEOUT_MS,
            work.join("strand-server.log"),
            &extra,
        )?,
        Server::Node => start_node_with(
            &work,
            LONG_POLL_TIMEOUT_MS,
            work.join("node-server.log"),
            options.subscriptions,
        )?,
        Server::Electric => {
            loadtest::ensure_peer(root, &loadtest::ELECTRIC)?;
            loadtest::start_electric_at(
                root,
                &work.join("electric-data"),
                "memory",
                LONG_POLL_TIMEOUT_MS,
                &work.join("electric-server.log"),
            )?
        }
    };
    println!("xtask: {} at {}", server.name, server.url);
    let authorization = if options.auth {
        let token = mint_token(root, &secret)?;
        let probe = status_of(loopback_addr(&server.url)?, "PUT /v1/stream/auth-probe")?;
        if probe != 401 {
            return Err(format!(
                "--auth: an unauthenticated PUT answered {probe}, not 401: authentication is not on"
            ));
        }
        println!("xtask: authentication on; every request of the suite carries a bearer token");
        Some(format!("Bearer {token}"))
    } else {
        None
    };

    let report_path = work.join("report.json");
    // A report of an earlier run must not pass for this one's.
    match fs::remove_file(&report_path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", report_path.display())),
    }
    let started = Instant::now();
    run_vitest(
        &work,
        &server.url,
        &report_path,
        authorization.as_deref(),
        options.subscriptions,
    )?;
    let secs = started.elapsed().as_secs_f64();

    if options.keep {
        server.check_running()?;
        println!(
            "xtask: --keep: {} still running at {} (log {}); press Enter to stop it",
            server.name,
            server.url,
            server.log.display()
        );
        let mut line = String::new();
        // EOF or an error on stdin stops the server just the same.
        let _ = std::io::stdin().read_line(&mut line);
    }
    drop(server);
    drop(cluster_guards);

    let report = fs::read_to_string(&report_path).map_err(|e| {
        format!(
            "vitest wrote no report at {} ({e}); see its output above",
            report_path.display()
        )
    })?;
    let areas = summarize(&report)?;
    print_report(&areas, &options, secs)
}

/// `--subscriptions`, outside: installs the packages and builds the server
/// while the network is there, makes sure a network namespace can be
/// created, then runs this binary again inside one (loopback up, nothing
/// else) with the same arguments and [`INSIDE_NETNS_FLAG`].
fn run_in_netns(
    root: &Path,
    work: &Path,
    args: &[String],
    options: &Options,
) -> Result<(), String> {
    if options.server == Server::Electric {
        return Err("--subscriptions runs against strand-server or the node server".into());
    }
    prepare_packages(root, work)?;
    if options.server == Server::Strand {
        build_strand(root)?;
    }
    let probe = Command::new("unshare")
        .args(["--net", "--map-root-user", "sh", "-c", "ip link set lo up"])
        .stdin(Stdio::null())
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            return Err(format!(
                "--subscriptions needs a network namespace, and `unshare --net --map-root-user sh -c \
                 'ip link set lo up'` failed ({}): {}; the subscription tests are not run outside one",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Err(e) => {
            return Err(format!(
                "--subscriptions needs a network namespace and cannot run `unshare` ({e}); \
                 the subscription tests are not run outside one"
            ));
        }
    }
    let me = std::env::current_exe().map_err(|e| format!("cannot find this xtask binary: {e}"))?;
    let mut cmd = Command::new("unshare");
    cmd.current_dir(root)
        .args(["--net", "--map-root-user", "sh", "-c"])
        .arg(r#"ip link set lo up && exec "$0" "$@""#)
        .arg(me)
        .arg("http-conformance")
        .args(args)
        .arg(INSIDE_NETNS_FLAG);
    println!("xtask: running the suite in a network namespace with loopback only");
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        // The run inside has printed its summary or its error.
        Err(String::new())
    }
}

/// Inside the namespace: refuses to go on unless `lo` is the only network
/// interface this process sees (`/proc/self/net/dev`, which belongs to the
/// process's network namespace, unlike `/sys/class/net`).
fn only_loopback() -> Result<(), String> {
    let dev = fs::read_to_string("/proc/self/net/dev")
        .map_err(|e| format!("cannot list the network interfaces: {e}"))?;
    let others = interfaces_besides_loopback(&dev);
    if others.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{INSIDE_NETNS_FLAG}: this is not a loopback-only network namespace (interfaces: {}); \
             run `cargo xtask http-conformance --subscriptions`",
            others.join(", ")
        ))
    }
}

/// The interfaces of a `/proc/net/dev` listing other than `lo`.
fn interfaces_besides_loopback(dev: &str) -> Vec<String> {
    dev.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, _)| name.trim().to_owned())
        .filter(|name| name != "lo")
        .collect()
}

/// Copies the package files into `work` and runs `npm ci` when
/// `node_modules` is missing or was installed from another lockfile.
pub(crate) fn prepare_packages(root: &Path, work: &Path) -> Result<(), String> {
    let source = root.join("tests").join("http-conformance");
    let files: Vec<PathBuf> = PACKAGE_FILES.iter().map(|name| source.join(name)).collect();
    install_npm_packages(&files, work, "the suite's")
}

/// Copies `files` (a `package.json`, its `package-lock.json` and the
/// scripts) into `work`, each under its own file name and rewritten only
/// when changed, then runs `npm ci` there when `node_modules` is missing or
/// was installed from another lockfile; `what` names the packages in the
/// message (`the suite's`).
pub(crate) fn install_npm_packages(
    files: &[PathBuf],
    work: &Path,
    what: &str,
) -> Result<(), String> {
    fs::create_dir_all(work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    for from in files {
        let name = from
            .file_name()
            .ok_or_else(|| format!("{} names no file", from.display()))?;
        let bytes = fs::read(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        let to = work.join(name);
        if fs::read(&to).ok().as_deref() != Some(bytes.as_slice()) {
            fs::write(&to, &bytes).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
        }
    }
    let lock = fs::read(work.join("package-lock.json"))
        .map_err(|e| format!("cannot read the copied lockfile: {e}"))?;
    let installed = work.join(INSTALLED_LOCK);
    if work.join("node_modules").is_dir() && fs::read(&installed).ok() == Some(lock.clone()) {
        return Ok(());
    }
    println!(
        "xtask: installing {what} npm packages (npm ci in {})",
        work.display()
    );
    let mut cmd = Command::new("npm");
    cmd.current_dir(work)
        .args(["ci", "--no-audit", "--no-fund"])
        .stdin(Stdio::null());
    run(cmd)?;
    fs::write(&installed, &lock).map_err(|e| format!("cannot write {}: {e}", installed.display()))
}

/// A server process, killed (and reaped) when dropped, so no server
/// outlives the run, whatever goes wrong.
pub(crate) struct ServerGuard {
    pub(crate) name: &'static str,
    pub(crate) child: Child,
    /// Held open for the node server, which exits when its stdin closes.
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) url: String,
    pub(crate) log: PathBuf,
}

impl ServerGuard {
    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn check_running(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "{} exited with {status}; log {}",
                self.name,
                self.log.display()
            )),
            Err(e) => Err(format!("cannot poll {}: {e}", self.name)),
        }
    }
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        drop(self.stdin.take());
        // Already exited, or gone: nothing left to stop either way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Builds `strand-server` (release, or debug with `--debug-build`) and
/// starts it on a free loopback port.
pub(crate) fn start_strand(
    root: &Path,
    long_poll_ms: u64,
    log: PathBuf,
    extra: &[String],
) -> Result<ServerGuard, String> {
    let binary = build_strand(root)?;
    let mut cmd = server_command(&binary);
    cmd.current_dir(root).args([
        "--listen",
        "127.0.0.1:0",
        "--long-poll-timeout-ms",
        &long_poll_ms.to_string(),
    ]);
    // In memory unless the caller chose a data directory.
    if !extra.iter().any(|a| a == "--data-dir") {
        cmd.arg("--memory");
    }
    cmd.args(extra);
    let guard = spawn_server(Server::Strand, cmd, log, "strand-server listening on ")?;
    wait_healthy(&guard)?;
    Ok(guard)
}

fn strand_binary(root: &Path) -> PathBuf {
    let profile = if DEBUG_BUILD.load(std::sync::atomic::Ordering::Relaxed) {
        "debug"
    } else {
        "release"
    };
    target_dir(root)
        .join(profile)
        .join(format!("strand-server{}", std::env::consts::EXE_SUFFIX))
}

/// Three free loopback ports, one per node of a cluster.
fn cluster_ports() -> Result<Vec<u16>, String> {
    let mut ports = Vec::new();
    for _ in 0..3 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("cannot find a free port: {e}"))?;
        ports.push(
            listener
                .local_addr()
                .map_err(|e| format!("cannot find a free port: {e}"))?
                .port(),
        );
    }
    Ok(ports)
}

/// The arguments of node `id` (1-based) of a three-node cluster on
/// `ports`, with a fresh data directory `work/cluster-node-{id}`.
fn cluster_node_args(
    work: &Path,
    ports: &[u16],
    id: usize,
    long_poll_ms: u64,
) -> Result<Vec<String>, String> {
    let data = work.join(format!("cluster-node-{id}"));
    match fs::remove_dir_all(&data) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", data.display())),
    }
    let mut a = vec![
        "--listen".to_owned(),
        format!("127.0.0.1:{}", ports[id - 1]),
        "--long-poll-timeout-ms".to_owned(),
        long_poll_ms.to_string(),
        "--data-dir".to_owned(),
        data.display().to_string(),
        "--node-id".to_owned(),
        id.to_string(),
    ];
    for (i, port) in ports.iter().enumerate() {
        a.push("--peer".to_owned());
        a.push(format!("{}=http://127.0.0.1:{port}", i + 1));
    }
    Ok(a)
}

/// Starts nodes 1 and 3 of a three-node cluster on free loopback ports
/// (fresh data directories under `work`, `extra` arguments for every
/// node) and returns node 2's arguments, for the node the suite talks to.
fn start_cluster(
    root: &Path,
    work: &Path,
    extra: &[String],
) -> Result<(Vec<String>, Vec<ServerGuard>), String> {
    build_strand(root)?;
    let ports = cluster_ports()?;
    let mut guards = Vec::new();
    for id in [1, 3] {
        guards.push(spawn_cluster_node(
            root,
            work,
            &ports,
            id,
            LONG_POLL_TIMEOUT_MS,
            extra,
        )?);
    }
    let mut node2 = cluster_node_args(work, &ports, 2, LONG_POLL_TIMEOUT_MS)?;
    node2.extend_from_slice(extra);
    Ok((node2, guards))
}

/// Starts node `id` of a three-node cluster on `ports` (log
/// `work/cluster-node-{id}.log`, `extra` arguments after the cluster's).
fn spawn_cluster_node(
    root: &Path,
    work: &Path,
    ports: &[u16],
    id: usize,
    long_poll_ms: u64,
    extra: &[String],
) -> Result<ServerGuard, String> {
    let mut cmd = server_command(strand_binary(root));
    cmd.current_dir(root)
        .args(cluster_node_args(work, ports, id, long_poll_ms)?)
        .args(extra);
    spawn_server(
        Server::Strand,
        cmd,
        work.join(format!("cluster-node-{id}.log")),
        "strand-server listening on ",
    )
}

/// Starts a three-node durable cluster of release `strand-server`s on
/// free loopback ports (fresh data directories `work/cluster-node-N`,
/// logs `work/cluster-node-N.log`, `extra` arguments on every node) and
/// waits until every node reports a leader for each of its groups.
/// The binary must be built.
pub(crate) fn start_strand_cluster(
    root: &Path,
    work: &Path,
    long_poll_ms: u64,
    extra: &[String],
) -> Result<Vec<ServerGuard>, String> {
    let ports = cluster_ports()?;
    let mut guards = Vec::new();
    for id in 1..=3 {
        guards.push(spawn_cluster_node(
            root,
            work,
            &ports,
            id,
            long_poll_ms,
            extra,
        )?);
    }
    for guard in &guards {
        wait_healthy(guard)?;
    }
    Ok(guards)
}

/// Starts the node reference server script of `work`.
pub(crate) fn start_node(
    work: &Path,
    long_poll_ms: u64,
    log: PathBuf,
) -> Result<ServerGuard, String> {
    start_node_with(work, long_poll_ms, log, false)
}

/// Starts the node reference server script of `work`, with webhook
/// subscriptions enabled when `webhooks` (its `webhooks` option; off, it
/// refuses every `type: webhook` subscription).
fn start_node_with(
    work: &Path,
    long_poll_ms: u64,
    log: PathBuf,
    webhooks: bool,
) -> Result<ServerGuard, String> {
    let mut cmd = server_command("node");
    cmd.current_dir(work)
        .arg("node-server.mjs")
        .env("LONG_POLL_TIMEOUT_MS", long_poll_ms.to_string())
        .env("PORT", "0");
    if webhooks {
        cmd.env("WEBHOOKS", "1");
    }
    spawn_server(
        Server::Node,
        cmd,
        log,
        "node reference server listening on ",
    )
}

/// Spawns a server whose stdout announces `<prefix>http://HOST:PORT` once
/// it is ready; its stderr, and its stdout after that line, go to `log`.
fn spawn_server(
    server: Server,
    mut cmd: Command,
    log: PathBuf,
    prefix: &'static str,
) -> Result<ServerGuard, String> {
    let name = server.name();
    let log_file =
        fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let stderr = log_file
        .try_clone()
        .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    cmd.stdin(if server == Server::Node {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(stderr);
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let mut guard = ServerGuard {
        name,
        child,
        stdin,
        url: String::new(),
        log: log.clone(),
    };
    let Some(stdout) = stdout else {
        return Err(format!("{name}: no stdout pipe"));
    };

    // Reads lines until the ready line (strand-server prints its data
    // directory and admin address first; at most 16 lines), copying the
    // others to the log, then copies the rest of stdout to the log so the
    // server never blocks on a full pipe.
    let (tx, rx) = mpsc::channel();
    let ready = prefix.to_owned();
    thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut log_file = log_file;
        let mut read = Ok(String::new());
        for _ in 0..16 {
            let mut line = String::new();
            read = reader.read_line(&mut line).map(|_| line);
            match &read {
                Ok(line) if !line.is_empty() && !line.starts_with(&ready) => {
                    let _ = log_file.write_all(line.as_bytes());
                }
                _ => break,
            }
        }
        let _ = tx.send(read);
        let _ = std::io::copy(&mut reader, &mut log_file);
    });
    let line = match rx.recv_timeout(START_TIMEOUT) {
        Ok(Ok(line)) if !line.is_empty() => line,
        Ok(Ok(_)) => {
            return Err(format!(
                "{name} exited before it was ready; {}",
                log_tail(&log)
            ));
        }
        Ok(Err(e)) => return Err(format!("cannot read {name}'s stdout: {e}")),
        Err(_) => {
            return Err(format!(
                "{name} did not print `{prefix}URL` within {}s; {}",
                START_TIMEOUT.as_secs(),
                log_tail(&log)
            ));
        }
    };
    let line = line.trim_end();
    let url = line
        .strip_prefix(prefix)
        .ok_or_else(|| format!("{name} printed `{line}`, expected `{prefix}http://HOST:PORT`"))?
        .trim_end_matches('/')
        .to_owned();
    let addr = loopback_addr(&url).map_err(|e| format!("{name} printed `{line}`: {e}"))?;
    guard.url = format!("http://{addr}");
    Ok(guard)
}

/// The socket address of `http://HOST:PORT`, which must be on loopback.
pub(crate) fn loopback_addr(url: &str) -> Result<SocketAddr, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("`{url}` is not an http:// URL"))?;
    let addr: SocketAddr = rest
        .parse()
        .map_err(|e| format!("`{rest}` is not HOST:PORT with a numeric host ({e})"))?;
    if !addr.ip().is_loopback() {
        return Err(format!("{addr} is not a loopback address"));
    }
    Ok(addr)
}

/// The last lines of a server log, for an error message.
pub(crate) fn log_tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(20)..].join("\n");
    if tail.is_empty() {
        format!("its log {} is empty", log.display())
    } else {
        format!("the end of its log {}:\n{tail}", log.display())
    }
}

/// Polls `GET /__strand/health` until it answers 200.
fn wait_healthy(server: &ServerGuard) -> Result<(), String> {
    let addr = loopback_addr(&server.url)?;
    let deadline = Instant::now() + HEALTH_TIMEOUT;
    let mut last = String::from("no answer");
    while Instant::now() < deadline {
        match health_status(addr) {
            Ok(200) => return Ok(()),
            Ok(status) => last = format!("status {status}"),
            Err(e) => last = e,
        }
        thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "{} at {} did not answer GET /__strand/health with 200 within {}s (last: {last})",
        server.name,
        server.url,
        HEALTH_TIMEOUT.as_secs()
    ))
}

/// One `GET /__strand/health` over HTTP/1.1; returns the status code.
fn health_status(addr: SocketAddr) -> Result<u16, String> {
    status_of(addr, "GET /__strand/health")
}

/// Writes a fresh shared secret for `--auth` (32 hex digits from the
/// clock and the process id: a test secret, never a production one).
fn write_secret(path: &Path) -> Result<(), String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let secret = format!("{nanos:016x}{:016x}", std::process::id());
    fs::write(path, secret).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Mints an all-rights token with `strand-server token`.
fn mint_token(root: &Path, secret: &Path) -> Result<String, String> {
    let binary = strand_binary(root);
    let out = Command::new(&binary)
        .args(["token", "--secret-file"])
        .arg(secret)
        .args([
            "--bucket",
            "*",
            "--rights",
            "read,write,admin",
            "--ttl-seconds",
            "3600",
        ])
        .args(["--subject", "http-conformance"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    if !out.status.success() {
        return Err(format!(
            "strand-server token failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The status of one bodiless request (`METHOD PATH`) over HTTP/1.1.
pub(crate) fn status_of(addr: SocketAddr, request_line: &str) -> Result<u16, String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| format!("set timeout: {e}"))?;
    write!(
        stream,
        "{request_line} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("write: {e}"))?;
    let mut head = [0u8; 64];
    let mut len = 0;
    while len < 12 {
        let n = stream
            .read(&mut head[len..])
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        len += n;
    }
    let status_line = String::from_utf8_lossy(&head[..len]);
    status_line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {status_line:?}"))
}

/// Runs the suite with a compact console reporter and a JSON report. Its
/// exit status is not used: the report says what failed.
fn run_vitest(
    work: &Path,
    url: &str,
    report: &Path,
    authorization: Option<&str>,
    subscriptions: bool,
) -> Result<(), String> {
    let mut cmd = Command::new("npx");
    cmd.current_dir(work)
        .args(["--no", "--", "vitest", "run", TEST_FILE, "--root"])
        .arg(work)
        .args(["--reporter=dot", "--reporter=json"])
        .arg(format!("--outputFile.json={}", report.display()))
        .env("CONFORMANCE_TEST_URL", url)
        .env(
            "CONFORMANCE_LONG_POLL_TIMEOUT_MS",
            LONG_POLL_TIMEOUT_MS.to_string(),
        )
        .stdin(Stdio::null());
    if subscriptions {
        cmd.env("CONFORMANCE_SUBSCRIPTIONS", "1");
    }
    // Shown before the token is added: error messages never carry it.
    let shown = format!("{cmd:?}");
    if let Some(value) = authorization {
        cmd.env("CONFORMANCE_AUTHORIZATION", value);
    }
    cmd.status()
        .map(|_| ())
        .map_err(|e| format!("could not start {shown}: {e}"))
}

/// One area's counts and its failed tests.
#[derive(Debug, Default)]
struct Area {
    passed: usize,
    failed: usize,
    skipped: usize,
    failures: Vec<String>,
}

/// Areas in the order the suite declares them (first appearance).
fn summarize(report: &str) -> Result<Vec<(String, Area)>, String> {
    let doc: Value =
        serde_json::from_str(report).map_err(|e| format!("the vitest report is not JSON: {e}"))?;
    let files = doc
        .get("testResults")
        .and_then(Value::as_array)
        .ok_or("the vitest report has no `testResults`")?;
    let mut order: Vec<String> = Vec::new();
    let mut areas: BTreeMap<String, Area> = BTreeMap::new();
    for file in files {
        if let Some(message) = file
            .get("message")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
        {
            return Err(format!("the test file failed to run: {message}"));
        }
        let tests = file
            .get("assertionResults")
            .and_then(Value::as_array)
            .ok_or("a vitest report entry has no `assertionResults`")?;
        for test in tests {
            let area = test
                .get("ancestorTitles")
                .and_then(Value::as_array)
                .and_then(|titles| titles.first())
                .and_then(Value::as_str)
                .unwrap_or("(top level)")
                .to_owned();
            let entry = areas.entry(area.clone()).or_insert_with(|| {
                order.push(area.clone());
                Area::default()
            });
            match test.get("status").and_then(Value::as_str) {
                Some("passed") => entry.passed += 1,
                Some("failed") => {
                    entry.failed += 1;
                    let name = test
                        .get("fullName")
                        .and_then(Value::as_str)
                        .unwrap_or("(unnamed test)");
                    entry.failures.push(name.to_owned());
                }
                _ => entry.skipped += 1,
            }
        }
    }
    if order.is_empty() {
        return Err("the vitest report lists no tests".into());
    }
    Ok(order
        .into_iter()
        .filter_map(|name| areas.remove(&name).map(|area| (name, area)))
        .collect())
}

/// Prints the per-area table, the failed tests and the closing line; fails
/// when a failure lies outside the allowed areas.
fn print_report(areas: &[(String, Area)], options: &Options, secs: f64) -> Result<(), String> {
    let allowed = |name: &str| {
        options
            .allow_fail_areas
            .iter()
            .any(|prefix| name.starts_with(prefix.as_str()))
    };
    let width = areas
        .iter()
        .map(|(name, _)| name.chars().count())
        .max()
        .unwrap_or(0)
        .max("area".len());
    println!();
    println!(
        "{:<width$}  {:>6}  {:>6}  {:>7}",
        "area", "passed", "failed", "skipped"
    );
    let (mut passed, mut failed, mut skipped, mut allowed_failures) = (0, 0, 0, 0);
    for (name, area) in areas {
        let mark = if area.failed > 0 && allowed(name) {
            "  (allowed)"
        } else {
            ""
        };
        println!(
            "{name:<width$}  {:>6}  {:>6}  {:>7}{mark}",
            area.passed, area.failed, area.skipped
        );
        passed += area.passed;
        failed += area.failed;
        skipped += area.skipped;
        if allowed(name) {
            allowed_failures += area.failed;
        }
    }
    let counted: Vec<&String> = areas
        .iter()
        .filter(|(name, _)| !allowed(name))
        .flat_map(|(_, area)| &area.failures)
        .collect();
    if !counted.is_empty() {
        println!();
        println!("failed tests:");
        for name in &counted {
            println!("  {name}");
        }
    }
    println!();
    println!(
        "suite ran in {secs:.1}s against the {}",
        options.server.name()
    );
    if !options.allow_fail_areas.is_empty() {
        println!(
            "allowed failures: {allowed_failures} (areas starting with {})",
            options
                .allow_fail_areas
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut last = format!("http-conformance: {passed} passed, {failed} failed");
    if skipped > 0 {
        last.push_str(&format!(", {skipped} skipped"));
    }
    println!("{last}");
    if counted.is_empty() {
        Ok(())
    } else {
        // Already reported above; an empty message keeps the summary the
        // last line of the output.
        Err(String::new())
    }
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
        assert!(!o.keep && o.allow_fail_areas.is_empty());
        let o = parse_options(&args(&[
            "--server",
            "node",
            "--keep",
            "--allow-fail-area",
            "Fork - ",
            "--allow-fail-area=SSE",
        ]))?;
        assert_eq!(o.server, Server::Node);
        assert!(o.keep);
        assert_eq!(o.allow_fail_areas, ["Fork - ", "SSE"]);
        assert_eq!(
            parse_options(&args(&["--server=electric"]))?.server,
            Server::Electric
        );
        assert!(parse_options(&args(&["--server", "go"])).is_err());
        assert!(parse_options(&args(&["--server"])).is_err());
        assert!(parse_options(&args(&["--bogus"])).is_err());
        let o = parse_options(&args(&["--subscriptions", "--server=node"]))?;
        assert!(o.subscriptions && !o.inside_netns);
        assert!(parse_options(&args(&["--subscriptions=yes"])).is_err());
        Ok(())
    }

    #[test]
    fn netns_interfaces() {
        let inside =
            "Inter-|   Receive |  Transmit\n face |bytes    packets\n    lo:       0       0\n";
        assert!(interfaces_besides_loopback(inside).is_empty());
        let host = format!("{inside}  eth0: 1 2 3\ndocker0: 4 5\n");
        assert_eq!(interfaces_besides_loopback(&host), ["eth0", "docker0"]);
    }

    #[test]
    fn loopback_only() {
        assert!(loopback_addr("http://127.0.0.1:4437").is_ok());
        assert!(loopback_addr("http://[::1]:80").is_ok());
        assert!(loopback_addr("http://10.0.0.1:80").is_err());
        assert!(loopback_addr("https://127.0.0.1:80").is_err());
    }

    #[test]
    fn report_summary() -> Result<(), String> {
        let report = r#"{"testResults":[{"message":"","assertionResults":[
            {"ancestorTitles":["B"],"fullName":"B x","status":"passed"},
            {"ancestorTitles":["A","inner"],"fullName":"A inner y","status":"failed"},
            {"ancestorTitles":["B"],"fullName":"B z","status":"skipped"},
            {"ancestorTitles":["A"],"fullName":"A w","status":"passed"}]}]}"#;
        let areas = summarize(report)?;
        let names: Vec<&str> = areas.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["B", "A"]);
        assert_eq!((areas[0].1.passed, areas[0].1.skipped), (1, 1));
        assert_eq!((areas[1].1.passed, areas[1].1.failed), (1, 1));
        assert_eq!(areas[1].1.failures, ["A inner y"]);
        Ok(())
    }
}
