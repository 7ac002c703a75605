//! A run segment in the work world: a simulated host of the core's segment driver (the loop
//! `harn work run` runs) and the workflow it talks to, a simulated child process that makes
//! one agent call, asks to `authorize` a push, and gives its result. Faults are drawn: a
//! spawn that fails, a host killed mid-run, an operator's stop, a cancel, a timeout, a limit
//! of the run's own, and the agent's end.

use super::{injected, WorkWorld};
use crate::entropy::Entropy;
use harn_core::limits::LimitReached;
use harn_core::time::Instant;
use harn_core::work::approval::ApprovalRequest;
use harn_core::work::attempt::SegmentEnd;
use harn_core::work::events::EventKind;
use harn_core::work::ledger::Item;
use harn_core::work::live::LiveRun;
use harn_core::work::policy::Verdict;
use harn_core::work::protocol::{Evidence, EvidenceStatus, FromWorkflow};
use harn_core::work::run::{Parked, RunManifest};
use harn_core::work::segment::driver::{self, Call, SegmentEvent, SegmentSignal, SpawnFailed};
use serde_json::{Map, Value};
use std::collections::VecDeque;

/// Why a simulated segment ends without the driver's end.
#[derive(Debug)]
pub(super) enum Stop {
    /// The host is gone (killed, or cut short before the spawn was recorded).
    Abandoned,
    /// The simulation found something wrong.
    Failed(String),
}

impl From<harn_core::error::RecordError> for Stop {
    fn from(e: harn_core::error::RecordError) -> Stop {
        Stop::Failed(e.to_string())
    }
}

/// Where the simulated workflow is in its conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Script {
    /// Waits for its start line.
    Start,
    /// Asked for an agent call; waits for the reply.
    Agent,
    /// Asked to authorize a push; waits for the verdict.
    Authorize,
    /// Gave its result.
    Done,
}

/// One segment of a run in the work world.
pub(super) struct SimSegment<'w> {
    world: &'w mut WorkWorld,
    item: &'w Item,
    m: &'w RunManifest,
    /// The segment's own clock, from its spawn: the world's wall clock moves with every
    /// record.
    clock: Instant,
    /// What the workflow and its calls did, not yet seen by the driver.
    pending: VecDeque<SegmentEvent>,
    script: Script,
    /// True while the workflow says nothing until it is killed (a cancel, a timeout).
    silent: bool,
    alive: bool,
    /// True once the spawn's record was tried.
    spawn_recorded: bool,
    /// True when the run reached its memory limit.
    limited: bool,
    /// Set when the host dies at the next look.
    abandon: bool,
    /// What went wrong where the driver could not be told at once.
    failed: Option<String>,
    #[cfg(feature = "planted-bugs")]
    planted: Option<harn_core::planted::PlantedBug>,
}

impl<'w> SimSegment<'w> {
    pub(super) fn new(world: &'w mut WorkWorld, item: &'w Item, m: &'w RunManifest) -> Self {
        SimSegment {
            #[cfg(feature = "planted-bugs")]
            planted: world.planted_driver,
            world,
            item,
            m,
            clock: Instant::ZERO,
            pending: VecDeque::new(),
            script: Script::Start,
            silent: false,
            alive: false,
            spawn_recorded: false,
            limited: false,
            abandon: false,
            failed: None,
        }
    }

    /// The workflow says `msg`.
    fn says(&mut self, msg: FromWorkflow) {
        self.pending.push_back(SegmentEvent::Line(Ok(msg)));
    }

    /// The workflow gives its result and exits: one draw in twenty, the run fails its own
    /// way (a tenth), or reaches a limit of its cgroup (a twentieth: the OOM killer ended it,
    /// as the kernel counted).
    fn result(&mut self, ok: bool) {
        self.says(FromWorkflow::Result { ok, summary: None, error: None });
        self.script = Script::Done;
        let roll = self.world.entropy.below(20);
        if roll == 19 {
            self.world.summary.limited += 1;
            self.limited = true;
            self.dies();
        } else {
            self.exits(Some(if roll < 2 { 1 } else { 0 }), None);
        }
    }

    /// The workflow is killed.
    fn dies(&mut self) {
        self.exits(None, Some(9));
    }

    fn exits(&mut self, code: Option<i32>, signal: Option<i32>) {
        if std::mem::take(&mut self.alive) {
            self.pending.push_back(SegmentEvent::Exited { code, signal });
            self.pending.push_back(SegmentEvent::OutputEnded);
        }
    }

    /// Sometimes the host is killed here (`kill -9`): the workflow's descendants live on.
    fn host_dies(&mut self) -> Result<(), Stop> {
        if self.world.host_dies(&self.m.run_id) {
            return Err(Stop::Abandoned);
        }
        Ok(())
    }
}

impl driver::SegmentHost for SimSegment<'_> {
    type Error = Stop;

    fn now(&mut self) -> Instant {
        self.clock
    }

    fn begin(&mut self) -> Result<(), Stop> {
        let now = self.world.wall();
        let live = LiveRun {
            schema_version: harn_core::work::live::LIVE_VERSION,
            run_id: self.m.run_id.clone(),
            work_id: self.m.work_id.clone(),
            host_pid: 4242,
            cgroup: None,
            started_at: now,
            planning: false,
            job: None,
        };
        match self.world.ledger.begin_live(&live) {
            Ok(()) => Ok(()),
            Err(e) if injected(&e) => {
                self.world.summary.not_started += 1;
                self.world.not_started = true;
                Err(Stop::Abandoned)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// At its end the host kills what the segment started, then removes its record; a host
    /// killed mid-run does neither.
    fn end(&mut self, _: &Result<SegmentEnd, Stop>) -> Result<(), Stop> {
        if std::mem::take(&mut self.world.host_killed) {
            return Ok(());
        }
        self.world.processes.remove(&self.m.run_id);
        match self.world.ledger.end_live(&self.m.run_id) {
            Err(e) if !injected(&e) => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn earlier(&mut self) -> Vec<Value> {
        self.world.ledger.transcript(&self.m.run_id).unwrap_or_default()
    }

    /// The spawn: it may fail (no attempt ran), or it succeeds and the host records it before
    /// the workflow hears a word. IO faults armed before it end here, unless one is about to
    /// hit the record of the spawn itself.
    fn spawn(&mut self) -> Result<Result<Map<String, Value>, SpawnFailed>, Stop> {
        let w = &mut *self.world;
        if !w.entropy.chance(1, 4) {
            w.ledger.fs.cancel_fail_after();
        }
        if w.entropy.chance(1, 25) {
            w.ledger.fs.cancel_fail_after();
            w.summary.not_started += 1;
            w.not_started = true;
            let error = "fork: EAGAIN".to_owned();
            return Ok(Err(SpawnFailed { error, program: "/wf".into(), missing: false }));
        }
        // Spawned: from here the workflow runs, whether or not its record survives.
        if !w.killing {
            w.chargeable.insert(self.m.run_id.clone());
        }
        // The workflow and whatever it starts, in its own group, after setsid, as a daemon.
        let alive = if w.kill_hosts { 1 + w.entropy.below(4) as u32 } else { 1 };
        w.processes.insert(self.m.run_id.clone(), alive);
        self.alive = true;
        // Half the segments start where Landlock scopes signals (ABI 6 or later), so a host's
        // death before the result is not the work's; the rest where the workflow could signal
        // its host.
        let mut fields = Map::new();
        if w.entropy.chance(1, 2) {
            w.scoped.insert(self.m.run_id.clone());
            let c = serde_json::json!({ "holding": "cgroup", "landlock": 7, "confined": true });
            fields.insert("containment".into(), c);
        } else {
            w.scoped.remove(&self.m.run_id);
        }
        Ok(Ok(fields))
    }

    fn record(&mut self, body: Value) -> Result<(), Stop> {
        let now = self.world.wall();
        let recorded = self.world.ledger.append_transcript(&self.m.run_id, body, now);
        if std::mem::replace(&mut self.spawn_recorded, true) {
            return recorded.map(drop).map_err(Stop::from);
        }
        self.world.ledger.fs.cancel_fail_after();
        match recorded {
            Ok(_) => self.host_dies(),
            Err(e) if injected(&e) => {
                self.world.summary.not_started += 1;
                self.world.not_started = true;
                Err(Stop::Abandoned)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn send(&mut self, line: &Value) {
        match self.script {
            Script::Start => self.started(line),
            Script::Agent => {
                if line["ok"] == true {
                    let push = FromWorkflow::Authorize {
                        id: "z1".into(),
                        action: "push".into(),
                        target: Some("main".into()),
                    };
                    self.says(push);
                    self.script = Script::Authorize;
                } else {
                    self.result(false);
                }
            }
            Script::Authorize => {
                let evidence = Evidence {
                    kind: "review".into(),
                    status: EvidenceStatus::Passed,
                    label: "the agent answered".into(),
                    summary: None,
                    reference: None,
                    acceptance_ids: vec!["accept-1".into()],
                };
                self.says(FromWorkflow::Evidence(evidence));
                self.result(true);
            }
            Script::Done => {}
        }
    }

    fn next(&mut self, wake: Option<Instant>) -> Result<Option<SegmentEvent>, Stop> {
        if let Some(e) = self.failed.take() {
            return Err(Stop::Failed(e));
        }
        if std::mem::take(&mut self.abandon) {
            return Err(Stop::Abandoned);
        }
        if let Some(event) = self.pending.pop_front() {
            return Ok(Some(event));
        }
        match wake {
            // A silent workflow lets the segment's clock run to its next wake.
            Some(wake) if self.silent || !self.alive => {
                self.clock = self.clock.max(wake);
                Ok(None)
            }
            _ => Err(Stop::Failed(format!(
                "run {}: the driver waits on a workflow that has nothing to say",
                self.m.run_id
            ))),
        }
    }

    /// A signal reaches the simulated workflow: TERM is ignored, KILL ends it.
    fn signal(&mut self, signal: SegmentSignal) {
        if let SegmentSignal::Kill(_) = signal {
            self.dies();
        }
    }

    fn look_for_cancel(&mut self) -> Result<Option<String>, Stop> {
        let events = self.world.ledger.events(&self.item.intent.id)?;
        let found = harn_core::work::events::cancelled_during(&events, &self.m.run_id);
        Ok(found.map(|cancel| cancel.actor.clone()))
    }

    fn start_call(&mut self, call: Call) -> Result<(), Stop> {
        *self.world.processes.entry(self.m.run_id.clone()).or_default() += 1;
        self.host_dies()?;
        let outcome = self.world.draw_outcome();
        self.pending.push_back(SegmentEvent::AgentDone(call.id, outcome));
        Ok(())
    }

    fn park(
        &mut self,
        parked: &Parked,
    ) -> Result<Result<ApprovalRequest, harn_core::error::RecordError>, Stop> {
        let now = self.world.wall();
        match self.world.ledger.park(self.m, parked, now)? {
            Ok(request) => {
                self.world.summary.parked += 1;
                Ok(Ok(request))
            }
            Err(why) => Err(Stop::Failed(format!("a replayed request was refused: {why}"))),
        }
    }

    fn answer_tool(&mut self, _: &str, _: Verdict, _: Vec<String>) {}

    fn settle(&mut self, _: &str) {}

    /// The stop's record is written: the host kills the workflow, or is itself killed during
    /// the drain (no proof is written; the record alone keeps the run uncharged).
    fn interrupt_recorded(&mut self) {
        if self.world.entropy.chance(1, 3) {
            self.abandon = true;
        } else {
            self.dies();
        }
    }

    fn limits_reached(&mut self) -> Vec<LimitReached> {
        if !self.limited {
            return Vec::new();
        }
        let max = self.m.resource_limits.and_then(|l| l.memory).unwrap_or(1 << 30);
        vec![LimitReached::Memory { max, oom_kills: 1 }]
    }

    #[cfg(feature = "planted-bugs")]
    fn planted(&self) -> Option<harn_core::planted::PlantedBug> {
        self.planted
    }
}

impl SimSegment<'_> {
    /// The workflow heard its start line: an operator's forced stop may be reaching it, a
    /// person may cancel it, it may outlive its timeout (in a first segment: a resumed one
    /// carries calls whose classes decide its charge otherwise), or it asks for its agent.
    fn started(&mut self, start: &Value) {
        let w = &mut *self.world;
        if w.killing {
            w.stop_reached = true;
            w.summary.interrupted += 1;
            let by = "a bounded stop of the service".to_owned();
            self.pending.push_back(SegmentEvent::Interrupting(by));
            self.silent = true;
            return;
        }
        if w.remote && w.entropy.chance(1, 20) {
            // The step ends without its node saying how the workflow ended: the node died, or
            // a misconfigured cluster (one time in four) requeued the job and ran it again
            // elsewhere before the coordinator looked. The host asks the engine about the job
            // and the core judges what it says, as the real host does; either way it is the
            // engine's end of the step, never the work's.
            w.summary.engine_faults += 1;
            w.chargeable.remove(&self.m.run_id);
            let node = format!("n{}", 1 + w.entropy.below(3));
            let requeued = w.entropy.chance(1, 4);
            // Of the jobs not requeued, one in five is cancelled by the cluster's
            // administrator, and one in five is a step lost while its job completes (the
            // connection to the node broke), rather than lost with its node (no draw: the
            // seeds' paths stay).
            let state = match (requeued, w.summary.engine_faults % 5) {
                (true, _) => "RUNNING",
                (false, 4) => "CANCELLED",
                (false, 2) => "COMPLETED",
                (false, _) => "NODE_FAIL",
            };
            let job = harn_core::work::cluster::Job {
                id: format!("{}", 100 + w.summary.engine_faults),
                state: state.into(),
                reason: "NodeDown".into(),
                nodes: node,
                restarts: u32::from(requeued),
            };
            if requeued {
                w.requeued.insert(self.m.run_id.clone());
            }
            use harn_core::work::cluster::{ended_unannounced, Unannounced};
            match ended_unannounced(Some(&job), false, &job.id, &job.nodes) {
                Unannounced::Fault(fault) | Unannounced::Lost(fault) => {
                    self.pending.push_back(SegmentEvent::EngineFault(fault));
                }
                Unannounced::Own => {
                    self.failed = Some(format!("job {job:?} judged the work's own end"));
                }
            }
            self.dies();
            return;
        }
        if w.entropy.chance(1, 30) {
            w.summary.cancelled += 1;
            let now = w.wall();
            let id = &self.item.intent.id;
            if let Err(e) = w.ledger.append(id, EventKind::Cancelled, "ana", None, now) {
                self.failed = Some(e.to_string());
            }
            self.silent = true;
            return;
        }
        if start["resume"].is_null() && w.entropy.chance(1, 30) {
            w.summary.timed_out += 1;
            self.silent = true;
            return;
        }
        let agent = FromWorkflow::Agent {
            id: "a1".into(),
            prompt: self.item.intent.objective.clone(),
            specialist: None,
            schema: None,
            continue_session: false,
        };
        self.says(agent);
        self.script = Script::Agent;
    }
}
