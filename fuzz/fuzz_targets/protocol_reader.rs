//! Arbitrary workflow output, split at an arbitrary point, through the protocol reader.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::work::protocol::fuzz_reader(data));
