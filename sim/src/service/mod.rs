//! The supervisor service under faults: the core's wake machine (`wake::ServiceScheduler`),
//! sweep (`service::sweep`) and watcher (`watch::Watcher`), the code the daemon runs, over the
//! goal world of [`crate::goal`]. Faults: an enrolled goal that never reads (a corrupt or
//! missing one), ticks that fail for reasons outside the goal or take seconds, a person acting
//! between sweeps, late and missed wakes, spurious and real file-change hints, stop requests
//! with and without a drain deadline, wall-clock jumps, and crashes mid-sweep, mid-tick and
//! mid-write after which the service restarts from its persisted wake hints (sometimes
//! stale). After every step: the goal world's invariants (no dispatch repeated, ceilings,
//! frozen intent), the scheduler's and the watcher's own, no tick of an unchanged
//! `awaiting_change` goal, no tick of a backed-off goal before its backoff ends, the unreadable goal never
//! stalling the readable one, heartbeats never further apart than their interval plus the
//! watcher thread's lateness (also during long ticks), and a reader judging a live service
//! running (unless the wall clock jumped past the lapse) and a crashed one never running.

use crate::actions::{ActionLog, WorldOptions};
use crate::entropy::Entropy;
use crate::goal::GoalWorld;
use harn_core::goal::{goal_fingerprint, GoalState, Mode, StopReason};
use harn_core::ids::Id;
use harn_core::service::driver::{self, ServiceHost, ServiceStep, SweepOutcome};
use harn_core::service::wake::{Fingerprint, GoalWake, ServiceScheduler, WakeConfig, WakeState};
use harn_core::service::watch::{WatchEffect, Watcher};
use harn_core::service::{
    liveness, sweep, Liveness, ServiceState, ServiceStatus, SweepHost, Ticked, HEARTBEAT_SLACK_MS,
};
use harn_core::time::{Duration, Instant, WallTime};
use std::collections::BTreeMap;

/// What one seed did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceSimSummary {
    /// Sweeps completed.
    pub sweeps: u64,
    /// Ticks run.
    pub ticks: u64,
    /// Ticks that failed for reasons outside the goal.
    pub failed_ticks: u64,
    /// ServiceWorld crashes (restarts from persisted hints).
    pub crashes: u64,
    /// Graceful stops (followed by a restart).
    pub stops: u64,
    /// Stops whose drain deadline passed during a tick, terminating its children.
    pub forced_stops: u64,
    /// Workflow runs those forced stops killed.
    pub killed_runs: u64,
    /// Heartbeats written.
    pub beats: u64,
    /// Wall-clock jumps.
    pub wall_jumps: u64,
    /// Ticks that stopped at a planner failure (`plan.failed`).
    pub plan_failures: u64,
}

impl ServiceSimSummary {
    /// Adds another seed's counts to these.
    pub fn add(&mut self, s: &ServiceSimSummary) {
        self.sweeps += s.sweeps;
        self.ticks += s.ticks;
        self.failed_ticks += s.failed_ticks;
        self.crashes += s.crashes;
        self.stops += s.stops;
        self.forced_stops += s.forced_stops;
        self.killed_runs += s.killed_runs;
        self.beats += s.beats;
        self.wall_jumps += s.wall_jumps;
        self.plan_failures += s.plan_failures;
    }
}

/// How late the watcher thread may run after its deadline (the OS scheduling it).
const WATCHER_LATENESS_MS: u64 = 20;

/// The wall clock: the monotonic clock plus an offset that jumps now and then.
#[derive(Debug, Default)]
struct Wall {
    offset_ms: i64,
    /// How far it jumped forward since the last heartbeat.
    forward_since_beat_ms: i64,
}

impl Wall {
    fn at(&self, now: Instant) -> WallTime {
        WallTime(1_800_000_000_000 + (now.0 / 1_000_000) as i64 + self.offset_ms)
    }

    fn jump(&mut self, e: &mut impl Entropy) {
        let hours = e.between(1, 48) as i64 * 3_600_000;
        let by = if e.chance(1, 2) { hours } else { -hours };
        let by = if e.chance(1, 3) { by / 10_000 } else { by }; // Sometimes only a little.
        self.offset_ms += by;
        self.forward_since_beat_ms += by.max(0);
    }
}

/// The daemon's watcher thread, driven at its own deadlines (a little late) while the loop
/// sweeps, ticks or sleeps.
struct WatchThread {
    w: Watcher,
    last_beat: Option<Instant>,
    heartbeat_at: WallTime,
    draining: bool,
}

impl WatchThread {
    fn new(now: Instant, wall: &Wall) -> WatchThread {
        WatchThread {
            w: Watcher::new(config().heartbeat_interval, now),
            last_beat: None,
            heartbeat_at: wall.at(now),
            draining: false,
        }
    }

    /// Runs the thread up to `to`; `ticking` says whether a tick runs meanwhile.
    fn run_until(
        &mut self,
        to: Instant,
        ticking: bool,
        e: &mut impl Entropy,
        wall: &mut Wall,
        summary: &mut ServiceSimSummary,
    ) -> Result<(), String> {
        self.w.set_ticking(ticking);
        loop {
            let late = Duration::from_millis(e.below(WATCHER_LATENESS_MS + 1));
            let at = self.w.poll_timeout().saturating_add(late);
            if at > to {
                return Ok(());
            }
            self.w.handle_timeout(at);
            self.effects(at, ticking, wall, summary)?;
        }
    }

    /// A stop request at `now`: the signal wakes the thread, which takes it at once (after
    /// whatever was due before).
    fn request_stop(
        &mut self,
        now: Instant,
        drain: Option<Duration>,
        ticking: bool,
        e: &mut impl Entropy,
        wall: &mut Wall,
        summary: &mut ServiceSimSummary,
    ) -> Result<(), String> {
        self.run_until(now, ticking, e, wall, summary)?;
        self.w.stop_requested(now, drain);
        self.w.handle_timeout(now);
        self.effects(now, ticking, wall, summary)
    }

    /// Carries out what the watcher asks for at `at`, checking the heartbeat's cadence.
    fn effects(
        &mut self,
        at: Instant,
        ticking: bool,
        wall: &mut Wall,
        summary: &mut ServiceSimSummary,
    ) -> Result<(), String> {
        self.w.check()?;
        while let Some(effect) = self.w.poll_effect() {
            match effect {
                WatchEffect::Beat => {
                    if let Some(last) = self.last_beat {
                        let gap = at.saturating_since(last);
                        let bound = config()
                            .heartbeat_interval
                            .saturating_add(Duration::from_millis(WATCHER_LATENESS_MS));
                        if gap > bound {
                            return Err(format!("the heartbeat lapsed for {gap:?}"));
                        }
                    }
                    self.last_beat = Some(at);
                    self.heartbeat_at = wall.at(at);
                    wall.forward_since_beat_ms = 0;
                    summary.beats += 1;
                }
                WatchEffect::BeginDrain => self.draining = true,
                WatchEffect::ForceStop if !ticking => {
                    return Err("a forced stop with no tick running".into());
                }
                WatchEffect::ForceStop => summary.forced_stops += 1,
            }
        }
        Ok(())
    }
}

pub(crate) const STEPS: u64 = 150;

fn config() -> WakeConfig {
    WakeConfig {
        wake_interval: Duration::from_millis(1_000),
        heartbeat_interval: Duration::from_millis(200),
        error_backoff_base: Duration::from_millis(500),
        error_backoff_max: Duration::from_millis(8_000),
    }
}

/// Runs one seed; the error names the first invariant broken.
pub fn run_service_seed(seed: u64) -> Result<ServiceSimSummary, String> {
    run_service(seed, WorldOptions::new(STEPS), &mut ActionLog::new(false))
}

/// Runs one seed with `options` (its steps and whether crashes are armed), recording the
/// state after each step in `log`.
pub fn run_service(
    seed: u64,
    options: WorldOptions,
    log: &mut ActionLog,
) -> Result<ServiceSimSummary, String> {
    run(seed, options, log).map_err(|e| format!("seed {seed}: {e}"))
}

/// What a crash or a stop leaves for the next daemon: the persisted hints, and the time.
struct ServiceWorld {
    sched: ServiceScheduler,
    watch: WatchThread,
}

fn start(
    goals: &[Id],
    persisted: &BTreeMap<Id, GoalWake>,
    now: Instant,
    wall: &Wall,
) -> Result<ServiceWorld, String> {
    let sched = ServiceScheduler::new(config(), goals.to_vec(), persisted.clone(), now)
        .map_err(|e| e.to_string())?;
    Ok(ServiceWorld { sched, watch: WatchThread::new(now, wall) })
}

fn run(seed: u64, options: WorldOptions, log: &mut ActionLog) -> Result<ServiceSimSummary, String> {
    let mut g = GoalWorld::new(seed);
    g.w.crashes = options.crashes;
    crate::actions::plant(&mut g.w.ledger.fs, options.bug);
    let goals = vec![Id::new("g").expect("valid"), Id::new("ghost").expect("valid")];
    let mut now = Instant(0);
    let mut wall = Wall::default();
    let mut persisted: BTreeMap<Id, GoalWake> = BTreeMap::new();
    let mut svc = start(&goals, &persisted, now, &wall)?;
    let mut summary = ServiceSimSummary::default();
    for _ in 0..options.faulty {
        let stepped =
            step(&mut g, &goals, &mut svc, &mut now, &mut wall, &mut persisted, &mut summary);
        log.record(&g.w.ledger.fs);
        stepped?;
    }
    Ok(summary)
}

/// One step of the service world: a wake, what happens around it, and the checks.
fn step(
    g: &mut GoalWorld,
    goals: &[Id],
    svc: &mut ServiceWorld,
    now: &mut Instant,
    wall: &mut Wall,
    persisted: &mut BTreeMap<Id, GoalWake>,
    summary: &mut ServiceSimSummary,
) -> Result<(), String> {
    // Wakes come on time, late, or very late (a missed one); the watcher runs meanwhile.
    let due = svc.sched.poll_timeout().unwrap_or(now.saturating_add(Duration::from_millis(1_000)));
    let late = match g.w.entropy.below(10) {
        0 => Duration::from_millis(g.w.entropy.between(2_000, 20_000)),
        1..=3 => Duration::from_millis(g.w.entropy.below(500)),
        _ => Duration::from_millis(0),
    };
    let next = due.max(*now).saturating_add(late);
    svc.watch.run_until(next, false, &mut g.w.entropy, wall, summary)?;
    *now = next;
    if g.w.entropy.chance(1, 5) {
        g.person()?; // Approvals, reviews and plan decisions change what the goal awaits.
        g.w.take_acknowledged();
    }
    if g.w.entropy.chance(1, 10) {
        wall.jump(&mut g.w.entropy);
        summary.wall_jumps += 1;
    }
    if g.w.entropy.chance(1, 5) {
        // A file-change hint: real after a person acted, spurious, or old news (seen before
        // the last sweep ended, and delivered only now).
        let seen_at = Instant(now.0.saturating_sub(g.w.entropy.below(3_000) * 1_000_000));
        let (before, ended) = (svc.sched.next_sweep_at(), svc.sched.last_sweep_at());
        svc.sched.file_changed(*now, seen_at);
        if ended.is_some_and(|e| seen_at <= e) && svc.sched.next_sweep_at() != before {
            return Err(format!("a change seen at {seen_at:?}, before the sweep that ended at {ended:?}, brought the next sweep forward"));
        }
    }
    if g.w.entropy.chance(1, 30) {
        let drain =
            g.w.entropy.chance(1, 2).then(|| Duration::from_millis(g.w.entropy.below(3_000)));
        svc.watch.request_stop(*now, drain, false, &mut g.w.entropy, wall, summary)?;
    }
    check_liveness(&svc.watch, wall, *now, true)?;
    sched_step(g, svc, now, wall, persisted, summary)?;
    if svc.watch.draining && svc.sched.phase() == harn_core::service::wake::ServicePhase::Stopped {
        // A graceful stop; the operator starts it again from the persisted hints.
        summary.stops += 1;
        *svc = start(goals, persisted, *now, wall)?;
    }
    svc.sched.check()?;
    g.check()
}

/// One wake of the loop through the core's driver, and the restart after a crash mid-sweep.
fn sched_step(
    g: &mut GoalWorld,
    svc: &mut ServiceWorld,
    now: &mut Instant,
    wall: &mut Wall,
    persisted: &mut BTreeMap<Id, GoalWake>,
    summary: &mut ServiceSimSummary,
) -> Result<(), String> {
    let goals = svc.sched.goals().to_vec();
    svc.watch.run_until(*now, false, &mut g.w.entropy, wall, summary)?;
    let mut host =
        SimLoop { g, watch: &mut svc.watch, now, wall, persisted, summary, goals: &goals };
    if driver::wake(&mut svc.sched, &mut host)? == ServiceStep::Lost {
        // A new daemon starts from the wake hints the dead one last persisted.
        check_liveness(&svc.watch, wall, *now, false)?;
        *svc = start(&goals, persisted, *now, wall)?;
    }
    Ok(())
}

/// The simulated loop's host of the core's service driver.
struct SimLoop<'a> {
    g: &'a mut GoalWorld,
    watch: &'a mut WatchThread,
    now: &'a mut Instant,
    wall: &'a mut Wall,
    persisted: &'a mut BTreeMap<Id, GoalWake>,
    summary: &'a mut ServiceSimSummary,
    goals: &'a [Id],
}

impl ServiceHost for SimLoop<'_> {
    type Error = String;

    fn now(&mut self) -> Instant {
        *self.now
    }

    fn draining(&self) -> bool {
        self.watch.draining
    }

    /// A sweep, with a crash armed before it now and then. A goal whose planner failed must
    /// wait for a durable change, not be backed off and asked again (which would spend its
    /// replans on a timer). A crash mid-sweep loses what was not synced, and a reader sees a
    /// record that says running with nobody holding the lease.
    fn sweep(&mut self, sched: &mut ServiceScheduler) -> Result<Option<SweepOutcome>, String> {
        let g = &mut *self.g;
        if g.w.entropy.chance(1, 4) {
            let after = g.w.entropy.below(60);
            g.w.arm_crash(after);
        }
        let before: BTreeMap<Id, GoalWake> = sched.wakes();
        let mut broken = None;
        let mut plan_failed = Vec::new();
        let mut host = SimSweep {
            g,
            now: *self.now,
            before: &before,
            summary: self.summary,
            broken: &mut broken,
            watch: self.watch,
            wall: self.wall,
            plan_failed: &mut plan_failed,
        };
        let result = sweep(&mut host, sched);
        *self.now = host.now;
        if let Some(violation) = broken {
            return Err(violation);
        }
        let g = &mut *self.g;
        let after = sched.wakes();
        for goal in plan_failed.iter().filter(|_| !g.w.ledger.fs.is_crashed()) {
            let state = after.get(goal).map(|w| w.state);
            if state != Some(WakeState::AwaitingChange) {
                return Err(format!(
                    "goal {goal}'s planner failed, but it is {state:?}, not quiet"
                ));
            }
        }
        if g.w.ledger.fs.is_crashed() {
            g.w.ledger.fs.clear_faults();
            g.w.take_acknowledged();
            g.w.ledger.fs.crash(&mut g.w.entropy);
            self.summary.crashes += 1;
            return Ok(None);
        }
        g.w.ledger.fs.clear_faults();
        g.w.take_acknowledged();
        Ok(Some(result))
    }

    /// The unreadable goal backs off alone; it never stalls the sweep (a sweep a stop ended
    /// early may not have reached it).
    fn swept(&mut self, sched: &ServiceScheduler, _: &SweepOutcome) -> Result<(), String> {
        self.summary.sweeps += 1;
        let ghost = sched.goal(&self.goals[1]).cloned().unwrap_or_default();
        let reached = ghost.state == WakeState::Backoff && ghost.consecutive_errors > 0;
        if !reached && !self.watch.draining {
            return Err(format!("the unreadable goal is not backing off: {ghost:?}"));
        }
        Ok(())
    }

    /// `runtime.json` is written when the hints changed; now and then the write is lost, and
    /// the scheduler must queue it again after the next sweep.
    fn write_hints(&mut self, sched: &ServiceScheduler) -> bool {
        if self.g.w.entropy.chance(1, 5) {
            return false;
        }
        *self.persisted = sched.wakes();
        true
    }
}

/// What a reader makes of the service's status record: a live one (holding its lease) reads
/// running or stopping however the wall clock jumped, since its heartbeat is judged on the
/// boot clock (the simulated monotonic clock, one boot); a crashed one (lease free) never
/// reads running. Read without the boot clock (an older record), a live one may read stale
/// only when the wall clock jumped forward past the lapse since its last beat.
fn check_liveness(
    watch: &WatchThread,
    wall: &Wall,
    now: Instant,
    alive: bool,
) -> Result<(), String> {
    use harn_core::service::BootMark;
    let interval_ms = config().heartbeat_interval.as_millis();
    let state = if watch.draining { ServiceState::Stopping } else { ServiceState::Running };
    let mut status = ServiceStatus::starting(1, WallTime(0), WallTime(0));
    status.state = state;
    status.heartbeat_at = watch.heartbeat_at;
    let mark = |at: Instant| BootMark { boot_id: "sim".into(), at_ms: at.0 / 1_000_000 };
    let wall_only = liveness(Some(&status), true, alive, interval_ms, wall.at(now), None);
    status.heartbeat_boot = watch.last_beat.map(mark);
    let boot_now = mark(now);
    let seen = liveness(Some(&status), true, alive, interval_ms, wall.at(now), Some(&boot_now));
    let lapse = (interval_ms as i64 * 3).max(HEARTBEAT_SLACK_MS);
    let jumped_past = wall.forward_since_beat_ms > lapse - interval_ms as i64 * 2;
    for (seen, immune) in [(seen, watch.last_beat.is_some()), (wall_only, false)] {
        match (alive, seen) {
            (false, Liveness::Running | Liveness::Stopping) => {
                return Err(format!("a crashed service reads {seen:?}"));
            }
            (true, Liveness::Stale) if immune || !jumped_past => {
                return Err("a live, beating service reads stale".into());
            }
            _ => {}
        }
    }
    Ok(())
}

/// The simulated sweep host: reads and ticks of the goal world, an unreadable `ghost` goal,
/// and ticks that now and then fail before they start (a lease held elsewhere).
struct SimSweep<'a> {
    g: &'a mut GoalWorld,
    now: Instant,
    before: &'a BTreeMap<Id, GoalWake>,
    summary: &'a mut ServiceSimSummary,
    broken: &'a mut Option<String>,
    watch: &'a mut WatchThread,
    wall: &'a mut Wall,
    /// Goals whose tick in this sweep stopped at a planner failure.
    plan_failed: &'a mut Vec<Id>,
}

impl SimSweep<'_> {
    fn failed_plans(&mut self) -> Result<usize, String> {
        let view = self.g.view()?;
        Ok(view
            .plans
            .iter()
            .filter(|p| p.status == harn_core::goal::plan::PlanStatus::Failed)
            .count())
    }

    fn fingerprint(&mut self) -> Result<(Fingerprint, bool), String> {
        let view = self.g.view()?;
        let fp = Fingerprint::new(goal_fingerprint(&view.projection, &view.items));
        Ok((fp, view.projection.state == GoalState::Ready))
    }

    /// Runs the watcher while a tick lasts until `end`, with a stop request (bounded half the
    /// time) at a drawn moment in one tick of forty.
    fn watch_during_tick(&mut self, end: Instant) -> Result<(), String> {
        let (e, wall) = (&mut self.g.w.entropy, &mut *self.wall);
        if !self.watch.draining && e.chance(1, 40) {
            let span = end.saturating_since(self.now).as_millis();
            let at = self.now.saturating_add(Duration::from_millis(e.below(span + 1)));
            let drain = e.chance(1, 2).then(|| Duration::from_millis(e.below(2_000)));
            self.watch.request_stop(at, drain, true, e, wall, self.summary)?;
        }
        self.watch.run_until(end, true, e, wall, self.summary)
    }
}

impl SweepHost for SimSweep<'_> {
    type Error = String;

    fn now(&mut self) -> Instant {
        self.now
    }

    fn read(&mut self, goal: &Id) -> Result<(Fingerprint, bool), String> {
        if goal.as_str() == "ghost" {
            return Err("no goal ghost: its intent is unreadable".into());
        }
        self.fingerprint()
    }

    fn tick(&mut self, goal: &Id) -> Result<Ticked, String> {
        let (fp, _) = self.fingerprint()?;
        if let Some(prev) = self.before.get(goal) {
            let unchanged = prev.observed.as_ref() == Some(&fp);
            let waiting = prev.next_wake_at.is_some_and(|until| until > self.now);
            let why = match prev.state {
                WakeState::AwaitingChange if unchanged => {
                    Some("an unchanged awaiting_change goal was ticked")
                }
                // Backoff delays the next tick, and only a tick can start an attempt: a goal
                // ticked before its backoff ends could spend attempts the delay was to spare.
                WakeState::Backoff if unchanged && waiting => {
                    Some("a backed-off goal was ticked before its backoff ended")
                }
                _ => None,
            };
            if let Some(why) = why {
                self.broken.get_or_insert(why.to_owned());
                return Err(why.to_owned());
            }
        }
        self.summary.ticks += 1;
        // A tick takes time (workflows, agents); the watcher keeps beating meanwhile, and now
        // and then a stop is asked for while it runs.
        let took = Duration::from_millis(self.g.w.entropy.below(4_000));
        let end = self.now.saturating_add(took);
        let forced_before = self.summary.forced_stops;
        if let Err(violation) = self.watch_during_tick(end) {
            self.broken.get_or_insert(violation.clone());
            return Err(violation);
        }
        self.now = end;
        // A stop forced during the tick killed its workflows: they end without a result, and
        // every invariant of the goal world must still hold.
        self.g.w.killing = self.summary.forced_stops > forced_before;
        self.g.w.stop_reached = false;
        if self.g.w.entropy.chance(1, 8) {
            // An infrastructure error: the tick never starts (the goal then backs off).
            self.summary.failed_ticks += 1;
            return Err("the goal lease is held by a foreground run".into());
        }
        if self.g.w.entropy.chance(1, 8) {
            // A tick that ran and changed nothing durable (a dispatch that could not start):
            // the goal stays ready, and must now wait for a change rather than be re-ticked.
            return Ok(Ticked { reason: StopReason::NoProgress, detail: "no change".into() });
        }
        let proofs = self.g.w.summary.proofs;
        let failed_before = self.failed_plans()?;
        let ticked = self.g.tick(Mode::Tick);
        if std::mem::take(&mut self.g.w.killing) {
            self.summary.killed_runs += self.g.w.summary.proofs - proofs;
        }
        if ticked == Ok(StopReason::PlanFailed) {
            self.summary.plan_failures += 1;
            self.plan_failed.push(goal.clone());
            // A planner failure is a domain outcome: one per tick, never the budget in a go.
            let failed = self.failed_plans()? - failed_before;
            if failed > 1 {
                let why = format!("one tick recorded {failed} failed plans");
                self.broken.get_or_insert(why.clone());
                return Err(why);
            }
        }
        ticked.map(|reason| Ticked { reason, detail: String::new() })
    }

    fn ticking(&mut self, _goal: Option<&Id>) {}

    fn failed(&mut self, _goal: &Id, _error: &str, _wake: &GoalWake) {}

    fn stopping(&mut self) -> bool {
        self.watch.draining
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_keeps_its_promises_through_crashes_and_late_wakes() {
        let mut total = ServiceSimSummary::default();
        for seed in 0..64 {
            total.add(&run_service_seed(seed).unwrap_or_else(|e| panic!("{e}")));
        }
        assert!(total.sweeps > 500 && total.ticks > 20 && total.crashes > 10, "{total:?}");
        assert!(total.stops > 0 && total.forced_stops > 0 && total.wall_jumps > 10, "{total:?}");
        assert!(total.beats > total.sweeps, "the watcher beats more often than the loop sweeps");
    }

    /// Seeds where a stop reached a resumed run whose host then died before its proof: the
    /// stop ended it uncharged, and it no longer counts as parked on its decided approval.
    #[test]
    fn a_stopped_resumption_is_interrupted_not_parked() {
        for seed in [539, 553] {
            run_service_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }
}
