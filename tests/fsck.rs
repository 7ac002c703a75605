//! `harn fsck` checks every record of a root and says what is damaged, where, and what to do;
//! `--repair` sets a damaged daemon journal aside and changes nothing else.

use crate::cli::{harn_at, json, text};

#[test]
fn fsck_finds_a_cut_history_a_damaged_transcript_and_a_damaged_ledger() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    assert!(harn_at(&root, &["example"]).status.success());
    let clean = harn_at(&root, &["fsck"]);
    assert!(clean.status.success(), "{}", text(&clean));
    assert!(text(&clean).contains("no damage"), "{}", text(&clean));

    // A history cut to its first line, a transcript with a flipped byte, a ledger line whose
    // checksum fails.
    let events = root.join(".harnery/work/cli/events.jsonl");
    let bytes = std::fs::read(&events).unwrap();
    let first = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    std::fs::write(&events, &bytes[..first]).unwrap();
    let runs: Vec<_> = std::fs::read_dir(root.join(".harnery/workflows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let transcript = runs[0].join("transcript.jsonl");
    let mut t = std::fs::read(&transcript).unwrap();
    let at = t.iter().position(|&b| b == b':').unwrap() + 1;
    t[at] ^= 1;
    std::fs::write(&transcript, &t).unwrap();
    let harness = root.join(".harnery/harness");
    std::fs::create_dir_all(&harness).unwrap();
    std::fs::write(
        harness.join("ledger.jsonl"),
        "{\"v\":1,\"seq\":1,\"ts\":1,\"body\":{},\"crc\":\"00000000\"}\n",
    )
    .unwrap();

    let out = harn_at(&root, &["fsck", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc = json(&out);
    let files: Vec<&str> =
        doc["damage"].as_array().unwrap().iter().map(|d| d["file"].as_str().unwrap()).collect();
    assert!(files.iter().any(|f| f.ends_with("work/cli/events.jsonl")), "{doc}");
    assert!(files.iter().any(|f| f.ends_with("ledger.jsonl")), "{doc}");
    assert!(files.iter().any(|f| f.contains("workflows")), "{doc}");
    assert_eq!(doc["clean"], false);

    let repair = harn_at(&root, &["fsck", "--repair"]);
    assert_eq!(repair.status.code(), Some(1), "the rest is still damaged: {}", text(&repair));
    assert!(text(&repair).contains("set aside as"), "{}", text(&repair));
    assert!(
        !harness.join("ledger.jsonl").exists()
            || std::fs::read(harness.join("ledger.jsonl")).unwrap().is_empty()
    );
    let aside = std::fs::read_dir(&harness)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains("damaged-"))
        .count();
    assert_eq!(aside, 1, "the damaged ledger was kept aside, not deleted");
    assert_eq!(std::fs::read(&events).unwrap(), &bytes[..first], "nothing else was changed");
}

/// The first `n` lines of `file`, written back in its place: a cut at a line boundary.
fn cut_to_lines(file: &std::path::Path, n: usize) {
    let bytes = std::fs::read(file).unwrap();
    let end = bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').nth(n - 1).unwrap().0 + 1;
    std::fs::write(file, &bytes[..end]).unwrap();
}

#[test]
fn damage_that_verifies_line_by_line_is_seen_against_what_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    assert!(harn_at(&root, &["example"]).status.success());
    let work = root.join(".harnery/work");
    // An accepted item's history cut before its acceptance, at a line boundary: it would read
    // `in_review` again.
    let events = work.join("cli/events.jsonl");
    let lines = std::fs::read_to_string(&events).unwrap();
    let accepted = lines.lines().position(|l| l.contains("\"work.accepted\"")).unwrap();
    cut_to_lines(&events, accepted);
    let show = harn_at(&root, &["work", "show", "cli"]);
    assert_eq!(show.status.code(), Some(1), "{}", text(&show));
    assert!(text(&show).contains("the history was cut"), "{}", text(&show));
    assert!(text(&show).contains("events.reach"), "{}", text(&show));
    // A deleted proof whose run.end names it; a claim deleted, another made garbage.
    let parser = json(&harn_at(&root, &["work", "show", "parser", "--json"]));
    let run = parser["projection"]["latest_run_id"].as_str().unwrap().to_owned();
    let proof = root.join(format!(".harnery/workflows/{run}/proof.json"));
    let kept_proof = std::fs::read(&proof).unwrap();
    std::fs::remove_file(&proof).unwrap();
    let show = harn_at(&root, &["work", "show", "parser"]);
    assert_eq!(show.status.code(), Some(1), "{}", text(&show));
    assert!(text(&show).contains("run.end names it"), "not read as lost: {}", text(&show));
    std::fs::write(&proof, kept_proof).unwrap();
    std::fs::write(work.join("parser/attempts/1"), "not a run\n").unwrap();
    let out = harn_at(&root, &["fsck", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc = json(&out);
    let damage = doc["damage"].as_array().unwrap();
    let named = |end: &str, says: &str| {
        damage.iter().any(|d| {
            d["file"].as_str().unwrap().ends_with(end) && d["what"].as_str().unwrap().contains(says)
        })
    };
    assert!(named("work/cli/events.jsonl", "the history was cut"), "{doc}");
    let cut = damage.iter().filter(|d| d["file"].as_str().unwrap().ends_with("cli/events.jsonl"));
    assert_eq!(cut.count(), 1, "said once: {doc}");
    assert!(named("work/parser/attempts/1", "does not name a run"), "{doc}");
    std::fs::remove_file(work.join("parser/attempts/1")).unwrap();
    let doc = json(&harn_at(&root, &["fsck", "--json"]));
    let damage = doc["damage"].as_array().unwrap();
    assert!(
        damage.iter().any(|d| d["file"].as_str().unwrap().ends_with("work/parser/attempts/1")
            && d["what"].as_str().unwrap().starts_with("missing")),
        "{doc}"
    );
    // A deleted intent is named by its file, once.
    std::fs::remove_file(work.join("parser/intent.json")).unwrap();
    let doc = json(&harn_at(&root, &["fsck", "--json"]));
    let damage = doc["damage"].as_array().unwrap();
    let intent: Vec<_> = damage
        .iter()
        .filter(|d| d["file"].as_str().unwrap().ends_with("work/parser/intent.json"))
        .collect();
    assert_eq!(intent.len(), 1, "{doc}");
    let at_root = damage.iter().filter(|d| d["file"] == root.display().to_string()).count();
    assert_eq!(at_root, 0, "nothing is reported against the root itself: {doc}");
}
