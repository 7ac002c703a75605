//! A goal's state and next action: a pure function of its intent and the projections of the
//! work items in its active graph (the dependency closure of its root, prerequisites first),
//! decided by one ordered list of rules, first match wins.

use super::intent::GoalIntent;
use crate::ids::Id;
use crate::work::{NextAction as WorkNext, WorkState};
use serde::{Deserialize, Serialize};

/// Where a goal stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalState {
    /// The supervisor has a legal progress action.
    Ready,
    /// Another process is ticking it, or one of its items is running elsewhere.
    Running,
    /// A person must act (approve, review, run).
    AwaitingAttention,
    /// Nothing can go on without an intervention.
    Blocked,
    /// A ceiling is reached.
    BudgetExhausted,
    /// Its root is accepted.
    Succeeded,
}

/// What should happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalNext {
    /// Tick it: there is work to dispatch or accept.
    Run,
    /// Wait for the process running it (or its work).
    WaitForRun,
    /// Rule on a pending approval.
    ResolveApproval,
    /// Review a proof and accept or reopen.
    Review,
    /// Retry blocked work explicitly.
    Retry,
    /// Ask the planner for a new plan (a tick does it).
    Replan,
    /// Ask the planner for a mission's first plan.
    PlanInitial,
    /// Ask the planner for a mission's next milestone, or its completion.
    PlanMilestone,
    /// Approve or reject the pending plan.
    ReviewPlan,
    /// Ask for a new plan after the planner asked for attention.
    RetryPlan,
    /// Nothing.
    None,
}

pub use crate::work::projection::GraphItem;

/// A goal's projection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalProjection {
    /// The state.
    pub state: GoalState,
    /// Why, in words.
    pub reason: String,
    /// The next action.
    pub next_action: GoalNext,
    /// The active graph, prerequisites first, the root last.
    pub work_ids: Vec<Id>,
    /// Items ready to run.
    pub ready_work: Vec<Id>,
    /// Items whose approval is ruled on, to resume.
    pub resumable_work: Vec<Id>,
    /// Blocked items that may be retried.
    pub retryable_work: Vec<Id>,
    /// Items that need a person.
    pub attention_work: Vec<Id>,
    /// Items blocked on a decision, with the decision's id.
    pub decision_blocked_work: Vec<(Id, String)>,
    /// Attempts over every governed item.
    pub attempts_used: u32,
    /// Charged attempts over every governed item.
    pub charged_attempts: u32,
    /// Charged attempts left under `max_total_attempts`.
    pub attempts_remaining: u32,
    /// The active root (moved by applied plans); none before a mission's first plan.
    pub root_work_id: Option<Id>,
    /// Plans asked for, all of them.
    pub replans_used: u32,
    /// Charged plans left under `max_replans` (0 without replanning).
    pub replans_remaining: u32,
    /// The latest plan's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_plan_status: Option<super::plan::PlanStatus>,
    /// The plan awaiting a decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_plan_id: Option<String>,
    /// The plan whose attention still applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_plan_id: Option<String>,
    /// How charged replans were spent without moving the goal on: shown only when some
    /// planner made no proposal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replan_consumption: Option<ReplanConsumption>,
}

/// Charged replans that moved nothing, by why (read-time attribution).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplanConsumption {
    /// Plans whose review panel did not pass them.
    pub reviewer_rejection: u32,
    /// Plans whose planner asked for a person, failed or was cut short without a proposal.
    pub planner_no_proposal: u32,
}

/// How an item may be dispatched by a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DispatchAction {
    /// A first attempt (charged).
    Run,
    /// Resume a parked attempt (free).
    Resume,
    /// Retry a blocked item (charged).
    Retry,
}

/// Classifies the active graph's items for the goal's automation.
struct Classes<'a> {
    ready: Vec<&'a GraphItem>,
    resumable: Vec<&'a GraphItem>,
    retryable: Vec<&'a GraphItem>,
    pending_approval: Vec<&'a GraphItem>,
    /// In review; `acceptable` ones have no open finding.
    reviews: Vec<&'a GraphItem>,
    acceptable: Vec<&'a GraphItem>,
    cancelled: Vec<&'a GraphItem>,
    stopped: Vec<&'a GraphItem>,
    running: Vec<&'a GraphItem>,
}

fn classify(items: &[GraphItem]) -> Classes<'_> {
    let mut c = Classes {
        ready: vec![],
        resumable: vec![],
        retryable: vec![],
        pending_approval: vec![],
        reviews: vec![],
        acceptable: vec![],
        cancelled: vec![],
        stopped: vec![],
        running: vec![],
    };
    for item in items {
        let p = &item.projection;
        match (p.state, p.next_action) {
            (WorkState::Ready, _) => c.ready.push(item),
            (WorkState::AwaitingApproval, WorkNext::Resume) => c.resumable.push(item),
            (WorkState::AwaitingApproval, _) => c.pending_approval.push(item),
            (WorkState::Blocked, WorkNext::Retry) => c.retryable.push(item),
            (WorkState::Blocked, _) => c.stopped.push(item),
            (WorkState::InReview, _) => {
                c.reviews.push(item);
                if p.open_findings.is_empty() {
                    c.acceptable.push(item);
                }
            }
            (WorkState::Cancelled, _) => c.cancelled.push(item),
            (WorkState::Running, _) => c.running.push(item),
            (WorkState::Waiting | WorkState::Succeeded, _) => {}
        }
    }
    c
}

fn ids(items: &[&GraphItem]) -> Vec<Id> {
    items.iter().map(|i| i.id.clone()).collect()
}

fn list(items: &[&GraphItem]) -> String {
    let names: Vec<&str> = items.iter().take(3).map(|i| i.id.as_str()).collect();
    let more = items.len().saturating_sub(3);
    if more > 0 {
        format!("{} +{more} more", names.join(", "))
    } else {
        names.join(", ")
    }
}

/// Projects a goal from its intent and its active graph's items (prerequisites first, the
/// root last). `lease_held_elsewhere` is true while another process ticks the goal.
pub fn project_goal(
    intent: &GoalIntent,
    items: &[GraphItem],
    plans: &[super::plan::PlanView],
    lease_held_elsewhere: bool,
) -> GoalProjection {
    project_governed(intent, items, plans, (0, 0), lease_held_elsewhere)
}

/// [`project_goal`] for a goal whose earlier generations left governed work outside the
/// active graph: `outside` is that work's (attempts used, charged attempts), which keep
/// counting against the goal's ceiling; replanning never resets them.
pub(crate) fn project_governed(
    intent: &GoalIntent,
    items: &[GraphItem],
    plans: &[super::plan::PlanView],
    outside: (u32, u32),
    lease_held_elsewhere: bool,
) -> GoalProjection {
    let auto = intent.automation;
    let c = classify(items);
    let attempts_used = outside.0 + items.iter().map(|i| i.projection.attempts_used).sum::<u32>();
    let charged: u32 = outside.1 + items.iter().map(|i| i.projection.charged_attempts).sum::<u32>();
    let remaining = intent.limits.max_total_attempts.saturating_sub(charged);
    let mut attention: Vec<&GraphItem> = c.pending_approval.clone();
    if !auto.accept_passing_proof {
        attention.extend(&c.reviews);
    } else {
        // An item reopened with findings needs a person's dispositions, never automation.
        attention.extend(c.reviews.iter().filter(|r| !r.projection.open_findings.is_empty()));
    }
    if !auto.resume_approved {
        attention.extend(&c.resumable);
    }
    if !auto.retry_blocked {
        attention.extend(&c.retryable);
    }
    attention.extend(&c.cancelled);
    attention.extend(&c.stopped);
    let resumable_dispatchable = if auto.resume_approved { c.resumable.clone() } else { vec![] };
    let mut attempt_dispatchable = c.ready.clone();
    if auto.retry_blocked {
        attempt_dispatchable.extend(&c.retryable);
    }
    let root = items.last();
    let planning = planning(intent, items, plans);
    let (state, next_action, reason) = decide(&GoalFacts {
        planning: &planning,
        lease_held_elsewhere,
        root_succeeded: root.is_some_and(|r| r.projection.state == WorkState::Succeeded),
        work_open: items.iter().any(|i| i.projection.state != WorkState::Succeeded),
        root_id: root.map(|r| r.id.as_str()).unwrap_or(""),
        c: &c,
        auto,
        charged,
        max_total: intent.limits.max_total_attempts,
        resumable_dispatchable: &resumable_dispatchable,
        attempt_dispatchable: &attempt_dispatchable,
    });
    GoalProjection {
        state,
        reason,
        next_action,
        work_ids: items.iter().map(|i| i.id.clone()).collect(),
        ready_work: ids(&c.ready),
        resumable_work: ids(&c.resumable),
        retryable_work: ids(&c.retryable),
        attention_work: ids(&attention),
        decision_blocked_work: items
            .iter()
            .filter_map(|i| i.projection.blocked_on_decision.clone().map(|d| (i.id.clone(), d)))
            .collect(),
        attempts_used,
        charged_attempts: charged,
        attempts_remaining: remaining,
        root_work_id: root.map(|r| r.id.clone()),
        replans_used: plans.len() as u32,
        replans_remaining: planning.remaining,
        latest_plan_status: plans.last().map(|p| p.status),
        pending_plan_id: planning.pending.clone(),
        attention_plan_id: planning.attention.clone(),
        replan_consumption: (planning.consumption.planner_no_proposal > 0)
            .then_some(planning.consumption),
    }
}

/// What the goal's plans say, for the decision procedure.
struct Planning {
    enabled: bool,
    mission: bool,
    /// The mission's completion was recorded.
    completed: bool,
    /// A person reopened the mission's completion: its reopened work runs first.
    reopened: bool,
    remaining: u32,
    pending: Option<String>,
    attention: Option<String>,
    /// A latest plan whose failure stops the goal, with why.
    stopped: Option<String>,
    /// How charged plans were spent without a proposal that moved the goal.
    consumption: ReplanConsumption,
}

impl Planning {
    /// Why no replan is left, naming the replans that ended without a proposal.
    fn used_up(&self, what: &str) -> String {
        match self.consumption.planner_no_proposal {
            0 => format!("{what} and every replan is used"),
            1 => format!("{what} and every replan is used (1 ended without a proposal)"),
            n => format!("{what} and every replan is used ({n} ended without a proposal)"),
        }
    }
}

/// Consecutive uncharged planner failures after which the goal stops.
pub(crate) const UNCHARGED_PLAN_FAILURES_MAX: usize = 3;

fn planning(intent: &GoalIntent, items: &[GraphItem], plans: &[super::plan::PlanView]) -> Planning {
    use super::plan::PlanStatus;
    use crate::work::FailureClass;
    let max = intent.replanning.as_ref().map_or(0, |r| r.max_replans);
    let charged = plans.iter().filter(|p| p.charged()).count() as u32;
    let mut out = Planning {
        enabled: intent.replanning.is_some(),
        mission: intent.mission.is_some(),
        completed: plans.iter().any(|p| p.status == PlanStatus::Completed),
        reopened: plans.last().is_some_and(|p| p.status == PlanStatus::Reopened),
        remaining: max.saturating_sub(charged),
        pending: None,
        attention: None,
        stopped: None,
        consumption: ReplanConsumption { reviewer_rejection: 0, planner_no_proposal: 0 },
    };
    for p in plans {
        match p.consumption() {
            Some(super::plan::Consumption::ReviewerRejection) => {
                out.consumption.reviewer_rejection += 1
            }
            Some(super::plan::Consumption::PlannerNoProposal) => {
                out.consumption.planner_no_proposal += 1
            }
            None => {}
        }
    }
    let Some(latest) = plans.last() else { return out };
    let id = latest.request.plan_id.clone();
    match (latest.status, latest.class) {
        (PlanStatus::Proposed, _) => out.pending = Some(id),
        (PlanStatus::Failed, Some(FailureClass::Environment)) => {
            out.stopped =
                Some(format!("plan {id} found a host precondition missing: {}", latest.reason));
        }
        (PlanStatus::Failed, Some(FailureClass::Decision)) => {
            out.stopped = Some(format!("plan {id} needs a person to rule: {}", latest.reason));
        }
        (PlanStatus::Failed, Some(FailureClass::Upstream)) => {
            let trailing = plans.iter().rev().take_while(|p| !p.charged()).count();
            if trailing >= UNCHARGED_PLAN_FAILURES_MAX {
                out.stopped = Some(format!(
                    "the planner's outside service refused {trailing} times in a row"
                ));
            }
        }
        (PlanStatus::Attention, _) => {
            // An attention applies while nothing durable changed since it was asked for.
            let fingerprint = super::fingerprint::progress_fingerprint(items);
            let root = items.last().map(|i| &i.id);
            if latest.request.trigger_fingerprint == fingerprint
                && root == latest.request.prior_root_work_id.as_ref()
            {
                out.attention = Some(id);
            }
        }
        _ => {}
    }
    out
}

struct GoalFacts<'a> {
    planning: &'a Planning,
    lease_held_elsewhere: bool,
    root_succeeded: bool,
    /// Some item of the active graph is not accepted.
    work_open: bool,
    root_id: &'a str,
    c: &'a Classes<'a>,
    auto: super::intent::Automation,
    charged: u32,
    max_total: u32,
    resumable_dispatchable: &'a [&'a GraphItem],
    attempt_dispatchable: &'a [&'a GraphItem],
}

/// The ordered rules, first match wins.
fn decide(d: &GoalFacts<'_>) -> (GoalState, GoalNext, String) {
    use GoalNext as N;
    use GoalState as S;
    let c = d.c;
    let exhausted = d.charged >= d.max_total;
    if d.lease_held_elsewhere {
        return (S::Running, N::WaitForRun, "another process is ticking this goal".into());
    }
    let plan = d.planning;
    if plan.completed {
        return (S::Succeeded, N::None, "the mission is complete".into());
    }
    if let Some(pending) = &plan.pending {
        return (
            S::AwaitingAttention,
            N::ReviewPlan,
            format!("plan {pending} awaits approval or rejection"),
        );
    }
    if let Some(why) = &plan.stopped {
        return (S::Blocked, N::None, why.clone());
    }
    if let Some(attention) = &plan.attention {
        let next = if plan.remaining > 0 { N::RetryPlan } else { N::None };
        return (S::AwaitingAttention, next, format!("plan {attention} asks for a person"));
    }
    if d.root_id.is_empty() {
        // Only a mission has no root: before its first plan.
        return if plan.mission && plan.remaining > 0 {
            (S::Ready, N::PlanInitial, "the mission needs its first plan".into())
        } else if plan.mission {
            (S::BudgetExhausted, N::None, plan.used_up("the mission has no plan"))
        } else {
            (S::Blocked, N::None, "the goal has no root".into())
        };
    }
    // A reopened mission runs its reopened work before any milestone is reassessed, even
    // while its root stays accepted (a prerequisite was reopened).
    let root_done = d.root_succeeded && !(plan.reopened && d.work_open);
    if root_done && plan.mission {
        return if plan.remaining > 0 {
            let why = format!(
                "milestone root {} is accepted: the next milestone, or completion",
                d.root_id
            );
            (S::Ready, N::PlanMilestone, why)
        } else {
            (S::BudgetExhausted, N::None, plan.used_up("a milestone is accepted"))
        };
    }
    if root_done {
        return (S::Succeeded, N::None, format!("the root {} is accepted", d.root_id));
    }
    if !c.running.is_empty() {
        // Work running elsewhere (a manual `harn work run`): wait, never dispatch past it.
        return (S::Running, N::WaitForRun, format!("{} running elsewhere", list(&c.running)));
    }
    if d.auto.accept_passing_proof && !c.acceptable.is_empty() {
        return (S::Ready, N::Run, format!("{} passed: accept", list(&c.acceptable)));
    }
    if !d.resumable_dispatchable.is_empty() {
        return (
            S::Ready,
            N::Run,
            format!("{}: approval ruled on; resume", list(d.resumable_dispatchable)),
        );
    }
    if exhausted && !d.attempt_dispatchable.is_empty() {
        let why = format!("{} charged attempts of {} are used up", d.charged, d.max_total);
        return (S::BudgetExhausted, N::None, why);
    }
    if !d.attempt_dispatchable.is_empty() {
        return (S::Ready, N::Run, format!("{} can run", list(d.attempt_dispatchable)));
    }
    if !c.pending_approval.is_empty() {
        let why = format!("{} waits on an approval", list(&c.pending_approval));
        return (S::AwaitingAttention, N::ResolveApproval, why);
    }
    if !c.reviews.is_empty() {
        return (S::AwaitingAttention, N::Review, format!("{} is in review", list(&c.reviews)));
    }
    if !c.resumable.is_empty() {
        let why = format!("{} can resume; resuming is not automated", list(&c.resumable));
        return (S::AwaitingAttention, N::Run, why);
    }
    if !c.retryable.is_empty() {
        let why = format!("{} is blocked; retrying is not automated", list(&c.retryable));
        return (S::Blocked, N::Retry, why);
    }
    if exhausted && c.cancelled.is_empty() {
        let why = format!("{} charged attempts of {} are used up", d.charged, d.max_total);
        return (S::BudgetExhausted, N::None, why);
    }
    if plan.enabled && c.cancelled.is_empty() {
        return if plan.remaining > 0 {
            (S::Ready, N::Replan, "the graph is stuck; ask the planner for a new plan".into())
        } else {
            (S::BudgetExhausted, N::None, plan.used_up("the graph is stuck"))
        };
    }
    let decided: Vec<&GraphItem> =
        c.stopped.iter().copied().filter(|i| i.projection.blocked_on_decision.is_some()).collect();
    let why = if !decided.is_empty() {
        format!("{} waits on a decision", list(&decided))
    } else if !c.stopped.is_empty() || !c.cancelled.is_empty() {
        let n = c.stopped.len() + c.cancelled.len();
        format!("{n} {} intervention", if n == 1 { "needs" } else { "need" })
    } else {
        "no legal progress action".into()
    };
    (S::Blocked, N::None, why)
}

/// What one tick may dispatch from a projection, in graph order: ready items (charged),
/// approved resumes (free) and, when automated, retries (charged); a charged candidate passes
/// only while attempts remain; at most `max_parallel_work`. Nothing unless the goal is
/// `ready/run`.
pub fn candidates(
    intent: &GoalIntent,
    items: &[GraphItem],
    p: &GoalProjection,
) -> Vec<(Id, DispatchAction)> {
    if (p.state, p.next_action) != (GoalState::Ready, GoalNext::Run) {
        return Vec::new();
    }
    let auto = intent.automation;
    let mut budget = p.attempts_remaining;
    let mut out = Vec::new();
    for item in items {
        let q = &item.projection;
        let action = match (q.state, q.next_action) {
            (WorkState::Ready, _) => DispatchAction::Run,
            (WorkState::AwaitingApproval, WorkNext::Resume) if auto.resume_approved => {
                DispatchAction::Resume
            }
            (WorkState::Blocked, WorkNext::Retry) if auto.retry_blocked => DispatchAction::Retry,
            _ => continue,
        };
        if action != DispatchAction::Resume {
            if budget == 0 {
                continue;
            }
            budget -= 1;
        }
        out.push((item.id.clone(), action));
        if out.len() == intent.limits.max_parallel_work as usize {
            break;
        }
    }
    out
}

/// Items a tick accepts first: in review with no open finding, only with
/// `accept_passing_proof`.
pub fn acceptances(intent: &GoalIntent, items: &[GraphItem]) -> Vec<Id> {
    if !intent.automation.accept_passing_proof {
        return Vec::new();
    }
    items
        .iter()
        .filter(|i| {
            i.projection.state == WorkState::InReview && i.projection.open_findings.is_empty()
        })
        .map(|i| i.id.clone())
        .collect()
}
