//! The cargo tools `cargo xtask ci` needs, pinned in one table, and
//! `ensure_tool`, which installs the pinned version when a tool is missing
//! or present at another version.

use std::path::Path;
use std::process::Stdio;

use crate::{cargo, run};

/// A cargo subcommand installed from crates.io at a pinned version.
pub(crate) struct Tool {
    /// The crate to install (`cargo-insta`).
    pub(crate) krate: &'static str,
    /// The subcommand it provides (`insta` for `cargo insta`).
    pub(crate) subcommand: &'static str,
    /// The exact version CI uses.
    pub(crate) version: &'static str,
}

/// `cargo insta review` accepts changed snapshots (a developer's tool: `ci`
/// drives insta itself and does not install it).
pub(crate) const INSTA: Tool = Tool {
    krate: "cargo-insta",
    subcommand: "insta",
    version: "1.49.0",
};

/// `cargo deny check` checks the dependency policy of `deny.toml`.
pub(crate) const DENY: Tool = Tool {
    krate: "cargo-deny",
    subcommand: "deny",
    version: "0.20.2",
};

/// `cargo fuzz run -s none` runs the targets of `fuzz/` on the stable
/// toolchain; only `cargo xtask fuzz` installs it (`ci` does not fuzz).
pub(crate) const FUZZ: Tool = Tool {
    krate: "cargo-fuzz",
    subcommand: "fuzz",
    version: "0.13.2",
};

/// The pinned tools of `cargo xtask tools` (not `FUZZ`, which `cargo xtask
/// fuzz` installs itself).
pub(crate) const TOOLS: [&Tool; 2] = [&INSTA, &DENY];

/// The version `cargo <subcommand> --version` reports (its last word, as in
/// `cargo-insta 1.49.0`), or `None` when the subcommand is not installed.
fn installed_version(root: &Path, tool: &Tool) -> Option<String> {
    let output = cargo(root)
        .args([tool.subcommand, "--version"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let first_line = text.lines().next().unwrap_or_default();
    Some(
        first_line
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// Makes sure `cargo <tool.subcommand>` is the pinned version: does nothing
/// when it is, and otherwise says why in one line and runs
/// `cargo install --locked --debug <crate>@<version>` (with `--force` when
/// another version is in the way).
///
/// `--debug`: a fresh machine builds every tool it needs on each CI run, and
/// an unoptimised build of cargo-deny takes a third of the CPU time of a
/// release one (measured: 116 s against about 370 s of CPU, 85 s against
/// 208 s of wall time on 2 cores), while `cargo deny check` over this
/// workspace still runs in about 4 s.
pub(crate) fn ensure_tool(root: &Path, tool: &Tool) -> Result<(), String> {
    let wanted = tool.version;
    let present = match installed_version(root, tool) {
        Some(version) if version == wanted => return Ok(()),
        Some(version) => {
            println!(
                "xtask: {} {version} is installed, CI pins {wanted}; installing {}@{wanted}",
                tool.krate, tool.krate
            );
            true
        }
        None => {
            println!(
                "xtask: {} is missing; installing {}@{wanted}",
                tool.krate, tool.krate
            );
            false
        }
    };
    let mut cmd = cargo(root);
    cmd.args([
        "install",
        "--locked",
        "--debug",
        &format!("{}@{wanted}", tool.krate),
    ]);
    if present {
        // Replaces a binary that cargo did not install itself, too.
        cmd.arg("--force");
    }
    // A tool builds in cargo's own temporary directory, not in (and not
    // locking) the workspace's target directory.
    cmd.env_remove("CARGO_TARGET_DIR");
    run(cmd)?;
    match installed_version(root, tool) {
        Some(version) if version == wanted => Ok(()),
        other => Err(format!(
            "installed {}@{wanted}, but `cargo {} --version` reports {}",
            tool.krate,
            tool.subcommand,
            other.as_deref().unwrap_or("nothing")
        )),
    }
}

/// `cargo xtask tools`: installs every pinned tool that is missing or at
/// another version.
pub(crate) fn ensure_all(root: &Path) -> Result<(), String> {
    for tool in TOOLS {
        ensure_tool(root, tool)?;
        println!("{} {} ok", tool.krate, tool.version);
    }
    Ok(())
}
