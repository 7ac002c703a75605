//! Work-item reads: projecting one item with 1,000 events, and the whole read path (journal
//! parse, history rules, projection) of the same history from its bytes.

use criterion::{criterion_group, criterion_main, Criterion};
use harn_core::ids::Id;
use harn_core::journal::{encode_line_into, parse_as};
use harn_core::time::WallTime;
use harn_core::work::events::EVENT_VERSION;
use harn_core::work::events::{validate_history, EventKind, Finding, Trigger, WorkEvent};
use harn_core::work::intent::{WorkflowRef, INTENT_VERSION};
use harn_core::work::projection::{project, AttemptStatus, Inputs};
use harn_core::work::WorkIntent;
use std::collections::BTreeMap;
use std::hint::black_box;

const EVENTS: usize = 1_000;

fn id(s: &str) -> Id {
    Id::new(s).expect("bench ids are valid")
}

fn intent() -> WorkIntent {
    WorkIntent {
        schema_version: INTENT_VERSION,
        id: id("w1"),
        title: "Add a parser".into(),
        objective: "Parse the config file and report every bad key with its line.".into(),
        acceptance: vec!["tests pass".into(), "bad keys are named".into()],
        dependencies: Vec::new(),
        workflow: WorkflowRef { path: "/repo/wf.sh".into(), sha256: "a".repeat(64) },
        max_attempts: 1_000,
        max_uncharged_attempts: 3,
        created_at: WallTime(0),
        sha256: None,
        strict_acceptance: false,
        source: None,
    }
    .sealed()
}

/// A long-lived item: attempts that fail, each followed by an operator's reopen with findings
/// or a cancel and reopen, up to 1,000 events.
fn history() -> (Vec<WorkEvent>, Vec<AttemptStatus>) {
    let mut kinds = vec![EventKind::Created { intent_sha256: None }];
    let mut attempts = Vec::new();
    while kinds.len() < EVENTS {
        let n = attempts.len() as u32 + 1;
        let trigger = if n == 1 { Trigger::Initial } else { Trigger::Retry };
        let run_id = id(&format!("wf-{n}"));
        kinds.push(EventKind::AttemptStarted {
            run_id,
            attempt: n,
            trigger,
            prerequisites: BTreeMap::new(),
        });
        attempts.push(AttemptStatus::Failed { class: None, decision_id: None });
        if n.is_multiple_of(2) {
            kinds.push(EventKind::Cancelled);
        }
        let statement = format!("the error for key {n} names no line");
        let findings = vec![Finding { id: "f1".into(), statement }];
        kinds.push(EventKind::Reopened { findings, feedback: None });
    }
    kinds.truncate(EVENTS);
    let events = kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| WorkEvent {
            schema_version: EVENT_VERSION,
            work_id: id("w1"),
            seq: i as u64 + 1,
            ts: WallTime(1_767_225_600_000 + i as i64 * 1_000),
            actor: "operator".into(),
            reason: None,
            kind,
        })
        .collect::<Vec<_>>();
    let starts =
        events.iter().filter(|e| matches!(e.kind, EventKind::AttemptStarted { .. })).count();
    attempts.truncate(starts);
    (events, attempts)
}

fn work_projection(c: &mut Criterion) {
    let intent = intent();
    let (events, attempts) = history();
    let prerequisites = BTreeMap::new();
    let mut bytes = Vec::new();
    for e in &events {
        encode_line_into(&mut bytes, e.seq, e.ts, e);
    }
    let mut group = c.benchmark_group("work_1000_events");
    group.bench_function("project", |b| {
        b.iter(|| {
            let inputs = Inputs::unleased(&intent, black_box(&events), &attempts, &prerequisites);
            project(&inputs)
        })
    });
    group.bench_function("parse_validate_project", |b| {
        b.iter(|| {
            let read = parse_as::<WorkEvent>("events.jsonl", black_box(&bytes)).unwrap();
            let events: Vec<WorkEvent> = read.records.into_iter().map(|r| r.body).collect();
            validate_history(&intent.id, &events).unwrap();
            let inputs = Inputs::unleased(&intent, &events, &attempts, &prerequisites);
            project(&inputs)
        })
    });
    group.finish();
}

criterion_group!(benches, work_projection);
criterion_main!(benches);
