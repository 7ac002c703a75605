//! The service's watcher machine: the heartbeat on its own schedule, whatever the sweep loop is
//! doing (a tick can run for hours), and the drain after a stop request, with the deadline past
//! which the active tick's children are terminated. Sans-IO: the daemon's watcher thread and
//! the simulator drive the same code with `now`.

use crate::error::InvariantError;
use crate::time::{Duration, Instant};
use serde::{Deserialize, Serialize};

/// What the watcher asks its driver to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchEffect {
    /// Write the heartbeat (and notify the systemd watchdog).
    Beat,
    /// A stop was asked for: record it, mark the service stopping, end the loop after the tick.
    BeginDrain,
    /// The drain outlived its deadline with a tick still running: terminate the tick's
    /// children (TERM, grace, KILL) and record it.
    ForceStop,
}

/// Where the drain stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drain {
    /// No stop asked for.
    None,
    /// Stopping; `force_at` is the deadline, if one was given, and `timeout` the drain timeout
    /// of the request that set it.
    Draining { force_at: Option<Instant>, timeout: Option<Duration> },
    /// The children were terminated after the drain `timeout`; nothing more to do.
    Forced { timeout: Option<Duration> },
}

/// The watcher (see the module documentation).
#[derive(Clone, Debug)]
pub struct Watcher {
    interval: Duration,
    now: Instant,
    next_beat: Instant,
    beat_queued: bool,
    drain: Drain,
    drain_queued: bool,
    force_queued: bool,
    ticking: bool,
}

impl Watcher {
    /// A watcher beating every `interval` (not zero), its first beat due at `now`.
    pub fn new(interval: Duration, now: Instant) -> Watcher {
        assert!(interval > Duration::ZERO, "a heartbeat interval is never zero");
        Watcher {
            interval,
            now,
            next_beat: now,
            beat_queued: false,
            drain: Drain::None,
            drain_queued: false,
            force_queued: false,
            ticking: false,
        }
    }

    /// Queues what is due at `now`: at most one beat, the next one rescheduled from `now` (a late
    /// wake beats once, not a burst), and the forced stop once its deadline passed while a tick
    /// runs. Harmless when early, late or repeated.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        if self.next_beat <= self.now && !self.beat_queued {
            self.beat_queued = true;
            self.next_beat = self.now.saturating_add(self.interval);
        }
        self.maybe_force();
    }

    /// A stop request at `now`, with how long the active tick may drain (none: as long as it
    /// takes). The first request begins the drain; a later one can only bring its deadline
    /// forward (a bounded stop after an unbounded one), never push it back.
    pub fn stop_requested(&mut self, now: Instant, drain_timeout: Option<Duration>) {
        self.now = self.now.max(now);
        let asked = drain_timeout.map(|d| self.now.saturating_add(d));
        match self.drain {
            Drain::None => {
                self.drain = Drain::Draining { force_at: asked, timeout: drain_timeout };
                self.drain_queued = true;
            }
            // The earlier deadline wins; the timeout reported is the one that set it.
            Drain::Draining { force_at: Some(at), .. } if asked.is_none_or(|b| at <= b) => {}
            Drain::Draining { .. } if asked.is_none() => {}
            Drain::Draining { .. } => {
                self.drain = Drain::Draining { force_at: asked, timeout: drain_timeout };
            }
            Drain::Forced { .. } => {}
        }
        self.maybe_force();
    }

    /// Whether a tick is running now (its children are what a forced stop terminates).
    pub fn set_ticking(&mut self, ticking: bool) {
        self.ticking = ticking;
        self.maybe_force();
    }

    /// In debug builds, the invariants after every transition.
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        if let Err(broken) = self.check() {
            panic!("service watcher invariant broken: {broken}");
        }
    }

    fn maybe_force(&mut self) {
        if let Drain::Draining { force_at: Some(at), timeout } = self.drain {
            if at <= self.now && self.ticking {
                self.drain = Drain::Forced { timeout };
                self.force_queued = true;
            }
        }
        // The last step of every transition.
        self.debug_check();
    }

    /// The next effect to carry out, in the order: drain, forced stop, beat.
    pub fn poll_effect(&mut self) -> Option<WatchEffect> {
        if std::mem::take(&mut self.drain_queued) {
            return Some(WatchEffect::BeginDrain);
        }
        if std::mem::take(&mut self.force_queued) {
            return Some(WatchEffect::ForceStop);
        }
        std::mem::take(&mut self.beat_queued).then_some(WatchEffect::Beat)
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called: the next beat, or the
    /// drain deadline if that comes first and a tick runs.
    pub fn poll_timeout(&self) -> Instant {
        match self.drain {
            Drain::Draining { force_at: Some(at), .. } if self.ticking => at.min(self.next_beat),
            _ => self.next_beat,
        }
    }

    /// Whether a stop was asked for.
    pub fn draining(&self) -> bool {
        self.drain != Drain::None
    }

    /// The drain timeout in force: that of the request whose deadline stands (the earliest
    /// asked for), `None` when no stop was asked for or none was bounded. The records of the
    /// drain and of a forced stop name it.
    pub fn drain_timeout(&self) -> Option<Duration> {
        match self.drain {
            Drain::None => None,
            Drain::Draining { timeout, .. } | Drain::Forced { timeout } => timeout,
        }
    }

    /// Checks the invariants: the next beat is never further than one interval ahead, and a
    /// forced stop happens only after a drain began.
    pub fn check(&self) -> Result<(), InvariantError> {
        if self.next_beat.saturating_since(self.now) > self.interval {
            return Err(InvariantError::new(format!(
                "next beat {:?} is more than an interval after {:?}",
                self.next_beat, self.now
            )));
        }
        if self.force_queued && !matches!(self.drain, Drain::Forced { .. }) {
            return Err(InvariantError::new("a forced stop without a drain"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Instant {
        Instant(n * 1_000_000)
    }

    fn effects(w: &mut Watcher) -> Vec<WatchEffect> {
        std::iter::from_fn(|| w.poll_effect()).collect()
    }

    #[test]
    fn it_beats_at_once_then_every_interval_and_once_after_a_late_wake() {
        let mut w = Watcher::new(Duration::from_millis(2_000), ms(0));
        w.handle_timeout(ms(0));
        assert_eq!(effects(&mut w), [WatchEffect::Beat]);
        assert_eq!(w.poll_timeout(), ms(2_000));
        w.handle_timeout(ms(1_999));
        assert!(effects(&mut w).is_empty(), "early");
        w.handle_timeout(ms(9_000));
        assert_eq!(effects(&mut w), [WatchEffect::Beat], "late: one beat, not four");
        assert_eq!(w.poll_timeout(), ms(11_000));
    }

    #[test]
    fn a_bounded_drain_forces_the_stop_only_past_its_deadline_and_only_during_a_tick() {
        let mut w = Watcher::new(Duration::from_millis(2_000), ms(0));
        w.handle_timeout(ms(0));
        w.set_ticking(true);
        w.stop_requested(ms(100), Some(Duration::from_millis(1_000)));
        assert_eq!(effects(&mut w), [WatchEffect::BeginDrain, WatchEffect::Beat]);
        assert_eq!(w.poll_timeout(), ms(1_100));
        w.stop_requested(ms(200), None);
        w.stop_requested(ms(300), Some(Duration::from_millis(5_000)));
        assert!(effects(&mut w).is_empty(), "one drain; a later deadline never delays it");
        w.handle_timeout(ms(1_099));
        assert!(effects(&mut w).is_empty());
        w.handle_timeout(ms(1_100));
        assert_eq!(effects(&mut w), [WatchEffect::ForceStop]);
        w.handle_timeout(ms(5_000));
        assert_eq!(effects(&mut w), [WatchEffect::Beat], "forced once");
    }

    #[test]
    fn the_timeout_reported_is_the_one_whose_deadline_stands() {
        let mut w = Watcher::new(Duration::from_millis(2_000), ms(0));
        assert_eq!(w.drain_timeout(), None);
        w.stop_requested(ms(0), Some(Duration::from_millis(5_000)));
        assert_eq!(w.drain_timeout(), Some(Duration::from_millis(5_000)));
        w.stop_requested(ms(100), None);
        w.stop_requested(ms(200), Some(Duration::from_millis(9_000)));
        assert_eq!(w.drain_timeout(), Some(Duration::from_millis(5_000)), "later deadlines lose");
        w.stop_requested(ms(300), Some(Duration::from_millis(1_000)));
        assert_eq!(w.drain_timeout(), Some(Duration::from_millis(1_000)), "an earlier one wins");
        w.set_ticking(true);
        w.handle_timeout(ms(1_300));
        assert!(effects(&mut w).contains(&WatchEffect::ForceStop));
        assert_eq!(w.drain_timeout(), Some(Duration::from_millis(1_000)), "kept once forced");
    }

    #[test]
    fn a_bounded_request_after_an_unbounded_one_sets_the_deadline() {
        let mut w = Watcher::new(Duration::from_millis(2_000), ms(0));
        w.set_ticking(true);
        w.stop_requested(ms(0), None);
        w.stop_requested(ms(500), Some(Duration::from_millis(1_000)));
        assert_eq!(w.drain_timeout(), Some(Duration::from_millis(1_000)));
        assert_eq!(effects(&mut w), [WatchEffect::BeginDrain], "one drain");
        w.handle_timeout(ms(1_500));
        assert_eq!(effects(&mut w), [WatchEffect::ForceStop, WatchEffect::Beat]);
    }

    #[test]
    fn an_unbounded_drain_or_an_idle_loop_is_never_forced() {
        let mut w = Watcher::new(Duration::from_millis(500), ms(0));
        w.set_ticking(true);
        w.stop_requested(ms(0), None);
        w.handle_timeout(ms(1_000_000));
        assert!(!effects(&mut w).contains(&WatchEffect::ForceStop));
        let mut idle = Watcher::new(Duration::from_millis(500), ms(0));
        idle.stop_requested(ms(0), Some(Duration::ZERO));
        idle.handle_timeout(ms(10));
        assert!(!effects(&mut idle).contains(&WatchEffect::ForceStop), "no tick, nothing to kill");
        idle.set_ticking(true);
        assert!(effects(&mut idle).contains(&WatchEffect::ForceStop), "a tick that starts late");
    }

    proptest! {
        /// Driven at its own deadlines, however late, the watcher beats at least once per
        /// interval plus the lateness, and never twice within one interval.
        #[test]
        fn beats_never_lapse_beyond_interval_plus_lateness(
            interval in 1u64..5_000,
            lateness in proptest::collection::vec(0u64..50, 1..200),
            stops in proptest::collection::vec(any::<(bool, Option<u16>)>(), 1..200),
        ) {
            let interval_d = Duration::from_millis(interval);
            let mut w = Watcher::new(interval_d, ms(0));
            let mut last: Option<Instant> = None;
            for (late, (tick, stop)) in lateness.iter().zip(stops.iter().cycle()) {
                let now = w.poll_timeout().saturating_add(Duration::from_millis(*late));
                w.set_ticking(*tick);
                if stop.is_some_and(|s| s % 7 == 0) {
                    w.stop_requested(now, stop.map(|s| Duration::from_millis(u64::from(s))));
                }
                w.handle_timeout(now);
                prop_assert_eq!(w.check(), Ok(()));
                while let Some(e) = w.poll_effect() {
                    if e == WatchEffect::Beat {
                        if let Some(prev) = last {
                            let gap = now.saturating_since(prev);
                            prop_assert!(gap >= interval_d, "two beats within {:?}", gap);
                            prop_assert!(gap <= interval_d.saturating_add(Duration::from_millis(50)));
                        }
                        last = Some(now);
                    }
                }
            }
        }
    }
}
