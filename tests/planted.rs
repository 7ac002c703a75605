//! Trust nothing written by others: a frozen enrollment someone else could have written, a
//! planted cgroup hint, symlinks planted where harn writes its logs and journals, and a
//! socket directory another user made first. Each is refused or ignored, never acted on, and
//! nothing outside the root is written.

use crate::cli::{harn_at, harn_bin, text};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The example's root (a goal `dg` over a fresh item), with the example policy beside it.
fn example_root(tmp: &Path) -> PathBuf {
    let root = tmp.join("r");
    let out = harn_at(&root, &["example"]);
    assert!(out.status.success(), "{}", text(&out));
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("policy.json"), root.join("policy.json")).unwrap();
    let create = ["work", "create", "Docs", "wf.sh", "--id", "docs", "--objective", "o"];
    assert!(harn_at(&root, &create).status.success());
    let goal = ["supervisor", "create", "docs", "--team", "team.json", "--id", "dg"];
    assert!(harn_at(&root, &goal).status.success());
    root
}

fn outside_file(tmp: &Path) -> PathBuf {
    let victim = tmp.join("victim");
    std::fs::write(&victim, b"untouched\n").unwrap();
    victim
}

fn assert_untouched(victim: &Path) {
    assert_eq!(std::fs::read(victim).unwrap(), b"untouched\n", "{} was written", victim.display());
}

#[test]
fn a_frozen_enrollment_is_reused_only_when_it_is_ours_private_and_its_policy_digest_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let root = example_root(tmp.path());
    let start = ["supervisor", "service", "start", "dg", "--harness", "scripted"];
    let out = harn_at(&root, &[&start[..], &["--policy", "policy.json"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    assert!(harn_at(&root, &["supervisor", "service", "stop"]).status.success());
    let config = root.join(".harnery/supervisor-service/config.json");
    let frozen = std::fs::read_to_string(&config).unwrap();
    let reuse = ["supervisor", "service", "start"];

    std::fs::set_permissions(&config, PermissionsExt::from_mode(0o644)).unwrap();
    let out = harn_at(&root, &reuse);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("mode 644"), "{}", text(&out));

    std::fs::set_permissions(&config, PermissionsExt::from_mode(0o600)).unwrap();
    if rustix::process::geteuid().is_root() {
        let chown = Command::new("chown").arg("65534").arg(&config).status().unwrap();
        assert!(chown.success());
        let out = harn_at(&root, &reuse);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("owned by uid 65534"), "{}", text(&out));
        let chown = Command::new("chown").arg("0").arg(&config).status().unwrap();
        assert!(chown.success());
    }

    // A broader policy with the digest left as it was.
    let edited = frozen.replacen("\"ask\"", "\"allow\"", 1);
    assert_ne!(edited, frozen, "the frozen policy holds an ask rule");
    std::fs::write(&config, &edited).unwrap();
    let out = harn_at(&root, &reuse);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("edited after it was frozen"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), edited, "nothing was rewritten");

    std::fs::write(&config, &frozen).unwrap();
    let out = harn_at(&root, &reuse);
    assert!(out.status.success(), "the untouched enrollment is reused: {}", text(&out));
    assert!(harn_at(&root, &["supervisor", "service", "stop"]).status.success());
}

/// The cgroup v2 mount, when this process may create cgroups in it.
fn cgroup2_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let probe = mount.join(format!("harn-test-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    std::fs::remove_dir(&probe).ok()?;
    Some(mount)
}

#[test]
fn a_planted_cgroup_hint_is_ignored_and_its_processes_are_left_alone() {
    let Some(mount) = cgroup2_mount() else {
        crate::skip::skip("no writable cgroup v2 hierarchy on this machine");
        return;
    };
    // An unrelated cgroup, and one elsewhere whose last component is the name harn gives
    // this root's cgroup: neither is below the daemon's own cgroup.
    for disguised in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::write(root.join("harness.toml"), "[harness.a]\ncommand = [\"sleep\", \"30\"]\n")
            .unwrap();
        let outer = mount.join(format!("unrelated-{}-{disguised}", std::process::id()));
        let victim_cgroup = if disguised {
            let hash = harn_core::hash::fnv64(root.as_os_str().as_encoded_bytes());
            outer.join(format!("harn-{hash:016x}"))
        } else {
            outer.clone()
        };
        std::fs::create_dir_all(&victim_cgroup).unwrap();
        let mut victim = Command::new("sleep").arg("300").spawn().unwrap();
        std::fs::write(victim_cgroup.join("cgroup.procs"), victim.id().to_string()).unwrap();
        std::fs::create_dir_all(root.join(".harnery/harness")).unwrap();
        let hint = root.join(".harnery/harness/cgroup.path");
        std::fs::write(hint, victim_cgroup.to_str().unwrap()).unwrap();

        let up = harn_at(&root, &["harness", "up"]);
        let alive = victim.try_wait().unwrap().is_none();
        let log =
            std::fs::read_to_string(root.join(".harnery/harness/daemon.log")).unwrap_or_default();
        let _ = harn_at(&root, &["harness", "down"]);
        let _ = victim.kill();
        let _ = victim.wait();
        let _ = std::fs::remove_dir(&victim_cgroup);
        let _ = std::fs::remove_dir(&outer);
        assert!(up.status.success(), "{}", text(&up));
        assert!(alive, "the process in {} was killed", victim_cgroup.display());
        assert!(
            log.contains("ignoring") && log.contains("cgroup.path"),
            "the hint's refusal is logged: {log}"
        );
    }
}

#[test]
fn a_symlinked_cgroup_hint_is_not_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    std::fs::create_dir_all(root.join(".harnery/harness")).unwrap();
    std::fs::write(root.join("harness.toml"), "[harness.a]\ncommand = [\"sleep\", \"30\"]\n")
        .unwrap();
    let victim = outside_file(tmp.path());
    symlink(&victim, root.join(".harnery/harness/cgroup.path")).unwrap();
    let up = harn_at(&root, &["harness", "up"]);
    let _ = harn_at(&root, &["harness", "down"]);
    assert!(up.status.success(), "a refused hint does not stop the daemon: {}", text(&up));
    assert_untouched(&victim);
}

#[test]
fn symlinked_harness_files_and_directories_are_never_written_through() {
    let toml = "[harness.a]\ncommand = [\"sh\", \"-c\", \"echo out; exec sleep 30\"]\n";
    for planted in ["daemon.log", "events.jsonl", "ledger.jsonl", "logs/a.log", ""] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("r");
        std::fs::create_dir_all(root.join(".harnery/harness/logs")).unwrap();
        std::fs::write(root.join("harness.toml"), toml).unwrap();
        let victim = outside_file(tmp.path());
        let outside_dir = tmp.path().join("elsewhere");
        std::fs::create_dir(&outside_dir).unwrap();
        if planted.is_empty() {
            std::fs::remove_dir_all(root.join(".harnery/harness")).unwrap();
            symlink(&outside_dir, root.join(".harnery/harness")).unwrap();
        } else {
            symlink(&victim, root.join(".harnery/harness").join(planted)).unwrap();
        }
        let up = harn_at(&root, &["harness", "up"]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let _ = harn_at(&root, &["harness", "down"]);
        assert_untouched(&victim);
        let written: Vec<_> = std::fs::read_dir(&outside_dir).unwrap().collect();
        assert!(written.is_empty(), "{planted:?}: wrote {written:?} through a symlinked directory");
        if planted != "logs/a.log" {
            assert_eq!(up.status.code(), Some(1), "{planted:?}: {}", text(&up));
            assert!(text(&up).contains("symlink"), "{planted:?} names the refusal: {}", text(&up));
        }
    }
}

#[test]
fn symlinked_service_files_and_directories_are_never_written_through() {
    for planted in ["service.log", "events.jsonl", "status.json", ""] {
        let tmp = tempfile::tempdir().unwrap();
        let root = example_root(tmp.path());
        let victim = outside_file(tmp.path());
        let outside_dir = tmp.path().join("elsewhere");
        std::fs::create_dir(&outside_dir).unwrap();
        let dir = root.join(".harnery/supervisor-service");
        if planted.is_empty() {
            symlink(&outside_dir, &dir).unwrap();
        } else {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o700)).unwrap();
            symlink(&victim, dir.join(planted)).unwrap();
        }
        let start = ["supervisor", "service", "start", "dg", "--harness", "scripted"];
        let out = harn_at(&root, &start);
        let _ = harn_at(&root, &["supervisor", "service", "stop"]);
        assert_untouched(&victim);
        let written: Vec<_> = std::fs::read_dir(&outside_dir).unwrap().collect();
        assert!(written.is_empty(), "{planted:?}: wrote {written:?} through a symlinked directory");
        if planted != "status.json" {
            assert_eq!(out.status.code(), Some(1), "{planted:?}: {}", text(&out));
        }
    }
}

#[test]
fn a_socket_directory_another_user_could_reach_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    // A root so deep its socket path does not fit, so the socket goes to the runtime directory.
    let root = tmp.path().join("d".repeat(60)).join("e".repeat(60));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("harness.toml"), "[harness.a]\ncommand = [\"sleep\", \"30\"]\n")
        .unwrap();
    let runtime = tmp.path().join("run");
    let uid = rustix::process::geteuid().as_raw();
    let planted = runtime.join(format!("harn-{uid}"));
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::set_permissions(&planted, PermissionsExt::from_mode(0o777)).unwrap();
    let up = |root: &Path| {
        Command::new(harn_bin())
            .args(["harness", "up", "--root"])
            .arg(root)
            .env("XDG_RUNTIME_DIR", &runtime)
            .output()
            .unwrap()
    };
    let out = up(&root);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("harn-{uid} must be a directory owned by")),
        "{}",
        text(&out)
    );
    std::fs::set_permissions(&planted, PermissionsExt::from_mode(0o700)).unwrap();
    let out = up(&root);
    let down = Command::new(harn_bin())
        .args(["harness", "down", "--root"])
        .arg(&root)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(down.status.success(), "{}", text(&down));
}
