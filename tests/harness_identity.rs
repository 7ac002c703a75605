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

/// The uid of `nobody` when this test runs as root, the only one that may run a harness as
/// another user; `None` (and a line saying the test is skipped) otherwise.
fn nobody_as_root() -> Option<String> {
    let uid = id_of_nobody("-u").filter(|_| is_root());
    if uid.is_none() {
        crate::skip::skip("needs root and a user nobody");
    }
    uid
}

/// `id` of the user `nobody`, as this machine has it.
fn id_of_nobody(flag: &str) -> Option<String> {
    let out = Command::new("id").args([flag, "nobody"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn a_harness_runs_as_the_user_it_names_and_so_does_its_probe() {
    let (Some(uid), Some(gid)) = (id_of_nobody("-u"), id_of_nobody("-g")) else {
        crate::skip::skip("this machine has no user nobody");
        return;
    };
    if !is_root() {
        crate::skip::skip("running a harness as another user needs a daemon running as root");
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
    ] {
        let root =
            Root::new(&format!("[harness.a]\ncommand = [\"sleep\", \"1000{{marker}}\"]\n{toml}"));
        let out = root.harn(&["daemon"]);
        assert_eq!(out.status.code(), Some(2), "{toml}: {}", text(&out));
        assert!(text(&out).contains(key) && text(&out).contains(says), "{toml}: {}", text(&out));
        assert!(!root.dir.path().join(".harnery").exists(), "{toml}: nothing written");
    }
}

/// Seed 002 §4 with §7: a harness run as another user, ready by notify and kept by a
/// watchdog. Its notify socket is in the abstract namespace (it cannot enter `.harnery/`), its
/// `READY=1` and `WATCHDOG=1` are honoured, and a stranger's word on that socket is not.
#[test]
fn a_harness_run_as_another_user_says_ready_and_keeps_its_watchdog() {
    let Some(uid) = nobody_as_root() else { return };
    // As sd_notify does: an address that starts with @ is in the abstract namespace.
    let pinger = "import os, socket, time; a = os.environ['NOTIFY_SOCKET']; a = chr(0) + a[1:] if a.startswith('@') else a; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); time.sleep(0.3); s.sendto(b'READY=1', a); [(s.sendto(b'WATCHDOG=1', a), time.sleep(0.2)) for _ in range(100000)]";
    let silent = "import time; time.sleep(100000)";
    let root = Root::new(&format!(
        "[harness.low]\ncommand = [\"python3\", \"-c\", \"{pinger}\", \"{{marker}}\"]\ncwd = \"/\"\n\
         user = \"nobody\"\nreadiness = \"notify\"\nwatchdog_ms = 800\nready_timeout_ms = 5000\n\
         stop_grace_ms = 300\n\n\
         [harness.quiet]\ncommand = [\"python3\", \"-c\", \"{silent}\", \"{{marker}}\"]\ncwd = \"/\"\n\
         user = \"nobody\"\nreadiness = \"notify\"\n"
    ));
    root.up();
    let ready = root.wait_for("low", "ready", |h| h["ready"] == true);
    let run = ready["run"].clone();
    // A stranger (this test, as root) says READY=1 on the quiet harness's socket: ignored.
    let quiet = root.wait_for("quiet", "running", |h| state(h) == "running");
    let pid = quiet["pid"].as_u64().unwrap();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let address = environ
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(b"NOTIFY_SOCKET="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap();
    assert!(address.starts_with("@harn-"), "{address}");
    {
        use std::os::linux::net::SocketAddrExt;
        let to = std::os::unix::net::SocketAddr::from_abstract_name(&address[1..]).unwrap();
        let stranger = std::os::unix::net::UnixDatagram::unbound().unwrap();
        stranger.send_to_addr(b"READY=1", &to).unwrap();
    }
    // Three watchdog intervals later the pinging run is the same run, never judged hung.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let low = root.harness("low");
    assert_eq!((state(&low), &low["run"], &low["ready"]), ("running", &run, &true.into()), "{low}");
    assert_eq!(root.harness("quiet")["ready"], false, "a stranger's READY=1 was taken");
    // The stop's record says when the run last pinged.
    assert!(root.harn(&["stop", "low"]).status.success());
    let records = root.ledger("low");
    let record = records.iter().find(|r| r["observed"] == "stopping").unwrap();
    assert_eq!(record["run_as"]["uid"].as_u64().map(|u| u.to_string()), Some(uid), "{record}");
    assert!(record["watchdog"]["last_ping_ms"].as_i64().is_some(), "{record}");
    assert!(!root.ledger("low").iter().any(|r| r["decision"] == "hung"), "never hung");
}

/// A terminal harness run as another user: its terminal is the user's (as a login makes it),
/// so the child sees it on 0/1/2 and may reopen it by name; a stop hangs it up.
#[test]
fn a_terminal_harness_runs_as_another_user_on_a_terminal_of_its_own() {
    let Some(uid) = nobody_as_root() else { return };
    let script = "if [ -t 0 ] && [ -t 1 ]; then echo TTY-$(id -u)-$(stat -c %u $(tty)); fi; echo reopened >$(tty) && echo REOPENED; exec sleep 100000";
    let root = Root::new(&format!(
        "[harness.term]\ncommand = [\"sh\", \"-c\", \"{script}\", \"{{marker}}\"]\ncwd = \"/\"\n\
         user = \"nobody\"\ntty = true\n"
    ));
    root.up();
    root.wait_for("term", "running", |h| state(h) == "running");
    crate::harness_terminal::screen_with(&root, "term", &format!("TTY-{uid}-{uid}"));
    crate::harness_terminal::screen_with(&root, "term", "REOPENED");
    assert!(root.harn(&["stop", "term"]).status.success());
    let records = root.ledger("term");
    let end = records.iter().rev().find(|r| r["termination"].is_object()).unwrap();
    assert_eq!(end["termination"]["signal"], 1, "hung up: {end}");
}
