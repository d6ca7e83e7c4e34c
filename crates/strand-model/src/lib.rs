//! Identifiers, stream metadata and the plain value types that cross strand's
//! wire: producers, cold and external references, GC entries, and the
//! read/plan results.
//!
//! This crate owns the exact serde shapes of those types (spec area 01). It
//! knows nothing about how streams change: no record index, no integrity
//! hashing, no usage accounting, no state machine.
