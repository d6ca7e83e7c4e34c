//! The workspace-level tests, one module per file of `tests/`, in one binary:
//! `conformance` (the golden traces), `legacy` (the reference's snapshots),
//! `public_api`, `fuzz_regressions` and `spec_citations` (every `spec NN §X`
//! of the sources names a section of the vendored `docs/spec`).

mod conformance;
mod fuzz_regressions;
mod legacy;
mod public_api;
mod spec_citations;
