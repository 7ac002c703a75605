//! Every path under the coordination root's `.harnery/`, relative to the root: the one place
//! that names them, so a record's location is never spelled twice.

use crate::ids::Id;

/// The directory every record lives in.
pub const HARNERY: &str = ".harnery";
/// Work items, one directory each.
pub const WORK: &str = ".harnery/work";
/// Workflow runs, one directory each.
pub const WORKFLOWS: &str = ".harnery/workflows";
/// Approvals, one directory each, and the rulings journal.
pub const APPROVALS: &str = ".harnery/approvals";
/// Goals, one directory each.
pub const GOALS: &str = ".harnery/supervisors";
/// The supervisor service's files.
pub const SERVICE: &str = ".harnery/supervisor-service";
/// The harness daemon's files.
pub const HARNESS: &str = ".harnery/harness";
/// The records of run segments in progress.
pub const RUNNING: &str = ".harnery/running";
/// The agent harnesses and containment configuration.
pub const CONFIG: &str = ".harnery/config.json";
/// Guarded paths runs changed, and the changes people accepted
/// (`work::containment::guard::GuardRecord`).
pub const GUARDED: &str = ".harnery/guarded.jsonl";

/// Derived files, rebuilt from the journals whenever missing, stale or damaged (never a
/// source of truth), and the change log that tells their readers what changed (`index`).
pub(crate) const INDEX: &str = ".harnery/index";
/// The change log: one line per work item or goal a writer is about to change (`index`).
pub const CHANGES: &str = ".harnery/index/changes";
/// The index of work projections (`work::index`).
pub const WORK_INDEX: &str = ".harnery/index/work";
/// The index of goal listings (`goal::index`).
pub(crate) const GOAL_INDEX: &str = ".harnery/index/goals";

/// Where work item `id` lives.
pub fn work_dir(id: &Id) -> String {
    format!("{WORK}/{id}")
}

/// Where a workflow run's records live.
pub fn run_dir(run_id: &Id) -> String {
    format!("{WORKFLOWS}/{run_id}")
}

/// Where approval `id`'s records live.
pub(crate) fn approval_dir(id: &str) -> String {
    format!("{APPROVALS}/{id}")
}

/// Where goal `goal` lives.
pub fn goal_dir(goal: &Id) -> String {
    format!("{GOALS}/{goal}")
}

/// The lease a `tick` or `run` of goal `goal` holds.
pub fn goal_lease(goal: &Id) -> String {
    format!("{}/lease.lock", goal_dir(goal))
}

/// The journal of every ruling `harn approval` recorded.
pub const RULINGS: &str = ".harnery/approvals/rulings.jsonl";

/// The lock a ruler holds from its read of an approval to the decision it writes.
pub const RULINGS_LOCK: &str = ".harnery/approvals/rulings.lock";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_directory_is_under_harnery() {
        for dir in [
            WORK, WORKFLOWS, APPROVALS, GOALS, SERVICE, HARNESS, RUNNING, CONFIG, GUARDED, INDEX,
            CHANGES, WORK_INDEX, GOAL_INDEX,
        ] {
            assert!(dir.starts_with(&format!("{HARNERY}/")), "{dir}");
        }
        let id = Id::new("w1").unwrap();
        assert_eq!(work_dir(&id), ".harnery/work/w1");
        assert_eq!(run_dir(&id), ".harnery/workflows/w1");
        assert_eq!(goal_dir(&id), ".harnery/supervisors/w1");
        assert_eq!(approval_dir("a"), ".harnery/approvals/a");
        // Files named in their own modules still live where this one says.
        for file in [RULINGS, RULINGS_LOCK] {
            assert!(file.starts_with(&format!("{APPROVALS}/")), "{file}");
        }
    }
}
