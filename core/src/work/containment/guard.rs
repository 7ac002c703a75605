//! What a run must not change although it may write around it: the files git or harn would
//! later execute or obey on their own, without a person (decision record 0010). `guard`
//! decides the list from the workspace's git layout and the files harn runs from; the shell
//! binds each one read-only where a writable path holds it, and digests all of them before
//! and after every segment, so a change on a machine that cannot hold them is still reported.

/// Where git keeps what it executes for a workspace, as the shell found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GitLayout {
    /// No `.git` in the workspace.
    Absent {
        /// Where one would be made.
        dot_git: String,
    },
    /// `.git` is the repository's own directory.
    Repository {
        /// That directory.
        dot_git: String,
    },
    /// `.git` is the repository harn made for the run (its own object store, config, hooks
    /// and refs): all of it the run's, nothing of it ever executed outside the run.
    Own {
        /// That directory.
        dot_git: String,
    },
    /// `.git` is a file naming a linked worktree's directory (a worktree made by
    /// `--isolation worktree`).
    Linked {
        /// The `.git` file in the workspace.
        dot_git: String,
        /// The worktree's own directory in the repository (`<common>/worktrees/<name>`).
        git_dir: String,
        /// The repository's common directory.
        common: String,
    },
}

/// What a run must not change, and what of git it may.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Guard {
    /// Paths that stay read-only to the run (each with everything below it).
    pub readonly: Vec<String>,
    /// Paths of a linked worktree's repository the run may write so that its agent can
    /// commit: the object store, the `harn/` branches and their logs, the worktree's own
    /// directory.
    pub writable: Vec<String>,
    /// Every path whose content is compared before and after a segment: what of the
    /// read-only ones git or harn executes or obeys (of a repository's `.git/`, its hooks,
    /// `config` and `info/`, not its objects), and the ones a run could create (a `.git`
    /// where there is none, a configuration file harn reads that does not exist yet).
    pub watched: Vec<String>,
}

/// Decides the guard of a run working in `workspace` of the coordination root `root`:
///
/// - the root's `.harnery/` (every record harn trusts);
/// - git: a repository's whole `.git/` when the workspace is the repository itself (hooks,
///   `config` and `info/` run or steer git, and `.git` renamed away could be replaced by a
///   planted one); in a linked worktree, the `.git` file and the worktree directory's
///   `commondir` and `gitdir` (which say which repository's hooks run), the repository's
///   `hooks/`, `config`, `info/` and `modules/`, and for writing only the object store, the
///   `harn/` branches and the worktree's own directory;
/// - `files`: the root's `harness.toml`, the programs it names inside the root, and the
///   run's own frozen workflow.
pub fn guard(root: &str, git: &GitLayout, files: &[String]) -> Guard {
    let root = root.trim_end_matches('/');
    let mut g = Guard::default();
    let hold = |g: &mut Guard, path: String| {
        if !g.readonly.contains(&path) {
            g.watched.push(path.clone());
            g.readonly.push(path);
        }
    };
    // Its records are checked by their own rules, and a contained run cannot reach them.
    g.readonly.push(format!("{root}/.harnery"));
    match git {
        GitLayout::Absent { dot_git } => g.watched.push(dot_git.clone()),
        GitLayout::Own { .. } => {}
        GitLayout::Repository { dot_git } => {
            g.readonly.push(dot_git.clone());
            for name in ["hooks", "config", "info"] {
                g.watched.push(format!("{dot_git}/{name}"));
            }
        }
        GitLayout::Linked { dot_git, git_dir, common } => {
            hold(&mut g, dot_git.clone());
            for name in ["commondir", "gitdir"] {
                hold(&mut g, format!("{git_dir}/{name}"));
            }
            for name in ["hooks", "config", "info", "modules"] {
                hold(&mut g, format!("{common}/{name}"));
            }
            // Read by git where the repository's config turns worktree configuration on: held
            // like the repository's own config where it exists; a run that makes it is
            // reported, and its item held for a person (decision record 0013).
            hold(&mut g, format!("{git_dir}/config.worktree"));
            for name in ["objects", "refs/heads/harn", "logs/refs/heads/harn"] {
                g.writable.push(format!("{common}/{name}"));
            }
            g.writable.push(git_dir.clone());
        }
    }
    for file in files {
        hold(&mut g, file.trim_end_matches('/').to_owned());
    }
    g
}

/// What of each repository nested in a workspace (a `.git` below it, not its own) is watched:
/// what git executes or obeys there, which a person's next `git status` in it would run.
pub fn nested_watch(nested: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for dot_git in nested {
        for name in ["config", "hooks", "info"] {
            out.push(format!("{dot_git}/{name}"));
        }
    }
    out
}

/// The repositories found after a segment that were not there before it: each was made by
/// the run, and is a guarded change whatever it holds.
pub fn new_repositories(before: &[String], after: &[String]) -> Vec<String> {
    after.iter().filter(|a| !before.contains(a)).cloned().collect()
}

/// One guarded path as a segment found it: its digest, `None` when it does not exist.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Digested {
    /// The path.
    pub path: String,
    /// SHA-256 over its content (a directory: its entries' names, kinds, modes and
    /// contents, in order), or `None` when it does not exist.
    pub sha256: Option<String>,
}

/// What changed between two looks at the same guarded paths: each path whose digest differs,
/// with both digests.
pub fn changed(
    before: &[Digested],
    after: &[Digested],
) -> Vec<(String, Option<String>, Option<String>)> {
    let mut out = Vec::new();
    for b in before {
        let a = after.iter().find(|a| a.path == b.path).and_then(|a| a.sha256.clone());
        if a != b.sha256 {
            out.push((b.path.clone(), b.sha256.clone(), a));
        }
    }
    out
}

/// One line of `.harnery/guarded.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event")]
pub enum GuardRecord {
    /// A run segment ended with a guarded path changed.
    #[serde(rename = "guarded.changed")]
    Changed {
        /// The run.
        run_id: String,
        /// Its work item.
        work_id: String,
        /// The path.
        path: String,
        /// Its digest before the segment (`None`: it did not exist).
        before: Option<String>,
        /// Its digest after.
        after: Option<String>,
    },
    /// A person accepted what a path holds now, after reviewing it.
    #[serde(rename = "guarded.accepted")]
    Accepted {
        /// The path.
        path: String,
        /// Its digest when accepted.
        sha256: Option<String>,
        /// Who accepted it.
        by: String,
    },
}

/// The changes runs made to `path` that no person has accepted since, oldest first.
pub fn pending<'a>(records: &'a [GuardRecord], path: &str) -> Vec<&'a GuardRecord> {
    let mut out = Vec::new();
    for r in records {
        match r {
            GuardRecord::Changed { path: p, .. } if p == path => out.push(r),
            GuardRecord::Accepted { path: p, .. } if p == path => out.clear(),
            _ => {}
        }
    }
    out
}

/// The changes runs of work item `work_id` made that no person has accepted since, each
/// path's oldest first: while there is one, the item is neither accepted nor landed unless a
/// person confirms it.
pub fn pending_of<'a>(records: &'a [GuardRecord], work_id: &str) -> Vec<&'a GuardRecord> {
    let mut paths: Vec<&str> = Vec::new();
    for r in records {
        if let GuardRecord::Changed { work_id: w, path, .. } = r {
            if w == work_id && !paths.contains(&path.as_str()) {
                paths.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for path in paths {
        out.extend(
            pending(records, path)
                .into_iter()
                .filter(|r| matches!(r, GuardRecord::Changed { work_id: w, .. } if w == work_id)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::within;
    use super::*;

    /// The guarded paths that lie within one of `writable`, so that only a read-only bind in a
    /// mount namespace keeps them: Landlock allows whole subtrees.
    fn held_by_binds(guard: &Guard, writable: &[String]) -> Vec<String> {
        guard.readonly.iter().filter(|p| writable.iter().any(|w| within(p, w))).cloned().collect()
    }

    #[test]
    fn a_repository_workspace_holds_its_whole_git_directory() {
        let git = GitLayout::Repository { dot_git: "/r/.git".into() };
        let g = guard("/r", &git, &["/r/harness.toml".into(), "/r/wf.sh".into()]);
        assert_eq!(g.readonly, ["/r/.harnery", "/r/.git", "/r/harness.toml", "/r/wf.sh"]);
        assert_eq!(
            g.watched,
            ["/r/.git/hooks", "/r/.git/config", "/r/.git/info", "/r/harness.toml", "/r/wf.sh"]
        );
        assert!(g.writable.is_empty());
        assert_eq!(held_by_binds(&g, &["/r".into(), "/tmp/t".into()]), g.readonly);
        assert_eq!(held_by_binds(&g, &["/r/sub".into()]), Vec::<String>::new());
    }

    #[test]
    fn a_linked_worktree_may_commit_but_not_change_what_git_runs() {
        let git = GitLayout::Linked {
            dot_git: "/w/it/.git".into(),
            git_dir: "/r/.git/worktrees/it".into(),
            common: "/r/.git".into(),
        };
        let g = guard("/r", &git, &[]);
        for p in ["/w/it/.git", "/r/.git/worktrees/it/commondir", "/r/.git/hooks", "/r/.git/config"]
        {
            assert!(g.readonly.iter().any(|r| r == p), "{p}: {g:?}");
        }
        assert!(g.watched.contains(&"/r/.git/worktrees/it/config.worktree".to_owned()));
        assert_eq!(
            g.writable,
            [
                "/r/.git/objects",
                "/r/.git/refs/heads/harn",
                "/r/.git/logs/refs/heads/harn",
                "/r/.git/worktrees/it"
            ]
        );
        let writable = [&["/w/it".to_owned()][..], &g.writable].concat();
        let binds = held_by_binds(&g, &writable);
        assert_eq!(
            binds,
            [
                "/w/it/.git",
                "/r/.git/worktrees/it/commondir",
                "/r/.git/worktrees/it/gitdir",
                "/r/.git/worktrees/it/config.worktree"
            ],
            "the hooks and config are outside every writable path: Landlock keeps them"
        );
    }

    #[test]
    fn a_missing_git_directory_is_watched_not_held() {
        let g = guard("/r", &GitLayout::Absent { dot_git: "/r/.git".into() }, &[]);
        assert_eq!(g.readonly, ["/r/.harnery"]);
        assert_eq!(g.watched, ["/r/.git"]);
    }

    #[test]
    fn changes_name_each_path_with_both_digests() {
        let seen =
            |p: &str, d: Option<&str>| Digested { path: p.into(), sha256: d.map(Into::into) };
        let before = [seen("/a", Some("1")), seen("/b", None), seen("/c", Some("3"))];
        let after = [seen("/a", Some("1")), seen("/b", Some("2")), seen("/c", None)];
        assert_eq!(
            changed(&before, &after),
            [
                ("/b".to_owned(), None, Some("2".to_owned())),
                ("/c".to_owned(), Some("3".to_owned()), None)
            ]
        );
        assert!(changed(&before, &before).is_empty());
    }

    #[test]
    fn a_change_is_pending_until_a_person_accepts_the_path() {
        let changed = |run: &str, path: &str| GuardRecord::Changed {
            run_id: run.into(),
            work_id: "w".into(),
            path: path.into(),
            before: None,
            after: Some("1".into()),
        };
        let accepted =
            |path: &str| GuardRecord::Accepted { path: path.into(), sha256: None, by: "u".into() };
        let log = [changed("r1", "/h"), changed("r2", "/x"), accepted("/h"), changed("r3", "/h")];
        assert_eq!(pending(&log, "/h"), [&log[3]]);
        assert_eq!(pending(&log, "/x"), [&log[1]]);
        assert!(pending(&log[..3], "/h").is_empty());
        // By item: w made every change above; another item's change is not w's.
        let other = GuardRecord::Changed {
            run_id: "r9".into(),
            work_id: "v".into(),
            path: "/y".into(),
            before: None,
            after: None,
        };
        let mixed = [changed("r1", "/h"), other, changed("r2", "/x"), accepted("/h")];
        assert_eq!(pending_of(&mixed, "w"), [&mixed[2]]);
        assert_eq!(pending_of(&mixed, "v"), [&mixed[1]]);
        assert!(pending_of(&mixed[..1], "u").is_empty());
        let line = serde_json::to_value(&log[2]).unwrap();
        assert_eq!(line["event"], "guarded.accepted");
    }
}
