//! The harness daemon where it meets the kernel and other processes: runs after a cgroup was
//! killed, the descriptor limit, planted hints and symlinks. Real children, real cgroups where
//! the machine has them (a machine without prints that it skipped the cgroup part).

use crate::cli::text;
use crate::harness_daemon::{state, Root};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

/// True when the daemon contains its children in cgroups here; says so when it does not.
fn has_cgroups(root: &Root) -> bool {
    let kind = root.status()["daemon"]["containment"].as_str().unwrap_or("").to_owned();
    if kind != "cgroup" {
        eprintln!("skipped: no writable cgroup v2 hierarchy on this machine ({kind})");
    }
    kind == "cgroup"
}

/// Waits until `name` runs, then checks that the same run keeps running for a while: a run
/// killed at birth would show a new pid, more runs, or a last exit by signal 9.
fn runs_steadily(root: &Root, name: &str) -> Value {
    let first = root.wait_for(name, "running", |h| state(h) == "running" && h["pid"].is_u64());
    std::thread::sleep(Duration::from_millis(1500));
    let later = root.harness(name);
    assert_eq!(state(&later), "running", "{name} did not stay up: {later}");
    assert_eq!(later["pid"], first["pid"], "{name} was started again: {first} then {later}");
    assert_eq!(later["runs"], first["runs"], "{name} was started again: {later}");
    later
}

#[test]
fn a_harness_runs_again_after_a_forced_stop_killed_its_cgroup() {
    let root = Root::new(
        "[harness.stubborn]\ncommand = [\"{child}\", \"ignore-term\", \"{marker}\"]\nstop_grace_ms = 200\nrestart_delay_ms = 100\n",
    );
    root.up();
    if !has_cgroups(&root) {
        return;
    }
    runs_steadily(&root, "stubborn");
    for _ in 0..2 {
        let before = root.harness("stubborn")["runs"].as_u64().unwrap();
        let out = root.harn(&["restart", "stubborn"]);
        assert!(out.status.success(), "{}", text(&out));
        root.wait_for("stubborn", "restarted", |h| {
            h["runs"].as_u64() > Some(before) && state(h) == "running"
        });
        let h = runs_steadily(&root, "stubborn");
        assert_eq!(h["runs"].as_u64(), Some(before + 1), "one new run, not a crash loop: {h}");
    }
    // The shell and its sleep: one instance, the new one.
    assert_eq!(root.settle_count(&root.marker, 2), 2);
}

#[test]
fn a_harness_whose_run_left_a_setsid_helper_behind_runs_again() {
    let root = Root::new(
        "[harness.leaver]\ncommand = [\"{child}\", \"leave-once\", \"{flag}\", \"{marker}\"]\nrestart_delay_ms = 100\n",
    );
    let flag = root.dir.path().join("left-once");
    let toml = std::fs::read_to_string(root.dir.path().join("harness.toml")).unwrap();
    std::fs::write(
        root.dir.path().join("harness.toml"),
        toml.replace("{flag}", flag.to_str().unwrap()),
    )
    .unwrap();
    root.up();
    if !has_cgroups(&root) {
        return;
    }
    let h = runs_steadily(&root, "leaver");
    assert!(flag.exists(), "the first run ran");
    assert_eq!(h["runs"], 2, "the first run exited, the second runs: {h}");
    let helper = format!("2000{}", root.marker);
    assert_eq!(root.settle_count(&helper, 0), 0, "the helper the first run left was killed");
}

#[test]
fn a_harness_reclaimed_after_a_daemon_crash_runs_again() {
    // It keeps starting helpers, so the reclaim's SIGKILLs never catch every process and the
    // cgroup itself must be killed.
    let root = Root::new(
        "[harness.a]\ncommand = [\"{child}\", \"breed\", \"{marker}\"]\nstop_grace_ms = 300\n",
    );
    root.up();
    if !has_cgroups(&root) {
        return;
    }
    runs_steadily(&root, "a");
    let daemon = root.daemon_pid();
    Command::new("kill").arg("-9").arg(daemon.to_string()).status().unwrap();
    let started = Instant::now();
    while !root.harn(&["up"]).status.success() {
        assert!(started.elapsed() < Duration::from_secs(15), "up never succeeded");
        std::thread::sleep(Duration::from_millis(50));
    }
    let h = runs_steadily(&root, "a");
    assert_ne!(h["last_exit"]["signal"], 9, "no run of the new daemon was killed: {h}");
    let shells = format!("breed\0{}", root.marker);
    assert_eq!(root.settle_count(&shells, 1), 1, "one instance, the new one");
}
