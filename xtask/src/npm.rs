//! The pinned npm packages of the JavaScript checks: copied from the
//! repository into a work directory under `target/`, where `npm ci` runs
//! when `node_modules` is missing or the lockfile changed.
//! `http-conformance` and `loadtest` (for the node reference server) use
//! the suite's packages of `tests/http-conformance/`, `apps` its own.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::run;

/// The files of `tests/http-conformance/` the run needs.
const PACKAGE_FILES: [&str; 4] = [
    "package.json",
    "package-lock.json",
    "conformance.test.mjs",
    "node-server.mjs",
];

/// The lockfile `npm ci` last installed from (inside `node_modules`, so that
/// a removed `node_modules` also removes it).
const INSTALLED_LOCK: &str = "node_modules/.strand-installed-lock.json";

/// Copies the package files into `work` and runs `npm ci` when
/// `node_modules` is missing or was installed from another lockfile.
pub(crate) fn prepare_packages(root: &Path, work: &Path) -> Result<(), String> {
    let source = root.join("tests").join("http-conformance");
    let files: Vec<PathBuf> = PACKAGE_FILES.iter().map(|name| source.join(name)).collect();
    install_npm_packages(&files, work, "the suite's")
}

/// Copies `files` (a `package.json`, its `package-lock.json` and the
/// scripts) into `work`, each under its own file name and rewritten only
/// when changed, then runs `npm ci` there when `node_modules` is missing or
/// was installed from another lockfile; `what` names the packages in the
/// message (`the suite's`).
pub(crate) fn install_npm_packages(
    files: &[PathBuf],
    work: &Path,
    what: &str,
) -> Result<(), String> {
    fs::create_dir_all(work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    for from in files {
        let name = from
            .file_name()
            .ok_or_else(|| format!("{} names no file", from.display()))?;
        let bytes = fs::read(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        let to = work.join(name);
        if fs::read(&to).ok().as_deref() != Some(bytes.as_slice()) {
            fs::write(&to, &bytes).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
        }
    }
    let lock = fs::read(work.join("package-lock.json"))
        .map_err(|e| format!("cannot read the copied lockfile: {e}"))?;
    let installed = work.join(INSTALLED_LOCK);
    if work.join("node_modules").is_dir() && fs::read(&installed).ok() == Some(lock.clone()) {
        return Ok(());
    }
    println!(
        "xtask: installing {what} npm packages (npm ci in {})",
        work.display()
    );
    let mut cmd = Command::new("npm");
    cmd.current_dir(work)
        .args(["ci", "--no-audit", "--no-fund"])
        .stdin(Stdio::null());
    run(cmd)?;
    fs::write(&installed, &lock).map_err(|e| format!("cannot write {}: {e}", installed.display()))
}
