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

/// `service start` of goal `g` with the scripted harness, sweeping and beating every 100 ms.
pub const START_G_FAST: [&str; 10] = [
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

/// A root with the example workflow, team and scripted harness (declared as `scripted`).
fn example_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/agent-review.sh"), r.join("wf.sh")).unwrap();
    std::fs::copy(examples.join("harnesses/scripted.sh"), r.join("harness.sh")).unwrap();
    std::fs::copy(examples.join("team.json"), r.join("team.json")).unwrap();
    std::fs::create_dir_all(r.join(".harnery")).unwrap();
    let config = r#"{"harnesses": {"scripted": {"command": ["./harness.sh"]}}}"#;
    std::fs::write(r.join(".harnery/config.json"), config).unwrap();
    dir
}

#[test]
fn the_service_ticks_to_success_survives_a_kill_and_stops() {
    let dir = example_root();
    let r = dir.path();
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
    let start = START_G_FAST;
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
    let shown = text(&harn(r, &["supervisor", "service", "status"]));
    assert!(shown.contains("next       harn supervisor service start"), "{shown}");
    // Options without goal ids would be silently ignored by the reused enrollment: refused.
    let typed =
        ["supervisor", "service", "start", "--wake-interval-ms", "10", "--allow-api-billing"];
    let out = harn(r, &typed);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("--wake-interval-ms, --allow-api-billing"), "{said}");
    assert_eq!(liveness(r), "stale", "nothing started");
    let out = harn(r, &["supervisor", "service", "start"]);
    assert!(out.status.success(), "restarts with the frozen enrollment: {}", text(&out));
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    assert_eq!(status["liveness"], "running");
    assert_eq!(status["config"]["created_at"], created, "the enrollment is reused, not replaced");
    // A second start names the one that runs and what to type.
    let second = harn(r, &["supervisor", "service", "start"]);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let running = status["status"]["pid"].as_u64().unwrap();
    assert!(text(&second).contains(&format!("(pid {running})")), "{}", text(&second));
    assert!(text(&second).contains("service stop"), "{}", text(&second));
    // ...and is recorded, in the ledger and in the log, as the harness daemon records one.
    let refused: Vec<Value> =
        audit_events(r).into_iter().filter(|e| e["event"] == "service.start_refused").collect();
    assert_eq!(refused.len(), 2, "both refused starts: {refused:?}");
    assert_eq!(refused[1]["running_pid"], running);
    let logs = harn(r, &["supervisor", "service", "logs"]);
    assert!(
        text(&logs).contains(&format!("this one (pid {running}) holds the root")),
        "{}",
        text(&logs)
    );
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
    // Left alone at last, the service gets to every goal (a sweep restarted this often
    // begins at the first goal each time, so the last may not have had a turn yet). A kill
    // that lands inside a run is its host's death: uncharged, and retried until the item's
    // `max_uncharged_attempts` in a row, where a person looks. So each item ends either
    // charged by its own workflow's failure or held at that ceiling, never anything else.
    let settled = |shown: &Value| {
        let p = &shown["projection"];
        p["attempts_used"].as_u64() > Some(0)
            || (p["next_action"] == "none"
                && p["reason"].as_str().is_some_and(|r| r.contains("lost their host")))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in ["a", "b", "c"] {
        loop {
            let shown = json(&harn(r, &["work", "show", id, "--json"]));
            if settled(&shown) {
                break;
            }
            if Instant::now() > deadline {
                let status = text(&harn(r, &["supervisor", "service", "status", "--json"]));
                let log =
                    std::fs::read_to_string(r.join(".harnery/supervisor-service/service.log"));
                let log = log.unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!("{id} was never worked on to an end: {shown}\n{status}\n{tail:#?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(harn(r, &["supervisor", "service", "stop"]).status.success());
    for id in ["a", "b", "c"] {
        let shown = json(&harn(r, &["work", "show", id, "--json"]));
        let events = shown["events"].as_array().unwrap();
        let mut initial = 0;
        for e in events {
            if e["event"] == "attempt.started" && e["trigger"] == "initial" {
                initial += 1;
            }
        }
        assert_eq!(initial, 1, "{id}: dispatched once, never repeated: {shown}");
        assert!(settled(&shown), "{id} was worked on to an end: {shown}");
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

/// A root whose one work item `w` runs `body` as its workflow, and a goal `g` over it that
/// retries blocked work.
fn root_with_workflow(body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    std::fs::write(r.join("wf.sh"), format!("#!/bin/sh\nread start\n{body}\n")).unwrap();
    let mut perms = std::fs::metadata(r.join("wf.sh")).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(r.join("wf.sh"), perms).unwrap();
    std::fs::write(r.join("team.json"), r#"{"implementer": {"instructions": "Implement it."}}"#)
        .unwrap();
    let create = ["work", "create", "w", "wf.sh", "--id", "w", "--objective", "o"];
    assert!(harn(r, &[&create[..], &["--max-attempts", "100"]].concat()).status.success());
    let goal = ["supervisor", "create", "w", "--team", "team.json", "--id", "g"];
    let limits = ["--retry-blocked", "--max-total-attempts", "1000"];
    assert!(harn(r, &[&goal[..], &limits[..]].concat()).status.success());
    dir
}

fn audit_events(r: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(r.join(".harnery/supervisor-service/events.jsonl"))
        .unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn a_bounded_stop_terminates_the_ticks_children_and_records_it() {
    // The workflow and everything it starts ignore SIGTERM: only KILL ends them.
    let dir = root_with_workflow("trap '' TERM\nsleep 300");
    let r = dir.path();
    let start = ["supervisor", "service", "start", "g", "--wake-interval-ms", "50"];
    assert!(harn(r, &start).status.success());
    wait_for("the tick to start", || {
        json(&harn(r, &["supervisor", "service", "status", "--json"]))["status"]["active_goal_id"]
            == "g"
    });
    let began = Instant::now();
    let out = harn(r, &["supervisor", "service", "stop", "--timeout", "1", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(began.elapsed() < Duration::from_secs(15), "bounded: {:?}", began.elapsed());
    let answer = json(&out);
    assert_eq!(answer["after"], "stopped", "{answer}");
    assert_eq!(answer["forced"], true, "{answer}");
    let events = audit_events(r);
    let forced = events.iter().find(|e| e["event"] == "service.forced_stop").expect("recorded");
    assert_eq!(forced["goal_id"], "g");
    let evidence = &forced["evidence"];
    let killed = evidence["killed"].as_array().unwrap();
    assert!(!killed.is_empty(), "TERM was ignored, so KILL was needed: {forced}");
    for pgid in killed {
        let pid = rustix::process::Pid::from_raw(pgid.as_i64().unwrap() as i32).unwrap();
        // Killed processes are reaped by their parents (or by init) a moment later.
        wait_for("the killed group to be reaped", || {
            rustix::process::test_kill_process_group(pid).is_err()
        });
    }
    assert!(events.iter().any(|e| e["event"] == "service.stopped"));
}

#[test]
fn the_log_and_the_audit_rotate_at_their_cap() {
    let dir = root_with_workflow("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"no\"}'");
    let r = dir.path();
    let start = ["supervisor", "service", "start", "g", "--wake-interval-ms", "10"];
    let fast = ["--error-backoff-base-ms", "10", "--error-backoff-max-ms", "20"];
    let out = harn(r, &[&start[..], &fast[..], &["--log-max-bytes", "2048"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    let dir_of = r.join(".harnery/supervisor-service");
    wait_for("both files to rotate", || {
        dir_of.join("events.jsonl.1").exists() && dir_of.join("service.log.1").exists()
    });
    assert!(harn(r, &["supervisor", "service", "stop"]).status.success());
    for name in ["events.jsonl", "events.jsonl.1", "service.log", "service.log.1"] {
        let len = std::fs::metadata(dir_of.join(name)).map_or(0, |m| m.len());
        assert!(len <= 2048 + 1024, "{name} is {len} bytes, past its cap");
    }
    assert!(!dir_of.join("events.jsonl.4").exists(), "three older files are kept, not more");
    let log = std::fs::read_to_string(dir_of.join("service.log")).unwrap();
    assert!(log.contains("service.stopped"), "the log says what the daemon decided: {log}");
}

#[test]
fn a_change_to_a_watched_file_wakes_the_service_before_its_interval() {
    let dir = example_root();
    let r = dir.path();
    let create = ["work", "create", "P", "wf.sh", "--id", "p", "--objective", "o"];
    assert!(harn(r, &[&create[..], &["--accept", "the agent answered"]].concat()).status.success());
    assert!(harn(r, &["work", "run", "p", "--harness", "scripted"]).status.success());
    // Without automated acceptance the goal waits for a person to review `p`.
    let goal = ["supervisor", "create", "p", "--team", "team.json", "--id", "g"];
    assert!(harn(r, &goal).status.success());
    let start = ["supervisor", "service", "start", "g", "--wake-interval-ms", "600000"];
    assert!(harn(r, &start).status.success());
    let sweeps = || {
        json(&harn(r, &["supervisor", "service", "status", "--json"]))["status"]["sweep_count"]
            .as_u64()
            .unwrap_or(0)
    };
    wait_for("the first sweep", || sweeps() >= 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sweeps(), 1, "nothing changed, and the next poll is ten minutes away");
    assert!(harn(r, &["work", "accept", "p"]).status.success());
    wait_for("the change to wake a sweep", || sweeps() >= 2);
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    assert_eq!(status["runtime"]["goals"]["g"]["state"], "awaiting_change", "{status}");
    assert!(harn(r, &["supervisor", "service", "stop"]).status.success());
}

#[test]
fn more_than_a_hundred_goals_enroll_and_quiesce() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    std::fs::write(r.join("wf.sh"), "#!/bin/sh\nread start\n").unwrap();
    std::fs::write(r.join("team.json"), r#"{"implementer": {"instructions": "x"}}"#).unwrap();
    let goals: Vec<String> = (0..150).map(|n| format!("g{n}")).collect();
    for (n, g) in goals.iter().enumerate() {
        let w = format!("w{n}");
        let create = ["work", "create", "w", "wf.sh", "--id", &w, "--objective", "o"];
        assert!(harn(r, &create).status.success());
        assert!(harn(r, &["work", "cancel", &w]).status.success());
        let goal = ["supervisor", "create", &w, "--team", "team.json", "--id", g];
        assert!(harn(r, &goal).status.success());
    }
    let mut start = vec!["supervisor", "service", "start"];
    start.extend(goals.iter().map(String::as_str));
    let out = harn(r, &start);
    assert!(out.status.success(), "the reference tool stops at 100: {}", text(&out));
    // The sweep count and the wake hints are written one after the other: wait for both.
    wait_for("the first sweep and its wake hints", || {
        let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
        status["status"]["sweep_count"].as_u64().unwrap_or(0) >= 1
            && status["runtime"]["goals"].as_object().is_some_and(|g| g.len() == 150)
    });
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    let wakes = status["runtime"]["goals"].as_object().unwrap();
    assert_eq!(wakes.len(), 150);
    assert!(wakes.values().all(|w| w["state"] == "awaiting_change"), "blocked goals quiesce");
    assert!(harn(r, &["supervisor", "service", "stop"]).status.success());
}

#[test]
fn a_killed_service_keeps_each_goals_backoff_count() {
    let dir = root_with_workflow("echo '{\"op\":\"result\",\"ok\":true}'");
    let r = dir.path();
    // A second goal whose intent goes bad after enrollment: every read of it fails.
    let goal = ["supervisor", "create", "w", "--team", "team.json", "--id", "bad"];
    assert!(harn(r, &goal).status.success());
    let start = ["supervisor", "service", "start", "g", "bad", "--wake-interval-ms", "20"];
    let fast = ["--error-backoff-base-ms", "10", "--error-backoff-max-ms", "40"];
    assert!(harn(r, &[&start[..], &fast[..]].concat()).status.success());
    std::fs::write(r.join(".harnery/supervisors/bad/intent.json"), "{ not json").unwrap();
    let errors = || {
        json(&harn(r, &["supervisor", "service", "status", "--json"]))["runtime"]["goals"]["bad"]
            ["consecutive_errors"]
            .as_u64()
            .unwrap_or(0)
    };
    wait_for("a few errors in a row", || errors() >= 3);
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    Command::new("kill")
        .args(["-9", &status["status"]["pid"].as_i64().unwrap().to_string()])
        .status()
        .unwrap();
    wait_for("the crash to show", || liveness(r) == "stale");
    let before = errors();
    assert!(harn(r, &["supervisor", "service", "start"]).status.success());
    wait_for("the next failed read", || errors() != before);
    assert!(errors() > before, "the count goes on from {before}, it does not start again");
    assert_eq!(
        json(&harn(r, &["supervisor", "service", "status", "--json"]))["runtime"]["goals"]["g"]
            ["state"],
        "awaiting_change",
        "the readable goal is not held back by the bad one"
    );
    assert!(harn(r, &["supervisor", "service", "stop"]).status.success());
}

/// The log names what a tick dispatched and how it came out, and a goal that a person moves
/// on (here: accepts its root) shows where it stands at the next sweep, in the log and in
/// `service status`, instead of the last tick's outcome.
#[test]
fn the_log_names_each_dispatch_and_a_goal_ended_by_hand_shows_at_the_next_sweep() {
    let dir = example_root();
    let r = dir.path();
    let create = ["work", "create", "P", "wf.sh", "--id", "p", "--objective", "o"];
    assert!(harn(r, &create).status.success());
    let goal = ["supervisor", "create", "p", "--team", "team.json", "--id", "g"];
    assert!(harn(r, &goal).status.success());
    let start = START_G_FAST;
    let out = harn(r, &start);
    assert!(out.status.success(), "{}", text(&out));
    let state = |r: &Path| {
        json(&harn(r, &["work", "show", "p", "--json"]))["projection"]["state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    wait_for("the item to reach review", || state(r) == "in_review");
    let last = |r: &Path| {
        let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
        status["runtime"]["last_outcome"]["g"].as_str().unwrap_or("").to_owned()
    };
    wait_for("the tick's outcome", || last(r).starts_with("tick_complete: p is in review"));
    let out = harn(r, &["work", "accept", "p"]);
    assert!(out.status.success(), "{}", text(&out));
    wait_for("the acceptance to show", || last(r).starts_with("succeeded"));
    let shown = text(&harn(r, &["supervisor", "service", "status"]));
    assert!(shown.contains("succeeded: the root p is accepted"), "{shown}");
    assert!(harn(r, &["supervisor", "service", "stop"]).status.success());
    let log = text(&harn(r, &["supervisor", "service", "logs", "--lines", "200"]));
    assert!(log.contains("goal g: dispatch p (run)"), "{log}");
    assert!(log.contains("goal g: p: run wf-"), "its outcome: {log}");
    assert!(
        log.contains("goal g: tick stopped at tick_complete — p is in review (1 cycle,"),
        "{log}"
    );
    assert!(
        log.contains("goal g: now succeeded: the root p is accepted (changed outside the service)"),
        "{log}"
    );
}

#[test]
fn a_restarted_service_reaps_the_orphans_of_a_tick_killed_with_it() {
    // The first attempt starts two sleepers and waits: the run is in flight when the service
    // dies. Later attempts end at once, so what is left to count is the first run's.
    let marker = format!("3{}", std::process::id());
    let dir = root_with_workflow(&format!(
        "[ -e started ] && exit 1\ntouch started\nsleep {marker} & sleep {marker} & wait"
    ));
    let r = dir.path();
    let start = ["supervisor", "service", "start", "g", "--wake-interval-ms", "50"];
    assert!(harn(r, &start).status.success());
    let running = r.join(".harnery/running");
    let records = || std::fs::read_dir(&running).map(|d| d.count()).unwrap_or(0);
    wait_for("the run to start", || records() > 0);
    let sleepers = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                let zombie =
                    stat.rsplit_once(')').is_some_and(|(_, s)| s.trim_start().starts_with('Z'));
                !zombie && String::from_utf8_lossy(&cmd).contains(&marker)
            })
            .count()
    };
    wait_for("the sleepers to start", || sleepers() == 2);
    let pid = json(&harn(r, &["supervisor", "service", "status", "--json"]))["status"]["pid"]
        .as_i64()
        .unwrap();
    Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    wait_for("the crash to show", || liveness(r) == "stale");
    assert_eq!(sleepers(), 2, "a host killed with SIGKILL leaves its run's processes");
    // The next service reaps them at its first sweep, and says so.
    assert!(harn(r, &["supervisor", "service", "start"]).status.success());
    wait_for("the orphans to be reaped", || sleepers() == 0);
    wait_for("the reap to be recorded", || {
        audit_events(r)
            .iter()
            .any(|e| e["event"] == "run.reaped" && e["processes"].as_u64() >= Some(2))
    });
    let out = harn(r, &["supervisor", "service", "stop", "--timeout", "2"]);
    assert!(out.status.success(), "{}", text(&out));
}
