//! The integration tests of strand-snapshot, one module per file of `tests/`,
//! in one binary; `common` builds the snapshots they share.

mod common;

mod accept;
mod codec_layout;
mod errors;
mod legacy;
mod no_panic;
mod wire_json;
