//! Nothing is charged that never ran: a full disk, a refused path and a missing adapter cost
//! no attempt, and `run` stops on them; an operator's bounded stop interrupts an attempt
//! without charging it. The real binary in real directories (a tmpfs for the full disk, where
//! this process may mount one).

use crate::cli::{harn_at, harn_bin, json, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn projection(root: &Path, id: &str) -> Value {
    json(&harn_at(root, &["work", "show", id, "--json"]))["projection"].clone()
}

fn charged(root: &Path, id: &str) -> (u64, u64) {
    let p = projection(root, id);
    (p["attempts_used"].as_u64().unwrap(), p["charged_attempts"].as_u64().unwrap())
}

/// The example's root with item `docs` and goal `dg` over it, which may retry blocked work.
fn example_root(at: &Path) -> PathBuf {
    let root = at.join("r");
    let out = harn_at(&root, &["example"]);
    assert!(out.status.success(), "{}", text(&out));
    let create = ["work", "create", "Docs", "wf.sh", "--id", "docs", "--objective", "o"];
    assert!(harn_at(&root, &create).status.success());
    let goal = ["supervisor", "create", "docs", "--team", "team.json", "--id", "dg"];
    let flags = ["--retry-blocked", "--accept-passing-proof"];
    assert!(harn_at(&root, &[&goal[..], &flags[..]].concat()).status.success());
    root
}

/// A small tmpfs, unmounted when dropped.
pub(crate) struct Tmpfs(PathBuf);

impl Tmpfs {
    pub(crate) fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let opts = format!("size={size}");
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", &opts, "tmpfs"]).arg(at).status();
        ok.is_ok_and(|s| s.success()).then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Every file under `dir` whose name says it is a temporary file.
fn temporaries(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            temporaries(&path, found);
        } else if entry.file_name().to_string_lossy().contains(".tmp") {
            found.push(path);
        }
    }
}

#[test]
fn a_full_disk_charges_nothing_and_stops_the_run_and_the_tick() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(disk) = Tmpfs::mount(&tmp.path().join("disk"), "512k") else {
        // Root can always mount one: only an unprivileged run may skip this test.
        assert!(!rustix::process::geteuid().is_root(), "root could not mount a tmpfs");
        crate::skip::skip("this process may not mount a tmpfs");
        return;
    };
    let root = example_root(&disk.0);
    // Fill the disk.
    let fill = disk.0.join("fill");
    let _ = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", fill.display()))
        .arg("bs=4k")
        .output();
    let run = harn_at(&root, &["supervisor", "run", "dg", "--harness", "scripted"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    assert!(text(&run).contains("stop: not_started"), "{}", text(&run));
    assert!(text(&run).contains("no attempt was charged"), "{}", text(&run));
    assert_eq!(charged(&root, "docs"), (0, 0), "nothing ran, nothing is an attempt");
    let single = harn_at(&root, &["work", "run", "docs", "--harness", "scripted"]);
    assert_eq!(single.status.code(), Some(1), "{}", text(&single));
    assert_eq!(charged(&root, "docs"), (0, 0));
    let mut left = Vec::new();
    temporaries(&root.join(".harnery/workflows"), &mut left);
    assert!(left.is_empty(), "temporary files left by refused starts: {left:?}");

    std::fs::remove_file(&fill).unwrap();
    let run = harn_at(&root, &["supervisor", "run", "dg", "--harness", "scripted"]);
    assert!(run.status.success(), "room again: {}", text(&run));
    assert_eq!(charged(&root, "docs"), (1, 1), "the one attempt that ran");
}

#[test]
fn a_refused_workflows_directory_charges_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = example_root(tmp.path());
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let workflows = root.join(".harnery/workflows");
    std::fs::rename(&workflows, tmp.path().join("kept")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &workflows).unwrap();
    let out = harn_at(&root, &["work", "run", "docs", "--harness", "scripted"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("symlink"), "{}", text(&out));
    assert_eq!(charged(&root, "docs"), (0, 0));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through it");
}

#[test]
fn forgetting_the_harness_is_a_host_precondition_not_a_charged_attempt() {
    let tmp = tempfile::tempdir().unwrap();
    let root = example_root(tmp.path());
    let out = harn_at(&root, &["work", "run", "docs"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("pass --harness"), "says what to type: {}", text(&out));
    let p = projection(&root, "docs");
    assert_eq!(
        (p["attempts_used"].as_u64(), p["charged_attempts"].as_u64()),
        (Some(1), Some(0)),
        "{p}"
    );
    assert_eq!(
        (p["state"].as_str(), p["next_action"].as_str()),
        (Some("blocked"), Some("none")),
        "{p}"
    );
    // What to type next is what works, as the reason says: a retry, with the harness.
    let doc = json(&harn_at(&root, &["work", "show", "docs", "--json"]));
    assert_eq!(doc["next_commands"][0], "harn work retry docs --harness HARNESS", "{doc}");
    let retry = harn_at(&root, &["work", "retry", "docs", "--harness", "scripted"]);
    assert!(retry.status.success(), "{}", text(&retry));
}

/// A root whose item `w` runs a workflow that ignores SIGTERM until killed, and a goal `g`.
fn stubborn_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let wf = r.join("wf.sh");
    std::fs::write(&wf, "#!/bin/sh\nread start\ntrap '' TERM\nsleep 300\n").unwrap();
    std::fs::set_permissions(&wf, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(r.join("team.json"), r#"{"implementer": {"instructions": "Implement it."}}"#)
        .unwrap();
    let create = ["work", "create", "w", "wf.sh", "--id", "w", "--objective", "o"];
    assert!(harn_at(r, &create).status.success());
    let goal = ["supervisor", "create", "w", "--team", "team.json", "--id", "g"];
    assert!(harn_at(r, &goal).status.success());
    dir
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ok() {
        assert!(started.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn latest_proof(root: &Path) -> Value {
    let run = projection(root, "w")["latest_run_id"].as_str().unwrap().to_owned();
    let bytes = std::fs::read(root.join(format!(".harnery/workflows/{run}/proof.json"))).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[test]
fn a_bounded_service_stop_interrupts_the_attempt_without_charging_it() {
    let dir = stubborn_root();
    let r = dir.path();
    let start = ["supervisor", "service", "start", "g", "--wake-interval-ms", "50"];
    assert!(harn_at(r, &start).status.success());
    wait_for("the attempt to start", || projection(r, "w")["state"] == "running");
    let out = harn_at(r, &["supervisor", "service", "stop", "--timeout", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(charged(r, "w"), (1, 0), "interrupted, not charged");
    let proof = latest_proof(r);
    assert_eq!(proof["run"]["class"], "interrupted", "{proof}");
    assert!(proof["run"]["error"].as_str().unwrap().contains("service stop --timeout"), "{proof}");
    let p = projection(r, "w");
    assert!(p["reason"].as_str().unwrap().contains("interrupted by an operator's stop"), "{p}");
}

#[test]
fn a_signal_to_a_foreground_run_interrupts_the_attempt_without_charging_it() {
    let dir = stubborn_root();
    let r = dir.path();
    let run = Command::new(harn_bin())
        .args(["work", "run", "w", "--root"])
        .arg(r)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the workflow runs: the host records `run.start` right after the spawn.
    wait_for("the workflow to start", || {
        let run = projection(r, "w")["latest_run_id"].as_str().map(str::to_owned);
        run.is_some_and(|run| {
            std::fs::read_to_string(r.join(format!(".harnery/workflows/{run}/transcript.jsonl")))
                .is_ok_and(|t| t.contains("\"run.start\""))
        })
    });
    let asked = Instant::now();
    let pid = rustix::process::Pid::from_raw(run.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = run.wait_with_output().unwrap();
    assert!(asked.elapsed() < Duration::from_secs(15), "the grace is bounded");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(charged(r, "w"), (1, 0), "interrupted, not charged: {}", text(&out));
    let proof = latest_proof(r);
    assert_eq!(proof["run"]["class"], "interrupted", "{proof}");
    assert!(proof["run"]["error"].as_str().unwrap().contains("SIGTERM"), "{proof}");
    let left = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&r.display().to_string()))
        })
        .count();
    assert_eq!(left, 0, "no process of the run is left");
}

/// A root whose item `w` runs `script` (shell, after reading its start line).
fn root_running(script: &str) -> tempfile::TempDir {
    root_running_with(script, &[])
}

/// [`root_running`], `w` created with `flags` too.
fn root_running_with(script: &str, flags: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let wf = r.join("wf.sh");
    std::fs::write(&wf, format!("#!/bin/sh\nread start\n{script}\n")).unwrap();
    std::fs::set_permissions(&wf, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let create = ["work", "create", "w", "wf.sh", "--id", "w", "--objective", "o"];
    assert!(harn_at(r, &[&create[..], flags].concat()).status.success());
    dir
}

#[test]
fn a_workflow_that_signals_its_own_host_is_still_charged_for_its_failure() {
    let dir = root_running(
        "kill -TERM $PPID\nsleep 0.5\necho '{\"op\":\"result\",\"ok\":false,\"error\":\"x\"}'\nexit 1",
    );
    let r = dir.path();
    // Uncontained, the signal arrives and is told apart by its sender.
    let out = harn_at(r, &["work", "run", "w", "--no-containment"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("a process of a run in progress: ignored"), "{}", text(&out));
    assert_eq!(charged(r, "w"), (1, 1), "its own failure: {}", text(&out));
    // Contained (where Landlock scopes signals, ABI 6), it never leaves the run's domain.
    let out = harn_at(r, &["work", "retry", "w"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(!text(&out).contains("stopping the runs"), "{}", text(&out));
    assert_eq!(charged(r, "w"), (2, 2), "its own failure: {}", text(&out));
}

#[test]
fn a_host_killed_while_a_stop_drains_its_run_leaves_it_interrupted_not_charged() {
    let dir = stubborn_root();
    let r = dir.path();
    let mut run = Command::new(harn_bin())
        .args(["work", "run", "w", "--root"])
        .arg(r)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let transcript = || {
        let run = projection(r, "w")["latest_run_id"].as_str().map(str::to_owned);
        run.and_then(|run| {
            std::fs::read_to_string(r.join(format!(".harnery/workflows/{run}/transcript.jsonl")))
                .ok()
        })
        .unwrap_or_default()
    };
    wait_for("the workflow to start", || transcript().contains("\"run.start\""));
    let pid = rustix::process::Pid::from_raw(run.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    // The workflow ignores TERM, so the host waits out its grace; it is killed meanwhile.
    wait_for("the stop to be recorded", || transcript().contains("\"run.interrupted\""));
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    run.wait().unwrap();
    wait_for("the runner's lease to go", || projection(r, "w")["state"] != "running");
    let p = projection(r, "w");
    assert_eq!(charged(r, "w"), (1, 0), "the stop ended it, not the work: {p}");
    assert_eq!(p["next_action"], "retry", "{p}");
}

#[test]
fn a_run_whose_proof_a_full_disk_kept_out_is_not_charged() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(disk) = Tmpfs::mount(&tmp.path().join("disk"), "2m") else {
        assert!(!rustix::process::geteuid().is_root(), "root could not mount a tmpfs");
        crate::skip::skip("this process may not mount a tmpfs");
        return;
    };
    let root = example_root(&disk.0);
    // The workflow succeeds, after it filled the disk.
    let script = "#!/bin/sh\nread -r start\n\
        echo '{\"op\":\"evidence\",\"kind\":\"review\",\"status\":\"passed\",\"label\":\"done\",\"acceptanceIds\":[\"accept-1\"]}'\n\
        [ -e filled ] || { : > filled; head -c 3000000 /dev/zero > filler 2>/dev/null; }\n\
        echo '{\"op\":\"result\",\"ok\":true,\"summary\":\"done\"}'\n";
    std::fs::write(root.join("big.sh"), script).unwrap();
    let create = ["work", "create", "Big", "big.sh", "--id", "big", "--objective", "o"];
    let out = harn_at(&root, &create);
    assert!(out.status.success(), "{}", text(&out));
    let run = harn_at(&root, &["work", "run", "big", "--harness", "scripted"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    assert!(text(&run).contains("NoSpace"), "{}", text(&run));
    assert_eq!(charged(&root, "big"), (1, 0), "harn's failure, not the work's");
    let list = json(&harn_at(&root, &["run", "list", "--json"]));
    let run_id = list["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let show = harn_at(&root, &["run", "show", &run_id]);
    assert!(text(&show).contains("it ran; its proof could not be written"), "{}", text(&show));
    assert!(text(&run).contains("ran; its proof could not be written"), "{}", text(&run));
    // Once there is room, it is retried like a run that never started: a goal that may retry
    // blocked work retries it, and no person has to come back.
    let p = projection(&root, "big");
    assert_eq!(
        (p["state"].as_str(), p["next_action"].as_str()),
        (Some("blocked"), Some("retry")),
        "{p}"
    );
    assert!(p["reason"].as_str().unwrap().contains("its proof could not be written"), "{p}");
    // Its second run finds the disk filled once already and leaves it be.
    std::fs::remove_file(root.join("filler")).unwrap();
    let goal =
        ["supervisor", "create", "big", "--team", "team.json", "--id", "bg", "--retry-blocked"];
    assert!(harn_at(&root, &goal).status.success());
    let tick = harn_at(&root, &["supervisor", "tick", "bg"]);
    assert!(tick.status.success(), "{}", text(&tick));
    let p = projection(&root, "big");
    assert_eq!(p["state"], "in_review", "retried once there was room: {p} {}", text(&tick));
    assert_eq!(charged(&root, "big"), (2, 1), "only the run that sealed its proof is charged");
}

/// A root whose item `w` runs a workflow that starts a long sleep, records the sleep's pid in
/// `wf.pid` and waits for it: the sleep outlives a host that dies (the workflow itself goes
/// with its host, by its parent-death signal).
fn sleeping_root() -> tempfile::TempDir {
    root_running_with("sleep 600 &\necho $! > wf.pid\nwait", &["--max-uncharged-attempts", "2"])
}

/// Starts `verb` (`work run w`, say) and kills its host with SIGKILL once the workflow is
/// running; returns the pid of the sleep it started.
fn kill_host_mid_run(r: &Path, verb: &[&str]) -> i32 {
    let mut run = Command::new(harn_bin())
        .args(verb)
        .arg("--root")
        .arg(r)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = r.join("wf.pid");
    wait_for("the workflow to start", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| p.trim().parse::<i32>().is_ok())
    });
    let workflow: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    std::fs::remove_file(&pid_file).unwrap();
    run.kill().unwrap();
    run.wait().unwrap();
    workflow
}

fn alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // A zombie is gone as far as the run is concerned.
    !stat.is_empty() && !stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'))
}

#[test]
fn a_host_that_dies_under_a_workflow_that_could_not_signal_it_charges_nothing() {
    let dir = sleeping_root();
    let r = dir.path();
    let workflow = kill_host_mid_run(r, &["work", "run", "w"]);
    assert!(alive(workflow), "the workflow outlives its host until someone reaps it");
    let p = projection(r, "w");
    let run = p["latest_run_id"].as_str().unwrap().to_owned();
    let transcript =
        std::fs::read_to_string(r.join(format!(".harnery/workflows/{run}/transcript.jsonl")))
            .unwrap();
    let start: Value = serde_json::from_str(transcript.lines().next().unwrap()).unwrap();
    if start["body"]["containment"]["landlock"].as_u64().is_none_or(|abi| abi < 6) {
        assert!(harn_at(r, &["work", "cancel", "w"]).status.success());
        crate::skip::skip("Landlock does not scope signals here (ABI 6)");
        return;
    }
    assert_eq!(charged(r, "w"), (1, 0), "not the work's doing: {p}");
    assert_eq!(p["next_action"], "retry", "{p}");
    assert!(p["reason"].as_str().unwrap().contains("lost its host"), "{p}");
    let show = harn_at(r, &["run", "show", &run]);
    assert!(text(&show).contains("its host died before the workflow's result"), "{}", text(&show));
    // The next command that writes to the root reaps what the lost run left, whatever item
    // it is about; a read does not.
    assert!(harn_at(r, &["work", "list"]).status.success());
    assert!(alive(workflow), "a read stays read-only");
    let create = ["work", "create", "other", "wf.sh", "--id", "other", "--objective", "o"];
    let out = harn_at(r, &create);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("run {run} had lost its host")), "{}", text(&out));
    wait_for("the workflow to be reaped", || !alive(workflow));
    // A host that always dies still stops: within the item's ceiling of uncharged attempts.
    let workflow = kill_host_mid_run(r, &["work", "retry", "w"]);
    let p = projection(r, "w");
    assert_eq!(charged(r, "w"), (2, 0), "{p}");
    assert_eq!(
        (p["state"].as_str(), p["next_action"].as_str()),
        (Some("blocked"), Some("none")),
        "{p}"
    );
    assert!(harn_at(r, &["work", "cancel", "w"]).status.success());
    wait_for("the workflow to be reaped", || !alive(workflow));
}

#[test]
fn a_host_that_dies_under_a_workflow_that_could_signal_it_is_charged_and_says_why() {
    let dir = sleeping_root();
    let r = dir.path();
    let workflow = kill_host_mid_run(r, &["work", "run", "w", "--no-containment"]);
    let p = projection(r, "w");
    assert_eq!(charged(r, "w"), (1, 1), "its workflow could have ended it: {p}");
    let run = p["latest_run_id"].as_str().unwrap().to_owned();
    let show = harn_at(r, &["run", "show", &run]);
    assert!(text(&show).contains("its workflow could signal its host"), "{}", text(&show));
    assert!(harn_at(r, &["work", "cancel", "w"]).status.success());
    wait_for("the workflow to be reaped", || !alive(workflow));
}
