//! A planner's proposal and its host-side validation: deterministic, naming what is wrong. A
//! proposal may only add new work built from frozen templates, hanging from existing work or
//! earlier keys, with exactly one final outcome that every proposed item leads to and whose
//! template may be a root; it never names a script, edits existing intent or removes history.

use super::policy::*;
use crate::ids::Id;
use crate::work::FieldError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Why a plan is asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanTrigger {
    /// A mission's first plan.
    Initial,
    /// The graph is stuck.
    #[default]
    Recovery,
    /// A mission's milestone root was accepted: the next milestone, or completion.
    Milestone,
}

/// What the planner decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanDecision {
    /// Add this work.
    Apply,
    /// The mission is done.
    Complete,
    /// A person must look.
    Attention,
}

/// One work item a planner proposes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkSpec {
    /// Its key within the proposal.
    pub key: String,
    /// Its title.
    pub title: String,
    /// Its objective.
    pub objective: String,
    /// Its acceptance statements.
    #[serde(default)]
    pub acceptance: Vec<String>,
    /// Existing work ids or earlier keys it depends on.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// The catalog template it is made from.
    pub template: String,
}

/// A planner's proposal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    /// The decision.
    pub decision: PlanDecision,
    /// Why.
    pub rationale: String,
    /// The work to add (only for `apply`).
    #[serde(default)]
    pub work: Vec<WorkSpec>,
    /// For a mission's `apply`, the milestone this work delivers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub milestone: Option<Milestone>,
}

/// What validation needs to know of the goal.
#[derive(Clone, Debug)]
pub struct PlanContext<'a> {
    /// The frozen policy.
    pub policy: &'a ReplanningPolicy,
    /// Work ids in the active graph.
    pub active: &'a BTreeSet<Id>,
    /// Work items earlier plans already added.
    pub already_planned: u32,
    /// The plan's id, the prefix of the work ids it creates.
    pub plan_id: &'a str,
    /// The goal's mission, if it is one.
    pub mission: Option<&'a Mission>,
    /// Why the plan was asked for.
    pub trigger: PlanTrigger,
    /// Milestones whose root is accepted now.
    pub milestones_completed: u32,
}

/// A validated `apply`: the work in proposal order, each with its new id and resolved
/// dependencies, and the inferred root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidPlan {
    /// `(key, work id, resolved dependencies)` in proposal order.
    pub work: Vec<(String, Id, Vec<Id>)>,
    /// The new active root: the one proposed item nothing else depends on.
    pub root: Id,
}

/// Validates a proposal against the policy and the current graph. `Ok(None)` for a valid
/// `attention` (or `complete`) decision; the error names the item and field at fault.
pub fn validate(p: &Proposal, cx: &PlanContext<'_>) -> Result<Option<ValidPlan>, FieldError> {
    if p.rationale.trim().is_empty() || p.rationale.len() > 2_000 {
        return Err(FieldError::new("rationale", "must be 1 to 2000 bytes"));
    }
    if p.decision != PlanDecision::Apply {
        if !p.work.is_empty() || p.milestone.is_some() {
            return Err(FieldError::new(
                "work",
                "only an apply decision carries work or a milestone",
            ));
        }
        if p.decision == PlanDecision::Complete
            && (cx.mission.is_none() || cx.trigger != PlanTrigger::Milestone)
        {
            return Err(FieldError::new(
                "decision",
                "complete is only for a mission whose milestone was accepted",
            ));
        }
        return Ok(None);
    }
    match (cx.mission, &p.milestone) {
        (None, Some(_)) => {
            return Err(FieldError::new("milestone", "only a mission's plan carries a milestone"))
        }
        (Some(_), None) => {
            return Err(FieldError::new("milestone", "a mission's plan must name its milestone"))
        }
        (Some(m), Some(ms)) => {
            let next = if cx.trigger == PlanTrigger::Recovery {
                cx.milestones_completed.max(1)
            } else {
                cx.milestones_completed + 1
            };
            if ms.sequence != next || ms.sequence > m.max_milestones {
                return Err(FieldError::new(
                    "milestone.sequence",
                    format!("must be {next} (at most {})", m.max_milestones),
                ));
            }
            if ms.title.trim().is_empty()
                || ms.objective.trim().is_empty()
                || ms.acceptance.is_empty()
            {
                return Err(FieldError::new(
                    "milestone",
                    "needs a title, an objective and acceptance statements",
                ));
            }
        }
        (None, None) => {}
    }
    let n = p.work.len() as u32;
    let per_plan = cx.policy.max_work_items_per_plan;
    if n == 0 || n > per_plan {
        return Err(FieldError::new("work", format!("must hold 1 to {per_plan} items, not {n}")));
    }
    if cx.already_planned + n > cx.policy.max_total_work_items {
        let total = cx.policy.max_total_work_items;
        return Err(FieldError::new(
            "work",
            format!(
                "{} planned items already; {n} more would pass the total of {total}",
                cx.already_planned
            ),
        ));
    }
    let mut ids: BTreeMap<&str, Id> = BTreeMap::new();
    let mut work = Vec::new();
    for (i, w) in p.work.iter().enumerate() {
        let at = |f: &str| format!("work[{i}] ({}).{f}", w.key);
        if !valid_key(&w.key) {
            return Err(FieldError::new(
                at("key"),
                "keys are 1 to 32 lowercase letters, digits and '-'",
            ));
        }
        if ids.contains_key(w.key.as_str()) {
            return Err(FieldError::new(at("key"), "is used by an earlier item"));
        }
        if w.title.trim().is_empty() || w.title.len() > 200 {
            return Err(FieldError::new(at("title"), "must be 1 to 200 bytes"));
        }
        if w.objective.trim().is_empty() || w.objective.len() > 4_000 {
            return Err(FieldError::new(at("objective"), "must be 1 to 4000 bytes"));
        }
        if !cx.policy.templates.contains_key(&w.template) {
            return Err(FieldError::new(
                at("template"),
                format!("{:?} is not in the catalog", w.template),
            ));
        }
        let deps: BTreeSet<&String> = w.dependencies.iter().collect();
        if deps.len() > DEPENDENCIES_MAX {
            return Err(FieldError::new(at("dependencies"), format!("at most {DEPENDENCIES_MAX}")));
        }
        let mut resolved = Vec::new();
        for d in &w.dependencies {
            if let Some(id) = ids.get(d.as_str()) {
                resolved.push(id.clone());
            } else if let Some(id) = Id::new(d).ok().filter(|id| cx.active.contains(id)) {
                resolved.push(id);
            } else {
                return Err(FieldError::new(
                    at("dependencies"),
                    format!("{d:?} is neither active work nor an earlier key"),
                ));
            }
        }
        let id = Id::new(&format!("{}-{}", cx.plan_id, w.key))
            .map_err(|e| FieldError::new(at("key"), format!("makes a bad work id: {e}")))?;
        ids.insert(&w.key, id.clone());
        work.push((w.key.clone(), id, resolved));
    }
    let depended: BTreeSet<&str> =
        p.work.iter().flat_map(|w| w.dependencies.iter().map(String::as_str)).collect();
    let outcomes: Vec<&WorkSpec> =
        p.work.iter().filter(|w| !depended.contains(w.key.as_str())).collect();
    let [root] = outcomes.as_slice() else {
        let keys: Vec<&str> = outcomes.iter().map(|w| w.key.as_str()).collect();
        return Err(FieldError::new(
            "work",
            format!(
                "exactly one item must be the final outcome that nothing depends on; found {}: {}",
                keys.len(),
                keys.join(", ")
            ),
        ));
    };
    if !cx.policy.templates[&root.template].root {
        return Err(FieldError::new(
            format!("work ({}).template", root.key),
            format!("{:?} may not be a final outcome", root.template),
        ));
    }
    // Every proposed item must lead to the final outcome through proposed dependencies.
    let mut reached: BTreeSet<&str> = BTreeSet::from([root.key.as_str()]);
    let mut stack = vec![*root];
    while let Some(w) = stack.pop() {
        for d in &w.dependencies {
            if let Some(dep) = p.work.iter().find(|x| &x.key == d) {
                if reached.insert(dep.key.as_str()) {
                    stack.push(dep);
                }
            }
        }
    }
    if let Some(stray) = p.work.iter().find(|w| !reached.contains(w.key.as_str())) {
        return Err(FieldError::new(
            format!("work ({})", stray.key),
            "does not lead to the final outcome",
        ));
    }
    Ok(Some(ValidPlan { root: ids[root.key.as_str()].clone(), work }))
}

/// Fuzz body: an arbitrary planner reply through parsing and validation; never panics, and
/// a plan it accepts has exactly one root among its work, fresh ids, and dependencies that
/// are active work or earlier items.
pub fn fuzz_proposal(data: &[u8]) {
    let Ok(p) = serde_json::from_slice::<Proposal>(data) else { return };
    let mut templates = BTreeMap::new();
    templates.insert(
        "impl".to_owned(),
        Template { path: "/wf".into(), sha256: "0".repeat(64), max_attempts: 3, root: false },
    );
    templates.insert(
        "ship".to_owned(),
        Template { path: "/wf".into(), sha256: "0".repeat(64), max_attempts: 3, root: true },
    );
    let policy = ReplanningPolicy {
        planner_specialist: "planner".into(),
        auto_apply: false,
        max_replans: 5,
        max_work_items_per_plan: 8,
        max_total_work_items: 25,
        templates,
        review: None,
    };
    let active = BTreeSet::from([Id::new("w1").expect("valid")]);
    let cx = PlanContext {
        policy: &policy,
        active: &active,
        already_planned: 3,
        plan_id: "p2",
        mission: None,
        trigger: PlanTrigger::Recovery,
        milestones_completed: 0,
    };
    if let Ok(Some(plan)) = validate(&p, &cx) {
        assert!(!plan.work.is_empty() && plan.work.len() <= 8);
        assert!(plan.work.iter().any(|(_, id, _)| *id == plan.root));
        for (i, (_, id, deps)) in plan.work.iter().enumerate() {
            assert!(!active.contains(id), "new work never reuses an active id");
            for d in deps {
                let earlier = plan.work[..i].iter().any(|(_, e, _)| e == d);
                assert!(earlier || active.contains(d), "{d} is neither earlier nor active");
            }
        }
    }
}
