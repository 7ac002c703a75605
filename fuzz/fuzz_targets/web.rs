//! Arbitrary text as a request to `harn web`'s door and router.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_web(data));
