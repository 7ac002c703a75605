//! Simulated processes: children that run for a drawn virtual time, crash, hang, ignore
//! SIGTERM, or cannot be spawned at all, chosen by the program name in their argv.

use crate::entropy::Entropy;
use harn_core::env::{ExitStatus, Pid, Signal, SpawnError, SpawnSpec, Spawner};
use harn_core::ids::Id;
use harn_core::time::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a simulated program behaves; the program name (`argv[0]`) selects it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Behaviour {
    /// Runs until signalled; honours SIGTERM.
    Healthy,
    /// Runs until signalled; ignores SIGTERM, so only SIGKILL ends it.
    Stubborn,
    /// Exits non-zero within a few seconds of starting.
    Crashy,
    /// Runs a drawn time (seconds to minutes) and exits with a drawn code.
    Flaky,
    /// Cannot be spawned: the program does not exist.
    Missing,
}

impl Behaviour {
    /// Every behaviour, for drawing.
    pub const ALL: [Behaviour; 5] = [
        Behaviour::Healthy,
        Behaviour::Stubborn,
        Behaviour::Crashy,
        Behaviour::Flaky,
        Behaviour::Missing,
    ];

    /// The program name that selects this behaviour.
    pub fn program(self) -> &'static str {
        match self {
            Behaviour::Healthy => "sim-healthy",
            Behaviour::Stubborn => "sim-stubborn",
            Behaviour::Crashy => "sim-crashy",
            Behaviour::Flaky => "sim-flaky",
            Behaviour::Missing => "sim-missing",
        }
    }

    /// The behaviour a program name selects.
    pub fn of_program(program: &str) -> Option<Behaviour> {
        Behaviour::ALL.into_iter().find(|b| b.program() == program)
    }

    /// True when the command would run indefinitely without faults: the liveness phase
    /// requires such harnesses to reach `running`.
    pub fn is_healthy(self) -> bool {
        matches!(self, Behaviour::Healthy | Behaviour::Stubborn)
    }
}

/// One live simulated child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimProcess {
    /// Which harness run it belongs to (the world fills this in after the spawn).
    pub owner: Option<(Id, u64)>,
    /// How it behaves.
    pub behaviour: Behaviour,
    /// When it will exit, and how; `None` until drawn or when it runs forever.
    pub exit: Option<(Instant, ExitStatus)>,
    /// True once its behaviour was drawn.
    pub settled: bool,
    /// True when the pending exit was caused by a signal rather than drawn.
    pub signalled: bool,
    /// True once the daemon that started it died: nobody observes it any more.
    pub orphaned: bool,
}

/// The simulated process table, implementing the `Spawner` seam.
#[derive(Clone, Debug, Default)]
pub struct SimProcesses {
    next_pid: Pid,
    live: BTreeMap<Pid, SimProcess>,
    signals: Vec<(Pid, Signal)>,
    fail_next_spawn: bool,
}

/// Upper bound of a flaky run.
const FLAKY_RUN_MAX: Duration = Duration::from_secs(180);
/// Upper bound of a crashy run.
const CRASHY_RUN_MAX: Duration = Duration::from_secs(3);

impl SimProcesses {
    /// The live children.
    pub fn live(&self) -> &BTreeMap<Pid, SimProcess> {
        &self.live
    }

    /// Makes the next spawn fail as a fork would under resource exhaustion (EAGAIN), even
    /// for a program that exists.
    pub fn fail_next_spawn(&mut self) {
        self.fail_next_spawn = true;
    }

    /// Cancels a spawn failure that has not happened yet.
    pub fn clear_faults(&mut self) {
        self.fail_next_spawn = false;
    }

    /// Attaches an owner to a freshly spawned pid.
    pub fn set_owner(&mut self, pid: Pid, name: Id, run: u64) {
        if let Some(p) = self.live.get_mut(&pid) {
            p.owner = Some((name, run));
        }
    }

    /// Draws exit times for new children and applies the signals sent since the last call.
    /// `faults` allows fault-injected crashes of otherwise healthy children.
    pub fn settle(&mut self, now: Instant, entropy: &mut dyn Entropy, faults: bool) {
        for p in self.live.values_mut().filter(|p| !p.settled) {
            p.settled = true;
            p.exit = draw_exit(p.behaviour, now, entropy, faults);
        }
        for (pid, signal) in std::mem::take(&mut self.signals) {
            let Some(p) = self.live.get_mut(&pid) else { continue };
            let ends_at = match signal {
                Signal::Kill => Some((now, ExitStatus::Signal(9))),
                Signal::Hangup | Signal::Term if p.behaviour == Behaviour::Stubborn => None,
                // A hung-up session ends as a closed terminal ends a shell; now and then the
                // program ignores it and the TERM that follows does it.
                Signal::Hangup if entropy.chance(1, 4) => None,
                Signal::Hangup => {
                    let delay = Duration::from_millis(entropy.below(200));
                    Some((now.saturating_add(delay), ExitStatus::Signal(1)))
                }
                Signal::Term => {
                    let delay = Duration::from_millis(entropy.below(200));
                    Some((now.saturating_add(delay), ExitStatus::Signal(15)))
                }
            };
            if let Some(end) = ends_at {
                if p.exit.is_none_or(|(at, _)| end.0 < at) {
                    p.exit = Some(end);
                    p.signalled = true;
                }
            }
        }
    }

    /// The earliest pending exit.
    pub fn next_exit(&self) -> Option<(Instant, Pid)> {
        // An orphan's exit reaches no daemon; it stays in the table until reclaimed, which
        // is the harder case for the daemon that comes next.
        let watched = self.live.iter().filter(|(_, p)| !p.orphaned);
        watched.filter_map(|(pid, p)| p.exit.map(|(at, _)| (at, *pid))).min()
    }

    /// The daemon died and its host did not: every child lives on, unobserved.
    pub fn orphan_all(&mut self) {
        for p in self.live.values_mut() {
            p.orphaned = true;
        }
        self.signals.clear();
    }

    /// What a new daemon does before it boots: stop every process an earlier daemon left.
    /// Returns how many there were.
    pub fn reclaim_orphans(&mut self) -> u32 {
        let before = self.live.len();
        self.live.retain(|_, p| !p.orphaned);
        (before - self.live.len()) as u32
    }

    /// Removes an exited child and returns its owner and status.
    pub fn reap(&mut self, pid: Pid) -> Option<(SimProcess, ExitStatus)> {
        let p = self.live.remove(&pid)?;
        let status = p.exit.expect("reaped a child with no exit").1;
        Some((p, status))
    }

    /// Every child dies with its host.
    pub fn kill_all(&mut self) {
        self.live.clear();
        self.signals.clear();
    }

    /// Cancels every drawn crash of a healthy child: faults are off, healthy children run
    /// until signalled. Exits already caused by a signal stand.
    pub fn calm_down(&mut self) {
        for p in self.live.values_mut() {
            if p.behaviour.is_healthy() && !p.signalled {
                p.exit = None;
            }
        }
    }
}

fn draw_exit(
    b: Behaviour,
    now: Instant,
    e: &mut dyn Entropy,
    faults: bool,
) -> Option<(Instant, ExitStatus)> {
    let after = |d: u64| now.saturating_add(Duration(d));
    match b {
        Behaviour::Healthy | Behaviour::Stubborn => {
            // A fault: the child crashes on its own within ten minutes.
            if faults && e.chance(1, 4) {
                let at = after(e.below(Duration::from_secs(600).0));
                Some((at, ExitStatus::Signal(11)))
            } else {
                None
            }
        }
        Behaviour::Crashy => Some((after(e.below(CRASHY_RUN_MAX.0)), ExitStatus::Code(1))),
        Behaviour::Flaky => {
            let code = if e.chance(1, 3) { 0 } else { 2 };
            Some((after(e.below(FLAKY_RUN_MAX.0)), ExitStatus::Code(code)))
        }
        Behaviour::Missing => unreachable!("a missing program never spawns"),
    }
}

impl Spawner for SimProcesses {
    fn spawn(&mut self, _name: &Id, _run: u64, spec: &SpawnSpec) -> Result<Pid, SpawnError> {
        let program = spec.argv.first().map(String::as_str).unwrap_or("");
        let behaviour = match Behaviour::of_program(program) {
            Some(Behaviour::Missing) | None => {
                return Err(SpawnError { not_found: true, detail: format!("{program}: not found") })
            }
            Some(b) => b,
        };
        if std::mem::take(&mut self.fail_next_spawn) {
            return Err(SpawnError {
                not_found: false,
                detail: format!("{program}: fork: EAGAIN"),
            });
        }
        self.next_pid += 1;
        let pid = 1000 + self.next_pid;
        let p = SimProcess {
            owner: None,
            behaviour,
            exit: None,
            settled: false,
            signalled: false,
            orphaned: false,
        };
        self.live.insert(pid, p);
        Ok(pid)
    }

    fn signal(&mut self, pid: Pid, signal: Signal) -> Result<(), SpawnError> {
        if self.live.contains_key(&pid) {
            self.signals.push((pid, signal));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entropy::SeededEntropy;

    fn spec(b: Behaviour) -> SpawnSpec {
        SpawnSpec { argv: vec![b.program().into()], ..Default::default() }
    }

    #[test]
    fn missing_programs_do_not_spawn() {
        let mut p = SimProcesses::default();
        assert!(
            p.spawn(&Id::new("t").unwrap(), 1, &spec(Behaviour::Missing)).unwrap_err().not_found
        );
        assert!(p.spawn(&Id::new("t").unwrap(), 1, &SpawnSpec::default()).is_err());
    }

    #[test]
    fn stubborn_children_ignore_term_but_not_kill() {
        let mut p = SimProcesses::default();
        let mut e = SeededEntropy::new(1);
        let pid = p.spawn(&Id::new("t").unwrap(), 1, &spec(Behaviour::Stubborn)).unwrap();
        p.settle(Instant(0), &mut e, false);
        p.signal(pid, Signal::Term).unwrap();
        p.settle(Instant(5), &mut e, false);
        assert_eq!(p.next_exit(), None);
        p.signal(pid, Signal::Kill).unwrap();
        p.settle(Instant(9), &mut e, false);
        assert_eq!(p.next_exit(), Some((Instant(9), pid)));
        assert_eq!(p.reap(pid).unwrap().1, ExitStatus::Signal(9));
    }

    #[test]
    fn crashy_children_exit_non_zero_soon() {
        let mut p = SimProcesses::default();
        let mut e = SeededEntropy::new(2);
        let pid = p.spawn(&Id::new("t").unwrap(), 1, &spec(Behaviour::Crashy)).unwrap();
        p.settle(Instant(0), &mut e, false);
        let (at, _) = p.next_exit().unwrap();
        assert!(at.0 < CRASHY_RUN_MAX.0);
        assert_eq!(p.reap(pid).unwrap().1, ExitStatus::Code(1));
    }
}
