//! Shared helpers for strand's workspace-level tests (conformance replay,
//! legacy snapshots, format snapshots). Only the integration tests under
//! `tests/tests/` use this crate.
