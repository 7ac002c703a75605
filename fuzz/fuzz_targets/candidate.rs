//! Arbitrary bytes as `git diff-tree -z --raw` output about a run's work, through its parser
//! and the rules of what never lands and what waits for a person.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| harn_core::fuzzing::fuzz_candidate(data));
