//! Host policy and approvals with the real binary: an `ask` parks the run on an approval, a
//! ruling resumes the same run and attempt with its completed agent calls answered from the
//! transcript, a denial fails the run where it parked, rulings are recorded once, and a bad
//! policy file is refused before anything is recorded.

use crate::cli::{harn_bin, json, text};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn harn(root: &Path, args: &[&str]) -> Output {
    let calls = root.join("calls.log");
    Command::new(harn_bin())
        .args(args)
        .arg("--root")
        .arg(root)
        .env("HARN_CALLS_FILE", calls)
        .output()
        .unwrap()
}

fn projection(root: &Path) -> Value {
    json(&harn(root, &["work", "show", "s", "--json"]))["projection"].clone()
}

fn agent_calls(root: &Path) -> usize {
    std::fs::read_to_string(root.join("calls.log")).map_or(0, |s| s.lines().count())
}

/// A root with the shipping example, the scripted harness, the example policy and item `s`.
fn root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/ship.sh"), dir.path().join("wf.sh")).unwrap();
    std::fs::copy(examples.join("harnesses/scripted.sh"), dir.path().join("harness.sh")).unwrap();
    std::fs::copy(examples.join("policy.json"), dir.path().join("policy.json")).unwrap();
    std::fs::create_dir_all(dir.path().join(".harnery")).unwrap();
    let config = r#"{"harnesses": {"scripted": {"command": ["./harness.sh"]}}}"#;
    std::fs::write(dir.path().join(".harnery/config.json"), config).unwrap();
    let create = ["work", "create", "Ship", "wf.sh", "--objective", "add the flag", "--id", "s"];
    let out = harn(dir.path(), &create);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

const RUN: &[&str] =
    &["work", "run", "s", "--harness", "scripted", "--policy", "policy.json", "--json"];

fn run_parked(root: &Path) -> String {
    let out = harn(root, &[RUN, &["--approval-to", "ana"]].concat());
    assert_eq!(out.status.code(), Some(1), "parked is not done: {}", text(&out));
    let doc = json(&out);
    assert_eq!(doc["parked"], true, "{doc}");
    assert_eq!(doc["approval"]["addressee"], "ana");
    doc["approval"]["approval_id"].as_str().unwrap().to_owned()
}

#[test]
fn an_ask_parks_and_an_approval_resumes_the_same_run_and_attempt() {
    let dir = root();
    let approval = run_parked(dir.path());
    let p = projection(dir.path());
    assert_eq!(
        (p["state"].as_str(), p["next_action"].as_str()),
        (Some("awaiting_approval"), Some("resolve_approval"))
    );
    assert_eq!(p["approval_id"], approval.as_str());
    assert_eq!(agent_calls(dir.path()), 1);
    let run_id = p["latest_run_id"].as_str().unwrap().to_owned();
    assert!(!dir.path().join(format!(".harnery/workflows/{run_id}/proof.json")).exists());

    let out = harn(dir.path(), &["work", "run", "s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("harn approval approve"), "{}", text(&out));
    let shown = text(&harn(dir.path(), &["approval", "show", &approval]));
    assert!(shown.contains(&format!("next       harn approval approve {approval}\n")), "{shown}");
    let list = json(&harn(dir.path(), &["approval", "list", "--status", "pending", "--json"]));
    assert_eq!(list["approvals"][0]["request"]["request"]["action"], "push", "{list}");

    let out = harn(dir.path(), &["approval", "approve", &approval, "--actor", "ana", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(json(&out)["applied"], true);
    let p = projection(dir.path());
    assert_eq!(
        (p["state"].as_str(), p["next_action"].as_str()),
        (Some("awaiting_approval"), Some("resume"))
    );

    // Options given now are ignored: a resumed run takes them from its manifest.
    let out = harn(dir.path(), &["work", "run", "s", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc = json(&out);
    assert_eq!(doc["run_id"], run_id.as_str(), "the same run");
    assert_eq!(doc["proof"]["agents"][0]["cached"], true, "{doc}");
    let decisions = doc["proof"]["policy"]["decisions"].as_array().unwrap().clone();
    assert_eq!(decisions.len(), 2, "the cached call's check is kept: {decisions:?}");
    assert_eq!(decisions[1]["approval_id"], approval.as_str());
    assert_eq!(agent_calls(dir.path()), 1, "the completed call is not made again");
    let p = projection(dir.path());
    assert_eq!((p["state"].as_str(), p["attempts_used"].as_u64()), (Some("in_review"), Some(1)));
    let shown = json(&harn(dir.path(), &["approval", "show", &approval[..8], "--json"]));
    assert_eq!(shown["status"], "approved", "named by a prefix of its id");
}

#[test]
fn a_denial_fails_the_resumed_run_where_it_parked_and_charges_it() {
    let dir = root();
    let approval = run_parked(dir.path());
    let out = harn(dir.path(), &["approval", "deny", &approval, "--reason", "not today"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = harn(dir.path(), &["work", "run", "s", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let error = json(&out)["proof"]["run"]["error"].as_str().unwrap().to_owned();
    assert!(error.contains(&format!("approval {approval} was denied")), "{error}");
    let p = projection(dir.path());
    assert_eq!((p["state"].as_str(), p["charged_attempts"].as_u64()), (Some("blocked"), Some(1)));
}

#[test]
fn a_ruling_is_recorded_once_and_never_reversed() {
    let dir = root();
    let approval = run_parked(dir.path());
    assert!(harn(dir.path(), &["approval", "approve", &approval]).status.success());
    let again = harn(dir.path(), &["approval", "approve", &approval, "--json"]);
    assert!(again.status.success());
    assert_eq!(json(&again)["applied"], false);
    let reverse = harn(dir.path(), &["approval", "deny", &approval]);
    assert_eq!(reverse.status.code(), Some(1));
    assert!(text(&reverse).contains("already ruled allow"), "{}", text(&reverse));
    let missing = harn(dir.path(), &["approval", "approve", "wf-nope-p1"]);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(harn(dir.path(), &["approval", "show", "../x"]).status.code(), Some(2));
}

#[test]
fn without_a_named_approver_an_ask_parks_for_the_user() {
    let dir = root();
    let out = Command::new(harn_bin())
        .args(RUN)
        .arg("--root")
        .arg(dir.path())
        .env("USER", "tester")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(json(&out)["approval"]["addressee"], "tester");
    assert_eq!(projection(dir.path())["state"], "awaiting_approval");
}

#[test]
fn a_bad_policy_is_refused_before_anything_is_recorded() {
    let dir = root();
    std::fs::write(dir.path().join("policy.json"), "{\"rules\": [\n{\"name\": \"x\"}]}").unwrap();
    let out = harn(dir.path(), RUN);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("policy.json: line 2"), "{}", text(&out));
    assert_eq!(projection(dir.path())["attempts_used"], 0);
}

/// A ruling says who resumes the run: a running service whose goal resumes approved runs
/// (and it then does), or a person, naming the stopped service that would have.
#[test]
fn a_ruling_names_who_resumes_the_run() {
    let dir = root();
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("team.json"), r.join("team.json")).unwrap();
    let approval = run_parked(r);
    let goal = ["supervisor", "create", "s", "--team", "team.json", "--id", "g"];
    assert!(harn(r, &goal).status.success());
    let start = crate::service::START_G_FAST;
    let out = harn(r, &start);
    assert!(out.status.success(), "{}", text(&out));
    let out = harn(r, &["approval", "approve", &approval, "--actor", "ana"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("the running service resumes run"), "{said}");
    assert!(said.contains("(goal g); it goes on"), "{said}");
    assert!(!said.contains("next       harn work run"), "not sent to resume it by hand: {said}");
    // And it does.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while projection(r)["state"] != "in_review" {
        assert!(std::time::Instant::now() < deadline, "the service resumed it: {}", projection(r));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(harn(r, &["supervisor", "service", "stop"]).status.success());

    // With the service stopped, a person resumes it, and the ruling says which service would.
    let dir = root();
    let r = dir.path();
    std::fs::copy(examples.join("team.json"), r.join("team.json")).unwrap();
    let approval = run_parked(r);
    assert!(harn(r, &goal).status.success());
    assert!(harn(r, &start).status.success());
    assert!(harn(r, &["supervisor", "service", "stop"]).status.success());
    let out = harn(r, &["approval", "deny", &approval, "--reason", "no", "--json"]);
    assert_eq!(
        json(&out)["resumed_by"],
        serde_json::json!({"by": "person", "idle_service_goal": "g"})
    );
    let dir2 = root();
    let approval = run_parked(dir2.path());
    let said = text(&harn(dir2.path(), &["approval", "approve", &approval]));
    assert!(said.contains("next       harn work run s resumes run"), "{said}");
}

/// The README's approval flow past its first ruling: the rulings journal and its lock sit
/// beside the approvals and are none of them.
#[test]
fn approvals_list_after_a_ruling() {
    let dir = root();
    let approval = run_parked(dir.path());
    assert!(harn(dir.path(), &["approval", "approve", &approval, "--actor", "ana"])
        .status
        .success());
    let list = harn(dir.path(), &["approval", "list"]);
    assert!(list.status.success(), "{}", text(&list));
    assert!(text(&list).contains(&approval) && text(&list).contains("approved"), "{}", text(&list));
    assert!(!text(&list).contains("rulings"), "{}", text(&list));
    let doc = json(&harn(dir.path(), &["approval", "list", "--json"]));
    assert_eq!(doc["approvals"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["errors"].as_array().unwrap().len(), 0, "{doc}");
}
