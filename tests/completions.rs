//! Shell completion, sourced into a real bash: verbs and options complete from the command
//! tree, and work, goal, approval and harness ids from the records of the root the shell is
//! in (a subdirectory of it too). Also the man pages and every verb's example.

use crate::cli::{harn, harn_bin, text};
use std::path::Path;
use std::process::Command;

/// What bash offers for the words typed so far (the last one being completed), in `cwd`.
fn offered(cwd: &Path, script: &Path, words: &[&str]) -> Vec<String> {
    let bin_dir = harn_bin().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let (cur, prev) = (words[words.len() - 1], words[words.len().saturating_sub(2)]);
    let body = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; _clap_complete_harn harn '{cur}' '{prev}'; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1
    );
    let out = Command::new("bash").arg("-c").arg(body).env("PATH", path).current_dir(cwd).output();
    let out = out.expect("bash runs");
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completes_verbs_and_the_roots_ids() {
    if Command::new("bash").arg("--version").output().is_err() {
        crate::skip::skip("no bash");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path().canonicalize().unwrap();
    std::fs::write(r.join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::write(r.join("team.json"), r#"{"worker": {"instructions": "do it"}}"#).unwrap();
    std::fs::write(r.join("harness.toml"), "[harness.web]\ncommand = [\"sleep\", \"9\"]\n")
        .unwrap();
    for title in ["Fix the parser", "Wire it in"] {
        let out = harn(&r, &["work", "create", title, "wf.sh", "--objective", "o"]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = harn(&r, &["supervisor", "create", "fix-the-parser", "--team", "team.json"]);
    assert!(out.status.success(), "{}", text(&out));
    let script = r.join("harn.bash");
    let out = harn(&r, &["completions", "bash"]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(&script, &out.stdout).unwrap();
    let sub = r.join("src");
    std::fs::create_dir(&sub).unwrap();

    let verbs = offered(&sub, &script, &["harn", "work", "sh"]);
    assert_eq!(verbs, ["show"], "a verb");
    let ids = offered(&sub, &script, &["harn", "work", "show", "f"]);
    assert_eq!(ids, ["fix-the-parser"], "a work id, from a subdirectory");
    let ids = offered(&sub, &script, &["harn", "work", "run", ""]);
    assert!(
        ids.contains(&"wire-it-in".to_owned()) && ids.contains(&"fix-the-parser".to_owned()),
        "{ids:?}"
    );
    let goals = offered(&r, &script, &["harn", "supervisor", "show", ""]);
    assert!(goals.contains(&"fix-the-parser".to_owned()), "a goal id: {goals:?}");
    assert!(!goals.contains(&"wire-it-in".to_owned()), "not a work id: {goals:?}");
    let names = offered(&r, &script, &["harn", "harness", "stop", "w"]);
    assert_eq!(names, ["web"], "a harness of harness.toml");
    let flags = offered(&r, &script, &["harn", "work", "list", "--st"]);
    assert_eq!(flags, ["--state"]);
}

#[test]
fn man_pages_are_written_one_a_verb_and_every_help_ends_with_an_example() {
    let dir = tempfile::tempdir().unwrap();
    let page = harn(dir.path(), &["man"]);
    assert!(page.status.success(), "{}", text(&page));
    assert!(String::from_utf8_lossy(&page.stdout).starts_with(".ie"), "roff");
    let out = harn(dir.path(), &["man", "--dir", "pages"]);
    assert!(out.status.success(), "{}", text(&out));
    let create = std::fs::read_to_string(dir.path().join("pages/harn-work-create.1")).unwrap();
    assert!(create.contains("harn work create"), "{create}");
    let help = harn(dir.path(), &["approval", "approve", "--help"]);
    assert!(text(&help).contains("Example:\n  harn approval approve"), "{}", text(&help));
}
