//! Arbitrary policy files (JSONC) through parsing, checking and freezing.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::work::policy::fuzz_policy(data));
