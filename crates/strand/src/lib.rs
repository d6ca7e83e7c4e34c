//! strand: a deterministic Durable Streams state machine, wire-compatible
//! with `ursula-stream` 0.5.0-patch1.
//!
//! This facade only re-exports the public API of the layered crates under
//! the reference's names. It holds no logic of its own.
