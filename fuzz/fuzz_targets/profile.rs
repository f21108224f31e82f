//! Fuzz target `profile`: the checks of `tests/fuzz_regressions/checks.rs` (shared with the
//! regression tests that replay its found cases on stable Rust).
#![no_main]

#[path = "../../tests/fuzz_regressions/checks.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::profile(data));
