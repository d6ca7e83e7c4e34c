//! The reference's JSON encoding, written field by field.

use std::borrow::Borrow;
use std::io::{Read, Write};

use serde::Serialize;

use super::error::{CodecError, DecodeError};
use crate::wire::{StreamSnapshot, StreamSnapshotEntry};

fn field<W: Write, T: Serialize + ?Sized>(
    w: &mut W,
    key: &[u8],
    value: &T,
) -> Result<(), CodecError> {
    w.write_all(key)?;
    serde_json::to_writer(&mut *w, value)?;
    Ok(())
}

/// Writes a snapshot as the reference's compact serde JSON: the bytes are
/// identical to `serde_json::to_vec(&snapshot)` of the same snapshot with
/// `entries` as its `streams`.
///
/// Group-level fields come from `head` (its `streams` are ignored); the
/// entries are serialized one at a time as they are produced. The writer is
/// flushed at the end; wrap an unbuffered writer in a `BufWriter`.
///
/// # Errors
///
/// [`CodecError::Io`] when the writer fails.
pub fn encode_json<W, I>(mut w: W, head: &StreamSnapshot, entries: I) -> Result<(), CodecError>
where
    W: Write,
    I: IntoIterator,
    I::Item: Borrow<StreamSnapshotEntry>,
{
    // Destructured so that a new snapshot field fails to compile here; the
    // keys are written in declaration order, like the derived impl.
    let StreamSnapshot {
        buckets,
        erased_buckets,
        streams: _,
        pending_cold_gc,
        next_cold_gc_seq,
        shared_cold_object_owners,
        bucket_usage,
        bucket_quotas,
    } = head;
    field(&mut w, b"{\"buckets\":", buckets)?;
    field(&mut w, b",\"erased_buckets\":", erased_buckets)?;
    w.write_all(b",\"streams\":[")?;
    for (i, entry) in entries.into_iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        serde_json::to_writer(&mut w, entry.borrow())?;
    }
    w.write_all(b"]")?;
    field(&mut w, b",\"pending_cold_gc\":", pending_cold_gc)?;
    field(&mut w, b",\"next_cold_gc_seq\":", next_cold_gc_seq)?;
    field(
        &mut w,
        b",\"shared_cold_object_owners\":",
        shared_cold_object_owners,
    )?;
    field(&mut w, b",\"bucket_usage\":", bucket_usage)?;
    field(&mut w, b",\"bucket_quotas\":", bucket_quotas)?;
    w.write_all(b"}")?;
    w.flush()?;
    Ok(())
}

/// Reads a JSON snapshot (the whole input is buffered, then parsed).
///
/// # Errors
///
/// [`DecodeError::Io`] when the reader fails, [`DecodeError::Json`] when the
/// input is not a `StreamSnapshot` in JSON.
pub fn decode_json<R: Read>(mut r: R) -> Result<StreamSnapshot, DecodeError> {
    let mut text = Vec::new();
    r.read_to_end(&mut text)?;
    serde_json::from_slice(&text).map_err(DecodeError::Json)
}
