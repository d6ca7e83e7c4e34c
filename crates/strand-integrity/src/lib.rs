//! Per-stream integrity setsums (spec area 02 §5–7).
//!
//! This crate owns the hashed item layout and the live/evicted/total setsum
//! bookkeeping. It must not know about streams' ids, records, usage or the
//! state machine: the caller passes the id parts as an [`IntegrityDomain`].
//! The setsum arithmetic is the `setsum` 0.8 crate's (SHA3-256 items, eight
//! prime-field columns); with the default `asm` feature the items are hashed
//! by an assembly SHA3-256, with the same result.
//!
//! # Call protocol for the state machine
//!
//! Each stream slot owns one [`StreamIntegrity`]. `domain` below is
//! `IntegrityDomain::new(&id.bucket_id, id.affinity_key.as_deref(), &id.stream_id)`
//! for the slot's full `BucketStreamId`.
//!
//! | point | call |
//! |---|---|
//! | `CreateStream`, payload of length `L` | `StreamIntegrity::new()`, then if `L > 0` `append_inline(domain, 0, L, payload)` (one item for the whole payload, whatever its JSON lines) |
//! | `CreateExternal` | `StreamIntegrity::new()`, then `append_external(domain, 0, payload_len, s3_path, object_size)` |
//! | `Append`, non-empty body, after every check passed | `append_inline(domain, offset, next_offset, body)` |
//! | `Append` with empty body, `Close`, deduplicated retry, any error | nothing |
//! | `AppendExternal`, after every check passed | `append_external(domain, offset, next_offset, s3_path, object_size)` |
//! | `AppendBatch` / `append_batch_borrowed`, after every check passed | `append_inline_batch(domain, tail_before, payloads)` (one item per payload; or `append_inline` per item with its own `[offset, next_offset)`) |
//! | append transaction | save `let saved = slot.integrity;` (it is `Copy`) with the other undo data; on rollback `slot.integrity = saved;` |
//! | cold flush, compaction, publish snapshot | nothing |
//! | `AdvanceRetention` to `r` (prefix compaction step 4) | `evict_before(r)` (a no-op, kept for the protocol) |
//! | `snapshot()` entry / `integrity_snapshot(id)` | `snapshot(slot.retained_offset, metadata.tail_offset)` |
//! | restore / import, step 9 of the per-entry checks (after message records, before the duplicate-stream check) | `StreamIntegrity::restore(&entry.integrity)`; any `Err` → `StreamSnapshotError::IntegrityMismatch { stream_id }` |
//! | delete, expiry, purge | drop the slot's state; a recreated stream starts from `new()` |

#![deny(missing_docs)]

// The README's examples run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod hash;
mod hex;
mod item;
mod snapshot;
mod state;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod vectors;

pub use item::IntegrityDomain;
pub use snapshot::{EMPTY_SETSUM_HEX, StreamIntegritySnapshot};
pub use state::{IntegrityRestoreError, SetsumField, StreamIntegrity};
