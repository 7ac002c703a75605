//! Architecture invariant: harn-core and harn-sim perform no IO and stay deterministic. Their
//! sources may not use filesystem, process, network, environment, thread, terminal, clock or
//! OS-randomness APIs, nor hash-ordered collections. `use` trees are expanded (`use
//! std::{fs, time::{Instant}}` names `std::fs` and `std::time::Instant`), so grouping an import
//! does not hide it.

use std::path::{Path, PathBuf};

/// Module paths that may not be imported or named, with the reason.
const FORBIDDEN_PATHS: &[(&str, &str)] = &[
    ("std::fs", "filesystem access"),
    ("std::process", "process control"),
    ("std::net", "networking"),
    ("std::env", "the process environment"),
    ("std::thread", "threads"),
    ("std::os", "operating-system specifics"),
    ("std::io::stdin", "the terminal"),
    ("std::io::stdout", "the terminal"),
    ("std::io::stderr", "the terminal"),
    ("std::time::Instant", "reading the monotonic clock"),
    ("std::time::SystemTime", "reading the wall clock"),
    ("std::time::UNIX_EPOCH", "reading the wall clock"),
    ("std::collections::HashMap", "hash-ordered iteration"),
    ("std::collections::HashSet", "hash-ordered iteration"),
    ("std::collections::hash_map", "hash-ordered iteration"),
    ("std::hash::RandomState", "randomly keyed hashing"),
    ("std::hash::DefaultHasher", "randomly keyed hashing"),
    ("std::collections::hash_map::RandomState", "randomly keyed hashing"),
];

/// Words that may not appear in code at all, with the reason.
const FORBIDDEN_WORDS: &[(&str, &str)] = &[
    ("Instant::now", "reading the monotonic clock"),
    ("SystemTime::now", "reading the wall clock"),
    ("UNIX_EPOCH", "reading the wall clock"),
    ("thread_rng", "OS randomness"),
    ("OsRng", "OS randomness"),
    ("getrandom", "OS randomness"),
    ("from_entropy", "OS randomness"),
    ("HashMap", "hash-ordered iteration"),
    ("HashSet", "hash-ordered iteration"),
    ("RandomState", "randomly keyed hashing"),
    ("DefaultHasher", "randomly keyed hashing"),
    ("println!", "printing to the terminal"),
    ("eprintln!", "printing to the terminal"),
    ("print!(", "printing to the terminal"),
    ("eprint!(", "printing to the terminal"),
    ("dbg!(", "printing to the terminal"),
    ("tokio", "an async runtime"),
    ("unsafe ", "unsafe code"),
    ("use std as", "aliasing std hides what is used"),
    ("extern crate std", "aliasing std hides what is used"),
];

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of each line, with `//` comments removed.
fn code_lines(text: &str) -> Vec<&str> {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect()
}

/// Every path named by every `use` statement, with the line the statement starts on.
fn use_paths(lines: &[&str]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let is_use = trimmed.starts_with("use ")
            || trimmed.starts_with("pub use ")
            || trimmed.contains(" use ");
        if !is_use {
            i += 1;
            continue;
        }
        let start = i;
        let mut statement = String::new();
        while i < lines.len() {
            statement.push_str(lines[i]);
            i += 1;
            if statement.contains(';') {
                break;
            }
        }
        let tree: String = statement
            .split_once("use ")
            .map(|(_, rest)| rest.split(';').next().unwrap_or(""))
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        for path in expand(&tree) {
            found.push((start + 1, path));
        }
    }
    found
}

/// Expands a use tree such as `a::{b,c::{d,e}}` into `a::b`, `a::c::d`, `a::c::e`.
pub(crate) fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        return vec![tree.trim_start_matches("::").to_owned()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len())];
    let mut items = Vec::new();
    let (mut depth, mut last) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[last..i]);
                last = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[last..]);
    items
        .into_iter()
        .filter(|item| !item.is_empty())
        .flat_map(|item| expand(&format!("{prefix}{item}")))
        .collect()
}

/// Every forbidden use in `crate_dir/src`, as `file:line: what (why)`.
fn violations(crate_dir: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_dir).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no sources under {}", root.display());
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        let lines = code_lines(&text);
        let shown =
            file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&file).display().to_string();
        for (line, path) in use_paths(&lines) {
            let path = path.trim_start_matches("::");
            for (forbidden, why) in FORBIDDEN_PATHS {
                if path == *forbidden || path.starts_with(&format!("{forbidden}::")) {
                    found.push(format!("{shown}:{line}: use {path} ({why})"));
                }
            }
        }
        for (no, code) in lines.iter().enumerate() {
            let qualified: Vec<&str> = FORBIDDEN_PATHS.iter().map(|(p, _)| *p).collect();
            for (word, why) in FORBIDDEN_WORDS.iter().chain(FORBIDDEN_PATHS.iter()) {
                let is_path = qualified.contains(word);
                if code.contains(word) && !(is_path && code.trim_start().starts_with("use ")) {
                    found.push(format!("{shown}:{}: {word} ({why})", no + 1));
                }
            }
        }
    }
    found
}

#[test]
fn the_core_performs_no_io_and_stays_deterministic() {
    let found = violations("core");
    assert!(found.is_empty(), "harn-core must stay pure:\n{}", found.join("\n"));
}

#[test]
fn the_simulator_performs_no_io_and_stays_deterministic() {
    let found = violations("sim");
    assert!(found.is_empty(), "harn-sim must stay pure:\n{}", found.join("\n"));
}

#[test]
fn the_scan_catches_planted_violations_in_every_form() {
    let planted = [
        ("use std::collections::HashMap;\n", "HashMap"),
        ("use std::{fs, collections::BTreeMap};\n", "use std::fs"),
        ("use std::time::{Instant};\n", "use std::time::Instant"),
        ("use std::{\n    process::Command,\n    io,\n};\n", "use std::process::Command"),
        ("use ::std::env;\n", "use std::env"),
        ("fn f() { let _ = ::std::env::var(\"X\"); }\n", "std::env"),
        ("fn f() { println!(\"hi\"); }\n", "println!"),
        ("use std as s;\n", "use std as"),
    ];
    for (source, expected) in planted {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("lib.rs"), format!("// std::fs in a comment is fine\n{source}"))
            .unwrap();
        let found = violations(&relative(dir.path()));
        assert!(found.iter().any(|f| f.contains(expected)), "{source:?} was not caught: {found:?}");
    }
}

#[test]
fn use_trees_expand_to_every_path() {
    assert_eq!(
        expand("std::{fs,time::{Instant,Duration}}"),
        ["std::fs", "std::time::Instant", "std::time::Duration"]
    );
    assert_eq!(expand("crate::x"), ["crate::x"]);
}

/// `path` relative to the manifest directory, so `violations` can scan it.
fn relative(path: &Path) -> String {
    let depth = Path::new(env!("CARGO_MANIFEST_DIR")).components().count();
    let mut rel = PathBuf::new();
    for _ in 0..depth {
        rel.push("..");
    }
    rel.push(path.strip_prefix("/").unwrap_or(path));
    rel.to_string_lossy().into_owned()
}
