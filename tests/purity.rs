//! Architecture invariant: harn-core and harn-sim perform no IO and stay deterministic. Their
//! sources may not name filesystem, process, network, environment, thread, wall-clock or
//! OS-randomness APIs, nor hash-ordered collections.

use std::path::{Path, PathBuf};

/// Each forbidden pattern with the reason shown when it is found.
const FORBIDDEN: &[(&str, &str)] = &[
    ("std::fs", "filesystem access"),
    ("std::process", "process control"),
    ("std::net", "networking"),
    ("std::env", "the process environment"),
    ("std::thread", "threads"),
    ("std::time::Instant", "reading the monotonic clock"),
    ("std::time::SystemTime", "reading the wall clock"),
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
    ("tokio", "an async runtime"),
    ("unsafe ", "unsafe code"),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every forbidden use in `crate_dir/src`, as `file:line: pattern (reason)`; comments are
/// skipped so the rules can be explained in prose.
fn violations(crate_dir: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_dir).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no sources under {}", root.display());
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (no, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (pattern, why) in FORBIDDEN {
                if code.contains(pattern) {
                    let shown = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&file);
                    found.push(format!("{}:{}: {pattern} ({why})", shown.display(), no + 1));
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
fn the_scan_catches_a_planted_violation() {
    // The checker itself must be able to fail: scan a file that breaks the rule.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "use std::collections::HashMap;\n// std::fs in a comment is fine\n",
    )
    .unwrap();
    let rel = pathdiff(dir.path());
    let found = violations(&rel);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("HashMap"));
}

/// `path` relative to the manifest directory, so `violations` can scan it.
fn pathdiff(path: &Path) -> String {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let depth = base.components().count();
    let mut rel = PathBuf::new();
    for _ in 0..depth {
        rel.push("..");
    }
    rel.push(path.strip_prefix("/").unwrap_or(path));
    rel.to_string_lossy().into_owned()
}
