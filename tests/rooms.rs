//! The rooms of every crate import one way: no two files, and no two rooms (the top-level
//! folders and files under `src/`), name each other in a circle. A path is followed to the
//! file that defines what it names, through re-exports, so a child using an item its parent
//! only re-exports from a sibling is an edge to the sibling, not to the parent. A module's
//! declarations of its children and its public surface (`mod`, `pub use`) are not imports:
//! the edges are the items a file's own code uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One crate's sources: each file's module path and code (comments and strings removed).
struct Crate {
    code: BTreeMap<Vec<String>, String>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut files = Vec::new();
        crate::purity::rust_files(src, &mut files);
        let mut code = BTreeMap::new();
        for file in files {
            let rel = file.strip_prefix(src).unwrap();
            let text = std::fs::read_to_string(&file).unwrap();
            code.insert(module_of(rel), strip(&text));
        }
        Crate { code }
    }

    fn has(&self, module: &[String]) -> bool {
        self.code.contains_key(module)
    }

    /// The module whose file defines what `path`, named in `from`, names.
    fn resolve(&self, from: &[String], path: &str, depth: u32) -> Option<Vec<String>> {
        let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        let mut module: Vec<String> = match segs.first().copied()? {
            "crate" => {
                segs.remove(0);
                Vec::new()
            }
            "self" | "super" => {
                let mut m = from.to_vec();
                while segs.first() == Some(&"super") {
                    m.pop();
                    segs.remove(0);
                }
                if segs.first() == Some(&"self") {
                    segs.remove(0);
                }
                m
            }
            first => {
                // A relative path names a child module; anything else is another crate's.
                let mut child = from.to_vec();
                child.push(first.to_owned());
                if !self.has(&child) {
                    return None;
                }
                from.to_vec()
            }
        };
        while let Some(seg) = segs.first() {
            let mut next = module.clone();
            next.push((*seg).to_owned());
            if !self.has(&next) {
                break;
            }
            module = next;
            segs.remove(0);
        }
        let item = segs.first().map(|s| s.split('@').next().unwrap_or(s));
        match item {
            Some(name) if name != "*" && depth < 8 && !self.defines(&module, name) => {
                self.reexport(&module, name, depth).or(Some(module))
            }
            _ => Some(module),
        }
    }

    fn defines(&self, module: &[String], name: &str) -> bool {
        let code = &self.code[module];
        ["fn ", "struct ", "enum ", "const ", "type ", "trait ", "static ", "macro_rules! "]
            .iter()
            .any(|kw| {
                code.match_indices(&format!("{kw}{name}")).any(|(at, _)| {
                    let end = at + kw.len() + name.len();
                    code[end..].chars().next().is_none_or(|c| !c.is_alphanumeric() && c != '_')
                })
            })
    }

    /// Where `module` re-exports `name` from, when it does.
    fn reexport(&self, module: &[String], name: &str, depth: u32) -> Option<Vec<String>> {
        for path in use_trees(&self.code[module], true) {
            let last = path.rsplit("::").next().unwrap_or("");
            let alias = last.split('@').nth(1).unwrap_or(last);
            if alias == name {
                return self.resolve(module, &path, depth + 1);
            }
            if last == "*" {
                let glob = self.resolve(module, &path, depth + 1)?;
                if self.defines(&glob, name) {
                    return Some(glob);
                }
                if let Some(found) = self.reexport(&glob, name, depth + 1) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Every edge between two different files: (from, to).
    fn edges(&self) -> BTreeSet<(Vec<String>, Vec<String>)> {
        let mut edges = BTreeSet::new();
        for (module, code) in &self.code {
            let mut paths = use_trees(code, false);
            paths.extend(inline_paths(code));
            for path in paths {
                if let Some(to) = self.resolve(module, &path, 0) {
                    if &to != module {
                        edges.insert((module.clone(), to));
                    }
                }
            }
        }
        edges
    }
}

/// The module path of a file relative to `src/`: `lib.rs` is the root, `a/mod.rs` is `a`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut segs: Vec<String> =
        rel.iter().map(|s| s.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
        segs.pop();
    }
    segs
}

/// The code without comments and string literals, so neither can name a path.
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if in_string {
                if c == '"' && prev != '\\' {
                    in_string = false;
                }
                prev = if prev == '\\' && c == '\\' { ' ' } else { c };
                continue;
            }
            if c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\'' {
                in_string = true;
                prev = ' ';
                continue;
            }
            out.push(c);
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// Every path of the `use` statements that are re-exports (`pub use`) or, without `reexports`,
/// of those that are not, aliases kept as `name@alias`.
fn use_trees(code: &str, reexports: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("use ") {
        let before = code[..at].trim_end();
        let is_pub = before.ends_with("pub") || before.ends_with(')');
        let starts_statement = before.is_empty()
            || before.ends_with(';')
            || before.ends_with('{')
            || before.ends_with('}')
            || before.ends_with(']')
            || is_pub;
        if !starts_statement || reexports != is_pub {
            continue;
        }
        let Some(end) = code[at..].find(';') else { continue };
        let tree: String = code[at + 4..at + end]
            .replace(" as ", "@")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.extend(crate::purity::expand(&tree));
    }
    out
}

/// Paths named inline: `crate::a::b(…)`, `super::c::D`.
fn inline_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        for (at, _) in code.match_indices(start) {
            if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(path);
        }
    }
    out
}

/// The circles of a graph: its strongly connected components of more than one node.
fn circles<N: Ord + Clone>(edges: &BTreeSet<(N, N)>) -> Vec<Vec<N>> {
    let mut next: BTreeMap<N, Vec<N>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a.clone()).or_default().push(b.clone());
        next.entry(b.clone()).or_default();
    }
    let nodes: Vec<N> = next.keys().cloned().collect();
    let reach = |from: &N| {
        let mut seen = BTreeSet::from([from.clone()]);
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for b in &next[&n] {
                if seen.insert(b.clone()) {
                    todo.push(b.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<N, BTreeSet<N>> = nodes.iter().map(|n| (n.clone(), reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(n) {
            continue;
        }
        let circle: Vec<N> =
            reaches[n].iter().filter(|m| reaches[*m].contains(n)).cloned().collect();
        done.extend(circle.iter().cloned());
        if circle.len() > 1 {
            out.push(circle);
        }
    }
    out
}

/// The circles of `src`, among its files and among its rooms, each as one line.
fn circles_of(src: &Path) -> Vec<String> {
    let krate = Crate::read(src);
    let files = krate.edges();
    let show = |m: &Vec<String>| if m.is_empty() { "lib".to_owned() } else { m.join("/") };
    let mut out: Vec<String> = circles(&files)
        .iter()
        .map(|c| format!("files: {}", c.iter().map(show).collect::<Vec<_>>().join(" <-> ")))
        .collect();
    let room = |m: &Vec<String>| m.first().cloned().unwrap_or_else(|| "lib".to_owned());
    let rooms: BTreeSet<(String, String)> =
        files.iter().map(|(a, b)| (room(a), room(b))).filter(|(a, b)| a != b).collect();
    out.extend(circles(&rooms).iter().map(|c| format!("rooms: {}", c.join(" <-> "))));
    out
}

fn check(krate: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(krate).join("src");
    let found = circles_of(&src);
    assert!(found.is_empty(), "{krate}/src imports in a circle:\n{}", found.join("\n"));
}

#[test]
fn the_core_imports_in_no_circle() {
    check("core");
}

#[test]
fn the_cli_imports_in_no_circle() {
    check("cli");
}

#[test]
fn the_simulator_imports_in_no_circle() {
    check("sim");
}

#[test]
fn the_check_finds_planted_circles_and_follows_reexports() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |rel: &str, text: &str| {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\n");
    write("a/mod.rs", "pub mod x;\npub mod y;\npub use y::*;\n");
    // A child naming an item its parent re-exports from a sibling is no circle…
    write("a/x.rs", "use super::Thing;\nfn f(_: Thing) {}\n");
    write("a/y.rs", "pub struct Thing;\n");
    write("b.rs", "pub fn g() {}\n// crate::a::x names nothing: a comment\n");
    assert_eq!(circles_of(src), Vec::<String>::new());
    // …but two rooms naming each other are, and so are the files.
    write("b.rs", "pub fn g() { crate::a::y::h() }\n");
    write("a/y.rs", "pub struct Thing;\npub fn h() { crate::b::g() }\n");
    assert_eq!(circles_of(src), ["files: a/y <-> b", "rooms: a <-> b"]);
}

#[test]
fn every_crate_has_the_same_subsystem_rooms() {
    for krate in ["core", "cli", "sim"] {
        for room in ["harness", "service", "goal", "work"] {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(krate).join("src").join(room);
            assert!(dir.join("mod.rs").is_file(), "{krate}/src has no room {room}/");
        }
    }
}

/// The subsystem rooms, lowest first, and the rooms below each that it may use: `os/` (and
/// the crate's top-level helpers) serve every room; the harness daemon stands alone; a goal
/// drives work, the service drives goals; the dashboard reads them all.
const LAYERS: &[(&str, &[&str])] = &[
    ("os", &[]),
    ("harness", &["os"]),
    ("work", &["os"]),
    ("goal", &["work", "os"]),
    ("notify", &["goal", "work", "os"]),
    ("service", &["notify", "goal", "work", "os"]),
    ("dash", &["service", "notify", "goal", "work", "harness", "os"]),
    ("web", &["dash", "service", "notify", "goal", "work", "harness", "os"]),
];

/// The steps of `src` against [`LAYERS`]: a subsystem room using one it may not.
fn steps_against_layers(src: &Path) -> Vec<String> {
    let krate = Crate::read(src);
    let room = |m: &Vec<String>| m.first().cloned().unwrap_or_else(|| "lib".to_owned());
    let mut out = BTreeSet::new();
    for (from, to) in krate.edges() {
        let (a, b) = (room(&from), room(&to));
        let (Some((_, below)), Some(_)) =
            (LAYERS.iter().find(|(r, _)| *r == a), LAYERS.iter().find(|(r, _)| *r == b))
        else {
            continue; // The crate's top-level files (dispatch, helpers) may use any room.
        };
        if a != b && !below.contains(&b.as_str()) {
            out.insert(format!("{} uses {}", from.join("/"), to.join("/")));
        }
    }
    out.into_iter().collect()
}

#[test]
fn the_cli_s_rooms_use_only_the_rooms_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cli/src");
    let steps = steps_against_layers(&src);
    assert!(steps.is_empty(), "cli/src steps against its layers:\n{}", steps.join("\n"));
}

/// `/proc` is read in `os/` only, so one module knows its formats. The one exception builds a
/// sandbox: between fork and exec it mounts and writes the `/proc` of a new namespace, which
/// is the child's own, not the machine's.
#[test]
fn the_cli_reads_proc_only_in_os() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cli/src");
    let mut files = Vec::new();
    crate::purity::rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        if rel.starts_with("os/") || rel == "work/confine/child.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("\"/proc") && !line.trim_start().starts_with("//") {
                found.push(format!("cli/src/{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "/proc read outside os/:\n{}", found.join("\n"));
}
