//! When a vendor's usage limit resets, read from the words its program refuses with.
//!
//! The programs name the moment in several ways: Claude Code as a unix time after a bar
//! (`Claude AI usage limit reached|1749924000`) or as a clock time and its zone (`You've hit
//! your limit · resets 3:30am (UTC)`), Codex as a local clock time with or without a date
//! (`Try again at 3:04 PM.`, `try again at Dec 9th, 2026 3:04 PM.`) or, in older versions, as
//! a span (`try again in 2 days 3 hours 5 minutes`). A clock time is only as good as its
//! zone: the presets run their programs with `TZ=UTC`, so their zone-less times are UTC;
//! any other named zone is not guessed at, and the reset is then unknown.

use crate::time::{Duration, WallTime};

/// How far ahead a reset is believed: vendors' windows are five hours, a week, a month.
const FURTHEST_MS: i64 = 45 * 86_400_000;

/// How far back a reset is believed: a moment just past is a limit already lifted; anything
/// older is not what the words meant.
const EARLIEST_MS: i64 = 86_400_000;

/// The moment `words` say a usage limit resets, resolved against `now` (when the program
/// said it); `zoneless_is_utc` when the program ran with `TZ=UTC`, so a clock time that names
/// no zone is UTC. `None` when the words name no moment, name one in a zone other than UTC,
/// or one further ahead than any vendor's window or more than a day past.
pub fn resets_at(words: &str, now: WallTime, zoneless_is_utc: bool) -> Option<WallTime> {
    let lower = words.to_lowercase();
    let at = unix_after_bar(&lower)
        .or_else(|| span_after(&lower, now))
        .or_else(|| clock_after(&lower, now, zoneless_is_utc))?;
    let ahead = at.0.checked_sub(now.0)?;
    (-EARLIEST_MS..=FURTHEST_MS).contains(&ahead).then_some(at)
}

/// `limit reached|1749924000`: unix seconds (or milliseconds) after the bar.
fn unix_after_bar(lower: &str) -> Option<WallTime> {
    let (_, rest) = lower.split_once("limit reached|")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let n: i64 = digits.parse().ok()?;
    match digits.len() {
        9 | 10 => Some(WallTime(n.checked_mul(1000)?)),
        12 | 13 => Some(WallTime(n)),
        _ => None,
    }
}

/// `try again in 2 days 3 hours 5 minutes`: a span from `now`.
fn span_after(lower: &str, now: WallTime) -> Option<WallTime> {
    let (_, rest) = lower.split_once("try again in ")?;
    let mut total: i64 = 0;
    let mut words = rest.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty());
    let mut any = false;
    while let Some(word) = words.next() {
        if word == "and" || word == "about" {
            continue;
        }
        let Ok(n) = word.parse::<u32>() else { break };
        let said = words.next()?;
        // A unit that ends its sentence ends the span.
        let ends = said.ends_with('.');
        let ms = match said.trim_end_matches('.') {
            "day" | "days" | "d" => 86_400_000,
            "hour" | "hours" | "hr" | "hrs" | "h" => 3_600_000,
            "minute" | "minutes" | "min" | "mins" | "m" => 60_000,
            "second" | "seconds" | "sec" | "secs" | "s" => 1000,
            _ => return None,
        };
        total = total.checked_add(i64::from(n).checked_mul(ms)?)?;
        any = true;
        if ends {
            break;
        }
    }
    any.then(|| WallTime(now.0.saturating_add(total)))
}

/// A clock time, with or without a date, after `resets`, `reset at` or `try again at`.
fn clock_after(lower: &str, now: WallTime, zoneless_is_utc: bool) -> Option<WallTime> {
    const MARKERS: [&str; 4] = ["try again at ", "reset at ", "resets at ", "resets "];
    // A marker is a word of its own ("presets " is not "resets ").
    let rest = MARKERS.iter().find_map(|m| {
        lower.match_indices(m).find_map(|(at, _)| {
            let own = lower[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
            own.then(|| &lower[at + m.len()..])
        })
    })?;
    let mut cursor = Cursor { text: rest.trim_start() };
    let date = cursor.date();
    let (hour, minute) = cursor.clock()?;
    let utc = match cursor.zone() {
        Some(zone) => matches!(zone.as_str(), "utc" | "etc/utc" | "gmt" | "etc/gmt" | "z"),
        None => zoneless_is_utc,
    };
    if !utc {
        return None;
    }
    let today = now.utc();
    let year_now: i64 = today[..4].parse().ok()?;
    let on = |year: i64, month: u32, day: u32| {
        let text = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:00Z");
        WallTime::parse_rfc3339(&text)
    };
    let half_year = 183 * 86_400_000;
    match date {
        Some((month, day, Some(year))) => on(year, month, day),
        // Without a year, the date nearest to now: "Dec 31" read on Jan 1 is last year's.
        Some((month, day, None)) => [year_now - 1, year_now, year_now + 1]
            .into_iter()
            .filter_map(|y| on(y, month, day))
            .min_by_key(|at| (at.0 - now.0).abs())
            .filter(|at| (at.0 - now.0).abs() <= half_year),
        None => {
            let month: u32 = today[5..7].parse().ok()?;
            let day: u32 = today[8..10].parse().ok()?;
            let at = on(year_now, month, day)?;
            // A clock time already past (by more than a moment) is tomorrow's.
            if at.0 < now.0 - 60_000 {
                Some(at.saturating_add(Duration::from_millis(86_400_000)))
            } else {
                Some(at)
            }
        }
    }
}

/// A reader over the words after a marker.
struct Cursor<'a> {
    text: &'a str,
}

impl Cursor<'_> {
    /// `Dec 9th, 2026` or `dec 9,` or `december 9 at`: month, day and the year when named.
    /// Leaves the cursor where it was when there is no date.
    fn date(&mut self) -> Option<(u32, u32, Option<i64>)> {
        const MONTHS: [&str; 12] =
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
        let word: String = self.text.chars().take_while(char::is_ascii_alphabetic).collect();
        let month = MONTHS.iter().position(|m| word.len() >= 3 && word.starts_with(m))?;
        let after = self.text[word.len()..].trim_start_matches(['.', ' ']);
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        let day: u32 = digits.parse().ok().filter(|d| (1..=31).contains(d))?;
        let mut rest = after[digits.len()..].trim_start_matches(|c: char| c.is_ascii_alphabetic());
        rest = rest.trim_start_matches([',', ' ']);
        let year_digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let year = if year_digits.len() == 4 && !rest[4..].starts_with(':') {
            rest = rest[4..].trim_start_matches([',', ' ']);
            year_digits.parse().ok()
        } else {
            None
        };
        rest = rest.strip_prefix("at ").unwrap_or(rest).trim_start();
        self.text = rest;
        Some((month as u32 + 1, day, year))
    }

    /// `3pm`, `3:30am`, `3:04 PM`, `15:04`: hour and minute on a 24-hour clock.
    fn clock(&mut self) -> Option<(u32, u32)> {
        let digits: String = self.text.chars().take_while(char::is_ascii_digit).collect();
        let mut hour: u32 = digits.parse().ok().filter(|h| *h <= 23)?;
        let mut rest = &self.text[digits.len()..];
        let mut minute = 0;
        let mut had_minutes = false;
        if let Some(after) = rest.strip_prefix(':') {
            let m: String = after.chars().take_while(char::is_ascii_digit).collect();
            if m.len() != 2 {
                return None;
            }
            minute = m.parse().ok().filter(|m| *m <= 59)?;
            rest = &after[m.len()..];
            had_minutes = true;
        }
        let trimmed = rest.trim_start();
        let meridiem = ["am", "pm", "a.m.", "p.m."].iter().find(|m| trimmed.starts_with(*m));
        match meridiem {
            Some(m) => {
                if !(1..=12).contains(&hour) {
                    return None;
                }
                hour %= 12;
                if m.starts_with('p') {
                    hour += 12;
                }
                rest = &trimmed[m.len()..];
            }
            // A bare number is no clock time (`resets 5 times`); `15:04` is.
            None if !had_minutes => return None,
            None => {}
        }
        self.text = rest;
        Some((hour, minute))
    }

    /// `(UTC)`, `(Asia/Tokyo)` or a bare `UTC`: the zone named right after the time.
    fn zone(&mut self) -> Option<String> {
        let rest = self.text.trim_start();
        if let Some(inner) = rest.strip_prefix('(') {
            let zone = inner.split_once(')')?.0.trim();
            return Some(zone.to_owned());
        }
        let word: String =
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '/').collect();
        matches!(word.as_str(), "utc" | "gmt").then_some(word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-08 10:00:00 UTC.
    const NOW: WallTime = WallTime(1_796_724_000_000);

    fn at(text: &str) -> Option<WallTime> {
        WallTime::parse_rfc3339(text)
    }

    #[test]
    fn the_now_of_these_tests_is_what_it_says() {
        assert_eq!(NOW.rfc3339(), "2026-12-08T10:00:00.000Z");
    }

    #[test]
    fn claude_codes_words_name_a_unix_time_or_a_clock_time_in_utc() {
        let rows = [
            ("Claude AI usage limit reached|1796731200", at("2026-12-08T12:00:00Z")),
            ("You've hit your limit · resets 3:30am (UTC)", at("2026-12-09T03:30:00Z")),
            ("You've hit your session limit · resets 8:30pm (UTC)", at("2026-12-08T20:30:00Z")),
            ("5-hour limit reached ∙ resets 2pm", at("2026-12-08T14:00:00Z")),
            (
                "Claude usage limit reached. Your limit will reset at 9am (Etc/UTC).",
                at("2026-12-09T09:00:00Z"),
            ),
            ("You've hit your weekly limit · resets Dec 11, 5pm (UTC)", at("2026-12-11T17:00:00Z")),
        ];
        for (words, want) in rows {
            assert_eq!(resets_at(words, NOW, true), want, "{words}");
        }
    }

    #[test]
    fn codexs_words_name_a_local_time_a_date_or_a_span() {
        let rows = [
            (
                "You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), \
                 visit https://chatgpt.com/codex/settings/usage to purchase more credits or try \
                 again at 3:04 PM.",
                at("2026-12-08T15:04:00Z"),
            ),
            (
                "You've hit your usage limit. Try again at Dec 9th, 2026 3:04 PM.",
                at("2026-12-09T15:04:00Z"),
            ),
            (
                "You've hit your usage limit. Try again at Jan 2nd, 2027 9:00 AM.",
                at("2027-01-02T09:00:00Z"),
            ),
            (
                "You've hit your usage limit. Try again in 2 days 3 hours 5 minutes.",
                Some(NOW.saturating_add(Duration::from_millis(
                    (2 * 86_400 + 3 * 3600 + 5 * 60) * 1000,
                ))),
            ),
        ];
        for (words, want) in rows {
            assert_eq!(resets_at(words, NOW, true), want, "{words}");
        }
    }

    #[test]
    fn a_zone_other_than_utc_or_no_moment_at_all_is_unknown() {
        let rows = [
            ("You've hit your limit · resets 1:30am (Asia/Dhaka)", true),
            ("You've hit your usage limit. Try again later.", true),
            ("You've hit your usage limit. Limits reset every 5h and every week.", true),
            ("Your credit balance is too low to access the Anthropic API.", true),
            ("You've hit your usage limit. Try again at 3:04 PM.", false),
            ("usage limit; resets 5 times a day", true),
            ("Claude AI usage limit reached|12", true),
        ];
        for (words, zoneless_is_utc) in rows {
            assert_eq!(resets_at(words, NOW, zoneless_is_utc), None, "{words}");
        }
    }

    #[test]
    fn a_reset_further_than_any_window_is_not_believed() {
        assert_eq!(resets_at("usage limit reached|1900000000", NOW, true), None);
        assert_eq!(resets_at("try again in 400 days", NOW, true), None);
        // A date without its year that has just passed stays this year's: it has reset, but
        // a week ago is not what the words meant.
        assert_eq!(resets_at("resets Dec 8, 9am (UTC)", NOW, true), at("2026-12-08T09:00:00Z"));
        assert_eq!(resets_at("resets Dec 1, 5pm (UTC)", NOW, true), None);
        assert_eq!(resets_at("usage limit reached|999999999", NOW, true), None, "2001");
        assert_eq!(resets_at("try again in -3 hours", NOW, true), None);
    }

    #[test]
    fn a_span_ends_with_its_sentence_and_a_marker_is_a_word_of_its_own() {
        let in_5 = Some(NOW.saturating_add(Duration::from_millis(5 * 60_000)));
        assert_eq!(resets_at("Try again in 5 minutes.\n3 retries left", NOW, true), in_5);
        assert_eq!(resets_at("try again in 500 ms", NOW, true), None, "ms is no unit here");
        assert_eq!(resets_at("usage limit; the presets 3pm (UTC)", NOW, true), None);
        // Read on Jan 1, "Dec 31" is the day before.
        let new_year = at("2027-01-01T10:00:00Z").unwrap();
        let dec_31 = at("2026-12-31T17:00:00Z");
        assert_eq!(resets_at("resets Dec 31, 5pm (UTC)", new_year, true), dec_31);
    }

    #[test]
    fn no_words_panic_the_reader() {
        for words in [
            "resets ",
            "try again at Dec",
            "resets 99:99pm",
            "reset at 12:",
            "resets Dec 40, 3pm",
            "try again in 5",
            "limit reached|",
        ] {
            let _ = resets_at(words, NOW, true);
        }
    }
}
