//! Arbitrary text as a cluster's configuration and as the engine's node list, through their
//! parsers and the pre-flight's verdict.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_cluster_config(data));
