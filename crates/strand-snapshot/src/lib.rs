//! The group snapshot wire types and their structural validation (spec area
//! 07).
//!
//! This crate owns what a snapshot looks like and which snapshots are
//! well-formed. It must not know how a state machine is built from one.
