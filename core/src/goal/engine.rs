//! The supervisor's loop, once: read the goal from durable records, accept what automation
//! may accept, dispatch what the core selects, and stop by the rules of [`RunLoop`]. The
//! effects go through a [`GoalHost`]; the binary implements it over real files and
//! processes and the simulator over its faulty world, so both run this loop.

use super::cycle::{by_state, goal_fingerprint, Mode, RunLoop, Stop, StopReason};
use super::intent::GoalIntent;
use super::projection::{
    acceptances, candidates, DispatchAction, GoalNext, GoalProjection, GraphItem,
};
use crate::ids::Id;
use crate::time::WallTime;
use serde::{Deserialize, Serialize};

/// How a dispatched attempt came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    /// It ended with a proof.
    Completed,
    /// It parked on an approval.
    Parked,
    /// It did not start its workflow: nothing recorded, or a proof that says so.
    Failed,
}

impl OutcomeStatus {
    /// How an attempt that ended with a proof came out: completed, unless the proof says
    /// its workflow never started.
    pub(crate) fn of_proof(class: Option<crate::work::FailureClass>) -> OutcomeStatus {
        match class {
            Some(crate::work::FailureClass::NotStarted) => OutcomeStatus::Failed,
            _ => OutcomeStatus::Completed,
        }
    }
}

impl Outcome {
    /// What one dispatched attempt came to, from how it ended, in the one rule `harn
    /// supervisor` and `harn sim goals` both follow: with a proof, completed (failed when the
    /// proof says its workflow never started), with whether it passed and why it failed;
    /// parked, on its approval; anything else (a refusal before anything ran, an error, a host
    /// gone before the proof), failed, saying why.
    pub fn of_attempt<E: std::fmt::Display>(
        work_id: Id,
        action: DispatchAction,
        ended: Result<&crate::work::attempt::AttemptEnded, E>,
    ) -> Outcome {
        use crate::work::attempt::AttemptEnded;
        let mut o = Outcome {
            work_id,
            action,
            status: OutcomeStatus::Failed,
            run_id: None,
            passed: None,
            detail: None,
        };
        match ended {
            Ok(AttemptEnded::Proof(run, proof)) => {
                o.status = OutcomeStatus::of_proof(proof.run.class);
                o.passed = Some(proof.passes());
                o.detail = proof.run.error.clone();
                o.run_id = Some(run.clone());
            }
            Ok(AttemptEnded::Parked(request)) => {
                o.status = OutcomeStatus::Parked;
                o.detail = Some(format!("approval {}", request.approval_id));
                o.run_id = Some(request.run_id.clone());
            }
            Ok(AttemptEnded::Abandoned) => {
                o.detail = Some("its host was gone before the proof".into());
            }
            Ok(AttemptEnded::Unsealed(run, why)) => {
                o.detail = Some(format!("{}: {why}", crate::work::attempt::UNSEALED));
                o.run_id = Some(run.clone());
            }
            Err(why) => o.detail = Some(why.to_string()),
        }
        o
    }
}

/// What one dispatch came to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The work item.
    pub work_id: Id,
    /// How it was dispatched.
    pub action: DispatchAction,
    /// How it came out.
    pub status: OutcomeStatus,
    /// The run, when one started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Id>,
    /// Whether its proof passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
    /// Why it failed or what it parked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What a `tick` or `run` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// `tick` or `run`.
    pub mode: Mode,
    /// Why it stopped.
    pub stop: Stop,
    /// Cycles taken.
    pub cycles: u32,
    /// Attempts dispatched.
    pub dispatches: u32,
    /// Items accepted.
    pub acceptances: u32,
    /// Every dispatch's outcome.
    pub outcomes: Vec<Outcome>,
}

/// A goal as read for one decision.
#[derive(Clone, Debug)]
pub struct GoalView {
    /// The intent.
    pub intent: GoalIntent,
    /// The active graph, prerequisites first.
    pub items: Vec<GraphItem>,
    /// Its plans, in sequence order.
    pub plans: Vec<super::plan::PlanView>,
    /// The projection.
    pub projection: GoalProjection,
    /// Governed work outside the active graph (earlier plans' items, the original root's
    /// graph), whose attempts still count against the goal.
    pub outside: Vec<Id>,
}

/// What the loop needs done. The host holds the goal lease for the whole loop.
pub trait GoalHost {
    /// Why an effect failed (an infrastructure error, never a domain outcome).
    type Error;
    /// Wall time now.
    fn now(&mut self) -> WallTime;
    /// Reconciles the graph's items and reads the goal afresh from durable records.
    fn refresh(&mut self) -> Result<GoalView, Self::Error>;
    /// Accepts the passing proof of an item in review. `Ok(Err(why))` is a refusal (the item
    /// changed since it was read, by a person or another process): a domain outcome, never
    /// an error of the tick.
    fn accept(&mut self, work: &Id) -> Result<Result<(), crate::error::RecordError>, Self::Error>;
    /// Lands an accepted item's work on its base branch (`work land`): `Ok(Ok(Some(words)))`
    /// says how, `Ok(Ok(None))` that there is nothing to land (work made outside a
    /// worktree), `Ok(Err(why))` is a refusal that changed nothing (a conflict, a branch that
    /// moved): for a person.
    #[allow(clippy::type_complexity)]
    fn land(
        &mut self,
        work: &Id,
    ) -> Result<Result<Option<String>, crate::error::RecordError>, Self::Error>;
    /// Runs the selected attempts (concurrently where the host can) and reports each.
    fn dispatch(&mut self, picked: &[(Id, DispatchAction)]) -> Vec<Outcome>;
    /// Asks the planner for a plan and records what came of it (a proposal, an attention, an
    /// applied plan, a failure: all domain outcomes); returns a line saying which.
    fn plan(&mut self) -> Result<String, Self::Error>;
    /// One line about a decision.
    fn say(&mut self, line: String);
}

/// The graph's accepted items whose acceptance has not landed, in the graph's order.
fn landings(items: &[super::GraphItem]) -> Vec<Id> {
    let accepted = |i: &&super::GraphItem| {
        i.projection.state == crate::work::projection::WorkState::Succeeded && !i.projection.landed
    };
    items.iter().filter(accepted).map(|i| i.id.clone()).collect()
}

/// Runs cycles until the loop's rules stop it.
pub fn drive<H: GoalHost>(host: &mut H, mode: Mode) -> Result<Report, H::Error> {
    let mut goal = host.refresh()?;
    let now = host.now();
    let mut lp = RunLoop::new(mode, &goal.intent.limits, now);
    // Accepted items with no worktree to land, said once.
    let mut unlandable = std::collections::BTreeSet::new();
    let mut report = Report {
        mode,
        stop: by_state(&goal.projection),
        cycles: 0,
        dispatches: 0,
        acceptances: 0,
        outcomes: Vec::new(),
    };
    loop {
        let now = host.now();
        if let Some(stop) = lp.begin(now, &goal.projection) {
            report.stop = stop;
            break;
        }
        let p = &goal.projection;
        host.say(format!("cycle {}: {}: {}", lp.cycles(), words(p), p.reason));
        let before = goal_fingerprint(&goal.projection, &goal.items);
        let planning = [GoalNext::Replan, GoalNext::PlanInitial, GoalNext::PlanMilestone];
        if planning.contains(&goal.projection.next_action) {
            let line = host.plan()?;
            host.say(format!("  plan: {line}"));
            goal = host.refresh()?;
            // A failed plan is not asked for again in the same run: the next one would most
            // likely fail the same way and spend the replan budget in one go.
            let failed = goal.plans.last().filter(|p| p.status == super::plan::PlanStatus::Failed);
            if let Some(plan) = failed {
                let detail = format!("plan {} failed: {}", plan.request.plan_id, plan.reason);
                report.stop = Stop { reason: StopReason::PlanFailed, detail };
                break;
            }
            let after = goal_fingerprint(&goal.projection, &goal.items);
            let now = host.now();
            if let Some(stop) = lp.end(now, &before, &after, &goal.projection, true) {
                report.stop = stop;
                break;
            }
            continue;
        }
        let mut acted = false;
        let mut refused = Vec::new();
        for work in acceptances(&goal.intent, &goal.items) {
            match host.accept(&work)? {
                Ok(()) => {
                    host.say(format!("  accept {work}: its proof passed"));
                    report.acceptances += 1;
                    acted = true;
                }
                Err(why) => {
                    host.say(format!("  accept {work}: refused: {why}"));
                    refused.push((work, why));
                }
            }
        }
        if acted || !refused.is_empty() {
            goal = host.refresh()?;
        }
        // Accepted work lands as it is accepted, before the next cycle can stop on the
        // goal's success: prerequisites were accepted, and landed, before their dependents.
        if goal.intent.automation.land_accepted {
            let mut stuck = None;
            let due: Vec<Id> =
                landings(&goal.items).into_iter().filter(|w| !unlandable.contains(w)).collect();
            for work in due {
                match host.land(&work)? {
                    Ok(Some(how)) => host.say(format!("  land {work}: {how}")),
                    Ok(None) => {
                        host.say(format!(
                            "  land {work}: nothing to land (made outside a worktree)"
                        ));
                        unlandable.insert(work);
                    }
                    Err(why) => {
                        host.say(format!("  land {work}: refused: {why}"));
                        stuck = Some((work, why));
                        break;
                    }
                }
            }
            goal = host.refresh()?;
            if let Some((work, why)) = stuck {
                let detail = format!(
                    "{work} was accepted but could not land ({why}); once fixed: harn work land {work}"
                );
                report.stop = Stop { reason: StopReason::AwaitingAttention, detail };
                break;
            }
        }
        // A refusal the fresh read does not explain (the item is still one automation would
        // accept) is for a person to look at, not a reason to fail the tick or to ask again.
        let still = acceptances(&goal.intent, &goal.items);
        if let Some((work, why)) = refused.into_iter().find(|(w, _)| still.contains(w)) {
            let detail =
                format!("{work} could not be accepted ({why}); review it: harn work accept {work}");
            report.stop = Stop { reason: StopReason::AwaitingAttention, detail };
            break;
        }
        let picked = candidates(&goal.intent, &goal.items, &goal.projection);
        for (work, action) in &picked {
            host.say(format!("  dispatch {work} ({})", action_word(*action)));
        }
        if !picked.is_empty() {
            let outcomes = host.dispatch(&picked);
            let not_started =
                outcomes.iter().find(|o| o.status == OutcomeStatus::Failed).map(|o| {
                    let why = o.detail.clone().unwrap_or_default();
                    match &o.run_id {
                        // It ran, and what ended it is harn's, not the work's (a full disk).
                        Some(run) => format!("{} (run {run}) {why}", o.work_id),
                        None => format!("{} did not start: {why}", o.work_id),
                    }
                });
            for o in outcomes {
                host.say(format!("  {}: {}", o.work_id, outcome_words(&o)));
                report.outcomes.push(o);
            }
            report.dispatches += picked.len() as u32;
            // Not an attempt, and not the work's doing: going round again would only fail
            // again at once.
            if let Some(detail) = not_started {
                report.stop = Stop { reason: StopReason::NotStarted, detail };
                break;
            }
            acted = true;
        }
        goal = host.refresh()?;
        let after = goal_fingerprint(&goal.projection, &goal.items);
        let now = host.now();
        if let Some(stop) = lp.end(now, &before, &after, &goal.projection, acted) {
            report.stop = stop;
            break;
        }
    }
    report.cycles = lp.cycles();
    Ok(report)
}

/// `state/next_action` in words.
pub fn words(p: &GoalProjection) -> String {
    let state = serde_json::json!(p.state);
    let next = serde_json::json!(p.next_action);
    format!("{}/{}", state.as_str().unwrap_or(""), next.as_str().unwrap_or(""))
}

fn action_word(a: DispatchAction) -> &'static str {
    match a {
        DispatchAction::Run => "run",
        DispatchAction::Resume => "resume",
        DispatchAction::Retry => "retry",
    }
}

fn outcome_words(o: &Outcome) -> String {
    let run = o.run_id.as_ref().map(|r| format!("run {r} ")).unwrap_or_default();
    let detail = o.detail.clone().unwrap_or_default();
    match (o.status, o.passed) {
        (OutcomeStatus::Completed, Some(true)) => format!("{run}passed; in review"),
        (OutcomeStatus::Completed, _) => format!("{run}failed: {detail}"),
        (OutcomeStatus::Parked, _) => format!("{run}parked on {detail}"),
        (OutcomeStatus::Failed, _) if o.run_id.is_some() => format!("{run}{detail}"),
        (OutcomeStatus::Failed, _) => format!("not started: {detail}"),
    }
}
