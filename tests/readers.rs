//! Architecture invariant 9: the dashboard reaches the root only through `readers`, and
//! `readers` names no write path, lease, spawner, runner or mutating request. The check reads
//! the sources (comments stripped), so a new import that crosses the boundary fails here.

use std::path::Path;

/// What a reader may never name: writing, locking for writing, running or spawning.
const WRITE_PATHS: &[&str] = &[
    "write",
    "append",
    "create",
    "remove",
    "rename",
    "hold(",
    "lock_",
    "spawn",
    "Command",
    "runner",
    "drive(",
    "tick",
    "reconcile",
    "start_attempt",
    "finish_attempt",
    "park(",
    "set_permissions",
    "OpenOptions",
    "kill",
    "signal",
];

fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn cli_src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cli/src")
}

#[test]
fn the_dashboard_reaches_the_root_only_through_readers() {
    let dir = cli_src().join("dash");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        // The snapshot tests write their expected pages; they are not part of the dashboard.
        // `readers.rs` is the boundary itself, checked below.
        if path.extension().is_none_or(|e| e != "rs")
            || path.ends_with("tests.rs")
            || path.ends_with("readers.rs")
        {
            continue;
        }
        let code = code_of(&path);
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            assert!(
                // Finding the root reads directory metadata only.
                rest.starts_with("dash::readers")
                    || rest.starts_with("exit::")
                    || rest.starts_with("os::root::discover")
                    || rest.starts_with("os::root::require_ledger"),
                "{} names crate::{}…: the dashboard may only use its readers (and crate::os::root)",
                path.display(),
                &rest[..rest.len().min(30)]
            );
        }
        // Grouped imports (`use std::{fs, …}`) and raw system calls are caught by their names.
        let banned = ["fs::", "process::", "Command", "rustix", "libc", "harn_core::env::Fs"];
        for word in banned.iter().chain(["super::super"].iter()) {
            assert!(!code.contains(word), "{} uses {word}", path.display());
        }
        // In the module's root, `super` is the crate root: a way around `crate::readers`.
        if path.ends_with("mod.rs") {
            assert!(!code.contains("super::"), "{} names super::", path.display());
        }
        checked += 1;
    }
    assert!(checked >= 3, "the dashboard's sources were not found in {}", dir.display());
}

#[test]
fn readers_name_no_write_path() {
    // The service's view is read by the dashboard through the readers, so it is held to the
    // same rule.
    for file in ["dash/readers.rs", "service/view.rs"] {
        let path = cli_src().join(file);
        let code = code_of(&path);
        for word in WRITE_PATHS {
            // `Request::Status` is the one request a reader sends; every other one mutates.
            assert!(!code.contains(word), "{} names {word:?}", path.display());
        }
    }
    let code = code_of(&cli_src().join("dash/readers.rs"));
    for (at, _) in code.match_indices("Request::") {
        assert!(code[at..].starts_with("Request::Status"), "readers send only Request::Status");
    }
}

/// A ready goal's summary is kept between refreshes while its files are unchanged, but only
/// while nobody holds its lease: a tick takes the lease and changes no file, and the next
/// refresh must say `running` at once.
#[test]
fn a_kept_ready_goal_shows_running_the_moment_its_lease_is_taken() {
    use harn::dash::readers::{Kept, Reader};
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::create_dir_all(r.join(".harnery")).unwrap();
    std::fs::copy(examples.join("harnesses/scripted.sh"), r.join("harness.sh")).unwrap();
    std::fs::write(r.join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let config = r#"{"harnesses": {"scripted": {"command": ["./harness.sh"]}}}"#;
    std::fs::write(r.join(".harnery/config.json"), config).unwrap();
    std::fs::copy(examples.join("team.json"), r.join("team.json")).unwrap();
    let run = |args: &[&str]| {
        let out = crate::cli::harn_at(r, args);
        assert!(out.status.success(), "{args:?}: {}", crate::cli::text(&out));
    };
    run(&["work", "create", "It", "wf.sh", "--id", "it", "--objective", "o"]);
    run(&["supervisor", "create", "it", "--team", "team.json", "--id", "g"]);
    // Past the slack within which a file's timestamps cannot be trusted to show a change.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let mut kept = Kept::default();
    let state = |kept: &mut Kept| {
        let mut reader = Reader::open(r);
        let service = reader.service();
        reader.work(kept).unwrap();
        let (rows, _) = reader.goals(&service, kept).unwrap();
        harn::dash::readers::name_of(&rows[0].read.as_ref().unwrap().state)
    };
    assert_eq!(state(&mut kept), "ready");
    assert_eq!(state(&mut kept), "ready", "kept");
    let lease = std::fs::File::open(
        r.join(harn_core::layout::goal_lease(&harn_core::ids::Id::new("g").unwrap())),
    )
    .unwrap();
    lease.lock().unwrap();
    assert_eq!(state(&mut kept), "running", "a kept ready goal whose lease is taken");
    drop(lease);
    // Another test's child forked between our open and this drop holds the lock's open file
    // description until it execs (the descriptor is close-on-exec, not close-on-fork): on a
    // loaded machine that takes a moment, during which the goal rightly reads as running.
    let released = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while state(&mut kept) != "ready" {
        assert!(std::time::Instant::now() < released, "the released lease reads as ready");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
