//! How a work read inspects an attempt from its records: the synopsis, the findings
//! context a retry is shown, and the inspection of a run.

use super::*;

/// What a retry is told of the attempt before it (`attempt.prior` in the start line): the
/// run, why it did not pass (`causes`, in a fixed order), its error, the acceptance counts
/// and every criterion not satisfied. An attempt without a proof is `lost`, with no invented
/// error; an uncharged one names its class.
pub fn synopsis(run_id: &Id, proof: Option<&Proof>) -> Value {
    let Some(p) = proof else {
        return json!({ "run_id": run_id, "causes": ["lost"], "unresolved": [] });
    };
    let mut causes = Vec::new();
    if let Some(class) = p.run.class {
        causes.push(json!(class));
    } else if p.run.status == RunStatus::Failed {
        causes.push(json!("workflow_error"));
    }
    let s = &p.acceptance.summary;
    if s.unsatisfied > 0 {
        causes.push(json!("acceptance_unsatisfied"));
    }
    if s.unknown > 0 {
        causes.push(json!("acceptance_unknown"));
    }
    let unresolved: Vec<Value> = p
        .acceptance
        .criteria
        .iter()
        .filter(|c| c.verdict != crate::work::acceptance::AcceptanceVerdict::Satisfied)
        .map(|c| json!({ "id": c.id, "statement": c.statement, "status": c.verdict }))
        .collect();
    json!({
        "run_id": run_id, "status": p.run.status, "causes": causes, "error": p.run.error,
        "acceptance": s, "unresolved": unresolved,
    })
}

/// The open findings an attempt is started with: id, statement and who raised them.
pub(crate) fn findings_context(
    events: &[crate::work::WorkEvent],
    open: &[crate::work::Finding],
) -> Value {
    let raised_by = |id: &str| {
        events.iter().rev().find_map(|e| match &e.kind {
            crate::work::EventKind::Reopened { findings, .. }
                if findings.iter().any(|f| f.id == id) =>
            {
                Some(e.actor.clone())
            }
            _ => None,
        })
    };
    Value::Array(
        open.iter()
            .map(|f| json!({ "id": f.id, "statement": f.statement, "actor": raised_by(&f.id) }))
            .collect(),
    )
}

/// What reviewers said sending the item back (`work reject`, `work reopen --feedback`)
/// since its last attempt started, oldest first: each with its author and when.
pub(crate) fn feedback_context(events: &[crate::work::WorkEvent]) -> Value {
    let since = events
        .iter()
        .rposition(|e| matches!(e.kind, crate::work::EventKind::AttemptStarted { .. }))
        .map_or(0, |i| i + 1);
    Value::Array(
        events[since..]
            .iter()
            .filter_map(|e| match &e.kind {
                crate::work::EventKind::Reopened { feedback: Some(text), .. } => {
                    Some(json!({ "by": e.actor, "text": text, "at": e.ts }))
                }
                _ => None,
            })
            .collect(),
    )
}

/// What a work read learns of an attempt from its records, or why the read must fail.
/// `runner_live` is true while some process holds the item's run lease; `parked` names the
/// approval the run's transcript last parked on and whether it has been ruled on.
/// `started` is true when the run's transcript records its workflow starting: an attempt
/// that ended without a proof is lost only then, and otherwise never ran.
pub(crate) fn inspect(
    work_id: &Id,
    run_id: &Id,
    attempt: u32,
    records: (Option<&RunManifest>, Option<&Proof>),
    parked: Option<(&str, bool)>,
    started: crate::work::transcript::Started,
    runner_live: bool,
) -> Result<AttemptStatus, crate::error::RecordError> {
    use crate::error::RecordError;
    use crate::work::transcript::Started;
    // The records disagree with the history that started them: the read of the item is
    // refused as they stand (its caller names the item).
    let refused = |why: String| RecordError::refused(why);
    let (manifest, proof) = records;
    if let Some(m) = manifest {
        if m.work_id != *work_id || m.run_id != *run_id || m.attempt != attempt {
            return Err(refused(format!(
                "run {run_id}'s manifest names {} attempt {} of run {}",
                m.work_id, m.attempt, m.run_id
            )));
        }
    }
    let Some(p) = proof else {
        return Ok(match parked {
            _ if runner_live => AttemptStatus::Running,
            Some((approval, decided)) => {
                AttemptStatus::Parked { approval_id: approval.to_owned(), decided }
            }
            None => match started {
                Started::Never => AttemptStatus::NotStarted,
                Started::Ran => AttemptStatus::Lost,
                Started::Interrupted => AttemptStatus::Failed {
                    class: Some(FailureClass::Interrupted),
                    decision_id: None,
                },
                Started::EngineFault => AttemptStatus::Failed {
                    class: Some(FailureClass::Infrastructure),
                    decision_id: None,
                },
                Started::Unsealed => {
                    AttemptStatus::Failed { class: Some(FailureClass::Unsealed), decision_id: None }
                }
                Started::HostDied => {
                    AttemptStatus::Failed { class: Some(FailureClass::HostDied), decision_id: None }
                }
            },
        });
    };
    if manifest.is_none() {
        return Err(refused(format!("run {run_id} has a proof but no manifest")));
    }
    if p.run.work_id != *work_id || p.run.id != *run_id || p.run.attempt != attempt {
        return Err(refused(format!("run {run_id}'s proof belongs to another attempt")));
    }
    Ok(if p.passes() {
        AttemptStatus::Succeeded
    } else {
        AttemptStatus::Failed { class: p.run.class, decision_id: p.run.decision_id.clone() }
    })
}

#[cfg(test)]
mod tests {
    use crate::ids::Id;
    use crate::time::WallTime;
    use crate::work::{EventKind, WorkEvent};

    fn event(seq: u64, kind: EventKind, actor: &str) -> WorkEvent {
        WorkEvent {
            schema_version: crate::work::events::EVENT_VERSION,
            work_id: Id::new("w").unwrap(),
            seq,
            ts: WallTime(seq as i64),
            actor: actor.into(),
            kind,
            reason: None,
        }
    }

    #[test]
    fn feedback_since_the_last_attempt_reaches_the_next_one_with_its_author() {
        let reject =
            |text: &str| EventKind::Reopened { findings: Vec::new(), feedback: Some(text.into()) };
        let started = EventKind::AttemptStarted {
            run_id: Id::new("wf-1").unwrap(),
            attempt: 1,
            trigger: crate::work::Trigger::Initial,
            prerequisites: Default::default(),
        };
        let events = vec![
            event(1, reject("before the attempt"), "ana"),
            event(2, started, "operator"),
            event(3, reject("the tabs"), "ana"),
            event(4, EventKind::Reopened { findings: Vec::new(), feedback: None }, "bo"),
            event(5, reject("and the docs"), "bo"),
        ];
        let said = super::feedback_context(&events);
        assert_eq!(said.as_array().unwrap().len(), 2, "{said}");
        assert_eq!(
            (said[0]["by"].as_str(), said[0]["text"].as_str()),
            (Some("ana"), Some("the tabs"))
        );
        assert_eq!(said[1]["by"], "bo");
        assert_eq!(super::feedback_context(&events[..2]), serde_json::json!([]));
    }
}
