//! Terminal harnesses (`tty = true`) with real pseudo-terminals: the child sees a terminal
//! on 0, 1 and 2 of the configured size, the daemon keeps its screen (`screen`), types into
//! it (`send`, recorded in the ledger), logs its output, and a stop hangs the session up.

use crate::cli::text;
use crate::harness_daemon::{state, Root};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Waits until `name`'s screen holds `wanted`; returns the screen.
fn screen_with(root: &Root, name: &str, wanted: &str) -> String {
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
