//! `harn work run|retry|accept` end to end: real workflow programs in temporary roots,
//! proofs for success and failure, timeouts that kill the whole group, budgets, decisions,
//! refused digests and an acceptance that unblocks a dependent.

use crate::cli::{harn_bin, text};
use std::path::Path;
use std::process::{Command, Output};

fn work(root: &Path, args: &[&str]) -> Output {
    Command::new(harn_bin()).arg("work").args(args).arg("--root").arg(root).output().unwrap()
}

fn doc(root: &Path, id: &str) -> serde_json::Value {
    let out = work(root, &["show", id, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn state(root: &Path, id: &str) -> String {
    doc(root, id)["projection"]["state"].as_str().unwrap().to_owned()
}

/// A root holding `wf.sh` with this body after the shebang and a read of the start line.
fn root_with(body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("#!/bin/sh\nread start\necho \"$start\" >> start.log\n{body}\n");
    let path = dir.path().join("wf.sh");
    std::fs::write(&path, script).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    dir
}

fn create(root: &Path, id: &str, extra: &[&str]) {
    let mut args = vec!["create", "T", "wf.sh", "--objective", "O", "--id", id];
    args.extend_from_slice(extra);
    let out = work(root, &args);
    assert!(out.status.success(), "{}", text(&out));
}

const PASS: &str = r#"echo '{"op":"evidence","kind":"test","status":"passed","label":"t","acceptanceIds":["accept-1"]}'
echo '{"op":"result","ok":true}'"#;

#[test]
fn a_passing_run_goes_to_review_and_acceptance_unblocks_the_dependent() {
    let dir = root_with(PASS);
    let r = dir.path();
    create(r, "a", &["--accept", "tests pass"]);
    create(r, "b", &["--depends-on", "a"]);
    assert_eq!(state(r, "b"), "waiting");
    let out = work(r, &["run", "a", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["passed"], true);
    let proof_path = run["proof_path"].as_str().unwrap();
    let proof: serde_json::Value =
        serde_json::from_slice(&std::fs::read(proof_path).unwrap()).unwrap();
    assert_eq!(proof["run"]["status"], "succeeded");
    assert_eq!(proof["acceptance"]["summary"]["satisfied"], 1);
    assert_eq!(state(r, "a"), "in_review");
    let out = work(r, &["accept", "a"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(state(r, "a"), "succeeded");
    assert_eq!(state(r, "b"), "ready");
    let out = work(r, &["run", "b"]);
    assert!(out.status.success(), "{}", text(&out));
    let events = &doc(r, "b")["events"];
    let started = events.as_array().unwrap().iter().find(|e| e["event"] == "attempt.started");
    // a: created, attempt.started, work.reconciled, work.accepted.
    assert_eq!(started.unwrap()["prerequisites"]["a"], 4, "built on a's acceptance at seq 4");
}

#[test]
fn a_failure_blocks_until_an_explicit_retry_that_sees_the_prior_run_and_budgets_hold() {
    let dir = root_with("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"tests failed\"}'");
    let r = dir.path();
    create(r, "a", &["--max-attempts", "2"]);
    let first = work(r, &["run", "a"]);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    assert!(text(&first).contains("tests failed"), "{}", text(&first));
    assert_eq!(state(r, "a"), "blocked");
    let again = work(r, &["run", "a"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again).contains("retry it explicitly"), "{}", text(&again));
    assert!(text(&again).contains("next: harn work retry a --harness"), "{}", text(&again));
    assert_eq!(work(r, &["retry", "a"]).status.code(), Some(1));
    let starts = std::fs::read_to_string(r.join("start.log")).unwrap();
    let lines: Vec<serde_json::Value> =
        starts.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "the refused run spawned nothing");
    assert_eq!(lines[1]["attempt"]["trigger"], "retry");
    assert_eq!(lines[1]["attempt"]["prior"]["error"], "tests failed");
    assert_eq!(lines[1]["attempt"]["prior"]["causes"], serde_json::json!(["workflow_error"]));
    let spent = work(r, &["retry", "a"]);
    assert!(text(&spent).contains("used up"), "{}", text(&spent));
    assert!(
        text(&spent).contains("next: harn work create"),
        "a dead end says how on: {}",
        text(&spent)
    );
    assert!(text(&spent).contains("--replanning"), "{}", text(&spent));
    assert_eq!(doc(r, "a")["projection"]["charged_attempts"], 2);
}

#[test]
fn a_timeout_kills_the_workflow_and_its_grandchildren_and_fails_the_run() {
    let dir = root_with("sleep 300 &\necho $! > grandchild.pid\nsleep 300");
    let r = dir.path();
    create(r, "a", &[]);
    let out = work(r, &["run", "a", "--timeout-secs", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("timed out after 1000 ms"), "{}", text(&out));
    let pid = std::fs::read_to_string(r.join("grandchild.pid")).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    assert!(stat.is_empty() || stat.contains(") Z "), "grandchild {pid} still runs: {stat}");
    assert_eq!(state(r, "a"), "blocked");
}

#[test]
fn a_decision_block_is_uncharged_and_a_changed_workflow_records_nothing() {
    let dir = root_with(r#"echo '{"op":"blocked","reason":"which db?","decision_id":"db"}'"#);
    let r = dir.path();
    create(r, "a", &[]);
    assert_eq!(work(r, &["run", "a"]).status.code(), Some(1));
    let p = &doc(r, "a")["projection"];
    assert_eq!(
        (p["charged_attempts"].as_u64(), p["blocked_on_decision"].as_str()),
        (Some(0), Some("db"))
    );
    let before = doc(r, "a")["events"].as_array().unwrap().len();
    std::fs::write(r.join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let out = work(r, &["retry", "a"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("changed since the work item was frozen"), "{}", text(&out));
    assert_eq!(doc(r, "a")["events"].as_array().unwrap().len(), before);
}

#[test]
fn open_findings_block_acceptance_until_each_is_disposed_of() {
    let dir = root_with(PASS);
    let r = dir.path();
    create(r, "a", &["--accept", "tests pass"]);
    assert!(work(r, &["run", "a"]).status.success());
    let reopen = ["reopen", "a", "--finding", "typo in docs", "--actor", "ana"];
    assert!(work(r, &reopen).status.success());
    assert!(work(r, &["run", "a"]).status.success());
    let starts = std::fs::read_to_string(r.join("start.log")).unwrap();
    let second: serde_json::Value = serde_json::from_str(starts.lines().nth(1).unwrap()).unwrap();
    let finding = &second["attempt"]["findings"][0];
    assert_eq!((finding["id"].as_str(), finding["actor"].as_str()), (Some("f1"), Some("ana")));
    assert_eq!(second["attempt"]["trigger"], "initial", "a run after reopen is initial");
    let refused = work(r, &["accept", "a"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(text(&refused).contains("f1"), "{}", text(&refused));
    let bad = work(r, &["accept", "a", "--dispose", "f1"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(work(r, &["accept", "a", "--dispose", "f1=deferred:next release"]).status.success());
    assert_eq!(state(r, "a"), "succeeded");
}

/// Starts `harn work run a` in the background and returns once its workflow has written
/// its pid to `workflow.pid`.
fn run_in_background(r: &Path) -> (std::process::Child, std::time::Instant) {
    run_item_in_background(r, "a")
}

/// Starts `harn work run ITEM` in the background and returns once its workflow has written
/// its pid to `workflow.pid`.
pub(crate) fn run_item_in_background(
    r: &Path,
    item: &str,
) -> (std::process::Child, std::time::Instant) {
    let host = Command::new(harn_bin())
        .args(["work", "run", item, "--root"])
        .arg(r)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while std::fs::read_to_string(r.join("workflow.pid")).map_or(true, |s| !s.ends_with('\n')) {
        assert!(started.elapsed().as_secs() < 30, "the workflow never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (host, started)
}

/// A host killed mid-run takes its workflow along (its parent-death signal); the attempt is
/// lost and charged where the workflow could have signalled its host, and uncharged where
/// Landlock's signal scope (ABI 6) kept it from doing so (decision record 0007).
#[test]
fn a_host_killed_mid_run_takes_its_workflow_along_and_is_charged_only_if_it_could_be_the_works() {
    let dir = root_with("echo $$ > workflow.pid\nsleep 300");
    let r = dir.path();
    create(r, "a", &[]);
    let (mut host, started) = run_in_background(r);
    let pid_file = r.join("workflow.pid");
    assert_eq!(state(r, "a"), "running", "the live host holds the run lease");
    host.kill().unwrap();
    host.wait().unwrap();
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let gone = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        stat.map_or(true, |s| s.contains(") Z "))
    };
    while !gone() {
        assert!(started.elapsed().as_secs() < 30, "workflow {pid} outlived its host");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let p = &doc(r, "a")["projection"];
    let run = p["latest_run_id"].as_str().unwrap();
    let transcript =
        std::fs::read_to_string(r.join(format!(".harnery/workflows/{run}/transcript.jsonl")))
            .unwrap();
    let start: serde_json::Value =
        serde_json::from_str(transcript.lines().next().unwrap()).unwrap();
    let scoped = start["body"]["containment"]["landlock"].as_u64().is_some_and(|abi| abi >= 6);
    let charged = if scoped { 0 } else { 1 };
    assert_eq!(
        (p["state"].as_str(), p["charged_attempts"].as_u64()),
        (Some("blocked"), Some(charged)),
        "{p}"
    );
    assert!(work(r, &["retry", "a", "--timeout-secs", "1"]).status.code() == Some(1));
    assert_eq!(doc(r, "a")["projection"]["attempts_used"], 2, "a retry after a lost attempt runs");
}

#[test]
fn reconcile_records_a_receipt_only_when_the_projection_changed() {
    let dir = root_with(PASS);
    let r = dir.path();
    create(r, "a", &[]);
    let receipts = |r: &Path| {
        let events = doc(r, "a")["events"].as_array().unwrap().clone();
        events.iter().filter(|e| e["event"] == "work.reconciled").count()
    };
    let first = work(r, &["reconcile", "--json"]);
    assert!(first.status.success(), "{}", text(&first));
    let doc1: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(doc1["items"][0]["written"], true);
    assert!(work(r, &["reconcile", "a"]).status.success());
    assert_eq!(receipts(r), 1, "an unchanged projection writes nothing");
    assert!(work(r, &["cancel", "a"]).status.success());
    assert!(work(r, &["reconcile", "a"]).status.success());
    assert_eq!(receipts(r), 2);
}

#[test]
fn run_show_reads_the_manifest_the_transcript_and_the_proof() {
    let dir = root_with(PASS);
    let r = dir.path();
    create(r, "a", &["--accept", "tests pass"]);
    let out = work(r, &["run", "a", "--json"]);
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = run["run_id"].as_str().unwrap();
    let show = |args: &[&str]| {
        Command::new(harn_bin()).arg("run").args(args).arg("--root").arg(r).output().unwrap()
    };
    let out = show(&["show", run_id, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["manifest"]["work_id"], "a");
    assert_eq!(doc["transcript"]["events"]["workflow.message"], 2);
    assert_eq!(doc["transcript"]["events"]["run.end"], 1);
    assert_eq!(doc["proof"]["run"]["status"], "succeeded");
    let human = show(&["show", run_id]);
    assert!(text(&human).contains("accept-1"), "{}", text(&human));
    let missing = show(&["show", "wf-nope"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing).contains("no workflow run wf-nope"), "{}", text(&missing));
}

#[test]
fn a_descendant_that_escapes_the_group_holding_stdout_does_not_hold_the_run() {
    let body = format!("setsid sh -c 'echo $$ > escaped.pid; exec sleep 60' &\nsleep 0.2\n{PASS}");
    let dir = root_with(&body);
    let r = dir.path();
    create(r, "a", &["--accept", "tests pass"]);
    let started = std::time::Instant::now();
    let out = work(r, &["run", "a"]);
    let took = started.elapsed();
    if let Ok(pid) = std::fs::read_to_string(r.join("escaped.pid")) {
        let _ = Command::new("kill").arg("-9").arg(pid.trim()).status();
    }
    assert!(out.status.success(), "{}", text(&out));
    assert!(took.as_secs() < 20, "the run waited {took:?} for an escaped descendant");
}

#[test]
fn an_item_can_be_cancelled_while_its_attempt_runs() {
    let dir = root_with("echo $$ > workflow.pid\nsleep 2\necho '{\"op\":\"result\",\"ok\":true}'");
    let r = dir.path();
    create(r, "a", &[]);
    let (mut host, _) = run_in_background(r);
    let out = work(r, &["cancel", "a", "--reason", "not needed"]);
    assert!(out.status.success(), "a runner must not hold the history lock: {}", text(&out));
    host.wait().unwrap();
    assert_eq!(state(r, "a"), "cancelled", "the run's end does not undo the cancel");
}

#[test]
fn cwd_sets_where_the_workflow_runs_and_a_missing_one_is_refused() {
    let dir = root_with(PASS);
    let r = dir.path();
    std::fs::create_dir(r.join("sub")).unwrap();
    create(r, "a", &[]);
    let missing = work(r, &["run", "a", "--cwd", "nope"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert_eq!(doc(r, "a")["projection"]["attempts_used"], 0, "nothing recorded");
    assert!(work(r, &["run", "a", "--cwd", "sub"]).status.success());
    assert!(r.join("sub/start.log").exists(), "the workflow ran in sub/");
}

#[test]
fn a_thrown_mjs_error_is_the_runs_error_and_the_retry_sees_it_as_prior_error() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let module = "export default async function (ctx) {\n  const prior = ctx.attempt?.prior?.error;\n  throw new Error(prior ? `seen: ${prior}` : \"the parser rejects key x\");\n}\n";
    std::fs::write(r.join("wf.mjs"), module).unwrap();
    let out = work(r, &["create", "T", "wf.mjs", "--objective", "O", "--id", "m"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = work(r, &["run", "m"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = work(r, &["retry", "m"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let errors: Vec<String> = std::fs::read_dir(r.join(harn_core::layout::WORKFLOWS))
        .unwrap()
        .filter_map(|e| std::fs::read(e.unwrap().path().join("proof.json")).ok())
        .map(|b| serde_json::from_slice::<serde_json::Value>(&b).unwrap())
        .map(|p| p["run"]["error"].as_str().unwrap_or("").to_owned())
        .collect();
    let first = "the parser rejects key x (the workflow exited with code 1)";
    assert!(errors.iter().any(|e| e == first), "{errors:?}");
    assert!(errors.iter().any(|e| e.starts_with(&format!("seen: {first}"))), "{errors:?}");
}

#[test]
fn accept_statements_are_context_unless_the_item_asks_for_strict_acceptance() {
    let dir = root_with(r#"echo '{"op":"result","ok":true}'"#);
    let r = dir.path();
    create(r, "plain", &["--accept", "returns ok"]);
    create(r, "strict", &["--accept", "returns ok", "--strict-acceptance"]);
    let out = work(r, &["run", "plain"]);
    assert!(out.status.success(), "the reference passes this: {}", text(&out));
    assert_eq!(state(r, "plain"), "in_review");
    let out = work(r, &["run", "strict"]);
    assert_eq!(out.status.code(), Some(1), "uncited under strict is unknown: {}", text(&out));
    let intent = &doc(r, "strict")["intent"];
    assert_eq!(intent["strict_acceptance"], true, "frozen in the intent: {intent}");
    assert!(doc(r, "plain")["intent"].get("strict_acceptance").is_none(), "off by default");
}
