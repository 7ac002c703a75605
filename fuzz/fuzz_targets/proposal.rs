//! Arbitrary planner replies through proposal parsing and host-side validation.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::goal::plan::fuzz_proposal(data));
