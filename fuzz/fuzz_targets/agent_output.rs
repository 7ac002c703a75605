//! Arbitrary output of an agent program, in each dialect, through its reader, the watchdog's
//! view of it and, for ACP, the client.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_agent_output(data));
