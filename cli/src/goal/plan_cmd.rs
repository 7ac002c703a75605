//! `harn supervisor create --replanning FILE` (reading the policy file) and
//! `harn supervisor plan list|show|approve|reject|retry|reopen`: a goal's plans and the one place a
//! person decides on them, under the goal lease.

use super::plans;
use super::store::{self, goal_lease};
use crate::exit::{fail, Exit, Failure, EXIT_FAILED, EXIT_USAGE};
use crate::os::store::Store;
use crate::verb::{Ruled, Signed};
use clap::Subcommand;
use harn_core::goal::plan::{PlanEvent, ReplanningPolicy, Template};
use harn_core::ids::Id;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
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
        /// The plan id (`plan-0001-a1b2c3d4`).
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
        #[command(flatten)]
        signed: Signed,
    },
    /// Reject a proposed plan; the reason reaches the next planner.
    Reject {
        /// The goal id.
        goal: String,
        /// The plan id.
        plan: String,
        #[command(flatten)]
        ruled: Ruled,
    },
    /// Reopen a complete mission: its completion stays beside the reopening, work reopened
    /// in it runs first, then the planner reassesses the milestone (`harn work reopen` on an
    /// item of a complete mission does this too).
    Reopen {
        /// The goal id (a mission whose latest plan completed it).
        goal: String,
        #[command(flatten)]
        ruled: Ruled,
    },
    /// Ask for a new plan after the planner asked for attention.
    Retry {
        /// The goal id.
        goal: String,
        /// The plan id.
        plan: String,
        #[command(flatten)]
        ruled: Ruled,
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
    let bytes = crate::input::read(&path, crate::input::CONFIG_MAX)?;
    let raw: PolicyFile =
        serde_json::from_slice(&bytes).map_err(|e| format!("{shown}:{}: {e}", e.line()))?;
    let base = path.parent().unwrap_or(root);
    let mut templates = BTreeMap::new();
    for (id, t) in raw.templates {
        let wf = std::fs::canonicalize(base.join(&t.workflow))
            .map_err(|e| format!("{shown}: templates.{id}.workflow {}: {e}", t.workflow))?;
        let body = crate::input::read(&wf, crate::input::WORKFLOW_MAX)
            .map_err(|e| format!("{shown}: templates.{id}.workflow: {e}"))?;
        let template = Template {
            path: wf.display().to_string(),
            sha256: harn_core::hash::sha256_hex(&body),
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

fn parse_id(s: &str) -> Result<Id, Failure> {
    Id::new(s).map_err(|e| Failure::new(EXIT_USAGE, format!("{s:?}: {e}")))
}

/// The plan of `goal` an operator named: its id, or a unique prefix of one of its plans' ids.
fn plan_id(store: &mut Store, goal: &Id, s: &str) -> Result<Id, Failure> {
    let typed = parse_id(s)?;
    // A goal whose plans cannot be read is refused by the verb itself, with its error.
    let Ok(plans) = plans::read_plans(store, goal) else { return Ok(typed) };
    let ids = plans.iter().map(|p| p.request.plan_id.as_str());
    if !ids.clone().any(|id| id.starts_with(s)) {
        return Err(Failure::new(EXIT_USAGE, format!("goal {goal} has no plan {s}")));
    }
    let full = crate::os::store::complete(s, ids, "plan")?;
    parse_id(&full)
}

impl PlanVerb {
    /// Whether this verb only reads (and needs a root that exists).
    pub fn reads(&self) -> bool {
        matches!(self, PlanVerb::List { .. } | PlanVerb::Show { .. })
    }
}

/// Runs a plan verb; returns the exit code.
pub fn run(store: &mut Store, mut verb: PlanVerb) -> Exit {
    let (goal, plan) = match &mut verb {
        PlanVerb::List { goal, .. } | PlanVerb::Reopen { goal, .. } => (goal, None),
        PlanVerb::Show { goal, plan, .. }
        | PlanVerb::Approve { goal, plan, .. }
        | PlanVerb::Reject { goal, plan, .. }
        | PlanVerb::Retry { goal, plan, .. } => (goal, Some(plan)),
    };
    // Goals and plans may be named by unique prefixes of their ids.
    let goal_id = super::store::goal_id(store, goal)?;
    *goal = goal_id.to_string();
    if let Some(plan) = plan {
        *plan = plan_id(store, &goal_id, plan)?.to_string();
    }
    let goal = goal_id;
    let actor = |a: &Option<String>| crate::verb::actor(a.clone());
    let (plan_id, as_json) = match &verb {
        PlanVerb::Approve { plan, signed: Signed { json, .. }, .. }
        | PlanVerb::Reject { plan, ruled: Ruled { json, .. }, .. }
        | PlanVerb::Retry { plan, ruled: Ruled { json, .. }, .. } => (plan.clone(), *json),
        _ => (String::new(), false),
    };
    let result = match verb {
        PlanVerb::List { json, .. } => return list(store, &goal, json),
        PlanVerb::Reopen { ruled: Ruled { reason, actor: a, json }, .. } => {
            return reopen(store, &goal, &actor(&a), &reason, json)
        }
        PlanVerb::Show { plan, json, .. } => return show(store, &goal, &plan, json),
        PlanVerb::Approve { plan, signed: Signed { actor: a, reason, .. }, .. } => {
            approve(store, &goal, &plan, &actor(&a), reason.as_deref())
        }
        PlanVerb::Reject { plan, ruled: Ruled { reason, actor: a, .. }, .. } => {
            decide(store, &goal, &plan, &actor(&a), &reason, PlanEvent::Rejected)
        }
        PlanVerb::Retry { plan, ruled: Ruled { reason, actor: a, .. }, .. } => {
            decide(store, &goal, &plan, &actor(&a), &reason, PlanEvent::RetryRequested)
        }
    };
    match result {
        Ok(line) if as_json => {
            let status =
                plans::read_plans(store, &goal).ok().and_then(|ps| plans::status_of(&ps, &plan_id));
            outln!(
                "{}",
                json!({ "goal_id": goal, "plan_id": plan_id, "status": status, "result": line })
            );
            Ok(0)
        }
        Ok(line) => {
            outln!("{line}");
            Ok(0)
        }
        Err(e) => fail(EXIT_FAILED, e),
    }
}

fn list(store: &mut Store, goal: &Id, as_json: bool) -> Exit {
    let plans = match plans::read_plans(store, goal) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    if as_json {
        outln!("{}", json!({ "goal_id": goal, "plans": plans }));
        return Ok(0);
    }
    for p in &plans {
        let status = json!(p.status);
        outln!("{:<20} {:<16} {}", p.request.plan_id, status.as_str().unwrap_or(""), p.reason);
    }
    if plans.is_empty() {
        outln!("no plans");
    }
    Ok(0)
}

fn show(store: &mut Store, goal: &Id, plan: &str, as_json: bool) -> Exit {
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
    let calls =
        harn_core::goal::plan::calls(store.ledger(), goal, plan).map_err(Failure::failed)?;
    if as_json {
        let receipt: Option<Value> = store
            .read_record(&format!("{}/review.json", plans::plan_dir(goal, plan)))
            .unwrap_or(None);
        outln!(
            "{}",
            json!({ "plan": view, "events": events, "proposal": proposal, "review": receipt,
                    "calls": calls })
        );
        return Ok(0);
    }
    let status = json!(view.status);
    outln!("{plan} of {goal}: {} — {}", status.as_str().unwrap_or(""), view.reason);
    let root = view.request.prior_root_work_id.as_ref().map_or("(none)".into(), |r| r.to_string());
    outln!("  asked on   root {root}");
    let receipt: Option<harn_core::goal::plan::review::Receipt> =
        store.read_record(&format!("{}/review.json", plans::plan_dir(goal, plan))).unwrap_or(None);
    if let Some(r) = &receipt {
        let findings: usize =
            r.rounds.iter().flat_map(|round| &round.reviews).map(|v| v.findings.len()).sum();
        let status = json!(r.status);
        outln!(
            "  review     {} after {} rounds, {findings} findings",
            status.as_str().unwrap_or(""),
            r.rounds.len()
        );
    }
    for c in &calls {
        let o = &c.outcome;
        let how = match (o.ok, &o.error) {
            (true, _) => "answered".to_owned(),
            (false, e) => format!("failed: {}", e.as_deref().unwrap_or("")),
        };
        let took = o.elapsed_ms.map_or(String::new(), |ms| format!(" in {ms} ms"));
        let harness = c.harness.as_deref().unwrap_or("no harness");
        let usage = o
            .usage
            .as_ref()
            .map_or(String::new(), |u| format!(" ({})", crate::work::progress::usage(u)));
        outln!("  call       {} ({harness}, {}): {how}{took}{usage}", c.role, c.label);
    }
    if let Some(p) = &proposal {
        outln!("  rationale  {}", p.rationale);
        if let Some(m) = &p.milestone {
            outln!("  milestone  {}: {}", m.sequence, m.title);
            outln!("  objective  {}", m.objective);
            for (n, a) in m.acceptance.iter().enumerate() {
                outln!("  accept-{}   {a}", n + 1);
            }
        }
        for w in &p.work {
            outln!(
                "  work       {} ({}) after [{}]: {}",
                w.key,
                w.template,
                w.dependencies.join(", "),
                w.title
            );
        }
    }
    Ok(0)
}

/// Takes the goal lease for a decision on a plan.
fn lease(store: &mut Store, goal: &Id) -> Result<(), String> {
    match store.hold(&goal_lease(goal)) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("goal {goal} is being ticked by another process")),
        Err(e) => Err(e.to_string()),
    }
}

fn view(store: &mut Store, goal: &Id) -> Result<harn_core::goal::engine::GoalView, String> {
    store::read(store, goal).map_err(|e| e.to_string())
}

fn approve(
    store: &mut Store,
    goal: &Id,
    plan: &str,
    actor: &str,
    reason: Option<&str>,
) -> Result<String, String> {
    lease(store, goal)?;
    let g = view(store, goal)?;
    plans::approve(store, &g, plan, actor, reason.unwrap_or("approved"))
}

fn reopen(store: &mut Store, goal: &Id, actor: &str, reason: &str, as_json: bool) -> Exit {
    let reopened = lease(store, goal).and_then(|()| {
        let g = view(store, goal)?;
        let now = store.now();
        Ok(harn_core::goal::plan::reopen_mission(store.ledger(), &g, actor, reason, now)?)
    });
    let line = reopened.map_err(Failure::failed)?;
    if as_json {
        let g = view(store, goal).map_err(Failure::failed)?;
        outln!("{}", json!({ "goal_id": goal, "projection": g.projection, "result": line }));
    } else {
        outln!("{line}");
        let g = view(store, goal).map_err(Failure::failed)?;
        outln!("{}: {}", harn_core::goal::engine::words(&g.projection), g.projection.reason);
    }
    Ok(0)
}

fn decide(
    store: &mut Store,
    goal: &Id,
    plan: &str,
    actor: &str,
    reason: &str,
    event: PlanEvent,
) -> Result<String, String> {
    lease(store, goal)?;
    let g = view(store, goal)?;
    plans::decide(store, &g, plan, event, actor, reason)
}
