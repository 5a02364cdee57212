#![no_main]
//! libFuzzer entry for [`cake::fuzz_targets::torch_pickle`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| cake::fuzz_targets::torch_pickle(data));
