//! A goal's planner and reviewers in the goal world: each call drawn (good and bad replies,
//! a vendor's refusal) and made as a planning run through the core's planning attempt
//! (`work::run::planning_attempt`, the order `harn supervisor tick` follows) and segment
//! driver, over the world's ledger, so a crash inside a planning run is recovered as the
//! binary recovers it. The host checks that no new run's manifest is on disk before its
//! lease is held.

use crate::entropy::{Entropy, SeededEntropy};
use crate::fs::SimFs;
use harn_core::error::RecordError;
use harn_core::goal::plan::{self, Specialists};
use harn_core::hash::sha256_hex;
use harn_core::ids::Id;
use harn_core::limits::LimitReached;
use harn_core::time::{Instant, WallTime};
use harn_core::work::agent::{resolve, CallOutcome};
use harn_core::work::approval::ApprovalRequest;
use harn_core::work::attempt::SegmentEnd;
use harn_core::work::ledger::Ledger;
use harn_core::work::live::LiveRun;
use harn_core::work::policy::Verdict;
use harn_core::work::protocol::FromWorkflow;
use harn_core::work::run::planning::{self, PlanningStep};
use harn_core::work::run::planning_attempt::{run_planning, PlanningHost};
use harn_core::work::run::{Billing, FrozenAdapter, Parked, RunFold, RunManifest, RUN_VERSION};
use harn_core::work::segment::driver::{self, Call, SegmentEvent, SegmentSignal, SpawnFailed};
use harn_core::work::team::{Specialist, Team};
use harn_core::work::{FailureClass, WorkflowRef};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, VecDeque};

/// Simulated planner and reviewers.
pub(super) struct SimSpecialists<'a> {
    pub(super) entropy: &'a mut SeededEntropy,
    /// The world's wall clock.
    pub(super) now: &'a mut i64,
    /// The goal the calls are for.
    pub(super) goal: Id,
    pub(super) calls: u32,
    /// Whether a crash may be armed after each call (faults on, none armed for the step).
    pub(super) crash_after_calls: bool,
    /// A broken promise the host saw, for the world's next check.
    pub(super) broken: &'a mut Option<String>,
    #[cfg(feature = "planted-bugs")]
    pub(super) planted: Option<harn_core::planted::PlantedBug>,
}

impl Specialists<SimFs> for SimSpecialists<'_> {
    fn call(&mut self, ledger: &mut Ledger<SimFs>, ask: &plan::Ask<'_>) -> plan::Called {
        let reply = self.reply(ask.role, ask.label);
        let step = PlanningStep {
            goal: self.goal.clone(),
            plan: ask.plan.to_owned(),
            step: ask.step,
            role: ask.role.to_owned(),
            label: ask.label.to_owned(),
            prompt_sha256: sha256_hex(ask.prompt.as_bytes()),
        };
        let outcome = match reply {
            Ok(text) => CallOutcome::replied(text),
            Err((class, why)) => CallOutcome::failed(why, class),
        };
        let request = planning::request(ask.role, ask.prompt, ask.schema);
        let mut host = SimPlanning { s: self, ledger, request, outcome, fresh: None };
        let harness = Some("sim".to_owned());
        let called = match run_planning(&mut host, &step) {
            Ok((run, outcome)) => plan::Called { harness, outcome, run_id: Some(run.to_string()) },
            Err(e) => plan::Called { harness, outcome: CallOutcome::failed(e, None), run_id: None },
        };
        if self.crash_after_calls && !ledger.fs.is_crashed() && self.entropy.chance(1, 4) {
            ledger.fs.crash_after(self.entropy.below(16));
            self.crash_after_calls = false;
        }
        called
    }

    fn workflow_digest(&mut self, _path: &str) -> Result<String, RecordError> {
        Ok("0".repeat(64))
    }
}

impl SimSpecialists<'_> {
    fn wall(&mut self) -> WallTime {
        *self.now += 1 + self.entropy.below(1_000) as i64;
        WallTime(*self.now)
    }

    fn reply(&mut self, role: &str, label: &str) -> Result<String, (Option<FailureClass>, String)> {
        self.calls += 1;
        let n = self.entropy.below(10);
        if role == "reviewer" {
            return Ok(match n {
                0..=5 => r#"{"verdict":"approve","rationale":"sound","findings":[]}"#.into(),
                6..=8 => r#"{"verdict":"revise","rationale":"tighten","findings":[{"code":"vague","severity":"blocking","summary":"vague","recommendation":"be precise"}]}"#.into(),
                _ => r#"{"verdict":"attention","rationale":"unsure","findings":[]}"#.into(),
            });
        }
        let key = format!("fix{}", self.calls);
        let item = |k: &str, deps: &str| {
            format!(
                r#"{{"key":"{k}","title":"Fix {k}","objective":"make {k} work","acceptance":["it works"],"dependencies":[{deps}],"template":"ship"}}"#
            )
        };
        match n {
            0..=5 => Ok(format!(
                r#"{{"decision":"apply","rationale":"{label}: replace the stuck root","work":[{}]}}"#,
                item(&key, "")
            )),
            6 => {
                Ok(r#"{"decision":"attention","rationale":"a person should look","work":[]}"#
                    .into())
            }
            7 => Ok(format!(
                r#"{{"decision":"apply","rationale":"two roots","work":[{},{}]}}"#,
                item("a", ""),
                item("b", "")
            )),
            8 => Err((Some(FailureClass::Upstream), "rate limit".into())),
            _ => Ok("I am not sure what to do".into()),
        }
    }
}

/// The planning attempt's host for one call.
struct SimPlanning<'s, 'a> {
    s: &'s mut SimSpecialists<'a>,
    ledger: &'s mut Ledger<SimFs>,
    /// The one request the run's workflow makes.
    request: Value,
    /// How the call ends when it is made.
    outcome: CallOutcome,
    /// The run id this attempt drew for a new run.
    fresh: Option<Id>,
}

impl PlanningHost for SimPlanning<'_, '_> {
    type Fs = SimFs;
    type Error = String;

    fn ledger(&mut self) -> &mut Ledger<SimFs> {
        self.ledger
    }

    fn now(&mut self) -> WallTime {
        self.s.wall()
    }

    /// Reaps what a host a crash killed left running: no process outlives a crash here.
    fn recover(&mut self) -> Result<(), String> {
        let now = self.s.wall();
        harn_core::work::live::recover(self.ledger, &mut |_| true, &mut |_| 0, now)?;
        Ok(())
    }

    fn new_run_id(&mut self) -> Id {
        let id = Id::new(&format!("wf-plan-{:012x}", self.s.entropy.below(1 << 48)))
            .expect("a valid id");
        self.fresh = Some(id.clone());
        id
    }

    fn lease(&mut self, _goal: &Id, run: &Id) -> Result<bool, String> {
        let manifest = format!("{}/run.json", harn_core::layout::run_dir(run));
        let written = harn_core::env::Fs::read(&mut self.ledger.fs, &manifest);
        if self.fresh.as_ref() == Some(run) && matches!(written, Ok(Some(_))) {
            self.s.broken.get_or_insert(format!(
                "the manifest of new planning run {run} was on disk before its lease was held"
            ));
        }
        Ok(true)
    }

    fn prepare(&mut self, run_id: &Id, step: &PlanningStep) -> Result<RunManifest, String> {
        let spec = resolve("codex", &BTreeMap::new()).expect("a preset");
        let mut team = Team::new();
        team.insert(step.role.clone(), Specialist::default());
        Ok(RunManifest {
            schema_version: RUN_VERSION,
            run_id: run_id.clone(),
            work_id: step.goal.clone(),
            attempt: 1,
            trigger: harn_core::work::Trigger::Initial,
            started_at: self.s.wall(),
            script: WorkflowRef { path: "/plan-workflow".into(), sha256: "0".repeat(64) },
            timeout_ms: 1_000,
            adapter: Some(FrozenAdapter { name: "sim".into(), spec }),
            team,
            adapters: BTreeMap::new(),
            max_agents: Some(1),
            billing: Billing::Subscription,
            policy: None,
            approval_to: None,
            concurrency: 1,
            isolation: harn_core::work::run::Isolation::Shared,
            cwd: None,
            context: None,
            goal_spent_micro_usd: None,
            workspace: None,
            planning: Some(step.clone()),
            containment: None,
            resource_limits: None,
            cluster: None,
            network: None,
        })
    }

    fn segment(
        &mut self,
        m: &RunManifest,
        start: &Value,
        fold: RunFold,
    ) -> Result<SegmentEnd, String> {
        let mut host =
            PlanSegment { p: self, m, pending: VecDeque::new(), alive: false, asked: false };
        driver::run_segment(&mut host, m, start, fold)
    }

    #[cfg(feature = "planted-bugs")]
    fn planted(&self) -> Option<harn_core::planted::PlantedBug> {
        self.s.planted
    }
}

/// One segment of a planning run: the simulated one-call workflow (it reads its start line,
/// asks for the call, and gives a result that says whether the reply was usable).
struct PlanSegment<'p, 's, 'a> {
    p: &'p mut SimPlanning<'s, 'a>,
    m: &'p RunManifest,
    pending: VecDeque<SegmentEvent>,
    alive: bool,
    /// True once the workflow asked for its call.
    asked: bool,
}

impl PlanSegment<'_, '_, '_> {
    fn exits(&mut self, code: Option<i32>, signal: Option<i32>) {
        if std::mem::take(&mut self.alive) {
            self.pending.push_back(SegmentEvent::Exited { code, signal });
            self.pending.push_back(SegmentEvent::OutputEnded);
        }
    }
}

impl driver::SegmentHost for PlanSegment<'_, '_, '_> {
    type Error = String;

    fn now(&mut self) -> Instant {
        Instant::ZERO
    }

    fn begin(&mut self) -> Result<(), String> {
        let live = LiveRun {
            schema_version: harn_core::work::live::LIVE_VERSION,
            run_id: self.m.run_id.clone(),
            work_id: self.m.work_id.clone(),
            host_pid: 4243,
            cgroup: None,
            started_at: self.p.s.wall(),
            planning: true,
            job: None,
        };
        Ok(self.p.ledger.begin_live(&live)?)
    }

    fn end(&mut self, _: &Result<SegmentEnd, String>) -> Result<(), String> {
        Ok(self.p.ledger.end_live(&self.m.run_id)?)
    }

    fn earlier(&mut self) -> Vec<Value> {
        self.p.ledger.transcript(&self.m.run_id).unwrap_or_default()
    }

    fn spawn(&mut self) -> Result<Result<Map<String, Value>, SpawnFailed>, String> {
        self.alive = true;
        Ok(Ok(Map::new()))
    }

    fn record(&mut self, body: Value) -> Result<(), String> {
        let now = self.p.s.wall();
        self.p.ledger.append_transcript(&self.m.run_id, body, now)?;
        Ok(())
    }

    fn send(&mut self, line: &Value) {
        if !std::mem::replace(&mut self.asked, true) {
            let request = serde_json::from_value::<FromWorkflow>(self.p.request.clone());
            self.pending.push_back(SegmentEvent::Line(Ok(request.expect("a planning request"))));
            return;
        }
        if line["op"] == "reply" {
            let ok = line["ok"] == true;
            let error = (!ok).then(|| "the specialist gave no usable reply".to_owned());
            let summary = ok.then(|| "the specialist replied".to_owned());
            let result = FromWorkflow::Result { ok, summary, error };
            self.pending.push_back(SegmentEvent::Line(Ok(result)));
            self.exits(Some(0), None);
        }
    }

    fn next(&mut self, wake: Option<Instant>) -> Result<Option<SegmentEvent>, String> {
        match self.pending.pop_front() {
            Some(event) => Ok(Some(event)),
            None if wake.is_some() && !self.alive => Ok(None),
            None => Err(format!("planning run {}: its workflow has nothing to say", self.m.run_id)),
        }
    }

    fn signal(&mut self, signal: SegmentSignal) {
        if let SegmentSignal::Kill(_) = signal {
            self.exits(None, Some(9));
        }
    }

    fn look_for_cancel(&mut self) -> Result<Option<String>, String> {
        Ok(None)
    }

    fn start_call(&mut self, call: Call) -> Result<(), String> {
        let outcome = self.p.outcome.clone();
        self.pending.push_back(SegmentEvent::AgentDone(call.id, outcome));
        Ok(())
    }

    fn park(&mut self, _: &Parked) -> Result<Result<ApprovalRequest, RecordError>, String> {
        Ok(Err(RecordError::refused("a planning run names no approver")))
    }

    fn answer_tool(&mut self, _: &str, _: Verdict, _: Vec<String>) {}

    fn settle(&mut self, _: &str) {}

    fn interrupt_recorded(&mut self) {}

    fn limits_reached(&mut self) -> Vec<LimitReached> {
        Vec::new()
    }
}
