//! kill -9 of a durable node: the `strand-server` binary runs with
//! `--data-dir` on loopback, clients append with idempotent producers, the
//! process is SIGKILLed mid-run and restarted on the same directory, and
//! every acknowledged append must be readable exactly once at the offset
//! it was acknowledged with; each client's in-flight append is retried
//! after the restart and deduplicated if it had landed. After each
//! restart every stream's integrity setsum is recomputed from the bytes
//! read back (spec 02 §5.2, one item per append) and compared with the
//! one the server reports (`GET /__strand/integrity/...`). A second
//! process on the same data directory is refused while the first runs.
//!
//! A short run (one kill) is part of the normal suite; `cargo xtask
//! faults` runs more rounds and clients (`STRAND_FAULTS_ROUNDS`,
//! `STRAND_FAULTS_CLIENTS`, `STRAND_FAULTS_ACKS`).
#![allow(clippy::unwrap_used)]

use crate::{common, process};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::eventually;
use process::{Server, eventually_blocking, parse_offset, request, start};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one client knows of its stream.
#[derive(Default)]
struct Client {
    /// The next sequence number to send.
    next_seq: u64,
    /// Acknowledged appends: `(seq, next_offset)`.
    acked: Vec<(u64, u64)>,
    /// A request that got no answer (the kill).
    in_flight: Option<u64>,
}

fn token(client: usize, seq: u64) -> Vec<u8> {
    format!("c{client}-{seq};").into_bytes()
}

enum Sent {
    Acked(u64),
    Lost,
}

/// Appends `seq` of `client`, again while the server answers 503.
async fn append(addr: SocketAddr, client: usize, seq: u64) -> Sent {
    let what = format!("client {client} seq {seq}: an answer other than 503");
    eventually(&what, Duration::from_secs(30), || async {
        let reply = request(
            addr,
            "POST",
            &format!("/v1/stream/f{client}"),
            &[
                ("Content-Type", "text/plain".to_owned()),
                ("Producer-Id", format!("c{client}")),
                ("Producer-Epoch", "0".to_owned()),
                ("Producer-Seq", seq.to_string()),
            ],
            &token(client, seq),
        )
        .await;
        match reply {
            Ok(r) if r.status == 200 || r.status == 204 => Some(Sent::Acked(parse_offset(
                r.header("stream-next-offset").unwrap(),
            ))),
            Ok(r) if r.status == 503 => None,
            Ok(r) => panic!(
                "client {client} seq {seq}: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ),
            Err(_) => Some(Sent::Lost),
        }
    })
    .await
}

/// Runs the clients until `target` more appends are acknowledged, then
/// kills the server while they are still appending.
async fn round(server: Server, clients: &mut [Client], target: u64) {
    let addr = server.addr;
    // Each client first retries what it had in flight when the last
    // server died: a duplicate if it landed, a new append if not.
    for (i, c) in clients.iter_mut().enumerate() {
        if let Some(seq) = c.in_flight.take() {
            match append(addr, i, seq).await {
                Sent::Acked(next) => {
                    c.acked.push((seq, next));
                    c.next_seq = seq + 1;
                }
                Sent::Lost => panic!("the restarted server refused a retry"),
            }
        }
    }
    let acks = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (i, c) in clients.iter_mut().enumerate() {
        let mut c = std::mem::take(c);
        let acks = Arc::clone(&acks);
        let stop = Arc::clone(&stop);
        tasks.push(tokio::spawn(async move {
            for _ in 0..1_000_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let seq = c.next_seq;
                match append(addr, i, seq).await {
                    Sent::Acked(next) => {
                        c.acked.push((seq, next));
                        c.next_seq += 1;
                        acks.fetch_add(1, Ordering::Relaxed);
                    }
                    Sent::Lost => {
                        c.in_flight = Some(seq);
                        break;
                    }
                }
            }
            c
        }));
    }
    eventually(
        &format!("{target} acknowledged appends"),
        Duration::from_secs(120),
        || async { (acks.load(Ordering::Relaxed) >= target).then_some(()) },
    )
    .await;
    // kill -9 while the clients are mid-request.
    let kill = tokio::task::spawn_blocking(move || server.kill9());
    kill.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    for (slot, task) in clients.iter_mut().zip(tasks) {
        *slot = task.await.unwrap();
    }
}

/// The integrity setsum of a stream of the default bucket, recomputed
/// from its bytes: one item per append over `[start, end)` (spec 02 §5.2:
/// tag, bucket, NUL, stream, NUL, start and end as little-endian u64,
/// `inline`, the appended bytes), added up.
fn recomputed_setsum(stream: &str, body: &[u8], ends: &[u64]) -> String {
    let mut sum = setsum::Setsum::default();
    let mut start = 0u64;
    for &end in ends {
        let mut item = Vec::new();
        item.extend_from_slice(b"ursula-stream-record-v1");
        item.extend_from_slice(b"default\0");
        item.extend_from_slice(stream.as_bytes());
        item.push(0);
        item.extend_from_slice(&start.to_le_bytes());
        item.extend_from_slice(&end.to_le_bytes());
        item.extend_from_slice(b"inline");
        item.extend_from_slice(&body[start as usize..end as usize]);
        sum.insert(&item);
        start = end;
    }
    sum.hexdigest()
}

/// The server's integrity report of a stream equals the recomputation.
async fn check_integrity(addr: SocketAddr, stream: &str, body: &[u8], ends: &[u64]) {
    let r = request(
        addr,
        "GET",
        &format!("/__strand/integrity/default/{stream}"),
        &[],
        b"",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let report: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let expected = recomputed_setsum(stream, body, ends);
    assert_eq!(
        report["total_setsum"].as_str().unwrap(),
        expected,
        "{stream}: the reported setsum differs from the recomputed one"
    );
    assert_eq!(
        report["live_setsum"].as_str().unwrap(),
        expected,
        "{stream}"
    );
    assert_eq!(report["total_records"], ends.len() as u64, "{stream}");
    assert_eq!(report["tail_offset"], body.len() as u64, "{stream}");
}

/// Every acknowledged append is in the stream once, in order, at the
/// offset it was acknowledged with; nothing else is there but, at the
/// end, the one in-flight append that may have landed. The stream's
/// integrity setsum is the recomputed one.
async fn verify(addr: SocketAddr, clients: &[Client]) -> u64 {
    let mut total = 0;
    for (i, c) in clients.iter().enumerate() {
        let r = request(addr, "GET", &format!("/v1/stream/f{i}?offset=-1"), &[], b"")
            .await
            .unwrap();
        assert_eq!(r.status, 200, "client {i}");
        let mut expected = Vec::new();
        let mut ends = Vec::new();
        for (seq, _) in &c.acked {
            expected.extend_from_slice(&token(i, *seq));
            ends.push(expected.len() as u64);
        }
        let body = r.body;
        if !body.starts_with(&expected) {
            let at = body
                .iter()
                .zip(&expected)
                .position(|(a, b)| a != b)
                .unwrap_or(body.len().min(expected.len()));
            let around = |bytes: &[u8]| {
                String::from_utf8_lossy(&bytes[at.saturating_sub(40)..(at + 40).min(bytes.len())])
                    .into_owned()
            };
            panic!(
                "client {i}: the stream does not hold exactly its acknowledged appends in order: \
                 {} bytes read, {} acknowledged ({} appends), first difference at byte {at}: \
                 read {:?}, acknowledged {:?}; headers {:?}",
                body.len(),
                expected.len(),
                c.acked.len(),
                around(&body),
                around(&expected),
                r.headers
            );
        }
        let rest = &body[expected.len()..];
        match c.in_flight {
            Some(seq) => assert!(
                rest.is_empty() || rest == token(i, seq).as_slice(),
                "client {i}: unexpected bytes after the acknowledged appends"
            ),
            None => assert!(rest.is_empty(), "client {i}: unexpected trailing bytes"),
        }
        for ((seq, next), end) in c.acked.iter().zip(&ends) {
            assert_eq!(next, end, "client {i} seq {seq}: acknowledged offset moved");
        }
        if !rest.is_empty() {
            // The in-flight append landed: one more item.
            ends.push(body.len() as u64);
        }
        check_integrity(addr, &format!("f{i}"), &body, &ends).await;
        let seqs: Vec<u64> = c.acked.iter().map(|(s, _)| *s).collect();
        assert!(
            seqs.iter().enumerate().all(|(k, s)| *s == k as u64),
            "client {i}: acknowledged seqs are not 0..n (a duplicate or gap)"
        );
        total += c.acked.len() as u64;
    }
    total
}

/// A second `strand-server` on a data directory in use exits at once with
/// an error naming the directory (and leaves the running one alone).
fn second_process_is_refused(dir: &std::path::Path) {
    // Held by a `Server`, whose drop kills it if it does not exit.
    let mut second = Server {
        child: strand_testkit::ChildGuard::new(
            std::process::Command::new(env!("CARGO_BIN_EXE_strand-server"))
                .args(["--listen", "127.0.0.1:0", "--groups", "2", "--data-dir"])
                .arg(dir)
                .env("STRAND_LOG", "off")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        ),
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let status = eventually_blocking(
        "a second server on a data directory in use exits",
        Duration::from_secs(30),
        || second.child.try_wait().unwrap(),
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains(&dir.display().to_string()), "{stderr}");
    assert!(stderr.contains("in use by another process"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_append() {
    let rounds = env_or("STRAND_FAULTS_ROUNDS", 1);
    let n_clients = env_or("STRAND_FAULTS_CLIENTS", 6) as usize;
    let target = env_or("STRAND_FAULTS_ACKS", 300);
    let tmp = tempfile::tempdir().unwrap();
    let server = start(tmp.path());
    for i in 0..n_clients {
        let r = request(
            server.addr,
            "PUT",
            &format!("/v1/stream/f{i}"),
            &[("Content-Type", "text/plain".to_owned())],
            b"",
        )
        .await
        .unwrap();
        assert_eq!(r.status, 201);
    }
    let mut clients: Vec<Client> = (0..n_clients).map(|_| Client::default()).collect();
    let mut server = Some(server);
    for k in 0..rounds {
        let s = server.take().unwrap_or_else(|| start(tmp.path()));
        round(s, &mut clients, target).await;
        let restarted = start(tmp.path());
        if k == 0 {
            second_process_is_refused(tmp.path());
        }
        let total = verify(restarted.addr, &clients).await;
        let in_flight = clients.iter().filter(|c| c.in_flight.is_some()).count();
        eprintln!(
            "faults: round {}: {total} acknowledged appends readable exactly once, lost 0, duplicates 0 ({in_flight} in flight at the kill); the integrity setsums of {} streams equal their recomputation",
            k + 1,
            clients.len()
        );
        let health = request(restarted.addr, "GET", "/__strand/health", &[], b"")
            .await
            .unwrap();
        assert_eq!(health.status, 200);
        let text = String::from_utf8_lossy(&health.body).into_owned();
        assert!(text.contains("\"mode\":\"durable\""), "{text}");
        assert!(text.contains("\"leader\":1"), "{text}");
        server = Some(restarted);
    }
    // The retries after the last restart are deduplicated or appended,
    // and the final state verifies too.
    let s = server.take().unwrap();
    for (i, c) in clients.iter_mut().enumerate() {
        if let Some(seq) = c.in_flight.take() {
            match append(s.addr, i, seq).await {
                Sent::Acked(next) => c.acked.push((seq, next)),
                Sent::Lost => panic!("retry lost"),
            }
        }
        // And a retry of the last acknowledged append is a duplicate.
        if let Some(&(seq, next)) = c.acked.last() {
            let r = request(
                s.addr,
                "POST",
                &format!("/v1/stream/f{i}"),
                &[
                    ("Content-Type", "text/plain".to_owned()),
                    ("Producer-Id", format!("c{i}")),
                    ("Producer-Epoch", "0".to_owned()),
                    ("Producer-Seq", seq.to_string()),
                ],
                &token(i, seq),
            )
            .await
            .unwrap();
            assert_eq!(r.status, 204, "client {i}: a retry is a duplicate");
            assert_eq!(parse_offset(r.header("stream-next-offset").unwrap()), next);
        }
    }
    verify(s.addr, &clients).await;
    s.kill9();
}
