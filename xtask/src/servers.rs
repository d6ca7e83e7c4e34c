//! The servers xtask runs on loopback and how it watches them: building
//! `strand-server`, starting it (alone, or as a three-node cluster), the
//! node reference server and the peers' servers, waiting until each is
//! ready (its `listening on` line, or a health route that answers 200),
//! pinning them to CPUs, and [`ServerGuard`], which kills a server on
//! every exit path. `http-conformance`, `apps` and `loadtest` share it.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use strand_testkit::ChildGuard;

use crate::{cargo, run, target_dir};

/// How long a server may take to print its `listening on` line.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long strand-server may take to answer its health check after that.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);

/// A server xtask starts with [`spawn_server`]: the one
/// `http-conformance --server` runs the suite against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Server {
    /// `target/release/strand-server`.
    Strand,
    /// The node reference server `@durable-streams/server`.
    Node,
    /// Electric's Rust server (crate `durable-streams` 0.1.5), installed
    /// into `target/peers/electric-0.1.5` as `cargo xtask loadtest` does.
    Electric,
}

impl Server {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Server::Strand => "strand-server",
            Server::Node => "node reference server",
            Server::Electric => "electric durable-streams-server",
        }
    }
}

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

/// Runs the `strand-server` already built from now on, without cargo (the
/// run inside the network namespace of `http-conformance --subscriptions`).
pub(crate) fn use_prebuilt() {
    PREBUILT.store(true, std::sync::atomic::Ordering::Relaxed);
}

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
pub(crate) fn build_strand(root: &Path) -> Result<PathBuf, String> {
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

/// A server process, killed (and reaped) when dropped, so no server
/// outlives the run, whatever goes wrong.
pub(crate) struct ServerGuard {
    pub(crate) name: &'static str,
    /// Held open for the node server, which exits when its stdin closes;
    /// only its drop matters. Declared before `child`: fields drop in
    /// order, so stdin is closed first, then the child killed.
    _stdin: Option<ChildStdin>,
    child: ChildGuard,
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

pub(crate) fn strand_binary(root: &Path) -> PathBuf {
    let profile = if DEBUG_BUILD.load(std::sync::atomic::Ordering::Relaxed) {
        "debug"
    } else {
        "release"
    };
    target_dir(root)
        .join(profile)
        .join(format!("strand-server{}", std::env::consts::EXE_SUFFIX))
}

/// A free loopback port (free when asked; the server binds it next).
pub(crate) fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

/// Three free loopback ports, one per node of a cluster.
fn cluster_ports(nodes: usize) -> Result<Vec<u16>, String> {
    (0..nodes).map(|_| free_port()).collect()
}

/// The arguments of node `id` (1-based) of the cluster on `ports` (one
/// node each), with a fresh data directory `work/cluster-node-{id}`.
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

/// Starts every node but node 2 of a cluster of `nodes` on free loopback
/// ports (fresh data directories under `work`, `extra` arguments for
/// every node, the idle long-poll timeout `long_poll_ms`) and returns node
/// 2's arguments, for the node the suite talks to.
pub(crate) fn start_cluster(
    root: &Path,
    work: &Path,
    long_poll_ms: u64,
    extra: &[String],
    nodes: usize,
) -> Result<(Vec<String>, Vec<ServerGuard>), String> {
    build_strand(root)?;
    let ports = cluster_ports(nodes)?;
    let mut guards = Vec::new();
    for id in (1..=nodes).filter(|id| *id != 2) {
        guards.push(spawn_cluster_node(
            root,
            work,
            &ports,
            id,
            long_poll_ms,
            extra,
        )?);
    }
    let mut node2 = cluster_node_args(work, &ports, 2, long_poll_ms)?;
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

/// Starts a durable cluster of `nodes` release `strand-server`s on
/// free loopback ports (fresh data directories `work/cluster-node-N`,
/// logs `work/cluster-node-N.log`, `extra` arguments on every node) and
/// waits until every node reports a leader for each of its groups.
/// The binary must be built.
pub(crate) fn start_strand_cluster(
    root: &Path,
    work: &Path,
    long_poll_ms: u64,
    extra: &[String],
    nodes: usize,
) -> Result<Vec<ServerGuard>, String> {
    let ports = cluster_ports(nodes)?;
    let mut guards = Vec::new();
    for id in 1..=nodes {
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
pub(crate) fn start_node_with(
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
pub(crate) fn spawn_server(
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
        _stdin: stdin,
        child: ChildGuard::new(child),
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

/// Spawns a peer server that listens on `port`, its stdout and stderr
/// to `log`, and waits up to 30 s for `health` (`METHOD PATH`) to answer
/// 200.
pub(crate) fn spawn_polled(
    name: &'static str,
    mut cmd: std::process::Command,
    port: u16,
    log: &Path,
    health: &str,
) -> Result<ServerGuard, String> {
    let file =
        fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let url = format!("http://127.0.0.1:{port}");
    let mut guard = ServerGuard {
        name,
        _stdin: None,
        child: ChildGuard::new(child),
        url: url.clone(),
        log: log.to_owned(),
    };
    let addr = loopback_addr(&url)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        guard.check_running()?;
        if status_of(addr, health) == Ok(200) {
            return Ok(guard);
        }
        thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "{name} did not answer {health} with 200; {}",
        log_tail(log)
    ))
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
pub(crate) fn wait_healthy(server: &ServerGuard) -> Result<(), String> {
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

/// Writes a fresh shared secret for `--auth` (32 hex digits from the
/// clock and the process id: a test secret, never a production one).
pub(crate) fn write_secret(path: &Path) -> Result<(), String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let secret = format!("{nanos:016x}{:016x}", std::process::id());
    fs::write(path, secret).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Mints an all-rights token for `subject` with `strand-server token`.
pub(crate) fn mint_token(root: &Path, secret: &Path, subject: &str) -> Result<String, String> {
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
        .args(["--subject", subject])
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

/// Installs the pinned Debian `package` (`name=version`) with apt-get
/// when `binary` is missing; apt-get needs root.
pub(crate) fn ensure_debian_package(binary: &str, package: &str) -> Result<(), String> {
    if Path::new(binary).exists() {
        return Ok(());
    }
    println!("installing {package} (apt-get)");
    let status = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends", package])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map_err(|e| format!("apt-get: {e}; install {package} by hand"))?;
    if status.success() && Path::new(binary).exists() {
        Ok(())
    } else {
        Err(format!(
            "apt-get install {package} failed ({status}); install it as root"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only() {
        assert!(loopback_addr("http://127.0.0.1:4437").is_ok());
        assert!(loopback_addr("http://[::1]:80").is_ok());
        assert!(loopback_addr("http://10.0.0.1:80").is_err());
        assert!(loopback_addr("https://127.0.0.1:80").is_err());
    }
}
