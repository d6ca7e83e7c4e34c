//! `strand status --url URL [--json] [--cold]`: a node's health
//! (`GET /__strand/health`) as a table — its status and mode, one row per
//! group (leader, applied and last log index; on a durable node the log
//! writer's and snapshot counters), the node's log totals and network
//! counters when present — and with `--cold` the cold tier's counters
//! (`GET /__strand/cold`, an operator route).
//!
//! The JSON is read as it comes (`serde_json::Value`): a field the server
//! does not send shows as `-`, and fields this command does not know are
//! left to `--json`.

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Map, Value};

use super::{Server, ServerArgs, describe, ensure_success};

/// Arguments of `strand status`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// Print the server's JSON instead of a table (with `--cold`:
    /// `{"health": …, "cold": …}`).
    #[arg(long)]
    pub(crate) json: bool,
    /// Also show the cold tier's counters (`GET /__strand/cold`): an
    /// operator route, so it needs a token with the admin right on `*`,
    /// or `--url` naming the admin listener.
    #[arg(long)]
    pub(crate) cold: bool,
}

/// Runs the command: exit 0 when the node reports `ok`, 1 otherwise (it
/// answers 503 while a group has no leader; the table is printed all the
/// same).
pub(crate) fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let server = Server::new(&args.server)?;
    let url = server.url("/__strand/health");
    let what = describe(&Method::GET, &url);
    let response = server.send(server.request(Method::GET, &url), &what)?;
    let status = response.status();
    // 503 carries the same JSON (a group without a leader); any other
    // failure is an error with the server's message.
    let response = if status == reqwest::StatusCode::SERVICE_UNAVAILABLE {
        response
    } else {
        ensure_success(response, &what)?
    };
    let text = response
        .text()
        .with_context(|| format!("{what}: reading the answer"))?;
    let health: Value = match serde_json::from_str(&text) {
        Ok(health) => health,
        // A 503 from something else than strand (a proxy): its message.
        Err(_) if !status.is_success() => bail!("{what}: {status}: {}", text.trim()),
        Err(e) => return Err(e).with_context(|| format!("{what}: the answer is not JSON")),
    };
    let cold = if args.cold {
        let url = server.url("/__strand/cold");
        let what = describe(&Method::GET, &url);
        let response = server.send_ok(server.request(Method::GET, &url), &what)?;
        let text = response
            .text()
            .with_context(|| format!("{what}: reading the answer"))?;
        let value: Value = serde_json::from_str(&text)
            .with_context(|| format!("{what}: the answer is not JSON"))?;
        Some(value)
    } else {
        None
    };

    if args.json {
        match cold {
            Some(cold) => writeln!(
                out,
                "{}",
                serde_json::json!({ "health": health, "cold": cold })
            )?,
            // The server's own text.
            None => writeln!(out, "{}", text.trim_end())?,
        }
    } else {
        out.write_all(render_health(server.url(""), &health).as_bytes())?;
        if let Some(cold) = &cold {
            out.write_all(render_cold(cold).as_bytes())?;
        }
    }
    let ok = health.get("status").and_then(Value::as_str) == Some("ok");
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A JSON value as a table cell: numbers and strings as they are (floats
/// with two decimals), `null` or missing as `-`.
pub(crate) fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) if n.is_f64() => match n.as_f64() {
            Some(f) => format!("{f:.2}"),
            None => n.to_string(),
        },
        Some(other) => other.to_string(),
    }
}

/// `a / b` with two decimals, or `-` when either is missing or `b` is 0.
fn ratio(a: Option<&Value>, b: Option<&Value>) -> String {
    match (a.and_then(Value::as_u64), b.and_then(Value::as_u64)) {
        (Some(a), Some(b)) if b > 0 => format!("{:.2}", a as f64 / b as f64),
        _ => "-".to_owned(),
    }
}

/// Rows of cells as left-aligned columns two spaces apart (trailing
/// spaces trimmed), each line indented by `indent`.
pub(crate) fn columns(rows: &[Vec<String>], indent: &str) -> String {
    let count = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..count)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in rows {
        let mut line = String::from(indent);
        for (i, c) in row.iter().enumerate() {
            let _ = write!(line, "{c:<width$}  ", width = widths[i]);
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// The health table.
fn render_health(node: String, health: &Value) -> String {
    let get = |key: &str| health.get(key);
    let mut text = columns(
        &[
            vec!["node".to_owned(), node],
            vec!["status".to_owned(), cell(get("status"))],
            vec!["mode".to_owned(), cell(get("mode"))],
        ],
        "",
    );
    let groups = get("groups")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if groups.is_empty() {
        let why = if get("mode").and_then(Value::as_str) == Some("memory") {
            " (in memory: no replication log)"
        } else {
            ""
        };
        let _ = writeln!(text, "groups  none{why}");
    } else {
        text.push('\n');
        text.push_str(&group_table(groups));
    }
    if let Some(log) = get("log").and_then(Value::as_object) {
        let l = |key: &str| cell(log.get(key));
        let _ = writeln!(
            text,
            "\nlog (all groups): {} writes, {} entries, {} fsyncs, {} entries/fsync, \
             {} proposals/fsync, mean fsync {} us, max fsync {} us",
            l("writes"),
            l("entries"),
            l("fsyncs"),
            l("entries_per_fsync"),
            l("proposals_per_fsync"),
            l("mean_fsync_us"),
            l("fsync_max_us"),
        );
    }
    if let Some(network) = get("network").and_then(Value::as_object) {
        let n = |key: &str| cell(network.get(key));
        let _ = writeln!(
            text,
            "network: {} raft messages in {} requests, {} batches ({} messages, {} per batch), \
             {} per request, {} failed",
            n("raft_messages_sent"),
            n("raft_requests_sent"),
            n("raft_batches_sent"),
            n("raft_batched_messages"),
            n("messages_per_batch"),
            n("messages_per_request"),
            n("raft_messages_failed"),
        );
    }
    text
}

/// One row per group; the log and snapshot columns only when a group
/// has them (a durable node).
fn group_table(groups: &[Value]) -> String {
    let has = |key: &str| groups.iter().any(|g| g.get(key).is_some());
    let (log, snapshot) = (has("log"), has("snapshot") || has("log"));
    let mut header: Vec<String> = ["group", "leader", "applied", "last log"]
        .map(str::to_owned)
        .into();
    if log {
        header.extend(["writes", "fsyncs", "entries/fsync"].map(str::to_owned));
    }
    if snapshot {
        header.extend(["snapshots built", "installed"].map(str::to_owned));
    }
    let mut rows = vec![header];
    for group in groups {
        let g = |key: &str| group.get(key);
        let mut row = vec![
            cell(g("group")),
            cell(g("leader")),
            cell(g("applied_index")),
            cell(g("last_log_index")),
        ];
        if log {
            let l = |key: &str| g("log").and_then(|log| log.get(key));
            row.extend([
                cell(l("writes")),
                cell(l("fsyncs")),
                ratio(l("synced_entries"), l("fsyncs")),
            ]);
        }
        if snapshot {
            let s = |key: &str| g("snapshot").and_then(|s| s.get(key));
            // No snapshot object yet: none built or installed.
            let or_zero = |v: Option<&Value>| {
                if g("snapshot").is_none() {
                    "0".to_owned()
                } else {
                    cell(v)
                }
            };
            row.extend([or_zero(s("built")), or_zero(s("installed"))]);
        }
        rows.push(row);
    }
    columns(&rows, "")
}

/// The cold tier's counters, one per line, by name.
fn render_cold(cold: &Value) -> String {
    let empty = Map::new();
    let fields = cold.as_object().unwrap_or(&empty);
    let rows: Vec<Vec<String>> = fields
        .iter()
        .map(|(key, value)| {
            let shown = match value {
                Value::Array(items) if items.is_empty() => "-".to_owned(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| cell(Some(i)))
                    .collect::<Vec<_>>()
                    .join(", "),
                other => cell(Some(other)),
            };
            vec![key.clone(), shown]
        })
        .collect();
    format!("\ncold tier\n{}", columns(&rows, "  "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_durable_node_shows_its_counters() {
        let health = serde_json::json!({
            "status": "ok",
            "mode": "durable",
            "groups": [
                {"group": 0, "leader": 1, "applied_index": 12, "last_log_index": 12,
                 "log": {"writes": 10, "fsyncs": 8, "synced_entries": 12, "entries": 12},
                 "snapshot": {"built": 2, "installed": 0, "index": 10, "bytes": 100}},
                {"group": 1, "leader": null, "applied_index": null, "last_log_index": 3,
                 "log": {"writes": 3, "fsyncs": 0, "synced_entries": 0}}
            ],
            "log": {"writes": 13, "entries": 15, "fsyncs": 8, "entries_per_fsync": 1.5,
                    "proposals_per_fsync": null, "mean_fsync_us": 120.0, "fsync_max_us": 400}
        });
        let text = render_health("http://n".to_owned(), &health);
        assert_eq!(
            text,
            "node    http://n\n\
             status  ok\n\
             mode    durable\n\
             \n\
             group  leader  applied  last log  writes  fsyncs  entries/fsync  snapshots built  installed\n\
             0      1       12       12        10      8       1.50           2                0\n\
             1      -       -        3         3       0       -              0                0\n\
             \n\
             log (all groups): 13 writes, 15 entries, 8 fsyncs, 1.50 entries/fsync, \
             - proposals/fsync, mean fsync 120.00 us, max fsync 400 us\n"
        );
    }

    #[test]
    fn a_node_in_memory_has_no_groups() {
        let health = serde_json::json!({"status": "ok", "mode": "memory", "groups": []});
        let text = render_health("http://n".to_owned(), &health);
        assert!(
            text.ends_with("mode    memory\ngroups  none (in memory: no replication log)\n"),
            "{text}"
        );
    }
}
