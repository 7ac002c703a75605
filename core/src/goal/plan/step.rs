//! One planning step: ask the planner through [`Specialists`], validate its proposal against
//! the goal, run the review panel, then propose or apply. The binary and the simulator both
//! run this code.

use super::review::{
    after_round, candidate_digest, review_schema, round_outcome, Receipt, Review, ReviewStatus,
    Round,
};
use super::{
    validate, PlanContext, PlanDecision, PlanEvent, PlanRecord, PlanRequest, PlanStatus,
    PlanTrigger, PlanView, Proposal, ReviewPanel, ValidPlan,
};
use crate::env::Fs;
use crate::error::RecordError;
use crate::goal::{progress_fingerprint, GoalIntent, GraphItem};
use crate::ids::Id;
use crate::journal::JournalWriter;
use crate::time::WallTime;
use crate::work::ledger::Ledger;
use crate::work::run::StepKind;
use serde_json::{json, Value};
use std::collections::BTreeSet;

use super::specialists::{Ask, PlanCall, Recorder, Specialists};

use super::decide::apply;
use super::store::*;

/// Why a plan is asked for now.
pub fn trigger(intent: &GoalIntent, items: &[GraphItem]) -> PlanTrigger {
    let root_accepted =
        items.last().is_some_and(|i| i.projection.state == crate::work::WorkState::Succeeded);
    match (&intent.mission, items.is_empty(), root_accepted) {
        (Some(_), true, _) => PlanTrigger::Initial,
        (Some(_), false, true) => PlanTrigger::Milestone,
        _ => PlanTrigger::Recovery,
    }
}

/// The id of goal `goal`'s plan number `sequence`, in the seed's shape: `plan-0001-a1b2c3d4`,
/// the sequence and the first eight hex digits of the SHA-256 of the goal id and the sequence.
/// The digest makes the ids of two goals' plans differ, and with them the ids of the work the
/// plans create (`<plan id>-<key>`), so two goals never share a planned item; it is derived,
/// not drawn, so a plan asked for again after a crash has the same id.
pub fn plan_id(goal: &Id, sequence: u32) -> String {
    let digest = crate::hash::sha256_hex(format!("{goal}/{sequence}").as_bytes());
    format!("plan-{sequence:04}-{}", &digest[..8])
}

/// Asks the planner for the next plan and records the outcome; returns a line saying what
/// came of it. Planner failures are recorded as `plan.failed`, never returned as errors.
/// Every agent call the step made (the planner's, its revisions', the reviewers') is
/// journaled in the plan's `calls.jsonl` when the step ends, whatever came of it.
pub fn run_planner<F: Fs>(
    ledger: &mut Ledger<F>,
    view: &crate::goal::engine::GoalView,
    specialists: &mut dyn Specialists<F>,
    actor: &str,
    now: WallTime,
) -> Result<String, RecordError> {
    let mut recorder = Recorder::new(specialists);
    let stepped = plan_step(ledger, view, &mut recorder, actor, now);
    if let Some(plan) = &recorder.plan {
        // A resumed review reuses its receipt and calls no one.
        let path = format!("{}/calls.jsonl", plan_dir(&view.intent.id, plan));
        ledger.note(&path)?;
        let (mut writer, _) = JournalWriter::open_tail(&mut ledger.fs, &path)?;
        writer.append(&mut ledger.fs, now, &recorder.calls)?;
    }
    stepped
}

/// The calls recorded for plan `plan` of `goal`, in the order made (none for a plan made
/// before calls were recorded).
pub fn calls<F: Fs>(
    ledger: &mut Ledger<F>,
    goal: &Id,
    plan: &str,
) -> Result<Vec<PlanCall>, RecordError> {
    bodies(ledger, &format!("{}/calls.jsonl", plan_dir(goal, plan)))
}

fn plan_step<F: Fs>(
    ledger: &mut Ledger<F>,
    view: &crate::goal::engine::GoalView,
    specialists: &mut dyn Specialists<F>,
    actor: &str,
    now: WallTime,
) -> Result<String, RecordError> {
    let (intent, items, plans) = (&view.intent, &view.items[..], &view.plans[..]);
    let bounds = (view.projection.attempts_remaining, view.projection.replans_remaining);
    let policy = intent
        .replanning
        .as_ref()
        .ok_or_else(|| RecordError::refused("the goal has no replanning policy"))?;
    if let Some(line) = resume_review(ledger, view, specialists, actor, now)? {
        return Ok(line);
    }
    // A plan a crash cut short before anything was recorded of it is asked for again as
    // the same plan: its planning run resumes, and a reply already made is not paid twice.
    let (request, plans) = match cut_short(ledger, view)? {
        Some(request) => (request, &plans[..plans.len() - 1]),
        None => {
            let sequence = plans.len() as u32 + 1;
            let request = PlanRequest {
                plan_id: plan_id(&intent.id, sequence),
                sequence,
                prior_root_work_id: items.last().map(|i| i.id.clone()),
                trigger_fingerprint: progress_fingerprint(items),
                trigger: trigger(intent, items),
                created_at: now,
            };
            ledger.write_record(
                &plan_dir(&intent.id, &request.plan_id),
                "request.json",
                &request,
            )?;
            (request, plans)
        }
    };
    let (plan_id, trigger) = (request.plan_id.clone(), request.trigger);
    let done = milestones_completed(ledger, plans)?;
    let prompt = planner_prompt(intent, items, plans, &plan_id, (trigger, done), bounds);
    let schema = proposal_schema(policy.max_work_items_per_plan, trigger == PlanTrigger::Milestone);
    let planner = &policy.planner_specialist;
    let step = StepKind::Plan;
    let asked = Ask {
        role: planner,
        prompt: &prompt,
        schema: &schema,
        label: &plan_id,
        plan: &plan_id,
        step,
    };
    let text = match specialists.call(ledger, &asked).answer(planner) {
        Ok(text) => text,
        Err((class, why)) => return fail(ledger, intent, &plan_id, class, &why, actor, now),
    };
    let active: BTreeSet<Id> = items.iter().map(|i| i.id.clone()).collect();
    let cx = PlanContext {
        policy,
        active: &active,
        already_planned: already_planned(plans),
        plan_id: &plan_id,
        mission: intent.mission.as_ref(),
        trigger,
        milestones_completed: done,
    };
    let (proposal, valid) = match checked(&text, &cx) {
        Ok(checked) => checked,
        Err(why) => return fail(ledger, intent, &plan_id, None, &why.to_string(), actor, now),
    };
    if proposal.decision == PlanDecision::Attention {
        // One event, not `plan.proposed` then `plan.attention`: a crash between two would
        // leave an attention standing as a proposal awaiting approval.
        ledger.write_record(&plan_dir(&intent.id, &plan_id), "proposal.json", &proposal)?;
        append(
            ledger,
            &intent.id,
            &plan_id,
            PlanEvent::Attention,
            actor,
            &proposal.rationale,
            now,
        )?;
        return Ok(format!("plan {plan_id} asks for a person: {}", proposal.rationale));
    }
    if let Some(panel) = &policy.review {
        let mut revisions = 0;
        let ask_planner = |specialists: &mut dyn Specialists<F>,
                           ledger: &mut Ledger<F>,
                           revision: &str| {
            revisions += 1;
            let label = format!("{plan_id}-revision-{revisions}");
            let prompt = format!("{prompt}\n{revision}");
            let (plan, step) = (plan_id.as_str(), StepKind::Plan);
            let asked =
                Ask { role: planner, prompt: &prompt, schema: &schema, label: &label, plan, step };
            let text = specialists.call(ledger, &asked).answer(planner).ok()?;
            checked(&text, &cx).ok()
        };
        let receipt = review(ledger, specialists, intent, panel, &plan_id, proposal, ask_planner);
        ledger.write_record(&plan_dir(&intent.id, &plan_id), "review.json", &receipt)?;
        return finish_review(ledger, specialists, intent, &cx, receipt, &[], actor, now);
    }
    propose(ledger, specialists, intent, &cx, proposal, valid, actor, now)
}

/// The end of a review whose receipt is durable: a receipt that did not pass leaves the plan
/// to a person; one that passed is recorded (`plan.reviewed`) before its candidate is
/// proposed. `history` is what the plan already recorded (a resumed review's), so nothing is
/// appended twice.
#[allow(clippy::too_many_arguments)]
fn finish_review<F: Fs>(
    ledger: &mut Ledger<F>,
    specialists: &mut dyn Specialists<F>,
    intent: &GoalIntent,
    cx: &PlanContext<'_>,
    receipt: Receipt,
    history: &[PlanRecord],
    actor: &str,
    now: WallTime,
) -> Result<String, RecordError> {
    let plan_id = cx.plan_id;
    if receipt.status != ReviewStatus::Passed {
        let why =
            format!("review requires attention: {}", json!(receipt.status).as_str().unwrap_or(""));
        append(ledger, &intent.id, plan_id, PlanEvent::Attention, actor, &why, now)?;
        return Ok(format!("plan {plan_id}: {why}"));
    }
    if !history.iter().any(|e| e.event == PlanEvent::Reviewed) {
        let approved = "the review panel approved";
        append(ledger, &intent.id, plan_id, PlanEvent::Reviewed, actor, approved, now)?;
    }
    let proposal = receipt.candidate;
    let valid = validate(&proposal, cx).map_err(|e| RecordError::refused(e.to_string()))?;
    propose(ledger, specialists, intent, cx, proposal, valid, actor, now)
}

/// Writes a checked proposal (once: one a crash left written must be the same bytes) and
/// records it proposed; completes or applies it when the policy says so.
#[allow(clippy::too_many_arguments)]
fn propose<F: Fs>(
    ledger: &mut Ledger<F>,
    specialists: &mut dyn Specialists<F>,
    intent: &GoalIntent,
    cx: &PlanContext<'_>,
    proposal: Proposal,
    valid: Option<ValidPlan>,
    actor: &str,
    now: WallTime,
) -> Result<String, RecordError> {
    let (plan_id, policy) = (cx.plan_id, cx.policy);
    let dir = plan_dir(&intent.id, plan_id);
    match ledger.read_json::<Proposal>(&format!("{dir}/proposal.json"))? {
        None => drop(ledger.write_record(&dir, "proposal.json", &proposal)?),
        Some(written) if written == proposal => {}
        Some(_) => {
            let why = format!("plan {plan_id}: proposal.json differs from its review");
            return Err(RecordError::refused(why));
        }
    }
    append(ledger, &intent.id, plan_id, PlanEvent::Proposed, actor, &proposal.rationale, now)?;
    if proposal.decision == PlanDecision::Complete {
        if policy.auto_apply {
            let why = &proposal.rationale;
            append(ledger, &intent.id, plan_id, PlanEvent::Completed, actor, why, now)?;
            return Ok(format!("plan {plan_id} completes the mission"));
        }
        return Ok(format!(
            "plan {plan_id} proposes the mission is complete; approve or reject it"
        ));
    }
    let valid = valid.ok_or_else(|| RecordError::refused("an apply without work"))?;
    if policy.auto_apply {
        let by = (actor, "applied automatically (auto_apply)");
        apply(ledger, specialists, intent, plan_id, &proposal, &valid, by, now)?;
        return Ok(format!("plan {plan_id} applied: root {}", valid.root));
    }
    Ok(format!("plan {plan_id} proposes {} items; approve or reject it", valid.work.len()))
}

/// How the line of a planning step that finished an interrupted review ends.
pub const RESUMED_REVIEW: &str = "its review, cut short, resumed from its receipt";

/// Finishes the latest plan when a crash cut its review short after the receipt became
/// durable: the exact receipt is reused (checked against the frozen panel; one that does not
/// match fails closed, to a person), so the review does not consume a second plan's slot.
/// `None` when there is nothing to resume: no review, no receipt (the review's calls were
/// lost and a new plan is asked for), or a graph that moved since the plan was asked for.
fn resume_review<F: Fs>(
    ledger: &mut Ledger<F>,
    view: &crate::goal::engine::GoalView,
    specialists: &mut dyn Specialists<F>,
    actor: &str,
    now: WallTime,
) -> Result<Option<String>, RecordError> {
    let (intent, items, plans) = (&view.intent, &view.items[..], &view.plans[..]);
    let (Some(policy), Some(latest)) = (intent.replanning.as_ref(), plans.last()) else {
        return Ok(None);
    };
    let Some(panel) = &policy.review else { return Ok(None) };
    let request = &latest.request;
    if latest.status != PlanStatus::Interrupted
        || request.trigger_fingerprint != progress_fingerprint(items)
        || request.prior_root_work_id.as_ref() != items.last().map(|i| &i.id)
    {
        return Ok(None);
    }
    let dir = plan_dir(&intent.id, &request.plan_id);
    let Some(receipt) = ledger.read_json::<Receipt>(&format!("{dir}/review.json"))? else {
        return Ok(None);
    };
    let history = events(ledger, &intent.id, &request.plan_id)?;
    if let Err(e) = super::review::check_receipt(&receipt, panel) {
        let why = format!("review requires attention: its receipt does not match the panel: {e}");
        append(ledger, &intent.id, &request.plan_id, PlanEvent::Attention, actor, &why, now)?;
        return Ok(Some(format!("plan {}: {why}", request.plan_id)));
    }
    let earlier = &plans[..plans.len() - 1];
    let active: BTreeSet<Id> = items.iter().map(|i| i.id.clone()).collect();
    let cx = PlanContext {
        policy,
        active: &active,
        already_planned: already_planned(earlier),
        plan_id: &request.plan_id,
        mission: intent.mission.as_ref(),
        trigger: request.trigger,
        milestones_completed: milestones_completed(ledger, earlier)?,
    };
    let line = finish_review(ledger, specialists, intent, &cx, receipt, &history, actor, now)?;
    Ok(Some(format!("{line} ({RESUMED_REVIEW})")))
}

/// The request of the goal's latest plan when a crash cut it short before anything was
/// recorded of it (no history, no proposal, no review receipt) and the goal still stands where it was
/// asked for; `None` otherwise.
fn cut_short<F: Fs>(
    ledger: &mut Ledger<F>,
    view: &crate::goal::engine::GoalView,
) -> Result<Option<PlanRequest>, RecordError> {
    let (intent, items) = (&view.intent, &view.items[..]);
    let Some(latest) = view.plans.last() else { return Ok(None) };
    let request = &latest.request;
    if latest.status != PlanStatus::Interrupted
        || latest.review.is_some()
        || request.trigger_fingerprint != progress_fingerprint(items)
        || request.prior_root_work_id.as_ref() != items.last().map(|i| &i.id)
        || request.trigger != trigger(intent, items)
    {
        return Ok(None);
    }
    // Only its request: a proposal or a receipt already written is the plan's own record,
    // never written twice (an interrupted plan with one stays interrupted).
    let dir = plan_dir(&intent.id, &request.plan_id);
    for written in ["review.json", "proposal.json"] {
        if ledger.read_json::<Value>(&format!("{dir}/{written}"))?.is_some() {
            return Ok(None);
        }
    }
    if !events(ledger, &intent.id, &request.plan_id)?.is_empty() {
        return Ok(None);
    }
    Ok(Some(request.clone()))
}

/// A reply parsed as a proposal and validated; a reply that does not hold is refused, in
/// the words its `plan.failed` records.
fn checked(text: &str, cx: &PlanContext<'_>) -> Result<(Proposal, Option<ValidPlan>), RecordError> {
    let proposal: Proposal = serde_json::from_str(text)
        .map_err(|e| RecordError::refused(format!("the proposal does not parse: {e}")))?;
    let valid = validate(&proposal, cx)
        .map_err(|e| RecordError::refused(format!("the proposal is invalid: {e}")))?;
    Ok((proposal, valid))
}

/// The review panel: rounds of every reviewer on the whole candidate, revisions by the
/// planner while rounds remain, the receipt at the end. `revise` asks the planner for a
/// revision; `None` when it gave none that holds.
#[allow(clippy::type_complexity)]
fn review<F: Fs>(
    ledger: &mut Ledger<F>,
    specialists: &mut dyn Specialists<F>,
    intent: &GoalIntent,
    panel: &ReviewPanel,
    plan_id: &str,
    first: Proposal,
    mut revise: impl FnMut(
        &mut dyn Specialists<F>,
        &mut Ledger<F>,
        &str,
    ) -> Option<(Proposal, Option<ValidPlan>)>,
) -> Receipt {
    let mut candidate = first;
    let mut rounds = Vec::new();
    let finish = |status, candidate: Proposal, rounds| {
        let candidate_sha256 = candidate_digest(plan_id, &candidate);
        Receipt { plan_id: plan_id.to_owned(), status, candidate, candidate_sha256, rounds }
    };
    for round in 1..=panel.max_revision_rounds + 1 {
        let digest = candidate_digest(plan_id, &candidate);
        let shown = serde_json::to_string_pretty(&candidate).expect("proposals serialize");
        let prompt = format!(
            "Review this plan for the goal {:?} independently. Approve it, ask for a revision \
             (with findings: blocking ones must be fixed), or ask for a person's attention.\n\
             Plan:\n{shown}\n",
            intent.title
        );
        // The reviewers of a round are independent: asked together, read in frozen order.
        let schema = review_schema();
        let labels: Vec<String> = (1..=panel.reviewer_specialists.len())
            .map(|n| format!("{plan_id}-review-{round}-{n}"))
            .collect();
        let calls: Vec<Ask<'_>> = panel
            .reviewer_specialists
            .iter()
            .zip(&labels)
            .map(|(role, label)| {
                let (plan, step) = (plan_id, StepKind::Review);
                Ask { role, prompt: &prompt, schema: &schema, label, plan, step }
            })
            .collect();
        let mut reviews = Vec::new();
        for (called, ask) in specialists.call_all(ledger, &calls).iter().zip(&calls) {
            let reply = called.answer(ask.role).ok();
            match reply.and_then(|text| serde_json::from_str::<Review>(&text).ok()) {
                Some(r) => reviews.push(r),
                // A reviewer that cannot review leaves the plan to a person.
                None => return finish(ReviewStatus::Attention, candidate, rounds),
            }
        }
        let outcome = round_outcome(&reviews);
        let reviewers = panel.reviewer_specialists.clone();
        rounds.push(Round {
            candidate_sha256: digest.clone(),
            reviewers,
            reviews: reviews.clone(),
            outcome,
        });
        if let Some(status) = after_round(outcome, round, panel) {
            return finish(status, candidate, rounds);
        }
        let findings: Vec<String> = reviews
            .iter()
            .flat_map(|r| {
                r.findings.iter().map(|f| {
                    format!("- [{:?}] {}: {} ({})", f.severity, f.code, f.summary, f.recommendation)
                })
            })
            .collect();
        let ask_for = format!(
            "The review panel asked for a revision of this plan:\n{shown}\nFindings:\n{}\n\
             Return a complete replacement plan, not a patch.",
            findings.join("\n")
        );
        match revise(&mut *specialists, ledger, &ask_for) {
            // A revision is a complete replacement plan; an attention (or nothing new) is
            // the planner's way of handing the plan to a person.
            Some((next, _))
                if next.decision != PlanDecision::Attention
                    && candidate_digest(plan_id, &next) != digest =>
            {
                candidate = next
            }
            // An invalid revision, or one that changes nothing, leaves it to a person.
            _ => return finish(ReviewStatus::Attention, candidate, rounds),
        }
    }
    finish(ReviewStatus::Attention, candidate, rounds)
}

#[allow(clippy::too_many_arguments)]
fn fail<F: Fs>(
    ledger: &mut Ledger<F>,
    intent: &GoalIntent,
    plan: &str,
    class: Option<crate::work::FailureClass>,
    why: &str,
    actor: &str,
    now: WallTime,
) -> Result<String, RecordError> {
    append(ledger, &intent.id, plan, PlanEvent::Failed { class }, actor, why, now)?;
    Ok(format!("plan {plan} failed: {why}"))
}

/// The schema a planner's reply must match.
fn proposal_schema(max_items: u32, may_complete: bool) -> Value {
    let decisions = if may_complete {
        json!(["apply", "complete", "attention"])
    } else {
        json!(["apply", "attention"])
    };
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["decision", "rationale", "work"],
        "properties": {
            "decision": {"enum": decisions},
            "milestone": {
                "type": "object",
                "additionalProperties": false,
                "required": ["sequence", "title", "objective", "acceptance"],
                "properties": {
                    "sequence": {"type": "integer", "minimum": 1},
                    "title": {"type": "string", "minLength": 1, "maxLength": 200},
                    "objective": {"type": "string", "minLength": 1, "maxLength": 4000},
                    "acceptance": {"type": "array", "minItems": 1, "maxItems": 50, "items": {"type": "string"}}
                }
            },
            "rationale": {"type": "string", "minLength": 1, "maxLength": 2000},
            "work": {
                "type": "array",
                "maxItems": max_items,
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["key", "title", "objective", "template"],
                    "properties": {
                        "key": {"type": "string", "minLength": 1, "maxLength": 32},
                        "title": {"type": "string", "minLength": 1, "maxLength": 200},
                        "objective": {"type": "string", "minLength": 1, "maxLength": 4000},
                        "acceptance": {"type": "array", "maxItems": 50, "items": {"type": "string"}},
                        "dependencies": {"type": "array", "maxItems": 50, "items": {"type": "string"}},
                        "template": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// What the planner is told: the goal, its limits and budgets, the latest plan's outcome (so
/// a rejection's reason reaches the next planner), the template catalog and the active work.
fn planner_prompt(
    intent: &GoalIntent,
    items: &[GraphItem],
    plans: &[PlanView],
    plan_id: &str,
    (trigger, milestones_completed): (PlanTrigger, u32),
    (attempts_left, replans_left): (u32, u32),
) -> String {
    let policy = intent.replanning.as_ref().expect("checked by the caller");
    let mut out = format!(
        "You are planning {plan_id} for the goal {:?} ({}).\n\
         Decide `apply` (new work items that get the goal to done) or `attention` (a person must look).\n\
         Rules: each item has a key (1-32 lowercase letters, digits, '-'), a title, an objective, \
         acceptance statements and a template from the catalog; an item's dependencies name \
         existing work ids below or keys of items listed before it; exactly one item must be \
         the final outcome that nothing else depends on, every other item must lead to it, and \
         its template must be root-capable. Do not return a `root` field: it is inferred. \
         At most {} items.\n",
        intent.title, intent.id, policy.max_work_items_per_plan
    );
    let why = json!(trigger);
    out.push_str(&format!("Trigger: {}\n", why.as_str().unwrap_or("")));
    out.push_str(&format!(
        "Remaining: {attempts_left} charged work attempts, {replans_left} plans after this one \
         counts, {} more planned work items.\n",
        policy.max_total_work_items.saturating_sub(already_planned(plans))
    ));
    if let Some(m) = &intent.mission {
        out.push_str(&format!(
            "Mission: {}\nMission acceptance: {}\nMilestones completed: {milestones_completed} of at most {}\n\
             An apply must carry a milestone (sequence {}, title, objective, acceptance) for the \
             work it adds; when the mission's acceptance holds, decide complete with no work.\n",
            m.objective,
            m.acceptance.join("; "),
            m.max_milestones,
            milestones_completed + 1
        ));
    }
    if let Some(last) = plans.last() {
        let status = json!(last.status);
        out.push_str(&format!(
            "The latest plan {} is {}: {}\n",
            last.request.plan_id,
            status.as_str().unwrap_or(""),
            last.reason
        ));
    }
    out.push_str("Templates:\n");
    for (id, t) in &policy.templates {
        let root = if t.root { " (may be the final outcome)" } else { "" };
        out.push_str(&format!("- {id}{root}\n"));
    }
    out.push_str("Active work (prerequisites first):\n");
    for i in items {
        let state = json!(i.projection.state);
        out.push_str(&format!(
            "- {} [{}]: {}\n",
            i.id,
            state.as_str().unwrap_or(""),
            i.projection.reason
        ));
    }
    out
}
