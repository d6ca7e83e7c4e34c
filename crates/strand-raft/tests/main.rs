//! The integration tests of strand-raft, one module per former test file, in
//! one binary.

mod durable;
mod exact_snapshot;
