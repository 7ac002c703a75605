//! Landing accepted work (`work land`): whether an item's worktree branch may land on its
//! base branch, and how, decided from the item's history, its accepted proof's attestation
//! and what git shows now. Only the commit the accepted proof attests ever lands; anything
//! that moved since the review refuses the land, changing nothing. `driver` is the one order
//! of a land, over a host.

pub mod driver;

use super::events::{EventKind, LandMethod, WorkEvent};
use super::projection::WorkState;
use super::workspace::Attestation;
use crate::ids::Id;

/// The acceptance a land stands on: the latest `work.accepted` of the item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedProof {
    /// The accepted run.
    pub run_id: Id,
    /// The accepted proof's digest.
    pub proof_sha256: String,
}

/// What git shows now, read by the shell just before deciding.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Observed {
    /// The item's branch head; `None` when the branch is gone.
    pub branch_head: Option<String>,
    /// SHA-256 of the binary diff from the attested base to the branch head.
    pub diff_sha256: Option<String>,
    /// The target branch's head; `None` when there is no such branch.
    pub target_head: Option<String>,
    /// A commit of the target branch that already holds this acceptance: the attested commit
    /// itself when it is in the target's history, or a commit whose message names the
    /// accepted proof (a land cut short after it moved the branch, before it was recorded).
    pub already_in_target: Option<String>,
    /// True when the target's head is in the attested commit's history (a fast-forward).
    pub target_behind: bool,
    /// What the branch holds besides the item's own reviewed work that the target does not
    /// hold yet (the commit it was made from, a prerequisite's work), in words; landing it
    /// would bring in what this review did not cover.
    pub base_missing: Option<String>,
    /// The paths the reviewed work changes (from the attested base to the branch head), read
    /// from git's objects.
    pub changed: Vec<String>,
}

/// What `work land` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Landing {
    /// This acceptance already landed: nothing to do.
    Landed {
        /// Where.
        into: String,
        /// As which commit.
        commit: String,
    },
    /// The target already holds it, unrecorded: record it, move nothing.
    Record {
        /// The commit that holds it.
        commit: String,
    },
    /// Move the target from `from` to a commit made by `method`.
    Land {
        /// Fast-forward, merge or squash.
        method: LandMethod,
        /// The target's head the move must start from (compare-and-swap).
        from: String,
        /// The attested commit.
        commit: String,
    },
}

/// The latest acceptance in `events`, if the item was accepted since it was last reopened.
pub fn acceptance(events: &[WorkEvent]) -> Option<AcceptedProof> {
    let last = events.iter().rev().find(|e| {
        matches!(
            e.kind,
            EventKind::Accepted { .. } | EventKind::Reopened { .. } | EventKind::Cancelled
        )
    })?;
    match &last.kind {
        EventKind::Accepted { run_id, proof_sha256, .. } => {
            Some(AcceptedProof { run_id: run_id.clone(), proof_sha256: proof_sha256.clone() })
        }
        _ => None,
    }
}

/// Why a land is refused; nothing was changed. Each says what stands in the way, and what to
/// type next where there is something to type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Only accepted work lands.
    NotAccepted {
        /// The item.
        id: Id,
        /// Its state.
        state: WorkState,
    },
    /// The target is an item's own branch.
    ItemBranch {
        /// The target named.
        into: String,
    },
    /// The item has no current acceptance.
    NoAcceptance {
        /// The item.
        id: Id,
    },
    /// The item was not made in a worktree: there is no branch to land.
    NotWorktree {
        /// The item.
        id: Id,
    },
    /// The attestation records no base branch and none was named.
    NoTargetNamed {
        /// The item.
        id: Id,
    },
    /// The accepted proof attests changes left uncommitted.
    Uncommitted {
        /// The item.
        id: Id,
    },
    /// The item's branch is gone.
    BranchGone {
        /// The branch.
        branch: String,
    },
    /// The item's branch moved after its review.
    BranchMoved {
        /// The item.
        id: Id,
        /// The branch.
        branch: String,
        /// The commit the accepted proof attests.
        attested: String,
        /// Where the branch is now.
        head: String,
    },
    /// The branch's diff is not the reviewed one.
    DiffChanged {
        /// The branch.
        branch: String,
        /// The attested base.
        base: String,
        /// The diff's digest now.
        seen: Option<String>,
        /// The attested digest.
        attested: String,
    },
    /// There is no target branch.
    NoTarget {
        /// The target named.
        into: String,
    },
    /// The target lacks what the branch brings besides the reviewed work.
    BaseMissing {
        /// The item.
        id: Id,
        /// The target.
        into: String,
        /// What it lacks, in words.
        missing: String,
    },
    /// The branch and the target conflict in these files; `landed_by` names the landed work
    /// that changed them.
    Conflict {
        /// The item's branch.
        branch: String,
        /// The target.
        into: String,
        /// The conflicted files.
        files: Vec<String>,
        /// Items whose landed work changed them.
        landed_by: Vec<String>,
    },
    /// The reviewed work changes a root's records (`.harnery/`): never landed, whoever asks.
    TouchesRecords {
        /// The item.
        id: Id,
        /// The paths.
        paths: Vec<String>,
    },
    /// The person's checkout of the target has files the land would write over (untracked
    /// or ignored files at paths the landed work adds).
    WouldOverwrite {
        /// The target.
        into: String,
        /// The checkout.
        checkout: String,
        /// The files.
        paths: Vec<String>,
    },
    /// The target is checked out in a linked worktree: only the repository's own checkout is
    /// updated by a land, never a worktree that could be a run's.
    CheckedOutElsewhere {
        /// The target.
        into: String,
        /// The worktree.
        worktree: String,
    },
    /// Moving the target was refused otherwise (a dirty checkout, a ref that moved, git
    /// failing), in the host's words.
    NotMoved(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotAccepted { id, state } => write!(
                f,
                "{id} is {}: only accepted work lands (harn work accept {id} once its proof is reviewed)",
                serde_json::to_value(state).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
            ),
            Refused::ItemBranch { into } => {
                write!(f, "{into} is an item's branch: land on the branch work is meant for")
            }
            Refused::NoAcceptance { id } => write!(f, "{id} has no acceptance to land"),
            Refused::NotWorktree { id } => write!(
                f,
                "{id} was not made in a worktree (--isolation worktree): there is no branch to land"
            ),
            Refused::NoTargetNamed { id } => {
                write!(f, "name the branch to land {id} on with --into BRANCH")
            }
            Refused::Uncommitted { id } => write!(
                f,
                "the accepted proof of {id} attests changes left uncommitted in its worktree: what \
                 was reviewed is not all in a commit, so no commit lands it; commit them, run \
                 and review again"
            ),
            Refused::BranchGone { branch } => write!(f, "branch {branch} is gone"),
            Refused::BranchMoved { id, branch, attested, head } => write!(
                f,
                "branch {branch} moved after it was reviewed: the accepted proof attests \
                 {attested}, the branch is at {head}; nothing was changed (reopen {id} and review \
                 the new work, or put the branch back)"
            ),
            Refused::DiffChanged { branch, base, seen, attested } => write!(
                f,
                "the changes on {branch} are not the ones reviewed: the diff from {base} has \
                 SHA-256 {}, the accepted proof attests {attested}; nothing was changed",
                seen.as_deref().unwrap_or("(none)")
            ),
            Refused::NoTarget { into } => write!(f, "no branch {into}"),
            Refused::BaseMissing { id, into, missing } => write!(
                f,
                "{into} does not hold {missing}: landing {id} would bring in work its review did \
                 not cover; nothing was changed"
            ),
            Refused::Conflict { branch, into, files, landed_by } => {
                let by = match landed_by.is_empty() {
                    true => String::new(),
                    false => format!(" (landed work that changed them: {})", landed_by.join(", ")),
                };
                write!(
                    f,
                    "landing {branch} on {into} conflicts in {}{by}; nothing was changed (bring \
                     {into} into the branch, run and review again)",
                    files.join(", ")
                )
            }
            Refused::TouchesRecords { id, paths } => write!(
                f,
                "the reviewed work of {id} changes harn's records ({}): work that writes \
                 .harnery/ never lands; nothing was changed (reject it: harn work reject {id} \
                 --feedback \"never write .harnery/\")",
                paths.join(", ")
            ),
            Refused::WouldOverwrite { into, checkout, paths } => write!(
                f,
                "landing on {into} would write over files in {checkout} that git does not track \
                 (untracked or ignored): {}; nothing was changed (move them aside, then land again)",
                paths.join(", ")
            ),
            Refused::CheckedOutElsewhere { into, worktree } => write!(
                f,
                "{into} is checked out in the linked worktree {worktree}: a land updates only the \
                 repository's own checkout; nothing was changed (check out another branch there, \
                 or land with --into another branch)"
            ),
            Refused::NotMoved(why) => f.write_str(why),
        }
    }
}

/// The branch a land goes to: the one named, else the one the item's worktree was made from
/// (its attestation's `base_branch`). Work made outside a worktree has none, and needs none.
pub fn target(
    id: &Id,
    named: Option<&str>,
    attested: Option<&Attestation>,
) -> Result<String, Refused> {
    match (named, attested.and_then(|a| a.workspace.base_branch.as_deref())) {
        (Some(into), _) => Ok(into.to_owned()),
        (None, Some(base)) => Ok(base.to_owned()),
        (None, None) if attested.is_some() => Err(Refused::NoTargetNamed { id: id.clone() }),
        (None, None) => Ok(String::new()),
    }
}

/// Decides what landing item `id` on `into` does. `attested` is the accepted proof's
/// worktree attestation (`None` for work done outside a worktree).
pub fn decide(
    id: &Id,
    state: WorkState,
    events: &[WorkEvent],
    attested: Option<&Attestation>,
    into: &str,
    squash: bool,
    seen: &Observed,
) -> Result<Landing, Refused> {
    if state != WorkState::Succeeded {
        return Err(Refused::NotAccepted { id: id.clone(), state });
    }
    if into.starts_with("harn/") {
        return Err(Refused::ItemBranch { into: into.to_owned() });
    }
    let accepted = acceptance(events).ok_or_else(|| Refused::NoAcceptance { id: id.clone() })?;
    let landed = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Landed { proof_sha256, into, commit, .. }
            if *proof_sha256 == accepted.proof_sha256 =>
        {
            Some((into.clone(), commit.clone()))
        }
        _ => None,
    });
    if let Some((into, commit)) = landed {
        return Ok(Landing::Landed { into, commit });
    }
    let a = attested.ok_or_else(|| Refused::NotWorktree { id: id.clone() })?;
    if a.uncommitted {
        return Err(Refused::Uncommitted { id: id.clone() });
    }
    let branch = &a.workspace.branch;
    let head = seen
        .branch_head
        .as_deref()
        .ok_or_else(|| Refused::BranchGone { branch: branch.clone() })?;
    if head != a.final_commit {
        return Err(Refused::BranchMoved {
            id: id.clone(),
            branch: branch.clone(),
            attested: a.final_commit.clone(),
            head: head.to_owned(),
        });
    }
    if seen.diff_sha256.as_deref() != Some(a.diff_sha256.as_str()) {
        return Err(Refused::DiffChanged {
            branch: branch.clone(),
            base: a.workspace.base_commit.clone(),
            seen: seen.diff_sha256.clone(),
            attested: a.diff_sha256.clone(),
        });
    }
    let records = crate::work::candidate::records_touched(seen.changed.iter().map(String::as_str));
    if !records.is_empty() {
        return Err(Refused::TouchesRecords { id: id.clone(), paths: records });
    }
    let target =
        seen.target_head.as_deref().ok_or_else(|| Refused::NoTarget { into: into.to_owned() })?;
    if let Some(commit) = &seen.already_in_target {
        return Ok(Landing::Record { commit: commit.clone() });
    }
    if let Some(missing) = &seen.base_missing {
        return Err(Refused::BaseMissing {
            id: id.clone(),
            into: into.to_owned(),
            missing: missing.clone(),
        });
    }
    let method = match (squash, seen.target_behind) {
        (true, _) => LandMethod::Squash,
        (false, true) => LandMethod::FastForward,
        (false, false) => LandMethod::Merge,
    };
    Ok(Landing::Land { method, from: target.to_owned(), commit: a.final_commit.clone() })
}

/// What `work prune` does with an item's worktree, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pruning {
    /// Removed: no attempt will use it again.
    Remove(&'static str),
    /// Kept.
    Keep(&'static str),
}

/// Whether an item's worktree may be removed by `work prune`. `state` is `None` for a
/// worktree of no known item; `landed` is true when the item's current acceptance landed.
pub fn prunable(state: Option<WorkState>, landed: bool) -> Pruning {
    match state {
        None => Pruning::Remove("no work item has it"),
        Some(WorkState::Cancelled) => Pruning::Remove("its item was cancelled"),
        Some(WorkState::Succeeded) if landed => Pruning::Remove("its item landed"),
        Some(WorkState::Succeeded) => Pruning::Keep("accepted, not landed yet (harn work land)"),
        Some(_) => Pruning::Keep("its item may run again"),
    }
}

/// True when `events` record a land of the item's current acceptance.
pub fn landed(events: &[WorkEvent]) -> bool {
    super::projection::current_acceptance_landed(events)
}

/// The message of a merge or squash commit made for item `id`: its title, then trailers that
/// name the item, the run and the accepted proof (how a land cut short is found again).
pub fn message(id: &Id, title: &str, accepted: &AcceptedProof) -> String {
    format!(
        "Land {id}: {title}\n\nHarn-Work-Item: {id}\nHarn-Run: {}\nHarn-Proof: {}\n",
        accepted.run_id, accepted.proof_sha256
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::WallTime;
    use crate::work::workspace::Workspace;

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    fn event(seq: u64, kind: EventKind) -> WorkEvent {
        WorkEvent {
            schema_version: 1,
            work_id: id("parser"),
            seq,
            ts: WallTime(seq as i64),
            actor: "ana".into(),
            reason: None,
            kind,
        }
    }

    fn accepted(proof: &str) -> EventKind {
        EventKind::Accepted {
            run_id: id("wf-1"),
            attempt: 1,
            proof_sha256: proof.into(),
            dispositions: Vec::new(),
        }
    }

    fn attestation() -> Attestation {
        Attestation {
            workspace: Workspace {
                path: "/src/app.worktrees/parser".into(),
                branch: "harn/parser".into(),
                base_commit: "b".repeat(40),
                base_branch: Some("main".into()),
                prerequisites: Vec::new(),
                branched_from: None,
                git_dir: "/src/app/.git".into(),
                reused: false,
                own: false,
            },
            final_commit: "c".repeat(40),
            diff_sha256: "d".repeat(64),
            diff_bytes: 10,
            files_changed: 1,
            uncommitted: false,
            tip: None,
        }
    }

    fn seen() -> Observed {
        Observed {
            branch_head: Some("c".repeat(40)),
            diff_sha256: Some("d".repeat(64)),
            target_head: Some("b".repeat(40)),
            already_in_target: None,
            target_behind: true,
            base_missing: None,
            changed: vec!["src/parser.rs".into()],
        }
    }

    fn land(
        events: &[WorkEvent],
        a: Option<&Attestation>,
        squash: bool,
        s: &Observed,
    ) -> Result<Landing, Refused> {
        decide(&id("parser"), WorkState::Succeeded, events, a, "main", squash, s)
    }

    #[test]
    fn the_target_is_the_one_named_else_the_worktree_s_base_branch() {
        let a = attestation();
        assert_eq!(target(&id("p"), Some("release"), Some(&a)), Ok("release".into()));
        assert_eq!(target(&id("p"), None, Some(&a)), Ok("main".into()));
        let mut bare = a.clone();
        bare.workspace.base_branch = None;
        let refused = target(&id("p"), None, Some(&bare));
        assert_eq!(refused, Err(Refused::NoTargetNamed { id: id("p") }));
        assert_eq!(target(&id("p"), None, None), Ok(String::new()), "nothing to land, no target");
    }

    #[test]
    fn the_attested_commit_lands_by_fast_forward_merge_or_squash() {
        let events =
            [event(1, EventKind::Created { intent_sha256: None }), event(2, accepted("p"))];
        let a = attestation();
        let ff = land(&events, Some(&a), false, &seen()).unwrap();
        let from = "b".repeat(40);
        let commit = "c".repeat(40);
        assert_eq!(
            ff,
            Landing::Land {
                method: LandMethod::FastForward,
                from: from.clone(),
                commit: commit.clone()
            }
        );
        let diverged = Observed { target_behind: false, ..seen() };
        let merge = land(&events, Some(&a), false, &diverged).unwrap();
        assert_eq!(
            merge,
            Landing::Land { method: LandMethod::Merge, from: from.clone(), commit: commit.clone() }
        );
        let squash = land(&events, Some(&a), true, &seen()).unwrap();
        assert_eq!(squash, Landing::Land { method: LandMethod::Squash, from, commit });
    }

    #[test]
    fn anything_that_moved_since_the_review_refuses_the_land() {
        let events =
            [event(1, EventKind::Created { intent_sha256: None }), event(2, accepted("p"))];
        let a = attestation();
        let moved = Observed { branch_head: Some("e".repeat(40)), ..seen() };
        let why = land(&events, Some(&a), false, &moved).unwrap_err().to_string();
        assert!(
            why.contains("moved after it was reviewed") && why.contains(&"e".repeat(40)),
            "{why}"
        );
        let rewritten = Observed { diff_sha256: Some("f".repeat(64)), ..seen() };
        assert!(land(&events, Some(&a), false, &rewritten)
            .unwrap_err()
            .to_string()
            .contains("not the ones reviewed"));
        let gone = Observed { branch_head: None, ..seen() };
        assert!(land(&events, Some(&a), false, &gone).unwrap_err().to_string().contains("is gone"));
        let dirty = Attestation { uncommitted: true, ..attestation() };
        assert!(land(&events, Some(&dirty), false, &seen())
            .unwrap_err()
            .to_string()
            .contains("uncommitted"));
        assert!(land(&events, None, false, &seen())
            .unwrap_err()
            .to_string()
            .contains("not made in a worktree"));
        let unreviewed = Observed { base_missing: Some("the commit b".into()), ..seen() };
        let why = land(&events, Some(&a), false, &unreviewed).unwrap_err().to_string();
        assert!(why.contains("review did not cover"), "{why}");
        let onto_item = decide(
            &id("parser"),
            WorkState::Succeeded,
            &events,
            Some(&a),
            "harn/x",
            false,
            &seen(),
        );
        assert!(onto_item.unwrap_err().to_string().contains("an item's branch"));
        // Reviewed work that writes a root's records never lands, whatever else holds.
        let records =
            Observed { changed: vec!["NOTES.md".into(), ".harnery/config.json".into()], ..seen() };
        let why = land(&events, Some(&a), false, &records).unwrap_err();
        assert!(
            matches!(&why, Refused::TouchesRecords { paths, .. } if paths == &[".harnery/config.json"]),
            "{why:?}"
        );
        let no_target = Observed { target_head: None, ..seen() };
        assert!(land(&events, Some(&a), false, &no_target)
            .unwrap_err()
            .to_string()
            .contains("no branch main"));
        let why =
            decide(&id("parser"), WorkState::InReview, &events, Some(&a), "main", false, &seen())
                .unwrap_err()
                .to_string();
        assert!(why.contains("harn work accept parser"), "{why}");
    }

    #[test]
    fn a_land_happens_once_and_one_cut_short_is_recorded_not_repeated() {
        let landed = EventKind::Landed {
            run_id: id("wf-1"),
            proof_sha256: "p".into(),
            into: "main".into(),
            commit: "m".repeat(40),
            method: LandMethod::Merge,
        };
        let events = [
            event(1, EventKind::Created { intent_sha256: None }),
            event(2, accepted("p")),
            event(3, landed),
        ];
        let again = land(&events, Some(&attestation()), false, &seen()).unwrap();
        assert_eq!(again, Landing::Landed { into: "main".into(), commit: "m".repeat(40) });
        // Reopened and accepted again: the new acceptance lands on its own.
        let mut later = events.to_vec();
        later.push(event(4, EventKind::Reopened { findings: Vec::new(), feedback: None }));
        later.push(event(5, accepted("q")));
        assert!(matches!(
            land(&later, Some(&attestation()), false, &seen()),
            Ok(Landing::Land { .. })
        ));
        // The branch already holds it, unrecorded: record, move nothing.
        let cut = [event(1, EventKind::Created { intent_sha256: None }), event(2, accepted("p"))];
        let found = Observed { already_in_target: Some("m".repeat(40)), ..seen() };
        assert_eq!(
            land(&cut, Some(&attestation()), false, &found).unwrap(),
            Landing::Record { commit: "m".repeat(40) }
        );
    }

    #[test]
    fn only_worktrees_no_attempt_will_use_again_are_pruned() {
        let removed = |p: Pruning| matches!(p, Pruning::Remove(_));
        assert!(removed(prunable(None, false)));
        assert!(removed(prunable(Some(WorkState::Cancelled), false)));
        assert!(removed(prunable(Some(WorkState::Succeeded), true)));
        let kept = prunable(Some(WorkState::Succeeded), false);
        assert!(matches!(kept, Pruning::Keep(why) if why.contains("harn work land")));
        for state in [WorkState::Ready, WorkState::Blocked, WorkState::InReview, WorkState::Running]
        {
            assert!(!removed(prunable(Some(state), false)), "{state:?}");
        }
        let landed_event = EventKind::Landed {
            run_id: id("wf-1"),
            proof_sha256: "p".into(),
            into: "main".into(),
            commit: "c".repeat(40),
            method: LandMethod::FastForward,
        };
        let mut events =
            vec![event(1, EventKind::Created { intent_sha256: None }), event(2, accepted("p"))];
        assert!(!landed(&events));
        events.push(event(3, landed_event));
        assert!(landed(&events));
        events.push(event(4, EventKind::Reopened { findings: Vec::new(), feedback: None }));
        events.push(event(5, accepted("q")));
        assert!(!landed(&events), "a later acceptance has not landed");
    }

    #[test]
    fn only_an_acceptance_since_the_last_reopen_counts() {
        let events = [
            event(1, EventKind::Created { intent_sha256: None }),
            event(2, accepted("p")),
            event(3, EventKind::Reopened { findings: Vec::new(), feedback: None }),
        ];
        assert_eq!(acceptance(&events), None);
        assert_eq!(acceptance(&events[..2]).unwrap().proof_sha256, "p");
        let text = message(&id("parser"), "Parse tabs", &acceptance(&events[..2]).unwrap());
        assert!(text.starts_with("Land parser: Parse tabs\n\n"), "{text}");
        assert!(text.contains("Harn-Proof: p\n"), "{text}");
    }
}
