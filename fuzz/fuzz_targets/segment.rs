//! Arbitrary inputs and wakes against one run segment's machine, invariants after each.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_segment(data));
