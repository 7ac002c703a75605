//! `harn work prune`: removes the item worktrees no attempt will use again (their item
//! landed or was cancelled, or no item has them), with git's own records of them. What may
//! go is the core's decision (`work::landing::prunable`); a worktree with changes stays
//! unless `--force`.

use super::worktree::{command, git_text, run_text};
use crate::exit::{fail, Exit, EXIT_FAILED};
use crate::os::store::Store;
use clap::Args;
use harn_core::ids::Id;
use harn_core::time::Duration;
use harn_core::work::landing::{self, Pruning};
use serde_json::json;
use std::path::Path;

/// `harn work prune`
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Only worktrees whose item last changed longer ago than this (`30m`, `12h`, `7d`).
    #[arg(long, value_parser = parse_span)]
    older_than: Option<Duration>,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Remove worktrees with uncommitted changes too (they are lost).
    #[arg(long)]
    force: bool,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// One item worktree and what becomes of it.
struct Found {
    path: String,
    id: String,
    /// Why it goes, or why it stays.
    verdict: Result<&'static str, String>,
    bytes: u64,
}

/// Lists every `harn/<id>` worktree of the repository, decides, and removes.
pub fn prune(store: &mut Store, a: PruneArgs) -> Exit {
    let older_than = a.older_than;
    let repo = store.root().to_path_buf();
    let list = match command(&repo, None, &["worktree", "list", "--porcelain"]).and_then(run_text) {
        Ok(list) => list,
        Err(e) => {
            return fail(EXIT_FAILED, format!("{}: not a git repository? {e}", repo.display()))
        }
    };
    let now = store.now();
    // No attempt makes or finds a worktree while this looks and removes.
    let common = ["rev-parse", "--path-format=absolute", "--git-common-dir"];
    let git_dir = match git_text(&repo, None, &common) {
        Ok(d) => d,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let mut _lock = match super::worktree::lock(&git_dir) {
        Ok(l) => Some(l),
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let mut found = Vec::new();
    // The repositories harn made for attempts, beside the repository.
    let mut own = Vec::new();
    if let Ok(top) = git_text(&repo, None, &["rev-parse", "--show-toplevel"]) {
        let dir = harn_core::work::workspace::default_root(&top);
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            // A repository's git directory (`ID.git`) goes with it.
            if path.extension().is_some_and(|e| e == "git") {
                continue;
            }
            if super::repository::is_own(&repo, &path) {
                let id = entry.file_name().to_string_lossy().into_owned();
                own.push((path.display().to_string(), id));
            }
        }
        own.sort();
    }
    for (path, id) in &own {
        // Its work is in the repository already (or brought back as it goes).
        let verdict = judge(store, path, id, older_than, now.0);
        let bytes = size(Path::new(path));
        found.push(Found { path: path.clone(), id: id.clone(), verdict, bytes });
    }
    for (path, id) in item_worktrees(&list) {
        let verdict = judge(store, &path, &id, older_than, now.0).and_then(|why| {
            match (super::worktree::changes(&repo, &path, &git_dir), a.force) {
                (Ok(false), _) | (Ok(true), true) => Ok(why),
                (Ok(true), false) => {
                    Err("it has uncommitted changes (--force removes them)".to_owned())
                }
                (Err(e), _) => Err(format!("its changes could not be read: {e}")),
            }
        });
        let bytes = size(Path::new(&path));
        found.push(Found { path, id, verdict, bytes });
    }
    let mut errors = Vec::new();
    if !a.dry_run {
        for f in found.iter_mut().filter(|f| f.verdict.is_ok()) {
            if own.iter().any(|(p, _)| *p == f.path) {
                drop(_lock.take());
                if let Err(e) = super::repository::remove_at(&repo, Path::new(&f.path), None) {
                    errors.push(format!("{}: {e}", f.path));
                    f.verdict = Err(format!("not removed: {e}"));
                }
                continue;
            }
            // Its changes were read confined above; git must not look again as the person
            // (`--force` runs nothing of the worktree's: see `worktree::remove_worktree`).
            let args = ["worktree", "remove", "--force", f.path.as_str()];
            if let Err(e) = git_text(&repo, None, &args) {
                errors.push(format!("{}: {e}", f.path));
                f.verdict = Err(format!("not removed: {e}"));
            }
        }
        let _ = git_text(&repo, None, &["worktree", "prune"]);
    }
    report(&found, a.dry_run, a.json);
    crate::exit::listed(&errors)
}

/// A span as people type it: a whole number and a unit, `s`, `m`, `h` or `d` (`90s`, `30m`,
/// `12h`, `7d`).
fn parse_span(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let unit = text.chars().last().ok_or("an empty span: give one as 30m, 12h or 7d")?;
    let secs: u64 = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return Err(format!("{text:?}: end a span with s, m, h or d (30m, 12h, 7d)")),
    };
    let n: u64 = text[..text.len() - 1]
        .parse()
        .map_err(|_| format!("{text:?}: a span is a whole number and a unit (30m, 12h, 7d)"))?;
    n.checked_mul(secs)
        .filter(|s| *s <= u64::MAX / 1_000_000_000)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?}: too long a span"))
}

/// `(path, id)` of each worktree on a `harn/<id>` branch.
fn item_worktrees(list: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut path = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(p.to_owned());
        } else if let Some(id) = line.strip_prefix("branch refs/heads/harn/") {
            if let Some(p) = path.take() {
                out.push((p, id.to_owned()));
            }
        }
    }
    out
}

/// Why `id`'s worktree at `path` may go, or why it stays. Only a worktree harn made for an
/// item (named after it, on its branch) is ever judged removable.
fn judge(
    store: &mut Store,
    path: &str,
    id: &str,
    older_than: Option<Duration>,
    now_ms: i64,
) -> Result<&'static str, String> {
    let Ok(id) = Id::new(id) else { return Err("not a work item's branch".to_owned()) };
    if Path::new(path).file_name().and_then(|n| n.to_str()) != Some(id.as_str()) {
        return Err(format!("not named after {id}: harn did not make it"));
    }
    let judged = |p: Pruning| match p {
        Pruning::Remove(why) => Ok(why),
        Pruning::Keep(why) => Err(why.to_owned()),
    };
    if !store.exists(&id) {
        return judged(landing::prunable(None, false));
    }
    let item = store.read(&id, &mut Default::default()).map_err(|e| format!("{id}: {e}"))?;
    let landed = landing::landed(&item.events);
    let why = judged(landing::prunable(Some(item.projection.state), landed))?;
    if let (Some(span), Some(last)) = (older_than, item.events.last()) {
        let age_ms = now_ms.saturating_sub(last.ts.0).max(0) as u64;
        if Duration::from_millis(age_ms) < span {
            return Err("changed more recently than --older-than".to_owned());
        }
    }
    Ok(why)
}

/// Bytes under `dir`, not following links (what removing it gives back).
pub(super) fn size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn report(found: &[Found], dry_run: bool, json: bool) {
    if json {
        let rows: Vec<_> = found
            .iter()
            .map(|f| match &f.verdict {
                Ok(why) => {
                    json!({ "path": f.path, "id": f.id, "bytes": f.bytes, "removed": !dry_run,
                                   "prunable": true, "why": why })
                }
                Err(why) => json!({ "path": f.path, "id": f.id, "bytes": f.bytes, "removed": false,
                                    "prunable": false, "why": why }),
            })
            .collect();
        outln!("{}", json!({ "dry_run": dry_run, "worktrees": rows }));
        return;
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    for f in found {
        let mib = f.bytes as f64 / (1024.0 * 1024.0);
        match &f.verdict {
            Ok(why) => outln!("{verb:<12} {} ({}, {mib:.1} MiB): {why}", f.path, f.id),
            Err(why) => outln!("{:<12} {} ({}, {mib:.1} MiB): {why}", "kept", f.path, f.id),
        }
    }
    if found.is_empty() {
        outln!("no item worktrees");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_as_people_type_them() {
        assert_eq!(parse_span("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_span("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_span(" 12h "), Ok(Duration::from_secs(12 * 3_600)));
        for bad in ["", "7", "d", "7w", "-1h", "1.5h"] {
            assert!(parse_span(bad).is_err(), "{bad:?}");
        }
    }
}
