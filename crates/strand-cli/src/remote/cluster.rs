//! `strand cluster status --url URL [--json]`: the cluster as the node at
//! `URL` puts it together (`GET /__strand/cluster`, an operator route):
//! one row per member (id, URL, state) and one per group (leader, term,
//! voters, learners, and each replica's applied index and lag).
//! `strand cluster drain NODE` and `undrain NODE` start and end a
//! member's drain (`POST /__strand/cluster/{drain|undrain}/NODE`); a
//! drain waits until the member leads no group. `strand cluster remove
//! NODE` takes a member out (`POST /__strand/cluster/remove/NODE`) and
//! waits until no group holds it.
//!
//! The JSON is read as it comes (`serde_json::Value`): a field the server
//! does not send shows as `-`.

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::Method;
use serde_json::Value;

use super::status::{cell, columns};
use super::{Server, ServerArgs, describe};

/// Arguments of `strand cluster status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// Print the server's JSON instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs the command: exit 0 when every member is `up` (or `removed`: no
/// longer a member) and every group
/// has a leader, 1 otherwise (the tables are printed all the same).
pub(crate) fn run_status(args: &StatusArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let server = Server::new(&args.server)?;
    let url = server.url("/__strand/cluster");
    let what = describe(&Method::GET, &url);
    let response = server.send_ok(server.request(Method::GET, &url), &what)?;
    let text = response
        .text()
        .with_context(|| format!("{what}: reading the answer"))?;
    let status: Value =
        serde_json::from_str(&text).with_context(|| format!("{what}: the answer is not JSON"))?;
    if args.json {
        writeln!(out, "{}", text.trim_end())?;
    } else {
        out.write_all(render(&status).as_bytes())?;
    }
    Ok(if healthy(&status) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Arguments of `strand cluster drain` and `undrain`.
#[derive(Debug, clap::Args)]
pub(crate) struct DrainArgs {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// The member's node id.
    pub(crate) node: u64,
    /// With `drain`: how long to wait for the member to lead no group
    /// (0: do not wait).
    #[arg(long, default_value_t = 120)]
    pub(crate) wait_seconds: u64,
}

/// Runs `drain` (`draining`) or `undrain`: exit 0 once the server took it
/// and, for a drain, once the member leads no group; 1 when the wait ran
/// out (the drain goes on).
pub(crate) fn run_drain(
    args: &DrainArgs,
    draining: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let server = Server::new(&args.server)?;
    let action = if draining { "drain" } else { "undrain" };
    let url = server.url(&format!("/__strand/cluster/{action}/{}", args.node));
    let what = describe(&Method::POST, &url);
    server.send_ok(server.request(Method::POST, &url), &what)?;
    if !draining {
        writeln!(out, "node {} undrained", args.node)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.wait_seconds == 0 {
        writeln!(out, "node {} draining", args.node)?;
        return Ok(ExitCode::SUCCESS);
    }
    let node = args.node;
    wait_and_report(
        &server,
        args.wait_seconds,
        Instant::now(),
        out,
        |status| led_by(status, node),
        |took| format!("node {node} drained: it leads no group ({took:.1} s)"),
        |left| {
            format!(
                "node {node} still leads group(s) {left} after {} s; the drain goes on",
                args.wait_seconds
            )
        },
    )
}

/// Waits until `pending` finds nothing in the cluster's status
/// ([`wait_until_none`]) and says so: `done` with the seconds since
/// `started` (exit 0), or `still` with the groups left when the wait ran
/// out (exit 1).
fn wait_and_report(
    server: &Server,
    wait_seconds: u64,
    started: Instant,
    out: &mut dyn Write,
    pending: impl Fn(&Value) -> Vec<String>,
    done: impl FnOnce(f64) -> String,
    still: impl FnOnce(&str) -> String,
) -> anyhow::Result<ExitCode> {
    let left = wait_until_none(server, wait_seconds, pending)?;
    if left.is_empty() {
        writeln!(out, "{}", done(started.elapsed().as_secs_f64()))?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "{}", still(&left.join(",")))?;
    Ok(ExitCode::FAILURE)
}

/// Reads the cluster's status every 250 ms until `pending` finds nothing
/// in it, for at most `wait_seconds`; what it found last (empty: done).
fn wait_until_none(
    server: &Server,
    wait_seconds: u64,
    pending: impl Fn(&Value) -> Vec<String>,
) -> anyhow::Result<Vec<String>> {
    let url = server.url("/__strand/cluster");
    let what = describe(&Method::GET, &url);
    let deadline = Instant::now() + Duration::from_secs(wait_seconds);
    loop {
        let response = server.send_ok(server.request(Method::GET, &url), &what)?;
        let text = response
            .text()
            .with_context(|| format!("{what}: reading the answer"))?;
        let status: Value = serde_json::from_str(&text)
            .with_context(|| format!("{what}: the answer is not JSON"))?;
        let left = pending(&status);
        if left.is_empty() || Instant::now() >= deadline {
            return Ok(left);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Arguments of `strand cluster remove`.
#[derive(Debug, clap::Args)]
pub(crate) struct RemoveArgs {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// The member's node id.
    pub(crate) node: u64,
    /// How long to wait until no group holds the member any more (0: do
    /// not wait).
    #[arg(long, default_value_t = 300)]
    pub(crate) wait_seconds: u64,
}

/// Runs `remove`: exit 0 once the member is out of the cluster and, unless
/// `--wait-seconds 0`, once no group holds it; 1 when the wait ran out
/// (the groups go on moving its votes).
pub(crate) fn run_remove(args: &RemoveArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let server = Server::new(&args.server)?;
    let url = server.url(&format!("/__strand/cluster/remove/{}", args.node));
    let what = describe(&Method::POST, &url);
    let started = Instant::now();
    server.send_ok(server.request(Method::POST, &url), &what)?;
    if args.wait_seconds == 0 {
        writeln!(out, "node {} removed from the cluster", args.node)?;
        return Ok(ExitCode::SUCCESS);
    }
    let node = args.node;
    wait_and_report(
        &server,
        args.wait_seconds,
        started,
        out,
        |status| held_by(status, node),
        |took| format!("node {node} removed: no group holds it ({took:.1} s)"),
        |left| {
            format!(
                "node {node} is out of the cluster, but group(s) {left} still hold it after {} s",
                args.wait_seconds
            )
        },
    )
}

/// The groups whose voters or learners include `node`.
fn held_by(status: &Value, node: u64) -> Vec<String> {
    list(status, "groups")
        .iter()
        .filter(|g| {
            ["voters", "learners"]
                .iter()
                .any(|k| list(g, k).iter().any(|n| n.as_u64() == Some(node)))
        })
        .map(|g| cell(g.get("group")))
        .collect()
}

/// The groups `node` leads in a cluster status.
fn led_by(status: &Value, node: u64) -> Vec<String> {
    list(status, "groups")
        .iter()
        .filter(|g| g.get("leader").and_then(Value::as_u64) == Some(node))
        .map(|g| cell(g.get("group")))
        .collect()
}

fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Every member up (a removed node is no member) and every group led.
fn healthy(status: &Value) -> bool {
    list(status, "nodes").iter().all(|n| {
        matches!(
            n.get("state").and_then(Value::as_str),
            Some("up" | "removed")
        )
    }) && list(status, "groups")
        .iter()
        .all(|g| g.get("leader").is_some_and(|l| !l.is_null()))
}

/// Node ids as `1,2,3` (`-` for none).
fn ids(value: Option<&Value>) -> String {
    let ids: Vec<String> = value
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| cell(Some(v))).collect())
        .unwrap_or_default();
    if ids.is_empty() {
        "-".to_owned()
    } else {
        ids.join(",")
    }
}

/// A group's voters; while a change of voters is half done (`joint`),
/// the old ones and the new ones (`1,2 -> 1,2,3`).
fn voters(group: &Value) -> String {
    match group.get("joint").and_then(Value::as_array) {
        Some(configs) if configs.len() > 1 => configs
            .iter()
            .map(|c| ids(Some(c)))
            .collect::<Vec<_>>()
            .join(" -> "),
        _ => ids(group.get("voters")),
    }
}

/// The tables.
fn render(status: &Value) -> String {
    let mut text = format!("answered by node {}\n\n", cell(status.get("node")));
    let mut rows = vec![vec![
        "NODE".to_owned(),
        "URL".to_owned(),
        "STATE".to_owned(),
        "ERROR".to_owned(),
    ]];
    for n in list(status, "nodes") {
        rows.push(vec![
            cell(n.get("id")),
            cell(n.get("url")),
            cell(n.get("state")),
            n.get("error").map_or_else(String::new, |e| cell(Some(e))),
        ]);
    }
    text.push_str(&columns(&rows, ""));
    text.push('\n');
    let mut rows = vec![vec![
        "GROUP".to_owned(),
        "LEADER".to_owned(),
        "TERM".to_owned(),
        "VOTERS".to_owned(),
        "LEARNERS".to_owned(),
        "APPLIED (LAG) PER REPLICA".to_owned(),
    ]];
    for g in list(status, "groups") {
        let replicas: Vec<String> = list(g, "replicas")
            .iter()
            .map(|r| {
                format!(
                    "{}:{} ({})",
                    cell(r.get("node")),
                    cell(r.get("applied_index")),
                    cell(r.get("lag"))
                )
            })
            .collect();
        rows.push(vec![
            cell(g.get("group")),
            cell(g.get("leader")),
            cell(g.get("term")),
            voters(g),
            ids(g.get("learners")),
            replicas.join(" "),
        ]);
    }
    text.push_str(&columns(&rows, ""));
    let moves = list(status, "moves");
    if moves.is_empty() {
        text.push_str("\nmoves: none\n");
    } else {
        let _ = writeln!(text, "\nmoves:");
        for m in moves {
            let _ = writeln!(
                text,
                "  group {}: {} from {} to {}",
                cell(m.get("group")),
                cell(m.get("kind")),
                cell(m.get("from")),
                cell(m.get("to"))
            );
        }
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn renders_members_groups_and_replicas() {
        let status = serde_json::json!({
            "node": 2,
            "nodes": [
                {"id": 1, "url": "http://127.0.0.1:7001", "state": "up"},
                {"id": 2, "url": "http://127.0.0.1:7002", "state": "up"},
                {"id": 3, "url": "http://127.0.0.1:7003", "state": "down",
                 "error": "connection refused"}
            ],
            "groups": [
                {"group": 0, "voters": [1, 2, 3], "learners": [], "leader": 1, "term": 4,
                 "replicas": [
                    {"node": 1, "applied_index": 40, "lag": 0},
                    {"node": 2, "applied_index": 38, "lag": 2},
                    {"node": 3, "applied_index": null, "lag": 40}
                 ]},
                {"group": 1, "voters": [1, 2, 3], "joint": [[1, 2], [1, 2, 3]], "learners": [],
                 "leader": 2, "term": 2,
                 "replicas": [
                    {"node": 1, "applied_index": 9, "lag": 0},
                    {"node": 2, "applied_index": 9, "lag": 0},
                    {"node": 3, "applied_index": 7, "lag": 2}
                 ]}
            ],
            "moves": []
        });
        insta::assert_snapshot!(render(&status));
        assert!(!healthy(&status), "a member is down");
        let mut up = status.clone();
        up["nodes"][2]["state"] = "up".into();
        assert!(healthy(&up));
        up["groups"][0]["leader"] = Value::Null;
        assert!(!healthy(&up), "a group without a leader");
        assert_eq!(led_by(&status, 1), vec!["0".to_owned()]);
        assert_eq!(led_by(&status, 2), vec!["1".to_owned()]);
        assert!(led_by(&status, 3).is_empty());
    }
}
