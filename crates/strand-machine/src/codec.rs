//! Writing a machine to a snapshot codec and restoring one from either
//! format (the codecs themselves live in `strand-snapshot`).

use std::io::{BufWriter, Read, Write};

use strand_snapshot::{
    CodecError, DecodeError, DecodeLimits, SnapshotFormat, SnapshotSink, SnapshotTail,
    StreamSnapshotEntry, StreamSnapshotError, decode_binary, decode_json, decode_json_slice,
    detect_format, encode_binary_reusing, encode_json_reusing, sniff_format,
};

use crate::machine::StreamStateMachine;
use crate::persist::MachineRestorer;

/// Why [`restore_from`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// The input could not be read or decoded (unknown format, damaged or
    /// truncated binary, invalid JSON).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The snapshot decoded but failed restore's validation (spec 07 §5).
    #[error("snapshot failed validation: {0}")]
    Invalid(#[from] StreamSnapshotError),
}

/// Writes `machine`'s snapshot in `format`. The JSON bytes are identical to
/// `serde_json::to_vec(&machine.snapshot())`; the binary format is the
/// framed one of `strand_snapshot::codec`. Either way the stream entries are
/// built and written one at a time, so no whole `StreamSnapshot` is held,
/// all into one reused entry whose strings and vectors keep their capacity
/// (`encode_binary_reusing` / `encode_json_reusing`), so similar streams
/// cost almost no allocation each.
/// Output is buffered internally.
///
/// # Errors
///
/// [`CodecError`] when the writer fails.
pub fn write_snapshot<W: Write>(
    machine: &StreamStateMachine,
    format: SnapshotFormat,
    w: W,
) -> Result<(), CodecError> {
    let head = machine.snapshot_without_streams();
    let w = BufWriter::with_capacity(64 << 10, w);
    match format {
        SnapshotFormat::Json => encode_json_reusing(w, &head, machine.snapshot_entry_filler()),
        SnapshotFormat::Binary => encode_binary_reusing(w, &head, machine.snapshot_entry_filler()),
    }
}

/// Restores a machine from a snapshot in either format, detected from its
/// first bytes, with the default [`DecodeLimits`]. See
/// [`restore_from_with_limits`].
///
/// # Errors
///
/// As [`restore_from_with_limits`].
pub fn restore_from<R: Read>(r: R) -> Result<StreamStateMachine, RestoreError> {
    restore_from_with_limits(r, &DecodeLimits::default())
}

/// Restores a machine from a snapshot already in memory, in either format:
/// like [`restore_from`], but a JSON snapshot is parsed in place instead of
/// being copied into a buffer first.
///
/// # Errors
///
/// As [`restore_from`].
pub fn restore_from_slice(bytes: &[u8]) -> Result<StreamStateMachine, RestoreError> {
    match detect_format(bytes) {
        Some(SnapshotFormat::Json) => Ok(StreamStateMachine::restore(decode_json_slice(bytes)?)?),
        _ => restore_from(bytes),
    }
}

/// Restores a machine from a snapshot in either format. A binary snapshot
/// is streamed through [`MachineRestorer`]: only one stream entry is held
/// beyond the machine being built. A JSON snapshot is decoded whole, then
/// restored. Validation is the same as [`StreamStateMachine::restore`], in
/// the same order.
///
/// # Errors
///
/// [`RestoreError::Decode`] when the input is not a readable snapshot,
/// [`RestoreError::Invalid`] when it fails validation.
pub fn restore_from_with_limits<R: Read>(
    r: R,
    limits: &DecodeLimits,
) -> Result<StreamStateMachine, RestoreError> {
    let (format, r) = sniff_format(r)?;
    match format {
        SnapshotFormat::Json => Ok(StreamStateMachine::restore(decode_json(r)?)?),
        SnapshotFormat::Binary => {
            let mut sink = RestoreSink::default();
            decode_binary(r, &mut sink, limits).map_err(|e| match e {
                DecodeError::Rejected { source, .. } => RestoreError::Invalid(source),
                other => RestoreError::Decode(other),
            })?;
            Ok(sink.into_machine())
        }
    }
}

/// Feeds a [`MachineRestorer`]. An entry arriving before `begin` is
/// restored as if `begin` had been called with no buckets (so it fails the
/// bucket check); the decoder never does that.
#[derive(Debug, Default)]
struct RestoreSink {
    restorer: Option<MachineRestorer>,
    machine: Option<StreamStateMachine>,
}

impl RestoreSink {
    /// The restorer, created with no buckets if `begin` was skipped.
    fn take_restorer(&mut self) -> Result<MachineRestorer, StreamSnapshotError> {
        match self.restorer.take() {
            Some(restorer) => Ok(restorer),
            None => MachineRestorer::new(Vec::new(), Vec::new()),
        }
    }

    fn into_machine(self) -> StreamStateMachine {
        match (self.machine, self.restorer) {
            (Some(machine), _) => machine,
            // Never reached through the decoder, which finishes itself.
            (None, Some(restorer)) => restorer.finish(SnapshotTail::default()).unwrap_or_default(),
            (None, None) => StreamStateMachine::default(),
        }
    }
}

impl SnapshotSink for RestoreSink {
    fn begin(
        &mut self,
        buckets: Vec<String>,
        erased_buckets: Vec<String>,
    ) -> Result<(), StreamSnapshotError> {
        self.restorer = Some(MachineRestorer::new(buckets, erased_buckets)?);
        Ok(())
    }

    fn entry(&mut self, entry: StreamSnapshotEntry) -> Result<(), StreamSnapshotError> {
        let mut restorer = self.take_restorer()?;
        let pushed = restorer.push_entry(entry);
        self.restorer = Some(restorer);
        pushed
    }

    fn finish(&mut self, tail: SnapshotTail) -> Result<(), StreamSnapshotError> {
        let restorer = self.take_restorer()?;
        self.machine = Some(restorer.finish(tail)?);
        Ok(())
    }
}
