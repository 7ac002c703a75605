//! A full disk degrades the harness daemon, never stops it: the real daemon on a small tmpfs
//! that one harness's log fills, while another crash-loops. Mounting needs root; a machine
//! where it fails prints that it skipped.

use crate::cli::{harn_bin, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A tmpfs of `size` mounted on a temporary directory, with a harness root in it; unmounted
/// (after the daemon is stopped) when dropped.
struct SmallDisk {
    _dir: tempfile::TempDir,
    mount: PathBuf,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("disk");
        std::fs::create_dir(&mount).unwrap();
        let options = format!("size={size},mode=0700");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(&mount)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallDisk { _dir: dir, mount }),
            Ok(o) => {
                crate::skip::skip(format!("cannot mount a tmpfs here: {}", text(&o)));
                None
            }
            Err(e) => {
                crate::skip::skip(format!("cannot run mount: {e}"));
                None
            }
        }
    }

    fn root(&self) -> &Path {
        &self.mount
    }

    fn harness(&self, args: &[&str]) -> Output {
        Command::new(harn_bin())
            .arg("harness")
            .args(args)
            .arg("--root")
            .arg(self.root())
            .output()
            .unwrap()
    }

    fn list(&self) -> Value {
        let out = self.harness(&["list", "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn runs(&self, name: &str) -> u64 {
        let doc = self.list();
        let rows = doc["harnesses"].as_array().unwrap();
        rows.iter().find(|h| h["name"] == name).unwrap()["runs"].as_u64().unwrap()
    }

    /// Bytes still free, as the filesystem says.
    fn free(&self) -> u64 {
        let stat = rustix::fs::statvfs(self.root()).unwrap();
        stat.f_bavail * stat.f_frsize
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = self.harness(&["down", "--timeout", "5"]);
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

fn until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_log_that_fills_the_disk_leaves_the_daemon_supervising() {
    let Some(disk) = SmallDisk::mount("3m") else { return };
    let line = "x".repeat(200);
    let toml = format!(
        "[limits]\ngive_up_after = 0\nrestart_delay_ms = 100\nrestart_delay_max_ms = 200\n\n\
         [harness.filler]\ncommand = [\"sh\", \"-c\", \"while :; do echo {line}; done\"]\n\n\
         [harness.looper]\ncommand = [\"sh\", \"-c\", \"sleep 0.2; exit 1\"]\n\
         restart_delay_ms = 100\n"
    );
    std::fs::write(disk.root().join("harness.toml"), toml).unwrap();
    let up = disk.harness(&["up"]);
    assert!(up.status.success(), "{}", text(&up));
    until("the disk to fill", Duration::from_secs(30), || disk.free() < 16 << 10);

    // Full: the crash-looping harness goes on being restarted, and `list` says why the
    // history has gaps.
    std::thread::sleep(Duration::from_secs(1));
    let before = disk.runs("looper");
    until("two more runs of looper", Duration::from_secs(20), || disk.runs("looper") >= before + 2);
    let doc = disk.list();
    assert_eq!(doc["daemon"]["running"], true, "{doc}");
    let unwritten = &doc["daemon"]["unwritten"];
    assert!(unwritten["cause"].as_str().is_some_and(|c| c.contains("NoSpace")), "{doc}");
    let table = disk.harness(&["list"]);
    assert!(text(&table).contains("the disk is full"), "{}", text(&table));

    // A person's command is still carried out and saved: the state file has its space.
    let stop = disk.harness(&["stop", "filler"]);
    assert!(stop.status.success(), "{}", text(&stop));
    let state = std::fs::read(disk.root().join(".harnery/harness/state.json")).unwrap();
    let state: Value = serde_json::from_slice(&state).unwrap();
    assert_eq!(state["harnesses"]["filler"]["enabled"], false, "{state}");

    // Room again: the ledger says what it could not take, and the log what it dropped.
    // (Cut, not removed: the daemon holds the log open, and a removed file keeps its space.)
    let log = disk.root().join(".harnery/harness/logs/filler.log");
    std::fs::OpenOptions::new().write(true).open(log).unwrap().set_len(0).unwrap();
    // (A record may have fitted for a moment while the log still grew: what counts is that
    // once there is room, nothing is left unwritten and the ledger says what was dropped.)
    until("the history to be written again", Duration::from_secs(20), || {
        disk.list()["daemon"]["unwritten"].is_null()
    });
    let ledger = disk.root().join(".harnery/harness/ledger.jsonl");
    let records = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert!(records.contains("\"records_dropped\""), "the ledger says what was dropped");
    let down = disk.harness(&["down", "--timeout", "5"]);
    let log = std::fs::read_to_string(disk.root().join(".harnery/harness/daemon.log"));
    assert!(down.status.success(), "{}\n{}", text(&down), log.unwrap_or_default());
}

#[test]
fn a_daemon_that_cannot_start_on_a_full_disk_says_why() {
    let Some(disk) = SmallDisk::mount("1m") else { return };
    std::fs::write(
        disk.root().join("harness.toml"),
        "[harness.a]\ncommand = [\"sleep\", \"100\"]\n",
    )
    .unwrap();
    // Fill what is left, so the daemon's log and its first files get nothing.
    let mut fill = std::fs::File::create(disk.root().join("fill")).unwrap();
    let block = vec![0u8; 4096];
    while std::io::Write::write_all(&mut fill, &block).is_ok() {}
    let up = disk.harness(&["up"]);
    assert!(!up.status.success(), "{}", text(&up));
    let said = text(&up);
    assert!(said.contains("before it was ready: "), "{said}");
    assert!(said.contains("NoSpace") || said.contains("No space left"), "{said}");
}
