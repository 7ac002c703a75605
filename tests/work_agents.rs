//! Agent calls through harnesses with the real binary: the shipped scripted harness answers,
//! a missing harness program is an uncharged environment block, a vendor refusal is upstream,
//! a hung call is killed with its group at the harness's timeout, and a bad config is refused.

use crate::cli::{harn_bin, text};
use std::path::Path;
use std::process::{Command, Output};

fn work(root: &Path, args: &[&str]) -> Output {
    Command::new(harn_bin()).arg("work").args(args).arg("--root").arg(root).output().unwrap()
}

fn projection(root: &Path, id: &str) -> serde_json::Value {
    let out = work(root, &["show", id, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["projection"].clone()
}

/// A root with the example workflow and harness, and a config declaring `harnesses`.
fn root(harnesses: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/agent-review.sh"), dir.path().join("wf.sh")).unwrap();
    std::fs::copy(examples.join("harnesses/scripted.sh"), dir.path().join("harness.sh")).unwrap();
    std::fs::create_dir_all(dir.path().join(".harnery")).unwrap();
    let config = format!("{{\"schema_version\": 1, \"harnesses\": {{{harnesses}}}}}");
    std::fs::write(dir.path().join(".harnery/config.json"), config).unwrap();
    dir
}

const SCRIPTED: &str = r#""scripted": {"command": ["./harness.sh"], "timeout_ms": 1000}"#;

fn create(root: &Path, objective: &str) {
    let args = ["create", "T", "wf.sh", "--objective", objective, "--accept", "done", "--id", "a"];
    let out = work(root, &args);
    assert!(out.status.success(), "{}", text(&out));
}

fn run(root: &Path, harness: &str) -> (Output, serde_json::Value) {
    let out = work(root, &["run", "a", "--harness", harness, "--json"]);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out, doc)
}

#[test]
fn the_scripted_harness_answers_and_the_run_goes_to_review() {
    let dir = root(SCRIPTED);
    create(dir.path(), "write the parser");
    let (out, doc) = run(dir.path(), "scripted");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(doc["proof"]["agents"][0]["ok"], true);
    assert_eq!(doc["proof"]["agents"][0]["harness"], "scripted");
    assert_eq!(projection(dir.path(), "a")["state"], "in_review");
}

#[test]
fn a_missing_harness_program_is_an_uncharged_environment_block() {
    let dir = root(r#""gone": {"command": ["no-such-agent-program"]}"#);
    create(dir.path(), "write the parser");
    let (out, doc) = run(dir.path(), "gone");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(doc["proof"]["run"]["class"], "environment");
    let p = projection(dir.path(), "a");
    assert_eq!((p["state"].as_str(), p["charged_attempts"].as_u64()), (Some("blocked"), Some(0)));
}

#[test]
fn a_vendor_refusal_is_upstream_and_uncharged() {
    let dir = root(SCRIPTED);
    create(dir.path(), "UPSTREAM please");
    let (out, doc) = run(dir.path(), "scripted");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(doc["proof"]["agents"][0]["class"], "upstream");
    assert_eq!(doc["proof"]["run"]["class"], "upstream");
    assert_eq!(projection(dir.path(), "a")["charged_attempts"], 0);
}

#[test]
fn a_hung_agent_is_killed_with_its_group_at_the_harness_timeout() {
    let dir = root(SCRIPTED);
    create(dir.path(), "HANG forever");
    let pid_file = dir.path().join("hang.pid");
    let out = Command::new(harn_bin())
        .args(["work", "run", "a", "--harness", "scripted", "--json", "--root"])
        .arg(dir.path())
        .env("HARN_HANG_PID_FILE", &pid_file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = doc["proof"]["agents"][0]["error"].as_str().unwrap();
    assert!(error.contains("timed out after 1000 ms"), "{error}");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    assert!(stat.is_empty() || stat.contains(") Z "), "the agent's child {pid} survived: {stat}");
    assert_eq!(projection(dir.path(), "a")["charged_attempts"], 1, "a timeout is charged");
}

#[test]
fn an_unknown_harness_or_a_bad_config_is_refused_with_exit_2_and_nothing_recorded() {
    let dir = root(SCRIPTED);
    create(dir.path(), "write the parser");
    let (out, _) = run(dir.path(), "nope");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("claude-code"), "{}", text(&out));
    std::fs::write(
        dir.path().join(".harnery/config.json"),
        "{\n  \"harnesses\": {\n    \"x\": {\"comand\": []}}}",
    )
    .unwrap();
    let (out, _) = run(dir.path(), "x");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("config.json:3"), "{}", text(&out));
    assert!(text(&out).contains("comand"), "{}", text(&out));
    assert_eq!(projection(dir.path(), "a")["attempts_used"], 0);
}

#[test]
fn the_run_timeout_also_kills_agent_calls_in_flight() {
    let dir = root(r#""slow": {"command": ["./harness.sh"], "timeout_ms": 600000}"#);
    create(dir.path(), "HANG forever");
    let pid_file = dir.path().join("hang.pid");
    let started = std::time::Instant::now();
    let out = Command::new(harn_bin())
        .args(["work", "run", "a", "--harness", "slow", "--timeout-secs", "1", "--root"])
        .arg(dir.path())
        .env("HARN_HANG_PID_FILE", &pid_file)
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(took.as_secs() < 20, "the run outlived its timeout by far: {took:?}");
    assert!(text(&out).contains("timed out after 1000 ms"), "{}", text(&out));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    assert!(stat.is_empty() || stat.contains(") Z "), "the agent's child {pid} survived: {stat}");
}

/// A root holding the seed's example module workflow (unchanged) and the scripted harness.
fn module_root() -> tempfile::TempDir {
    let dir = root(SCRIPTED);
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows");
    let module = dir.path().join("implement-and-review.mjs");
    std::fs::copy(examples.join("implement-and-review.mjs"), &module).unwrap();
    let args = ["create", "T", "implement-and-review.mjs", "--objective", "O", "--id", "a"];
    let out = work(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

#[test]
fn a_javascript_module_workflow_runs_unchanged_through_the_node_runner() {
    // The README lists node among what the tests need; without it this
    // fails rather than passing without having run anything.
    let node = Command::new("node").arg("--version").output();
    assert!(node.is_ok_and(|o| o.status.success()), "node is needed to run module workflows");
    let dir = module_root();
    let team = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/team.json");
    let out = work(dir.path(), &["run", "a", "--team", team.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let proof = &doc["proof"];
    assert_eq!(proof["agents"].as_array().unwrap().len(), 2, "implement, then review");
    assert_eq!(proof["agents"][1]["harness"], "scripted", "the reviewer's harness answered");
    let review = &proof["acceptance"]["criteria"][0];
    assert_eq!(
        (review["id"].as_str(), review["source"].as_str()),
        (Some("review"), Some("undeclared"))
    );
    assert_eq!(projection(dir.path(), "a")["state"], "in_review");
}

#[test]
fn without_node_a_module_workflow_is_an_environment_block_that_names_node() {
    let dir = module_root();
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(harn_bin())
        .args(["work", "run", "a", "--harness", "scripted", "--json", "--root"])
        .arg(dir.path())
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["proof"]["run"]["class"], "environment");
    assert!(doc["proof"]["run"]["error"].as_str().unwrap().contains("node:"), "{doc}");
    assert_eq!(projection(dir.path(), "a")["charged_attempts"], 0);
}

#[test]
fn a_profile_sets_the_model_and_retries_a_failing_call_and_billing_guards_api_keys() {
    let dir = root(SCRIPTED);
    let r = dir.path();
    let workflow = "#!/bin/sh\nread -r start\n\
        echo '{\"op\":\"agent\",\"id\":\"a1\",\"prompt\":\"FAIL now\",\"specialist\":\"fixer\"}'\n\
        read -r reply\necho '{\"op\":\"result\",\"ok\":false,\"error\":\"the agent failed\"}'\n";
    std::fs::write(r.join("wf.sh"), workflow).unwrap();
    let team = r.join("team.json");
    let profile = r#"{"fixer": {"harness": "scripted", "model": "m1", "maxAttempts": 3}}"#;
    std::fs::write(&team, profile).unwrap();
    create(r, "O");
    let calls = r.join("calls.log");
    let out = Command::new(harn_bin())
        .args(["work", "run", "a", "--team", team.to_str().unwrap(), "--root"])
        .arg(r)
        .env("HARN_CALLS_FILE", &calls)
        .env("OPENAI_API_KEY", "secret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let log = std::fs::read_to_string(&calls).unwrap();
    let line = "model=m1 key=\n";
    assert_eq!(log, line.repeat(3), "three attempts, each told the model, none given the key");
    let inherit = Command::new(harn_bin())
        .args(["work", "retry", "a", "--root"])
        .arg(r)
        .env("HARN_CALLS_FILE", &calls)
        .output()
        .unwrap();
    assert_eq!(inherit.status.code(), Some(1), "{}", text(&inherit));
    let log = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(log, line.repeat(6), "a retry without --team keeps the prior run's team");
    let api = Command::new(harn_bin())
        .args(["work", "retry", "a", "--billing", "api", "--team", team.to_str().unwrap()])
        .arg("--root")
        .arg(r)
        .env("HARN_CALLS_FILE", &calls)
        .env("OPENAI_API_KEY", "secret")
        .output()
        .unwrap();
    assert_eq!(api.status.code(), Some(1), "{}", text(&api));
    let log = std::fs::read_to_string(&calls).unwrap();
    assert!(log.ends_with("model=m1 key=secret\n"), "api billing passes the key on: {log}");
    std::fs::write(&team, r#"{"fixer": {"harness": "scripted", "maxAttempts": 0}}"#).unwrap();
    let bad = work(r, &["retry", "a", "--team", team.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("team.json: role fixer: maxAttempts"), "{}", text(&bad));
}

#[test]
fn a_reply_that_misses_its_schema_is_repaired_a_bounded_number_of_times() {
    for (word, calls, ok) in [("BADJSON", 2, true), ("NEVERJSON", 3, false)] {
        let dir = root(SCRIPTED);
        let r = dir.path();
        let request = format!(
            "{{\"op\":\"agent\",\"id\":\"a1\",\"prompt\":\"judge it {word}\",\"schema\":\
             {{\"type\":\"object\",\"required\":[\"verdict\"]}}}}"
        );
        let workflow = format!(
            "#!/bin/sh\nread -r start\necho '{request}'\nread -r reply\necho \"$reply\" > reply.log\n\
             echo '{{\"op\":\"result\",\"ok\":true}}'\n"
        );
        std::fs::write(r.join("wf.sh"), workflow).unwrap();
        create(r, "O");
        let out = Command::new(harn_bin())
            .args(["work", "run", "a", "--harness", "scripted", "--json", "--root"])
            .arg(r)
            .env("HARN_CALLS_FILE", r.join("calls.log"))
            .output()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["proof"]["run"]["status"], "succeeded", "{}", text(&out));
        let log = std::fs::read_to_string(r.join("calls.log")).unwrap();
        assert_eq!(log.lines().count(), calls, "{word}: one call and its repairs");
        let reply: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(r.join("reply.log")).unwrap()).unwrap();
        assert_eq!(reply["ok"], ok, "{word}: {reply}");
        if ok {
            assert_eq!(reply["text"], r#"{"verdict":"pass"}"#);
        } else {
            let error = reply["error"].as_str().unwrap();
            assert!(error.contains("does not match its schema after 2 repairs"), "{error}");
        }
    }
}

#[test]
fn a_policy_file_may_be_jsonc_and_an_unclosed_comment_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let out = crate::cli::harn_at(&root, &["example"]);
    assert!(out.status.success(), "{}", crate::cli::text(&out));
    let create = ["work", "create", "Docs", "wf.sh", "--id", "docs", "--objective", "o"];
    assert!(crate::cli::harn_at(&root, &create).status.success());
    std::fs::write(root.join("open.jsonc"), "{\"rules\": []} /* forgot to close").unwrap();
    let bad = ["work", "run", "docs", "--harness", "scripted", "--policy", "open.jsonc"];
    let out = crate::cli::harn_at(&root, &bad);
    assert_eq!(out.status.code(), Some(2), "{}", crate::cli::text(&out));
    let said = crate::cli::text(&out);
    assert!(said.contains("open.jsonc") && said.contains("not closed"), "{said}");
    let jsonc = "// the seed's own example is a .jsonc file\n{\n  \"rules\": [\n    {\"name\": \"no-push\", \"on\": \"authorize\", \"action\": \"push\", \"verdict\": \"deny\"},\n  ],\n}\n";
    std::fs::write(root.join("policy.jsonc"), jsonc).unwrap();
    let run = ["work", "run", "docs", "--harness", "scripted", "--policy", "./policy.jsonc"];
    let out = crate::cli::harn_at(&root, &run);
    assert!(out.status.success(), "{}", crate::cli::text(&out));
    let manifest = std::fs::read_dir(root.join(harn_core::layout::WORKFLOWS))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("run.json")).ok())
        .find(|m| m.contains("no-push"));
    assert!(manifest.is_some(), "the run froze the JSONC policy's rule");
}
