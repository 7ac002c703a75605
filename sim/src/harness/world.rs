//! The simulated world: one host with a virtual clock, a faulty filesystem and a process
//! table, running the real daemon core through the real driver. Each step delivers one event
//! (see `schedule`), lets the world react, and checks every invariant; crashes and clean
//! daemon exits end a step and the next one boots again.

use crate::clock::VirtualClock;
use crate::entropy::Entropy;
use crate::fs::SimFs;
use crate::harness::checker::{Checker, StepFacts, Violation};
use crate::harness::options::{ConfigKnobs, SimOptions};
use crate::harness::process::SimProcesses;
use crate::harness::seams::{with_env, Lent, SpawnAudit};
use crate::harness::trace::{StepEnd, StepEvent, Trace, TraceStep};
use harn_core::env::{Clock, FsErrorKind};
use harn_core::harness::daemon::{Command, Daemon};
use harn_core::harness::driver::{DaemonPaths, Driver, Executed, Fatal, Wake};
use harn_core::harness::readiness::{ReadinessFinding, ReadinessSchedule};
use harn_core::time::{Duration, Instant};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The seams a driver call borrows from `world`, field by field, so that the daemon in
/// `world.up` can be borrowed beside them.
macro_rules! lent {
    ($world:expr, $audits:expr) => {
        Lent {
            fs: &$world.fs,
            procs: &mut $world.procs,
            clock: &$world.clock,
            bug: $world.options.bug,
            state_path: &$world.paths.state,
            audits: $audits,
            decoded: &mut $world.checker.decoded,
        }
    };
}

/// Upper bound on steps of the liveness phase; reaching it is itself a liveness failure.
pub(crate) const LIVENESS_STEPS_MAX: u64 = 100_000;

/// One simulation run.
pub struct HarnessWorld<E: Entropy> {
    pub(crate) options: SimOptions,
    pub(crate) entropy: E,
    pub(crate) clock: VirtualClock,
    pub(crate) fs: Rc<RefCell<SimFs>>,
    pub(crate) procs: SimProcesses,
    pub(crate) paths: DaemonPaths,
    pub(crate) up: Option<(Driver, Daemon)>,
    pub(crate) restart_at: Instant,
    pub(crate) next_command_at: Option<Instant>,
    pub(crate) next_command_id: u64,
    /// The start, stop and restart commands delivered, by id (see [`StepFacts::commands`]).
    pub(crate) commands: BTreeMap<u64, Command>,
    pub(crate) knobs: ConfigKnobs,
    /// A late or missed wake: timers are not honoured before this instant.
    pub(crate) timer_floor: Instant,
    pub(crate) faults: bool,
    pub(crate) step: u64,
    /// The daemon's readiness schedule (the core's, as the real daemon keeps it beside its
    /// core) and the simulated probes: pid to when it exits and whether it succeeds.
    pub(crate) readiness: ReadinessSchedule,
    pub(crate) probes: BTreeMap<u32, (Instant, bool)>,
    pub(crate) next_probe_pid: u32,
    /// What the last look found and the daemon has not been told yet: the real daemon
    /// reports every finding of a look before anything else, one step each.
    pub(crate) found: std::collections::VecDeque<harn_core::harness::readiness::Found>,
    /// Every run some readiness evidence vouched for.
    pub(crate) vouched: std::collections::BTreeSet<(harn_core::ids::Id, u64)>,
    /// Vouched runs whose recheck failed since their evidence last showed.
    pub(crate) lost: std::collections::BTreeSet<(harn_core::ids::Id, u64)>,
    /// What each live notify child will still say.
    pub(crate) notify: BTreeMap<harn_core::env::Pid, NotifyPlan>,
    /// When each notify run last said `READY=1` or `WATCHDOG=1`.
    pub(crate) alive: BTreeMap<(harn_core::ids::Id, u64), Instant>,
    /// Clients attached to terminal harnesses, as their answers said.
    pub(crate) clients: BTreeMap<u64, Client>,
    pub(crate) next_client: u64,
    /// The attach this step delivers, awaiting its answer: client, harness, read-only.
    pub(crate) asked: Option<(u64, harn_core::ids::Id, bool)>,
    checker: Checker,
    /// Per-step state hashes, always kept (cheap) for replay and determinism checks.
    pub hashes: Vec<u64>,
    /// `state.json`'s durable bytes as last looked at ([`HarnessWorld::durable_state`]).
    durable: Option<Rc<[u8]>>,
    /// Which durable bytes `durable` holds ([`SimFs::durable_stamp`]), and the filesystem's
    /// durable epoch when it was looked at: an unchanged epoch needs no look.
    durable_stamp: Option<(u64, u64)>,
    durable_epoch: u64,
    /// Per-step records, kept only when tracing.
    pub records: Option<Vec<TraceStep>>,
}

/// What a step did.
pub(crate) struct Outcome {
    pub(crate) event: StepEvent,
    pub(crate) executed: Vec<Executed>,
    pub(crate) end: Option<StepEnd>,
}

/// A driver call that failed, with what it had finished before.
type Failed = (Fatal, Vec<Executed>);

impl<E: Entropy> HarnessWorld<E> {
    /// A world at virtual time zero with the host about to boot.
    pub fn new(options: SimOptions, entropy: E, trace: bool) -> HarnessWorld<E> {
        let knobs = ConfigKnobs {
            revision: 0,
            policies: options.harnesses.iter().map(|h| h.restart).collect(),
            present: vec![true; options.harnesses.len()],
            limits: options.limits,
        };
        HarnessWorld {
            options,
            entropy,
            clock: VirtualClock::default(),
            fs: Rc::new(RefCell::new(SimFs::new())),
            procs: SimProcesses::default(),
            paths: DaemonPaths::default(),
            up: None,
            restart_at: Instant::ZERO,
            next_command_at: None,
            next_command_id: 0,
            commands: BTreeMap::new(),
            knobs,
            timer_floor: Instant::ZERO,
            faults: true,
            step: 0,
            readiness: ReadinessSchedule::default(),
            probes: BTreeMap::new(),
            found: Default::default(),
            next_probe_pid: 900_000,
            vouched: std::collections::BTreeSet::new(),
            lost: std::collections::BTreeSet::new(),
            notify: BTreeMap::new(),
            alive: BTreeMap::new(),
            clients: BTreeMap::new(),
            next_client: 0,
            asked: None,
            checker: Checker::default(),
            hashes: Vec::new(),
            durable: None,
            durable_stamp: None,
            durable_epoch: u64::MAX,
            records: trace.then(Vec::new),
        }
    }

    /// Runs the fault phase, then the liveness phase; the first violation ends the run.
    pub fn run(&mut self) -> Result<(), Violation> {
        self.schedule_command();
        for _ in 0..self.options.steps {
            self.step()?;
        }
        self.calm()?;
        let deadline =
            self.clock.now().saturating_add(Duration::from_secs(self.options.liveness_secs));
        for _ in 0..LIVENESS_STEPS_MAX {
            match self.next_event_time() {
                Some(t) if t <= deadline => self.step()?,
                _ => break,
            }
        }
        self.clock.advance_to(deadline.max(self.clock.now()));
        self.check_liveness()
    }

    /// Runs with faults until virtual time reaches `until` (or `steps_max` steps), for
    /// demonstrations; checks invariants all along like [`HarnessWorld::run`].
    pub fn run_until(&mut self, until: Instant, steps_max: u64) -> Result<(), Violation> {
        self.schedule_command();
        while self.step < steps_max {
            let next = [self.next_event_time(), self.next_command_at].into_iter().flatten().min();
            if next.is_none_or(|t| t >= until) {
                break;
            }
            self.step()?;
        }
        self.clock.advance_to(until.max(self.clock.now()));
        Ok(())
    }

    /// Virtual time now.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Filesystem and crash statistics.
    pub fn fs_stats(&self) -> crate::fs::SimFsStats {
        self.fs.borrow().stats()
    }

    /// The durable bytes of the events journal.
    pub fn events_journal(&self) -> Option<Vec<u8>> {
        self.fs.borrow().durable_read(&self.paths.events)
    }

    /// Rotations of the events journal so far.
    pub fn rotations(&self) -> u64 {
        self.checker.rotations
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The daemon core, while the host is up.
    pub fn daemon(&self) -> Option<&Daemon> {
        self.up.as_ref().map(|(_, d)| d)
    }

    /// Runs one step: boots a host that is down, or delivers the next event; executes the
    /// effects, checks, records.
    pub fn step(&mut self) -> Result<(), Violation> {
        self.step_inner(None)
    }

    /// A step that delivers `wake` (recorded as `event`) instead of choosing the next event.
    pub(crate) fn step_with(&mut self, event: StepEvent, wake: Wake) -> Result<(), Violation> {
        self.step_inner(Some((event, wake)))
    }

    fn step_inner(&mut self, given: Option<(StepEvent, Wake)>) -> Result<(), Violation> {
        self.step += 1;
        let durable_before = self.durable_state();
        let mut audits = Vec::new();
        let mut before = None;
        let outcome = if self.up.is_none() {
            self.clock.advance_to(self.restart_at.max(self.clock.now()));
            self.check_recovered()?;
            self.boot(&mut audits)
        } else {
            let crash_now = self.draw_crash();
            if crash_now.is_some() {
                self.fs.borrow_mut().crash_after(self.entropy.below(8));
            }
            self.inject_faults();
            let (event, wake) = match given {
                Some(given) => given,
                None => self.next_wake(),
            };
            before = self.before_attachment(&wake);
            self.drive(event, wake, &mut audits, crash_now)
        };
        // The terminal checks go first: they are the world's own view of what a person may
        // be given, independent of the core's invariants checked next.
        let terminal = self
            .check_terminal(&outcome.executed, before)
            .map_err(|(inv, detail)| self.violation(&inv, detail));
        let facts_result = self.check_outcome(&outcome, &audits, durable_before.as_deref());
        let facts_result = terminal.and(facts_result);
        let hung = self.check_hung(&outcome);
        self.finish_outcome(&outcome);
        self.record(outcome);
        facts_result.and(hung).and_then(|()| self.check_readiness())
    }

    /// A run is judged hung only when overdue: not ready (no evidence vouched for it) at least
    /// its readiness timeout after it spawned.
    fn check_hung(&self, outcome: &Outcome) -> Result<(), Violation> {
        use harn_core::harness::lifecycle::{Event, Hang};
        let Some(daemon) = self.daemon() else { return Ok(()) };
        let now = self.clock.now();
        for executed in &outcome.executed {
            let Executed::Appended { events, .. } = executed else { continue };
            for event in events {
                let Event::HarnessHung { name, reason, after_ms } = event else { continue };
                let Some(h) = daemon.harnesses().get(name) else { continue };
                let (Some(run), Some(started)) = (h.current_run(), h.started_at()) else {
                    continue; // The run ended within the same step.
                };
                // A watchdog counts from the run's last READY=1 or WATCHDOG=1.
                let since = match reason {
                    Hang::Watchdog => self
                        .alive
                        .get(&(name.clone(), run))
                        .copied()
                        .unwrap_or(started)
                        .max(started),
                    Hang::ReadyTimeout => started,
                };
                let waited = now.saturating_since(since).as_millis();
                let early = waited < *after_ms;
                let vouched = self.vouched.contains(&(name.clone(), run));
                if early || (*reason == Hang::ReadyTimeout && vouched) {
                    let detail = format!(
                        "{name} run {run} judged hung ({reason:?}) after {waited} ms of \
                         {after_ms}, vouched ready: {vouched}"
                    );
                    return Err(self.violation("hung means overdue", detail));
                }
            }
        }
        Ok(())
    }

    /// Forgets the readiness evidence of `name`'s runs before `run`, which has just spawned:
    /// every check looks at current runs only, and sets that grew with every run ever made
    /// made each look cost more the longer a seed ran.
    fn forget_runs_before(&mut self, name: &harn_core::ids::Id, run: u64) {
        let older = (name.clone(), 0)..(name.clone(), run);
        let vouched: Vec<_> = self.vouched.range(older.clone()).cloned().collect();
        for key in vouched {
            self.vouched.remove(&key);
        }
        let lost: Vec<_> = self.lost.range(older.clone()).cloned().collect();
        for key in lost {
            self.lost.remove(&key);
        }
        let alive: Vec<_> = self.alive.range(older).map(|(k, _)| k.clone()).collect();
        for key in alive {
            self.alive.remove(&key);
        }
    }

    /// Remembers what a look at a run's evidence found, for the readiness invariants.
    pub(crate) fn vouch(&mut self, name: &harn_core::ids::Id, run: u64, finding: ReadinessFinding) {
        let key = (name.clone(), run);
        match finding {
            ReadinessFinding::Ready => {
                self.lost.remove(&key);
                self.vouched.insert(key);
            }
            ReadinessFinding::Lost => {
                self.lost.insert(key);
            }
        }
    }

    /// The readiness schedule's own invariants, and that a harness that needs evidence reads
    /// ready only for a run some evidence vouched for and no recheck has failed since.
    fn check_readiness(&self) -> Result<(), Violation> {
        self.readiness.check().map_err(|e| self.violation("readiness schedule", e.to_string()))?;
        let Some(daemon) = self.daemon() else { return Ok(()) };
        for (name, h) in daemon.harnesses() {
            let needs = h.active_spec().readiness != harn_core::harness::lifecycle::Readiness::None;
            let Some(run) = h.current_run().filter(|_| needs && h.pid().is_some() && h.ready())
            else {
                continue;
            };
            let key = (name.clone(), run);
            if !self.vouched.contains(&key) {
                let detail = format!("{name} run {run} reads ready with no evidence");
                return Err(self.violation("readiness is evidence", detail));
            }
            if self.lost.contains(&key) {
                let detail = format!("{name} run {run} reads ready after its recheck failed");
                return Err(self.violation("readiness is evidence", detail));
            }
        }
        Ok(())
    }

    /// Whether this step ends in a crash: none, the whole host, or the daemon alone.
    fn draw_crash(&mut self) -> Option<CrashKind> {
        if !self.faults {
            return None;
        }
        if self.entropy.chance(self.options.crash_per_mille, 1000) {
            return Some(CrashKind::Host);
        }
        self.entropy.chance(self.options.daemon_crash_per_mille, 1000).then_some(CrashKind::Daemon)
    }

    /// Boots the daemon: stops what an earlier daemon left running (as the real one does
    /// before its core boots), opens the durable files and runs the boot's effects.
    fn boot(&mut self, audits: &mut Vec<SpawnAudit>) -> Outcome {
        let reclaimed = if crate::harness::options::skips_reclaim(self.options.bug) {
            0
        } else {
            self.procs.reclaim_orphans()
        };
        let crash = self.draw_crash();
        if crash.is_some() {
            self.fs.borrow_mut().crash_after(self.entropy.below(8));
        }
        self.inject_faults();
        let config = self.options.config(&self.knobs);
        let (paths, now, bug) = (self.paths.clone(), self.clock.now(), self.options.bug);
        let lent = self.lend(audits);
        let booted = with_env(lent, |env| -> Result<_, Failed> {
            let (mut driver, mut daemon) =
                Driver::open(env, paths, config).map_err(|f| (f, Vec::new()))?;
            crate::harness::options::plant_core_bug(bug, &mut daemon);
            match driver.drain(env, &mut daemon, now) {
                Ok(done) => Ok((driver, daemon, done)),
                Err(f) => Err((f, driver.take_partial())),
            }
        });
        let event = StepEvent::Boot { reclaimed };
        match booted {
            Ok((driver, daemon, executed)) => {
                // A new daemon knows no probe of an earlier one; its schedule starts empty.
                self.readiness = ReadinessSchedule::new(&daemon.config().harnesses);
                self.probes.clear();
                self.found.clear();
                // Connections die with the daemon; a new one has no attached client.
                self.clients.clear();
                self.up = Some((driver, daemon));
                let end = crash.map(|kind| kind.end(false));
                Outcome { event, executed, end }
            }
            Err((fatal, executed)) => Outcome { event, executed, end: Some(end_of(&fatal, crash)) },
        }
    }

    /// Delivers one wake to the running daemon.
    fn drive(
        &mut self,
        event: StepEvent,
        wake: Wake,
        audits: &mut Vec<SpawnAudit>,
        crash: Option<CrashKind>,
    ) -> Outcome {
        let now = self.clock.now();
        // The daemon is driven where it lies (it is large; moving it out and back in cost a
        // copy each way at every step), so the seams are lent field by field.
        let (driver, daemon) = self.up.as_mut().expect("host is up");
        let lent = lent!(self, audits);
        let result = with_env(lent, |env| {
            driver.step(env, daemon, now, wake).map_err(|f| (f, driver.take_partial()))
        });
        match result {
            Ok(executed) => {
                let end = crash.map(|kind| kind.end(false));
                Outcome { event, executed, end }
            }
            Err((fatal, executed)) => {
                self.up = None;
                Outcome { event, executed, end: Some(end_of(&fatal, crash)) }
            }
        }
    }

    fn lend<'a>(&'a mut self, audits: &'a mut Vec<SpawnAudit>) -> Lent<'a> {
        lent!(self, audits)
    }

    /// What `state.json` durably holds now: the bytes kept from the last look while they are
    /// the same (they change only at a persist), so a step copies them only when they did.
    fn durable_state(&mut self) -> Option<Rc<[u8]>> {
        let fs = self.fs.borrow();
        if fs.durable_epoch() == self.durable_epoch {
            return self.durable.clone();
        }
        self.durable_epoch = fs.durable_epoch();
        let stamp = fs.durable_stamp(&self.paths.state);
        if stamp != self.durable_stamp {
            self.durable_stamp = stamp;
            self.durable = fs.durable_bytes(&self.paths.state).map(|bytes| Rc::from(&*bytes));
        }
        self.durable.clone()
    }

    /// Checks a step's effects (and, with the daemon up, everything else) before a crash or
    /// exit that ends it is applied.
    fn check_outcome(
        &mut self,
        outcome: &Outcome,
        audits: &[SpawnAudit],
        durable_before: Option<&[u8]>,
    ) -> Result<(), Violation> {
        self.checker.observe(&outcome.executed);
        let command = matches!(outcome.event, StepEvent::Command { .. });
        self.attach_owners(&outcome.executed, command);
        let durable_after = self.durable_state();
        let facts = StepFacts {
            executed: &outcome.executed,
            audits,
            durable_before,
            durable_after: durable_after.as_deref(),
            commands: &self.commands,
        };
        let checked = match (&self.up, &outcome.end) {
            (
                Some((_, daemon)),
                None
                | Some(
                    StepEnd::Crash { during_op: false } | StepEnd::DaemonCrash { during_op: false },
                ),
            ) => self.checker.check_step(daemon, &self.procs, &facts),
            _ => self.checker.check_effects(&facts),
        };
        checked.map_err(|(inv, detail)| self.violation(&inv, detail))
    }

    /// Applies how the step ended: a crash, a fail-stop, a drained daemon's exit; otherwise
    /// lets new children draw their fate.
    fn finish_outcome(&mut self, outcome: &Outcome) {
        match &outcome.end {
            Some(StepEnd::Crash { .. } | StepEnd::FailStop { .. }) => self.crash(),
            Some(StepEnd::DaemonCrash { .. }) => self.daemon_died(),
            Some(StepEnd::DaemonExited) => unreachable!("decided below"),
            None => {
                let now = self.clock.now();
                self.procs.settle(now, &mut self.entropy, self.faults);
                if self.daemon().is_some_and(Daemon::drained) {
                    self.daemon_exited();
                }
            }
        }
    }

    fn attach_owners(&mut self, executed: &[Executed], command: bool) {
        let now = self.clock.now();
        // A reload may have changed what a harness's readiness is, or added one whose first
        // run spawned in this very step: the schedule learns the kinds first, as the daemon
        // configures its readiness watch before the reload. Only a command reloads (a boot
        // makes its schedule from the configuration it booted with).
        if let Some((_, daemon)) = self.up.as_ref().filter(|_| command) {
            self.readiness.configure(&daemon.config().harnesses);
        }
        for e in executed {
            if let Executed::Spawned { name, run, pid } = e {
                self.forget_runs_before(name, *run);
                self.procs.set_owner(*pid, name.clone(), *run);
                self.readiness.started(now, name, *run);
                self.plan_notify(now, name, *run, *pid);
            }
        }
    }

    fn record(&mut self, outcome: Outcome) {
        let hash = self.daemon().map_or(0, Daemon::state_hash);
        self.hashes.push(hash);
        let Some(records) = self.records.as_mut() else { return };
        let end = match (&outcome.end, self.up.is_none() && outcome.end.is_none()) {
            (None, true) => Some(StepEnd::DaemonExited),
            (end, _) => end.clone(),
        };
        records.push(TraceStep {
            step: self.step,
            t: self.clock.now().0,
            event: outcome.event,
            executed: Trace::executed_values(&outcome.executed),
            end,
            hash,
        });
    }

    /// Before a boot: what survived still holds everything acknowledged.
    fn check_recovered(&mut self) -> Result<(), Violation> {
        let fs = self.fs.borrow();
        let state = fs.durable_bytes(&self.paths.state);
        let events = fs.durable_bytes(&self.paths.events);
        let rotated = fs.durable_bytes(&format!("{}.1", self.paths.events));
        let checked = self.checker.check_boot(
            &self.paths,
            state.as_deref(),
            events.as_deref(),
            rotated.as_deref(),
        );
        drop(fs);
        checked.map_err(|(inv, detail)| self.violation(&inv, detail))
    }

    /// A whole-host crash: processes die, unsynced writes are dropped or torn.
    fn crash(&mut self) {
        self.fs.borrow_mut().crash(&mut self.entropy);
        self.procs.kill_all();
        self.up = None;
        self.timer_floor = Instant::ZERO;
        let downtime = Duration::from_millis(self.entropy.between(100, 30_000));
        self.restart_at = self.clock.now().saturating_add(downtime);
    }

    /// The daemon alone dies (SIGKILL): its children live on unobserved, nothing written is
    /// lost, its lock is released, and its process manager starts it again shortly.
    fn daemon_died(&mut self) {
        self.fs.borrow_mut().process_died();
        self.procs.orphan_all();
        self.up = None;
        self.timer_floor = Instant::ZERO;
        let downtime = Duration::from_millis(self.entropy.between(100, 10_000));
        self.restart_at = self.clock.now().saturating_add(downtime);
    }

    /// A drained daemon exits cleanly: nothing is lost, no child is left, and its process
    /// manager starts it again shortly.
    fn daemon_exited(&mut self) {
        self.fs.borrow_mut().release_locks();
        self.up = None;
        self.timer_floor = Instant::ZERO;
        let downtime = Duration::from_millis(self.entropy.between(100, 10_000));
        self.restart_at = self.clock.now().saturating_add(downtime);
    }

    pub(crate) fn violation(&self, invariant: &str, detail: String) -> Violation {
        Violation { step: self.step, invariant: invariant.to_owned(), detail }
    }
}

/// Which crash a step drew.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CrashKind {
    /// The whole host: processes die, unsynced writes are lost or torn.
    Host,
    /// The daemon alone: children become orphans, nothing written is lost.
    Daemon,
}

impl CrashKind {
    fn end(self, during_op: bool) -> StepEnd {
        match self {
            CrashKind::Host => StepEnd::Crash { during_op },
            CrashKind::Daemon => StepEnd::DaemonCrash { during_op },
        }
    }
}

/// How a fatal driver error ends a step. A crash drawn for the step shows up as the failed
/// call; any other IO error makes the daemon stop itself, and in this model its children go
/// with it (a host-level restart).
fn end_of(fatal: &Fatal, crash: Option<CrashKind>) -> StepEnd {
    match (fatal, crash) {
        (Fatal::Fs(e), Some(kind)) if e.kind == FsErrorKind::Crashed => kind.end(true),
        (other, _) => StepEnd::FailStop { error: other.to_string() },
    }
}

/// What one notify child will still say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NotifyPlan {
    pub(crate) name: harn_core::ids::Id,
    pub(crate) run: u64,
    /// When it sends `READY=1`; `None` once sent, or never.
    pub(crate) ready_at: Option<Instant>,
    /// Its next `WATCHDOG=1`; `None` when it stopped pinging (or has no watchdog).
    pub(crate) next_ping: Option<Instant>,
    /// Its interval between pings.
    pub(crate) every: Duration,
    /// Pings before it stops; `None`: it never stops.
    pub(crate) pings_left: Option<u32>,
}

/// What the world knows of one attached client, from the answers it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Client {
    pub(crate) name: harn_core::ids::Id,
    pub(crate) run: u64,
    pub(crate) writes: bool,
}
