//! Arbitrary lines as what a node and a coordinator say to each other over a remote
//! segment's step, through their parsers and back.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_remote_wire(data));
