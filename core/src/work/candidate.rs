//! What a candidate's change (the paths an attempt's commits change from their base) holds
//! that harn must not take in as plain data: the records of a root (`.harnery/`, refused
//! outright, whoever asks) and what git or harn would later execute or obey (`harness.toml`,
//! attributes naming a filter, diff or merge driver, submodules), held until a person
//! confirms it. Read from git's objects, never from a working tree a run touched.

use serde::{Deserialize, Serialize};

/// The mode git gives a gitlink (a commit of another repository, a submodule's entry).
pub const GITLINK: u32 = 0o160000;

/// The name of the directory holding a root's records.
const RECORDS: &str = ".harnery";

/// One path a candidate changes, as `git diff-tree -r -z --raw` names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedPath {
    /// The path, relative to the repository's top.
    pub path: String,
    /// Its mode before (0: it did not exist).
    pub old_mode: u32,
    /// Its mode after (0: it is gone).
    pub new_mode: u32,
    /// Its object after (all zeros when it is gone).
    pub new_object: String,
}

/// Why a changed path waits for a person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Guarded {
    /// The harness daemon's configuration: the daemon runs what it names.
    HarnessConfig,
    /// Attributes that pick a filter, diff or merge driver (each `key=driver` named), or
    /// attributes whose content could not be read to tell.
    Attributes {
        /// The `filter=`, `diff=` and `merge=` settings found.
        drivers: Vec<String>,
    },
    /// The submodules' list: a checkout may fetch and run what it names.
    Submodules,
    /// A gitlink: a commit of another repository.
    Gitlink,
}

impl std::fmt::Display for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Guarded::HarnessConfig => f.write_str("the harness daemon's configuration"),
            Guarded::Attributes { drivers } if drivers.is_empty() => {
                f.write_str("attributes that could not be read")
            }
            Guarded::Attributes { drivers } => {
                write!(f, "attributes that pick a driver ({})", drivers.join(", "))
            }
            Guarded::Submodules => f.write_str("the list of submodules"),
            Guarded::Gitlink => f.write_str("a gitlink (another repository's commit)"),
        }
    }
}

/// The paths of `changed` below a root's records (any component named `.harnery`): a
/// candidate holding one never lands, whoever asks.
pub fn records_touched<'a>(changed: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    changed.into_iter().filter(|p| p.split('/').any(|c| c == RECORDS)).map(str::to_owned).collect()
}

/// The name of a path's last component.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// True when `path` is a `.gitattributes` file whose content a caller should read for
/// [`guarded`].
pub fn is_attributes(path: &str) -> bool {
    file_name(path) == ".gitattributes"
}

/// What of `changed` waits for a person, and why. `attributes` gives the new text of a
/// `.gitattributes` path ([`is_attributes`]); `None` (unreadable, too large) counts as a
/// driver. A removed path waits for nothing: what is gone runs nothing.
pub fn guarded(
    changed: &[ChangedPath],
    attributes: impl Fn(&str) -> Option<String>,
) -> Vec<(String, Guarded)> {
    let mut found = Vec::new();
    for c in changed.iter().filter(|c| c.new_mode != 0) {
        let why = if c.new_mode == GITLINK {
            Some(Guarded::Gitlink)
        } else if file_name(&c.path) == "harness.toml" {
            Some(Guarded::HarnessConfig)
        } else if c.path == ".gitmodules" {
            Some(Guarded::Submodules)
        } else if is_attributes(&c.path) {
            match attributes(&c.path) {
                Some(text) => {
                    let drivers = drivers(&text);
                    (!drivers.is_empty()).then_some(Guarded::Attributes { drivers })
                }
                None => Some(Guarded::Attributes { drivers: Vec::new() }),
            }
        } else {
            None
        };
        if let Some(why) = why {
            found.push((c.path.clone(), why));
        }
    }
    found
}

/// The `filter=`, `diff=` and `merge=` settings of attributes text (set to a driver's name;
/// `-diff`, `diff` alone and `!merge` name none), each once, in order.
pub fn drivers(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        // The pattern first (possibly quoted), then attributes separated by blanks.
        let rest = match line.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').map(|(_, r)| r).unwrap_or(""),
            None => line.split_once(char::is_whitespace).map(|(_, r)| r).unwrap_or(""),
        };
        for attr in rest.split_whitespace() {
            let Some((key, value)) = attr.split_once('=') else { continue };
            if matches!(key, "filter" | "diff" | "merge") && !value.is_empty() {
                let setting = format!("{key}={value}");
                if !found.contains(&setting) {
                    found.push(setting);
                }
            }
        }
    }
    found
}

/// Why `git diff-tree -r -z --raw` output did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawError {
    /// The byte offset of the record.
    pub at: usize,
    /// Why.
    pub why: &'static str,
}

impl std::fmt::Display for RawError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "git diff-tree output at byte {}: {}", self.at, self.why)
    }
}

/// Parses `git diff-tree -r -z --raw --no-renames` output: `:OLD NEW OLDOID NEWOID STATUS`,
/// NUL, the path, NUL; records one after another.
pub fn parse_raw(bytes: &[u8]) -> Result<Vec<ChangedPath>, RawError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let head_end = rest.iter().position(|b| *b == 0).ok_or(RawError { at, why: "no NUL" })?;
        let head =
            std::str::from_utf8(&rest[..head_end]).map_err(|_| RawError { at, why: "not text" })?;
        let path_start = head_end + 1;
        let path_len = rest[path_start..]
            .iter()
            .position(|b| *b == 0)
            .ok_or(RawError { at, why: "no NUL after the path" })?;
        let path = std::str::from_utf8(&rest[path_start..path_start + path_len])
            .map_err(|_| RawError { at, why: "a path that is not UTF-8" })?;
        let fields: Vec<&str> =
            head.strip_prefix(':').ok_or(RawError { at, why: "no ':'" })?.split(' ').collect();
        let [old, new, _old_oid, new_oid, _status] = fields[..] else {
            return Err(RawError { at, why: "not five fields" });
        };
        let mode = |m: &str| u32::from_str_radix(m, 8).map_err(|_| RawError { at, why: "a mode" });
        if path.is_empty() {
            return Err(RawError { at, why: "an empty path" });
        }
        out.push(ChangedPath {
            path: path.to_owned(),
            old_mode: mode(old)?,
            new_mode: mode(new)?,
            new_object: new_oid.to_owned(),
        });
        at += path_start + path_len + 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(path: &str, old: u32, new: u32) -> ChangedPath {
        ChangedPath { path: path.into(), old_mode: old, new_mode: new, new_object: "b".repeat(40) }
    }

    #[test]
    fn a_records_directory_anywhere_is_touched_and_a_look_alike_is_not() {
        let paths = [".harnery/config.json", "sub/.harnery/x", "harnery/x", ".harnery.md", "a"];
        assert_eq!(records_touched(paths), vec![".harnery/config.json", "sub/.harnery/x"]);
        assert_eq!(records_touched([".harnery"]), vec![".harnery"]);
    }

    #[test]
    fn drivers_are_named_and_unset_or_bare_attributes_are_not() {
        let text = "# *.c filter=no\n* -diff\n*.txt filter=evil text\n\"a b\" diff=x merge=y\n\
                    *.md diff !merge\n*.txt filter=evil\n";
        assert_eq!(drivers(text), vec!["filter=evil", "diff=x", "merge=y"]);
        assert!(drivers("* -diff -text\n").is_empty());
    }

    #[test]
    fn harness_config_submodules_gitlinks_and_driving_attributes_wait_for_a_person() {
        let all = [
            changed("harness.toml", 0, 0o100644),
            changed("sub/harness.toml", 0o100644, 0o100644),
            changed(".gitmodules", 0, 0o100644),
            changed("vendor/lib", 0, GITLINK),
            changed(".gitattributes", 0, 0o100644),
            changed("docs/.gitattributes", 0, 0o100644),
            changed("gone/.gitattributes", 0o100644, 0),
            changed("x/.gitattributes", 0, 0o100644),
            changed("NOTES.md", 0, 0o100644),
        ];
        let attributes = |p: &str| match p {
            ".gitattributes" => Some("* -diff\n".to_owned()),
            "docs/.gitattributes" => Some("*.md filter=lfs\n".to_owned()),
            _ => None,
        };
        let found = guarded(&all, attributes);
        let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "harness.toml",
                "sub/harness.toml",
                ".gitmodules",
                "vendor/lib",
                "docs/.gitattributes",
                "x/.gitattributes"
            ]
        );
        assert_eq!(found[4].1, Guarded::Attributes { drivers: vec!["filter=lfs".into()] });
        assert_eq!(found[5].1, Guarded::Attributes { drivers: vec![] });
    }

    #[test]
    fn raw_records_parse_and_garbage_is_refused_with_its_offset() {
        let z = "0".repeat(40);
        let b = "b".repeat(40);
        let raw = format!(
            ":000000 100644 {z} {b} A\0a b.txt\0:100644 000000 {b} {z} D\0.harnery/x\0\
             :000000 160000 {z} {b} A\0lib\0"
        );
        let parsed = parse_raw(raw.as_bytes()).unwrap();
        assert_eq!(parsed.len(), 3);
        assert_eq!(
            parsed[0],
            ChangedPath {
                path: "a b.txt".into(),
                old_mode: 0,
                new_mode: 0o100644,
                new_object: b.clone()
            }
        );
        assert_eq!(parsed[1].new_mode, 0);
        assert_eq!(parsed[2].new_mode, GITLINK);
        assert!(parse_raw(b"").unwrap().is_empty());
        assert_eq!(parse_raw(b":1 2 3 4\0p\0").unwrap_err().why, "not five fields");
        let second = format!(":000000 100644 {z} {b} A\0a\0junk");
        assert_eq!(parse_raw(second.as_bytes()).unwrap_err().at, 2 + 14 + 80 + 3 + 2);
    }
}
