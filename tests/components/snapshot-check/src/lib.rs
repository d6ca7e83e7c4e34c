//! A downstream use of `strand-snapshot` alone: check a snapshot file (JSON
//! or binary, detected from its content) without building a state machine,
//! the way an operator's tool or a backup verifier would.

use std::path::Path;

use strand_snapshot::{
    CollectSink, DecodeLimits, SnapshotFormat, SnapshotSummary, StreamSnapshot, decode_binary,
    decode_json_slice, detect_format, validate_snapshot,
};

/// Reads `path`, decodes it in the format its first bytes announce and
/// validates it as restore would; returns the format, the snapshot and its
/// summary, or a one-line reason.
pub fn check_file(
    path: &Path,
) -> Result<(SnapshotFormat, StreamSnapshot, SnapshotSummary), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    check_bytes(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// [`check_file`] on bytes already in memory.
pub fn check_bytes(
    bytes: &[u8],
) -> Result<(SnapshotFormat, StreamSnapshot, SnapshotSummary), String> {
    let format = detect_format(bytes).ok_or("neither a JSON nor a binary snapshot")?;
    let snapshot = match format {
        SnapshotFormat::Json => decode_json_slice(bytes).map_err(|e| e.to_string())?,
        SnapshotFormat::Binary => {
            let mut sink = CollectSink::new();
            decode_binary(bytes, &mut sink, &DecodeLimits::default()).map_err(|e| e.to_string())?;
            sink.into_snapshot()
        }
    };
    let summary = validate_snapshot(&snapshot).map_err(|e| e.to_string())?;
    Ok((format, snapshot, summary))
}
