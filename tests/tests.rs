//! The integration tests, one module per area, built into one binary so the real `harn`
//! is linked once.

mod agent_presets;
mod bounded;
mod charging;
mod cli;
mod completions;
mod conformance;
mod containment;
mod dash;
mod determinism;
mod forgery;
mod frozen;
mod fuzz_corpus;
mod harness_daemon;
mod harness_faults;
mod harness_identity;
mod harness_logs;
mod init;
mod journals;
mod lifecycle_model;
mod listing;
mod planted;
mod private_files;
mod purity;
mod readers;
mod real_agents;
mod root_discovery;
mod run_processes;
mod service;
mod supervisor;
mod tidy;
mod work;
mod work_agents;
mod work_approval;
mod work_run;
mod worktree;
