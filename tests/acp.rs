//! The `acp` adapter kind over the real binary, with `tests/fixtures/agents/fake-acp`
//! replaying sessions recorded from Claude Code's ACP adapter: each permission the agent
//! asks is judged by the run's frozen policy (allowed, refused, or ending the call for a
//! person), every judgement and tool call lands in the transcript, the session, usage and
//! cost reach the proof, and an API key the run may not bill costs nothing.

use crate::cli::{harn_bin, json, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fake() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents/fake-acp")
}

/// A root with the example one-call workflow as item `w` and an `acp` harness `agent`.
fn root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/agent-review.sh"), r.join("wf.sh")).unwrap();
    let create = ["work", "create", "W", "wf.sh", "--id", "w", "--objective", "write hello.txt"];
    assert!(harn(r, &create).status.success());
    let config = serde_json::json!({"schema_version": 1, "harnesses": {"agent": {
        "command": [fake()], "kind": "acp", "mode": "default",
    }}});
    std::fs::write(r.join(".harnery/config.json"), config.to_string()).unwrap();
    dir
}

fn harn(r: &Path, args: &[&str]) -> Output {
    Command::new(harn_bin())
        .args(args)
        .arg("--root")
        .arg(r)
        .env("HARN_FAKE_ACP", "write-allow,write-deny")
        .current_dir(r)
        .output()
        .unwrap()
}

/// The latest run's proof and its transcript's bodies.
fn records(r: &Path) -> (Value, Vec<Value>) {
    let show = json(&harn(r, &["work", "show", "w", "--json"]));
    let run = show["projection"]["latest_run_id"].as_str().unwrap().to_owned();
    let dir = r.join(format!(".harnery/workflows/{run}"));
    let proof = serde_json::from_slice(&std::fs::read(dir.join("proof.json")).unwrap()).unwrap();
    let transcript = std::fs::read_to_string(dir.join("transcript.jsonl")).unwrap();
    let bodies = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["body"].clone())
        .collect();
    (proof, bodies)
}

fn judged(bodies: &[Value]) -> Vec<&Value> {
    bodies.iter().filter(|b| b["event"] == "agent.progress" && b["what"] == "permission").collect()
}

fn run(r: &Path, policy: Option<&str>) -> Output {
    let mut args = vec!["work", "run", "w", "--harness", "agent", "--allow-api-billing"];
    if let Some(rules) = policy {
        std::fs::write(r.join("policy.json"), format!(r#"{{"rules": {rules}}}"#)).unwrap();
        args.extend(["--policy", "policy.json"]);
    }
    harn(r, &args)
}

#[test]
fn an_allowed_tool_call_runs_and_the_session_reaches_the_proof() {
    let dir = root();
    let r = dir.path();
    let out = run(r, None);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(r.join("hello.txt")).unwrap(), "hello from the stand-in\n");
    let (proof, bodies) = records(r);
    let call = &proof["agents"][0];
    assert_eq!(call["session_id"], "3ad889f5-eae2-4c66-b6b2-4775c9616371", "{call}");
    assert_eq!(call["usage"]["output_tokens"], 14, "{call}");
    assert!(call["usage"]["cost_micro_usd"].as_u64() > Some(0), "{call}");
    let judged = judged(&bodies);
    assert_eq!(judged.len(), 1, "{bodies:?}");
    assert_eq!(
        (judged[0]["tool"].as_str(), judged[0]["verdict"].as_str()),
        (Some("Write"), Some("allow"))
    );
    let tools = bodies.iter().filter(|b| b["what"] == "tool" && b["tool"] == "Write").count();
    assert!(tools >= 1, "the tool call is in the transcript");
}

#[test]
fn a_tool_call_the_policy_denies_is_refused_and_the_agent_goes_on() {
    let dir = root();
    let r = dir.path();
    let out = run(
        r,
        Some(r#"[{"name": "no-edits", "on": "tool", "tool_kind": "edit", "verdict": "deny"}]"#),
    );
    assert!(out.status.success(), "the agent answered without the write: {}", text(&out));
    assert!(!r.join("hello.txt").exists());
    let (proof, bodies) = records(r);
    assert_eq!(judged(&bodies)[0]["verdict"], "deny");
    assert_eq!(judged(&bodies)[0]["rules"][0], "no-edits");
    assert_eq!(proof["agents"][0]["denials"][0]["tool"], "Write", "{}", proof["agents"][0]);
}

#[test]
fn a_tool_call_the_policy_asks_about_parks_the_run_and_the_ruling_resumes_the_same_session() {
    let dir = root();
    let r = dir.path();
    let log = r.join("acp.log");
    let rules =
        r#"{"rules": [{"name": "person", "on": "tool", "tool": "Write", "verdict": "ask"}]}"#;
    std::fs::write(r.join("policy.json"), rules).unwrap();
    let logged = |args: &[&str]| {
        let mut cmd = Command::new(harn_bin());
        cmd.args(args).arg("--root").arg(r).current_dir(r);
        cmd.env("HARN_FAKE_ACP", "write-allow,write-deny").env("HARN_FAKE_ACP_LOG", &log);
        cmd.output().unwrap()
    };
    let run = ["work", "run", "w", "--harness", "agent", "--allow-api-billing"];
    let parked = logged(&[&run[..], &["--policy", "policy.json", "--approval-to", "ana"]].concat());
    assert_eq!(parked.status.code(), Some(1), "{}", text(&parked));
    assert!(!r.join("hello.txt").exists(), "nothing written before the ruling");
    let show = json(&harn(r, &["work", "show", "w", "--json"]));
    assert_eq!(show["projection"]["state"], "awaiting_approval", "{show}");
    // The agent call was checked in slot 1; its tool call asked in slot 2.
    let approval = show["projection"]["approval_id"].as_str().unwrap().to_owned();
    assert!(approval.ends_with("-p2"), "{approval}");
    let shown = text(&harn(r, &["approval", "show", &approval]));
    assert!(shown.contains("Write"), "the request names the tool: {shown}");
    assert!(harn(r, &["approval", "approve", &approval, "--actor", "ana"]).status.success());
    let resumed = logged(&["work", "run", "w"]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert_eq!(std::fs::read_to_string(r.join("hello.txt")).unwrap(), "hello from the stand-in\n");
    // The resumed call loaded the session the parked one had opened.
    let sent: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Parking cancelled the turn (the permission answered `cancelled`, then session/cancel)
    // before the segment ended.
    let cancel = sent.iter().position(|m| m["method"] == "session/cancel").expect("a cancel");
    assert_eq!(sent[cancel - 1]["result"]["outcome"]["outcome"], "cancelled", "{sent:?}");
    let load = sent.iter().find(|m| m["method"] == "session/load").expect("a session/load");
    assert_eq!(load["params"]["sessionId"], "3ad889f5-eae2-4c66-b6b2-4775c9616371");
    let (proof, _) = records(r);
    assert_eq!(proof["run"]["status"], "succeeded", "{}", proof["run"]);
    let decision = &proof["policy"]["decisions"][1];
    assert_eq!(decision["approval_id"], approval.as_str(), "{decision}");
}

#[test]
fn an_api_key_under_subscription_billing_costs_nothing() {
    let dir = root();
    let r = dir.path();
    let out = harn(r, &["work", "run", "w", "--harness", "agent"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--allow-api-billing"), "{}", text(&out));
    let (proof, _) = records(r);
    assert_eq!(proof["run"]["class"], "environment", "{}", proof["run"]);
    assert!(!r.join("hello.txt").exists(), "no prompt was sent");
}
