//! `strand replay LOG`: apply a JSON Lines log of `StreamCommand`s (one
//! command per line, serde JSON) to a fresh machine or to a restored
//! snapshot, then print a summary or every response, and optionally write
//! the final snapshot.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use strand::{
    MachineProfile, SnapshotFormat, StreamCommand, StreamResponse, StreamStateMachine,
    write_snapshot,
};

use crate::input;
use crate::output::{AtomicFile, FormatArg};
use crate::read::LimitsArgs;
use crate::verify::verify_file;

/// Arguments of `strand replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The command log: one serde-JSON `StreamCommand` per line (blank
    /// lines are skipped); `-` reads standard input.
    #[arg(value_name = "LOG")]
    pub(crate) log: PathBuf,
    /// Start from this snapshot (JSON or binary) instead of an empty
    /// machine.
    #[arg(long, value_name = "SNAPSHOT")]
    pub(crate) from: Option<PathBuf>,
    /// Write the final state as a snapshot to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) snapshot_out: Option<PathBuf>,
    /// The encoding of `--snapshot-out`.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "json")]
    pub(crate) snapshot_format: FormatArg,
    /// Replace the `--snapshot-out` file if it exists.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print every response as one JSON line on stdout (the summary then
    /// goes to stderr).
    #[arg(long)]
    pub(crate) responses: bool,
    /// Report malformed lines and go on instead of stopping at the first.
    #[arg(long)]
    pub(crate) skip_invalid: bool,
    /// The machine profile of a fresh machine: `reference` (the default,
    /// `ursula-stream` quirk for quirk) or `corrected` (see
    /// `docs/profiles.md`). With `--from`, the snapshot's own profile is
    /// used, and a different `--profile` is an error.
    #[arg(long, value_enum, value_name = "PROFILE")]
    pub(crate) profile: Option<ProfileArg>,
    #[command(flatten)]
    pub(crate) limits: LimitsArgs,
}

/// `--profile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProfileArg {
    /// The reference's behaviour, quirks included.
    Reference,
    /// The harmful quirks fixed.
    Corrected,
}

impl From<ProfileArg> for MachineProfile {
    fn from(p: ProfileArg) -> Self {
        match p {
            ProfileArg::Reference => Self::Reference,
            ProfileArg::Corrected => Self::Corrected,
        }
    }
}

/// The serde name of a response's error code, if it is an error.
fn error_code_name(response: &StreamResponse) -> Option<String> {
    let code = response.error_code()?;
    match serde_json::to_value(code) {
        Ok(serde_json::Value::String(name)) => Some(name),
        _ => Some(format!("{code:?}")),
    }
}

/// What a replay did.
#[derive(Debug, Default)]
struct Summary {
    commands: u64,
    by_kind: BTreeMap<&'static str, u64>,
    errors: u64,
    by_code: BTreeMap<String, u64>,
    invalid_lines: u64,
}

impl Summary {
    fn record(&mut self, kind: &'static str, response: &StreamResponse) {
        self.commands += 1;
        *self.by_kind.entry(kind).or_default() += 1;
        if let Some(code) = error_code_name(response) {
            self.errors += 1;
            *self.by_code.entry(code).or_default() += 1;
        }
    }

    fn write(&self, out: &mut dyn Write, log: &Path) -> io::Result<()> {
        writeln!(
            out,
            "replayed {}: {} commands, {} errors",
            log.display(),
            self.commands,
            self.errors
        )?;
        if self.invalid_lines > 0 {
            writeln!(out, "skipped {} malformed lines", self.invalid_lines)?;
        }
        let width = self
            .by_kind
            .keys()
            .map(|k| k.len())
            .chain(self.by_code.keys().map(String::len))
            .max()
            .unwrap_or(0);
        if !self.by_kind.is_empty() {
            writeln!(out, "commands by kind:")?;
            for (kind, n) in &self.by_kind {
                writeln!(out, "  {kind:<width$}  {n}")?;
            }
        }
        if !self.by_code.is_empty() {
            writeln!(out, "errors by code:")?;
            for (code, n) in &self.by_code {
                writeln!(out, "  {code:<width$}  {n}")?;
            }
        }
        Ok(())
    }
}

/// serde's message without its ` at line L column C` suffix (each line is
/// parsed on its own, so the line is always 1).
fn message_without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_owned()
}

fn open_log(path: &Path) -> io::Result<Box<dyn BufRead>> {
    if path.as_os_str() == "-" {
        Ok(Box::new(io::stdin().lock()))
    } else {
        Ok(Box::new(input::open(path, "replaying", None)?))
    }
}

/// Runs the command. `out` gets the summary, or the responses with
/// `--responses` (the summary then goes to `err`); `err` gets malformed
/// lines.
pub(crate) fn run(
    args: &Args,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let mut output = args
        .snapshot_out
        .as_deref()
        .map(|path| AtomicFile::create(path, args.force))
        .transpose()?;
    let requested = args.profile.map(MachineProfile::from);
    let mut machine = match &args.from {
        Some(path) => {
            let machine = verify_file(path, args.limits.limits())
                .with_context(|| format!("{}", path.display()))?
                .machine;
            if let Some(profile) = requested
                && profile != machine.profile()
            {
                return Err(anyhow!(
                    "{} is a {} snapshot; --profile {profile} does not match",
                    path.display(),
                    machine.profile()
                ));
            }
            machine
        }
        None => StreamStateMachine::with_profile(requested.unwrap_or_default()),
    };
    let log = &args.log;
    let mut reader = open_log(log).with_context(|| format!("cannot open {}", log.display()))?;

    let mut summary = Summary::default();
    let mut stopped = false;
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("cannot read {}", log.display()))?;
        if n == 0 {
            break;
        }
        number += 1;
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let command: StreamCommand = match serde_json::from_slice(text) {
            Ok(command) => command,
            Err(e) => {
                writeln!(
                    err,
                    "{}: line {number}: malformed command: {} (column {})",
                    log.display(),
                    message_without_position(&e),
                    e.column()
                )?;
                if args.skip_invalid {
                    summary.invalid_lines += 1;
                    continue;
                }
                stopped = true;
                break;
            }
        };
        let kind = command.kind();
        let response = machine.apply(command);
        summary.record(kind, &response);
        if args.responses {
            serde_json::to_writer(&mut *out, &response)?;
            out.write_all(b"\n")?;
        }
    }

    let report: &mut dyn Write = if args.responses { err } else { out };
    summary.write(report, log)?;
    if stopped {
        writeln!(
            report,
            "stopped at line {number} (pass --skip-invalid to go on); no snapshot written"
        )?;
        return Ok(ExitCode::FAILURE);
    }
    if let (Some(mut file), Some(path)) = (output.take(), args.snapshot_out.as_deref()) {
        let format = SnapshotFormat::from(args.snapshot_format);
        // The codec's message already includes its cause.
        write_snapshot(&machine, format, file.file())
            .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
        let bytes = file.commit()?;
        writeln!(
            report,
            "snapshot written to {} ({format}, {bytes} bytes)",
            path.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
