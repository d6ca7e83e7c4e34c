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
//! Against strand-server, strand-server's own webhook tests (ignored in
//! every other run) run there too, after the suite.
//!
//! `package.json` pins `vite` 8.3.8 beside vitest: vite 8.4.0 names an
//! optional Windows package the registry does not serve, and `npm ci` then
//! rejects the lockfile as out of sync.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::npm::prepare_packages;
use crate::servers::{
    Server, build_strand, loopback_addr, spawn_server, start_cluster, start_node_with,
    start_strand, status_of, use_debug_build, use_prebuilt, wait_healthy,
};
use crate::{loadtest, target_dir};

/// The idle long-poll timeout given to the server, and told to the suite.
const LONG_POLL_TIMEOUT_MS: u64 = 500;
/// The test file vitest runs.
const TEST_FILE: &str = "conformance.test.mjs";

/// The command line of `cargo xtask http-conformance`.
#[derive(Debug)]
struct Options {
    server: Server,
    keep: bool,
    auth: bool,
    durable: bool,
    cluster: bool,
    /// Nodes of the `--cluster` cluster.
    nodes: usize,
    /// `--subscriptions`: the opt-in subscription tests too, in a network
    /// namespace.
    subscriptions: bool,
    /// `--http-engine`: strand-server's `--http-engine` for the run.
    http_engine: Option<String>,
    /// The hidden `--inside-netns`: this process is the run inside the
    /// namespace that `--subscriptions` made.
    inside_netns: bool,
    allow_fail_areas: Vec<String>,
}

/// Usage of the task, for errors and `cargo xtask help`.
pub(crate) const USAGE: &str = "cargo xtask http-conformance [--server strand|node|electric] [--auth] [--durable] [--cluster [--nodes N]] [--subscriptions] [--http-engine hyper|lean] [--debug-build] [--keep] [--allow-fail-area PREFIX]...";

/// The hidden flag of the run inside the network namespace.
const INSIDE_NETNS_FLAG: &str = "--inside-netns";

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        server: Server::Strand,
        keep: false,
        auth: false,
        durable: false,
        cluster: false,
        nodes: 3,
        subscriptions: false,
        http_engine: None,
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
            "--nodes" => {
                options.nodes = match value("a number of nodes, 3 to 9")?.parse() {
                    Ok(n @ 3..=9) => n,
                    _ => return Err(format!("--nodes takes 3 to 9; usage: {USAGE}")),
                }
            }
            "--subscriptions" if !inline => options.subscriptions = true,
            "--http-engine" => {
                options.http_engine = match value("`hyper` or `lean`")?.as_str() {
                    engine @ ("hyper" | "lean") => Some(engine.to_owned()),
                    other => {
                        return Err(format!(
                            "unknown HTTP engine `{other}` (hyper or lean); usage: {USAGE}"
                        ));
                    }
                }
            }
            INSIDE_NETNS_FLAG if !inline => options.inside_netns = true,
            "--debug-build" if !inline => use_debug_build(),
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(options)
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
        use_prebuilt();
        println!("xtask: in a network namespace with loopback only");
    }
    prepare_packages(root, &work)?;

    if options.auth && options.server != Server::Strand {
        return Err("--auth runs against strand-server only".into());
    }
    let secret = work.join("auth-secret");
    let mut extra: Vec<String> = if options.auth {
        crate::servers::write_secret(&secret)?;
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
    if let Some(engine) = &options.http_engine {
        if options.server != Server::Strand {
            return Err("--http-engine is a strand-server flag".into());
        }
        extra.extend(["--http-engine".into(), engine.clone()]);
    }
    if options.subscriptions {
        // The suite's webhook receivers listen on 127.0.0.1.
        extra.extend(["--webhook-allow".into(), "127.0.0.0/8".into()]);
    }
    if options.cluster && (options.server != Server::Strand || options.auth) {
        return Err("--cluster runs against strand-server without --auth only".into());
    }
    // With --cluster: the other nodes of a cluster of --nodes (3) run
    // beside the node under test (node 2), killed when the run ends.
    let mut cluster_guards = Vec::new();
    if options.cluster {
        let (node2, others) =
            start_cluster(root, &work, LONG_POLL_TIMEOUT_MS, &extra, options.nodes)?;
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
        let token = crate::servers::mint_token(root, &secret, "http-conformance")?;
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
    if let Err(e) = print_report(&areas, &options, secs) {
        // What the servers warned of: a failure that does not show on a
        // rerun (a stall of a node, say) is explained by what they said.
        print_server_warnings(&work);
        return Err(e);
    }
    if options.inside_netns && options.server == Server::Strand {
        run_webhook_tests(root)?;
    }
    Ok(())
}

/// The most warnings [`print_server_warnings`] prints of one log.
const WARNINGS_SHOWN: usize = 40;

/// Prints the last [`WARNINGS_SHOWN`] warnings and errors of each server
/// log of the run (`*.log` in `work`), their colours taken out.
fn print_server_warnings(work: &Path) {
    let Ok(entries) = fs::read_dir(work) else {
        return;
    };
    let mut logs: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    for log in logs {
        let Ok(text) = fs::read_to_string(&log) else {
            continue;
        };
        let warnings: Vec<String> = text
            .lines()
            .map(strip_colours)
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .collect();
        if warnings.is_empty() {
            continue;
        }
        let shown = &warnings[warnings.len().saturating_sub(WARNINGS_SHOWN)..];
        println!();
        println!(
            "warnings of {} (the last {} of {}):",
            log.display(),
            shown.len(),
            warnings.len()
        );
        for line in shown {
            println!("  {line}");
        }
    }
}

/// `line` without its ANSI colour sequences (`ESC [ ... m`).
fn strip_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The strand-server tests that send webhooks (ignored in every other
/// run), here inside the loopback-only namespace: built and run as the
/// tests step builds the workspace's tests, offline.
const WEBHOOK_TESTS: [&str; 1] =
    ["subscriptions::a_failed_webhook_is_retried_before_the_lease_ends"];

/// Runs [`WEBHOOK_TESTS`]; only called inside the namespace.
fn run_webhook_tests(root: &Path) -> Result<(), String> {
    only_loopback()?;
    println!("xtask: the webhook tests of strand-server, in the namespace");
    for test in WEBHOOK_TESTS {
        crate::run_ignored_server_test(root, test, &["--offline"])?;
    }
    Ok(())
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
    fn colours_are_taken_out_of_log_lines() {
        let line = "\u{1b}[2m2026-12-06T13:41:27Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m it stalled";
        assert_eq!(
            super::strip_colours(line),
            "2026-12-06T13:41:27Z  WARN it stalled"
        );
        assert_eq!(super::strip_colours("plain"), "plain");
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
