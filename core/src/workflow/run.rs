//! One workflow run, decided purely: which attempt a `run` or `retry` may start, the run's
//! manifest (`run.json`, frozen before the spawn), the fold of the workflow's messages into
//! the replies the host owes and the proof (`proof.json`) the run ends in, and how a work
//! read inspects an attempt from those records.

use super::acceptance::{roll_up, Acceptance};
use super::agent::{run_class, CallOutcome, HarnessSpec};
use super::protocol::{Criterion, Evidence, FromWorkflow};
use super::team::{dispatch, Dispatch, Team};
use crate::ids::Id;
use crate::time::WallTime;
use crate::work::events::{Disposition, Trigger};
use crate::work::projection::{AttemptStatus, FailureClass, Projection, WorkState};
use crate::work::{WorkIntent, WorkflowRef};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Schema version of `run.json` and `proof.json` written today.
pub const RUN_VERSION: u32 = 1;
/// Longest error text a proof keeps (its tail).
pub const ERROR_MAX: usize = 2_000;

/// Decides whether a `run` (or, with `retry`, a `retry`) may start an attempt now, and with
/// which trigger. Refusals say what the operator should do instead.
pub fn may_start(p: &Projection, retry: bool) -> Result<Trigger, String> {
    match (p.state, retry) {
        (WorkState::Ready, false) => {}
        (WorkState::Ready, true) => return Err("it is ready: start it with run, not retry".into()),
        (WorkState::Blocked, true) => {}
        (WorkState::Blocked, false) => {
            return Err(format!("it is blocked ({}): retry it explicitly", p.reason))
        }
        (state, _) => return Err(format!("it is {} ({})", state_word(state), p.reason)),
    }
    if p.attempts_remaining == 0 {
        return Err(format!("its {} charged attempts are used up", p.charged_attempts));
    }
    Ok(if retry { Trigger::Retry } else { Trigger::Initial })
}

fn state_word(s: WorkState) -> &'static str {
    match s {
        WorkState::Waiting => "waiting",
        WorkState::Ready => "ready",
        WorkState::Running => "running",
        WorkState::AwaitingApproval => "awaiting approval",
        WorkState::InReview => "in review",
        WorkState::Blocked => "blocked",
        WorkState::Succeeded => "succeeded",
        WorkState::Cancelled => "cancelled",
    }
}

/// Decides whether the latest proof may be accepted with these dispositions: only in review,
/// and only when every open finding is disposed of, each exactly once, a deferral with a reason.
pub fn may_accept(p: &Projection, dispositions: &[Disposition]) -> Result<(), String> {
    if p.state != WorkState::InReview {
        return Err(format!(
            "it is {} ({}); only an item in review is accepted",
            state_word(p.state),
            p.reason
        ));
    }
    for (i, d) in dispositions.iter().enumerate() {
        if !p.open_findings.iter().any(|f| f.id == d.id()) {
            return Err(format!("{} is not an open finding", d.id()));
        }
        if dispositions[..i].iter().any(|e| e.id() == d.id()) {
            return Err(format!("{} is disposed of twice", d.id()));
        }
        if let Disposition::Deferred { reason, .. } = d {
            if reason.trim().is_empty() {
                return Err(format!("deferring {} needs a reason", d.id()));
            }
        }
    }
    let open: Vec<&str> = p
        .open_findings
        .iter()
        .filter(|f| dispositions.iter().all(|d| d.id() != f.id))
        .map(|f| f.id.as_str())
        .collect();
    if !open.is_empty() {
        return Err(format!(
            "findings still open: {} (dispose of each: fixed or deferred)",
            open.join(", ")
        ));
    }
    Ok(())
}

/// `run.json`: what a run was started with, written before its workflow is spawned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunManifest {
    /// [`RUN_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run_id: Id,
    /// The work item it is an attempt of.
    pub work_id: Id,
    /// The attempt number.
    pub attempt: u32,
    /// Why it started.
    pub trigger: Trigger,
    /// When.
    pub started_at: WallTime,
    /// The workflow program, as frozen in the work item.
    pub script: WorkflowRef,
    /// Wall-clock budget of the whole run; the workflow's process group is killed after it.
    pub timeout_ms: u64,
    /// The harness that answers agent calls, frozen by value; none declines them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<FrozenHarness>,
    /// The specialist team, frozen by value.
    #[serde(default, skip_serializing_if = "Team::is_empty")]
    pub team: Team,
    /// Every other harness the team names, frozen by value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub harnesses: BTreeMap<String, HarnessSpec>,
    /// Most agent calls the run may make; a request past it is declined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_agents: Option<u32>,
    /// Whether agent calls may bill an API account; `subscription` strips API keys.
    #[serde(default)]
    pub billing: Billing,
}

/// Which account an agent call may bill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Billing {
    /// Only the harness's logged-in subscription: API-key variables are removed from every
    /// call's environment, so nothing is billed per token unless someone chose to.
    #[default]
    Subscription,
    /// API keys in the environment are passed on.
    Api,
}

impl RunManifest {
    /// The frozen spec of harness `name`.
    pub fn harness_spec(&self, name: &str) -> Option<&HarnessSpec> {
        match &self.harness {
            Some(h) if h.name == name => Some(&h.spec),
            _ => self.harnesses.get(name),
        }
    }

    /// A fold for this run: its team, its default harness.
    pub fn fold(&self) -> RunFold {
        let mut fold =
            RunFold::new(self.harness.as_ref().map(|h| h.name.as_str()), self.team.clone());
        fold.max_agents = self.max_agents;
        fold
    }
}

/// A harness as frozen into a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenHarness {
    /// Its name.
    pub name: String,
    /// How to run it.
    pub spec: HarnessSpec,
}

impl RunManifest {
    /// The first line the host writes to the workflow's stdin.
    pub fn start_line(&self, intent: &WorkIntent, prior: Option<&Proof>) -> Value {
        let prior = prior
            .map(|p| json!({ "run_id": p.run.id, "status": p.run.status, "error": p.run.error }));
        json!({
            "op": "start",
            "run_id": self.run_id,
            "work": {
                "id": intent.id, "title": intent.title, "objective": intent.objective,
                "acceptance": intent.acceptance,
            },
            "attempt": { "number": self.attempt, "trigger": self.trigger, "prior": prior },
        })
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The workflow reported success and exited 0 in time.
    Succeeded,
    /// Anything else.
    Failed,
}

/// The run part of a proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofRun {
    /// The run.
    pub id: Id,
    /// Its work item.
    pub work_id: Id,
    /// Its attempt.
    pub attempt: u32,
    /// How it ended.
    pub status: RunStatus,
    /// When it started.
    pub started_at: WallTime,
    /// When it ended.
    pub ended_at: WallTime,
    /// Its exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// True when the host killed it for its timeout.
    pub timed_out: bool,
    /// The workflow's summary, on a `result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Why it failed (the tail, at most [`ERROR_MAX`] bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failure that does not charge the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    /// For a `decision` failure, the decision the workflow named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_id: Option<String>,
}

/// `proof.json`: how a run ended and what it proved, written once for success and failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    /// [`RUN_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run: ProofRun,
    /// The acceptance roll-up.
    pub acceptance: Acceptance,
    /// Every piece of evidence, in order.
    pub evidence: Vec<Evidence>,
    /// Stages entered, in order.
    pub stages: Vec<String>,
    /// Requests the host declined (agent calls without a harness, unauthorized actions).
    pub declined: Vec<String>,
    /// Every agent call, in the order they ended (never the prompt or the reply).
    #[serde(default)]
    pub agents: Vec<AgentRecord>,
}

/// One agent call as a proof records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The workflow's request id.
    pub id: String,
    /// The harness that ran it.
    pub harness: String,
    /// True when its reply was usable.
    pub ok: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failure that does not charge the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
}

/// What the host must do for a message.
#[derive(Clone, Debug, PartialEq)]
pub enum HostAction {
    /// Write this reply to the workflow.
    Reply(Value),
    /// Run an agent call as dispatched, then hand its outcome to [`RunFold::agent_done`].
    CallAgent {
        /// The request id.
        id: String,
        /// Which harness, prompt and limits.
        dispatch: Dispatch,
    },
}

impl Proof {
    /// True when the run succeeded and every criterion is satisfied.
    pub fn passes(&self) -> bool {
        self.acceptance.passes(self.run.status == RunStatus::Succeeded)
    }
}

/// How the workflow's process ended, as the host saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessEnd {
    /// It could not be started; `missing` when the program does not exist.
    SpawnFailed {
        /// The OS error.
        error: String,
        /// True for ENOENT: an environment failure, not charged.
        missing: bool,
    },
    /// It exited or was killed.
    Exited {
        /// Exit code, when it exited.
        code: Option<i32>,
        /// Signal, when one ended it.
        signal: Option<i32>,
        /// True when the host killed it for its timeout.
        timed_out: bool,
    },
}

/// The messages of one run, folded as they arrive.
#[derive(Clone, Debug, Default)]
pub struct RunFold {
    harness: Option<String>,
    max_agents: Option<u32>,
    dispatched: u32,
    team: Team,
    /// The harness of each call in flight.
    in_flight: BTreeMap<String, String>,
    requested: std::collections::BTreeSet<String>,
    calls: Vec<(String, String, CallOutcome)>,
    declared: Vec<Criterion>,
    evidence: Vec<Evidence>,
    stages: Vec<String>,
    declined: Vec<String>,
    result: Option<(bool, Option<String>, Option<String>)>,
    blocked: Option<(String, Option<String>)>,
    protocol_error: Option<String>,
}

impl RunFold {
    /// A fold whose agent calls go to their specialist's harness or the named default (a
    /// call neither names is declined).
    pub fn new(harness: Option<&str>, team: Team) -> RunFold {
        RunFold { harness: harness.map(str::to_owned), team, ..RunFold::default() }
    }

    /// Takes one message (or the error reading it); returns what the host owes, if anything.
    /// Agent calls go to the run's harness, or are declined when it has none. The host grants
    /// no authority: no policy is frozen for the run, so `authorize` is denied. Declines are
    /// recorded in the proof.
    pub fn observe(&mut self, msg: Result<FromWorkflow, String>) -> Option<HostAction> {
        let msg = match msg {
            Ok(m) => m,
            Err(e) => {
                self.protocol_error.get_or_insert(e);
                return None;
            }
        };
        match msg {
            FromWorkflow::Meta { acceptance } => self.declared.extend(acceptance),
            FromWorkflow::Evidence(e) => self.evidence.push(e),
            FromWorkflow::Stage { name } => self.stages.push(name),
            FromWorkflow::Log { .. } => {}
            FromWorkflow::Agent { id, prompt, specialist, .. } => {
                if !self.requested.insert(id.clone()) {
                    self.protocol_error.get_or_insert(format!("agent request id {id} reused"));
                    let error = "request id reused";
                    return Some(HostAction::Reply(
                        json!({ "op": "reply", "id": id, "ok": false, "error": error }),
                    ));
                }
                let harness = self.harness.as_deref();
                let capped = self.max_agents.is_some_and(|max| self.dispatched >= max);
                let resolved = if capped {
                    Err(format!("agent cap reached ({} calls)", self.dispatched))
                } else {
                    dispatch(&self.team, harness, specialist.as_deref(), &prompt)
                };
                match resolved {
                    Ok(d) => {
                        self.dispatched += 1;
                        self.in_flight.insert(id.clone(), d.harness.clone());
                        return Some(HostAction::CallAgent { id, dispatch: d });
                    }
                    Err(e) => self.declined.push(format!("agent {id}: {e}")),
                }
                let error = self.declined.last().cloned().unwrap_or_default();
                return Some(HostAction::Reply(
                    json!({ "op": "reply", "id": id, "ok": false, "error": error }),
                ));
            }
            FromWorkflow::Authorize { id, action, .. } => {
                let reason = "no host policy is frozen for this run";
                self.declined.push(format!("authorize {id} ({action}): {reason}"));
                return Some(HostAction::Reply(json!({
                    "op": "reply", "id": id, "ok": true, "verdict": "deny", "reason": reason,
                })));
            }
            FromWorkflow::Blocked { reason, decision_id } => {
                self.blocked.get_or_insert((reason, decision_id));
            }
            FromWorkflow::Result { ok, summary, error } => {
                if self.result.is_some() {
                    self.protocol_error.get_or_insert("a second result".into());
                } else {
                    self.result = Some((ok, summary, error));
                }
            }
        }
        None
    }

    /// Records an agent call's outcome; returns the reply the workflow gets.
    pub fn agent_done(&mut self, id: &str, outcome: CallOutcome) -> Value {
        let reply = match (&outcome.text, &outcome.error) {
            (Some(text), _) if outcome.ok => {
                json!({ "op": "reply", "id": id, "ok": true, "text": text })
            }
            (_, error) => json!({
                "op": "reply", "id": id, "ok": false, "error": error, "class": outcome.class,
            }),
        };
        let harness = self.in_flight.remove(id).unwrap_or_default();
        self.calls.push((id.to_owned(), harness, outcome));
        reply
    }

    /// The proof: succeeded only when the workflow reported `ok`, exited 0 in time, did not
    /// block, and wrote nothing malformed. A timeout fails whatever the exit code.
    pub fn finish(
        self,
        m: &RunManifest,
        intent: &WorkIntent,
        end: &ProcessEnd,
        at: WallTime,
    ) -> Proof {
        let (exit_code, signal, timed_out) = match end {
            ProcessEnd::Exited { code, signal, timed_out } => (*code, *signal, *timed_out),
            ProcessEnd::SpawnFailed { .. } => (None, None, false),
        };
        let mut class = None;
        let mut decision_id = None;
        let error = if let ProcessEnd::SpawnFailed { error, missing } = end {
            class = missing.then_some(FailureClass::Environment);
            Some(format!("the workflow could not be started: {error}"))
        } else if timed_out {
            Some(format!("timed out after {} ms and was killed", m.timeout_ms))
        } else if let Some((reason, decision)) = &self.blocked {
            class = Some(FailureClass::Decision);
            decision_id = Some(decision.clone().unwrap_or_default());
            Some(format!("blocked: {reason}"))
        } else if let Some(e) = &self.protocol_error {
            Some(e.clone())
        } else if exit_code != Some(0) {
            Some(match (exit_code, signal) {
                (Some(c), _) => format!("the workflow exited with code {c}"),
                (None, Some(s)) => format!("the workflow was killed by signal {s}"),
                (None, None) => "the workflow ended without an exit status".into(),
            })
        } else {
            match &self.result {
                None => Some("the workflow exited without a result".into()),
                Some((false, _, e)) => Some(e.clone().unwrap_or_else(|| "result: not ok".into())),
                Some((true, _, _)) => None,
            }
        };
        let status = if error.is_none() { RunStatus::Succeeded } else { RunStatus::Failed };
        if status == RunStatus::Failed && class.is_none() && !timed_out {
            let outcomes: Vec<CallOutcome> = self.calls.iter().map(|(_, _, o)| o.clone()).collect();
            class = run_class(&outcomes);
        }
        let agents = self
            .calls
            .iter()
            .map(|(id, harness, o)| AgentRecord {
                id: id.clone(),
                harness: harness.clone(),
                ok: o.ok,
                error: o.error.clone(),
                class: o.class,
            })
            .collect();
        let acceptance = roll_up(&intent.acceptance, &self.declared, &self.evidence);
        let run = ProofRun {
            id: m.run_id.clone(),
            work_id: m.work_id.clone(),
            attempt: m.attempt,
            status,
            started_at: m.started_at,
            ended_at: at,
            exit_code,
            signal,
            timed_out,
            summary: self.result.and_then(|r| r.1),
            error: error.map(|e| tail(&e, ERROR_MAX)),
            class,
            decision_id,
        };
        let (evidence, stages, declined) = (self.evidence, self.stages, self.declined);
        Proof { schema_version: RUN_VERSION, run, acceptance, evidence, stages, declined, agents }
    }
}

/// The last `max` bytes of `s`, cut on a character boundary.
fn tail(s: &str, max: usize) -> String {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_owned()
}

/// What a work read learns of an attempt from its records, or why the read must fail.
/// `runner_live` is true while some process holds the item's run lease.
pub fn inspect(
    work_id: &Id,
    run_id: &Id,
    attempt: u32,
    manifest: Option<&RunManifest>,
    proof: Option<&Proof>,
    runner_live: bool,
) -> Result<AttemptStatus, String> {
    if let Some(m) = manifest {
        if m.work_id != *work_id || m.run_id != *run_id || m.attempt != attempt {
            return Err(format!(
                "run {run_id}'s manifest names {} attempt {} of run {}",
                m.work_id, m.attempt, m.run_id
            ));
        }
    }
    let Some(p) = proof else {
        return Ok(if runner_live { AttemptStatus::Running } else { AttemptStatus::Lost });
    };
    if manifest.is_none() {
        return Err(format!("run {run_id} has a proof but no manifest"));
    }
    if p.run.work_id != *work_id || p.run.id != *run_id || p.run.attempt != attempt {
        return Err(format!("run {run_id}'s proof belongs to another attempt"));
    }
    Ok(if p.passes() {
        AttemptStatus::Succeeded
    } else {
        AttemptStatus::Failed { class: p.run.class, decision_id: p.run.decision_id.clone() }
    })
}

/// Fuzz body: a workflow's arbitrary output through the reader and the fold, ended in a way
/// chosen by the first byte. Never panics; a proof that passes always comes from a run that
/// exited 0 in time with an `ok` result; a timeout or a spawn failure never succeeds; the
/// proof survives a JSON round trip.
pub fn fuzz_run_fold(data: &[u8]) {
    use super::protocol::LineReader;
    let Some((&how, output)) = data.split_first() else { return };
    let intent_id = Id::new("w1").expect("a valid id");
    let script = WorkflowRef { path: "/wf".into(), sha256: "0".repeat(64) };
    let m = RunManifest {
        schema_version: RUN_VERSION,
        run_id: Id::new("wf-1").expect("a valid id"),
        work_id: intent_id.clone(),
        attempt: 1,
        trigger: Trigger::Initial,
        started_at: WallTime(0),
        script: script.clone(),
        timeout_ms: 1_000,
        harness: None,
        team: Team::new(),
        harnesses: BTreeMap::new(),
        max_agents: None,
        billing: Billing::Subscription,
    };
    let intent = WorkIntent {
        schema_version: crate::work::intent::INTENT_VERSION,
        id: intent_id,
        title: "t".into(),
        objective: "o".into(),
        acceptance: (0..how % 3).map(|n| format!("criterion {n}")).collect(),
        dependencies: Vec::new(),
        workflow: script,
        max_attempts: 3,
        max_uncharged_attempts: 3,
        created_at: WallTime(0),
    };
    let mut reader = LineReader::default();
    let mut fold = RunFold::new((how & 16 != 0).then_some("h"), Team::new());
    let mut messages: Vec<_> = reader.feed(output);
    messages.extend(reader.finish());
    for msg in messages {
        match fold.observe(msg.map_err(|e| e.to_string())) {
            Some(HostAction::Reply(reply)) => assert_eq!(reply["op"], "reply"),
            Some(HostAction::CallAgent { id, .. }) => {
                let ok = how & 8 != 0;
                let class = (!ok).then_some(FailureClass::Upstream);
                let outcome = CallOutcome { ok, text: ok.then(String::new), error: None, class };
                assert_eq!(fold.agent_done(&id, outcome)["id"], id.as_str());
            }
            None => {}
        }
    }
    let end = match how % 4 {
        0 => ProcessEnd::Exited { code: Some(0), signal: None, timed_out: false },
        1 => ProcessEnd::Exited { code: Some(0), signal: None, timed_out: true },
        2 => ProcessEnd::Exited { code: None, signal: Some(9), timed_out: false },
        _ => ProcessEnd::SpawnFailed { error: "ENOENT".into(), missing: how & 4 != 0 },
    };
    let proof = fold.finish(&m, &intent, &end, WallTime(5));
    if proof.run.status == RunStatus::Succeeded {
        assert!(how % 4 == 0 && proof.run.error.is_none() && proof.run.class.is_none());
    } else {
        assert!(proof.run.error.as_ref().is_some_and(|e| e.len() <= ERROR_MAX));
    }
    assert!(!proof.passes() || proof.run.status == RunStatus::Succeeded);
    let bytes = serde_json::to_vec(&proof).expect("proofs serialize");
    let back: Proof = serde_json::from_slice(&bytes).expect("proofs read back");
    assert_eq!(back, proof, "a proof survives its file");
}

#[cfg(test)]
mod tests;
