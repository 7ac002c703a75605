//! How an item's work travels between the coordinator's repository of the attempt and a
//! node's clone: out over the cluster's `repository` (the item's branch for what is committed,
//! `refs/harn-wip/ID` for the files as they are, published by the coordinator), back as a
//! bundle over the step's output, verified on the way in. The coordinator's repository is
//! always what the last segment left, and attesting and landing a remote item are a local
//! attempt's. Every git command here that touches files a
//! run wrote runs confined as the run was, with no hook and no filesystem monitor.

use crate::work::confine::Confine;
use crate::work::worktree::{command, fetch_bundle, git_text, run_text};
use harn_core::work::remote::{wip_ref, Checkout};
use harn_core::work::workspace::Workspace;
use std::path::Path;

/// The directory a repository URL names on this machine (`/srv/app.git`,
/// `file:///srv/app.git`), which harn's confined git must be able to write to push; `None`
/// for a remote URL.
fn local_path(repository: &str) -> Option<String> {
    let path = repository.strip_prefix("file://").unwrap_or(repository);
    path.starts_with('/').then(|| path.to_owned())
}

/// The confinement of a git command over `dir` whose git directory is `git_dir`: those, the
/// repository when it is a directory here, and a scratch `TMPDIR` are writable.
fn confined(
    root: &Path,
    dir: &Path,
    git_dir: &str,
    repository: &str,
    open: bool,
    label: &str,
) -> Result<(Confine, crate::work::confine::Temp), String> {
    let mut writable = vec![git_dir.to_owned()];
    writable.extend(local_path(repository));
    let off = open.then(|| "--no-containment".to_owned());
    crate::work::confine::scratch(root, Some(dir), writable, off, &format!("sync-{label}"))
}

/// The commit of `dir`'s files as they are (uncommitted and untracked ones included, through
/// a scratch index, so the working index is untouched) when they differ from `HEAD`.
fn wip_commit(
    dir: &Path,
    c: &Confine,
    temp: &Path,
    head: &str,
    work_id: &str,
) -> Result<Option<String>, String> {
    let status = git_text(dir, Some(c), &["status", "--porcelain"])?;
    if status.is_empty() {
        return Ok(None);
    }
    let index = temp.join("index");
    let own =
        git_text(dir, Some(c), &["rev-parse", "--path-format=absolute", "--git-path", "index"])?;
    // A clone whose run emptied the index has none to copy: the scratch one starts empty.
    if std::fs::copy(&own, &index).is_err() {
        let _ = std::fs::remove_file(&index);
    }
    let scratch = |args: &[&str]| {
        let mut cmd = command(dir, Some(c), args)?;
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
    run_text(scratch(&["add", "-A"])?)?;
    let tree = run_text(scratch(&["write-tree"])?)?;
    let message = format!("The files of {work_id} as its segment left them (not committed)");
    Ok(Some(run_text(scratch(&["commit-tree", "-p", head, "-m", &message, &tree])?)?))
}

/// Pushes `head` to the item's branch and `wip` (when there is one) to its wip ref.
fn push_refs(
    dir: &Path,
    c: &Confine,
    repository: &str,
    branch: &str,
    work_id: &str,
    head: &str,
    wip: Option<&str>,
) -> Result<(), String> {
    let mut args = vec![
        // No garbage collection on the receiving side for one branch's push.
        "-c".to_owned(),
        "receive.autogc=false".to_owned(),
        "push".to_owned(),
        "--quiet".to_owned(),
        "--force".to_owned(),
        "--".to_owned(),
        repository.to_owned(),
        format!("{head}:refs/heads/{branch}"),
    ];
    if let Some(wip) = wip {
        args.push(format!("{wip}:{}", wip_ref(work_id)));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_text(command(dir, Some(c), &args)?)
        .map(drop)
        .map_err(|e| format!("push to {repository}: {e}"))
}

/// On the coordinator, before a segment: pushes the worktree's branch and its files as they
/// are, and says where the node finds them.
pub fn publish(
    root: &Path,
    ws: &Workspace,
    repository: &str,
    work_id: &str,
    open: bool,
) -> Result<Checkout, String> {
    let dir = Path::new(&ws.path);
    let (c, temp) = confined(root, dir, &ws.git_dir, repository, open, work_id)?;
    let head = git_text(dir, Some(&c), &["rev-parse", "HEAD"])?;
    let wip = wip_commit(dir, &c, &temp.0, &head, work_id)?;
    push_refs(dir, &c, repository, &ws.branch, work_id, &head, wip.as_deref())?;
    Ok(Checkout { repository: repository.to_owned(), branch: ws.branch.clone(), head, wip })
}

/// On the coordinator, after a segment: fetches what the node pushed, checks it is what the
/// node said, and makes the worktree exactly that (the branch at `head`, the files as `wip`).
pub fn bring_back(
    root: &Path,
    ws: &Workspace,
    repository: &str,
    work_id: &str,
    head: &str,
    wip: Option<&str>,
    open: bool,
) -> Result<(), String> {
    let dir = Path::new(&ws.path);
    let (c, _temp) = confined(root, dir, &ws.git_dir, repository, open, work_id)?;
    let c = Some(&c);
    let fetched = format!("refs/harn-fetched/{work_id}");
    let fetched_wip = format!("refs/harn-fetched-wip/{work_id}");
    let mut specs = vec![format!("+refs/heads/{}:{fetched}", ws.branch)];
    if wip.is_some() {
        specs.push(format!("+{}:{fetched_wip}", wip_ref(work_id)));
    }
    let mut args = vec!["-c", "maintenance.auto=false", "-c", "gc.auto=0", "fetch", "--quiet"];
    args.extend(["--no-tags", "--", repository]);
    args.extend(specs.iter().map(String::as_str));
    git_text(dir, c, &args).map_err(|e| format!("fetch from {repository}: {e}"))?;
    let check = |name: &str, want: &str| {
        let got = git_text(dir, c, &["rev-parse", "--verify", name])?;
        match got == want {
            true => Ok(()),
            false => Err(format!(
                "{name} fetched from {repository} is {got}, not {want} as the node pushed: \
                 someone else pushed to the item's branch"
            )),
        }
    };
    check(&fetched, head)?;
    if let Some(wip) = wip {
        check(&fetched_wip, wip)?;
    }
    git_text(dir, c, &["reset", "--quiet", "--hard", head])?;
    git_text(dir, c, &["clean", "-fdq"])?;
    if let Some(wip) = wip {
        git_text(dir, c, &["restore", &format!("--source={wip}"), "--worktree", "--", ":/"])?;
    }
    let mut gone = command(dir, c, &["update-ref", "--stdin"])?;
    gone.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::null());
    if let Ok(mut child) = gone.stderr(std::process::Stdio::null()).spawn() {
        use std::io::Write;
        if let Some(mut input) = child.stdin.take() {
            let _ = writeln!(input, "delete {fetched}");
            if wip.is_some() {
                let _ = writeln!(input, "delete {fetched_wip}");
            }
        }
        let _ = child.wait();
    }
    Ok(())
}

/// On a node: clones the item's branch into the bare repository `git_dir` and checks it
/// out as a linked worktree at `work` (the layout of a worktree on the coordinator, so the
/// run may commit but not change the repository's configuration or hooks), checks it is at
/// the commit the coordinator pushed, and lays the last segment's files over it.
pub fn clone(checkout: &Checkout, git_dir: &Path, work: &Path) -> Result<(), String> {
    let parent = work.parent().unwrap_or(Path::new("/"));
    let (bare, target) = (git_dir.display().to_string(), work.display().to_string());
    let repo = checkout.repository.as_str();
    let branch = checkout.branch.as_str();
    let args = ["clone", "--quiet", "--bare", "--single-branch", "--branch", branch, "--", repo];
    git_text(parent, None, &[&args[..], &[&bare]].concat())
        .map_err(|e| format!("clone of {repo}: {e}"))?;
    // A bare clone keeps no reflogs: their directory is made now, since a confined run may
    // write into the repository's existing directories but not make new ones beside them.
    let logs = git_dir.join("logs/refs/heads/harn");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    git_text(git_dir, None, &["worktree", "add", "--quiet", &target, branch])?;
    let head = git_text(work, None, &["rev-parse", "HEAD"])?;
    if head != checkout.head {
        return Err(format!(
            "{branch} in {repo} is at {head}, not {} as the coordinator pushed it",
            checkout.head
        ));
    }
    if let Some(wip) = &checkout.wip {
        let work_id = branch.rsplit('/').next().unwrap_or_default();
        let spec = format!("+{}:refs/harn-wip", wip_ref(work_id));
        git_text(work, None, &["fetch", "--quiet", "--no-tags", "--", repo, &spec])?;
        let got = git_text(work, None, &["rev-parse", "--verify", "refs/harn-wip"])?;
        if got != *wip {
            return Err(format!("{} in {repo} is at {got}, not {wip}", wip_ref(work_id)));
        }
        git_text(work, None, &["restore", &format!("--source={wip}"), "--worktree", "--", ":/"])?;
        let _ = git_text(work, None, &["update-ref", "-d", "refs/harn-wip"]);
    }
    Ok(())
}

/// On a node, after the segment: bundles the clone's commit and its files as they are (one
/// ref, the files' commit when they differ from `HEAD`, else `HEAD`) against what the
/// coordinator already has (its pushed head and files), confined as the run was. Returns the
/// head, the files' commit, and the bundle's bytes (none when nothing changed). Nothing is
/// pushed: the bundle goes back over the step's output, so the node needs no push credential.
pub fn bundle(
    root: &Path,
    git_dir: &Path,
    work: &Path,
    checkout: &Checkout,
    work_id: &str,
    open: bool,
) -> Result<(String, Option<String>, Vec<u8>), String> {
    let git_dir = git_dir.display().to_string();
    std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let (c, temp) = confined(root, work, &git_dir, &checkout.repository, open, work_id)?;
    let head = git_text(work, Some(&c), &["rev-parse", "HEAD"])?;
    let wip = wip_commit(work, &c, &temp.0, &head, work_id)?;
    let tip = wip.clone().unwrap_or_else(|| head.clone());
    let known: Vec<String> =
        std::iter::once(&checkout.head).chain(&checkout.wip).map(|k| format!("^{k}")).collect();
    if tip == checkout.head {
        return Ok((head, wip, Vec::new()));
    }
    git_text(work, Some(&c), &["update-ref", "refs/harn/out", &tip])?;
    let file = temp.0.join("work.bundle").display().to_string();
    let mut args = vec!["bundle", "create", "--quiet", file.as_str(), "refs/harn/out"];
    args.extend(known.iter().map(String::as_str));
    run_text(command(work, Some(&c), &args)?)?;
    let bytes = std::fs::read(&file).map_err(|e| format!("{file}: {e}"))?;
    Ok((head, wip, bytes))
}

/// On the coordinator, after a segment whose node sent its work as a bundle: verifies it and
/// fetches it into the run's repository (with `transfer.fsckObjects`), checks it holds what the
/// node said, and makes the repository exactly that (the branch at `head`, the files as
/// `wip`).
pub fn bring_back_bundle(
    root: &Path,
    ws: &Workspace,
    work_id: &str,
    bundle: &[u8],
    head: &str,
    wip: Option<&str>,
    open: bool,
) -> Result<(), String> {
    let dir = Path::new(&ws.path);
    let (c, temp) = confined(root, dir, &ws.git_dir, "", open, work_id)?;
    let c = Some(&c);
    let tip = wip.unwrap_or(head);
    if !bundle.is_empty() {
        let file = temp.0.join("work.bundle");
        std::fs::write(&file, bundle).map_err(|e| format!("{}: {e}", file.display()))?;
        let file = file.display().to_string();
        let fetched = format!("refs/harn-fetched/{work_id}");
        let spec = format!("+refs/harn/out:{fetched}");
        fetch_bundle(dir, c, &file, &spec).map_err(|e| format!("the node's work: {e}"))?;
        let got = git_text(dir, c, &["rev-parse", "--verify", &fetched])?;
        let _ = git_text(dir, c, &["update-ref", "-d", &fetched]);
        if got != tip {
            return Err(format!("the node's bundle holds {got}, not {tip} as it said"));
        }
    }
    if wip.is_some() {
        let parent = git_text(dir, c, &["rev-parse", "--verify", &format!("{tip}^")])?;
        if parent != head {
            return Err(format!("the node's files commit {tip} is not on its head {head}"));
        }
    }
    git_text(dir, c, &["reset", "--quiet", "--hard", head])?;
    git_text(dir, c, &["clean", "-fdq"])?;
    if let Some(wip) = wip {
        git_text(dir, c, &["restore", &format!("--source={wip}"), "--worktree", "--", ":/"])?;
    }
    Ok(())
}
