//! The real `harn` binary against real temporary directories.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The `harn` binary, built with the test-only `planted-bugs` feature for this test's
/// profile. `cargo test --workspace` has already built it; asking cargo again is a no-op then,
/// and makes `cargo test --test integration` alone, or a plain `cargo build` in between, safe.
///
/// `HARN_TEST_BIN` names another binary to test instead (an earlier build, to see which
/// tests it fails).
pub fn harn_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("HARN_TEST_BIN") {
            return PathBuf::from(bin);
        }
        let exe = std::env::current_exe().expect("test executable path");
        let profile_dir = exe.parent().and_then(Path::parent).expect("target profile directory");
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--quiet", "-p", "harn", "--features", "planted-bugs"]);
        build.current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("cargo runs");
        assert!(status.success(), "building harn for the tests failed");
        let bin = profile_dir.join(format!("harn{}", std::env::consts::EXE_SUFFIX));
        assert!(bin.exists(), "{} is missing after the build", bin.display());
        bin
    })
    .clone()
}

/// Runs `harn args…` in `cwd`.
pub fn harn(cwd: &Path, args: &[&str]) -> Output {
    Command::new(harn_bin()).args(args).current_dir(cwd).output().expect("harn runs")
}

/// Runs `harn args… --root root`.
pub fn harn_at(root: &Path, args: &[&str]) -> Output {
    Command::new(harn_bin()).args(args).arg("--root").arg(root).output().expect("harn runs")
}

/// A command's stdout and stderr, for assertion messages.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A command's stdout as one JSON document.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("JSON: {}", text(out)))
}

#[test]
fn sim_run_reports_a_clean_seed_and_writes_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        harn(dir.path(), &["sim", "run", "--seed", "3", "--steps", "200", "--trace", "t.jsonl"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("every invariant held"));
    let replayed = harn(dir.path(), &["sim", "replay", "t.jsonl"]);
    assert!(replayed.status.success(), "{}", text(&replayed));
    assert!(text(&replayed).contains("every state hash matches"));
}

#[test]
fn a_planted_bug_is_found_by_the_sweep_and_replays_to_the_same_step() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "sim",
        "seeds",
        "--seeds",
        "0..40",
        "--steps",
        "300",
        "--inject-bug",
        "lying-dir-sync",
        "--trace-dir",
        "fails",
    ];
    let out = harn(dir.path(), &args);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report = text(&out);
    assert!(report.contains("FAIL seed"), "{report}");
    let first =
        std::fs::read_dir(dir.path().join("fails")).unwrap().next().unwrap().unwrap().path();
    let trace = std::fs::read_to_string(&first).unwrap();
    let end: serde_json::Value = serde_json::from_str(trace.lines().last().unwrap()).unwrap();
    let step = end["violation"]["step"].as_u64().expect("the trace records the failing step");
    let replayed = harn(dir.path(), &["sim", "replay", first.to_str().unwrap()]);
    assert!(replayed.status.success(), "{}", text(&replayed));
    let said = text(&replayed);
    assert!(said.contains("every state hash matches"), "{said}");
    assert!(said.contains(&format!("reproduced: step {step}:")), "{said}");
}

#[test]
fn without_the_planted_bug_the_same_seeds_pass() {
    let dir = tempfile::tempdir().unwrap();
    let out = harn(dir.path(), &["sim", "seeds", "--seeds", "0..40", "--steps", "300", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["seeds"], 40);
    assert_eq!(doc["failures"].as_array().unwrap().len(), 0);
}

#[test]
fn minimize_shrinks_a_failing_trace() {
    let dir = tempfile::tempdir().unwrap();
    // A seed whose planted bug shows late, so there is something to shrink.
    let args = [
        "sim",
        "seeds",
        "--seeds",
        "0..60",
        "--steps",
        "400",
        "--inject-bug",
        "lost-exit-report",
        "--json",
    ];
    let sweep: serde_json::Value = serde_json::from_slice(&harn(dir.path(), &args).stdout).unwrap();
    let late = sweep["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["violation"]["step"].as_u64() > Some(30));
    let seed = late.expect("some seed fails late")["seed"].to_string();
    let run = harn(
        dir.path(),
        &[
            "sim",
            "run",
            "--seed",
            &seed,
            "--steps",
            "400",
            "--inject-bug",
            "lost-exit-report",
            "--trace",
            "big.trace.jsonl",
        ],
    );
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    let out = harn(dir.path(), &["sim", "minimize", "big.trace.jsonl", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (before, after) = (&doc["before"], &doc["after"]);
    let count = |v: &serde_json::Value| v["fault_classes"].as_array().unwrap().len();
    let sizes = |v: &serde_json::Value| {
        (v["steps"].as_u64().unwrap(), v["harnesses"].as_u64().unwrap(), count(v) as u64)
    };
    let (b, a) = (sizes(before), sizes(after));
    assert!(a.0 <= b.0 && a.1 <= b.1 && a.2 <= b.2, "minimizing grew the run: {doc}");
    assert!(a != b, "nothing shrank: {doc}");
    assert!(dir.path().join("big.min.trace.jsonl").exists());
    let replayed = harn(dir.path(), &["sim", "replay", "big.min.trace.jsonl"]);
    assert!(text(&replayed).contains("reproduced:"), "{}", text(&replayed));
}

#[test]
fn bad_input_is_refused_with_exit_2_and_names_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let out = harn(dir.path(), &["sim", "seeds", "--seeds", "9..3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("empty"), "{}", text(&out));
    std::fs::write(
        dir.path().join("junk.jsonl"),
        "{\"format\":\"harn-sim-trace\",\"version\":1}\n",
    )
    .unwrap();
    let out = harn(dir.path(), &["sim", "replay", "junk.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("junk.jsonl:line 1"), "{}", text(&out));
    let out = harn(dir.path(), &["sim", "replay", "missing.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "bad input writes nothing");
}

#[test]
fn sim_day_prints_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = harn(dir.path(), &["sim", "day", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["virtual_hours"], 24);
    assert!(doc["steps"].as_u64().unwrap() > 50, "{doc}");
    assert!(!doc["harnesses"].as_array().unwrap().is_empty());
    assert!(doc["violation"].is_null(), "{doc}");
}

/// Every subcommand path of the command line, from clap's own definition.
fn verb_paths(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let mut path = prefix.to_vec();
        path.push(sub.get_name().to_owned());
        out.push(path.clone());
        verb_paths(sub, &path, out);
    }
}

#[test]
fn every_verb_has_help() {
    use clap::CommandFactory;
    let dir = tempfile::tempdir().unwrap();
    let mut verbs = Vec::new();
    verb_paths(&harn::cli::Cli::command(), &[], &mut verbs);
    assert!(verbs.len() > 50, "{verbs:?}");
    assert!(verbs.iter().any(|v| v == &["dash"]), "{verbs:?}");
    for verb in verbs {
        let mut args: Vec<&str> = verb.iter().map(String::as_str).collect();
        args.push("--help");
        let out = harn(dir.path(), &args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("Usage:"), "{args:?}: {}", text(&out));
    }
    let out = harn(dir.path(), &["completions", "bash"]);
    assert!(text(&out).contains("harn"));
}

#[test]
fn persist_before_act_bugs_planted_in_the_core_are_found_at_the_step_they_happen() {
    let bugs = [
        ("spawn-before-persist", "persist-before-spawn"),
        ("ack-before-persist", "persist-before-ack"),
        ("skip-reclaim", "no-orphans"),
        ("second-typist", "attach-as-allowed"),
        ("term-without-hangup", "hangup-before-term"),
    ];
    for (bug, invariant) in bugs {
        let dir = tempfile::tempdir().unwrap();
        let args =
            ["sim", "seeds", "--seeds", "0..40", "--steps", "400", "--inject-bug", bug, "--json"];
        let out = harn(dir.path(), &args);
        assert_eq!(out.status.code(), Some(1), "{bug}: {}", text(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let failures = doc["failures"].as_array().unwrap();
        assert!(!failures.is_empty(), "{bug} went unnoticed");
        for f in failures {
            let found = f["violation"]["invariant"].as_str().unwrap();
            // A second live instance shows up as an orphan or as two pids for one harness.
            let same = found == invariant || (bug == "skip-reclaim" && found == "single-instance");
            assert!(same, "{bug} was reported as {found}: {f}");
        }
    }
}

#[test]
fn the_example_runs_a_work_item_to_review_then_a_goal_to_success() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("example");
    let out = Command::new(harn_bin()).args(["example", "--root"]).arg(&root).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("$ harn run show wf-"), "{text}");
    assert!(text.contains("proof      succeeded"), "{text}");
    assert!(text.contains("state      in_review"), "{text}");
    assert!(text.contains("cycle 1: ready/run"), "each cycle's decisions are printed: {text}");
    assert!(text.contains("stop: succeeded"), "the goal succeeds: {text}");
    let again = Command::new(harn_bin()).args(["example", "--root"]).arg(&root).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "an existing root is refused");
}

#[test]
fn sim_work_sweeps_seeds_and_reports_what_happened() {
    let out = Command::new(harn_bin()).args(["sim", "work", "--seeds", "0..20", "--json"]).output();
    let out = out.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["failures"].as_array().map(Vec::len), Some(0), "{doc}");
    assert!(doc["crashes"].as_u64() > Some(0) && doc["resumed"].as_u64() > Some(0), "{doc}");
}

#[test]
fn the_work_goal_and_service_worlds_trace_replay_and_minimize_a_failing_seed() {
    let dir = tempfile::tempdir().unwrap();
    for world in ["work", "goals", "service"] {
        let args = ["sim", world, "--seeds", "0..2", "--inject-bug", "lying-dir-sync", "--json"];
        let out = harn(dir.path(), &args);
        assert_eq!(out.status.code(), Some(1), "{world}: {}", text(&out));
        let doc = json(&out);
        let traced = doc["failures"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|f| f["trace"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("{world}: no failing seed has a trace: {doc}"));
        assert!(traced.starts_with("sim-failures/"), "{world}: {traced}");
        let replayed = harn(dir.path(), &["sim", "replay", &traced]);
        assert!(replayed.status.success(), "{world}: {}", text(&replayed));
        assert!(text(&replayed).contains("every state hash matches"), "{}", text(&replayed));
        assert!(text(&replayed).contains("reproduced:"), "{}", text(&replayed));
        let out = harn(dir.path(), &["sim", "minimize", &traced, "--json"]);
        assert!(out.status.success(), "{world}: {}", text(&out));
        let doc = json(&out);
        let faulty = |v: &serde_json::Value| v["faulty"].as_u64().unwrap();
        assert!(faulty(&doc["after"]) < faulty(&doc["before"]), "{world}: nothing shrank: {doc}");
        let small = doc["trace"].as_str().unwrap().to_owned();
        assert!(small.ends_with(".min.trace.jsonl"), "{small}");
        let again = harn(dir.path(), &["sim", "replay", &small]);
        assert!(text(&again).contains("reproduced:"), "{world}: {}", text(&again));
    }
    // A trace whose recorded hashes were tampered with names the action that diverges.
    let file = dir.path().join("sim-failures/work-seed-0.trace.jsonl");
    let tampered: Vec<String> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|line| {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v["action"] == 3 {
                v["hash"] = (v["hash"].as_u64().unwrap() ^ 1).into();
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&file, tampered.join("\n")).unwrap();
    let replayed = harn(dir.path(), &["sim", "replay", "sim-failures/work-seed-0.trace.jsonl"]);
    assert_eq!(replayed.status.code(), Some(1), "{}", text(&replayed));
    assert!(text(&replayed).contains("diverges at action 3"), "{}", text(&replayed));
}

#[test]
fn a_bug_that_does_not_apply_to_a_world_is_refused() {
    let out = Command::new(harn_bin())
        .args(["sim", "goals", "--seeds", "0..1", "--inject-bug", "second-typist"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("only lying-dir-sync, manifest-before-lease apply"),
        "{}",
        text(&out)
    );
}

/// Each driver's planted bug is found by its world from the command line, as its tests find
/// it: the work world's resume recorded as a start and engine fault taken for an exit, the
/// goal world's manifest written before its lease.
#[test]
fn the_drivers_planted_bugs_are_found_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    for (world, bug, seeds) in [
        ("work", "resume-as-start", "0..20"),
        ("work", "fault-as-exit", "0..100"),
        ("goals", "manifest-before-lease", "0..40"),
    ] {
        let args = ["sim", world, "--seeds", seeds, "--inject-bug", bug, "--json"];
        let out = harn(dir.path(), &args);
        assert_eq!(out.status.code(), Some(1), "{world} {bug}: {}", text(&out));
        assert!(!json(&out)["failures"].as_array().unwrap().is_empty(), "{world} {bug}");
    }
}
