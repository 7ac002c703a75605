//! The fold of the workflow's messages into the replies the host owes and the proof: what
//! each request asks of the host, how the process ended, and what a resume takes over.

use super::planning;
use super::*;

/// What the host must do for a message.
#[derive(Clone, Debug, PartialEq)]
pub enum HostAction {
    /// Write this reply to the workflow.
    Reply(Value),
    /// Run an agent call as dispatched, then hand its outcome to [`RunFold::agent_done`].
    CallAgent {
        /// The request id.
        id: String,
        /// Which adapter, prompt and limits.
        dispatch: Dispatch,
        /// Identifies the call for the resume cache.
        key: String,
    },
    /// Policy asks a person: record the approval request, stop the workflow, write no proof.
    Park(Parked),
    /// Policy denied: stop the workflow; the proof fails with the reason.
    Stop,
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
    /// the adapter it ran in): not charged.
    Interrupted {
        /// Whose stop, in words.
        by: String,
        /// Exit code, when it exited.
        code: Option<i32>,
        /// Signal, when one ended it.
        signal: Option<i32>,
    },
    /// The engine that ran it on a cluster ended it (see [`FailureClass::Infrastructure`]):
    /// not charged.
    EngineFault {
        /// What the engine did, in words (`node n2 failed`, `job 41 preempted`).
        fault: String,
        /// Exit code, when it exited.
        code: Option<i32>,
        /// Signal, when one ended it.
        signal: Option<i32>,
    },
    /// It exited or was killed while its run had reached a limit of its cgroup (the kernel
    /// counted an OOM kill or refused forks): a failure of its own, charged, with the figure.
    LimitReached {
        /// Exit code, when it exited.
        code: Option<i32>,
        /// Signal, when one ended it.
        signal: Option<i32>,
        /// What was reached.
        reached: Vec<crate::limits::LimitReached>,
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
    pub(super) team: Team,
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
    spent: crate::work::policy::Spent,
    denied: Option<String>,
    /// The adapter of each call in flight.
    in_flight: BTreeMap<String, String>,
    /// The worktree as the segment left it, attested by the host before the proof.
    attested: Option<crate::work::workspace::Attestation>,
    requested: std::collections::BTreeSet<String>,
    calls: Vec<CallRecord>,
    declared: Vec<Criterion>,
    evidence: Vec<Evidence>,
    /// The evidence past the cap: counted toward the verdicts, not kept.
    cut: crate::work::acceptance::Cut,
    stages: Vec<String>,
    declined: Vec<String>,
    /// The first agent call declined because nothing could answer it (no adapter).
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
    pub spent: crate::work::policy::Spent,
}

impl RunFold {
    /// What a failed result said, when it said anything (an empty error says nothing).
    fn result_error(&self) -> Option<String> {
        match &self.result {
            Some((false, _, Some(e))) if !e.trim().is_empty() => Some(e.clone()),
            _ => None,
        }
    }

    /// What the run has spent on agent calls so far (earlier segments included), and its
    /// goal before it: what a cost rule judges the next call by.
    pub fn spent(&self) -> crate::work::policy::Spent {
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

    /// A fold whose agent calls go to their specialist's adapter or the named default (a
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
    pub fn attest(&mut self, attestation: crate::work::workspace::Attestation) {
        self.attested = Some(attestation);
    }

    /// True once the workflow sent its `result`.
    pub(crate) fn has_result(&self) -> bool {
        self.result.is_some()
    }

    /// Every policy check so far, in order.
    pub(crate) fn policy_log(&self) -> &[PolicyRecord] {
        &self.policy_log
    }

    /// Takes one message (or the error reading it); returns what the host owes, if anything.
    /// Agent calls are answered from the resume cache, checked against the policy and the
    /// cap, and go to their specialist's adapter or the run's; `authorize` is judged by the
    /// policy (without one, the host grants no authority and declines it). Declines are
    /// recorded in the proof.
    pub fn observe(
        &mut self,
        msg: Result<FromWorkflow, crate::work::protocol::ProtocolError>,
    ) -> Option<HostAction> {
        let msg = match msg {
            Ok(m) => m,
            Err(e) => {
                self.protocol_error.get_or_insert(e.to_string());
                return None;
            }
        };
        match msg {
            FromWorkflow::Meta { acceptance } => self.declared.extend(acceptance),
            FromWorkflow::Evidence(e) => {
                use crate::work::acceptance::{bounded, EVIDENCE_KEPT};
                if self.evidence.len() < EVIDENCE_KEPT {
                    self.evidence.push(bounded(e));
                } else {
                    let bytes = serde_json::to_vec(&e).map_or(0, |b| b.len() as u64);
                    self.cut.add(&e, bytes);
                }
            }
            FromWorkflow::Stage { name } if self.stages.len() < STAGES_KEPT => {
                self.stages.push(tail(&name, 200))
            }
            FromWorkflow::Stage { .. } => {}
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
    pub(crate) fn agent_done(&mut self, id: &str, outcome: CallOutcome) -> Value {
        let reply = match (&outcome.text, &outcome.error) {
            (Some(text), _) if outcome.ok => {
                json!({ "op": "reply", "id": id, "ok": true, "text": text })
            }
            (_, error) => {
                let mut reply = json!({
                    "op": "reply", "id": id, "ok": false, "error": error, "class": outcome.class,
                });
                // A workflow may plan around a usage limit's reset (unix ms, as in the proof).
                if let Some(at) = outcome.resets_at {
                    reply["resets_at"] = json!(at);
                }
                reply
            }
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
            ProcessEnd::EngineFault { code, signal, .. } => (*code, *signal, false),
            ProcessEnd::LimitReached { code, signal, .. } => (*code, *signal, false),
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
        } else if let ProcessEnd::EngineFault { fault, .. } = end {
            class = Some(FailureClass::Infrastructure);
            Some(format!("ended by its cluster: {fault}"))
        } else if let Some(reason) = &self.denied {
            Some(format!("{POLICY_STOPPED}: {reason}"))
        } else if timed_out {
            Some(format!("timed out after {} ms and was killed", m.timeout_ms))
        } else if let Some((reason, decision)) = &self.blocked {
            class = Some(FailureClass::Decision);
            decision_id = Some(decision.clone().unwrap_or_default());
            Some(format!("blocked: {reason}"))
        } else if let Some(e) = &self.protocol_error {
            Some(e.clone())
        } else if exit_code != Some(0) {
            let exit = match (exit_code, signal) {
                (Some(c), _) => format!("the workflow exited with code {c}"),
                (None, Some(s)) => format!("the workflow was killed by signal {s}"),
                (None, None) => "the workflow ended without an exit status".into(),
            };
            // A failed result that says why (a `.mjs` workflow's thrown message) comes first:
            // it is what a retry's `ctx.attempt.prior.error` and the operator need to read.
            Some(match self.result_error() {
                Some(said) => format!("{said} ({exit})"),
                None => exit,
            })
        } else {
            match &self.result {
                None => Some("the workflow exited without a result".into()),
                Some((false, _, _)) => {
                    Some(self.result_error().unwrap_or_else(|| "result: not ok".into()))
                }
                Some((true, _, _)) => None,
            }
        };
        let status = if error.is_none() { RunStatus::Succeeded } else { RunStatus::Failed };
        let mut error = error;
        // The run's timeout reached while a call was waiting on a vendor that never answered
        // charges nothing, as the call's own watchdog would not have: the attempt stays
        // uncharged when no call did real work.
        let outcomes: Vec<CallOutcome> = self.calls.iter().map(|c| c.outcome.clone()).collect();
        let waiting = outcomes.iter().find(|o| o.stopped && o.class.is_some());
        if let (true, Some(call), Some(outage)) = (timed_out, waiting, run_class(&outcomes)) {
            class = Some(outage);
            let why = call.error.clone().unwrap_or_default();
            error = error.map(|e| format!("{e}; {why}"));
        }
        if status == RunStatus::Failed && class.is_none() && !timed_out {
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
        // A run that failed at a limit of its own failed for what it consumed: the limit
        // and the figure the kernel counted say why, whatever else it said.
        let error = match (end, status) {
            (ProcessEnd::LimitReached { reached, .. }, RunStatus::Failed) => {
                class = Some(FailureClass::Resource);
                let said: Vec<String> = reached.iter().map(|r| r.to_string()).collect();
                error.map(|e| format!("{e}; {}", said.join("; ")))
            }
            _ => error,
        };
        let agents = self
            .calls
            .iter()
            .map(|c| AgentRecord {
                id: c.id.clone(),
                adapter: c.harness.clone(),
                ok: c.outcome.ok,
                error: c.outcome.error.clone(),
                class: c.outcome.class,
                cached: c.cached,
                session_id: c.outcome.session_id.clone(),
                usage: c.outcome.usage.clone(),
                denials: c.outcome.denials.clone(),
                elapsed_ms: c.outcome.elapsed_ms,
                resets_at: c.outcome.resets_at,
            })
            .collect();
        let usage =
            self.calls.iter().filter(|c| !c.cached).filter_map(|c| c.outcome.usage.as_ref()).fold(
                None,
                |total: Option<crate::work::adapter::Usage>, u| {
                    let mut total = total.unwrap_or_default();
                    total.add(u);
                    Some(total)
                },
            );
        let policy = self
            .policy
            .as_ref()
            .map(|p| ProofPolicy { sha256: p.sha256.clone(), decisions: self.policy_log.clone() });
        let acceptance = roll_up(
            &intent.acceptance,
            &self.declared,
            &self.evidence,
            &self.cut,
            intent.strict_acceptance,
        );
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
        let planning = m.planning.clone().map(|step| {
            let outcomes: Vec<&CallOutcome> = self.calls.iter().map(|c| &c.outcome).collect();
            PlanningProof { step, reply_sha256: planning::reply_sha256(&outcomes) }
        });
        let (evidence, stages, declined) = (self.evidence, self.stages, self.declined);
        let evidence_cut = (!self.cut.is_empty())
            .then(|| crate::work::acceptance::Cut { cited: Default::default(), ..self.cut });
        Proof {
            schema_version: RUN_VERSION,
            run,
            acceptance,
            evidence,
            evidence_cut,
            stages,
            declined,
            agents,
            usage,
            policy,
            containment: m.containment.clone(),
            workspace: self.attested,
            planning,
        }
    }
}

/// Most stages a proof keeps (each at most 200 bytes).
const STAGES_KEPT: usize = 500;

/// The last `max` bytes of `s`, cut on a character boundary.
pub(super) fn tail(s: &str, max: usize) -> String {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_owned()
}

/// A run manifest of attempt 1 of work item `w1` (run `wf-1`) with nothing frozen beyond its
/// script: what the fuzz body and the tests fold runs against.
#[doc(hidden)]
pub(crate) fn sample_manifest(script: WorkflowRef, started_at: WallTime) -> RunManifest {
    RunManifest {
        schema_version: RUN_VERSION,
        run_id: Id::new("wf-1").expect("a valid id"),
        work_id: Id::new("w1").expect("a valid id"),
        attempt: 1,
        trigger: Trigger::Initial,
        started_at,
        script,
        timeout_ms: 1_000,
        adapter: None,
        team: Team::new(),
        adapters: BTreeMap::new(),
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
        planning: None,
        resource_limits: None,
        cluster: None,
        network: None,
        containment: None,
    }
}

/// Fuzz body: a workflow's arbitrary output through the reader and the fold, ended in a way
/// chosen by the first byte. Never panics; a proof that passes always comes from a run that
/// exited 0 in time with an `ok` result; a timeout or a spawn failure never succeeds; the
/// proof survives a JSON round trip.
pub fn fuzz_run_fold(data: &[u8]) {
    use crate::work::protocol::LineReader;
    let Some((&how, output)) = data.split_first() else { return };
    let intent_id = Id::new("w1").expect("a valid id");
    let script = WorkflowRef { path: "/wf".into(), sha256: "0".repeat(64) };
    let m = sample_manifest(script.clone(), WallTime(0));
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
        strict_acceptance: false,
        source: None,
    }
    .sealed();
    let mut reader = LineReader::default();
    let mut m = m;
    if how & 32 != 0 {
        // A policy that asks about pushes and denies large prompts, with or without an
        // approver: a stop must fail the run, a park must end the segment without a proof.
        let rules = r#"{"rules":[{"name":"p","on":"authorize","action":"push","verdict":"ask"},
            {"name":"big","on":"agent","prompt_bytes_over":64,"verdict":"deny"}]}"#;
        let policy = crate::work::policy::parse_policy("policy.jsonc", rules.as_bytes())
            .expect("a valid policy");
        m.policy = Some(crate::work::policy::FrozenPolicy::new(policy));
        m.approval_to = (how & 64 != 0).then(|| "ana".to_owned());
    }
    m.adapter = (how & 16 != 0).then(|| FrozenAdapter {
        name: "h".into(),
        spec: crate::work::agent::resolve("codex", &BTreeMap::new()).expect("a preset"),
    });
    let mut fold = m.fold();
    let mut messages: Vec<_> = reader.feed(output);
    messages.extend(reader.finish());
    let mut stopped = false;
    for msg in messages {
        match fold.observe(msg) {
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

impl RunManifest {
    /// A fold for this run: its team, its default adapter, its caps and policy.
    pub fn fold(&self) -> RunFold {
        let mut fold =
            RunFold::new(self.adapter.as_ref().map(|h| h.name.as_str()), self.team.clone());
        fold.max_agents = self.max_agents;
        fold.policy = self.policy.clone();
        fold.run_id = self.run_id.to_string();
        fold.approval_to = self.approval_to.clone();
        fold.spent.goal_before_micro_usd = self.goal_spent_micro_usd;
        fold
    }
}

mod gate;
pub use gate::ToolJudged;
