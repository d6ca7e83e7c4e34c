//! The configuration's layers: `--config FILE` (TOML), the `STRAND_*`
//! environment variables and the flags, and `--print-config`.
//!
//! Every flag of [`Config`](super::Config) has one key in the file
//! ([`KEYS`]), nested by concern. [`load`] parses the command line once to
//! find the file, turns each value the file gives into its flag's default,
//! and parses again: clap itself then applies flags over environment
//! variables over the file over the built-in defaults. A file value goes
//! through its flag's own value parser first, so it is checked as the flag
//! would be, and an error names its key.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::{self, Write as _};
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};

use super::Cli;

/// What a key's value is in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (an address, a path, a URL, a name, `always`).
    Str,
    /// A non-negative integer.
    Int,
    /// `true` or `false` (a flag without a value).
    Bool,
    /// An array of strings (a repeatable flag).
    List,
}

impl Kind {
    fn expected(self) -> &'static str {
        match self {
            Self::Str => "a string",
            Self::Int => "an integer",
            Self::Bool => "true or false",
            Self::List => "an array of strings",
        }
    }
}

/// One key of the configuration file: `[table] name`, for one flag.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The table it sits in (`cold` for `[cold]`).
    pub table: &'static str,
    /// Its name in that table.
    pub name: &'static str,
    /// Its flag's clap id (the field of [`Config`](super::Config)).
    pub id: &'static str,
    /// What its value is.
    pub kind: Kind,
    /// A URL that may carry `user:password@`, redacted by `--print-config`.
    pub url: bool,
}

impl Key {
    /// `table.name`, as errors and the docs spell it.
    pub fn path(&self) -> String {
        format!("{}.{}", self.table, self.name)
    }
}

const fn key(table: &'static str, name: &'static str, id: &'static str, kind: Kind) -> Key {
    Key {
        table,
        name,
        id,
        kind,
        url: false,
    }
}

const fn url(table: &'static str, name: &'static str, id: &'static str, kind: Kind) -> Key {
    Key {
        url: true,
        ..key(table, name, id, kind)
    }
}

/// Every key of the configuration file, table by table in the order
/// `--print-config` prints them; one per flag of [`Config`](super::Config).
pub const KEYS: &[Key] = &[
    key("server", "worker_threads", "worker_threads", Kind::Int),
    key("server", "groups", "groups", Kind::Int),
    key("server", "default_bucket", "default_bucket", Kind::Str),
    key("listen", "addr", "listen", Kind::Str),
    key("listen", "admin", "admin_listen", Kind::Str),
    key("listen", "http_engine", "http_engine", Kind::Str),
    url("listen", "public_url", "public_url", Kind::Str),
    key("tls", "cert", "tls_cert", Kind::Str),
    key("tls", "key", "tls_key", Kind::Str),
    key("tls", "client_ca", "tls_client_ca", Kind::Str),
    key("auth", "secret_file", "auth_secret_file", Kind::Str),
    key("auth", "jwks_file", "auth_jwks_file", Kind::Str),
    key(
        "auth",
        "allow_unauthenticated",
        "allow_unauthenticated",
        Kind::Bool,
    ),
    key("limits", "max_connections", "max_connections", Kind::Int),
    key("limits", "max_body_bytes", "max_body_bytes", Kind::Int),
    key(
        "limits",
        "max_body_memory_bytes",
        "max_body_memory_bytes",
        Kind::Int,
    ),
    key(
        "limits",
        "max_peer_body_memory_bytes",
        "max_peer_body_memory_bytes",
        Kind::Int,
    ),
    key("limits", "max_read_bytes", "max_read_bytes", Kind::Int),
    key("limits", "max_live_readers", "max_live_readers", Kind::Int),
    key(
        "limits",
        "group_queue_depth",
        "group_queue_depth",
        Kind::Int,
    ),
    key(
        "limits",
        "rate_limit_per_token",
        "rate_limit_per_token",
        Kind::Int,
    ),
    key(
        "limits",
        "max_live_readers_per_token",
        "max_live_readers_per_token",
        Kind::Int,
    ),
    key(
        "timeouts",
        "request_head_ms",
        "request_head_timeout_ms",
        Kind::Int,
    ),
    key("timeouts", "body_ms", "body_timeout_ms", Kind::Int),
    key("timeouts", "send_ms", "send_timeout_ms", Kind::Int),
    key("timeouts", "idle_ms", "idle_timeout_ms", Kind::Int),
    key(
        "timeouts",
        "long_poll_ms",
        "long_poll_timeout_ms",
        Kind::Int,
    ),
    key(
        "timeouts",
        "sse_max_duration_ms",
        "sse_max_duration_ms",
        Kind::Int,
    ),
    key("cors", "origins", "cors_origin", Kind::List),
    key("storage", "data_dir", "data_dir", Kind::Str),
    key("storage", "memory", "memory", Kind::Bool),
    key("storage", "fsync", "fsync", Kind::Str),
    key(
        "storage",
        "min_free_disk_bytes",
        "min_free_disk_bytes",
        Kind::Int,
    ),
    key("storage", "snapshot_every", "snapshot_every", Kind::Int),
    key(
        "storage",
        "snapshot_log_bytes",
        "snapshot_log_bytes",
        Kind::Int,
    ),
    key("cluster", "node_id", "node_id", Kind::Int),
    url("cluster", "peers", "peers", Kind::List),
    key("cluster", "token_file", "cluster_token_file", Kind::Str),
    key(
        "cluster",
        "leader_balance_interval_ms",
        "leader_balance_interval_ms",
        Kind::Int,
    ),
    key(
        "cluster",
        "replication_factor",
        "replication_factor",
        Kind::Int,
    ),
    key(
        "cluster",
        "dead_node_timeout_ms",
        "dead_node_timeout_ms",
        Kind::Int,
    ),
    url("cluster", "join", "join", Kind::Str),
    url("cluster", "advertise_url", "advertise_url", Kind::Str),
    key(
        "cluster",
        "snapshot_chunk_bytes",
        "snapshot_chunk_bytes",
        Kind::Int,
    ),
    key("cold", "dir", "cold_dir", Kind::Str),
    url("cold", "url", "cold_url", Kind::Str),
    key("cold", "max_hot_bytes", "max_hot_bytes", Kind::Int),
    key(
        "cold",
        "max_group_hot_bytes",
        "max_group_hot_bytes",
        Kind::Int,
    ),
    key("cold", "flush_bytes", "cold_flush_bytes", Kind::Int),
    key("cold", "piece_bytes", "cold_piece_bytes", Kind::Int),
    key("cold", "chunk_bytes", "cold_chunk_bytes", Kind::Int),
    key("cold", "pack_bytes", "cold_pack_bytes", Kind::Int),
    key(
        "cold",
        "flush_interval_ms",
        "cold_flush_interval_ms",
        Kind::Int,
    ),
    key("cold", "gc_interval_ms", "cold_gc_interval_ms", Kind::Int),
    key(
        "cold",
        "sweep_interval_ms",
        "cold_sweep_interval_ms",
        Kind::Int,
    ),
    key("cold", "orphan_grace_ms", "cold_orphan_grace_ms", Kind::Int),
    key(
        "cold",
        "repair_interval_ms",
        "cold_repair_interval_ms",
        Kind::Int,
    ),
    key(
        "subscriptions",
        "webhook_allow",
        "webhook_allow",
        Kind::List,
    ),
];

/// Why the configuration could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// clap's own answer: a bad flag or environment variable, or `--help`
    /// and `--version` (`clap::Error::exit` prints it and exits).
    Clap(clap::Error),
    /// The configuration file: unreadable, not TOML, an unknown key, a
    /// value of the wrong type or refused by its flag's parser, or a
    /// conflict with another setting. The message names the file and the
    /// key.
    File(String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Clap(e) => write!(f, "{e}"),
            Self::File(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for LoadError {}

/// The configuration file's part in a [`Loaded`] configuration.
#[derive(Debug, Clone)]
struct FileLayer {
    /// `--config FILE` or `STRAND_CONFIG=FILE`, as errors say it.
    origin: String,
    /// The flags (clap ids) the file set.
    ids: BTreeSet<&'static str>,
}

/// The command line, the environment and the configuration file, merged.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// What the server runs with.
    pub cli: Cli,
    command: clap::Command,
    matches: ArgMatches,
    file: Option<FileLayer>,
}

/// Parses `args` (the program's name first), the `STRAND_*` environment
/// variables and the `--config` file (or `STRAND_CONFIG`) they name:
/// flags over environment over file over defaults. The file is not read
/// for a subcommand (`token`).
///
/// # Errors
/// [`LoadError::Clap`] for the command line and the environment (and
/// `--help`), [`LoadError::File`] for the file.
pub fn load<I, T>(args: I) -> Result<Loaded, LoadError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    load_with(Cli::command(), args)
}

/// [`load`] with this command (the tests' has no environment variables).
pub(super) fn load_with<I, T>(command: clap::Command, args: I) -> Result<Loaded, LoadError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut command = command;
    let first = command
        .try_get_matches_from_mut(&args)
        .map_err(LoadError::Clap)?;
    let path = match first.get_one::<PathBuf>("config_file") {
        Some(path) if first.subcommand().is_none() => path.clone(),
        _ => return finish(command, first, None),
    };
    let origin = match first.value_source("config_file") {
        Some(ValueSource::EnvVariable) => format!("STRAND_CONFIG={}", path.display()),
        _ => format!("--config {}", path.display()),
    };
    let fail = {
        let origin = origin.clone();
        move |what: String| LoadError::File(format!("{origin}: {what}"))
    };
    let text = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| fail(e.to_string().trim_end().to_owned()))?;
    let values = file_values(&table).map_err(&fail)?;
    for (key, raw) in &values {
        check_value(&command, key, raw).map_err(&fail)?;
    }
    let mut command =
        command.mut_args(
            |arg| match values.iter().find(|(key, _)| arg.get_id() == key.id) {
                Some((_, raw)) => arg.default_values(raw.clone()),
                None => arg,
            },
        );
    let matches = command
        .try_get_matches_from_mut(&args)
        .map_err(LoadError::Clap)?;
    let file = FileLayer {
        origin,
        ids: values.iter().map(|(key, _)| key.id).collect(),
    };
    check_conflicts(&command, &matches, &file).map_err(fail)?;
    finish(command, matches, Some(file))
}

fn finish(
    command: clap::Command,
    matches: ArgMatches,
    file: Option<FileLayer>,
) -> Result<Loaded, LoadError> {
    let cli = Cli::from_arg_matches(&matches).map_err(LoadError::Clap)?;
    Ok(Loaded {
        cli,
        command,
        matches,
        file,
    })
}

/// The flags' values the file gives, as the strings a flag would take,
/// each with its key; an unknown key or a value of the wrong type is
/// refused, naming the key.
fn file_values(table: &toml::Table) -> Result<Vec<(&'static Key, Vec<String>)>, String> {
    let mut values = Vec::new();
    for (table_name, value) in table {
        if !KEYS.iter().any(|key| key.table == table_name) {
            return Err(unknown_key(table_name, None));
        }
        let Some(inner) = value.as_table() else {
            return Err(format!(
                "`{table_name}` must be a table ([{table_name}]), not {}",
                value.type_str()
            ));
        };
        for (name, value) in inner {
            let Some(key) = KEYS
                .iter()
                .find(|key| key.table == table_name && key.name == name)
            else {
                return Err(unknown_key(name, Some(table_name)));
            };
            let wrong = |found: &str| {
                format!(
                    "`{}`: expected {}, found {found}",
                    key.path(),
                    key.kind.expected()
                )
            };
            let raw = match (key.kind, value) {
                (Kind::Str, toml::Value::String(s)) => vec![s.clone()],
                (Kind::Int, toml::Value::Integer(i)) => vec![i.to_string()],
                (Kind::Bool, toml::Value::Boolean(b)) => vec![b.to_string()],
                (Kind::List, toml::Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| wrong(&format!("an array holding {}", item.type_str())))
                    })
                    .collect::<Result<_, _>>()?,
                (_, value) => return Err(wrong(value.type_str())),
            };
            values.push((key, raw));
        }
    }
    Ok(values)
}

/// "unknown key `name`", with the keys that would have been known there
/// and the key the same name has elsewhere, if any.
fn unknown_key(name: &str, table: Option<&str>) -> String {
    let path = table.map_or_else(|| name.to_owned(), |t| format!("{t}.{name}"));
    let elsewhere = KEYS
        .iter()
        .find(|key| key.name == name || key.id == name)
        .map(|key| format!("; did you mean `{}`?", key.path()))
        .unwrap_or_default();
    let known: Vec<&str> = match table {
        Some(table) => KEYS
            .iter()
            .filter(|key| key.table == table)
            .map(|key| key.name)
            .collect(),
        None => {
            let mut tables: Vec<&str> = KEYS.iter().map(|key| key.table).collect();
            tables.dedup();
            tables
        }
    };
    let place = table.map_or_else(|| "the tables".to_owned(), |t| format!("the keys of [{t}]"));
    format!(
        "unknown key `{path}` ({place}: {}){elsewhere}",
        known.join(", ")
    )
}

/// Runs a file value through clap as its flag (`--flag=VALUE`, once per
/// element of a list), with no environment variable and no other flag:
/// the same value parser, range and delimiter. A `true`/`false` needs no
/// check.
fn check_value(command: &clap::Command, key: &Key, raw: &[String]) -> Result<(), String> {
    if key.kind == Kind::Bool {
        return Ok(());
    }
    let long = command
        .get_arguments()
        .find(|arg| arg.get_id() == key.id)
        .and_then(clap::Arg::get_long)
        .ok_or_else(|| format!("`{}`: no flag {} (a bug)", key.path(), key.id))?;
    let mut args = vec![OsString::from("strand-server")];
    args.extend(
        raw.iter()
            .map(|value| OsString::from(format!("--{long}={value}"))),
    );
    command
        .clone()
        .mut_args(|arg| arg.env(None))
        .try_get_matches_from(args)
        .map(drop)
        .map_err(|e| {
            let shown = match raw {
                [value] => format!("{value:?}"),
                _ => format!("{raw:?}"),
            };
            format!("`{}` = {shown}: {}", key.path(), reason(&e))
        })
}

/// What a value parser said, without clap's framing of a flag.
fn reason(error: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    if let Some(source) = std::error::Error::source(error) {
        return source.to_string();
    }
    match error.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(valid)) => format!("expected one of {}", valid.join(", ")),
        _ => error.kind().to_string(),
    }
}

/// clap refuses two conflicting flags given by flags or the environment;
/// this refuses them when the file gives one of them.
fn check_conflicts(
    command: &clap::Command,
    matches: &ArgMatches,
    file: &FileLayer,
) -> Result<(), String> {
    for arg in command.get_arguments() {
        for other in command.get_arg_conflicts_with(arg) {
            let (a, b) = (arg.get_id().as_str(), other.get_id().as_str());
            if !(file.ids.contains(a) || file.ids.contains(b)) {
                continue;
            }
            if is_set(matches, a) && is_set(matches, b) {
                let (first, second) = if file.ids.contains(a) { (a, b) } else { (b, a) };
                return Err(format!(
                    "{} cannot be used with {}",
                    describe(command, matches, file, first),
                    describe(command, matches, file, second)
                ));
            }
        }
    }
    Ok(())
}

/// Whether a flag holds a value that means something: `true`, a
/// non-empty list, or any value (a default other than the file's aside).
fn is_set(matches: &ArgMatches, id: &str) -> bool {
    match KEYS.iter().find(|key| key.id == id).map(|key| key.kind) {
        Some(Kind::Bool) => matches!(matches.try_get_one::<bool>(id), Ok(Some(true))),
        _ => matches!(matches.try_get_raw(id), Ok(Some(raw)) if raw.len() > 0),
    }
}

/// Where a flag's value came from: `--flag`, `STRAND_FLAG` or the file's
/// key.
fn describe(command: &clap::Command, matches: &ArgMatches, file: &FileLayer, id: &str) -> String {
    let arg = command.get_arguments().find(|arg| arg.get_id() == id);
    match matches.value_source(id) {
        Some(ValueSource::EnvVariable) => arg
            .and_then(|arg| arg.get_env())
            .map(|env| env.to_string_lossy().into_owned())
            .unwrap_or_else(|| id.to_owned()),
        Some(ValueSource::DefaultValue) if file.ids.contains(id) => {
            match KEYS.iter().find(|key| key.id == id) {
                Some(key) => format!("`{}`", key.path()),
                None => id.to_owned(),
            }
        }
        _ => arg
            .and_then(|arg| arg.get_long())
            .map_or_else(|| id.to_owned(), |long| format!("--{long}")),
    }
}

impl Loaded {
    /// The effective configuration as a TOML configuration file, in the
    /// layout of [`KEYS`]: each value set by a flag, an environment
    /// variable or the file says which in a comment, a flag without a
    /// value is a comment. Secrets are given by path (`auth.secret_file`,
    /// `tls.key`, `cluster.token_file`), never read; a password in a
    /// URL is printed as `<redacted>`.
    pub fn print_config(&self) -> String {
        let mut out = String::from(
            "# strand-server's effective configuration (--print-config): flags over\n\
             # STRAND_* environment variables over the --config file over defaults.\n",
        );
        if let Some(file) = &self.file {
            let _ = writeln!(out, "# The file: {}", file.origin);
        }
        let mut table = "";
        for key in KEYS {
            if key.table != table {
                table = key.table;
                let _ = write!(out, "\n[{table}]\n");
            }
            let Some(value) = self.value(key) else {
                let _ = writeln!(out, "# {} is not set", key.name);
                continue;
            };
            let _ = match self.source(key) {
                Some(source) => writeln!(out, "{} = {value}  # {source}", key.name),
                None => writeln!(out, "{} = {value}", key.name),
            };
        }
        out
    }

    /// The key's value as TOML, redacted; `None` when its flag has none.
    fn value(&self, key: &Key) -> Option<String> {
        if key.kind == Kind::Bool {
            return Some(self.matches.get_flag(key.id).to_string());
        }
        let raw: Vec<String> = self
            .matches
            .try_get_raw(key.id)
            .ok()
            .flatten()
            .map(|raw| raw.map(|v| v.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let string = |v: &str| {
            let v = if key.url {
                redact_userinfo(v)
            } else {
                v.to_owned()
            };
            toml::Value::String(v).to_string()
        };
        match key.kind {
            Kind::List => Some(format!(
                "[{}]",
                raw.iter().map(|v| string(v)).collect::<Vec<_>>().join(", ")
            )),
            Kind::Int => raw.first().map(|v| match v.trim().parse::<u64>() {
                Ok(n) => n.to_string(),
                Err(_) => string(v),
            }),
            Kind::Str | Kind::Bool => raw.first().map(|v| string(v)),
        }
    }

    /// Where a value came from, when not from the built-in defaults.
    fn source(&self, key: &Key) -> Option<String> {
        let arg = self
            .command
            .get_arguments()
            .find(|arg| arg.get_id() == key.id)?;
        match self.matches.value_source(key.id)? {
            ValueSource::CommandLine => arg.get_long().map(|long| format!("--{long}")),
            ValueSource::EnvVariable => arg.get_env().map(|env| env.to_string_lossy().into_owned()),
            ValueSource::DefaultValue => self
                .file
                .as_ref()
                .filter(|file| file.ids.contains(key.id))
                .map(|_| "the --config file".to_owned()),
            _ => None,
        }
    }
}

/// `scheme://user:password@host/…` without its user information.
fn redact_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://<redacted>@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::any::TypeId;
    use std::io::Write as _;

    use clap::ArgAction;

    use super::*;

    /// The command without environment variables: these tests see no
    /// `STRAND_*` of the process running them.
    fn no_env() -> clap::Command {
        Cli::command().mut_args(|arg| arg.env(None))
    }

    fn load_args(args: &[&str]) -> Result<Loaded, LoadError> {
        load_with(
            no_env(),
            std::iter::once("strand-server").chain(args.iter().copied()),
        )
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file
    }

    /// Loads `text` as the configuration file, with `args` after it.
    fn load_file(text: &str, args: &[&str]) -> Result<Loaded, LoadError> {
        let file = file(text);
        let path = file.path().to_str().unwrap().to_owned();
        let mut all = vec!["--config", path.as_str()];
        all.extend_from_slice(args);
        load_args(&all)
    }

    fn file_error(text: &str, args: &[&str]) -> String {
        match load_file(text, args) {
            Err(LoadError::File(e)) => e,
            Err(LoadError::Clap(e)) => panic!("{text}: clap refused it: {e}"),
            Ok(loaded) => panic!("{text}: accepted: {:?}", loaded.cli.config),
        }
    }

    fn defaults() -> String {
        format!("{:?}", load_args(&[]).unwrap().cli.config)
    }

    #[test]
    fn every_flag_has_one_key_and_a_variable() {
        let mut ids = BTreeSet::new();
        let mut paths = BTreeSet::new();
        for key in KEYS {
            assert!(ids.insert(key.id), "two keys for {}", key.id);
            assert!(paths.insert(key.path()), "{} twice", key.path());
        }
        // A table's keys are together: --print-config opens each once.
        let mut tables: Vec<&str> = KEYS.iter().map(|key| key.table).collect();
        tables.dedup();
        assert_eq!(
            tables.len(),
            tables.iter().collect::<BTreeSet<_>>().len(),
            "{tables:?}"
        );
        let command = Cli::command();
        let mut flags = 0;
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            let long = arg.get_long().unwrap();
            let env = arg.get_env().map(|env| env.to_str().unwrap().to_owned());
            match id {
                // An action, not a setting: no key, no variable.
                "print_config" => assert_eq!(env, None),
                // The file cannot name another file.
                "config_file" => assert_eq!(env.as_deref(), Some("STRAND_CONFIG")),
                _ => {
                    flags += 1;
                    let expected = format!("STRAND_{}", long.to_uppercase().replace('-', "_"));
                    assert_eq!(env.as_deref(), Some(expected.as_str()), "--{long}");
                    assert_ne!(expected, "STRAND_LOG", "the log filter's variable");
                    let key = KEYS
                        .iter()
                        .find(|key| key.id == id)
                        .unwrap_or_else(|| panic!("--{long} has no key in the file"));
                    let parser = arg.get_value_parser().type_id();
                    let kind = match arg.get_action() {
                        ArgAction::SetTrue => Kind::Bool,
                        ArgAction::Append => Kind::List,
                        _ if parser == TypeId::of::<u64>() || parser == TypeId::of::<usize>() => {
                            Kind::Int
                        }
                        _ => Kind::Str,
                    };
                    assert_eq!(key.kind, kind, "{}", key.path());
                }
            }
        }
        assert_eq!(flags, KEYS.len(), "a key without a flag");
    }

    #[test]
    fn example_file_yields_the_defaults_and_names_every_key() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/strand.example.toml"
        );
        let loaded = load_args(&["--config", path]).unwrap();
        assert_eq!(format!("{:?}", loaded.cli.config), defaults());
        // Every key is in it, set or (without a default) commented out,
        // under its table; and nothing else is.
        let text = std::fs::read_to_string(path).unwrap();
        let mut table = String::new();
        let mut named = BTreeSet::new();
        for line in text.lines() {
            if let Some(name) = line.strip_prefix('[') {
                table = name.trim_end_matches(']').to_owned();
            } else if !table.is_empty()
                && let Some((name, _)) = line.trim_start_matches("# ").split_once(" = ")
            {
                named.insert(format!("{table}.{}", name.trim()));
            }
        }
        let keys: BTreeSet<String> = KEYS.iter().map(Key::path).collect();
        assert_eq!(named, keys);
    }

    #[test]
    fn file_values_are_defaults_under_the_flags() {
        let text = "[server]\ngroups = 7\n[cluster]\npeers = [\"1=http://a:1\", \"2=http://b:2\"]\n\
                    [storage]\nmemory = true\nfsync = \"never\"\n";
        let config = load_file(text, &[]).unwrap().cli.config;
        assert_eq!(config.groups, 7);
        assert_eq!(config.peers.len(), 2);
        assert!(config.memory);
        assert_eq!(config.fsync, crate::config::FsyncMode::Never);
        let config = load_file(text, &["--groups", "9", "--peer", "3=http://c:3"])
            .unwrap()
            .cli
            .config;
        assert_eq!(config.groups, 9);
        assert_eq!(config.peers, vec![(3, "http://c:3".to_owned())]);
        // The repeatable flags also take a comma-separated list.
        let config = load_args(&["--peer", "1=http://a:1,2=http://b:2"])
            .unwrap()
            .cli
            .config;
        assert_eq!(config.peers.len(), 2);
        // Dotted keys are the same keys.
        let config = load_file("server.groups = 3\n", &[]).unwrap().cli.config;
        assert_eq!(config.groups, 3);
    }

    #[test]
    fn unknown_keys_are_refused_by_name() {
        for (text, says) in [
            ("[listen]\nadr = \"x\"\n", "unknown key `listen.adr`"),
            ("groups = 3\n", "unknown key `groups`"),
            (
                "[limits]\nmax_hot_bytes = 1\n",
                "did you mean `cold.max_hot_bytes`?",
            ),
            ("[nope]\nx = 1\n", "unknown key `nope`"),
            ("[listen.deeper]\nx = 1\n", "unknown key `listen.deeper`"),
            ("listen = \"127.0.0.1:1\"\n", "`listen` must be a table"),
        ] {
            let error = file_error(text, &[]);
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.starts_with("--config "), "names the file: {error}");
        }
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, says) in [
            (
                "[timeouts]\nrequest_head_ms = 0\n",
                "`timeouts.request_head_ms` = \"0\"",
            ),
            ("[server]\ngroups = -1\n", "`server.groups` = \"-1\""),
            (
                "[server]\ngroups = \"4\"\n",
                "`server.groups`: expected an integer, found string",
            ),
            (
                "[storage]\nfsync = \"sometimes\"\n",
                "expected one of always, never",
            ),
            (
                "[storage]\nmemory = \"yes\"\n",
                "`storage.memory`: expected true or false",
            ),
            (
                "[listen]\naddr = \"nowhere\"\n",
                "`listen.addr` = \"nowhere\"",
            ),
            (
                "[listen]\npublic_url = \"ftp://x\"\n",
                "`listen.public_url`",
            ),
            (
                "[cluster]\nsnapshot_chunk_bytes = 1\n",
                "`cluster.snapshot_chunk_bytes`",
            ),
            (
                "[cors]\norigins = \"*\"\n",
                "`cors.origins`: expected an array of strings",
            ),
            ("[cluster]\npeers = [1]\n", "found an array holding integer"),
            (
                "[subscriptions]\nwebhook_allow = [\"10.0.0.0/33\"]\n",
                "10.0.0.0/33",
            ),
            ("[server\n", "TOML parse error at line 1"),
        ] {
            let error = file_error(text, &[]);
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn a_file_value_conflicting_with_another_layer_is_refused() {
        let memory = "[storage]\nmemory = true\n";
        let error = file_error(memory, &["--data-dir", "/tmp/x"]);
        assert!(
            error.ends_with("`storage.memory` cannot be used with --data-dir"),
            "{error}"
        );
        let error = file_error("[storage]\nmemory = true\ndata_dir = \"/x\"\n", &[]);
        assert!(error.contains("`storage.data_dir`"), "{error}");
        let error = file_error("[cold]\ndir = \"/x\"\n", &["--cold-url", "s3://b/p"]);
        assert!(
            error.contains("`cold.dir` cannot be used with --cold-url"),
            "{error}"
        );
        // `false` is no conflict.
        let loaded = load_file("[storage]\nmemory = false\n", &["--data-dir", "/x"]).unwrap();
        assert_eq!(loaded.cli.config.data_dir, Some(PathBuf::from("/x")));
    }

    #[test]
    fn print_config_is_a_config_file_for_the_same_configuration() {
        let loaded = load_file(
            "[server]\ngroups = 7\n[cors]\norigins = [\"https://a.example\"]\n",
            &[
                "--memory",
                "--public-url",
                "https://streams.example/x",
                "--node-id",
                "3",
            ],
        )
        .unwrap();
        let printed = loaded.print_config();
        assert!(
            printed.contains("groups = 7  # the --config file\n"),
            "{printed}"
        );
        assert!(printed.contains("node_id = 3  # --node-id\n"), "{printed}");
        assert!(printed.contains("# admin is not set\n"), "{printed}");
        let again = load_file(&printed, &[]).unwrap();
        assert_eq!(
            format!("{:?}", again.cli.config),
            format!("{:?}", loaded.cli.config)
        );
        let defaults_printed = load_args(&[]).unwrap().print_config();
        let again = load_file(&defaults_printed, &[]).unwrap();
        assert_eq!(format!("{:?}", again.cli.config), defaults());
    }

    #[test]
    fn print_config_gives_secrets_by_path_and_redacts_passwords() {
        let loaded = load_args(&[
            "--auth-secret-file",
            "/etc/strand/secret",
            "--cluster-token-file",
            "/etc/strand/cluster",
            "--tls-key",
            "/etc/strand/key.pem",
            "--public-url",
            "https://user:hunter2@streams.example",
            "--peer",
            "1=http://node:hunter2@a:1",
            "--cold-url",
            "s3://key:hunter2@bucket/prefix",
        ])
        .unwrap();
        let printed = loaded.print_config();
        assert!(!printed.contains("hunter2"), "{printed}");
        for line in [
            "secret_file = \"/etc/strand/secret\"",
            "token_file = \"/etc/strand/cluster\"",
            "key = \"/etc/strand/key.pem\"",
            "public_url = \"https://<redacted>@streams.example\"",
            "peers = [\"1=http://<redacted>@a:1\"]",
            "url = \"s3://<redacted>@bucket/prefix\"",
        ] {
            assert!(printed.contains(line), "{line}:\n{printed}");
        }
    }

    #[test]
    fn userinfo_is_redacted() {
        assert_eq!(
            redact_userinfo("https://u:pw@example.com/x@y"),
            "https://<redacted>@example.com/x@y"
        );
        assert_eq!(
            redact_userinfo("1=http://a:pw@h:1"),
            "1=http://<redacted>@h:1"
        );
        assert_eq!(redact_userinfo("s3://bucket/prefix"), "s3://bucket/prefix");
        assert_eq!(redact_userinfo("plain"), "plain");
    }
}
