//! git as harn runs it (no hook, filesystem monitor, pager or editor; diffs with no attribute
//! a run could have written; git 2.40 or newer), what a change holds that waits for a person,
//! and the linked worktrees attempts made before each had a repository of its own
//! (`work::repository`): attested, read for a review and removed as they were.
//!
//! Every git command here that touches a directory a run could write runs confined as the run
//! is, so what git does on harn's behalf stays inside the same wall.

use super::confine::{Confine, Temp};
use harn_core::ids::Id;
use harn_core::work::candidate::{self, ChangedPath, Guarded};
use harn_core::work::workspace::{Attestation, Workspace};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Where and from what an item's repository is made.
pub struct Options<'a> {
    /// The worktrees' directory; `None` means beside the repository.
    pub root: Option<&'a Path>,
    /// The commit a new branch starts from; `None` means the repository's `HEAD`.
    pub base: Option<&'a str>,
    /// The workspace an earlier attempt recorded (its base, base branch, prerequisites, what
    /// it was branched from), which every later attempt keeps.
    pub recorded: Option<Workspace>,
    /// True when runs are not confined (`--no-containment`): neither are these commands.
    pub open: bool,
    /// The accepted commits of the item's prerequisites (made in their own repositories): a
    /// new base is made holding every one of them.
    pub prerequisites: Vec<(Id, String)>,
}

/// The branch a worktree's base was taken from: `--base` when it names a branch, else the
/// repository's current branch (none when `HEAD` is detached).
pub(super) fn base_branch(root: &Path, c: Option<&Confine>, base: Option<&str>) -> Option<String> {
    match base {
        Some(b) => {
            let is_branch =
                git(root, c, &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{b}")])
                    .map(|o| o.status.success())
                    .unwrap_or(false);
            is_branch.then(|| b.to_owned())
        }
        None => git_text(root, c, &["symbolic-ref", "--short", "-q", "HEAD"])
            .ok()
            .filter(|b| !b.is_empty()),
    }
}

/// What the run left in its worktree: the branch's commit, and the diff from the base to
/// the files as they are (uncommitted and untracked ones included, read through a scratch
/// index so the worktree's own index is untouched).
///
/// Also what of the change waits for a person ([`candidate`]).
pub fn attest(
    ws: &Workspace,
    root: &Path,
    open: bool,
) -> Result<(Attestation, GuardedPaths), String> {
    require_git()?;
    let dir = Path::new(&ws.path);
    let parent = dir.parent().unwrap_or(dir);
    let label = ws.branch.replace('/', "-");
    let (confine, temp) = confined(root, parent, &ws.git_dir, open, &label)?;
    let c = Some(&confine);
    let final_commit = git_text(dir, c, &["rev-parse", "HEAD"])?;
    let status = git_text(dir, c, &["status", "--porcelain"])?;
    let index = temp.0.join("index");
    let own = git_text(dir, c, &["rev-parse", "--path-format=absolute", "--git-path", "index"])?;
    std::fs::copy(&own, &index).map_err(|e| format!("{own}: {e}"))?;
    let scratch = |args: &[&str]| {
        let mut cmd = command(dir, c, args)?;
        cmd.env("GIT_INDEX_FILE", &index);
        Ok::<_, String>(cmd)
    };
    run_text(scratch(&["add", "-A"])?)?;
    let names = run_text(scratch(&["diff", "--cached", "--name-only", &ws.base_commit])?)?;
    let mut diff = scratch(&cached_diff(&ws.base_commit))?;
    let (diff_sha256, diff_bytes) = digest(&mut diff)?;
    let tree = run_text(scratch(&["write-tree"])?)?;
    let guarded = candidate(dir, c, &ws.base_commit, &tree)?.1;
    let attestation = Attestation {
        workspace: ws.clone(),
        final_commit,
        diff_sha256,
        diff_bytes,
        files_changed: names.lines().filter(|l| !l.is_empty()).count() as u32,
        uncommitted: !status.is_empty(),
        tip: None,
    };
    Ok((attestation, guarded))
}

/// The binary diff from `base` to a scratch index, attributes ignored: the bytes a linked
/// worktree's attestation covers, made the same way wherever it is read again.
fn cached_diff(base: &str) -> [&str; 9] {
    [
        PLAIN[0],
        PLAIN[1],
        PLAIN[2],
        "diff",
        "--cached",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        base,
    ]
}

/// Git's global options that make a diff ignore every attribute a run could have written (a
/// `.gitattributes` of `* -diff` would show a reviewer "Binary files differ" for every file,
/// a textconv or diff driver would show what it likes): attributes are read from the empty
/// tree, and no attributes file of the configuration's is read. Needs git 2.40.
pub(super) const PLAIN: [&str; 3] = [
    "--attr-source=4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "-c",
    "core.attributesFile=/dev/null",
];

/// The oldest git harn's own commands work with (`--attr-source`, [`PLAIN`]).
pub const GIT_MINIMUM: (u32, u32) = (2, 40);

/// Refuses, with a clear error, a git older than [`GIT_MINIMUM`]; asked once per process.
pub fn require_git() -> Result<(), String> {
    static SEEN: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    SEEN.get_or_init(|| {
        let out =
            Command::new("git").arg("version").stdin(Stdio::null()).output().map_err(|e| {
                format!("git: {e} (harn needs git {}.{} or newer)", GIT_MINIMUM.0, GIT_MINIMUM.1)
            })?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let version = text.strip_prefix("git version ").unwrap_or(&text);
        let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        match found >= GIT_MINIMUM {
            true => Ok(()),
            false => Err(format!(
                "git {version} is too old: harn needs git {}.{} or newer to read a run's work \
                 without its attributes (--attr-source); install a newer git first on PATH",
                GIT_MINIMUM.0, GIT_MINIMUM.1
            )),
        }
    })
    .clone()
}

/// The paths of a change that wait for a person, and why.
pub type GuardedPaths = Vec<(String, Guarded)>;

/// Most bytes of a `.gitattributes` read to tell whether it names a driver; a larger one
/// counts as naming one.
const ATTRIBUTES_MAX: usize = 64 * 1024;

/// The paths from `base` to `to` (a commit or a tree), read from git's objects, and what of
/// them waits for a person (`harn_core::work::candidate::guarded`).
pub(super) fn candidate(
    dir: &Path,
    c: Option<&Confine>,
    base: &str,
    to: &str,
) -> Result<(Vec<ChangedPath>, GuardedPaths), String> {
    let out = git(dir, c, &["diff-tree", "-r", "-z", "--raw", "--no-renames", base, to])?;
    if !out.status.success() {
        return Err(format!(
            "git diff-tree failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let changed = candidate::parse_raw(&out.stdout).map_err(|e| e.to_string())?;
    let attributes = |path: &str| {
        let c_ = changed.iter().find(|x| x.path == path)?;
        let out = git(dir, c, &["cat-file", "blob", &c_.new_object]).ok()?;
        (out.status.success() && out.stdout.len() <= ATTRIBUTES_MAX)
            .then(|| String::from_utf8(out.stdout).ok())
            .flatten()
    };
    let guarded = candidate::guarded(&changed, attributes);
    Ok((changed, guarded))
}

/// The digest of the diff from `ws`'s base to `commit`, computed as [`attest`] computes its
/// own (through a scratch index, `diff --cached`, in the worktree when it is still there), so
/// the bytes match whatever the repository's diff settings are.
pub(super) fn commit_digest(ws: &Workspace, root: &Path, commit: &str) -> Result<String, String> {
    if ws.own {
        return Ok(own_digest(root, &ws.base_commit, commit)?.0);
    }
    Ok(readable_diff(ws, root, Side::Commit(commit), None)?.digest)
}

/// What [`readable_diff`] reads the diff of: a commit, or the worktree's files as they are.
pub enum Side<'a> {
    /// A commit of the item's branch.
    Commit(&'a str),
    /// The worktree's files, committed or not (as [`attest`] reads them).
    Worktree,
}

/// A diff as a person reads it, and the digest of the bytes an attestation covers.
pub struct Readable {
    /// The text of the diff (a binary file is named, not shown).
    pub text: String,
    /// True when the text was cut at the limit.
    pub cut: bool,
    /// SHA-256 of the binary diff, as [`attest`] computes it.
    pub digest: String,
}

/// The diff from `ws`'s base to `side`, made as [`attest`] and [`commit_digest`] make the
/// attested bytes (a scratch index, `diff --cached`, confined), once for its digest and,
/// with a `limit`, once more without `--binary` for a person, cut at `limit` bytes.
pub fn readable_diff(
    ws: &Workspace,
    root: &Path,
    side: Side<'_>,
    limit: Option<usize>,
) -> Result<Readable, String> {
    require_git()?;
    if ws.own {
        return own_diff(ws, root, side, limit);
    }
    let worktree = Path::new(&ws.path);
    let dir = if worktree.is_dir() { worktree } else { root };
    let parent = worktree.parent().unwrap_or(root);
    let label = ws.branch.replace('/', "-");
    let (confine, temp) = confined(root, parent, &ws.git_dir, false, &label)?;
    let c = Some(&confine);
    let index = temp.0.join("index");
    let scratch = |args: &[&str]| {
        let mut cmd = command(dir, c, args)?;
        cmd.env("GIT_INDEX_FILE", &index);
        Ok::<_, String>(cmd)
    };
    match side {
        Side::Commit(commit) => run_text(scratch(&["read-tree", commit])?)?,
        Side::Worktree => {
            if !worktree.is_dir() {
                return Err(format!("the worktree {} is gone", ws.path));
            }
            let own =
                git_text(dir, c, &["rev-parse", "--path-format=absolute", "--git-path", "index"])?;
            std::fs::copy(&own, &index).map_err(|e| format!("{own}: {e}"))?;
            run_text(scratch(&["add", "-A"])?)?
        }
    };
    let mut binary = scratch(&cached_diff(&ws.base_commit))?;
    let digest = digest(&mut binary)?.0;
    let Some(limit) = limit else {
        return Ok(Readable { text: String::new(), cut: false, digest });
    };
    let cmd = scratch(&[
        PLAIN[0],
        PLAIN[1],
        PLAIN[2],
        "diff",
        "--cached",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        &ws.base_commit,
    ])?;
    let (text, cut) = limited(cmd, limit)?;
    Ok(Readable { text, cut, digest })
}

/// [`readable_diff`] of a repository of the run's own: read from the person's repository
/// alone, from the base to a commit that came back (the files as the run left them are the
/// attestation's `tip`, so [`Side::Worktree`] names nothing here).
fn own_diff(
    ws: &Workspace,
    root: &Path,
    side: Side<'_>,
    limit: Option<usize>,
) -> Result<Readable, String> {
    let Side::Commit(commit) = side else {
        return Err("a run's own repository is read by its commits: give its tip".into());
    };
    let digest = own_digest(root, &ws.base_commit, commit)?.0;
    let Some(limit) = limit else {
        return Ok(Readable { text: String::new(), cut: false, digest });
    };
    let args = [
        PLAIN[0],
        PLAIN[1],
        PLAIN[2],
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        &ws.base_commit,
        commit,
    ];
    let (text, cut) = limited(command(root, None, &args)?, limit)?;
    let text = name_binaries(root, &ws.base_commit, commit, &text);
    Ok(Readable { text, cut, digest })
}

/// Most binary files of one diff named with their sizes and digests.
const BINARIES_NAMED: usize = 64;

/// The diff `text` (from `base` to `commit` in the repository at `root`) with each `Binary
/// files … differ` line saying what changed: each side's size and the new side's SHA-256, so
/// a reviewer sees that a binary file changed and can tell it from another.
fn name_binaries(root: &Path, base: &str, commit: &str, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut named = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let sides = body
            .strip_prefix("Binary files ")
            .and_then(|r| r.strip_suffix(" differ"))
            .and_then(|r| r.split_once(" and "));
        match sides {
            Some((old, new)) if named < BINARIES_NAMED => {
                named += 1;
                let side = |rev: &str, path: &str| -> String {
                    let Some(path) = path.strip_prefix("a/").or_else(|| path.strip_prefix("b/"))
                    else {
                        return "none".into();
                    };
                    let object = format!("{rev}:{path}");
                    let size = git_text(root, None, &["cat-file", "-s", &object]);
                    let Ok(size) = size else { return "none".into() };
                    let blob = command(root, None, &["cat-file", "blob", &object]);
                    match blob.and_then(|mut cmd| digest(&mut cmd)) {
                        Ok((sha, _)) => format!("{size} bytes, SHA-256 {sha}"),
                        Err(_) => format!("{size} bytes"),
                    }
                };
                let shown = new.strip_prefix("b/").unwrap_or(old.strip_prefix("a/").unwrap_or(new));
                out.push_str(&format!(
                    "Binary file {shown}: {} → {}\n",
                    side(base, old),
                    side(commit, new)
                ));
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// The digest and size of the binary diff from `base` to `commit`, read from the person's
/// repository at `root` with every attribute ignored: what a run of its own repository's
/// attestation covers, and what a land and a review check against it.
pub(super) fn own_digest(root: &Path, base: &str, commit: &str) -> Result<(String, u64), String> {
    let args = [
        PLAIN[0],
        PLAIN[1],
        PLAIN[2],
        "diff",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        base,
        commit,
    ];
    digest(&mut command(root, None, &args)?)
}

/// Verifies the bundle at `file` and fetches `spec` from it into the repository at `dir`:
/// git checks every object on the way in (`transfer.fsckObjects`, a tree entry named `.git`
/// an error), never replaces one it has, and runs no garbage collection. How a run's work
/// comes back, from a node and into the person's repository alike.
pub(super) fn fetch_bundle(
    dir: &Path,
    c: Option<&Confine>,
    file: &str,
    spec: &str,
) -> Result<(), String> {
    git_text(dir, c, &["bundle", "verify", "--quiet", file])
        .map_err(|e| format!("its bundle did not verify: {e}"))?;
    let fetch = [
        "-c",
        "transfer.fsckObjects=true",
        "-c",
        "fetch.fsckObjects=true",
        "-c",
        "fetch.fsck.hasDotgit=error",
        "-c",
        "gc.auto=0",
        "-c",
        "maintenance.auto=false",
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--",
        file,
        spec,
    ];
    git_text(dir, c, &fetch).map(drop).map_err(|e| format!("it was refused: {e}"))
}

/// Removes the linked worktree at `path` unless it has changes. `git worktree remove` would
/// look for them with `git status` in the worktree, as the person, reading the worktree's own
/// configuration (`config.worktree`: filters, a monitor), which its run could write; so the
/// look is made confined as the run was, and git is then told not to look again (`--force`
/// removes the files and git's record of them, and runs nothing of the worktree's).
pub(super) fn remove_worktree(repo: &Path, path: &str, git_dir: &str) -> Result<(), String> {
    if changes(repo, path, git_dir)? {
        return Err("it has changes (uncommitted or untracked files)".to_owned());
    }
    git_text(repo, None, &["worktree", "remove", "--force", path]).map(drop)
}

/// True when the worktree at `path` has changes, read by git confined as a run's own git
/// commands are (a run may have written the worktree's config).
pub(super) fn changes(repo: &Path, path: &str, git_dir: &str) -> Result<bool, String> {
    let dir = Path::new(path);
    let parent = dir.parent().unwrap_or(dir);
    let (confine, _temp) = confined(repo, parent, git_dir, false, "prune")?;
    let status = run_text(command(dir, Some(&confine), &["status", "--porcelain"])?)?;
    Ok(!status.is_empty())
}

/// A command's output up to `limit` bytes, and whether it was cut there.
fn limited(mut cmd: Command, limit: usize) -> Result<(String, bool), String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("git: {e}"))?;
    let mut out = Vec::new();
    let stdout = child.stdout.take().expect("piped");
    stdout.take(limit as u64 + 1).read_to_end(&mut out).map_err(|e| format!("git diff: {e}"))?;
    let cut = out.len() > limit;
    if cut {
        out.truncate(limit);
        let _ = child.kill();
    }
    let status = child.wait().map_err(|e| format!("git diff: {e}"))?;
    if !cut && !status.success() {
        return Err(format!("git diff failed ({status})"));
    }
    Ok((String::from_utf8_lossy(&out).into_owned(), cut))
}

/// The accepted proof's worktree attestation, after checking the proof is the one accepted
/// (and sealed by its run, as every read of a proof checks).
pub(super) fn accepted_attestation(
    store: &mut crate::os::store::Store,
    acc: &harn_core::work::landing::AcceptedProof,
) -> Result<Option<Attestation>, String> {
    let (_, sealed) = store.ledger().sealed_run_records(&acc.run_id).map_err(|e| e.to_string())?;
    let (proof, digest) = sealed.ok_or_else(|| format!("run {} has no proof", acc.run_id))?;
    if digest != acc.proof_sha256 {
        return Err(format!(
            "run {}: its proof is not the proof that was accepted (SHA-256 {digest}, accepted \
             {}); nothing was changed",
            acc.run_id, acc.proof_sha256
        ));
    }
    Ok(proof.workspace)
}

/// The confinement of harn's own git commands: the worktrees' directory, the git directory
/// and a scratch `TMPDIR` are writable, nothing else.
pub(super) fn confined(
    root: &Path,
    dir: &Path,
    git_dir: &str,
    open: bool,
    label: &str,
) -> Result<(Confine, Temp), String> {
    let off = open.then(|| "--no-containment".to_owned());
    super::confine::scratch(root, Some(dir), vec![git_dir.to_owned()], off, &format!("git-{label}"))
}

/// An exclusive lock on the repository's worktree list, released when dropped.
pub(super) fn lock(git_dir: &str) -> Result<std::fs::File, String> {
    let path = Path::new(git_dir).join("harn-worktree.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        // A run may write the git directory: a link planted here is refused, never followed.
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.lock().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(file)
}

pub(super) fn command(
    dir: &Path,
    confine: Option<&Confine>,
    args: &[&str],
) -> Result<Command, String> {
    let mut cmd = Command::new("git");
    // harn's own git commands run no hook: a hook is code of the repository's, and this
    // command is harn's, started without a person.
    // Nor a filesystem monitor: `core.fsmonitor` names a command too, and a run may write a
    // worktree's own config.
    cmd.arg("-C").arg(dir).args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]);
    cmd.args(args);
    cmd.stdin(Stdio::null());
    // Nor a pager or an editor of the configuration's (docs/decisions/0013).
    cmd.env("GIT_PAGER", "cat").env("GIT_EDITOR", "true");
    // The caller's own git variables would point these commands at another repository.
    for var in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"] {
        cmd.env_remove(var);
    }
    if let Some(c) = confine {
        c.apply(&mut cmd).map_err(|e| format!("git: {e}"))?;
    }
    Ok(cmd)
}

pub(super) fn git(
    dir: &Path,
    confine: Option<&Confine>,
    args: &[&str],
) -> Result<std::process::Output, String> {
    command(dir, confine, args)?.output().map_err(|e| format!("git: {e}"))
}

pub(super) fn git_text(
    dir: &Path,
    confine: Option<&Confine>,
    args: &[&str],
) -> Result<String, String> {
    run_text(command(dir, confine, args)?)
}

pub(super) fn run_text(mut cmd: Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("git failed ({}): {}", out.status, err.trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Streams a command's output through SHA-256: a diff of any size costs no memory.
pub(super) fn digest(cmd: &mut Command) -> Result<(String, u64), String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("git: {e}"))?;
    let mut out = child.stdout.take().expect("piped");
    let (mut hash, mut bytes, mut buf) = (Sha256::new(), 0u64, vec![0u8; 64 * 1024]);
    loop {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hash.update(&buf[..n]);
                bytes += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("git diff: {e}")),
        }
    }
    let status = child.wait().map_err(|e| format!("git diff: {e}"))?;
    if !status.success() {
        return Err(format!("git diff failed ({status})"));
    }
    Ok((hash.finalize().iter().map(|b| format!("{b:02x}")).collect(), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_in(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// A run's `.gitattributes` of `* -diff` would show a reviewer "Binary files differ" for
    /// every file it changed; the diff harn shows and attests reads no attribute.
    #[test]
    fn a_runs_attributes_hide_nothing_from_the_diff_a_reviewer_reads() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git_in(repo, &["init", "-q"]);
        std::fs::write(repo.join("a.txt"), "hello\n").unwrap();
        git_in(repo, &["add", "-A"]);
        git_in(repo, &["commit", "-qm", "base"]);
        let base = git_in(repo, &["rev-parse", "HEAD"]);
        std::fs::write(repo.join(".gitattributes"), "* -diff\n").unwrap();
        std::fs::write(repo.join("a.txt"), "hello\nplanted\n").unwrap();
        git_in(repo, &["add", "-A"]);
        git_in(repo, &["commit", "-qm", "hide"]);
        let head = git_in(repo, &["rev-parse", "HEAD"]);
        let ws = Workspace {
            path: repo.join("gone").display().to_string(),
            branch: "harn/x".into(),
            base_commit: base,
            base_branch: None,
            prerequisites: Vec::new(),
            branched_from: None,
            git_dir: repo.join(".git").display().to_string(),
            reused: false,
            own: true,
        };
        let read = readable_diff(&ws, repo, Side::Commit(&head), Some(64 * 1024)).unwrap();
        assert!(read.text.contains("+planted"), "{}", read.text);
        assert!(!read.text.contains("Binary files"), "{}", read.text);
        // A binary file is named with each side's size and the new side's digest.
        std::fs::write(repo.join("blob.bin"), [0u8, 1, 2, 3, 0, 255]).unwrap();
        git_in(repo, &["add", "-A"]);
        git_in(repo, &["commit", "-qm", "binary"]);
        let binary = git_in(repo, &["rev-parse", "HEAD"]);
        let read = readable_diff(&ws, repo, Side::Commit(&binary), Some(64 * 1024)).unwrap();
        assert!(
            read.text.contains("Binary file blob.bin: none → 6 bytes, SHA-256 "),
            "{}",
            read.text
        );
        // What a land checks is the same digest, whatever the attributes say.
        assert_eq!(commit_digest(&ws, repo, &binary).unwrap(), read.digest);
    }
}
