//! libFuzzer entry point of `checks/command_sequence.rs` (which says what it checks;
//! `tests/tests/fuzz_regressions.rs` replays saved inputs through the same
//! code).

#![no_main]

#[path = "../checks/command_sequence.rs"]
mod command_sequence;

libfuzzer_sys::fuzz_target!(|data: &[u8]| command_sequence::check(data));
