//! The workspace-level tests, one module per file of `tests/`, in one binary:
//! `conformance` (the golden traces), `legacy` (the reference's snapshots),
//! `public_api` and `fuzz_regressions`.

mod conformance;
mod fuzz_regressions;
mod legacy;
mod public_api;
