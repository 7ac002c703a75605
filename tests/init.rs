//! `harn init` with the real binary: `.harnery/` made 0700 at the repository's top from any
//! directory of it, with a `.gitignore` and commented starters that the verbs accept, kept as
//! they are on a second run.

use crate::cli::{harn, text};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn init_makes_the_root_at_the_repository_top_and_keeps_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    if !Command::new("git")
        .args(["init", "-q"])
        .current_dir(&top)
        .output()
        .is_ok_and(|o| o.status.success())
    {
        crate::skip::skip("git is not installed");
        return;
    }
    let sub = top.join("src/lib");
    std::fs::create_dir_all(&sub).unwrap();
    let out = harn(&sub, &["init"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains(&format!("made {}/.harnery/", top.display())), "{said}");
    assert!(
        said.contains("claude-code") && said.contains("codex") && said.contains("next:"),
        "{said}"
    );
    assert_eq!(mode(&top.join(".harnery")), 0o700);
    assert_eq!(mode(&top.join(".harnery/config.json")), 0o600);
    let ignored = std::fs::read_to_string(top.join(".harnery/.gitignore")).unwrap();
    assert!(ignored.lines().any(|l| l == "*"), "{ignored}");
    let status =
        Command::new("git").args(["status", "--porcelain"]).current_dir(&top).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&status.stdout).contains(".harnery"),
        "the records stay out of git"
    );
    // The starters are accepted as they are: the daemon comes up with no harness.
    let up = harn(&top, &["harness", "up"]);
    assert!(up.status.success(), "{}", text(&up));
    assert!(harn(&top, &["harness", "down"]).status.success());
    // A second run makes nothing and keeps an edited file.
    std::fs::write(top.join("harness.toml"), "# mine\n").unwrap();
    let again = harn(&top, &["init", "--json"]);
    assert!(again.status.success(), "{}", text(&again));
    let doc: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(doc["existed"], true);
    assert!(doc["made"].as_object().unwrap().values().all(|m| m == false), "{doc}");
    assert_eq!(std::fs::read_to_string(top.join("harness.toml")).unwrap(), "# mine\n");
    assert_eq!(doc["agents"].as_array().unwrap().len(), 4, "one line per preset: {doc}");
}

/// A root begun by its first `work create`, without `harn init`, keeps its records out of git
/// as init's does.
#[test]
fn a_root_begun_by_a_create_keeps_its_records_out_of_git() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git").args(args).current_dir(dir.path()).output().unwrap()
    };
    assert!(git(&["init", "-q"]).status.success());
    std::fs::write(dir.path().join("wf.sh"), "#!/bin/sh\n").unwrap();
    let create = ["work", "create", "T", "wf.sh", "--objective", "o", "--root"];
    let out = std::process::Command::new(crate::cli::harn_bin())
        .args(create)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::cli::text(&out));
    let status = git(&["status", "--porcelain"]);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(!status.contains(".harnery"), "git sees harn's records: {status}");
}
