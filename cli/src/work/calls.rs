//! A run's agent calls: queued in request order, started on threads up to the concurrency
//! bound, each retried up to its attempts, and a reply that must match a JSON schema checked
//! and repaired a bounded number of times.

use super::agent_call::{call, CallContext, CallGroups};
use super::host::HostEvent;
use super::store::Store;
use harn_core::work::projection::FailureClass;
use harn_core::workflow::agent::{CallOutcome, HarnessSpec};
use harn_core::workflow::run::RunManifest;
use harn_core::workflow::schema::{check_reply, repair_prompt, REPAIRS_MAX};
use harn_core::workflow::team::Dispatch;
use std::sync::{mpsc, Arc, Mutex};

/// Agent calls waiting for a slot, and how many are running.
pub struct Calls {
    /// Calls waiting, in the order they were asked for.
    pub queued: Vec<(String, Dispatch)>,
    /// Calls running.
    pub in_flight: usize,
    /// Most calls running at once.
    pub concurrency: usize,
    /// Process groups of the calls running now.
    pub agents: Arc<Mutex<CallGroups>>,
}

impl Calls {
    /// Starts queued calls, in the order they were asked for, up to the concurrency bound.
    pub fn dispatch(&mut self, store: &Store, m: &RunManifest, tx: &mpsc::SyncSender<HostEvent>) {
        while self.in_flight < self.concurrency && !self.queued.is_empty() {
            let (id, dispatch) = self.queued.remove(0);
            let spec = m.harness_spec(&dispatch.harness).cloned();
            let root = m.cwd.as_deref().map_or_else(|| store.root().to_owned(), Into::into);
            let tx = tx.clone();
            let (run_id, agents) = (m.run_id.to_string(), self.agents.clone());
            let billing = m.billing;
            self.in_flight += 1;
            std::thread::spawn(move || {
                let outcome = match spec {
                    Some(spec) => {
                        let ctx =
                            CallContext { root: &root, run_id: &run_id, billing, running: &agents };
                        call_checked(&ctx, &dispatch, &spec)
                    }
                    // Every harness the team names is frozen at the start; this is a bug.
                    None => failed(format!("harness {} was not frozen", dispatch.harness)),
                };
                let _ = tx.send(HostEvent::AgentDone(id, outcome));
            });
        }
    }
}

fn failed(error: String) -> CallOutcome {
    CallOutcome { ok: false, text: None, error: Some(error), class: None }
}

/// Runs a call to a usable reply: up to its attempts, then, with a schema, up to
/// [`REPAIRS_MAX`] repair calls that quote the rejected reply and its problems. A reply that
/// still does not match is a charged failure.
pub fn call_checked(ctx: &CallContext<'_>, d: &Dispatch, spec: &HarnessSpec) -> CallOutcome {
    let mut outcome = call_with_retries(ctx, d, spec, &d.prompt);
    let Some(schema) = &d.schema else { return outcome };
    let mut repairs = 0;
    while outcome.ok {
        let text = outcome.text.clone().unwrap_or_default();
        match check_reply(&text, schema) {
            Ok(value) => {
                outcome.text = Some(value.to_string());
                break;
            }
            Err(problems) if repairs == REPAIRS_MAX || cancelled(ctx) => {
                return failed(format!(
                    "the reply does not match its schema after {repairs} repairs: {}",
                    problems.join("; ")
                ));
            }
            Err(problems) => {
                repairs += 1;
                let prompt = repair_prompt(&d.prompt, &text, &problems);
                outcome = call_with_retries(ctx, d, spec, &prompt);
            }
        }
    }
    outcome
}

fn cancelled(ctx: &CallContext<'_>) -> bool {
    ctx.running.lock().unwrap_or_else(|e| e.into_inner()).cancelled
}

/// Runs a call up to its attempts: a usable reply or a missing program ends it at once, and
/// nothing is retried once the run is over.
fn call_with_retries(
    ctx: &CallContext<'_>,
    d: &Dispatch,
    spec: &HarnessSpec,
    prompt: &str,
) -> CallOutcome {
    let once = || call(ctx, &d.harness, spec, &d.profile, prompt);
    let mut outcome = once();
    for _ in 1..d.max_attempts {
        if outcome.ok || outcome.class == Some(FailureClass::Environment) || cancelled(ctx) {
            break;
        }
        outcome = once();
    }
    outcome
}
