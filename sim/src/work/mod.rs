//! Work attempts under crashes: the core's work ledger (the code the binary runs) over the
//! faulty filesystem, with simulated workflows and agent calls, policy asks and approvals,
//! and a crash armed at a drawn filesystem call before each operator action. After every
//! action (and every crash) the checker holds the ledger to its promises: every
//! acknowledged event and record is still there, unchanged; every item still reads; no
//! operator action started more than one attempt; budgets hold; a run never has a proof
//! while parked; a resumed run is the same run and attempt. A final phase without faults
//! requires every item to come to rest.

pub mod land;
mod segment;

use crate::actions::{ActionLog, WorldOptions};
use crate::entropy::{Entropy, SeededEntropy};
use crate::fs::SimFs;
use harn_core::env::{Fs, FsErrorKind};
use harn_core::error::RecordError;
use harn_core::ids::Id;
use harn_core::time::WallTime;
use harn_core::work::agent::{resolve, CallOutcome};
use harn_core::work::approval::Ruling;
use harn_core::work::attempt::{run_attempt, AttemptEnded, AttemptHost, SegmentEnd};
use harn_core::work::events::{EventKind, WorkEvent};
use harn_core::work::intent::INTENT_VERSION;
use harn_core::work::ledger::{work_dir, Item, Known, Ledger, Refusal};
use harn_core::work::live::LiveRun;
use harn_core::work::policy::{parse_policy, FrozenPolicy};
use harn_core::work::projection::{NextAction, WorkState};
use harn_core::work::run::{Billing, FrozenAdapter, RunFold, RunManifest, RUN_VERSION};
use harn_core::work::segment::driver;
use harn_core::work::team::Team;
use harn_core::work::transcript;
use harn_core::work::{WorkIntent, WorkflowRef};
use std::collections::BTreeMap;

/// What one seed did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkSimSummary {
    /// Operator actions taken.
    pub actions: u64,
    /// Crashes applied.
    pub crashes: u64,
    /// Attempts started.
    pub attempts: u64,
    /// Runs parked on an approval.
    pub parked: u64,
    /// Parked runs resumed.
    pub resumed: u64,
    /// Proofs written.
    pub proofs: u64,
    /// Items accepted.
    pub accepted: u64,
    /// Histories damaged whole by a foreign writer (a complete final line changed).
    pub damaged: u64,
    /// Starts an IO fault or a failed spawn kept from running their workflow.
    pub not_started: u64,
    /// Runs an operator's forced stop interrupted.
    pub interrupted: u64,
    /// Remote segments the cluster's engine ended (a node that died under them).
    pub engine_faults: u64,
    /// Runs a person cancelled while they ran.
    pub cancelled: u64,
    /// Runs that outlived their timeout.
    pub timed_out: u64,
    /// Agent calls that went silent and the watchdog ended.
    pub silent_calls: u64,
    /// Runs that reached a resource limit of their cgroup.
    pub limited: u64,
    /// Hosts killed mid-run, leaving the run's processes alive.
    pub hosts_killed: u64,
    /// Runs a later runner reaped.
    pub reaped: u64,
}

impl WorkSimSummary {
    /// Adds another seed's counts.
    pub fn add(&mut self, other: &WorkSimSummary) {
        self.actions += other.actions;
        self.crashes += other.crashes;
        self.attempts += other.attempts;
        self.parked += other.parked;
        self.resumed += other.resumed;
        self.proofs += other.proofs;
        self.accepted += other.accepted;
        self.damaged += other.damaged;
        self.not_started += other.not_started;
        self.interrupted += other.interrupted;
        self.engine_faults += other.engine_faults;
        self.cancelled += other.cancelled;
        self.timed_out += other.timed_out;
        self.silent_calls += other.silent_calls;
        self.limited += other.limited;
        self.hosts_killed += other.hosts_killed;
        self.reaped += other.reaped;
    }
}

/// True for a fault the simulated filesystem injected (EIO, ENOSPC) rather than a crash or a
/// real failure: the call failed with no effect, and the host lives on.
fn injected(e: &RecordError) -> bool {
    matches!(e, RecordError::Fs(f) if matches!(f.kind, FsErrorKind::Io | FsErrorKind::NoSpace))
}

/// Actions in the faulty phase.
pub(crate) const FAULTY_ACTIONS: u64 = 60;
/// Actions the fault-free phase may take to bring every item to rest.
const CALM_ACTIONS: u64 = 80;

/// Runs one seed; the error names the first invariant broken and the action that broke it.
pub fn run_work_seed(seed: u64) -> Result<WorkSimSummary, String> {
    let options = WorldOptions::new(FAULTY_ACTIONS);
    run_work(seed, options, &mut ActionLog::new(false))
}

/// Runs one seed with `options`, recording each action's outcome in `log`.
pub fn run_work(
    seed: u64,
    options: WorldOptions,
    log: &mut ActionLog,
) -> Result<WorkSimSummary, String> {
    let mut w = WorkWorld::new(seed);
    w.kill_hosts = true;
    w.crashes = options.crashes;
    crate::actions::plant(&mut w.ledger.fs, options.bug);
    #[cfg(feature = "planted-bugs")]
    match options.bug {
        Some(crate::harness::options::InjectedBug::ResumeAsStart) => {
            w.planted_driver = Some(harn_core::planted::PlantedBug::ResumeAsStart);
        }
        Some(crate::harness::options::InjectedBug::FaultAsExit) => {
            w.planted_driver = Some(harn_core::planted::PlantedBug::FaultAsExit);
        }
        _ => {}
    }
    // Two independent items and one that depends on the first.
    w.setup(&[("w1", &[]), ("w2", &[]), ("w3", &["w1"])]);
    for _ in 0..options.faulty {
        let acted = w.action(true);
        log.record(&w.ledger.fs);
        acted?;
    }
    for _ in 0..CALM_ACTIONS {
        if w.at_rest()? {
            return Ok(w.summary);
        }
        let acted = w.action(false);
        log.record(&w.ledger.fs);
        acted?;
    }
    match w.at_rest()? {
        true => Ok(w.summary),
        false => {
            Err(format!("seed {seed}: items not at rest after the calm phase: {}", w.states()?))
        }
    }
}

pub(crate) struct WorkWorld {
    pub(crate) seed: u64,
    pub(crate) ledger: Ledger<SimFs>,
    pub(crate) entropy: SeededEntropy,
    pub(crate) now: i64,
    items: Vec<Id>,
    /// Every acknowledged event, by item.
    events: BTreeMap<Id, Vec<WorkEvent>>,
    /// Every acknowledged record, by path.
    records: BTreeMap<String, Vec<u8>>,
    /// Start actions taken, by item (an attempt may only come from one).
    starts: BTreeMap<Id, u64>,
    /// Items seen parked: the run and the attempts used then, until the run has a proof.
    parked: BTreeMap<Id, (Id, u32)>,
    runs: u64,
    /// Items whose history a foreign writer damaged, with the bytes it left and the line it
    /// damaged: every read must report that line, and no writer may touch the file again.
    damaged: BTreeMap<Id, (Vec<u8>, u64)>,
    /// Runs whose workflow durably started (`run.start` in the transcript) and that no
    /// operator's stop interrupted: only these may be charged.
    chargeable: std::collections::BTreeSet<Id>,
    /// Runs whose last segment started under Landlock's signal scope (its workflow could not
    /// signal its host): a host's death before the result is not charged to them.
    pub(crate) scoped: std::collections::BTreeSet<Id>,
    /// Set when the last start or resume did not get its workflow running (an IO fault before
    /// the spawn, a failed spawn), for a goal's dispatch to report it.
    pub(crate) not_started: bool,
    /// A silent call the watchdog's classification let through as a reply, or charged when it
    /// never got going (or uncharged when it had).
    watchdog_broken: Option<String>,
    /// While set, every workflow is killed before it finishes (a forced stop of the service
    /// terminated the tick's process groups).
    pub(crate) killing: bool,
    /// True when this world's segments run on a cluster's nodes, whose engine may end one.
    pub(crate) remote: bool,
    /// Set once that stop reached a running workflow: later attempts are refused.
    pub(crate) stop_reached: bool,
    /// Runs whose segment a misconfigured cluster ran again behind the coordinator's back
    /// (requeued after its node died): each must end as the engine's fault, never as a run.
    pub(crate) requeued: std::collections::BTreeSet<Id>,
    /// The processes of each run segment still alive on the machine, by run: its host kills
    /// them at the segment's end; a host killed mid-run leaves them to the next recovery.
    processes: BTreeMap<Id, u32>,
    /// Set while the host of the segment in progress has been killed.
    host_killed: bool,
    /// True when hosts may be killed mid-run. Only where each action is its own host
    /// process: in the goal world the host is the tick itself, whose death a crash models.
    pub(crate) kill_hosts: bool,
    /// True when crashes are armed (the draws happen either way).
    pub(crate) crashes: bool,
    /// Machine crashes so far: the boot the index of projections is read in.
    boots: u64,
    pub(crate) summary: WorkSimSummary,
    /// What the goal dispatching the next attempts has spent (the goal world sets it).
    pub(crate) goal_spent: Option<u64>,
    /// The bug planted in the segment driver, if any.
    #[cfg(feature = "planted-bugs")]
    pub(crate) planted_driver: Option<harn_core::planted::PlantedBug>,
}

impl WorkWorld {
    pub(crate) fn new(seed: u64) -> WorkWorld {
        WorkWorld {
            seed,
            ledger: Ledger::new(SimFs::new(), "/sim"),
            entropy: SeededEntropy::new(seed),
            now: 1_800_000_000_000,
            items: Vec::new(),
            events: BTreeMap::new(),
            records: BTreeMap::new(),
            starts: BTreeMap::new(),
            parked: BTreeMap::new(),
            runs: 0,
            damaged: BTreeMap::new(),
            chargeable: std::collections::BTreeSet::new(),
            scoped: std::collections::BTreeSet::new(),
            not_started: false,
            watchdog_broken: None,
            killing: false,
            // Every third seed runs its segments on a cluster; chosen from the seed, not
            // drawn, so the other seeds run as they did.
            remote: seed % 3 == 2,
            stop_reached: false,
            requeued: std::collections::BTreeSet::new(),
            processes: BTreeMap::new(),
            host_killed: false,
            kill_hosts: false,
            crashes: true,
            boots: 0,
            summary: WorkSimSummary::default(),
            goal_spent: None,
            #[cfg(feature = "planted-bugs")]
            planted_driver: None,
        }
    }

    pub(crate) fn wall(&mut self) -> WallTime {
        self.now += 1 + self.entropy.below(1_000) as i64;
        WallTime(self.now)
    }

    /// Creates items without faults: each name with the names it depends on.
    pub(crate) fn setup(&mut self, graph: &[(&str, &[&str])]) {
        for &(n, deps) in graph {
            let id = Id::new(n).expect("a valid id");
            let intent = WorkIntent {
                schema_version: INTENT_VERSION,
                id: id.clone(),
                title: format!("item {n}"),
                objective: format!("do {n}"),
                acceptance: vec!["the agent answered".into()],
                dependencies: deps.iter().map(|d| Id::new(d).expect("a valid id")).collect(),
                workflow: WorkflowRef { path: "/wf".into(), sha256: "0".repeat(64) },
                max_attempts: 3,
                max_uncharged_attempts: 2,
                created_at: self.wall(),
                sha256: None,
                strict_acceptance: false,
                source: None,
            }
            .sealed();
            let now = self.wall();
            self.ledger.write_record(&work_dir(&id), "intent.json", &intent).expect("setup");
            self.ledger.append(&id, EventKind::created(&intent), "sim", None, now).expect("setup");
            self.items.push(id);
        }
        self.take_acknowledged();
    }

    /// One operator action on a drawn item, maybe with a crash armed; then the checks.
    pub(crate) fn action(&mut self, faults: bool) -> Result<(), String> {
        self.summary.actions += 1;
        let id = self.items[self.entropy.below(self.items.len() as u64) as usize].clone();
        if faults && self.damaged.is_empty() && self.entropy.chance(1, 60) {
            self.damage(&id);
        }
        if faults && self.entropy.chance(1, 3) {
            let after = self.entropy.below(30);
            self.arm_crash(after);
        }
        let result = self.act(&id);
        let crashed = self.ledger.fs.is_crashed();
        self.ledger.fs.clear_faults();
        self.take_acknowledged();
        if crashed {
            self.ledger.fs.crash(&mut self.entropy);
            self.boots += 1;
            self.summary.crashes += 1;
            // The machine went down: every process on it ended.
            self.processes.clear();
        } else if let Some((_, line)) = self.damaged.get(&id) {
            // Nothing is decided on a damaged history: the action stops at the read.
            let at = format!("events.jsonl:{line}:");
            if !result.as_ref().is_err_and(|e| e.contains(&at)) {
                return Err(self.violation(&id, &format!("acted on a damaged history: {result:?}")));
            }
        } else if let Err(e) = result {
            return Err(self.violation(&id, &format!("an action failed without a fault: {e}")));
        }
        self.check().map_err(|e| self.violation(&id, &e))
    }

    /// Arms a crash `after` more filesystem calls, unless crashes are off.
    pub(crate) fn arm_crash(&mut self, after: u64) {
        if self.crashes {
            self.ledger.fs.crash_after(after);
        }
    }

    /// A foreign writer damages the last line of `id`'s history whole (its newline kept).
    fn damage(&mut self, id: &Id) {
        let path = format!("{}/events.jsonl", work_dir(id));
        if let Some(bytes) = self.ledger.fs.damage_last_line(&path, &mut self.entropy) {
            let line = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
            self.damaged.insert(id.clone(), (bytes, line));
            self.summary.damaged += 1;
        }
    }

    pub(crate) fn violation(&self, id: &Id, what: &str) -> String {
        format!("seed {} action {} on {id}: {what}", self.seed, self.summary.actions)
    }

    /// Moves what the ledger acknowledged into the checker's books; each record must be
    /// durable the moment it is acknowledged.
    pub(crate) fn take_acknowledged(&mut self) {
        let acked = std::mem::take(&mut self.ledger.acknowledged);
        for e in acked.events {
            self.events.entry(e.work_id.clone()).or_default().push(e);
        }
        for (path, bytes) in acked.records {
            self.records.insert(path, bytes);
        }
    }

    pub(crate) fn read(&mut self, id: &Id) -> Result<Item, String> {
        Ok(self.ledger.read(id, &mut Known::new(), &mut |_| false)?)
    }

    pub(crate) fn act(&mut self, id: &Id) -> Result<(), String> {
        let item = self.read(id)?;
        let p = &item.projection;
        match (p.state, p.next_action) {
            (WorkState::Ready, NextAction::Run) => self.start(&item, false),
            (WorkState::Blocked, NextAction::Retry) => self.start(&item, true),
            (WorkState::AwaitingApproval, NextAction::ResolveApproval) => {
                let approval = p.approval_id.clone().unwrap_or_default();
                let verdict = if self.entropy.chance(3, 4) { Ruling::Allow } else { Ruling::Deny };
                self.rule(&approval, verdict)
            }
            (WorkState::AwaitingApproval, NextAction::Resume) => self.resume(&item),
            (WorkState::InReview, _) => self.review(&item),
            _ => Ok(()),
        }
    }

    pub(crate) fn manifest(&mut self) -> RunManifest {
        self.runs += 1;
        let rules =
            r#"{"rules":[{"name":"ask-push","on":"authorize","action":"push","verdict":"ask"}]}"#;
        let policy = parse_policy("policy.jsonc", rules.as_bytes()).expect("a valid policy");
        let spec = resolve("codex", &BTreeMap::new()).expect("a preset");
        RunManifest {
            schema_version: RUN_VERSION,
            run_id: Id::new(&format!("wf-{}-{}", self.seed, self.runs)).expect("a valid id"),
            work_id: self.items[0].clone(),
            attempt: 0,
            trigger: harn_core::work::Trigger::Initial,
            started_at: WallTime(0),
            script: WorkflowRef { path: "/wf".into(), sha256: "0".repeat(64) },
            timeout_ms: 1_000,
            adapter: Some(FrozenAdapter { name: "sim".into(), spec }),
            team: Team::new(),
            adapters: BTreeMap::new(),
            max_agents: Some(5),
            billing: Billing::Subscription,
            policy: Some(FrozenPolicy::new(policy)),
            approval_to: Some("ana".into()),
            concurrency: 1,
            isolation: harn_core::work::run::Isolation::Shared,
            cwd: None,
            context: None,
            goal_spent_micro_usd: self.goal_spent,
            workspace: None,
            planning: None,
            containment: None,
            resource_limits: Some(harn_core::limits::RUN_DEFAULTS),
            cluster: None,
            network: None,
        }
    }

    /// What a runner does before anything new starts (the code `harn work run` runs): reap
    /// every run whose host is gone. No host is alive between actions, so afterwards no
    /// run's processes may be left.
    fn reap(&mut self) -> Result<(), String> {
        let now = self.wall();
        let processes = &mut self.processes;
        let mut kill = |live: &LiveRun| processes.remove(&live.run_id).unwrap_or(0) as usize;
        let done = harn_core::work::live::recover(&mut self.ledger, &mut |_| true, &mut kill, now)?;
        self.summary.reaped += done.reaped.len() as u64;
        if let Some((run, n)) = self.processes.iter().next() {
            return Err(format!("{n} processes of run {run} outlived the recovery"));
        }
        Ok(())
    }

    /// A start action on `item` (a retry when `retry`): one attempt through the core's
    /// procedure, the one `harn work run` runs.
    pub(crate) fn start(&mut self, item: &Item, retry: bool) -> Result<(), String> {
        self.start_ended(item, retry).map(drop)
    }

    /// A resume action on a parked `item` whose approval was ruled on.
    pub(crate) fn resume(&mut self, item: &Item) -> Result<(), String> {
        self.resume_ended(item).map(drop)
    }

    /// [`WorkWorld::start`], saying how the attempt ended (the inner error: a refusal, or an
    /// injected IO fault before anything ran).
    pub(crate) fn start_ended(
        &mut self,
        item: &Item,
        retry: bool,
    ) -> Result<Result<AttemptEnded, String>, String> {
        *self.starts.entry(item.intent.id.clone()).or_default() += 1;
        self.attempt(&item.intent.id, retry)
    }

    /// [`WorkWorld::resume`], saying how the attempt ended.
    pub(crate) fn resume_ended(
        &mut self,
        item: &Item,
    ) -> Result<Result<AttemptEnded, String>, String> {
        self.attempt(&item.intent.id, false)
    }

    fn attempt(&mut self, id: &Id, retry: bool) -> Result<Result<AttemptEnded, String>, String> {
        match run_attempt(self, id, retry, "sim") {
            Ok(ended @ AttemptEnded::Proof(..)) => {
                self.summary.proofs += 1;
                Ok(Ok(ended))
            }
            Ok(ended) => Ok(Ok(ended)),
            Err(Refusal::NotNow(why)) => Ok(Err(why)),
            // An IO error before the spawn (a full disk, a failing device): whatever it cut
            // short, nothing ran, so nothing may be charged.
            Err(refusal)
                if matches!(&refusal, Refusal::Unstarted(e) if injected(e))
                    && !self.ledger.fs.is_crashed() =>
            {
                self.summary.not_started += 1;
                self.not_started = true;
                Ok(Err(refusal.to_string()))
            }
            Err(refusal) => Err(refusal.to_string()),
        }
    }

    /// A run segment as its host carries it: the core's segment driver (the loop `harn work
    /// run` runs) over a simulated host and workflow ([`segment::SimSegment`]).
    fn carry_segment(
        &mut self,
        item: &Item,
        m: &RunManifest,
        start: &serde_json::Value,
        fold: RunFold,
    ) -> Result<SegmentEnd, String> {
        if item.projection.state == WorkState::AwaitingApproval {
            let (used, run) = (item.projection.attempts_used, &item.projection.latest_run_id);
            if Some(&m.run_id) != run.as_ref() || m.attempt != used {
                return Err(format!(
                    "resumed run {} attempt {} is not the parked run {run:?} attempt {used}",
                    m.run_id, m.attempt
                ));
            }
            self.summary.resumed += 1;
        } else {
            self.summary.attempts += 1;
        }
        self.host_killed = false;
        let mut host = segment::SimSegment::new(self, item, m);
        match driver::run_segment(&mut host, m, start, fold) {
            Ok(end) => Ok(end),
            Err(segment::Stop::Abandoned) => Ok(SegmentEnd::Abandoned),
            Err(segment::Stop::Failed(e)) => Err(e),
        }
    }

    /// Sometimes the host is killed here (`kill -9`): the workflow's descendants live on.
    fn host_dies(&mut self, run: &Id) -> bool {
        if self.kill_hosts && self.processes.contains_key(run) && self.entropy.chance(1, 30) {
            self.host_killed = true;
            self.summary.hosts_killed += 1;
            return true;
        }
        false
    }

    /// An agent call's end as the real programs end, drawn, classified by the core's table
    /// (the code the binary runs): a reply, a refusal by the vendor, no login, a silent call
    /// the watchdog ended, the agent's own turn limit, or a plain failure.
    fn draw_outcome(&mut self) -> CallOutcome {
        use harn_core::work::agent::{classify, presets, CallEnd};
        let codex = presets().remove("codex").expect("a preset");
        let claude = presets().remove("claude-code").expect("a preset");
        let lines = |ls: &[&str]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
        let drawn = self.entropy.below(16);
        let (spec, end) = match drawn {
            0 => (
                &codex,
                CallEnd {
                    code: Some(1),
                    stdout: lines(&[
                        r#"{"type":"error","message":"exceeded retry limit, last status: 429 Too Many Requests"}"#,
                    ]),
                    ..CallEnd::default()
                },
            ),
            1 => (
                &codex,
                CallEnd {
                    code: Some(1),
                    stdout: lines(&[
                        r#"{"type":"turn.failed","error":{"message":"the patch did not apply"}}"#,
                    ]),
                    ..CallEnd::default()
                },
            ),
            2 => (
                &claude,
                CallEnd {
                    code: Some(1),
                    stdout: lines(&[
                        r#"{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login","session_id":"s","num_turns":1,"total_cost_usd":0,"usage":{}}"#,
                    ]),
                    ..CallEnd::default()
                },
            ),
            // Silent: no line for the idle timeout, then the watchdog's kill, either before
            // the call got going or after it had worked a while; or the same call killed with
            // its run; or, never having got going, ended by the program's own request timeout
            // (Claude Code's `success` result with no text and no cost). Which of the three
            // is taken from the count, not drawn, so the seeds draw as they always did.
            3 => {
                self.summary.silent_calls += 1;
                let progressed = self.entropy.chance(1, 2);
                let ended = match (self.summary.silent_calls % 3, progressed) {
                    (1, _) => {
                        CallEnd { stopped: true, progressed, elapsed_ms: 900, ..CallEnd::default() }
                    }
                    (2, false) => CallEnd {
                        code: Some(0),
                        stdout: lines(&[
                            r#"{"type":"system","subtype":"init","session_id":"s","model":"m"}"#,
                            r#"{"type":"result","subtype":"success","is_error":false,"result":"","session_id":"s","num_turns":0,"total_cost_usd":0,"usage":{}}"#,
                        ]),
                        ..CallEnd::default()
                    },
                    _ => CallEnd {
                        idle: true,
                        progressed,
                        stderr: "Reconnecting... 1/5".into(),
                        ..CallEnd::default()
                    },
                };
                (if ended.code.is_some() { &claude } else { &codex }, ended)
            }
            4 => (
                &claude,
                CallEnd {
                    code: Some(1),
                    stdout: lines(&[
                        r#"{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s","num_turns":3,"total_cost_usd":0.02,"usage":{"input_tokens":10,"output_tokens":5}}"#,
                    ]),
                    ..CallEnd::default()
                },
            ),
            _ => (
                &codex,
                CallEnd {
                    code: Some(0),
                    stdout: lines(&[
                        r#"{"type":"thread.started","thread_id":"t1"}"#,
                        r#"{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"done"}}"#,
                        r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":20}}"#,
                    ]),
                    ..CallEnd::default()
                },
            ),
        };
        let outcome = classify("sim", spec, 1_000, &end);
        // A silent call never succeeds; it is uncharged exactly when it never got going.
        let silent = drawn == 3;
        if silent && (outcome.ok || outcome.class.is_none() != end.progressed) {
            self.watchdog_broken.get_or_insert(format!("a silent call ended as {outcome:?}"));
        }
        outcome
    }

    pub(crate) fn rule(&mut self, approval: &str, verdict: Ruling) -> Result<(), String> {
        let Some((_, None)) = self.ledger.approval(approval)? else { return Ok(()) };
        let now = self.wall();
        self.ledger.rule(approval, verdict, "ana", None, now)?;
        Ok(())
    }

    pub(crate) fn review(&mut self, item: &Item) -> Result<(), String> {
        let id = &item.intent.id;
        let now = self.wall();
        if self.entropy.chance(1, 6) {
            self.ledger.append(
                id,
                EventKind::Reopened { findings: Vec::new(), feedback: None },
                "sim",
                None,
                now,
            )?;
            return Ok(());
        }
        self.ledger.accept(item, Vec::new(), "sim", None, now).map_err(|r| format!("{r:?}"))?;
        self.summary.accepted += 1;
        Ok(())
    }

    /// The charging rule, computed afresh from the run records: a run is charged when its
    /// proof has no uncharged class, or when it has no proof and its workflow started (it is
    /// parked, or lost); a proof whose calls all failed uncharged must be uncharged itself.
    fn expected_charged(&mut self, item: &Item) -> Result<u32, String> {
        let mut charged = 0;
        for e in &item.events {
            let EventKind::AttemptStarted { run_id, .. } = &e.kind else { continue };
            let (_, proof) = self.ledger.run_records(run_id)?;
            match proof {
                Some(p) => {
                    let calls: Vec<_> = p.agents.iter().filter(|a| !a.cached).collect();
                    let all_uncharged =
                        !calls.is_empty() && calls.iter().all(|a| !a.ok && a.class.is_some());
                    if all_uncharged
                        && p.run.class.is_none()
                        && p.run.status != harn_core::work::run::RunStatus::Succeeded
                    {
                        return Err(format!(
                            "run {run_id}: every call failed uncharged, the run is charged"
                        ));
                    }
                    // A limit reached is the run's own doing: charged, and said by its transcript.
                    if p.run.class == Some(harn_core::work::FailureClass::Resource) {
                        let records = self.ledger.transcript(run_id)?;
                        let said = records.iter().any(|r| r["event"] == "run.limit_reached");
                        if !said {
                            return Err(format!(
                                "run {run_id}: its proof says it reached a limit its transcript \
                                 never recorded"
                            ));
                        }
                    }
                    // A segment the engine ran twice is never taken for the run's own end.
                    let infrastructure = Some(harn_core::work::FailureClass::Infrastructure);
                    if self.requeued.contains(run_id) && p.run.class != infrastructure {
                        return Err(format!(
                            "run {run_id}: its cluster ran it again unseen, and its proof says {:?}",
                            p.run.class
                        ));
                    }
                    charged += u32::from(p.run.class.is_none_or(|c| c.charges()));
                }
                // Parked or lost, it uses the budget once its workflow started, unless an
                // operator's stop had reached it when its host died, or its host died before
                // its result while it could not signal that host.
                None => {
                    use harn_core::work::transcript::Started;
                    let records = self.ledger.transcript(run_id)?;
                    let started = harn_core::work::transcript::started(&records);
                    let last = records
                        .iter()
                        .rposition(|r| r["event"] == "run.start" || r["event"] == "run.resume");
                    let answered = last.is_some_and(|at| {
                        records[at..].iter().any(|r| {
                            ["run.end", "run.parked", "run.timed_out", "run.limit_reached"]
                                .iter()
                                .any(|e| r["event"] == *e)
                                || (r["event"] == "workflow.message"
                                    && r["message"]["op"] == "result")
                        })
                    });
                    // A resumed segment cut short leaves its run parked: charged as parked.
                    let parked = harn_core::work::transcript::parked_on(&records).is_some();
                    let host_died = !parked && self.scoped.contains(run_id) && !answered;
                    if matches!(started, Started::Ran | Started::HostDied) {
                        if !parked && (started == Started::HostDied) != host_died {
                            return Err(format!(
                                "run {run_id}: read as {started:?}, though its last segment was \
                                 {}scoped and {}answered",
                                if self.scoped.contains(run_id) { "" } else { "not " },
                                if answered { "" } else { "not " }
                            ));
                        }
                        charged += u32::from(!host_died);
                    }
                }
            }
        }
        Ok(charged)
    }

    /// The invariants, over what survived.
    pub(crate) fn check(&mut self) -> Result<(), String> {
        if let Some(broken) = self.watchdog_broken.take() {
            return Err(broken);
        }
        for (path, bytes) in &self.records {
            match self.ledger.fs.read(path) {
                Ok(Some(now)) if now == *bytes => {}
                other => {
                    return Err(format!(
                        "acknowledged record {path} changed or vanished: {other:?}"
                    ))
                }
            }
        }
        for (id, (bytes, line)) in self.damaged.clone() {
            let path = format!("{}/events.jsonl", work_dir(&id));
            if self.ledger.fs.read(&path).ok().flatten().as_ref() != Some(&bytes) {
                return Err(format!("the damaged history of {id} was rewritten"));
            }
            match self.read(&id) {
                Err(e) if e.contains(&format!("events.jsonl:{line}:")) => {}
                other => {
                    return Err(format!("{id}'s damaged line {line} was not reported: {other:?}"))
                }
            }
        }
        for id in self.items.clone() {
            if self.damaged.contains_key(&id) {
                continue;
            }
            let item = self.read(&id).map_err(|e| format!("{id} no longer reads: {e}"))?;
            let acked = self.events.get(&id).cloned().unwrap_or_default();
            let all = self.ledger.events_all(&id).map_err(|e| format!("{id}: {e}"))?;
            for e in &acked {
                let kept = all.get(e.seq as usize - 1);
                if kept != Some(e) {
                    return Err(format!("acknowledged event {} of {id} was lost: {kept:?}", e.seq));
                }
            }
            let p = &item.projection;
            let ran = item.events.iter().filter(|e| match &e.kind {
                EventKind::AttemptStarted { run_id, .. } => self.chargeable.contains(run_id),
                _ => false,
            });
            let ran = ran.count() as u32;
            let expected = self.expected_charged(&item)?;
            if p.charged_attempts != expected {
                return Err(format!(
                    "{} charged attempts where the charging rule counts {expected}",
                    p.charged_attempts
                ));
            }
            if p.charged_attempts > ran {
                return Err(format!(
                    "{} charged attempts, but only {ran} workflows ran to an end of their own",
                    p.charged_attempts
                ));
            }
            let starts = self.starts.get(&id).copied().unwrap_or(0);
            if u64::from(p.attempts_used) > starts {
                return Err(format!("{} attempts from {starts} start actions", p.attempts_used));
            }
            if p.charged_attempts > item.intent.max_attempts {
                return Err(format!(
                    "{} charged attempts over a budget of {}",
                    p.charged_attempts, item.intent.max_attempts
                ));
            }
            if let Some(run) =
                p.latest_run_id.as_ref().filter(|_| p.state == WorkState::AwaitingApproval)
            {
                if self.ledger.run_records(run)?.1.is_some() {
                    return Err(format!("run {run} reads as parked although it has a proof"));
                }
            }
            if let Some(run) = &p.latest_run_id {
                self.check_segments(run)?;
            }
            // A prerequisite that no longer reads holds its dependents where they are.
            if !item.intent.dependencies.iter().any(|d| self.damaged.contains_key(d)) {
                self.check_parked(&id, p)?;
            }
        }
        self.check_index()
    }

    /// A run's transcript tells its segments apart: one `run.start`, its first; every segment
    /// after a park is `run.resume`, so no reader takes a resume for a new start.
    fn check_segments(&mut self, run: &Id) -> Result<(), String> {
        let records = self.ledger.transcript(run).map_err(|e| format!("run {run}: {e}"))?;
        let mut parked = false;
        let mut starts = 0;
        for r in &records {
            match r["event"].as_str() {
                Some("run.parked") => parked = true,
                Some("run.start") if parked => {
                    return Err(format!("run {run}: a segment after its park recorded run.start"))
                }
                Some("run.start") => starts += 1,
                _ => {}
            }
        }
        if starts > 1 {
            return Err(format!("run {run}: {starts} segments recorded run.start"));
        }
        Ok(())
    }

    /// Reads served through the index of work projections, as a listing makes them, agree
    /// with reads of the journals: each item's row holds its projection, and an item that
    /// does not read is listed with the same error. Every seventh look comes a minute and a
    /// half later on the index's clock, so rows are also checked against their files.
    fn check_index(&mut self) -> Result<(), String> {
        let jump = if self.summary.actions.is_multiple_of(7) { 90_000 } else { 0 };
        let boot = format!("boot-{}", self.boots);
        let ledger = &mut self.ledger;
        ledger.open_index(WallTime(self.now + jump), &boot, Box::new(|_| false));
        ledger.verify_histories();
        ledger.examine(None);
        let mut known = Known::new();
        let mut listed = Vec::new();
        for id in &self.items {
            let row = ledger.summary(id, &mut known, &mut |_| false);
            listed.push((id.clone(), row.map(|r| r.projection.clone()).map_err(|e| e.to_string())));
        }
        ledger.save_index().map_err(|e| format!("the index could not be saved: {e}"))?;
        for (id, listed) in listed {
            let read = self.read(&id).map(|i| i.projection);
            if read != listed {
                return Err(format!(
                    "{id} reads through the index as {listed:?} and from its journals as {read:?}"
                ));
            }
        }
        Ok(())
    }

    /// A parked attempt stays parked, as the same run and attempt, through any crash, until
    /// its run has a proof: a resumption cut short is resumed again, never lost. Only an
    /// operator's stop that reached the resumed segment ends it without one.
    fn check_parked(&mut self, id: &Id, p: &harn_core::work::Projection) -> Result<(), String> {
        if let Some((run, used)) = self.parked.get(id).cloned() {
            let proved = self.ledger.run_records(&run)?.1.is_some();
            let stopped = !proved
                && transcript::started(&self.ledger.transcript(&run)?)
                    == transcript::Started::Interrupted;
            if proved {
                self.parked.remove(id);
            } else if stopped {
                self.parked.remove(id);
                if p.state == WorkState::AwaitingApproval {
                    return Err(format!("run {run} reads as parked after a stop ended it"));
                }
            } else if p.state != WorkState::AwaitingApproval
                || p.latest_run_id.as_ref() != Some(&run)
                || p.attempts_used != used
            {
                return Err(format!(
                    "parked run {run} (attempt {used}) now reads {:?}/{:?}, run {:?}, {} attempts",
                    p.state, p.next_action, p.latest_run_id, p.attempts_used
                ));
            }
        }
        if p.state == WorkState::AwaitingApproval && !self.parked.contains_key(id) {
            let run = p.latest_run_id.clone().expect("a parked item has a run");
            self.parked.insert(id.clone(), (run, p.attempts_used));
        }
        Ok(())
    }

    /// True when no item has anything left to do but a person's acceptance or nothing.
    pub(crate) fn at_rest(&mut self) -> Result<bool, String> {
        for id in self.items.clone() {
            if self.damaged.contains_key(&id) {
                continue; // A person must look at it.
            }
            let p = self.read(&id)?.projection;
            let resting = matches!(
                (p.state, p.next_action),
                (WorkState::Succeeded, _) | (WorkState::Cancelled, _) | (_, NextAction::None)
            ) || (p.state == WorkState::Waiting && self.blocked_for_good(&p));
            if !resting {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A waiting item whose prerequisite can never be accepted also rests.
    fn blocked_for_good(&mut self, p: &harn_core::work::Projection) -> bool {
        p.unresolved_dependencies.iter().all(|d| {
            self.damaged.contains_key(d)
                || self.read(d).is_ok_and(|i| {
                    i.projection.next_action == NextAction::None
                        && i.projection.state != WorkState::Succeeded
                })
        })
    }

    pub(crate) fn states(&mut self) -> Result<String, String> {
        let mut out = Vec::new();
        for id in self.items.clone() {
            match self.read(&id) {
                Ok(item) => {
                    let p = item.projection;
                    out.push(format!("{id} {:?}/{:?}", p.state, p.next_action));
                }
                Err(e) => out.push(format!("{id} unreadable: {e}")),
            }
        }
        Ok(out.join(", "))
    }
}

/// The simulated machine as an attempt's host: no other host is ever alive between actions,
/// so leases are always free and locks uncontended; the workflow is simulated, the filesystem
/// faulty.
impl AttemptHost for WorkWorld {
    type Fs = SimFs;
    type Error = String;

    fn ledger(&mut self) -> &mut Ledger<SimFs> {
        &mut self.ledger
    }

    fn now(&mut self) -> WallTime {
        self.wall()
    }

    fn stopping(&mut self) -> Option<String> {
        // A forced stop reaches the tick at a running workflow; from then on the process
        // refuses to start another.
        (self.killing && self.stop_reached).then(|| "a bounded stop of the service".to_owned())
    }

    fn lease(&mut self, _id: &Id) -> Result<(), Refusal<String>> {
        Ok(())
    }

    fn recover(&mut self) -> Result<(), Refusal<String>> {
        self.reap().map_err(Refusal::Store)
    }

    fn read_locked(&mut self, id: &Id) -> Result<Item, Refusal<String>> {
        self.read(id).map_err(Refusal::Store)
    }

    fn unlock(&mut self) {}

    fn check_workflow(&mut self, _item: &Item) -> Result<(), RecordError> {
        Ok(())
    }

    fn options(&mut self, _item: &Item) -> Result<RunManifest, Refusal<String>> {
        let options = self.manifest();
        // An IO error somewhere before the workflow is spawned (a full disk, a failing
        // device): whatever it cuts short, nothing ran, so nothing may be charged.
        if self.entropy.chance(1, 5) {
            let kind =
                if self.entropy.chance(1, 2) { FsErrorKind::NoSpace } else { FsErrorKind::Io };
            let after = self.entropy.below(14);
            self.ledger.fs.fail_after(after, kind);
        }
        Ok(options)
    }

    fn segment(
        &mut self,
        item: &Item,
        m: &RunManifest,
        start: &serde_json::Value,
        fold: RunFold,
    ) -> Result<SegmentEnd, Refusal<String>> {
        self.carry_segment(item, m, start, fold).map_err(Refusal::Store)
    }

    fn attest(&mut self, _m: &RunManifest, _fold: &mut RunFold) {}

    fn reconcile(&mut self, id: &Id, actor: &str) -> Result<(), Refusal<String>> {
        let fresh = self.read(id).map_err(Refusal::Store)?;
        let now = self.wall();
        self.ledger.reconcile(&fresh, actor, now)?;
        Ok(())
    }
}

#[cfg(test)]
mod index_tests;
#[cfg(test)]
mod reader_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_keep_every_promise_and_come_to_rest() {
        let mut total = WorkSimSummary::default();
        for seed in 0..64 {
            total.add(&run_work_seed(seed).unwrap_or_else(|e| panic!("{e}")));
        }
        assert!(total.damaged > 10, "histories are damaged: {total:?}");
        assert!(total.crashes > 100, "crashes happen: {total:?}");
        assert!(total.parked > 10 && total.resumed > 10, "runs park and resume: {total:?}");
        assert!(total.accepted > 10, "items are accepted: {total:?}");
        assert!(total.engine_faults > 3, "clusters end segments: {total:?}");
    }

    #[test]
    fn once_a_forced_stop_reached_a_workflow_no_new_attempt_starts_or_is_recorded() {
        let mut w = WorkWorld::new(1);
        w.crashes = false;
        w.setup(&[("a", &[])]);
        let id = Id::new("a").unwrap();
        let before = w.read(&id).unwrap();
        w.killing = true;
        w.stop_reached = true;
        let Ok(Err(refused)) = w.attempt(&id, false) else { panic!("an attempt started") };
        assert!(refused.contains("is stopping this process's runs"), "{refused}");
        let after = w.read(&id).unwrap();
        assert_eq!(after.history_len, before.history_len, "nothing is recorded");
        assert_eq!(after.projection, before.projection);
    }

    #[test]
    fn a_seed_is_deterministic() {
        assert_eq!(run_work_seed(7), run_work_seed(7));
    }
}
