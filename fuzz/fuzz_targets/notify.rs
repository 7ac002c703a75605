//! Arbitrary text as a `notify` configuration and as outbox lines, through the channels'
//! parser and the outbox's fold and schedule.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_notify(data));
