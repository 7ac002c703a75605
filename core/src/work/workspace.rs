//! A work item's own git worktree (`--isolation worktree`): where it lives and on which
//! branch, the names harn gives them, and what a run's proof attests about it at its end.

use crate::ids::Id;
use serde::{Deserialize, Serialize};

/// The worktree a run works in, as prepared before it started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    /// The worktree's directory (absolute).
    pub path: String,
    /// Its branch (`harn/<work id>`).
    pub branch: String,
    /// The commit the branch was made from when the item's first attempt made it.
    pub base_commit: String,
    /// The branch that commit was taken from (the repository's current branch, or `--base`
    /// when it names one): where `work land` lands the work unless told otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// The accepted work of the item's prerequisites merged into the branch when it was
    /// made, so the item starts from what it depends on; `base_commit` is then that merge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prerequisites: Vec<MergedPrerequisite>,
    /// With prerequisites merged in: the commit the branch was made from before that, which
    /// the branch it lands on must already hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branched_from: Option<String>,
    /// The repository's git directory, which the run's git commands write (objects, refs,
    /// the worktree's index).
    pub git_dir: String,
    /// True when this attempt found the worktree an earlier attempt made.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
    /// True when the workspace is a repository of the run's own (its own object store,
    /// config, hooks and `HEAD`, borrowing the person's objects read-only), whose work comes
    /// back as verified objects; false for a linked worktree of the person's repository (what
    /// attempts made before, still read).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own: bool,
}

/// A prerequisite's accepted commit a dependent's branch was made with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedPrerequisite {
    /// The prerequisite item.
    pub id: Id,
    /// The commit its accepted proof attests.
    pub commit: String,
    /// True when the base already held it (landed); false when it was merged in.
    pub already_in_base: bool,
}

/// The worktree as the run left it: what the proof attests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attestation {
    /// The worktree, its branch and its base.
    #[serde(flatten)]
    pub workspace: Workspace,
    /// The branch's commit at the end.
    pub final_commit: String,
    /// SHA-256 of the binary diff from the base to the worktree's files at the end,
    /// committed or not, untracked files included.
    pub diff_sha256: String,
    /// That diff's size in bytes; 0 when nothing changed.
    pub diff_bytes: u64,
    /// Files the diff touches.
    pub files_changed: u32,
    /// True when changes were left uncommitted on the branch.
    pub uncommitted: bool,
    /// In a repository of the run's own, left with uncommitted changes: the commit harn made
    /// of the files as the run left them (on top of `final_commit`), brought back with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tip: Option<String>,
}

impl Attestation {
    /// The commit holding the files as the run left them: [`Attestation::tip`] when there is
    /// one, else the final commit.
    pub fn files_commit(&self) -> &str {
        self.tip.as_deref().unwrap_or(&self.final_commit)
    }
}

/// The ref of the person's repository that holds what run `run` of item `id` left (its tip),
/// brought back as verified objects.
pub fn run_ref(id: &Id, run: &str) -> String {
    format!("refs/harn/work/{id}/{run}")
}

/// The ref that pins item `id`'s base in the person's repository, so a `gc` there never drops
/// what a run borrows.
pub fn base_ref(id: &Id) -> String {
    format!("refs/harn/base/{id}")
}

/// The branch of item `id`'s worktree.
pub fn branch(id: &Id) -> String {
    format!("harn/{id}")
}

/// Where the worktrees of a repository at `repo` live when nobody says: a directory beside
/// it, `<repo>.worktrees`.
pub fn default_root(repo: &str) -> String {
    format!("{}.worktrees", repo.trim_end_matches('/'))
}

/// The directory of item `id`'s worktree under `root`.
pub fn path(root: &str, id: &Id) -> String {
    format!("{}/{id}", root.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_items_worktree_is_named_after_it_beside_the_repository() {
        let id = Id::new("fix-parser").unwrap();
        assert_eq!(branch(&id), "harn/fix-parser");
        assert_eq!(default_root("/src/app/"), "/src/app.worktrees");
        assert_eq!(path(&default_root("/src/app"), &id), "/src/app.worktrees/fix-parser");
    }

    #[test]
    fn an_attestation_reads_back_what_it_wrote() {
        let a = Attestation {
            workspace: Workspace {
                path: "/w/a".into(),
                branch: "harn/a".into(),
                base_commit: "b".repeat(40),
                base_branch: None,
                prerequisites: Vec::new(),
                branched_from: None,
                git_dir: "/w/a/.git".into(),
                reused: true,
                own: true,
            },
            final_commit: "c".repeat(40),
            diff_sha256: "d".repeat(64),
            diff_bytes: 12,
            files_changed: 1,
            uncommitted: true,
            tip: Some("e".repeat(40)),
        };
        let back: Attestation = serde_json::from_value(serde_json::to_value(&a).unwrap()).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.files_commit(), "e".repeat(40));
        // An attestation written before repositories of a run's own reads as a linked
        // worktree's, with no tip.
        let mut old = serde_json::to_value(&a).unwrap();
        old.as_object_mut().unwrap().remove("own");
        old.as_object_mut().unwrap().remove("tip");
        let old: Attestation = serde_json::from_value(old).unwrap();
        assert!(!old.workspace.own && old.tip.is_none());
        assert_eq!(old.files_commit(), "c".repeat(40));
    }
}
