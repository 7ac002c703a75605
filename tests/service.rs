//! `harn supervisor service` with the real binary: a started service ticks its goal to
//! success and then only reads it; a second enrollment is refused while it runs; a killed
//! daemon reads as stale and `start` with no goals recovers it with the frozen enrollment;
//! stop ends it cleanly.

use crate::cli::{harn_at as harn, harn_bin, json, text};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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

/// Kills the daemon with SIGKILL at drawn moments, fifty times, restarting it with the frozen
/// enrollment each time: the lease is always recovered, no work item is ever dispatched twice
/// for one attempt window, and no audit line is lost or torn.
#[test]
fn fifty_kills_at_random_moments_never_duplicate_a_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    // A workflow that takes a moment, so kills land inside ticks as well as between them.
    let slow = "#!/bin/sh\nread start\nsleep 0.05\necho '{\"op\":\"result\",\"ok\":false,\"error\":\"not yet\"}'\n";
    std::fs::write(r.join("wf.sh"), slow).unwrap();
    let mut perms = std::fs::metadata(r.join("wf.sh")).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(r.join("wf.sh"), perms).unwrap();
    std::fs::write(r.join("team.json"), r#"{"implementer": {"instructions": "Implement it."}}"#)
        .unwrap();
    for id in ["a", "b", "c"] {
        let create = [
            "work",
            "create",
            id,
            "wf.sh",
            "--id",
            id,
            "--objective",
            "o",
            "--max-attempts",
            "100",
        ];
        assert!(harn(r, &create).status.success());
    }
    let mut goals = Vec::new();
    for id in ["a", "b", "c"] {
        let g = format!("g{id}");
        let create = [
            "supervisor",
            "create",
            id,
            "--team",
            "team.json",
            "--id",
            &g,
            "--retry-blocked",
            "--max-total-attempts",
            "1000",
        ];
        assert!(harn(r, &create).status.success());
        goals.push(g);
    }
    let mut start = vec!["supervisor", "service", "start"];
    start.extend(goals.iter().map(String::as_str));
    start.extend([
        "--wake-interval-ms",
        "10",
        "--heartbeat-interval-ms",
        "50",
        "--error-backoff-base-ms",
        "10",
    ]);
    assert!(harn(r, &start).status.success());
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..50 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(seed % 150));
        let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
        if let Some(pid) = status["status"]["pid"].as_i64() {
            Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
        }
        wait_for("the lease to be free", || liveness(r) != "running");
        let out = harn(r, &["supervisor", "service", "start"]);
        assert!(out.status.success(), "the lease is recovered: {}", text(&out));
    }
    assert!(harn(r, &["supervisor", "service", "stop"]).status.success());
    for id in ["a", "b", "c"] {
        let shown = json(&harn(r, &["work", "show", id, "--json"]));
        let events = shown["events"].as_array().unwrap();
        let mut initial = 0;
        for e in events {
            if e["kind"]["event"] == "attempt.started" && e["kind"]["trigger"] == "initial" {
                initial += 1;
            }
        }
        assert!(initial <= 1, "{id}: an acknowledged dispatch was repeated: {shown}");
        assert!(shown["projection"]["attempts_used"].as_u64().unwrap() > 0, "{id} was worked on");
    }
    let audit =
        std::fs::read_to_string(r.join(".harnery/supervisor-service/events.jsonl")).unwrap();
    for line in audit.lines() {
        assert!(
            serde_json::from_str::<Value>(line).is_ok() || line.is_empty(),
            "a torn audit line: {line}"
        );
    }
}

#[test]
fn logs_follow_prints_what_is_appended() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    std::fs::create_dir_all(r.join(".harnery/supervisor-service")).unwrap();
    let log = r.join(".harnery/supervisor-service/service.log");
    std::fs::write(&log, "first\n").unwrap();
    let mut child = Command::new(harn_bin())
        .args(["supervisor", "service", "logs", "--follow", "--root"])
        .arg(r)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "first");
    std::fs::OpenOptions::new().append(true).open(&log).unwrap().write_all(b"second\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "second", "appended lines follow");
    child.kill().unwrap();
    child.wait().unwrap();
}
