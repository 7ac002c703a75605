//! Time as plain values: a monotonic `Instant`, a `Duration`, and a wall-clock `WallTime`.
//!
//! The core never reads a clock. Every deadline, backoff and window is integer arithmetic on
//! these newtypes, so a simulator can move time at will and a late or missed wake only makes a
//! decision later, never wrong.

use serde::{Deserialize, Serialize};

/// Nanoseconds since an arbitrary, fixed epoch of one process or one simulation. Never goes back.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Instant(pub u64);

/// A span of time in nanoseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Duration(pub u64);

/// Unix time in milliseconds, as the operating system reports it. May jump either way; used for
/// display and journal timestamps only, never for deadlines.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct WallTime(pub i64);

const NANOS_PER_MILLI: u64 = 1_000_000;
const NANOS_PER_SEC: u64 = 1_000_000_000;

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);
    /// The largest representable span; used as "never".
    pub const MAX: Duration = Duration(u64::MAX);

    /// A span of `ms` milliseconds, saturating at [`Duration::MAX`].
    pub const fn from_millis(ms: u64) -> Duration {
        Duration(ms.saturating_mul(NANOS_PER_MILLI))
    }

    /// A span of `s` seconds, saturating at [`Duration::MAX`].
    pub const fn from_secs(s: u64) -> Duration {
        Duration(s.saturating_mul(NANOS_PER_SEC))
    }

    /// Whole milliseconds in this span, rounded down.
    pub const fn as_millis(self) -> u64 {
        self.0 / NANOS_PER_MILLI
    }

    /// `self * 2^exponent`, saturating instead of overflowing.
    pub fn saturating_shl(self, exponent: u32) -> Duration {
        if self.0 == 0 {
            return Duration::ZERO;
        }
        // Shifting by exactly the leading zeros still fits; one more bit overflows.
        if exponent > self.0.leading_zeros() || exponent >= u64::BITS {
            return Duration::MAX;
        }
        Duration(self.0 << exponent)
    }

    /// The sum of two spans, saturating.
    pub const fn saturating_add(self, other: Duration) -> Duration {
        Duration(self.0.saturating_add(other.0))
    }
}

impl Instant {
    /// The start of the epoch.
    pub const ZERO: Instant = Instant(0);

    /// `self + d`, saturating at the end of time rather than wrapping.
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }

    /// Time elapsed from `earlier` to `self`; zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl WallTime {
    /// Adds a span to a wall time, saturating.
    pub fn saturating_add(self, d: Duration) -> WallTime {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        WallTime(self.0.saturating_add(ms))
    }
}

impl std::fmt::Display for Duration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.as_millis();
        if ms >= 1000 && ms.is_multiple_of(1000) {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifting_saturates_instead_of_overflowing() {
        assert_eq!(Duration(1).saturating_shl(63), Duration(1 << 63));
        assert_eq!(Duration(1).saturating_shl(64), Duration::MAX);
        assert_eq!(Duration(3).saturating_shl(63), Duration::MAX);
        assert_eq!(Duration(1 << 63).saturating_shl(0), Duration(1 << 63));
        assert_eq!(Duration(1 << 62).saturating_shl(1), Duration(1 << 63));
        assert_eq!(Duration(1 << 62).saturating_shl(2), Duration::MAX);
        assert_eq!(Duration::ZERO.saturating_shl(200), Duration::ZERO);
        assert_eq!(Duration::from_secs(1).saturating_shl(1), Duration::from_secs(2));
    }

    #[test]
    fn instants_saturate_at_both_ends() {
        assert_eq!(Instant(u64::MAX).saturating_add(Duration(1)), Instant(u64::MAX));
        assert_eq!(Instant(5).saturating_since(Instant(9)), Duration::ZERO);
        assert_eq!(Instant(9).saturating_since(Instant(5)), Duration(4));
    }

    #[test]
    fn durations_print_in_human_units() {
        assert_eq!(Duration::from_secs(30).to_string(), "30s");
        assert_eq!(Duration::from_millis(1500).to_string(), "1500ms");
    }
}
