//! The real clocks behind the [`Clock`] seam: the operating system's monotonic clock, counted
//! from a process-wide epoch, and its wall clock in unix milliseconds.

use harn_core::env::Clock;
use harn_core::time::{Instant, WallTime};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The monotonic epoch shared by every [`RealClock`] of this process, so their instants compare.
static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();

/// The operating system's clocks.
#[derive(Clone, Copy, Debug)]
pub struct RealClock {
    epoch: std::time::Instant,
}

impl RealClock {
    /// A clock whose [`Instant`]s count nanoseconds from the first `RealClock` of the process.
    pub fn new() -> RealClock {
        RealClock { epoch: *EPOCH.get_or_init(std::time::Instant::now) }
    }
}

impl Default for RealClock {
    fn default() -> RealClock {
        RealClock::new()
    }
}

impl Clock for RealClock {
    fn now(&self) -> Instant {
        // 2^64 ns is 584 years of uptime; saturate rather than wrap if it ever comes.
        Instant(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn wall(&self) -> WallTime {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => WallTime(i64::try_from(since.as_millis()).unwrap_or(i64::MAX)),
            // A clock set before 1970 is odd but representable.
            Err(e) => WallTime(-i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX)),
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS.mmm` (UTC) of a unix time in milliseconds.
pub fn utc(ms: i64) -> String {
    harn_core::time::WallTime(ms).utc()
}

/// Now on the machine's boot clock (`CLOCK_BOOTTIME`, which no step of the wall clock moves),
/// with this boot's id; `None` where either cannot be read.
pub fn boot_mark() -> Option<harn_core::service::BootMark> {
    let boot_id = crate::os::procfs::boot_id();
    if boot_id.is_empty() {
        return None;
    }
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    let at_ms = u64::try_from(now.tv_sec).ok()?.checked_mul(1_000)?
        + u64::try_from(now.tv_nsec).ok()? / 1_000_000;
    Some(harn_core::service::BootMark { boot_id, at_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_never_go_back_and_clocks_share_an_epoch() {
        let a = RealClock::new();
        let first = a.now();
        let b = RealClock::new();
        let second = b.now();
        assert!(second >= first);
        assert!(a.now() >= second);
    }

    #[test]
    fn wall_time_is_unix_milliseconds() {
        let wall = RealClock::new().wall();
        // Between 2020-01-01 and 2200-01-01: catches seconds or nanoseconds by mistake.
        assert!(wall.0 > 1_577_836_800_000 && wall.0 < 7_258_118_400_000, "{wall:?}");
    }
}
