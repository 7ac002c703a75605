//! Which attempt a `run` or `retry` may start, and which proof may be accepted.

use super::*;
use crate::error::RecordError;

/// Decides whether a `run` (or, with `retry`, a `retry`) may start an attempt now, and with
/// which trigger. Refusals say what the operator should do instead.
pub(crate) fn may_start(p: &Projection, retry: bool) -> Result<Trigger, RecordError> {
    // Spent comes first: telling someone to retry an item that cannot run sends them round.
    let startable = matches!(p.state, WorkState::Ready | WorkState::Blocked);
    if startable && p.attempts_remaining == 0 {
        let n = p.charged_attempts;
        let (s, are) = if n == 1 { ("", "is") } else { ("s", "are") };
        return refuse(format!(
            "its {n} charged attempt{s} {are} used up: nothing more can run on it"
        ));
    }
    match (p.state, retry) {
        (WorkState::Ready, false) => {}
        (WorkState::Ready, true) => return refuse("it is ready: start it with run, not retry"),
        (WorkState::Blocked, true) => {}
        (WorkState::Blocked, false) => {
            return refuse(format!("it is blocked ({}): retry it explicitly", p.reason))
        }
        (state, _) => return refuse(format!("it is {} ({})", state_word(state), p.reason)),
    }
    Ok(if retry { Trigger::Retry } else { Trigger::Initial })
}

fn state_word(s: WorkState) -> &'static str {
    match s {
        WorkState::Waiting => "waiting",
        WorkState::Ready => "ready",
        WorkState::Running => "running",
        WorkState::AwaitingApproval => "awaiting approval",
        WorkState::InReview => "in review",
        WorkState::Blocked => "blocked",
        WorkState::Succeeded => "succeeded",
        WorkState::Cancelled => "cancelled",
    }
}

/// Decides whether the latest proof may be accepted with these dispositions: only in review,
/// and only when every open finding is disposed of, each exactly once, a deferral with a reason.
pub(crate) fn may_accept(p: &Projection, dispositions: &[Disposition]) -> Result<(), RecordError> {
    if p.state != WorkState::InReview {
        return refuse(format!(
            "it is {} ({}); only an item in review is accepted",
            state_word(p.state),
            p.reason
        ));
    }
    for (i, d) in dispositions.iter().enumerate() {
        if !p.open_findings.iter().any(|f| f.id == d.id()) {
            return refuse(format!("{} is not an open finding", d.id()));
        }
        if dispositions[..i].iter().any(|e| e.id() == d.id()) {
            return refuse(format!("{} is disposed of twice", d.id()));
        }
        if let Disposition::Deferred { reason, .. } = d {
            if reason.trim().is_empty() {
                return refuse(format!("deferring {} needs a reason", d.id()));
            }
        }
    }
    let open: Vec<&str> = p
        .open_findings
        .iter()
        .filter(|f| dispositions.iter().all(|d| d.id() != f.id))
        .map(|f| f.id.as_str())
        .collect();
    if !open.is_empty() {
        return refuse(format!(
            "findings still open: {} (dispose of each: fixed or deferred)",
            open.join(", ")
        ));
    }
    Ok(())
}

/// A refusal in the words an operator reads.
fn refuse<T>(why: impl Into<String>) -> Result<T, RecordError> {
    Err(RecordError::refused(why))
}
