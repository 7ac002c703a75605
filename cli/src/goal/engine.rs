//! `harn supervisor tick|run` over real work: the core's loop (`goal::engine::drive`) with a
//! host that holds the goal lease, reads the graph from durable records, accepts through the
//! work ledger, and runs each selected attempt on its own thread through the work runner
//! with the goal's team and limits.

use super::store::{self, goal_lease};
use crate::os::store::{Store, StoreError};
use crate::work::attempt::{run_attempt, AttemptRefusal, Ended, RunLimits};
use crate::work::run_cmd::accept_item;
use harn_core::error::RecordError;
use harn_core::goal::engine::{drive as drive_loop, GoalHost, GoalView, Outcome, Report};
use harn_core::goal::{DispatchAction, Mode};
use harn_core::ids::Id;
use harn_core::time::WallTime;
use harn_core::work::attempt::AttemptEnded;
use std::path::PathBuf;

pub use harn_core::goal::engine::words;

/// The real host of one goal's loop.
struct GoalRunner<'a> {
    store: &'a mut Store,
    goal: Id,
    actor: String,
    limits: &'a RunLimits,
    say: &'a mut dyn FnMut(String),
}

impl GoalHost for GoalRunner<'_> {
    type Error = StoreError;

    fn now(&mut self) -> WallTime {
        self.store.now()
    }

    fn refresh(&mut self) -> Result<GoalView, StoreError> {
        let goal = store::read(self.store, &self.goal)?;
        // Receipts carry no information (no projection reads them), so the goal read before
        // them is the goal after them: no second read.
        for item in &goal.items {
            self.store.reconcile(&item.id, &self.actor)?;
        }
        Ok(goal)
    }

    fn accept(&mut self, work: &Id) -> Result<Result<(), RecordError>, StoreError> {
        use harn_core::work::ledger::Refusal;
        let reason = Some("its proof passed and the goal accepts passing proof".to_owned());
        // Automation never confirms a guarded change: that is a person's to review.
        match accept_item(self.store, work, Vec::new(), &self.actor, reason, false) {
            Ok(()) => Ok(Ok(())),
            Err(Refusal::NotNow(why)) => Ok(Err(RecordError::Refused(why))),
            Err(Refusal::Store(e)) => Err(e),
            Err(Refusal::Unstarted(e)) => Err(StoreError::Unstarted(e)),
        }
    }

    fn land(&mut self, work: &Id) -> Result<Result<Option<String>, RecordError>, StoreError> {
        let reason = Some("accepted, and the goal lands accepted work".to_owned());
        match crate::work::land::land_item(
            self.store,
            work,
            &Default::default(),
            &self.actor,
            reason,
        ) {
            Ok(None) => Ok(Ok(None)),
            Ok(Some(done)) => Ok(Ok(Some(done.words()))),
            Err(crate::work::land::NotLanded::Usage(why))
            | Err(crate::work::land::NotLanded::Refused(why)) => Ok(Err(RecordError::Refused(why))),
        }
    }

    fn dispatch(&mut self, picked: &[(Id, DispatchAction)]) -> Vec<Outcome> {
        // A goal's cost rules count what its earlier runs spent.
        let mut limits = self.limits.clone();
        limits.goal_spent_micro_usd = Some(spent(self.store, &self.goal));
        dispatch(self.store.root().to_owned(), picked, &limits, &self.actor)
    }

    fn plan(&mut self) -> Result<String, StoreError> {
        let view = store::read(self.store, &self.goal)?;
        // A cost rule judges planning calls by what the goal has spent too.
        let mut limits = self.limits.clone();
        limits.goal_spent_micro_usd = Some(spent(self.store, &self.goal));
        super::plans::run_planner(self.store, &view, &limits, &self.actor)
    }

    fn say(&mut self, line: String) {
        (self.say)(line);
    }
}

/// What the goal's work has spent on agent calls, in millionths of a dollar (reported
/// costs; the core's `goal::spend`).
pub fn spent(store: &mut Store, goal: &Id) -> u64 {
    usage(store, goal).and_then(|u| u.cost_micro_usd).unwrap_or(0)
}

/// The agent calls' usage over every item of the goal's graph and every planning call (the
/// planner's, the reviewers'), when any reported one.
pub fn usage(store: &mut Store, goal: &Id) -> Option<harn_core::work::adapter::Usage> {
    let view = store::read(store, goal).ok()?;
    usage_of(store, &view)
}

/// [`usage`] of a goal already read.
pub fn usage_of(store: &mut Store, view: &GoalView) -> Option<harn_core::work::adapter::Usage> {
    store.goal_usage(view)
}

/// Runs the loop under the goal lease with `limits` (from [`goal_limits`]); `say` gets one
/// line per decision.
pub fn drive(
    store: &mut Store,
    id: &Id,
    mode: Mode,
    limits: &RunLimits,
    say: &mut dyn FnMut(String),
) -> Result<Report, StoreError> {
    if !store.hold(&goal_lease(id))? {
        return Err(StoreError::refused(format!("goal {id} is being ticked by another process")));
    }
    let actor = format!("supervisor:{id}");
    // The goal's frozen resource limits over the root's, and the command's over both.
    let intent = store::read(store, id).ok().map(|g| g.intent);
    let frozen = intent.as_ref().and_then(|i| i.resource_limits);
    // The goal's frozen network policy over the root's and the command's: a tick never
    // widens what the goal froze.
    let network = intent.and_then(|i| i.network);
    let bounded;
    let limits = match (frozen, network) {
        (None, None) => limits,
        (frozen, network) => {
            let mut l = limits.clone();
            if let Some(goal) = frozen {
                l.resources = l.resources.with(&goal).with(&l.limit_overrides);
            }
            if let Some(n) = network {
                l.network = n;
            }
            bounded = l;
            &bounded
        }
    };
    let mut host = GoalRunner { store, goal: id.clone(), actor, limits, say };
    drive_loop(&mut host, mode)
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

fn outcome(work_id: Id, action: DispatchAction, ended: Result<Ended, AttemptRefusal>) -> Outcome {
    let ended = match ended {
        Ok(Ended::Proof(run, proof)) => Ok(AttemptEnded::Proof(run, proof)),
        Ok(Ended::Parked(request)) => Ok(AttemptEnded::Parked(request)),
        Err(AttemptRefusal::NotNow(why)) => Err(why),
        Err(AttemptRefusal::Store(e)) => Err(e.to_string()),
    };
    Outcome::of_attempt(work_id, action, ended.as_ref().map_err(Clone::clone))
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
