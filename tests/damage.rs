//! Damage found by meaning: a history that lost complete lines is caught by the records that
//! must agree with it, and a cut transcript is damage, not a short run. The real binary on
//! real files.

use crate::cli::{harn_at, json, text};
use std::path::{Path, PathBuf};

/// The example's root with item `docs`, run once (its proof in review).
fn ran_once(at: &Path) -> PathBuf {
    let root = at.join("r");
    let out = harn_at(&root, &["example"]);
    assert!(out.status.success(), "{}", text(&out));
    let create = ["work", "create", "Docs", "wf.sh", "--id", "docs", "--objective", "o"];
    assert!(harn_at(&root, &create).status.success());
    let run = harn_at(&root, &["work", "run", "docs", "--harness", "scripted"]);
    assert!(run.status.success(), "{}", text(&run));
    root
}

fn runs(root: &Path) -> usize {
    std::fs::read_dir(root.join(".harnery/workflows")).unwrap().count()
}

fn transcript(root: &Path) -> PathBuf {
    let show = json(&harn_at(root, &["work", "show", "docs", "--json"]));
    let run = show["projection"]["latest_run_id"].as_str().unwrap().to_owned();
    root.join(".harnery/workflows").join(run).join("transcript.jsonl")
}

#[test]
fn a_history_cut_after_its_first_line_starts_no_second_attempt_one() {
    let tmp = tempfile::tempdir().unwrap();
    let root = ran_once(tmp.path());
    let events = root.join(".harnery/work/docs/events.jsonl");
    let bytes = std::fs::read(&events).unwrap();
    let first = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    std::fs::write(&events, &bytes[..first]).unwrap();
    let before = runs(&root);

    let run = harn_at(&root, &["work", "run", "docs", "--harness", "scripted"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    assert!(text(&run).contains("the history was cut"), "{}", text(&run));
    assert!(text(&run).contains("events.reach"), "names the record that disagrees: {}", text(&run));
    assert_eq!(runs(&root), before, "no run was started");
    let show = harn_at(&root, &["work", "show", "docs"]);
    assert_eq!(show.status.code(), Some(1), "no plausible state is shown: {}", text(&show));
    assert!(text(&show).contains("the history was cut"), "{}", text(&show));
    // Without its reach (a root from before it was kept), the attempt's claim still tells.
    std::fs::remove_file(root.join(".harnery/work/docs/events.reach")).unwrap();
    let run = harn_at(&root, &["work", "run", "docs", "--harness", "scripted"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    assert!(text(&run).contains("attempts/1"), "names the record that disagrees: {}", text(&run));
    assert_eq!(runs(&root), before, "no run was started");
    let doc = json(&harn_at(&root, &["work", "show", "docs", "--json"]));
    assert!(doc["damage"].as_str().is_some_and(|d| d.contains("run wf-")), "{doc}");
}

#[test]
fn an_emptied_or_cut_transcript_makes_its_proof_count_for_nothing() {
    for cut in ["empty", "mid-line"] {
        let tmp = tempfile::tempdir().unwrap();
        let root = ran_once(tmp.path());
        let path = transcript(&root);
        let bytes = std::fs::read(&path).unwrap();
        let keep = if cut == "empty" { 0 } else { bytes.len() / 2 };
        std::fs::write(&path, &bytes[..keep]).unwrap();
        let accept = harn_at(&root, &["work", "accept", "docs"]);
        assert_ne!(accept.status.code(), Some(0), "{cut}: {}", text(&accept));
        assert!(text(&accept).contains("cut"), "{cut}: {}", text(&accept));
        // Reads refuse the proof, naming the file, why and what to do.
        let show = harn_at(&root, &["work", "show", "docs"]);
        assert!(!show.status.success(), "{cut}: {}", text(&show));
        assert!(text(&show).contains("it was cut"), "{cut}: {}", text(&show));
        assert!(text(&show).contains("out of .harnery/workflows"), "{cut}: {}", text(&show));
    }
}

#[test]
fn a_transcript_changed_within_its_sealed_length_is_refused_at_accept() {
    let tmp = tempfile::tempdir().unwrap();
    let root = ran_once(tmp.path());
    let path = transcript(&root);
    let text_of = std::fs::read_to_string(&path).unwrap();
    // The same length, one word changed inside a record harn checksums: the read may or may
    // not notice; the decision must.
    let changed = text_of.replacen("implement", "implemenT", 1);
    assert_ne!(changed, text_of);
    std::fs::write(&path, changed).unwrap();
    let accept = harn_at(&root, &["work", "accept", "docs"]);
    assert_ne!(accept.status.code(), Some(0), "{}", text(&accept));
}

#[test]
fn a_run_directory_left_empty_says_its_start_was_cut_short() {
    let tmp = tempfile::tempdir().unwrap();
    let root = ran_once(tmp.path());
    let run = "wf-2026-01-01-00-00-00-000-abcdef";
    std::fs::create_dir(root.join(".harnery/workflows").join(run)).unwrap();
    let show = harn_at(&root, &["run", "show", run]);
    assert_eq!(show.status.code(), Some(1), "{}", text(&show));
    assert!(text(&show).contains("cut short"), "{}", text(&show));
    let list = harn_at(&root, &["run", "list"]);
    assert!(list.status.success(), "{}", text(&list));
}
