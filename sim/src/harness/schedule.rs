//! What happens next in the simulated world: the earliest of a child's exit, an operator
//! command and the daemon's deadline, with timer wakes made late, missed or spurious, and the
//! faults injected into the step about to run.

use crate::entropy::Entropy;
use crate::harness::options::{draw_limits, harness_name};
use crate::harness::trace::StepEvent;
use crate::harness::world::HarnessWorld;
use harn_core::env::{Clock, FsErrorKind};
use harn_core::harness::daemon::{Command, DaemonInput};
use harn_core::harness::driver::Wake;
use harn_core::harness::lifecycle::{HarnessInput, RestartPolicy};
use harn_core::harness::readiness::{ReadinessFinding, ReadinessHost};
use harn_core::ids::Id;
use harn_core::time::{Duration, Instant};

impl<E: Entropy> HarnessWorld<E> {
    /// Chooses what wakes the daemon next and moves the clock there. What a readiness look
    /// found is reported first, as the real daemon does in the wake that looked; then, at
    /// equal times, exits, commands, readiness looks and timers.
    pub(crate) fn next_wake(&mut self) -> (StepEvent, Wake) {
        if self.daemon().is_some() {
            if let Some((name, run, finding)) = self.found.pop_front() {
                let evidence = self.readiness.kind(&name);
                return self.report(name, run, finding, evidence);
            }
        }
        let now = self.clock.now();
        let timer = self.daemon().and_then(|d| d.poll_timeout()).map(|t| t.max(self.timer_floor));
        let exit = self.procs.next_exit();
        let command = self.next_command_at;
        let exit_t = exit.map(|(t, _)| t);
        let readiness = self.readiness_due();
        let notify = self.notify_due();
        let Some(first) = [exit_t, command, timer, readiness, notify].into_iter().flatten().min()
        else {
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
            let terminals = self.options.harnesses.iter().any(|h| h.tty);
            if terminals && self.entropy.chance(1, 3) {
                self.schedule_command();
                return self.attachment_wake();
            }
            let command = self.draw_command();
            self.schedule_command();
            return self.deliver_command(command);
        }
        if Some(first) == readiness {
            self.clock.advance_to(first.max(now));
            return self.readiness_wake();
        }
        if Some(first) == notify && timer.is_none_or(|t| t > first) {
            self.clock.advance_to(first.max(now));
            return self.notify_wake();
        }
        self.timer_wake(first.max(now))
    }

    /// When the readiness schedule next has work, or a simulated probe exits.
    pub(crate) fn readiness_due(&self) -> Option<Instant> {
        self.daemon()?;
        if !self.found.is_empty() {
            return Some(self.clock.now());
        }
        let probe = self.probes.values().map(|(at, _)| *at).min();
        [self.readiness.poll_timeout(), probe].into_iter().flatten().min()
    }

    /// The daemon's readiness watch wakes: a probe's exit is reaped, or the core's look asks
    /// to look at files (each found with a drawn chance), start probes (each drawn to exit
    /// soon, succeeding half the time) and kill probes. Every finding is reported, one step
    /// each; a look that finds nothing is a wake with nothing to deliver.
    fn readiness_wake(&mut self) -> (StepEvent, Wake) {
        let now = self.clock.now();
        let nothing = (StepEvent::Timeout { spurious: true }, Wake::Timeout);
        let exited = self.probes.iter().find(|(_, (at, _))| *at <= now).map(|(p, e)| (*p, e.1));
        if let Some((pid, ok)) = exited {
            self.probes.remove(&pid);
            return match self.readiness.probe_exited(now, pid, ok) {
                Some(Some((name, run, finding))) => self.report(name, run, finding, "probe"),
                _ => nothing,
            };
        }
        let Some(daemon) = self.daemon() else { return nothing };
        let live: Vec<(Id, u64)> = daemon
            .harnesses()
            .iter()
            .filter_map(|(n, h)| h.current_run().map(|r| (n.clone(), r)))
            .collect();
        let is_live = |name: &Id, run: u64| live.iter().any(|(n, r)| n == name && *r == run);
        let mut host = SimLooks {
            now,
            faults: self.faults,
            entropy: &mut self.entropy,
            probes: &mut self.probes,
            next_pid: &mut self.next_probe_pid,
        };
        let found = self.readiness.look(now, &is_live, &mut host);
        self.found.extend(found);
        match self.found.pop_front() {
            Some((name, run, finding)) => {
                let evidence = self.readiness.kind(&name);
                self.report(name, run, finding, evidence)
            }
            None => nothing,
        }
    }

    /// Reports a readiness finding to the daemon, remembering it for the invariants.
    fn report(
        &mut self,
        name: Id,
        run: u64,
        finding: ReadinessFinding,
        evidence: &str,
    ) -> (StepEvent, Wake) {
        self.vouch(&name, run, finding);
        let event = match finding {
            ReadinessFinding::Ready => {
                StepEvent::Ready { name: name.to_string(), run, evidence: evidence.into() }
            }
            ReadinessFinding::Lost => {
                StepEvent::Unready { name: name.to_string(), run, evidence: evidence.into() }
            }
        };
        let report = finding.report(run);
        (event, Wake::Input(DaemonInput::Process { name, report }))
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
                    let late = Duration(self.entropy.below(Duration::from_secs(5).0));
                    self.timer_floor = due.saturating_add(late);
                }
                _ => {
                    let missed = Duration::from_secs(self.entropy.between(30, 120));
                    self.timer_floor = due.saturating_add(missed);
                }
            }
            if self.timer_floor > due {
                // Late or missed: anything due before the floor goes first.
                let exit = self.procs.next_exit().map(|(t, _)| t);
                let other = [exit, self.next_command_at].into_iter().flatten().min();
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
        if crate::harness::options::loses_exit_reports(self.options.bug)
            && self.entropy.chance(1, 4)
        {
            return (event, Wake::Timeout); // The planted bug: the report never arrives.
        }
        let input = DaemonInput::Process { name, report: HarnessInput::Exited { run, status } };
        (event, Wake::Input(input))
    }

    /// Delivers an operator command now.
    pub(crate) fn deliver_command(&mut self, command: Command) -> (StepEvent, Wake) {
        self.next_command_id += 1;
        let id = self.next_command_id;
        if matches!(command, Command::Start { .. } | Command::Stop { .. } | Command::Restart { .. })
        {
            self.commands.insert(id, command.clone());
        }
        let traced = self.records.is_some().then(|| Box::new(command.clone()));
        let event = StepEvent::Command { id, command: traced };
        (event, Wake::Input(DaemonInput::Command { id, command }))
    }

    fn draw_command(&mut self) -> Command {
        let count = self.options.harnesses.len() as u64;
        // One harness, or now and then two in one command (the same one, possibly).
        let mut names = vec![harness_name(self.entropy.below(count) as usize)];
        if self.entropy.chance(1, 4) {
            names.push(harness_name(self.entropy.below(count) as usize));
        }
        match self.entropy.below(41) {
            // Half the shutdowns are bounded: past their deadline the core kills what is
            // still stopping, a harness that ignores TERM included.
            40 => {
                let bounded = self.entropy.chance(1, 2);
                let timeout = bounded.then(|| Duration::from_millis(self.entropy.below(3_000)));
                Command::Shutdown { drain_timeout: timeout }
            }
            30..=39 => Command::Start { names },
            0..=9 => Command::Stop { names },
            10..=17 => Command::Restart { names },
            18..=20 => {
                let profile = ["all", "half", "absent"][self.entropy.below(3) as usize];
                Command::UseProfile { profile: Id::new(profile).expect("valid") }
            }
            _ => self.draw_reload(),
        }
    }

    /// A reload that changes one thing: argv (and, every third revision, per-harness
    /// overrides), one restart policy, whether one harness is configured at all, or the limits.
    fn draw_reload(&mut self) -> Command {
        let count = self.options.harnesses.len() as u64;
        let i = self.entropy.below(count) as usize;
        match self.entropy.below(4) {
            0 => self.knobs.revision += 1,
            1 => {
                let policies = [RestartPolicy::Always, RestartPolicy::OnFailure, RestartPolicy::No];
                self.knobs.policies[i] = policies[self.entropy.below(3) as usize];
            }
            2 => {
                let present = self.knobs.present.iter().filter(|p| **p).count();
                if !self.knobs.present[i] || present > 1 {
                    self.knobs.present[i] = !self.knobs.present[i];
                }
            }
            _ => self.knobs.limits = draw_limits(&mut self.entropy),
        }
        Command::Reload { config: self.options.config(&self.knobs), force: false }
    }

    /// Draws when the next operator command arrives.
    pub(crate) fn schedule_command(&mut self) {
        let mean = Duration::from_secs(self.options.command_mean_secs.max(1));
        let gap = Duration(self.entropy.below(mean.0.saturating_mul(2)).max(1));
        self.next_command_at = Some(self.clock.now().saturating_add(gap));
    }

    /// Faults for the step about to run: an IO error on the next filesystem call, a spawn
    /// that fails for a program that exists, a wall-clock jump.
    pub(crate) fn inject_faults(&mut self) {
        if !self.faults {
            return;
        }
        let rate = self.options.io_fault_per_mille;
        if self.entropy.chance(rate, 1000) {
            let kind =
                if self.entropy.chance(1, 2) { FsErrorKind::Io } else { FsErrorKind::NoSpace };
            self.fs.borrow_mut().fail_next(kind);
        }
        if self.entropy.chance(rate, 1000) {
            self.procs.fail_next_spawn();
        }
        if self.entropy.chance(self.options.wall_jump_per_mille, 1000) {
            let delta = self.entropy.below(2 * 3_600_000) as i64 - 3_600_000;
            self.clock.jump_wall(delta);
        }
    }
}

/// The simulator's side of a readiness look: files found by a drawn chance, probes that
/// exit by a drawn time with a drawn result.
struct SimLooks<'a, E: Entropy> {
    now: Instant,
    faults: bool,
    entropy: &'a mut E,
    probes: &'a mut std::collections::BTreeMap<u32, (Instant, bool)>,
    next_pid: &'a mut u32,
}

impl<E: Entropy> ReadinessHost for SimLooks<'_, E> {
    fn file_present(&mut self, _: &Id, _: &str) -> bool {
        // Once faults stop, a healthy harness's evidence shows at the first look.
        !self.faults || self.entropy.chance(1, 3)
    }

    fn start_probe(&mut self, _: &Id, _: &[String]) -> Option<harn_core::env::Pid> {
        *self.next_pid += 1;
        let took = Duration::from_millis(self.entropy.below(400));
        let ok = !self.faults || self.entropy.chance(1, 2);
        self.probes.insert(*self.next_pid, (self.now.saturating_add(took), ok));
        Some(*self.next_pid)
    }

    fn kill_probe(&mut self, pid: harn_core::env::Pid) {
        if let Some(probe) = self.probes.get_mut(&pid) {
            *probe = (self.now, false);
        }
    }
}
