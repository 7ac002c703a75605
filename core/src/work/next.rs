//! What a person types to move a work item on from where it stands, decided from its
//! projection alone: the command that resolves a state waiting for a person, the usual one
//! first, and, at a dead end, what is still possible.

use super::projection::{NextAction, Projection, WorkState};
use crate::ids::Id;

/// The commands for item `id` in projection `p`, the usual one first; empty while the item
/// waits on something other than a person (a running attempt).
pub fn next_commands(id: &Id, p: &Projection) -> Vec<String> {
    match p.next_action {
        NextAction::Review => {
            let mut accept = format!("harn work accept {id}");
            for f in &p.open_findings {
                accept.push_str(&format!(" --dispose {}=fixed", f.id));
            }
            vec![accept, format!("harn work reopen {id} --reason WHY")]
        }
        NextAction::Run => vec![format!("harn work run {id} --harness HARNESS")],
        NextAction::Retry => vec![format!("harn work retry {id} --harness HARNESS")],
        NextAction::ResolveApproval => match &p.approval_id {
            Some(a) => vec![format!("harn approval approve {a}"), format!("harn approval deny {a}")],
            None => vec!["harn approval list".into()],
        },
        NextAction::Resume => vec![format!("harn work run {id}")],
        NextAction::WaitForDependencies => {
            p.unresolved_dependencies.iter().map(|d| format!("harn work show {d}")).collect()
        }
        NextAction::WaitForRun => Vec::new(),
        NextAction::None => match p.state {
            WorkState::Succeeded | WorkState::Cancelled => {
                vec![format!("harn work reopen {id} --reason WHY")]
            }
            // A dead end: its attempts are used up, or a ruling stopped it.
            _ if p.attempts_remaining == 0 => vec![
                "harn work create TITLE WORKFLOW --objective … (a new item, with attempts of its own)"
                    .into(),
                "harn supervisor create ROOT_ITEM --team TEAM --replanning POLICY.json (a goal that may replan)"
                    .into(),
            ],
            // Blocked with attempts left (a missing program, an outside refusal, a full
            // disk): a retry runs it again once the cause is fixed, as its reason says.
            WorkState::Blocked if p.blocked_on_decision.is_none() => vec![
                format!("harn work retry {id} --harness HARNESS"),
                format!("harn work reopen {id} --reason WHY"),
            ],
            _ => vec![format!("harn work reopen {id} --reason WHY")],
        },
    }
}

/// A refusal `why` of a verb on item `id`, followed by what may be typed instead.
pub(crate) fn with_next(id: &Id, p: &Projection, why: String) -> String {
    let next = next_commands(id, p);
    match next.split_first() {
        None => why,
        Some((first, rest)) => {
            let mut said = format!("{why}\n  next: {first}");
            for other in rest {
                said.push_str(&format!("\n  or:   {other}"));
            }
            said
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::events::Finding;

    fn projection(state: WorkState, next_action: NextAction) -> Projection {
        Projection {
            state,
            reason: String::new(),
            next_action,
            unresolved_dependencies: Vec::new(),
            attempts_used: 0,
            charged_attempts: 0,
            attempts_remaining: 2,
            latest_run_id: None,
            approval_id: None,
            blocked_on_decision: None,
            open_findings: Vec::new(),
            accepted_seq: None,
            landed: false,
        }
    }

    #[test]
    fn each_waiting_state_names_its_command() {
        let id = Id::new("parser").unwrap();
        let mut review = projection(WorkState::InReview, NextAction::Review);
        review.open_findings = vec![Finding { id: "f1".into(), statement: "x".into() }];
        let cmds = next_commands(&id, &review);
        assert_eq!(cmds[0], "harn work accept parser --dispose f1=fixed");
        assert!(cmds[1].starts_with("harn work reopen parser"));
        let mut asks = projection(WorkState::AwaitingApproval, NextAction::ResolveApproval);
        asks.approval_id = Some("ap-1".into());
        assert_eq!(next_commands(&id, &asks)[0], "harn approval approve ap-1");
        assert!(
            next_commands(&id, &projection(WorkState::Running, NextAction::WaitForRun)).is_empty()
        );
        let mut spent = projection(WorkState::Blocked, NextAction::None);
        spent.attempts_remaining = 0;
        assert!(
            next_commands(&id, &spent)[0].contains("a new item"),
            "a dead end says what is possible"
        );
        // Blocked with attempts left: a retry, as the reason says ("fix it, then retry").
        let blocked = projection(WorkState::Blocked, NextAction::None);
        assert_eq!(next_commands(&id, &blocked)[0], "harn work retry parser --harness HARNESS");
        let refused = with_next(&id, &spent, "cannot start".into());
        assert!(refused.starts_with("cannot start\n  next: harn work create"), "{refused}");
        assert!(refused.contains("\n  or:   harn supervisor create"), "{refused}");
        assert_eq!(
            with_next(&id, &projection(WorkState::Running, NextAction::WaitForRun), "x".into()),
            "x"
        );
    }
}
