//! libFuzzer entry point of `checks/http_request.rs` (which says what it checks;
//! `tests/tests/fuzz_regressions.rs` replays saved inputs through the same
//! code).

#![no_main]

#[path = "../checks/http_request.rs"]
mod http_request;

libfuzzer_sys::fuzz_target!(|data: &[u8]| http_request::check(data));
