//! `harn work` with the real binary in temporary roots: creation, dependencies, governance,
//! and corrupt or torn histories reported with file and line.

use crate::cli::{harn_bin, text};
use std::path::Path;
use std::process::{Command, Output};

fn work(root: &Path, args: &[&str]) -> Output {
    Command::new(harn_bin()).arg("work").args(args).arg("--root").arg(root).output().unwrap()
}

fn state(root: &Path, id: &str) -> (String, String) {
    let out = work(root, &["show", id, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &doc["projection"];
    (p["state"].as_str().unwrap().to_owned(), p["next_action"].as_str().unwrap().to_owned())
}

fn root_with_workflow() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    dir
}

#[test]
fn a_fresh_item_is_ready_and_a_dependent_waits_for_its_acceptance() {
    let dir = root_with_workflow();
    let r = dir.path();
    let out = work(
        r,
        &[
            "create",
            "Parser",
            "wf.sh",
            "--objective",
            "Parse it",
            "--accept",
            "tests pass",
            "--id",
            "parser",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(state(r, "parser"), ("ready".into(), "run".into()));
    let out = work(
        r,
        &[
            "create",
            "Wire",
            "wf.sh",
            "--objective",
            "Use it",
            "--depends-on",
            "parser",
            "--id",
            "wire",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(state(r, "wire"), ("waiting".into(), "wait_for_dependencies".into()));
    let doc: serde_json::Value =
        serde_json::from_slice(&work(r, &["list", "--json"]).stdout).unwrap();
    assert_eq!(doc["items"].as_array().unwrap().len(), 2);
    let intent: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.join(".harnery/work/parser/intent.json")).unwrap())
            .unwrap();
    assert_eq!(
        intent["workflow"]["sha256"].as_str().unwrap().len(),
        64,
        "the workflow is frozen by digest"
    );
}

#[test]
fn cancel_then_reopen_returns_to_ready_and_keeps_both_events() {
    let dir = root_with_workflow();
    let r = dir.path();
    assert!(work(r, &["create", "T", "wf.sh", "--objective", "O", "--id", "w"]).status.success());
    assert!(work(r, &["cancel", "w", "--reason", "not now", "--actor", "ana"]).status.success());
    assert_eq!(state(r, "w"), ("cancelled".into(), "none".into()));
    assert_eq!(
        work(r, &["cancel", "w"]).status.code(),
        Some(1),
        "a cancelled item cannot be cancelled again"
    );
    assert!(work(r, &["reopen", "w", "--finding", "needs docs"]).status.success());
    assert_eq!(state(r, "w"), ("ready".into(), "run".into()));
    let doc: serde_json::Value =
        serde_json::from_slice(&work(r, &["show", "w", "--json"]).stdout).unwrap();
    let events: Vec<&str> =
        doc["events"].as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["work.created", "work.cancelled", "work.reopened"]);
    assert_eq!(doc["events"][1]["actor"], "ana");
    assert_eq!(doc["projection"]["open_findings"][0]["id"], "f1");
}

#[test]
fn bad_input_is_refused_with_exit_2_and_writes_nothing() {
    let dir = root_with_workflow();
    let r = dir.path();
    for args in [
        &["create", "T", "missing.sh", "--objective", "O"][..],
        &["create", "T", "wf.sh", "--objective", "O", "--depends-on", "nope"],
        &["create", "T", "wf.sh", "--objective", " "],
        &["create", "T", "wf.sh", "--objective", "O", "--id", "Bad/Id"],
        &["create", "T", "wf.sh", "--objective", "O", "--max-attempts", "0"],
    ] {
        let out = work(r, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    assert!(!r.join(".harnery").exists(), "nothing was written");
}

#[test]
fn a_corrupt_history_fails_a_direct_read_with_file_and_line_but_not_the_list() {
    let dir = root_with_workflow();
    let r = dir.path();
    assert!(work(r, &["create", "A", "wf.sh", "--objective", "O", "--id", "a"]).status.success());
    assert!(work(r, &["create", "B", "wf.sh", "--objective", "O", "--id", "b"]).status.success());
    let events = r.join(".harnery/work/b/events.jsonl");
    let mut bytes = std::fs::read(&events).unwrap();
    bytes.extend_from_slice(b"{\"not\":\"checksummed\"}\n{\"v\":1}\n");
    std::fs::write(&events, &bytes).unwrap();
    let before = std::fs::read(&events).unwrap();
    let out = work(r, &["show", "b"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("events.jsonl:2"), "{}", text(&out));
    let out = work(r, &["list", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = doc["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "the unreadable item is a row: {doc}");
    assert_eq!(
        (items[1]["id"].as_str(), items[1]["state"].as_str()),
        (Some("b"), Some("unreadable"))
    );
    assert!(items[1]["error"].as_str().unwrap().contains("events.jsonl:2"), "{doc}");
    assert_eq!(std::fs::read(&events).unwrap(), before, "reading never rewrites");
}

#[test]
fn a_torn_final_event_is_ignored_and_cut_off_by_the_next_append() {
    let dir = root_with_workflow();
    let r = dir.path();
    assert!(work(r, &["create", "A", "wf.sh", "--objective", "O", "--id", "a"]).status.success());
    let events = r.join(".harnery/work/a/events.jsonl");
    let whole = std::fs::read(&events).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(b"{\"v\":1,\"seq\":2");
    std::fs::write(&events, &torn).unwrap();
    assert_eq!(state(r, "a").0, "ready", "the interrupted append never happened");
    let out = work(r, &["cancel", "a"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = std::fs::read(&events).unwrap();
    assert!(after.starts_with(&whole) && after.ends_with(b"\n"), "the torn bytes are gone");
    assert!(!String::from_utf8_lossy(&after).contains("\"seq\":2{"), "no torn prefix remains");
    assert_eq!(state(r, "a").0, "cancelled");
}

#[test]
fn an_intent_without_its_creation_event_is_refused_and_left_untouched() {
    let dir = root_with_workflow();
    let r = dir.path();
    assert!(work(r, &["create", "A", "wf.sh", "--objective", "O", "--id", "a"]).status.success());
    let entries: Vec<String> = std::fs::read_dir(r.join(".harnery/work"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["a"], "creation leaves no staging directory behind");
    let events = r.join(".harnery/work/a/events.jsonl");
    std::fs::write(&events, b"").unwrap();
    let shown = work(r, &["show", "a"]);
    assert_eq!(shown.status.code(), Some(1));
    assert!(text(&shown).contains("no work.created event"), "{}", text(&shown));
    let cancelled = work(r, &["cancel", "a"]);
    assert_eq!(cancelled.status.code(), Some(1), "{}", text(&cancelled));
    assert_eq!(std::fs::read(&events).unwrap(), b"", "a refused cancel writes nothing");
    let again = work(r, &["create", "A", "wf.sh", "--objective", "O", "--id", "a"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again).contains("already exists"), "{}", text(&again));
}

/// `work show` names what to type next: a fresh item's run, and a cancelled item's reopen;
/// its history reads in words.
#[test]
fn show_names_the_command_that_moves_the_item_on() {
    let dir = root_with_workflow();
    let r = dir.path();
    assert!(work(r, &["create", "T", "wf.sh", "--objective", "O", "--id", "w"]).status.success());
    let shown = String::from_utf8_lossy(&work(r, &["show", "w"]).stdout).into_owned();
    assert!(shown.contains("next       harn work run w --harness HARNESS"), "{shown}");
    assert!(shown.contains("history    1 event\n"), "one event, not one events: {shown}");
    assert!(work(r, &["cancel", "w"]).status.success());
    let shown = String::from_utf8_lossy(&work(r, &["show", "w"]).stdout).into_owned();
    assert!(shown.contains("next       harn work reopen w --reason WHY"), "{shown}");
    // The history reads in words, one line an event.
    let lines: Vec<&str> = shown.lines().filter(|l| l.starts_with("    ")).collect();
    assert_eq!(lines.len(), 2, "{shown}");
    assert!(lines[0].starts_with("    1  20") && lines[0].ends_with("  created"), "{shown}");
    assert!(lines[1].starts_with("    2  ") && lines[1].ends_with("  cancelled"), "{shown}");
    let doc: serde_json::Value =
        serde_json::from_slice(&work(r, &["show", "w", "--json"]).stdout).unwrap();
    assert_eq!(doc["next_commands"][0], "harn work reopen w --reason WHY");
}

/// `work list` columns fit a generated id: every row's state starts where the header's does.
#[test]
fn list_columns_fit_generated_ids() {
    let dir = root_with_workflow();
    let r = dir.path();
    // A title with no letter or digit gets a stamped id, the longest kind.
    assert!(work(r, &["create", "…", "wf.sh", "--objective", "O"]).status.success());
    assert!(work(r, &["create", "U", "wf.sh", "--objective", "O", "--id", "u"]).status.success());
    let listed = String::from_utf8_lossy(&work(r, &["list"]).stdout).into_owned();
    let at = |line: &str, word: &str| line.find(word).unwrap_or(usize::MAX);
    let mut lines = listed.lines();
    let header = lines.next().unwrap();
    for row in lines {
        assert_eq!(at(row, "ready"), at(header, "STATE"), "{listed}");
    }
}

/// A generated id reads as the title: its words, short, numbered when taken.
#[test]
fn generated_ids_are_named_after_the_title() {
    let dir = root_with_workflow();
    let r = dir.path();
    let id = |title: &str| {
        let out = work(r, &["create", title, "wf.sh", "--objective", "O", "--json"]);
        assert!(out.status.success(), "{}", crate::cli::text(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["intent"]["id"].as_str().unwrap().to_owned()
    };
    assert_eq!(id("Fix the parser"), "fix-the-parser");
    assert_eq!(id("Fix the parser"), "fix-the-parser-2");
    assert_eq!(id("Make the tokenizer handle tabs"), "make-the-tokenizer");
    assert!(id("…").starts_with("work-"), "no word: stamped");
    let goal = ["supervisor", "create", "fix-the-parser", "--team", "team.json", "--json"];
    std::fs::write(r.join("team.json"), r#"{"worker": {"instructions": "do it"}}"#).unwrap();
    let out = crate::cli::harn_at(r, &goal);
    assert!(out.status.success(), "{}", crate::cli::text(&out));
    let listed = String::from_utf8_lossy(&crate::cli::harn_at(r, &["supervisor", "list"]).stdout)
        .into_owned();
    assert!(listed.starts_with("ID "), "a header names the columns: {listed}");
    assert!(
        listed.lines().nth(1).is_some_and(|l| l.starts_with("fix-the-parser ")),
        "the goal is named after its root's title: {listed}"
    );
}

/// States are coloured in a terminal or with `--color always`, never into a pipe by default
/// or under `--color never`; `--quiet` prints only what a script needs.
#[test]
fn states_are_coloured_only_when_asked_or_in_a_terminal_and_quiet_prints_the_id() {
    let dir = root_with_workflow();
    let r = dir.path();
    let out = work(r, &["create", "Fix the parser", "wf.sh", "--objective", "O", "--quiet"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fix-the-parser\n", "{}", text(&out));
    let piped = work(r, &["list"]);
    assert!(!piped.stdout.contains(&0x1b), "no colour into a pipe");
    let always = work(r, &["list", "--color", "always"]);
    let shown = String::from_utf8_lossy(&always.stdout).into_owned();
    assert!(shown.contains("\u{1b}[32mready\u{1b}[0m"), "{shown:?}");
    let header = shown.lines().next().unwrap().to_owned();
    let row = shown.lines().nth(1).unwrap().replace("\u{1b}[32m", "").replace("\u{1b}[0m", "");
    assert_eq!(row.find("run"), header.find("NEXT"), "padding stays outside the colour");
    let never = work(r, &["show", "fix", "--color", "never"]);
    assert!(!never.stdout.contains(&0x1b));
    let bad = work(r, &["list", "--color", "sometimes"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Twelve creates of one title at once: choosing the generated id and creating the item is
/// one exclusive step, so each makes an item of its own, and every one reads.
#[test]
fn parallel_creates_of_one_title_make_as_many_readable_items() {
    let dir = root_with_workflow();
    let r = dir.path().to_owned();
    let children: Vec<_> = (0..12)
        .map(|_| {
            Command::new(harn_bin())
                .args(["work", "create", "Par t", "wf.sh", "--objective", "o", "--quiet"])
                .arg("--root")
                .arg(&r)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        ids.insert(String::from_utf8(out.stdout).unwrap().trim().to_owned());
    }
    assert_eq!(ids.len(), 12, "{ids:?}");
    for id in &ids {
        let out = work(&r, &["show", id, "--json"]);
        assert!(out.status.success(), "{id}: {}", text(&out));
    }
    let list = work(&r, &["list", "--json"]);
    assert!(list.status.success() && !text(&list).contains("error"), "{}", text(&list));
}
