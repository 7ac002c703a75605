//! Fuzzes the journal reader: arbitrary bytes must never panic it or make it accept a bad line.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::journal::fuzz_reader(data));
