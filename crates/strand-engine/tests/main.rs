//! The integration tests of strand-engine, one module per former test file,
//! in one binary.

mod engine;
mod forks;
