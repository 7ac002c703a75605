//! A work item's history in words: one line for each event of its journal, for `work show`.

use super::events::{Disposition, EventKind, Trigger, WorkEvent};

/// What `e` did, in words (without its time or actor).
pub fn describe(e: &WorkEvent) -> String {
    let what = match &e.kind {
        EventKind::Created { .. } => "created".to_owned(),
        EventKind::AttemptStarted { run_id, attempt, trigger, .. } => {
            let how = match trigger {
                Trigger::Initial => "",
                Trigger::Retry => " (a retry)",
            };
            format!("attempt {attempt} started{how}: run {run_id}")
        }
        EventKind::AttemptResumed { run_id, attempt } => {
            format!("attempt {attempt} resumed after its approval: run {run_id}")
        }
        EventKind::Accepted { run_id, attempt, dispositions, .. } => {
            let mut said = format!("accepted the proof of attempt {attempt} (run {run_id})");
            let disposed: Vec<String> = dispositions
                .iter()
                .map(|d| match d {
                    Disposition::Fixed { id } => format!("{id} fixed"),
                    Disposition::Deferred { id, reason } => format!("{id} deferred ({reason})"),
                })
                .collect();
            if !disposed.is_empty() {
                said.push_str(&format!("; {}", disposed.join(", ")));
            }
            said
        }
        EventKind::Landed { into, commit, method, .. } => {
            format!("landed on {into} as {} ({})", short(commit), method.as_str())
        }
        EventKind::Cancelled => "cancelled".to_owned(),
        EventKind::Reopened { feedback: Some(words), .. } => {
            format!("sent back with feedback: {}", crate::text::neutralize(words))
        }
        EventKind::Reopened { findings, .. } if findings.is_empty() => "reopened".to_owned(),
        EventKind::Reopened { findings, .. } => {
            let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
            format!("reopened with findings {}", ids.join(", "))
        }
        EventKind::Reconciled { state, next_action } => {
            format!("reconciled: {state} (next: {next_action})")
        }
    };
    match &e.reason {
        Some(why) => format!("{what} — {why}"),
        None => what,
    }
}

/// A commit as people write it: its first twelve hex digits.
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// The lines `work show` prints for `events`, the latest `max` of them, each
/// `SEQ  TIME  ACTOR  WHAT`; an elision line first when earlier ones are left out.
pub fn lines(events: &[WorkEvent], max: usize) -> Vec<String> {
    let skipped = events.len().saturating_sub(max);
    let mut out = Vec::new();
    if skipped > 0 {
        let s = if skipped == 1 { "" } else { "s" };
        out.push(format!("… {skipped} earlier event{s} (all of them: --json)"));
    }
    let width = events.last().map_or(1, |e| e.seq.to_string().len());
    for e in &events[skipped..] {
        out.push(format!("{:>width$}  {}  {}  {}", e.seq, e.ts.utc(), e.actor, describe(e)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Id;
    use crate::time::WallTime;
    use crate::work::events::{Finding, EVENT_VERSION};

    fn event(seq: u64, kind: EventKind, reason: Option<&str>) -> WorkEvent {
        WorkEvent {
            schema_version: EVENT_VERSION,
            work_id: Id::new("w").unwrap(),
            seq,
            ts: WallTime(1_764_633_600_000 + seq as i64 * 1000),
            actor: "ana".into(),
            reason: reason.map(str::to_owned),
            kind,
        }
    }

    #[test]
    fn every_event_reads_in_words_and_long_histories_keep_their_tail() {
        let run = Id::new("wf-1").unwrap();
        let events = vec![
            event(1, EventKind::Created { intent_sha256: None }, None),
            event(
                2,
                EventKind::AttemptStarted {
                    run_id: run.clone(),
                    attempt: 1,
                    trigger: Trigger::Retry,
                    prerequisites: Default::default(),
                },
                None,
            ),
            event(3, EventKind::AttemptResumed { run_id: run.clone(), attempt: 1 }, None),
            event(
                4,
                EventKind::Reopened {
                    findings: vec![Finding { id: "f1".into(), statement: "x".into() }],
                    feedback: None,
                },
                Some("the parser drops tabs"),
            ),
            event(
                5,
                EventKind::Accepted {
                    run_id: run,
                    attempt: 1,
                    proof_sha256: String::new(),
                    dispositions: vec![Disposition::Deferred {
                        id: "f1".into(),
                        reason: "v2".into(),
                    }],
                },
                None,
            ),
            event(6, EventKind::Cancelled, None),
        ];
        let all = lines(&events, 10);
        assert_eq!(all.len(), 6);
        assert_eq!(all[0], "1  2025-12-02 00:00:01.000  ana  created");
        assert!(all[1].ends_with("attempt 1 started (a retry): run wf-1"), "{}", all[1]);
        assert!(all[3].ends_with("reopened with findings f1 — the parser drops tabs"));
        assert!(all[4].ends_with("(run wf-1); f1 deferred (v2)"), "{}", all[4]);
        let tail = lines(&events, 2);
        assert_eq!(tail[0], "… 4 earlier events (all of them: --json)");
        assert!(tail[2].ends_with("cancelled"));
    }
}
