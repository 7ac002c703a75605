//! Tidiness the compiler does not check: every Rust source of the workspace opens with a
//! `//!` line saying what it owns, so the next engineer learns a module's job in one line.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "corpus" || name == "artifacts" {
            continue;
        }
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The files among `files` whose first line is not a `//!` line.
fn undocumented(files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            !text.lines().next().is_some_and(|l| l.starts_with("//!"))
        })
        .map(|f| f.display().to_string())
        .collect()
}

#[test]
fn every_module_starts_with_a_line_saying_what_it_owns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["core", "cli", "sim", "tests", "benches", "fuzz"] {
        sources(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "found the sources: {}", files.len());
    let missing = undocumented(&files);
    assert!(missing.is_empty(), "modules without a //! line: {missing:?}");
}

#[test]
fn the_check_fails_on_a_module_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good.rs"), dir.path().join("bad.rs"));
    std::fs::write(&good, "//! Owns nothing.\nfn f() {}\n").unwrap();
    std::fs::write(&bad, "use std::fs;\n//! Too late.\n").unwrap();
    assert_eq!(undocumented(&[good, bad.clone()]), [bad.display().to_string()]);
}
