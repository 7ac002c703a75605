//! Ownership as git knows it: as root, a repository another user owns (no `.harnery/` yet),
//! its `harness.toml` and a workflow another user owns are refused before anything runs,
//! naming the owner, until git's `safe.directory` says the person trusts it.

use crate::cli::{harn_bin, text};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const NOBODY: u32 = 65534;

fn harn(root: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(harn_bin())
        .args(args)
        .arg("--root")
        .arg(root)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_CONFIG_GLOBAL")
        .output()
        .unwrap()
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
}

#[test]
fn another_users_repository_and_files_are_refused_until_marked_safe() {
    if !rustix::process::geteuid().is_root() {
        crate::skip::skip("making files of another user needs root");
        return;
    }
    let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let r = dir.path().join("theirs");
    std::fs::create_dir(&r).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let witness = dir.path().join("ran-as");
    std::fs::write(
        r.join("harness.toml"),
        format!(
            "[harness.w]\ncommand = [\"sh\", \"-c\", \"id -u > {} ; sleep 30\"]\n",
            witness.display()
        ),
    )
    .unwrap();
    for p in [r.join("harness.toml"), r.clone()] {
        chown(&p, NOBODY);
    }
    // A repository of another user's, with no .harnery/ yet: refused, naming the owner.
    let out = harn(&r, home.path(), &["harness", "up"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("uid 65534") && said.contains("safe.directory"), "{said}");
    assert!(!witness.exists(), "their harness.toml ran");
    assert!(!r.join(".harnery").exists(), "nothing was written");
    // Marked safe as git marks it, the root is taken; `down` stops what `up` starts.
    let git = Command::new("git")
        .args(["config", "--global", "--add", "safe.directory"])
        .arg(&r)
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert!(git.status.success(), "{}", text(&git));
    let out = harn(&r, home.path(), &["harness", "up"]);
    let _ = harn(&r, home.path(), &["harness", "down"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // In a root of our own, a workflow another user owns is refused at the run, uncharged.
    let ours = tempfile::tempdir().unwrap();
    let o = ours.path();
    std::fs::create_dir(o.join(".harnery")).unwrap();
    std::fs::write(o.join("wf.sh"), "#!/bin/sh\nread s\necho '{\"op\":\"result\",\"ok\":true}'\n")
        .unwrap();
    std::fs::set_permissions(o.join("wf.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let create = ["work", "create", "w", "wf.sh", "--id", "w", "--objective", "o"];
    assert!(harn(o, home.path(), &create).status.success());
    chown(&o.join("wf.sh"), NOBODY);
    let out = harn(o, home.path(), &["work", "run", "w"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("workflow") && text(&out).contains("uid 65534"), "{}", text(&out));
    let shown = harn(o, home.path(), &["work", "show", "w", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(doc["projection"]["attempts_used"], 0, "{doc}");
}
