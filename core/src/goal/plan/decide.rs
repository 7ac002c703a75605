//! What a person's ruling on a plan does: approve (create every proposed work item, or find it
//! identical, before `plan.applied` moves the active root), reject or send back, and reopen a
//! completed mission.

use super::review::{candidate_digest, Receipt, ReviewStatus};
use super::{validate, PlanContext, PlanDecision, PlanEvent, PlanStatus, Proposal, ValidPlan};
use crate::env::Fs;
use crate::error::RecordError;
use crate::goal::GoalIntent;
use crate::ids::Id;
use crate::time::WallTime;
use crate::work::intent::Source;
use crate::work::ledger::Ledger;
use crate::work::FailureClass;
use crate::work::{WorkIntent, WorkflowRef};
use serde_json::json;
use std::collections::BTreeSet;

use super::specialists::Specialists;

use super::store::*;
/// Creates every proposed work item (or finds it identical), then appends `plan.applied`.
/// A template whose workflow changed since it was frozen is refused before anything is made.
#[allow(clippy::too_many_arguments)]
pub fn apply<F: Fs>(
    ledger: &mut Ledger<F>,
    specialists: &mut dyn Specialists<F>,
    intent: &GoalIntent,
    plan: &str,
    proposal: &Proposal,
    valid: &ValidPlan,
    (actor, reason): (&str, &str),
    now: WallTime,
) -> Result<(), RecordError> {
    let policy =
        intent.replanning.as_ref().ok_or_else(|| refused("the goal has no replanning policy"))?;
    let mut intents = Vec::new();
    for (spec, (_, id, deps)) in proposal.work.iter().zip(&valid.work) {
        let t = &policy.templates[&spec.template];
        let digest = specialists
            .workflow_digest(&t.path)
            .map_err(|e| refused(format!("template {}: {}: {e}", spec.template, t.path)))?;
        if digest != t.sha256 {
            return Err(refused(format!(
                "template {}: {} changed since the goal froze it",
                spec.template, t.path
            )));
        }
        let mut acceptance = spec.acceptance.clone();
        acceptance.retain(|a| !a.trim().is_empty());
        intents.push(
            WorkIntent {
                schema_version: crate::work::intent::INTENT_VERSION,
                id: id.clone(),
                title: spec.title.clone(),
                objective: spec.objective.clone(),
                acceptance,
                dependencies: deps.clone(),
                workflow: WorkflowRef { path: t.path.clone(), sha256: t.sha256.clone() },
                max_attempts: t.max_attempts,
                max_uncharged_attempts: 3,
                created_at: now,
                sha256: None,
                strict_acceptance: false,
                source: Some(Source { goal: intent.id.clone(), plan: plan.to_owned() }),
            }
            .sealed(),
        );
    }
    for w in &intents {
        w.validate().map_err(|e| refused(format!("work {}: {e}", w.id)))?;
        match ledger.intent(&w.id)? {
            Some(existing) if same_intent(&existing, w) => {}
            Some(_) => {
                return Err(refused(format!("work {} exists and differs from the plan", w.id)))
            }
            None => {
                let provenance = format!("created by plan {plan} of goal {}", intent.id);
                ledger.create_item(w, actor, Some(provenance))?;
            }
        }
    }
    let event = PlanEvent::Applied {
        root_work_id: valid.root.clone(),
        work_ids: intents.iter().map(|w| w.id.clone()).collect(),
        milestone: proposal.milestone.as_ref().map(|m| m.sequence),
    };
    append(ledger, &intent.id, plan, event, actor, reason, now)
}

fn same_intent(a: &WorkIntent, b: &WorkIntent) -> bool {
    (&a.title, &a.objective, &a.acceptance, &a.dependencies, &a.workflow, a.max_attempts)
        == (&b.title, &b.objective, &b.acceptance, &b.dependencies, &b.workflow, b.max_attempts)
}

/// Approves a proposed plan: the caller holds the goal lease. Refused unless it is proposed,
/// made for the current root, still valid against the current graph and, with a review
/// panel, passed exactly as proposed; a completion ends the mission, an apply creates its
/// work then moves the root. Approving an applied or completed plan changes nothing.
#[allow(clippy::too_many_arguments)]
pub fn approve<F: Fs>(
    ledger: &mut Ledger<F>,
    specialists: &mut dyn Specialists<F>,
    g: &crate::goal::engine::GoalView,
    plan: &str,
    actor: &str,
    reason: &str,
    now: WallTime,
) -> Result<String, RecordError> {
    let goal = &g.intent.id;
    let view = g
        .plans
        .iter()
        .find(|p| p.request.plan_id == plan)
        .ok_or_else(|| refused(format!("goal {goal} has no plan {plan}")))?;
    let word = |s: PlanStatus| json!(s).as_str().unwrap_or("").to_owned();
    match view.status {
        PlanStatus::Applied | PlanStatus::Completed => {
            return Ok(format!("plan {plan} is already {}", word(view.status)))
        }
        PlanStatus::Proposed => {}
        s => {
            return Err(refused(format!(
                "plan {plan} is {}; only a proposed plan is approved",
                word(s)
            )))
        }
    }
    if g.projection.root_work_id != view.request.prior_root_work_id {
        let show = |r: &Option<Id>| r.as_ref().map_or("(none)".into(), |r| r.to_string());
        return Err(refused(format!(
            "plan {plan} was made for root {}, but the root is now {}",
            show(&view.request.prior_root_work_id),
            show(&g.projection.root_work_id)
        )));
    }
    let proposal = proposal(ledger, goal, plan)?
        .ok_or_else(|| refused(format!("plan {plan} has no proposal")))?;
    let policy =
        g.intent.replanning.as_ref().ok_or_else(|| refused("the goal has no replanning policy"))?;
    let active: BTreeSet<Id> = g.items.iter().map(|i| i.id.clone()).collect();
    let done = milestones_completed(ledger, &g.plans)?;
    let cx = PlanContext {
        policy,
        active: &active,
        already_planned: already_planned(&g.plans),
        plan_id: plan,
        mission: g.intent.mission.as_ref(),
        trigger: view.request.trigger,
        milestones_completed: done,
    };
    if let Some(panel) = &policy.review {
        // A reviewed plan is approved only as the panel passed it.
        let path = format!("{}/review.json", plan_dir(goal, plan));
        let receipt: Receipt = ledger
            .read_json(&path)?
            .ok_or_else(|| refused(format!("plan {plan} has no review receipt")))?;
        super::review::check_receipt(&receipt, panel)
            .map_err(|e| refused(format!("plan {plan}'s review receipt: {e}")))?;
        let reviewed = events(ledger, goal, plan)?.iter().any(|e| e.event == PlanEvent::Reviewed);
        if receipt.status != ReviewStatus::Passed
            || receipt.candidate_sha256 != candidate_digest(plan, &proposal)
            || !reviewed
        {
            return Err(refused(format!(
                "plan {plan} was not passed by its review panel as proposed"
            )));
        }
    }
    let checked = validate(&proposal, &cx)
        .map_err(|e| refused(format!("plan {plan} no longer holds: {e}")))?;
    if proposal.decision == PlanDecision::Complete {
        // The person who approved the completion is the one who answers for it: their words.
        append(ledger, goal, plan, PlanEvent::Completed, actor, reason, now)?;
        return Ok(format!("plan {plan}: the mission is complete"));
    }
    let valid = checked.ok_or_else(|| refused(format!("plan {plan} proposes no work")))?;
    apply(ledger, specialists, &g.intent, plan, &proposal, &valid, (actor, reason), now)?;
    Ok(format!("plan {plan} applied: {} items, root {}", valid.work.len(), valid.root))
}

/// Rejects a proposed plan, or asks for a new plan after an attention that still applies;
/// the caller holds the goal lease. Only the latest plan is decided on; the same decision
/// again changes nothing.
pub fn decide<F: Fs>(
    ledger: &mut Ledger<F>,
    g: &crate::goal::engine::GoalView,
    plan: &str,
    event: PlanEvent,
    actor: &str,
    reason: &str,
    now: WallTime,
) -> Result<String, RecordError> {
    if reason.trim().is_empty() || reason.len() > 2_000 {
        return Err(refused("a reason of 1 to 2000 bytes is required"));
    }
    let (from, done) = match &event {
        PlanEvent::Rejected => (PlanStatus::Proposed, PlanStatus::Rejected),
        PlanEvent::RetryRequested => (PlanStatus::Attention, PlanStatus::RetryRequested),
        other => return Err(refused(format!("{other:?} is not a person's decision"))),
    };
    let word = |s: PlanStatus| json!(s).as_str().unwrap_or("").to_owned();
    let latest = g.plans.last().map(|p| p.request.plan_id.as_str());
    let status = status_of(&g.plans, plan)
        .ok_or_else(|| refused(format!("goal {} has no plan {plan}", g.intent.id)))?;
    if status == done {
        return Ok(format!("plan {plan} is already {}", word(done)));
    }
    // A planning step that stopped for a person (a host precondition missing, a host policy
    // that stopped the planner) is asked for again as an attention is, once they saw to it.
    let class = g.plans.iter().find(|p| p.request.plan_id == plan).and_then(|p| p.class);
    let stopped_for_a_person = event == PlanEvent::RetryRequested
        && status == PlanStatus::Failed
        && matches!(class, Some(FailureClass::Decision | FailureClass::Environment));
    if (status != from && !stopped_for_a_person) || latest != Some(plan) {
        return Err(refused(format!(
            "plan {plan} is {} (the latest is {}); nothing to do",
            word(status),
            latest.unwrap_or("none")
        )));
    }
    if event == PlanEvent::RetryRequested
        && !stopped_for_a_person
        && g.projection.attention_plan_id.as_deref() != Some(plan)
    {
        return Err(refused(format!(
            "plan {plan}'s attention no longer applies: the graph changed since"
        )));
    }
    if event == PlanEvent::RetryRequested && g.projection.replans_remaining == 0 {
        let max = g.intent.replanning.as_ref().map_or(0, |r| r.max_replans);
        return Err(refused(format!(
            "plan {plan}: no replan slot remains (all {max} of max_replans are used); a retry \
             would plan past the goal's frozen limit"
        )));
    }
    append(ledger, &g.intent.id, plan, event, actor, reason, now)?;
    Ok(format!("plan {plan}: {}", word(done)))
}

/// Reopens a completed mission (`plan.reopened` beside its completion); the caller holds the
/// goal lease. Its reopened work then runs before any milestone is reassessed. Reopening it
/// again changes nothing.
pub fn reopen_mission<F: Fs>(
    ledger: &mut Ledger<F>,
    g: &crate::goal::engine::GoalView,
    actor: &str,
    reason: &str,
    now: WallTime,
) -> Result<String, RecordError> {
    let goal = &g.intent.id;
    if reason.trim().is_empty() || reason.len() > 2_000 {
        return Err(refused("a reason of 1 to 2000 bytes is required"));
    }
    check_reopen(g)?;
    let latest = g.plans.last().expect("checked: a mission with a plan");
    let plan = &latest.request.plan_id;
    if latest.status == PlanStatus::Reopened {
        return Ok(format!("mission {goal} is already reopened (plan {plan})"));
    }
    append(ledger, goal, plan, PlanEvent::Reopened, actor, reason, now)?;
    Ok(format!("mission {goal} reopened (plan {plan}'s completion stands beside it)"))
}

/// Why goal `g` cannot be reopened as a mission now, if it cannot: it must be a mission whose
/// latest plan completed it (or reopened it already).
pub fn check_reopen(g: &crate::goal::engine::GoalView) -> Result<(), RecordError> {
    let goal = &g.intent.id;
    if g.intent.mission.is_none() {
        return Err(refused(format!("goal {goal} is not a mission")));
    }
    let latest = g.plans.last().ok_or_else(|| refused(format!("mission {goal} has no plan")))?;
    match latest.status {
        PlanStatus::Completed | PlanStatus::Reopened => Ok(()),
        s => Err(refused(format!(
            "mission {goal} is not complete (its latest plan {} is {})",
            latest.request.plan_id,
            json!(s).as_str().unwrap_or("")
        ))),
    }
}

/// A refusal in the words an operator reads.
fn refused(why: impl Into<String>) -> RecordError {
    RecordError::refused(why)
}

/// Where work item `work` stands in goal `g`'s generations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Generation {
    /// In the active graph (its root included).
    Active,
    /// Made by plan `plan` (or the goal's first root when `None`), superseded since.
    Superseded(Option<String>),
}

/// Whether `work` belongs to goal `g`, in any generation: the active graph, the goal's first
/// root, or the work of any applied plan.
pub fn generation_of(g: &crate::goal::engine::GoalView, work: &Id) -> Option<Generation> {
    if g.projection.work_ids.contains(work) {
        return Some(Generation::Active);
    }
    if g.intent.root_work_id.as_ref() == Some(work) {
        return Some(Generation::Superseded(None));
    }
    g.plans.iter().find_map(|p| {
        let (root, made) = p.applied.as_ref()?;
        (root == work || made.contains(work))
            .then(|| Generation::Superseded(Some(p.request.plan_id.clone())))
    })
}
