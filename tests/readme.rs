//! The README's commands run as written. Every shell block of README.md is run here with the
//! real binary on `PATH`, in the order of its section, or skipped for a reason this file
//! states; a block in a section this file does not know fails, so a new one is run too.
//!
//! Each command must exit 0, or the code its comment names (`(exit 1)`); a comment `its id:
//! ID` must be borne out by the command's output. What a block cannot do here is rewritten,
//! and only that: agent presets become the scripted harness the README offers for a machine
//! without one, `PATH/TO/harn` is this checkout, `/tmp/…` roots are temporary directories,
//! a following log is read once, a block that installs or logs in a real agent is left to
//! tests/real_agents.rs (which installs into a prefix of its own), and placeholders (`RUN_ID`, `APPROVAL_ID`) are read from
//! the output of the command the README says shows them.

use crate::cli::harn_bin;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How a section's blocks are run.
enum Plan {
    /// Run, in a fresh directory (`git init`ed when true), after `given` (shell).
    Run { git: bool, given: &'static str },
    /// Run from the checkout's top (the block makes its own root).
    FromCheckout,
    /// Not run here, and why.
    Skip(&'static str),
}

/// Every section of README.md with shell blocks, and its plan.
const SECTIONS: &[(&str, Plan)] = &[
    ("Install", Plan::Skip("CI runs these two commands itself (.ci/run)")),
    ("Your first day", Plan::Run { git: true, given: "" }),
    ("Simulation", Plan::Run { git: false, given: "" }),
    ("Keep long-lived processes running", Plan::Run { git: false, given: "" }),
    ("Drive a work graph to completion", Plan::Run { git: false, given: "" }),
    ("Leave it running and watch it", Plan::Run { git: false, given: "" }),
    ("Run work items", Plan::FromCheckout),
];

/// One fenced block: its section, its first line's number, its language and its text.
struct Block {
    section: String,
    line: usize,
    lang: String,
    text: String,
}

fn blocks(readme: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let (mut section, mut open): (String, Option<Block>) = (String::new(), None);
    for (n, line) in readme.lines().enumerate() {
        if let Some(b) = open.as_mut() {
            if line.starts_with("```") {
                found.push(open.take().expect("open"));
            } else {
                b.text.push_str(line);
                b.text.push('\n');
            }
            continue;
        }
        if let Some(h) = line.strip_prefix("## ") {
            section = h.trim().to_owned();
        } else if let Some(lang) = line.strip_prefix("```") {
            let lang = lang.trim().to_owned();
            open = Some(Block { section: section.clone(), line: n + 2, lang, text: String::new() });
        }
    }
    found
}

/// The repository's top: README.md and examples/ are there.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// A block's commands as one shell script that checks each command's exit code and its
/// `its id:` claim, naming the README line that failed.
fn script(block: &Block, scratch: &Path) -> String {
    let top = checkout();
    let mut commands: Vec<(usize, String)> = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in block.text.lines().enumerate() {
        let n = block.line + i;
        let (start, mut text) = pending.take().unwrap_or((n, String::new()));
        match line.strip_suffix('\\') {
            Some(head) => {
                text.push_str(head);
                pending = Some((start, text));
            }
            None => {
                text.push_str(line);
                commands.push((start, text));
            }
        }
    }
    let mut out = String::from("fail() { echo \"README.md:$1: $2\"; exit 1; }\n");
    for (n, command) in commands {
        let (cmd, comment) = match command.find("  #").or_else(|| command.find(" # ")) {
            Some(at) => (command[..at].trim().to_owned(), command[at..].to_owned()),
            None => (command.trim().to_owned(), String::new()),
        };
        // `FILE` stands for a failing seed's trace, which a clean sweep never leaves.
        if cmd.is_empty() || cmd.starts_with('#') || cmd.ends_with(" FILE") {
            continue;
        }
        let cmd = rewrite(&cmd, &top, scratch);
        let want = comment
            .split("(exit ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|c| c.trim().parse::<i32>().ok())
            .unwrap_or(0);
        let id = comment.split("its id: ").nth(1).map(|r| {
            r.split(|c: char| c.is_whitespace() || c == ')' || c == ',')
                .next()
                .unwrap_or("")
                .to_owned()
        });
        // Assignments and `cd` change the script's own state: run as they are.
        if cmd.starts_with("cd ")
            || cmd.contains("&& cd ")
            || cmd.contains("=$(")
            || !cmd.starts_with("harn ")
        {
            out.push_str(&format!("{cmd} || fail {n} \"exit $?\"\n"));
            continue;
        }
        out.push_str(&format!("echo '+ {}' >&2\n", cmd.replace('\'', "'\\''")));
        // Bounded, so a command that waits for ever fails its line instead of the suite.
        out.push_str(&format!(
            "said=$(timeout 300 {cmd} 2>&1); rc=$?\nprintf '%s\\n' \"$said\" >&2\n"
        ));
        out.push_str(&format!(
            "[ \"$rc\" = {want} ] || fail {n} \"exit $rc, the README expects {want}\"\n"
        ));
        if let Some(id) = id.filter(|i| !i.is_empty()) {
            out.push_str(&format!(
                "case \"$said\" in *{id}*) ;; *) fail {n} \"its output never names {id}\";; esac\n"
            ));
        }
        // What the README says a command shows is read from it for the commands after.
        if cmd.starts_with("harn run list") {
            out.push_str("RUN_ID=$(printf '%s\\n' \"$said\" | awk 'NR==2{print $1}')\n");
        }
        if cmd.starts_with("harn approval list") {
            out.push_str("[ -n \"${APPROVAL_ID:-}\" ] || APPROVAL_ID=$(printf '%s\\n' \"$said\" | awk 'NR==1{print $1}')\n");
        }
    }
    out
}

/// The rewrites a block needs here, and only those (see the module's comment).
fn rewrite(cmd: &str, top: &Path, scratch: &Path) -> String {
    let scratch = scratch.display().to_string();
    let mut cmd = cmd
        .replace("PATH/TO/harn", &top.display().to_string())
        .replace("--harness claude-code", "--harness scripted")
        .replace("/tmp/harn-", &format!("{scratch}/harn-"))
        .replace("RUN_ID", "\"$RUN_ID\"")
        .replace("APPROVAL_ID", "\"$APPROVAL_ID\"")
        .replace("--seeds 0..1000", "--seeds 0..20");
    if cmd.starts_with("harn harness logs") {
        cmd = cmd.replace(" --follow", "").replace(" -f", "");
    }
    cmd
}

/// The scripted harness the README offers a machine without an agent program, declared in
/// the root `harn init` made.
const SCRIPTED: &str =
    r#"{"harnesses": {"scripted": {"command": ["TOP/examples/harnesses/scripted.sh"]}}}"#;

#[test]
fn every_shell_block_of_the_readme_runs_as_written() {
    let readme = std::fs::read_to_string(checkout().join("README.md")).unwrap();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(harn_bin(), bin.path().join("harn")).unwrap();
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let blocks = blocks(&readme);
    let mut ran = 0;
    let sections: Vec<&str> = {
        let mut s: Vec<&str> = blocks.iter().map(|b| b.section.as_str()).collect();
        s.dedup();
        s
    };
    for section in sections {
        let Some((_, plan)) = SECTIONS.iter().find(|(s, _)| *s == section) else {
            panic!("README section {section:?} has shell blocks this test neither runs nor skips");
        };
        let scratch = tempfile::tempdir().unwrap();
        let work = scratch.path().join("repo");
        std::fs::create_dir(&work).unwrap();
        let (cwd, mut text) = match plan {
            Plan::Skip(why) => {
                eprintln!("README section {section:?} not run here: {why}");
                continue;
            }
            Plan::FromCheckout => (checkout(), String::new()),
            Plan::Run { git, given } => {
                if *git {
                    let init = Command::new("git").args(["init", "-q"]).current_dir(&work).output();
                    assert!(init.is_ok_and(|o| o.status.success()), "git init");
                }
                (work.clone(), given.to_string())
            }
        };
        for b in blocks.iter().filter(|b| b.section == section) {
            // Installing and logging in a real agent is tests/real_agents.rs's, in a prefix
            // of its own: never the machine's.
            if b.text.contains("npm install") || b.text.contains("auth login") {
                continue;
            }
            match b.lang.as_str() {
                // A configuration the next block uses, written where it says.
                "toml" => std::fs::write(work.join("harness.toml"), &b.text).unwrap(),
                "" | "sh" => text.push_str(&script(b, scratch.path())),
                _ => {}
            }
            // `harn init` made the root: the scripted harness is declared in its config.
            if b.text.contains("harn init") {
                let config = SCRIPTED.replace("TOP", &checkout().display().to_string());
                text.push_str(&format!("printf '%s\\n' '{config}' > .harnery/config.json\n"));
            }
        }
        text.push_str("harn harness down >/dev/null 2>&1; harn supervisor service stop >/dev/null 2>&1; true\n");
        let out = Command::new("bash")
            .arg("-c")
            .arg(&text)
            .current_dir(&cwd)
            .env("PATH", &path)
            .env("HOME", scratch.path())
            .env("NO_COLOR", "1")
            // A person's git knows who they are; the scratch home has no configuration.
            .env("GIT_AUTHOR_NAME", "Ana")
            .env("GIT_AUTHOR_EMAIL", "ana@example.com")
            .env("GIT_COMMITTER_NAME", "Ana")
            .env("GIT_COMMITTER_EMAIL", "ana@example.com")
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "README section {section:?}:\n{said}");
        ran += 1;
    }
    assert!(ran >= 6, "{ran} sections ran");
}

/// The README and the docs read as prose: no line over 400 characters (a table cell that
/// long is a section), and every file the README links to is here.
#[test]
fn the_readme_has_short_lines_and_links_that_exist() {
    let mut docs = vec![checkout().join("README.md")];
    for dir in ["docs", "docs/decisions"] {
        let found = std::fs::read_dir(checkout().join(dir)).unwrap().map(|e| e.unwrap().path());
        docs.extend(found.filter(|p| p.extension().is_some_and(|e| e == "md")));
    }
    for path in docs {
        let doc = path.strip_prefix(checkout()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let len = line.chars().count();
            assert!(len <= 400, "{doc}:{}: {len} characters", n + 1);
        }
    }
    let readme = std::fs::read_to_string(checkout().join("README.md")).unwrap();
    for link in readme.split("](").skip(1) {
        let target = link.split(')').next().unwrap_or("");
        let file = target.split('#').next().unwrap_or("");
        if file.is_empty() || file.contains("://") {
            continue;
        }
        assert!(checkout().join(file).exists(), "README.md links to {file}, which is not here");
    }
}
