//! The S3 backend against a real S3-compatible server on loopback: moto in
//! server mode (the Python package, pinned; installed under `target/` when
//! the machine lacks it), driving the real `strand-server` binary with
//! `--cold-url` and the AWS environment variables. An ignored test: the
//! `s3` step of `cargo xtask ci` runs it, and it fails when moto cannot be
//! installed.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{eventually, off, request};
use hyper::{Method, StatusCode};
use strand_testkit::ChildGuard;

const MOTO: &str = "moto[server]==5.2.1";

fn python() -> &'static str {
    "python3"
}

fn importable(pythonpath: Option<&PathBuf>) -> bool {
    let mut c = Command::new(python());
    c.args(["-c", "import moto.server, flask, flask_cors"]);
    if let Some(p) = pythonpath {
        c.env("PYTHONPATH", p);
    }
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Where moto can be imported from: the machine's Python, or a pinned
/// install under `target/moto`. `Err` says why not.
fn moto() -> Result<Option<PathBuf>, String> {
    if importable(None) {
        return Ok(None);
    }
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/moto");
    if importable(Some(&target)) {
        return Ok(Some(target));
    }
    let status = Command::new(python())
        .args(["-m", "pip", "install", "--quiet", "--target"])
        .arg(&target)
        .arg(MOTO)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", python()))?;
    if status.success() && importable(Some(&target)) {
        Ok(Some(target))
    } else {
        Err(format!("pip install {MOTO} failed ({status})"))
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn wait_listening(addr: SocketAddr) {
    eventually(
        &format!("moto listens on {addr}"),
        Duration::from_secs(60),
        || async { tokio::net::TcpStream::connect(addr).await.ok().map(drop) },
    )
    .await;
}

fn byte_at(s: usize, o: u64) -> u8 {
    b'a' + u8::try_from((s as u64 * 11 + o * 5) % 26).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto; `cargo xtask ci` runs it in its s3 step"]
async fn the_s3_backend_flushes_reads_and_reclaims_against_moto() {
    let pythonpath = match moto() {
        Ok(p) => p,
        Err(why) => panic!("moto is needed for the S3 test and cannot be had: {why}"),
    };
    let port = free_port();
    let s3: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut moto = Command::new(python());
    moto.args([
        "-m",
        "moto.server",
        "-H",
        "127.0.0.1",
        "-p",
        &port.to_string(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Some(p) = &pythonpath {
        moto.env("PYTHONPATH", p);
    }
    let _moto = ChildGuard::new(moto.spawn().unwrap());
    wait_listening(s3).await;
    let bucket = request(s3, Method::PUT, "/strand-cold").send().await;
    assert!(bucket.status.is_success(), "{:?}", bucket.status);

    let mut server = Command::new(env!("CARGO_BIN_EXE_strand-server"));
    server
        .args([
            "--listen",
            "127.0.0.1:0",
            "--memory",
            "--cold-url",
            "s3://strand-cold/node-a",
            "--cold-flush-bytes",
            "1",
            "--cold-chunk-bytes",
            "16384",
            "--cold-flush-interval-ms",
            "5",
            "--cold-gc-interval-ms",
            "20",
            "--max-hot-bytes",
            "1048576",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", format!("http://{s3}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // Killed and reaped when the test ends, however it ends.
    let mut child = ChildGuard::new(server.spawn().unwrap());
    let stdout = child.stdout.take().unwrap();
    // The admin line, then the ready line.
    let mut reader = BufReader::new(stdout);
    let mut address = || {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        line.trim()
            .rsplit("http://")
            .next()
            .unwrap()
            .parse::<SocketAddr>()
            .unwrap()
    };
    let admin = address();
    let addr = address();

    const STREAMS: usize = 6;
    const LEN: u64 = 64 * 1024;
    for s in 0..STREAMS {
        let path = format!("/v1/stream/s3-{s}");
        let r = request(addr, Method::PUT, &path)
            .header("content-type", "text/plain")
            .send()
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
        for at in (0..LEN).step_by(8192) {
            let body: Vec<u8> = (at..at + 8192).map(|o| byte_at(s, o)).collect();
            // Again while the hot-memory limit answers 503.
            let r = eventually(
                &format!("{path} at {at}: an answer other than 503"),
                Duration::from_secs(60),
                || async {
                    let r = request(addr, Method::POST, &path)
                        .header("content-type", "text/plain")
                        .body(body.clone())
                        .send()
                        .await;
                    (r.status != StatusCode::SERVICE_UNAVAILABLE).then_some(r)
                },
            )
            .await;
            assert_eq!(r.status, StatusCode::NO_CONTENT);
        }
    }
    let total = STREAMS as u64 * LEN;
    let report: serde_json::Value = eventually(
        &format!("all {total} bytes flushed"),
        Duration::from_secs(60),
        || async {
            let r = request(admin, Method::GET, "/__strand/cold").send().await;
            let report: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            (report["flushed_bytes"].as_u64() == Some(total)).then_some(report)
        },
    )
    .await;
    assert!(
        report["backend"]
            .as_str()
            .unwrap()
            .starts_with("s3://strand-cold/node-a")
    );
    for s in 0..STREAMS {
        let r = request(addr, Method::GET, &format!("/v1/stream/s3-{s}?offset=-1"))
            .send()
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let want: Vec<u8> = (0..LEN).map(|o| byte_at(s, o)).collect();
        assert!(r.body == want, "stream {s} differs");
        // An offset inside a flushed 8 KiB message reads from that
        // message's start (its object's message-start sidecar, in S3 too);
        // one at a boundary reads from there.
        let from = 8192 + 1000 + s as u64;
        let r = request(
            addr,
            Method::GET,
            &format!("/v1/stream/s3-{s}?offset={}&live=long-poll", off(from)),
        )
        .send()
        .await;
        assert!(r.body[..] == want[8192..], "long-poll {s} differs");
        let r = request(
            addr,
            Method::GET,
            &format!("/v1/stream/s3-{s}?offset={}", off(16384)),
        )
        .send()
        .await;
        assert!(
            r.body[..] == want[16384..],
            "read of {s} from 16384 differs"
        );
    }
    let keys = |body: &[u8]| String::from_utf8_lossy(body).matches("<Key>").count();
    let listed = request(s3, Method::GET, "/strand-cold?list-type=2&prefix=node-a/")
        .send()
        .await;
    let before = keys(&listed.body);
    assert!(before > 0);
    for s in 0..STREAMS {
        let r = request(addr, Method::DELETE, &format!("/v1/stream/s3-{s}"))
            .send()
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    eventually(
        "no object left in S3 after the streams were deleted",
        Duration::from_secs(60),
        || async {
            let listed = request(s3, Method::GET, "/strand-cold?list-type=2&prefix=node-a/")
                .send()
                .await;
            (keys(&listed.body) == 0).then_some(())
        },
    )
    .await;
}
