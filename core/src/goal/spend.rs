//! What a goal has spent: the agent calls' usage over every item of its graph and every
//! planning call (the planner's, the reviewers'), which a run's cost rules read as the goal's
//! spend before the run. Read from the records, by every host alike.

use super::engine::GoalView;
use crate::env::Fs;
use crate::ids::Id;
use crate::work::adapter::Usage;
use crate::work::ledger::{Known, Ledger};

/// The usage over `view`'s items and plans, when any call reported one. `runner_live` says
/// whether another process runs an item now (as for any read of an item).
pub fn usage<F: Fs>(
    ledger: &mut Ledger<F>,
    view: &GoalView,
    runner_live: &mut dyn FnMut(&Id) -> bool,
) -> Option<Usage> {
    let mut known = Known::new();
    let mut total: Option<Usage> = None;
    for item in &view.items {
        let row = ledger.summary(&item.id, &mut known, runner_live).ok();
        if let Some(u) = row.and_then(|r| r.usage.clone()) {
            total.get_or_insert_with(Default::default).add(&u);
        }
    }
    for plan in &view.plans {
        let calls =
            super::plan::calls(ledger, &view.intent.id, &plan.request.plan_id).unwrap_or_default();
        for u in calls.iter().filter_map(|c| c.outcome.usage.as_ref()) {
            total.get_or_insert_with(Default::default).add(u);
        }
    }
    total
}

/// What the goal's work and planning spent on agent calls, in millionths of a dollar, as
/// the calls reported it (none reported: nothing).
pub fn spent<F: Fs>(
    ledger: &mut Ledger<F>,
    view: &GoalView,
    runner_live: &mut dyn FnMut(&Id) -> bool,
) -> u64 {
    usage(ledger, view, runner_live).and_then(|u| u.cost_micro_usd).unwrap_or(0)
}
