//! Every reader is bounded by what it prints: `run show`, `run list` and `harness ledger` of a
//! 200 MB transcript or ledger stay under 64 MiB resident, measured by the kernel (wait4's
//! peak resident set) on the real binary.

use crate::cli::{harn_at, harn_bin, json, text};
use harn_core::time::WallTime;
use serde_json::json as j;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// What a reader may keep resident, whatever the size of the file it reads.
const BOUND_KIB: i64 = 64 << 10;

/// The size of the files read.
const BIG: u64 = 200 << 20;

/// Runs `cmd` with its output thrown away; returns its exit code and peak resident KiB.
fn peak(cmd: &mut Command) -> (i32, i64) {
    // Waited for by wait4 below, which also gives the peak.
    #[allow(clippy::zombie_processes)]
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own child, not yet waited for; both pointers are valid.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    (libc::WEXITSTATUS(status), usage.ru_maxrss)
}

/// Appends journal lines with `body(i)` to `path`, continuing its sequence numbers, until it
/// holds `size` bytes.
fn grow(path: &Path, size: u64, body: impl Fn(u64) -> serde_json::Value) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut seq = text.lines().count() as u64;
    let mut len = text.len() as u64;
    let mut out = std::io::BufWriter::new(
        std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap(),
    );
    while len < size {
        seq += 1;
        let line = harn_core::journal::encode_line(seq, WallTime(1_790_000_000_000), &body(seq));
        len += line.len() as u64;
        out.write_all(&line).unwrap();
    }
    out.flush().unwrap();
}

#[test]
fn run_show_and_list_of_a_200_mb_transcript_stay_under_64_mib() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    assert!(harn_at(&root, &["example"]).status.success());
    let create = ["work", "create", "Docs", "wf.sh", "--id", "docs", "--objective", "o"];
    assert!(harn_at(&root, &create).status.success());
    let run = harn_at(&root, &["work", "run", "docs", "--harness", "scripted"]);
    assert!(run.status.success(), "{}", text(&run));
    let show = json(&harn_at(&root, &["work", "show", "docs", "--json"]));
    let run_id = show["projection"]["latest_run_id"].as_str().unwrap().to_owned();
    let transcript = root.join(".harnery/workflows").join(&run_id).join("transcript.jsonl");
    let filler = "x".repeat(900);
    grow(
        &transcript,
        BIG,
        |i| j!({ "event": "workflow.message", "run_id": run_id, "message": { "op": "log", "n": i, "text": filler } }),
    );
    for args in
        [&["run", "show", &run_id][..], &["run", "list"][..], &["run", "list", "--json"][..]]
    {
        let (code, kib) = peak(Command::new(harn_bin()).args(args).arg("--root").arg(&root));
        assert_eq!(code, 0, "{args:?}");
        assert!(kib < BOUND_KIB, "{args:?} peaked at {kib} KiB");
    }
}

#[test]
fn the_ledger_of_200_mb_is_read_under_64_mib() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".harnery/harness");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(tmp.path().join("harness.toml"), "[harness.h1]\ncommand = [\"true\"]\n")
        .unwrap();
    let evidence = "y".repeat(700);
    grow(&dir.join("ledger.jsonl"), BIG, |i| {
        j!({ "harness": if i % 2 == 0 { "h1" } else { "h2" }, "decision": "exited",
             "detail": { "code": 1, "run": i }, "desired": "running", "evidence": evidence })
    });
    for args in [&["h1", "--json"][..], &[][..], &["--last", "5", "--json"][..]] {
        let mut cmd = Command::new(harn_bin());
        cmd.args(["harness", "ledger"]).args(args).arg("--root").arg(tmp.path());
        let (code, kib) = peak(&mut cmd);
        assert_eq!(code, 0, "{args:?}");
        assert!(kib < BOUND_KIB, "harness ledger {args:?} peaked at {kib} KiB");
    }
    let last = Command::new(harn_bin())
        .args(["harness", "ledger", "h1", "--last", "2", "--json"])
        .arg("--root")
        .arg(tmp.path())
        .output()
        .unwrap();
    let doc = json(&last);
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{doc}");
    assert!(records.iter().all(|r| r["harness"] == "h1"), "{doc}");
}
