//! The reference's JSON encoding, written field by field, and its decoder.
//!
//! Both directions are byte-for-byte serde_json's for [`StreamSnapshot`];
//! they only take a faster path for the byte vectors (hot payloads and
//! visible-snapshot payloads), which dominate large snapshots.

use std::borrow::Borrow;
use std::io::{Read, Write};

use serde::Serialize;
use strand_model::StreamVisibleSnapshot;

use super::byte_array::write_byte_array;
use super::error::{CodecError, DecodeError};
use crate::wire::{StreamSnapshot, StreamSnapshotEntry};

fn field<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    key: &[u8],
    value: &T,
) -> Result<(), CodecError> {
    out.extend_from_slice(key);
    serde_json::to_writer(&mut *out, value)?;
    Ok(())
}

/// One entry as serde_json writes it, with the payloads written directly.
fn write_entry(out: &mut Vec<u8>, entry: &StreamSnapshotEntry) -> Result<(), CodecError> {
    // Destructured so that a new entry field fails to compile here; keys are
    // written in declaration order, like the derived impl.
    let StreamSnapshotEntry {
        metadata,
        attrs,
        hot_start_offset,
        payload,
        hot_segments,
        cold_frontier_offset,
        cold_index_generation,
        cold_chunks,
        external_segments,
        message_records,
        record_index,
        integrity,
        retained_offset,
        visible_snapshot,
        producer_states,
        cold_raw_frontier_offset,
        fork,
    } = entry;
    field(out, b"{\"metadata\":", metadata)?;
    field(out, b",\"attrs\":", attrs)?;
    field(out, b",\"hot_start_offset\":", hot_start_offset)?;
    out.extend_from_slice(b",\"payload\":");
    write_byte_array(out, payload);
    field(out, b",\"hot_segments\":", hot_segments)?;
    field(out, b",\"cold_frontier_offset\":", cold_frontier_offset)?;
    field(out, b",\"cold_index_generation\":", cold_index_generation)?;
    field(out, b",\"cold_chunks\":", cold_chunks)?;
    field(out, b",\"external_segments\":", external_segments)?;
    field(out, b",\"message_records\":", message_records)?;
    field(out, b",\"record_index\":", record_index)?;
    field(out, b",\"integrity\":", integrity)?;
    field(out, b",\"retained_offset\":", retained_offset)?;
    out.extend_from_slice(b",\"visible_snapshot\":");
    match visible_snapshot {
        None => out.extend_from_slice(b"null"),
        Some(StreamVisibleSnapshot {
            offset,
            content_type,
            payload,
            digest,
        }) => {
            field(out, b"{\"offset\":", offset)?;
            field(out, b",\"content_type\":", content_type)?;
            out.extend_from_slice(b",\"payload\":");
            write_byte_array(out, payload);
            field(out, b",\"digest\":", digest)?;
            out.push(b'}');
        }
    }
    field(out, b",\"producer_states\":", producer_states)?;
    if let Some(raw) = cold_raw_frontier_offset {
        field(out, b",\"cold_raw_frontier_offset\":", raw)?;
    }
    if let Some(fork) = fork {
        field(out, b",\"fork\":", fork)?;
    }
    out.push(b'}');
    Ok(())
}

/// Writes a snapshot as the reference's compact serde JSON: the bytes are
/// identical to `serde_json::to_vec(&snapshot)` of the same snapshot with
/// `entries` as its `streams`.
///
/// Group-level fields come from `head` (its `streams` are ignored); the
/// entries are serialized one at a time as they are produced. The writer is
/// flushed at the end.
///
/// # Errors
///
/// [`CodecError::Io`] when the writer fails.
pub fn encode_json<W, I>(w: W, head: &StreamSnapshot, entries: I) -> Result<(), CodecError>
where
    W: Write,
    I: IntoIterator,
    I::Item: Borrow<StreamSnapshotEntry>,
{
    encode_json_driven(w, head, |emit| {
        for entry in entries {
            emit(entry.borrow())?;
        }
        Ok(())
    })
}

/// Like [`encode_json`], with the stream entries written into one entry
/// that is reused, as [`encode_binary_reusing`](super::encode_binary_reusing)
/// does: `fill` overwrites it with the next stream's entry and returns
/// `true` (it gets `None` the first time), or returns `false` when there
/// are no more. The bytes are the same as [`encode_json`]'s for the same
/// entries.
///
/// # Errors
///
/// As [`encode_json`].
pub fn encode_json_reusing<W, F>(w: W, head: &StreamSnapshot, mut fill: F) -> Result<(), CodecError>
where
    W: Write,
    F: FnMut(&mut Option<StreamSnapshotEntry>) -> bool,
{
    encode_json_driven(w, head, |emit| {
        let mut entry = None;
        while fill(&mut entry) {
            if let Some(entry) = &entry {
                emit(entry)?;
            }
        }
        Ok(())
    })
}

/// The JSON writer: the group-level fields around the entries `drive`
/// hands to the function it is given.
fn encode_json_driven<W, D>(mut w: W, head: &StreamSnapshot, drive: D) -> Result<(), CodecError>
where
    W: Write,
    D: FnOnce(
        &mut dyn FnMut(&StreamSnapshotEntry) -> Result<(), CodecError>,
    ) -> Result<(), CodecError>,
{
    let StreamSnapshot {
        buckets,
        erased_buckets,
        streams: _,
        pending_cold_gc,
        next_cold_gc_seq,
        shared_cold_object_owners,
        bucket_usage,
        bucket_quotas,
        machine_options,
        fork_unpins,
        next_fork_pin,
    } = head;
    let mut out = Vec::with_capacity(64 * 1024);
    field(&mut out, b"{\"buckets\":", buckets)?;
    field(&mut out, b",\"erased_buckets\":", erased_buckets)?;
    out.extend_from_slice(b",\"streams\":[");
    let mut first = true;
    drive(&mut |entry| {
        if !first {
            out.push(b',');
        }
        first = false;
        write_entry(&mut out, entry)?;
        if out.len() >= 60 * 1024 {
            w.write_all(&out)?;
            out.clear();
        }
        Ok(())
    })?;
    out.push(b']');
    field(&mut out, b",\"pending_cold_gc\":", pending_cold_gc)?;
    field(&mut out, b",\"next_cold_gc_seq\":", next_cold_gc_seq)?;
    field(
        &mut out,
        b",\"shared_cold_object_owners\":",
        shared_cold_object_owners,
    )?;
    field(&mut out, b",\"bucket_usage\":", bucket_usage)?;
    field(&mut out, b",\"bucket_quotas\":", bucket_quotas)?;
    if let Some(options) = machine_options {
        field(&mut out, b",\"machine_options\":", options)?;
    }
    if !fork_unpins.is_empty() {
        field(&mut out, b",\"fork_unpins\":", fork_unpins)?;
    }
    if *next_fork_pin != 0 {
        field(&mut out, b",\"next_fork_pin\":", next_fork_pin)?;
    }
    out.push(b'}');
    w.write_all(&out)?;
    w.flush()?;
    Ok(())
}

/// Parses a JSON snapshot held in memory; same result as
/// `serde_json::from_slice::<StreamSnapshot>`, faster on large payloads.
///
/// A single-pass reader handles the snapshot and entry objects itself (byte
/// vectors parsed directly from the text, every other value by serde_json);
/// on anything it does not handle, or any error, the input is parsed again
/// by serde_json, whose verdict (value or error) is returned.
///
/// # Errors
///
/// [`DecodeError::Json`] when the input is not a `StreamSnapshot` in JSON.
pub fn decode_json_slice(text: &[u8]) -> Result<StreamSnapshot, DecodeError> {
    match super::json_reader::read_snapshot(text) {
        Some(snapshot) => Ok(snapshot),
        None => serde_json::from_slice(text).map_err(DecodeError::Json),
    }
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
    decode_json_slice(&text)
}
