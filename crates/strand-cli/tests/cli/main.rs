//! Integration tests of the `strand` binary: each test runs the built
//! executable on fixture files (generated here, taken from the workspace's
//! legacy fixtures, or written by the reference into the conformance
//! traces) and checks exit codes, output and the files left behind.

#![allow(clippy::unwrap_used)]

mod common;
mod convert;
mod demo;
mod inspect;
mod live;
mod profile;
mod replay;
mod verify;
