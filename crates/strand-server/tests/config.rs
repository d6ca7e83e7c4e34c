//! The configuration's layers, end to end through the binary: a
//! `--config` file, `STRAND_*` environment variables and flags, each
//! winning over the ones below, as `--print-config` shows them; a bad file
//! stops the server naming its key; `--print-config` gives secrets by path.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_strand-server");

/// The binary with none of this process's `STRAND_*` variables.
fn server() -> Command {
    let mut command = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("STRAND_") {
            command.env_remove(name);
        }
    }
    command
}

fn print_config(command: &mut Command) -> String {
    let out = command.arg("--print-config").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn flags_win_over_environment_over_file_over_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "strand.toml",
        "[server]\ngroups = 5\n[cluster]\npeers = [\"1=http://a:1\"]\n",
    );
    let defaults = print_config(&mut server());
    assert!(defaults.contains("\ngroups = 4\n"), "{defaults}");
    let from_file = print_config(server().args(["--config", &file]));
    assert!(
        from_file.contains("\ngroups = 5  # the --config file\n"),
        "{from_file}"
    );
    // STRAND_CONFIG names the file as well as --config does.
    let from_file = print_config(server().env("STRAND_CONFIG", &file));
    assert!(from_file.contains("\ngroups = 5  # the --config file\n"));
    let from_env = print_config(
        server()
            .args(["--config", &file])
            .env("STRAND_GROUPS", "6")
            .env("STRAND_PEER", "1=http://a:1,2=http://b:2")
            .env("STRAND_MEMORY", "1")
            .env("STRAND_LOG", "debug"),
    );
    assert!(
        from_env.contains("\ngroups = 6  # STRAND_GROUPS\n"),
        "{from_env}"
    );
    assert!(
        from_env.contains("\npeers = [\"1=http://a:1\", \"2=http://b:2\"]  # STRAND_PEER\n"),
        "{from_env}"
    );
    assert!(from_env.contains("\nmemory = true  # STRAND_MEMORY\n"));
    let from_flag = print_config(
        server()
            .args(["--config", &file, "--groups", "7"])
            .env("STRAND_GROUPS", "6"),
    );
    assert!(
        from_flag.contains("\ngroups = 7  # --groups\n"),
        "{from_flag}"
    );
    // What --print-config printed is a configuration file for the same
    // configuration.
    let printed = write(dir.path(), "printed.toml", &from_env);
    let again = print_config(server().args(["--config", &printed]));
    assert!(
        again.contains("\ngroups = 6  # the --config file\n"),
        "{again}"
    );
    assert!(again.contains("\nmemory = true  # the --config file\n"));
}

#[test]
fn a_bad_file_stops_the_server_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (text, says) in [
        (
            "[listen]\nadr = \"0.0.0.0:1\"\n",
            "unknown key `listen.adr`",
        ),
        (
            "[timeouts]\nidle_ms = 0\n",
            "`timeouts.idle_ms` = \"0\": 0 is not in 1..",
        ),
        (
            "[server]\ngroups = \"four\"\n",
            "`server.groups`: expected an integer",
        ),
    ] {
        let file = write(dir.path(), "bad.toml", text);
        let out = server()
            .args(["--config", &file, "--memory", "--listen", "127.0.0.1:0"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = stderr(&out);
        assert!(
            err.starts_with(&format!("strand-server: --config {file}: ")),
            "{err}"
        );
        assert!(err.contains(says), "{text}: {err}");
        assert!(out.stdout.is_empty(), "it did not start");
    }
    let out = server()
        .env("STRAND_CONFIG", dir.path().join("missing.toml"))
        .arg("--print-config")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("STRAND_CONFIG="), "{}", stderr(&out));
}

#[test]
fn print_config_gives_secrets_by_path_only() {
    let dir = tempfile::tempdir().unwrap();
    let secret = write(dir.path(), "secret", "correct-horse-battery-staple\n");
    let token = write(dir.path(), "cluster", "cluster-token-0123456789\n");
    let file = write(
        dir.path(),
        "strand.toml",
        &format!("[cluster]\ntoken_file = {token:?}\n"),
    );
    let printed = print_config(
        server()
            .args(["--config", &file, "--auth-secret-file", &secret])
            .env("STRAND_PUBLIC_URL", "https://user:hunter2@streams.example"),
    );
    for secret in ["correct-horse", "cluster-token-01", "hunter2"] {
        assert!(!printed.contains(secret), "{secret}:\n{printed}");
    }
    assert!(printed.contains(&format!("secret_file = {secret:?}  # --auth-secret-file")));
    assert!(printed.contains(&format!("token_file = {token:?}  # the --config file")));
    assert!(printed.contains("public_url = \"https://<redacted>@streams.example\""));
    // --help shows the variables, but not the value of one with a URL.
    let help = server()
        .arg("--help")
        .env("STRAND_PUBLIC_URL", "https://user:hunter2@streams.example")
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("[env: STRAND_PUBLIC_URL]"), "{help}");
    assert!(!help.contains("hunter2"));
}

#[test]
fn the_example_file_is_accepted() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/strand.example.toml"
    );
    let printed = print_config(server().args(["--config", example]));
    let defaults = print_config(&mut server());
    // The same values; only the comments saying where they came from differ.
    let values = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| line.split("  # ").next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(values(&printed), values(&defaults));
}

#[test]
fn token_does_not_read_the_server_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let secret = write(dir.path(), "secret", "correct-horse-battery-staple\n");
    let out = server()
        .args([
            "token",
            "--secret-file",
            &secret,
            "--bucket",
            "b",
            "--rights",
            "read",
        ])
        .env("STRAND_CONFIG", dir.path().join("missing.toml"))
        .env("STRAND_GROUPS", "3")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().matches('.').count(),
        2
    );
}
