//! The gate every agent call and `authorize` request of a run passes: the resume cache, the
//! agent cap, and the frozen policy with its approvals. A verdict of `ask` consumes a ruling
//! recorded for its slot or parks the run; `deny` stops it.

use super::{CallRecord, HostAction, Parked, PolicyRecord, RunFold};
use crate::hash::sha256_hex;
use crate::work::agent::CallOutcome;
use crate::work::approval::{approval_id, consume};
use crate::work::policy::{request_digest, Request, Verdict, DECISIONS_MAX};
use crate::work::schema::with_contract;
use crate::work::team::{dispatch, has_adapter, Dispatch};
use serde_json::{json, Value};

/// The identity of a call for the resume cache: everything that shapes its answer (adapter,
/// model, effort, turns, schema, specialist and the dispatched prompt), not its request id,
/// timeout or attempts.
pub(crate) fn call_key(d: &Dispatch, specialist: Option<&str>) -> String {
    let p = &d.profile;
    let identity =
        json!([d.adapter, p.model, p.effort, p.max_turns, d.schema, specialist, d.prompt]);
    sha256_hex(crate::hash::canonical_json(&identity).as_bytes())[..16].to_owned()
}

impl RunFold {
    /// An agent request: answered from the cache, declined, parked, stopped or dispatched.
    pub(super) fn agent(
        &mut self,
        id: String,
        prompt: &str,
        specialist: Option<String>,
        schema: Option<Value>,
        continue_session: bool,
    ) -> HostAction {
        if !self.requested.insert(id.clone()) {
            self.protocol_error.get_or_insert(format!("agent request id {id} reused"));
            return reply_err(&id, "request id reused");
        }
        let mut d =
            match dispatch(&self.team, self.harness.as_deref(), specialist.as_deref(), prompt) {
                Ok(d) => d,
                Err(e) => {
                    let why = format!("agent {id}: {e}");
                    if !has_adapter(&self.team, self.harness.as_deref(), specialist.as_deref()) {
                        self.no_adapter.get_or_insert(format!(
                        "{why}: pass --harness, or name a harness for the specialist in the team"
                    ));
                    }
                    return self.decline(&id, why);
                }
            };
        d.schema = schema;
        d.continue_session = continue_session;
        let key = call_key(&d, specialist.as_deref());
        let nth = self.asked.entry(key.clone()).or_default();
        let cached = self.cache.get(&key).and_then(|replies| replies.get(*nth)).cloned();
        *nth += 1;
        if let Some(text) = cached {
            if self.policy.is_some() {
                self.slot += 1; // Later checks keep the slot numbers they had.
                if let Some(check) = self.earlier_checks.get(&self.slot) {
                    self.policy_log.push(check.clone());
                }
            }
            let outcome = CallOutcome {
                ok: true,
                text: Some(text.clone()),
                error: None,
                class: None,
                ..CallOutcome::default()
            };
            let harness = d.adapter.clone();
            self.calls.push(CallRecord { id: id.clone(), harness, outcome, cached: true });
            return HostAction::Reply(json!({ "op": "reply", "id": id, "ok": true, "text": text }));
        }
        let again = self.started.contains(&id);
        if !again && self.max_agents.is_some_and(|max| self.dispatched >= max) {
            let why = format!("agent {id}: agent cap reached ({} calls)", self.dispatched);
            return self.decline(&id, why);
        }
        let request = Request::Agent {
            harness: d.adapter.clone(),
            model: d.profile.model.clone(),
            specialist,
            prompt_bytes: d.prompt.len() as u64,
            spent: self.spent(),
        };
        if let Some(stop) = self.check(request) {
            return stop;
        }
        if let Some(schema) = &d.schema {
            d.prompt = with_contract(&d.prompt, schema);
        }
        if !self.started.contains(&id) {
            self.dispatched += 1;
        }
        self.in_flight.insert(id.clone(), d.adapter.clone());
        HostAction::CallAgent { id, dispatch: d, key }
    }

    /// An `authorize` request: judged by the policy; without one the host grants nothing.
    pub(super) fn authorize(
        &mut self,
        id: String,
        action: String,
        target: Option<String>,
    ) -> HostAction {
        if self.policy.is_none() {
            let reason = "no host policy is frozen for this run";
            self.declined.push(format!("authorize {id} ({action}): {reason}"));
            return HostAction::Reply(json!({
                "op": "reply", "id": id, "ok": true, "verdict": "deny", "reason": reason,
            }));
        }
        if let Some(stop) = self.check(Request::Authorize { action, target }) {
            return stop;
        }
        HostAction::Reply(json!({ "op": "reply", "id": id, "ok": true, "verdict": "allow" }))
    }

    /// A tool call an `acp` agent asks permission for, judged by the policy in the next
    /// slot as any request is: allowed (also without a policy), refused (the agent is told
    /// and goes on: the run does not stop), parked on an approval a person rules on (the
    /// resumed call's same request then finds the ruling in the same slot), or the run
    /// stopped (an `ask` with no approver, too many checks).
    pub fn tool(&mut self, request: Request) -> ToolJudged {
        match self.judge(request) {
            Judged::Go(Verdict::Allow, _) => ToolJudged::Allow,
            Judged::Go(_, _) => ToolJudged::Refuse,
            Judged::Act(action) => match *action {
                HostAction::Park(parked) => ToolJudged::Park(parked),
                _ => ToolJudged::Stop,
            },
        }
    }

    /// Checks a request against the policy: `None` to go ahead, or the action that stops or
    /// parks the run. Every check is logged with its slot.
    fn check(&mut self, request: Request) -> Option<HostAction> {
        match self.judge(request) {
            Judged::Go(Verdict::Allow, _) => None,
            Judged::Go(_, denied_by) => Some(self.stop(denied_by)),
            Judged::Act(action) => Some(*action),
        }
    }

    /// Judges a request in the next slot: its outcome after any ruling (logged), or what
    /// the host must do first (park, or stop the run).
    fn judge(&mut self, request: Request) -> Judged {
        let Some(policy) = &self.policy else { return Judged::Go(Verdict::Allow, String::new()) };
        self.slot += 1;
        let slot = self.slot;
        if slot > DECISIONS_MAX {
            let why = format!("more than {DECISIONS_MAX} policy checks in one run");
            return Judged::Act(Box::new(self.stop(why)));
        }
        let evaluation = policy.policy.evaluate(&request);
        let request_sha256 = request_digest(&policy.sha256, &request, &evaluation);
        let rules = evaluation.matched.join(", ");
        let mut outcome = evaluation.verdict;
        let mut approval = None;
        if evaluation.verdict == Verdict::Ask {
            let ruled = match consume(&request_sha256, self.rulings.get(&slot)) {
                Ok(ruled) => ruled,
                Err(e) => {
                    return Judged::Act(Box::new(self.stop(format!("policy check p{slot}: {e}"))))
                }
            };
            match ruled {
                Some(verdict) => {
                    outcome = verdict;
                    approval = Some(approval_id(&self.run_id, slot));
                }
                None if self.approval_to.is_none() => {
                    let why = format!(
                        "rule {rules} asks for approval and the run names no approver \
                         (--approval-to)"
                    );
                    return Judged::Act(Box::new(self.stop(why)));
                }
                None => {
                    return Judged::Act(Box::new(HostAction::Park(Parked {
                        slot,
                        request,
                        evaluation,
                        request_sha256,
                    })))
                }
            }
        }
        let denied_by = match (&approval, rules.is_empty()) {
            (Some(a), _) => format!("approval {a} was denied"),
            (None, true) => "no rule allows it".to_owned(),
            (None, false) => format!("rule {rules}"),
        };
        self.policy_log.push(PolicyRecord {
            slot,
            request,
            evaluation,
            outcome,
            approval_id: approval,
        });
        Judged::Go(outcome, format!("check p{slot}: {denied_by}"))
    }

    /// Ends the run at this point: the proof fails with `reason`.
    pub fn stop(&mut self, reason: String) -> HostAction {
        self.denied.get_or_insert(reason);
        HostAction::Stop
    }

    fn decline(&mut self, id: &str, why: String) -> HostAction {
        self.declined.push(why.clone());
        reply_err(id, &why)
    }
}

/// A request's judgement: its outcome (with why, for a denial), or what the host does first.
enum Judged {
    Go(Verdict, String),
    Act(Box<HostAction>),
}

/// How the run answers a tool call an `acp` agent asks about (see [`RunFold::tool`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ToolJudged {
    /// Let it run.
    Allow,
    /// Refuse it; the agent goes on.
    Refuse,
    /// Park the run on an approval before answering.
    Park(Parked),
    /// The run is stopped; refuse it.
    Stop,
}

fn reply_err(id: &str, error: &str) -> HostAction {
    HostAction::Reply(json!({ "op": "reply", "id": id, "ok": false, "error": error }))
}
