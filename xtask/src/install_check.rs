//! `cargo xtask install-check`: what the README promises, done: `cargo
//! install --locked --path crates/strand-server` and `… crates/strand-cli`
//! into `target/install-check/` (sharing the workspace's target directory,
//! so it rebuilds little), then the installed `strand-server` runs with
//! its defaults (durable, a fresh data directory) and the installed
//! `strand` appends to it, lists its streams and reads its status; the
//! console page must answer too. Not part of `ci`: it needs a release
//! build.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::servers::{Server, loopback_addr, spawn_server, status_of};
use crate::{cargo, run, target_dir};

/// `cargo xtask install-check`.
pub(crate) fn install_check(root: &Path, args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!("install-check takes no arguments (got `{extra}`)"));
    }
    let work = target_dir(root).join("install-check");
    match fs::remove_dir_all(&work) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", work.display())),
    }
    fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    for krate in ["strand-server", "strand-cli"] {
        let mut cmd = cargo(root);
        cmd.args(["install", "--locked", "--path"])
            .arg(root.join("crates").join(krate))
            .arg("--root")
            .arg(&work)
            .env("CARGO_TARGET_DIR", target_dir(root));
        run(cmd)?;
    }
    let bin = work.join("bin");
    let mut server = Command::new(bin.join("strand-server"));
    // Its defaults, but for a free port: ./strand-data in the work dir.
    server.current_dir(&work).args(["--listen", "127.0.0.1:0"]);
    let guard = spawn_server(
        Server::Strand,
        server,
        work.join("strand-server.log"),
        "strand-server listening on ",
    )?;
    if !work.join("strand-data").is_dir() {
        return Err("the installed strand-server made no ./strand-data".into());
    }
    let strand = |args: &[&str]| -> Result<String, String> {
        let out = Command::new(bin.join("strand"))
            .args(args)
            .args(["--url", &guard.url])
            .env_remove("STRAND_TOKEN")
            .output()
            .map_err(|e| format!("cannot run the installed strand: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(format!(
                "strand {}: {}{}",
                args.join(" "),
                text,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(text)
    };
    let offset = strand(&[
        "append",
        "installed/check",
        "ok",
        "--create",
        "--content-type",
        "text/plain",
    ])?;
    if offset.trim() != "0000000000000000_0000000000000002" {
        return Err(format!("strand append printed {offset:?}"));
    }
    let listed = strand(&["streams", "list"])?;
    if !listed.lines().any(|l| l.starts_with("installed/check ")) {
        return Err(format!("strand streams list printed:\n{listed}"));
    }
    let status = strand(&["status"])?;
    if !status.contains("durable") {
        return Err(format!("strand status printed:\n{status}"));
    }
    let addr = loopback_addr(&guard.url)?;
    let console = status_of(addr, "GET /__strand/console")?;
    if console != 200 {
        return Err(format!("GET /__strand/console answered {console}"));
    }
    drop(guard);
    println!(
        "install-check: the installed strand-server and strand work ({})",
        bin.display()
    );
    Ok(())
}
