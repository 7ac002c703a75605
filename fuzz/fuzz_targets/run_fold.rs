//! Arbitrary workflow output through the reader and the run fold, ended in an arbitrary way.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::work::run::fuzz_run_fold(data));
