//! Simulated notify-socket children: each run of a harness with `readiness = "notify"` sends
//! `READY=1` after a drawn delay and `WATCHDOG=1` at a drawn interval. Under faults a child may
//! never become ready, ping too slowly, or stop pinging after a few pings (a hung child); once
//! faults stop, every child is ready at once and pings well within its watchdog.

use crate::entropy::Entropy;
use crate::harness::trace::StepEvent;
use crate::harness::world::{HarnessWorld, NotifyPlan};
use harn_core::env::{Clock, Pid};
use harn_core::harness::daemon::DaemonInput;
use harn_core::harness::driver::Wake;
use harn_core::harness::lifecycle::{HarnessInput, Readiness};
use harn_core::ids::Id;
use harn_core::time::{Duration, Instant};

impl<E: Entropy> HarnessWorld<E> {
    /// A run of `name` was spawned as `pid` at `now`: if it talks on a notify socket, draw
    /// what it will say.
    pub(crate) fn plan_notify(&mut self, now: Instant, name: &Id, run: u64, pid: Pid) {
        let Some(spec) = self.daemon().and_then(|d| d.config().harnesses.get(name)).cloned() else {
            return;
        };
        if spec.readiness != Readiness::Notify {
            return;
        }
        let faults = self.faults;
        let never_ready = faults && self.entropy.chance(1, 6);
        let ready_at = (!never_ready)
            .then(|| now.saturating_add(Duration::from_millis(self.entropy.below(800))));
        let (every, pings_left) = match spec.watchdog {
            None => (Duration::MAX, Some(0)),
            Some(w) if faults => {
                // A third to a little over the watchdog: the slowest are hung by it.
                let sixths = self.entropy.between(2, 7);
                let left = self.entropy.chance(1, 4).then(|| self.entropy.below(5) as u32);
                (Duration(w.0 / 6 * sixths), left)
            }
            Some(w) => (Duration(w.0 / 3), None),
        };
        let next_ping = (pings_left != Some(0)).then(|| now.saturating_add(every));
        let plan = NotifyPlan { name: name.clone(), run, ready_at, next_ping, every, pings_left };
        self.notify.insert(pid, plan);
    }

    /// Faults are off: every child still alive becomes ready soon and pings well within its
    /// watchdog from now on.
    pub(crate) fn calm_notify(&mut self) {
        let now = self.clock.now();
        let watchdogs: Vec<(Pid, Option<Duration>)> = self
            .notify
            .iter()
            .map(|(pid, p)| {
                let spec = self.daemon().and_then(|d| d.config().harnesses.get(&p.name).cloned());
                (*pid, spec.and_then(|s| s.watchdog))
            })
            .collect();
        for (pid, watchdog) in watchdogs {
            let Some(plan) = self.notify.get_mut(&pid) else { continue };
            if plan.ready_at.is_none() && !self.vouched.contains(&(plan.name.clone(), plan.run)) {
                plan.ready_at = Some(now);
            }
            if let Some(w) = watchdog {
                plan.every = Duration(w.0 / 3);
                plan.pings_left = None;
                plan.next_ping = Some(now);
            }
        }
    }

    /// When a notify child next says something (children no longer alive say nothing).
    pub(crate) fn notify_due(&mut self) -> Option<Instant> {
        self.daemon()?;
        let live = &self.procs;
        self.notify.retain(|pid, _| live.live().get(pid).is_some_and(|p| !p.orphaned));
        self.notify.values().flat_map(|p| [p.ready_at, p.next_ping]).flatten().min()
    }

    /// The earliest notify message is delivered: `READY=1` (vouching for the run) or
    /// `WATCHDOG=1`.
    pub(crate) fn notify_wake(&mut self) -> (StepEvent, Wake) {
        let now = self.clock.now();
        let due = |at: Option<Instant>| at.is_some_and(|t| t <= now);
        let ready = self.notify.iter().find(|(_, p)| due(p.ready_at)).map(|(pid, _)| *pid);
        if let Some(pid) = ready {
            let plan = self.notify.get_mut(&pid).expect("found");
            plan.ready_at = None;
            let (name, run) = (plan.name.clone(), plan.run);
            self.vouched.insert((name.clone(), run));
            self.alive.insert((name.clone(), run), now);
            let event = StepEvent::Ready { name: name.to_string(), run, evidence: "notify".into() };
            let input = DaemonInput::Process { name, report: HarnessInput::Ready { run } };
            return (event, Wake::Input(input));
        }
        let ping = self.notify.iter().find(|(_, p)| due(p.next_ping)).map(|(pid, _)| *pid);
        let Some(pid) = ping else {
            return (StepEvent::Timeout { spurious: true }, Wake::Timeout);
        };
        let plan = self.notify.get_mut(&pid).expect("found");
        if let Some(left) = plan.pings_left.as_mut() {
            *left = left.saturating_sub(1);
        }
        plan.next_ping = (plan.pings_left != Some(0)).then(|| now.saturating_add(plan.every));
        let (name, run) = (plan.name.clone(), plan.run);
        self.alive.insert((name.clone(), run), now);
        let event = StepEvent::Ping { name: name.to_string(), run };
        let input = DaemonInput::Process { name, report: HarnessInput::Watchdog { run } };
        (event, Wake::Input(input))
    }
}
