//! The `strand-server` binary as a child process, a tiny HTTP/1.1 client
//! (one connection per request) for the process-level tests, and
//! [`eventually_blocking`], the waiting of tests that have no runtime.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use strand_testkit::ChildGuard;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A running `strand-server` and its address. The process is killed and
/// reaped when the `Server` drops (a test that panicked before stopping
/// it leaves no process behind): `child` is a [`ChildGuard`].
pub struct Server {
    pub child: ChildGuard,
    pub addr: SocketAddr,
}

/// Starts the binary on an ephemeral port with `--data-dir dir` and waits
/// for its ready line.
pub fn start(dir: &Path) -> Server {
    start_args(&[
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--groups".into(),
        "2".into(),
        "--data-dir".into(),
        dir.display().to_string(),
        "--snapshot-every".into(),
        "500".into(),
    ])
}

/// Starts the binary with `args` and waits for its ready line.
pub fn start_args(args: &[String]) -> Server {
    start_args_env(args, &[])
}

/// [`start_args`], with these environment variables set for the server.
pub fn start_args_env(args: &[String], env: &[(&str, &str)]) -> Server {
    let mut child = ChildGuard::new(
        Command::new(env!("CARGO_BIN_EXE_strand-server"))
            .args(args)
            .envs(env.iter().copied())
            // Only strand-raft's own warnings (a truncated torn tail),
            // unless STRAND_TEST_SERVER_LOG asks for more (a filter, as
            // STRAND_LOG takes) to find out why a test failed.
            .env(
                "STRAND_LOG",
                std::env::var("STRAND_TEST_SERVER_LOG")
                    .unwrap_or_else(|_| "off,strand_raft=warn".to_owned()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut admin = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The admin line comes before the ready line.
            if let Some(addr) = line.strip_prefix("strand-server admin listening on http://") {
                admin = Some(addr.trim().to_owned());
            }
            if let Some(addr) = line.strip_prefix("strand-server listening on http://") {
                let _ = tx.send((addr.trim().to_owned(), admin.take()));
            }
        }
    });
    let (addr, admin) = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the server printed its ready line");
    let addr: SocketAddr = addr.parse().unwrap();
    if let Some(admin) = admin {
        ADMIN.lock().unwrap().insert(addr, admin.parse().unwrap());
    }
    Server { child, addr }
}

/// The admin listener of each server started with `--admin-listen`, by
/// its client address.
static ADMIN: std::sync::Mutex<std::collections::BTreeMap<SocketAddr, SocketAddr>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The admin listener (`--admin-listen`) of the server at `client`.
pub fn admin_addr(client: SocketAddr) -> SocketAddr {
    *ADMIN
        .lock()
        .unwrap()
        .get(&client)
        .expect("the server was started with --admin-listen")
}

impl Server {
    /// SIGKILL, then reap.
    pub fn kill9(mut self) {
        self.child.kill_and_wait().unwrap();
    }
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How long one [`request`] may take before it fails as timed out (no
/// test here long-polls through it, so this only stops a stuck server
/// from hanging the test run).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One HTTP/1.1 request on its own connection; a `TimedOut` error after
/// [`REQUEST_TIMEOUT`].
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<Reply> {
    tokio::time::timeout(REQUEST_TIMEOUT, exchange(addr, method, path, headers, body))
        .await
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{method} {path}: no answer within {REQUEST_TIMEOUT:?}"),
            )
        })?
}

async fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let text = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&raw[..eol]).trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw = &raw[eol + 4 + size..];
    }
    out
}

pub fn parse_offset(v: &str) -> u64 {
    let (hi, lo) = v.split_once('_').unwrap();
    hi.parse::<u64>().unwrap() * 10_u64.pow(16) + lo.parse::<u64>().unwrap()
}

/// A free loopback port for a server a test starts: bound and released,
/// from below the kernel's ephemeral range where it can (10000 up to
/// its start), so that no outgoing connection of this or another test
/// takes it in the moment before the server binds it (a port of the
/// ephemeral range, which `bind(0)` hands out, can be; CI saw "Address
/// already in use"). The first candidate is drawn from the process id,
/// the clock and a counter; taken ones are skipped.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let low = 10_000u32;
    if ephemeral_low > low + 1000 {
        let span = ephemeral_low - low;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seed = std::process::id()
            .wrapping_mul(2_654_435_761)
            .wrapping_add(nanos)
            .wrapping_add(NEXT.fetch_add(7_919, Ordering::Relaxed));
        for i in 0..span {
            let port = low + (seed.wrapping_add(i.wrapping_mul(101)) % span);
            let Ok(port) = u16::try_from(port) else {
                continue;
            };
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The arguments of node `id` (1-based) of a one-group durable cluster of
/// nodes listening on `ports` (data in `dir/node-{id}`, every node a
/// `--peer` at its real address).
pub fn cluster_node_args(dir: &Path, id: u64, ports: &[u16]) -> Vec<String> {
    let mut args = vec![
        "--listen".to_owned(),
        format!("127.0.0.1:{}", ports[(id - 1) as usize]),
        "--groups".to_owned(),
        "1".to_owned(),
        "--data-dir".to_owned(),
        dir.join(format!("node-{id}")).display().to_string(),
        "--node-id".to_owned(),
        id.to_string(),
    ];
    for (i, port) in ports.iter().enumerate() {
        args.push("--peer".to_owned());
        args.push(format!("{}=http://127.0.0.1:{port}", i + 1));
    }
    args
}

pub use strand_testkit::eventually_blocking;
