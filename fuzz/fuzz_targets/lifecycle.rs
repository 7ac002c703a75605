//! Arbitrary input sequences against one harness's lifecycle machine, invariants after each.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_lifecycle(data));
