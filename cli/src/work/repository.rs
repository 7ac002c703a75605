//! A run's repository of its own (`--isolation worktree`, and a remote run's place on the
//! coordinator): made beside the person's repository for each attempt, with its own object
//! store, config, hooks, `HEAD` and refs, borrowing the person's objects read-only through
//! alternates; and the way its work comes back: only objects, bundled confined in the run's
//! repository and verified by git on the way into the person's (`transfer.fsckObjects`; an
//! object the person has is never replaced), under refs harn owns. Nothing of the run's
//! repository is ever executed by harn or git outside the run's confinement: the attestation,
//! the diff a reviewer sees and the landing read the person's repository alone.

use super::worktree::{
    base_branch, candidate, confined, fetch_bundle, git, git_text, lock, own_digest, require_git,
    run_text, GuardedPaths, Options,
};
use harn_core::ids::Id;
use harn_core::work::workspace::{self, Attestation, MergedPrerequisite, Workspace};
use std::path::Path;
use std::process::Stdio;

/// The ref a run's repository names the commit it sends back by, for its bundle.
const OUT_REF: &str = "refs/harn/out";

/// Where a new attempt's repository keeps the earlier attempts' work: one ref per run, so a
/// workflow can build on it (`git log refs/harn/attempts/RUN`), though none of it is on the
/// branch the attempt lands by.
const ATTEMPTS: &str = "refs/harn/attempts";

/// Makes the repository item `id`'s attempt works in: a new one every attempt, on branch
/// `harn/ID` at the item's base (the first attempt's, recorded; else `--base` or `HEAD` with
/// each prerequisite's accepted commit merged in, made in the person's repository and pinned
/// there), with the item's earlier runs' work under [`ATTEMPTS`]. What an earlier attempt
/// left in the place is brought back first (a run whose host died before its end), then
/// removed.
pub fn prepare(root: &Path, id: &Id, o: &Options<'_>) -> Result<Workspace, String> {
    require_git()?;
    let repo = git_text(root, None, &["rev-parse", "--show-toplevel"]).map_err(|e| {
        format!("--isolation worktree: {} is not in a git repository: {e}", root.display())
    })?;
    let absolute = ["rev-parse", "--path-format=absolute"];
    let common = git_text(root, None, &[&absolute[..], &["--git-common-dir"]].concat())?;
    let objects = git_text(root, None, &[&absolute[..], &["--git-path", "objects"]].concat())?;
    let dir = match o.root {
        Some(r) => r.to_path_buf(),
        None => workspace::default_root(&repo).into(),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dir = std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = workspace::path(&dir.display().to_string(), id);
    let branch = workspace::branch(id);
    // Two attempts starting together make their places and pins one at a time.
    let _lock = lock(&common)?;
    let earlier_base = o.recorded.as_ref().map(|r| r.base_commit.as_str());
    clear(root, &common, &objects, Path::new(&path), id, earlier_base, o.open)?;
    let (base, base_branch, prerequisites, branched_from) = match &o.recorded {
        Some(r) => (
            r.base_commit.clone(),
            r.base_branch.clone(),
            r.prerequisites.clone(),
            r.branched_from.clone(),
        ),
        None => {
            let named = o.base.unwrap_or("HEAD");
            let wanted = format!("{named}^{{commit}}");
            let start = git_text(root, None, &["rev-parse", "--verify", &wanted])
                .map_err(|e| format!("--base {named}: {e}"))?;
            let (base, brought) = merge_prerequisites(root, id, &start, &o.prerequisites)?;
            let merged = brought.iter().any(|p| !p.already_in_base);
            (base, base_branch(root, None, o.base), brought, merged.then_some(start))
        }
    };
    // The person's `gc` must not drop what the run borrows.
    git_text(root, None, &["update-ref", &workspace::base_ref(id), &base])?;
    make(root, id, Path::new(&path), &objects, &branch, &base).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&path);
    })?;
    Ok(Workspace {
        git_dir: git_dir_of(Path::new(&path)).display().to_string(),
        path,
        branch,
        base_commit: base,
        base_branch,
        prerequisites,
        branched_from,
        reused: false,
        own: true,
    })
}

/// Makes the repository at `path`: no template (so no hook, sample or not), the person's
/// objects as its alternates, `branch` checked out at `base`, and the item's earlier runs'
/// work under [`ATTEMPTS`]. Nothing of a run's is in it yet, so harn's git runs here open.
fn make(
    root: &Path,
    id: &Id,
    path: &Path,
    objects: &str,
    branch: &str,
    base: &str,
) -> Result<(), String> {
    let place = path.display().to_string();
    // Its git directory beside its files, not in them: an agent's own sandbox (Codex's) keeps
    // a `.git` directory inside a writable root read-only, and the run must commit.
    let separate = format!("--separate-git-dir={}", git_dir_of(path).display());
    git_text(root, None, &["init", "--quiet", "--template=", &separate, "-b", branch, &place])?;
    let info = git_dir_of(path).join("objects/info");
    std::fs::create_dir_all(&info).map_err(|e| format!("{}: {e}", info.display()))?;
    std::fs::write(info.join("alternates"), format!("{objects}\n"))
        .map_err(|e| format!("{}: {e}", info.display()))?;
    git_text(path, None, &["reset", "--quiet", "--hard", base])?;
    let earlier = git_text(
        root,
        None,
        &["for-each-ref", "--format=%(refname) %(objectname)", &format!("refs/harn/work/{id}/")],
    )?;
    let mut updates = String::new();
    for line in earlier.lines() {
        let Some((name, commit)) = line.split_once(' ') else { continue };
        let Some(run) = name.rsplit('/').next() else { continue };
        updates.push_str(&format!("update {ATTEMPTS}/{run} {commit}\n"));
    }
    if !updates.is_empty() {
        feed(path, &["update-ref", "--stdin"], &updates)?;
    }
    Ok(())
}

/// Runs git in `dir` (open: only for a repository no run has touched) with `input` on its
/// standard input.
fn feed(dir: &Path, args: &[&str], input: &str) -> Result<(), String> {
    use std::io::Write;
    let mut cmd = super::worktree::command(dir, None, args)?;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).map_err(|e| format!("git: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("git: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!("git failed: {}", String::from_utf8_lossy(&out.stderr).trim())),
    }
}

/// Empties the place of item `id`'s repository: a repository harn made there for an earlier
/// attempt has what it holds brought back under `refs/harn/left/ID` (its run may have ended
/// before it could) and is removed; a linked worktree made before repositories of their own
/// is removed as a land removes one (refused while it has changes); anything else is refused.
fn clear(
    root: &Path,
    common: &str,
    objects: &str,
    path: &Path,
    id: &Id,
    base: Option<&str>,
    open: bool,
) -> Result<(), String> {
    let dot = path.join(".git");
    let git_dir = git_dir_of(path);
    let alternates =
        std::fs::read_to_string(git_dir.join("objects/info/alternates")).unwrap_or_default();
    let ours = alternates.lines().next() == Some(objects);
    let Ok(meta) = path.symlink_metadata() else {
        // A git directory whose files are gone (a removal cut short) goes too.
        if ours {
            std::fs::remove_dir_all(&git_dir).map_err(|e| format!("{}: {e}", git_dir.display()))?;
        }
        return Ok(());
    };
    let shown = path.display();
    if !ours && meta.is_dir() && dot.symlink_metadata().is_ok_and(|m| m.is_file()) {
        return super::worktree::remove_worktree(root, &shown.to_string(), common).map_err(|e| {
            format!("the worktree {shown} of an earlier attempt stays: {e}; harn work prune --force removes it")
        });
    }
    if !meta.is_dir() || !ours {
        return Err(format!(
            "{shown} exists but is not a repository harn made for {id}; move it aside or give \
             --workspace-root"
        ));
    }
    let left = format!("refs/harn/left/{id}");
    if let Err(e) = bring_back(root, path, &git_dir.display().to_string(), base, &left, open) {
        errln!("harn: warning: what an earlier attempt left in {shown} was not brought back: {e}");
    }
    std::fs::remove_dir_all(path).map_err(|e| format!("{shown}: {e}"))?;
    std::fs::remove_dir_all(&git_dir).map_err(|e| format!("{}: {e}", git_dir.display()))
}

/// The git directory of the repository whose files are at `path`: beside them, `PATH.git`.
pub fn git_dir_of(path: &Path) -> std::path::PathBuf {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".git");
    dir.into()
}

/// Git's options that name the run's repository by its own directories, never by what its
/// `.git` file says (a run may rewrite that to point anywhere).
fn named<'a>(path: &'a str, git_dir: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--git-dir", git_dir, "--work-tree", path];
    all.extend_from_slice(args);
    all
}

/// Merges each prerequisite's accepted commit `start` does not hold, in the person's
/// repository (no working tree: `merge-tree`, then a commit); returns the base and what was
/// brought in. A conflict refuses the attempt, naming the files.
fn merge_prerequisites(
    root: &Path,
    id: &Id,
    start: &str,
    wanted: &[(Id, String)],
) -> Result<(String, Vec<MergedPrerequisite>), String> {
    let mut head = start.to_owned();
    let mut brought = Vec::new();
    for (prerequisite, commit) in wanted {
        let held = git(root, None, &["merge-base", "--is-ancestor", commit, &head])
            .is_ok_and(|o| o.status.success());
        if !held {
            let args =
                ["merge-tree", "--write-tree", "--name-only", "--no-messages", &head, commit];
            let out = git(root, None, &args)?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut lines = text.lines();
            let tree = lines.next().unwrap_or("").trim().to_owned();
            match out.status.code() {
                Some(0) if !tree.is_empty() => {}
                Some(1) => {
                    let files: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
                    return Err(format!(
                        "--isolation worktree: the accepted work of {prerequisite} does not merge \
                         with what {id} starts from (conflicts in {}); land or reconcile the \
                         prerequisites first",
                        files.join(", ")
                    ));
                }
                _ => {
                    return Err(format!(
                        "git merge-tree failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
            }
            let message = format!("Bring {prerequisite}'s accepted work into {id}");
            let args = ["commit-tree", &tree, "-p", &head, "-p", commit, "-m", &message];
            head = git_text(root, None, &args)?;
        }
        brought.push(MergedPrerequisite {
            id: prerequisite.clone(),
            commit: commit.clone(),
            already_in_base: held,
        });
    }
    Ok((head, brought))
}

/// What came back of a run's repository.
struct Back {
    /// Its `HEAD`.
    head: String,
    /// The commit of its files as they were (`head` when nothing was left uncommitted).
    tip: String,
}

/// Brings back what the repository at `path` holds: its `HEAD`, and a commit of its files
/// when they differ from it, as a bundle made confined there, verified and fetched into the
/// person's repository under `to`. `base` (when known) is what the person's repository
/// already has, left out of the bundle.
fn bring_back(
    root: &Path,
    path: &Path,
    git_dir: &str,
    base: Option<&str>,
    to: &str,
    open: bool,
) -> Result<Back, String> {
    let label = path.file_name().and_then(|n| n.to_str()).unwrap_or("run").to_owned();
    let (confine, temp) = confined(root, path, git_dir, open, &format!("back-{label}"))?;
    let c = Some(&confine);
    let place = path.display().to_string();
    let run = |args: &[&str]| git_text(path, c, &named(&place, git_dir, args));
    let head = run(&["rev-parse", "--verify", "HEAD^{commit}"])?;
    let status = run(&["status", "--porcelain", "--untracked-files=all"])?;
    let tip = match status.is_empty() {
        true => head.clone(),
        false => files_commit(path, git_dir, &confine, &temp.0, &head)?,
    };
    let present = git(root, None, &["cat-file", "-e", &format!("{tip}^{{commit}}")])
        .is_ok_and(|o| o.status.success());
    if present {
        git_text(root, None, &["update-ref", to, &tip])?;
    } else {
        let bundle = temp.0.join("back.bundle").display().to_string();
        run(&["update-ref", OUT_REF, &tip])?;
        let mut args = vec!["bundle", "create", "--quiet", &bundle, OUT_REF];
        let not = base.map(|b| format!("^{b}"));
        args.extend(not.as_deref());
        run(&args)?;
        let spec = format!("+{OUT_REF}:{to}");
        fetch_bundle(root, None, &bundle, &spec)
            .map_err(|e| format!("the work of {label}: {e}"))?;
    }
    let got = git_text(root, None, &["rev-parse", "--verify", to])?;
    if got != tip {
        return Err(format!("{to} is {got}, not {tip} as {label} sent it"));
    }
    Ok(Back { head, tip })
}

/// A commit of the files in `path` as they are (untracked ones included) on top of `head`,
/// through a scratch index, so the run's own index is neither used nor changed.
fn files_commit(
    path: &Path,
    git_dir: &str,
    confine: &super::confine::Confine,
    temp: &Path,
    head: &str,
) -> Result<String, String> {
    let index = temp.join("index");
    let place = path.display().to_string();
    let scratch = |args: &[&str]| {
        let mut cmd = super::worktree::command(path, Some(confine), &named(&place, git_dir, args))?;
        cmd.env("GIT_INDEX_FILE", &index);
        for (k, v) in [
            ("GIT_AUTHOR_NAME", "harn"),
            ("GIT_AUTHOR_EMAIL", "harn@localhost"),
            ("GIT_COMMITTER_NAME", "harn"),
            ("GIT_COMMITTER_EMAIL", "harn@localhost"),
        ] {
            cmd.env(k, v);
        }
        Ok::<_, String>(cmd)
    };
    run_text(scratch(&["read-tree", head])?)?;
    run_text(scratch(&["add", "-A"])?)?;
    let tree = run_text(scratch(&["write-tree"])?)?;
    let message = "The files as the run left them (not committed)";
    run_text(scratch(&["commit-tree", "-p", head, "-m", message, &tree])?)
}

/// At a run's end: brings its work back (under `refs/harn/work/ID/RUN`, the item's branch
/// `harn/ID` at the run's `HEAD`) and attests it from the person's repository: the diff from
/// the base to the files as the run left them, and what of it waits for a person.
pub fn attest(
    ws: &Workspace,
    root: &Path,
    id: &Id,
    run: &str,
    open: bool,
) -> Result<(Attestation, GuardedPaths), String> {
    require_git()?;
    let path = Path::new(&ws.path);
    let base = ws.base_commit.as_str();
    let back = bring_back(root, path, &ws.git_dir, Some(base), &workspace::run_ref(id, run), open)?;
    git_text(root, None, &["update-ref", &format!("refs/heads/{}", ws.branch), &back.head])?;
    let (diff_sha256, diff_bytes) = own_digest(root, base, &back.tip)?;
    let (changed, guarded) = candidate(root, None, base, &back.tip)?;
    let uncommitted = back.tip != back.head;
    let attestation = Attestation {
        workspace: ws.clone(),
        final_commit: back.head,
        diff_sha256,
        diff_bytes,
        files_changed: changed.len() as u32,
        uncommitted,
        tip: uncommitted.then_some(back.tip),
    };
    Ok((attestation, guarded))
}

/// Removes the repository harn made for an item's attempt; its work is in the person's
/// repository already (brought back at each run's end, or here first when it was not).
pub fn remove(root: &Path, ws: &Workspace) -> Result<(), String> {
    remove_at(root, Path::new(&ws.path), Some(&ws.base_commit))
}

/// True when `path` is a repository harn made for an item's attempt in the repository at
/// `root` (its alternates are that repository's objects).
pub fn is_own(root: &Path, path: &Path) -> bool {
    let alternates = std::fs::read_to_string(git_dir_of(path).join("objects/info/alternates"));
    let objects =
        git_text(root, None, &["rev-parse", "--path-format=absolute", "--git-path", "objects"]);
    match (alternates, objects) {
        (Ok(a), Ok(o)) => a.lines().next() == Some(o.as_str()),
        _ => false,
    }
}

/// [`remove`] of the repository at `path`, whose item's base is `base` when known.
pub fn remove_at(root: &Path, path: &Path, base: Option<&str>) -> Result<(), String> {
    if !path.exists() && !git_dir_of(path).exists() {
        return Ok(());
    }
    let objects =
        git_text(root, None, &["rev-parse", "--path-format=absolute", "--git-path", "objects"])?;
    let common =
        git_text(root, None, &["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
    let id = Id::new(path.file_name().and_then(|n| n.to_str()).unwrap_or_default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let _lock = lock(&common)?;
    clear(root, &common, &objects, path, &id, base, false)
}
