//! cargo fuzz target: hintcheck::fuzz::framing (see src/fuzz.rs for what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hintcheck::fuzz::framing(data));
