//! libFuzzer entry point of `checks/json_restore.rs` (which says what it checks;
//! `tests/tests/fuzz_regressions.rs` replays saved inputs through the same
//! code).

#![no_main]

#[path = "../checks/json_restore.rs"]
mod json_restore;

libfuzzer_sys::fuzz_target!(|data: &[u8]| json_restore::check(data));
