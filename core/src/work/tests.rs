//! Unit tests of the work intent, history rules and every projection rule, and properties
//! of the projection over generated histories.

use super::events::{
    check_created, validate_history, Disposition, EventKind, Finding, Trigger, WorkEvent,
};
use super::fixtures::{id, intent, History};
use super::intent::{check_dependency_graph, WorkIntent};
use super::projection::check_acceptances;
use super::projection::{AttemptStatus, FailureClass, NextAction, Prerequisite, WorkState};
use crate::ids::Id;
use std::collections::BTreeMap;

fn failed(class: Option<FailureClass>) -> AttemptStatus {
    AttemptStatus::Failed { class, decision_id: None }
}

fn accepted(run: &str, attempt: u32) -> EventKind {
    EventKind::Accepted {
        run_id: id(run),
        attempt,
        proof_sha256: "b".repeat(64),
        dispositions: Vec::new(),
    }
}

fn state_and_action(p: &super::Projection) -> (WorkState, NextAction) {
    (p.state, p.next_action)
}

#[test]
fn a_fresh_item_is_ready_to_run() {
    let p = History::new().project();
    assert_eq!(state_and_action(&p), (WorkState::Ready, NextAction::Run));
    assert_eq!((p.attempts_used, p.charged_attempts, p.attempts_remaining), (0, 0, 3));
}

#[test]
fn acceptance_and_cancellation_are_sticky_until_reopened() {
    let mut h = History::new();
    h.attempt(AttemptStatus::Succeeded).push(accepted("wf-1", 1));
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::Succeeded, NextAction::None));
    assert_eq!(p.accepted_seq, Some(3));
    h.push(EventKind::Reopened { findings: Vec::new(), feedback: None });
    assert_eq!(
        state_and_action(&h.project()),
        (WorkState::Ready, NextAction::Run),
        "a reopened item starts a new window"
    );
    h.push(EventKind::Cancelled);
    assert_eq!(state_and_action(&h.project()), (WorkState::Cancelled, NextAction::None));
}

#[test]
fn unaccepted_or_unreadable_prerequisites_make_it_wait() {
    let h = History::new();
    let mut prereqs = BTreeMap::new();
    prereqs
        .insert(id("dep"), Some(Prerequisite { state: WorkState::InReview, accepted_seq: None }));
    prereqs.insert(id("gone"), None);
    let p = h.project_with(&prereqs, false);
    assert_eq!(state_and_action(&p), (WorkState::Waiting, NextAction::WaitForDependencies));
    assert_eq!(p.unresolved_dependencies, [id("dep"), id("gone")]);
}

#[test]
fn a_live_lease_elsewhere_means_running() {
    let p = History::new().project_with(&BTreeMap::new(), true);
    assert_eq!(state_and_action(&p), (WorkState::Running, NextAction::WaitForRun));
}

#[test]
fn a_running_attempt_is_waited_for() {
    let mut h = History::new();
    h.attempt(AttemptStatus::Running);
    assert_eq!(state_and_action(&h.project()), (WorkState::Running, NextAction::WaitForRun));
}

#[test]
fn a_parked_attempt_waits_for_its_approval_then_resumes() {
    let mut h = History::new();
    h.attempt(AttemptStatus::Parked { approval_id: "apr-1".into(), decided: false });
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::AwaitingApproval, NextAction::ResolveApproval));
    assert_eq!(p.approval_id.as_deref(), Some("apr-1"));
    h.attempts[0] = AttemptStatus::Parked { approval_id: "apr-1".into(), decided: true };
    h.push(EventKind::AttemptResumed { run_id: id("wf-1"), attempt: 1 });
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::AwaitingApproval, NextAction::Resume));
    assert_eq!(p.attempts_used, 1, "resuming uses no attempt");
}

#[test]
fn passing_proof_is_in_review_never_succeeded() {
    let mut h = History::new();
    h.attempt(AttemptStatus::Succeeded);
    assert_eq!(state_and_action(&h.project()), (WorkState::InReview, NextAction::Review));
}

#[test]
fn an_unreadable_transcript_blocks_with_retry_while_budget_remains() {
    let mut h = History::new();
    h.attempt(AttemptStatus::TranscriptUnreadable);
    assert_eq!(state_and_action(&h.project()), (WorkState::Blocked, NextAction::Retry));
}

#[test]
fn an_environment_failure_stops_uncharged() {
    let mut h = History::new();
    h.attempt(failed(Some(FailureClass::Environment)));
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::Blocked, NextAction::None));
    assert_eq!((p.attempts_used, p.charged_attempts), (1, 0));
}

#[test]
fn a_decision_failure_stops_and_names_the_decision() {
    let mut h = History::new();
    h.attempt(AttemptStatus::Failed {
        class: Some(FailureClass::Decision),
        decision_id: Some("schema".into()),
    });
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::Blocked, NextAction::None));
    assert_eq!(p.blocked_on_decision.as_deref(), Some("schema"));
    h.attempts[0] =
        AttemptStatus::Failed { class: Some(FailureClass::Decision), decision_id: None };
    assert_eq!(
        h.project().blocked_on_decision.as_deref(),
        Some(""),
        "unnamed decisions are the empty string"
    );
}

#[test]
fn upstream_failures_retry_until_the_uncharged_bound() {
    let mut h = History::new();
    h.attempt(failed(Some(FailureClass::Upstream)));
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::Blocked, NextAction::Retry));
    assert_eq!(p.charged_attempts, 0);
    h.attempt(failed(Some(FailureClass::Upstream)));
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::Blocked, NextAction::None));
    assert!(p.reason.contains("outside service"), "{}", p.reason);
}

#[test]
fn ordinary_failures_and_lost_runs_are_charged_until_the_budget_is_spent() {
    let mut h = History::new();
    h.attempt(failed(None)).attempt(AttemptStatus::Lost);
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::Blocked, NextAction::Retry));
    assert_eq!((p.charged_attempts, p.attempts_remaining), (2, 1));
    h.attempt(failed(None));
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::Blocked, NextAction::None));
    assert_eq!(p.attempts_remaining, 0);
}

#[test]
fn a_run_that_never_started_or_that_an_operator_or_a_cluster_stopped_costs_nothing() {
    let interrupted = failed(Some(FailureClass::Interrupted));
    let ended_by_cluster = failed(Some(FailureClass::Infrastructure));
    // Its host died while its workflow could not signal it; it ran, and the disk had no room
    // for its proof: neither is the work's doing.
    let host_died = failed(Some(FailureClass::HostDied));
    let unsealed = failed(Some(FailureClass::Unsealed));
    for nothing_ran in [
        AttemptStatus::NotStarted,
        failed(Some(FailureClass::NotStarted)),
        interrupted,
        ended_by_cluster,
        host_died,
        unsealed,
    ] {
        let mut h = History::new();
        h.attempt(nothing_ran.clone());
        let p = h.project();
        assert_eq!(
            state_and_action(&p),
            (WorkState::Blocked, NextAction::Retry),
            "{nothing_ran:?}"
        );
        assert_eq!((p.attempts_used, p.charged_attempts, p.attempts_remaining), (1, 0, 3));
        assert!(p.reason.contains("nothing was charged"), "{}", p.reason);
        // In a row up to the item's ceiling of uncharged attempts, then a person looks.
        h.attempt(nothing_ran.clone());
        let p = h.project();
        assert_eq!(state_and_action(&p), (WorkState::Blocked, NextAction::None), "{nothing_ran:?}");
        assert_eq!(p.charged_attempts, 0);
        assert!(p.reason.contains("2 attempts in a row"), "{}", p.reason);
    }
    let mut h = History::new();
    h.attempt(AttemptStatus::NotStarted).attempt(failed(None)).attempt(AttemptStatus::NotStarted);
    let p = h.project();
    assert_eq!(
        state_and_action(&p),
        (WorkState::Blocked, NextAction::Retry),
        "a charged run resets the row"
    );
    assert_eq!(p.charged_attempts, 1);
}

#[test]
fn reopening_keeps_history_and_budget() {
    let mut h = History::new();
    h.attempt(failed(None)).attempt(AttemptStatus::Succeeded).push(accepted("wf-2", 2));
    h.push(EventKind::Reopened { findings: Vec::new(), feedback: None });
    let p = h.project();
    assert_eq!(state_and_action(&p), (WorkState::Ready, NextAction::Run));
    assert_eq!(
        (p.attempts_used, p.charged_attempts, p.attempts_remaining),
        (2, 2, 1),
        "reopen never resets budgets"
    );
    h.attempt(AttemptStatus::Succeeded).push(accepted("wf-3", 3));
    h.push(EventKind::Reopened { findings: Vec::new(), feedback: None });
    let p = h.project();
    assert_eq!(
        state_and_action(&p),
        (WorkState::Blocked, NextAction::None),
        "a reopened item with its budget spent is not offered a run that would be refused"
    );
}

#[test]
fn findings_stay_open_until_disposed_and_a_later_reopen_replaces_them() {
    let f = |n: u32, s: &str| Finding { id: format!("f{n}"), statement: s.into() };
    let mut h = History::new();
    h.attempt(AttemptStatus::Succeeded).push(accepted("wf-1", 1));
    h.push(EventKind::Reopened {
        findings: vec![f(1, "flaky test"), f(2, "missing docs")],
        feedback: None,
    });
    assert_eq!(h.project().open_findings.len(), 2);
    h.attempt(AttemptStatus::Succeeded);
    h.push(EventKind::Accepted {
        run_id: id("wf-2"),
        attempt: 2,
        proof_sha256: "c".repeat(64),
        dispositions: vec![Disposition::Fixed { id: "f1".into() }],
    });
    assert_eq!(h.project().open_findings, [f(2, "missing docs")]);
    h.push(EventKind::Reopened { findings: vec![f(1, "slow")], feedback: None });
    assert_eq!(h.project().open_findings, [f(1, "slow")]);
}

#[test]
fn a_proof_built_on_a_prerequisite_accepted_again_since_needs_a_new_attempt() {
    let mut h = History::new();
    let built_on = BTreeMap::from([(id("dep"), 7u64)]);
    h.push(EventKind::AttemptStarted {
        run_id: id("wf-1"),
        attempt: 1,
        trigger: Trigger::Initial,
        prerequisites: built_on,
    });
    h.attempts.push(AttemptStatus::Succeeded);
    let same = BTreeMap::from([(
        id("dep"),
        Some(Prerequisite { state: WorkState::Succeeded, accepted_seq: Some(7) }),
    )]);
    assert_eq!(
        state_and_action(&h.project_with(&same, false)),
        (WorkState::InReview, NextAction::Review)
    );
    let again = BTreeMap::from([(
        id("dep"),
        Some(Prerequisite { state: WorkState::Succeeded, accepted_seq: Some(12) }),
    )]);
    let p = h.project_with(&again, false);
    assert_eq!(state_and_action(&p), (WorkState::Ready, NextAction::Run));
    assert!(p.reason.contains("accepted again"), "{}", p.reason);
}

#[test]
fn history_rules_are_enforced() {
    let mut h = History::new();
    h.attempt(failed(None));
    let intent = intent();
    assert!(validate_history(&intent.id, &h.events).is_ok());
    let mut bad = h.events.clone();
    bad[1].kind = EventKind::AttemptStarted {
        run_id: id("wf-1"),
        attempt: 2,
        trigger: Trigger::Initial,
        prerequisites: BTreeMap::new(),
    };
    assert!(validate_history(&intent.id, &bad)
        .unwrap_err()
        .message
        .contains("breaks the sequence"));
    let mut bad = h.events.clone();
    bad.remove(0);
    assert!(validate_history(&intent.id, &bad).is_err(), "must start with work.created");
    let mut bad = h.events.clone();
    bad[1].seq = 5;
    assert_eq!(validate_history(&intent.id, &bad).unwrap_err().field, "event 2");
    let mut bad = h.events.clone();
    bad.push(WorkEvent {
        kind: EventKind::AttemptResumed { run_id: id("wf-9"), attempt: 1 },
        seq: 3,
        ..bad[1].clone()
    });
    assert!(validate_history(&intent.id, &bad).is_err(), "resuming an unknown attempt");
    assert!(validate_history(&id("other"), &h.events).is_err(), "another item's history");
}

#[test]
fn intents_are_validated_field_by_field() {
    assert_eq!(intent().validate(), Ok(()));
    let bad = |f: fn(&mut WorkIntent)| {
        let mut i = intent();
        f(&mut i);
        i.validate().unwrap_err().field
    };
    assert_eq!(bad(|i| i.title = " ".into()), "title");
    assert_eq!(bad(|i| i.objective = "x".repeat(4001)), "objective");
    assert_eq!(bad(|i| i.acceptance = vec!["ok".into(), "".into()]), "acceptance[1]");
    assert_eq!(bad(|i| i.dependencies = vec![Id::new("w1").unwrap()]), "dependencies");
    assert_eq!(bad(|i| i.workflow.path = "wf.sh".into()), "workflow.path");
    assert_eq!(bad(|i| i.workflow.sha256 = "XYZ".into()), "workflow.sha256");
    assert_eq!(bad(|i| i.max_attempts = 0), "max_attempts");
    assert_eq!(bad(|i| i.max_uncharged_attempts = 101), "max_uncharged_attempts");
}

#[test]
fn an_intent_edited_after_creation_is_refused_even_with_its_digest_recomputed() {
    let i = intent();
    let mut edited = i.clone();
    edited.max_attempts = 9;
    assert_eq!(edited.validate().unwrap_err().field, "sha256", "an edit without the digest");
    let recomputed = edited.clone().sealed();
    assert_eq!(recomputed.validate(), Ok(()), "a recomputed digest passes on its own");
    let history = History::new().events.clone();
    assert_eq!(check_created(&i, "intent.json", &history), Ok(()));
    let err = check_created(&recomputed, "intent.json", &history).unwrap_err().to_string();
    assert!(err.contains("changed after creation"), "{err}");
    let legacy = WorkIntent { schema_version: 2, sha256: None, ..i.clone() };
    assert_eq!(legacy.validate(), Ok(()), "version 2 intents are still read");
    let unanchored =
        vec![WorkEvent { kind: EventKind::Created { intent_sha256: None }, ..history[0].clone() }];
    assert_eq!(check_created(&legacy, "intent.json", &unanchored), Ok(()));
    assert!(
        check_created(&legacy, "intent.json", &history).is_err(),
        "a downgrade still meets the anchor"
    );
    let v3_unsealed = WorkIntent { sha256: None, ..i };
    assert_eq!(v3_unsealed.validate().unwrap_err().field, "sha256");
}

#[test]
fn an_acceptance_counts_only_against_the_digest_of_its_proof() {
    let mut h = History::new();
    h.push(EventKind::AttemptStarted {
        run_id: id("wf-1"),
        attempt: 1,
        trigger: Trigger::Initial,
        prerequisites: BTreeMap::new(),
    });
    h.push(EventKind::Accepted {
        run_id: id("wf-1"),
        attempt: 1,
        proof_sha256: "b".repeat(64),
        dispositions: Vec::new(),
    });
    let proofs = |d: Option<&str>| BTreeMap::from([(id("wf-1"), d.map(str::to_owned))]);
    let b = "b".repeat(64);
    let passed = [AttemptStatus::Succeeded];
    assert_eq!(check_acceptances(&h.events, &proofs(Some(&b)), &passed), Ok(()));
    let zero = "0".repeat(64);
    let err = check_acceptances(&h.events, &proofs(Some(&zero)), &passed).unwrap_err();
    assert_eq!(err.field, "event 3");
    assert!(err.message.contains("never recorded"), "{}", err.message);
    assert!(check_acceptances(&h.events, &proofs(None), &passed).is_err(), "no proof at all");
    let none = BTreeMap::new();
    assert!(check_acceptances(&h.events, &none, &passed).is_err(), "a run of no attempt");
}

#[test]
fn an_acceptance_counts_only_for_a_passing_proof_of_the_attempt_in_review() {
    let started = |run: &str, attempt| EventKind::AttemptStarted {
        run_id: id(run),
        attempt,
        trigger: Trigger::Initial,
        prerequisites: BTreeMap::new(),
    };
    let b = "b".repeat(64);
    let proofs = BTreeMap::from([(id("wf-1"), Some(b.clone())), (id("wf-2"), Some(b.clone()))]);
    let check = |kinds: Vec<EventKind>, attempts: &[AttemptStatus]| {
        let mut h = History::new();
        for k in kinds {
            h.push(k);
        }
        check_acceptances(&h.events, &proofs, attempts).map_err(|e| e.message)
    };
    let ok = [AttemptStatus::Succeeded, AttemptStatus::Succeeded];
    assert_eq!(check(vec![started("wf-1", 1), accepted("wf-1", 1)], &ok), Ok(()));
    // A blocked item whose proof failed: its digest is real, its meaning is not.
    let err = check(vec![started("wf-1", 1), accepted("wf-1", 1)], &[failed(None)]).unwrap_err();
    assert!(err.contains("did not pass"), "{err}");
    // An older attempt's proof, once a newer attempt is the one in review.
    let older = vec![started("wf-1", 1), started("wf-2", 2), accepted("wf-1", 1)];
    assert!(check(older, &ok).unwrap_err().contains("in review then was run wf-2"));
    // Accepted twice, after a cancel, or after a reopen with no attempt since.
    let twice = vec![started("wf-1", 1), accepted("wf-1", 1), accepted("wf-1", 1)];
    assert!(check(twice, &ok).unwrap_err().contains("already accepted"));
    let cancelled = vec![started("wf-1", 1), EventKind::Cancelled, accepted("wf-1", 1)];
    assert!(check(cancelled, &ok).unwrap_err().contains("cancelled"));
    let reopened = vec![
        started("wf-1", 1),
        EventKind::Reopened { findings: vec![], feedback: None },
        accepted("wf-1", 1),
    ];
    assert!(check(reopened, &ok).unwrap_err().contains("no attempt was in review"));
    // A reopen, a new attempt, and its acceptance: what harn writes.
    let again = vec![
        started("wf-1", 1),
        accepted("wf-1", 1),
        EventKind::Reopened { findings: vec![], feedback: None },
        started("wf-2", 2),
        accepted("wf-2", 2),
    ];
    assert_eq!(check(again, &ok), Ok(()));
}

#[test]
fn dependency_graphs_refuse_missing_items_and_cycles() {
    let graph: BTreeMap<Id, Vec<Id>> = BTreeMap::from([
        (id("a"), vec![]),
        (id("b"), vec![id("a")]),
        (id("c"), vec![id("b"), id("new")]),
    ]);
    let lookup = |i: &Id| graph.get(i).cloned();
    assert!(check_dependency_graph(&id("new"), &[id("b")], &lookup, 100).is_ok());
    assert!(check_dependency_graph(&id("new"), &[id("zzz")], &lookup, 100)
        .unwrap_err()
        .message
        .contains("no work item"));
    assert!(check_dependency_graph(&id("new"), &[id("c")], &lookup, 100)
        .unwrap_err()
        .message
        .contains("itself"));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A history drawn as a list of steps.
    #[derive(Clone, Debug)]
    enum Step {
        Attempt(u8),
        Accept,
        Cancel,
        Reopen,
    }

    fn status(n: u8) -> AttemptStatus {
        match n % 9 {
            0 => AttemptStatus::Lost,
            1 => AttemptStatus::Running,
            2 => AttemptStatus::Parked { approval_id: "apr".into(), decided: n.is_multiple_of(2) },
            3 => AttemptStatus::Succeeded,
            4 => AttemptStatus::TranscriptUnreadable,
            5 => failed(None),
            6 => failed(Some(FailureClass::Environment)),
            7 => failed(Some(FailureClass::Upstream)),
            _ => failed(Some(FailureClass::Decision)),
        }
    }

    fn build(steps: &[Step]) -> History {
        let mut h = History::new();
        for s in steps {
            match s {
                Step::Attempt(n) => {
                    h.attempt(status(*n));
                }
                Step::Accept => {
                    let n = h.attempts.len() as u32;
                    h.push(accepted(&format!("wf-{}", n.max(1)), n.max(1)));
                }
                Step::Cancel => {
                    h.push(EventKind::Cancelled);
                }
                Step::Reopen => {
                    h.push(EventKind::Reopened { findings: Vec::new(), feedback: None });
                }
            }
        }
        h
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        proptest::collection::vec(
            prop_oneof![4 => any::<u8>().prop_map(Step::Attempt), 1 => Just(Step::Accept), 1 => Just(Step::Cancel), 1 => Just(Step::Reopen)],
            0..40,
        )
    }

    proptest! {
        #[test]
        fn budgets_add_up(s in steps()) {
            let p = build(&s).project();
            prop_assert!(p.charged_attempts <= p.attempts_used);
            prop_assert_eq!(p.attempts_remaining, intent().max_attempts.saturating_sub(p.charged_attempts));
        }

        #[test]
        fn only_acceptance_makes_it_succeeded(s in steps()) {
            let h = build(&s);
            let p = h.project();
            let last_governance = h.events.iter().rev().find(|e| matches!(e.kind, EventKind::Accepted { .. } | EventKind::Cancelled | EventKind::Reopened { .. }));
            let accepted = last_governance.is_some_and(|e| matches!(e.kind, EventKind::Accepted { .. }));
            prop_assert_eq!(p.state == WorkState::Succeeded, accepted);
        }

        #[test]
        fn retry_is_offered_only_with_budget_left(s in steps()) {
            let p = build(&s).project();
            if p.next_action == NextAction::Retry {
                prop_assert!(p.attempts_remaining > 0);
                prop_assert_eq!(p.state, WorkState::Blocked);
            }
        }

        /// What a dependent is told of an item is the same whether it was projected in
        /// full, over any prerequisites and leases, or read from its history alone.
        #[test]
        fn a_prerequisite_view_follows_from_the_history_alone(
            s in steps(),
            below in proptest::option::of(any::<bool>()),
            live in any::<bool>(),
        ) {
            let h = build(&s);
            let mut prerequisites = BTreeMap::new();
            let view = below.map(|accepted| Prerequisite {
                state: if accepted { WorkState::Succeeded } else { WorkState::InReview },
                accepted_seq: accepted.then_some(2),
            });
            prerequisites.insert(id("p1"), view);
            let full = Prerequisite::of(&h.project_with(&prerequisites, live));
            prop_assert_eq!(full, Prerequisite::of_history(&h.events));
        }

        #[test]
        fn projection_is_deterministic(s in steps()) {
            let h = build(&s);
            prop_assert_eq!(h.project(), h.project());
        }

        /// An action the projection offers is one the run decision accepts (the sweep found
        /// a reopened item offered `run` with its budget spent), also when a prerequisite was
        /// accepted again after the latest proof.
        #[test]
        fn offered_runs_and_retries_are_accepted(s in steps(), reaccepted in any::<bool>()) {
            use crate::work::projection::Prerequisite;
            use crate::work::run::may_start;
            let mut h = build(&s);
            let mut prerequisites = BTreeMap::new();
            if reaccepted {
                // Every attempt was built on acceptance 1 of p1; p1 is now at acceptance 9.
                for e in &mut h.events {
                    if let EventKind::AttemptStarted { prerequisites, .. } = &mut e.kind {
                        prerequisites.insert(id("p1"), 1);
                    }
                }
                let p1 = Prerequisite { state: WorkState::Succeeded, accepted_seq: Some(9) };
                prerequisites.insert(id("p1"), Some(p1));
            }
            let p = h.project_with(&prerequisites, false);
            match p.next_action {
                NextAction::Run => prop_assert!(may_start(&p, false).is_ok(), "{:?}", p),
                NextAction::Retry => prop_assert!(may_start(&p, true).is_ok(), "{:?}", p),
                _ => {}
            }
        }

        /// A dependent waits until every prerequisite is accepted (passing proof is not
        /// enough), unless its own last governance event settled it.
        #[test]
        fn dependents_wait_for_acceptance(s in steps(), pre in 0u8..8) {
            use crate::work::projection::Prerequisite;
            let states = [WorkState::Waiting, WorkState::Ready, WorkState::Running,
                WorkState::AwaitingApproval, WorkState::InReview, WorkState::Blocked,
                WorkState::Succeeded, WorkState::Cancelled];
            let state = states[pre as usize];
            let accepted_seq = (state == WorkState::Succeeded).then_some(3);
            let prerequisites = BTreeMap::from([(id("p1"), Some(Prerequisite { state, accepted_seq }))]);
            let h = build(&s);
            let p = h.project_with(&prerequisites, false);
            let settled = matches!(h.project().state, WorkState::Succeeded | WorkState::Cancelled);
            if state != WorkState::Succeeded && !settled {
                prop_assert_eq!(p.state, WorkState::Waiting);
            }
        }

        /// Receipts carry no information: appending one changes no decision.
        #[test]
        fn receipts_change_nothing(s in steps()) {
            let mut h = build(&s);
            let before = h.project();
            h.push(EventKind::Reconciled { state: "x".into(), next_action: "y".into() });
            let after = h.project();
            prop_assert_eq!((before.state, before.next_action, before.attempts_used, before.charged_attempts),
                (after.state, after.next_action, after.attempts_used, after.charged_attempts));
        }

        /// Resuming a parked attempt uses no attempt and no budget.
        #[test]
        fn resuming_uses_no_attempt(s in steps()) {
            let mut h = build(&s);
            h.attempt(AttemptStatus::Parked { approval_id: "apr".into(), decided: true });
            let before = h.project();
            let n = h.attempts.len() as u32;
            h.push(EventKind::AttemptResumed { run_id: id(&format!("wf-{n}")), attempt: n });
            let after = h.project();
            prop_assert_eq!((before.attempts_used, before.charged_attempts), (after.attempts_used, after.charged_attempts));
        }

        /// Uncharged failures never consume budget; consecutive upstream failures stop at
        /// their bound.
        #[test]
        fn uncharged_failures_are_bounded_but_free(s in steps(), k in 1usize..5) {
            let mut h = build(&s);
            let before = h.project();
            if matches!(before.state, WorkState::Succeeded | WorkState::Cancelled) {
                return Ok(());
            }
            for _ in 0..k {
                h.attempt(failed(Some(FailureClass::Upstream)));
            }
            let p = h.project();
            prop_assert_eq!(p.charged_attempts, before.charged_attempts);
            if k >= intent().max_uncharged_attempts as usize {
                prop_assert_eq!(p.next_action, NextAction::None);
            }
        }
    }
}

#[test]
fn operators_cancel_what_is_not_final_and_reopen_what_has_stopped() {
    use super::projection::{cancellable, reopenable, WorkState::*};
    for s in [Waiting, Ready, Running, AwaitingApproval, InReview, Blocked] {
        assert!(cancellable(s), "{s:?}");
    }
    for s in [Succeeded, Cancelled] {
        assert!(!cancellable(s), "{s:?}");
    }
    for s in [Blocked, InReview, Succeeded, Cancelled] {
        assert!(reopenable(s), "{s:?}");
    }
    for s in [Waiting, Ready, Running, AwaitingApproval] {
        assert!(!reopenable(s), "{s:?}");
    }
}
