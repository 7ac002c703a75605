//! Arbitrary child output through the log framer and the log line parser.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::harness::logline::fuzz_logline(data));
