//! Fuzz bytes choose the simulated world and drive its whole fault plan.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_sim::harness::seeds::fuzz_simulation(data));
