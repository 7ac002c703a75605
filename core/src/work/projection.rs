//! The work projection: state, reason and next action as a pure function of the intent, the
//! history, one inspection per attempt and the prerequisites' projections. The first rule that
//! matches wins; nothing here is ever persisted as truth.

use super::events::{short, EventKind, Finding, WorkEvent};
use super::intent::WorkIntent;
use crate::error::FieldError;
use crate::ids::Id;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a work item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    /// A prerequisite is not accepted yet.
    Waiting,
    /// Nothing stands in the way of an attempt.
    Ready,
    /// An attempt is running.
    Running,
    /// An attempt is parked on an approval.
    AwaitingApproval,
    /// The latest attempt passed; a person must review and accept it.
    InReview,
    /// The latest attempt failed; see the next action.
    Blocked,
    /// Accepted (sticky until reopened).
    Succeeded,
    /// Cancelled (sticky until reopened).
    Cancelled,
}

/// True when an operator may cancel an item in `state`: anything not already final.
pub fn cancellable(state: WorkState) -> bool {
    !matches!(state, WorkState::Succeeded | WorkState::Cancelled)
}

/// True when an operator may reopen an item in `state`: one that has stopped moving.
pub fn reopenable(state: WorkState) -> bool {
    matches!(
        state,
        WorkState::Blocked | WorkState::InReview | WorkState::Succeeded | WorkState::Cancelled
    )
}

/// What should happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextAction {
    /// Accept the prerequisites first.
    WaitForDependencies,
    /// Start an attempt.
    Run,
    /// Let the running attempt finish.
    WaitForRun,
    /// Someone must approve or deny.
    ResolveApproval,
    /// The approval is decided: resume the parked attempt.
    Resume,
    /// Start a retry.
    Retry,
    /// Review the proof and accept (or reopen).
    Review,
    /// Nothing automatic; a person must act.
    None,
}

/// A failure that does not charge the attempt budget.
///
/// The charging rule, once: an attempt is charged only when its workflow process started and
/// ended for a reason of its own. So a run that never started its workflow
/// ([`FailureClass::NotStarted`], and [`AttemptStatus::NotStarted`] when not even a proof could
/// be written), a host precondition ([`FailureClass::Environment`]), an outside service's
/// refusal ([`FailureClass::Upstream`]), a person's ruling ([`FailureClass::Decision`]), an
/// operator's stop ([`FailureClass::Interrupted`]), a cluster's engine ending a segment
/// ([`FailureClass::Infrastructure`]), a host that died under a workflow that could not have
/// killed it ([`FailureClass::HostDied`]) and a proof the host could not write
/// ([`FailureClass::Unsealed`]) are recorded and not charged. Uncharged
/// attempts that may simply run again are bounded by the item's `max_uncharged_attempts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// A precondition of the host is missing (a harness binary, node, an adapter for an
    /// agent call): stop at once.
    Environment,
    /// An outside service refused (rate limit, vendor outage): retry within a bound.
    Upstream,
    /// The workflow says a person must rule.
    Decision,
    /// The workflow process never started (an IO error, a refused path, a failed spawn):
    /// nothing ran, so it may run again.
    NotStarted,
    /// An operator's bounded stop ended the run (`service stop --timeout`, a harness stopped
    /// under it): it may run again.
    Interrupted,
    /// The run reached a resource limit of its own (memory, tasks): the one class that is
    /// charged, since what a run consumes is its own doing.
    Resource,
    /// The engine that ran the segment on a cluster ended it (a node that died, a job the
    /// cluster cancelled or preempted, a step lost): not the work's doing, so it may run
    /// again, never requeued behind harn's back.
    Infrastructure,
    /// Its host died (killed, out of memory, the machine's stop) before the workflow's result
    /// arrived, while the workflow could not signal it: not the work's doing, so it may run
    /// again, within the item's `max_uncharged_attempts` (a host that always dies still stops).
    HostDied,
    /// The workflow ran and ended, and its host could not write the proof (a full disk): it
    /// may run again once the host can.
    Unsealed,
}

impl FailureClass {
    /// True for the one class that charges its attempt ([`FailureClass::Resource`]).
    pub fn charges(self) -> bool {
        self == FailureClass::Resource
    }
}

/// What the run records of one attempt say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum AttemptStatus {
    /// No proof and nobody running it, but its workflow had started: the run was lost with
    /// its host (charged: harn cannot tell the workflow's own doing, an OOM say, from the
    /// host's).
    Lost,
    /// No proof, nobody running it, and its transcript never recorded the workflow starting:
    /// nothing ran (uncharged).
    NotStarted,
    /// Its runner holds the lease.
    Running,
    /// Parked on an approval.
    Parked {
        /// The approval.
        approval_id: String,
        /// True once someone approved or denied.
        decided: bool,
    },
    /// Its proof passed.
    Succeeded,
    /// Its proof failed.
    Failed {
        /// An uncharged class, when the failure has one.
        class: Option<FailureClass>,
        /// For `decision`, the decision's id when the workflow named one.
        decision_id: Option<String>,
    },
    /// The transcript cannot be read and nobody is running it.
    TranscriptUnreadable,
}

impl AttemptStatus {
    /// The class that keeps this attempt off the budget, if any.
    pub fn uncharged(&self) -> Option<FailureClass> {
        match self {
            AttemptStatus::Failed { class, .. } => class.filter(|c| !c.charges()),
            AttemptStatus::NotStarted => Some(FailureClass::NotStarted),
            _ => None,
        }
    }
}

/// What a dependent needs to know of a prerequisite: whether it is accepted (and by which
/// event) or cancelled. Both follow from the prerequisite's own history, before anything
/// else is looked at ([`decide`] takes them first), so a dependent is projected from its
/// prerequisites' histories alone, however long the chain below them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prerequisite {
    /// `succeeded`, `cancelled`, or `waiting` for every other state (a dependent treats
    /// them alike, and the history alone cannot tell them apart).
    pub state: WorkState,
    /// The sequence number of its latest acceptance, while it is accepted.
    pub accepted_seq: Option<u64>,
}

impl Prerequisite {
    /// The view of an item projected as `p`.
    pub fn of(p: &Projection) -> Prerequisite {
        let state = match p.state {
            WorkState::Succeeded | WorkState::Cancelled => p.state,
            _ => WorkState::Waiting,
        };
        Prerequisite { state, accepted_seq: p.accepted_seq }
    }

    /// The same view from the item's validated history alone.
    pub(crate) fn of_history(events: &[WorkEvent]) -> Prerequisite {
        match governance(events).map(|e| (&e.kind, e.seq)) {
            Some((EventKind::Accepted { .. }, seq)) => {
                Prerequisite { state: WorkState::Succeeded, accepted_seq: Some(seq) }
            }
            Some((EventKind::Cancelled, _)) => {
                Prerequisite { state: WorkState::Cancelled, accepted_seq: None }
            }
            _ => Prerequisite { state: WorkState::Waiting, accepted_seq: None },
        }
    }
}

/// The latest event that governs an item whatever else holds: an acceptance, a cancel, or a
/// reopen (which ends the one before).
fn governance(events: &[WorkEvent]) -> Option<&WorkEvent> {
    events.iter().rev().find(|e| {
        matches!(
            e.kind,
            EventKind::Accepted { .. } | EventKind::Cancelled | EventKind::Reopened { .. }
        )
    })
}

/// Everything the projection depends on.
pub struct Inputs<'a> {
    /// The intent.
    pub intent: &'a WorkIntent,
    /// The validated history.
    pub events: &'a [WorkEvent],
    /// One inspection per `attempt.started`, in order.
    pub attempts: &'a [AttemptStatus],
    /// Each prerequisite's projection; `None` when it could not be read.
    pub prerequisites: &'a BTreeMap<Id, Option<Prerequisite>>,
    /// True when another process holds the work lease.
    pub lease_held_elsewhere: bool,
}

impl<'a> Inputs<'a> {
    /// The inputs of an item no other process is running.
    pub fn unleased(
        intent: &'a WorkIntent,
        events: &'a [WorkEvent],
        attempts: &'a [AttemptStatus],
        prerequisites: &'a BTreeMap<Id, Option<Prerequisite>>,
    ) -> Self {
        Inputs { intent, events, attempts, prerequisites, lease_held_elsewhere: false }
    }
}

/// The derived view of a work item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Projection {
    /// Where it is.
    pub state: WorkState,
    /// Why, in a sentence.
    pub reason: String,
    /// What should happen next.
    pub next_action: NextAction,
    /// Prerequisites not accepted (or unreadable).
    pub unresolved_dependencies: Vec<Id>,
    /// Attempts started, ever.
    pub attempts_used: u32,
    /// Attempts that count against the budget, ever.
    pub charged_attempts: u32,
    /// Budget left.
    pub attempts_remaining: u32,
    /// The latest attempt's run.
    pub latest_run_id: Option<Id>,
    /// The approval a parked attempt waits on.
    pub approval_id: Option<String>,
    /// For a decision block, the decision's id (`""` when the workflow named none).
    pub blocked_on_decision: Option<String>,
    /// Findings acceptance must dispose of.
    pub open_findings: Vec<Finding>,
    /// While accepted: the sequence number of the acceptance, which dependents record.
    pub accepted_seq: Option<u64>,
    /// True when the current acceptance has landed (`work.landed` for its proof).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub landed: bool,
}

/// An item of a dependency graph, read and projected: what a goal governs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphItem {
    /// The work id.
    pub id: Id,
    /// Its projection.
    pub projection: Projection,
}

/// Projects a work item. `inputs.attempts` must have one entry per `attempt.started`.
pub fn project(inputs: &Inputs<'_>) -> Projection {
    let attempt_events: Vec<&WorkEvent> = inputs
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::AttemptStarted { .. }))
        .collect();
    assert_eq!(attempt_events.len(), inputs.attempts.len(), "one inspection per attempt");
    let used = attempt_events.len() as u32;
    let charged = inputs.attempts.iter().filter(|a| a.uncharged().is_none()).count() as u32;
    let remaining = inputs.intent.max_attempts.saturating_sub(charged);
    let mut p = Projection {
        state: WorkState::Ready,
        reason: String::new(),
        next_action: NextAction::Run,
        unresolved_dependencies: Vec::new(),
        attempts_used: used,
        charged_attempts: charged,
        attempts_remaining: remaining,
        latest_run_id: attempt_events.last().and_then(|e| run_of(e)),
        approval_id: None,
        blocked_on_decision: None,
        open_findings: open_findings(inputs.events),
        accepted_seq: None,
        landed: false,
    };
    decide(inputs, &attempt_events, &mut p);
    p.landed = p.state == WorkState::Succeeded && current_acceptance_landed(inputs.events);
    p
}

/// True when the latest acceptance (since the last reopen or cancel) has a `work.landed`
/// naming its proof.
pub(crate) fn current_acceptance_landed(events: &[WorkEvent]) -> bool {
    let accepted = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Accepted { proof_sha256, .. } => Some(Some(proof_sha256)),
        EventKind::Reopened { .. } | EventKind::Cancelled => Some(None),
        _ => None,
    });
    let Some(Some(proof)) = accepted else { return false };
    events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Landed { proof_sha256, .. } if proof_sha256 == proof))
}

fn run_of(e: &WorkEvent) -> Option<Id> {
    match &e.kind {
        EventKind::AttemptStarted { run_id, .. } => Some(run_id.clone()),
        _ => None,
    }
}

/// Applies the rules, first match wins.
fn decide(inputs: &Inputs<'_>, attempt_events: &[&WorkEvent], p: &mut Projection) {
    let mut set = |state, next_action, reason: String| {
        p.state = state;
        p.next_action = next_action;
        p.reason = reason;
    };
    let governance = governance(inputs.events);
    match governance.map(|e| (&e.kind, e.seq)) {
        Some((EventKind::Accepted { run_id, .. }, seq)) => {
            set(
                WorkState::Succeeded,
                NextAction::None,
                format!("accepted the proof of run {run_id}"),
            );
            p.accepted_seq = Some(seq);
            return;
        }
        Some((EventKind::Cancelled, _)) => {
            return set(WorkState::Cancelled, NextAction::None, "cancelled".into());
        }
        _ => {}
    }
    let window_start = governance.map_or(0, |e| e.seq);
    p.unresolved_dependencies = unresolved(inputs.prerequisites);
    if !p.unresolved_dependencies.is_empty() {
        let list = p.unresolved_dependencies.iter().map(Id::as_str).collect::<Vec<_>>().join(", ");
        return set(
            WorkState::Waiting,
            NextAction::WaitForDependencies,
            format!("waiting for {list} to be accepted"),
        );
    }
    if inputs.lease_held_elsewhere {
        return set(
            WorkState::Running,
            NextAction::WaitForRun,
            "another process is running it".into(),
        );
    }
    let window: Vec<usize> =
        (0..attempt_events.len()).filter(|i| attempt_events[*i].seq > window_start).collect();
    let Some(&latest) = window.last() else {
        if p.attempts_remaining == 0 {
            // Reopened with the budget spent: `run` would be refused, so do not offer it.
            let why = format!(
                "reopened, but its {} charged attempts are used up; nothing more can run",
                p.charged_attempts
            );
            return set(WorkState::Blocked, NextAction::None, why);
        }
        return set(WorkState::Ready, NextAction::Run, "no attempt yet".into());
    };
    let (state, next, reason) = judge_latest(inputs, attempt_events[latest], latest, &window, p);
    p.state = state;
    p.next_action = next;
    p.reason = reason;
}

/// Rules 6 to 15: what the latest attempt of the current window says.
fn judge_latest(
    inputs: &Inputs<'_>,
    event: &WorkEvent,
    index: usize,
    window: &[usize],
    p: &mut Projection,
) -> (WorkState, NextAction, String) {
    let run = run_of(event).map_or_else(String::new, |r| r.to_string());
    let retry_or_none = |p: &Projection| {
        if p.attempts_remaining > 0 {
            NextAction::Retry
        } else {
            NextAction::None
        }
    };
    match &inputs.attempts[index] {
        AttemptStatus::Running => (WorkState::Running, NextAction::WaitForRun, format!("run {run} is running")),
        AttemptStatus::Parked { approval_id, decided } => {
            p.approval_id = Some(approval_id.clone());
            if *decided {
                (WorkState::AwaitingApproval, NextAction::Resume, format!("approval {approval_id} is decided"))
            } else {
                (WorkState::AwaitingApproval, NextAction::ResolveApproval, format!("run {run} waits on approval {approval_id}"))
            }
        }
        AttemptStatus::Succeeded => match stale_prerequisite(inputs, event) {
            Some(dep) if p.attempts_remaining == 0 => (
                WorkState::Blocked,
                NextAction::None,
                format!("{dep} was accepted again after run {run} made its proof; a new attempt is needed but the charged attempts are used up"),
            ),
            Some(dep) => (
                WorkState::Ready,
                NextAction::Run,
                format!("{dep} was accepted again after run {run} made its proof; a new attempt is needed"),
            ),
            None => (WorkState::InReview, NextAction::Review, format!("run {run} passed; review its proof")),
        },
        AttemptStatus::TranscriptUnreadable => {
            (WorkState::Blocked, retry_or_none(p), format!("the transcript of run {run} cannot be read"))
        }
        AttemptStatus::Failed { class: Some(FailureClass::Environment), .. } => {
            (WorkState::Blocked, NextAction::None, format!("run {run} found a host precondition missing; fix it, then retry"))
        }
        AttemptStatus::Failed { class: Some(FailureClass::Decision), decision_id, .. } => {
            p.blocked_on_decision = Some(decision_id.clone().unwrap_or_default());
            (WorkState::Blocked, NextAction::None, format!("run {run} needs a person to rule"))
        }
        // Uncharged, and nothing says a person must act first: retry within the item's
        // ceiling of uncharged attempts in a row, then a person looks.
        status @ (AttemptStatus::NotStarted
        | AttemptStatus::Failed {
            class:
                Some(
                    FailureClass::Upstream
                    | FailureClass::NotStarted
                    | FailureClass::Interrupted
                    | FailureClass::Infrastructure
                    | FailureClass::HostDied
                    | FailureClass::Unsealed,
                ),
            ..
        }) => {
            let trailing = trailing_uncharged(inputs, window);
            let (what, ceiling) = match status.uncharged() {
                Some(FailureClass::Upstream) => (
                    "was refused by an outside service",
                    format!("waiting on an outside service: {trailing} consecutive refusals"),
                ),
                Some(FailureClass::Interrupted) => (
                    "was interrupted by an operator's stop; nothing was charged",
                    format!("{trailing} attempts in a row were interrupted; retry when ready"),
                ),
                Some(FailureClass::Infrastructure) => (
                    "was ended by its cluster, not by its work; nothing was charged",
                    format!("{trailing} attempts in a row were ended by their cluster; run `harn cluster check` on it, then retry"),
                ),
                Some(FailureClass::HostDied) => (
                    "lost its host before the workflow's result, and the workflow could not have ended it; nothing was charged",
                    format!("{trailing} attempts in a row lost their host; find what kills `harn` (`journalctl -k` names the OOM killer), then retry"),
                ),
                Some(FailureClass::Unsealed) => (
                    "ran; its proof could not be written (nothing was charged)",
                    format!("{trailing} attempts in a row ran but their proof could not be written; free space under .harnery/, then retry"),
                ),
                _ => (
                    "never started its workflow; nothing was charged",
                    format!("{trailing} attempts in a row never started their workflow; fix the host, then retry"),
                ),
            };
            if trailing >= inputs.intent.max_uncharged_attempts || p.attempts_remaining == 0 {
                (WorkState::Blocked, NextAction::None, ceiling)
            } else {
                (WorkState::Blocked, NextAction::Retry, format!("run {run} {what}"))
            }
        }
        AttemptStatus::Failed { class: None, .. } => {
            (WorkState::Blocked, retry_or_none(p), format!("run {run} failed"))
        }
        AttemptStatus::Failed { class: Some(FailureClass::Resource), .. } => (
            WorkState::Blocked,
            retry_or_none(p),
            format!("run {run} reached a resource limit (charged; `harn run show {run}` names it)"),
        ),
        AttemptStatus::Lost => {
            (WorkState::Blocked, retry_or_none(p), format!("run {run} ended without proof"))
        }
    }
}

fn unresolved(prerequisites: &BTreeMap<Id, Option<Prerequisite>>) -> Vec<Id> {
    prerequisites
        .iter()
        .filter(|(_, p)| p.is_none_or(|p| p.state != WorkState::Succeeded))
        .map(|(id, _)| id.clone())
        .collect()
}

/// A prerequisite accepted again after the attempt was started on an earlier acceptance.
fn stale_prerequisite(inputs: &Inputs<'_>, event: &WorkEvent) -> Option<Id> {
    let EventKind::AttemptStarted { prerequisites: built_on, .. } = &event.kind else {
        return None;
    };
    inputs.prerequisites.iter().find_map(|(id, p)| {
        let now = p.and_then(|p| p.accepted_seq)?;
        (built_on.get(id) != Some(&now)).then(|| id.clone())
    })
}

/// Uncharged attempts at the tail of the current window.
fn trailing_uncharged(inputs: &Inputs<'_>, window: &[usize]) -> u32 {
    window.iter().rev().take_while(|i| inputs.attempts[**i].uncharged().is_some()).count() as u32
}

/// The findings of the latest reopen that raised any, minus those disposed of since.
fn open_findings(events: &[WorkEvent]) -> Vec<Finding> {
    let mut open: Vec<Finding> = Vec::new();
    for e in events {
        match &e.kind {
            EventKind::Reopened { findings, .. } if !findings.is_empty() => open = findings.clone(),
            EventKind::Accepted { dispositions, .. } => {
                open.retain(|f| !dispositions.iter().any(|d| d.id() == f.id));
            }
            _ => {}
        }
    }
    open
}

/// Checks every `work.accepted` by what it means, not only by its form: it names the proof
/// it accepted by that proof's digest (`proofs` holds, for each run of the item, the SHA-256
/// of its proof's bytes, `None` without a proof), and when it was recorded the item was in
/// review on that proof: the latest attempt since the last reopen was that run's, its proof
/// passed (`attempts`: each attempt's status, in the order of its `attempt.started`), and the
/// item was neither accepted nor cancelled since. An acceptance harn could not have recorded
/// is refused.
pub(crate) fn check_acceptances(
    events: &[WorkEvent],
    proofs: &BTreeMap<Id, Option<String>>,
    attempts: &[AttemptStatus],
) -> Result<(), FieldError> {
    // The run and status of the latest attempt since the last governance event, and that
    // event, as the history stood before each line.
    let mut latest: Option<(&Id, u32, &AttemptStatus)> = None;
    let mut governed: Option<&EventKind> = None;
    let mut started = 0;
    for e in events {
        let at = |what: String| FieldError::new(format!("event {}", e.seq), what);
        match &e.kind {
            EventKind::AttemptStarted { run_id, attempt, .. } => {
                let status = attempts.get(started);
                started += 1;
                latest = status.map(|s| (run_id, *attempt, s));
            }
            EventKind::Cancelled | EventKind::Reopened { .. } => {
                governed = Some(&e.kind);
                latest = None;
            }
            EventKind::Accepted { run_id, attempt, proof_sha256, .. } => {
                match proofs.get(run_id) {
                    None => {
                        return Err(at(format!(
                            "work.accepted names run {run_id}, no attempt of this item"
                        )))
                    }
                    Some(None) => {
                        return Err(at(format!(
                            "work.accepted names the proof of run {run_id}, which has no proof; \
                             harn never recorded this acceptance"
                        )))
                    }
                    Some(Some(digest)) if digest != proof_sha256 => {
                        return Err(at(format!(
                            "work.accepted names proof sha256 {}, but the proof of run {run_id} \
                             has sha256 {}; harn never recorded this acceptance of that proof",
                            short(proof_sha256),
                            short(digest)
                        )))
                    }
                    Some(Some(_)) => {}
                }
                let never = "harn never recorded this acceptance";
                match (governed, latest) {
                    (Some(EventKind::Accepted { .. }), _) => {
                        return Err(at(format!(
                            "work.accepted of an item already accepted; {never}"
                        )))
                    }
                    (Some(EventKind::Cancelled), _) => {
                        return Err(at(format!("work.accepted of a cancelled item; {never}")))
                    }
                    (_, None) => {
                        return Err(at(format!(
                            "work.accepted of run {run_id}, but no attempt was in review then; \
                             {never}"
                        )))
                    }
                    (_, Some((run, n, _))) if run != run_id || n != *attempt => {
                        return Err(at(format!(
                            "work.accepted of run {run_id}, but the attempt in review then was \
                             run {run}'s; {never}"
                        )))
                    }
                    (_, Some((_, _, status))) if *status != AttemptStatus::Succeeded => {
                        return Err(at(format!(
                            "work.accepted of run {run_id}, whose proof did not pass; {never}"
                        )))
                    }
                    _ => {}
                }
                governed = Some(&e.kind);
                latest = None;
            }
            _ => {}
        }
    }
    Ok(())
}
