//! Goals over chains of arbitrary work histories through the goal projection and dispatch.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_goal_projection(data));
