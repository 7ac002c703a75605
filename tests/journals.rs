//! No record is silently dropped: a complete final line that fails its checksum is corruption,
//! reported with its file and line by every reader, and no writer truncates it or appends
//! after it. Only a final line without its newline is a torn tail. The driver the daemon runs
//! is booted over the simulated filesystem, then the real binary over real files.

use crate::cli::{harn_at, json, text};
use harn_core::env::Fs;
use harn_core::harness::daemon::DaemonConfig;
use harn_core::harness::driver::{DaemonPaths, Driver, Env};
use harn_core::journal::encode_line;
use harn_core::time::WallTime;
use harn_sim::clock::VirtualClock;
use harn_sim::entropy::SeededEntropy;
use harn_sim::fs::SimFs;
use harn_sim::harness::process::SimProcesses;
use std::path::Path;

/// Flips one bit in the last complete line of `path`, keeping its newline.
fn damage_last_line(path: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    let end = bytes.len() - 1;
    assert_eq!(bytes[end], b'\n');
    let start = bytes[..end].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes[start + 2] ^= 0x01;
    std::fs::write(path, &bytes).unwrap();
    bytes
}

fn lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

#[test]
fn the_daemon_driver_sets_a_damaged_final_line_aside_and_boots() {
    let paths = DaemonPaths::default();
    let mut fs = SimFs::new();
    fs.create_dir_all(&paths.dir).unwrap();
    let mut journal = Vec::new();
    for seq in 1..=3 {
        journal.extend(encode_line(seq, WallTime(0), &serde_json::json!({"event": "x"})));
    }
    fs.create_new(&paths.events, &journal).unwrap();
    fs.sync_file(&paths.events).unwrap();
    fs.sync_dir(&paths.dir).unwrap();
    let mut e = SeededEntropy::new(1);
    let damaged = fs.damage_last_line(&paths.events, &mut e).unwrap();
    let (mut procs, clock) = (SimProcesses::default(), VirtualClock::default());
    let mut env = Env { fs: &mut fs, spawner: &mut procs, clock: &clock };
    // History is not the daemon's truth: the damaged journal is set aside whole and a new
    // one begun; nothing of it was cut.
    let (mut driver, _) = Driver::open(&mut env, paths.clone(), DaemonConfig::default())
        .unwrap_or_else(|e| panic!("refused to boot over damaged history: {e}"));
    let aside = driver.take_set_aside().expect("the damage is said");
    assert!(aside.damage.contains("events.jsonl:3"), "{}", aside.damage);
    assert_eq!(fs.read(&aside.moved_to).unwrap().unwrap(), damaged, "nothing was cut");
    assert_eq!(fs.read(&paths.events).unwrap().unwrap_or_default(), Vec::<u8>::new());
}

#[test]
fn a_damaged_final_line_of_a_work_history_is_reported_and_never_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    assert!(harn_at(&root, &["example"]).status.success());
    // The example accepted `parser`: its last line is the acceptance's reconciliation.
    let events = root.join(".harnery/work/parser/events.jsonl");
    let damaged = damage_last_line(&events);
    let at = format!("events.jsonl:{}: checksum mismatch", lines(&damaged));

    let show = harn_at(&root, &["work", "show", "parser"]);
    assert_eq!(show.status.code(), Some(1), "{}", text(&show));
    assert!(text(&show).contains(&at), "{}", text(&show));
    let cancel = harn_at(&root, &["work", "cancel", "parser"]);
    assert_eq!(cancel.status.code(), Some(1), "{}", text(&cancel));
    assert!(text(&cancel).contains(&at), "{}", text(&cancel));
    let list = harn_at(&root, &["work", "list", "--json"]);
    let row = json(&list)["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "parser")
        .cloned()
        .unwrap_or_default();
    assert!(row["error"].as_str().unwrap_or("").contains(&at), "listed with its error: {row}");
    assert_eq!(std::fs::read(&events).unwrap(), damaged, "no writer touched the history");
}

#[test]
fn the_harness_daemon_verifies_its_journals_at_boot_and_never_appends_after_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::write(root.join("harness.toml"), "[harness.a]\ncommand = [\"sleep\", \"30\"]\n")
        .unwrap();
    for journal in ["events.jsonl", "ledger.jsonl"] {
        assert!(harn_at(root, &["harness", "up"]).status.success());
        let down = harn_at(root, &["harness", "down"]);
        assert!(down.status.success(), "{}", text(&down));
        let dir = root.join(".harnery/harness");
        let path = dir.join(journal);
        let good = std::fs::read(&path).unwrap();
        // Damage a line in the middle: the tail alone would look fine.
        let mut bytes = good.clone();
        bytes[3] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        // History never holds the boot: the damaged file is set aside whole, untouched.
        let up = harn_at(root, &["harness", "up"]);
        assert_eq!(up.status.code(), Some(0), "{journal}: {}", text(&up));
        let down = harn_at(root, &["harness", "down"]);
        assert!(down.status.success(), "{}", text(&down));
        let aside: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("{journal}.damaged-")))
            .collect();
        assert_eq!(aside.len(), 1, "{journal}: set aside once");
        assert_eq!(
            std::fs::read(aside[0].path()).unwrap(),
            bytes,
            "{journal} was appended to or cut"
        );
        let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
        assert!(log.contains(&format!("{journal}:1:")), "{journal}: the log names the line: {log}");
        std::fs::remove_file(aside[0].path()).unwrap();
    }
}

/// Runs `harn args… --root root` and returns its output and the most memory it held (KiB).
/// A small Python process starts it and reads its usage with `wait4`: a process forked from
/// this test binary would count the test's own memory, which its image held before `exec`.
fn harn_with_peak(root: &Path, args: &[&str]) -> (std::process::Output, i64) {
    const MEASURE: &str = "import os, subprocess, sys\n\
        p = subprocess.Popen(sys.argv[2:])\n\
        _, status, usage = os.wait4(p.pid, 0)\n\
        open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n\
        sys.exit(os.waitstatus_to_exitcode(status))\n";
    let peak = tempfile::NamedTempFile::new().unwrap();
    let out = std::process::Command::new("python3")
        .args(["-c", MEASURE])
        .arg(peak.path())
        .arg(crate::cli::harn_bin())
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap();
    let kib = std::fs::read_to_string(peak.path()).unwrap().trim().parse().unwrap();
    (out, kib)
}

/// A history grown long with receipts (40 MB here; read whole it cost three times its size)
/// is read in chunks: `work show`, `list` and `cancel` stay under 64 MiB.
#[test]
fn a_long_history_is_read_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let out =
        harn_at(root, &["work", "create", "Long", "wf.sh", "--id", "long", "--objective", "o"]);
    assert!(out.status.success(), "{}", text(&out));
    let path = root.join(".harnery/work/long/events.jsonl");
    let first = std::fs::read(&path).unwrap();
    let mut seq = first.iter().filter(|&&b| b == b'\n').count() as u64;
    let mut bytes = first;
    let note = "x".repeat(120);
    while bytes.len() < 40 << 20 {
        seq += 1;
        let body = serde_json::json!({
            "schema_version": 1, "work_id": "long", "seq": seq, "ts": 1_700_000_000_000i64,
            "actor": "operator", "reason": note, "event": "work.reconciled",
            "state": "ready", "next_action": "run",
        });
        bytes.extend(encode_line(seq, WallTime(1_700_000_000_000), &body));
    }
    std::fs::write(&path, &bytes).unwrap();
    let limit_kib = 64 * 1024;
    for args in [&["work", "show", "long"][..], &["work", "list"], &["work", "cancel", "long"]] {
        let (out, peak) = harn_with_peak(root, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert!(peak < limit_kib, "{args:?} held {peak} KiB");
    }
    let shown = json(&harn_at(root, &["work", "show", "long", "--json"]));
    assert_eq!(shown["projection"]["state"], "cancelled", "{}", shown["projection"]);
    assert_eq!(shown["history_len"], seq + 1, "every event is counted");
}
