//! Replays the committed fuzz corpus through the fuzz bodies on stable, so every target's
//! known inputs keep passing without cargo-fuzz.

use std::path::Path;

fn replay(target: &str, body: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the {target} corpus is empty");
    for file in files {
        let data = std::fs::read(&file).expect("readable corpus file");
        let outcome = std::panic::catch_unwind(|| body(&data));
        assert!(outcome.is_ok(), "{target}: {} fails", file.display());
    }
}

#[test]
fn journal_reader_corpus() {
    replay("journal_reader", harn_core::journal::fuzz_reader);
}

#[test]
fn lifecycle_corpus() {
    replay("lifecycle", harn_core::fuzzing::fuzz_lifecycle);
}

#[test]
fn simulator_corpus() {
    replay("simulator", harn_sim::harness::seeds::fuzz_simulation);
}

#[test]
fn work_projection_corpus() {
    replay("work_projection", harn_core::fuzzing::fuzz_work_projection);
}

#[test]
fn goal_projection_corpus() {
    replay("goal_projection", harn_core::fuzzing::fuzz_goal_projection);
}

#[test]
fn segment_corpus() {
    replay("segment", harn_core::fuzzing::fuzz_segment);
}

#[test]
fn service_corpus() {
    replay("service", harn_core::fuzzing::fuzz_service);
}

#[test]
fn proposal_corpus() {
    replay("proposal", harn_core::goal::plan::fuzz_proposal);
}

#[test]
fn protocol_reader_corpus() {
    replay("protocol_reader", harn_core::work::protocol::fuzz_reader);
}

#[test]
fn run_fold_corpus() {
    replay("run_fold", harn_core::work::run::fuzz_run_fold);
}

#[test]
fn policy_corpus() {
    replay("policy", harn_core::work::policy::fuzz_policy);
}

#[test]
fn logline_corpus() {
    replay("logline", harn_core::harness::logline::fuzz_logline);
}

#[test]
fn agent_output_corpus() {
    replay("agent_output", harn_core::fuzzing::fuzz_agent_output);
}

#[test]
fn cluster_config_corpus() {
    replay("cluster_config", harn_core::fuzzing::fuzz_cluster_config);
}

#[test]
fn notify_corpus() {
    replay("notify", harn_core::fuzzing::fuzz_notify);
}

#[test]
fn remote_wire_corpus() {
    replay("remote_wire", harn_core::fuzzing::fuzz_remote_wire);
}

#[test]
fn web_corpus() {
    replay("web", harn_core::fuzzing::fuzz_web);
}

#[test]
fn candidate_corpus() {
    replay("candidate", harn_core::fuzzing::fuzz_candidate);
}
