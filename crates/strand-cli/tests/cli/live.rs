//! The live commands (`strand status`, `append`, `tail`) against a real
//! strand-server started in-process (the `strand_server` library, in
//! memory unless a test asks for a data directory) on loopback ports, on a
//! tokio runtime in a background thread. The `strand` binary runs as a
//! separate process, as an operator would run it.

use std::borrow::BorrowMut;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use strand_server::Config;
use strand_server::auth::{Claims, Right, sign_hs256};
use tokio::sync::oneshot;

use crate::common::*;

/// How long a `strand` run against the server may take before the test
/// fails (a `tail` that never stops would otherwise hang the suite).
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

const SECRET: &[u8] = b"test-secret-of-at-least-16-bytes";

/// A strand-server on loopback: its client and admin listeners.
struct LiveServer {
    url: String,
    admin_url: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// The secret file, data or cold directory, kept while it runs.
    _dirs: Vec<tempfile::TempDir>,
}

impl LiveServer {
    /// A server in memory with every default.
    fn start() -> Self {
        Self::start_with(|_, _| {})
    }

    /// A server in memory after `tweak` adjusted its configuration
    /// (given a fresh temporary directory for any files it needs).
    fn start_with(tweak: impl FnOnce(&mut Config, &std::path::Path)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::for_listen("127.0.0.1:0".parse().unwrap());
        config.memory = true;
        tweak(&mut config, dir.path());
        let (addrs_tx, addrs_rx) = mpsc::channel::<(SocketAddr, SocketAddr)>();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let client = strand_server::listen(config.listen).unwrap();
                let admin = strand_server::listen("127.0.0.1:0".parse().unwrap()).unwrap();
                addrs_tx
                    .send((client.local_addr().unwrap(), admin.local_addr().unwrap()))
                    .unwrap();
                let listeners = strand_server::Listeners {
                    client,
                    admin: Some(admin),
                };
                strand_server::serve(config, listeners, async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
            });
        });
        let (client, admin) = addrs_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the server starts");
        Self {
            url: format!("http://{client}"),
            admin_url: format!("http://{admin}"),
            stop: Some(stop),
            thread: Some(thread),
            _dirs: vec![dir],
        }
    }

    /// A server whose tokens are signed with [`SECRET`].
    fn with_auth() -> Self {
        Self::start_with(|config, dir| {
            let secret = dir.join("secret");
            std::fs::write(&secret, SECRET).unwrap();
            config.auth_secret_file = Some(secret);
        })
    }

    /// `strand ARGS --url URL` (no token or URL from the environment).
    fn run(&self, args: &[&str]) -> Command {
        let mut command = strand();
        command
            .args(args)
            .arg("--url")
            .arg(&self.url)
            .env_remove("STRAND_TOKEN")
            .env_remove("STRAND_URL")
            .timeout(RUN_TIMEOUT);
        command
    }
}

impl Drop for LiveServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A token granting `rights` on `bucket`.
fn token(bucket: &str, rights: &[Right]) -> String {
    let claims = Claims {
        sub: "cli-test".into(),
        exp: 4_102_444_800,
        grants: [(bucket.to_owned(), rights.to_vec())].into(),
    };
    sign_hs256(SECRET, &claims).unwrap()
}

/// Runs a command; asserts its exit code; returns stdout.
fn expect(mut command: impl BorrowMut<Command>, code: i32) -> String {
    let output = command.borrow_mut().output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout_of(&output),
        stderr_of(&output)
    );
    stdout_of(&output)
}

/// Runs a command expected to fail with exit 1; returns stderr.
fn expect_failure(mut command: impl BorrowMut<Command>) -> String {
    let output = command.borrow_mut().output().unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// An offset as the server renders it.
fn is_offset(text: &str) -> bool {
    let text = text.trim();
    text.len() == 33 && text.as_bytes()[16] == b'_'
}

#[test]
fn status_of_a_node_in_memory() {
    let server = LiveServer::start();
    let table = expect(server.run(&["status"]), 0);
    assert_eq!(
        table,
        format!(
            "node    {}\nstatus  ok\nmode    memory\ngroups  none (in memory: no replication log)\n",
            server.url
        )
    );

    let json = expect(server.run(&["status", "--json"]), 0);
    let health: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["mode"], "memory");
    assert!(health["groups"].is_array(), "{health}");
}

#[test]
fn status_of_a_durable_node_lists_its_groups() {
    let server = LiveServer::start_with(|config, dir| {
        config.memory = false;
        config.data_dir = Some(dir.join("data"));
        config.groups = 2;
    });
    // The node elects itself in each group: 503 and exit 1 until then.
    let output =
        strand_testkit::eventually_blocking("every group elected", Duration::from_secs(20), || {
            let output = server.run(&["status"]).output().unwrap();
            (output.status.code() == Some(0)).then_some(output)
        });
    let table = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{table}{}",
        stderr_of(&output)
    );
    assert!(table.contains("status  ok\nmode    durable\n"), "{table}");
    let header = table
        .lines()
        .find(|l| l.starts_with("group"))
        .unwrap_or_else(|| panic!("no group table in\n{table}"));
    for column in [
        "leader",
        "applied",
        "last log",
        "writes",
        "fsyncs",
        "entries/fsync",
        "snapshots built",
        "installed",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let rows: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("group"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], i.to_string(), "{row}");
        assert_eq!(cells[1], "1", "node 1 leads: {row}");
    }
    assert!(table.contains("\nlog (all groups): "), "{table}");

    let json = expect(server.run(&["status", "--json"]), 0);
    let health: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(health["mode"], "durable");
    assert_eq!(health["groups"].as_array().unwrap().len(), 2);
}

#[test]
fn status_shows_the_cold_tier_to_operators() {
    let server = LiveServer::start_with(|config, dir| {
        let secret = dir.join("secret");
        std::fs::write(&secret, SECRET).unwrap();
        config.auth_secret_file = Some(secret);
        config.cold_dir = Some(dir.join("cold"));
    });
    // The admin right on `*`, on the client listener.
    let admin = token("*", &[Right::Admin]);
    let table = expect(server.run(&["status", "--cold", "--token", &admin]), 0);
    assert!(table.contains("\ncold tier\n"), "{table}");
    for field in ["  backend ", "  healthy ", "  flushed_bytes "] {
        assert!(table.contains(field), "{field:?} in\n{table}");
    }

    let json = expect(
        server.run(&["status", "--cold", "--json", "--token", &admin]),
        0,
    );
    let both: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(both["health"]["mode"], "memory");
    assert_eq!(both["cold"]["healthy"], true);

    // A write token is refused: the server's status and message.
    let writer = token("*", &[Right::Write]);
    let stderr = expect_failure(server.run(&["status", "--cold", "--token", &writer]));
    assert!(stderr.contains("GET "), "{stderr}");
    assert!(
        stderr.contains("/__strand/cold: 403 Forbidden: "),
        "{stderr}"
    );
}

#[test]
fn status_shows_the_cold_tier_on_the_admin_listener() {
    let server = LiveServer::start_with(|config, dir| config.cold_dir = Some(dir.join("cold")));
    // Without authentication the admin listener serves it, no token...
    let mut command = strand();
    command
        .args(["status", "--cold", "--url", &server.admin_url])
        .env_remove("STRAND_TOKEN")
        .timeout(RUN_TIMEOUT);
    let table = expect(&mut command, 0);
    assert!(table.contains("status  ok\nmode    memory\n"), "{table}");
    assert!(table.contains("\ncold tier\n"), "{table}");
    // ...and the client listener does not.
    let stderr = expect_failure(server.run(&["status", "--cold"]));
    assert!(stderr.contains("/__strand/cold: 4"), "{stderr}");
}

#[test]
fn cluster_status_of_a_durable_node() {
    let server = LiveServer::start_with(|config, dir| {
        config.memory = false;
        config.data_dir = Some(dir.join("data"));
        config.groups = 2;
    });
    // On the admin listener (no authentication); exit 1 until every
    // group has elected the node.
    let run = || {
        let mut command = strand();
        command
            .args(["cluster", "status", "--url", &server.admin_url])
            .env_remove("STRAND_TOKEN")
            .timeout(RUN_TIMEOUT);
        command
    };
    let output =
        strand_testkit::eventually_blocking("every group elected", Duration::from_secs(20), || {
            let output = run().output().unwrap();
            (output.status.code() == Some(0)).then_some(output)
        });
    let table = stdout_of(&output);
    assert!(table.starts_with("answered by node 1\n"), "{table}");
    let node = table
        .lines()
        .find(|l| l.starts_with("1 "))
        .unwrap_or_else(|| panic!("no row for node 1 in\n{table}"));
    assert!(node.contains(&server.url), "{node}");
    assert!(node.contains(" up"), "{node}");
    let groups: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("GROUP"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(groups.len(), 2, "{table}");
    for (i, row) in groups.iter().enumerate() {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], i.to_string(), "{row}");
        assert_eq!(cells[1], "1", "node 1 leads: {row}");
        assert_eq!(cells[3], "1", "node 1 is the only voter: {row}");
        assert!(cells[5].starts_with("1:"), "{row}");
        assert_eq!(cells[6], "(0)", "no lag: {row}");
    }
    assert!(table.ends_with("\nmoves: none\n"), "{table}");

    let mut command = run();
    command.arg("--json");
    let json = expect(&mut command, 0);
    let status: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(status["nodes"][0]["state"], "up", "{status}");
    assert_eq!(status["groups"].as_array().unwrap().len(), 2, "{status}");

    // The client listener without authentication does not serve it.
    let stderr = expect_failure(server.run(&["cluster", "status"]));
    assert!(stderr.contains("/__strand/cluster: 403"), "{stderr}");

    // A node without peers has no one to hand a leadership to.
    let mut command = strand();
    command
        .args(["cluster", "drain", "1", "--url", &server.admin_url])
        .env_remove("STRAND_TOKEN")
        .timeout(RUN_TIMEOUT);
    let stderr = expect_failure(&mut command);
    assert!(
        stderr.contains("/__strand/cluster/drain/1: 409 Conflict: this node has no peers"),
        "{stderr}"
    );
}

#[test]
fn append_then_tail_text() {
    let server = LiveServer::start();
    let first = expect(
        server.run(&[
            "append",
            "logs/app 1",
            "hello ",
            "--create",
            "--content-type",
            "text/plain",
        ]),
        0,
    );
    assert!(is_offset(&first), "{first}");
    // No content type: the stream's own, asked with HEAD.
    let second = expect(server.run(&["append", "logs/app 1", "world"]), 0);
    assert!(is_offset(&second) && second > first, "{first} {second}");
    // From standard input.
    let third = expect(
        server
            .run(&["append", "logs/app 1", "--content-type", "text/plain"])
            .write_stdin("!\n"),
        0,
    );
    assert!(third > second, "{second} {third}");

    let text = expect(server.run(&["tail", "logs/app 1", "--max-events", "1"]), 0);
    assert_eq!(text, "hello world!\n");

    // From an offset the server handed out.
    let text = expect(
        server.run(&[
            "tail",
            "logs/app 1",
            "--from",
            second.trim(),
            "--max-events",
            "1",
        ]),
        0,
    );
    assert_eq!(text, "!\n");

    // Closed: tail stops by itself at the end.
    let closed = expect(server.run(&["append", "logs/app 1", "--close"]), 0);
    assert_eq!(closed, third);
    let text = expect(server.run(&["tail", "logs/app 1"]), 0);
    assert_eq!(text, "hello world!\n");
}

#[test]
fn create_alone_prints_the_tail() {
    let server = LiveServer::start();
    let offset = expect(
        server.run(&[
            "append",
            "fresh",
            "--create",
            "--content-type",
            "text/plain",
        ]),
        0,
    );
    assert!(is_offset(&offset), "{offset}");
    // Creating again with the same type is fine.
    let again = expect(
        server.run(&[
            "append",
            "fresh",
            "--create",
            "--content-type",
            "text/plain",
        ]),
        0,
    );
    assert_eq!(again, offset);
    // Nothing to append and no --create: an error, no request.
    let stderr = expect_failure(server.run(&["append", "fresh"]));
    assert!(stderr.contains("nothing to append"), "{stderr}");
}

#[test]
fn tail_follows_new_appends() {
    // The server ends SSE responses after 300 ms: tail reconnects.
    let server = LiveServer::start_with(|config, _| config.sse_max_duration_ms = 300);
    let start = expect(
        server.run(&[
            "append",
            "live",
            "--create",
            "--content-type",
            "text/plain",
            "before\n",
        ]),
        0,
    );
    let url = server.url.clone();
    let writer = std::thread::spawn(move || {
        // Past the first response's end (the server ends each SSE
        // response after 300 ms): the reconnect is what is under test.
        std::thread::sleep(Duration::from_millis(800));
        for (line, close) in [("one\n", None), ("two\n", Some("--close"))] {
            let output = strand()
                .args(["append", "--url", &url, "live", line])
                .args(close)
                .env_remove("STRAND_TOKEN")
                .timeout(RUN_TIMEOUT)
                .output()
                .unwrap();
            assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let text = expect(server.run(&["tail", "live", "--from", start.trim()]), 0);
    writer.join().unwrap();
    assert_eq!(text, "one\ntwo\n");
}

#[test]
fn tail_pretty_prints_json_messages() {
    let server = LiveServer::start();
    let run = |args: &[&str]| expect(server.run(args), 0);
    run(&[
        "append",
        "events",
        "--create",
        "--content-type",
        "application/json",
    ]);
    // An array appends each of its values as a message.
    run(&["append", "events", r#"[{"a":1},{"b":[1,2]}]"#]);
    run(&["append", "events", r#"{"c":"x"}"#, "--close"]);
    let text = run(&["tail", "events"]);
    assert_eq!(
        text,
        "{\n  \"a\": 1\n}\n{\n  \"b\": [\n    1,\n    2\n  ]\n}\n{\n  \"c\": \"x\"\n}\n"
    );
}

#[test]
fn tail_prints_binary_data_as_hex() {
    let server = LiveServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bytes");
    std::fs::write(&file, (0u8..20).collect::<Vec<u8>>()).unwrap();
    expect(
        server.run(&[
            "append",
            "blob",
            "--create",
            "--close",
            "--file",
            file.to_str().unwrap(),
        ]),
        0,
    );
    let text = expect(server.run(&["tail", "blob"]), 0);
    assert_eq!(
        text,
        "00000000: 0001 0203 0405 0607 0809 0a0b 0c0d 0e0f  ................\n\
         00000010: 1011 1213                                ....\n"
    );
}

#[test]
fn a_missing_stream_is_the_servers_404() {
    let server = LiveServer::start();
    let stderr = expect_failure(server.run(&["tail", "nope"]));
    assert!(
        stderr.starts_with("strand: error: GET http://127.0.0.1:"),
        "{stderr}"
    );
    assert!(
        stderr.contains("/v1/stream/nope?offset=-1&live=sse: 404 Not Found: "),
        "{stderr}"
    );
    assert!(stderr.contains("not found"), "{stderr}");

    let stderr = expect_failure(server.run(&["append", "nope", "data"]));
    assert!(stderr.contains("POST "), "{stderr}");
    assert!(
        stderr.contains("/v1/stream/nope: 404 Not Found: "),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    for args in [
        &["status"][..],
        &["append", "s", "x"][..],
        &["tail", "s"][..],
    ] {
        let stderr = expect_failure(
            strand()
                .args(args)
                .args(["--url", &url])
                .env_remove("STRAND_TOKEN")
                .timeout(RUN_TIMEOUT),
        );
        assert!(
            stderr.contains(&format!("cannot reach the server at {url}: ")),
            "{args:?}: {stderr}"
        );
    }
    // Not a URL at all.
    let stderr = expect_failure(
        strand()
            .args(["status", "--url", "127.0.0.1:1"])
            .timeout(RUN_TIMEOUT),
    );
    assert!(stderr.contains("--url"), "{stderr}");
}

#[test]
fn tokens_are_sent() {
    let server = LiveServer::with_auth();
    let writer = token("default", &[Right::Write]);
    let reader = token("default", &[Right::Read]);

    let stderr = expect_failure(server.run(&[
        "append",
        "s",
        "x",
        "--create",
        "--content-type",
        "text/plain",
    ]));
    assert!(stderr.contains("401 Unauthorized: "), "{stderr}");

    expect(
        server.run(&[
            "append",
            "s",
            "x",
            "--create",
            "--content-type",
            "text/plain",
            "--token",
            &writer,
        ]),
        0,
    );
    // A read token may not write.
    let stderr = expect_failure(server.run(&[
        "append",
        "s",
        "y",
        "--content-type",
        "text/plain",
        "--token",
        &reader,
    ]));
    assert!(stderr.contains("403 Forbidden: "), "{stderr}");

    // STRAND_TOKEN works as --token does.
    let text = expect(
        server
            .run(&["tail", "s", "--max-events", "1"])
            .env("STRAND_TOKEN", &reader),
        0,
    );
    assert_eq!(text, "x\n");
    // Health is open.
    expect(server.run(&["status"]), 0);
}

#[test]
fn bad_stream_names_are_refused_before_sending() {
    let server = LiveServer::start();
    for name in ["a//b", "/a", "a/../b"] {
        let stderr = expect_failure(server.run(&["append", name, "x"]));
        assert!(stderr.contains(&format!("stream {name:?}")), "{stderr}");
    }
}

#[test]
fn streams_list_pages_through_names_of_any_shape() {
    let server = LiveServer::start();
    let mut names = vec![
        "yjs/svc/docs/doc-1/.updates".to_owned(),
        "yjs/svc/docs/doc-1/.awareness/default".to_owned(),
        "chat/42".to_owned(),
    ];
    for i in 0..5 {
        names.push(format!("logs/app-{i}"));
    }
    for name in &names {
        expect(server.run(&["append", name, "x", "--create"]), 0);
    }
    // One page of two, and the cursor that continues.
    let page = expect(
        server.run(&["streams", "list", "--prefix", "logs/", "--limit", "2"]),
        0,
    );
    let lines: Vec<&str> = page.lines().collect();
    assert_eq!(lines.len(), 4, "{page}");
    assert!(lines[0].starts_with("name"), "{page}");
    assert!(lines[1].starts_with("logs/app-0 "), "{page}");
    assert!(lines[1].contains(" 1 "), "one byte: {page}");
    let cursor = lines[3].strip_prefix("more: --after ").unwrap();
    let next = expect(
        server.run(&[
            "streams", "list", "--prefix", "logs/", "--limit", "2", "--after", cursor,
        ]),
        0,
    );
    assert!(
        next.lines().nth(1).unwrap().starts_with("logs/app-2 "),
        "{next}"
    );
    // Every page, hashed names included.
    let all = expect(server.run(&["streams", "list", "--limit", "3", "--all"]), 0);
    for name in &names {
        assert!(
            all.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name}: {all}"
        );
    }
    assert!(!all.contains("more:"), "{all}");
    let yjs = expect(
        server.run(&[
            "streams",
            "list",
            "--prefix",
            "yjs/svc/docs/doc-1/",
            "--json",
        ]),
        0,
    );
    let page: Value = serde_json::from_str(yjs.trim()).unwrap();
    assert_eq!(page["streams"].as_array().unwrap().len(), 2, "{yjs}");
    assert_eq!(
        expect(server.run(&["streams", "list", "--prefix", "none/"]), 0),
        "no streams\n"
    );
    let missing = expect_failure(server.run(&["streams", "list", "--bucket", "nobucket"]));
    assert!(missing.contains("404"), "{missing}");
}
