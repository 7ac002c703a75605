//! Arbitrary work histories through the history validator and the projection.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_work_projection(data));
