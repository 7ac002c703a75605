//! The virtual clock: monotonic time that only the simulator moves, and a wall clock that
//! can jump either way (NTP steps, a host whose clock was wrong).

use harn_core::env::Clock;
use harn_core::time::{Duration, Instant, WallTime};

/// Virtual time for one simulated host.
#[derive(Clone, Debug)]
pub struct VirtualClock {
    now: Instant,
    /// Wall time at monotonic zero; jumps change it.
    wall_epoch_ms: i64,
}

/// Wall time at the start of every simulation: 2026-01-01T00:00:00Z.
pub const SIM_WALL_START_MS: i64 = 1_767_225_600_000;

impl Default for VirtualClock {
    fn default() -> VirtualClock {
        VirtualClock { now: Instant::ZERO, wall_epoch_ms: SIM_WALL_START_MS }
    }
}

impl VirtualClock {
    /// Moves monotonic time forward to `to`; never backwards.
    pub fn advance_to(&mut self, to: Instant) {
        assert!(to >= self.now, "monotonic time went back: {:?} -> {:?}", self.now, to);
        self.now = to;
    }

    /// Moves monotonic time forward by `d`.
    pub fn advance(&mut self, d: Duration) {
        self.now = self.now.saturating_add(d);
    }

    /// Steps the wall clock by `delta_ms`, as an NTP correction would.
    pub fn jump_wall(&mut self, delta_ms: i64) {
        self.wall_epoch_ms = self.wall_epoch_ms.saturating_add(delta_ms);
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        self.now
    }

    fn wall(&self) -> WallTime {
        let elapsed_ms = i64::try_from(self.now.0 / 1_000_000).unwrap_or(i64::MAX);
        WallTime(self.wall_epoch_ms.saturating_add(elapsed_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_follows_monotonic_and_can_jump_back() {
        let mut c = VirtualClock::default();
        c.advance(Duration::from_secs(2));
        assert_eq!(c.wall(), WallTime(SIM_WALL_START_MS + 2000));
        c.jump_wall(-60_000);
        assert_eq!(c.wall(), WallTime(SIM_WALL_START_MS - 58_000));
        assert_eq!(c.now(), Instant(2_000_000_000));
    }

    #[test]
    #[should_panic(expected = "monotonic time went back")]
    fn monotonic_time_never_goes_back() {
        let mut c = VirtualClock::default();
        c.advance(Duration::from_secs(1));
        c.advance_to(Instant(5));
    }
}
