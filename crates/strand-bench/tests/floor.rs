//! `strand-floor` answers what the load tool sends, in both of its HTTP
//! modes: creates, appends (with the next offset), health probes, and
//! SSE subscriptions that receive each append as a data event.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The floor process, killed when dropped.
struct Floor {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(http: &str) -> Floor {
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_strand-floor"))
        .args(["--http", http, "--listen", &addr.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut floor = Floor { child, addr };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(addr).is_err() {
        assert!(
            floor.child.try_wait().unwrap().is_none(),
            "strand-floor exited"
        );
        assert!(Instant::now() < deadline, "strand-floor did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    floor
}

/// Sends one request on `conn` and reads the answer's status line and
/// headers (lower-cased names).
fn request(
    conn: &mut BufReader<TcpStream>,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, Vec<(String, String)>) {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let stream = conn.get_mut();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut line = String::new();
    conn.read_line(&mut line).unwrap();
    let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        conn.read_line(&mut line).unwrap();
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        let (name, value) = trimmed.split_once(':').unwrap();
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut rest = vec![0; length];
    conn.read_exact(&mut rest).unwrap();
    (status, headers)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn answers_writes_and_probes(http: &str) {
    let floor = start(http);
    let mut conn = BufReader::new(TcpStream::connect(floor.addr).unwrap());
    let (status, _) = request(&mut conn, "PUT", "/v1/stream/a", b"");
    assert_eq!(status, 201);
    // Appends on the same connection, one after another.
    for body in [&b"hello"[..], &[7u8; 300][..]] {
        let (status, headers) = request(&mut conn, "POST", "/v1/stream/a", body);
        assert_eq!(status, 204);
        assert_eq!(
            header(&headers, "stream-next-offset"),
            Some(format!("0000000000000000_{:016}", body.len()).as_str())
        );
        assert_eq!(header(&headers, "x-content-type-options"), Some("nosniff"));
    }
    let (status, _) = request(&mut conn, "GET", "/", b"");
    assert_eq!(status, 200);
    let (status, _) = request(&mut conn, "DELETE", "/v1/stream/a", b"");
    assert_eq!(status, 405);
}

fn passes_appends_to_subscribers(http: &str) {
    let floor = start(http);
    let mut sub = BufReader::new(TcpStream::connect(floor.addr).unwrap());
    sub.get_mut()
        .write_all(b"GET /v1/stream/s?offset=now&live=sse HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    sub.get_mut()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut seen = String::new();
    let mut line = String::new();
    // The head, then the first control event: subscribed.
    while !seen.contains("event: control") {
        line.clear();
        assert!(sub.read_line(&mut line).unwrap() > 0, "closed: {seen}");
        seen.push_str(&line);
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(
        seen.to_ascii_lowercase().contains("text/event-stream"),
        "{seen}"
    );
    let mut writer = BufReader::new(TcpStream::connect(floor.addr).unwrap());
    let (status, _) = request(&mut writer, "POST", "/v1/stream/s", b"1:2;");
    assert_eq!(status, 204);
    seen.clear();
    while !seen.contains("data:1:2;") {
        line.clear();
        assert!(sub.read_line(&mut line).unwrap() > 0, "closed: {seen}");
        seen.push_str(&line);
    }
    assert!(seen.contains("event: data"), "{seen}");
}

#[test]
fn hyper_answers_writes_and_probes() {
    answers_writes_and_probes("hyper");
}

#[test]
fn lean_answers_writes_and_probes() {
    answers_writes_and_probes("lean");
}

#[test]
fn hyper_passes_appends_to_subscribers() {
    passes_appends_to_subscribers("hyper");
}

#[test]
fn lean_passes_appends_to_subscribers() {
    passes_appends_to_subscribers("lean");
}

#[test]
fn lean_typed_answers_writes_and_probes() {
    answers_writes_and_probes("lean-typed");
}

#[test]
fn lean_typed_passes_appends_to_subscribers() {
    passes_appends_to_subscribers("lean-typed");
}
