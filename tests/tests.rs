mod cli;
mod conformance;
mod determinism;
mod fuzz_corpus;
mod lifecycle_model;
mod purity;
