//! When the service may trust what it read of a goal before instead of reading it again: a
//! pure rule over the metadata of the files the goal's state comes from. The daemon collects
//! the metadata (`stat`), this decides.

use crate::goal::engine::GoalView;
use crate::goal::GoalState;
use crate::ids::Id;
use crate::time::Duration;

pub use crate::signature::{cacheable, signature, PathMeta, Signature};
use crate::work::WorkState;

/// The longest a goal goes without a full read, whatever its files' metadata says: a bound on
/// how long a change the metadata cannot show (a rewrite within one timestamp tick that keeps
/// the size) can go unnoticed.
pub const FULL_READ_EVERY: Duration = Duration::from_millis(60_000);

/// Whether a goal's state follows from its files alone, so a read of it may be kept: nothing
/// running or parked, whose end or ruling shows first in a lease or in a file the cache does
/// not watch.
pub fn settled(g: &GoalView) -> bool {
    g.projection.state != GoalState::Running
        && g.items.iter().all(|i| {
            !matches!(i.projection.state, WorkState::Running | WorkState::AwaitingApproval)
        })
}

/// The files and directories a goal's state is read from, relative to the root: its
/// directory, intent, journal and plans, and for every work item of its graph (and of its
/// earlier plans, whose work still counts against its attempts) the item's directory and
/// journal, and each item's latest run.
pub fn watched_paths(g: &GoalView) -> Vec<String> {
    let dir = crate::goal::plan::goal_dir(&g.intent.id);
    // The intent is written once, but one edited or damaged by hand must be noticed (and
    // refused) at once, not at the next full read.
    let mut paths = vec![
        dir.clone(),
        format!("{dir}/intent.json"),
        format!("{dir}/events.jsonl"),
        format!("{dir}/plans"),
        crate::layout::WORK.to_owned(),
    ];
    let mut items: std::collections::BTreeSet<&Id> = g.items.iter().map(|i| &i.id).collect();
    items.extend(g.intent.root_work_id.iter());
    for p in &g.plans {
        let plan = crate::goal::plan::plan_dir(&g.intent.id, &p.request.plan_id);
        paths.push(format!("{plan}/events.jsonl"));
        paths.push(plan);
        items.extend(p.applied.iter().flat_map(|(_, work)| work));
    }
    for id in items {
        paths.push(crate::layout::work_dir(id));
        paths.push(format!("{}/events.jsonl", crate::layout::work_dir(id)));
    }
    for run in g.items.iter().filter_map(|i| i.projection.latest_run_id.as_ref()) {
        paths.push(crate::layout::run_dir(run));
    }
    paths
}

/// Whether a cached read, `age` old, whose files had signature `cached`, still stands now
/// that they have signature `now`: the same signature, and younger than [`FULL_READ_EVERY`].
pub fn still_valid(cached: &Signature, now: &Signature, age: Duration) -> bool {
    age < FULL_READ_EVERY && cached.digest == now.digest
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::signature::file;

    #[test]
    fn a_cached_read_stands_only_with_the_same_signature_and_while_young() {
        let a = signature(&[file(1, 10, 100)]);
        let b = signature(&[file(1, 12, 100)]);
        assert!(still_valid(&a, &a, Duration::from_millis(59_999)));
        assert!(!still_valid(&a, &a, FULL_READ_EVERY), "old reads are read again");
        assert!(!still_valid(&a, &b, Duration::ZERO));
    }
}
