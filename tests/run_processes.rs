//! No process of a run outlives it: a workflow and its agent start children four ways (in
//! their own group, after setsid, through a double fork, as a daemon) and none survives the
//! run's end, its timeout, a `work cancel`, or a `kill -9` of the host followed by the next
//! `work run`. With the real binary and the real kernel: a cgroup per run where this process
//! may make one, and as an unprivileged user, where only process groups and the run's
//! `HARN_RUN_ID` are left to find them.

use crate::cli::{harn_bin, json, text};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Starts a shell that sleeps four ways, each named `$1-<style>` (its `$0`, which stays in
/// its command line) so it can be counted.
///
/// It returns only once the two that leave its process group have left it: a group killed
/// while one is still on its way out would take it too, and the test would count five.
const SPAWNER: &str = r#"#!/bin/sh
tag=$1
echo "$tag" >> "$SPAWN_LOG"
sh -c 'sleep 300; exit 0' "$tag-same" &
setsid sh -c 'sleep 300; exit 0' "$tag-setsid" &
escaping=$!
(sh -c 'sleep 300; exit 0' "$tag-double" &)
python3 -c '
import os, sys
r, w = os.pipe()
if os.fork():
    os.close(w)
    os.read(r, 1)
    sys.exit(0)
os.close(r)
os.setsid()
if os.fork(): os._exit(0)
os.write(w, b"x")
os.close(w)
os.chdir("/")
fd = os.open("/dev/null", os.O_RDWR)
for n in (0, 1, 2): os.dup2(fd, n)
os.execvp("sh", ["sh", "-c", "sleep 300; exit 0", sys.argv[1]])
' "$tag-daemon"
while [ "$(ps -o pgid= -p "$escaping" | tr -d ' ')" = "$(ps -o pgid= -p $$ | tr -d ' ')" ]; do
  sleep 0.05
done
"#;

/// What each of the four sleepers' command lines holds (before its tag).
const SLEEPER: &str = " -c sleep 300; exit 0 ";

/// The workflow: asks its agent (which starts its own four), starts four, then ends as
/// `$HOW` says: `end` at once, anything else after sleeping long.
const WORKFLOW: &str = r#"#!/bin/sh
read -r start
echo '{"op":"agent","id":"a1","prompt":"spawn"}'
read -r reply
"$SPAWNER" "$TAG-workflow"
if [ "$HOW" = end ]; then
  echo '{"op":"result","ok":false,"error":"ended"}'
  exit 1
fi
trap '' TERM
sleep 300
"#;

struct Root {
    dir: tempfile::TempDir,
    tag: String,
    /// Run harn as this uid (and gid), when set.
    user: Option<u32>,
}

impl Root {
    fn new(user: Option<u32>) -> Root {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        for (name, body) in [("spawner.sh", SPAWNER), ("wf.sh", WORKFLOW)] {
            std::fs::write(r.join(name), body).unwrap();
            std::fs::set_permissions(r.join(name), std::fs::Permissions::clone(&exec)).unwrap();
        }
        std::fs::create_dir_all(r.join(".harnery")).unwrap();
        let config = r#"{"harnesses": {"spawning": {"command":
            ["sh", "-c", "cat >/dev/null; \"$SPAWNER\" \"$TAG-agent\"; echo spawned"]}}}"#;
        std::fs::write(r.join(".harnery/config.json"), config).unwrap();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        let tag = format!("harnsurv{}x{}", std::process::id(), nanos.subsec_nanos());
        if let Some(uid) = user {
            chown_tree(r, uid);
        }
        let root = Root { dir, tag, user };
        for id in ["w", "other"] {
            let out =
                root.harn(&["work", "create", id, "wf.sh", "--id", id, "--objective", "o"], "end");
            assert!(out.status.success(), "{}", text(&out));
        }
        root
    }

    fn command(&self, args: &[&str], how: &str) -> Command {
        let mut cmd = Command::new(harn_bin());
        cmd.args(args)
            .arg("--root")
            .arg(self.dir.path())
            .env("SPAWNER", self.dir.path().join("spawner.sh"))
            .env("TAG", &self.tag)
            .env("SPAWN_LOG", self.dir.path().join("spawned.log"))
            .env("HOW", how);
        if let Some(uid) = self.user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(uid).env("HOME", self.dir.path());
        }
        cmd
    }

    fn harn(&self, args: &[&str], how: &str) -> Output {
        self.command(args, how).output().unwrap()
    }

    /// This root's `harn-work-…` cgroup under our own, where runs of ours get theirs.
    fn work_cgroup(&self) -> Option<std::path::PathBuf> {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mounts.lines().find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(std::path::PathBuf::from))?
        })?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim_start_matches('/');
        let root = self.dir.path().canonicalize().ok()?;
        let hash = harn_core::hash::fnv64(root.as_os_str().as_encoded_bytes());
        Some(mount.join(own).join(format!("harn-work-{hash:016x}")))
    }

    /// Processes named with this root's tag, after waiting for them to settle at `want`
    /// sleepers. A spawner and its python are tagged too while they run, so a count taken
    /// while they do is not yet the answer; on a loaded machine they may take seconds.
    fn survivors(&self, want: usize) -> Vec<String> {
        let started = Instant::now();
        loop {
            let found = tagged(&self.tag);
            let settled = found.len() == want && found.iter().all(|p| p.contains(SLEEPER));
            if settled || started.elapsed() > Duration::from_secs(20) {
                return found;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Processes left of harn's own (a run's network forwarder is a copy of harn that never
    /// execs, so it carries this root in its command line, not the tag), waited for briefly:
    /// none may outlive the run that started it.
    fn copies_of_harn(&self) -> Vec<String> {
        let root = self.dir.path().display().to_string();
        let started = Instant::now();
        loop {
            let found = tagged(&root);
            if found.is_empty() || started.elapsed() > Duration::from_secs(5) {
                return found;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn transcript(&self, id: &str) -> String {
        let shown = json(&self.harn(&["work", "show", id, "--json"], "end"));
        let Some(run) = shown["projection"]["latest_run_id"].as_str() else { return String::new() };
        let path = self.dir.path().join(format!(".harnery/workflows/{run}/transcript.jsonl"));
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// How many times the spawner ran (the agent's, the workflow's).
    fn spawned(&self) -> usize {
        let log = std::fs::read_to_string(self.dir.path().join("spawned.log"));
        log.map_or(0, |l| l.lines().count())
    }

    /// Starts `work run w` in the background and waits until the workflow's four and the
    /// agent's two that left its process group (its call's end killed the other two) run.
    fn start_sleeping(&self, extra: &[&str]) -> std::process::Child {
        let args = [&["work", "run", "w", "--harness", "spawning"][..], extra].concat();
        let child = self
            .command(&args, "sleep")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let running = self.survivors(6);
        assert_eq!(running.len(), 6, "all six run: {running:#?}");
        child
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        // A failed test leaves nothing behind either.
        for line in tagged(&self.tag) {
            if let Some(pid) = line.split_whitespace().next().and_then(|p| p.parse::<i32>().ok()) {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(pid).unwrap(),
                    rustix::process::Signal::KILL,
                );
            }
        }
    }
}

/// `pid cmdline` of every live process whose command line holds `tag`.
fn tagged(tag: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        if cmdline.contains(tag) && !zombie {
            found.push(format!("{pid} {cmdline}"));
        }
    }
    found
}

fn chown_tree(dir: &Path, uid: u32) {
    let id = Some(rustix::process::Uid::from_raw(uid));
    let gid = Some(rustix::process::Gid::from_raw(uid));
    rustix::fs::chown(dir, id, gid).unwrap();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            chown_tree(&entry.path(), uid);
        } else {
            rustix::fs::chown(entry.path(), id, gid).unwrap();
        }
    }
}

/// The four ways a run ends, each followed by a count of what is left.
fn every_way(user: Option<u32>) {
    // Its end: the workflow exits, leaving its eight behind.
    let root = Root::new(user);
    let out = root.harn(&["work", "run", "w", "--harness", "spawning"], "end");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(root.spawned(), 2, "the agent and the workflow each started theirs: {}", text(&out));
    assert_eq!(root.survivors(0), Vec::<String>::new(), "after its end");
    assert_eq!(root.copies_of_harn(), Vec::<String>::new(), "after its end");
    if let Some(base) = root.work_cgroup().filter(|_| user.is_none()) {
        assert!(!base.exists(), "{} is left behind, empty", base.display());
    }

    // Its timeout.
    let root = Root::new(user);
    let out =
        root.harn(&["work", "run", "w", "--harness", "spawning", "--timeout-secs", "6"], "sleep");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("timed out"), "{}", text(&out));
    assert_eq!(root.spawned(), 2, "the agent and the workflow each started theirs");
    assert_eq!(root.survivors(0), Vec::<String>::new(), "after its timeout");
    assert_eq!(root.copies_of_harn(), Vec::<String>::new(), "after its timeout");

    // A cancel.
    let root = Root::new(user);
    let run = root.start_sleeping(&[]);
    let began = Instant::now();
    let out = root.harn(&["work", "cancel", "w", "--actor", "ana"], "end");
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("the run of w stopped"), "{}", text(&out));
    assert!(began.elapsed() < Duration::from_secs(12), "the grace is bounded");
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("interrupted by work cancel by ana"), "{}", text(&out));
    assert_eq!(root.survivors(0), Vec::<String>::new(), "after a cancel");
    assert_eq!(root.copies_of_harn(), Vec::<String>::new(), "after a cancel");
    let transcript = root.transcript("w");
    assert!(transcript.contains("\"run.cancelled\""), "{transcript}");
    let p = json(&root.harn(&["work", "show", "w", "--json"], "end"))["projection"].clone();
    assert_eq!(p["state"], "cancelled", "{p}");

    // A kill -9 of the host, then the next run of another item.
    let root = Root::new(user);
    let mut run = root.start_sleeping(&[]);
    run.kill().unwrap();
    run.wait().unwrap();
    let left = root.survivors(6);
    assert!(!left.is_empty(), "the host's death alone leaves them running: {left:?}");
    // Until something reaps them, reads say so.
    let show = root.harn(&["work", "show", "w"], "end");
    assert!(text(&show).contains("of lost run"), "{}", text(&show));
    let list = root.harn(&["work", "list"], "end");
    assert!(
        text(&list).contains("w: ") && text(&list).contains("still running"),
        "{}",
        text(&list)
    );
    let out = root.harn(&["work", "run", "other"], "end");
    assert!(text(&out).contains("had lost its host"), "{}", text(&out));
    assert_eq!(root.survivors(0), Vec::<String>::new(), "after the next run");
    assert_eq!(root.copies_of_harn(), Vec::<String>::new(), "after the next run");
    assert!(root.transcript("w").contains("\"run.reaped\""));
}

#[test]
fn no_process_of_a_run_outlives_it_in_its_cgroup() {
    every_way(None);
}

#[test]
fn no_process_of_a_run_outlives_it_without_a_cgroup() {
    if !rustix::process::geteuid().is_root() {
        crate::skip::skip("only root can run harn as another user here");
        return;
    }
    // Nobody's own cgroup is not writable: process groups and HARN_RUN_ID are all it has.
    every_way(Some(65534));
}
