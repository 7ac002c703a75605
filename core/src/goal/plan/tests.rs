//! Tests of the replanning policy and of proposal validation.

use super::*;
use crate::ids::Id;
use crate::work::FieldError;
use std::collections::{BTreeMap, BTreeSet};

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
    Proposal { decision: PlanDecision::Apply, rationale: "because".into(), work, milestone: None }
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
    let p = apply(vec![spec("tests", &["parser"], "impl"), spec("release", &["tests"], "ship")]);
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
    p.review =
        Some(ReviewPanel { reviewer_specialists: vec!["reviewer".into()], max_revision_rounds: 3 });
    assert!(p.validate(&team, 8).is_ok(), "1 + 1*4 + 3 = 8 calls fit");
    assert_eq!(p.validate(&team, 7).unwrap_err().field, "replanning.review");
    let mut p = policy();
    p.review =
        Some(ReviewPanel { reviewer_specialists: vec!["planner".into()], max_revision_rounds: 0 });
    assert!(p.validate(&team, 20).is_err(), "the planner never reviews itself");
}
