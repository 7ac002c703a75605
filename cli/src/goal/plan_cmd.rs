//! `harn supervisor create --replanning FILE` (reading the policy file) and
//! `harn supervisor plan list|show|approve|reject|retry`: a goal's plans and the one place a
//! person decides on them, under the goal lease.

use super::plans::{self, plan_dir};
use super::store::{self, goal_lease};
use crate::cli::{fail, EXIT_FAILED, EXIT_USAGE};
use crate::work::store::Store;
use clap::Subcommand;
use harn_core::goal::plan::{
    validate, PlanContext, PlanEvent, PlanStatus, ReplanningPolicy, Template,
};
use harn_core::ids::Id;
use serde::Deserialize;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `harn supervisor plan …`
#[derive(Debug, Subcommand)]
pub enum PlanVerb {
    /// A goal's plans with their status.
    List {
        /// The goal id.
        goal: String,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// One plan: its request, history and proposal.
    Show {
        /// The goal id.
        goal: String,
        /// The plan id (`p1`, `p2`, …).
        plan: String,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Apply a proposed plan: its work is created, then the active root moves.
    Approve {
        /// The goal id.
        goal: String,
        /// The plan id.
        plan: String,
        /// Who approves (default: $USER).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Reject a proposed plan; the reason reaches the next planner.
    Reject {
        /// The goal id.
        goal: String,
        /// The plan id.
        plan: String,
        /// Why (required).
        #[arg(long)]
        reason: String,
        /// Who rejects (default: $USER).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Ask for a new plan after the planner asked for attention.
    Retry {
        /// The goal id.
        goal: String,
        /// The plan id.
        plan: String,
        /// Guidance for the next planner (required).
        #[arg(long)]
        reason: String,
        /// Who asks (default: $USER).
        #[arg(long)]
        actor: Option<String>,
    },
}

/// The policy file's shape: snake_case keys, templates naming a workflow path relative to
/// the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    planner_specialist: String,
    #[serde(default)]
    auto_apply: bool,
    #[serde(default = "five")]
    max_replans: u32,
    #[serde(default = "eight")]
    max_work_items_per_plan: u32,
    #[serde(default = "twenty_five")]
    max_total_work_items: u32,
    templates: BTreeMap<String, TemplateFile>,
    #[serde(default)]
    review: Option<harn_core::goal::plan::ReviewPanel>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateFile {
    workflow: String,
    #[serde(default = "three")]
    max_attempts: u32,
    #[serde(default)]
    root: bool,
}

fn three() -> u32 {
    3
}
fn five() -> u32 {
    5
}
fn eight() -> u32 {
    8
}
fn twenty_five() -> u32 {
    25
}

/// Reads a replanning policy file and freezes it: every template's workflow resolved
/// against the file's directory and digested.
pub fn read_policy(root: &Path, file: &Path) -> Result<ReplanningPolicy, String> {
    let path = root.join(file);
    let shown = path.display();
    let bytes = std::fs::read(&path).map_err(|e| format!("{shown}: {e}"))?;
    let raw: PolicyFile =
        serde_json::from_slice(&bytes).map_err(|e| format!("{shown}:{}: {e}", e.line()))?;
    let base = path.parent().unwrap_or(root);
    let mut templates = BTreeMap::new();
    for (id, t) in raw.templates {
        let wf = std::fs::canonicalize(base.join(&t.workflow))
            .map_err(|e| format!("{shown}: templates.{id}.workflow {}: {e}", t.workflow))?;
        let body =
            std::fs::read(&wf).map_err(|e| format!("{shown}: templates.{id}.workflow: {e}"))?;
        let template = Template {
            path: wf.display().to_string(),
            sha256: harn_core::workflow::policy::sha256_hex(&body),
            max_attempts: t.max_attempts,
            root: t.root,
        };
        templates.insert(id, template);
    }
    Ok(ReplanningPolicy {
        planner_specialist: raw.planner_specialist,
        auto_apply: raw.auto_apply,
        max_replans: raw.max_replans,
        max_work_items_per_plan: raw.max_work_items_per_plan,
        max_total_work_items: raw.max_total_work_items,
        templates,
        review: raw.review,
    })
}

fn parse_id(s: &str) -> Result<Id, i32> {
    Id::new(s).map_err(|e| fail(EXIT_USAGE, format!("{s:?}: {e}")))
}

/// Runs a plan verb; returns the exit code.
pub fn run(store: &mut Store, verb: PlanVerb) -> i32 {
    let (goal, plan) = match &verb {
        PlanVerb::List { goal, .. } => (goal, None),
        PlanVerb::Show { goal, plan, .. }
        | PlanVerb::Approve { goal, plan, .. }
        | PlanVerb::Reject { goal, plan, .. }
        | PlanVerb::Retry { goal, plan, .. } => (goal, Some(plan)),
    };
    let goal = match parse_id(goal) {
        Ok(id) => id,
        Err(code) => return code,
    };
    if let Some(Err(code)) = plan.map(|p| parse_id(p)) {
        return code;
    }
    let actor = |a: &Option<String>| crate::work::cmd::actor(a.clone());
    let result = match verb {
        PlanVerb::List { json, .. } => return list(store, &goal, json),
        PlanVerb::Show { plan, json, .. } => return show(store, &goal, &plan, json),
        PlanVerb::Approve { plan, actor: a, .. } => approve(store, &goal, &plan, &actor(&a)),
        PlanVerb::Reject { plan, reason, actor: a, .. } => decide(
            store,
            &goal,
            &plan,
            &actor(&a),
            &reason,
            PlanStatus::Proposed,
            PlanEvent::Rejected,
        ),
        PlanVerb::Retry { plan, reason, actor: a, .. } => decide(
            store,
            &goal,
            &plan,
            &actor(&a),
            &reason,
            PlanStatus::Attention,
            PlanEvent::RetryRequested,
        ),
    };
    match result {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(e) => fail(EXIT_FAILED, e),
    }
}

fn list(store: &mut Store, goal: &Id, as_json: bool) -> i32 {
    let plans = match plans::read_plans(store, goal) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    if as_json {
        println!("{}", json!({ "goal_id": goal, "plans": plans }));
        return 0;
    }
    for p in &plans {
        let status = json!(p.status);
        println!("{:<6} {:<16} {}", p.request.plan_id, status.as_str().unwrap_or(""), p.reason);
    }
    if plans.is_empty() {
        println!("no plans");
    }
    0
}

fn show(store: &mut Store, goal: &Id, plan: &str, as_json: bool) -> i32 {
    let found =
        plans::read_plans(store, goal).map(|ps| ps.into_iter().find(|p| p.request.plan_id == plan));
    let view = match found {
        Ok(Some(v)) => v,
        Ok(None) => return fail(EXIT_FAILED, format!("goal {goal} has no plan {plan}")),
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let (events, proposal) =
        match (plans::events(store, goal, plan), plans::proposal(store, goal, plan)) {
            (Ok(e), Ok(p)) => (e, p),
            (Err(e), _) | (_, Err(e)) => return fail(EXIT_FAILED, e),
        };
    if as_json {
        println!("{}", json!({ "plan": view, "events": events, "proposal": proposal }));
        return 0;
    }
    let status = json!(view.status);
    println!("{plan} of {goal}: {} — {}", status.as_str().unwrap_or(""), view.reason);
    let root = view.request.prior_root_work_id.as_ref().map_or("(none)".into(), |r| r.to_string());
    println!("  asked on   root {root}");
    if let Some(p) = &proposal {
        println!("  rationale  {}", p.rationale);
        for w in &p.work {
            println!(
                "  work       {} ({}) after [{}]: {}",
                w.key,
                w.template,
                w.dependencies.join(", "),
                w.title
            );
        }
    }
    0
}

/// Takes the goal lease for a decision on a plan.
fn lease(store: &mut Store, goal: &Id) -> Result<(), String> {
    match store.hold(&goal_lease(goal)) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("goal {goal} is being ticked by another process")),
        Err(e) => Err(e.to_string()),
    }
}

fn approve(store: &mut Store, goal: &Id, plan: &str, actor: &str) -> Result<String, String> {
    lease(store, goal)?;
    let g = store::read(store, goal).map_err(|e| e.to_string())?;
    let view = g
        .plans
        .iter()
        .find(|p| p.request.plan_id == plan)
        .ok_or(format!("goal {goal} has no plan {plan}"))?;
    match view.status {
        PlanStatus::Applied | PlanStatus::Completed => {
            return Ok(format!(
                "plan {plan} is already {}",
                json!(view.status).as_str().unwrap_or("")
            ))
        }
        PlanStatus::Proposed => {}
        s => {
            return Err(format!(
                "plan {plan} is {}; only a proposed plan is approved",
                json!(s).as_str().unwrap_or("")
            ))
        }
    }
    if g.projection.root_work_id != view.request.prior_root_work_id {
        let show = |r: &Option<Id>| r.as_ref().map_or("(none)".into(), |r| r.to_string());
        return Err(format!(
            "plan {plan} was made for root {}, but the root is now {}",
            show(&view.request.prior_root_work_id),
            show(&g.projection.root_work_id)
        ));
    }
    let proposal = plans::proposal(store, goal, plan)
        .map_err(|e| e.to_string())?
        .ok_or(format!("plan {plan} has no proposal"))?;
    let policy = g.intent.replanning.as_ref().ok_or("the goal has no replanning policy")?;
    let active: BTreeSet<Id> = g.items.iter().map(|i| i.id.clone()).collect();
    let planned =
        g.plans.iter().filter_map(|p| p.applied.as_ref()).map(|(_, w)| w.len() as u32).sum();
    let done = plans::milestones_completed(store, &g.plans).map_err(|e| e.to_string())?;
    let cx = PlanContext {
        policy,
        active: &active,
        already_planned: planned,
        plan_id: plan,
        mission: g.intent.mission.as_ref(),
        trigger: view.request.trigger,
        milestones_completed: done,
    };
    if let Some(panel) = &policy.review {
        // A reviewed plan is approved only as the panel passed it.
        let path = format!("{}/review.json", plan_dir(goal, plan));
        let receipt: harn_core::goal::review::Receipt = store
            .read_record(&path)
            .map_err(|e| e.to_string())?
            .ok_or(format!("plan {plan} has no review receipt"))?;
        harn_core::goal::review::check_receipt(&receipt, panel)
            .map_err(|e| format!("plan {plan}'s review receipt: {e}"))?;
        let digest = harn_core::goal::review::candidate_digest(plan, &proposal);
        let reviewed = plans::events(store, goal, plan)
            .map_err(|e| e.to_string())?
            .iter()
            .any(|e| e.event == PlanEvent::Reviewed);
        if receipt.status != harn_core::goal::review::ReviewStatus::Passed
            || receipt.candidate_sha256 != digest
            || !reviewed
        {
            return Err(format!("plan {plan} was not passed by its review panel as proposed"));
        }
    }
    let checked =
        validate(&proposal, &cx).map_err(|e| format!("plan {plan} no longer holds: {e}"))?;
    if proposal.decision == harn_core::goal::plan::Decision::Complete {
        plans::append(store, goal, plan, PlanEvent::Completed, actor, &proposal.rationale)
            .map_err(|e| e.to_string())?;
        return Ok(format!("plan {plan}: the mission is complete"));
    }
    let valid = checked.ok_or(format!("plan {plan} proposes no work"))?;
    plans::apply(store, &g.intent, plan, &proposal, &valid, actor)?;
    Ok(format!("plan {plan} applied: {} items, root {}", valid.work.len(), valid.root))
}

fn decide(
    store: &mut Store,
    goal: &Id,
    plan: &str,
    actor: &str,
    reason: &str,
    from: PlanStatus,
    event: PlanEvent,
) -> Result<String, String> {
    if reason.trim().is_empty() || reason.len() > 2_000 {
        return Err("--reason must be 1 to 2000 bytes".into());
    }
    lease(store, goal)?;
    let g = store::read(store, goal).map_err(|e| e.to_string())?;
    let latest = g.plans.last().map(|p| p.request.plan_id.as_str());
    let status =
        plans::status_of(&g.plans, plan).ok_or(format!("goal {goal} has no plan {plan}"))?;
    let done = match &event {
        PlanEvent::Rejected => PlanStatus::Rejected,
        _ => PlanStatus::RetryRequested,
    };
    if status == done {
        return Ok(format!("plan {plan} is already {}", json!(done).as_str().unwrap_or("")));
    }
    if status != from || latest != Some(plan) {
        return Err(format!(
            "plan {plan} is {} (the latest is {}); nothing to do",
            json!(status).as_str().unwrap_or(""),
            latest.unwrap_or("none")
        ));
    }
    if event == PlanEvent::RetryRequested && g.projection.attention_plan_id.as_deref() != Some(plan)
    {
        return Err(format!("plan {plan}'s attention no longer applies: the graph changed since"));
    }
    plans::append(store, goal, plan, event, actor, reason).map_err(|e| e.to_string())?;
    Ok(format!("plan {plan}: {}", json!(done).as_str().unwrap_or("")))
}
