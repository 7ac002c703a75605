//! Private means private, whatever the umask: every writing verb runs under umask 000, and
//! then every directory under `.harnery/` must be 0700 and every file 0600.

use crate::cli::{harn_bin, json, text};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

/// `harn args… --root root` with umask 000, as a careless shell profile would leave it.
fn harn0(root: &Path, args: &[&str]) -> Output {
    harn_umask(root, args, 0)
}

/// `harn args… --root root` with `umask`.
fn harn_umask(root: &Path, args: &[&str], umask: u32) -> Output {
    let mut cmd = Command::new(harn_bin());
    cmd.args(args).arg("--root").arg(root);
    // SAFETY: umask(2) is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::umask(rustix::fs::Mode::from_raw_mode(umask));
            Ok(())
        });
    }
    cmd.output().unwrap()
}

fn ok(root: &Path, args: &[&str]) -> Output {
    let out = harn0(root, args);
    assert!(out.status.success(), "harn {}: {}", args.join(" "), text(&out));
    out
}

/// Every path under `dir` whose mode is not private, or that is a symlink.
fn not_private(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.path().symlink_metadata().unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        let kind = meta.file_type();
        // A run's copy of its workflow program is the one file its owner may execute.
        let program = entry.file_name().to_string_lossy().starts_with("workflow")
            && dir.parent().is_some_and(|p| p.ends_with(".harnery/workflows"));
        let want = if kind.is_dir() || program { 0o700 } else { 0o600 };
        if kind.is_symlink() || mode != want {
            found.push(format!("{} {mode:o}", entry.path().display()));
        }
        if kind.is_dir() {
            not_private(&entry.path(), found);
        }
    }
}

#[test]
fn every_writing_verb_leaves_private_files_under_umask_000() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    // The example makes the root and `.harnery/` itself, runs a work item and a goal.
    let out = harn0(&root, &["example"]);
    assert!(out.status.success(), "{}", text(&out));
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/ship.sh"), root.join("ship.sh")).unwrap();
    std::fs::copy(examples.join("policy.json"), root.join("policy.json")).unwrap();

    // Work: a parked run, its approval, the resumed run, acceptance, a cancel and a reopen.
    ok(&root, &["work", "create", "Ship", "ship.sh", "--id", "ship", "--objective", "o"]);
    let run = ["work", "run", "ship", "--harness", "scripted", "--policy", "policy.json"];
    let parked = harn0(&root, &[&run[..], &["--approval-to", "ana", "--json"]].concat());
    let approval = json(&parked)["approval"]["approval_id"].as_str().unwrap().to_owned();
    ok(&root, &["approval", "approve", &approval, "--actor", "ana"]);
    ok(&root, &["work", "run", "ship"]);
    ok(&root, &["work", "accept", "ship"]);
    ok(&root, &["work", "create", "Other", "ship.sh", "--id", "other", "--objective", "o"]);
    ok(&root, &["work", "cancel", "other"]);
    ok(&root, &["work", "reopen", "other"]);
    ok(&root, &["work", "reconcile"]);

    // A goal ticked by hand and by the service.
    let create = ["work", "create", "Docs", "wf.sh", "--id", "docs", "--objective", "o"];
    ok(&root, &create);
    ok(&root, &["supervisor", "create", "docs", "--team", "team.json", "--id", "dg"]);
    ok(&root, &["supervisor", "tick", "dg", "--harness", "scripted"]);
    ok(&root, &["supervisor", "service", "start", "dg", "--harness", "scripted"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    ok(&root, &["supervisor", "service", "stop"]);

    // The harness daemon: up, a restart, a reload, down.
    let toml = "[harness.talk]\ncommand = [\"sh\", \"-c\", \"echo hello; exec sleep 60\"]\n";
    std::fs::write(root.join("harness.toml"), toml).unwrap();
    ok(&root, &["harness", "up"]);
    ok(&root, &["harness", "restart", "talk"]);
    ok(&root, &["harness", "reload"]);
    ok(&root, &["harness", "down"]);

    let mut found = Vec::new();
    not_private(&root.join(".harnery"), &mut found);
    let harnery = std::fs::metadata(root.join(".harnery")).unwrap().permissions().mode() & 0o7777;
    if harnery != 0o700 {
        found.push(format!(".harnery {harnery:o}"));
    }
    assert!(found.is_empty(), "not private under umask 000:\n{}", found.join("\n"));
}

#[test]
fn an_umask_that_takes_owner_bits_still_leaves_exact_modes() {
    // Under umask 0277 a plain mkdir(0700) gives 0500, which the owner cannot write into.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    let out = harn_umask(&root, &["example"], 0o277);
    assert!(out.status.success(), "{}", text(&out));
    let mut found = Vec::new();
    not_private(&root.join(".harnery"), &mut found);
    assert!(found.is_empty(), "not exactly private under umask 0277:\n{}", found.join("\n"));
}
