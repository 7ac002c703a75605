//! Bounded runs on the real kernel: a run that forks without end and a run that allocates
//! 2 GiB each end `resource` at their cgroup's limit, naming the figure the kernel counted,
//! while a third run in parallel passes and a harness of the same root keeps running; nothing
//! of theirs is left.

use crate::cli::{harn_bin, json, text};
use crate::harness_daemon::{state, Root};
use std::path::Path;
use std::process::{Command, Stdio};

/// Each process starts two more, nine levels deep (512 sleepers, 1,023 processes): a fork
/// bomb that still ends on a machine without limits.
const BOMB: &str = r#"#!/bin/sh
read -r start
grow() { [ "$1" -gt 0 ] || { sleep 3; return; }; d=$(($1 - 1)); grow $d & grow $d & wait; }
grow 9
echo '{"op":"result","ok":false,"error":"the tree grew"}'
"#;

/// The workflow itself grows to 2 GiB, 64 MiB at a time, each page written.
const HOG: &str = r#"#!/bin/sh
read -r start
exec python3 -c "
chunks = []
for i in range(32):
    chunks.append(b'x' * (64 << 20))
print('{\"op\":\"result\",\"ok\":true}')
"
"#;

const CALM: &str = r#"#!/bin/sh
read -r start
sleep 2
echo '{"op":"result","ok":true,"summary":"calm"}'
"#;

fn workflow(root: &Path, name: &str, body: &str) {
    let path = root.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

fn harn(root: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(harn_bin());
    cmd.args(args).arg("--root").arg(root).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Processes of ours whose environment carries `HARN_RUN_ID=<run>`.
fn left_of(run: &str) -> usize {
    let marker = format!("HARN_RUN_ID={run}");
    let mut n = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(env) = std::fs::read(entry.path().join("environ")) else { continue };
        if env.split(|&b| b == 0).any(|v| v == marker.as_bytes()) {
            n += 1;
        }
    }
    n
}

#[test]
fn a_fork_bomb_and_a_leak_end_at_their_limits_while_the_rest_goes_on() {
    let h = Root::new("[harness.keeper]\ncommand = [\"sleep\", \"300\", \"{marker}\"]\n");
    let root = h.dir.path();
    std::fs::create_dir_all(root.join(".harnery")).unwrap();
    // Runs get one CPU share each of a tenth: the configuration is read and frozen.
    std::fs::write(root.join(".harnery/config.json"), r#"{"limits": {"cpu_weight": 10}}"#).unwrap();
    h.up();
    let keeper = h.wait_for("keeper", "running", |h| state(h) == "running");
    for (id, body) in [("bomb", BOMB), ("hog", HOG), ("calm", CALM)] {
        workflow(root, &format!("{id}.sh"), body);
        let out = harn(root, &["work", "create", id, &format!("{id}.sh"), "--id", id])
            .args(["--objective", "o"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    let runs = [
        ("bomb", vec!["--limit", "tasks=64"]),
        ("hog", vec!["--limit", "memory=256M"]),
        ("calm", vec![]),
    ];
    let children: Vec<_> = runs
        .iter()
        .map(|(id, limits)| {
            let args =
                [&["work", "run", *id, "--json", "--timeout-secs", "120"][..], limits].concat();
            harn(root, &args).spawn().unwrap()
        })
        .collect();
    let outs: Vec<_> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let proof = |i: usize| {
        let doc = json(&outs[i]);
        assert!(doc["proof"].is_object(), "{}: {doc}", runs[i].0);
        doc
    };
    let bomb = proof(0);
    assert_eq!(outs[0].status.code(), Some(1), "{}", text(&outs[0]));
    assert_eq!(bomb["proof"]["run"]["class"], "resource", "{bomb}");
    let said = bomb["proof"]["run"]["error"].as_str().unwrap();
    assert!(said.contains("task limit of 64") && said.contains("pids.events max"), "{said}");
    let hog = proof(1);
    assert_eq!(outs[1].status.code(), Some(1), "{}", text(&outs[1]));
    assert_eq!(hog["proof"]["run"]["class"], "resource", "{hog}");
    let said = hog["proof"]["run"]["error"].as_str().unwrap();
    assert!(said.contains("memory limit of 256M") && said.contains("oom_kill"), "{said}");
    let calm = proof(2);
    assert_eq!(outs[2].status.code(), Some(0), "{}", text(&outs[2]));
    assert_eq!(calm["proof"]["run"]["status"], "succeeded", "{calm}");
    // Charged, each: what a run consumes is its own doing.
    for id in ["bomb", "hog"] {
        let shown = json(&harn(root, &["work", "show", id, "--json"]).output().unwrap());
        assert_eq!(shown["projection"]["charged_attempts"], 1, "{shown}");
    }
    // The limits are in the run's record, and the configured weight with them.
    let run = bomb["proof"]["run"]["id"].as_str().unwrap();
    let shown = text(&harn(root, &["run", "show", run]).output().unwrap());
    assert!(shown.contains("limits     memory 8G, tasks 64, cpu weight 10"), "{shown}");
    // Nothing of theirs is left, and the harness never noticed.
    for doc in [&bomb, &hog, &calm] {
        let run = doc["proof"]["run"]["id"].as_str().unwrap();
        assert_eq!(left_of(run), 0, "processes of {run} are left");
    }
    let now = h.harness("keeper");
    assert_eq!(state(&now), "running", "{now}");
    assert_eq!(now["pid"], keeper["pid"], "the harness was never restarted: {now}");
}

#[test]
fn a_terminal_harness_past_its_memory_max_is_recorded_oom_killed_and_restarted() {
    // It grows to 512 MiB at most, then waits: without a limit the test fails, the machine
    // goes on.
    let grow = "import time\\nchunks = []\\nfor i in range(64):\\n    chunks.append(b'x' * (8 << 20))\\n    time.sleep(0.01)\\ntime.sleep(30)";
    let h = Root::new(&format!(
        "[harness.grow]\ncommand = [\"python3\", \"-c\", \"{grow}\", \"{{marker}}\"]\ntty = true\n\
         memory_max = \"64M\"\ntasks_max = 32\nrestart = \"always\"\nrestart_delay_ms = 100\n"
    ));
    h.up();
    let listed = h.harness("grow");
    assert_eq!(listed["limits"]["memory_max"], 64 << 20, "{listed}");
    assert_eq!(listed["limits"]["tasks_max"], 32, "{listed}");
    // Restarted by its policy after the kernel ended it at its limit.
    let again = h.wait_for("grow", "restarted", |h| h["runs"].as_u64().unwrap_or(0) >= 2);
    assert_eq!(again["last_exit"]["signal"], 9, "{again}");
    let records = h.ledger("grow");
    let killed = records
        .iter()
        .find(|r| r["termination"]["oom_killed"] == true)
        .unwrap_or_else(|| panic!("no record says the OOM killer ended it: {records:?}"));
    let said = killed["termination"]["limits_said"][0].as_str().unwrap();
    assert!(said.contains("memory limit of 64M") && said.contains("oom_kill"), "{said}");
}

#[test]
fn a_goal_freezes_the_limits_of_the_runs_it_dispatches() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".harnery")).unwrap();
    workflow(root, "bomb.sh", BOMB);
    std::fs::write(root.join("team.json"), r#"{"implementer": {"instructions": "Do it."}}"#)
        .unwrap();
    let run = |args: &[&str]| harn(root, args).output().unwrap();
    let out = run(&["work", "create", "b", "bomb.sh", "--id", "b", "--objective", "o"]);
    assert!(out.status.success(), "{}", text(&out));
    let create = ["supervisor", "create", "b", "--team", "team.json", "--id", "g"];
    let out = run(&[&create[..], &["--limit", "tasks=64"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    let shown = text(&run(&["supervisor", "show", "g"]));
    assert!(shown.contains("runs       tasks 64 (frozen"), "{shown}");
    let out = run(&["supervisor", "run", "g"]);
    assert!(out.status.code().is_some(), "{}", text(&out));
    let item = json(&run(&["work", "show", "b", "--json"]));
    let id = item["projection"]["latest_run_id"].as_str().expect("the goal ran b").to_owned();
    let doc = json(&run(&["run", "show", &id, "--json"]));
    assert_eq!(doc["manifest"]["resource_limits"]["tasks"], 64, "{}", doc["manifest"]);
    assert_eq!(doc["proof"]["run"]["class"], "resource", "{}", doc["proof"]["run"]);
    // An edit of the frozen limits is damage, caught by the goal's digest.
    let path = root.join(".harnery/supervisors/g/intent.json");
    let mut intent: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    intent["resource_limits"]["tasks"] = 65.into();
    std::fs::write(&path, intent.to_string()).unwrap();
    let out = run(&["supervisor", "show", "g"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
}
