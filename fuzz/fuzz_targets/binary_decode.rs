//! libFuzzer entry point of `checks/binary_decode.rs` (which says what it checks;
//! `tests/tests/fuzz_regressions.rs` replays saved inputs through the same
//! code).

#![no_main]

#[path = "../checks/binary_decode.rs"]
mod binary_decode;

libfuzzer_sys::fuzz_target!(|data: &[u8]| binary_decode::check(data));
