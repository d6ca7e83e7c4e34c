//! The integration tests of strand-server, one module per file of `tests/`, in
//! one binary: `common` serves an in-process server (and has the one poll
//! helper, `eventually`), `process` runs the `strand-server` binary.

mod common;
mod process;

mod auth;
mod bad_input;
mod binary;
mod bucketed;
mod cluster;
mod cluster_segments;
mod cold;
mod cold_durable;
mod cold_s3;
mod config;
mod console;
mod faults;
mod forks;
mod invariant;
mod lean;
mod listing;
mod live;
mod metrics;
mod partition;
mod protocol;
mod safety;
mod subscriptions;
mod tls;
