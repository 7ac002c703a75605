//! A goal's plan records through the [`Fs`] seam (`.harnery/supervisors/<goal>/plans/<plan>/`:
//! `request.json`, `proposal.json` and `review.json` written once, `events.jsonl` appended),
//! and a goal read whole from its intent: plans, active graph and projection.

use super::review::Receipt;
use super::{PlanEvent, PlanRecord, PlanRequest, PlanStatus, PlanView, Proposal};
use crate::env::Fs;
use crate::error::RecordError;
use crate::goal::GoalIntent;
use crate::ids::Id;
use crate::journal::{self, JournalWriter};
use crate::time::WallTime;
use crate::work::ledger::{Known, Ledger};
use std::collections::BTreeSet;

pub use crate::layout::goal_dir;

/// Where plan `plan` of goal `goal` lives.
pub fn plan_dir(goal: &Id, plan: &str) -> String {
    format!("{}/plans/{plan}", goal_dir(goal))
}

/// Every plan of `goal`, in sequence order, with its status.
pub fn read_plans<F: Fs>(ledger: &mut Ledger<F>, goal: &Id) -> Result<Vec<PlanView>, RecordError> {
    let mut plans = Vec::new();
    let names = ledger.fs.list(&format!("{}/plans", goal_dir(goal)))?;
    for id in names.iter().filter_map(|n| Id::new(n).ok()) {
        let dir = plan_dir(goal, id.as_str());
        let Some(request) = ledger.read_json::<PlanRequest>(&format!("{dir}/request.json"))? else {
            continue; // A plan whose request never became durable was never asked for.
        };
        let mut view = PlanView::new(request, &events(ledger, goal, id.as_str())?);
        let receipt = ledger.read_json::<Receipt>(&format!("{dir}/review.json"))?;
        view.review = receipt.map(|r| r.status);
        plans.push(view);
    }
    plans.sort_by_key(|p| p.request.sequence);
    Ok(plans)
}

/// A plan's history.
pub fn events<F: Fs>(
    ledger: &mut Ledger<F>,
    goal: &Id,
    plan: &str,
) -> Result<Vec<PlanRecord>, RecordError> {
    bodies(ledger, &format!("{}/events.jsonl", plan_dir(goal, plan)))
}

/// The records of the plan journal at `path`, in order (none when it does not exist).
pub(super) fn bodies<F: Fs, T: serde::de::DeserializeOwned>(
    ledger: &mut Ledger<F>,
    path: &str,
) -> Result<Vec<T>, RecordError> {
    let bytes = ledger.fs.read(path)?.unwrap_or_default();
    let shown = ledger.shown(path);
    let read = journal::parse_as::<T>(&shown, &bytes)?;
    Ok(read.records.into_iter().map(|r| r.body).collect())
}

/// Appends one event to a plan's history (synced).
pub fn append<F: Fs>(
    ledger: &mut Ledger<F>,
    goal: &Id,
    plan: &str,
    event: PlanEvent,
    actor: &str,
    reason: &str,
    now: WallTime,
) -> Result<(), RecordError> {
    let path = format!("{}/events.jsonl", plan_dir(goal, plan));
    ledger.note(&path)?;
    let (mut writer, _) = JournalWriter::open_tail(&mut ledger.fs, &path)?;
    let record = PlanRecord { event, actor: actor.to_owned(), reason: reason.to_owned() };
    writer.append(&mut ledger.fs, now, std::slice::from_ref(&record))?;
    Ok(())
}

/// The proposal of a plan, when written.
pub fn proposal<F: Fs>(
    ledger: &mut Ledger<F>,
    goal: &Id,
    plan: &str,
) -> Result<Option<Proposal>, RecordError> {
    ledger.read_json(&format!("{}/proposal.json", plan_dir(goal, plan)))
}

/// Work items earlier plans created.
pub(crate) fn already_planned(plans: &[PlanView]) -> u32 {
    plans.iter().filter_map(|p| p.applied.as_ref()).map(|(_, w)| w.len() as u32).sum()
}

/// Milestones whose root is accepted now (a reopen can take one back).
pub fn milestones_completed<F: Fs>(
    ledger: &mut Ledger<F>,
    plans: &[PlanView],
) -> Result<u32, RecordError> {
    let mut n = 0;
    let mut known = Known::new();
    for p in plans.iter().filter(|p| p.milestone.is_some()) {
        if let Some((root, _)) = &p.applied {
            if ledger.summary(root, &mut known, &mut |_| false)?.projection.state
                == crate::work::WorkState::Succeeded
            {
                n += 1;
            }
        }
    }
    Ok(n)
}

/// The status of `plan` of `goal`, for the plan verbs.
pub fn status_of(plans: &[PlanView], plan: &str) -> Option<PlanStatus> {
    plans.iter().find(|p| p.request.plan_id == plan).map(|p| p.status)
}

/// Reads a goal from its (already checked) intent: its plans, its active graph (the
/// dependency closure of the active root, prerequisites first) and its projection, with the
/// attempts of governed work earlier plans left outside the active graph still counted.
pub fn goal_view<F: Fs>(
    ledger: &mut Ledger<F>,
    intent: &GoalIntent,
    runner_live: &mut dyn FnMut(&Id) -> bool,
    lease_held_elsewhere: bool,
) -> Result<crate::goal::engine::GoalView, RecordError> {
    let plans = read_plans(ledger, &intent.id)?;
    let root = super::active_root(intent.root_work_id.as_ref(), &plans);
    let items = match &root {
        Some(root) => ledger.graph(root, runner_live)?,
        None => Vec::new(),
    };
    let mut outside = BTreeSet::new();
    if let Some(original) = intent.root_work_id.as_ref().filter(|o| root.as_ref() != Some(*o)) {
        outside.extend(ledger.graph(original, runner_live)?.into_iter().map(|i| i.id));
    }
    for p in &plans {
        if let Some((_, work)) = &p.applied {
            outside.extend(work.iter().cloned());
        }
    }
    for i in &items {
        outside.remove(&i.id);
    }
    let (mut used, mut charged) = (0, 0);
    let mut known = Known::new();
    for w in &outside {
        let p = &ledger.summary(w, &mut known, runner_live)?.projection;
        used += p.attempts_used;
        charged += p.charged_attempts;
    }
    let projection = crate::goal::projection::project_governed(
        intent,
        &items,
        &plans,
        (used, charged),
        lease_held_elsewhere,
    );
    let outside = outside.into_iter().collect();
    Ok(crate::goal::engine::GoalView { intent: intent.clone(), items, plans, projection, outside })
}
