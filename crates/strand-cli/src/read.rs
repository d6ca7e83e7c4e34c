//! Reading a snapshot file of either format into a [`SnapshotSink`], one
//! stream entry at a time, with errors that say where the file went wrong.
//!
//! The format is detected from the content. Binary goes through
//! `decode_binary`; JSON through the streaming reader of
//! [`crate::json_stream`], which falls back to decoding the whole document
//! only when its top-level fields come in an order that cannot be streamed.

use std::fmt;
use std::io;
use std::path::Path;

use strand::{
    DEFAULT_MAX_FRAME_LEN, DecodeError, DecodeLimits, FrameRef, SnapshotFormat, SnapshotSink,
    StreamSnapshot, StreamSnapshotError, decode_binary, decode_json, sniff_format,
};

use crate::input::{self, CancelFlag};
use crate::json_stream::{self, Streamed};

/// The decode limits a snapshot command accepts.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct LimitsArgs {
    /// Largest binary frame body accepted, in bytes (a stream whose hot
    /// payload is larger needs a higher limit).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_FRAME_LEN)]
    pub(crate) max_frame_len: u64,
}

impl LimitsArgs {
    /// The limits to decode with.
    pub(crate) fn limits(&self) -> DecodeLimits {
        DecodeLimits::default().with_max_frame_len(self.max_frame_len)
    }
}

/// Where in a snapshot a validation error was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    /// A binary frame.
    Frame(FrameRef),
    /// The bucket lists of a JSON snapshot.
    Buckets,
    /// The stream entry at this index of a JSON snapshot's `streams`.
    Entry(u64),
    /// The group-level fields of a JSON snapshot.
    Group,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Frame(frame) => write!(f, "{frame}"),
            Self::Buckets => f.write_str("buckets"),
            Self::Entry(index) => write!(f, "streams[{index}]"),
            Self::Group => f.write_str("snapshot"),
        }
    }
}

/// Why a snapshot file could not be read.
#[derive(Debug)]
pub(crate) enum ReadErrorKind {
    /// The file could not be opened.
    Open(io::Error),
    /// The content is not a readable snapshot (unknown format, damaged or
    /// truncated binary, JSON that is not a `StreamSnapshot`).
    Decode(DecodeError),
    /// The snapshot decoded but fails restore's validation (spec 07 §5);
    /// the message is exactly restore's.
    Invalid {
        /// Where the failing part is.
        at: Location,
        /// Restore's error.
        source: StreamSnapshotError,
    },
}

/// A failed read, with the format when it had been detected.
#[derive(Debug)]
pub(crate) struct ReadError {
    /// The detected format, if detection got that far.
    pub(crate) format: Option<SnapshotFormat>,
    /// What went wrong (boxed: decode errors are large).
    pub(crate) kind: Box<ReadErrorKind>,
}

impl ReadError {
    fn new(format: Option<SnapshotFormat>, kind: ReadErrorKind) -> Self {
        Self {
            format,
            kind: Box::new(kind),
        }
    }

    /// A validation failure at `at`.
    pub(crate) fn invalid(at: Location, source: StreamSnapshotError) -> Self {
        Self::new(None, ReadErrorKind::Invalid { at, source })
    }

    /// A decode failure.
    pub(crate) fn decode(error: DecodeError) -> Self {
        Self::new(None, ReadErrorKind::Decode(error))
    }

    fn in_format(mut self, format: SnapshotFormat) -> Self {
        self.format = Some(format);
        self
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.kind {
            ReadErrorKind::Open(e) => write!(f, "cannot open: {e}"),
            ReadErrorKind::Decode(e) => write!(f, "{e}"),
            ReadErrorKind::Invalid { at, source } => {
                write!(f, "{at}: snapshot failed validation: {source}")
            }
        }
    }
}

impl std::error::Error for ReadError {}

/// How to read a snapshot file.
#[derive(Debug, Clone)]
pub(crate) struct ReadOptions {
    /// Decode limits for the binary format.
    pub(crate) limits: DecodeLimits,
    /// Names the work in the progress bar.
    pub(crate) label: &'static str,
    /// Makes the read fail early once set.
    pub(crate) cancel: Option<CancelFlag>,
}

impl ReadOptions {
    /// Options with `limits`, labelled `label`, not cancellable.
    pub(crate) fn new(limits: DecodeLimits, label: &'static str) -> Self {
        Self {
            limits,
            label,
            cancel: None,
        }
    }
}

/// How a JSON snapshot is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonDecoding {
    /// Entry by entry ([`crate::json_stream`]).
    Streaming,
    /// The whole document at once (`decode_json`), for documents whose
    /// field order cannot be streamed.
    WholeDocument,
}

/// A snapshot read into a sink.
#[derive(Debug)]
pub(crate) struct Loaded<S> {
    /// The detected format.
    pub(crate) format: SnapshotFormat,
    /// How a JSON snapshot was decoded (always `Streaming` for binary).
    pub(crate) json: JsonDecoding,
    /// The sink, after `finish`.
    pub(crate) sink: S,
}

/// Reads the snapshot at `path` into a sink made by `new_sink`.
///
/// Decode errors take precedence over validation errors for JSON (as when
/// the whole document is decoded, then restored); a binary file is
/// verified frame by frame and stops at its first error. `new_sink` is
/// called a second time only when a JSON document's field order cannot
/// be streamed and the whole document is read again.
pub(crate) fn read_snapshot<S, F>(
    path: &Path,
    options: &ReadOptions,
    mut new_sink: F,
) -> Result<Loaded<S>, ReadError>
where
    S: SnapshotSink,
    F: FnMut() -> S,
{
    let mut sink = new_sink();
    if let Some(format) = read_into(path, options, JsonDecoding::Streaming, &mut sink)? {
        return Ok(Loaded {
            format,
            json: JsonDecoding::Streaming,
            sink,
        });
    }
    let mut sink = new_sink();
    let format = read_into(path, options, JsonDecoding::WholeDocument, &mut sink)?
        .unwrap_or(SnapshotFormat::Json);
    Ok(Loaded {
        format,
        json: JsonDecoding::WholeDocument,
        sink,
    })
}

/// Reads the snapshot at `path` into `sink` and returns its format, or
/// `None` when `json` is `Streaming` and the document's field order cannot
/// be streamed (the sink may then hold part of the snapshot: discard it).
pub(crate) fn read_into<S: SnapshotSink + ?Sized>(
    path: &Path,
    options: &ReadOptions,
    json: JsonDecoding,
    sink: &mut S,
) -> Result<Option<SnapshotFormat>, ReadError> {
    let file = input::open(path, options.label, options.cancel.clone())
        .map_err(|e| ReadError::new(None, ReadErrorKind::Open(e)))?;
    let (format, reader) = sniff_format(file).map_err(ReadError::decode)?;
    let done = match (format, json) {
        (SnapshotFormat::Binary, _) => decode_binary(reader, sink, &options.limits)
            .map(|()| true)
            .map_err(|e| match e {
                DecodeError::Rejected { frame, source } => {
                    ReadError::invalid(Location::Frame(frame), source)
                }
                other => ReadError::decode(other),
            }),
        (SnapshotFormat::Json, JsonDecoding::Streaming) => {
            json_stream::decode(reader, sink).map(|streamed| streamed == Streamed::Done)
        }
        (SnapshotFormat::Json, JsonDecoding::WholeDocument) => decode_json(reader)
            .map_err(ReadError::decode)
            .and_then(|snapshot| feed(snapshot, sink))
            .map(|()| true),
    }
    .map_err(|e| e.in_format(format))?;
    Ok(done.then_some(format))
}

/// Feeds a whole decoded snapshot to `sink`, part by part.
pub(crate) fn feed<S: SnapshotSink + ?Sized>(
    snapshot: StreamSnapshot,
    sink: &mut S,
) -> Result<(), ReadError> {
    let (buckets, erased_buckets, streams, tail) = snapshot.into_parts();
    sink.begin(buckets, erased_buckets)
        .map_err(|e| ReadError::invalid(Location::Buckets, e))?;
    for (index, entry) in (0u64..).zip(streams) {
        sink.entry(entry)
            .map_err(|e| ReadError::invalid(Location::Entry(index), e))?;
    }
    sink.finish(tail)
        .map_err(|e| ReadError::invalid(Location::Group, e))
}
