//! A work item's history (`events.jsonl` bodies): creation, attempts, governance decisions
//! and reconciliation receipts, with the rules every read checks.

use super::FieldError;
use crate::error::RecordError;
use crate::ids::Id;
use crate::time::WallTime;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Schema version of an event written today.
pub const EVENT_VERSION: u32 = 1;
/// Most findings one reopen may raise.
pub(crate) const FINDINGS_MAX: usize = 20;

/// Why an attempt was started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The first attempt, or the first after a reopen or a stale proof.
    Initial,
    /// An explicit retry of a blocked item.
    Retry,
}

/// An operator's finding raised on reopen, which acceptance must dispose of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// `f1`, `f2`, … in the order raised.
    pub id: String,
    /// What is wrong.
    pub statement: String,
}

/// How acceptance disposed of a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Disposition {
    /// The finding was fixed.
    Fixed {
        /// The finding.
        id: String,
    },
    /// The finding was deferred, for a reason.
    Deferred {
        /// The finding.
        id: String,
        /// Why (non-empty).
        reason: String,
    },
}

impl EventKind {
    /// The creation of `intent`, naming its digest.
    pub fn created(intent: &super::WorkIntent) -> EventKind {
        EventKind::Created { intent_sha256: intent.sha256.clone() }
    }
}

impl Disposition {
    /// The finding it disposes of.
    pub fn id(&self) -> &str {
        match self {
            Disposition::Fixed { id } | Disposition::Deferred { id, .. } => id,
        }
    }
}

/// How accepted work landed on its branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LandMethod {
    /// The branch moved forward to the attested commit.
    FastForward,
    /// A merge commit of the branch and the attested commit.
    Merge,
    /// One new commit on the branch with the attested commit's changes.
    Squash,
    /// The branch already held it (a land cut short before it was recorded).
    Found,
}

impl LandMethod {
    /// As `work show` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            LandMethod::FastForward => "fast-forward",
            LandMethod::Merge => "merge",
            LandMethod::Squash => "squash",
            LandMethod::Found => "found already there",
        }
    }
}

/// What happened, by family.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event")]
pub enum EventKind {
    /// The first event of every history, exactly once.
    #[serde(rename = "work.created")]
    Created {
        /// The digest of the intent it created (absent before intents carried one): an
        /// intent whose digest differs was not the one created.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        intent_sha256: Option<String>,
    },
    /// An attempt was recorded, before its workflow started.
    #[serde(rename = "attempt.started")]
    AttemptStarted {
        /// The workflow run that carries it.
        run_id: Id,
        /// 1, 2, 3 … over the item's whole history.
        attempt: u32,
        /// Why.
        trigger: Trigger,
        /// For each prerequisite, the sequence number of the acceptance this attempt was built
        /// on; a later acceptance makes its proof stale.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        prerequisites: BTreeMap<Id, u64>,
    },
    /// A parked attempt was resumed (same run, same attempt, no budget).
    #[serde(rename = "attempt.resumed")]
    AttemptResumed {
        /// The run.
        run_id: Id,
        /// The attempt.
        attempt: u32,
    },
    /// An operator accepted the latest attempt's proof.
    #[serde(rename = "work.accepted")]
    Accepted {
        /// The run whose proof was accepted.
        run_id: Id,
        /// Its attempt.
        attempt: u32,
        /// SHA-256 of the proof's bytes.
        proof_sha256: String,
        /// How each open finding was disposed of.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        dispositions: Vec<Disposition>,
    },
    /// The accepted work was landed on a branch (`work land`): the branch now holds the
    /// commit the accepted proof attests.
    #[serde(rename = "work.landed")]
    Landed {
        /// The run whose accepted proof attests what landed.
        run_id: Id,
        /// That proof's digest, as accepted.
        proof_sha256: String,
        /// The branch it landed on.
        into: String,
        /// The branch's commit once landed (the attested commit itself, or the merge or
        /// squash commit made for it).
        commit: String,
        /// How.
        method: LandMethod,
    },
    /// An operator cancelled the item.
    #[serde(rename = "work.cancelled")]
    Cancelled,
    /// An operator reopened the item, optionally with findings, or a reviewer sent it back
    /// (`work reject`) with words for the next attempt.
    #[serde(rename = "work.reopened")]
    Reopened {
        /// Findings to dispose of before the next acceptance.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        findings: Vec<Finding>,
        /// What the reviewer said, given to the next attempt's workflow in its start line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
    /// A receipt of a projection; never read back to compute state.
    #[serde(rename = "work.reconciled")]
    Reconciled {
        /// The projected state.
        state: String,
        /// The projected next action.
        next_action: String,
    },
}

/// One line of a work item's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkEvent {
    /// [`EVENT_VERSION`].
    pub schema_version: u32,
    /// The owning work item.
    pub work_id: Id,
    /// Its line number, from 1.
    pub seq: u64,
    /// When it was appended.
    pub ts: WallTime,
    /// Who did it.
    pub actor: String,
    /// Why, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Checks the rules every read enforces: the history belongs to `work_id`, numbers its lines,
/// starts with exactly one creation, numbers attempts 1..N with distinct runs, resumes only
/// known attempts, and raises findings with ids `f1…` within bounds.
pub fn validate_history(work_id: &Id, events: &[WorkEvent]) -> Result<(), FieldError> {
    let mut check = HistoryCheck::new(work_id);
    events.iter().try_for_each(|e| check.step(e))
}

/// [`validate_history`] one event at a time, for a reader that streams a long history and
/// keeps only what it needs.
#[derive(Debug)]
pub(crate) struct HistoryCheck {
    work_id: Id,
    seen: u64,
    runs: BTreeMap<Id, u32>,
    next_attempt: u32,
}

impl HistoryCheck {
    /// A check of `work_id`'s history, before its first event.
    pub fn new(work_id: &Id) -> HistoryCheck {
        HistoryCheck { work_id: work_id.clone(), seen: 0, runs: BTreeMap::new(), next_attempt: 1 }
    }

    /// Checks the next event.
    pub fn step(&mut self, e: &WorkEvent) -> Result<(), FieldError> {
        let i = self.seen;
        self.seen += 1;
        let at = |what: &str| FieldError::new(format!("event {}", i + 1), what.to_owned());
        if e.schema_version != EVENT_VERSION {
            return Err(at("unsupported schema_version"));
        }
        if e.work_id != self.work_id {
            return Err(at(&format!("belongs to {}, not {}", e.work_id, self.work_id)));
        }
        if e.seq != i + 1 {
            return Err(at(&format!("seq is {}", e.seq)));
        }
        match (&e.kind, i) {
            (EventKind::Created { .. }, 0) => {}
            (EventKind::Created { .. }, _) => return Err(at("a second work.created")),
            (_, 0) => return Err(at("the first event must be work.created")),
            (EventKind::AttemptStarted { run_id, attempt, .. }, _) => {
                if *attempt != self.next_attempt
                    || self.runs.insert(run_id.clone(), *attempt).is_some()
                {
                    return Err(at(&format!(
                        "attempt {attempt} of run {run_id} breaks the sequence"
                    )));
                }
                self.next_attempt += 1;
            }
            (EventKind::AttemptResumed { run_id, attempt }, _)
                if self.runs.get(run_id) != Some(attempt) =>
            {
                return Err(at(&format!("resumes unknown attempt {attempt} of run {run_id}")));
            }
            (EventKind::Reopened { findings, feedback }, _) => {
                validate_findings(findings).map_err(|m| at(&m.to_string()))?;
                if let Some(words) = feedback {
                    validate_feedback(words).map_err(|m| at(&m.to_string()))?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The most bytes of a reviewer's feedback.
pub const FEEDBACK_MAX: usize = 8 << 10;

/// Checks a reviewer's feedback: 1 to [`FEEDBACK_MAX`] bytes, not only whitespace.
pub fn validate_feedback(words: &str) -> Result<(), RecordError> {
    if words.trim().is_empty() {
        return Err(RecordError::refused("feedback may not be empty".to_owned()));
    }
    if words.len() > FEEDBACK_MAX {
        return Err(RecordError::refused(format!("feedback: at most {FEEDBACK_MAX} bytes")));
    }
    Ok(())
}

/// Checks findings raised on one reopen: at most [`FINDINGS_MAX`], ids `f1…` in order, each
/// with a statement of 1 to 1000 characters.
pub fn validate_findings(findings: &[Finding]) -> Result<(), RecordError> {
    let refuse = |why: String| Err(RecordError::refused(why));
    if findings.len() > FINDINGS_MAX {
        return refuse(format!("at most {FINDINGS_MAX} findings"));
    }
    let mut seen = BTreeSet::new();
    for (i, f) in findings.iter().enumerate() {
        if f.id != format!("f{}", i + 1) || !seen.insert(&f.id) {
            return refuse(format!("finding {} must be f{}", f.id, i + 1));
        }
        if f.statement.trim().is_empty() || f.statement.chars().count() > 1000 {
            return refuse(format!("finding {} needs a statement of 1 to 1000 characters", f.id));
        }
    }
    Ok(())
}

/// Checks that `intent` (its file `shown`) is the one its history created: when
/// `work.created` recorded a digest (every item created since intents carry one), the
/// intent's must be that digest.
pub fn check_created(
    intent: &super::WorkIntent,
    shown: &str,
    events: &[WorkEvent],
) -> Result<(), RecordError> {
    let Some(EventKind::Created { intent_sha256: Some(created) }) = events.first().map(|e| &e.kind)
    else {
        return Ok(());
    };
    match &intent.sha256 {
        Some(now) if now == created => Ok(()),
        now => Err(RecordError::invalid(
            shown,
            format!(
                "is not the intent this item was created with: work.created recorded sha256 \
                 {}, the intent has {}; it was changed after creation",
                short(created),
                now.as_deref().map_or("none".to_owned(), short)
            ),
        )),
    }
}

/// The first 12 characters of a digest, as messages show it.
pub(crate) fn short(digest: &str) -> String {
    digest.chars().take(12).collect()
}

/// The `work.cancelled` recorded after run `run` last started or resumed, if any: a cancel
/// that its running host must carry out.
pub fn cancelled_during<'a>(events: &'a [WorkEvent], run: &Id) -> Option<&'a WorkEvent> {
    let began = events.iter().rposition(|e| match &e.kind {
        EventKind::AttemptStarted { run_id, .. } | EventKind::AttemptResumed { run_id, .. } => {
            run_id == run
        }
        _ => false,
    })?;
    events[began..].iter().find(|e| e.kind == EventKind::Cancelled)
}
