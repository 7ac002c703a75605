//! Bounded inputs and outputs: a device or a FIFO named as a workflow, a run that floods its
//! stderr or its stdout, control sequences in titles and workflow output, ids that read as
//! options, working directories that leave the root, and a crash loop with no restart delay.

use crate::cli::{harn_at, json, text};
use crate::harness_daemon::Root;
use std::path::Path;
use std::time::{Duration, Instant};

/// A root with an executable `wf.sh` holding `body` after reading the start line.
fn root_with(body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.sh");
    std::fs::write(&wf, format!("#!/bin/sh\nread start\n{body}\n")).unwrap();
    std::fs::set_permissions(&wf, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir
}

fn create(root: &Path, title: &str) -> std::process::Output {
    harn_at(root, &["work", "create", title, "wf.sh", "--id", "w", "--objective", "o"])
}

#[test]
fn a_device_or_a_fifo_named_as_a_workflow_is_refused_at_once_and_writes_nothing() {
    let dir = root_with("");
    let r = dir.path();
    crate::cli::harn_bin(); // Built before anything is timed.
    let fifo = r.join("fifo");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
    for workflow in ["/dev/zero", fifo.to_str().unwrap()] {
        let began = Instant::now();
        let out = harn_at(r, &["work", "create", "T", workflow, "--id", "w", "--objective", "o"]);
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{workflow}: it took {:?}",
            began.elapsed()
        );
        assert_eq!(out.status.code(), Some(2), "{workflow}: {}", text(&out));
        assert!(text(&out).contains("not a regular file"), "{}", text(&out));
        assert!(!r.join(".harnery/work/w").exists(), "nothing was written");
    }
}

#[test]
fn a_run_that_floods_stderr_and_stdout_keeps_a_bounded_log_and_a_summary() {
    // 20 MB of stderr, and 5,000 lines of stdout that are not protocol messages.
    let body = "head -c 20000000 /dev/zero | tr '\\0' x >&2\n\
                i=0; while [ $i -lt 5000 ]; do echo \"noise $i\"; i=$((i + 1)); done\n\
                echo '{\"op\":\"result\",\"ok\":false,\"error\":\"done\"}'";
    let dir = root_with(body);
    let r = dir.path();
    assert!(create(r, "T").status.success());
    let out = harn_at(r, &["work", "run", "w", "--json"]);
    let run = json(&out)["run_id"].as_str().unwrap().to_owned();
    let run_dir = r.join(format!(".harnery/workflows/{run}"));
    let size = |name: &str| std::fs::metadata(run_dir.join(name)).map_or(0, |m| m.len());
    assert!(size("stderr.log") <= 8 << 20 && size("stderr.log.1") <= 8 << 20, "rotated at 8 MiB");
    assert!(size("stderr.log") + size("stderr.log.1") > 8 << 20, "the newest output is kept");
    assert!(!run_dir.join("stderr.log.2").exists(), "one older file only");
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    let malformed = transcript.lines().filter(|l| l.contains("\"workflow.malformed\"")).count();
    assert!(malformed <= 21, "{malformed} malformed records for 5,000 lines");
    assert!(transcript.contains("\"suppressed\":4980"), "the rest are counted once");
}

#[test]
fn a_run_that_floods_evidence_leaves_a_bounded_proof_and_transcript_that_still_decide() {
    // 3,500 evidence records of 3 KB each (10.5 MB), every one citing the item's statement,
    // the last one failing it.
    let body = "pad=$(head -c 3000 /dev/zero | tr '\\0' x)\n\
                i=0; while [ $i -lt 3499 ]; do echo \"{\\\"op\\\":\\\"evidence\\\",\\\"kind\\\":\\\"t\\\",\\\"status\\\":\\\"passed\\\",\\\"label\\\":\\\"$pad\\\",\\\"acceptanceIds\\\":[\\\"accept-1\\\"]}\"; i=$((i + 1)); done\n\
                echo '{\"op\":\"evidence\",\"kind\":\"t\",\"status\":\"failed\",\"label\":\"last\",\"acceptanceIds\":[\"accept-1\"]}'\n\
                echo '{\"op\":\"result\",\"ok\":true}'";
    let dir = root_with(body);
    let r = dir.path();
    let out = harn_at(r, &["work", "create", "T", "wf.sh", "--id", "w", "--objective", "o"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = harn_at(r, &["work", "run", "w", "--json"]);
    let doc = json(&out);
    let proof = &doc["proof"];
    assert_eq!(proof["evidence"].as_array().unwrap().len(), 500, "the first 500 are kept");
    assert_eq!(proof["evidence_cut"]["records"], 3000, "{}", proof["evidence_cut"]);
    // The cut records still decide: the last one, cut, fails the item's statement.
    let criterion = &proof["acceptance"]["criteria"][0];
    assert_eq!(
        (criterion["evidence"].as_u64(), criterion["verdict"].as_str()),
        (Some(3500), Some("unsatisfied"))
    );
    let run = proof["run"]["id"].as_str().unwrap();
    let run_dir = r.join(format!(".harnery/workflows/{run}"));
    let size = |name: &str| std::fs::metadata(run_dir.join(name)).unwrap().len();
    assert!(size("proof.json") < 2 << 20, "proof of {} bytes", size("proof.json"));
    assert!(size("transcript.jsonl") < 9 << 20, "transcript of {} bytes", size("transcript.jsonl"));
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    assert!(transcript.contains("\"event\":\"workflow.cut\""), "the cut is said");
}

#[test]
fn control_sequences_from_titles_and_workflows_never_reach_the_terminal() {
    let evil = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}]52;c;ZXZpbA==\u{7}";
    let dir = root_with(&format!(
        "printf '%s\\n' '{{\"op\":\"result\",\"ok\":false,\"error\":\"{}\"}}' >&1",
        evil.replace('\u{1b}', "\\u001b").replace('\u{7}', "\\u0007")
    ));
    let r = dir.path();
    assert!(create(r, &format!("title {evil}")).status.success());
    let run = harn_at(r, &["work", "run", "w"]);
    let run_id = json(&harn_at(r, &["work", "show", "w", "--json"]))["projection"]["latest_run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let outputs = [
        run,
        harn_at(r, &["work", "list"]),
        harn_at(r, &["work", "show", "w"]),
        harn_at(r, &["run", "show", &run_id]),
        harn_at(r, &["dash", "--once", "--page", "work"]),
    ];
    for out in &outputs {
        let all = [&out.stdout[..], &out.stderr[..]].concat();
        assert!(!all.contains(&0x1b) && !all.contains(&0x07), "raw control bytes: {}", text(out));
    }
    assert!(text(&outputs[1]).contains("^[]0;owned"), "shown, not hidden: {}", text(&outputs[1]));
}

#[test]
fn ids_never_read_as_options_and_a_relative_cwd_stays_inside_the_root() {
    let dir = root_with("echo '{\"op\":\"result\",\"ok\":true}'");
    let r = dir.path();
    let out = harn_at(r, &["work", "create", "T", "wf.sh", "--id=-rf", "--objective", "o"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("may not start with '-'"), "{}", text(&out));
    assert!(create(r, "T").status.success());
    let out = harn_at(r, &["work", "run", "w", "--cwd", "../../.."]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("outside the coordination root"), "{}", text(&out));
    let p = json(&harn_at(r, &["work", "show", "w", "--json"]))["projection"].clone();
    assert_eq!(p["attempts_used"], 0, "refused before anything was recorded");

    let root = Root::new("[harness.a]\ncommand = [\"sleep\", \"1\"]\ncwd = \"../..\"\n");
    let out = root.harn(&["up"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("harness.a.cwd"), "{}", text(&out));

    // A relative cwd is resolved before it is checked: a link inside leads outside.
    let root = Root::new("[harness.a]\ncommand = [\"sleep\", \"1\"]\ncwd = \"link\"\n");
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.dir.path().join("link")).unwrap();
    let out = root.harn(&["up"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("harness.a.cwd") && said.contains("resolves to"), "{said}");
}

#[test]
fn a_crash_loop_with_no_restart_delay_still_slows_down_once_it_flaps() {
    let root = Root::new(
        "[limits]\nrestart_delay_ms = 0\ngive_up_after = 0\n[harness.loop]\ncommand = [\"true\"]\n",
    );
    root.up();
    std::thread::sleep(Duration::from_secs(3));
    let runs = root.harness("loop")["runs"].as_u64().unwrap();
    assert!(runs < 40, "{runs} runs in 3 s: the backoff did not grow");
    assert!(runs >= 4, "it did restart: {runs}");
}
