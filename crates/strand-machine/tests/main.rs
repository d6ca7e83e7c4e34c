//! The integration tests of strand-machine, one module per file of `tests/`, in
//! one binary (`alloc_per_append` is a binary of its own: it installs a
//! counting global allocator).

mod codec_common;
mod prop_common;

mod codec_bad_input;
mod codec_format;
mod codec_roundtrip;
mod command_display;
mod command_variants;
mod command_wire;
mod corrected_profile;
mod corrected_receipts;
mod error_wire;
mod forks;
mod listing;
mod plan_largest;
mod prop_corrected;
mod prop_forks;
mod prop_no_panic;
mod prop_restore_equivalence;
mod read_hot;
mod response_wire;
mod restore_hot;
