//! Every verb finds its coordination root as git finds its repository: from a subdirectory of
//! a root, the root (never a second, nested `.harnery/`); in a git work tree without one yet,
//! its top level; `--root` wins over both. Work items, goals and runs are found by unique
//! prefixes of their ids.

use crate::cli::{harn, text};
use std::process::Command;

fn ok(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", text(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_subdirectory_of_a_root_uses_that_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let sub = root.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    ok(&harn(&root, &["work", "create", "Parser", "wf.sh", "--objective", "o", "--id", "parser"]));
    // From below: the item is there, and a new one lands in the same root.
    assert!(ok(&harn(&sub, &["work", "list"])).contains("parser"));
    // Paths are taken from where the person stands, as git takes them: a bare `wf.sh` here
    // is not the root's.
    let bare = harn(&sub, &["work", "create", "Wire", "wf.sh", "--objective", "o", "--id", "wire"]);
    assert_eq!(bare.status.code(), Some(2), "{}", text(&bare));
    assert!(text(&bare).contains("src/deep/wf.sh"), "{}", text(&bare));
    ok(&harn(&sub, &["work", "create", "Wire", "../../wf.sh", "--objective", "o", "--id", "wire"]));
    // So is a team file.
    std::fs::write(root.join("team.json"), r#"{"worker": {"instructions": "do it"}}"#).unwrap();
    let bare = harn(&sub, &["supervisor", "create", "wire", "--team", "team.json"]);
    assert_eq!(bare.status.code(), Some(2), "{}", text(&bare));
    ok(&harn(&sub, &["supervisor", "create", "wire", "--team", "../../team.json"]));
    assert!(
        !sub.join(".harnery").exists() && !root.join("src/.harnery").exists(),
        "no nested root"
    );
    let shown = ok(&harn(&root, &["work", "show", "wire", "--json"]));
    assert!(shown.contains("\"wire\""), "{shown}");
    // The harness verbs and the dashboard find it too.
    std::fs::write(
        root.join("harness.toml"),
        "[harness.a]\ncommand = [\"sleep\", \"1\"]\nenabled = false\n",
    )
    .unwrap();
    let listed = ok(&harn(&sub, &["harness", "list", "--json"]));
    let doc: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(doc["daemon"]["root"], root.display().to_string(), "{listed}");
    let unknown = harn(&sub, &["harness", "logs", "nope"]);
    assert!(text(&unknown).contains("it has: a"), "its harness.toml: {}", text(&unknown));
    let dash = ok(&harn(&sub, &["dash", "--once", "--page", "work"]));
    assert!(dash.contains("parser"), "{dash}");
    // --root still names the root outright: a directory with no items lists none.
    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir(other.path().join(".harnery")).unwrap();
    let listed = ok(&Command::new(crate::cli::harn_bin())
        .args(["work", "list", "--json", "--root"])
        .arg(other.path())
        .current_dir(&sub)
        .output()
        .unwrap());
    assert!(!listed.contains("parser"), "{listed}");
}

#[test]
fn a_git_work_tree_without_a_root_gets_one_at_its_top() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let init = Command::new("git").args(["init", "-q"]).current_dir(&top).output();
    if !init.is_ok_and(|o| o.status.success()) {
        crate::skip::skip("git is not installed");
        return;
    }
    std::fs::write(top.join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let sub = top.join("crates/a");
    std::fs::create_dir_all(&sub).unwrap();
    ok(&harn(&sub, &["work", "create", "T", "../../wf.sh", "--objective", "o", "--id", "t"]));
    assert!(top.join(".harnery").is_dir(), "made at the git top");
    assert!(!sub.join(".harnery").exists());
}

/// An item or a goal may be named by a unique prefix of its id; a prefix of several is bad
/// input naming them, and writes nothing; an exact id wins over a longer one it begins.
#[test]
fn ids_accept_unique_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    std::fs::write(r.join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::write(r.join("team.json"), r#"{"implementer": {"instructions": "x"}}"#).unwrap();
    for id in ["parser", "parser-tests", "wire"] {
        ok(&harn(r, &["work", "create", id, "wf.sh", "--objective", "o", "--id", id]));
    }
    let shown = ok(&harn(r, &["work", "show", "wi", "--json"]));
    assert!(shown.contains("\"id\":\"wire\""), "{shown}");
    let exact = ok(&harn(r, &["work", "show", "parser", "--json"]));
    assert!(exact.contains("\"id\":\"parser\""), "the exact id, not parser-tests: {exact}");
    let before = std::fs::read_dir(r.join(".harnery/work")).unwrap().count();
    let many = harn(r, &["work", "cancel", "par"]);
    assert_eq!(many.status.code(), Some(2), "{}", text(&many));
    assert!(text(&many).contains("parser, parser-tests"), "{}", text(&many));
    assert_eq!(std::fs::read_dir(r.join(".harnery/work")).unwrap().count(), before);
    ok(&harn(r, &["work", "cancel", "parser-t"]));
    let cancelled = ok(&harn(r, &["work", "show", "parser-tests", "--json"]));
    assert!(cancelled.contains("cancelled"), "{cancelled}");
    ok(&harn(r, &["supervisor", "create", "wire", "--team", "team.json", "--id", "release-goal"]));
    let goal = ok(&harn(r, &["supervisor", "show", "rel", "--json"]));
    assert!(goal.contains("release-goal"), "{goal}");
    // Runs too: two runs of one item, named by a prefix each.
    let failing =
        "#!/bin/sh\nread start\necho '{\"op\":\"result\",\"ok\":false,\"error\":\"no\"}'\n";
    std::fs::write(r.join("fail.sh"), failing).unwrap();
    let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(r.join("fail.sh"), exec).unwrap();
    ok(&harn(r, &["work", "create", "F", "fail.sh", "--objective", "o", "--id", "f"]));
    let _ = harn(r, &["work", "run", "f"]);
    let _ = harn(r, &["work", "retry", "f"]);
    let runs: Vec<String> = std::fs::read_dir(r.join(".harnery/workflows"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let both = harn(r, &["run", "show", "wf-"]);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both));
    assert!(text(&both).contains("is the start of 2 workflow run ids"), "{}", text(&both));
    let unique = |id: &str, other: &str| {
        let n = (1..id.len()).find(|&n| !other.starts_with(&id[..n])).unwrap();
        id[..n].to_owned()
    };
    let short = unique(&runs[0], &runs[1]);
    let shown = ok(&harn(r, &["run", "show", &short, "--json"]));
    assert!(shown.contains(&runs[0]), "{short}: {shown}");
}

#[test]
fn a_verb_that_reads_where_no_root_is_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let sub = top.join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    let reads: [&[&str]; 6] = [
        &["work", "list"],
        &["work", "show", "x"],
        &["supervisor", "list"],
        &["approval", "list", "--json"],
        &["run", "list"],
        &["dash", "--once"],
    ];
    for args in reads {
        let out = harn(&sub, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains(&format!("no .harnery/ in {} or any directory above it", sub.display()))
                && said.contains("harn init"),
            "{args:?}: {said}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: no empty table: {said}");
    }
    assert!(!sub.join(".harnery").exists() && !top.join("a/.harnery").exists(), "nothing made");
    // Named outright, the same; and once `harn init` made one, the table is empty, exit 0.
    let named = Command::new(crate::cli::harn_bin())
        .args(["work", "list", "--root"])
        .arg(&top)
        .output()
        .unwrap();
    assert_eq!(named.status.code(), Some(1));
    assert!(
        text(&named).contains(&format!("no harn root at {}", top.display())),
        "{}",
        text(&named)
    );
    ok(&harn(&sub, &["init"]));
    ok(&harn(&sub, &["work", "list"]));
}

/// A root whose `.harnery/` another user owns is refused, named with `--root` or found from
/// a directory in it, and the owner is in the message; nothing is written there.
#[test]
fn a_root_another_user_owns_is_refused_naming_the_owner() {
    if !rustix::process::geteuid().is_root() {
        crate::skip::skip("giving a root to another user needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let git = Command::new("git").arg("init").arg("-q").arg(&root).output().unwrap();
    assert!(git.status.success());
    std::fs::create_dir(root.join(".harnery")).unwrap();
    let nobody = Some(rustix::process::Uid::from_raw(65534));
    rustix::fs::chown(root.join(".harnery"), nobody, None).unwrap();
    let sub = root.join("src");
    std::fs::create_dir(&sub).unwrap();
    let named = Command::new(crate::cli::harn_bin())
        .args(["work", "create", "T", "wf.sh", "--objective", "o", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let found = harn(&sub, &["work", "create", "T", "../wf.sh", "--objective", "o"]);
    for out in [&named, &found] {
        assert_eq!(out.status.code(), Some(2), "{}", text(out));
        assert!(text(out).contains("belongs to nobody (uid 65534)"), "{}", text(out));
    }
    assert_eq!(std::fs::read_dir(root.join(".harnery")).unwrap().count(), 0, "nothing written");
}
