//! `--isolation worktree` with the real binary and real git: each item gets its own worktree
//! on `harn/<id>` beside the repository, two items running at once edit the same file
//! without conflict, a retry finds its item's worktree again, the proof names the base and
//! final commits and the diff, and the repository's own tree and branches are untouched.

use crate::cli::{harn_bin, json, text};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// Appends its item's id to `shared.txt`, waits until every item named in `$PARTIES` has
/// started, commits, and passes. `fail-once` items leave an uncommitted file and fail first;
/// `dirty` items pass without committing.
const WORKFLOW: &str = r#"#!/bin/sh
read -r start
echo "$HARN_WORK_ID" >> shared.txt
touch "$BARRIER/$HARN_WORK_ID"
for i in $(seq 1 200); do
  all=1
  for p in $PARTIES; do [ -e "$BARRIER/$p" ] || all=0; done
  [ $all = 1 ] && break
  sleep 0.05
done
case "$HARN_WORK_ID" in fail-once*)
  earlier=$(git for-each-ref --format='%(objectname)' refs/harn/attempts/ | head -n 1)
  if [ -z "$earlier" ]; then
    echo first > left.txt
    echo '{"op":"result","ok":false,"error":"first attempt fails"}'
    exit 1
  fi
  # A retry starts from the base; what the first attempt left is there to build on.
  git checkout -q "$earlier" -- left.txt || exit 5 ;;
dirty*)
  echo '{"op":"evidence","kind":"test","status":"passed","label":"edited","acceptanceIds":["accept-1"]}'
  echo '{"op":"result","ok":true,"summary":"edited, not committed"}'
  exit 0 ;;
esac
git add -A >/dev/null && git commit -qm "$HARN_WORK_ID" || exit 3
echo '{"op":"evidence","kind":"test","status":"passed","label":"edited","acceptanceIds":["accept-1"]}'
echo '{"op":"result","ok":true,"summary":"edited"}'
"#;

pub(crate) struct Repo {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) barrier: tempfile::TempDir,
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).envs(identity()).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn identity() -> Vec<(&'static str, &'static str)> {
    vec![
        ("GIT_AUTHOR_NAME", "t"),
        ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
        ("GIT_COMMITTER_NAME", "t"),
        ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
    ]
}

impl Repo {
    pub(crate) fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let barrier = tempfile::tempdir().unwrap();
        let r = dir.path().join("repo");
        std::fs::create_dir_all(r.join(".harnery")).unwrap();
        git(&r, &["init", "-q", "-b", "main"]);
        std::fs::write(r.join("shared.txt"), "base\n").unwrap();
        std::fs::write(r.join("wf.sh"), WORKFLOW).unwrap();
        std::fs::set_permissions(
            r.join("wf.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(r.join(".gitignore"), ".harnery/\n").unwrap();
        let config = serde_json::json!({"containment": {"writable": [barrier.path()]}});
        std::fs::write(r.join(".harnery/config.json"), config.to_string()).unwrap();
        git(&r, &["add", "-A"]);
        git(&r, &["commit", "-qm", "base"]);
        Repo { dir, barrier }
    }

    pub(crate) fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("repo")
    }

    pub(crate) fn command(&self, args: &[&str], parties: &str) -> Command {
        let mut cmd = Command::new(harn_bin());
        cmd.args(args)
            .arg("--root")
            .arg(self.root())
            .envs(identity())
            .env("BARRIER", self.barrier.path())
            .env("PARTIES", parties);
        cmd
    }

    pub(crate) fn harn(&self, args: &[&str], parties: &str) -> Output {
        self.command(args, parties).output().unwrap()
    }

    pub(crate) fn create(&self, id: &str) {
        let args = ["work", "create", id, "wf.sh", "--id", id, "--objective", "edit"];
        let out = self.harn(&[&args[..], &["--accept", "edited"]].concat(), "");
        assert!(out.status.success(), "{}", text(&out));
    }

    fn proof(&self, run: &str) -> Value {
        let path = self.root().join(format!(".harnery/workflows/{run}/proof.json"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }
}

pub(crate) const RUN: [&str; 4] = ["work", "run", "--isolation", "worktree"];

#[test]
fn two_items_in_parallel_worktrees_edit_the_same_file_and_their_proofs_name_their_commits() {
    let repo = Repo::new();
    let base = git(&repo.root(), &["rev-parse", "HEAD"]);
    for id in ["a", "b"] {
        repo.create(id);
    }
    let children: Vec<_> = ["a", "b"]
        .iter()
        .map(|id| {
            let args = [&RUN[..2], &[*id][..], &RUN[2..], &["--json"][..]].concat();
            let mut cmd = repo.command(&args, "a b");
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut commits = Vec::new();
    for (id, child) in ["a", "b"].iter().zip(children) {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out));
        let run = json(&out)["run_id"].as_str().unwrap().to_owned();
        let ws = repo.proof(&run)["workspace"].clone();
        assert_eq!(ws["branch"], format!("harn/{id}"), "{ws}");
        assert_eq!(ws["base_commit"], base.as_str(), "{ws}");
        let head = git(&repo.root(), &["rev-parse", &format!("harn/{id}")]);
        assert_eq!(ws["final_commit"], head.as_str(), "{ws}");
        assert_eq!(
            (ws["files_changed"].as_u64(), ws["uncommitted"].as_bool()),
            (Some(1), Some(false))
        );
        assert!(
            ws["diff_bytes"].as_u64() > Some(0) && ws["diff_sha256"].as_str().unwrap().len() == 64
        );
        let expected = repo.dir.path().join(format!("repo.worktrees/{id}"));
        assert_eq!(ws["path"], std::fs::canonicalize(&expected).unwrap().display().to_string());
        let file = git(&repo.root(), &["show", &format!("harn/{id}:shared.txt")]);
        assert_eq!(file, format!("base\n{id}"), "each branch holds only its own edit");
        commits.push(head);
    }
    assert_ne!(commits[0], commits[1]);
    assert_eq!(std::fs::read_to_string(repo.root().join("shared.txt")).unwrap(), "base\n");
    assert_eq!(git(&repo.root(), &["rev-parse", "main"]), base, "a run never merges");
    let p = json(&repo.harn(&["work", "show", "a", "--json"], ""))["projection"].clone();
    let shown = text(&repo.harn(&["run", "show", p["latest_run_id"].as_str().unwrap()], ""));
    assert!(shown.contains("on harn/a from"), "{shown}");
    assert!(shown.contains(&format!("final      {}", &commits[0][..12])), "{shown}");
    // A path beside the root (`ROOT.worktrees/…`) is shown whole, never cut as if below it.
    // The run's repository is all its own: nothing of it is held read-only.
    let held = shown.lines().filter(|l| l.trim_start().starts_with("read-only"));
    assert!(held.clone().all(|l| !l.contains(".worktrees/")), "{shown}");
    assert!(shown.contains(".worktrees/a"), "{shown}");
}

#[test]
fn a_retry_starts_from_the_items_base_and_reads_what_the_first_attempt_left_under_its_ref() {
    let repo = Repo::new();
    repo.create("fail-once");
    let args = [&RUN[..2], &["fail-once"][..], &RUN[2..], &["--json"][..]].concat();
    let first = repo.harn(&args, "");
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    let run = json(&first)["run_id"].as_str().unwrap().to_owned();
    let ws = repo.proof(&run)["workspace"].clone();
    assert_eq!(ws["uncommitted"], true, "{ws}");
    assert_eq!(ws["files_changed"], 2, "shared.txt and the untracked left.txt: {ws}");
    let retry = [&["work", "retry", "fail-once"][..], &RUN[2..], &["--json"][..]].concat();
    let second = repo.harn(&retry, "");
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    let run2 = json(&second)["run_id"].as_str().unwrap().to_owned();
    let ws2 = repo.proof(&run2)["workspace"].clone();
    assert_eq!(ws2["own"], true, "{ws2}");
    assert_eq!((&ws2["path"], &ws2["base_commit"]), (&ws["path"], &ws["base_commit"]));
    let file = git(&repo.root(), &["show", "harn/fail-once:shared.txt"]);
    assert_eq!(file, "base\nfail-once", "the retry started from the base, not the first's tree");
    let left = git(&repo.root(), &["show", "harn/fail-once:left.txt"]);
    assert_eq!(left, "first", "the retry read what the first attempt left");
    // The first attempt's files came back as objects, under a ref harn owns.
    let kept = git(&repo.root(), &["show", &format!("refs/harn/work/fail-once/{run}:left.txt")]);
    assert_eq!(kept, "first");
}

#[test]
fn worktree_isolation_outside_a_git_repository_is_refused_before_anything_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".harnery")).unwrap();
    std::fs::write(dir.path().join("wf.sh"), WORKFLOW).unwrap();
    let harn = |args: &[&str]| {
        Command::new(harn_bin()).args(args).arg("--root").arg(dir.path()).output().unwrap()
    };
    let out = harn(&["work", "create", "x", "wf.sh", "--id", "x", "--objective", "o"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = harn(&["work", "run", "x", "--isolation", "worktree"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out).contains("not in a git repository"), "{}", text(&out));
    let p = json(&harn(&["work", "show", "x", "--json"]))["projection"].clone();
    assert_eq!(p["attempts_used"], 0, "{p}");
    let out = harn(&["work", "run", "x", "--base", "HEAD"]);
    assert_eq!(out.status.code(), Some(2), "--base without worktree isolation: {}", text(&out));
}

/// In its repository of its own an agent commits, and writes all of that repository (its
/// hooks too), but nothing of the person's: not the hooks, the config, the object store
/// (which it reads through alternates), nor a branch. And no hook of its repository ever
/// runs outside it.
#[test]
fn a_worktree_run_commits_on_its_branch_and_plants_nothing_in_the_shared_git_directory() {
    if harn::work::confine::offer().namespace.is_err() {
        crate::skip::skip("this machine gives runs no namespace");
        return;
    }
    let repo = Repo::new();
    let r = repo.root();
    let planter = r#"#!/bin/sh
read -r start
own=$(git rev-parse --path-format=absolute --git-dir)
objects=$(head -n 1 "$own/objects/info/alternates")
common=$(dirname "$objects")
try() { if sh -c "$2" 2>/dev/null; then echo "$1 ok"; else echo "$1 denied"; fi >> "$BARRIER/report"; }
try hook "printf '#!/bin/sh\ntouch $BARRIER/HOOK-RAN\n' > '$common/hooks/post-checkout' && chmod +x '$common/hooks/post-checkout'"
try config "printf '[core]\n\thooksPath = /tmp\n' >> '$common/config'"
try objects "mkdir -p '$objects/ff' && touch '$objects/ff/planted'"
try other-branch "git --git-dir='$common' update-ref refs/heads/main $(git rev-parse HEAD)"
try own-hook "mkdir -p '$own/hooks' && printf '#!/bin/sh\ntouch $BARRIER/HOOK-RAN\n' > '$own/hooks/post-commit' && chmod +x '$own/hooks/post-commit' && cp '$own/hooks/post-commit' '$own/hooks/reference-transaction'"
echo planted > planted.txt
git add -A >/dev/null && git commit -qm planted || exit 3
echo '{"op":"result","ok":true,"summary":"committed"}'
"#;
    std::fs::write(r.join("plant.sh"), planter).unwrap();
    std::fs::set_permissions(
        r.join("plant.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = repo.harn(&["work", "create", "p", "plant.sh", "--id", "p", "--objective", "o"], "");
    assert!(out.status.success(), "{}", text(&out));
    let out = repo.harn(&[&RUN[..], &["p", "--json"]].concat(), "");
    assert!(out.status.success(), "{}", text(&out));
    let run = json(&out)["run_id"].as_str().unwrap().to_owned();
    let report = std::fs::read_to_string(repo.barrier.path().join("report")).unwrap();
    for what in ["hook", "config", "objects", "other-branch"] {
        assert!(report.contains(&format!("{what} denied")), "{what}: {report}");
    }
    assert!(report.contains("own-hook ok"), "{report}");
    // Its own hook ran for its own commit, inside its wall; harn's bring-back, attestation
    // and everything after never run it.
    let _ = std::fs::remove_file(repo.barrier.path().join("HOOK-RAN"));
    let out = repo.harn(&["work", "accept", "p"], "");
    assert!(out.status.success(), "{}", text(&out));
    let out = repo.harn(&["work", "land", "p"], "");
    assert!(out.status.success(), "{}", text(&out));
    assert!(!repo.barrier.path().join("HOOK-RAN").exists(), "a run's hook ran outside it");
    let ws = repo.proof(&run)["workspace"].clone();
    assert_ne!(ws["final_commit"], ws["base_commit"], "the agent committed: {ws}");
    git(&r, &["checkout", "-q", "-b", "after"]);
    assert!(!repo.barrier.path().join("HOOK-RAN").exists(), "a planted hook ran");
}

/// A worktree run that passed but left its change uncommitted cannot be accepted: nothing
/// it made could ever land. The refusal says what to do.
#[test]
fn a_passing_run_that_left_its_change_uncommitted_is_not_accepted() {
    let repo = Repo::new();
    repo.create("dirty");
    let run = repo.harn(&[&RUN[..2], &["dirty"][..], &RUN[2..]].concat(), "");
    assert!(run.status.success(), "{}", text(&run));
    let accept = repo.harn(&["work", "accept", "dirty"], "");
    assert_eq!(accept.status.code(), Some(1), "{}", text(&accept));
    assert!(text(&accept).contains("uncommitted"), "{}", text(&accept));
    assert!(text(&accept).contains("harn work reopen dirty"), "{}", text(&accept));
    let p = json(&repo.harn(&["work", "show", "dirty", "--json"], ""))["projection"].clone();
    assert_eq!(p["state"], "in_review", "{p}");
}
