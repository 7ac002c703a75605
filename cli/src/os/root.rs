//! Finding the coordination root as git finds its repository: `--root` when given; else the
//! nearest directory, from the current one up, that holds a `.harnery/` directory of this
//! user's own; else the top of the git work tree the current directory is in; else the
//! current directory itself.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The coordination root, canonical: `explicit` when given, else found from the current
/// directory (see the module documentation).
pub fn discover(explicit: Option<&Path>) -> std::io::Result<PathBuf> {
    let root = match explicit {
        Some(root) => std::fs::canonicalize(root)?,
        None => find_from(&std::env::current_dir()?.canonicalize()?),
    };
    check_owner(&root)?;
    Ok(root)
}

/// Refuses a root whose `.harnery/` another user owns, naming the owner: what harn wrote
/// there would be this user's (root's, too), and its owner would then find it unreadable.
/// A root with no `.harnery/` yet is refused as git refuses a repository of "dubious
/// ownership" when the directory itself is another user's: its `harness.toml` and workflows
/// are that user's programs, which harn would run as this one. Git's own `safe.directory`
/// says otherwise for a root the person trusts.
pub fn check_owner(root: &Path) -> std::io::Result<()> {
    let me = rustix::process::geteuid().as_raw();
    let harnery = root.join(".harnery");
    let (path, meta) = match std::fs::symlink_metadata(&harnery) {
        Ok(meta) => (harnery, meta),
        Err(_) => match std::fs::metadata(root) {
            Ok(meta) => (root.to_owned(), meta),
            Err(_) => return Ok(()),
        },
    };
    if meta.uid() == me || (path == root && safe_directory(root)) {
        return Ok(());
    }
    let (owner, you) = (owner_name(meta.uid()), owner_name(me));
    let hint = if path == root {
        format!(
            "; if you trust it, say so as git does: git config --global --add safe.directory {}",
            root.display()
        )
    } else {
        " (run it as that user)".to_owned()
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "{} belongs to {owner}, not to {you}; harn works only in a root of its own user's{hint}",
            path.display()
        ),
    ))
}

/// Refuses a file harn would run or obey (`harness.toml`, a workflow) that another user owns,
/// unless git's `safe.directory` names the root `root`: their file, run as this user, is
/// their authority over this user's account.
pub fn check_file_owner(root: &Path, file: &Path, what: &str) -> Result<(), String> {
    let me = rustix::process::geteuid().as_raw();
    let Ok(meta) = std::fs::metadata(file) else { return Ok(()) };
    if meta.uid() == me || safe_directory(root) {
        return Ok(());
    }
    Err(format!(
        "{what} {} belongs to {}, not to {}: harn runs nothing of another user's; if you trust \
         it, say so as git does: git config --global --add safe.directory {}",
        file.display(),
        owner_name(meta.uid()),
        owner_name(me),
        root.display()
    ))
}

fn owner_name(uid: u32) -> String {
    match crate::os::user::user_name(uid) {
        Some(name) => format!("{name} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

/// True when git's own configuration (global or system, never a repository's) lists `dir` in
/// `safe.directory`, or `*`: the person said, as git asks, that they trust it.
fn safe_directory(dir: &Path) -> bool {
    let out = std::process::Command::new("git")
        .args(["config", "--includes", "--get-all", "safe.directory"])
        .current_dir("/")
        .env_remove("GIT_DIR")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let Ok(out) = out else { return false };
    let wanted = dir.display().to_string();
    String::from_utf8_lossy(&out.stdout).lines().any(|line| {
        let line = line.trim().trim_end_matches('/');
        line == "*"
            || line == wanted
            || line
                .strip_suffix("/*")
                .is_some_and(|prefix| wanted.starts_with(&format!("{prefix}/")))
    })
}

/// The root for a process whose current directory is `start` (canonical).
pub fn find_from(start: &Path) -> PathBuf {
    let me = rustix::process::geteuid().as_raw();
    // A `.harnery/` that is a real directory of this user's: one planted by someone else
    // higher up (a shared /tmp, a parent owned by another account) is passed over, as git
    // passes over a repository of dubious ownership.
    let ours = |dir: &Path| {
        std::fs::symlink_metadata(dir.join(".harnery"))
            .is_ok_and(|m| m.file_type().is_dir() && m.uid() == me)
    };
    if let Some(found) = start.ancestors().find(|d| ours(d)) {
        return found.to_path_buf();
    }
    // `.git` is a directory in a repository and a file in a linked worktree.
    let git = |dir: &Path| std::fs::symlink_metadata(dir.join(".git")).is_ok();
    match start.ancestors().find(|d| git(d)) {
        Some(top) => top.to_path_buf(),
        None => start.to_path_buf(),
    }
}

/// For a verb that only reads: `Err` with where harn looked when `root` holds no `.harnery/`
/// yet, so an empty table is never mistaken for an empty ledger. `explicit` is whether
/// `--root` named it.
pub fn require_ledger(root: &Path, explicit: bool) -> Result<(), String> {
    if std::fs::symlink_metadata(root.join(".harnery")).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    if explicit {
        return Err(format!(
            "no harn root at {}: it has no .harnery/ (make one with `harn init --root {0}`)",
            root.display()
        ));
    }
    let start = std::env::current_dir().and_then(|d| d.canonicalize());
    let start = start.as_deref().unwrap_or(root);
    let top = if root == start {
        String::new()
    } else {
        format!(", nor at the top of its git work tree {}", root.display())
    };
    Err(format!(
        "no harn root found: no .harnery/ in {} or any directory above it{top}; \
         make one with `harn init`, or name one with --root DIR",
        start.display()
    ))
}

/// `.harnery/.gitignore`: harn's records stay out of the repository.
pub const GITIGNORE: &str = "# harn's records of this root: kept out of the repository.\n*\n";

/// Writes `.harnery/.gitignore` when it is missing (a root begun by a create, not by `harn
/// init`), so git never shows harn's records as untracked files.
pub fn keep_out_of_git(root: &Path) -> std::io::Result<()> {
    let dir = crate::os::private::Dir::open(root, ".harnery", false)?;
    match dir.create_new(".gitignore", GITIGNORE.as_bytes()) {
        Ok(()) => dir.sync(),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// `path` as an absolute path: `~` and `~/…` in the home directory, a relative path in the
/// root, without a trailing `/`.
pub fn resolve(root: &std::path::Path, path: &str) -> String {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let resolved = match (path.strip_prefix('~'), &home) {
        (Some(""), Some(h)) => h.clone(),
        (Some(rest), Some(h)) if rest.starts_with('/') => h.join(rest.trim_start_matches('/')),
        _ if path.starts_with('/') => std::path::PathBuf::from(path),
        _ => root.join(path),
    };
    let text = resolved.display().to_string();
    match text.trim_end_matches('/') {
        "" => "/".to_owned(),
        t => t.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::find_from;

    #[test]
    fn the_nearest_harnery_wins_then_the_git_top_then_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        let deep = top.join("repo/src/module");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(find_from(&deep), deep, "nothing above: the start itself");
        std::fs::create_dir(top.join("repo/.git")).unwrap();
        assert_eq!(find_from(&deep), top.join("repo"), "the git top");
        std::fs::create_dir(top.join("repo/src/.harnery")).unwrap();
        assert_eq!(find_from(&deep), top.join("repo/src"), "the nearest .harnery");
        assert_eq!(find_from(&top.join("repo")), top.join("repo"), "not below the start");
    }

    #[test]
    fn a_harnery_that_is_a_symlink_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(top.join("a/b")).unwrap();
        std::fs::create_dir(top.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(top.join("elsewhere"), top.join("a/.harnery")).unwrap();
        assert_eq!(find_from(&top.join("a/b")), top.join("a/b"));
    }
}
