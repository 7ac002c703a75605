//! When and how the harness daemon looks for readiness evidence beyond a live pid, decided
//! purely: which runs await a file or a probe, when they are next checked (every
//! [`CHECK_EVERY`] while any awaits), which probe to start, which probe to kill (it ran past
//! [`PROBE_TIMEOUT`] or its run ended), and what a probe's exit vouches for. One loop carries
//! out what it asks ([`ReadinessSchedule::look`]) over a [`ReadinessHost`]: the daemon's shell
//! looks at the file and starts and kills the probe processes, the simulator draws the
//! answers. `READY=1` on a notify socket needs no schedule at all.
//!
//! A harness with a `recheck` interval keeps being looked at once ready: its file is looked
//! for and its probe run again every interval, and a failed recheck (no file, a probe that
//! failed or ran too long) is [`ReadinessFinding::Lost`]. The run then awaits its evidence again, as
//! at its start.

use crate::env::Pid;
use crate::error::InvariantError;
use crate::harness::lifecycle::{HarnessSpec, Readiness};
use crate::ids::Id;
use crate::time::{Duration, Instant};
use std::collections::{BTreeMap, VecDeque};

/// How often files and probes are checked while a run awaits them.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(250);
/// How long a probe may run before it counts as a failure and is killed.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_millis(10_000);

/// What the schedule asks its host to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReadinessEffect {
    /// Look for `path` (relative to the harness's working directory); if it exists, report
    /// [`ReadinessSchedule::file_checked`].
    CheckFile {
        /// The harness.
        name: Id,
        /// The run that awaits it.
        run: u64,
        /// The file.
        path: String,
    },
    /// Start `command` in the harness's working directory, in a process group of its own, and
    /// report [`ReadinessSchedule::probe_started`] (a probe that could not start is simply
    /// asked for again at the next check).
    StartProbe {
        /// The harness.
        name: Id,
        /// The run it would vouch for.
        run: u64,
        /// Program and arguments.
        command: Vec<String>,
    },
    /// Kill the probe's process group: it ran too long, or the run it was to vouch for ended.
    /// Its exit is then reaped as a failure.
    KillProbe {
        /// The probe's pid (and process group).
        pid: Pid,
    },
}

/// What a look at a run's evidence found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadinessFinding {
    /// An awaiting run showed its evidence: report it ready.
    Ready,
    /// A ready run's recheck failed: report its readiness lost.
    Lost,
}

impl ReadinessFinding {
    /// The lifecycle input that reports this finding about `run`: what both the daemon and
    /// the simulator hand the harness.
    pub fn report(self, run: u64) -> crate::harness::lifecycle::HarnessInput {
        match self {
            ReadinessFinding::Ready => crate::harness::lifecycle::HarnessInput::Ready { run },
            ReadinessFinding::Lost => crate::harness::lifecycle::HarnessInput::Unready { run },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Probe {
    name: Id,
    run: u64,
    started: Instant,
    killed: bool,
}

/// What a host does when the schedule asks: the daemon's shell looks at real files and
/// starts real probe processes, the simulator draws the answers. [`ReadinessSchedule::look`]
/// is the one loop over the schedule's effects that both run.
pub trait ReadinessHost {
    /// Whether `path` (relative to `name`'s working directory) exists now.
    fn file_present(&mut self, name: &Id, path: &str) -> bool;
    /// Starts `command` as `name`'s probe in a process group of its own; `None` when it
    /// could not start (its program is gone, its user no longer resolves).
    fn start_probe(&mut self, name: &Id, command: &[String]) -> Option<Pid>;
    /// Kills the probe's process group; its exit is reaped later as a failure.
    fn kill_probe(&mut self, pid: Pid);
}

/// One run's readiness found by a look: the harness, the run, and what was found.
pub type Found = (Id, u64, ReadinessFinding);

/// The readiness schedule of every harness (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct ReadinessSchedule {
    kinds: BTreeMap<Id, Readiness>,
    rechecks: BTreeMap<Id, Duration>,
    /// Runs that await a file or a probe.
    awaiting: BTreeMap<Id, u64>,
    /// Ready runs that are rechecked, and when next.
    watching: BTreeMap<Id, (u64, Instant)>,
    /// When files and probes are next checked; `None` when nothing awaits.
    next_check: Option<Instant>,
    probes: BTreeMap<Pid, Probe>,
    effects: VecDeque<ReadinessEffect>,
}

impl ReadinessSchedule {
    /// A schedule for harnesses of these specs (their readiness and recheck interval).
    pub fn new<'a>(specs: impl IntoIterator<Item = (&'a Id, &'a HarnessSpec)>) -> Self {
        let mut s = ReadinessSchedule::default();
        s.configure(specs);
        s
    }

    /// Applies a (re)loaded configuration's readiness kinds and recheck intervals; runs
    /// already awaiting keep waiting for the evidence they were started with until they end.
    pub fn configure<'a>(&mut self, specs: impl IntoIterator<Item = (&'a Id, &'a HarnessSpec)>) {
        // Compared before stored: a configuration seen again (most calls) changes nothing
        // and copies nothing.
        for (name, spec) in specs {
            if self.kinds.get(name) != Some(&spec.readiness) {
                self.kinds.insert(name.clone(), spec.readiness.clone());
            }
            match spec.recheck {
                Some(every) if self.rechecks.get(name) != Some(&every) => {
                    self.rechecks.insert(name.clone(), every);
                }
                Some(_) => {}
                None => {
                    self.rechecks.remove(name);
                }
            }
        }
    }

    /// Run `run` of `name` was spawned at `now`: it awaits its file or probe, first checked at
    /// once.
    pub fn started(&mut self, now: Instant, name: &Id, run: u64) {
        self.watching.remove(name);
        if matches!(self.kinds.get(name), Some(Readiness::File { .. } | Readiness::Probe { .. })) {
            self.await_evidence(now, name, run);
        }
    }

    fn await_evidence(&mut self, now: Instant, name: &Id, run: u64) {
        self.awaiting.insert(name.clone(), run);
        self.next_check = Some(self.next_check.map_or(now, |at| at.min(now)));
    }

    /// Run `run` of `name` showed its evidence at `now`: it no longer awaits, and is
    /// rechecked from now on if its harness asks for that.
    fn became_ready(&mut self, now: Instant, name: &Id, run: u64) {
        self.awaiting.remove(name);
        if let Some(&every) = self.rechecks.get(name) {
            self.watching.insert(name.clone(), (run, now.saturating_add(every)));
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work: the next check while a run
    /// awaits, or a probe's deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let deadlines = self
            .probes
            .values()
            .filter(|p| !p.killed)
            .map(|p| p.started.saturating_add(PROBE_TIMEOUT));
        let rechecks = self.watching.values().map(|&(_, at)| at);
        deadlines.chain(rechecks).chain(self.next_check.filter(|_| !self.awaiting.is_empty())).min()
    }

    /// Acts on what is due at `now`; `live` says whether a run is still the harness's current
    /// one. Queues the kills of probes past their deadline or whose run ended; when the check
    /// is due, forgets runs that ended and asks to look at each awaited file and to start each
    /// awaited probe not already running; and does the same for each recheck that is due.
    /// Harmless when early, late or repeated.
    pub(crate) fn handle_timeout(&mut self, now: Instant, live: &dyn Fn(&Id, u64) -> bool) {
        for (pid, p) in self.probes.iter_mut() {
            let expired = now >= p.started.saturating_add(PROBE_TIMEOUT);
            if !p.killed && (expired || !live(&p.name, p.run)) {
                p.killed = true;
                self.effects.push_back(ReadinessEffect::KillProbe { pid: *pid });
            }
        }
        self.watching.retain(|name, (run, _)| live(name, *run));
        let mut due: Vec<(Id, u64)> = Vec::new();
        for (name, (run, at)) in self.watching.iter_mut() {
            if *at <= now {
                *at = now.saturating_add(self.rechecks.get(name).copied().unwrap_or(CHECK_EVERY));
                due.push((name.clone(), *run));
            }
        }
        if self.next_check.is_some_and(|at| at <= now) {
            self.awaiting.retain(|name, run| live(name, *run));
            self.next_check = (!self.awaiting.is_empty()).then(|| now.saturating_add(CHECK_EVERY));
            due.extend(self.awaiting.iter().map(|(n, &r)| (n.clone(), r)));
        }
        for (name, run) in due {
            match self.kinds.get(&name) {
                Some(Readiness::File { path }) => {
                    let path = path.clone();
                    self.effects.push_back(ReadinessEffect::CheckFile { name, run, path });
                }
                Some(Readiness::Probe { command })
                    if !self.probes.values().any(|p| p.name == name) =>
                {
                    let command = command.clone();
                    self.effects.push_back(ReadinessEffect::StartProbe { name, run, command });
                }
                _ => {}
            }
        }
    }

    /// The readiness wake at `now`: acts on what is due (see
    /// [`handle_timeout`](Self::handle_timeout)) and carries out every effect through `host`
    /// in order. Returns every finding in the order found; the host reports each to the
    /// daemon core, all of them before the daemon's own timers due at the same instant (a
    /// run that showed its evidence is ready before its ready-timeout is judged).
    pub fn look(
        &mut self,
        now: Instant,
        live: &dyn Fn(&Id, u64) -> bool,
        host: &mut dyn ReadinessHost,
    ) -> Vec<Found> {
        self.handle_timeout(now, live);
        let mut found = Vec::new();
        while let Some(effect) = self.poll_effect() {
            let finding = match effect {
                ReadinessEffect::CheckFile { name, run, path } => {
                    let present = host.file_present(&name, &path);
                    self.file_checked(now, &name, run, present).map(|f| (name, run, f))
                }
                ReadinessEffect::StartProbe { name, run, command } => {
                    match host.start_probe(&name, &command) {
                        Some(pid) => {
                            self.probe_started(now, pid, &name, run);
                            None
                        }
                        None => self.probe_unstarted(now, &name, run).map(|f| (name, run, f)),
                    }
                }
                ReadinessEffect::KillProbe { pid } => {
                    host.kill_probe(pid);
                    None
                }
            };
            found.extend(finding);
        }
        found
    }

    /// The next effect to carry out, in order.
    pub(crate) fn poll_effect(&mut self) -> Option<ReadinessEffect> {
        self.effects.pop_front()
    }

    /// The host looked at `now` for the file of run `run` and found it `present` or not:
    /// what that means for the run (which the host then reports to the daemon core), if
    /// anything.
    pub(crate) fn file_checked(
        &mut self,
        now: Instant,
        name: &Id,
        run: u64,
        present: bool,
    ) -> Option<ReadinessFinding> {
        self.found(now, name, run, present)
    }

    fn found(
        &mut self,
        now: Instant,
        name: &Id,
        run: u64,
        shown: bool,
    ) -> Option<ReadinessFinding> {
        if self.awaiting.get(name) == Some(&run) {
            if shown {
                self.became_ready(now, name, run);
                return Some(ReadinessFinding::Ready);
            }
        } else if self.watching.get(name).is_some_and(|&(r, _)| r == run) && !shown {
            self.watching.remove(name);
            self.await_evidence(now, name, run);
            return Some(ReadinessFinding::Lost);
        }
        None
    }

    /// The probe the schedule asked for could not be started at `now` (its program is gone,
    /// its user no longer resolves): a failed look. A run that awaits its evidence is simply
    /// looked at again at the next check; a rechecked ready run loses its readiness.
    pub(crate) fn probe_unstarted(
        &mut self,
        now: Instant,
        name: &Id,
        run: u64,
    ) -> Option<ReadinessFinding> {
        self.found(now, name, run, false)
    }

    /// A probe for run `run` of `name` started at `now` as `pid`.
    pub(crate) fn probe_started(&mut self, now: Instant, pid: Pid, name: &Id, run: u64) {
        let probe = Probe { name: name.clone(), run, started: now, killed: false };
        self.probes.insert(pid, probe);
    }

    /// Process `pid` exited at `now`: `None` when it was no probe; else what its exit means
    /// for the run it was started for: ready, if it exited 0 for a run that awaited it; lost,
    /// if it failed (or was killed for its timeout) rechecking a ready run.
    pub fn probe_exited(
        &mut self,
        now: Instant,
        pid: Pid,
        success: bool,
    ) -> Option<Option<(Id, u64, ReadinessFinding)>> {
        let p = self.probes.remove(&pid)?;
        let finding = self.found(now, &p.name, p.run, success && !p.killed);
        Some(finding.map(|f| (p.name, p.run, f)))
    }

    /// The kind of evidence a harness needs, for status and the ledger.
    pub fn kind(&self, name: &Id) -> &'static str {
        match self.kinds.get(name) {
            None | Some(Readiness::None) => "none",
            Some(Readiness::File { .. }) => "file",
            Some(Readiness::Probe { .. }) => "probe",
            Some(Readiness::Notify) => "notify",
        }
    }

    /// The invariants: a check is scheduled whenever a run awaits, at most one probe runs per
    /// harness unless an earlier one is being killed, only awaited kinds await, and a run is
    /// never awaited and rechecked at once.
    pub fn check(&self) -> Result<(), InvariantError> {
        if !self.awaiting.is_empty() && self.next_check.is_none() {
            return Err(InvariantError::new("runs await readiness with no check scheduled"));
        }
        for name in self.watching.keys() {
            if self.awaiting.contains_key(name) {
                return Err(InvariantError::new(format!(
                    "{name} is awaited and rechecked at once"
                )));
            }
        }
        for name in self.awaiting.keys() {
            if !matches!(
                self.kinds.get(name),
                Some(Readiness::File { .. } | Readiness::Probe { .. })
            ) {
                return Err(InvariantError::new(format!(
                    "{name} awaits evidence its kind does not have"
                )));
            }
            let running = self.probes.values().filter(|p| p.name == *name && !p.killed).count();
            if running > 1 {
                return Err(InvariantError::new(format!("{name}: {running} probes at once")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant(n * 1_000_000)
    }

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    fn schedule() -> ReadinessSchedule {
        let kinds = [
            (id("f"), Readiness::File { path: "ready".into() }),
            (id("p"), Readiness::Probe { command: vec!["true".into()] }),
            (id("n"), Readiness::Notify),
        ];
        let specs: Vec<(Id, HarnessSpec)> = kinds
            .into_iter()
            .map(|(n, readiness)| (n, HarnessSpec { readiness, ..HarnessSpec::default() }))
            .collect();
        ReadinessSchedule::new(specs.iter().map(|(n, s)| (n, s)))
    }

    fn effects(s: &mut ReadinessSchedule) -> Vec<ReadinessEffect> {
        std::iter::from_fn(|| s.poll_effect()).collect()
    }

    /// A host whose files are all present and whose probes cannot start, recording what it
    /// was asked.
    #[derive(Default)]
    struct Host {
        asked: Vec<String>,
    }

    impl ReadinessHost for Host {
        fn file_present(&mut self, name: &Id, path: &str) -> bool {
            self.asked.push(format!("look {name} {path}"));
            true
        }
        fn start_probe(&mut self, name: &Id, _: &[String]) -> Option<Pid> {
            self.asked.push(format!("probe {name}"));
            None
        }
        fn kill_probe(&mut self, pid: Pid) {
            self.asked.push(format!("kill {pid}"));
        }
    }

    #[test]
    fn a_look_carries_out_every_effect_in_order_and_returns_every_finding() {
        let mut s = schedule();
        s.started(ms(0), &id("f"), 1);
        s.started(ms(0), &id("p"), 2);
        let mut host = Host::default();
        let found = s.look(ms(0), &|_, _| true, &mut host);
        assert_eq!(host.asked, ["look f ready", "probe p"]);
        assert_eq!(
            found,
            [(id("f"), 1, ReadinessFinding::Ready)],
            "an unstarted probe vouches nothing"
        );
        assert_eq!(s.poll_timeout(), Some(ms(250)), "the probe's run is looked at again");
        let found = s.look(ms(250), &|_, _| true, &mut Host::default());
        assert!(found.is_empty());
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn a_file_is_looked_for_at_once_then_every_interval_until_found() {
        let mut s = schedule();
        assert_eq!(s.poll_timeout(), None, "nothing awaits");
        s.started(ms(0), &id("f"), 1);
        s.started(ms(0), &id("n"), 1);
        assert_eq!(s.poll_timeout(), Some(ms(0)), "notify needs no schedule");
        s.handle_timeout(ms(0), &|_, _| true);
        let check = ReadinessEffect::CheckFile { name: id("f"), run: 1, path: "ready".into() };
        assert_eq!(effects(&mut s), std::slice::from_ref(&check));
        assert_eq!(s.poll_timeout(), Some(ms(250)));
        s.handle_timeout(ms(100), &|_, _| true);
        assert!(effects(&mut s).is_empty(), "early");
        s.handle_timeout(ms(900), &|_, _| true);
        assert_eq!(effects(&mut s), [check], "late: one check, not three");
        assert_eq!(s.file_checked(ms(900), &id("f"), 7, true), None, "another run's file");
        assert_eq!(s.file_checked(ms(900), &id("f"), 1, false), None, "still awaited");
        assert_eq!(s.file_checked(ms(900), &id("f"), 1, true), Some(ReadinessFinding::Ready));
        assert_eq!(s.file_checked(ms(950), &id("f"), 1, false), None, "no recheck asked for");
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn one_probe_at_a_time_and_only_its_success_for_the_live_run_counts() {
        let mut s = schedule();
        s.started(ms(0), &id("p"), 3);
        s.handle_timeout(ms(0), &|_, _| true);
        let start =
            ReadinessEffect::StartProbe { name: id("p"), run: 3, command: vec!["true".into()] };
        assert_eq!(effects(&mut s), std::slice::from_ref(&start));
        s.probe_started(ms(1), 500, &id("p"), 3);
        s.handle_timeout(ms(250), &|_, _| true);
        assert!(effects(&mut s).is_empty(), "one probe in flight");
        assert_eq!(s.probe_exited(ms(2), 500, false), Some(None), "a failed probe vouches nothing");
        assert_eq!(s.probe_exited(ms(2), 999, true), None, "not a probe");
        s.handle_timeout(ms(500), &|_, _| true);
        assert_eq!(effects(&mut s), [start]);
        s.probe_started(ms(500), 501, &id("p"), 3);
        assert_eq!(
            s.probe_exited(ms(501), 501, true),
            Some(Some((id("p"), 3, ReadinessFinding::Ready)))
        );
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn a_probe_past_its_deadline_or_of_an_ended_run_is_killed_once() {
        let mut s = schedule();
        s.started(ms(0), &id("p"), 1);
        s.handle_timeout(ms(0), &|_, _| true);
        effects(&mut s);
        s.probe_started(ms(0), 42, &id("p"), 1);
        assert_eq!(s.poll_timeout(), Some(ms(250)));
        s.handle_timeout(ms(10_000), &|_, _| true);
        assert_eq!(effects(&mut s), [ReadinessEffect::KillProbe { pid: 42 }]);
        s.handle_timeout(ms(10_100), &|_, _| true);
        assert!(!effects(&mut s).contains(&ReadinessEffect::KillProbe { pid: 42 }), "once");
        assert_eq!(
            s.probe_exited(ms(10_050), 42, true),
            Some(None),
            "a killed probe vouches nothing"
        );
        s.handle_timeout(ms(10_250), &|_, _| true);
        effects(&mut s);
        s.probe_started(ms(10_250), 43, &id("p"), 1);
        s.handle_timeout(ms(10_260), &|_, _| false);
        assert_eq!(effects(&mut s), [ReadinessEffect::KillProbe { pid: 43 }], "its run ended");
        s.handle_timeout(ms(10_500), &|_, _| false);
        assert!(effects(&mut s).is_empty(), "an ended run is no longer checked");
        assert_eq!(s.check(), Ok(()));
    }

    fn rechecked(readiness: Readiness) -> ReadinessSchedule {
        let spec = HarnessSpec {
            readiness,
            recheck: Some(Duration::from_millis(1_000)),
            ..Default::default()
        };
        let specs = [(id("r"), spec)];
        ReadinessSchedule::new(specs.iter().map(|(n, s)| (n, s)))
    }

    #[test]
    fn a_rechecked_file_that_goes_away_loses_readiness_and_is_awaited_again() {
        let mut s = rechecked(Readiness::File { path: "up".into() });
        s.started(ms(0), &id("r"), 1);
        s.handle_timeout(ms(0), &|_, _| true);
        effects(&mut s);
        assert_eq!(s.file_checked(ms(0), &id("r"), 1, true), Some(ReadinessFinding::Ready));
        assert_eq!(s.poll_timeout(), Some(ms(1_000)), "the recheck");
        s.handle_timeout(ms(500), &|_, _| true);
        assert!(effects(&mut s).is_empty(), "early");
        s.handle_timeout(ms(1_000), &|_, _| true);
        let look = ReadinessEffect::CheckFile { name: id("r"), run: 1, path: "up".into() };
        assert_eq!(effects(&mut s), std::slice::from_ref(&look));
        assert_eq!(s.file_checked(ms(1_000), &id("r"), 1, true), None, "still there: nothing");
        assert_eq!(s.poll_timeout(), Some(ms(2_000)));
        s.handle_timeout(ms(2_000), &|_, _| true);
        effects(&mut s);
        assert_eq!(s.file_checked(ms(2_000), &id("r"), 1, false), Some(ReadinessFinding::Lost));
        assert_eq!(s.check(), Ok(()));
        assert_eq!(s.poll_timeout(), Some(ms(2_000)), "awaited again, at once");
        s.handle_timeout(ms(2_000), &|_, _| true);
        assert_eq!(effects(&mut s), [look]);
        assert_eq!(s.file_checked(ms(2_000), &id("r"), 1, false), None, "awaited: no second loss");
        assert_eq!(s.file_checked(ms(2_250), &id("r"), 1, true), Some(ReadinessFinding::Ready));
        s.started(ms(3_000), &id("r"), 2);
        assert_eq!(s.file_checked(ms(3_000), &id("r"), 1, false), None, "a run that ended");
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn a_rechecking_probe_that_fails_or_runs_too_long_loses_readiness() {
        let mut s = rechecked(Readiness::Probe { command: vec!["check".into()] });
        s.started(ms(0), &id("r"), 1);
        s.handle_timeout(ms(0), &|_, _| true);
        effects(&mut s);
        s.probe_started(ms(0), 10, &id("r"), 1);
        assert_eq!(
            s.probe_exited(ms(5), 10, true),
            Some(Some((id("r"), 1, ReadinessFinding::Ready)))
        );
        s.handle_timeout(ms(1_005), &|_, _| true);
        let start =
            ReadinessEffect::StartProbe { name: id("r"), run: 1, command: vec!["check".into()] };
        assert_eq!(effects(&mut s), std::slice::from_ref(&start));
        s.probe_started(ms(1_005), 11, &id("r"), 1);
        assert_eq!(s.probe_exited(ms(1_010), 11, true), Some(None), "passed: nothing to say");
        s.handle_timeout(ms(2_005), &|_, _| true);
        assert_eq!(effects(&mut s), std::slice::from_ref(&start));
        s.probe_started(ms(2_005), 12, &id("r"), 1);
        s.handle_timeout(ms(3_005), &|_, _| true);
        assert!(effects(&mut s).is_empty(), "one probe at a time, even when a recheck is due");
        s.handle_timeout(ms(12_005), &|_, _| true);
        assert_eq!(effects(&mut s), [ReadinessEffect::KillProbe { pid: 12 }]);
        let lost = s.probe_exited(ms(12_010), 12, true);
        assert_eq!(
            lost,
            Some(Some((id("r"), 1, ReadinessFinding::Lost))),
            "a probe past its deadline"
        );
        assert_eq!(s.check(), Ok(()));
        assert_eq!(s.probe_unstarted(ms(12_010), &id("r"), 1), None, "awaited: looked at again");
        s.handle_timeout(ms(12_250), &|_, _| true);
        effects(&mut s);
        s.probe_started(ms(12_250), 13, &id("r"), 1);
        assert_eq!(
            s.probe_exited(ms(12_260), 13, true),
            Some(Some((id("r"), 1, ReadinessFinding::Ready)))
        );
        assert_eq!(
            s.probe_unstarted(ms(13_260), &id("r"), 1),
            Some(ReadinessFinding::Lost),
            "no probe: lost"
        );
    }
}
