//! A plan's records and its status from its event history: what was asked, reviewed,
//! proposed, approved, applied or refused.

use super::proposal::*;
use crate::ids::Id;

use serde::{Deserialize, Serialize};

/// A plan's history (`plans/<id>/events.jsonl` bodies).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event")]
pub enum PlanEvent {
    /// The review panel approved the candidate (before it is proposed).
    #[serde(rename = "plan.reviewed")]
    Reviewed,
    /// The planner's proposal was written and awaits a decision.
    #[serde(rename = "plan.proposed")]
    Proposed,
    /// The proposal was applied: its work exists and the root moved.
    #[serde(rename = "plan.applied")]
    Applied {
        /// The new active root.
        root_work_id: Id,
        /// Every work item the plan created, in order.
        work_ids: Vec<Id>,
        /// The mission milestone it delivers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        milestone: Option<u32>,
    },
    /// A person rejected the proposal.
    #[serde(rename = "plan.rejected")]
    Rejected,
    /// The planner asked for a person.
    #[serde(rename = "plan.attention")]
    Attention,
    /// A person asked for a new plan after an attention.
    #[serde(rename = "plan.retry_requested")]
    RetryRequested,
    /// The mission is complete (its success).
    #[serde(rename = "plan.completed")]
    Completed,
    /// A person reopened the completed mission (beside its completion, which stays).
    #[serde(rename = "plan.reopened")]
    Reopened,
    /// The planner failed (no usable proposal).
    #[serde(rename = "plan.failed")]
    Failed {
        /// An uncharged class, when the failure has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<crate::work::FailureClass>,
    },
}

/// A plan event with who and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRecord {
    /// What happened.
    #[serde(flatten)]
    pub event: PlanEvent,
    /// Who.
    pub actor: String,
    /// Why (never empty).
    pub reason: String,
}

/// `request.json`: why a plan was asked for, against which graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The plan (`p1`, `p2`, …).
    pub plan_id: String,
    /// Its position among the goal's plans.
    pub sequence: u32,
    /// The active root when it was asked for (none before a mission's first plan).
    pub prior_root_work_id: Option<Id>,
    /// The goal's progress fingerprint then; an attention plan applies while it holds.
    pub trigger_fingerprint: String,
    /// Why it was asked for.
    #[serde(default)]
    pub trigger: PlanTrigger,
    /// When.
    pub created_at: crate::time::WallTime,
}

/// Where a plan stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// Asked for, no proposal yet (its planner was cut short).
    Interrupted,
    /// A proposal awaits a decision.
    Proposed,
    /// Applied.
    Applied,
    /// The mission it ends is complete.
    Completed,
    /// Rejected by a person.
    Rejected,
    /// The planner asked for a person.
    Attention,
    /// A person asked for a new plan.
    RetryRequested,
    /// The planner failed.
    Failed,
    /// It completed the mission, which a person reopened since.
    Reopened,
}

/// A plan's status from its history (first match wins): completed once completed (reopened
/// while a reopening follows the last completion); applied once applied; otherwise its
/// last rejection, attention, retry request or failure; otherwise proposed once proposed;
/// otherwise interrupted.
pub(crate) fn plan_status(events: &[PlanRecord]) -> PlanStatus {
    let completed = events.iter().rposition(|e| e.event == PlanEvent::Completed);
    let reopened = events.iter().rposition(|e| e.event == PlanEvent::Reopened);
    match (completed, reopened) {
        (Some(c), Some(r)) if r > c => return PlanStatus::Reopened,
        (Some(_), _) => return PlanStatus::Completed,
        _ => {}
    }
    if events.iter().any(|e| matches!(e.event, PlanEvent::Applied { .. })) {
        return PlanStatus::Applied;
    }
    match events.last().map(|e| &e.event) {
        Some(PlanEvent::Rejected) => PlanStatus::Rejected,
        Some(PlanEvent::Attention) => PlanStatus::Attention,
        Some(PlanEvent::RetryRequested) => PlanStatus::RetryRequested,
        Some(PlanEvent::Failed { .. }) => PlanStatus::Failed,
        Some(PlanEvent::Proposed) => PlanStatus::Proposed,
        _ => PlanStatus::Interrupted,
    }
}

/// A plan as the goal sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanView {
    /// Its request.
    pub request: PlanRequest,
    /// Its status.
    pub status: PlanStatus,
    /// For a failed plan, its class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<crate::work::FailureClass>,
    /// For an applied plan, the root it moved to and the work it created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<(Id, Vec<Id>)>,
    /// For an applied mission plan, its milestone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub milestone: Option<u32>,
    /// The reason of its last event.
    pub reason: String,
    /// Where its review ended, when its receipt (`review.json`) was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<crate::goal::plan::review::ReviewStatus>,
}

impl PlanView {
    /// A plan from its request and history.
    pub fn new(request: PlanRequest, events: &[PlanRecord]) -> PlanView {
        let status = plan_status(events);
        let class = events.iter().rev().find_map(|e| match &e.event {
            PlanEvent::Failed { class } => *class,
            _ => None,
        });
        let applied = events.iter().find_map(|e| match &e.event {
            PlanEvent::Applied { root_work_id, work_ids, .. } => {
                Some((root_work_id.clone(), work_ids.clone()))
            }
            _ => None,
        });
        let milestone = events.iter().find_map(|e| match &e.event {
            PlanEvent::Applied { milestone, .. } => *milestone,
            _ => None,
        });
        let reason = events.last().map(|e| e.reason.clone()).unwrap_or_default();
        PlanView { request, status, class, applied, milestone, reason, review: None }
    }

    /// Why a charged plan consumed its replan without moving the goal on (read-time only):
    /// its review did not pass, or its planner never made a proposal.
    pub(crate) fn consumption(&self) -> Option<Consumption> {
        use crate::goal::plan::review::ReviewStatus;
        if !self.charged() {
            return None;
        }
        match self.review {
            Some(ReviewStatus::Passed) => None,
            Some(_) => Some(Consumption::ReviewerRejection),
            None => matches!(
                self.status,
                PlanStatus::Attention
                    | PlanStatus::Interrupted
                    | PlanStatus::Failed
                    | PlanStatus::RetryRequested
            )
            .then_some(Consumption::PlannerNoProposal),
        }
    }

    /// Whether the plan counts against `max_replans`: every plan except a failure classed as
    /// not the planner's (environment, upstream, decision). One rule, used everywhere.
    pub fn charged(&self) -> bool {
        !(self.status == PlanStatus::Failed && self.class.is_some())
    }
}

/// How a charged plan spent its replan without a proposal that moved the goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Consumption {
    /// Its review panel did not pass it.
    ReviewerRejection,
    /// Its planner asked for a person, failed or was cut short before any proposal.
    PlannerNoProposal,
}

/// The active root: the goal's root, moved by each applied plan in sequence order.
pub(crate) fn active_root(original: Option<&Id>, plans: &[PlanView]) -> Option<Id> {
    plans
        .iter()
        .rev()
        .find_map(|p| p.applied.as_ref().map(|(root, _)| root.clone()))
        .or_else(|| original.cloned())
}

#[cfg(test)]
mod status_tests {
    use super::*;

    fn rec(event: PlanEvent) -> PlanRecord {
        PlanRecord { event, actor: "op".into(), reason: "why".into() }
    }

    #[test]
    fn status_follows_the_history_first_match_wins() {
        let id = |s: &str| Id::new(s).unwrap();
        let applied = PlanEvent::Applied {
            root_work_id: id("p1-r"),
            work_ids: vec![id("p1-r")],
            milestone: None,
        };
        assert_eq!(plan_status(&[]), PlanStatus::Interrupted);
        assert_eq!(plan_status(&[rec(PlanEvent::Proposed)]), PlanStatus::Proposed);
        assert_eq!(
            plan_status(&[rec(PlanEvent::Proposed), rec(PlanEvent::Rejected)]),
            PlanStatus::Rejected
        );
        assert_eq!(
            plan_status(&[
                rec(PlanEvent::Proposed),
                rec(applied.clone()),
                rec(PlanEvent::Rejected)
            ]),
            PlanStatus::Applied
        );
        assert_eq!(
            plan_status(&[rec(PlanEvent::Attention), rec(PlanEvent::RetryRequested)]),
            PlanStatus::RetryRequested
        );
        // A reopening stands while it follows the last completion; a new completion ends it.
        let (done, reopened) = (rec(PlanEvent::Completed), rec(PlanEvent::Reopened));
        assert_eq!(plan_status(&[done.clone(), reopened.clone()]), PlanStatus::Reopened);
        assert_eq!(
            plan_status(&[done.clone(), reopened.clone(), done.clone()]),
            PlanStatus::Completed
        );
        assert_eq!(plan_status(&[reopened, done]), PlanStatus::Completed);
        let upstream = PlanEvent::Failed { class: Some(crate::work::FailureClass::Upstream) };
        let request = PlanRequest {
            plan_id: "p1".into(),
            sequence: 1,
            prior_root_work_id: Some(id("w")),
            trigger_fingerprint: "f".into(),
            trigger: PlanTrigger::Recovery,
            created_at: crate::time::WallTime(0),
        };
        assert!(!PlanView::new(request.clone(), &[rec(upstream)]).charged());
        assert!(PlanView::new(request.clone(), &[rec(PlanEvent::Failed { class: None })]).charged());
        let view = PlanView::new(request.clone(), &[rec(PlanEvent::Proposed), rec(applied)]);
        assert_eq!(active_root(Some(&id("w")), std::slice::from_ref(&view)), Some(id("p1-r")));
        // Attribution: a review that did not pass, a planner that made no proposal; an applied
        // plan and an uncharged failure spent nothing.
        use crate::goal::plan::review::ReviewStatus;
        let with = |events: &[PlanRecord], review| PlanView {
            review,
            ..PlanView::new(request.clone(), events)
        };
        let attention = [rec(PlanEvent::Attention)];
        assert_eq!(
            with(&attention, Some(ReviewStatus::RevisionExhausted)).consumption(),
            Some(Consumption::ReviewerRejection)
        );
        assert_eq!(with(&attention, None).consumption(), Some(Consumption::PlannerNoProposal));
        assert_eq!(with(&[], None).consumption(), Some(Consumption::PlannerNoProposal));
        assert_eq!(view.consumption(), None);
        let upstream =
            [rec(PlanEvent::Failed { class: Some(crate::work::FailureClass::Upstream) })];
        assert_eq!(with(&upstream, None).consumption(), None);
    }
}
