//! Approvals: the request a run parks on when policy says `ask` (`request.json`), the ruling a
//! person records on it (`decision.json`), and the status derived from the two. A request is
//! bound by digest to the policy, the request and its evaluation, so a changed request can
//! never consume a ruling given for another.

use super::policy::{Evaluation, Request, Verdict};
use crate::error::RecordError;
use crate::ids::Id;
use crate::time::WallTime;
use serde::{Deserialize, Serialize};

/// Schema version of `request.json` and `decision.json`.
pub(crate) const APPROVAL_VERSION: u32 = 1;

/// The approval id of policy slot `slot` of `run`: `<run>-p<slot>`.
pub fn approval_id(run: &str, slot: u32) -> String {
    format!("{run}-p{slot}")
}

/// `request.json`: what a parked run asks a person to rule on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    /// [`APPROVAL_VERSION`].
    pub schema_version: u32,
    /// `<run>-p<slot>`.
    pub approval_id: String,
    /// The parked run.
    pub run_id: Id,
    /// Its work item.
    pub work_id: Id,
    /// The policy check's position in the run (1, 2, …).
    pub slot: u32,
    /// Who is asked (`--approval-to`).
    pub addressee: String,
    /// The frozen policy's digest.
    pub policy_sha256: String,
    /// What the run wants to do.
    pub request: Request,
    /// Why policy asks.
    pub evaluation: Evaluation,
    /// Digest over the policy digest, the request and the evaluation.
    pub request_sha256: String,
    /// When it was asked.
    pub requested_at: WallTime,
}

/// A ruling: allow or deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ruling {
    /// The run may go on.
    Allow,
    /// The run fails at the parked point.
    Deny,
}

/// `decision.json`: a person's ruling, created once and never replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDecision {
    /// [`APPROVAL_VERSION`].
    pub schema_version: u32,
    /// The approval.
    pub approval_id: String,
    /// Its run.
    pub run_id: Id,
    /// The ruling.
    pub verdict: Ruling,
    /// Who ruled.
    pub actor: String,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When.
    pub decided_at: WallTime,
}

/// Where an approval stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Nobody has ruled.
    Pending,
    /// Allowed.
    Approved,
    /// Denied.
    Denied,
}

/// The status of a request given its decision, if any.
pub fn status(decision: Option<&ApprovalDecision>) -> ApprovalStatus {
    match decision.map(|d| d.verdict) {
        None => ApprovalStatus::Pending,
        Some(Ruling::Allow) => ApprovalStatus::Approved,
        Some(Ruling::Deny) => ApprovalStatus::Denied,
    }
}

/// Whether a ruling may be recorded: `Ok(true)` to write it, `Ok(false)` when the same ruling
/// is already recorded (nothing to do), an error when the opposite one is.
pub(crate) fn may_rule(
    existing: Option<&ApprovalDecision>,
    verdict: Ruling,
) -> Result<bool, RecordError> {
    match existing {
        None => Ok(true),
        Some(d) if d.verdict == verdict => Ok(false),
        Some(d) => Err(RecordError::refused(format!(
            "approval {} was already ruled {} by {}; a ruling is never changed",
            d.approval_id,
            ruling_word(d.verdict),
            d.actor
        ))),
    }
}

/// `allow` or `deny`.
pub fn ruling_word(r: Ruling) -> &'static str {
    match r {
        Ruling::Allow => "allow",
        Ruling::Deny => "deny",
    }
}

/// What a policy verdict of `ask` became: a ruling recorded for this slot, checked against the
/// request it was given for.
pub fn consume(
    request_sha256: &str,
    ruled: Option<&(String, Ruling)>,
) -> Result<Option<Verdict>, RecordError> {
    match ruled {
        None => Ok(None),
        Some((sha, _)) if sha != request_sha256 => {
            Err(RecordError::refused("its approval was given for a different request"))
        }
        Some((_, Ruling::Allow)) => Ok(Some(Verdict::Allow)),
        Some((_, Ruling::Deny)) => Ok(Some(Verdict::Deny)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(verdict: Ruling) -> ApprovalDecision {
        ApprovalDecision {
            schema_version: APPROVAL_VERSION,
            approval_id: "wf-1-p1".into(),
            run_id: Id::new("wf-1").expect("valid"),
            verdict,
            actor: "ana".into(),
            reason: None,
            decided_at: WallTime(1),
        }
    }

    #[test]
    fn a_ruling_is_recorded_once_repeated_idempotently_and_never_reversed() {
        assert_eq!(may_rule(None, Ruling::Allow), Ok(true));
        assert_eq!(may_rule(Some(&decision(Ruling::Allow)), Ruling::Allow), Ok(false));
        let e = may_rule(Some(&decision(Ruling::Allow)), Ruling::Deny).unwrap_err().to_string();
        assert!(e.contains("already ruled allow by ana"), "{e}");
        assert_eq!(status(None), ApprovalStatus::Pending);
        assert_eq!(status(Some(&decision(Ruling::Deny))), ApprovalStatus::Denied);
    }

    #[test]
    fn a_ruling_is_consumed_only_by_the_request_it_was_given_for() {
        assert_eq!(consume("a", None), Ok(None));
        assert_eq!(consume("a", Some(&("a".into(), Ruling::Allow))), Ok(Some(Verdict::Allow)));
        assert_eq!(consume("a", Some(&("a".into(), Ruling::Deny))), Ok(Some(Verdict::Deny)));
        assert!(consume("a", Some(&("b".into(), Ruling::Allow))).is_err());
        assert_eq!(approval_id("wf-9", 3), "wf-9-p3");
    }
}
