//! `cargo xtask fuzz [--seconds N] [TARGET...]`: runs the cargo-fuzz
//! targets of `fuzz/` one after another on the pinned stable toolchain
//! without a sanitizer (`cargo fuzz run -s none`), each for N seconds
//! (default 60), on a corpus seeded from the vendored conformance traces
//! (and, for `http_request`, from request sequences written here).
//!
//! Seeds, written to `target/fuzz-corpus/<target>/` (libFuzzer adds what
//! it finds there too, so later runs go on from it):
//!
//! * `json_restore`: every snapshot of the traces (the `snapshot` and
//!   `restore` steps and `ImportSnapshot` commands) as JSON text;
//! * `binary_decode`: the same snapshots in the binary format, behind the
//!   mode byte 0 (the file as is);
//! * `command_sequence`: each trace's sequence of command kinds in the
//!   target's record layout (`fuzz/checks/command_sequence.rs`), operands
//!   left zero;
//! * `http_request`: 25 request sequences (about 160 requests) in the
//!   target's layout (raw HTTP/1.1 requests between `~~~` lines,
//!   `fuzz/checks/http_request.rs`): creates, appends with producer,
//!   `Stream-Seq`, TTL and expiry headers, JSON appends, reads from
//!   offsets, long-polls and SSE, forks, the bucketed routes, and refused
//!   values (`http_seeds.rs` beside this file).
//!
//! A target with a dictionary, `fuzz/dicts/<target>.dict`, runs with it
//! (`-dict=`): `http_request` has one of header names, routes and values.
//!
//! Installs the pinned cargo-fuzz (`tools::FUZZ`) when it is missing; `ci`
//! never does. Each run's output goes to `target/fuzz-logs/<target>.log`;
//! the summary prints executions, corpus size and the outcome per target.
//! A crash input lands in `fuzz/artifacts/<target>/` (git-ignored): move it
//! to `fuzz/regressions/<target>/` once fixed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use serde_json::Value;

use crate::{cargo, tools};

mod http_seeds;

/// The targets of `fuzz/Cargo.toml`, in the order they run.
const TARGETS: [&str; 4] = [
    "binary_decode",
    "json_restore",
    "command_sequence",
    "http_request",
];
/// Bytes per command record of `command_sequence` (its `RECORD`).
const RECORD: usize = 24;
/// Seeds above this size are left out (libFuzzer's default `-max_len` is
/// 4096 anyway, growing from the corpus).
const MAX_SEED: usize = 256 * 1024;

/// `cargo xtask fuzz`.
pub(crate) fn fuzz(root: &Path, args: &[String]) -> Result<(), String> {
    let mut seconds = 60u64;
    let mut targets = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|&s| s > 0)
                    .ok_or("--seconds takes a positive number")?;
            }
            t if TARGETS.contains(&t) => targets.push(t),
            other => {
                return Err(format!(
                    "unknown fuzz argument `{other}`; usage: cargo xtask fuzz [--seconds N] [{}]...",
                    TARGETS.join("|")
                ));
            }
        }
    }
    if targets.is_empty() {
        targets = TARGETS.to_vec();
    }
    tools::ensure_tool(root, &tools::FUZZ)?;
    let seeds = seeds(root)?;
    let logs = root.join("target/fuzz-logs");
    fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;

    let mut rows = Vec::new();
    for target in &targets {
        let corpus = root.join("target/fuzz-corpus").join(target);
        let written = write_seeds(&corpus, &seeds[target])?;
        println!(
            "==> fuzz {target} for {seconds}s ({written} new seeds in {})",
            corpus.display()
        );
        let log_path = logs.join(format!("{target}.log"));
        let log = fs::File::create(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let err = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let mut cmd = cargo(&root.join("fuzz"));
        cmd.args(["fuzz", "run", "-s", "none", target])
            .arg(&corpus)
            .args([
                "--",
                &format!("-max_total_time={seconds}"),
                "-print_final_stats=1",
            ]);
        let dict = root.join("fuzz/dicts").join(format!("{target}.dict"));
        if dict.is_file() {
            cmd.arg(format!("-dict={}", dict.display()));
        }
        cmd
            // One build directory for the fuzz crate, beside the workspace's.
            .env("CARGO_TARGET_DIR", root.join("target/fuzz-build"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        let started = Instant::now();
        let status = cmd
            .status()
            .map_err(|e| format!("could not start cargo fuzz: {e}"))?;
        let text = fs::read_to_string(&log_path).unwrap_or_default();
        let executions = stat(&text, "stat::number_of_executed_units:")
            .or_else(|| done_runs(&text))
            .unwrap_or(0);
        let files = fs::read_dir(&corpus).map_or(0, |d| d.count());
        let outcome = if status.success() {
            "ok".to_string()
        } else {
            let artifact = text
                .lines()
                .find(|l| l.contains("Test unit written to"))
                .map_or("no artifact", |l| l.trim());
            format!("FAILED ({status}): {artifact}; log {}", log_path.display())
        };
        println!(
            "<== fuzz {target}: {executions} executions in {:.0}s, corpus {files} files: {outcome}",
            started.elapsed().as_secs_f64()
        );
        rows.push((target, executions, files, status.success(), outcome));
    }
    println!();
    println!("| target | seconds | executions | corpus files | outcome |");
    println!("|---|---|---|---|---|");
    for (target, executions, files, _, outcome) in &rows {
        println!("| {target} | {seconds} | {executions} | {files} | {outcome} |");
    }
    if rows.iter().all(|r| r.3) {
        Ok(())
    } else {
        Err("a fuzz target failed; see its log and artifact above".into())
    }
}

/// The value after `key` on libFuzzer's final-stats line.
fn stat(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
}

/// N of libFuzzer's closing `Done N runs in S second(s)` line.
fn done_runs(text: &str) -> Option<u64> {
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("Done "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Writes each seed as `seed-<hash>` unless present; returns how many were
/// new.
fn write_seeds(dir: &Path, seeds: &BTreeSet<Vec<u8>>) -> Result<usize, String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut written = 0;
    for seed in seeds {
        let path = dir.join(format!("seed-{:016x}", fnv1a(seed)));
        if !path.exists() {
            fs::write(&path, seed).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            written += 1;
        }
    }
    Ok(written)
}

/// 64-bit FNV-1a: a stable file name for a seed.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The seeds of every target, from the vendored traces.
fn seeds(root: &Path) -> Result<BTreeMap<&'static str, BTreeSet<Vec<u8>>>, String> {
    let archive = root.join("tests/conformance/traces.tar.zst");
    let file =
        fs::File::open(&archive).map_err(|e| format!("cannot open {}: {e}", archive.display()))?;
    let decoder = zstd::stream::read::Decoder::new(file)
        .map_err(|e| format!("{}: zstd: {e}", archive.display()))?;
    let mut tar = tar::Archive::new(decoder);
    let mut json = BTreeSet::new();
    let mut binary = BTreeSet::new();
    let mut commands = BTreeSet::new();
    let entries = tar
        .entries()
        .map_err(|e| format!("{}: {e}", archive.display()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("{}: {e}", archive.display()))?;
        let mut bytes = Vec::new();
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{}: {e}", archive.display()))?;
        let Ok(doc) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        let steps = doc["steps"].as_array().cloned().unwrap_or_default();
        let mut kinds = Vec::new();
        for step in &steps {
            let snapshot = match step["op"].as_str() {
                Some("snapshot" | "restore") => Some(&step["snapshot"]),
                Some("apply") => {
                    let command = &step["command"];
                    kinds.push(command.clone());
                    command.get("ImportSnapshot").map(|c| &c["snapshot"])
                }
                _ => None,
            };
            if let Some(snapshot) = snapshot {
                add_snapshot(snapshot, &mut json, &mut binary);
            }
        }
        commands.insert(command_record_seed(&kinds));
    }
    println!(
        "xtask: seeds from {}: {} snapshots (JSON and binary), {} command sequences",
        archive.display(),
        json.len(),
        commands.len()
    );
    let http = http_seeds::seeds();
    println!("xtask: {} http_request seeds", http.len());
    Ok(BTreeMap::from([
        ("json_restore", json),
        ("binary_decode", binary),
        ("command_sequence", commands),
        ("http_request", http),
    ]))
}

/// A snapshot as JSON text, and (when it decodes as a `StreamSnapshot`) in
/// the binary format behind mode byte 0.
fn add_snapshot(value: &Value, json: &mut BTreeSet<Vec<u8>>, binary: &mut BTreeSet<Vec<u8>>) {
    let Ok(text) = serde_json::to_vec(value) else {
        return;
    };
    if text.len() > MAX_SEED {
        return;
    }
    if let Ok(snapshot) = serde_json::from_slice::<strand_snapshot::StreamSnapshot>(&text) {
        let mut out = vec![0u8];
        if strand_snapshot::encode_binary(&mut out, &snapshot, &snapshot.streams).is_ok() {
            binary.insert(out);
        }
    }
    json.insert(text);
}

/// The `command_sequence` input for a trace's commands: the split byte,
/// then per command a record whose kind byte is the target's selector for
/// that command kind, stream byte the stream's order of appearance modulo
/// 4, and operands zero. Kinds outside the vocabulary are left out.
fn command_record_seed(commands: &[Value]) -> Vec<u8> {
    let mut streams: Vec<String> = Vec::new();
    let mut records = Vec::new();
    for command in commands {
        let Some((kind, body)) = command.as_object().and_then(|o| o.iter().next()) else {
            continue;
        };
        let (selector, extra) = match kind.as_str() {
            "CreateBucket" => (0, 0),
            "DeleteBucket" => (1, 0),
            "PurgeBucket" => (2, 0),
            "SetBucketQuota" => (3, 0),
            "CreateStream" => (4, 0),
            "CreateExternal" => (6, 0),
            "Append" => (7, 0),
            "AppendExternal" => (10, 0),
            "AppendBatch" => (11, 0),
            "PublishSnapshot" => (12, 0),
            "AdvanceRetention" => (13, 0),
            "FlushCold" => (14, 0),
            "TouchStreamAccess" => (15, 0),
            "Close" => (16, 0),
            "DeleteStream" => (17, 0),
            // Kind 17 with its first operand byte odd.
            "AckColdGc" => (17, 1),
            _ => continue,
        };
        let stream = body["stream_id"].to_string();
        let index = streams
            .iter()
            .position(|s| *s == stream)
            .unwrap_or_else(|| {
                streams.push(stream);
                streams.len() - 1
            });
        let mut record = [0u8; RECORD];
        record[0] = selector;
        record[1] = (index % 4) as u8;
        record[3] = extra;
        records.push(record);
    }
    let mut out = vec![(records.len().min(48) / 2) as u8];
    for record in records.iter().take(64) {
        out.extend_from_slice(record);
    }
    out
}
