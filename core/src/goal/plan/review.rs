//! The independent review panel of a plan, decided without a model judge: each round every
//! reviewer (in frozen order) reviews the whole candidate; any `attention` stops the review,
//! any `revise` or blocking finding asks the planner for a complete replacement while rounds
//! remain, and only a round where everyone approves passes. The receipt (`review.json`)
//! records every round with the digest of the candidate it judged, and a read re-checks it
//! against the frozen panel.

use super::{Proposal, ReviewPanel};
use crate::error::RecordError;
use crate::hash::sha256_hex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A reviewer's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewVerdict {
    /// Good as it is.
    Approve,
    /// Needs a revision.
    Revise,
    /// A person must look.
    Attention,
}

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The plan must change.
    Blocking,
    /// Worth knowing.
    Advisory,
}

/// One finding of a review.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewFinding {
    /// A short lowercase id.
    pub code: String,
    /// How much it matters.
    pub severity: Severity,
    /// What is wrong.
    pub summary: String,
    /// What to do.
    pub recommendation: String,
}

/// One reviewer's review of a candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    /// The verdict.
    pub verdict: ReviewVerdict,
    /// Why.
    pub rationale: String,
    /// What it found.
    #[serde(default)]
    pub findings: Vec<ReviewFinding>,
}

/// What a round came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundOutcome {
    /// Everyone approved with nothing blocking.
    Approved,
    /// A revision is asked for.
    Revise,
    /// A person must look.
    Attention,
}

/// A round's outcome: any attention ⇒ attention; else any revise or blocking finding ⇒
/// revise; else approved.
pub(crate) fn round_outcome(reviews: &[Review]) -> RoundOutcome {
    if reviews.iter().any(|r| r.verdict == ReviewVerdict::Attention) {
        RoundOutcome::Attention
    } else if reviews.iter().any(|r| {
        r.verdict == ReviewVerdict::Revise
            || r.findings.iter().any(|f| f.severity == Severity::Blocking)
    }) {
        RoundOutcome::Revise
    } else {
        RoundOutcome::Approved
    }
}

/// Where a review ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    /// Approved: the candidate may be proposed.
    Passed,
    /// A person must look (a reviewer asked, or a revision changed nothing).
    Attention,
    /// Still revise after the last allowed round.
    RevisionExhausted,
}

/// One round as the receipt records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Round {
    /// The digest of the candidate reviewed.
    pub candidate_sha256: String,
    /// The reviewers, in frozen order.
    pub reviewers: Vec<String>,
    /// Their reviews, in the same order.
    pub reviews: Vec<Review>,
    /// The outcome.
    pub outcome: RoundOutcome,
}

/// `review.json`: a plan's review, written once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// The plan.
    pub plan_id: String,
    /// Where it ended.
    pub status: ReviewStatus,
    /// The final candidate.
    pub candidate: Proposal,
    /// Its digest.
    pub candidate_sha256: String,
    /// Every round.
    pub rounds: Vec<Round>,
}

/// The digest of a candidate: its canonical JSON with the plan id.
pub(crate) fn candidate_digest(plan_id: &str, candidate: &Proposal) -> String {
    sha256_hex(crate::hash::canonical_json(&json!([plan_id, candidate])).as_bytes())
}

/// What to do after a round: stop with a status, or ask for a revision.
pub(crate) fn after_round(
    outcome: RoundOutcome,
    round: u32,
    panel: &ReviewPanel,
) -> Option<ReviewStatus> {
    match outcome {
        RoundOutcome::Approved => Some(ReviewStatus::Passed),
        RoundOutcome::Attention => Some(ReviewStatus::Attention),
        RoundOutcome::Revise if round > panel.max_revision_rounds => {
            Some(ReviewStatus::RevisionExhausted)
        }
        RoundOutcome::Revise => None,
    }
}

/// Checks a receipt against the frozen panel: reviewers in order, at most `M + 1` rounds,
/// each outcome recomputed, the status following from the last round, the final digest.
pub fn check_receipt(r: &Receipt, panel: &ReviewPanel) -> Result<(), RecordError> {
    // A receipt is refused as it stands when it disagrees with the panel frozen for it.
    let refused = |why: String| RecordError::refused(why);
    if r.rounds.is_empty() || r.rounds.len() as u32 > panel.max_revision_rounds + 1 {
        return Err(refused(format!(
            "{} rounds for a panel of at most {}",
            r.rounds.len(),
            panel.max_revision_rounds + 1
        )));
    }
    for (i, round) in r.rounds.iter().enumerate() {
        if round.reviewers != panel.reviewer_specialists
            || round.reviews.len() != round.reviewers.len()
        {
            return Err(refused(format!(
                "round {}: the reviewers are not the frozen panel",
                i + 1
            )));
        }
        if round_outcome(&round.reviews) != round.outcome {
            return Err(refused(format!(
                "round {}: the recorded outcome does not follow from the reviews",
                i + 1
            )));
        }
        let last = i + 1 == r.rounds.len();
        let stop = after_round(round.outcome, i as u32 + 1, panel);
        if last != stop.is_some() && !(last && r.status == ReviewStatus::Attention) {
            return Err(refused(format!(
                "round {}: the review went on past a decided round or stopped early",
                i + 1
            )));
        }
    }
    let last = r.rounds.last().expect("checked non-empty");
    let expected =
        after_round(last.outcome, r.rounds.len() as u32, panel).unwrap_or(ReviewStatus::Attention);
    if r.status != expected {
        return Err(refused(format!(
            "the status {:?} does not follow from the last round",
            r.status
        )));
    }
    if r.candidate_sha256 != candidate_digest(&r.plan_id, &r.candidate) {
        return Err(RecordError::refused("the final candidate's digest does not match"));
    }
    Ok(())
}

/// The schema a review must match.
pub(crate) fn review_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["verdict", "rationale"],
        "properties": {
            "verdict": {"enum": ["approve", "revise", "attention"]},
            "rationale": {"type": "string", "minLength": 1, "maxLength": 2000},
            "findings": {
                "type": "array",
                "maxItems": 50,
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["code", "severity", "summary", "recommendation"],
                    "properties": {
                        "code": {"type": "string", "minLength": 1, "maxLength": 64},
                        "severity": {"enum": ["blocking", "advisory"]},
                        "summary": {"type": "string", "minLength": 1, "maxLength": 2000},
                        "recommendation": {"type": "string", "maxLength": 2000}
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goal::plan::PlanDecision;

    fn review(verdict: ReviewVerdict, blocking: bool) -> Review {
        let findings = blocking
            .then(|| ReviewFinding {
                code: "dep".into(),
                severity: Severity::Blocking,
                summary: "s".into(),
                recommendation: "r".into(),
            })
            .into_iter()
            .collect();
        Review { verdict, rationale: "r".into(), findings }
    }

    #[test]
    fn attention_beats_revise_beats_approve_and_blocking_findings_revise() {
        use ReviewVerdict::*;
        assert_eq!(
            round_outcome(&[review(Approve, false), review(Approve, false)]),
            RoundOutcome::Approved
        );
        assert_eq!(round_outcome(&[review(Approve, true)]), RoundOutcome::Revise);
        assert_eq!(
            round_outcome(&[review(Approve, false), review(Revise, false)]),
            RoundOutcome::Revise
        );
        assert_eq!(
            round_outcome(&[review(Revise, true), review(Attention, false)]),
            RoundOutcome::Attention
        );
    }

    #[test]
    fn revisions_are_bounded_and_receipts_are_checked_against_the_panel() {
        let panel = ReviewPanel { reviewer_specialists: vec!["a".into()], max_revision_rounds: 1 };
        assert_eq!(after_round(RoundOutcome::Revise, 1, &panel), None);
        assert_eq!(
            after_round(RoundOutcome::Revise, 2, &panel),
            Some(ReviewStatus::RevisionExhausted)
        );
        let candidate = Proposal {
            decision: PlanDecision::Attention,
            rationale: "x".into(),
            work: vec![],
            milestone: None,
        };
        let round = |v, digest: &str| Round {
            candidate_sha256: digest.into(),
            reviewers: vec!["a".into()],
            reviews: vec![review(v, false)],
            outcome: round_outcome(&[review(v, false)]),
        };
        let digest = candidate_digest("p1", &candidate);
        let good = Receipt {
            plan_id: "p1".into(),
            status: ReviewStatus::Passed,
            candidate: candidate.clone(),
            candidate_sha256: digest.clone(),
            rounds: vec![
                round(ReviewVerdict::Revise, "d0"),
                round(ReviewVerdict::Approve, &digest),
            ],
        };
        assert_eq!(check_receipt(&good, &panel), Ok(()));
        let mut lying = good.clone();
        lying.rounds[0].outcome = RoundOutcome::Approved;
        assert!(check_receipt(&lying, &panel).is_err(), "outcomes are recomputed");
        let mut other = good.clone();
        other.rounds[1].reviewers = vec!["b".into()];
        assert!(check_receipt(&other, &panel).is_err(), "the panel is frozen");
        let mut wrong = good;
        wrong.status = ReviewStatus::Attention;
        assert!(check_receipt(&wrong, &panel).is_err());
    }
}
