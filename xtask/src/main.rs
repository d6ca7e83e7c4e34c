//! Project chores for strand. `cargo xtask ci` is the one command that says
//! "green"; `cargo xtask help` lists the others.

mod apps;
mod bench;
mod console;
mod fuzz;
mod http_conformance;
mod install_check;
mod loadtest;
mod npm;
mod profile;
mod prometheus;
mod servers;
mod tools;
mod vendor;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

/// One CI step: a name and the command line it runs.
struct Step {
    name: &'static str,
    run: fn(&Path) -> Result<(), String>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(&root),
        Some("legacy") => step_legacy(&root),
        Some("bench") => bench::bench(&root),
        Some("publish-check") => publish_check(&root),
        Some("fuzz") => fuzz::fuzz(&root, &args[1..]),
        Some("tools") => tools::ensure_all(&root),
        Some("vendor-conformance") => vendor::vendor_conformance(&root, &args[1..]),
        Some("loadtest") => loadtest::loadtest(&root, &args[1..]),
        Some("profile") => profile::profile(&root, &args[1..]),
        Some("cold-outage") => cold_outage(&root, &args[1..]),
        Some("faults") => faults(&root, &args[1..]),
        Some("invariant") => invariant(&root, &args[1..]),
        Some("http-conformance") => http_conformance::http_conformance(&root, &args[1..]),
        Some("apps") => apps::apps(&root, &args[1..]),
        Some("prometheus") => prometheus::prometheus(&root, &args[1..]),
        Some("console") => console::console(&root, &args[1..]),
        Some("install-check") => install_check::install_check(&root, &args[1..]),
        Some("help") | None => {
            print_help();
            Ok(())
        }
        Some(other) => Err(format!("unknown task `{other}`; try `cargo xtask help`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // An empty message: the task has already said what failed.
            if !message.is_empty() {
                eprintln!("xtask: {message}");
            }
            ExitCode::FAILURE
        }
    }
}

fn print_help() {
    println!("cargo xtask <task>");
    println!();
    println!("tasks:");
    println!("  ci       fmt, clippy, doc, http-conformance without and with authentication,");
    println!("           on --http-engine hyper, and with the subscription tests (in a network");
    println!("           namespace)");
    println!("           (every test must pass), apps (every check must pass), tests (with");
    println!("           insta checks),");
    println!("           components (tests/components, each built with its one strand crate),");
    println!("           cargo-deny, the S3 backend against moto;");
    println!("           installs the pinned cargo-deny first when needed");
    println!("  legacy   restore every legacy snapshot fixture (tests/fixtures/legacy) and");
    println!("           check its outcome against the pinned insta snapshots");
    println!("  bench    run strand-machine's benches (release) and print one table of");
    println!("           figures against the issue's targets and reference figures");
    println!(
        "  http-conformance [--server strand|node|electric] [--auth] [--durable] [--cluster] [--subscriptions] [--http-engine hyper|lean] [--keep] [--allow-fail-area PREFIX]..."
    );
    println!("           run the official Durable Streams HTTP suite (npm, pinned in");
    println!("           tests/http-conformance) against strand-server (default; built in");
    println!("           release), the node reference server or Electric's durable-streams");
    println!("           0.1.5 (installed into target/peers as loadtest does), on loopback;");
    println!("           prints a table");
    println!("           per area and `http-conformance: N passed, M failed`. --keep leaves");
    println!("           the server running until Enter; failures in areas starting with an");
    println!("           --allow-fail-area PREFIX are printed but do not fail the run; --auth");
    println!("           starts strand-server with authentication on and adds a token to");
    println!("           every request of the suite; --durable runs strand-server with");
    println!("           --data-dir (a fresh directory under target/http-conformance);");
    println!("           --cluster against node 2 of a three-node loopback cluster;");
    println!("           --subscriptions adds the opt-in subscription tests, run inside a");
    println!("           loopback-only network namespace (unshare --net; refused without);");
    println!("           --http-engine passes strand-server's --http-engine");
    println!("  {}", profile::USAGE.trim_start_matches("cargo xtask "));
    println!("           where each server's time per append goes: loadtest's write scenarios");
    println!("           against strand (memory, durable) and Electric's server (memory, wal),");
    println!("           three runs each: perf stat (CPU user/system, context switches,");
    println!("           wakeups, page faults), allocator uprobes (allocations), strace -c");
    println!("           (system calls), every count per append; needs perf, strace and root;");
    println!("           not part of ci");
    println!("  {}", prometheus::USAGE.trim_start_matches("cargo xtask "));
    println!("           a real Prometheus (Debian's package, pinned; installed when missing");
    println!("           and root) scrapes a 3-node cluster's GET /metrics on loopback while");
    println!("           a client appends; prints PromQL answers; not part of ci");
    println!("  {}", console::USAGE.trim_start_matches("cargo xtask "));
    println!("           the web console in headless Chromium (Debian's, pinned; installed");
    println!("           when missing and root) driven by playwright-core (tests/console,");
    println!("           pinned) against strand-server with authentication on; screenshots");
    println!("           to target/console (or DIR: docs for the README's); ci runs it");
    println!("  install-check");
    println!("           cargo install --locked --path for strand-server and strand-cli into");
    println!("           target/install-check, then runs both installed binaries; not in ci");
    println!("  apps [--server strand|node] [--only NAME] [--debug-build] [--flushed]");
    println!("       [--cluster [--nodes N]]");
    println!("           the protocol's ecosystem libraries (tests/apps, pinned) against");
    println!("           strand-server --memory (release; debug with --debug-build) or the");
    println!("           node reference server, on loopback: yjs (y-durable-streams: sync,");
    println!("           awareness, reconnect, late joiners, compaction), aisdk (a resumable");
    println!("           AI SDK chat over aisdk-transport, mock model), state (StreamDB),");
    println!("           python (the PyPI client, in target/apps/venv); one line per check");
    println!("           and `apps: N passed, M failed`; logs in target/apps/NAME.log;");
    println!("           --flushed against a durable node that flushes every byte to its");
    println!("           segment files at once; --cluster against node 2 of a cluster of");
    println!("           --nodes (3) while each node in turn is drained and undrained (ci");
    println!("           runs all three, the cluster with five nodes)");
    println!(
        "  faults [--rounds N] [--clients N] [--acks N] [--partition-rounds N] [--partition-writes N] [--rolling-rounds N]"
    );
    println!("           the long kill -9 fault test: strand-server --data-dir on loopback,");
    println!("           clients appending with producers, SIGKILL and restart N times (10),");
    println!("           every acknowledged append checked once at its offset and the");
    println!("           integrity setsums recomputed after each; then the partition test");
    println!("           (tests/partition.rs): a follower, then the leader, cut off from a");
    println!("           3-node cluster and healed, N rounds (5) of N writes per phase (200)");
    println!("  invariant [--requests N] [--seed S]");
    println!("           crates/strand-server/tests/invariant.rs with N random requests (50000)");
    println!("           over the whole route table: after every answer >= 400 no stream of");
    println!("           the pool may have changed, and no answer may be a 5xx; S (decimal or");
    println!("           0x hex) replays a run, without it the seed comes from the clock;");
    println!("           prints the seed, the count and how many answers were >= 400");
    println!("  loadtest [--compare] [--quick] [--durable] [--fsync-never] [--only TEXT] [--pin]");
    println!("           strand-bench's scenarios (writes, SSE fan-out, catch-up, idle memory,");
    println!("           resident memory while appending) against a release strand-server;");
    println!("           --compare also runs them against the node reference server,");
    println!("           durable-streams-server 0.3.0 and Electric's durable-streams 0.1.5 in");
    println!("           memory and wal mode (installed into target/peers) and prints strand's");
    println!("           ratio to each; --resident-writers-large N (8), --resident-writers-small");
    println!("           N (500) set the resident scenarios' writers; --hyper adds strand-server");
    println!("           on --http-engine hyper (and its durable node with --durable); loopback");
    println!("           only");
    println!("  cold-outage [--seconds N]");
    println!("           the cold tier's store taken down for N seconds (default 30) under");
    println!("           write load through strand-server: prints accepted write rates before,");
    println!("           during and after, refusals, the hot-bytes peak against the limit and");
    println!("           the recovery time; checks that no acknowledged byte is lost");
    println!("  vendor-conformance [DIR]");
    println!("           refresh tests/conformance (FORMAT.md, SUMMARY.md, traces.tar.zst)");
    println!("           from DIR (default ../shared/conformance); deterministic");
    println!("  publish-check");
    println!("           cargo publish --workspace --dry-run --allow-dirty: package the seven");
    println!("           library crates and build each from its package (needs crates.io)");
    println!("  fuzz [--seconds N] [binary_decode|json_restore|command_sequence|http_request]...");
    println!("           run the cargo-fuzz targets of fuzz/ one after another (stable, no");
    println!("           sanitizer), N seconds each (default 60), on target/fuzz-corpus/");
    println!("           seeded from the conformance traces (http_request: from request");
    println!("           sequences of xtask/src/fuzz/http_seeds.rs); installs the pinned");
    println!("           cargo-fuzz 0.13.2 when missing; logs in target/fuzz-logs/");
    println!("  tools    install the pinned cargo-insta and cargo-deny if missing or at");
    println!("           another version (ci installs cargo-deny itself; it drives insta");
    println!("           without cargo-insta)");
    println!("  help     this text");
}

/// `cargo xtask faults`: `crates/strand-server/tests/faults.rs`,
/// `partition.rs` and the rolling restart of `cluster.rs` with more
/// rounds, clients and acknowledged appends per round than the normal
/// suite's short runs.
fn faults(root: &Path, args: &[String]) -> Result<(), String> {
    let (mut rounds, mut clients, mut acks) = ("10".to_owned(), "16".to_owned(), "3000".to_owned());
    let (mut partition_rounds, mut partition_writes) = ("5".to_owned(), "200".to_owned());
    let mut rolling_rounds = "3".to_owned();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let slot = match a.as_str() {
            "--rounds" => &mut rounds,
            "--clients" => &mut clients,
            "--acks" => &mut acks,
            "--partition-rounds" => &mut partition_rounds,
            "--partition-writes" => &mut partition_writes,
            "--rolling-rounds" => &mut rolling_rounds,
            other => {
                return Err(format!(
                    "unknown option `{other}`; usage: cargo xtask faults [--rounds N] [--clients N] [--acks N] [--partition-rounds N] [--partition-writes N] [--rolling-rounds N]"
                ));
            }
        };
        match it.next() {
            Some(v) if v.parse::<u64>().is_ok() => v.clone_into(slot),
            _ => return Err(format!("{a} needs a number")),
        }
    }
    let mut cmd = server_tests(
        root,
        &[
            "faults::",
            "partition::",
            "cluster::a_rolling_restart_with_drains_loses_nothing",
            "cluster::membership_changes_under_load_lose_nothing",
        ],
    );
    cmd.env("STRAND_FAULTS_ROUNDS", &rounds)
        .env("STRAND_FAULTS_CLIENTS", &clients)
        .env("STRAND_FAULTS_ACKS", &acks)
        .env("STRAND_PARTITION_ROUNDS", &partition_rounds)
        .env("STRAND_PARTITION_WRITES", &partition_writes)
        .env("STRAND_ROLLING_ROUNDS", &rolling_rounds);
    run(cmd)
}

/// A seed as the invariant test reads it: decimal or `0x` hex, `_` allowed.
fn parse_seed(text: &str) -> Option<u64> {
    let text = text.replace('_', "");
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// `cargo xtask invariant [--requests N] [--seed S]`: the invariant test of
/// `crates/strand-server/tests/invariant.rs` (a failed request changes no
/// stream's state) with many more requests than the suite's 3000, and a
/// fresh seed unless one is given.
fn invariant(root: &Path, args: &[String]) -> Result<(), String> {
    const USAGE: &str = "usage: cargo xtask invariant [--requests N] [--seed S]";
    let mut requests = 50_000u64;
    let mut seed = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match (a.as_str(), it.next()) {
            ("--requests", Some(v)) => {
                requests = v
                    .parse()
                    .map_err(|_| format!("--requests needs a whole number, not {v:?}"))?;
            }
            ("--seed", Some(v)) => {
                seed = Some(parse_seed(v).ok_or_else(|| {
                    format!("--seed needs a number (decimal or 0x hex), not {v:?}")
                })?);
            }
            (other, _) => {
                return Err(format!(
                    "unknown option or missing value `{other}`; {USAGE}"
                ));
            }
        }
    }
    let seed = seed.unwrap_or_else(|| {
        // Another run, another sequence: the clock's nanoseconds.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| {
                u64::try_from(d.as_nanos() & u128::from(u64::MAX)).unwrap_or(1)
            })
    });
    println!("invariant: seed {seed:#x}, {requests} requests");
    let mut cmd = server_tests(root, &["invariant::"]);
    cmd.env("STRAND_INVARIANT_REQUESTS", requests.to_string())
        .env("STRAND_INVARIANT_SEED", format!("{seed:#x}"));
    run(cmd)
}

fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map_or(manifest.clone(), Path::to_path_buf)
}

fn ci(root: &Path) -> Result<(), String> {
    let steps = [
        Step {
            name: "fmt",
            run: step_fmt,
        },
        Step {
            name: "clippy",
            run: step_clippy,
        },
        Step {
            name: "doc",
            run: step_doc,
        },
        Step {
            name: "tests",
            run: step_tests,
        },
        Step {
            name: "http-conformance",
            run: step_http_conformance,
        },
        Step {
            name: "http-conformance-hyper",
            run: step_http_conformance_hyper,
        },
        Step {
            name: "http-conformance-auth",
            run: step_http_conformance_auth,
        },
        Step {
            name: "http-conformance-subscriptions",
            run: step_http_conformance_subscriptions,
        },
        Step {
            name: "http-conformance-cluster",
            run: step_http_conformance_cluster,
        },
        Step {
            name: "apps",
            run: step_apps,
        },
        Step {
            name: "console",
            run: step_console,
        },
        Step {
            name: "insta",
            run: step_insta_pending,
        },
        Step {
            name: "components",
            run: step_components,
        },
        Step {
            name: "deny",
            run: step_deny,
        },
        // The conformance corpus and the legacy fixtures are tests of
        // the tests step; `cargo xtask legacy` runs the fixtures alone.
        Step {
            name: "s3",
            run: step_s3,
        },
    ];
    let started = Instant::now();
    for step in &steps {
        println!("==> ci step `{}`", step.name);
        let t = Instant::now();
        let outcome = (step.run)(root);
        let secs = t.elapsed().as_secs_f64();
        match outcome {
            Ok(()) => println!("<== ci step `{}` ok in {secs:.1}s", step.name),
            Err(e) => {
                return Err(format!(
                    "ci step `{}` failed after {secs:.1}s: {e}",
                    step.name
                ));
            }
        }
    }
    println!(
        "ci: all {} steps green in {:.1}s",
        steps.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `cargo test` of strand-server's integration tests whose names match
/// `filters`, their output shown.
fn server_tests(root: &Path, filters: &[&str]) -> Command {
    let mut cmd = cargo(root);
    cmd.args(["test", "-p", "strand-server", "--test", "server", "--"])
        .args(filters)
        .arg("--nocapture");
    cmd
}

pub(crate) fn cargo(root: &Path) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root);
    cmd
}

/// Cargo's target directory: `CARGO_TARGET_DIR` (relative to the workspace
/// root when relative), or `target/`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    }
}

pub(crate) fn run(mut cmd: Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} exited with {status}"))
    }
}

fn has_subcommand(root: &Path, sub: &str) -> bool {
    cargo(root)
        .args([sub, "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The official Durable Streams HTTP suite against strand-server: every
/// test must pass (forks included). It runs the debug binary the tests
/// step built (`--debug-build`): a fresh checkout then compiles the
/// dependency tree once, not a second time in release.
fn step_http_conformance(root: &Path) -> Result<(), String> {
    http_conformance::http_conformance(root, &["--debug-build".into()])
}

/// The same suite against `--http-engine hyper`, hyper's server (the
/// default is strand's own HTTP/1.1 connection, `lean`).
fn step_http_conformance_hyper(root: &Path) -> Result<(), String> {
    http_conformance::http_conformance(
        root,
        &[
            "--http-engine".into(),
            "hyper".into(),
            "--debug-build".into(),
        ],
    )
}

/// The same suite with authentication on, every request carrying a token
/// through the test file's header injector.
fn step_http_conformance_auth(root: &Path) -> Result<(), String> {
    http_conformance::http_conformance(root, &["--auth".into(), "--debug-build".into()])
}

/// The suite with its opt-in subscription tests (webhooks, pull-wake),
/// inside a loopback-only network namespace.
fn step_http_conformance_subscriptions(root: &Path) -> Result<(), String> {
    http_conformance::http_conformance(root, &["--subscriptions".into(), "--debug-build".into()])
}

/// The official suite against node 2 of a three-node cluster, whose
/// leaderships are balanced (moved) as the suite starts.
fn step_http_conformance_cluster(root: &Path) -> Result<(), String> {
    // Against node 2 of five: three voters per group, so node 2 passes the
    // requests for the groups it does not hold on to their members.
    http_conformance::http_conformance(
        root,
        &[
            "--cluster".into(),
            "--nodes".into(),
            "5".into(),
            "--debug-build".into(),
        ],
    )
}

/// The ecosystem libraries' checks (`cargo xtask apps`) against the debug
/// strand-server the tests step built, like the http-conformance steps.
fn step_apps(root: &Path) -> Result<(), String> {
    apps::apps(root, &["--debug-build".into()])?;
    // Again with every byte read back from segment files.
    apps::apps(root, &["--debug-build".into(), "--flushed".into()])?;
    // And against a node of a five-node cluster (three voters per group,
    // so it holds some groups only) while the leaderships move.
    apps::apps(
        root,
        &[
            "--debug-build".into(),
            "--cluster".into(),
            "--nodes".into(),
            "5".into(),
        ],
    )
}

fn step_console(root: &Path) -> Result<(), String> {
    console::console(root, &["--debug-build".into()])
}

/// `cargo doc --workspace --no-deps` with rustdoc warnings (broken
/// intra-doc links, bad code blocks) as errors. `missing_docs` is denied in
/// the seven library crates themselves (`#![deny(missing_docs)]`).
fn step_doc(root: &Path) -> Result<(), String> {
    let mut cmd = cargo(root);
    cmd.args(["doc", "--workspace", "--no-deps"]);
    cmd.env("RUSTDOCFLAGS", "-D warnings");
    run(cmd)
}

/// `cargo xtask cold-outage [--seconds N]`: the ignored measurement of
/// `crates/strand-server/tests/cold.rs` (a store down for N seconds under
/// write load), too long for `ci`.
fn cold_outage(root: &Path, args: &[String]) -> Result<(), String> {
    let seconds = match args {
        [] => 30,
        [flag, n] if flag == "--seconds" => n
            .parse::<u64>()
            .map_err(|_| format!("--seconds needs a whole number, not {n:?}"))?,
        _ => return Err("usage: cargo xtask cold-outage [--seconds N]".into()),
    };
    let mut cmd = cargo(root);
    cmd.args([
        "test",
        "-p",
        "strand-server",
        "--test",
        "server",
        "cold::store_down_for_30_seconds_under_write_load",
        "--",
        "--ignored",
        "--nocapture",
    ]);
    cmd.env("STRAND_COLD_OUTAGE_SECS", seconds.to_string());
    run(cmd)
}

/// `cargo xtask publish-check`: `cargo publish --workspace --dry-run
/// --allow-dirty`, which packages the seven library crates in dependency
/// order, builds each from its packaged form against the others' packages,
/// and uploads nothing. Needs the crates.io index; not part of `ci`.
fn publish_check(root: &Path) -> Result<(), String> {
    let mut cmd = cargo(root);
    cmd.args(["publish", "--workspace", "--dry-run", "--allow-dirty"]);
    run(cmd)
}

fn step_fmt(root: &Path) -> Result<(), String> {
    let mut cmd = cargo(root);
    cmd.args(["fmt", "--all", "--check"]);
    run(cmd)
}

fn step_clippy(root: &Path) -> Result<(), String> {
    let mut cmd = cargo(root);
    cmd.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run(cmd)
}

/// Runs the whole test suite the way `cargo insta test --check
/// --unreferenced=reject` does, without building cargo-insta (a fresh
/// machine would compile it on every CI run):
///
/// * the tests through nextest (or `cargo test` without it), then the
///   doctests with `cargo test --doc`, with `INSTA_UPDATE=no`, so a snapshot
///   mismatch fails its test and writes nothing;
/// * every snapshot file an assertion read is listed by insta in the file
///   `INSTA_SNAPSHOT_REFERENCES_FILE` names; a `.snap` file in the tree that
///   no test read fails the step (a renamed or deleted test left it behind).
///
/// `cargo insta review` (the pinned `cargo xtask tools`) stays the way to
/// accept a changed snapshot.
fn step_tests(root: &Path) -> Result<(), String> {
    let references = root.join("target").join("insta-references.txt");
    if let Some(dir) = references.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    }
    match std::fs::remove_file(&references) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("could not remove {}: {e}", references.display())),
    }
    let insta_env = |cmd: &mut Command| {
        cmd.env("INSTA_UPDATE", "no")
            .env("INSTA_FORCE_PASS", "0")
            .env("INSTA_SNAPSHOT_REFERENCES_FILE", &references);
    };
    let mut tests = cargo(root);
    if has_subcommand(root, "nextest") {
        tests.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
    } else {
        tests.args(["test", "--workspace", "--no-fail-fast"]);
    }
    insta_env(&mut tests);
    run(tests)?;
    // The server's HTTP-facing tests again on `--http-engine hyper` (the
    // tests' servers read STRAND_HTTP_ENGINE): the protocol, the
    // malformed requests, live reads, the binary, TLS and auth.
    let modules = [
        "auth::",
        "bad_input::",
        "binary::",
        "bucketed::",
        "forks::",
        "listing::",
        "live::",
        "metrics::",
        "protocol::",
        "subscriptions::",
        "tls::",
    ];
    // `--workspace`, as above, so the features and the build are the same
    // (naming the package alone rebuilt it and its dependencies: 3 min).
    let mut hyper = cargo(root);
    if has_subcommand(root, "nextest") {
        hyper
            .args(["nextest", "run", "--workspace", "--no-fail-fast"])
            .args(["-E", "package(strand-server) & binary(server)"])
            .args(modules);
    } else {
        hyper
            .args([
                "test",
                "--workspace",
                "--test",
                "server",
                "--no-fail-fast",
                "--",
            ])
            .args(modules);
    }
    hyper.env("STRAND_HTTP_ENGINE", "hyper");
    insta_env(&mut hyper);
    run(hyper)?;
    let mut doctests = cargo(root);
    doctests.args(["test", "--workspace", "--doc"]);
    insta_env(&mut doctests);
    run(doctests)?;
    let unreferenced = unreferenced_snapshots(root, &references)?;
    if unreferenced.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "snapshot files no test reads (remove them, or restore their test): {}",
            path_list(&unreferenced)
        ))
    }
}

/// The `.snap` files under `root` (outside `target/` and hidden
/// directories) that are not listed in the insta references file.
fn unreferenced_snapshots(root: &Path, references: &Path) -> Result<Vec<PathBuf>, String> {
    let listed = match std::fs::read_to_string(references) {
        Ok(text) => text,
        // No test read a snapshot file at all.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("could not read {}: {e}", references.display())),
    };
    let referenced: std::collections::BTreeSet<PathBuf> = listed
        .lines()
        .filter_map(|line| std::fs::canonicalize(line).ok())
        .collect();
    let mut found = Vec::new();
    find_files_ending(root, ".snap", &mut found);
    Ok(found
        .into_iter()
        .filter(|path| {
            std::fs::canonicalize(path).map_or(true, |canonical| !referenced.contains(&canonical))
        })
        .collect())
}

/// `paths` as one comma-separated line for an error message.
fn path_list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every file under `dir` whose name ends with `suffix`, skipping `target`,
/// `node_modules` and hidden directories.
fn find_files_ending(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name != "target" && name != "node_modules" && !name.starts_with('.') {
                find_files_ending(&path, suffix, out);
            }
        } else if name.ends_with(suffix) {
            out.push(path);
        }
    }
}

/// Fails when a pending snapshot (`.snap.new`, `.pending-snap`) is lying in
/// the tree: a format change must be reviewed and accepted, never left open.
fn step_insta_pending(root: &Path) -> Result<(), String> {
    let mut pending = Vec::new();
    find_pending(root, &mut pending);
    if pending.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "pending insta snapshots (review with `cargo insta review`): {}",
            path_list(&pending)
        ))
    }
}

fn find_pending(dir: &Path, out: &mut Vec<PathBuf>) {
    find_files_ending(dir, ".snap.new", out);
    find_files_ending(dir, ".pending-snap", out);
}

/// The component crates of `tests/components/` and the one strand crate
/// each may depend on.
const COMPONENTS: [(&str, &str); 3] = [
    ("component-snapshot-check", "strand-snapshot"),
    ("component-records-index", "strand-records"),
    ("component-integrity-setsum", "strand-integrity"),
];

/// Each component crate depends on its one strand crate and nothing else
/// (`cargo tree -e normal --depth 1`), and its tests pass when it is built
/// alone (`cargo test -p` of just the three, so their features are resolved
/// without the rest of the workspace).
fn step_components(root: &Path) -> Result<(), String> {
    for (krate, dependency) in COMPONENTS {
        let output = cargo(root)
            .args(["tree", "-p", krate, "-e", "normal", "--depth", "1"])
            .args(["--prefix", "none"])
            .output()
            .map_err(|e| format!("could not run cargo tree: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "cargo tree -p {krate} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let direct: Vec<&str> = text
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        if direct != [dependency] {
            return Err(format!(
                "{krate} must depend on {dependency} alone, but its normal dependencies are {direct:?}"
            ));
        }
        println!("{krate}: depends on {dependency} alone");
    }
    let mut cmd = cargo(root);
    cmd.arg("test");
    for (krate, _) in COMPONENTS {
        cmd.args(["-p", krate]);
    }
    run(cmd)
}

fn step_deny(root: &Path) -> Result<(), String> {
    tools::ensure_tool(root, &tools::DENY)?;
    let mut cmd = cargo(root);
    cmd.args(["deny", "check", "bans", "licenses", "sources"]);
    run(cmd)
}

/// The S3 backend against moto in server mode
/// (`crates/strand-server/tests/cold_s3.rs`): an ignored test of the
/// tests step, run here, where it fails when moto cannot be had (the
/// machine's Python, or `moto[server]` pip-installed into `target/moto`).
fn step_s3(root: &Path) -> Result<(), String> {
    run_ignored_server_test(root, S3_TEST, &[])
}

/// Runs one ignored test of strand-server's `server` test binary by its
/// exact name, with `cargo_args` before `--` (`--offline` inside a
/// network namespace), and fails unless exactly that test ran and passed.
pub(crate) fn run_ignored_server_test(
    root: &Path,
    test: &str,
    cargo_args: &[&str],
) -> Result<(), String> {
    let mut cmd = cargo(root);
    // `--workspace` keeps the feature set of the tests step, so nothing is
    // rebuilt (a single `--package` resolves features differently).
    cmd.arg("test").args(cargo_args).args([
        "--workspace",
        "--test",
        "server",
        "--",
        "--ignored",
        "--exact",
        test,
    ]);
    let shown = format!("{cmd:?}");
    let output = cmd
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        return Err(format!("{shown} exited with {}", output.status));
    }
    // A renamed test would match nothing and pass.
    if !stdout.contains("test result: ok. 1 passed") {
        return Err(format!("{shown} ran no test named {test}"));
    }
    Ok(())
}

const S3_TEST: &str = "cold_s3::the_s3_backend_flushes_reads_and_reclaims_against_moto";

/// Restores every fixture of `tests/fixtures/legacy/` (spec 07 §8 legacy
/// shapes and one hand-made snapshot per `StreamSnapshotError` variant) and
/// checks each outcome against its pinned insta snapshot. `INSTA_UPDATE=no`
/// makes a mismatch fail instead of writing a `.snap.new`.
fn step_legacy(root: &Path) -> Result<(), String> {
    let mut cmd = cargo(root);
    // `--workspace` keeps the feature set of the tests step, so nothing is
    // rebuilt (a single `--package` resolves features differently).
    cmd.args([
        "test",
        "--workspace",
        "--test",
        "workspace",
        "--test",
        "snapshot",
        "--",
        "legacy::",
        "--nocapture",
    ]);
    cmd.env("INSTA_UPDATE", "no");
    run(cmd)
}

/// Walks command-line arguments (`--flag`, `--flag=value`, `--flag value`),
/// handing each flag to `on` with a way to take its value and whether the
/// value came inline; `on` answers `false` for a flag it does not know.
pub(crate) fn parse_flags(
    args: &[String],
    usage: &str,
    mut on: impl FnMut(
        &str,
        &mut dyn FnMut(&str) -> Result<String, String>,
        bool,
    ) -> Result<bool, String>,
) -> Result<(), String> {
    let mut next = 0;
    while let Some(arg) = args.get(next) {
        next += 1;
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let has_inline = inline.is_some();
        let mut value = |what: &str| match &inline {
            Some(value) => Ok(value.clone()),
            None => {
                let value = args
                    .get(next)
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs {what}; usage: {usage}"))?;
                next += 1;
                Ok(value)
            }
        };
        if !on(flag, &mut value, has_inline)? {
            return Err(format!("unknown argument `{arg}`; usage: {usage}"));
        }
    }
    Ok(())
}
