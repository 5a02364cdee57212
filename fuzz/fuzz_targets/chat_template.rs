#![no_main]
//! libFuzzer entry for [`cake::fuzz_targets::chat_template`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| cake::fuzz_targets::chat_template(data));
