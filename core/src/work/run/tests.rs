//! Unit tests of run decisions: which attempts may start, how a run's messages and its
//! process end become a proof, and how an attempt is inspected from its records.

use super::*;
use crate::work::fixtures::{id, intent, History};
use crate::work::team::Team;
use crate::work::transcript::Started;
use serde_json::Value;
use std::collections::BTreeMap;

fn manifest() -> RunManifest {
    super::fold::sample_manifest(intent().workflow, WallTime(10))
}

fn exited(code: i32) -> ProcessEnd {
    ProcessEnd::Exited { code: Some(code), signal: None, timed_out: false }
}

fn parse(line: &str) -> Result<FromWorkflow, super::super::protocol::ProtocolError> {
    super::super::protocol::parse_line(line.as_bytes(), 1)
}

fn fold(lines: &[&str]) -> RunFold {
    let mut f = RunFold::default();
    for l in lines {
        f.observe(parse(l));
    }
    f
}

const PASSED: &str =
    r#"{"op":"evidence","kind":"test","status":"passed","label":"t","acceptanceIds":["accept-1"]}"#;
const OK: &str = r#"{"op":"result","ok":true,"summary":"done"}"#;

#[test]
fn ok_result_exit_zero_and_satisfied_criteria_pass() {
    let p = fold(&[PASSED, OK]).finish(&manifest(), &intent(), &exited(0), WallTime(20));
    assert_eq!(p.run.status, RunStatus::Succeeded);
    assert_eq!(p.run.summary.as_deref(), Some("done"));
    assert!(p.passes());
}

/// The fixture intent (one `--accept` statement) under strict acceptance.
fn strict() -> WorkIntent {
    WorkIntent { strict_acceptance: true, sha256: None, ..intent() }.sealed()
}

#[test]
fn under_strict_acceptance_an_uncited_statement_is_unknown_and_the_proof_does_not_pass() {
    let p = fold(&[OK]).finish(&manifest(), &strict(), &exited(0), WallTime(20));
    assert_eq!(p.run.status, RunStatus::Succeeded);
    assert!(!p.passes(), "accept-1 has no evidence");
    assert_eq!((p.acceptance.summary.unknown, p.acceptance.summary.uncited), (1, 0));
}

#[test]
fn by_default_work_statements_are_context_and_only_what_evidence_cites_decides() {
    let p = fold(&[OK]).finish(&manifest(), &intent(), &exited(0), WallTime(20));
    assert!(p.passes(), "an uncited statement never fails a proof by itself");
    assert_eq!((p.acceptance.summary.unknown, p.acceptance.summary.uncited), (0, 1));
    assert_eq!(p.acceptance.criteria[0].statement, intent().acceptance[0], "shown in the proof");
    let failed = r#"{"op":"evidence","kind":"test","status":"failed","label":"t","acceptanceIds":["accept-1"]}"#;
    let p = fold(&[failed, OK]).finish(&manifest(), &intent(), &exited(0), WallTime(20));
    assert!(!p.passes(), "evidence that cites a statement and fails still decides");
}

#[test]
fn every_way_to_fail_fails_and_says_why() {
    let cases: Vec<(Vec<&str>, ProcessEnd, &str)> = vec![
        (vec![PASSED, OK], exited(3), "exited with code 3"),
        (vec![PASSED], exited(0), "without a result"),
        (vec![PASSED, r#"{"op":"result","ok":false,"error":"nope"}"#], exited(0), "nope"),
        (
            vec![PASSED, OK],
            ProcessEnd::Exited { code: Some(0), signal: None, timed_out: true },
            "timed out after 1000 ms",
        ),
        (vec![PASSED, "{not json", OK], exited(0), "line 1"),
        (vec![PASSED, OK, OK], exited(0), "a second result"),
        (vec![], ProcessEnd::Exited { code: None, signal: Some(9), timed_out: false }, "signal 9"),
        // A thrown `.mjs` error: the workflow's words first, then how it ended.
        (
            vec![r#"{"op":"result","ok":false,"error":"the parser rejects key x"}"#],
            exited(1),
            "the parser rejects key x (the workflow exited with code 1)",
        ),
        (vec![r#"{"op":"result","ok":false,"error":"  "}"#], exited(0), "result: not ok"),
        (vec![r#"{"op":"result","ok":false,"error":""}"#], exited(1), "exited with code 1"),
    ];
    for (lines, end, why) in cases {
        let p = fold(&lines).finish(&manifest(), &intent(), &end, WallTime(20));
        assert_eq!(p.run.status, RunStatus::Failed, "{why}");
        assert!(p.run.error.as_deref().unwrap().contains(why), "{:?} vs {why}", p.run.error);
        assert_eq!(p.run.class, None, "{why}: charged");
    }
}

#[test]
fn blocked_is_a_decision_and_a_missing_program_is_the_environment() {
    let blocked = fold(&[r#"{"op":"blocked","reason":"which db?","decision_id":"db"}"#, OK]);
    let p = blocked.finish(&manifest(), &intent(), &exited(0), WallTime(20));
    assert_eq!(
        (p.run.class, p.run.decision_id.as_deref()),
        (Some(FailureClass::Decision), Some("db"))
    );
    let missing = ProcessEnd::SpawnFailed { error: "No such file".into(), missing: true };
    let p = RunFold::default().finish(&manifest(), &intent(), &missing, WallTime(20));
    assert_eq!(p.run.class, Some(FailureClass::Environment));
    let denied = ProcessEnd::SpawnFailed { error: "Permission denied".into(), missing: false };
    let p = RunFold::default().finish(&manifest(), &intent(), &denied, WallTime(20));
    assert_eq!(
        p.run.class,
        Some(FailureClass::NotStarted),
        "a run that never started is not charged"
    );
    let stopped = ProcessEnd::Interrupted {
        by: "service stop --timeout".into(),
        code: None,
        signal: Some(9),
    };
    let p = RunFold::default().finish(&manifest(), &intent(), &stopped, WallTime(20));
    assert_eq!(p.run.class, Some(FailureClass::Interrupted));
    assert!(p.run.error.as_deref().is_some_and(|e| e.contains("service stop --timeout")));
    let faulted =
        ProcessEnd::EngineFault { fault: "node n2 failed".into(), code: None, signal: Some(9) };
    let p = RunFold::default().finish(&manifest(), &intent(), &faulted, WallTime(20));
    assert_eq!(p.run.class, Some(FailureClass::Infrastructure));
    assert!(!FailureClass::Infrastructure.charges(), "the engine's fault is not the work's");
    assert!(p.run.error.as_deref().is_some_and(|e| e.contains("node n2 failed")));
}

fn reply(action: Option<HostAction>) -> Value {
    match action {
        Some(HostAction::Reply(v)) => v,
        other => panic!("expected a reply, got {other:?}"),
    }
}

#[test]
fn without_a_harness_agent_calls_and_authorizations_are_declined_and_recorded() {
    let mut f = RunFold::default();
    let r = reply(f.observe(parse(r#"{"op":"agent","id":"a1","prompt":"fix it"}"#)));
    assert_eq!((r["id"].as_str(), r["ok"].as_bool()), (Some("a1"), Some(false)));
    let r = reply(f.observe(parse(r#"{"op":"authorize","id":"z","action":"push"}"#)));
    assert_eq!(r["verdict"], "deny");
    assert!(f.observe(parse(OK)).is_none());
    let p = f.finish(&manifest(), &intent(), &exited(0), WallTime(20));
    assert_eq!(p.declined.len(), 2);
}

#[test]
fn with_a_harness_calls_are_made_recorded_and_classify_a_failed_run() {
    use crate::work::agent::CallOutcome;
    let mut f = RunFold::new(Some("scripted"), Team::new());
    let call = f.observe(parse(r#"{"op":"agent","id":"a1","prompt":"fix it"}"#));
    let Some(HostAction::CallAgent { id, dispatch, .. }) = call else { panic!("{call:?}") };
    assert_eq!(
        (id.as_str(), dispatch.adapter.as_str(), dispatch.prompt.as_str()),
        ("a1", "scripted", "fix it")
    );
    let reused = reply(f.observe(parse(r#"{"op":"agent","id":"a1","prompt":"again"}"#)));
    assert_eq!(reused["ok"], false);
    let missing = CallOutcome {
        ok: false,
        text: None,
        error: Some("not installed".into()),
        class: Some(FailureClass::Environment),
        ..CallOutcome::default()
    };
    let r = f.agent_done("a1", missing);
    assert_eq!((r["ok"].as_bool(), r["class"].as_str()), (Some(false), Some("environment")));
    f.observe(parse(r#"{"op":"result","ok":false,"error":"the agent failed"}"#));
    let p = f.finish(&manifest(), &intent(), &exited(0), WallTime(20));
    assert!(p.run.error.as_deref().unwrap().contains("a1 reused"), "the reuse is a protocol error");
    assert_eq!(p.run.class, Some(FailureClass::Environment), "no call did real work");
    assert_eq!((p.agents.len(), p.agents[0].adapter.as_str()), (1, "scripted"));
    let mut g = RunFold::new(Some("scripted"), Team::new());
    g.observe(parse(r#"{"op":"agent","id":"a","prompt":"p"}"#));
    let ok = CallOutcome {
        ok: true,
        text: Some("done".into()),
        error: None,
        class: None,
        ..CallOutcome::default()
    };
    assert_eq!(g.agent_done("a", ok)["text"], "done");
    let p = g.finish(&manifest(), &intent(), &exited(1), WallTime(20));
    assert_eq!(p.run.class, None, "a run whose agent did real work is charged");
}

#[test]
fn a_run_timed_out_while_its_call_waited_on_a_silent_vendor_is_not_charged() {
    use crate::work::agent::CallOutcome;
    let timed_out = ProcessEnd::Exited { code: None, signal: Some(9), timed_out: true };
    let waiting = |stopped, class| CallOutcome {
        stopped,
        ..CallOutcome::failed(
            "no progress for 90 s before its run ended: the vendor did not answer",
            class,
        )
    };
    let run = |outcomes: Vec<CallOutcome>| {
        let mut f = RunFold::new(Some("scripted"), Team::new());
        for (n, outcome) in outcomes.into_iter().enumerate() {
            let ask = format!(r#"{{"op":"agent","id":"a{n}","prompt":"p"}}"#);
            f.observe(parse(&ask));
            f.agent_done(&format!("a{n}"), outcome);
        }
        f.finish(&manifest(), &intent(), &timed_out, WallTime(20))
    };
    let p = run(vec![waiting(true, Some(FailureClass::Upstream))]);
    assert_eq!(p.run.class, Some(FailureClass::Upstream));
    let error = p.run.error.unwrap();
    assert!(error.contains("timed out") && error.contains("did not answer"), "{error}");
    // A call that was working when the run timed out, or one that did real work before it,
    // leaves the timeout charged; so does a timeout with no call waiting.
    assert_eq!(run(vec![waiting(true, None)]).run.class, None);
    let done = CallOutcome::replied("done");
    assert_eq!(run(vec![done, waiting(true, Some(FailureClass::Upstream))]).run.class, None);
    assert_eq!(run(vec![waiting(false, Some(FailureClass::Upstream))]).run.class, None);
}

#[test]
fn errors_keep_their_tail_on_a_char_boundary() {
    let long = format!("{}é-end", "x".repeat(3 * ERROR_MAX));
    let t = fold::tail(&long, ERROR_MAX);
    assert!(t.len() <= ERROR_MAX && t.ends_with("é-end"));
}

#[test]
fn inspection_follows_the_records_and_refuses_foreign_ones() {
    let (w, r) = (id("w1"), id("wf-1"));
    let m = manifest();
    assert_eq!(
        inspect(&w, &r, 1, (None, None), None, Started::Ran, false),
        Ok(AttemptStatus::Lost)
    );
    assert_eq!(
        inspect(&w, &r, 1, (Some(&m), None), None, Started::Never, false),
        Ok(AttemptStatus::NotStarted),
        "no proof and no record of the workflow starting: nothing ran"
    );
    assert_eq!(
        inspect(&w, &r, 1, (Some(&m), None), None, Started::Ran, true),
        Ok(AttemptStatus::Running)
    );
    assert_eq!(
        inspect(&w, &r, 1, (Some(&m), None), None, Started::Interrupted, false),
        Ok(AttemptStatus::Failed { class: Some(FailureClass::Interrupted), decision_id: None }),
        "a host killed while an operator's stop drained its run: the stop ended it"
    );
    let parked = AttemptStatus::Parked { approval_id: "wf-1-p1".into(), decided: false };
    assert_eq!(
        inspect(&w, &r, 1, (Some(&m), None), Some(("wf-1-p1", false)), Started::Ran, false),
        Ok(parked)
    );
    let pass = fold(&[PASSED, OK]).finish(&m, &intent(), &exited(0), WallTime(20));
    assert_eq!(
        inspect(&w, &r, 1, (Some(&m), Some(&pass)), None, Started::Ran, false),
        Ok(AttemptStatus::Succeeded)
    );
    let fail = fold(&[OK]).finish(&m, &intent(), &exited(1), WallTime(20));
    assert!(matches!(
        inspect(&w, &r, 1, (Some(&m), Some(&fail)), None, Started::Ran, false),
        Ok(AttemptStatus::Failed { .. })
    ));
    assert!(
        inspect(&w, &r, 1, (None, Some(&pass)), None, Started::Ran, false).is_err(),
        "a proof needs a manifest"
    );
    assert!(
        inspect(&w, &r, 2, (Some(&m), None), None, Started::Ran, false).is_err(),
        "another attempt's manifest"
    );
    assert!(
        inspect(&id("w2"), &r, 1, (Some(&m), None), None, Started::Ran, false).is_err(),
        "another item's run"
    );
}

fn projection(attempts: &[AttemptStatus]) -> crate::work::Projection {
    let mut h = History::new();
    for a in attempts {
        h.attempt(a.clone());
    }
    h.project()
}

#[test]
fn run_starts_a_ready_item_and_retry_a_blocked_one_within_budget() {
    let failed = AttemptStatus::Failed { class: None, decision_id: None };
    assert_eq!(may_start(&projection(&[]), false), Ok(Trigger::Initial));
    assert!(may_start(&projection(&[]), true).is_err(), "ready wants run");
    let blocked = projection(std::slice::from_ref(&failed));
    assert_eq!(blocked.state, WorkState::Blocked);
    assert!(may_start(&blocked, false).unwrap_err().to_string().contains("retry it explicitly"));
    assert_eq!(may_start(&blocked, true), Ok(Trigger::Retry));
    let spent = projection(&[failed.clone(), failed.clone(), failed]);
    assert!(
        may_start(&spent, true).unwrap_err().to_string().contains("used up"),
        "max_attempts is 3"
    );
    let refused = may_start(&spent, false).unwrap_err().to_string();
    assert!(refused.contains("3 charged attempts are used up"), "not 'retry it': {refused}");
    let review = projection(&[AttemptStatus::Succeeded]);
    assert!(may_start(&review, false).unwrap_err().to_string().contains("in review"));
    let running = projection(&[AttemptStatus::Running]);
    assert!(may_start(&running, true).is_err());
}

#[test]
fn acceptance_needs_review_and_every_open_finding_disposed_of_once() {
    let mut p = projection(&[AttemptStatus::Succeeded]);
    assert_eq!(may_accept(&p, &[]), Ok(()));
    assert!(may_accept(&projection(&[]), &[])
        .unwrap_err()
        .to_string()
        .contains("only an item in review"));
    p.open_findings = vec![
        crate::work::events::Finding { id: "f1".into(), statement: "a".into() },
        crate::work::events::Finding { id: "f2".into(), statement: "b".into() },
    ];
    let fixed = |id: &str| Disposition::Fixed { id: id.into() };
    let deferred = |id: &str, r: &str| Disposition::Deferred { id: id.into(), reason: r.into() };
    assert!(may_accept(&p, &[fixed("f1")]).unwrap_err().to_string().contains("f2"));
    assert!(may_accept(&p, &[fixed("f1"), fixed("f1"), fixed("f2")])
        .unwrap_err()
        .to_string()
        .contains("twice"));
    assert!(may_accept(&p, &[fixed("f1"), fixed("f3")])
        .unwrap_err()
        .to_string()
        .contains("not an open"));
    assert!(may_accept(&p, &[fixed("f1"), deferred("f2", " ")])
        .unwrap_err()
        .to_string()
        .contains("reason"));
    assert_eq!(may_accept(&p, &[deferred("f2", "later"), fixed("f1")]), Ok(()));
}

#[test]
fn a_specialist_goes_to_its_harness_and_an_unknown_one_is_declined() {
    let team = crate::work::team::parse_team(
        "team.json",
        br#"{"reviewer": {"instructions": "Review.", "harness": "codex"}}"#,
    )
    .unwrap();
    let mut f = RunFold::new(None, team);
    let call = f.observe(parse(r#"{"op":"agent","id":"a1","prompt":"p","specialist":"reviewer"}"#));
    let Some(HostAction::CallAgent { dispatch, .. }) = call else { panic!("{call:?}") };
    assert_eq!(dispatch.adapter, "codex");
    assert!(dispatch.prompt.starts_with("Review."));
    let r =
        reply(f.observe(parse(r#"{"op":"agent","id":"a2","prompt":"p","specialist":"ghost"}"#)));
    assert!(r["error"].as_str().unwrap().contains("no specialist \"ghost\""), "{r}");
    let r = reply(f.observe(parse(r#"{"op":"agent","id":"a3","prompt":"p"}"#)));
    assert!(r["error"].as_str().unwrap().contains("no harness"), "{r}");
    let ok = crate::work::agent::CallOutcome {
        ok: true,
        text: Some("t".into()),
        error: None,
        class: None,
        ..CallOutcome::default()
    };
    f.agent_done("a1", ok);
    let p = f.finish(&manifest(), &intent(), &exited(0), WallTime(20));
    assert_eq!(p.agents[0].adapter, "codex");
    assert_eq!(p.declined.len(), 2);
}

#[test]
fn requests_past_the_agent_cap_are_declined() {
    let spec = crate::work::agent::AdapterSpec::text(vec!["h".into()], 1);
    let harness = Some(FrozenAdapter { name: "h".into(), spec });
    let m = RunManifest { adapter: harness, max_agents: Some(1), ..manifest() };
    let mut f = m.fold();
    let first = f.observe(parse(r#"{"op":"agent","id":"a1","prompt":"p"}"#));
    assert!(matches!(first, Some(HostAction::CallAgent { .. })));
    let second = reply(f.observe(parse(r#"{"op":"agent","id":"a2","prompt":"p"}"#)));
    assert!(second["error"].as_str().unwrap().contains("agent cap reached (1 calls)"), "{second}");
}

mod gate {
    use super::*;
    use crate::work::approval::Ruling;
    use crate::work::policy::{parse_policy, FrozenPolicy, Request};

    const ASK_PUSH: &str = r#"{"rules":[
        {"name":"ask-push","on":"authorize","action":"push","verdict":"ask"},
        {"name":"no-opus","on":"agent","model":"opus","verdict":"deny"}]}"#;

    fn governed(approver: Option<&str>) -> (RunManifest, RunFold) {
        let mut m = manifest();
        m.policy = Some(FrozenPolicy::new(
            parse_policy("policy.jsonc", ASK_PUSH.as_bytes()).expect("valid"),
        ));
        m.approval_to = approver.map(str::to_owned);
        m.adapter = Some(FrozenAdapter {
            name: "h".into(),
            spec: crate::work::agent::resolve("codex", &BTreeMap::new()).expect("a preset"),
        });
        let f = m.fold();
        (m, f)
    }

    const PUSH: &str = r#"{"op":"authorize","id":"z1","action":"push","target":"main"}"#;
    const CALL: &str = r#"{"op":"agent","id":"a1","prompt":"fix it"}"#;

    #[test]
    fn an_ask_parks_with_an_approver_and_stops_without_one() {
        let (m, mut f) = governed(Some("ana"));
        let Some(HostAction::Park(parked)) = f.observe(parse(PUSH)) else { panic!() };
        assert_eq!(parked.slot, 1);
        let request = m.approval_request(&parked, WallTime(5));
        assert_eq!((request.approval_id.as_str(), request.addressee.as_str()), ("wf-1-p1", "ana"));
        let (m, mut f) = governed(None);
        assert!(matches!(f.observe(parse(PUSH)), Some(HostAction::Stop)));
        let p = f.finish(&m, &intent(), &exited(0), WallTime(9));
        assert_eq!(p.run.status, RunStatus::Failed);
        assert!(p.run.error.as_deref().unwrap().contains("names no approver"), "{:?}", p.run.error);
    }

    #[test]
    fn deny_stops_the_run_and_unmatched_agent_calls_are_allowed() {
        let (m, mut f) = governed(Some("ana"));
        assert!(matches!(f.observe(parse(CALL)), Some(HostAction::CallAgent { .. })));
        let opus = r#"{"op":"agent","id":"a2","prompt":"p","specialist":"big"}"#;
        f.team.insert(
            "big".into(),
            crate::work::team::Specialist { model: Some("opus".into()), ..Default::default() },
        );
        assert!(matches!(f.observe(parse(opus)), Some(HostAction::Stop)));
        let tag = r#"{"op":"authorize","id":"z2","action":"tag"}"#;
        assert!(matches!(f.observe(parse(tag)), Some(HostAction::Stop)), "unmatched mutation");
        let p = f.finish(&m, &intent(), &exited(0), WallTime(9));
        let error = p.run.error.as_deref().unwrap();
        assert!(error.contains("denied by policy: check p2: rule no-opus"), "{error}");
        let decisions = &p.policy.as_ref().expect("a policy part").decisions;
        assert_eq!(decisions.len(), 3);
        assert_eq!(p.run.class, None, "a denial is charged");
    }

    #[test]
    fn a_tool_call_is_judged_in_the_next_slot_refused_without_a_stop_and_parked_on_ask() {
        let rules = r#"{"rules": [
            {"name": "no-shell", "on": "tool", "tool": "Bash", "verdict": "deny"},
            {"name": "person", "on": "tool", "tool": "Write", "verdict": "ask"}]}"#;
        let mut m = manifest();
        m.policy = Some(FrozenPolicy::new(parse_policy("p.json", rules.as_bytes()).unwrap()));
        m.approval_to = Some("ana".into());
        let tool = |tool: &str| Request::Tool {
            tool: tool.into(),
            tool_kind: "edit".into(),
            title: format!("{tool} x"),
        };
        let mut f = m.fold();
        assert_eq!(f.tool(tool("Read")), ToolJudged::Allow, "no rule: a tool is allowed");
        assert_eq!(f.tool(tool("Bash")), ToolJudged::Refuse, "refused, and the run goes on");
        let ToolJudged::Park(parked) = f.tool(tool("Write")) else { panic!("parked") };
        assert_eq!(parked.slot, 3);
        assert_eq!(f.policy_log().len(), 2, "the parked check is logged by its ruling");
        // Resumed with the ruling, the same request in the same slot goes ahead.
        let mut again = m.fold();
        let mut resume = ResumeState::default();
        resume.rulings.insert(3, (parked.request_sha256.clone(), Ruling::Allow));
        again.resume(resume);
        again.tool(tool("Read"));
        again.tool(tool("Bash"));
        assert_eq!(again.tool(tool("Write")), ToolJudged::Allow);
        assert_eq!(again.policy_log()[2].approval_id.as_deref(), Some("wf-1-p3"));
        // Without a policy every tool is allowed (containment is the wall).
        assert_eq!(RunFold::default().tool(tool("Bash")), ToolJudged::Allow);
    }

    #[test]
    fn a_resumed_run_answers_completed_calls_from_the_cache_and_consumes_its_ruling() {
        let (m, mut first) = governed(Some("ana"));
        let Some(HostAction::CallAgent { key, .. }) = first.observe(parse(CALL)) else { panic!() };
        let Some(HostAction::Park(parked)) = first.observe(parse(PUSH)) else { panic!() };
        assert_eq!(parked.slot, 2, "the agent call took slot 1");
        let mut resume = ResumeState { dispatched: 1, ..ResumeState::default() };
        resume.cache.insert(key, vec!["done".into()]);
        resume.rulings.insert(2, (parked.request_sha256.clone(), Ruling::Allow));
        let mut again = m.fold();
        again.resume(resume.clone());
        let r = reply(again.observe(parse(CALL)));
        assert_eq!((r["ok"].as_bool(), r["text"].as_str()), (Some(true), Some("done")));
        let r = reply(again.observe(parse(PUSH)));
        assert_eq!(r["verdict"], "allow");
        again.observe(parse(OK));
        let p = again.finish(&m, &intent(), &exited(0), WallTime(9));
        assert_eq!(p.run.status, RunStatus::Succeeded);
        assert!(p.agents[0].cached);
        let consumed = &p.policy.expect("a policy part").decisions[0];
        assert_eq!(consumed.approval_id.as_deref(), Some("wf-1-p2"));
        // A denied ruling stops the run; a ruling for another request is never consumed.
        let mut denied = resume.clone();
        denied.rulings.insert(2, (parked.request_sha256.clone(), Ruling::Deny));
        let mut f = m.fold();
        f.resume(denied);
        f.observe(parse(CALL));
        assert!(matches!(f.observe(parse(PUSH)), Some(HostAction::Stop)));
        let mut other = resume;
        other.rulings.insert(2, ("0".repeat(64), Ruling::Allow));
        let mut f = m.fold();
        f.resume(other);
        f.observe(parse(CALL));
        assert!(matches!(f.observe(parse(PUSH)), Some(HostAction::Stop)));
        let p = f.finish(&m, &intent(), &exited(0), WallTime(9));
        assert!(p.run.error.unwrap().contains("different request"));
    }

    #[test]
    fn the_cap_counts_calls_made_before_the_run_parked() {
        let (mut m, _) = governed(Some("ana"));
        m.max_agents = Some(1);
        let mut f = m.fold();
        f.resume(ResumeState { dispatched: 1, ..ResumeState::default() });
        let r = reply(f.observe(parse(CALL)));
        assert!(r["error"].as_str().unwrap().contains("agent cap"), "{r}");
    }

    #[test]
    fn a_schema_adds_the_output_contract_and_shapes_the_key() {
        let (_, mut f) = governed(Some("ana"));
        let with = r#"{"op":"agent","id":"a1","prompt":"fix it","schema":{"type":"object"}}"#;
        let Some(HostAction::CallAgent { dispatch, key, .. }) = f.observe(parse(with)) else {
            panic!()
        };
        assert!(dispatch.prompt.contains("Output contract"));
        let Some(HostAction::CallAgent { key: plain, .. }) =
            f.observe(parse(r#"{"op":"agent","id":"a2","prompt":"fix it"}"#))
        else {
            panic!()
        };
        assert_ne!(key, plain);
    }
}

#[test]
fn the_synopsis_names_causes_in_order_and_never_invents_an_error() {
    let m = manifest();
    let lost = synopsis(&id("wf-1"), None);
    assert_eq!(lost["causes"], serde_json::json!(["lost"]));
    assert!(lost.get("error").is_none(), "a lost attempt has no error to report");
    let failed = fold(&[r#"{"op":"result","ok":false,"error":"boom"}"#]).finish(
        &m,
        &strict(),
        &exited(1),
        WallTime(20),
    );
    let s = synopsis(&id("wf-1"), Some(&failed));
    assert_eq!(s["causes"], serde_json::json!(["workflow_error", "acceptance_unknown"]));
    assert_eq!(s["unresolved"][0]["status"], "unknown");
    let decided = fold(&[r#"{"op":"blocked","reason":"pick a db"}"#, OK]).finish(
        &m,
        &intent(),
        &exited(0),
        WallTime(20),
    );
    assert_eq!(synopsis(&id("wf-1"), Some(&decided))["causes"][0], "decision");
}

#[test]
fn a_run_that_failed_for_want_of_an_adapter_is_an_environment_failure() {
    let asked = r#"{"op":"agent","id":"implement","prompt":"p"}"#;
    let failed = r#"{"op":"result","ok":false,"error":"declined agent implement: no harness"}"#;
    let p = fold(&[asked, failed]).finish(&manifest(), &intent(), &exited(1), WallTime(20));
    assert_eq!(p.run.class, Some(FailureClass::Environment), "not charged");
    assert!(
        p.run.error.as_deref().is_some_and(|e| e.contains("pass --harness")),
        "{:?}",
        p.run.error
    );
    // With an adapter, the same failure is the workflow's own.
    let mut f = RunFold::new(Some("scripted"), crate::work::team::Team::new());
    f.observe(parse(failed));
    let p = f.finish(&manifest(), &intent(), &exited(1), WallTime(20));
    assert_eq!(p.run.class, None);
}

mod planning_runs {
    use super::*;
    use crate::work::run::planning::{self, PlanningStep, StepKind};

    fn step() -> PlanningStep {
        PlanningStep {
            goal: id("g"),
            plan: "plan-0001-aa".into(),
            step: StepKind::Plan,
            role: "planner".into(),
            label: "plan-0001-aa".into(),
            prompt_sha256: "p".into(),
        }
    }

    fn planning_manifest() -> RunManifest {
        let spec = crate::work::agent::AdapterSpec::text(vec!["h".into()], 1);
        let harness = Some(FrozenAdapter { name: "h".into(), spec });
        let mut team = Team::new();
        team.insert("planner".into(), crate::work::team::Specialist::default());
        RunManifest {
            adapter: harness,
            team,
            max_agents: Some(1),
            planning: Some(step()),
            ..manifest()
        }
    }

    /// The planning workflow's request, the call's reply, and the workflow's result, folded.
    fn ran(outcome: CallOutcome) -> (Proof, Vec<Value>) {
        let m = planning_manifest();
        let mut f = m.fold();
        let request = planning::request("planner", "plan it", &serde_json::json!({}));
        let asked = f.observe(parse(&request.to_string()));
        assert!(matches!(asked, Some(HostAction::CallAgent { .. })), "{asked:?}");
        let ended = crate::work::transcript::agent_end(planning::CALL_ID, Some("k"), &outcome);
        f.agent_done(planning::CALL_ID, outcome.clone());
        let result = if outcome.ok { OK } else { r#"{"op":"result","ok":false}"# };
        f.observe(parse(result));
        let intent = planning::intent(&m, &step());
        (f.finish(&m, &intent, &exited(0), WallTime(20)), vec![ended])
    }

    #[test]
    fn a_planning_proof_names_its_step_and_the_digest_of_the_reply() {
        let (proof, records) = ran(CallOutcome::replied("{\"decision\":\"proceed\"}"));
        let planning = proof.planning.clone().expect("a planning proof");
        assert_eq!(planning.step, step());
        let digest = crate::hash::sha256_hex(b"{\"decision\":\"proceed\"}");
        assert_eq!(planning.reply_sha256.as_deref(), Some(digest.as_str()));
        assert_eq!(
            planning::outcome(&records, &proof).text.as_deref(),
            Some("{\"decision\":\"proceed\"}")
        );
        assert!(proof.passes(), "a usable reply is a passing planning run");
    }

    #[test]
    fn a_failed_call_is_the_outcome_and_a_run_the_policy_stopped_waits_for_a_person() {
        let failed = CallOutcome::failed("the vendor is overloaded", Some(FailureClass::Upstream));
        let (proof, records) = ran(failed.clone());
        assert_eq!(proof.planning.as_ref().and_then(|p| p.reply_sha256.clone()), None);
        let outcome = planning::outcome(&records, &proof);
        assert_eq!((outcome.error, outcome.class), (failed.error, failed.class));
        let mut stopped = proof.clone();
        stopped.run.error = Some(format!("{}: rule r asks for approval", POLICY_STOPPED));
        let outcome = planning::outcome(&[], &stopped);
        assert_eq!(outcome.class, Some(FailureClass::Decision));
        assert!(outcome.error.unwrap().contains("rule r asks"));
        // A run that ended before any call says why.
        let outcome = planning::outcome(&[], &proof);
        assert!(!outcome.ok && outcome.error.is_some());
    }

    #[test]
    fn the_same_call_is_found_again_whatever_its_prompt_said() {
        let again = PlanningStep { prompt_sha256: "other".into(), ..step() };
        assert!(step().same_call(&again));
        let revision = PlanningStep { label: "plan-0001-aa-revision-1".into(), ..step() };
        assert!(!step().same_call(&revision));
    }

    #[test]
    fn the_planning_workflow_holds_its_request_byte_for_byte() {
        let request = planning::request(
            "planner",
            "line one\nHARN_REQUEST\n'quoted'",
            &serde_json::json!({"type": "object"}),
        );
        let script = planning::workflow(&request);
        let line = request.to_string();
        assert!(!line.contains('\n'), "one line");
        assert!(script.contains(&format!("<<'HARN_REQUEST'\n{line}\nHARN_REQUEST\n")), "{script}");
    }
}
