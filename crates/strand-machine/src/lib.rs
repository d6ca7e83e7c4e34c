//! The deterministic Durable Streams state machine: commands in, responses
//! and snapshots out (spec areas 03–07).
//!
//! This crate composes the lower crates (model, records, integrity, usage,
//! snapshot). It must not know about transports, files or clocks: time only
//! arrives inside commands, and no output depends on hash-map order.
//!
//! Modules by concern: `command` and `response` (the replicated command
//! and its answers), `machine` (the state every handler works on),
//! `dispatch` (apply and the TTL sweep hook), `scope` (shared checks that
//! map to error responses), `buckets`, `create`, `stream_ops` and
//! `removal` (lifecycle), `fork` (forks: pins, creation, unpins),
//! `append`, `ends`, `batch` and `transaction` (writes, record ends and
//! producers), `flush` (cold tier and planning), `retention` (visible
//! snapshots and retention), `queries` and `read` (queries), `persist`
//! (snapshot, restore, import) and `codec` (a machine to and from either
//! snapshot format), and the state types `registry`, `slot`, `hot`,
//! `cold`, `gc`, `ttl`, `producers`.

#![deny(missing_docs)]

// The README's examples run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod append;
mod batch;
mod buckets;
mod codec;
mod cold;
mod command;
mod create;
mod dispatch;
mod ends;
mod flush;
mod fork;
mod gc;
mod hot;
mod invariants;
mod machine;
mod path_index;
mod persist;
mod producers;
mod queries;
mod read;
mod registry;
mod removal;
mod response;
mod retention;
mod scope;
mod slot;
mod stream_ops;
mod transaction;
mod ttl;

pub use codec::{
    RestoreError, restore_from, restore_from_slice, restore_from_with_limits, write_snapshot,
};
pub use command::StreamCommand;
pub use flush::ColdFlushSlices;
pub use fork::ForkProbe;
#[doc(hidden)]
pub use invariants::set_debug_invariant_checks;
pub use machine::StreamStateMachine;
pub use persist::MachineRestorer;
pub use queries::ListedStream;
pub use read::HotRead;
pub use response::{StreamErrorCode, StreamErrorContext, StreamResponse};
pub use strand_snapshot::SnapshotTail;
