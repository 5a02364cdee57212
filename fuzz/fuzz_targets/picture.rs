#![no_main]
//! libFuzzer entry for [`cake::fuzz_targets::picture`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| cake::fuzz_targets::picture(data));
