//! The integration tests of strand-engine, one module per file of `tests/`, in
//! one binary.

mod engine;
mod forks;
