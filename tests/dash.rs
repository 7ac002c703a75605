//! `harn dash` in a real pseudo-terminal over the example's root: the screen is read back
//! through a terminal emulator while the service runs for the example's goal, each page is switched to by its key, and `q` ends it with
//! the terminal restored. `--once` prints a page as text for scripts.

use crate::cli::{harn_at as harn, harn_bin, text};
use crate::pty::{on_terminal, pty, Screen};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ROWS: u16 = 30;
const COLS: u16 = 120;

/// A root the example ran in: a goal that succeeded and two work items.
fn example_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(harn_bin())
        .args(["example", "--root"])
        .arg(dir.path().join("ex"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    dir
}

/// `harn dash` on `root` in a pseudo-terminal that is its controlling terminal, with `env`
/// besides `TERM`: the child, the keyboard (the master side) and the emulated screen.
fn dash_in_a_terminal(
    root: &Path,
    env: &[(&str, &str)],
) -> (std::process::Child, std::fs::File, Screen) {
    dash_sized(root, env, ROWS, COLS)
}

/// [`dash_in_a_terminal`] on a terminal of `rows` by `cols`.
fn dash_sized(
    root: &Path,
    env: &[(&str, &str)],
    rows: u16,
    cols: u16,
) -> (std::process::Child, std::fs::File, Screen) {
    let (master, tty) = pty(rows, cols);
    let mut cmd = Command::new(harn_bin());
    cmd.args(["dash", "--refresh-ms", "200", "--root"]).arg(root);
    on_terminal(&mut cmd, &tty);
    cmd.env("TERM", "xterm-256color").envs(env.iter().copied());
    let child = cmd.spawn().unwrap();
    let keys = std::fs::File::from(master.try_clone().unwrap());
    (child, keys, Screen::follow(std::fs::File::from(master), rows, cols))
}

/// Stops the service of a root when dropped, so a failing test leaves no daemon behind.
struct Service<'a>(&'a Path);

impl Drop for Service<'_> {
    fn drop(&mut self) {
        let _ = harn(self.0, &["supervisor", "service", "stop", "--timeout", "20"]);
    }
}

#[test]
fn the_dashboard_shows_each_page_in_a_terminal_and_quits_on_q() {
    let dir = example_root();
    let root = dir.path().join("ex");
    let start = ["supervisor", "service", "start", "ship", "--harness", "scripted"];
    let out = harn(&root, &[&start[..], &["--wake-interval-ms", "200"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    let _service = Service(&root);
    let (mut child, mut keys, screen) = dash_in_a_terminal(&root, &[]);
    screen.wait_for(&["1 Goals", "service ● running", "enrolled 1 goal", "ship", "succeeded"]);
    screen.wait_for(&["awaiting change"]);
    keys.write_all(b"2").unwrap();
    screen.wait_for(&["ITEM", "parser", "cli", "ATTEMPTS"]);
    // Enter opens the selected item's detail (the first row: the example's first item).
    keys.write_all(b"\r").unwrap();
    screen.wait_for(&["work cli", "attempts and runs", "proof criteria", "history"]);
    keys.write_all(b"\x1b").unwrap();
    screen.wait_for(&["ITEM", "ATTEMPTS"]);
    keys.write_all(b"?").unwrap();
    screen.wait_for(&["keys", "show or hide these keys"]);
    keys.write_all(b"?").unwrap(); // Closes the help; the next key acts again.
    keys.write_all(b"3").unwrap();
    screen.wait_for(&["daemon ○ not running", "no harnesses"]);
    keys.write_all(b"4").unwrap();
    screen.wait_for(&["4 Approvals", "no approvals"]);
    keys.write_all(b"q").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("harn dash did not quit on q; the screen:\n{}", screen.contents());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

/// On the smallest terminal people use, 80 by 24, the real binary keeps every name whole and
/// the footer on a line of its own, on every page.
#[test]
fn the_dashboard_fits_an_80_by_24_terminal() {
    let dir = example_root();
    let root = dir.path().join("ex");
    std::fs::write(
        root.join("harness.toml"),
        "[harness.stubborn-watcher]\ncommand = [\"sleep\", \"100\"]\n\n\
         [harness.spawn-fails-always]\ncommand = [\"/nonexistent/agent\"]\n",
    )
    .unwrap();
    let (mut child, mut keys, screen) = dash_sized(&root, &[], 24, 80);
    // The short list of keys, with room kept for the age of the last reading.
    let footer = "q quit · 1-4 page · Enter open · ? keys · r read now";
    let pages: [(&[u8], &[&str]); 4] = [
        (b"1", &["ship", "succeeded"]),
        (b"2", &["ITEM", "parser", "cli"]),
        (b"3", &["stubborn-watcher", "spawn-fails-always"]),
        (b"4", &["no approvals"]),
    ];
    for (key, whole) in pages {
        keys.write_all(key).unwrap();
        screen.wait_for(whole);
        screen.wait_for(&[footer]);
        let shown = screen.contents();
        let lines: Vec<&str> = shown.lines().collect();
        assert!(lines.len() <= 24, "{shown}");
        let at: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains("q quit")).collect();
        assert_eq!(at.len(), 1, "one footer line:\n{shown}");
        let line = lines[at[0]];
        let age = line.trim().strip_prefix(footer).map(str::trim);
        let age_ok =
            age.is_some_and(|a| a.is_empty() || (a.starts_with("read ") && a.ends_with(" ago")));
        assert!(age_ok, "the keys and the reading's age apart on the footer line:\n{shown}");
    }
    keys.write_all(b"q").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "harn dash did not quit on q");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Under `NO_COLOR` the dashboard draws no colour (bold and reversed stay).
#[test]
fn no_color_draws_the_dashboard_without_colour() {
    let dir = example_root();
    let root = dir.path().join("ex");
    let (mut child, mut keys, screen) = dash_in_a_terminal(&root, &[("NO_COLOR", "1")]);
    screen.wait_for(&["1 Goals", "ship", "succeeded"]);
    let coloured = screen.with(|s| {
        (0..ROWS)
            .flat_map(|r| (0..COLS).map(move |c| (r, c)))
            .filter(|&(r, c)| {
                s.cell(r, c).is_some_and(|cell| cell.fgcolor() != vt100::Color::Default)
            })
            .count()
    });
    keys.write_all(b"q").unwrap();
    let _ = child.wait();
    assert_eq!(coloured, 0, "no cell in colour:\n{}", screen.contents());
}

#[test]
fn once_prints_a_page_as_text_and_a_bad_root_is_refused() {
    let dir = example_root();
    let root = dir.path().join("ex");
    let out = harn(&root, &["dash", "--once", "--page", "work"]);
    assert!(out.status.success(), "{}", text(&out));
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains("2 items"), "{page}");
    assert!(page.contains("parser"), "{page}");
    // The detail views, through the same renderer.
    let work = text(&harn(&root, &["dash", "--once", "--page", "work", "--open", "parser"]));
    for part in
        ["work parser", "attempts and runs", "attempt 1  run wf-", "proof criteria", "history"]
    {
        assert!(work.contains(part), "{part}: {work}");
    }
    let goal =
        harn(&root, &["dash", "--once", "--page", "goals", "--open", "ship", "--height", "40"]);
    let goal = text(&goal);
    for part in ["goal ship", "graph", "parser", "plans and review receipts", "next"] {
        assert!(goal.contains(part), "{part}: {goal}");
    }
    let none = harn(&root, &["dash", "--once", "--page", "work", "--open", "nope"]);
    assert!(text(&none).contains("cannot be read"), "{}", text(&none));
    let missing = harn(Path::new("/nonexistent-harn-root"), &["dash", "--once"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    let piped = harn(&root, &["dash"]);
    assert_eq!(piped.status.code(), Some(2), "no terminal: {}", text(&piped));
    assert!(text(&piped).contains("--once"), "{}", text(&piped));
}

/// The reads the dashboard's reader keeps between refreshes follow every change of the files
/// they came from: after a reopen, the kept refresh shows what a full read shows.
#[test]
fn kept_reads_follow_a_change_of_their_files() {
    use harn::dash::readers::Kept;
    use harn::dash::Snapshot;
    let dir = example_root();
    let root = dir.path().join("ex").canonicalize().unwrap();
    // Older than the timestamps' slack, so the first refresh keeps its reads.
    std::thread::sleep(Duration::from_millis(2_500));
    let mut kept = Kept::default();
    let state = |s: &Snapshot, id: &str| {
        let (rows, _) = s.work.as_ref().unwrap();
        let row = rows.iter().find(|r| r.id.as_str() == id).unwrap();
        serde_json::json!(row.state).as_str().unwrap().to_owned()
    };
    let first = Snapshot::take(&root, None, &mut kept);
    assert_eq!(state(&first, "parser"), "succeeded");
    let again = Snapshot::take(&root, None, &mut kept);
    assert!(again.same_as(&first), "nothing changed");
    let out = harn(&root, &["work", "reopen", "parser", "--reason", "tabs again"]);
    assert!(out.status.success(), "{}", text(&out));
    let kept_read = Snapshot::take(&root, None, &mut kept);
    assert_eq!(state(&kept_read, "parser"), "ready", "the item's journal changed");
    let full = Snapshot::take(&root, None, &mut Kept::default());
    assert!(kept_read.same_as(&full), "kept: {:?}\nfull: {:?}", kept_read.goals, full.goals);
}
