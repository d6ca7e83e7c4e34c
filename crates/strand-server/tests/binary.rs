//! The `strand-server` binary: its flags, its ready line, its health check,
//! a live read woken by an append, and a clean exit on SIGTERM with a live
//! read open, on one worker thread and on several.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::process::eventually_blocking;

use strand_testkit::ChildGuard;

const BIN: &str = env!("CARGO_BIN_EXE_strand-server");

#[test]
fn help_documents_every_flag() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--listen",
        "--long-poll-timeout-ms",
        "--default-bucket",
        "--groups",
        "--max-body-bytes",
        "--max-read-bytes",
        "--max-live-readers",
        "--group-queue-depth",
        "--worker-threads",
        "--sse-max-duration-ms",
        "--auth-secret-file",
        "--auth-jwks-file",
        "--allow-unauthenticated",
        "--data-dir",
        "--memory",
        "--admin-listen",
        "--request-head-timeout-ms",
        "--body-timeout-ms",
        "--send-timeout-ms",
        "--idle-timeout-ms",
        "--public-url",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
    assert!(help.contains("127.0.0.1:4437"));
    assert!(
        help.contains("token"),
        "the token subcommand is listed:\n{help}"
    );
    let token_help = Command::new(BIN)
        .args(["token", "--help"])
        .output()
        .unwrap();
    let token_help = String::from_utf8(token_help.stdout).unwrap();
    for flag in ["--secret-file", "--bucket", "--rights", "--ttl-seconds"] {
        assert!(
            token_help.contains(flag),
            "token --help lacks {flag}:\n{token_help}"
        );
    }
}

#[test]
fn a_bad_default_bucket_is_a_usage_error() {
    let out = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--default-bucket", "No!"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--default-bucket"));
}

fn http(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out
}

/// Sends a long-poll of stream `s` at `offset` and waits until the server
/// has read it (its handler then reads the stream once and parks); the
/// handle, a thread, yields the whole response.
fn long_poll(addr: &str, offset: &str) -> std::thread::JoinHandle<String> {
    let request = format!(
        "GET /v1/stream/s?offset={offset}&live=long-poll HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let (client, server) = (stream.local_addr().unwrap(), stream.peer_addr().unwrap());
    eventually_blocking(
        "the server reads the long-poll",
        Duration::from_secs(30),
        || read_by_server(client, server).then_some(()),
    );
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stream.read_to_string(&mut out);
        out
    })
}

/// Whether the server end of the connection from `client` to `server`
/// has read everything the client sent: the client's bytes are
/// acknowledged and none wait in the server's receive queue (the queues of
/// `/proc/net/tcp`).
#[cfg(target_os = "linux")]
fn read_by_server(client: SocketAddr, server: SocketAddr) -> bool {
    // An IPv4 end as `/proc/net/tcp` prints it: the address as a
    // little-endian hex word, then the port.
    let end = |a: SocketAddr| match a {
        SocketAddr::V4(a) => format!(
            "{:08X}:{:04X}",
            u32::from_le_bytes(a.ip().octets()),
            a.port()
        ),
        SocketAddr::V6(_) => panic!("the tests listen on 127.0.0.1"),
    };
    let (client, server) = (end(client), end(server));
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    // (tx_queue, rx_queue) of the socket from `local` to `remote`.
    let queues = |local: &str, remote: &str| {
        table.lines().skip(1).find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(1) != Some(&local) || fields.get(2) != Some(&remote) {
                return None;
            }
            let (tx, rx) = fields.get(4)?.split_once(':')?;
            Some((
                u64::from_str_radix(tx, 16).ok()?,
                u64::from_str_radix(rx, 16).ok()?,
            ))
        })
    };
    matches!(queues(&client, &server), Some((0, _)))
        && matches!(queues(&server, &client), Some((_, 0)))
}

/// Elsewhere no socket queues are at hand: the server gets 200 ms to read
/// the request (the one fixed wait left, off Linux).
#[cfg(not(target_os = "linux"))]
fn read_by_server(_client: SocketAddr, _server: SocketAddr) -> bool {
    std::thread::sleep(Duration::from_millis(200));
    true
}

#[test]
fn serves_then_exits_cleanly_on_sigterm() {
    serve_then_exit(&[], None);
}

#[test]
fn one_worker_thread_serves_live_reads_and_exits_cleanly() {
    // The current-thread scheduler: the main thread runs every task.
    serve_then_exit(&["--worker-threads", "1"], Some(1));
}

#[test]
fn two_worker_threads_serve_live_reads_and_exit_cleanly() {
    // The main thread and two workers.
    serve_then_exit(&["--worker-threads", "2"], Some(3));
}

/// Starts the binary with `extra` flags, creates a stream, has an append
/// from another connection answer a parked long-poll, parks a second one
/// and sends SIGTERM: the process exits 0 within 10 s and the parked read
/// gets 204. With `threads`, the process has that many threads once it is
/// ready (checked on Linux, from `/proc`).
fn serve_then_exit(extra: &[&str], threads: Option<usize>) {
    // Held by `process::Server`, whose drop kills and reaps it if an
    // assertion fails; its address is filled in from the ready line.
    let mut server = crate::process::Server {
        child: ChildGuard::new(
            Command::new(BIN)
                .args([
                    "--listen",
                    "127.0.0.1:0",
                    "--memory",
                    "--long-poll-timeout-ms",
                    "60000",
                ])
                .args(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        ),
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let child = &mut server.child;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("strand-server listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    assert!(addr.starts_with("127.0.0.1:"));
    server.addr = addr.parse().unwrap();
    let child = &mut server.child;
    if let (Some(threads), true) = (threads, cfg!(target_os = "linux")) {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id()))
            .unwrap()
            .count();
        assert_eq!(tasks, threads, "threads of `strand-server {extra:?}`");
    }
    let health = http(
        &addr,
        "GET /__strand/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let created = http(
        &addr,
        "PUT /v1/stream/s HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
    );
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");

    // A long-poll at the tail, answered by an append from another
    // connection while it waits.
    let woken = long_poll(&addr, "0000000000000000_0000000000000002");
    let appended = http(
        &addr,
        "POST /v1/stream/s HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nyou",
    );
    assert!(appended.starts_with("HTTP/1.1 204"), "{appended}");
    let answer = woken.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nyou"), "{answer}");

    // A long-poll that would wait a minute.
    let poller = long_poll(&addr, "0000000000000000_0000000000000005");
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = eventually_blocking(
        "the process exits after SIGTERM",
        Duration::from_secs(10),
        || child.try_wait().unwrap(),
    );
    assert!(status.success(), "{status:?}");
    let answer = poller.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
}

/// Starts the binary in `dir` with `args` and returns it with the lines it
/// printed up to and including its ready line.
fn start_in(dir: &std::path::Path, args: &[&str]) -> (crate::process::Server, Vec<String>) {
    let mut server = crate::process::Server {
        child: ChildGuard::new(
            Command::new(BIN)
                .current_dir(dir)
                .args(["--listen", "127.0.0.1:0"])
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        ),
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let mut lines = Vec::new();
    let mut reader = BufReader::new(server.child.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the server exited before its ready line: {lines:?}"
        );
        let line = line.trim().to_owned();
        if let Some(addr) = line.strip_prefix("strand-server listening on http://") {
            server.addr = addr.parse().unwrap();
            lines.push(line);
            return (server, lines);
        }
        lines.push(line);
    }
}

#[test]
fn without_flags_the_server_is_durable_in_strand_data() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, lines) = start_in(tmp.path(), &[]);
    let data = std::fs::canonicalize(tmp.path().join("strand-data")).unwrap();
    assert_eq!(
        lines,
        [
            format!("strand-server data directory {}", data.display()),
            format!("strand-server listening on http://{}", server.addr),
        ]
    );
    let addr = server.addr.to_string();
    let created = http(
        &addr,
        "PUT /v1/stream/kept HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 4\r\nConnection: close\r\n\r\nkept",
    );
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");
    server.kill9();
    // The same directory after kill -9: the stream is there.
    let (server, _) = start_in(tmp.path(), &[]);
    let read = http(
        &server.addr.to_string(),
        "GET /v1/stream/kept?offset=-1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(read.starts_with("HTTP/1.1 200"), "{read}");
    assert!(read.ends_with("kept"), "{read}");
    drop(server);
    // --memory keeps nothing on disk and prints no directory.
    let empty = tempfile::tempdir().unwrap();
    let (server, lines) = start_in(empty.path(), &["--memory"]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    drop(server);
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
    // The two contradict each other.
    let out = Command::new(BIN)
        .current_dir(empty.path())
        .args(["--memory", "--data-dir", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
