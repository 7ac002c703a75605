//! What a run's transcript (`transcript.jsonl` bodies) tells a read and a resume: the approval
//! a run last parked on, and what a resumed segment takes over from earlier ones (agent calls
//! started, replies of completed calls, the approvals asked).

use super::agent::CallOutcome;
use super::run::{PolicyRecord, ResumeState};
use crate::error::RecordError;
use serde_json::{json, Value};

/// The record of an agent call's start; its key is what a resume matches a request by.
pub(crate) fn agent_start(id: &str, harness: &str, key: &str) -> Value {
    json!({ "event": "agent.start", "id": id, "harness": harness, "key": key })
}

/// The record of an agent call's end; a usable reply's text is kept as the resume cache, with
/// the vendor's session, the call's usage, its denials and how long it took.
pub(crate) fn agent_end(id: &str, key: Option<&str>, outcome: &CallOutcome) -> Value {
    let text = if outcome.ok { outcome.text.as_deref() } else { None };
    let mut body = json!({
        "event": "agent.end", "id": id, "key": key, "ok": outcome.ok, "text": text,
        "error": outcome.error, "class": outcome.class,
    });
    if let Some(session) = &outcome.session_id {
        body["session_id"] = json!(session);
    }
    if let Some(usage) = &outcome.usage {
        body["usage"] = json!(usage);
    }
    if !outcome.denials.is_empty() {
        body["denials"] = json!(outcome.denials);
    }
    if let Some(ms) = outcome.elapsed_ms {
        body["elapsed_ms"] = json!(ms);
    }
    if outcome.stopped {
        body["stopped"] = json!(true);
    }
    if let Some(at) = outcome.resets_at {
        body["resets_at"] = json!(at);
    }
    body
}

/// The vendor session of the last completed call that reported one, per harness: what a
/// call asking to continue its session (or a resumed attempt) continues.
pub fn sessions(records: &[Value]) -> std::collections::BTreeMap<String, String> {
    let mut harness_of = std::collections::BTreeMap::new();
    let mut sessions = std::collections::BTreeMap::new();
    for r in records {
        match r["event"].as_str() {
            Some("agent.start") => {
                if let (Some(id), Some(h)) = (r["id"].as_str(), r["harness"].as_str()) {
                    harness_of.insert(id.to_owned(), h.to_owned());
                }
            }
            Some("agent.end") => {
                let harness = r["id"].as_str().and_then(|id| harness_of.get(id));
                if let (Some(h), Some(s)) = (harness, r["session_id"].as_str()) {
                    sessions.insert(h.clone(), s.to_owned());
                }
            }
            _ => {}
        }
    }
    sessions
}

/// The vendor session each call that never ended had opened, by request id: a call an
/// earlier segment cut short (a park in the middle of its turn, a crash) continues that
/// session when the resumed workflow asks for it again.
pub(crate) fn open_sessions(records: &[Value]) -> std::collections::BTreeMap<String, String> {
    let mut open = std::collections::BTreeMap::new();
    for r in records {
        let Some(id) = r["id"].as_str() else { continue };
        match (r["event"].as_str(), r["what"].as_str(), r["session_id"].as_str()) {
            (Some("agent.progress"), Some("session"), Some(session)) => {
                open.insert(id.to_owned(), session.to_owned());
            }
            (Some("agent.end"), _, _) => {
                open.remove(id);
            }
            _ => {}
        }
    }
    open
}

/// The approval the run is parked on: named by its last `run.parked` record, as long as no
/// segment has ended since (`run.end`). A resumption that was cut short by a crash leaves
/// the run parked on the same approval, so it is resumed again as the same attempt; one an
/// operator's stop reached (`run.interrupted`) was ended by that stop, as it would have been
/// had its host lived to write the proof, so it is no longer parked.
pub fn parked_on(records: &[Value]) -> Option<String> {
    let at = records.iter().rposition(|r| r["event"] == "run.parked")?;
    if records[at..].iter().any(|r| r["event"] == "run.end" || r["event"] == "run.interrupted") {
        return None;
    }
    records[at]["approval_id"].as_str().map(str::to_owned)
}

/// How a transcript's last segment closed, as its last lines say.
#[derive(Clone, Debug, PartialEq)]
pub enum Closing {
    /// Its `run.end`, the run's last lifecycle record.
    Ended(Value),
    /// No `run.end` since the last `run.start` or `run.resume`: the host died before it.
    Open,
    /// The lines read hold no lifecycle record.
    Unknown,
}

/// How the last segment of the transcript `shown` closed, from `tail`: its last bytes
/// (`whole` when they are all of it). Each line looked at is verified. A host writes `run.end`
/// once, when the run is over, and nothing starts after it: a second `run.end`, or a segment
/// begun after one, is damage.
pub fn closing(shown: &str, tail: &[u8], whole: bool) -> Result<Closing, RecordError> {
    let end = tail.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut lines: Vec<&[u8]> = tail[..end].split(|&b| b == b'\n').collect();
    lines.pop(); // The empty piece after the last newline.
    if !whole && !lines.is_empty() {
        lines.remove(0); // Maybe cut in the middle.
    }
    let mut last: Option<Closing> = None;
    for line in lines.iter().rev() {
        let body =
            crate::journal::verified_body(line).map_err(|e| RecordError::parse(shown, None, e))?;
        let event = body["event"].as_str().unwrap_or_default();
        match (event, &last) {
            ("run.end", None) => last = Some(Closing::Ended(body)),
            ("run.start" | "run.resume", None) => last = Some(Closing::Open),
            ("run.end", Some(Closing::Ended(_))) => {
                let detail = "a second run.end; a host writes one, when the run is over";
                return Err(RecordError::invalid(shown, detail));
            }
            ("run.end", Some(_)) => {
                let detail = "a segment began after run.end; nothing starts after a run ends";
                return Err(RecordError::invalid(shown, detail));
            }
            _ => {}
        }
    }
    Ok(last.unwrap_or(Closing::Unknown))
}

/// Whether the run's workflow process ever started, and how its last segment stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Started {
    /// No `run.start` or `run.resume`: nothing ran.
    Never,
    /// It started.
    Ran,
    /// It started, and an operator's stop reached its running last segment
    /// (`run.interrupted` after the last `run.start`/`run.resume`, no `run.end` since): if
    /// its host died before the proof, the stop ended it, not the work.
    Interrupted,
    /// It started, and the engine that ran it on a cluster ended it (`run.engine_fault`
    /// after the last `run.start`/`run.resume`): if the coordinator died before the proof,
    /// the engine ended it, not the work.
    EngineFault,
    /// It ended for its own reasons, and its host could not write the proof (a full disk:
    /// `run.unsealed` after the last `run.start`/`run.resume`): harn's failure, not the work's.
    Unsealed,
    /// It started under a containment that refuses its processes any signal to a process
    /// outside the run (Landlock's signal scope, ABI 6 or later, recorded in the last
    /// segment's start), and its host died before the workflow's result arrived (no result,
    /// no park, no timeout or limit of its own, no `run.end`): the workflow could not have
    /// ended its host, so the death is not the work's (decision record 0007).
    HostDied,
}

/// The first Landlock ABI whose domains may scope signals: a process under it cannot signal
/// one outside its domain, its host included.
pub const SIGNAL_SCOPE_ABI: u32 = 6;

/// Whether the run's workflow process ever started: the host records `run.start` (or
/// `run.resume`) right after a spawn succeeds, before the workflow hears a word, and
/// `run.interrupted` when an operator's stop reaches it, before any signal is sent. Read
/// only where the run has no proof: it says how the run ended without one.
pub fn started(records: &[Value]) -> Started {
    let segment =
        records.iter().rposition(|r| r["event"] == "run.start" || r["event"] == "run.resume");
    let Some(at) = segment else { return Started::Never };
    let mut state = Started::Ran;
    let mut answered = false;
    for r in &records[at..] {
        match r["event"].as_str() {
            Some("run.interrupted") => state = Started::Interrupted,
            Some("run.engine_fault") => state = Started::EngineFault,
            Some("run.unsealed") => state = Started::Unsealed,
            Some("run.end") => (state, answered) = (Started::Ran, true),
            // The segment ended by parking on an approval, or reached its own timeout or a
            // limit of its own: the work's doing, whatever came after.
            Some("run.parked" | "run.timed_out" | "run.limit_reached") => answered = true,
            Some("workflow.message") if r["message"]["op"] == "result" => answered = true,
            _ => {}
        }
    }
    let scoped = |c: super::containment::Containment| {
        c.confined && c.landlock.is_some_and(|abi| abi >= SIGNAL_SCOPE_ABI)
    };
    if state == Started::Ran && !answered && reached(records).is_some_and(scoped) {
        return Started::HostDied;
    }
    state
}

/// The containment the run's last segment reached: the `containment` of its last
/// `run.start` or `run.resume`, when that record has one.
pub fn reached(records: &[Value]) -> Option<super::containment::Containment> {
    let segment =
        records.iter().rev().find(|r| r["event"] == "run.start" || r["event"] == "run.resume")?;
    serde_json::from_value(segment.get("containment")?.clone()).ok()
}

/// The approvals the run asked for, in the order asked.
pub(crate) fn approvals_asked(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["event"] == "approval.requested")
        .filter_map(|r| r["request"]["approval_id"].as_str().map(str::to_owned))
        .collect()
}

/// Agent calls started and replies of completed calls, by call key in transcript order.
/// Rulings are the caller's to add: they live in the approvals, not the transcript.
pub(crate) fn resume_state(records: &[Value]) -> ResumeState {
    let mut state = ResumeState::default();
    for r in records {
        match r["event"].as_str() {
            Some("agent.start") => {
                if let Some(id) = r["id"].as_str() {
                    state.started.insert(id.to_owned());
                }
                state.dispatched = state.started.len() as u32;
            }
            Some("policy.check") => {
                if let Ok(check) = serde_json::from_value::<PolicyRecord>(r["check"].clone()) {
                    state.checks.insert(check.slot, check);
                }
            }
            Some("agent.end") => {
                if r["ok"] == true {
                    if let (Some(key), Some(text)) = (r["key"].as_str(), r["text"].as_str()) {
                        state.cache.entry(key.to_owned()).or_default().push(text.to_owned());
                    }
                }
                // Spending of earlier segments, as the fold counts it (see `RunFold::spent`).
                match r["usage"]["cost_micro_usd"].as_u64() {
                    Some(cost) => state.spent.run_micro_usd += cost,
                    None if r["class"] == "environment" => {}
                    None => state.spent.unknown_calls += 1,
                }
            }
            _ => {}
        }
    }
    state
}

/// Most bytes of evidence, stage and log messages a segment records in its transcript; past
/// them those messages are counted (a `workflow.cut` record says how many) and still folded
/// into the proof, so a workflow that floods leaves a bounded transcript.
pub(crate) const MESSAGES_RECORDED: u64 = 8 << 20;

/// Whether a segment that recorded `recorded` bytes of messages records `m`, of `bytes`:
/// agent requests, authorizations, declarations and results always; evidence, stages and
/// logs while they fit in [`MESSAGES_RECORDED`].
pub(crate) fn records_message(
    m: &crate::work::protocol::FromWorkflow,
    recorded: u64,
    bytes: u64,
) -> bool {
    use crate::work::protocol::FromWorkflow;
    let bulk = matches!(
        m,
        FromWorkflow::Evidence(_) | FromWorkflow::Stage { .. } | FromWorkflow::Log { .. }
    );
    !bulk || recorded.saturating_add(bytes) <= MESSAGES_RECORDED
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(events: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, e) in events.iter().enumerate() {
            let body = json!({"event": e, "proof_sha256": "d"});
            crate::journal::encode_line_into(
                &mut out,
                i as u64 + 1,
                crate::time::WallTime(0),
                &body,
            );
        }
        out
    }

    #[test]
    fn a_call_cut_short_leaves_its_session_open_and_an_ended_one_does_not() {
        let records = [
            json!({"event": "agent.progress", "id": "a1", "what": "session", "session_id": "s1"}),
            json!({"event": "agent.progress", "id": "a2", "what": "session", "session_id": "s2"}),
            json!({"event": "agent.end", "id": "a2", "ok": true}),
        ];
        let open = open_sessions(&records);
        assert_eq!(open.into_iter().collect::<Vec<_>>(), [("a1".to_owned(), "s1".to_owned())]);
    }

    #[test]
    fn a_transcript_closes_once_and_nothing_starts_after() {
        let t = journal(&["run.start", "agent.start", "run.end"]);
        assert!(
            matches!(closing("t", &t, true), Ok(Closing::Ended(e)) if e["proof_sha256"] == "d")
        );
        let t = journal(&["run.start", "run.parked", "run.resume", "agent.end"]);
        assert_eq!(closing("t", &t, true), Ok(Closing::Open), "a host died before run.end");
        let t = journal(&["agent.end"]);
        assert_eq!(closing("t", &t, true), Ok(Closing::Unknown));
        let t = journal(&["run.start", "run.end", "run.end"]);
        assert!(closing("t", &t, true).unwrap_err().to_string().contains("second run.end"));
        let t = journal(&["run.start", "run.end", "run.resume"]);
        assert!(closing("t", &t, true).unwrap_err().to_string().contains("after run.end"));
        // A tail cut in a line skips that line; a damaged line is refused.
        let t = journal(&["run.start", "run.end"]);
        assert!(matches!(closing("t", &t[5..], false), Ok(Closing::Ended(_))));
        let mut bad = journal(&["run.start", "run.end"]);
        let at = bad.len() - 20;
        bad[at] ^= 1;
        assert!(closing("t", &bad, true).is_err());
    }

    #[test]
    fn an_engine_fault_after_the_last_start_reads_as_the_clusters_until_an_end() {
        let faulted = [json!({"event":"run.start"}), json!({"event":"run.engine_fault"})];
        assert_eq!(started(&faulted), Started::EngineFault);
        let ended = [faulted[0].clone(), faulted[1].clone(), json!({"event":"run.end"})];
        assert_eq!(started(&ended), Started::Ran);
        let resumed = [faulted[0].clone(), faulted[1].clone(), json!({"event":"run.resume"})];
        assert_eq!(started(&resumed), Started::Ran, "a later segment started again");
    }

    #[test]
    fn a_host_that_died_under_a_workflow_that_could_not_signal_it_is_not_the_works_death() {
        let start = |abi: Option<u32>, confined: bool| {
            let mut c = serde_json::json!({"holding": "cgroup", "confined": confined});
            if let Some(abi) = abi {
                c["landlock"] = abi.into();
            }
            json!({"event": "run.start", "containment": c})
        };
        let call = json!({"event": "agent.start", "id": "a1"});
        assert_eq!(started(&[start(Some(7), true), call.clone()]), Started::HostDied);
        assert_eq!(started(&[start(Some(6), true)]), Started::HostDied);
        // A workflow that could signal its host may have ended it: its death stays the run's.
        assert_eq!(started(&[start(Some(5), true), call.clone()]), Started::Ran);
        assert_eq!(started(&[start(None, false), call.clone()]), Started::Ran);
        assert_eq!(started(&[json!({"event": "run.start"})]), Started::Ran);
        // Once the result arrived, or the workflow ended, the host's death comes after the
        // work's own end.
        let result = json!({"event": "workflow.message", "message": {"op": "result"}});
        assert_eq!(started(&[start(Some(7), true), result]), Started::Ran);
        let end = json!({"event": "run.end", "exit_code": 0});
        assert_eq!(started(&[start(Some(7), true), end]), Started::Ran);
        let parked = json!({ "event": "run.parked", "approval_id": "wf-1-p1" });
        assert_eq!(started(&[start(Some(7), true), parked]), Started::Ran, "it parked itself");
        let timed_out = json!({ "event": "run.timed_out" });
        assert_eq!(started(&[start(Some(7), true), timed_out]), Started::Ran, "its own timeout");
        // A later segment's containment is what counts.
        let resume = json!({"event": "run.resume"});
        assert_eq!(started(&[start(Some(7), true), resume]), Started::Ran);
    }

    #[test]
    fn a_run_is_parked_from_its_last_park_until_a_segment_ends() {
        let parked = json!({"event":"run.parked","approval_id":"wf-1-p1"});
        assert_eq!(
            parked_on(&[json!({"event":"run.start"}), parked.clone()]),
            Some("wf-1-p1".into())
        );
        let resumed = [parked.clone(), json!({"event":"run.resume"})];
        assert_eq!(parked_on(&resumed), Some("wf-1-p1".into()), "a crashed resume is still parked");
        let ended = [parked.clone(), json!({"event":"run.resume"}), json!({"event":"run.end"})];
        assert_eq!(parked_on(&ended), None);
        let stopped = [parked, json!({"event":"run.resume"}), json!({"event":"run.interrupted"})];
        assert_eq!(parked_on(&stopped), None, "a stop ended the resumed segment");
        assert_eq!(started(&stopped), Started::Interrupted);
        assert_eq!(parked_on(&[]), None);
    }

    #[test]
    fn a_resume_takes_over_started_calls_and_completed_replies_in_order() {
        let one = CallOutcome {
            ok: true,
            text: Some("one".into()),
            error: None,
            class: None,
            ..CallOutcome::default()
        };
        let records = [
            agent_start("a1", "h", "k"),
            agent_end("a1", Some("k"), &one),
            json!({"event":"agent.start","id":"a2","key":"k"}),
            json!({"event":"agent.end","id":"a2","key":"k","ok":true,"text":"two"}),
            json!({"event":"agent.start","id":"a3","key":"j"}),
            json!({"event":"agent.end","id":"a3","key":"j","ok":false,"text":null}),
            json!({"event":"approval.requested","request":{"approval_id":"wf-1-p4"}}),
        ];
        let s = resume_state(&records);
        assert_eq!(s.dispatched, 3);
        assert_eq!(s.cache.get("k"), Some(&vec!["one".to_owned(), "two".to_owned()]));
        assert!(!s.cache.contains_key("j"), "a failed call is made again");
        assert_eq!(approvals_asked(&records), vec!["wf-1-p4".to_owned()]);
    }

    #[test]
    fn bulk_messages_are_recorded_while_they_fit_and_the_rest_always() {
        use crate::work::protocol::FromWorkflow;
        let log = FromWorkflow::Log { message: "x".into() };
        assert!(records_message(&log, 0, 100));
        assert!(!records_message(&log, MESSAGES_RECORDED - 50, 100));
        let result = FromWorkflow::Result { ok: true, summary: None, error: None };
        assert!(records_message(&result, MESSAGES_RECORDED, 100), "a result is never cut");
    }
}
