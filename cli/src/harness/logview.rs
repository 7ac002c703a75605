//! Harness logs for people: the last lines of one harness, or of every harness interleaved by
//! time, kept from `--since` on, printed with their time, harness and stream (or as text only,
//! or as JSON lines), and followed as they grow. Read straight from the files.

use crate::os::logs::tail;
use harn_core::harness::logline::{self, Stream};
use harn_core::ids::Id;
use harn_core::time::{Duration, WallTime};
use std::path::PathBuf;

/// How each line is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `TIME [HARNESS] STREAM | TEXT`.
    Prefixed,
    /// The text only, as the child wrote it.
    Plain,
    /// One JSON object per line.
    Json,
}

/// What to print and how.
#[derive(Clone, Debug)]
pub struct View {
    /// The harnesses and their current log files.
    pub logs: Vec<(Id, PathBuf)>,
    /// Print the harness's name on each line (more than one harness is shown).
    pub show_name: bool,
    /// How lines are printed.
    pub format: Format,
    /// Send the child's control sequences to the terminal instead of showing them.
    pub raw: bool,
    /// Only lines from this time on.
    pub since: Option<WallTime>,
}

/// One line of one harness's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// When it was read; a line of the older format has the time of the line before it.
    pub ts: Option<WallTime>,
    /// Index into [`View::logs`].
    pub log: usize,
    /// Its pipe, when the line says.
    pub stream: Option<Stream>,
    /// The bytes.
    pub text: Vec<u8>,
}

impl View {
    /// The last `lines` lines of every log (all of them when `None`) from `since` on, in time
    /// order (a partial line written after its hold sorts at the time it was read; lines of
    /// equal time keep their file order).
    pub fn last(&self, lines: Option<usize>) -> std::io::Result<Vec<Entry>> {
        let mut all = Vec::new();
        for (i, (_, path)) in self.logs.iter().enumerate() {
            let bytes = tail(path, lines.unwrap_or(usize::MAX))?;
            let mut entries = self.entries(i, &bytes, &mut None);
            all.append(&mut entries);
        }
        // Stable: equal times keep each log's order, and the logs' order between them.
        all.sort_by_key(|e| e.ts);
        if let Some(n) = lines {
            all.drain(..all.len().saturating_sub(n));
        }
        Ok(all)
    }

    /// The entries of whole lines in `bytes` of log `log`, from `since` on; `carry` is the
    /// time of the last line before them.
    pub fn entries(&self, log: usize, bytes: &[u8], carry: &mut Option<WallTime>) -> Vec<Entry> {
        let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        if body.is_empty() && bytes.len() <= 1 {
            return Vec::new();
        }
        let mut out = Vec::new();
        for line in body.split(|&b| b == b'\n') {
            let parsed = logline::parse(line);
            if parsed.ts.is_some() {
                *carry = parsed.ts;
            }
            let ts = parsed.ts.or(*carry);
            if self.since.is_some_and(|since| ts.is_none_or(|t| t < since)) {
                continue;
            }
            out.push(Entry { ts, log, stream: parsed.stream, text: parsed.text.to_vec() });
        }
        out
    }

    /// The bytes that print `entry`, newline included.
    pub fn render(&self, entry: &Entry) -> Vec<u8> {
        let name = self.logs[entry.log].0.as_str();
        let text = if self.raw {
            entry.text.clone()
        } else {
            // A terminal's drawing (colours, cursor moves) is removed; what is left is shown
            // safely, never sent to this terminal.
            let text = harn_core::text::strip_escapes(&entry.text);
            harn_core::text::neutralize_bytes(&text).into_owned()
        };
        let mut line = match self.format {
            Format::Plain => text,
            Format::Json => {
                let value = serde_json::json!({
                    "ts": entry.ts.map(|t| t.0),
                    "time": entry.ts.map(WallTime::rfc3339),
                    "harness": name,
                    "stream": entry.stream.map(Stream::as_str),
                    "text": String::from_utf8_lossy(&entry.text),
                });
                value.to_string().into_bytes()
            }
            Format::Prefixed => {
                let time = entry.ts.map_or_else(|| "-".to_owned(), WallTime::utc);
                let stream = entry.stream.map_or("-", Stream::as_str);
                let width = self.logs.iter().map(|(n, _)| n.as_str().len()).max().unwrap_or(0);
                let mut line = if self.show_name {
                    format!("{time:<23} {name:<width$} {stream:<4} | ")
                } else {
                    format!("{time:<23} {stream:<4} | ")
                }
                .into_bytes();
                line.extend_from_slice(&text);
                line
            }
        };
        line.push(b'\n');
        line
    }
}

/// Reads `--since`: a time (`2026-12-01T21:00:00Z`, or with a space for the `T`; UTC, the `Z`
/// may be left out) or a span back from `now` (`90s`, `10m`, `2h`, `1d`, `500ms`).
pub fn parse_since(text: &str, now: WallTime) -> Result<WallTime, String> {
    let t = text.trim();
    let units: [(&str, u64); 5] =
        [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)];
    for (unit, ms) in units {
        if let Some(n) = t.strip_suffix(unit).and_then(|n| n.parse::<u64>().ok()) {
            let back = i64::try_from(Duration::from_millis(n.saturating_mul(ms)).as_millis())
                .unwrap_or(i64::MAX);
            return Ok(WallTime(now.0.saturating_sub(back)));
        }
    }
    let zoned = if t.ends_with('Z') { t.to_owned() } else { format!("{t}Z") };
    WallTime::parse_rfc3339(&zoned).ok_or_else(|| {
        format!(
            "--since {text:?}: not a time (2026-12-01T21:00:00Z, UTC) or a span back from now \
             (90s, 10m, 2h, 1d)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: WallTime = WallTime(1_767_225_600_000);

    fn view(names: &[&str], since: Option<WallTime>) -> View {
        let logs = names
            .iter()
            .map(|n| (Id::new(n).unwrap(), PathBuf::from(format!("{n}.log"))))
            .collect();
        View { logs, show_name: names.len() > 1, format: Format::Prefixed, raw: false, since }
    }

    fn line(ms: i64, stream: Stream, text: &str) -> Vec<u8> {
        logline::format(WallTime(T.0 + ms), stream, text.as_bytes())
    }

    #[test]
    fn two_logs_interleave_by_time_and_show_name_and_stream() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = view(&["db", "web"], None);
        for (i, (_, path)) in v.logs.iter_mut().enumerate() {
            *path = dir.path().join(path.as_path());
            let bytes: Vec<u8> = if i == 0 {
                [line(0, Stream::Out, "db up"), line(20, Stream::Err, "db slow")].concat()
            } else {
                [line(10, Stream::Out, "web up"), line(30, Stream::Harn, "web gone")].concat()
            };
            std::fs::write(path, bytes).unwrap();
        }
        let shown: Vec<String> = v
            .last(Some(3))
            .unwrap()
            .iter()
            .map(|e| String::from_utf8(v.render(e)).unwrap())
            .collect();
        assert_eq!(
            shown,
            [
                "2026-01-01 00:00:00.010 web out  | web up\n",
                "2026-01-01 00:00:00.020 db  err  | db slow\n",
                "2026-01-01 00:00:00.030 web harn | web gone\n",
            ]
        );
        v.since = Some(WallTime(T.0 + 15));
        assert_eq!(v.last(None).unwrap().len(), 2, "since keeps the two later lines");
    }

    #[test]
    fn a_line_of_the_older_format_takes_the_time_before_it_and_since_drops_an_untimed_start() {
        let v = view(&["web"], Some(T));
        let bytes =
            [b"old line\n".to_vec(), line(5, Stream::Out, "new"), b"old again\n".to_vec()].concat();
        let entries = v.entries(0, &bytes, &mut None);
        let texts: Vec<&[u8]> = entries.iter().map(|e| e.text.as_slice()).collect();
        assert_eq!(texts, [&b"new"[..], b"old again"]);
        assert_eq!(entries[1].ts, Some(WallTime(T.0 + 5)));
        assert_eq!(
            String::from_utf8(v.render(&entries[1])).unwrap(),
            "2026-01-01 00:00:00.005 -    | old again\n"
        );
        let plain = View { format: Format::Plain, ..v.clone() };
        assert_eq!(plain.render(&entries[0]), b"new\n");
        let json = View { format: Format::Json, ..v };
        let value: serde_json::Value = serde_json::from_slice(&json.render(&entries[0])).unwrap();
        assert_eq!(value["stream"], "out");
        assert_eq!(value["harness"], "web");
        assert_eq!(value["time"], "2026-01-01T00:00:00.005Z");
    }

    #[test]
    fn since_reads_spans_and_times() {
        assert_eq!(parse_since("90s", T), Ok(WallTime(T.0 - 90_000)));
        assert_eq!(parse_since("2h", T), Ok(WallTime(T.0 - 7_200_000)));
        assert_eq!(parse_since("500ms", T), Ok(WallTime(T.0 - 500)));
        assert_eq!(parse_since("2026-01-01T00:00:00Z", WallTime(0)), Ok(T));
        assert_eq!(parse_since("2026-01-01 00:00:00", WallTime(0)), Ok(T));
        assert!(parse_since("yesterday", T).unwrap_err().contains("--since"));
    }
}
