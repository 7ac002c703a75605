//! A goal's plans over the real filesystem and real agent calls: the core's planning
//! (`goal::plan`) with a host whose specialists are the goal's team answered by the
//! run's harnesses, and whose template digests are read from disk.

use crate::os::fs::RealFs;
use crate::os::store::{Store, StoreError};
use crate::work::attempt::RunLimits;
use harn_core::error::RecordError;
use harn_core::goal::plan::{self, Ask, Called, Specialists};
use harn_core::goal::plan::{PlanEvent, PlanRecord, PlanView, Proposal, ValidPlan};
use harn_core::goal::GoalIntent;
use harn_core::ids::Id;
use harn_core::work::ledger::Ledger;
use harn_core::work::team::Dispatch;
use harn_core::work::team::{dispatch, Team};
use harn_core::work::FailureClass;
use std::path::Path;

pub use harn_core::goal::plan::{plan_dir, status_of};

/// The goal's specialists over real processes.
struct RealSpecialists<'a> {
    root: &'a Path,
    goal: &'a Id,
    team: &'a Team,
    limits: Option<&'a RunLimits>,
}

// Each call opens the root afresh (`planning_run::call`), as the reviewers of a round do on
// threads of their own: the ledger handed in is the same files seen through another handle.
impl Specialists<RealFs> for RealSpecialists<'_> {
    fn call(&mut self, _: &mut Ledger<RealFs>, ask: &Ask<'_>) -> Called {
        self.call_one(ask)
    }

    /// The reviewers of a round at once, at most the goal's `agent_concurrency` together.
    fn call_all(&mut self, _: &mut Ledger<RealFs>, calls: &[Ask<'_>]) -> Vec<Called> {
        let at_once = self.limits.map_or(1, |l| l.concurrency.max(1));
        let (root, goal, team, limits) = (self.root, self.goal, self.team, self.limits);
        let mut answers = Vec::with_capacity(calls.len());
        for chunk in calls.chunks(at_once) {
            std::thread::scope(|scope| {
                let asked: Vec<_> = chunk
                    .iter()
                    .map(|c| {
                        let one = RealSpecialists { root, goal, team, limits };
                        scope.spawn(move || one.call_one(c))
                    })
                    .collect();
                for call in asked {
                    let panicked = || Called::refused(None, "the call's thread panicked");
                    answers.push(call.join().unwrap_or_else(|_| panicked()));
                }
            });
        }
        answers
    }

    fn workflow_digest(&mut self, path: &str) -> Result<String, RecordError> {
        let bytes = crate::input::read(Path::new(path), crate::input::WORKFLOW_MAX)
            .map_err(RecordError::Refused)?;
        Ok(harn_core::hash::sha256_hex(&bytes))
    }
}

impl RealSpecialists<'_> {
    /// One call, as a planning run.
    fn call_one(&self, ask: &Ask<'_>) -> Called {
        match self.prepare(ask) {
            Ok(d) => {
                let policy = self.limits.and_then(|l| l.policy.as_ref());
                let spent = harn_core::work::policy::Spent {
                    goal_before_micro_usd: self.limits.and_then(|l| l.goal_spent_micro_usd),
                    ..Default::default()
                };
                let model = d.profile.model.as_deref();
                if let Some(refused) = plan::policy_gate(policy, ask, &d.adapter, model, spent) {
                    return refused;
                }
                let Some(limits) = self.limits else {
                    return Called::refused(None, "no harness options were given");
                };
                super::planning_run::call(self.root, self.goal, ask, &d.adapter, limits)
            }
            Err((class, why)) => Called::refused(class, why),
        }
    }
}

impl RealSpecialists<'_> {
    /// The dispatch of a call, once the harness that answers it is known to be frozen.
    fn prepare(&self, ask: &Ask<'_>) -> Result<Dispatch, (Option<FailureClass>, String)> {
        let limits = self.limits.ok_or((None, "no harness options were given".to_owned()))?;
        let default = limits.adapter.as_ref().map(|h| h.name.as_str());
        let d = dispatch(self.team, default, Some(ask.role), ask.prompt)
            .map_err(|e| (None, e.to_string()))?;
        let frozen = limits.adapter.as_ref().is_some_and(|h| h.name == d.adapter)
            || limits.adapters.contains_key(&d.adapter);
        if !frozen {
            return Err((None, format!("harness {} is not available", d.adapter)));
        }
        Ok(d)
    }
}

/// Every plan of `goal`, in sequence order, with its status.
pub fn read_plans(store: &mut Store, goal: &Id) -> Result<Vec<PlanView>, StoreError> {
    Ok(plan::read_plans(store.ledger(), goal)?)
}

/// A plan's history.
pub fn events(store: &mut Store, goal: &Id, plan: &str) -> Result<Vec<PlanRecord>, StoreError> {
    Ok(plan::events(store.ledger(), goal, plan)?)
}

/// Appends one event to a plan's history (synced).
pub fn append(
    store: &mut Store,
    goal: &Id,
    plan: &str,
    event: PlanEvent,
    actor: &str,
    reason: &str,
) -> Result<(), StoreError> {
    let now = store.now();
    Ok(plan::append(store.ledger(), goal, plan, event, actor, reason, now)?)
}

/// The proposal of a plan, when written.
pub fn proposal(store: &mut Store, goal: &Id, plan: &str) -> Result<Option<Proposal>, StoreError> {
    Ok(plan::proposal(store.ledger(), goal, plan)?)
}

/// Milestones whose root is accepted now.
pub fn milestones_completed(store: &mut Store, plans: &[PlanView]) -> Result<u32, StoreError> {
    Ok(plan::milestones_completed(store.ledger(), plans)?)
}

/// Asks the planner for the next plan and records the outcome (see
/// [`plan::run_planner`]).
pub fn run_planner(
    store: &mut Store,
    view: &harn_core::goal::engine::GoalView,
    limits: &RunLimits,
    actor: &str,
) -> Result<String, StoreError> {
    let now = store.now();
    let root = store.root().to_owned();
    let team = &view.intent.team;
    let goal = &view.intent.id;
    let mut specialists = RealSpecialists { root: &root, goal, team, limits: Some(limits) };
    Ok(plan::run_planner(store.ledger(), view, &mut specialists, actor, now)?)
}

/// Creates a plan's work and appends `plan.applied` (see [`plan::apply`]).
pub fn apply(
    store: &mut Store,
    intent: &GoalIntent,
    plan: &str,
    proposal: &Proposal,
    valid: &ValidPlan,
    actor: &str,
) -> Result<(), String> {
    let now = store.now();
    let root = store.root().to_owned();
    let (goal, team) = (&intent.id, &intent.team);
    let mut specialists = RealSpecialists { root: &root, goal, team, limits: None };
    let by = (actor, "approved");
    Ok(plan::apply(store.ledger(), &mut specialists, intent, plan, proposal, valid, by, now)?)
}

/// Approves a proposed plan (see [`plan::approve`]); the caller holds the goal lease.
pub fn approve(
    store: &mut Store,
    g: &harn_core::goal::engine::GoalView,
    plan: &str,
    actor: &str,
    reason: &str,
) -> Result<String, String> {
    let now = store.now();
    let root = store.root().to_owned();
    let (goal, team) = (&g.intent.id, &g.intent.team);
    let mut specialists = RealSpecialists { root: &root, goal, team, limits: None };
    Ok(plan::approve(store.ledger(), &mut specialists, g, plan, actor, reason, now)?)
}

/// Rejects a plan or asks for a new one (see [`plan::decide`]); the caller holds the
/// goal lease.
pub fn decide(
    store: &mut Store,
    g: &harn_core::goal::engine::GoalView,
    plan: &str,
    event: PlanEvent,
    actor: &str,
    reason: &str,
) -> Result<String, String> {
    let now = store.now();
    Ok(plan::decide(store.ledger(), g, plan, event, actor, reason, now)?)
}
