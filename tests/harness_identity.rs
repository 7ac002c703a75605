//! Harnesses run as another user (`user`, `group`) by a daemon running as root: the child and
//! its probe run with the user's ids, groups and login variables, the ledger says who, a
//! working directory the user cannot enter is said as such, and a configuration that cannot
//! be honoured is refused. Without root only the refusals are checked.

use crate::cli::text;
use crate::harness_daemon::{state, Root};
use std::process::Command;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `id` of the user `nobody`, as this machine has it.
fn id_of_nobody(flag: &str) -> Option<String> {
    let out = Command::new("id").args([flag, "nobody"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn a_harness_runs_as_the_user_it_names_and_so_does_its_probe() {
    let (Some(uid), Some(gid)) = (id_of_nobody("-u"), id_of_nobody("-g")) else {
        eprintln!("skipped: this machine has no user nobody");
        return;
    };
    if !is_root() {
        eprintln!("skipped: running a harness as another user needs a daemon running as root");
        return;
    }
    let root = Root::new(&format!(
        "[harness.low]\ncommand = [\"sh\", \"-c\", \"echo uid=$(id -u) gid=$(id -g) user=$USER; exec sleep 1000{{marker}}\"]\ncwd = \"/\"\nuser = \"nobody\"\nreadiness = {{ probe = [\"sh\", \"-c\", \"test $(id -u) = {uid}\"] }}\n\n[harness.shut]\ncommand = [\"sleep\", \"1000{{marker}}\"]\ncwd = \"private\"\nuser = \"nobody\"\nrestart = \"no\"\n"
    ));
    let private = root.dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .unwrap();
    root.up();
    // Ready only once its probe, run as nobody, saw nobody's uid.
    let low = root.wait_for("low", "ready", |h| h["ready"] == true);
    let pid = low["pid"].as_u64().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uids = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(uids.split_whitespace().skip(1).all(|u| u == uid), "{uids}");
    let logged =
        String::from_utf8_lossy(&root.harn(&["logs", "low", "--plain"]).stdout).into_owned();
    assert!(logged.contains(&format!("uid={uid} gid={gid} user=nobody")), "{logged}");
    let record = root.ledger("low").pop().unwrap();
    assert_eq!(record["run_as"]["user"], "nobody", "{record}");
    assert_eq!(record["run_as"]["uid"].to_string(), uid, "{record}");
    assert_eq!(record["run_as"]["configured"], true, "{record}");

    // A directory only root may enter: the log says nobody cannot enter it, not that the
    // program is missing.
    root.wait_for("shut", "failed", |h| state(h) == "failed");
    let log = String::from_utf8_lossy(&root.harn(&["logs", "shut"]).stdout).into_owned();
    assert!(
        log.contains("cwd") && log.contains("Permission denied") && log.contains("as user nobody"),
        "{log}"
    );
}

#[test]
fn an_identity_that_cannot_be_honoured_is_refused_naming_the_key() {
    for (toml, key, says) in [
        ("user = \"no-such-user-here\"\n", "harness.a.user", "no such user"),
        ("user = \"root\"\ngroup = \"no-such-group-here\"\n", "harness.a.group", "no such group"),
        ("group = \"root\"\n", "harness.a.group", "needs user"),
        ("user = \"root\"\nreadiness = \"notify\"\n", "harness.a.user", "notify"),
    ] {
        let root =
            Root::new(&format!("[harness.a]\ncommand = [\"sleep\", \"1000{{marker}}\"]\n{toml}"));
        let out = root.harn(&["daemon"]);
        assert_eq!(out.status.code(), Some(2), "{toml}: {}", text(&out));
        assert!(text(&out).contains(key) && text(&out).contains(says), "{toml}: {}", text(&out));
        assert!(!root.dir.path().join(".harnery").exists(), "{toml}: nothing written");
    }
}
