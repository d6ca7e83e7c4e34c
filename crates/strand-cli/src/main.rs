//! `strand`: the command-line tool of the strand workspace.
//!
//! This crate owns the binary and nothing else: argument parsing, file
//! handling (detection, progress bars, atomic output) and reports. All
//! state-machine and snapshot logic comes from the `strand` facade and
//! `strand-snapshot`; the live commands are thin HTTP clients of a running
//! strand-server ([`remote`]), which know its routes and JSON, not its
//! code.
//!
//! * `strand snapshot verify FILE...` ([`verify`])
//! * `strand snapshot inspect FILE [--stream ID] [--json]` ([`inspect`])
//! * `strand snapshot convert IN OUT --to json|binary [--force]` ([`convert`])
//! * `strand replay LOG [--from SNAPSHOT] [--snapshot-out FILE]` ([`replay`])
//! * `strand demo` ([`demo`])
//! * `strand status --url URL [--json] [--cold]` ([`remote::status`])
//! * `strand append --url URL STREAM [DATA | --file F] [--content-type CT]
//!   [--create] [--close]` ([`remote::append`])
//! * `strand tail --url URL STREAM [--from OFFSET] [--max-events N]`
//!   ([`remote::tail`])
//!
//! The live commands take `--token` (or `STRAND_TOKEN`) as a bearer token,
//! and `--url` may come from `STRAND_URL`.
//!
//! Exit codes: 0 on success, 1 when an input is invalid or an operation
//! fails, 2 on usage errors (from clap).
//!
//! Shared pieces: [`read`] reads a snapshot file of either format into a
//! sink ([`sinks`]), streaming JSON through [`json_stream`]; [`input`]
//! opens files (with progress bars); [`output`] writes files atomically.

mod convert;
mod demo;
mod input;
mod inspect;
mod json_stream;
mod output;
mod read;
mod remote;
mod replay;
mod sinks;
mod verify;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The `strand` command line.
#[derive(Debug, Parser)]
#[command(
    name = "strand",
    version,
    about = "Verify, inspect and convert strand snapshots, replay command logs, run the quickstart, \
             and check, list, append to and follow a running strand-server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The top-level subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Verify, inspect or convert group snapshots (JSON or binary).
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
    /// Apply a JSON Lines log of StreamCommands and summarize the outcome.
    Replay(replay::Args),
    /// Run the quickstart workload in-process and verify its snapshot.
    Demo(demo::Args),
    /// Show a running server's health: status, mode, groups and counters.
    Status(remote::status::Args),
    /// List a running server's streams by name prefix.
    #[command(subcommand)]
    Streams(StreamsCommand),
    /// Append to a stream on a running server; print the new tail offset.
    Append(remote::append::Args),
    /// Follow a stream on a running server over server-sent events.
    Tail(remote::tail::Args),
    /// A running cluster's members and groups.
    #[command(subcommand)]
    Cluster(ClusterCommand),
}

/// `strand cluster ...`.
#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Every member (id, URL, up or down) and every group (leader, term,
    /// voters, learners, each replica's applied index and lag), as the
    /// node at `--url` sees them (`GET /__strand/cluster`: an operator
    /// route, so it needs a token with the admin right on `*`, or `--url`
    /// naming the admin listener). Exit 1 when a member is down or a
    /// group has no leader.
    Status(remote::cluster::StatusArgs),
    /// Drain a member: it hands off every group leadership it holds and
    /// takes none (for a restart); waits until it leads no group
    /// (`--wait-seconds`, 0 not at all). A restart of the member ends
    /// the drain, as does `undrain`.
    Drain(remote::cluster::DrainArgs),
    /// End a member's drain: it takes leaderships again as they are
    /// balanced.
    Undrain(remote::cluster::DrainArgs),
    /// Take a member out of the cluster: drained first while it answers,
    /// then out of the membership; every group moves its vote to another
    /// member and drops it. Waits until no group holds it
    /// (`--wait-seconds`, 0 not at all). The node then serves nothing; it
    /// comes back only with an empty data directory and `--join`.
    Remove(remote::cluster::RemoveArgs),
}

/// `strand streams ...`.
#[derive(Debug, Subcommand)]
enum StreamsCommand {
    /// A bucket's streams whose names start with a prefix, a page at a
    /// time (`--all` for every page): name, bytes, next offset, content
    /// type, closed.
    List(remote::streams::ListArgs),
}

/// `strand snapshot ...`.
#[derive(Debug, Subcommand)]
enum SnapshotCommand {
    /// Check that snapshot files decode, validate and restore; print counts
    /// or the exact error per file (exit 1 if any is invalid).
    Verify(verify::Args),
    /// Summarize a snapshot per bucket and per stream (or as JSON).
    Inspect(inspect::Args),
    /// Convert a snapshot between the JSON and binary formats.
    Convert(convert::Args),
}

fn run(cli: &Cli) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let stderr = io::stderr();
    let code = match &cli.command {
        Command::Snapshot(SnapshotCommand::Verify(args)) => verify::run(args, &mut out),
        Command::Snapshot(SnapshotCommand::Inspect(args)) => inspect::run(args, &mut out),
        Command::Snapshot(SnapshotCommand::Convert(args)) => convert::run(args, &mut out),
        Command::Replay(args) => replay::run(args, &mut out, &mut stderr.lock()),
        Command::Demo(args) => demo::run(args, &mut out),
        Command::Status(args) => remote::status::run(args, &mut out),
        Command::Streams(StreamsCommand::List(args)) => remote::streams::run(args, &mut out),
        Command::Append(args) => remote::append::run(args, &mut out),
        Command::Tail(args) => remote::tail::run(args, &mut out),
        Command::Cluster(ClusterCommand::Status(args)) => {
            remote::cluster::run_status(args, &mut out)
        }
        Command::Cluster(ClusterCommand::Drain(args)) => {
            remote::cluster::run_drain(args, true, &mut out)
        }
        Command::Cluster(ClusterCommand::Undrain(args)) => {
            remote::cluster::run_drain(args, false, &mut out)
        }
        Command::Cluster(ClusterCommand::Remove(args)) => {
            remote::cluster::run_remove(args, &mut out)
        }
    }?;
    out.flush()?;
    Ok(code)
}

/// True when the error is a closed stdout (`strand ... | head`).
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        let kind = match (
            cause.downcast_ref::<io::Error>(),
            cause.downcast_ref::<serde_json::Error>(),
        ) {
            (Some(e), _) => Some(e.kind()),
            (None, Some(e)) => e.io_error_kind(),
            (None, None) => None,
        };
        kind == Some(io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(error) => {
            if !is_broken_pipe(&error) {
                eprintln!("strand: error: {error:#}");
            }
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
