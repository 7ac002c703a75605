//! Table tests of the goal decision procedure and dispatch selection, and properties of the
//! projection and the loop.

use super::cycle::RunLoop;
use super::projection::project_governed;
use super::*;
use crate::ids::Id;
use crate::time::WallTime;
use crate::work::team::Team;
use crate::work::{Finding, NextAction as W, Projection, WorkState as S};

fn id(s: &str) -> Id {
    Id::new(s).expect("a valid id")
}

fn item(name: &str, state: S, next: W, charged: u32) -> GraphItem {
    GraphItem {
        id: id(name),
        projection: Projection {
            state,
            reason: String::new(),
            next_action: next,
            unresolved_dependencies: Vec::new(),
            attempts_used: charged,
            charged_attempts: charged,
            attempts_remaining: 3u32.saturating_sub(charged),
            latest_run_id: None,
            approval_id: None,
            blocked_on_decision: None,
            open_findings: Vec::new(),
            accepted_seq: None,
            landed: false,
        },
    }
}

fn goal(auto: Automation, max_total: u32, parallel: u32) -> GoalIntent {
    let limits = GoalLimits {
        max_total_attempts: max_total,
        max_parallel_work: parallel,
        ..GoalLimits::default()
    };
    GoalIntent::new(id("g"), "G".into(), Some(id("root")), Team::new(), limits, auto, WallTime(0))
        .expect("a valid goal")
}

const MANUAL: Automation = Automation {
    land_accepted: false,
    accept_passing_proof: false,
    resume_approved: true,
    retry_blocked: false,
};
const AUTO: Automation = Automation {
    land_accepted: false,
    accept_passing_proof: true,
    resume_approved: true,
    retry_blocked: true,
};

#[test]
fn the_decision_procedure_first_match_wins() {
    use GoalNext as N;
    use GoalState as G;
    /// Name, automation, attempt ceiling, graph, lease held elsewhere, expected outcome.
    type Case = (&'static str, Automation, u32, Vec<GraphItem>, bool, (G, N));
    let cases: Vec<Case> = vec![
        (
            "lease elsewhere",
            MANUAL,
            100,
            vec![item("root", S::Ready, W::Run, 0)],
            true,
            (G::Running, N::WaitForRun),
        ),
        (
            "root accepted",
            MANUAL,
            100,
            vec![item("root", S::Succeeded, W::None, 1)],
            false,
            (G::Succeeded, N::None),
        ),
        (
            "work running elsewhere",
            MANUAL,
            100,
            vec![item("a", S::Running, W::WaitForRun, 0), item("root", S::Ready, W::Run, 0)],
            false,
            (G::Running, N::WaitForRun),
        ),
        (
            "passing proof, automated",
            AUTO,
            100,
            vec![item("root", S::InReview, W::Review, 1)],
            false,
            (G::Ready, N::Run),
        ),
        (
            "passing proof, manual",
            MANUAL,
            100,
            vec![item("root", S::InReview, W::Review, 1)],
            false,
            (G::AwaitingAttention, N::Review),
        ),
        (
            "approved resume, budget gone",
            MANUAL,
            1,
            vec![item("root", S::AwaitingApproval, W::Resume, 1)],
            false,
            (G::Ready, N::Run),
        ),
        (
            "ready, budget gone",
            MANUAL,
            1,
            vec![item("a", S::Succeeded, W::None, 1), item("root", S::Ready, W::Run, 0)],
            false,
            (G::BudgetExhausted, N::None),
        ),
        ("ready", MANUAL, 100, vec![item("root", S::Ready, W::Run, 0)], false, (G::Ready, N::Run)),
        (
            "pending approval",
            MANUAL,
            100,
            vec![item("root", S::AwaitingApproval, W::ResolveApproval, 1)],
            false,
            (G::AwaitingAttention, N::ResolveApproval),
        ),
        (
            "resume not automated",
            Automation { resume_approved: false, ..MANUAL },
            100,
            vec![item("root", S::AwaitingApproval, W::Resume, 1)],
            false,
            (G::AwaitingAttention, N::Run),
        ),
        (
            "retry not automated",
            MANUAL,
            100,
            vec![item("root", S::Blocked, W::Retry, 1)],
            false,
            (G::Blocked, N::Retry),
        ),
        (
            "retry automated",
            AUTO,
            100,
            vec![item("root", S::Blocked, W::Retry, 1)],
            false,
            (G::Ready, N::Run),
        ),
        (
            "retry automated, budget gone",
            AUTO,
            1,
            vec![item("root", S::Blocked, W::Retry, 1)],
            false,
            (G::BudgetExhausted, N::None),
        ),
        (
            "stopped for good",
            AUTO,
            100,
            vec![item("root", S::Blocked, W::None, 1)],
            false,
            (G::Blocked, N::None),
        ),
        (
            "waiting on a stopped prerequisite",
            AUTO,
            100,
            vec![
                item("a", S::Blocked, W::None, 3),
                item("root", S::Waiting, W::WaitForDependencies, 0),
            ],
            false,
            (G::Blocked, N::None),
        ),
    ];
    for (name, auto, max_total, items, lease, want) in cases {
        let p = project_goal(&goal(auto, max_total, 1), &items, &[], lease);
        assert_eq!((p.state, p.next_action), want, "{name}: {}", p.reason);
    }
}

#[test]
fn an_item_with_open_findings_is_never_accepted_by_automation() {
    let mut reopened = item("root", S::InReview, W::Review, 2);
    reopened.projection.open_findings = vec![Finding { id: "f1".into(), statement: "typo".into() }];
    let g = goal(AUTO, 100, 1);
    let p = project_goal(&g, std::slice::from_ref(&reopened), &[], false);
    assert_eq!((p.state, p.next_action), (GoalState::AwaitingAttention, GoalNext::Review));
    assert!(acceptances(&g, &[reopened]).is_empty());
}

#[test]
fn dispatch_takes_graph_order_within_parallelism_and_budget() {
    let items = vec![
        item("a", S::Ready, W::Run, 0),
        item("b", S::AwaitingApproval, W::Resume, 1),
        item("c", S::Blocked, W::Retry, 1),
        item("d", S::Ready, W::Run, 0),
    ];
    let g = goal(AUTO, 4, 3);
    let p = project_goal(&g, &items, &[], false);
    assert_eq!(p.attempts_remaining, 2);
    let picked = candidates(&g, &items, &p);
    let want = vec![
        (id("a"), DispatchAction::Run),
        (id("b"), DispatchAction::Resume),
        (id("c"), DispatchAction::Retry),
    ];
    assert_eq!(
        picked, want,
        "a and c take the two attempts left, b is free, d waits for parallelism"
    );
    let tight = goal(AUTO, 3, 3);
    let p = project_goal(&tight, &items, &[], false);
    let ids: Vec<Id> = candidates(&tight, &items, &p).into_iter().map(|c| c.0).collect();
    assert_eq!(ids, vec![id("a"), id("b")], "one attempt left: a takes it; the resume is free");
    let manual = goal(MANUAL, 100, 20);
    let p = project_goal(&manual, &items, &[], false);
    let ids: Vec<Id> = candidates(&manual, &items, &p).into_iter().map(|c| c.0).collect();
    assert_eq!(ids, vec![id("a"), id("b"), id("d")], "no retry without the flag");
}

#[test]
fn nothing_is_dispatched_unless_the_goal_is_ready_to_run() {
    let items = vec![item("a", S::Running, W::WaitForRun, 0), item("root", S::Ready, W::Run, 0)];
    let g = goal(AUTO, 100, 2);
    let p = project_goal(&g, &items, &[], false);
    assert!(candidates(&g, &items, &p).is_empty());
}

#[test]
fn a_tick_stops_after_one_cycle_and_a_run_on_no_progress() {
    let g = goal(MANUAL, 100, 1);
    let ready = project_goal(&g, &[item("root", S::Ready, W::Run, 0)], &[], false);
    let mut tick = RunLoop::new(Mode::Tick, &g.limits, WallTime(0));
    assert!(tick.begin(WallTime(1), &ready).is_none());
    let s = tick.end(WallTime(2), "x", "y", &ready, true).expect("a tick stops");
    assert_eq!(s.reason, StopReason::TickComplete);
    let mut run = RunLoop::new(Mode::Run, &g.limits, WallTime(0));
    assert!(run.begin(WallTime(1), &ready).is_none());
    assert!(run.end(WallTime(2), "x", "y", &ready, true).is_none(), "progress: go on");
    assert!(run.begin(WallTime(3), &ready).is_none());
    let s = run.end(WallTime(4), "y", "y", &ready, true).expect("no progress stops");
    assert_eq!(s.reason, StopReason::NoProgress);
    let late = WallTime(g.limits.max_runtime_ms as i64 + 1);
    assert_eq!(run.begin(late, &ready).map(|s| s.reason), Some(StopReason::BudgetExhausted));
    let review = project_goal(&g, &[item("root", S::InReview, W::Review, 1)], &[], false);
    let mut run = RunLoop::new(Mode::Run, &g.limits, WallTime(0));
    assert_eq!(
        run.begin(WallTime(1), &review).map(|s| s.reason),
        Some(StopReason::AwaitingAttention)
    );
}

#[test]
fn receipts_and_reasons_do_not_move_the_fingerprints() {
    let g = goal(MANUAL, 100, 1);
    let items = vec![item("root", S::InReview, W::Review, 1)];
    let p = project_goal(&g, &items, &[], false);
    let mut reworded = items.clone();
    reworded[0].projection.reason = "said differently".into();
    let q = GoalProjection { reason: "other words".into(), ..p.clone() };
    assert_eq!(progress_fingerprint(&items), progress_fingerprint(&reworded));
    assert_eq!(goal_fingerprint(&p, &items), goal_fingerprint(&q, &reworded));
    let mut moved = items.clone();
    moved[0].projection.attempts_used = 2;
    assert_ne!(progress_fingerprint(&items), progress_fingerprint(&moved));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn any_item(n: usize) -> impl Strategy<Value = GraphItem> {
        let states = prop_oneof![
            Just((S::Ready, W::Run)),
            Just((S::Waiting, W::WaitForDependencies)),
            Just((S::AwaitingApproval, W::Resume)),
            Just((S::AwaitingApproval, W::ResolveApproval)),
            Just((S::Blocked, W::Retry)),
            Just((S::Blocked, W::None)),
            Just((S::InReview, W::Review)),
            Just((S::Succeeded, W::None)),
            Just((S::Cancelled, W::None)),
        ];
        (states, 0u32..4).prop_map(move |((s, w), charged)| item(&format!("w{n}"), s, w, charged))
    }

    fn graph() -> impl Strategy<Value = Vec<GraphItem>> {
        (1usize..8).prop_flat_map(|len| (0..len).map(any_item).collect::<Vec<_>>())
    }

    fn automation() -> impl Strategy<Value = Automation> {
        (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(a, r, t)| Automation {
            accept_passing_proof: a,
            resume_approved: r,
            retry_blocked: t,
            land_accepted: false,
        })
    }

    /// A plan history drawn as statuses: each plan proposed, then maybe decided.
    fn plan_history() -> impl Strategy<Value = Vec<(u8, bool)>> {
        proptest::collection::vec((0u8..6, any::<bool>()), 0..6)
    }

    fn plans_from(history: &[(u8, bool)], graph_fp: &str, root: &Id) -> Vec<plan::PlanView> {
        use plan::{PlanEvent as E, PlanRecord, PlanRequest, PlanTrigger, PlanView};
        history
            .iter()
            .enumerate()
            .map(|(n, (kind, same_graph))| {
                let request = PlanRequest {
                    plan_id: format!("p{}", n + 1),
                    sequence: n as u32 + 1,
                    prior_root_work_id: Some(root.clone()),
                    trigger_fingerprint: if *same_graph {
                        graph_fp.to_owned()
                    } else {
                        "old".into()
                    },
                    trigger: PlanTrigger::Recovery,
                    created_at: WallTime(0),
                };
                let rec = |event| PlanRecord { event, actor: "op".into(), reason: "why".into() };
                let mut events = vec![rec(E::Proposed)];
                match kind {
                    0 => {}
                    1 => events.push(rec(E::Rejected)),
                    2 => events.push(rec(E::Attention)),
                    3 => events.push(rec(E::Failed { class: None })),
                    4 => events
                        .push(rec(E::Failed { class: Some(crate::work::FailureClass::Upstream) })),
                    _ => events.push(rec(E::RetryRequested)),
                }
                PlanView::new(request, &events)
            })
            .collect()
    }

    fn replanning_goal(max_replans: u32) -> GoalIntent {
        use plan::{ReplanningPolicy, Template};
        let t =
            Template { path: "/wf".into(), sha256: "0".repeat(64), max_attempts: 2, root: true };
        let policy = ReplanningPolicy {
            planner_specialist: "planner".into(),
            auto_apply: false,
            max_replans,
            max_work_items_per_plan: 4,
            max_total_work_items: 10,
            templates: std::collections::BTreeMap::from([("ship".into(), t)]),
            review: None,
        };
        let mut team = Team::new();
        team.insert("planner".into(), Default::default());
        let limits = GoalLimits { max_total_attempts: 50, ..GoalLimits::default() };
        GoalIntent::new(id("g"), "G".into(), Some(id("root")), team, limits, MANUAL, WallTime(0))
            .and_then(|g| g.with_replanning(policy))
            .expect("a valid goal")
    }

    proptest! {
        /// Plans never reset attempts: the goal's counts are the graph's (plus the
        /// superseded generations'), whatever its plans say.
        #[test]
        fn replanning_never_resets_attempt_counts(items in graph(), history in plan_history(), outside in 0u32..5) {
            let g = replanning_goal(5);
            let root = items.last().unwrap().id.clone();
            let plans = plans_from(&history, &progress_fingerprint(&items), &root);
            let p = project_governed(&g, &items, &plans, (outside, outside), false);
            let charged: u32 = items.iter().map(|i| i.projection.charged_attempts).sum::<u32>() + outside;
            prop_assert_eq!(p.charged_attempts, charged);
            prop_assert_eq!(p.attempts_remaining, g.limits.max_total_attempts.saturating_sub(charged));
        }

        /// A proposed plan always waits for a person; a rejected one is never pending;
        /// replanning is offered only with a charged replan left; an uncharged planner
        /// failure never counts against the replan budget.
        #[test]
        fn plans_are_decided_by_people_and_budgeted_by_one_rule(items in graph(), history in plan_history(), max in 1u32..4) {
            let g = replanning_goal(max);
            let root = items.last().unwrap().id.clone();
            let plans = plans_from(&history, &progress_fingerprint(&items), &root);
            let p = project_goal(&g, &items, &plans, false);
            let charged = plans.iter().filter(|v| v.charged()).count() as u32;
            prop_assert_eq!(p.replans_remaining, max.saturating_sub(charged));
            match plans.last().map(|v| v.status) {
                Some(plan::PlanStatus::Proposed) => {
                    prop_assert_eq!((p.state, p.next_action), (GoalState::AwaitingAttention, GoalNext::ReviewPlan));
                }
                Some(plan::PlanStatus::Rejected) => prop_assert!(p.pending_plan_id.is_none()),
                _ => {}
            }
            if p.next_action == GoalNext::Replan {
                prop_assert!(p.replans_remaining > 0);
                prop_assert!(candidates(&g, &items, &p).is_empty(), "never replanning while work can run");
            }
        }

        #[test]
        fn dispatch_never_exceeds_parallelism_budget_or_automation(
            items in graph(), auto in automation(), max_total in 1u32..12, parallel in 1u32..4,
        ) {
            let g = goal(auto, max_total, parallel);
            let p = project_goal(&g, &items, &[], false);
            let picked = candidates(&g, &items, &p);
            prop_assert!(picked.len() <= parallel as usize);
            let charged = picked.iter().filter(|c| c.1 != DispatchAction::Resume).count() as u32;
            prop_assert!(charged <= p.attempts_remaining);
            for (id, action) in &picked {
                let q = &items.iter().find(|i| &i.id == id).unwrap().projection;
                match action {
                    DispatchAction::Run => prop_assert_eq!(q.state, S::Ready),
                    DispatchAction::Resume => prop_assert!(auto.resume_approved && q.next_action == W::Resume),
                    DispatchAction::Retry => prop_assert!(auto.retry_blocked && q.next_action == W::Retry),
                }
            }
            if !auto.accept_passing_proof {
                prop_assert!(acceptances(&g, &items).is_empty());
            }
        }

        #[test]
        fn a_ready_goal_always_has_something_to_do(items in graph(), auto in automation(), max_total in 1u32..12) {
            let g = goal(auto, max_total, 3);
            let p = project_goal(&g, &items, &[], false);
            if (p.state, p.next_action) == (GoalState::Ready, GoalNext::Run) {
                prop_assert!(!candidates(&g, &items, &p).is_empty() || !acceptances(&g, &items).is_empty(), "{}", p.reason);
            }
        }

        #[test]
        fn success_is_exactly_an_accepted_root(items in graph(), auto in automation()) {
            let p = project_goal(&goal(auto, 100, 1), &items, &[], false);
            let root_accepted = items.last().unwrap().projection.state == S::Succeeded;
            prop_assert_eq!(p.state == GoalState::Succeeded, root_accepted);
        }
    }
}

/// A host whose acceptances are refused (a person or another process changed the item after
/// the goal read it); `then` is what the item reads as afterwards.
struct RefusingHost {
    intent: GoalIntent,
    items: Vec<GraphItem>,
    then: Option<GraphItem>,
    said: Vec<String>,
}

impl engine::GoalHost for RefusingHost {
    type Error = String;
    fn now(&mut self) -> WallTime {
        WallTime(1)
    }
    fn refresh(&mut self) -> Result<engine::GoalView, String> {
        let projection = project_goal(&self.intent, &self.items, &[], false);
        Ok(engine::GoalView {
            intent: self.intent.clone(),
            items: self.items.clone(),
            plans: Vec::new(),
            projection,
            outside: Vec::new(),
        })
    }
    fn accept(&mut self, _work: &Id) -> Result<Result<(), crate::error::RecordError>, String> {
        if let Some(then) = self.then.take() {
            self.items = vec![then];
        }
        Ok(Err(crate::error::RecordError::refused("it is running (a retry started elsewhere)")))
    }
    fn land(
        &mut self,
        _: &Id,
    ) -> Result<Result<Option<String>, crate::error::RecordError>, Self::Error> {
        Ok(Ok(None))
    }

    fn dispatch(&mut self, _picked: &[(Id, DispatchAction)]) -> Vec<engine::Outcome> {
        Vec::new()
    }
    fn plan(&mut self) -> Result<String, String> {
        Err("no planner".into())
    }
    fn say(&mut self, line: String) {
        self.said.push(line);
    }
}

#[test]
fn a_refused_acceptance_is_for_a_person_not_an_error_of_the_tick() {
    let in_review = item("root", S::InReview, W::Review, 1);
    // The refusal stands on a fresh read: the goal waits for a person, naming the command.
    let mut host = RefusingHost {
        intent: goal(AUTO, 10, 1),
        items: vec![in_review],
        then: None,
        said: vec![],
    };
    let report = engine::drive(&mut host, Mode::Run).expect("a refusal is no error");
    assert_eq!(report.stop.reason, StopReason::AwaitingAttention);
    assert!(report.stop.detail.contains("harn work accept root"), "{}", report.stop.detail);
    assert_eq!(report.acceptances, 0);
    assert!(host.said.iter().any(|l| l.contains("accept root: refused")), "{:?}", host.said);
    // The fresh read explains it (the item is running elsewhere now): the goal waits for it.
    let running = item("root", S::Running, W::None, 1);
    let in_review = item("root", S::InReview, W::Review, 1);
    let mut host = RefusingHost {
        intent: goal(AUTO, 10, 1),
        items: vec![in_review],
        then: Some(running),
        said: vec![],
    };
    let report = engine::drive(&mut host, Mode::Run).expect("a refusal is no error");
    assert_eq!(report.stop.reason, StopReason::Running, "{:?}", report.stop);
}

#[test]
fn a_reopened_mission_runs_its_reopened_work_before_the_milestone_is_reassessed() {
    use plan::{Mission, PlanEvent as E, PlanRecord, PlanRequest, PlanTrigger, PlanView};
    let t =
        plan::Template { path: "/wf".into(), sha256: "0".repeat(64), max_attempts: 2, root: true };
    let policy = plan::ReplanningPolicy {
        planner_specialist: "planner".into(),
        auto_apply: true,
        max_replans: 5,
        max_work_items_per_plan: 4,
        max_total_work_items: 10,
        templates: std::collections::BTreeMap::from([("ship".into(), t)]),
        review: None,
    };
    let mission = Mission {
        objective: "ship".into(),
        acceptance: vec!["it ships".into()],
        max_milestones: 2,
    };
    let mut team = Team::new();
    team.insert("planner".into(), Default::default());
    let g =
        GoalIntent::new(id("g"), "G".into(), None, team, GoalLimits::default(), AUTO, WallTime(0))
            .and_then(|g| g.with_replanning(policy))
            .and_then(|g| g.with_mission(mission))
            .expect("a valid mission");
    let rec = |event| PlanRecord { event, actor: "op".into(), reason: "why".into() };
    let request = |n: u32| PlanRequest {
        plan_id: format!("p{n}"),
        sequence: n,
        prior_root_work_id: Some(id("root")),
        trigger_fingerprint: "f".into(),
        trigger: PlanTrigger::Milestone,
        created_at: WallTime(0),
    };
    let applied = E::Applied {
        root_work_id: id("root"),
        work_ids: vec![id("a"), id("root")],
        milestone: Some(1),
    };
    let plans = |last: Vec<E>| {
        vec![
            PlanView::new(request(1), &[rec(E::Proposed), rec(applied.clone())]),
            PlanView::new(request(2), &last.into_iter().map(rec).collect::<Vec<_>>()),
        ]
    };
    // The prerequisite was reopened; the root stays accepted.
    let items = vec![item("a", S::Ready, W::Run, 1), item("root", S::Succeeded, W::None, 1)];
    let completed = plans(vec![E::Proposed, E::Completed]);
    let p = project_goal(&g, &items, &completed, false);
    assert_eq!(p.state, GoalState::Succeeded, "a complete mission stays complete: {}", p.reason);
    let reopened = plans(vec![E::Proposed, E::Completed, E::Reopened]);
    let p = project_goal(&g, &items, &reopened, false);
    assert_eq!((p.state, p.next_action), (GoalState::Ready, GoalNext::Run), "{}", p.reason);
    // Once everything is accepted again, the milestone is reassessed.
    let items = vec![item("a", S::Succeeded, W::None, 1), item("root", S::Succeeded, W::None, 1)];
    let p = project_goal(&g, &items, &reopened, false);
    assert_eq!((p.state, p.next_action), (GoalState::Ready, GoalNext::PlanMilestone));
}
