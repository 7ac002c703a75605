//! The simulated world: one host with a virtual clock, a faulty filesystem and a process
//! table, running the real daemon core through the real driver, with faults drawn from the
//! entropy stream and invariants checked after every step.

use crate::checker::{Checker, Violation};
use crate::clock::VirtualClock;
use crate::entropy::Entropy;
use crate::fs::SimFs;
use crate::lying::LyingDirSync;
use crate::options::{harness_name, InjectedBug, SimOptions};
use crate::process::SimProcesses;
use crate::trace::{StepEvent, Trace, TraceStep};
use harn_core::daemon::{Command, Daemon, DaemonInput};
use harn_core::driver::{DaemonPaths, Driver, Env, Executed, Fatal, Wake};
use harn_core::env::{Clock, Fs, FsErrorKind};
use harn_core::ids::Id;
use harn_core::lifecycle::{HarnessInput, RestartPolicy, State};
use harn_core::time::{Duration, Instant};
use std::collections::BTreeMap;

/// Upper bound on steps of the liveness phase; reaching it is itself a liveness failure.
const LIVENESS_STEPS_MAX: u64 = 100_000;

/// One simulation run.
pub struct World<E: Entropy> {
    pub(crate) options: SimOptions,
    pub(crate) entropy: E,
    pub(crate) clock: VirtualClock,
    pub(crate) fs: SimFs,
    pub(crate) procs: SimProcesses,
    paths: DaemonPaths,
    up: Option<(Driver, Daemon)>,
    restart_at: Instant,
    next_command_at: Option<Instant>,
    next_command_id: u64,
    commands: BTreeMap<u64, Command>,
    revision: u64,
    policies: Vec<RestartPolicy>,
    /// A late or missed wake: timers are not honoured before this instant.
    timer_floor: Instant,
    faults: bool,
    step: u64,
    checker: Checker,
    /// Per-step state hashes, always kept (cheap) for replay and determinism checks.
    pub hashes: Vec<u64>,
    /// Per-step records, kept only when tracing.
    pub records: Option<Vec<TraceStep>>,
}

impl<E: Entropy> World<E> {
    /// A world at virtual time zero with the host about to boot.
    pub fn new(options: SimOptions, entropy: E, trace: bool) -> World<E> {
        let policies = options.harnesses.iter().map(|h| h.restart).collect();
        World {
            options,
            entropy,
            clock: VirtualClock::default(),
            fs: SimFs::new(),
            procs: SimProcesses::default(),
            paths: DaemonPaths::default(),
            up: None,
            restart_at: Instant::ZERO,
            next_command_at: None,
            next_command_id: 0,
            commands: BTreeMap::new(),
            revision: 0,
            policies,
            timer_floor: Instant::ZERO,
            faults: true,
            step: 0,
            checker: Checker::default(),
            hashes: Vec::new(),
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
    /// demonstrations; checks invariants all along like [`World::run`].
    pub fn run_until(&mut self, until: Instant, steps_max: u64) -> Result<(), Violation> {
        self.schedule_command();
        while self.clock.now() < until && self.step < steps_max {
            self.step()?;
        }
        Ok(())
    }

    /// Virtual time now.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Filesystem and crash statistics.
    pub fn fs_stats(&self) -> crate::fs::SimFsStats {
        self.fs.stats()
    }

    /// The durable bytes of the events journal.
    pub fn events_journal(&self) -> Option<Vec<u8>> {
        self.fs.durable_read(&self.paths.events)
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The daemon core, while the host is up.
    pub fn daemon(&self) -> Option<&Daemon> {
        self.up.as_ref().map(|(_, d)| d)
    }

    /// Runs one step: picks the next event, delivers it, executes the effects, checks.
    pub fn step(&mut self) -> Result<(), Violation> {
        self.step += 1;
        let (event, executed) = if self.up.is_none() {
            self.clock.advance_to(self.restart_at.max(self.clock.now()));
            self.check_recovered()?;
            self.boot()
        } else {
            self.live_step()
        };
        let hash = self.up.as_ref().map_or(0, |(_, d)| d.state_hash());
        self.hashes.push(hash);
        if let Some(records) = self.records.as_mut() {
            let executed = Trace::executed_values(&executed);
            records.push(TraceStep {
                step: self.step,
                t: self.clock.now().0,
                event,
                executed,
                hash,
            });
        }
        self.check_after_step(&executed)
    }

    fn boot(&mut self) -> (StepEvent, Vec<Executed>) {
        self.maybe_inject_io_fault();
        let config = self.options.config(self.revision, &self.policies);
        let paths = self.paths.clone();
        let booted =
            with_env(&mut self.fs, &mut self.procs, &self.clock, self.options.bug, |env| {
                Driver::boot(env, paths, config)
            });
        match booted {
            Ok((driver, daemon, executed)) => {
                self.up = Some((driver, daemon));
                self.after_drain(&executed);
                (StepEvent::Boot, executed)
            }
            Err(e) => {
                self.go_down(&e);
                (StepEvent::BootFailed { error: e.to_string() }, Vec::new())
            }
        }
    }

    fn live_step(&mut self) -> (StepEvent, Vec<Executed>) {
        let crash_now = self.faults && self.entropy.chance(self.options.crash_per_mille, 1000);
        if crash_now {
            self.fs.crash_after(self.entropy.below(8));
        }
        self.maybe_inject_io_fault();
        self.maybe_jump_wall();
        let (event, wake) = self.next_wake();
        let now = self.clock.now();
        let (driver, daemon) = self.up.as_mut().expect("host is up");
        let result =
            with_env(&mut self.fs, &mut self.procs, &self.clock, self.options.bug, |env| {
                driver.step(env, daemon, now, wake)
            });
        match result {
            Ok(executed) => {
                self.after_drain(&executed);
                if crash_now {
                    self.crash();
                    return (StepEvent::Crash { during_op: false }, executed);
                }
                if self.daemon().is_some_and(Daemon::drained) {
                    self.daemon_exited();
                }
                (event, executed)
            }
            Err(Fatal::Fs(e)) if e.kind == FsErrorKind::Crashed => {
                self.crash();
                (StepEvent::Crash { during_op: true }, Vec::new())
            }
            Err(e) => {
                self.go_down(&e);
                (StepEvent::FailStop { error: e.to_string() }, Vec::new())
            }
        }
    }

    /// Spawned children get their owner and drawn behaviour; signals take effect.
    fn after_drain(&mut self, executed: &[Executed]) {
        for e in executed {
            if let Executed::Spawned { name, run, pid } = e {
                self.procs.set_owner(*pid, name.clone(), *run);
            }
        }
        let now = self.clock.now();
        self.procs.settle(now, &mut self.entropy, self.faults);
        self.checker.observe(executed);
    }

    /// Chooses what wakes the daemon next and moves the clock there.
    fn next_wake(&mut self) -> (StepEvent, Wake) {
        let now = self.clock.now();
        let timer =
            self.up.as_ref().and_then(|(_, d)| d.poll_timeout()).map(|t| t.max(self.timer_floor));
        let exit = self.procs.next_exit();
        let command = self.next_command_at;
        // Exits first, then commands, then timers, at equal times.
        let exit_t = exit.map(|(t, _)| t);
        let first = [exit_t, command, timer].into_iter().flatten().min();
        let Some(first) = first else {
            // Nothing will ever happen: a long idle stretch ends in a spurious wake.
            self.clock.advance(Duration::from_secs(60));
            return (StepEvent::Timeout { spurious: true }, Wake::Timeout);
        };
        if Some(first) == exit_t {
            let (t, pid) = exit.expect("exit");
            self.clock.advance_to(t.max(now));
            return self.deliver_exit(pid);
        }
        if Some(first) == command {
            self.clock.advance_to(first.max(now));
            return self.deliver_command();
        }
        self.timer_wake(first.max(now))
    }

    fn timer_wake(&mut self, due: Instant) -> (StepEvent, Wake) {
        let now = self.clock.now();
        if self.faults && self.entropy.chance(self.options.wake_fault_per_mille, 1000) {
            match self.entropy.below(3) {
                0 if due > now => {
                    let early = Instant(now.0 + self.entropy.below(due.0 - now.0));
                    self.clock.advance_to(early);
                    return (StepEvent::Timeout { spurious: true }, Wake::Timeout);
                }
                1 => {
                    self.timer_floor =
                        due.saturating_add(Duration(self.entropy.below(Duration::from_secs(5).0)))
                }
                _ => {
                    self.timer_floor =
                        due.saturating_add(Duration::from_secs(self.entropy.between(30, 120)))
                }
            }
            if self.timer_floor > due {
                // Late or missed: anything due before the floor goes first; the timer fires late.
                let other = [self.procs.next_exit().map(|(t, _)| t), self.next_command_at]
                    .into_iter()
                    .flatten()
                    .min();
                if other.is_some_and(|t| t < self.timer_floor) {
                    return self.next_wake();
                }
                self.clock.advance_to(self.timer_floor);
                return (StepEvent::Timeout { spurious: false }, Wake::Timeout);
            }
        }
        self.clock.advance_to(due);
        (StepEvent::Timeout { spurious: false }, Wake::Timeout)
    }

    fn deliver_exit(&mut self, pid: u32) -> (StepEvent, Wake) {
        let (p, status) = self.procs.reap(pid).expect("exit of a live child");
        let (name, run) = p.owner.expect("every live child has an owner");
        let event = StepEvent::Exit { pid, name: name.to_string(), run, status };
        if self.options.bug == Some(InjectedBug::LostExitReport) && self.entropy.chance(1, 4) {
            return (event, Wake::Timeout); // The planted bug: the report never arrives.
        }
        let input = DaemonInput::Process { name, report: HarnessInput::Exited { run, status } };
        (event, Wake::Input(input))
    }

    fn deliver_command(&mut self) -> (StepEvent, Wake) {
        let command = self.draw_command();
        self.schedule_command();
        self.next_command_id += 1;
        let id = self.next_command_id;
        self.commands.insert(id, command.clone());
        let value = serde_json::to_value(&command).expect("serializes");
        (
            StepEvent::Command { id, command: value },
            Wake::Input(DaemonInput::Command { id, command }),
        )
    }

    fn draw_command(&mut self) -> Command {
        let count = self.options.harnesses.len() as u64;
        let name = harness_name(self.entropy.below(count) as usize);
        match self.entropy.below(41) {
            40 => Command::Shutdown,
            30..=39 => Command::Start { name },
            0..=9 => Command::Stop { name },
            10..=17 => Command::Restart { name },
            18..=20 => {
                let profile = ["all", "half", "absent"][self.entropy.below(3) as usize];
                Command::UseProfile { profile: Id::new(profile).expect("valid") }
            }
            _ => {
                if self.entropy.chance(1, 2) {
                    self.revision += 1;
                }
                let i = self.entropy.below(count) as usize;
                self.policies[i] =
                    [RestartPolicy::Always, RestartPolicy::OnFailure, RestartPolicy::No]
                        [self.entropy.below(3) as usize];
                Command::Reload { config: self.options.config(self.revision, &self.policies) }
            }
        }
    }

    fn schedule_command(&mut self) {
        let mean = Duration::from_secs(self.options.command_mean_secs.max(1));
        let gap = Duration(self.entropy.below(mean.0.saturating_mul(2)).max(1));
        self.next_command_at = Some(self.clock.now().saturating_add(gap));
    }

    fn maybe_inject_io_fault(&mut self) {
        if self.faults && self.entropy.chance(self.options.io_fault_per_mille, 1000) {
            let kind =
                if self.entropy.chance(1, 2) { FsErrorKind::Io } else { FsErrorKind::NoSpace };
            self.fs.fail_next(kind);
        }
    }

    fn maybe_jump_wall(&mut self) {
        if self.faults && self.entropy.chance(self.options.wall_jump_per_mille, 1000) {
            let delta = self.entropy.below(2 * 3_600_000) as i64 - 3_600_000;
            self.clock.jump_wall(delta);
        }
    }

    /// A whole-host crash: processes die, unsynced writes are dropped or torn.
    fn crash(&mut self) {
        self.fs.crash(&mut self.entropy);
        self.procs.kill_all();
        self.up = None;
        self.timer_floor = Instant::ZERO;
        let downtime = Duration::from_millis(self.entropy.between(100, 30_000));
        self.restart_at = self.clock.now().saturating_add(downtime);
    }

    /// A drained daemon exits cleanly: nothing is lost, no child is left, and its process
    /// manager starts it again shortly.
    fn daemon_exited(&mut self) {
        self.fs.release_locks();
        self.up = None;
        self.timer_floor = Instant::ZERO;
        let downtime = Duration::from_millis(self.entropy.between(100, 10_000));
        self.restart_at = self.clock.now().saturating_add(downtime);
    }

    /// The daemon stops itself on an IO error. Its children go with it in this model (a
    /// daemon crash that orphans children is simulated separately), and a process manager
    /// starts it again shortly.
    fn go_down(&mut self, _why: &Fatal) {
        self.crash();
    }

    /// Ends the fault phase: no more faults or commands; healthy children run forever; an
    /// operator restarts every failed harness whose command is healthy.
    fn calm(&mut self) -> Result<(), Violation> {
        self.faults = false;
        self.next_command_at = None;
        self.timer_floor = Instant::ZERO;
        self.fs.clear_faults();
        self.procs.calm_down();
        // A shutdown in progress finishes first: a draining daemon takes no commands.
        for _ in 0..LIVENESS_STEPS_MAX {
            if self.daemon().is_none_or(|d| !d.draining()) {
                break;
            }
            self.step()?;
        }
        if self.up.is_none() {
            self.step()?;
        }
        let failed: Vec<Id> = self.daemon().map_or_else(Vec::new, |d| {
            d.harnesses()
                .iter()
                .filter(|(n, h)| h.state() == State::Failed && self.is_healthy(n))
                .map(|(n, _)| n.clone())
                .collect()
        });
        for name in failed {
            self.next_command_id += 1;
            let id = self.next_command_id;
            let command = Command::Restart { name };
            self.commands.insert(id, command.clone());
            self.operator_step(id, command)?;
        }
        Ok(())
    }

    fn operator_step(&mut self, id: u64, command: Command) -> Result<(), Violation> {
        self.step += 1;
        let now = self.clock.now();
        let (driver, daemon) = self.up.as_mut().expect("host is up when calm");
        let wake = Wake::Input(DaemonInput::Command { id, command: command.clone() });
        let executed =
            with_env(&mut self.fs, &mut self.procs, &self.clock, self.options.bug, |env| {
                driver.step(env, daemon, now, wake)
            })
            .map_err(|e| self.violation("no-faults-when-calm", e.to_string()))?;
        self.after_drain(&executed);
        let hash = self.up.as_ref().map_or(0, |(_, d)| d.state_hash());
        self.hashes.push(hash);
        if let Some(records) = self.records.as_mut() {
            let value = serde_json::to_value(&command).expect("serializes");
            let executed = Trace::executed_values(&executed);
            let event = StepEvent::Command { id, command: value };
            records.push(TraceStep { step: self.step, t: now.0, event, executed, hash });
        }
        self.check_after_step(&executed)
    }

    fn is_healthy(&self, name: &Id) -> bool {
        let index = name.as_str()[1..].parse::<usize>().expect("simulated names are h<i>");
        self.options.harnesses[index].behaviour.is_healthy()
    }

    fn next_event_time(&self) -> Option<Instant> {
        if self.up.is_none() {
            return Some(self.restart_at);
        }
        let timer = self.daemon().and_then(Daemon::poll_timeout);
        [timer, self.procs.next_exit().map(|(t, _)| t)].into_iter().flatten().min()
    }

    /// Every enabled harness whose command is healthy is running, with a live child.
    fn check_liveness(&self) -> Result<(), Violation> {
        let Some(daemon) = self.daemon() else {
            return Err(
                self.violation("liveness", "the host is still down after the calm phase".into())
            );
        };
        for (name, h) in daemon.harnesses() {
            if h.enabled() && self.is_healthy(name) && h.state() != State::Running {
                let detail = format!(
                    "{name} is {:?} after {}s without faults",
                    h.state(),
                    self.options.liveness_secs
                );
                return Err(self.violation("liveness", detail));
            }
        }
        Ok(())
    }

    fn check_after_step(&mut self, executed: &[Executed]) -> Result<(), Violation> {
        let Some((_, daemon)) = self.up.as_ref() else { return Ok(()) };
        let durable = self.fs.durable_bytes(&self.paths.state);
        self.checker
            .check_step(daemon, &self.procs, durable.as_deref(), executed, &self.commands)
            .map_err(|(inv, detail)| self.violation(&inv, detail))
    }

    /// Before a boot: what survived the crash still holds everything acknowledged.
    fn check_recovered(&mut self) -> Result<(), Violation> {
        let state = self.fs.durable_read(&self.paths.state);
        let events = self.fs.durable_read(&self.paths.events);
        self.checker
            .check_boot(&self.paths, state.as_deref(), events.as_deref())
            .map_err(|(inv, detail)| self.violation(&inv, detail))
    }

    fn violation(&self, invariant: &str, detail: String) -> Violation {
        Violation { step: self.step, invariant: invariant.to_owned(), detail }
    }
}

/// Runs `f` with the environment seams borrowed from the world, optionally behind the planted
/// lying-`sync_dir` bug.
fn with_env<R>(
    fs: &mut SimFs,
    procs: &mut SimProcesses,
    clock: &dyn Clock,
    bug: Option<InjectedBug>,
    f: impl FnOnce(&mut Env<'_>) -> R,
) -> R {
    let mut lying;
    let fs: &mut dyn Fs = match bug {
        Some(InjectedBug::LyingDirSync) => {
            lying = LyingDirSync(fs);
            &mut lying
        }
        Some(InjectedBug::LostExitReport) | None => fs,
    };
    let mut env = Env { fs, spawner: procs, clock };
    f(&mut env)
}
