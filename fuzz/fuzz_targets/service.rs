//! The supervisor service's scheduler, sweep decisions and watcher under arbitrary times,
//! reads, outcomes, hints, stops and restarts.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_service(data));
