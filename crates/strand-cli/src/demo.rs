//! `strand demo`: the quickstart. Runs a small in-process workload step by
//! step (buckets, a quota, streams, an idempotent producer and its retry,
//! a JSON stream with record coordinates, a cold flush, a published
//! snapshot with retention), then writes the group snapshot in both
//! formats, verifies the files, and replays the command log to show the
//! machine is deterministic. Needs no arguments and no files.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use strand::{
    BucketStreamId, ColdChunkRef, DecodeLimits, ProducerRequest, SnapshotFormat, StreamCommand,
    StreamErrorCode, StreamResponse, StreamStateMachine, write_snapshot,
};

use crate::verify::{ok_line, verify_file};

/// Arguments of `strand demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Keep the demo's files in this directory (`snapshot.json`,
    /// `snapshot.bin`, `commands.jsonl`, replacing them) instead of a
    /// temporary directory removed on exit.
    #[arg(long, value_name = "DIR")]
    pub(crate) out_dir: Option<PathBuf>,
}

/// What a step must answer.
enum Expect {
    Success,
    Error(StreamErrorCode),
}

/// The machine, the log of applied commands and the step counter.
struct Demo<'o> {
    machine: StreamStateMachine,
    log: Vec<StreamCommand>,
    step: u32,
    out: &'o mut dyn Write,
}

const NOW_MS: u64 = 1_700_000_000_000;

impl Demo<'_> {
    fn apply(
        &mut self,
        what: &str,
        command: StreamCommand,
        expect: Expect,
    ) -> anyhow::Result<StreamResponse> {
        self.step += 1;
        self.log.push(command.clone());
        let response = self.machine.apply(command);
        let json = serde_json::to_string(&response)?;
        writeln!(self.out, "{:>3}. {what}\n     -> {json}", self.step)?;
        match (expect, response.error_code()) {
            (Expect::Success, None) => {}
            (Expect::Error(code), Some(got)) if code == got => {
                writeln!(self.out, "     (an error, as expected)")?;
            }
            _ => bail!("step {} ({what}) answered unexpectedly: {json}", self.step),
        }
        Ok(response)
    }

    fn note(&mut self, what: &str, value: impl std::fmt::Display) -> anyhow::Result<()> {
        writeln!(self.out, "     {what}: {value}")?;
        Ok(())
    }
}

fn create(id: &BucketStreamId, content_type: &str) -> StreamCommand {
    StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: content_type.into(),
        initial_payload: Bytes::new(),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: NOW_MS,
    }
}

fn append(
    id: &BucketStreamId,
    content_type: &str,
    body: &'static str,
    producer: Option<ProducerRequest>,
) -> StreamCommand {
    StreamCommand::Append {
        stream_id: id.clone(),
        content_type: Some(content_type.into()),
        payload: Bytes::from_static(body.as_bytes()),
        close_after: false,
        stream_seq: None,
        producer,
        now_ms: NOW_MS + 1_000,
        record_match: None,
    }
}

/// Runs the workload, printing each step.
fn workload(demo: &mut Demo<'_>) -> anyhow::Result<()> {
    use Expect::{Error, Success};
    for bucket in ["acme", "beta"] {
        demo.apply(
            &format!("create bucket {bucket}"),
            StreamCommand::CreateBucket {
                bucket_id: bucket.into(),
            },
            Success,
        )?;
    }
    demo.apply(
        "limit bucket beta to 1 stream",
        StreamCommand::SetBucketQuota {
            bucket_id: "beta".into(),
            max_streams: Some(1),
            max_retained_bytes: None,
        },
        Success,
    )?;
    demo.apply(
        "create stream beta/only",
        create(&BucketStreamId::new("beta", "only"), "text/plain"),
        Success,
    )?;
    demo.apply(
        "create stream beta/second (over the quota)",
        create(&BucketStreamId::new("beta", "second"), "text/plain"),
        Error(StreamErrorCode::QuotaExceeded),
    )?;

    let log = BucketStreamId::new("acme", "log");
    demo.apply(
        "create stream acme/log (text/plain)",
        create(&log, "text/plain"),
        Success,
    )?;
    let writer = ProducerRequest {
        producer_id: "writer-1".into(),
        producer_epoch: 0,
        producer_seq: 0,
    };
    demo.apply(
        "append \"hello \" as producer writer-1 (epoch 0, seq 0)",
        append(&log, "text/plain", "hello ", Some(writer.clone())),
        Success,
    )?;
    demo.apply(
        "retry the same append (seq 0 again): deduplicated, nothing written",
        append(&log, "text/plain", "hello ", Some(writer)),
        Success,
    )?;
    demo.apply(
        "append \"world\" without a producer",
        append(&log, "text/plain", "world", None),
        Success,
    )?;
    demo.apply(
        "append with the wrong content type",
        append(&log, "application/octet-stream", "!", None),
        Error(StreamErrorCode::ContentTypeMismatch),
    )?;
    let read = demo
        .machine
        .read(&log, 0, 64)
        .map_err(|e| anyhow!("read failed: {e:?}"))?;
    let text = String::from_utf8_lossy(&read.payload).into_owned();
    demo.note("read acme/log from offset 0", format!("{text:?}"))?;

    let events = BucketStreamId::new("acme", "events");
    demo.apply(
        "create stream acme/events (application/json)",
        create(&events, "application/json"),
        Success,
    )?;
    demo.apply(
        "append two JSON records in one write",
        append(
            &events,
            "application/json",
            "{\"id\":1}\n{\"id\":2}\n",
            None,
        ),
        Success,
    )?;
    let range = demo
        .machine
        .record_range(&events)
        .map_err(|e| anyhow!("record range failed: {e:?}"))?
        .ok_or_else(|| anyhow!("acme/events has no record index"))?;
    demo.note(
        "records of acme/events",
        format!("{}..{}", range.first_record, range.next_record),
    )?;
    let offset = demo
        .machine
        .offset_for_record(&events, 1)
        .map_err(|e| anyhow!("record lookup failed: {e:?}"))?
        .ok_or_else(|| anyhow!("acme/events has no record 1"))?;
    demo.note("record 1 starts at byte offset", offset)?;

    flush(demo, &log, 6, "acme/log/000000.bin")?;
    demo.apply(
        "publish a snapshot of acme/log at offset 6",
        StreamCommand::PublishSnapshot {
            stream_id: log.clone(),
            snapshot_offset: 6,
            content_type: "text/plain".into(),
            payload: Bytes::from_static(b"state@6"),
            expected_digest: None,
            now_ms: NOW_MS + 2_000,
        },
        Success,
    )?;
    demo.apply(
        "advance retention of acme/log to 6 (reads now start there)",
        StreamCommand::AdvanceRetention {
            stream_id: log,
            retained_offset: 6,
            now_ms: NOW_MS + 2_000,
        },
        Success,
    )?;

    let scratch = BucketStreamId::new("acme", "scratch");
    demo.apply(
        "create stream acme/scratch (text/plain)",
        create(&scratch, "text/plain"),
        Success,
    )?;
    demo.apply(
        "append \"draft\"",
        append(&scratch, "text/plain", "draft", None),
        Success,
    )?;
    flush(demo, &scratch, 5, "acme/scratch/000000.bin")?;
    demo.apply(
        "delete stream acme/scratch (its cold object is queued for GC)",
        StreamCommand::DeleteStream { stream_id: scratch },
        Success,
    )?;
    demo.note(
        "pending cold GC entries",
        demo.machine.pending_cold_gc_len(),
    )?;
    Ok(())
}

/// Plans and commits a cold flush of up to `max` hot bytes of `id`.
fn flush(demo: &mut Demo<'_>, id: &BucketStreamId, max: usize, path: &str) -> anyhow::Result<()> {
    let candidate = demo
        .machine
        .plan_cold_flush(id, 1, max)
        .map_err(|e| anyhow!("flush planning failed: {e:?}"))?
        .ok_or_else(|| anyhow!("nothing to flush in {id}"))?;
    demo.apply(
        &format!(
            "flush {id} [{}, {}) to the cold tier as {path}",
            candidate.start_offset, candidate.end_offset
        ),
        StreamCommand::FlushCold {
            stream_id: id.clone(),
            chunk: ColdChunkRef {
                start_offset: candidate.start_offset,
                end_offset: candidate.end_offset,
                s3_path: path.into(),
                object_size: candidate.end_offset - candidate.start_offset,
                payload_digest: candidate.payload_digest,
                ..ColdChunkRef::default()
            },
        },
        Expect::Success,
    )?;
    Ok(())
}

fn write_log(path: &Path, log: &[StreamCommand]) -> anyhow::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    for command in log {
        serde_json::to_writer(&mut w, command)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    Ok(())
}

/// Runs the command.
pub(crate) fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut demo = Demo {
        machine: StreamStateMachine::new(),
        log: Vec::new(),
        step: 0,
        out: &mut *out,
    };
    writeln!(demo.out, "strand demo: one state machine, step by step\n")?;
    workload(&mut demo)?;
    let Demo { machine, log, .. } = demo;

    let temp;
    let dir = match &args.out_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            dir.clone()
        }
        None => {
            temp = tempfile::tempdir().context("cannot create a temporary directory")?;
            temp.path().to_owned()
        }
    };
    writeln!(out, "\nsnapshot files in {}:", dir.display())?;
    let expected = machine.snapshot();
    for (name, format) in [
        ("snapshot.json", SnapshotFormat::Json),
        ("snapshot.bin", SnapshotFormat::Binary),
    ] {
        let path = dir.join(name);
        let file =
            File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        write_snapshot(&machine, format, file)
            .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
        let verified = verify_file(&path, DecodeLimits::default())
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        writeln!(out, "  {}", ok_line(&path, &verified))?;
        if verified.machine.snapshot() != expected {
            bail!("{} did not restore to the same state", path.display());
        }
    }
    writeln!(out, "  both restore to exactly the state above")?;

    let log_path = dir.join("commands.jsonl");
    write_log(&log_path, &log).with_context(|| format!("cannot write {}", log_path.display()))?;
    let mut replayed = StreamStateMachine::new();
    for command in log.iter().cloned() {
        replayed.apply(command);
    }
    let same = replayed.snapshot() == expected;
    writeln!(
        out,
        "  {}: {} commands; replaying them on a fresh machine gives the same snapshot: {}",
        log_path.display(),
        log.len(),
        if same { "yes" } else { "no" }
    )?;
    if !same {
        bail!("replaying the command log gave another state");
    }
    if args.out_dir.is_none() {
        writeln!(out, "  (temporary directory, removed on exit)")?;
    } else {
        writeln!(
            out,
            "\nnext: strand snapshot inspect {}",
            dir.join("snapshot.bin").display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
