//! `harn work land ID`: lands an accepted item's worktree branch on its base branch, only
//! when the branch holds exactly what the accepted proof attests. The decision is the core's
//! (`work::landing`); this reads git, makes the commit, moves the branch and records
//! `work.landed`.
//!
//! A land cut short after it moved the branch is found again by the next one (the attested
//! commit in the branch's history, or a commit whose trailers name the accepted proof), which
//! records it without landing twice.

use super::worktree::{
    accepted_attestation, command, commit_digest, git, git_text, remove_worktree, run_text,
};
use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use crate::os::store::Store;
use clap::Args;
use harn_core::ids::Id;
use harn_core::work::events::{EventKind, LandMethod};
use harn_core::work::landing::driver::{self, Landed};
use harn_core::work::landing::{self, AcceptedProof, Observed};
use harn_core::work::workspace::Attestation;
use serde_json::json;
use std::path::{Path, PathBuf};

/// `harn work land`
#[derive(Debug, Args)]
pub struct LandArgs {
    /// The work id (or a unique prefix of it).
    pub(crate) id: String,
    /// The branch to land on (default: the branch the item's worktree was made from).
    #[arg(long)]
    into: Option<String>,
    /// One new commit with the item's changes instead of a merge or a fast-forward.
    #[arg(long)]
    squash: bool,
    /// Delete the item's branch too once landed (its worktree is removed either way).
    #[arg(long)]
    delete_branch: bool,
    /// Confirms, after reviewing them, the changes its runs made to what git or harn would
    /// execute (a worktree's `config.worktree`, a nested repository), which otherwise refuse
    /// the land.
    #[arg(long)]
    accept_guarded_change: bool,
    #[command(flatten)]
    signed: crate::verb::Signed,
}

/// How to land.
#[derive(Debug, Default)]
pub struct LandOptions {
    /// The branch to land on; `None`: the one the worktree was made from.
    pub into: Option<String>,
    /// One new commit instead of a merge or a fast-forward.
    pub squash: bool,
    /// Delete the item's branch once landed.
    pub delete_branch: bool,
    /// A person confirms the guarded changes the item's runs made (never automation).
    pub accept_guarded_change: bool,
}

/// Why an item did not land; nothing was changed.
pub enum NotLanded {
    /// The command was given wrong (exit 2).
    Usage(String),
    /// Refused as things stand (exit 1).
    Refused(String),
}

/// A land done (or found done before).
pub struct Done {
    id: Id,
    into: String,
    commit: String,
    how: &'static str,
    moved: bool,
    cleaned: Cleaned,
}

impl Done {
    /// One line: where, as which commit, how.
    pub fn words(&self) -> String {
        format!("landed on {} as {} ({})", self.into, self.commit, self.how)
    }
}

/// Lands `a.id`; exit 0 when it landed (or had already), 1 when refused with nothing changed.
pub fn land(store: &mut Store, a: LandArgs) -> Exit {
    let id = match Id::new(&a.id) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{:?}: {e}", a.id)),
    };
    let options = LandOptions {
        into: a.into,
        squash: a.squash,
        delete_branch: a.delete_branch,
        accept_guarded_change: a.accept_guarded_change,
    };
    let actor = crate::verb::actor(a.signed.actor);
    match land_item(store, &id, &options, &actor, a.signed.reason) {
        Ok(Some(done)) => said(a.signed.json, &done),
        Ok(None) => fail(
            EXIT_FAILED,
            format!("{id} was not made in a worktree (--isolation worktree): there is no branch to land"),
        ),
        Err(NotLanded::Usage(why)) => fail(EXIT_USAGE, why),
        Err(NotLanded::Refused(why)) => fail(EXIT_FAILED, why),
    }
}

/// Lands item `id` as [`LandOptions`] say, recording `work.landed` as `actor`. `Ok(None)`:
/// accepted work made outside a worktree, with nothing to land. The order and the decision
/// are the core's (`work::landing::driver`); this is its host.
pub fn land_item(
    store: &mut Store,
    id: &Id,
    options: &LandOptions,
    actor: &str,
    reason: Option<String>,
) -> Result<Option<Done>, NotLanded> {
    let refused = |e: String| NotLanded::Refused(e);
    // What its runs changed of what git or harn executes lands only once a person saw it.
    let guarded = crate::os::guarded::unaccepted_of(store, id.as_str())
        .map_err(|e| refused(e.to_string()))?;
    if !guarded.is_empty() {
        if !options.accept_guarded_change {
            return Err(refused(crate::os::guarded::refusal(&guarded, id.as_str(), "landed")));
        }
        crate::os::guarded::accept_changes(store, &guarded, actor)
            .map_err(|e| refused(e.to_string()))?;
    }
    let repo = store.root().to_path_buf();
    let mut host = CliLand { store, repo: repo.clone(), lock: None, id: None, actor, reason };
    let landed = driver::land(&mut host, id, options.into.as_deref(), options.squash);
    let (into, commit, how, moved, t) = match landed {
        Ok(Landed::Nothing) => return Ok(None),
        Ok(Landed::Before { into, commit, attested }) => {
            (into, commit, "already landed", false, attested)
        }
        Ok(Landed::Now { into, commit, method, attested }) => {
            (into, commit, method.as_str(), true, attested)
        }
        Err(driver::NotLanded::Refused(r @ landing::Refused::NoTargetNamed { .. })) => {
            return Err(NotLanded::Usage(r.to_string()))
        }
        Err(driver::NotLanded::Refused(r)) => return Err(refused(r.to_string())),
        Err(driver::NotLanded::Failed(e)) => return Err(refused(e)),
        Err(driver::NotLanded::Unrecorded { into, commit, error }) => {
            return Err(refused(format!(
                "landed {id} on {into} as {commit}, but its record could not be written \
                 ({error}); harn work land {id} records it"
            )))
        }
    };
    let cleaned = clean(&repo, &t, options.delete_branch);
    Ok(Some(Done { id: id.clone(), into, commit, how, moved, cleaned }))
}

/// This process as the landing driver's host: the item's records under its history lock,
/// and git.
struct CliLand<'a> {
    store: &'a mut Store,
    repo: PathBuf,
    lock: Option<crate::os::store::EventsLock>,
    /// The item, once read.
    id: Option<Id>,
    actor: &'a str,
    reason: Option<String>,
}

impl driver::LandingHost for CliLand<'_> {
    type Error = String;

    fn read(&mut self, id: &Id) -> Result<driver::Read, String> {
        // The history lock is held from the read to the record: two lands of one item queue.
        let (lock, item) = self.store.lock_and_read(id).map_err(|e| e.to_string())?;
        self.lock = Some(lock);
        self.id = Some(id.clone());
        let title = item.intent.title.clone();
        Ok(driver::Read { state: item.projection.state, events: item.events, title })
    }

    fn attestation(&mut self, accepted: &AcceptedProof) -> Result<Option<Attestation>, String> {
        accepted_attestation(self.store, accepted)
    }

    /// What git shows now about the item's branch and the target.
    fn observe(
        &mut self,
        id: &Id,
        attested: &Attestation,
        accepted: &AcceptedProof,
        into: &str,
    ) -> Result<Observed, String> {
        let (repo, t, acc) = (self.repo.as_path(), attested, accepted);
        let head = |r: &str| {
            let wanted = format!("refs/heads/{r}^{{commit}}");
            git(repo, None, &["rev-parse", "--verify", "--quiet", &wanted])
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        };
        let branch_head = head(&t.workspace.branch);
        let diff_sha256 = match &branch_head {
            Some(h) => Some(commit_digest(&t.workspace, repo, h)?),
            None => None,
        };
        let target_head = head(into);
        let (mut already_in_target, mut target_behind, mut base_missing) = (None, false, None);
        if let Some(target) = &target_head {
            let ancestor = |a: &str, b: &str| {
                git(repo, None, &["merge-base", "--is-ancestor", a, b])
                    .is_ok_and(|o| o.status.success())
            };
            if let Some(found) = landing_commit(repo, target, id, &acc.proof_sha256, t)? {
                already_in_target = Some(found);
            } else if ancestor(&t.final_commit, target) {
                already_in_target = Some(target.clone());
            }
            target_behind = ancestor(target, &t.final_commit);
            // What the branch brings besides its own work must be there already: the commit it
            // was made from, and each prerequisite merged into it.
            let from = t.workspace.branched_from.as_deref().unwrap_or(&t.workspace.base_commit);
            let mut missing: Vec<String> = Vec::new();
            if !ancestor(from, target) {
                missing.push(format!("the commit {from} the branch was made from"));
            }
            for p in t.workspace.prerequisites.iter().filter(|p| !p.already_in_base) {
                if !ancestor(&p.commit, target) {
                    missing.push(format!("{}'s accepted work (land {} first)", p.id, p.id));
                }
            }
            base_missing = (!missing.is_empty()).then(|| missing.join("; "));
        }
        // What the reviewed work changes, from git's objects (no attribute, filter or driver
        // is read for it).
        let changed =
            super::worktree::candidate(repo, None, &t.workspace.base_commit, &t.final_commit)?
                .0
                .into_iter()
                .map(|c| c.path)
                .collect();
        Ok(Observed {
            branch_head,
            diff_sha256,
            target_head,
            already_in_target,
            target_behind,
            base_missing,
            changed,
        })
    }

    fn move_branch(
        &mut self,
        plan: &driver::Move<'_>,
    ) -> Result<Result<String, landing::Refused>, String> {
        let (into, t) = (plan.into, plan.attested);
        Ok(
            match move_branch(
                &self.repo,
                into,
                plan.from,
                plan.commit,
                plan.method,
                plan.message,
                t,
            ) {
                Ok(landed) => Ok(landed),
                Err(MoveRefused::Conflict(files)) => {
                    let landed_by = match &self.id {
                        Some(id) => touched_by(self.store, &self.repo, id, &files),
                        None => Vec::new(),
                    };
                    let branch = t.workspace.branch.clone();
                    Err(landing::Refused::Conflict {
                        branch,
                        into: into.to_owned(),
                        files,
                        landed_by,
                    })
                }
                Err(MoveRefused::Other(e)) => Err(landing::Refused::NotMoved(e)),
                Err(MoveRefused::Refused(r)) => Err(r),
            },
        )
    }

    fn record(&mut self, landed: EventKind) -> Result<(), String> {
        let lock = self.lock.as_ref().expect("the item was read under its lock");
        let reason = self.reason.clone();
        self.store.append(lock, landed, self.actor, reason).map(drop).map_err(|e| e.to_string())
    }
}

fn said(json: bool, d: &Done) -> Exit {
    let c = &d.cleaned;
    if json {
        outln!(
            "{}",
            json!({ "id": d.id, "into": d.into, "commit": d.commit, "method": d.how,
                    "landed_now": d.moved, "worktree_removed": c.removed,
                    "branch_deleted": c.branch_deleted, "kept_because": c.kept_because })
        );
    } else {
        outln!("{}: {}", d.id, d.words());
        match &c.kept_because {
            Some(why) => outln!("  worktree   kept: {why}"),
            None if c.removed => outln!("  worktree   removed"),
            None => {}
        }
        if c.branch_deleted {
            outln!("  branch     deleted");
        }
    }
    Ok(0)
}

/// Removes item `id`'s worktree (a cancelled item's), unless it has changes; returns a line
/// to say when it stays, or when it went.
pub fn remove_worktree_of(store: &mut Store, id: &Id) -> Option<String> {
    let item = store.read(id, &mut Default::default()).ok()?;
    let ws = super::attempt::recorded_workspace(store, &item)?;
    if !Path::new(&ws.path).is_dir() {
        return None;
    }
    let repo = store.root().to_path_buf();
    if ws.own {
        return Some(match super::repository::remove(&repo, &ws) {
            Ok(()) => format!("removed its repository {} (its work is kept)", ws.path),
            Err(e) => format!("kept its repository {}: {e}", ws.path),
        });
    }
    Some(match remove_worktree(&repo, &ws.path, &ws.git_dir) {
        Ok(()) => format!("removed the worktree {} (its branch {} is kept)", ws.path, ws.branch),
        Err(e) => {
            format!("kept the worktree {}: {e} (harn work prune --force removes it)", ws.path)
        }
    })
}

/// What became of a landed item's worktree and branch.
#[derive(Default)]
struct Cleaned {
    removed: bool,
    branch_deleted: bool,
    kept_because: Option<String>,
}

/// Removes a landed item's worktree (git's record of it too), never one with changes; and
/// its branch when asked. The land stands whatever this finds.
fn clean(repo: &Path, t: &Attestation, delete_branch: bool) -> Cleaned {
    let mut cleaned = Cleaned::default();
    let path = &t.workspace.path;
    if t.workspace.own {
        let there = Path::new(path).exists();
        match super::repository::remove(repo, &t.workspace) {
            Ok(()) => cleaned.removed = there,
            Err(e) => cleaned.kept_because = Some(format!("{path}: {e}")),
        }
    } else if Path::new(path).exists() {
        match remove_worktree(repo, path, &t.workspace.git_dir) {
            Ok(()) => cleaned.removed = true,
            Err(e) => cleaned.kept_because = Some(format!("{path}: {e}")),
        }
    }
    let _ = git_text(repo, None, &["worktree", "prune"]);
    if delete_branch && cleaned.kept_because.is_none() {
        cleaned.branch_deleted =
            git_text(repo, None, &["branch", "-D", &t.workspace.branch]).is_ok();
    }
    cleaned
}

/// A commit of `target` an earlier land of this acceptance made. Trailers naming this item
/// and exactly this proof only point at a candidate (anyone may write them, a run of another
/// item too); it counts when git shows it is this land's: a merge with the attested commit
/// as a parent, or a squash whose tree differs from the recorded base by exactly the
/// attested diff. (The attested commit itself in `target` is found by ancestry.)
fn landing_commit(
    repo: &Path,
    target: &str,
    id: &Id,
    proof: &str,
    t: &Attestation,
) -> Result<Option<String>, String> {
    let trailer = format!("Harn-Proof: {proof}");
    let format = "--format=%H%x00%P%x00%(trailers:key=Harn-Work-Item,valueonly,separator=%x2C)\
                  %x00%(trailers:key=Harn-Proof,valueonly,separator=%x2C)";
    let args = ["log", format, "--fixed-strings", "--grep", &trailer, target];
    let listed = git_text(repo, None, &args)?;
    for line in listed.lines() {
        let mut fields = line.split('\0');
        let (Some(commit), Some(parents), Some(item), Some(proofs)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if item.trim() != id.as_str() || proofs.trim() != proof {
            continue;
        }
        let parents: Vec<&str> = parents.split_whitespace().collect();
        let merged = parents.len() > 1 && parents.contains(&t.final_commit.as_str());
        if merged || commit_digest(&t.workspace, repo, commit)? == t.diff_sha256 {
            return Ok(Some(commit.to_owned()));
        }
    }
    Ok(None)
}

/// Why git did not move a branch.
enum MoveRefused {
    /// The merge conflicts in these files.
    Conflict(Vec<String>),
    /// Anything else, in words.
    Other(String),
    /// A refusal the core names.
    Refused(landing::Refused),
}

impl From<String> for MoveRefused {
    fn from(s: String) -> MoveRefused {
        MoveRefused::Other(s)
    }
}

/// The other items whose landed work changed any of `files`.
fn touched_by(store: &mut Store, repo: &Path, this: &Id, files: &[String]) -> Vec<String> {
    let Ok(listing) = store.ids() else { return Vec::new() };
    let mut found = Vec::new();
    for id in listing.ids.into_iter().filter(|i| i != this) {
        let Ok(events) = store.events(&id) else { continue };
        let landed = events.iter().rev().find_map(|e| match &e.kind {
            EventKind::Landed { run_id, proof_sha256, .. } => {
                Some(AcceptedProof { run_id: run_id.clone(), proof_sha256: proof_sha256.clone() })
            }
            _ => None,
        });
        let Some(Ok(Some(t))) = landed.map(|acc| accepted_attestation(store, &acc)) else {
            continue;
        };
        let args =
            ["diff", "--name-only", t.workspace.base_commit.as_str(), t.final_commit.as_str()];
        let Ok(changed) = git_text(repo, None, &args) else { continue };
        if changed.lines().any(|f| files.iter().any(|c| c == f)) {
            found.push(id.to_string());
        }
    }
    found
}

/// Makes the landing commit (none for a fast-forward) and moves `into` from `from` to it: in
/// the worktree that has `into` checked out when one does (refused when it has changes), else
/// by a compare-and-swap of the ref. A conflict changes nothing and names the files.
fn move_branch(
    repo: &Path,
    into: &str,
    from: &str,
    commit: &str,
    method: LandMethod,
    message: &str,
    t: &Attestation,
) -> Result<String, MoveRefused> {
    let checkout = checked_out(repo, into)?;
    if let Some(dir) = &checkout {
        // Only the repository's own checkout is updated: a linked worktree may be a run's,
        // whose `HEAD`, config and attributes the run wrote, and git there would obey them.
        if !is_main_checkout(repo, dir)? {
            return Err(MoveRefused::Refused(landing::Refused::CheckedOutElsewhere {
                into: into.to_owned(),
                worktree: dir.display().to_string(),
            }));
        }
        let dirty = git_text(dir, None, &["diff", "--name-only", "HEAD"])?;
        if !dirty.is_empty() {
            let files: Vec<&str> = dirty.lines().collect();
            return Err(MoveRefused::Other(format!(
                "{into} is checked out in {} with changes not committed: {}; nothing was changed",
                dir.display(),
                files.join(", ")
            )));
        }
    }
    let landed = match method {
        LandMethod::FastForward => commit.to_owned(),
        LandMethod::Merge | LandMethod::Squash => {
            let tree = merged_tree(repo, from, commit)?;
            let mut args = vec!["commit-tree", tree.as_str(), "-p", from];
            if method == LandMethod::Merge {
                args.extend(["-p", commit]);
            }
            args.extend(["-m", message]);
            git_text(repo, None, &args)?
        }
        LandMethod::Found => unreachable!("nothing is made for a land found already done"),
    };
    match checkout {
        Some(dir) => {
            // git writes over an ignored file (and `.harnery/` is ignored) when a commit adds
            // it: nothing the person has there that git does not track is overwritten.
            let in_the_way = in_the_way(repo, &dir, from, &landed)?;
            if !in_the_way.is_empty() {
                return Err(MoveRefused::Refused(landing::Refused::WouldOverwrite {
                    into: into.to_owned(),
                    checkout: dir.display().to_string(),
                    paths: in_the_way,
                }));
            }
            git_text(&dir, None, &["merge", "--ff-only", "--no-edit", &landed]).map_err(|e| {
                format!(
                    "moving {into} in {}: {e}; look at that checkout before landing again",
                    dir.display()
                )
            })?;
        }
        None => {
            let reason = format!("harn work land: {}", t.workspace.branch);
            let target = format!("refs/heads/{into}");
            git_text(repo, None, &["update-ref", "-m", &reason, &target, &landed, from])
                .map_err(|e| format!("{into} moved while landing ({e}); nothing was changed"))?;
        }
    }
    Ok(landed)
}

/// The tree of `from` and `commit` merged, or the conflicted files.
fn merged_tree(repo: &Path, from: &str, commit: &str) -> Result<String, MoveRefused> {
    let args = ["merge-tree", "--write-tree", "--name-only", "--no-messages", from, commit];
    let out = git(repo, None, &args)?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let tree = lines.next().unwrap_or("").trim().to_owned();
    match out.status.code() {
        Some(0) if !tree.is_empty() => Ok(tree),
        Some(1) => {
            Err(MoveRefused::Conflict(lines.filter(|l| !l.is_empty()).map(str::to_owned).collect()))
        }
        _ => Err(MoveRefused::Other(format!(
            "git merge-tree failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// The paths `landed` adds to `from` that exist in the checkout at `dir` anyway (untracked or
/// ignored files, or anything else in the way).
fn in_the_way(repo: &Path, dir: &Path, from: &str, landed: &str) -> Result<Vec<String>, String> {
    let (changed, _) = super::worktree::candidate(repo, None, from, landed)?;
    Ok(changed
        .into_iter()
        .filter(|c| c.old_mode == 0 && c.new_mode != 0)
        .filter(|c| dir.join(&c.path).symlink_metadata().is_ok())
        .map(|c| c.path)
        .collect())
}

/// True when `dir` is the repository's own checkout (its main worktree, listed first by git),
/// not a linked worktree.
fn is_main_checkout(repo: &Path, dir: &Path) -> Result<bool, String> {
    let list = run_text(command(repo, None, &["worktree", "list", "--porcelain"])?)?;
    let main = list.lines().next().and_then(|l| l.strip_prefix("worktree ")).map(PathBuf::from);
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    Ok(main.is_some_and(|m| same(&m, dir)))
}

/// The worktree that has `branch` checked out, if one does.
fn checked_out(repo: &Path, branch: &str) -> Result<Option<PathBuf>, String> {
    let list = run_text(command(repo, None, &["worktree", "list", "--porcelain"])?)?;
    let wanted = format!("branch refs/heads/{branch}");
    let mut current = None;
    for line in list.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            current = Some(PathBuf::from(path));
        } else if line == wanted {
            return Ok(current);
        }
    }
    Ok(None)
}
