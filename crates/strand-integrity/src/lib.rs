//! Per-stream integrity setsums (spec area 02 §5–7).
//!
//! This crate owns the hashed item layout and the live/evicted/total setsum
//! bookkeeping. It must not know about streams' ids, records, usage or the
//! state machine.
