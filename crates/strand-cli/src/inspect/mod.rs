//! `strand snapshot inspect FILE [--stream BUCKET/STREAM] [--json]`: a
//! human summary of a snapshot (per bucket and per stream) or the same as
//! JSON. The snapshot is restored first, so only a valid snapshot is
//! inspected and every figure is what the restored machine reports.

mod report;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use strand::StreamStatus;

use crate::read::LimitsArgs;
use crate::verify::verify_file;
use report::{BucketReport, Report, StreamReport};

/// Arguments of `strand snapshot inspect`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The snapshot file, JSON or binary.
    #[arg(value_name = "FILE")]
    pub(crate) file: PathBuf,
    /// Show only this stream (`bucket/stream` or `bucket/affinity/stream`).
    #[arg(long, value_name = "BUCKET/STREAM")]
    pub(crate) stream: Option<String>,
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) limits: LimitsArgs,
}

/// Runs the command.
pub(crate) fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let path = &args.file;
    let verified =
        verify_file(path, args.limits.limits()).with_context(|| format!("{}", path.display()))?;
    let report = Report::new(
        path.display().to_string(),
        verified.format.to_string(),
        verified.counts,
        &verified.machine,
    );
    match &args.stream {
        Some(id) => {
            let Some(stream) = report.find_stream(id) else {
                bail!("{}: no stream '{id}' in this snapshot", path.display());
            };
            if args.json {
                serde_json::to_writer_pretty(&mut *out, stream)?;
                writeln!(out)?;
            } else {
                write_stream(out, stream, "")?;
            }
        }
        None if args.json => {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        }
        None => write_report(out, &report)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn write_report(out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
    let t = &report.totals;
    writeln!(out, "{} ({} snapshot)", report.file, report.format)?;
    writeln!(
        out,
        "  {} buckets ({} erased), {} streams, {} bytes hot, {} producers",
        t.buckets, t.erased_buckets, t.streams, t.hot_bytes, t.producers
    )?;
    match report.producer_receipt_limit {
        Some(limit) => writeln!(
            out,
            "  profile: {} (producers keep {limit} receipts)",
            report.profile
        )?,
        None => writeln!(out, "  profile: {}", report.profile)?,
    }
    writeln!(
        out,
        "  cold GC: {} pending (next seq {}); {} shared cold objects",
        t.pending_cold_gc, report.next_cold_gc_seq, report.shared_cold_objects
    )?;
    if !report.erased_buckets.is_empty() {
        writeln!(
            out,
            "  erased buckets: {}",
            report.erased_buckets.join(", ")
        )?;
    }
    for bucket in &report.buckets {
        writeln!(out)?;
        write_bucket(out, bucket)?;
    }
    Ok(())
}

fn or_unlimited(limit: Option<u64>) -> String {
    limit.map_or_else(|| "unlimited".to_owned(), |n| n.to_string())
}

fn write_bucket(out: &mut dyn Write, bucket: &BucketReport) -> std::io::Result<()> {
    let u = &bucket.usage;
    writeln!(
        out,
        "bucket {}: {} streams, {} retained bytes",
        bucket.bucket_id, u.stream_count, u.retained_bytes
    )?;
    writeln!(
        out,
        "  usage: {} bytes committed, {} records, {} write units",
        u.committed_append_bytes, u.committed_records, u.committed_write_units
    )?;
    match bucket.quota {
        Some(q) => writeln!(
            out,
            "  quota: {} streams, {} retained bytes",
            or_unlimited(q.max_streams),
            or_unlimited(q.max_retained_bytes)
        )?,
        None => writeln!(out, "  quota: none")?,
    }
    for stream in &bucket.streams {
        write_stream(out, stream, "  ")?;
    }
    Ok(())
}

fn write_stream(out: &mut dyn Write, s: &StreamReport, indent: &str) -> std::io::Result<()> {
    let status = match s.status {
        StreamStatus::Open => "open",
        StreamStatus::Closed => "closed",
    };
    let row = |out: &mut dyn Write, label: &str, value: String| {
        writeln!(out, "{indent}  {label:<13} {value}")
    };
    writeln!(out, "{indent}stream {}", s.stream)?;
    if let Some(title) = &s.title {
        row(out, "title", format!("{title:?}"))?;
    }
    row(out, "content type", s.content_type.clone())?;
    row(out, "status", status.to_owned())?;
    row(
        out,
        "offsets",
        format!(
            "tail {}, retained {}, hot start {}, cold frontier {}",
            s.tail_offset, s.retained_offset, s.hot_start_offset, s.cold_frontier_offset
        ),
    )?;
    row(
        out,
        "storage",
        format!(
            "{} retained bytes: {} hot in {} segments, {} cold chunks ({} bytes), {} external segments",
            s.retained_bytes,
            s.hot_bytes,
            s.hot_segments,
            s.cold_chunks,
            s.cold_bytes,
            s.external_segments
        ),
    )?;
    let records = match s.record_range {
        Some(r) => format!(
            "{}..{} ({} message records)",
            r.first_record, r.next_record, s.message_records
        ),
        None => format!("no record index ({} message records)", s.message_records),
    };
    row(out, "records", records)?;
    let snapshot = s
        .visible_snapshot_offset
        .map_or_else(|| "none".to_owned(), |o| format!("at offset {o}"));
    row(out, "snapshot", snapshot)?;
    let expiry = match (s.stream_ttl_seconds, s.stream_expires_at_ms) {
        (Some(ttl), _) => format!("ttl {ttl} s"),
        (None, Some(at)) => format!("expires at {at} ms"),
        (None, None) => "none".to_owned(),
    };
    row(out, "expiry", expiry)?;
    if s.producers.is_empty() {
        row(out, "producers", "none".to_owned())?;
    }
    for p in &s.producers {
        row(
            out,
            "producer",
            format!(
                "{} epoch {} seq {}: last append {}..{}{}, {} receipts",
                p.producer_id,
                p.producer_epoch,
                p.producer_seq,
                p.last_start_offset,
                p.last_next_offset,
                if p.last_closed { " (closed)" } else { "" },
                p.receipts
            ),
        )?;
    }
    Ok(())
}
