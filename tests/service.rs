//! `harn supervisor service` with the real binary: a started service ticks its goal to
//! success and then only reads it; a second enrollment is refused while it runs; a killed
//! daemon reads as stale and `start` with no goals recovers it with the frozen enrollment;
//! stop ends it cleanly.

use crate::cli::harn_bin;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn harn(root: &Path, args: &[&str]) -> Output {
    Command::new(harn_bin()).args(args).arg("--root").arg(root).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("JSON: {}", text(out)))
}

fn liveness(r: &Path) -> String {
    json(&harn(r, &["supervisor", "service", "status", "--json"]))["liveness"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_service_ticks_to_success_survives_a_kill_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/agent-review.sh"), r.join("wf.sh")).unwrap();
    std::fs::copy(examples.join("harnesses/scripted.sh"), r.join("harness.sh")).unwrap();
    std::fs::copy(examples.join("team.json"), r.join("team.json")).unwrap();
    std::fs::create_dir_all(r.join(".harnery")).unwrap();
    std::fs::write(
        r.join(".harnery/config.json"),
        r#"{"harnesses": {"scripted": {"command": ["./harness.sh"]}}}"#,
    )
    .unwrap();
    let create = [
        "work",
        "create",
        "P",
        "wf.sh",
        "--id",
        "p",
        "--objective",
        "o",
        "--accept",
        "the agent answered",
    ];
    assert!(harn(r, &create).status.success());
    let goal =
        ["supervisor", "create", "p", "--team", "team.json", "--id", "g", "--accept-passing-proof"];
    assert!(harn(r, &goal).status.success());
    assert_eq!(liveness(r), "unconfigured");
    let start = [
        "supervisor",
        "service",
        "start",
        "g",
        "--harness",
        "scripted",
        "--wake-interval-ms",
        "100",
        "--heartbeat-interval-ms",
        "100",
    ];
    let out = harn(r, &start);
    assert!(out.status.success(), "{}", text(&out));
    wait_for("the goal to succeed", || {
        json(&harn(r, &["supervisor", "show", "g", "--json"]))["projection"]["state"] == "succeeded"
    });
    assert_eq!(liveness(r), "running");
    let again = harn(r, &start);
    assert_eq!(again.status.code(), Some(1), "one service per root: {}", text(&again));
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    let created = status["config"]["created_at"].clone();
    let pid = status["status"]["pid"].as_i64().unwrap();
    // A crash: the daemon dies without a word; its record says running, its lease is free.
    Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    wait_for("the crash to show", || liveness(r) == "stale");
    let out = harn(r, &["supervisor", "service", "start"]);
    assert!(out.status.success(), "restarts with the frozen enrollment: {}", text(&out));
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    assert_eq!(status["liveness"], "running");
    assert_eq!(status["config"]["created_at"], created, "the enrollment is reused, not replaced");
    let out = harn(r, &["supervisor", "service", "stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(liveness(r), "stopped");
    let events =
        std::fs::read_to_string(r.join(".harnery/supervisor-service/events.jsonl")).unwrap();
    let ticks = events.lines().filter(|l| l.contains("\"goal.tick\"")).count();
    assert_eq!(ticks, 2, "dispatch, then accept; a succeeded goal is only read: {events}");
    assert!(harn(r, &["supervisor", "service", "unit"]).status.success());
}
