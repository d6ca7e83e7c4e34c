//! `cargo xtask console`: the web console (`/__strand/console`) in a real
//! browser. A durable strand-server with authentication on (a fresh data
//! directory under `target/console/`, on loopback) serves it; `tests/console/console.test.mjs` drives headless
//! Debian Chromium through `playwright-core` (pinned in
//! `tests/console/package-lock.json`, installed into `target/console/`
//! like the suite's packages): it enters a token, sees the node's health,
//! a stream created by the check appear in the list, follows a stream
//! live, appends from the box, pauses and resumes, and reads the traffic
//! charts. Screenshots go to `target/console/` (`--screenshots DIR`
//! elsewhere, `docs/` for the README's).
//!
//! Chromium is `/usr/bin/chromium` (or `STRAND_CHROMIUM`); when it is
//! missing and the task runs as root, the pinned Debian package is
//! installed first, as `cargo xtask prometheus` does with its server.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::apps::run_check;
use crate::npm::install_npm_packages;
use crate::servers::{mint_token, start_strand, use_debug_build, write_secret};
use crate::target_dir;

/// Usage of the task, for errors and `cargo xtask help`.
pub(crate) const USAGE: &str = "cargo xtask console [--screenshots DIR] [--debug-build]";

/// The Debian package installed when Chromium is missing.
const PACKAGE: &str = "chromium=148.0.7778.167-1~deb12u1";
/// Where Debian puts it.
const CHROMIUM: &str = "/usr/bin/chromium";
/// The check bounds itself at 90 s; this is the backstop.
const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// The files of `tests/console/` copied into the work directory.
const FILES: [&str; 3] = ["package.json", "package-lock.json", "console.test.mjs"];

/// `cargo xtask console ARGS`.
pub(crate) fn console(root: &Path, args: &[String]) -> Result<(), String> {
    let mut screenshots: Option<PathBuf> = None;
    let mut debug_build = false;
    crate::parse_flags(args, USAGE, |flag, value, inline| {
        match flag {
            "--screenshots" => screenshots = Some(PathBuf::from(value("a directory")?)),
            "--debug-build" if !inline => debug_build = true,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if debug_build {
        use_debug_build();
    }
    let chromium = std::env::var("STRAND_CHROMIUM").unwrap_or_else(|_| CHROMIUM.to_owned());
    ensure_chromium(&chromium)?;
    let work = target_dir(root).join("console");
    let source = root.join("tests").join("console");
    let files: Vec<PathBuf> = FILES.iter().map(|name| source.join(name)).collect();
    install_npm_packages(&files, &work, "the console check's")?;
    let shots = match screenshots {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => root.join(dir),
        None => work.clone(),
    };
    std::fs::create_dir_all(&shots)
        .map_err(|e| format!("cannot create {}: {e}", shots.display()))?;

    let secret = work.join("auth-secret");
    write_secret(&secret)?;
    // Durable, so the node has groups with leaders to show.
    let data = work.join("data");
    match std::fs::remove_dir_all(&data) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", data.display())),
    }
    let server = start_strand(
        root,
        1_000,
        work.join("strand-server.log"),
        &[
            "--auth-secret-file".to_owned(),
            secret.display().to_string(),
            "--groups".to_owned(),
            "4".to_owned(),
            "--data-dir".to_owned(),
            data.display().to_string(),
        ],
    )?;
    let token = mint_token(root, &secret, "console-check")?;
    println!(
        "console: strand-server at {}, Chromium {chromium}",
        server.url
    );
    let mut cmd = Command::new("node");
    cmd.current_dir(&work)
        .arg("console.test.mjs")
        .arg(&server.url)
        .arg(&token)
        .arg(&shots)
        .env("STRAND_CHROMIUM", &chromium);
    let log = work.join("console.log");
    let started = Instant::now();
    let outcome = run_check(cmd, &log, CHECK_TIMEOUT);
    let secs = started.elapsed().as_secs_f64();
    if let Ok(text) = std::fs::read_to_string(&log) {
        print!("{text}");
    }
    drop(server);
    match outcome {
        Ok(()) => {
            println!(
                "console: passed in {secs:.1} s; screenshots in {}",
                shots.display()
            );
            Ok(())
        }
        Err(e) => Err(format!("console: {e} (log {})", log.display())),
    }
}

/// Installs the pinned Chromium when it is missing (as root only). A
/// mirror that no longer has that version (Debian replaces a package's
/// security updates) gets Debian's current `chromium` instead, after
/// refreshing the package lists, rather than leaving the check unrun.
fn ensure_chromium(chromium: &str) -> Result<(), String> {
    if chromium != CHROMIUM && !Path::new(chromium).exists() {
        return Err(format!(
            "STRAND_CHROMIUM names {chromium}, which does not exist"
        ));
    }
    let Err(pinned) = crate::servers::ensure_debian_package(chromium, PACKAGE) else {
        return Ok(());
    };
    println!("console: {pinned}; trying Debian's current chromium");
    let mut update = Command::new("apt-get");
    update
        .arg("update")
        .env("DEBIAN_FRONTEND", "noninteractive");
    crate::run(update)?;
    crate::servers::ensure_debian_package(chromium, "chromium")
}
