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
