//! The integration tests of strand-usage, one module per file of `tests/`, in
//! one binary.

mod ledger_events;
mod properties;
mod quota_checks;
mod restore;
mod serde_shapes;
