//! `harn supervisor tick|run`: the supervisor's loop over real work. Under the goal lease,
//! each cycle re-reads the graph from durable records, accepts passing proofs when the goal
//! automates it, dispatches the core's selection concurrently (each attempt through the
//! work runner, with the goal's team and limits), and asks the core whether to stop. One
//! line per decision.

use super::store::{self, goal_lease, Goal};
use crate::work::run_cmd::accept_item;
use crate::work::runner::{run_attempt, Ended, Refusal, RunLimits};
use crate::work::store::{Store, StoreError};
use harn_core::goal::{
    acceptances, candidates, progress_fingerprint, DispatchAction, Mode, RunLoop, Stop,
};
use harn_core::ids::Id;
use serde::Serialize;
use std::path::PathBuf;

/// What one dispatch came to.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The work item.
    pub work_id: Id,
    /// How it was dispatched.
    pub action: DispatchAction,
    /// `completed` (a proof), `parked` (an approval) or `failed` (no proof).
    pub status: &'static str,
    /// The run, when one started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Id>,
    /// Whether its proof passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
    /// Why it failed or parked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What a `tick` or `run` did.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The goal.
    pub goal_id: Id,
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

/// Runs the loop with `limits` (the goal's team and per-work limits with the caller's host
/// options, frozen by [`goal_limits`]); `say` gets one line per decision.
pub fn drive(
    store: &mut Store,
    id: &Id,
    mode: Mode,
    limits: &RunLimits,
    say: &mut dyn FnMut(String),
) -> Result<Report, StoreError> {
    if !store.hold(&goal_lease(id))? {
        return Err(StoreError(format!("goal {id} is being ticked by another process")));
    }
    let actor = format!("supervisor:{id}");
    let goal = store::read(store, id)?;
    let mut lp = RunLoop::new(mode, &goal.intent.limits, store.now());
    let mut report = Report {
        goal_id: id.clone(),
        mode,
        stop: harn_core::goal::cycle::by_state(&goal.projection),
        cycles: 0,
        dispatches: 0,
        acceptances: 0,
        outcomes: Vec::new(),
    };
    let mut goal = refresh(store, id, &actor)?;
    loop {
        if let Some(stop) = lp.begin(store.now(), &goal.projection) {
            report.stop = stop;
            break;
        }
        let p = &goal.projection;
        say(format!("cycle {}: {}: {}", lp.cycles(), words(p), p.reason));
        let before = progress_fingerprint(&goal.items);
        let mut acted = false;
        for work in acceptances(&goal.intent, &goal.items) {
            accept_item(store, &work, Vec::new(), &actor, Some("passing proof".into()))
                .map_err(StoreError)?;
            say(format!("  accept {work}: its proof passed"));
            report.acceptances += 1;
            acted = true;
        }
        if acted {
            goal = refresh(store, id, &actor)?;
        }
        let picked = candidates(&goal.intent, &goal.items, &goal.projection);
        for (work, action) in &picked {
            say(format!("  dispatch {work} ({})", action_word(*action)));
        }
        let outcomes = dispatch(store.root().to_owned(), &picked, limits, &actor);
        for o in outcomes {
            say(format!("  {}: {}", o.work_id, outcome_words(&o)));
            report.outcomes.push(o);
        }
        report.dispatches += picked.len() as u32;
        acted |= !picked.is_empty();
        goal = refresh(store, id, &actor)?;
        let after = progress_fingerprint(&goal.items);
        if let Some(stop) = lp.end(store.now(), &before, &after, &goal.projection, acted) {
            report.stop = stop;
            break;
        }
    }
    report.cycles = lp.cycles();
    Ok(report)
}

/// Reconciles every item of the active graph (a receipt only where something changed), then
/// reads the goal afresh from durable records.
fn refresh(store: &mut Store, id: &Id, actor: &str) -> Result<Goal, StoreError> {
    let goal = store::read(store, id)?;
    for item in &goal.items {
        store.reconcile(&item.id, actor)?;
    }
    store::read(store, id)
}

/// Runs the selected attempts at once, each on its own thread with its own view of the
/// ledger; returns their outcomes in selection order.
fn dispatch(
    root: PathBuf,
    picked: &[(Id, DispatchAction)],
    limits: &RunLimits,
    actor: &str,
) -> Vec<Outcome> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = picked
            .iter()
            .map(|(work, action)| {
                let root = root.clone();
                scope.spawn(move || {
                    let mut store = Store::new(&root);
                    let retry = *action == DispatchAction::Retry;
                    let ended = run_attempt(&mut store, work, retry, limits, actor);
                    outcome(work.clone(), *action, ended)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a dispatch thread never panics")).collect()
    })
}

fn outcome(work_id: Id, action: DispatchAction, ended: Result<Ended, Refusal>) -> Outcome {
    let mut o =
        Outcome { work_id, action, status: "failed", run_id: None, passed: None, detail: None };
    match ended {
        Ok(Ended::Proof(run, proof)) => {
            o.status = "completed";
            o.passed = Some(proof.passes());
            o.detail = proof.run.error.clone();
            o.run_id = Some(run);
        }
        Ok(Ended::Parked(request)) => {
            o.status = "parked";
            o.detail = Some(format!("approval {}", request.approval_id));
            o.run_id = Some(request.run_id.clone());
        }
        Err(Refusal::NotNow(why)) => o.detail = Some(why),
        Err(Refusal::Store(e)) => o.detail = Some(e.to_string()),
    }
    o
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
    match (o.status, o.passed) {
        ("completed", Some(true)) => format!("{run}passed; in review"),
        ("completed", _) => format!("{run}failed: {}", o.detail.clone().unwrap_or_default()),
        ("parked", _) => format!("{run}parked on {}", o.detail.clone().unwrap_or_default()),
        _ => format!("not started: {}", o.detail.clone().unwrap_or_default()),
    }
}

/// `state/next_action` in words.
pub fn words(p: &harn_core::goal::GoalProjection) -> String {
    let state = serde_json::json!(p.state);
    let next = serde_json::json!(p.next_action);
    format!("{}/{}", state.as_str().unwrap_or(""), next.as_str().unwrap_or(""))
}

/// The limits every attempt the goal dispatches runs with: the goal's team, agent cap and
/// concurrency (the caller cannot override them), with the caller's host options.
pub fn goal_limits(
    store: &Store,
    intent: &harn_core::goal::GoalIntent,
    host: &crate::work::host_args::HostArgs,
) -> Result<RunLimits, String> {
    let l = &intent.limits;
    host.freeze(store, intent.team.clone(), l.max_agents_per_work, l.agent_concurrency as usize)
}
