//! What a run must not change, found on disk for the core's `containment::guard::guard`: the
//! workspace's git layout, the root's `harness.toml` and the programs it names inside the
//! root, the run's own workflow; and the digests of every watched path, taken before and
//! after a segment, so a change a machine could not prevent is still reported.

use crate::os::store::{Store, StoreError};
use harn_core::error::RecordError;
use harn_core::layout::GUARDED;
use harn_core::work::containment::guard::{self, Digested, GitLayout, Guard, GuardRecord};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The lock every writer of [`GUARDED`] holds while it appends.
const GUARDED_LOCK: &str = ".harnery/guarded.lock";

/// Every record of `.harnery/guarded.jsonl`; a damaged line names the file and line.
pub fn records(store: &mut Store) -> Result<Vec<GuardRecord>, StoreError> {
    let Some(bytes) = store.read_bytes(GUARDED)? else { return Ok(Vec::new()) };
    let shown = store.root().join(GUARDED).display().to_string();
    let read =
        harn_core::journal::parse_as::<GuardRecord>(&shown, &bytes).map_err(RecordError::from)?;
    Ok(read.records.into_iter().map(|r| r.body).collect())
}

/// Appends `records` (synced) under the writers' lock.
pub fn append(store: &mut Store, records: &[GuardRecord]) -> Result<(), StoreError> {
    if records.is_empty() {
        return Ok(());
    }
    let _lock = store.lock_file(GUARDED_LOCK)?;
    let mut writer = store.open_journal(GUARDED)?;
    for record in records {
        store.append_journal(&mut writer, record)?;
    }
    Ok(())
}

/// What a segment's guard saw before the run started: the watched paths' digests, and the
/// git repositories already nested in its workspace.
pub struct Before {
    /// Each watched path as it was.
    pub seen: Vec<Digested>,
    /// The workspace the run writes.
    pub workspace: PathBuf,
    /// The `.git` entries below the workspace (not its own) before the run.
    pub nested: Vec<String>,
}

/// Looks at `guard`'s watched paths, and at the repositories nested in `workspace`, whose
/// own configuration and hooks are watched from now on: a person's `git status` there runs
/// what they name.
pub fn before(guard: &Guard, workspace: &Path) -> Before {
    let nested = nested(workspace);
    let mut watched = guard.watched.clone();
    watched.extend(guard::nested_watch(&nested));
    Before { seen: look(&watched), workspace: workspace.to_owned(), nested }
}

/// Records what of `before` a run segment changed, and every repository it made below its
/// workspace; returns the changes.
pub fn record_changes(
    store: &mut Store,
    run_id: &str,
    work_id: &str,
    before: &Before,
) -> Result<Vec<GuardRecord>, StoreError> {
    let watched: Vec<String> = before.seen.iter().map(|s| s.path.clone()).collect();
    let after = look(&watched);
    let mut found = guard::changed(&before.seen, &after);
    for made in guard::new_repositories(&before.nested, &nested(&before.workspace)) {
        let after = digest(Path::new(&made));
        found.push((made, None, after));
    }
    let changes: Vec<GuardRecord> = found
        .into_iter()
        .map(|(path, before, after)| GuardRecord::Changed {
            run_id: run_id.to_owned(),
            work_id: work_id.to_owned(),
            path,
            before,
            after,
        })
        .collect();
    append(store, &changes)?;
    Ok(changes)
}

/// Most directory entries a look for nested repositories reads: a workspace larger than
/// this is looked at only in part (in name order, breadth first).
const NESTED_ENTRIES: usize = 200_000;

/// Every `.git` (a directory, or a file naming one) below `workspace` other than its own,
/// never following a link, in breadth-first name order.
pub fn nested(workspace: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut queue = std::collections::VecDeque::from([workspace.to_owned()]);
    let mut budget = NESTED_ENTRIES;
    while let Some(dir) = queue.pop_front() {
        let Ok(read) = std::fs::read_dir(&dir) else { continue };
        let mut entries: Vec<_> = read.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if budget == 0 {
                return out;
            }
            budget -= 1;
            let Ok(kind) = entry.file_type() else { continue };
            let path = entry.path();
            if entry.file_name() == ".git" {
                if dir != workspace {
                    out.push(path.display().to_string());
                }
            } else if kind.is_dir() && !(dir == workspace && entry.file_name() == ".harnery") {
                // `.harnery/` is harn's, checked by its own rules, and a run cannot write it.
                queue.push_back(path);
            }
        }
    }
    out
}

/// The guard of a run working in `workspace` of `root`, whose frozen workflow is `workflow`
/// (as the item names it); `own` when the workspace is a repository harn made for the run,
/// all of it the run's.
pub fn find(root: &Path, workspace: &Path, workflow: Option<&str>, own: bool) -> Guard {
    let mut files = vec![root.join("harness.toml").display().to_string()];
    files.extend(harness_programs(root));
    if let Some(path) = workflow {
        files.push(crate::os::root::resolve(root, path));
    }
    let layout = match own {
        true => GitLayout::Own { dot_git: workspace.join(".git").display().to_string() },
        false => git_layout(workspace),
    };
    guard::guard(&root.display().to_string(), &layout, &files)
}

/// The paths of `guard` that exist, for the binds: a path that does not exist cannot be
/// bound (a run that makes it is reported instead).
pub fn existing(paths: &[String]) -> Vec<String> {
    paths.iter().filter(|p| Path::new(p).symlink_metadata().is_ok()).cloned().collect()
}

/// The changes runs made to the harness configuration `config` of `root`, or to a program it
/// names inside the root, that no person has accepted since: the daemon neither boots nor
/// reloads while there is one, since it would run them as the person, uncontained.
pub fn unaccepted_config(root: &Path, config: &Path) -> Result<Vec<GuardRecord>, String> {
    let mut store = Store::new(root);
    let records = records(&mut store).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for path in config_paths(root, config) {
        out.extend(guard::pending(&records, &path).into_iter().cloned());
    }
    Ok(out)
}

/// Refuses, naming each change and what to type, while [`unaccepted_config`] finds one.
pub fn check_config(root: &Path, config: &Path) -> Result<(), String> {
    let pending = unaccepted_config(root, config)?;
    if pending.is_empty() {
        return Ok(());
    }
    let mut lines = Vec::new();
    for r in &pending {
        if let GuardRecord::Changed { run_id, work_id, path, .. } = r {
            lines.push(format!("{path} was changed by run {run_id} of work item {work_id}"));
        }
    }
    Err(format!(
        "{}, which may not change it; nothing was started. Review it, then accept it: \
         harn harness up --accept-config-change (or reload --accept-config-change)",
        lines.join("; ")
    ))
}

/// Records that `by` accepted the configuration and its programs as they are now; returns
/// the paths whose changes were accepted.
pub fn accept_config(root: &Path, config: &Path, by: &str) -> Result<Vec<String>, String> {
    let pending = unaccepted_config(root, config)?;
    let mut paths: Vec<String> = Vec::new();
    for r in &pending {
        if let GuardRecord::Changed { path, .. } = r {
            if !paths.contains(path) {
                paths.push(path.clone());
            }
        }
    }
    let accepted: Vec<GuardRecord> = paths
        .iter()
        .map(|p| GuardRecord::Accepted {
            path: p.clone(),
            sha256: digest(Path::new(p)),
            by: by.to_owned(),
        })
        .collect();
    append(&mut Store::new(root), &accepted).map_err(|e| e.to_string())?;
    Ok(paths)
}

/// Records what of a candidate's change waits for a person (`found`: paths relative to the
/// workspace at `workspace`, read from git's objects), each as a change run `run_id` made to
/// that file, unless a person accepted exactly what it holds now.
pub fn record_candidate(
    store: &mut Store,
    run_id: &str,
    work_id: &str,
    workspace: &Path,
    found: &[(String, harn_core::work::candidate::Guarded)],
) -> Result<Vec<GuardRecord>, StoreError> {
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let known = records(store)?;
    let mut changes = Vec::new();
    for (relative, _) in found {
        let path = workspace.join(relative).display().to_string();
        let after = digest(Path::new(&path));
        let accepted = known.iter().rev().find_map(|r| match r {
            GuardRecord::Accepted { path: p, sha256, .. } if *p == path => Some(sha256.clone()),
            GuardRecord::Changed { path: p, .. } if *p == path => Some(None),
            _ => None,
        });
        if accepted.flatten().is_some_and(|s| Some(s) == after) {
            continue;
        }
        changes.push(GuardRecord::Changed {
            run_id: run_id.to_owned(),
            work_id: work_id.to_owned(),
            path,
            before: None,
            after,
        });
    }
    append(store, &changes)?;
    Ok(changes)
}

/// The guarded changes runs of work item `work_id` made that no person has accepted since.
pub fn unaccepted_of(store: &mut Store, work_id: &str) -> Result<Vec<GuardRecord>, StoreError> {
    let records = records(store)?;
    Ok(guard::pending_of(&records, work_id).into_iter().cloned().collect())
}

/// Records that `by` accepted what each of `pending`'s paths holds now.
pub fn accept_changes(
    store: &mut Store,
    pending: &[GuardRecord],
    by: &str,
) -> Result<(), StoreError> {
    let mut accepted: Vec<GuardRecord> = Vec::new();
    for r in pending {
        if let GuardRecord::Changed { path, .. } = r {
            if !accepted
                .iter()
                .any(|a| matches!(a, GuardRecord::Accepted { path: p, .. } if p == path))
            {
                let sha256 = digest(Path::new(path));
                accepted.push(GuardRecord::Accepted {
                    path: path.clone(),
                    sha256,
                    by: by.to_owned(),
                });
            }
        }
    }
    append(store, &accepted)
}

/// Most bytes of a changed file shown in a refusal.
const SHOWN_BYTES: u64 = 2048;

/// The refusal of `verb` on `work_id` while `pending` holds changes: each change, what a
/// small text file holds now (what git or harn would run), and the command that confirms.
pub fn refusal(pending: &[GuardRecord], work_id: &str, verb: &str) -> String {
    let mut lines = Vec::new();
    for r in pending {
        let GuardRecord::Changed { run_id, path, before, .. } = r else { continue };
        let how = if before.is_none() { "made" } else { "changed" };
        lines.push(format!("run {run_id} {how} {path}, which git or harn executes or obeys"));
        if let Some(text) = shown(Path::new(path)) {
            lines.extend(text.lines().map(|l| format!("    | {l}")));
        }
    }
    format!(
        "{}\nnothing was {verb}; review each (harn run show RUN), then confirm with \
         harn work {} {work_id} --accept-guarded-change",
        lines.join("\n"),
        if verb == "landed" { "land" } else { "accept" }
    )
}

/// The start of a small regular file, as text with control characters escaped; `None` for a
/// directory, a link, a missing or a binary file.
fn shown(path: &Path) -> Option<String> {
    use std::io::Read;
    let meta = path.symlink_metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(SHOWN_BYTES).read_to_end(&mut bytes).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    Some(
        text.chars()
            .map(|c| if c.is_control() && c != '\n' && c != '\t' { '?' } else { c })
            .collect(),
    )
}

/// The configuration file and the programs it names inside the root.
fn config_paths(root: &Path, config: &Path) -> Vec<String> {
    let mut paths = vec![config.display().to_string()];
    paths.extend(programs(root, config));
    paths
}

/// How git is laid out for `workspace`: its own `.git` directory, a linked worktree's `.git`
/// file (`gitdir: …`, and that directory's `commondir`), or none.
pub fn git_layout(workspace: &Path) -> GitLayout {
    let dot = workspace.join(".git");
    let dot_git = dot.display().to_string();
    match dot.symlink_metadata() {
        Ok(m) if m.is_dir() => GitLayout::Repository { dot_git },
        Ok(m) if m.is_file() => {
            let named = read_small(&dot)
                .and_then(|t| t.trim().strip_prefix("gitdir:").map(|p| p.trim().to_owned()));
            let Some(named) = named else { return GitLayout::Repository { dot_git } };
            let git_dir = absolute(workspace, &named);
            let common = read_small(&git_dir.join("commondir"))
                .map(|c| absolute(&git_dir, c.trim()))
                .unwrap_or_else(|| git_dir.clone());
            GitLayout::Linked {
                dot_git,
                git_dir: git_dir.display().to_string(),
                common: normal(&common).display().to_string(),
            }
        }
        _ => GitLayout::Absent { dot_git },
    }
}

/// What of a linked worktree's repository a run may write so that its agent can commit (the
/// object store, the `harn/` branches and their logs, the worktree's own directory); the
/// whole git directory where the workspace is not a linked worktree.
pub fn git_writable(workspace: &Path, git_dir: &str) -> Vec<String> {
    match git_layout(workspace) {
        GitLayout::Linked { .. } => {
            let g = guard::guard("/", &git_layout(workspace), &[]);
            existing(&g.writable)
        }
        _ => vec![git_dir.to_owned()],
    }
}

/// The programs `harness.toml` runs that are files inside the root (a harness's command or
/// readiness probe named by a path): a run that rewrote one would have the daemon run it as
/// the person.
fn harness_programs(root: &Path) -> Vec<String> {
    programs(root, &root.join("harness.toml"))
}

fn programs(root: &Path, config: &Path) -> Vec<String> {
    let Some(text) = read_small(config) else { return Vec::new() };
    let Ok(doc) = toml::from_str::<toml::Table>(&text) else { return Vec::new() };
    let Some(toml::Value::Table(harnesses)) = doc.get("harness") else { return Vec::new() };
    let mut out = Vec::new();
    for h in harnesses.values() {
        let cwd = match h.get("cwd").and_then(|c| c.as_str()) {
            Some(c) => absolute(root, c),
            None => root.to_owned(),
        };
        let probe = h.get("readiness").and_then(|r| r.get("probe"));
        for argv in [h.get("command"), probe].into_iter().flatten() {
            let program = argv.as_array().and_then(|a| a.first()).and_then(|p| p.as_str());
            if let Some(program) = program.filter(|p| p.contains('/')) {
                let path = normal(&absolute(&cwd, program));
                if path.starts_with(root) && !out.contains(&path.display().to_string()) {
                    out.push(path.display().to_string());
                }
            }
        }
    }
    out
}

fn absolute(base: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    }
}

/// `path` with `.` and `..` taken out lexically.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A small text file (at most 1 MiB), or `None`.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(1 << 20).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Each watched path as it is now.
pub fn look(watched: &[String]) -> Vec<Digested> {
    watched.iter().map(|p| Digested { path: p.clone(), sha256: digest(Path::new(p)) }).collect()
}

/// Most entries and bytes a digest of one watched path reads; beyond them it digests what it
/// read and says so.
const DIGEST_ENTRIES: usize = 10_000;
const DIGEST_BYTES: u64 = 64 << 20;

/// SHA-256 over a path's kind, mode and content (a directory: every entry below it, in name
/// order, never following a link); `None` when it does not exist.
fn digest(path: &Path) -> Option<String> {
    let meta = path.symlink_metadata().ok()?;
    let mut h = Sha256::new();
    let mut budget = (DIGEST_ENTRIES, DIGEST_BYTES);
    feed(&mut h, path, &meta, &mut budget);
    Some(format!("{:x}", h.finalize()))
}

fn feed(h: &mut Sha256, path: &Path, meta: &std::fs::Metadata, budget: &mut (usize, u64)) {
    use std::os::unix::fs::PermissionsExt;
    if budget.0 == 0 || budget.1 == 0 {
        h.update(b"\0truncated");
        return;
    }
    budget.0 -= 1;
    h.update(meta.permissions().mode().to_le_bytes());
    let kind = meta.file_type();
    if kind.is_symlink() {
        h.update(b"link");
        if let Ok(target) = std::fs::read_link(path) {
            h.update(target.as_os_str().as_encoded_bytes());
        }
    } else if kind.is_dir() {
        h.update(b"dir");
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        entries.sort();
        for name in entries {
            h.update(name.as_encoded_bytes());
            h.update(b"\0");
            let child = path.join(&name);
            if let Ok(m) = child.symlink_metadata() {
                feed(h, &child, &m, budget);
            }
        }
    } else if kind.is_file() {
        h.update(b"file");
        use std::io::Read;
        if let Ok(file) = std::fs::File::open(path) {
            let mut reader = file.take(budget.1);
            let mut buf = [0u8; 64 << 10];
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                h.update(&buf[..n]);
                budget.1 = budget.1.saturating_sub(n as u64);
            }
        }
    } else {
        h.update(b"other");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_layouts_and_harness_programs_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        assert!(matches!(git_layout(r), GitLayout::Absent { .. }));
        std::fs::create_dir(r.join(".git")).unwrap();
        assert!(matches!(git_layout(r), GitLayout::Repository { .. }));
        let wt = r.join("wt");
        std::fs::create_dir_all(r.join(".git/worktrees/wt")).unwrap();
        std::fs::create_dir(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}/.git/worktrees/wt\n", r.display()))
            .unwrap();
        std::fs::write(r.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        match git_layout(&wt) {
            GitLayout::Linked { git_dir, common, .. } => {
                assert_eq!(git_dir, format!("{}/.git/worktrees/wt", r.display()));
                assert_eq!(common, format!("{}/.git", r.display()));
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(
            r.join("harness.toml"),
            "[harness.a]\ncommand = [\"./bin/w.sh\"]\n[harness.b]\ncommand = [\"sleep\"]\n\
             readiness = { probe = [\"/usr/bin/true\"] }\n[harness.c]\ncwd = \"sub\"\n\
             command = [\"../x\"]\n",
        )
        .unwrap();
        let found = harness_programs(r);
        assert_eq!(found, [format!("{}/bin/w.sh", r.display()), format!("{}/x", r.display())]);
    }

    #[test]
    fn a_digest_changes_with_any_entry_and_is_none_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path().join("hooks");
        assert_eq!(digest(&hooks), None);
        std::fs::create_dir(&hooks).unwrap();
        std::fs::write(hooks.join("pre-commit.sample"), "x").unwrap();
        let before = digest(&hooks);
        std::fs::write(hooks.join("post-checkout"), "#!/bin/sh\n").unwrap();
        assert_ne!(digest(&hooks), before);
        std::fs::remove_file(hooks.join("post-checkout")).unwrap();
        assert_eq!(digest(&hooks), before);
        std::fs::write(hooks.join("pre-commit.sample"), "y").unwrap();
        assert_ne!(digest(&hooks), before);
    }
}
