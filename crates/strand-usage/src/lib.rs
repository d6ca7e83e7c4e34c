//! Per-bucket usage counters, quotas and their admission checks (spec area
//! 01 §12 and 03 §8–9).
//!
//! This crate owns the usage ledger's arithmetic. It must not know about
//! stream internals: callers hand it byte and record counts.
