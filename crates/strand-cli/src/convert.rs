//! `strand snapshot convert IN OUT --to json|binary`: re-encode a snapshot
//! with bounded memory, verifying it on the way, and never leave a partial
//! OUT behind.
//!
//! The codecs' encoders take the group-level fields up front and pull the
//! stream entries from an iterator, while the decoders push entries into a
//! sink and deliver the group-level fields last. So IN is read twice:
//!
//! 1. a validating pass ([`ValidateSink`]: restore's checks, no machine)
//!    collects the group-level fields and the counts;
//! 2. a second pass decodes IN on a reader thread, validates each entry
//!    again and sends it over a bounded channel to the encoder, which
//!    writes a temporary file beside OUT.
//!
//! Only a few entries are in memory at any time (plus the validator's set
//! of stream ids). The temporary file is renamed to OUT once both passes
//! agree; any failure deletes it.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread;

use anyhow::{Context, anyhow, bail};
use strand::{
    DecodeLimits, SnapshotFormat, SnapshotSink, SnapshotTail, SnapshotValidator, StreamSnapshot,
    StreamSnapshotEntry, StreamSnapshotError, encode_binary, encode_json,
};

use crate::input::CancelFlag;
use crate::output::{AtomicFile, FormatArg};
use crate::read::{JsonDecoding, LimitsArgs, ReadOptions, read_into, read_snapshot};
use crate::sinks::ValidateSink;

/// Entries buffered between the reader thread and the encoder.
const CHANNEL_DEPTH: usize = 4;

/// Output buffer size.
const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// Arguments of `strand snapshot convert`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The snapshot to read, JSON or binary (detected from its content).
    #[arg(value_name = "IN")]
    pub(crate) input: PathBuf,
    /// Where to write the converted snapshot.
    #[arg(value_name = "OUT")]
    pub(crate) output: PathBuf,
    /// The encoding to write.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub(crate) to: FormatArg,
    /// Replace OUT if it exists.
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) limits: LimitsArgs,
}

/// Runs the command.
pub(crate) fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let limits = args.limits.limits();
    let to = SnapshotFormat::from(args.to);
    let input = &args.input;
    let mut output = AtomicFile::create(&args.output, args.force)?;

    let options = ReadOptions::new(limits, "verifying");
    let first = read_snapshot(input, &options, ValidateSink::default)
        .with_context(|| format!("{}", input.display()))?;
    let (head, counts) = first.sink.into_parts();

    let writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, output.file());
    let second = encode_from(input, limits, first.json, &head, to, writer)?;
    if second.head != head || second.streams != counts.streams {
        bail!("{} changed while it was being converted", input.display());
    }
    let bytes = output.commit()?;
    writeln!(
        out,
        "{} ({}) -> {} ({to}): {}; {bytes} bytes written",
        input.display(),
        first.format,
        args.output.display(),
        counts.line()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// What the second pass saw.
struct SecondPass {
    head: StreamSnapshot,
    streams: u64,
}

/// The second pass: decodes `input` on a reader thread and encodes its
/// entries into `w` as they arrive.
fn encode_from<W: Write>(
    input: &Path,
    limits: DecodeLimits,
    json: JsonDecoding,
    head: &StreamSnapshot,
    to: SnapshotFormat,
    w: W,
) -> anyhow::Result<SecondPass> {
    let cancel = CancelFlag::default();
    let (tx, rx) = sync_channel::<StreamSnapshotEntry>(CHANNEL_DEPTH);
    let options = ReadOptions {
        limits,
        label: "converting",
        cancel: Some(cancel.clone()),
    };
    thread::scope(|scope| {
        let reader = scope.spawn(move || {
            let mut sink = ForwardSink {
                validator: None,
                tx: Some(tx),
                cancel,
                head: StreamSnapshot::default(),
                streams: 0,
            };
            let read = read_into(input, &options, json, &mut sink);
            // Closes the channel, so the encoder's iterator ends.
            sink.tx = None;
            match read? {
                Some(_) => Ok(SecondPass {
                    head: sink.head,
                    streams: sink.streams,
                }),
                None => Err(anyhow!("changed while it was being converted")),
            }
        });
        // The receiver moves into the encoder, so a failing encoder drops
        // it and the reader thread stops at its next entry.
        let encoded = match to {
            SnapshotFormat::Json => encode_json(w, head, rx),
            SnapshotFormat::Binary => encode_binary(w, head, rx),
        };
        let read = reader
            .join()
            .map_err(|_| anyhow!("the reader thread panicked"))?;
        // The codec's message already includes its cause.
        encoded.map_err(|e| anyhow!("cannot write the converted snapshot: {e}"))?;
        read.with_context(|| format!("{}", input.display()))
    })
}

/// Validates each entry and sends it to the encoder; keeps the group-level
/// fields to compare with the first pass.
struct ForwardSink {
    validator: Option<SnapshotValidator>,
    tx: Option<SyncSender<StreamSnapshotEntry>>,
    cancel: CancelFlag,
    head: StreamSnapshot,
    streams: u64,
}

impl SnapshotSink for ForwardSink {
    fn begin(
        &mut self,
        buckets: Vec<String>,
        erased_buckets: Vec<String>,
    ) -> Result<(), StreamSnapshotError> {
        self.validator = Some(SnapshotValidator::new(&buckets, &erased_buckets)?);
        self.head.buckets = buckets;
        self.head.erased_buckets = erased_buckets;
        Ok(())
    }

    fn entry(&mut self, entry: StreamSnapshotEntry) -> Result<(), StreamSnapshotError> {
        self.validator
            .get_or_insert_with(SnapshotValidator::default)
            .check_entry(&entry)?;
        self.streams = self.streams.saturating_add(1);
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(entry).is_ok());
        if !sent {
            // The encoder gave up: make the reader fail at its next read.
            self.cancel.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    fn finish(&mut self, tail: SnapshotTail) -> Result<(), StreamSnapshotError> {
        tail.install(&mut self.head);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::io;

    use bytes::Bytes;
    use strand::{BucketStreamId, StreamCommand, StreamStateMachine, write_snapshot};

    use super::*;

    /// A writer that fails once `left` bytes are used up.
    struct FailingWriter {
        left: usize,
    }

    impl Write for FailingWriter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.left < buf.len() {
                return Err(io::Error::other("disk full"));
            }
            self.left -= buf.len();
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A binary snapshot with many streams, so the channel fills up.
    fn many_streams(dir: &Path) -> PathBuf {
        let mut machine = StreamStateMachine::new();
        machine.apply(StreamCommand::CreateBucket {
            bucket_id: "acme".into(),
        });
        for i in 0..200 {
            let response = machine.apply(StreamCommand::CreateStream {
                stream_id: BucketStreamId::new("acme", format!("s{i:03}")),
                content_type: "text/plain".into(),
                initial_payload: Bytes::from(vec![b'x'; 1000]),
                close_after: false,
                stream_seq: None,
                producer: None,
                stream_ttl_seconds: None,
                stream_expires_at_ms: None,
                attrs: None,
                now_ms: 1,
            });
            assert!(!response.is_error(), "{response:?}");
        }
        let path = dir.join("many.bin");
        write_snapshot(
            &machine,
            SnapshotFormat::Binary,
            std::fs::File::create(&path).unwrap(),
        )
        .unwrap();
        path
    }

    #[test]
    fn a_failing_encoder_stops_the_reader_and_reports_the_write_error() {
        let dir = tempfile::tempdir().unwrap();
        let input = many_streams(dir.path());
        let head = StreamSnapshot {
            buckets: vec!["acme".into()],
            ..StreamSnapshot::default()
        };
        for to in [SnapshotFormat::Json, SnapshotFormat::Binary] {
            let err = encode_from(
                &input,
                DecodeLimits::default(),
                JsonDecoding::Streaming,
                &head,
                to,
                FailingWriter { left: 100 },
            )
            .err()
            .unwrap();
            assert_eq!(
                format!("{err:#}"),
                "cannot write the converted snapshot: writing the snapshot failed: disk full"
            );
        }
    }

    #[test]
    fn the_second_pass_sees_every_entry_and_the_group_fields() {
        let dir = tempfile::tempdir().unwrap();
        let input = many_streams(dir.path());
        let mut out = Vec::new();
        let second = encode_from(
            &input,
            DecodeLimits::default(),
            JsonDecoding::Streaming,
            &StreamSnapshot::default(),
            SnapshotFormat::Binary,
            &mut out,
        )
        .unwrap();
        assert_eq!(second.streams, 200);
        assert_eq!(second.head.buckets, ["acme"]);
        assert!(second.head.streams.is_empty());
    }
}
