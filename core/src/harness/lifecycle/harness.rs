//! The lifecycle machine of one harness: every transition, its deadlines and its invariants.
//!
//! Pure and single-writer: one input at a time with `now`, effects pushed to an output vector,
//! the next deadline derived from state. Deadlines are compared with `now`, never counted, so a
//! late, early, missed or repeated `handle_timeout` only delays a decision, never changes it.

use super::{Cause, Event, Hang, HarnessSpec, LifecycleLimits, Readiness, RestartPolicy, State};
use crate::env::{ExitStatus, Pid, Signal, SpawnSpec};
use crate::error::InvariantError;
use crate::ids::Id;
use crate::time::{Duration, Instant};
use serde::{Deserialize, Serialize};

/// One input to a harness. `run` ties process reports to the spawn that caused them, so a late
/// report about an earlier run is recognised and ignored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "input")]
pub enum HarnessInput {
    /// Operator: want it running.
    Start,
    /// Operator: want it stopped (persists `enabled = false`).
    Stop,
    /// Operator: stop it if running, clear any failure latch, start afresh.
    Restart,
    /// The spawner started run `run` as `pid`.
    Spawned {
        /// The run this answers.
        run: u64,
        /// The child's pid (and process-group id).
        pid: Pid,
    },
    /// The spawner could not start run `run`.
    SpawnFailed {
        /// The run this answers.
        run: u64,
    },
    /// Run `run` exited.
    Exited {
        /// The run this answers.
        run: u64,
        /// How it ended.
        status: ExitStatus,
    },
    /// Run `run` showed its readiness evidence.
    Ready {
        /// The run this answers.
        run: u64,
    },
    /// Run `run` lost the readiness it had shown (a recheck of its file or probe failed): it
    /// is not ready until its evidence shows again.
    Unready {
        /// The run this answers.
        run: u64,
    },
    /// The spawn of run `run` was never carried out (it waited for its dependencies and was
    /// stopped meanwhile): a stop in progress ends at rest, with no exit to report.
    Withdrawn {
        /// The run this answers.
        run: u64,
    },
    /// Run `run` sent `WATCHDOG=1`: it is alive and not hung.
    Watchdog {
        /// The run this answers.
        run: u64,
    },
    /// A reloaded configuration for this harness.
    Reconfigure(Box<HarnessSpec>),
    /// The configuration's intent for this harness; applies only while the intent is not
    /// pinned by an operator or a policy.
    FollowConfig(bool),
    /// The daemon is shutting down: stop the run gracefully and schedule nothing, but keep
    /// the intent, so the next daemon starts it again.
    Halt,
    /// The drain deadline passed: SIGKILL a run that is still stopping, now.
    KillNow,
}

/// What one harness asks of the world. The daemon adds the durability barrier in front.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HarnessOut {
    /// Start run `run` with this spec.
    Spawn {
        /// The run number, unique per harness for the life of its durable state.
        run: u64,
        /// What to start.
        spec: SpawnSpec,
    },
    /// Signal the process group of run `run`.
    Signal {
        /// The run.
        run: u64,
        /// Its process group.
        pid: Pid,
        /// Which signal.
        signal: Signal,
    },
    /// Tell subscribers and the journal.
    Event(Event),
}

/// The last recorded end of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LastExit {
    /// How it ended; `None` for a spawn failure.
    pub status: Option<ExitStatus>,
    /// True when the stop needed SIGKILL after the grace period.
    pub forced: bool,
}

/// A live (or starting) process of this harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Run {
    id: u64,
    pid: Option<Pid>,
    started_at: Instant,
    ready: bool,
    /// When its readiness evidence last arrived (the spawn, without readiness); kept when
    /// readiness is lost, so a run that was ready once is past its start.
    ready_at: Option<Instant>,
    /// Its last `WATCHDOG=1`.
    pinged_at: Option<Instant>,
}

impl Run {
    /// When this run, as configured by `spec`, counts as hung unless something arrives.
    fn hang_deadline(&self, spec: &HarnessSpec) -> Option<(Instant, Hang, Duration)> {
        self.pid?;
        if !self.ready && self.ready_at.is_none() {
            let limit = spec.ready_timeout?;
            return Some((self.started_at.saturating_add(limit), Hang::ReadyTimeout, limit));
        }
        let limit = spec.watchdog?;
        // Counted from the last ping or from readiness, whichever came later: a ping before
        // `READY=1` does not shorten the first interval (systemd arms its watchdog at READY).
        let since = self.pinged_at.max(self.ready_at).unwrap_or(self.started_at);
        Some((since.saturating_add(limit), Hang::Watchdog, limit))
    }
}

/// The durable part of a harness: what `state.json` keeps across daemon restarts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Durable {
    /// The intent: does the operator want it running?
    pub enabled: bool,
    /// True once an operator or a restart policy decided the intent; until then it follows
    /// the configuration (`enabled`, autostart profiles), reloads included.
    #[serde(default)]
    pub pinned: bool,
    /// The give-up latch: `failed` until a person starts or restarts it.
    pub failed: bool,
    /// Restarts performed by policy, ever.
    pub restarts: u64,
    /// Failed runs since the last healthy run or manual start.
    pub consecutive_failures: u32,
    /// Runs spawned, ever; the next run number is `runs + 1`.
    pub runs: u64,
    /// Run numbers reserved durably before use, a block at a time: a run is spawned only
    /// under a durable reservation, so after a crash numbering resumes past it and no run
    /// number is ever used twice, while most spawns need no write before them.
    #[serde(default)]
    pub reserved_runs: u64,
    /// How the last run ended.
    pub last_exit: Option<LastExit>,
}

/// The hash of a harness's active and staged specs, as [`Harness::hash_into`] feeds it.
fn specs_hash(active: &HarnessSpec, staged: Option<&HarnessSpec>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = crate::hash::StateHasher::default();
    active.hash(&mut hasher);
    staged.hash(&mut hasher);
    hasher.finish()
}

/// Run numbers reserved by one durable write (see [`Durable::reserved_runs`]).
pub(crate) const RUN_RESERVATION: u64 = 16;

impl Durable {
    /// The part of the record every act depends on, which must be durable first: intent,
    /// its origin, the failure latch and the run reservation. The rest is bookkeeping,
    /// written right after the acts.
    pub(crate) fn barrier_part(&self) -> (bool, bool, bool, u64) {
        (self.enabled, self.pinned, self.failed, self.reserved_runs)
    }
}

/// One harness under supervision.
#[derive(Clone, Debug)]
pub struct Harness {
    name: Id,
    state: State,
    durable: Durable,
    active: HarnessSpec,
    staged: Option<HarnessSpec>,
    /// The hash of `active` and `staged`, kept with them: they change only at a reload or a
    /// start, and hashing them anew for every state hash cost more than the rest together.
    specs_hash: u64,
    run: Option<Run>,
    /// Exit times within the flap window, oldest first; at most `flap_threshold` kept.
    recent_exits: Vec<Instant>,
    /// How many restarts were scheduled while flapping: the backoff exponent.
    flap_level: u32,
    retry_at: Option<Instant>,
    /// The delay chosen when `retry_at` was set.
    retry_delay: Duration,
    kill_at: Option<Instant>,
    kill_sent: bool,
    /// A start asked for while stopping, and who asked: it happens once the run has ended.
    start_after_stop: Option<Cause>,
    /// The run being stopped was hung: its end is a failed run under the restart policy.
    hung: Option<Hang>,
    /// Numbers reserved by an earlier life may have been used: the next run is numbered
    /// past all of them.
    run_floor: u64,
}

impl Harness {
    /// A harness at rest, with durable facts from an earlier life (or defaults).
    pub fn new(name: Id, spec: HarnessSpec, durable: Durable) -> Harness {
        let state = if durable.failed { State::Failed } else { State::Stopped };
        Harness {
            name,
            state,
            durable,
            specs_hash: specs_hash(&spec, None),
            active: spec,
            staged: None,
            run: None,
            recent_exits: Vec::new(),
            flap_level: 0,
            retry_at: None,
            retry_delay: Duration::ZERO,
            kill_at: None,
            kill_sent: false,
            start_after_stop: None,
            hung: None,
            run_floor: durable.reserved_runs,
        }
    }

    /// The harness's name.
    pub fn name(&self) -> &Id {
        &self.name
    }
    /// Its current state.
    pub fn state(&self) -> State {
        self.state
    }
    /// What must survive a restart of the daemon.
    pub fn durable(&self) -> Durable {
        self.durable
    }
    /// The intent.
    pub fn enabled(&self) -> bool {
        self.durable.enabled
    }
    /// The spec the current or next run uses (staged changes not included).
    pub fn active_spec(&self) -> &HarnessSpec {
        &self.active
    }
    /// True when a reloaded configuration waits for the next start ("restart to apply").
    pub fn config_changed(&self) -> bool {
        self.staged.is_some()
    }
    /// The pid of the live run, if any.
    pub fn pid(&self) -> Option<Pid> {
        self.run.and_then(|r| r.pid)
    }
    /// When the live run started.
    pub fn started_at(&self) -> Option<Instant> {
        self.run.map(|r| r.started_at)
    }
    /// True when the live run showed its readiness evidence.
    pub fn ready(&self) -> bool {
        self.run.is_some_and(|r| r.ready)
    }
    /// When the live run last sent `WATCHDOG=1`.
    pub fn pinged_at(&self) -> Option<Instant> {
        self.run.and_then(|r| r.pinged_at.filter(|_| r.pid.is_some()))
    }
    /// When the next automatic start is due.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }
    /// The restart delay being waited out, as chosen when the restart was scheduled.
    pub fn retry_delay(&self) -> Option<Duration> {
        self.retry_at.map(|_| self.retry_delay)
    }
    /// True while the flap threshold is crossed.
    pub fn flapping(&self) -> bool {
        self.flap_level > 0
    }
    /// Exits counted within the current flap window.
    pub fn recent_exit_count(&self) -> usize {
        self.recent_exits.len()
    }
    /// True when the live run belongs to this harness and is identified by `run`.
    pub fn current_run(&self) -> Option<u64> {
        self.run.map(|r| r.id)
    }

    /// Starts the harness if its intent says so: the boot path, shared by a fresh start and a
    /// restart after a crash.
    pub fn boot(&mut self, now: Instant, out: &mut Vec<HarnessOut>) {
        self.boot_because(now, Cause::Autostart, out);
    }

    /// [`boot`](Self::boot) on behalf of `cause`: a harness a reload added starts because
    /// of the configuration.
    pub(crate) fn boot_because(&mut self, now: Instant, cause: Cause, out: &mut Vec<HarnessOut>) {
        assert!(self.run.is_none(), "boot with a live run");
        if self.durable.enabled && !self.durable.failed {
            self.start_run(now, cause, out);
        }
    }

    /// Handles one input, asked for by whom the input says: an operator for a start, stop or
    /// restart, the configuration for `FollowConfig`, a shutdown for `Halt` and `KillNow`.
    pub fn handle(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        input: HarnessInput,
        out: &mut Vec<HarnessOut>,
    ) {
        let cause = match input {
            HarnessInput::FollowConfig(_) => Cause::Configuration,
            HarnessInput::Halt | HarnessInput::KillNow => Cause::Shutdown,
            _ => Cause::Operator,
        };
        self.handle_because(now, limits, input, cause, out);
    }

    /// Handles one input on behalf of `cause`, which the state changes it brings about carry
    /// (a start or stop the daemon makes for a profile or a reload says so).
    pub(crate) fn handle_because(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        input: HarnessInput,
        cause: Cause,
        out: &mut Vec<HarnessOut>,
    ) {
        let shared = limits;
        let limits = &self.active.crash_loop.apply(shared);
        match input {
            HarnessInput::Start => {
                self.durable.pinned = true;
                self.on_start(now, cause, out)
            }
            HarnessInput::Stop => {
                self.durable.pinned = true;
                self.on_stop(now, limits, cause, out)
            }
            HarnessInput::Restart => {
                self.durable.pinned = true;
                self.on_restart(now, limits, cause, out)
            }
            HarnessInput::FollowConfig(want) if !self.durable.pinned && want != self.enabled() => {
                if want {
                    self.on_start(now, cause, out)
                } else {
                    self.on_stop(now, limits, cause, out)
                }
            }
            HarnessInput::FollowConfig(_) => {}
            HarnessInput::Spawned { run, pid } => self.on_spawned(now, limits, run, pid, out),
            HarnessInput::SpawnFailed { run } => self.on_run_ended(now, limits, run, None, out),
            HarnessInput::Exited { run, status } => {
                self.on_run_ended(now, limits, run, Some(status), out)
            }
            HarnessInput::Ready { run } => self.on_ready(now, run, out),
            HarnessInput::Unready { run } => {
                if let Some(r) = self.run.as_mut().filter(|r| r.id == run && r.ready) {
                    r.ready = false;
                    let name = self.name.clone();
                    out.push(HarnessOut::Event(Event::HarnessUnready { name, run }));
                }
            }
            HarnessInput::Withdrawn { run } => {
                let pending = self.run.is_some_and(|r| r.id == run && r.pid.is_none());
                if pending && self.state == State::Stopping {
                    self.run = None;
                    self.kill_at = None;
                    self.finish_stopping(now, out);
                }
            }
            HarnessInput::Watchdog { run } => {
                if let Some(r) = self.run.as_mut().filter(|r| r.id == run && r.pid.is_some()) {
                    r.pinged_at = Some(now);
                }
            }
            HarnessInput::Reconfigure(spec) => {
                self.on_reconfigure(*spec);
                // Its own crash-loop limits apply at once, counters trimmed to fit them.
                self.limits_changed(shared);
            }
            HarnessInput::Halt => self.on_halt(now, limits, cause, out),
            HarnessInput::KillNow => {
                if self.state == State::Stopping {
                    self.send_kill(out);
                }
            }
        }
        self.debug_check(limits);
    }

    /// In debug builds, the invariants after every input and timeout.
    fn debug_check(&self, limits: &LifecycleLimits) {
        #[cfg(debug_assertions)]
        if let Err(broken) = self.check(limits) {
            panic!("harness {} invariant broken: {broken}", self.name);
        }
        let _ = limits;
    }

    /// Acts on every deadline that is due at `now`. Harmless when nothing is due. Afterwards
    /// [`Harness::poll_timeout`] is later than `now`: a wake consumes everything due.
    pub fn handle_timeout(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        out: &mut Vec<HarnessOut>,
    ) {
        let limits = &self.active.crash_loop.apply(limits);
        // The checks run in the order their actions arm one another, so a deadline an earlier
        // action arms is looked at in this same wake: a retry starts a run with no pid yet
        // (nothing of it is due); a hung run is condemned, which arms the kill deadline at
        // `now + stop_grace`; then the kill. With the kill looked at before the hang, a zero
        // grace left a kill deadline due at `now` after the wake, and a driver sleeping until
        // the next deadline would spin on it instead of sending the KILL.
        if self.retry_at.is_some_and(|at| at <= now) {
            debug_assert!(matches!(self.state, State::Restarting | State::Degraded));
            self.retry_at = None;
            self.start_run(now, Cause::RestartPolicy, out);
        }
        if let Some((at, hang, limit)) = self.hang_deadline() {
            if at <= now {
                self.condemn(now, limits, hang, limit, out);
            }
        }
        if self.kill_at.is_some_and(|at| at <= now) {
            self.send_kill(out);
        }
        // Only a confirmed run can outlive anything; a spawn in flight has not started yet.
        if let Some(run) = self.run.filter(|r| r.pid.is_some()) {
            self.forget_outlived(now, run.started_at, limits, Some(out));
        }
        self.debug_check(limits);
    }

    /// The earliest instant at which [`Harness::handle_timeout`] has something to do.
    pub fn poll_timeout(&self, limits: &LifecycleLimits) -> Option<Instant> {
        let limits = &self.active.crash_loop.apply(limits);
        let mut next = self.retry_at;
        next = min_opt(next, self.kill_at);
        next = min_opt(next, self.hang_deadline().map(|(at, _, _)| at));
        if let Some(run) = self.run.filter(|r| r.pid.is_some() && self.state != State::Stopping) {
            if !self.recent_exits.is_empty() || self.flap_level > 0 {
                next = min_opt(next, Some(run.started_at.saturating_add(limits.flap_window)));
            }
            if self.durable.consecutive_failures > 0 {
                next = min_opt(next, Some(run.started_at.saturating_add(limits.healthy_run)));
            }
        }
        next
    }

    fn on_start(&mut self, now: Instant, cause: Cause, out: &mut Vec<HarnessOut>) {
        self.durable.enabled = true;
        match self.state {
            State::Stopped | State::Failed => {
                self.clear_crash_bookkeeping();
                self.start_run(now, cause, out);
            }
            // A start while a hung run is being stopped is the operator's word, as a restart
            // is: the run ends as a stop, then starts again.
            State::Stopping => {
                self.hung = None;
                self.start_after_stop = Some(cause);
            }
            State::Starting | State::Running | State::Degraded | State::Restarting => {}
        }
    }

    fn on_stop(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        cause: Cause,
        out: &mut Vec<HarnessOut>,
    ) {
        self.durable.enabled = false;
        self.start_after_stop = None;
        self.hung = None;
        match self.state {
            State::Starting | State::Running | State::Degraded if self.run.is_some() => {
                self.begin_stopping(now, limits, cause, out)
            }
            State::Restarting | State::Degraded | State::Failed => {
                self.retry_at = None;
                self.clear_crash_bookkeeping();
                self.set_state_because(State::Stopped, Some(cause), out);
            }
            State::Starting | State::Running => unreachable!("{:?} without a run", self.state),
            State::Stopping | State::Stopped => {}
        }
    }

    fn on_halt(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        cause: Cause,
        out: &mut Vec<HarnessOut>,
    ) {
        self.start_after_stop = None;
        self.hung = None;
        match self.state {
            State::Starting | State::Running | State::Degraded if self.run.is_some() => {
                self.begin_stopping(now, limits, cause, out)
            }
            State::Restarting | State::Degraded => {
                self.retry_at = None;
                self.set_state_because(State::Stopped, Some(cause), out);
            }
            State::Starting | State::Running => unreachable!("{:?} without a run", self.state),
            State::Stopping | State::Stopped | State::Failed => {}
        }
    }

    fn on_restart(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        cause: Cause,
        out: &mut Vec<HarnessOut>,
    ) {
        self.durable.enabled = true;
        self.clear_crash_bookkeeping();
        self.hung = None;
        match self.state {
            State::Starting => {}
            State::Running | State::Degraded if self.run.is_some() => {
                self.begin_stopping(now, limits, cause, out);
                self.start_after_stop = Some(cause);
            }
            State::Stopping => self.start_after_stop = Some(cause),
            State::Running => unreachable!("running without a run"),
            State::Degraded | State::Restarting | State::Stopped | State::Failed => {
                self.retry_at = None;
                self.start_run(now, cause, out);
            }
        }
    }

    fn on_spawned(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        run: u64,
        pid: Pid,
        out: &mut Vec<HarnessOut>,
    ) {
        let Some(current) = self.run.as_mut().filter(|r| r.id == run && r.pid.is_none()) else {
            return; // A report about another run: stale, ignore.
        };
        current.pid = Some(pid);
        current.started_at = now;
        current.ready = self.active.readiness == Readiness::None;
        current.ready_at = current.ready.then_some(now);
        match self.state {
            State::Starting => {
                let to = if self.flap_level > 0 { State::Degraded } else { State::Running };
                self.set_state(to, out);
            }
            // Stop was asked while the spawn was in flight: stop the child now.
            State::Stopping => self.signal_term(now, limits, out),
            other => unreachable!("spawn reported in {other:?}"),
        }
    }

    fn on_ready(&mut self, now: Instant, run: u64, out: &mut Vec<HarnessOut>) {
        if let Some(r) = self.run.as_mut().filter(|r| r.id == run && r.pid.is_some() && !r.ready) {
            r.ready = true;
            r.ready_at = Some(now);
            out.push(HarnessOut::Event(Event::HarnessReady { name: self.name.clone(), run }));
        }
    }

    fn on_reconfigure(&mut self, spec: HarnessSpec) {
        // The policy and the delay are consulted at exit time and the grace at stop time, so
        // none of them is run-affecting: the next exit or stop uses the new values.
        self.active.restart = spec.restart;
        self.active.enabled = spec.enabled;
        self.active.restart_delay = spec.restart_delay;
        self.active.stop_grace = spec.stop_grace;
        self.active.crash_loop = spec.crash_loop;
        self.active.requires = spec.requires.clone();
        self.active.after = spec.after.clone();
        let live = self.run.is_some();
        if !self.active.run_affecting_change(&spec) {
            self.staged = None;
        } else if live {
            self.staged = Some(spec);
        } else {
            self.active = spec;
            self.staged = None;
        }
        self.specs_hash = specs_hash(&self.active, self.staged.as_ref());
    }

    /// An exit or a spawn failure (`status == None`) of run `run`.
    fn on_run_ended(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        run: u64,
        status: Option<ExitStatus>,
        out: &mut Vec<HarnessOut>,
    ) {
        let Some(ended) = self.run.filter(|r| r.id == run) else {
            return; // Stale report about an earlier run.
        };
        self.run = None;
        self.kill_at = None;
        let forced = std::mem::take(&mut self.kill_sent);
        self.durable.last_exit = Some(LastExit { status, forced });
        out.push(HarnessOut::Event(Event::HarnessExited {
            name: self.name.clone(),
            code: status.and_then(ExitStatus::code),
            signal: status.and_then(|s| match s {
                ExitStatus::Signal(n) => Some(n),
                ExitStatus::Code(_) => None,
            }),
        }));
        if self.state == State::Stopping {
            // A hung run stopped by its watchdog or readiness timeout failed, whatever its
            // exit code: its restart policy decides what follows.
            if self.hung.take().is_some() {
                self.after_unplanned_end(now, limits, status, true, out);
            } else {
                self.finish_stopping(now, out);
            }
            return;
        }
        if ended.pid.is_some() {
            // Silently: the state this exit leads to is decided next, without a detour.
            self.forget_outlived(now, ended.started_at, limits, None);
        }
        self.after_unplanned_end(now, limits, status, false, out);
    }

    fn finish_stopping(&mut self, now: Instant, out: &mut Vec<HarnessOut>) {
        self.set_state(State::Stopped, out);
        if let Some(cause) = self.start_after_stop.take() {
            self.durable.enabled = true;
            self.start_run(now, cause, out);
        }
    }

    /// Decides what follows an exit nobody asked for: a restart, a slower restart, a clean stop
    /// by policy, or giving up.
    fn after_unplanned_end(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        status: Option<ExitStatus>,
        hung: bool,
        out: &mut Vec<HarnessOut>,
    ) {
        let spawn_failed = status.is_none();
        let failure = hung || !status.is_some_and(ExitStatus::success);
        let restart = self.durable.enabled
            && match self.active.restart {
                RestartPolicy::Always | RestartPolicy::UnlessStopped => true,
                RestartPolicy::OnFailure => failure,
                RestartPolicy::No => false,
            };
        if !restart {
            self.clear_crash_bookkeeping();
            if spawn_failed && self.durable.enabled {
                // A command that never came up must surface loudly, not as a clean stop.
                self.durable.failed = true;
                self.set_state(State::Failed, out);
            } else {
                // The policy's outcome persists like an explicit stop.
                self.durable.enabled = false;
                self.durable.pinned = true;
                self.set_state(State::Stopped, out);
            }
            return;
        }
        let flapping = self.note_exit(now, limits);
        // While flapping every exit is a failed attempt, clean or not: a harness that exits 0
        // in a tight loop must reach the give-up ceiling too.
        if failure || flapping {
            self.durable.consecutive_failures = self.durable.consecutive_failures.saturating_add(1);
        }
        if limits.give_up_after > 0 && self.durable.consecutive_failures >= limits.give_up_after {
            self.durable.failed = true;
            self.recent_exits.clear();
            self.flap_level = 0;
            self.set_state(State::Failed, out);
            return;
        }
        self.schedule_restart(now, limits, flapping, out);
    }

    /// Records an exit in the flap window. True when the harness is flapping: it already was
    /// (only a run that outlives the window ends that), or this is the N-th exit within it.
    fn note_exit(&mut self, now: Instant, limits: &LifecycleLimits) -> bool {
        self.recent_exits.retain(|t| now.saturating_since(*t) < limits.flap_window);
        self.recent_exits.push(now);
        let threshold = limits.flap_threshold.max(1) as usize;
        if self.recent_exits.len() > threshold {
            self.recent_exits.remove(0);
        }
        self.flap_level > 0 || self.recent_exits.len() >= threshold
    }

    /// Schedules the next start: after the plain delay, or, while flapping, after a delay that
    /// doubles with every flapping exit up to the cap.
    fn schedule_restart(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        flapping: bool,
        out: &mut Vec<HarnessOut>,
    ) {
        let base = self.active.restart_delay.unwrap_or(limits.restart_delay);
        self.durable.restarts = self.durable.restarts.saturating_add(1);
        if flapping {
            self.flap_level = self.flap_level.saturating_add(1);
            let delay =
                LifecycleLimits::flapping_delay(base, limits.restart_delay_max, self.flap_level);
            self.retry_at = Some(now.saturating_add(delay));
            self.retry_delay = delay;
            self.set_state(State::Degraded, out);
            out.push(HarnessOut::Event(Event::HarnessFlapping {
                name: self.name.clone(),
                restarts: self.durable.restarts,
                next_retry_in: delay.as_millis(),
            }));
        } else {
            // Never sooner than the floor: a restart within the exit's own transition would
            // let a crash loop hold the daemon's loop and starve its socket and signals.
            let delay = base.max(super::limits::RESTART_FLOOR);
            self.retry_at = Some(now.saturating_add(delay));
            self.retry_delay = delay;
            self.set_state(State::Restarting, out);
        }
    }

    /// Forgets what a run has outlived: the flap count after the flap window, consecutive
    /// failures after the healthy-run time. Runs on timeouts and again at exit, so a missed
    /// wake cannot make a long run count as a crash. With `out`, a degraded harness whose run
    /// outlived the window returns to `running`.
    fn forget_outlived(
        &mut self,
        now: Instant,
        started_at: Instant,
        limits: &LifecycleLimits,
        out: Option<&mut Vec<HarnessOut>>,
    ) {
        if self.state == State::Stopping {
            return;
        }
        let lived = now.saturating_since(started_at);
        if lived >= limits.flap_window && (!self.recent_exits.is_empty() || self.flap_level > 0) {
            self.recent_exits.clear();
            self.flap_level = 0;
            if let Some(out) = out.filter(|_| self.state == State::Degraded) {
                self.set_state(State::Running, out);
            }
        }
        if lived >= limits.healthy_run {
            self.durable.consecutive_failures = 0;
        }
    }

    fn start_run(&mut self, now: Instant, cause: Cause, out: &mut Vec<HarnessOut>) {
        assert!(self.run.is_none(), "{}: start with a live run", self.name);
        if let Some(spec) = self.staged.take() {
            self.active = spec;
            self.specs_hash = specs_hash(&self.active, None);
        }
        self.durable.failed = false;
        self.durable.runs =
            self.durable.runs.max(std::mem::take(&mut self.run_floor)).saturating_add(1);
        if self.durable.runs > self.durable.reserved_runs {
            self.durable.reserved_runs = self.durable.runs.saturating_add(RUN_RESERVATION - 1);
        }
        let id = self.durable.runs;
        self.run = Some(Run {
            id,
            pid: None,
            started_at: now,
            ready: false,
            ready_at: None,
            pinged_at: None,
        });
        self.set_state_because(State::Starting, Some(cause), out);
        out.push(HarnessOut::Spawn { run: id, spec: self.active.spawn.clone() });
    }

    fn begin_stopping(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        cause: Cause,
        out: &mut Vec<HarnessOut>,
    ) {
        self.retry_at = None;
        self.set_state_because(State::Stopping, Some(cause), out);
        if self.pid().is_some() {
            self.signal_term(now, limits, out);
        }
    }

    fn signal_term(&mut self, now: Instant, limits: &LifecycleLimits, out: &mut Vec<HarnessOut>) {
        let run = self.run.expect("TERM needs a run");
        let pid = run.pid.expect("TERM needs a pid");
        let grace = self.active.stop_grace.unwrap_or(limits.stop_grace);
        self.kill_at = Some(now.saturating_add(grace));
        // A terminal harness's session is hung up first, as closing its terminal would:
        // programs that save their work on SIGHUP (shells, editors, agent interfaces) do.
        if self.active.spawn.tty.is_some() {
            out.push(HarnessOut::Signal { run: run.id, pid, signal: Signal::Hangup });
        }
        out.push(HarnessOut::Signal { run: run.id, pid, signal: Signal::Term });
    }

    /// When the live run counts as hung, unless it is already being stopped.
    fn hang_deadline(&self) -> Option<(Instant, Hang, Duration)> {
        if self.state == State::Stopping {
            return None;
        }
        self.run?.hang_deadline(&self.active)
    }

    /// Stops a hung run (TERM, the grace, KILL); its end then counts as a failed run.
    fn condemn(
        &mut self,
        now: Instant,
        limits: &LifecycleLimits,
        hang: Hang,
        limit: Duration,
        out: &mut Vec<HarnessOut>,
    ) {
        out.push(HarnessOut::Event(Event::HarnessHung {
            name: self.name.clone(),
            reason: hang,
            after_ms: limit.as_millis(),
        }));
        self.hung = Some(hang);
        self.begin_stopping(now, limits, Cause::Hung, out);
    }

    fn send_kill(&mut self, out: &mut Vec<HarnessOut>) {
        self.kill_at = None;
        let Some(run) = self.run else { return };
        let Some(pid) = run.pid else { return };
        self.kill_sent = true;
        out.push(HarnessOut::Signal { run: run.id, pid, signal: Signal::Kill });
    }

    fn clear_crash_bookkeeping(&mut self) {
        self.recent_exits.clear();
        self.flap_level = 0;
        self.durable.consecutive_failures = 0;
        self.durable.failed = false;
    }

    /// A state change that follows from the machine's own rules (a spawn confirmed, an
    /// exit, a deadline).
    fn set_state(&mut self, to: State, out: &mut Vec<HarnessOut>) {
        self.set_state_because(to, None, out);
    }

    /// A state change, carrying who asked for it when someone did.
    fn set_state_because(&mut self, to: State, cause: Option<Cause>, out: &mut Vec<HarnessOut>) {
        let from = self.state;
        if from == to {
            return;
        }
        self.state = to;
        out.push(HarnessOut::Event(Event::HarnessStateChanged {
            name: self.name.clone(),
            from,
            to,
            cause,
        }));
    }

    /// The machine's invariants; `Err` names the first one broken.
    pub fn check(&self, limits: &LifecycleLimits) -> Result<(), InvariantError> {
        let limits = &self.active.crash_loop.apply(limits);
        let fail = |what: &str| {
            Err(InvariantError::new(format!("{}: {what} (state {:?})", self.name, self.state)))
        };
        let has_run = self.run.is_some();
        let has_pid = self.pid().is_some();
        match self.state {
            State::Stopped | State::Failed if has_run => return fail("a run while at rest"),
            State::Restarting if has_run || self.retry_at.is_none() => {
                return fail("restarting needs a retry deadline and no run")
            }
            State::Degraded if has_run == self.retry_at.is_some() => {
                return fail("degraded has either a run or a retry deadline")
            }
            State::Running if !has_pid => return fail("running without a pid"),
            State::Starting if !has_run || has_pid => return fail("starting needs a pid-less run"),
            State::Stopping if !has_run => return fail("stopping without a run"),
            _ => {}
        }
        if self.state == State::Degraded && self.flap_level == 0 {
            return fail("degraded without flapping");
        }
        if self.retry_at.is_some() && !matches!(self.state, State::Restarting | State::Degraded) {
            return fail("a retry deadline outside restarting/degraded");
        }
        if self.kill_at.is_some() && self.state != State::Stopping {
            return fail("a kill deadline outside stopping");
        }
        if self.hung.is_some() && self.state != State::Stopping {
            return fail("a hung run outside stopping");
        }
        if self.durable.failed != (self.state == State::Failed) {
            return fail("the failed latch disagrees with the state");
        }
        if limits.give_up_after > 0
            && self.durable.consecutive_failures >= limits.give_up_after
            && self.state != State::Failed
        {
            return fail("give-up count reached but not failed");
        }
        if self.recent_exits.len() > limits.flap_threshold.max(1) as usize {
            return fail("more recent exits kept than the flap threshold");
        }
        if self.run.is_some_and(|r| r.id != self.durable.runs) {
            return fail("the live run is not the latest run");
        }
        Ok(())
    }
}

fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Reconfiguration of limits, hashing and status helpers.
impl Harness {
    /// New limits took effect: counters kept under the old ones are trimmed so they fit the
    /// new ones. Lowering the give-up ceiling below the current count does not fail a harness
    /// retroactively; its next failed run does.
    pub(crate) fn limits_changed(&mut self, limits: &LifecycleLimits) {
        let limits = &self.active.crash_loop.apply(limits);
        let threshold = limits.flap_threshold.max(1) as usize;
        let excess = self.recent_exits.len().saturating_sub(threshold);
        self.recent_exits.drain(..excess);
        if limits.give_up_after > 0 && !self.durable.failed {
            let ceiling = limits.give_up_after - 1;
            self.durable.consecutive_failures = self.durable.consecutive_failures.min(ceiling);
        }
    }

    /// Feeds everything that decides this harness's future behaviour to `hasher`.
    pub(crate) fn hash_into(&self, hasher: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        self.name.hash(hasher);
        self.state.hash(hasher);
        self.durable.hash(hasher);
        debug_assert_eq!(self.specs_hash, specs_hash(&self.active, self.staged.as_ref()));
        self.specs_hash.hash(hasher);
        self.run.hash(hasher);
        self.recent_exits.hash(hasher);
        self.flap_level.hash(hasher);
        self.retry_at.hash(hasher);
        self.retry_delay.hash(hasher);
        self.kill_at.hash(hasher);
        self.kill_sent.hash(hasher);
        self.start_after_stop.hash(hasher);
        self.hung.hash(hasher);
        self.run_floor.hash(hasher);
    }

    /// The delay until the next retry, seen from `now`.
    pub fn next_retry_in(&self, now: Instant) -> Option<Duration> {
        self.retry_at.map(|at| at.saturating_since(now))
    }
}
