//! `strand snapshot verify FILE...`: detect each file's format, decode it,
//! validate it and restore it into a state machine; print `ok` with counts
//! or the exact error per file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use strand::{DecodeLimits, SnapshotFormat, StreamStateMachine};

use crate::read::{LimitsArgs, ReadError, ReadOptions, read_snapshot};
use crate::sinks::{Counts, RestoreSink};

/// Arguments of `strand snapshot verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Snapshot files, JSON or binary (detected from their content).
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) limits: LimitsArgs,
}

/// A snapshot file that restored.
#[derive(Debug)]
pub(crate) struct Verified {
    /// Its format.
    pub(crate) format: SnapshotFormat,
    /// What it holds.
    pub(crate) counts: Counts,
    /// The restored machine.
    pub(crate) machine: StreamStateMachine,
}

/// Reads, validates and restores one snapshot file.
pub(crate) fn verify_file(path: &Path, limits: DecodeLimits) -> Result<Verified, ReadError> {
    let options = ReadOptions::new(limits, "verifying");
    let loaded = read_snapshot(path, &options, RestoreSink::default)?;
    let (machine, counts) = loaded.sink.into_parts();
    Ok(Verified {
        format: loaded.format,
        counts,
        // A successful read always ends with `finish`, which builds it.
        machine: machine.unwrap_or_default(),
    })
}

/// `PATH: ok (FORMAT): N buckets, ...`.
pub(crate) fn ok_line(path: &Path, verified: &Verified) -> String {
    format!(
        "{}: ok ({}): {}",
        path.display(),
        verified.format,
        verified.counts.line()
    )
}

/// `PATH: invalid (FORMAT): ERROR`, or `PATH: invalid: ERROR` when the
/// format is unknown.
pub(crate) fn error_line(path: &Path, error: &ReadError) -> String {
    match error.format {
        Some(format) => format!("{}: invalid ({format}): {error}", path.display()),
        None => format!("{}: invalid: {error}", path.display()),
    }
}

/// Runs the command: one line per file on `out`, then a total when there
/// is more than one file. Exit code 0 when every file is valid, else 1.
pub(crate) fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let limits = args.limits.limits();
    let mut valid = 0usize;
    for path in &args.files {
        match verify_file(path, limits) {
            Ok(verified) => {
                valid += 1;
                writeln!(out, "{}", ok_line(path, &verified))?;
            }
            Err(error) => writeln!(out, "{}", error_line(path, &error))?,
        }
    }
    let total = args.files.len();
    if total > 1 {
        writeln!(out, "{valid} of {total} snapshots valid")?;
    }
    Ok(if valid == total {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
