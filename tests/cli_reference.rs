//! docs/CLI.md is checked against clap's definitions, so the reference cannot drift from the
//! binary: every verb has its section, every option of a verb is named in its section, an
//! option a heading names exists, and every example (in CLI.md and after each `--help`)
//! parses as the binary would parse it.

use std::collections::BTreeMap;

/// Options every verb shares or that the top of the document explains once.
const SHARED: &[&str] = &["help", "version", "color", "root", "json", "quiet"];

/// One section: the heading's verb paths (words after `harn`) and its text, heading included.
struct Section {
    line: usize,
    paths: Vec<String>,
    text: String,
}

fn reference() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/CLI.md")).unwrap()
}

/// The verb words of a heading's code span: its leading lowercase words (`create TITLE` →
/// `create`; `harn supervisor service` → `supervisor service`).
fn verb_words(span: &str) -> String {
    span.trim_start_matches("harn ")
        .split_whitespace()
        .take_while(|w| {
            w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Code spans of a line, in order.
fn spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The sections of CLI.md: a `## \`harn X\`` heading sets the prefix its `####` verbs extend;
/// a heading without a code span (`### Exit codes`, a dashboard page) belongs to the section
/// above it only when it is a `####`.
fn sections(doc: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut prefix = String::new();
    let mut open = false;
    for (i, line) in doc.lines().enumerate() {
        let level = line.chars().take_while(|&c| c == '#').count();
        if level == 0 || !line[level..].starts_with(' ') {
            if open {
                let s = out.last_mut().unwrap();
                s.text.push_str(line);
                s.text.push('\n');
            }
            continue;
        }
        let code = spans(line);
        match (level, code.first()) {
            (2, Some(span)) if span.starts_with("harn") => {
                prefix = verb_words(span);
                out.push(Section {
                    line: i + 1,
                    paths: vec![prefix.clone()],
                    text: line.to_owned() + "\n",
                });
                open = true;
            }
            (4, Some(_)) => {
                let paths = code
                    .iter()
                    .map(|s| format!("{prefix} {}", verb_words(s)).trim().to_owned())
                    .collect();
                out.push(Section { line: i + 1, paths, text: line.to_owned() + "\n" });
                open = true;
            }
            (4, None) => {}
            _ => open = false,
        }
    }
    out
}

/// The paragraph that begins `**Host options.**`: the options of every verb that runs
/// attempts, which a heading's `[host options]` stands for.
fn host_options(doc: &str) -> String {
    let from = doc.find("**Host options.**").expect("CLI.md defines the host options");
    let rest = &doc[from..];
    rest[..rest.find("\n\n").unwrap_or(rest.len())].to_owned()
}

/// Every command of the tree with its path, the tree's root excluded.
fn commands(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let p = if path.is_empty() {
            sub.get_name().to_owned()
        } else {
            format!("{path} {}", sub.get_name())
        };
        out.push((p.clone(), sub.clone()));
        commands(sub, &p, out);
    }
}

/// Every verb that runs (a command without verbs below it), with its path.
pub fn leaves() -> Vec<(String, clap::Command)> {
    let mut all = tree();
    all.retain(|(_, c)| c.get_subcommands().all(|s| s.get_name() == "help"));
    all
}

fn tree() -> Vec<(String, clap::Command)> {
    let mut all = Vec::new();
    let mut root = harn::cli::command();
    root.build();
    commands(&root, "", &mut all);
    all
}

fn longs(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(str::to_owned))
        .filter(|l| !SHARED.contains(&l.as_str()))
        .collect()
}

#[test]
fn every_verb_has_a_section_naming_each_of_its_options() {
    let doc = reference();
    let sections = sections(&doc);
    let mut by_path: BTreeMap<&str, &Section> = BTreeMap::new();
    for s in &sections {
        for p in &s.paths {
            by_path.insert(p, s);
        }
    }
    let host = host_options(&doc);
    let mut wrong = Vec::new();
    for (path, cmd) in tree() {
        let leaf = cmd.get_subcommands().all(|s| s.get_name() == "help");
        let Some(section) = by_path.get(path.as_str()) else {
            if leaf {
                wrong.push(format!("`harn {path}` has no section (a `####` heading naming it)"));
            }
            continue;
        };
        // What a verb's section names, with what its groups' sections say of all their verbs
        // and, for a heading that says so, the host options.
        let mut named = section.text.clone();
        let words: Vec<&str> = path.split(' ').collect();
        for n in 1..words.len() {
            if let Some(group) = by_path.get(words[..n].join(" ").as_str()) {
                named.push_str(&group.text);
            }
        }
        if section.text.lines().next().is_some_and(|h| h.contains("[host options]")) {
            named.push_str(&host);
        }
        for long in longs(&cmd) {
            if !named.contains(&format!("--{long}")) {
                wrong
                    .push(format!("CLI.md:{}: `harn {path}` does not name --{long}", section.line));
            }
        }
    }
    assert!(wrong.is_empty(), "docs/CLI.md has drifted from the binary:\n{}", wrong.join("\n"));
}

#[test]
fn every_section_and_heading_option_exists() {
    let doc = reference();
    let all: BTreeMap<String, clap::Command> = tree().into_iter().collect();
    let mut wrong = Vec::new();
    for s in sections(&doc) {
        let heading = s.text.lines().next().unwrap_or_default();
        for path in &s.paths {
            let Some(cmd) = all.get(path) else {
                wrong.push(format!("CLI.md:{}: no verb `harn {path}`", s.line));
                continue;
            };
            if s.paths.len() > 1 {
                continue; // a heading of several verbs: its options belong to some of them
            }
            for word in heading.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
                let Some(long) = word.strip_prefix("--") else { continue };
                let known = cmd.get_arguments().any(|a| a.get_long() == Some(long))
                    || SHARED.contains(&long);
                if !known {
                    wrong.push(format!("CLI.md:{}: `harn {path}` has no option --{long}", s.line));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "docs/CLI.md names what the binary lacks:\n{}", wrong.join("\n"));
}

/// `line` split as a shell would split a simple command, up to a comment, a pipe or a `&&`.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '#' | '|' | '&' | '>') if word.is_empty() && !any => break,
            (None, ')') => break,
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() || any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() || any {
        words.push(word);
    }
    words
}

/// Each `harn …` command shown in `text`: in code spans and in the lines of code blocks.
fn shown_commands(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let candidates: Vec<&str> = if fenced { vec![line.trim()] } else { spans(line) };
        for c in candidates {
            let c = c.trim_start_matches("$ ");
            if c.starts_with("harn ") && !c.contains('…') && !c.contains("...") {
                out.push((i + 1, c.to_owned()));
            }
        }
    }
    out
}

/// A word that stands for a value in a synopsis: `SHELL`, `RUN_ID`.
fn placeholder(word: &str) -> bool {
    word.len() > 1 && word.chars().all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
}

/// True when `words` name a whole command with placeholders only where a value goes: a span
/// such as `harn work show ID` is a synopsis, and parses too.
fn parses(words: &[String]) -> Result<(), String> {
    use clap::error::ErrorKind;
    // A verb named in prose (`harn work run`, `harn supervisor`) is a reference, not a call.
    static VERBS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let verbs =
        VERBS.get_or_init(|| tree().into_iter().map(|(p, _)| format!("harn {p}")).collect());
    if verbs.contains(&words.join(" ")) {
        return Ok(());
    }
    match harn::cli::command().try_get_matches_from(words) {
        Ok(_) => Ok(()),
        Err(e) if !e.use_stderr() => Ok(()), // --help, --version
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => Ok(()),
        // A synopsis (`harn completions SHELL`) puts a placeholder where a value goes.
        Err(e) if e.kind() == ErrorKind::InvalidValue && words.iter().any(|w| placeholder(w)) => {
            Ok(())
        }
        Err(e) => Err(e.to_string().lines().next().unwrap_or_default().to_owned()),
    }
}

#[test]
fn every_example_parses_as_the_binary_parses_it() {
    let mut wrong = Vec::new();
    for (path, lines) in harn::examples::EXAMPLES {
        for line in *lines {
            let from = line.find("harn ").expect("an example runs harn");
            let words = shell_words(&line[from..]);
            if let Err(e) = parses(&words) {
                wrong.push(format!("`harn {path} --help` example `{line}`: {e}"));
            }
        }
    }
    for (line, shown) in shown_commands(&reference()) {
        let words = shell_words(&shown);
        // A synopsis with a placeholder verb (`harn work VERB`) or an option list is prose.
        if words.iter().any(|w| w.contains('[') || w.contains('|') || w == "VERB") {
            continue;
        }
        if let Err(e) = parses(&words) {
            wrong.push(format!("CLI.md:{line}: `{shown}`: {e}"));
        }
    }
    assert!(wrong.is_empty(), "examples the binary would refuse:\n{}", wrong.join("\n"));
}

#[test]
fn the_shell_splitter_reads_what_the_examples_hold() {
    assert_eq!(shell_words("harn a 'b c' # d"), ["harn", "a", "b c"]);
    assert_eq!(shell_words("harn a --x '' | jq"), ["harn", "a", "--x", ""]);
    assert_eq!(shell_words("harn a x=\"y z\""), ["harn", "a", "x=y z"]);
}

/// The verbs whose `--help` examples run here, in this order, in a fresh repository whose
/// `wf.sh` passes (a `$ ` line is a step between them, not an example); the others need a daemon, an agent, a named run or a terminal, and are
/// parsed above instead.
const RUN_HERE: &[&str] = &[
    "init",
    "work create",
    "work list",
    "work show",
    "work reconcile",
    "approval list",
    "supervisor list",
    "dash",
    "sim run",
    "sim day",
    "$ harn work run fix-the-parser",
    "run list",
    "work reopen",
    "work cancel",
];

/// Example lines of those verbs not run, and why.
const NOT_HERE: &[(&str, &str)] = &[
    ("harn dash", "the interactive dashboard needs a terminal (tests/pty.rs runs it in one)"),
    ("jq", "jq need not be installed"),
];

#[test]
fn the_help_examples_run_as_written() {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("repo");
    std::fs::create_dir_all(&root).unwrap();
    let bin = top.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(crate::cli::harn_bin(), bin.join("harn")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    // The repositories the examples name: this one, and `~/src/app` of `init`'s.
    let app = top.path().join("src/app");
    for repo in [&root, &app] {
        std::fs::create_dir_all(repo).unwrap();
        let git = std::process::Command::new("git").args(["init", "-q"]).current_dir(repo).status();
        assert!(git.unwrap().success());
    }
    let wf = root.join("wf.sh");
    std::fs::write(
        &wf,
        "#!/bin/sh\nread -r start\necho '{\"op\":\"result\",\"ok\":true,\"summary\":\"done\"}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&wf, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut ran = 0;
    for verb in RUN_HERE {
        let step = verb.strip_prefix("$ ");
        let lines: Vec<&str> = match step {
            Some(step) => vec![step],
            None => harn::examples::EXAMPLES
                .iter()
                .find(|(p, _)| p == verb)
                .unwrap_or_else(|| panic!("`harn {verb}` has no examples"))
                .1
                .to_vec(),
        };
        for line in lines {
            let command = line.split("    #").next().unwrap().trim();
            if NOT_HERE
                .iter()
                .any(|(skip, _)| command == *skip || command.contains(&format!("| {skip}")))
            {
                continue;
            }
            let out = std::process::Command::new("sh")
                .args(["-c", command])
                .current_dir(&root)
                .env("PATH", &path)
                .env("HOME", top.path())
                .env("USER", "ana")
                .env_remove("HARN_ROOT")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "`harn {verb} --help` example `{command}` exited {:?}:\n{}{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += usize::from(step.is_none());
        }
    }
    assert!(ran >= 18, "only {ran} examples ran");
}
