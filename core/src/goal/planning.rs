//! A goal's plans through the [`Fs`] seam: their records
//! (`.harnery/supervisors/<goal>/plans/<plan>/`: `request.json`, `proposal.json` and
//! `review.json` written once, `events.jsonl` appended), the planning step (ask the planner,
//! validate, review, propose or apply) and the application of a plan: every work item
//! created (or found identical) before `plan.applied` moves the active root. The agent calls
//! go through [`Specialists`]; the binary and the simulator both run this code.

use super::plan::{
    validate, PlanContext, PlanDecision, PlanEvent, PlanRecord, PlanRequest, PlanStatus,
    PlanTrigger, PlanView, Proposal, ReviewPanel, ValidPlan,
};
use super::review::{
    after_round, candidate_digest, review_schema, round_outcome, Receipt, Review, ReviewStatus,
    Round,
};
use super::{progress_fingerprint, GoalIntent, GoalItem};
use crate::env::Fs;
use crate::ids::Id;
use crate::journal::{self, JournalWriter};
use crate::time::WallTime;
use crate::work::intent::Source;
use crate::work::ledger::{Known, Ledger};
use crate::work::{WorkIntent, WorkflowRef};
use serde_json::{json, Value};
use std::collections::BTreeSet;

pub use super::specialists::{Answer, Ask, Called, PlanCall, Recorder, Specialists};

pub use crate::layout::goal_dir;

/// Where plan `plan` of goal `goal` lives.
pub fn plan_dir(goal: &Id, plan: &str) -> String {
    format!("{}/plans/{plan}", goal_dir(goal))
}

/// Every plan of `goal`, in sequence order, with its status.
pub fn read_plans<F: Fs>(ledger: &mut Ledger<F>, goal: &Id) -> Result<Vec<PlanView>, String> {
    let mut plans = Vec::new();
    let names = ledger.fs.list(&format!("{}/plans", goal_dir(goal))).map_err(|e| e.to_string())?;
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
) -> Result<Vec<PlanRecord>, String> {
    bodies(ledger, &format!("{}/events.jsonl", plan_dir(goal, plan)))
}

/// The records of the plan journal at `path`, in order (none when it does not exist).
fn bodies<F: Fs, T: serde::de::DeserializeOwned>(
    ledger: &mut Ledger<F>,
    path: &str,
) -> Result<Vec<T>, String> {
    let bytes = ledger.fs.read(path).map_err(|e| e.to_string())?.unwrap_or_default();
    let shown = ledger.shown(path);
    let read = journal::parse_as::<T>(&shown, &bytes).map_err(|e| e.to_string())?;
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
) -> Result<(), String> {
    let path = format!("{}/events.jsonl", plan_dir(goal, plan));
    let (mut writer, _) =
        JournalWriter::open_tail(&mut ledger.fs, &path).map_err(|e| e.to_string())?;
    let record = PlanRecord { event, actor: actor.to_owned(), reason: reason.to_owned() };
    writer
        .append(&mut ledger.fs, now, std::slice::from_ref(&record))
        .map(drop)
        .map_err(|e| format!("{path}: {e}"))
}

/// The proposal of a plan, when written.
pub fn proposal<F: Fs>(
    ledger: &mut Ledger<F>,
    goal: &Id,
    plan: &str,
) -> Result<Option<Proposal>, String> {
    Ok(ledger.read_json(&format!("{}/proposal.json", plan_dir(goal, plan)))?)
}

/// Work items earlier plans created.
pub fn already_planned(plans: &[PlanView]) -> u32 {
    plans.iter().filter_map(|p| p.applied.as_ref()).map(|(_, w)| w.len() as u32).sum()
}

/// Milestones whose root is accepted now (a reopen can take one back).
pub fn milestones_completed<F: Fs>(
    ledger: &mut Ledger<F>,
    plans: &[PlanView],
) -> Result<u32, String> {
    let mut n = 0;
    let mut known = Known::new();
    for p in plans.iter().filter(|p| p.milestone.is_some()) {
        if let Some((root, _)) = &p.applied {
            if ledger.read(root, &mut known, &mut |_| false)?.projection.state
                == crate::work::WorkState::Succeeded
            {
                n += 1;
            }
        }
    }
    Ok(n)
}

/// Why a plan is asked for now.
pub fn trigger(intent: &GoalIntent, items: &[GoalItem]) -> PlanTrigger {
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
    view: &super::engine::GoalView,
    specialists: &mut dyn Specialists,
    actor: &str,
    now: WallTime,
) -> Result<String, String> {
    let mut recorder = Recorder::new(specialists);
    let stepped = plan_step(ledger, view, &mut recorder, actor, now);
    if !recorder.calls.is_empty() {
        // Only a new plan calls anyone (a resumed review reuses its receipt).
        let plan = plan_id(&view.intent.id, view.plans.len() as u32 + 1);
        let path = format!("{}/calls.jsonl", plan_dir(&view.intent.id, &plan));
        let (mut writer, _) =
            JournalWriter::open_tail(&mut ledger.fs, &path).map_err(|e| e.to_string())?;
        writer.append(&mut ledger.fs, now, &recorder.calls).map_err(|e| format!("{path}: {e}"))?;
    }
    stepped
}

/// The calls recorded for plan `plan` of `goal`, in the order made (none for a plan made
/// before calls were recorded).
pub fn calls<F: Fs>(
    ledger: &mut Ledger<F>,
    goal: &Id,
    plan: &str,
) -> Result<Vec<PlanCall>, String> {
    bodies(ledger, &format!("{}/calls.jsonl", plan_dir(goal, plan)))
}

fn plan_step<F: Fs>(
    ledger: &mut Ledger<F>,
    view: &super::engine::GoalView,
    specialists: &mut dyn Specialists,
    actor: &str,
    now: WallTime,
) -> Result<String, String> {
    let (intent, items, plans) = (&view.intent, &view.items[..], &view.plans[..]);
    let bounds = (view.projection.attempts_remaining, view.projection.replans_remaining);
    let policy = intent.replanning.as_ref().ok_or("the goal has no replanning policy")?;
    if let Some(line) = resume_review(ledger, view, specialists, actor, now)? {
        return Ok(line);
    }
    let sequence = plans.len() as u32 + 1;
    let plan_id = plan_id(&intent.id, sequence);
    let trigger = trigger(intent, items);
    let done = milestones_completed(ledger, plans)?;
    let request = PlanRequest {
        plan_id: plan_id.clone(),
        sequence,
        prior_root_work_id: items.last().map(|i| i.id.clone()),
        trigger_fingerprint: progress_fingerprint(items),
        trigger,
        created_at: now,
    };
    ledger.write_record(&plan_dir(&intent.id, &plan_id), "request.json", &request)?;
    let prompt = planner_prompt(intent, items, plans, &plan_id, (trigger, done), bounds);
    let schema = proposal_schema(policy.max_work_items_per_plan, trigger == PlanTrigger::Milestone);
    let planner = &policy.planner_specialist;
    let asked = Ask { role: planner, prompt: &prompt, schema: &schema, label: &plan_id };
    let text = match specialists.call(&asked).answer(planner) {
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
        Err(why) => return fail(ledger, intent, &plan_id, None, &why, actor, now),
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
        let label = format!("{plan_id}-revision");
        let ask_planner = |specialists: &mut dyn Specialists, revision: &str| {
            let prompt = format!("{prompt}\n{revision}");
            let asked = Ask { role: planner, prompt: &prompt, schema: &schema, label: &label };
            specialists
                .call(&asked)
                .answer(planner)
                .map_err(|(_, why)| why)
                .and_then(|text| checked(&text, &cx))
        };
        let receipt = review(specialists, intent, panel, &plan_id, proposal, ask_planner);
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
    specialists: &mut dyn Specialists,
    intent: &GoalIntent,
    cx: &PlanContext<'_>,
    receipt: Receipt,
    history: &[PlanRecord],
    actor: &str,
    now: WallTime,
) -> Result<String, String> {
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
    let valid = validate(&proposal, cx).map_err(|e| e.to_string())?;
    propose(ledger, specialists, intent, cx, proposal, valid, actor, now)
}

/// Writes a checked proposal (once: one a crash left written must be the same bytes) and
/// records it proposed; completes or applies it when the policy says so.
#[allow(clippy::too_many_arguments)]
fn propose<F: Fs>(
    ledger: &mut Ledger<F>,
    specialists: &mut dyn Specialists,
    intent: &GoalIntent,
    cx: &PlanContext<'_>,
    proposal: Proposal,
    valid: Option<ValidPlan>,
    actor: &str,
    now: WallTime,
) -> Result<String, String> {
    let (plan_id, policy) = (cx.plan_id, cx.policy);
    let dir = plan_dir(&intent.id, plan_id);
    match ledger.read_json::<Proposal>(&format!("{dir}/proposal.json"))? {
        None => drop(ledger.write_record(&dir, "proposal.json", &proposal)?),
        Some(written) if written == proposal => {}
        Some(_) => return Err(format!("plan {plan_id}: proposal.json differs from its review")),
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
    let valid = valid.ok_or("an apply without work")?;
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
    view: &super::engine::GoalView,
    specialists: &mut dyn Specialists,
    actor: &str,
    now: WallTime,
) -> Result<Option<String>, String> {
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

/// A reply parsed as a proposal and validated.
fn checked(text: &str, cx: &PlanContext<'_>) -> Result<(Proposal, Option<ValidPlan>), String> {
    let proposal: Proposal =
        serde_json::from_str(text).map_err(|e| format!("the proposal does not parse: {e}"))?;
    let valid = validate(&proposal, cx).map_err(|e| format!("the proposal is invalid: {e}"))?;
    Ok((proposal, valid))
}

/// The review panel: rounds of every reviewer on the whole candidate, revisions by the
/// planner while rounds remain, the receipt at the end.
fn review(
    specialists: &mut dyn Specialists,
    intent: &GoalIntent,
    panel: &ReviewPanel,
    plan_id: &str,
    first: Proposal,
    mut revise: impl FnMut(&mut dyn Specialists, &str) -> Result<(Proposal, Option<ValidPlan>), String>,
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
            .map(|(role, label)| Ask { role, prompt: &prompt, schema: &schema, label })
            .collect();
        let mut reviews = Vec::new();
        for (called, ask) in specialists.call_all(&calls).iter().zip(&calls) {
            let reply = called
                .answer(ask.role)
                .map_err(|(_, why)| why)
                .and_then(|text| serde_json::from_str::<Review>(&text).map_err(|e| e.to_string()));
            match reply {
                Ok(r) => reviews.push(r),
                // A reviewer that cannot review leaves the plan to a person.
                Err(_) => return finish(ReviewStatus::Attention, candidate, rounds),
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
        match revise(&mut *specialists, &ask_for) {
            // A revision is a complete replacement plan; an attention (or nothing new) is
            // the planner's way of handing the plan to a person.
            Ok((next, _))
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
) -> Result<String, String> {
    append(ledger, &intent.id, plan, PlanEvent::Failed { class }, actor, why, now)?;
    Ok(format!("plan {plan} failed: {why}"))
}

/// Creates every proposed work item (or finds it identical), then appends `plan.applied`.
/// A template whose workflow changed since it was frozen is refused before anything is made.
#[allow(clippy::too_many_arguments)]
pub fn apply<F: Fs>(
    ledger: &mut Ledger<F>,
    specialists: &mut dyn Specialists,
    intent: &GoalIntent,
    plan: &str,
    proposal: &Proposal,
    valid: &ValidPlan,
    (actor, reason): (&str, &str),
    now: WallTime,
) -> Result<(), String> {
    let policy = intent.replanning.as_ref().ok_or("the goal has no replanning policy")?;
    let mut intents = Vec::new();
    for (spec, (_, id, deps)) in proposal.work.iter().zip(&valid.work) {
        let t = &policy.templates[&spec.template];
        let digest = specialists
            .workflow_digest(&t.path)
            .map_err(|e| format!("template {}: {}: {e}", spec.template, t.path))?;
        if digest != t.sha256 {
            return Err(format!(
                "template {}: {} changed since the goal froze it",
                spec.template, t.path
            ));
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
        w.validate().map_err(|e| format!("work {}: {e}", w.id))?;
        match ledger.intent(&w.id)? {
            Some(existing) if same_intent(&existing, w) => {}
            Some(_) => return Err(format!("work {} exists and differs from the plan", w.id)),
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
    items: &[GoalItem],
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
) -> Result<super::engine::GoalView, String> {
    let plans = read_plans(ledger, &intent.id)?;
    let root = super::plan::active_root(intent.root_work_id.as_ref(), &plans);
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
        let p = ledger.read(w, &mut known, runner_live)?.projection;
        used += p.attempts_used;
        charged += p.charged_attempts;
    }
    let projection = super::projection::project_governed(
        intent,
        &items,
        &plans,
        (used, charged),
        lease_held_elsewhere,
    );
    Ok(super::engine::GoalView { intent: intent.clone(), items, plans, projection })
}

/// Approves a proposed plan: the caller holds the goal lease. Refused unless it is proposed,
/// made for the current root, still valid against the current graph and, with a review
/// panel, passed exactly as proposed; a completion ends the mission, an apply creates its
/// work then moves the root. Approving an applied or completed plan changes nothing.
#[allow(clippy::too_many_arguments)]
pub fn approve<F: Fs>(
    ledger: &mut Ledger<F>,
    specialists: &mut dyn Specialists,
    g: &super::engine::GoalView,
    plan: &str,
    actor: &str,
    reason: &str,
    now: WallTime,
) -> Result<String, String> {
    let goal = &g.intent.id;
    let view = g
        .plans
        .iter()
        .find(|p| p.request.plan_id == plan)
        .ok_or(format!("goal {goal} has no plan {plan}"))?;
    let word = |s: PlanStatus| json!(s).as_str().unwrap_or("").to_owned();
    match view.status {
        PlanStatus::Applied | PlanStatus::Completed => {
            return Ok(format!("plan {plan} is already {}", word(view.status)))
        }
        PlanStatus::Proposed => {}
        s => return Err(format!("plan {plan} is {}; only a proposed plan is approved", word(s))),
    }
    if g.projection.root_work_id != view.request.prior_root_work_id {
        let show = |r: &Option<Id>| r.as_ref().map_or("(none)".into(), |r| r.to_string());
        return Err(format!(
            "plan {plan} was made for root {}, but the root is now {}",
            show(&view.request.prior_root_work_id),
            show(&g.projection.root_work_id)
        ));
    }
    let proposal = proposal(ledger, goal, plan)?.ok_or(format!("plan {plan} has no proposal"))?;
    let policy = g.intent.replanning.as_ref().ok_or("the goal has no replanning policy")?;
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
        let receipt: Receipt =
            ledger.read_json(&path)?.ok_or(format!("plan {plan} has no review receipt"))?;
        super::review::check_receipt(&receipt, panel)
            .map_err(|e| format!("plan {plan}'s review receipt: {e}"))?;
        let reviewed = events(ledger, goal, plan)?.iter().any(|e| e.event == PlanEvent::Reviewed);
        if receipt.status != ReviewStatus::Passed
            || receipt.candidate_sha256 != candidate_digest(plan, &proposal)
            || !reviewed
        {
            return Err(format!("plan {plan} was not passed by its review panel as proposed"));
        }
    }
    let checked =
        validate(&proposal, &cx).map_err(|e| format!("plan {plan} no longer holds: {e}"))?;
    if proposal.decision == PlanDecision::Complete {
        // The person who approved the completion is the one who answers for it: their words.
        append(ledger, goal, plan, PlanEvent::Completed, actor, reason, now)?;
        return Ok(format!("plan {plan}: the mission is complete"));
    }
    let valid = checked.ok_or(format!("plan {plan} proposes no work"))?;
    apply(ledger, specialists, &g.intent, plan, &proposal, &valid, (actor, reason), now)?;
    Ok(format!("plan {plan} applied: {} items, root {}", valid.work.len(), valid.root))
}

/// Rejects a proposed plan, or asks for a new plan after an attention that still applies;
/// the caller holds the goal lease. Only the latest plan is decided on; the same decision
/// again changes nothing.
pub fn decide<F: Fs>(
    ledger: &mut Ledger<F>,
    g: &super::engine::GoalView,
    plan: &str,
    event: PlanEvent,
    actor: &str,
    reason: &str,
    now: WallTime,
) -> Result<String, String> {
    if reason.trim().is_empty() || reason.len() > 2_000 {
        return Err("a reason of 1 to 2000 bytes is required".into());
    }
    let (from, done) = match &event {
        PlanEvent::Rejected => (PlanStatus::Proposed, PlanStatus::Rejected),
        PlanEvent::RetryRequested => (PlanStatus::Attention, PlanStatus::RetryRequested),
        other => return Err(format!("{other:?} is not a person's decision")),
    };
    let word = |s: PlanStatus| json!(s).as_str().unwrap_or("").to_owned();
    let latest = g.plans.last().map(|p| p.request.plan_id.as_str());
    let status =
        status_of(&g.plans, plan).ok_or(format!("goal {} has no plan {plan}", g.intent.id))?;
    if status == done {
        return Ok(format!("plan {plan} is already {}", word(done)));
    }
    if status != from || latest != Some(plan) {
        return Err(format!(
            "plan {plan} is {} (the latest is {}); nothing to do",
            word(status),
            latest.unwrap_or("none")
        ));
    }
    if event == PlanEvent::RetryRequested && g.projection.attention_plan_id.as_deref() != Some(plan)
    {
        return Err(format!("plan {plan}'s attention no longer applies: the graph changed since"));
    }
    if event == PlanEvent::RetryRequested && g.projection.replans_remaining == 0 {
        let max = g.intent.replanning.as_ref().map_or(0, |r| r.max_replans);
        return Err(format!(
            "plan {plan}: no replan slot remains (all {max} of max_replans are used); a retry \
             would plan past the goal's frozen limit"
        ));
    }
    append(ledger, &g.intent.id, plan, event, actor, reason, now)?;
    Ok(format!("plan {plan}: {}", word(done)))
}

/// Reopens a completed mission (`plan.reopened` beside its completion); the caller holds the
/// goal lease. Its reopened work then runs before any milestone is reassessed. Reopening it
/// again changes nothing.
pub fn reopen_mission<F: Fs>(
    ledger: &mut Ledger<F>,
    g: &super::engine::GoalView,
    actor: &str,
    reason: &str,
    now: WallTime,
) -> Result<String, String> {
    let goal = &g.intent.id;
    if reason.trim().is_empty() || reason.len() > 2_000 {
        return Err("a reason of 1 to 2000 bytes is required".into());
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
pub fn check_reopen(g: &super::engine::GoalView) -> Result<(), String> {
    let goal = &g.intent.id;
    if g.intent.mission.is_none() {
        return Err(format!("goal {goal} is not a mission"));
    }
    let latest = g.plans.last().ok_or(format!("mission {goal} has no plan"))?;
    match latest.status {
        PlanStatus::Completed | PlanStatus::Reopened => Ok(()),
        s => Err(format!(
            "mission {goal} is not complete (its latest plan {} is {})",
            latest.request.plan_id,
            json!(s).as_str().unwrap_or("")
        )),
    }
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
pub fn generation_of(g: &super::engine::GoalView, work: &Id) -> Option<Generation> {
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
