//! JSON record boundaries and the per-stream record index (spec area 02
//! §1–4).
//!
//! This crate owns how byte offsets map to record numbers. It must not know
//! about buckets, producers, integrity, usage or the state machine.
