//! What a person types to move a goal on from where it stands, decided from its projection
//! and its items' projections alone: the plan to approve or reject, the item to review or
//! rule on, the tick to run, and, at a dead end, what is still possible.

use super::projection::{GoalNext, GoalProjection, GoalState, GraphItem};
use crate::ids::Id;
use crate::work::next::next_commands as work_next;
use crate::work::projection::NextAction as WorkNext;

/// The commands for goal `id`, the usual one first; empty while it waits on a process.
pub fn next_commands(id: &Id, p: &GoalProjection, items: &[GraphItem]) -> Vec<String> {
    // The commands of the goal's items that wait for `want`, in graph order.
    let of_items = |want: WorkNext| -> Vec<String> {
        let waiting = items.iter().filter(|i| i.projection.next_action == want);
        waiting.flat_map(|i| work_next(&i.id, &i.projection)).collect()
    };
    match p.next_action {
        GoalNext::WaitForRun => Vec::new(),
        GoalNext::ReviewPlan => match &p.pending_plan_id {
            Some(plan) => vec![
                format!("harn supervisor plan approve {id} {plan}"),
                format!("harn supervisor plan reject {id} {plan} --reason WHY"),
                format!("harn supervisor plan show {id} {plan}"),
            ],
            None => vec![format!("harn supervisor plan list {id}")],
        },
        GoalNext::RetryPlan => match &p.attention_plan_id {
            Some(plan) => vec![
                format!("harn supervisor plan show {id} {plan}"),
                format!("harn supervisor plan retry {id} {plan} --reason GUIDANCE"),
            ],
            None => vec![format!("harn supervisor plan list {id}")],
        },
        GoalNext::ResolveApproval => of_items(WorkNext::ResolveApproval),
        GoalNext::Review => of_items(WorkNext::Review),
        GoalNext::Retry => of_items(WorkNext::Retry),
        // Resuming an approved run is not automated: the person resumes it.
        GoalNext::Run if p.state == GoalState::AwaitingAttention => of_items(WorkNext::Resume),
        GoalNext::Run | GoalNext::Replan | GoalNext::PlanInitial | GoalNext::PlanMilestone => {
            vec![format!("harn supervisor tick {id}"), format!("harn supervisor run {id}")]
        }
        GoalNext::None => match p.state {
            GoalState::Succeeded => Vec::new(),
            // A planner asked for a person and no replan is left: what it asked is in its plan.
            GoalState::AwaitingAttention if p.attention_plan_id.is_some() => {
                let plan = p.attention_plan_id.as_deref().unwrap_or_default();
                vec![format!("harn supervisor plan show {id} {plan}")]
            }
            // A ceiling reached: its limits are frozen, so going on is a new goal.
            GoalState::BudgetExhausted => {
                let root = p.root_work_id.as_ref().map_or("ROOT_ITEM".into(), Id::to_string);
                vec![format!(
                    "harn supervisor create {root} --team TEAM (a new goal, with limits of its own)"
                )]
            }
            // Stopped work says itself what is possible (reopen, a new item).
            _ => {
                let stopped = items.iter().filter(|i| {
                    i.projection.next_action == WorkNext::None
                        && i.projection.state != crate::work::projection::WorkState::Succeeded
                });
                let mut cmds: Vec<String> = Vec::new();
                for cmd in stopped.flat_map(|i| work_next(&i.id, &i.projection)) {
                    if !cmds.contains(&cmd) {
                        cmds.push(cmd);
                    }
                }
                // A planning step that stopped for a person (a host precondition, a policy
                // that stops the planner): asked for again once they have seen to it.
                let failed = p.latest_plan_status == Some(super::plan::PlanStatus::Failed);
                if cmds.is_empty() && failed && p.replans_used > 0 {
                    let plan = super::plan::plan_id(id, p.replans_used);
                    cmds.push(format!("harn supervisor plan show {id} {plan}"));
                    cmds.push(format!("harn supervisor plan retry {id} {plan} --reason GUIDANCE"));
                }
                cmds
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::projection::{Projection, WorkState};

    fn goal(state: GoalState, next_action: GoalNext) -> GoalProjection {
        GoalProjection {
            state,
            reason: String::new(),
            next_action,
            work_ids: Vec::new(),
            ready_work: Vec::new(),
            resumable_work: Vec::new(),
            retryable_work: Vec::new(),
            attention_work: Vec::new(),
            decision_blocked_work: Vec::new(),
            attempts_used: 0,
            charged_attempts: 0,
            attempts_remaining: 3,
            root_work_id: Some(Id::new("root").unwrap()),
            replans_used: 0,
            replans_remaining: 0,
            latest_plan_status: None,
            pending_plan_id: None,
            attention_plan_id: None,
            replan_consumption: None,
        }
    }

    fn item(id: &str, state: WorkState, next_action: WorkNext) -> GraphItem {
        let projection = Projection {
            state,
            reason: String::new(),
            next_action,
            unresolved_dependencies: Vec::new(),
            attempts_used: 1,
            charged_attempts: 1,
            attempts_remaining: 1,
            latest_run_id: None,
            approval_id: Some("ap-1".into()),
            blocked_on_decision: None,
            open_findings: Vec::new(),
            accepted_seq: None,
            landed: false,
        };
        GraphItem { id: Id::new(id).unwrap(), projection }
    }

    #[test]
    fn each_waiting_state_names_its_command() {
        let g = Id::new("g").unwrap();
        let mut plan = goal(GoalState::AwaitingAttention, GoalNext::ReviewPlan);
        plan.pending_plan_id = Some("plan-0001-ab".into());
        let cmds = next_commands(&g, &plan, &[]);
        assert_eq!(cmds[0], "harn supervisor plan approve g plan-0001-ab");
        assert!(cmds[1].starts_with("harn supervisor plan reject g plan-0001-ab --reason"));
        let items = [
            item("a", WorkState::Succeeded, WorkNext::None),
            item("b", WorkState::InReview, WorkNext::Review),
            item("c", WorkState::AwaitingApproval, WorkNext::ResolveApproval),
        ];
        let review = goal(GoalState::AwaitingAttention, GoalNext::Review);
        assert_eq!(next_commands(&g, &review, &items)[0], "harn work accept b");
        let asks = goal(GoalState::AwaitingAttention, GoalNext::ResolveApproval);
        assert_eq!(next_commands(&g, &asks, &items)[0], "harn approval approve ap-1");
        let ready = goal(GoalState::Ready, GoalNext::Run);
        assert_eq!(next_commands(&g, &ready, &items)[0], "harn supervisor tick g");
        let busy = goal(GoalState::Running, GoalNext::WaitForRun);
        assert!(next_commands(&g, &busy, &items).is_empty());
        let spent = goal(GoalState::BudgetExhausted, GoalNext::None);
        assert!(next_commands(&g, &spent, &items)[0].contains("a new goal"));
        let done = goal(GoalState::Succeeded, GoalNext::None);
        assert!(next_commands(&g, &done, &items).is_empty());
        let stuck = goal(GoalState::Blocked, GoalNext::None);
        let cancelled = [item("d", WorkState::Cancelled, WorkNext::None)];
        assert_eq!(next_commands(&g, &stuck, &cancelled), ["harn work reopen d --reason WHY"]);
    }
}
