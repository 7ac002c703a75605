//! A person's review in a real browser (ignored unless asked for, as `.ci/run` does: `cargo
//! test --test integration -- --include-ignored browser`): headless Chromium (Debian's
//! `chromium`, which `.ci/browser/install.sh` installs) driven by `playwright-core` from npm
//! (installed once under cargo's test scratch directory) through `tests/browser/review.cjs`,
//! against `harn web` on a root with an item in review, a parked run, a goal and a terminal
//! harness. The records then say what the browser did: each decision with the web actor, the
//! feedback in the next attempt's start line, the item landed on `main`, the approval ruled,
//! and the notices at a webhook receiver on loopback. Screenshots of each page at 1280×800
//! are left in cargo's test scratch directory, `web-screenshots/`.

use crate::cli::{harn_at as harn, json, text};
use crate::notify::Receiver;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

const PLAYWRIGHT: &str = "playwright-core@1.65.2";

/// Words a reviewer sends back, with characters a page must escape.
const FEEDBACK: &str = "keep the tabs & say <why>";

/// `playwright-core`'s directory, installed once for every test of this run (and kept in
/// cargo's scratch directory for the next).
fn playwright() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
        let module = prefix.join("node_modules/playwright-core");
        let (_, version) = PLAYWRIGHT.rsplit_once('@').unwrap();
        let have: Option<Value> = std::fs::read(module.join("package.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if have.as_ref().and_then(|v| v["version"].as_str()) != Some(version) {
            let install = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&prefix)
                .arg(PLAYWRIGHT)
                .output()
                .expect("npm runs");
            assert!(install.status.success(), "npm install: {}", text(&install));
        }
        module
    })
}

/// Debian's Chromium, if this machine has it.
fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Stops the root's harness daemon when dropped.
struct Daemon<'a>(&'a Path);

impl Drop for Daemon<'_> {
    fn drop(&mut self) {
        let _ = harn(self.0, &["harness", "down"]);
    }
}

fn write_exec(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(path, perms).unwrap();
}

/// The width and height a PNG file says it has.
fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{} is a PNG", path.display());
    let word = |at: usize| u32::from_be_bytes(b[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

#[test]
#[ignore = "a real browser: `cargo test --test integration -- --include-ignored browser`"]
fn browser_a_person_reviews_rejects_with_feedback_accepts_lands_and_approves() {
    let Some(chromium) = chromium() else {
        return crate::skip::skip("Chromium is not installed (.ci/browser/install.sh installs it)");
    };
    let hook = Receiver::start();
    let dir = crate::web::review_root();
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/ship.sh"), r.join("ship.sh")).unwrap();
    std::fs::copy(examples.join("harnesses/scripted.sh"), r.join("harness.sh")).unwrap();
    std::fs::copy(examples.join("policy.json"), r.join("policy.json")).unwrap();
    let config = serde_json::json!({
        "harnesses": { "scripted": { "command": ["./harness.sh"] } },
        "notify": [{ "webhook": hook.url() }],
    });
    std::fs::write(r.join(".harnery/config.json"), config.to_string()).unwrap();
    std::fs::write(
        r.join("team.json"),
        r#"{"implementer": {"instructions": "Implement it.", "harness": "scripted"}}"#,
    )
    .unwrap();
    write_exec(
        &r.join("shell.sh"),
        "#!/bin/sh\necho 'SHELL-READY <b>'\nwhile read -r l; do echo \"got:$l\"; done\n",
    );
    std::fs::write(
        r.join("harness.toml"),
        "[harness.shell]\ncommand = [\"./shell.sh\"]\ntty = true\n",
    )
    .unwrap();

    // An item in review, a run parked on an approval, a goal, a terminal harness running.
    let out = harn(r, &["work", "run", "it", "--isolation", "worktree"]);
    assert!(out.status.success(), "{}", text(&out));
    let create =
        ["work", "create", "Ship", "ship.sh", "--objective", "add the flag", "--id", "ship"];
    assert!(harn(r, &create).status.success());
    let park = [
        "work",
        "run",
        "ship",
        "--harness",
        "scripted",
        "--policy",
        "policy.json",
        "--isolation",
        "worktree",
    ];
    assert_eq!(harn(r, &park).status.code(), Some(1), "parked");
    let goal = ["supervisor", "create", "it", "--team", "team.json", "--id", "g"];
    let out = harn(r, &goal);
    assert!(out.status.success(), "{}", text(&out));
    let _daemon = Daemon(r);
    let out = harn(r, &["harness", "up"]);
    assert!(out.status.success(), "{}", text(&out));

    let server = crate::web::Server::start(r);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/review.cjs");
    let out = Command::new("node")
        .arg(&script)
        .env("PLAYWRIGHT", playwright())
        .env("CHROMIUM", &chromium)
        .env("LOGIN", &server.login)
        .env("SHOTS", &shots)
        .env("FEEDBACK", FEEDBACK)
        .output()
        .unwrap();
    assert!(out.status.success(), "the browser's review failed:\n{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("step: done"), "{}", text(&out));

    // What the browser did, as the records say it.
    let shown = harn(r, &["work", "show", "it"]);
    let history = text(&shown);
    let lines: Vec<&str> = history
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    for done in [
        &*format!("sent back with feedback: {FEEDBACK}"),
        "attempt 2 started",
        "accepted",
        "landed",
    ] {
        let line =
            lines.iter().find(|l| l.contains(done)).unwrap_or_else(|| panic!("{done}: {history}"));
        assert!(line.contains("web:"), "{done} by the web actor: {line}");
    }
    let item = json(&harn(r, &["work", "show", "it", "--json"]));
    assert_eq!(item["projection"]["landed"], true, "{item}");
    let main = Command::new("git").arg("-C").arg(r).args(["show", "main:a.txt"]).output().unwrap();
    assert!(String::from_utf8_lossy(&main.stdout).contains("keep the tabs"), "landed on main");
    let approvals = json(&harn(r, &["approval", "list", "--json"]));
    assert!(approvals.to_string().contains("approved"), "{approvals}");
    let ruled = text(&harn(r, &["work", "show", "ship"]));
    assert!(ruled.contains("web:"), "the ruling and the resumption by the web actor: {ruled}");

    // The notices: the first review, the approval, and the review of the attempt the browser
    // started, each once.
    let got = hook.wait_for(3, Duration::from_secs(30));
    let keys: Vec<&str> = got.iter().map(|g| g.key.as_str()).collect();
    assert!(keys.iter().filter(|k| k.starts_with("review:it:")).count() >= 2, "{keys:?}");
    assert!(keys.iter().any(|k| k.starts_with("approval:")), "{keys:?}");
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), keys.len(), "never twice: {keys:?}");

    let mut pngs: Vec<_> = std::fs::read_dir(&shots).unwrap().flatten().map(|e| e.path()).collect();
    pngs.sort();
    for want in
        ["overview", "items", "item-in-review", "proof", "run", "approvals", "goal", "harness"]
    {
        assert!(pngs.iter().any(|p| p.file_stem().unwrap() == want), "{want}.png: {pngs:?}");
    }
    for p in &pngs {
        assert_eq!(png_size(p), (1280, 800), "{}", p.display());
    }
}
