//! When and how the harness daemon looks for readiness evidence beyond a live pid, decided
//! purely: which runs await a file or a probe, when they are next checked (every
//! [`CHECK_EVERY`] while any awaits), which probe to start, which probe to kill (it ran past
//! [`PROBE_TIMEOUT`] or its run ended), and what a probe's exit vouches for. The daemon's
//! shell looks at the file, starts and kills the probe processes, and reports back; the
//! simulator draws the answers. `READY=1` on a notify socket needs no schedule at all.

use crate::env::Pid;
use crate::harness::lifecycle::Readiness;
use crate::ids::Id;
use crate::time::{Duration, Instant};
use std::collections::{BTreeMap, VecDeque};

/// How often files and probes are checked while a run awaits them.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);
/// How long a probe may run before it counts as a failure and is killed.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(10_000);

/// What the schedule asks its host to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadinessEffect {
    /// Look for `path` (relative to the harness's working directory); if it exists, report
    /// [`ReadinessSchedule::file_found`].
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

#[derive(Clone, Debug, PartialEq, Eq)]
struct Probe {
    name: Id,
    run: u64,
    started: Instant,
    killed: bool,
}

/// The readiness schedule of every harness (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct ReadinessSchedule {
    kinds: BTreeMap<Id, Readiness>,
    /// Runs that await a file or a probe.
    awaiting: BTreeMap<Id, u64>,
    /// When files and probes are next checked; `None` when nothing awaits.
    next_check: Option<Instant>,
    probes: BTreeMap<Pid, Probe>,
    effects: VecDeque<ReadinessEffect>,
}

impl ReadinessSchedule {
    /// A schedule for harnesses of these readiness kinds.
    pub fn new<'a>(kinds: impl IntoIterator<Item = (&'a Id, &'a Readiness)>) -> Self {
        let mut s = ReadinessSchedule::default();
        s.configure(kinds);
        s
    }

    /// Applies a (re)loaded configuration's readiness kinds; runs already awaiting keep
    /// waiting for the evidence they were started with until they end.
    pub fn configure<'a>(&mut self, kinds: impl IntoIterator<Item = (&'a Id, &'a Readiness)>) {
        for (name, kind) in kinds {
            self.kinds.insert(name.clone(), kind.clone());
        }
    }

    /// Run `run` of `name` was spawned at `now`: it awaits its file or probe, first checked at
    /// once.
    pub fn started(&mut self, now: Instant, name: &Id, run: u64) {
        if matches!(self.kinds.get(name), Some(Readiness::File { .. } | Readiness::Probe { .. })) {
            self.awaiting.insert(name.clone(), run);
            self.next_check = Some(self.next_check.map_or(now, |at| at.min(now)));
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
        deadlines.chain(self.next_check.filter(|_| !self.awaiting.is_empty())).min()
    }

    /// Acts on what is due at `now`; `live` says whether a run is still the harness's current
    /// one. Queues the kills of probes past their deadline or whose run ended, and, when the
    /// check is due, forgets runs that ended and asks to look at each awaited file and to
    /// start each awaited probe not already running. Harmless when early, late or repeated.
    pub fn handle_timeout(&mut self, now: Instant, live: &dyn Fn(&Id, u64) -> bool) {
        for (pid, p) in self.probes.iter_mut() {
            let expired = now >= p.started.saturating_add(PROBE_TIMEOUT);
            if !p.killed && (expired || !live(&p.name, p.run)) {
                p.killed = true;
                self.effects.push_back(ReadinessEffect::KillProbe { pid: *pid });
            }
        }
        if self.next_check.is_none_or(|at| at > now) {
            return;
        }
        self.awaiting.retain(|name, run| live(name, *run));
        self.next_check = (!self.awaiting.is_empty()).then(|| now.saturating_add(CHECK_EVERY));
        for (name, &run) in &self.awaiting {
            match self.kinds.get(name) {
                Some(Readiness::File { path }) => {
                    let (name, path) = (name.clone(), path.clone());
                    self.effects.push_back(ReadinessEffect::CheckFile { name, run, path });
                }
                Some(Readiness::Probe { command })
                    if !self.probes.values().any(|p| p.name == *name) =>
                {
                    let (name, command) = (name.clone(), command.clone());
                    self.effects.push_back(ReadinessEffect::StartProbe { name, run, command });
                }
                _ => {}
            }
        }
    }

    /// The next effect to carry out, in order.
    pub fn poll_effect(&mut self) -> Option<ReadinessEffect> {
        self.effects.pop_front()
    }

    /// The awaited file of run `run` exists: true when that makes the run ready (it still
    /// awaited it), which the host then reports to the daemon core.
    pub fn file_found(&mut self, name: &Id, run: u64) -> bool {
        if self.awaiting.get(name) == Some(&run) {
            self.awaiting.remove(name);
            return true;
        }
        false
    }

    /// A probe for run `run` of `name` started at `now` as `pid`.
    pub fn probe_started(&mut self, now: Instant, pid: Pid, name: &Id, run: u64) {
        let probe = Probe { name: name.clone(), run, started: now, killed: false };
        self.probes.insert(pid, probe);
    }

    /// Process `pid` exited: `None` when it was no probe; else the run it makes ready, if it
    /// exited 0 for a run that still awaited it.
    pub fn probe_exited(&mut self, pid: Pid, success: bool) -> Option<Option<(Id, u64)>> {
        let p = self.probes.remove(&pid)?;
        if success && !p.killed && self.awaiting.get(&p.name) == Some(&p.run) {
            self.awaiting.remove(&p.name);
            return Some(Some((p.name, p.run)));
        }
        Some(None)
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
    /// harness unless an earlier one is being killed, and only awaited kinds await.
    pub fn check(&self) -> Result<(), String> {
        if !self.awaiting.is_empty() && self.next_check.is_none() {
            return Err("runs await readiness with no check scheduled".into());
        }
        for name in self.awaiting.keys() {
            if !matches!(
                self.kinds.get(name),
                Some(Readiness::File { .. } | Readiness::Probe { .. })
            ) {
                return Err(format!("{name} awaits evidence its kind does not have"));
            }
            let running = self.probes.values().filter(|p| p.name == *name && !p.killed).count();
            if running > 1 {
                return Err(format!("{name}: {running} probes at once"));
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
        ReadinessSchedule::new(kinds.iter().map(|(n, k)| (n, k)))
    }

    fn effects(s: &mut ReadinessSchedule) -> Vec<ReadinessEffect> {
        std::iter::from_fn(|| s.poll_effect()).collect()
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
        assert!(!s.file_found(&id("f"), 7), "another run's file vouches for nothing");
        assert!(s.file_found(&id("f"), 1));
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
        assert_eq!(s.probe_exited(500, false), Some(None), "a failed probe vouches nothing");
        assert_eq!(s.probe_exited(999, true), None, "not a probe");
        s.handle_timeout(ms(500), &|_, _| true);
        assert_eq!(effects(&mut s), [start]);
        s.probe_started(ms(500), 501, &id("p"), 3);
        assert_eq!(s.probe_exited(501, true), Some(Some((id("p"), 3))));
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
        assert_eq!(s.probe_exited(42, true), Some(None), "a killed probe vouches nothing");
        s.handle_timeout(ms(10_250), &|_, _| true);
        effects(&mut s);
        s.probe_started(ms(10_250), 43, &id("p"), 1);
        s.handle_timeout(ms(10_260), &|_, _| false);
        assert_eq!(effects(&mut s), [ReadinessEffect::KillProbe { pid: 43 }], "its run ended");
        s.handle_timeout(ms(10_500), &|_, _| false);
        assert!(effects(&mut s).is_empty(), "an ended run is no longer checked");
        assert_eq!(s.check(), Ok(()));
    }
}
