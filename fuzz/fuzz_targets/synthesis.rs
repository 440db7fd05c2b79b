//! cargo fuzz target: hintcheck::fuzz::synthesis (see src/fuzz.rs for what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hintcheck::fuzz::synthesis(data));
