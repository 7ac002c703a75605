//! Goal decisions over a graph of 100 work items: the goal projection, the dispatch
//! selection, and the goal fingerprint a service compares between sweeps.

use criterion::{criterion_group, criterion_main, Criterion};
use harn_core::goal::{
    candidates, goal_fingerprint, project_goal, Automation, GoalIntent, GoalLimits, GraphItem,
};
use harn_core::ids::Id;
use harn_core::time::WallTime;
use harn_core::work::team::Team;
use harn_core::work::{NextAction, Projection, WorkState};
use std::hint::black_box;

const ITEMS: usize = 100;

fn id(s: &str) -> Id {
    Id::new(s).expect("bench ids are valid")
}

/// A quiescent graph: the first half accepted, one item in review, the rest waiting.
fn graph() -> Vec<GraphItem> {
    (0..ITEMS)
        .map(|n| {
            let (state, next) = match n {
                n if n < ITEMS / 2 => (WorkState::Succeeded, NextAction::None),
                n if n == ITEMS / 2 => (WorkState::InReview, NextAction::Review),
                _ => (WorkState::Waiting, NextAction::WaitForDependencies),
            };
            let before = (n > 0).then(|| id(&format!("work-{}", n - 1)));
            GraphItem {
                id: id(&format!("work-{n}")),
                projection: Projection {
                    state,
                    reason: "a sentence about why, as long as reasons usually are".into(),
                    next_action: next,
                    unresolved_dependencies: before.into_iter().collect(),
                    attempts_used: 2,
                    charged_attempts: 1,
                    attempts_remaining: 2,
                    latest_run_id: Some(id(&format!("wf-2026-11-30-04-00-00-000-{n:06x}"))),
                    approval_id: None,
                    blocked_on_decision: None,
                    open_findings: Vec::new(),
                    accepted_seq: (n < ITEMS / 2).then_some(9),
                    landed: false,
                },
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let limits = GoalLimits { max_total_attempts: 1_000, ..GoalLimits::default() };
    let intent = GoalIntent::new(
        id("g"),
        "a goal".into(),
        Some(id(&format!("work-{}", ITEMS - 1))),
        Team::new(),
        limits,
        Automation::default(),
        WallTime(0),
    )
    .expect("a valid goal");
    let items = graph();
    let mut group = c.benchmark_group("goal_100_items");
    group.bench_function("project", |b| {
        b.iter(|| project_goal(black_box(&intent), black_box(&items), &[], false))
    });
    let p = project_goal(&intent, &items, &[], false);
    group.bench_function("candidates", |b| {
        b.iter(|| candidates(black_box(&intent), black_box(&items), &p))
    });
    group.bench_function("project_and_fingerprint", |b| {
        b.iter(|| {
            let p = project_goal(black_box(&intent), black_box(&items), &[], false);
            goal_fingerprint(&p, &items)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
