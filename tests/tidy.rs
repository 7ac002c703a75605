//! Tidiness the compiler does not check: every Rust source of the workspace opens with a
//! `//!` line saying what it owns, so the next engineer learns a module's job in one line;
//! and no two public types of the core share a name.

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

/// The public types `text` defines (`pub struct|enum|trait|type NAME`), and the second
/// names it gives types (`pub type A = B;` of one named type, `pub use X as Y`).
fn public_types(text: &str) -> (Vec<String>, Vec<String>) {
    let (mut defined, mut aliases) = (Vec::new(), Vec::new());
    for line in text.lines().map(str::trim_start) {
        for kind in ["pub struct ", "pub enum ", "pub trait ", "pub type "] {
            let Some(rest) = line.strip_prefix(kind) else { continue };
            let name: String =
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if kind == "pub type " {
                let target = rest.split_once('=').map(|(_, t)| t.trim().trim_end_matches(';'));
                let one_name = target.is_some_and(|t| {
                    t.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                        && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
                if one_name {
                    aliases.push(format!("{name} = {}", target.unwrap_or_default()));
                }
            }
            defined.push(name);
        }
        if line.starts_with("pub use ") && line.contains(" as ") {
            aliases.push(line.to_owned());
        }
    }
    (defined, aliases)
}

/// One word, one thing (decision record 0009): no two public types of the core share a name,
/// and no type has a second one.
#[test]
fn no_two_public_types_of_the_core_share_a_name() {
    let mut files = Vec::new();
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("core/src"), &mut files);
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut aliases = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let (defined, second) = public_types(&text);
        let shown = f.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().display().to_string();
        for name in defined {
            seen.entry(name).or_default().push(shown.clone());
        }
        aliases.extend(second.into_iter().map(|a| format!("{shown}: {a}")));
    }
    let shared: Vec<String> = seen
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(name, at)| format!("{name} in {}", at.join(", ")))
        .collect();
    assert!(shared.is_empty(), "public types of one name:\n{}", shared.join("\n"));
    assert!(aliases.is_empty(), "types with a second name:\n{}", aliases.join("\n"));
}

#[test]
fn the_name_check_sees_a_second_definition_and_an_alias() {
    let (defined, aliases) = public_types(
        "pub struct A {\n}\n  pub enum B { X }\npub type C = A;\npub type M = Map<K, V>;\npub use x::A as D;\n",
    );
    assert_eq!(defined, ["A", "B", "C", "M"]);
    assert_eq!(aliases, ["C = A", "pub use x::A as D;"]);
}
