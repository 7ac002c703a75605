//! The one log view over real children: every harness interleaved by time with its stream,
//! the filters, the formats, a partial line that is not held back forever, and a follower of
//! every log at once.

use crate::cli::{harn_bin, text};
use crate::harness_daemon::{Root, WAIT};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TWO: &str = "[harness.api]\ncommand = [\"sh\", \"-c\", \"echo api says hi; echo api fails >&2; sleep 1.2; echo api again; exec sleep 1000{marker}\"]\n\n[harness.db]\ncommand = [\"sh\", \"-c\", \"sleep 0.4; echo db up; printf 'db partial'; exec sleep 1000{marker}\"]\n";

fn logs(root: &Root, args: &[&str]) -> String {
    let mut all = vec!["logs"];
    all.extend_from_slice(args);
    let out = root.harn(&all);
    assert!(out.status.success(), "logs {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for_log(root: &Root, args: &[&str], want: &str) -> String {
    let started = Instant::now();
    loop {
        let shown = logs(root, args);
        if shown.contains(want) {
            return shown;
        }
        assert!(started.elapsed() < WAIT, "{want:?} never appeared: {shown}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_harness_interleaves_by_time_with_its_name_and_stream() {
    let root = Root::new(TWO);
    root.up();
    // The partial line (no newline) is written after its hold, not when the child exits,
    // with the time it was read.
    wait_for_log(&root, &[], "db partial");
    let all = wait_for_log(&root, &[], "api again");
    let order: Vec<&str> =
        all.lines().filter_map(|l| l.split_once(" | ").map(|(_, text)| text)).collect();
    assert_eq!(order, ["api says hi", "api fails", "db up", "db partial", "api again"], "{all}");
    let line = all.lines().find(|l| l.ends_with("| api fails")).unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[2..4], ["api", "err"], "{line}");
    assert!(fields[0].len() == 10 && fields[1].len() == 12, "a date and a time: {line}");
    assert!(all
        .lines()
        .any(|l| l.contains(" db ") && l.contains(" out ") && l.ends_with("| db up")));

    // One harness: no name column; --plain is the text only, as before.
    let api = logs(&root, &["api", "--lines", "2"]);
    assert_eq!(api.lines().count(), 2, "{api}");
    let streams: Vec<&str> = api.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    assert_eq!(streams, ["err", "out"], "the stream follows the time: {api}");
    assert_eq!(logs(&root, &["api", "--plain"]), "api says hi\napi fails\napi again\n");

    // JSON lines, and the filters.
    let json = logs(&root, &["db", "--json", "--lines", "1"]);
    let last: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!((last["harness"].as_str(), last["stream"].as_str()), (Some("db"), Some("out")));
    assert_eq!(last["text"], "db partial");
    assert!(last["ts"].as_i64().unwrap() > 1_700_000_000_000, "{last}");
    assert_eq!(logs(&root, &["--since", "1h"]).lines().count(), 5);
    assert_eq!(logs(&root, &["--since", "2999-01-01T00:00:00Z"]), "");
    let bad = root.harn(&["logs", "--since", "last tuesday"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("--since"), "{}", text(&bad));
}

#[test]
fn following_every_harness_prints_the_lines_of_each_as_they_come() {
    // The children write their second lines only once the follower runs (the test makes
    // `go`), so a slow start of the follower cannot make it miss them.
    let root = Root::new(
        "[harness.one]\ncommand = [\"sh\", \"-c\", \"echo one starts; while [ ! -e go ]; do sleep 0.05; done; echo one later; exec sleep 1000{marker}\"]\n\n[harness.two]\ncommand = [\"sh\", \"-c\", \"while [ ! -e go ]; do sleep 0.05; done; echo two later >&2; exec sleep 1000{marker}\"]\n",
    );
    root.up();
    wait_for_log(&root, &[], "one starts");
    let mut follower = Command::new(harn_bin())
        .args(["harness", "logs", "--follow", "--lines", "0", "--root"])
        .arg(root.dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = BufReader::new(follower.stdout.take().unwrap());
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    // Once the follower holds both logs open, the children go on.
    let holds = |log: &str| {
        std::fs::read_dir(format!("/proc/{}/fd", follower.id())).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|t| t.to_string_lossy().ends_with(log))
            })
        })
    };
    let started = Instant::now();
    while !(holds("/one.log") && holds("/two.log")) {
        assert!(started.elapsed() < WAIT, "the follower never opened the logs");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(root.dir.path().join("go"), "").unwrap();
    let mut seen = Vec::new();
    let started = Instant::now();
    while seen.len() < 2 && started.elapsed() < WAIT {
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(100)) {
            seen.push(line);
        }
    }
    let _ = follower.kill();
    let _ = follower.wait();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().any(|l| l.contains(" one out  | one later")), "{seen:?}");
    assert!(seen.iter().any(|l| l.contains(" two err  | two later")), "{seen:?}");
}

/// The read verbs name a malformed `harness.toml` as `up` does, instead of reading it as an
/// empty one.
#[test]
fn read_verbs_name_a_malformed_configuration() {
    let root = crate::harness_daemon::Root::new("[harness.a]\ncommand = [\"sleep\", \"1\"\n");
    for args in
        [&["list"][..], &["list", "--json"][..], &["status", "a"][..], &["logs", "nosuch"][..]]
    {
        let out = root.harn(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", crate::cli::text(&out));
        assert!(
            crate::cli::text(&out).contains("harness.toml:"),
            "{args:?}: {}",
            crate::cli::text(&out)
        );
    }
}
