//! The service's loop, driven once for both of its hosts: a wake hands the scheduler the
//! watcher's drain and the time, then every effect the scheduler asks for is carried out in
//! its order (a sweep, whose end is handed back before anything else happens; the wake hints,
//! queued again when their write was lost). The binary's loop (`service::run_loop`) and the
//! simulator's world implement [`ServiceHost`]; neither decides what to do next.

use super::wake::{ServiceEffect, ServicePhase, ServiceScheduler};
use crate::error::RecordError;
use crate::time::Instant;

/// How one sweep ended, as the scheduler takes it: `Err` is a sweep-level error no single goal
/// owns (it backs the whole loop off).
pub type SweepOutcome = Result<(), RecordError>;

/// What carries out the service's effects.
pub trait ServiceHost {
    /// Why the host gave up (the simulator's broken invariant; the binary never gives up).
    type Error;

    /// The monotonic time now.
    fn now(&mut self) -> Instant;

    /// True once the watcher has begun a drain (a stop was asked for).
    fn draining(&self) -> bool;

    /// Runs one sweep over the enrolled goals (`service::sweep::sweep` behind the host's own
    /// `SweepHost`). `None`: the host was lost during it (a crash), and the loop ends here.
    fn sweep(
        &mut self,
        scheduler: &mut ServiceScheduler,
    ) -> Result<Option<SweepOutcome>, Self::Error>;

    /// Records a sweep's end once the scheduler has taken it (status, audit, watches).
    fn swept(
        &mut self,
        scheduler: &ServiceScheduler,
        outcome: &SweepOutcome,
    ) -> Result<(), Self::Error>;

    /// Writes the wake hints the scheduler holds now; false when the write was lost.
    fn write_hints(&mut self, scheduler: &ServiceScheduler) -> bool;
}

/// Where the loop stands after a wake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceStep {
    /// Sleep until the next sweep is due (or a file change, or a stop, comes first).
    Wait(Option<Instant>),
    /// The drain is done: the loop ends.
    Stopped,
    /// The host was lost during a sweep.
    Lost,
}

/// One wake of the service's loop.
pub fn wake<H: ServiceHost>(
    scheduler: &mut ServiceScheduler,
    host: &mut H,
) -> Result<ServiceStep, H::Error> {
    let now = host.now();
    scheduler.wake(now, host.draining());
    while let Some(effect) = scheduler.poll_effect() {
        match effect {
            ServiceEffect::WriteHints => {
                if !host.write_hints(scheduler) {
                    scheduler.hints_lost();
                }
            }
            ServiceEffect::Sweep => {
                let Some(outcome) = host.sweep(scheduler)? else {
                    return Ok(ServiceStep::Lost);
                };
                let ended = host.now();
                scheduler.sweep_ended(ended, host.draining(), outcome.clone());
                host.swept(scheduler, &outcome)?;
            }
        }
    }
    Ok(match scheduler.phase() {
        ServicePhase::Stopped => ServiceStep::Stopped,
        _ => ServiceStep::Wait(scheduler.next_sweep_at()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Id;
    use crate::service::wake::WakeConfig;
    use crate::time::Duration;

    /// A host that records what it was asked to do.
    struct Recorder {
        now: Instant,
        draining: bool,
        /// A stop is asked for while each sweep runs.
        stop_during_sweep: bool,
        lose_hints: bool,
        crash: bool,
        done: Vec<String>,
    }

    impl ServiceHost for Recorder {
        type Error = String;
        fn now(&mut self) -> Instant {
            self.now
        }
        fn draining(&self) -> bool {
            self.draining
        }
        fn sweep(&mut self, s: &mut ServiceScheduler) -> Result<Option<SweepOutcome>, Self::Error> {
            let _ = s;
            self.done.push("sweep".into());
            self.draining |= self.stop_during_sweep;
            self.now = self.now.saturating_add(Duration::from_millis(10));
            Ok((!self.crash).then_some(Ok(())))
        }
        fn swept(
            &mut self,
            s: &ServiceScheduler,
            outcome: &SweepOutcome,
        ) -> Result<(), Self::Error> {
            self.done.push(format!("swept {outcome:?} at {:?}", s.last_sweep_at()));
            Ok(())
        }
        fn write_hints(&mut self, _: &ServiceScheduler) -> bool {
            self.done.push("hints".into());
            !self.lose_hints
        }
    }

    fn scheduler() -> ServiceScheduler {
        let config = WakeConfig {
            wake_interval: Duration::from_millis(1_000),
            heartbeat_interval: Duration::from_millis(200),
            error_backoff_base: Duration::from_millis(500),
            error_backoff_max: Duration::from_millis(8_000),
        };
        let goals = vec![Id::new("g").unwrap()];
        ServiceScheduler::new(config, goals, Default::default(), Instant(0)).unwrap()
    }

    fn host() -> Recorder {
        Recorder {
            now: Instant(0),
            draining: false,
            stop_during_sweep: true,
            lose_hints: false,
            crash: false,
            done: vec![],
        }
    }

    #[test]
    fn a_stop_asked_for_during_a_sweep_ends_the_loop_at_the_sweeps_end() {
        let mut s = scheduler();
        let mut h = host();
        assert_eq!(wake(&mut s, &mut h), Ok(ServiceStep::Stopped));
        assert_eq!(h.done[0], "sweep");
        assert!(h.done[1].starts_with("swept Ok(())"), "{:?}", h.done);
    }

    #[test]
    fn a_host_lost_mid_sweep_ends_the_wake_with_nothing_recorded() {
        let mut s = scheduler();
        let mut h = Recorder { crash: true, ..host() };
        assert_eq!(wake(&mut s, &mut h), Ok(ServiceStep::Lost));
        assert_eq!(h.done, ["sweep"]);
    }

    #[test]
    fn lost_hints_are_queued_again() {
        let mut s = scheduler();
        let mut h = Recorder { lose_hints: true, stop_during_sweep: false, ..host() };
        let step = wake(&mut s, &mut h).unwrap();
        assert!(matches!(step, ServiceStep::Wait(Some(_))), "{step:?}");
        let hints = h.done.iter().filter(|d| *d == "hints").count();
        assert!(hints >= 1, "{:?}", h.done);
        // The write was lost, so the next wake writes them again.
        h.lose_hints = false;
        h.now = s.next_sweep_at().unwrap();
        wake(&mut s, &mut h).unwrap();
        assert!(h.done.iter().filter(|d| *d == "hints").count() > hints);
    }
}
