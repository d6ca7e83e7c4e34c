//! Per-bucket usage counters, quotas and their admission checks (spec area
//! 01 §12 and 03 §8–9).
//!
//! This crate owns the usage ledger's arithmetic. It must not know about
//! stream internals: callers hand it byte and record counts.
//!
//! * [`BucketUsage`], [`BucketQuota`] and their snapshot records are the wire
//!   types of 01 §12.1.
//! * [`UsageLedger`] holds one group's usage entries and quota records. It
//!   has one method per accounting event (create, append, retention,
//!   removal), the quota admission checks, sorted reports, and
//!   [`UsageLedger::restore`] for snapshot restore and import (07 §5.4).

#![deny(missing_docs)]

// The README's examples run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod admission;
mod ledger;
mod quota;
mod restore;
mod usage;

pub use ledger::UsageLedger;
pub use quota::{BucketQuota, BucketQuotaSnapshot, QuotaExceeded, QuotaLimit};
pub use usage::{BucketUsage, BucketUsageSnapshot, COMMITTED_WRITE_UNIT_BYTES, write_units};
