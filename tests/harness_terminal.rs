//! Terminal harnesses (`tty = true`) with real pseudo-terminals: the child sees a terminal
//! on 0, 1 and 2 of the configured size, the daemon keeps its screen (`screen`), types into
//! it (`send`, recorded in the ledger), logs its output, and a stop hangs the session up.

use crate::cli::text;
use crate::harness_daemon::{state, Root};
use crate::pty::{on_terminal, pty, winsize, Screen};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Waits until `name`'s screen holds `wanted`; returns the screen.
pub(crate) fn screen_with(root: &Root, name: &str, wanted: &str) -> String {
    let started = Instant::now();
    loop {
        let out = root.harn(&["screen", name]);
        let shown = String::from_utf8_lossy(&out.stdout).into_owned();
        if shown.contains(wanted) {
            return shown;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never {wanted:?}: {}", text(&out));
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_terminal_harness_has_a_terminal_a_screen_and_takes_what_is_sent() {
    let script = "if [ -t 0 ] && [ -t 1 ] && [ -t 2 ]; then echo TTY-ON-ALL; fi; stty size; echo \"term=$TERM\"; while IFS= read -r l; do echo \"got:$l\"; done";
    let root = Root::new(&format!(
        "[harness.agent]\ncommand = [\"sh\", \"-c\", \"{}\", \"{{marker}}\"]\ntty = true\ntty_size = [100, 30]\nstop_grace_ms = 2000\n\n\
         [harness.plain]\ncommand = [\"{{child}}\", \"run\", \"{{marker}}\"]\n",
        script.replace('\\', "\\\\").replace('"', "\\\"")
    ));
    root.up();
    root.wait_for("agent", "running", |h| state(h) == "running");
    let shown = screen_with(&root, "agent", "TTY-ON-ALL");
    assert!(shown.contains("30 100"), "the configured size: {shown}");
    assert!(shown.contains("term=xterm-256color"), "{shown}");
    let json: Value =
        serde_json::from_slice(&root.harn(&["screen", "agent", "--json"]).stdout).unwrap();
    assert_eq!((json["cols"].as_u64(), json["rows"].as_u64()), (Some(100), Some(30)), "{json}");
    // Typed in, as a keyboard would.
    let out = root.harn(&["send", "agent", "hello there", "--enter"]);
    assert!(out.status.success(), "{}", text(&out));
    screen_with(&root, "agent", "got:hello there");
    let sent = root.ledger("agent").into_iter().find(|r| r["decision"] == "input_sent").unwrap();
    assert_eq!(sent["detail"]["bytes"], 12, "{sent}");
    assert!(sent["detail"]["by"].as_str().is_some_and(|b| !b.is_empty()), "{sent}");
    // Its output is the harness's log too.
    let logs = text(&root.harn(&["logs", "agent", "--plain"]));
    assert!(logs.contains("TTY-ON-ALL") && logs.contains("got:hello there"), "{logs}");
    // A harness on pipes has no screen, and says so.
    let out = root.harn(&["screen", "plain"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not a terminal harness"), "{}", text(&out));
    // A stop hangs the session up first: the shell ends on SIGHUP, not on TERM or KILL.
    let out = root.harn(&["stop", "agent"]);
    assert!(out.status.success(), "{}", text(&out));
    let stopped = root.ledger("agent");
    let end = stopped.iter().rev().find(|r| r["termination"].is_object()).unwrap();
    assert_eq!(end["termination"]["signal"], 1, "hung up: {end}");
    assert_eq!(end["termination"]["forced"], false, "{end}");
    assert_eq!(root.count(&root.marker), 1, "only the plain harness is left");
    let out = root.harn(&["screen", "agent"]);
    assert!(text(&out).contains("no live run"), "{}", text(&out));
}

/// `harn harness attach NAME ARGS…` on a pseudo-terminal of its own, of `rows`×`cols`.
struct Attached {
    child: std::process::Child,
    master: std::os::fd::OwnedFd,
    screen: Screen,
}

impl Attached {
    fn start(root: &Root, args: &[&str], rows: u16, cols: u16) -> Attached {
        let (master, tty) = pty(rows, cols);
        let mut cmd = std::process::Command::new(crate::cli::harn_bin());
        cmd.args(["harness", "attach"]).args(args).arg("--root").arg(root.dir.path());
        on_terminal(&mut cmd, &tty);
        let child = cmd.spawn().unwrap();
        let screen = Screen::follow(std::fs::File::from(master.try_clone().unwrap()), rows, cols);
        Attached { child, master, screen }
    }

    fn keys(&self, bytes: &[u8]) {
        use std::io::Write;
        let mut keys = std::fs::File::from(self.master.try_clone().unwrap());
        keys.write_all(bytes).unwrap();
    }

    fn wait_for(&self, wanted: &str) {
        self.screen.wait_for(&[wanted]);
    }

    fn exited(&mut self) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "attach never ended");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `attach` in a pseudo-terminal: the current screen first, keys through, the window size
/// forwarded (at attach and on a resize), one typist with others watching, and Ctrl-]
/// detaches with the harness still running and the typist's place free again.
#[test]
fn attach_shows_the_screen_forwards_keys_and_size_and_detaches_leaving_it_running() {
    let script = "echo TTY-READY; while IFS= read -r l; do echo \"got:$l\"; stty size; done";
    let root = Root::new(&format!(
        "[harness.agent]\ncommand = [\"sh\", \"-c\", \"{}\", \"{{marker}}\"]\ntty = true\n",
        script.replace('"', "\\\"")
    ));
    root.up();
    screen_with(&root, "agent", "TTY-READY");
    let mut first = Attached::start(&root, &["agent"], 35, 90);
    first.wait_for("TTY-READY");
    first.keys(b"hi\r");
    first.wait_for("got:hi");
    first.wait_for("35 90");
    // A second typist is refused while the first is attached; a watcher sees what is typed.
    let mut second = Attached::start(&root, &["agent"], 24, 80);
    second.wait_for("already has a client attached that types");
    assert!(!second.exited().success());
    let mut watcher = Attached::start(&root, &["agent", "--read-only"], 24, 80);
    watcher.wait_for("TTY-READY");
    // A resize of the person's window reaches the harness's terminal.
    rustix::termios::tcsetwinsize(&first.master, winsize(25, 80)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    first.keys(b"again\r");
    first.wait_for("25 80");
    watcher.wait_for("got:again");
    // Ctrl-] detaches; the harness runs on.
    first.keys(&[0x1d]);
    assert!(first.exited().success());
    first.wait_for("detached from agent");
    assert_eq!(state(&root.harness("agent")), "running");
    assert!(screen_with(&root, "agent", "got:again").contains("25 80"));
    // The typist's place is free again: the daemon heard the detach.
    let mut third = Attached::start(&root, &["agent"], 25, 80);
    third.keys(b"third\r");
    third.wait_for("got:third");
    watcher.wait_for("got:third");
    third.keys(&[0x1d]);
    watcher.keys(&[0x1d]);
    assert!(third.exited().success() && watcher.exited().success());
}
