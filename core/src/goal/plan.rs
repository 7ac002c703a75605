//! Bounded replanning, decided purely: the replanning policy a goal freezes (planner, limits,
//! template catalog), the planner's proposal and its host-side validation, and a plan's
//! status from its event history. Validation is deterministic and names what is wrong: a
//! proposal may only add new work built from frozen templates, hanging from existing work or
//! earlier keys, with exactly one final outcome that every proposed item leads to and whose
//! template may be a root; it never names a script, edits existing intent or removes history.

use crate::ids::Id;
use crate::work::FieldError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Most templates a policy may hold.
pub const TEMPLATES_MAX: usize = 20;
/// Longest proposal key.
pub const KEY_MAX: usize = 32;
/// Most dependencies one proposed item may name.
pub const DEPENDENCIES_MAX: usize = 50;

/// A workflow a planner may use, frozen by absolute path and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    /// The workflow program's absolute path.
    pub path: String,
    /// SHA-256 of its bytes when frozen.
    pub sha256: String,
    /// The charged-attempt ceiling of work made from it.
    pub max_attempts: u32,
    /// Whether work made from it may be a plan's final outcome.
    pub root: bool,
}

/// The independent review panel of a policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewPanel {
    /// Reviewers, in order, distinct from the planner.
    pub reviewer_specialists: Vec<String>,
    /// Revision rounds after a blocking review.
    pub max_revision_rounds: u32,
}

/// A goal's frozen replanning policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplanningPolicy {
    /// The specialist who plans (in the goal's team).
    pub planner_specialist: String,
    /// Apply valid proposals without a person.
    pub auto_apply: bool,
    /// Plans a goal may make (charged ones count).
    pub max_replans: u32,
    /// Work items one plan may add.
    pub max_work_items_per_plan: u32,
    /// Work items every plan together may add.
    pub max_total_work_items: u32,
    /// The catalog, by template id.
    pub templates: BTreeMap<String, Template>,
    /// An optional review panel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewPanel>,
}

impl ReplanningPolicy {
    /// Checks the policy against its bounds and the goal's team and agent cap.
    pub fn validate(&self, team: &[&str], max_agents_per_work: u32) -> Result<(), FieldError> {
        let range = |field: &str, v: u32, lo: u32, hi: u32| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(FieldError::new(
                    format!("replanning.{field}"),
                    format!("must be {lo} to {hi}, not {v}"),
                ))
            }
        };
        if !team.contains(&self.planner_specialist.as_str()) {
            return Err(FieldError::new(
                "replanning.planner_specialist",
                format!("{:?} is not in the team", self.planner_specialist),
            ));
        }
        range("max_replans", self.max_replans, 1, 100)?;
        range("max_total_work_items", self.max_total_work_items, 1, 100)?;
        range(
            "max_work_items_per_plan",
            self.max_work_items_per_plan,
            1,
            25.min(self.max_total_work_items),
        )?;
        if self.templates.is_empty() || self.templates.len() > TEMPLATES_MAX {
            return Err(FieldError::new(
                "replanning.templates",
                format!("must hold 1 to {TEMPLATES_MAX} templates"),
            ));
        }
        for (id, t) in &self.templates {
            let at = |f: &str| format!("replanning.templates.{id}.{f}");
            if !valid_key(id) {
                return Err(FieldError::new(
                    format!("replanning.templates.{id}"),
                    "ids are 1 to 32 lowercase letters, digits and '-'",
                ));
            }
            if !t.path.starts_with('/') {
                return Err(FieldError::new(at("workflow"), "must resolve to an absolute path"));
            }
            range(&format!("templates.{id}.max_attempts"), t.max_attempts, 1, 100)?;
        }
        if !self.templates.values().any(|t| t.root) {
            return Err(FieldError::new(
                "replanning.templates",
                "at least one template must be root: true",
            ));
        }
        if let Some(r) = &self.review {
            let n = r.reviewer_specialists.len();
            if n == 0 || n > 5 {
                return Err(FieldError::new(
                    "replanning.review.reviewer_specialists",
                    "must name 1 to 5 reviewers",
                ));
            }
            let unique: BTreeSet<&String> = r.reviewer_specialists.iter().collect();
            if unique.len() != n {
                return Err(FieldError::new(
                    "replanning.review.reviewer_specialists",
                    "reviewers must be distinct",
                ));
            }
            for s in &r.reviewer_specialists {
                if s == &self.planner_specialist || !team.contains(&s.as_str()) {
                    return Err(FieldError::new(
                        "replanning.review.reviewer_specialists",
                        format!("{s:?} must be in the team and not the planner"),
                    ));
                }
            }
            range("review.max_revision_rounds", r.max_revision_rounds, 0, 3)?;
            let worst = 1 + n as u32 * (r.max_revision_rounds + 1) + r.max_revision_rounds;
            if worst > max_agents_per_work {
                return Err(FieldError::new("replanning.review", format!("its worst case of {worst} agent calls exceeds max_agents_per_work ({max_agents_per_work})")));
            }
        }
        Ok(())
    }
}

/// A proposal key: 1 to [`KEY_MAX`] lowercase letters, digits and `-`, not starting with `-`.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= KEY_MAX
        && !key.starts_with('-')
        && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A mission: an objective with acceptance statements, reached through at most
/// `max_milestones` milestones the planner proposes one at a time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mission {
    /// What the mission achieves.
    pub objective: String,
    /// How to tell it is achieved.
    pub acceptance: Vec<String>,
    /// Most milestones.
    #[serde(default = "default_milestones")]
    pub max_milestones: u32,
}

fn default_milestones() -> u32 {
    4
}

impl Mission {
    /// Checks the mission's fields.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.objective.trim().is_empty() || self.objective.len() > 4_000 {
            return Err(FieldError::new("mission.objective", "must be 1 to 4000 bytes"));
        }
        let unique: BTreeSet<&String> = self.acceptance.iter().collect();
        if self.acceptance.is_empty()
            || self.acceptance.len() > 50
            || unique.len() != self.acceptance.len()
        {
            return Err(FieldError::new(
                "mission.acceptance",
                "must hold 1 to 50 distinct statements",
            ));
        }
        if !(1..=20).contains(&self.max_milestones) {
            return Err(FieldError::new("mission.max_milestones", "must be 1 to 20"));
        }
        Ok(())
    }
}

/// A milestone a mission's plan proposes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Milestone {
    /// 1, 2, …: the next after those completed.
    pub sequence: u32,
    /// Its title.
    pub title: String,
    /// What it achieves.
    pub objective: String,
    /// How to tell.
    pub acceptance: Vec<String>,
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ReplanningPolicy {
        let t = |root| Template {
            path: "/repo/wf.sh".into(),
            sha256: "a".repeat(64),
            max_attempts: 3,
            root,
        };
        ReplanningPolicy {
            planner_specialist: "planner".into(),
            auto_apply: false,
            max_replans: 5,
            max_work_items_per_plan: 3,
            max_total_work_items: 5,
            templates: BTreeMap::from([("impl".into(), t(false)), ("ship".into(), t(true))]),
            review: None,
        }
    }

    fn spec(key: &str, deps: &[&str], template: &str) -> WorkSpec {
        WorkSpec {
            key: key.into(),
            title: format!("do {key}"),
            objective: format!("make {key} happen"),
            acceptance: vec![],
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            template: template.into(),
        }
    }

    fn apply(work: Vec<WorkSpec>) -> Proposal {
        Proposal {
            decision: PlanDecision::Apply,
            rationale: "because".into(),
            work,
            milestone: None,
        }
    }

    fn check(p: &Proposal, planned: u32) -> Result<Option<ValidPlan>, FieldError> {
        let active = BTreeSet::from([Id::new("parser").unwrap()]);
        let pol = policy();
        let cx = PlanContext {
            policy: &pol,
            active: &active,
            already_planned: planned,
            plan_id: "p1",
            mission: None,
            trigger: PlanTrigger::Recovery,
            milestones_completed: 0,
        };
        validate(p, &cx)
    }

    #[test]
    fn a_valid_plan_gets_ids_resolved_dependencies_and_its_root() {
        let p =
            apply(vec![spec("tests", &["parser"], "impl"), spec("release", &["tests"], "ship")]);
        let plan = check(&p, 0).unwrap().unwrap();
        assert_eq!(plan.root.as_str(), "p1-release");
        assert_eq!(plan.work[0].2, vec![Id::new("parser").unwrap()]);
        assert_eq!(plan.work[1].2, vec![Id::new("p1-tests").unwrap()]);
    }

    #[test]
    fn every_rule_of_validation_is_enforced_with_its_place() {
        let cases: Vec<(Proposal, u32, &str)> = vec![
            (apply(vec![]), 0, "work"),
            (
                apply(vec![
                    spec("a", &[], "impl"),
                    spec("b", &["a"], "impl"),
                    spec("c", &["b"], "impl"),
                    spec("d", &["c"], "ship"),
                ]),
                0,
                "work",
            ),
            (apply(vec![spec("a", &[], "ship")]), 5, "work"),
            (apply(vec![spec("Bad_Key", &[], "ship")]), 0, "work[0] (Bad_Key).key"),
            (apply(vec![spec("a", &[], "impl"), spec("a", &["a"], "ship")]), 0, "work[1] (a).key"),
            (apply(vec![spec("a", &[], "script.sh")]), 0, "work[0] (a).template"),
            (
                apply(vec![spec("a", &["b"], "impl"), spec("b", &[], "ship")]),
                0,
                "work[0] (a).dependencies",
            ),
            (apply(vec![spec("a", &["nowhere"], "ship")]), 0, "work[0] (a).dependencies"),
            (apply(vec![spec("a", &[], "ship"), spec("b", &[], "ship")]), 0, "work"),
            (apply(vec![spec("a", &[], "impl")]), 0, "work (a).template"),
            (
                Proposal {
                    decision: PlanDecision::Attention,
                    rationale: "x".into(),
                    work: vec![spec("a", &[], "ship")],
                    milestone: None,
                },
                0,
                "work",
            ),
            (
                Proposal {
                    decision: PlanDecision::Complete,
                    rationale: "x".into(),
                    work: vec![],
                    milestone: None,
                },
                0,
                "decision",
            ),
            (
                Proposal {
                    decision: PlanDecision::Attention,
                    rationale: " ".into(),
                    work: vec![],
                    milestone: None,
                },
                0,
                "rationale",
            ),
        ];
        for (p, planned, field) in cases {
            let e = check(&p, planned).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
        let attention = Proposal {
            decision: PlanDecision::Attention,
            rationale: "unclear".into(),
            work: vec![],
            milestone: None,
        };
        assert_eq!(check(&attention, 0), Ok(None));
    }

    #[test]
    fn a_mission_plan_names_the_next_milestone_and_completes_only_after_one() {
        let pol = policy();
        let active = BTreeSet::new();
        let mission = Mission {
            objective: "ship".into(),
            acceptance: vec!["it ships".into()],
            max_milestones: 2,
        };
        let cx = |trigger, done| PlanContext {
            policy: &pol,
            active: &active,
            already_planned: 0,
            plan_id: "p1",
            mission: Some(&mission),
            trigger,
            milestones_completed: done,
        };
        let milestone = |n| Milestone {
            sequence: n,
            title: "M".into(),
            objective: "o".into(),
            acceptance: vec!["a".into()],
        };
        let mut p = apply(vec![spec("a", &[], "ship")]);
        assert_eq!(validate(&p, &cx(PlanTrigger::Initial, 0)).unwrap_err().field, "milestone");
        p.milestone = Some(milestone(1));
        assert!(validate(&p, &cx(PlanTrigger::Initial, 0)).is_ok());
        assert_eq!(
            validate(&p, &cx(PlanTrigger::Milestone, 1)).unwrap_err().field,
            "milestone.sequence"
        );
        p.milestone = Some(milestone(3));
        assert!(validate(&p, &cx(PlanTrigger::Milestone, 2)).is_err(), "past max_milestones");
        let complete = Proposal {
            decision: PlanDecision::Complete,
            rationale: "done".into(),
            work: vec![],
            milestone: None,
        };
        assert_eq!(validate(&complete, &cx(PlanTrigger::Milestone, 2)), Ok(None));
        assert!(
            validate(&complete, &cx(PlanTrigger::Initial, 0)).is_err(),
            "no completion without a milestone"
        );
    }

    #[test]
    fn a_policy_is_checked_against_its_bounds_team_and_agent_cap() {
        let team = ["planner", "reviewer"];
        assert!(policy().validate(&team, 20).is_ok());
        let mut p = policy();
        p.planner_specialist = "ghost".into();
        assert_eq!(p.validate(&team, 20).unwrap_err().field, "replanning.planner_specialist");
        let mut p = policy();
        p.templates.values_mut().for_each(|t| t.root = false);
        assert_eq!(p.validate(&team, 20).unwrap_err().field, "replanning.templates");
        let mut p = policy();
        p.review = Some(ReviewPanel {
            reviewer_specialists: vec!["reviewer".into()],
            max_revision_rounds: 3,
        });
        assert!(p.validate(&team, 8).is_ok(), "1 + 1*4 + 3 = 8 calls fit");
        assert_eq!(p.validate(&team, 7).unwrap_err().field, "replanning.review");
        let mut p = policy();
        p.review = Some(ReviewPanel {
            reviewer_specialists: vec!["planner".into()],
            max_revision_rounds: 0,
        });
        assert!(p.validate(&team, 20).is_err(), "the planner never reviews itself");
    }
}

/// A plan's history (`plans/<id>/events.jsonl` bodies).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event")]
pub enum PlanEvent {
    /// The review panel approved the candidate (before it is proposed).
    #[serde(rename = "plan.reviewed")]
    Reviewed,
    /// The planner's proposal was written and awaits a decision.
    #[serde(rename = "plan.proposed")]
    Proposed,
    /// The proposal was applied: its work exists and the root moved.
    #[serde(rename = "plan.applied")]
    Applied {
        /// The new active root.
        root_work_id: Id,
        /// Every work item the plan created, in order.
        work_ids: Vec<Id>,
        /// The mission milestone it delivers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        milestone: Option<u32>,
    },
    /// A person rejected the proposal.
    #[serde(rename = "plan.rejected")]
    Rejected,
    /// The planner asked for a person.
    #[serde(rename = "plan.attention")]
    Attention,
    /// A person asked for a new plan after an attention.
    #[serde(rename = "plan.retry_requested")]
    RetryRequested,
    /// The mission is complete (its success).
    #[serde(rename = "plan.completed")]
    Completed,
    /// The planner failed (no usable proposal).
    #[serde(rename = "plan.failed")]
    Failed {
        /// An uncharged class, when the failure has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<crate::work::FailureClass>,
    },
}

/// A plan event with who and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRecord {
    /// What happened.
    #[serde(flatten)]
    pub event: PlanEvent,
    /// Who.
    pub actor: String,
    /// Why (never empty).
    pub reason: String,
}

/// `request.json`: why a plan was asked for, against which graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The plan (`p1`, `p2`, …).
    pub plan_id: String,
    /// Its position among the goal's plans.
    pub sequence: u32,
    /// The active root when it was asked for (none before a mission's first plan).
    pub prior_root_work_id: Option<Id>,
    /// The goal's progress fingerprint then; an attention plan applies while it holds.
    pub trigger_fingerprint: String,
    /// Why it was asked for.
    #[serde(default)]
    pub trigger: PlanTrigger,
    /// When.
    pub created_at: crate::time::WallTime,
}

/// Where a plan stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// Asked for, no proposal yet (its planner was cut short).
    Interrupted,
    /// A proposal awaits a decision.
    Proposed,
    /// Applied.
    Applied,
    /// The mission it ends is complete.
    Completed,
    /// Rejected by a person.
    Rejected,
    /// The planner asked for a person.
    Attention,
    /// A person asked for a new plan.
    RetryRequested,
    /// The planner failed.
    Failed,
}

/// A plan's status from its history (first match wins): applied once applied; otherwise its
/// last rejection, attention, retry request or failure; otherwise proposed once proposed;
/// otherwise interrupted.
pub fn plan_status(events: &[PlanRecord]) -> PlanStatus {
    if events.iter().any(|e| e.event == PlanEvent::Completed) {
        return PlanStatus::Completed;
    }
    if events.iter().any(|e| matches!(e.event, PlanEvent::Applied { .. })) {
        return PlanStatus::Applied;
    }
    match events.last().map(|e| &e.event) {
        Some(PlanEvent::Rejected) => PlanStatus::Rejected,
        Some(PlanEvent::Attention) => PlanStatus::Attention,
        Some(PlanEvent::RetryRequested) => PlanStatus::RetryRequested,
        Some(PlanEvent::Failed { .. }) => PlanStatus::Failed,
        Some(PlanEvent::Proposed) => PlanStatus::Proposed,
        _ => PlanStatus::Interrupted,
    }
}

/// A plan as the goal sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanView {
    /// Its request.
    pub request: PlanRequest,
    /// Its status.
    pub status: PlanStatus,
    /// For a failed plan, its class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<crate::work::FailureClass>,
    /// For an applied plan, the root it moved to and the work it created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<(Id, Vec<Id>)>,
    /// For an applied mission plan, its milestone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub milestone: Option<u32>,
    /// The reason of its last event.
    pub reason: String,
}

impl PlanView {
    /// A plan from its request and history.
    pub fn new(request: PlanRequest, events: &[PlanRecord]) -> PlanView {
        let status = plan_status(events);
        let class = events.iter().rev().find_map(|e| match &e.event {
            PlanEvent::Failed { class } => *class,
            _ => None,
        });
        let applied = events.iter().find_map(|e| match &e.event {
            PlanEvent::Applied { root_work_id, work_ids, .. } => {
                Some((root_work_id.clone(), work_ids.clone()))
            }
            _ => None,
        });
        let milestone = events.iter().find_map(|e| match &e.event {
            PlanEvent::Applied { milestone, .. } => *milestone,
            _ => None,
        });
        let reason = events.last().map(|e| e.reason.clone()).unwrap_or_default();
        PlanView { request, status, class, applied, milestone, reason }
    }

    /// Whether the plan counts against `max_replans`: every plan except a failure classed as
    /// not the planner's (environment, upstream, decision). One rule, used everywhere.
    pub fn charged(&self) -> bool {
        !(self.status == PlanStatus::Failed && self.class.is_some())
    }
}

/// The active root: the goal's root, moved by each applied plan in sequence order.
pub fn active_root(original: Option<&Id>, plans: &[PlanView]) -> Option<Id> {
    plans
        .iter()
        .rev()
        .find_map(|p| p.applied.as_ref().map(|(root, _)| root.clone()))
        .or_else(|| original.cloned())
}

#[cfg(test)]
mod status_tests {
    use super::*;

    fn rec(event: PlanEvent) -> PlanRecord {
        PlanRecord { event, actor: "op".into(), reason: "why".into() }
    }

    #[test]
    fn status_follows_the_history_first_match_wins() {
        let id = |s: &str| Id::new(s).unwrap();
        let applied = PlanEvent::Applied {
            root_work_id: id("p1-r"),
            work_ids: vec![id("p1-r")],
            milestone: None,
        };
        assert_eq!(plan_status(&[]), PlanStatus::Interrupted);
        assert_eq!(plan_status(&[rec(PlanEvent::Proposed)]), PlanStatus::Proposed);
        assert_eq!(
            plan_status(&[rec(PlanEvent::Proposed), rec(PlanEvent::Rejected)]),
            PlanStatus::Rejected
        );
        assert_eq!(
            plan_status(&[
                rec(PlanEvent::Proposed),
                rec(applied.clone()),
                rec(PlanEvent::Rejected)
            ]),
            PlanStatus::Applied
        );
        assert_eq!(
            plan_status(&[rec(PlanEvent::Attention), rec(PlanEvent::RetryRequested)]),
            PlanStatus::RetryRequested
        );
        let upstream = PlanEvent::Failed { class: Some(crate::work::FailureClass::Upstream) };
        let request = PlanRequest {
            plan_id: "p1".into(),
            sequence: 1,
            prior_root_work_id: Some(id("w")),
            trigger_fingerprint: "f".into(),
            trigger: PlanTrigger::Recovery,
            created_at: crate::time::WallTime(0),
        };
        assert!(!PlanView::new(request.clone(), &[rec(upstream)]).charged());
        assert!(PlanView::new(request.clone(), &[rec(PlanEvent::Failed { class: None })]).charged());
        let view = PlanView::new(request, &[rec(PlanEvent::Proposed), rec(applied)]);
        assert_eq!(active_root(Some(&id("w")), &[view]), Some(id("p1-r")));
    }
}
