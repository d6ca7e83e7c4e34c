//! `cargo xtask prometheus`: a real Prometheus (Debian's `prometheus`
//! package, pinned) scrapes `GET /metrics` of a three-node strand cluster
//! on loopback while a client appends, and a few PromQL queries are
//! answered from what it stored. Not part of `ci`: it needs the package
//! (installed here when missing and running as root).

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strand_testkit::ChildGuard;

use crate::servers::{ServerGuard, build_strand, free_port, start_strand_cluster, use_debug_build};
use crate::target_dir;

/// Usage of the task.
pub(crate) const USAGE: &str = "cargo xtask prometheus [--debug-build] [--appends N]";

/// The Debian package and version the task runs.
const PACKAGE: &str = "prometheus=2.42.0+ds-5+b6";
const BINARY: &str = "/usr/bin/prometheus";

/// The queries answered at the end, with what each must satisfy.
const QUERIES: [&str; 9] = [
    "up{job=\"strand\"}",
    "sum(strand_appends_total)",
    "sum(strand_appended_bytes_total)",
    "sum by (group) (strand_raft_leader)",
    "max(strand_raft_replication_lag_entries)",
    "sum(strand_log_fsyncs_total)",
    "sum(increase(strand_log_synced_proposals_total[1m])) / sum(increase(strand_log_fsyncs_total[1m]))",
    "histogram_quantile(0.99, sum by (le) (increase(strand_log_fsync_duration_seconds_bucket[1m])))",
    "sum by (route, status) (strand_http_requests_total{route=\"stream\"})",
];

pub(crate) fn prometheus(root: &Path, args: &[String]) -> Result<(), String> {
    let mut appends = 300u64;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--debug-build" => use_debug_build(),
            "--appends" => {
                appends = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| (1..=100_000).contains(n))
                    .ok_or(format!("--appends takes 1..=100000; {USAGE}"))?;
            }
            other => return Err(format!("unknown argument {other}; {USAGE}")),
        }
    }
    crate::servers::ensure_debian_package(BINARY, PACKAGE)?;
    build_strand(root)?;
    let work = target_dir(root).join("xtask-prometheus");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let extra = ["--groups", "2", "--admin-listen", "127.0.0.1:0"].map(str::to_owned);
    let nodes = start_strand_cluster(root, &work, 1_000, &extra, 3)?;
    let admins = nodes
        .iter()
        .map(admin_addr)
        .collect::<Result<Vec<_>, _>>()?;
    let web = free_port()?;
    let config = work.join("prometheus.yml");
    let targets = admins
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: strand\n    static_configs:\n      - targets: [{targets}]\n"
        ),
    )
    .map_err(|e| format!("{}: {e}", config.display()))?;
    let log = fs::File::create(work.join("prometheus.log")).map_err(|e| e.to_string())?;
    let prometheus = ChildGuard::new(
        Command::new(BINARY)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                work.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {BINARY}: {e}"))?,
    );
    let web: SocketAddr = ([127, 0, 0, 1], web).into();
    wait_for(Duration::from_secs(30), "Prometheus ready", || {
        http(web, "GET", "/-/ready", b"").map(|(s, _)| s == 200)
    })?;
    // A first scrape of every node before any append, so the counters'
    // increases are seen.
    wait_for(
        Duration::from_secs(30),
        "a first scrape of every node",
        || Ok(query(web, "up{job=\"strand\"} == 1")?.len() == 3),
    )?;
    // Appends through node 1 (a follower forwards to the leader), in four
    // rounds a little over a scrape apart.
    let client = crate::servers::loopback_addr(&nodes[0].url)?;
    let (status, body) = http(client, "PUT", "/v1/stream/prom", b"")?;
    if status != 201 {
        return Err(format!("create: {status} {body}"));
    }
    for i in 0..appends {
        if i > 0 && i % appends.div_ceil(4) == 0 {
            std::thread::sleep(Duration::from_millis(1_200));
        }
        let (status, body) = http(
            client,
            "POST",
            "/v1/stream/prom",
            format!("{i:08}").as_bytes(),
        )?;
        if status != 204 {
            return Err(format!("append {i}: {status} {body}"));
        }
    }
    // Wait until Prometheus has scraped every node after the last append.
    let want = appends as f64;
    wait_for(
        Duration::from_secs(30),
        "a scrape with every append",
        || {
            Ok(query(web, "sum(strand_appends_total)")?
                .first()
                .is_some_and(|(_, v)| *v == want))
        },
    )?;
    println!(
        "Prometheus {PACKAGE} scraping 3 strand-server nodes every 1 s, {appends} appends of 8 bytes:"
    );
    let mut failures = Vec::new();
    for q in QUERIES {
        let result = query(web, q)?;
        println!("  {q}");
        for (labels, value) in &result {
            println!("      {labels} => {value}");
        }
        if result.is_empty() || result.iter().any(|(_, v)| v.is_nan()) {
            failures.push(format!("{q}: no value"));
        }
    }
    let up = query(web, QUERIES[0])?;
    if up.len() != 3 || up.iter().any(|(_, v)| *v != 1.0) {
        failures.push(format!("not every node is up: {up:?}"));
    }
    let bytes = query(web, QUERIES[2])?;
    if bytes.first().map(|(_, v)| *v) != Some(want * 8.0) {
        failures.push(format!("appended bytes: {bytes:?}"));
    }
    let leaders = query(web, QUERIES[3])?;
    if leaders.len() != 2 || leaders.iter().any(|(_, v)| *v != 1.0) {
        failures.push(format!("each group needs exactly one leader: {leaders:?}"));
    }
    drop(prometheus);
    drop(nodes);
    if failures.is_empty() {
        println!("prometheus: every query answered as expected");
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// The admin address a node printed (`strand-server admin listening on`).
fn admin_addr(node: &ServerGuard) -> Result<SocketAddr, String> {
    let text = fs::read_to_string(&node.log).map_err(|e| format!("{}: {e}", node.log.display()))?;
    let url = text
        .lines()
        .find_map(|l| l.strip_prefix("strand-server admin listening on "))
        .ok_or_else(|| format!("{} names no admin listener", node.log.display()))?;
    crate::servers::loopback_addr(url.trim())
}

/// Polls `check` every 100 ms until it holds, for at most `limit`.
fn wait_for(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<bool, String>,
) -> Result<(), String> {
    let until = Instant::now() + limit;
    let mut last = String::new();
    while Instant::now() < until {
        match check() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("no {what} within {limit:?} {last}"))
}

/// One HTTP/1.1 exchange on its own connection: the status and the body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("{addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .and_then(|()| stream.write_all(body))
    .map_err(|e| format!("{addr}: {e}"))?;
    let mut raw = Vec::new();
    stream
        .take(16 << 20)
        .read_to_end(&mut raw)
        .map_err(|e| format!("{addr}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{addr}: not an HTTP answer"))?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Ok((status, body))
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// An instant query's result: each series' labels and value.
fn query(web: SocketAddr, promql: &str) -> Result<Vec<(String, f64)>, String> {
    let path = format!("/api/v1/query?query={}", percent_encode(promql));
    let (status, body) = http(web, "GET", &path, b"")?;
    if status != 200 {
        return Err(format!("{promql}: {status} {body}"));
    }
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{promql}: {e}"))?;
    let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
    Ok(result
        .iter()
        .map(|r| {
            let labels = r["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| !["instance", "job", "__name__"].contains(&k.as_str()))
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            let labels = match r["metric"]["instance"].as_str() {
                Some(i) if labels.is_empty() => format!("instance={i}"),
                Some(i) => format!("instance={i},{labels}"),
                None => labels,
            };
            let value = r["value"][1]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(f64::NAN);
            (format!("{{{labels}}}"), value)
        })
        .collect())
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
