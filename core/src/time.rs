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

    /// `YYYY-MM-DD HH:MM:SS.mmm` in UTC, for people.
    pub fn utc(self) -> String {
        let (date, h, m, s, milli) = self.civil();
        format!("{date} {h:02}:{m:02}:{s:02}.{milli:03}")
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339 in UTC), for files; [`WallTime::parse_rfc3339`]
    /// reads it back.
    pub fn rfc3339(self) -> String {
        let (date, h, m, s, milli) = self.civil();
        format!("{date}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
    }

    fn civil(self) -> (String, i64, i64, i64, i64) {
        let (secs, milli) = (self.0.div_euclid(1000), self.0.rem_euclid(1000));
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        // Howard Hinnant's civil-from-days algorithm.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        let date = format!("{year:04}-{month:02}-{day:02}");
        (date, rem / 3600, rem % 3600 / 60, rem % 60, milli)
    }

    /// Reads `YYYY-MM-DDTHH:MM:SS[.fff]Z` (a space may stand for the `T`; the fraction is
    /// cut to milliseconds). Only UTC is accepted: the files harn writes carry nothing else.
    pub fn parse_rfc3339(text: &str) -> Option<WallTime> {
        let b = text.as_bytes();
        let digits = |from: usize, n: usize| -> Option<i64> {
            let part = b.get(from..from + n)?;
            part.iter()
                .all(u8::is_ascii_digit)
                .then(|| part.iter().fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
        };
        let seps = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
        if b.len() < 20 || seps.iter().any(|&(i, c)| b[i] != c) || !matches!(b[10], b'T' | b' ') {
            return None;
        }
        let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
        let (h, m, s) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
        let mut milli = 0;
        let mut at = 19;
        if b[at] == b'.' {
            let frac = b[at + 1..].iter().take_while(|d| d.is_ascii_digit()).count();
            if frac == 0 {
                return None;
            }
            let kept = frac.min(3);
            milli = digits(at + 1, kept)? * 10i64.pow(3 - kept as u32);
            at += 1 + frac;
        }
        if &b[at..] != b"Z" || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
            return None;
        }
        if h > 23 || m > 59 || s > 60 {
            return None;
        }
        // Howard Hinnant's days-from-civil algorithm.
        let y = if month <= 2 { year - 1 } else { year };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = if month > 2 { month - 3 } else { month + 9 };
        let doy = (153 * mp + 2) / 5 + day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        let wall = WallTime(((days * 86_400 + h * 3600 + m * 60 + s) * 1000) + milli);
        // A day past its month's end (2026-02-30) does not read back as itself.
        (wall.civil().0 == text[..10]).then_some(wall)
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
    fn wall_times_format_and_read_back() {
        assert_eq!(WallTime(0).utc(), "1970-01-01 00:00:00.000");
        assert_eq!(WallTime(1_767_225_600_123).rfc3339(), "2026-01-01T00:00:00.123Z");
        assert_eq!(WallTime(951_782_400_000).utc(), "2000-02-29 00:00:00.000");
        for ms in [0, 1, 951_782_400_000, 1_767_225_600_123, 4_102_444_799_999, -1] {
            let w = WallTime(ms);
            assert_eq!(WallTime::parse_rfc3339(&w.rfc3339()), Some(w), "{ms}");
        }
        assert_eq!(
            WallTime::parse_rfc3339("2026-01-01 00:00:00.1234Z"),
            Some(WallTime(1_767_225_600_123))
        );
        assert_eq!(
            WallTime::parse_rfc3339("2026-01-01T00:00:00Z"),
            Some(WallTime(1_767_225_600_000))
        );
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+01:00",
            "",
            "2026-1-01T00:00:00Z",
        ] {
            assert_eq!(WallTime::parse_rfc3339(bad), None, "{bad}");
        }
    }

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
