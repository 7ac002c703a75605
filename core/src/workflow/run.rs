//! One workflow run, decided purely: which attempt a `run` or `retry` may start, the run's
//! manifest (`run.json`, frozen before the spawn), the fold of the workflow's messages into
//! the replies the host owes and the proof (`proof.json`) the run ends in, and how a work
//! read inspects an attempt from those records.

use super::acceptance::{roll_up, Acceptance};
use super::agent::{run_class, AdapterSpec, CallOutcome};
use super::approval::{ApprovalRequest, Ruling, APPROVAL_VERSION};
use super::policy::{Evaluation, FrozenPolicy, Request, Verdict};
use super::protocol::{Criterion, Evidence, FromWorkflow};
use super::team::{Dispatch, Team};
use crate::ids::Id;
use crate::time::WallTime;
use crate::work::events::{Disposition, Trigger};
use crate::work::projection::{AttemptStatus, FailureClass, Projection, WorkState};
use crate::work::{WorkIntent, WorkflowRef};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Schema version of `run.json` and `proof.json` written today. From version 2 a run's proof
/// counts only with the seal (`seal.json`) harn writes just before it; version 1 runs had none.
pub const RUN_VERSION: u32 = 2;
/// The file a run's seal lives in, beside its proof.
pub const SEAL: &str = "seal.json";
/// Schema version of `seal.json`.
pub const SEAL_VERSION: u32 = 1;

/// `seal.json`: what harn writes just before a run's proof, naming the proof's digest, so a
/// proof put in the run directory by anyone else is told apart and never counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProofSeal {
    /// [`SEAL_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run_id: Id,
    /// SHA-256 of the bytes of its `proof.json`.
    pub proof_sha256: String,
}

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
    pub harnesses: BTreeMap<String, AdapterSpec>,
    /// Most agent calls the run may make; a request past it is declined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_agents: Option<u32>,
    /// Whether agent calls may bill an API account; `subscription` strips API keys.
    #[serde(default)]
    pub billing: Billing,
    /// The host policy, frozen by value with its digest; none means no policy checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<FrozenPolicy>,
    /// Who is asked when policy says `ask`; none means an `ask` is a denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_to: Option<String>,
    /// Agent calls in flight at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: u32,
    /// The boundary the operator declared the run works inside; recorded, not enforced.
    #[serde(default)]
    pub isolation: Isolation,
    /// The working directory of the workflow and its agent calls (absolute); none means the
    /// coordination root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The work and attempt context the workflow is started with (`work`, `attempt`),
    /// frozen here so a resumed run is told exactly what its first segment was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// What the dispatching goal's earlier runs had spent on agent calls when this run was
    /// dispatched, in millionths of a dollar: what a `scope: goal` cost rule adds to the
    /// run's own spending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_spent_micro_usd: Option<u64>,
    /// What contains its processes, as reached when it started (absent before runs
    /// recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<super::containment::Containment>,
    /// The item's own worktree, under `--isolation worktree`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<super::workspace::Workspace>,
}

/// Where a run's changes land. `worktree` is made by harn (an item's own git worktree and
/// branch); `sandbox` and `remote` are the operator's declaration, recorded, not enforced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// The repository's own working tree.
    #[default]
    Shared,
    /// A separate git worktree.
    Worktree,
    /// A sandbox (container, VM) around the agents.
    Sandbox,
    /// Another machine.
    Remote,
}

/// Agent calls in flight at once when nobody says otherwise.
pub const DEFAULT_CONCURRENCY: u32 = 4;

fn default_concurrency() -> u32 {
    DEFAULT_CONCURRENCY
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
    pub fn harness_spec(&self, name: &str) -> Option<&AdapterSpec> {
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
        fold.policy = self.policy.clone();
        fold.run_id = self.run_id.to_string();
        fold.approval_to = self.approval_to.clone();
        fold.spent.goal_before_micro_usd = self.goal_spent_micro_usd;
        fold
    }

    /// The approval request a run parks on, asked at `at`.
    pub fn approval_request(&self, parked: &Parked, at: WallTime) -> ApprovalRequest {
        let policy_sha256 = self.policy.as_ref().map(|p| p.sha256.clone()).unwrap_or_default();
        ApprovalRequest {
            schema_version: APPROVAL_VERSION,
            approval_id: super::approval::approval_id(self.run_id.as_str(), parked.slot),
            run_id: self.run_id.clone(),
            work_id: self.work_id.clone(),
            slot: parked.slot,
            addressee: self.approval_to.clone().unwrap_or_default(),
            policy_sha256,
            request: parked.request.clone(),
            evaluation: parked.evaluation.clone(),
            request_sha256: parked.request_sha256.clone(),
            requested_at: at,
        }
    }
}

/// A harness as frozen into a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenHarness {
    /// Its name.
    pub name: String,
    /// How to run it.
    pub spec: AdapterSpec,
}

/// What a retry is told of the attempt before it (`attempt.prior` in the start line): the
/// run, why it did not pass (`causes`, in a fixed order), its error, the acceptance counts
/// and every criterion not satisfied. An attempt without a proof is `lost`, with no invented
/// error; an uncharged one names its class.
pub fn synopsis(run_id: &Id, proof: Option<&Proof>) -> Value {
    let Some(p) = proof else {
        return json!({ "run_id": run_id, "causes": ["lost"], "unresolved": [] });
    };
    let mut causes = Vec::new();
    if let Some(class) = p.run.class {
        causes.push(json!(class));
    } else if p.run.status == RunStatus::Failed {
        causes.push(json!("workflow_error"));
    }
    let s = &p.acceptance.summary;
    if s.unsatisfied > 0 {
        causes.push(json!("acceptance_unsatisfied"));
    }
    if s.unknown > 0 {
        causes.push(json!("acceptance_unknown"));
    }
    let unresolved: Vec<Value> = p
        .acceptance
        .criteria
        .iter()
        .filter(|c| c.verdict != super::acceptance::Verdict::Satisfied)
        .map(|c| json!({ "id": c.id, "statement": c.statement, "status": c.verdict }))
        .collect();
    json!({
        "run_id": run_id, "status": p.run.status, "causes": causes, "error": p.run.error,
        "acceptance": s, "unresolved": unresolved,
    })
}

/// The open findings an attempt is started with: id, statement and who raised them.
pub fn findings_context(events: &[crate::work::WorkEvent], open: &[crate::work::Finding]) -> Value {
    let raised_by = |id: &str| {
        events.iter().rev().find_map(|e| match &e.kind {
            crate::work::EventKind::Reopened { findings }
                if findings.iter().any(|f| f.id == id) =>
            {
                Some(e.actor.clone())
            }
            _ => None,
        })
    };
    Value::Array(
        open.iter()
            .map(|f| json!({ "id": f.id, "statement": f.statement, "actor": raised_by(&f.id) }))
            .collect(),
    )
}

impl RunManifest {
    /// The first line the host writes to the workflow's stdin: the work, the attempt (with
    /// the prior attempt's synopsis on a retry and the open findings) and, for a resumed
    /// run, the approval it resumes on.
    pub fn start_line(
        &self,
        intent: &WorkIntent,
        attempt: AttemptContext,
        resume: Option<&str>,
    ) -> Value {
        let context = self.context.clone().unwrap_or_else(|| self.context_for(intent, attempt));
        json!({
            "op": "start",
            "run_id": self.run_id,
            "work": context["work"],
            "attempt": context["attempt"],
            "resume": resume.map(|approval| json!({ "approval_id": approval })),
        })
    }

    /// The work and attempt context of this run, as [`RunManifest::context`] freezes it.
    pub fn context_for(&self, intent: &WorkIntent, attempt: AttemptContext) -> Value {
        json!({
            "work": {
                "id": intent.id, "title": intent.title, "objective": intent.objective,
                "acceptance": intent.acceptance,
            },
            "attempt": {
                "number": self.attempt, "trigger": self.trigger, "prior": attempt.prior,
                "findings": attempt.findings,
            },
        })
    }
}

/// What an attempt is told besides its number and trigger.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttemptContext {
    /// The prior attempt's [`synopsis`], on a retry.
    pub prior: Option<Value>,
    /// The open findings ([`findings_context`]).
    pub findings: Value,
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
    /// The calls' tokens, turns and cost added up (calls answered from the transcript aside).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<super::adapter::Usage>,
    /// The frozen policy's digest and every decision it made, when the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<ProofPolicy>,
    /// What contained the run's processes (from its manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<super::containment::Containment>,
    /// The item's worktree as the run left it, under `--isolation worktree`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<super::workspace::Attestation>,
}

/// The policy part of a proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofPolicy {
    /// The frozen policy's digest.
    pub sha256: String,
    /// Every check, in order.
    pub decisions: Vec<PolicyRecord>,
}

/// One policy check of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRecord {
    /// Its position in the run (1, 2, …), which names its approval.
    pub slot: u32,
    /// What was asked.
    pub request: Request,
    /// What the rules said.
    pub evaluation: Evaluation,
    /// What happened: allow or deny (an `ask` becomes one of them through an approval).
    pub outcome: Verdict,
    /// The approval that ruled, for an `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

/// A run parked on an approval: the host records the request and stops the workflow; no
/// proof is written until the run is resumed and ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parked {
    /// The policy slot.
    pub slot: u32,
    /// What is asked.
    pub request: Request,
    /// Why.
    pub evaluation: Evaluation,
    /// The digest the ruling will be bound to.
    pub request_sha256: String,
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
    /// True when a resumed run answered it from the transcript instead of calling again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The vendor's session of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Its tokens, turns and cost, when the program reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<super::adapter::Usage>,
    /// Tool uses the program's permissions refused: work the agent meant to do and did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<super::adapter::Denial>,
    /// How long it took, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
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
        /// Identifies the call for the resume cache.
        key: String,
    },
    /// Policy asks a person: record the approval request, stop the workflow, write no proof.
    Park(Parked),
    /// Policy denied: stop the workflow; the proof fails with the reason.
    Stop,
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
    /// It could not be started; `missing` when the program does not exist. Nothing ran, so
    /// it is never charged: a missing program is an environment failure, anything else a run
    /// that did not start.
    SpawnFailed {
        /// The OS error.
        error: String,
        /// True for ENOENT: an environment failure.
        missing: bool,
    },
    /// The host ended it for an operator's stop (a bounded stop of the service, a stop of
    /// the harness it ran in): not charged.
    Interrupted {
        /// Whose stop, in words.
        by: String,
        /// Exit code, when it exited.
        code: Option<i32>,
        /// Signal, when one ended it.
        signal: Option<i32>,
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
    run_id: String,
    harness: Option<String>,
    max_agents: Option<u32>,
    dispatched: u32,
    team: Team,
    policy: Option<FrozenPolicy>,
    approval_to: Option<String>,
    /// Policy checks so far, counting calls answered from the resume cache.
    slot: u32,
    policy_log: Vec<PolicyRecord>,
    /// Rulings of this run's approvals, by slot: the request digest and the ruling.
    rulings: BTreeMap<u32, (String, Ruling)>,
    /// Replies of calls a parked run completed before it parked, by call key, in order.
    cache: BTreeMap<String, Vec<String>>,
    /// How often each call key was asked so far (the n-th ask gets the n-th cached reply).
    asked: BTreeMap<String, usize>,
    /// Request ids of calls an earlier segment started.
    started: std::collections::BTreeSet<String>,
    /// Policy checks an earlier segment recorded, by slot.
    earlier_checks: BTreeMap<u32, PolicyRecord>,
    /// What earlier segments spent, and the dispatching goal before this run.
    spent: super::policy::Spent,
    denied: Option<String>,
    /// The harness of each call in flight.
    in_flight: BTreeMap<String, String>,
    /// The worktree as the segment left it, attested by the host before the proof.
    attested: Option<super::workspace::Attestation>,
    requested: std::collections::BTreeSet<String>,
    calls: Vec<CallRecord>,
    declared: Vec<Criterion>,
    evidence: Vec<Evidence>,
    stages: Vec<String>,
    declined: Vec<String>,
    /// The first agent call declined because nothing could answer it (no harness).
    no_adapter: Option<String>,
    result: Option<(bool, Option<String>, Option<String>)>,
    blocked: Option<(String, Option<String>)>,
    protocol_error: Option<String>,
}

/// An agent call as the fold keeps it.
#[derive(Clone, Debug)]
struct CallRecord {
    id: String,
    harness: String,
    outcome: CallOutcome,
    cached: bool,
}

/// What a resumed run takes over from its earlier segments' transcript and approvals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResumeState {
    /// Distinct agent calls started so far (they count against the cap; a call the park cut
    /// short and the resumption starts again counts once).
    pub dispatched: u32,
    /// The request ids of those calls.
    pub started: std::collections::BTreeSet<String>,
    /// Policy checks recorded so far, by slot, so the proof keeps those a cached call skips.
    pub checks: BTreeMap<u32, PolicyRecord>,
    /// Replies of completed calls, by call key, in transcript order.
    pub cache: BTreeMap<String, Vec<String>>,
    /// Rulings of the run's approvals, by slot: the request digest and the ruling.
    pub rulings: BTreeMap<u32, (String, Ruling)>,
    /// What the completed calls of earlier segments spent.
    pub spent: super::policy::Spent,
}

impl RunFold {
    /// What the run has spent on agent calls so far (earlier segments included), and its
    /// goal before it: what a cost rule judges the next call by.
    pub fn spent(&self) -> super::policy::Spent {
        let mut spent = self.spent;
        for c in self.calls.iter().filter(|c| !c.cached) {
            match c.outcome.usage.as_ref().and_then(|u| u.cost_micro_usd) {
                Some(cost) => spent.run_micro_usd = spent.run_micro_usd.saturating_add(cost),
                // A call refused before it ran costs nothing; one that ran but did not say
                // counts as the policy says.
                None if c.outcome.class == Some(FailureClass::Environment) => {}
                None => spent.unknown_calls = spent.unknown_calls.saturating_add(1),
            }
        }
        spent
    }

    /// A fold whose agent calls go to their specialist's harness or the named default (a
    /// call neither names is declined).
    pub fn new(harness: Option<&str>, team: Team) -> RunFold {
        RunFold { harness: harness.map(str::to_owned), team, ..RunFold::default() }
    }

    /// Carries a parked run's completed calls, agent count and rulings into its resumption.
    pub fn resume(&mut self, state: ResumeState) {
        self.dispatched = state.dispatched;
        self.started = state.started;
        self.earlier_checks = state.checks;
        self.cache = state.cache;
        self.rulings = state.rulings;
        self.spent.run_micro_usd = state.spent.run_micro_usd;
        self.spent.unknown_calls = state.spent.unknown_calls;
    }

    /// Records what the host found in the item's worktree at the segment's end.
    pub fn attest(&mut self, attestation: super::workspace::Attestation) {
        self.attested = Some(attestation);
    }

    /// True once the workflow sent its `result`.
    pub fn has_result(&self) -> bool {
        self.result.is_some()
    }

    /// Every policy check so far, in order.
    pub fn policy_log(&self) -> &[PolicyRecord] {
        &self.policy_log
    }

    /// Takes one message (or the error reading it); returns what the host owes, if anything.
    /// Agent calls are answered from the resume cache, checked against the policy and the
    /// cap, and go to their specialist's harness or the run's; `authorize` is judged by the
    /// policy (without one, the host grants no authority and declines it). Declines are
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
            FromWorkflow::Agent { id, prompt, specialist, schema, continue_session } => {
                return Some(self.agent(id, &prompt, specialist, schema, continue_session));
            }
            FromWorkflow::Authorize { id, action, target } => {
                return Some(self.authorize(id, action, target));
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
        self.calls.push(CallRecord { id: id.to_owned(), harness, outcome, cached: false });
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
            ProcessEnd::Interrupted { code, signal, .. } => (*code, *signal, false),
            ProcessEnd::SpawnFailed { .. } => (None, None, false),
        };
        let mut class = None;
        let mut decision_id = None;
        let error = if let ProcessEnd::SpawnFailed { error, missing } = end {
            class =
                Some(if *missing { FailureClass::Environment } else { FailureClass::NotStarted });
            Some(format!("the workflow could not be started: {error}"))
        } else if let ProcessEnd::Interrupted { by, .. } = end {
            class = Some(FailureClass::Interrupted);
            Some(format!("interrupted by {by}"))
        } else if let Some(reason) = &self.denied {
            Some(format!("denied by policy: {reason}"))
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
        let mut error = error;
        if status == RunStatus::Failed && class.is_none() && !timed_out {
            let outcomes: Vec<CallOutcome> = self.calls.iter().map(|c| c.outcome.clone()).collect();
            class = run_class(&outcomes);
            // Say what the host lacks, with what to do about it, next to the workflow's words.
            if class == Some(FailureClass::Environment) {
                let why = outcomes.iter().find(|o| o.class == class).and_then(|o| o.error.clone());
                error = error.map(|e| match why {
                    Some(why) if !e.contains(&why) => format!("{e}; {why}"),
                    _ => e,
                });
            }
        }
        // A run that failed after an agent call found no adapter to answer it failed for a
        // host precondition, not for the work.
        let error = match (&self.no_adapter, status, class) {
            (Some(call), RunStatus::Failed, None) if !timed_out => {
                class = Some(FailureClass::Environment);
                error.map(|e| format!("{e}; {call}"))
            }
            _ => error,
        };
        let agents = self
            .calls
            .iter()
            .map(|c| AgentRecord {
                id: c.id.clone(),
                harness: c.harness.clone(),
                ok: c.outcome.ok,
                error: c.outcome.error.clone(),
                class: c.outcome.class,
                cached: c.cached,
                session_id: c.outcome.session_id.clone(),
                usage: c.outcome.usage.clone(),
                denials: c.outcome.denials.clone(),
                elapsed_ms: c.outcome.elapsed_ms,
            })
            .collect();
        let usage =
            self.calls.iter().filter(|c| !c.cached).filter_map(|c| c.outcome.usage.as_ref()).fold(
                None,
                |total: Option<super::adapter::Usage>, u| {
                    let mut total = total.unwrap_or_default();
                    total.add(u);
                    Some(total)
                },
            );
        let policy = self
            .policy
            .as_ref()
            .map(|p| ProofPolicy { sha256: p.sha256.clone(), decisions: self.policy_log.clone() });
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
        Proof {
            schema_version: RUN_VERSION,
            run,
            acceptance,
            evidence,
            stages,
            declined,
            agents,
            usage,
            policy,
            containment: m.containment.clone(),
            workspace: self.attested,
        }
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
/// `runner_live` is true while some process holds the item's run lease; `parked` names the
/// approval the run's transcript last parked on and whether it has been ruled on.
/// `started` is true when the run's transcript records its workflow starting: an attempt
/// that ended without a proof is lost only then, and otherwise never ran.
pub fn inspect(
    work_id: &Id,
    run_id: &Id,
    attempt: u32,
    records: (Option<&RunManifest>, Option<&Proof>),
    parked: Option<(&str, bool)>,
    started: super::transcript::Started,
    runner_live: bool,
) -> Result<AttemptStatus, String> {
    use super::transcript::Started;
    let (manifest, proof) = records;
    if let Some(m) = manifest {
        if m.work_id != *work_id || m.run_id != *run_id || m.attempt != attempt {
            return Err(format!(
                "run {run_id}'s manifest names {} attempt {} of run {}",
                m.work_id, m.attempt, m.run_id
            ));
        }
    }
    let Some(p) = proof else {
        return Ok(match parked {
            _ if runner_live => AttemptStatus::Running,
            Some((approval, decided)) => {
                AttemptStatus::Parked { approval_id: approval.to_owned(), decided }
            }
            None => match started {
                Started::Never => AttemptStatus::NotStarted,
                Started::Ran => AttemptStatus::Lost,
                Started::Interrupted => AttemptStatus::Failed {
                    class: Some(FailureClass::Interrupted),
                    decision_id: None,
                },
            },
        });
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
        policy: None,
        approval_to: None,
        concurrency: DEFAULT_CONCURRENCY,
        isolation: Isolation::Shared,
        cwd: None,
        context: None,
        goal_spent_micro_usd: None,
        workspace: None,
        containment: None,
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
        sha256: None,
    }
    .sealed();
    let mut reader = LineReader::default();
    let mut m = m;
    if how & 32 != 0 {
        // A policy that asks about pushes and denies large prompts, with or without an
        // approver: a stop must fail the run, a park must end the segment without a proof.
        let rules = r#"{"rules":[{"name":"p","on":"authorize","action":"push","verdict":"ask"},
            {"name":"big","on":"agent","prompt_bytes_over":64,"verdict":"deny"}]}"#;
        let policy = super::policy::parse_policy(rules.as_bytes()).expect("a valid policy");
        m.policy = Some(super::policy::FrozenPolicy::new(policy));
        m.approval_to = (how & 64 != 0).then(|| "ana".to_owned());
    }
    m.harness = (how & 16 != 0).then(|| FrozenHarness {
        name: "h".into(),
        spec: super::agent::resolve("codex", &BTreeMap::new()).expect("a preset"),
    });
    let mut fold = m.fold();
    let mut messages: Vec<_> = reader.feed(output);
    messages.extend(reader.finish());
    let mut stopped = false;
    for msg in messages {
        match fold.observe(msg.map_err(|e| e.to_string())) {
            Some(HostAction::Reply(reply)) => assert_eq!(reply["op"], "reply"),
            Some(HostAction::Park(parked)) => {
                assert!(m.approval_to.is_some(), "parks only with an approver");
                assert_eq!(m.approval_request(&parked, WallTime(1)).slot, parked.slot);
                return;
            }
            Some(HostAction::Stop) => {
                stopped = true;
                break;
            }
            Some(HostAction::CallAgent { id, .. }) => {
                let ok = how & 8 != 0;
                let class = (!ok).then_some(FailureClass::Upstream);
                let outcome = CallOutcome {
                    ok,
                    text: ok.then(String::new),
                    error: None,
                    class,
                    ..CallOutcome::default()
                };
                assert_eq!(fold.agent_done(&id, outcome)["id"], id.as_str());
            }
            None => {}
        }
    }
    let end = match how % 4 {
        0 => ProcessEnd::Exited { code: Some(0), signal: None, timed_out: false },
        1 => ProcessEnd::Exited { code: Some(0), signal: None, timed_out: true },
        2 => ProcessEnd::Exited { code: None, signal: Some(9), timed_out: false },
        3 => ProcessEnd::Interrupted { by: "an operator".into(), code: None, signal: Some(15) },
        _ => ProcessEnd::SpawnFailed { error: "ENOENT".into(), missing: how & 4 != 0 },
    };
    let proof = fold.finish(&m, &intent, &end, WallTime(5));
    assert!(!stopped || proof.run.status == RunStatus::Failed, "a policy stop fails the run");
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

mod gate;
#[cfg(test)]
mod tests;
