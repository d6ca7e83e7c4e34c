//! The integration tests of strand-raft, one module per file of `tests/`, in
//! one binary.

mod durable;
mod exact_snapshot;
mod forget;
