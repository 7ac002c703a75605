//! A crash storm leaves the harness daemon answerable: harnesses that exit at once,
//! configured to restart as fast as anything may ask, on the real binary. (The latency
//! target, p99 under 100 ms at 500 harnesses, is held by `benches/harness/storm.py --check`
//! on the release build.)

use crate::cli::{harn_bin, text};
use std::process::Command;
use std::time::{Duration, Instant};

fn harness(root: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(harn_bin()).arg("harness").args(args).arg("--root").arg(root).output().unwrap()
}

#[test]
fn a_storm_of_crashing_harnesses_leaves_list_down_and_sigterm_working() {
    let tmp = tempfile::tempdir().unwrap();
    let mut toml = String::from(
        "[limits]\nrestart_delay_ms = 0\nrestart_delay_max_ms = 0\ngive_up_after = 0\n\n",
    );
    for i in 0..200 {
        toml.push_str(&format!("[harness.h{i}]\ncommand = [\"false\"]\n\n"));
    }
    std::fs::write(tmp.path().join("harness.toml"), toml).unwrap();
    let _ = harness(tmp.path(), &["up", "--timeout", "2"]);
    std::thread::sleep(Duration::from_secs(2));
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        let list = harness(tmp.path(), &["list", "--json"]);
        worst = worst.max(started.elapsed());
        assert!(list.status.success(), "{}", text(&list));
    }
    // A liveness bound for a debug build on a shared machine, not the latency target.
    assert!(worst < Duration::from_secs(10), "list took {worst:?}");
    let doc: serde_json::Value =
        serde_json::from_slice(&harness(tmp.path(), &["list", "--json"]).stdout).unwrap();
    let restarts: u64 =
        doc["harnesses"].as_array().unwrap().iter().filter_map(|h| h["restarts"].as_u64()).sum();
    assert!(restarts >= 200, "the storm ran: {restarts} restarts");
    let pid = doc["daemon"]["pid"].as_i64().unwrap() as i32;

    // SIGTERM in the storm: the daemon stops every harness and ends.
    let started = Instant::now();
    // SAFETY: kill(2) of the daemon this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')))
    {
        assert!(started.elapsed() < Duration::from_secs(10), "SIGTERM was not acted on");
        std::thread::sleep(Duration::from_millis(10));
    }

    // And `down` in a storm.
    let _ = harness(tmp.path(), &["up", "--timeout", "2"]);
    std::thread::sleep(Duration::from_secs(1));
    let down = harness(tmp.path(), &["down", "--timeout", "10"]);
    assert!(down.status.success(), "{}", text(&down));
}
