//! The deterministic Durable Streams state machine: commands in, responses
//! and snapshots out (spec areas 03–07).
//!
//! This crate composes the lower crates. It must not know about transports,
//! files or clocks: time only arrives inside commands.
