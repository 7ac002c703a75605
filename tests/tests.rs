mod cli;
mod conformance;
mod determinism;
mod fuzz_corpus;
mod harness_daemon;
mod lifecycle_model;
mod purity;
mod work;
