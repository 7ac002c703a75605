//! The line format of a harness's log, and the framing that turns the bytes of a child's two
//! pipes into it. Every line the daemon writes is `TS STREAM TEXT`: the RFC 3339 time its
//! first byte was read, `out` or `err`, and the child's bytes up to the newline. A child that
//! writes no newline is not held back forever: a partial line is written after [`HOLD`] or
//! at [`MAX_LINE`] bytes, and what follows starts a line of its own. Lines of logs written
//! before this format (no prefix) still read, as text with no time and no stream.

use crate::time::{Duration, Instant, WallTime};

/// How long a partial line (no newline yet) is held before it is written anyway.
pub(crate) const HOLD: Duration = Duration::from_millis(1_000);
/// The longest line written; longer ones are split.
pub(crate) const MAX_LINE: usize = 16 * 1024;

/// Which of the child's pipes a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stream {
    /// Standard output.
    Out,
    /// Standard error.
    Err,
    /// A note of the daemon's own about this harness (a spawn that failed).
    Harn,
}

impl Stream {
    /// `out` or `err`, as the file and the screen say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Out => "out",
            Stream::Err => "err",
            Stream::Harn => "harn",
        }
    }
}

/// One line of a log, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine<'a> {
    /// When its first byte was read; `None` for a line of the older, unprefixed format.
    pub ts: Option<WallTime>,
    /// Its pipe; `None` for a line of the older format.
    pub stream: Option<Stream>,
    /// The child's bytes, without the newline.
    pub text: &'a [u8],
}

/// The bytes of one line as written to the file: prefix, text, newline.
pub fn format(ts: WallTime, stream: Stream, text: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(29 + text.len());
    line.extend_from_slice(ts.rfc3339().as_bytes());
    line.push(b' ');
    line.extend_from_slice(stream.as_str().as_bytes());
    line.push(b' ');
    line.extend_from_slice(text);
    line.push(b'\n');
    line
}

/// Reads one line (without its newline). Anything that does not start with a time and a
/// stream is a line of the older format: all of it is text.
pub fn parse(line: &[u8]) -> LogLine<'_> {
    let plain = LogLine { ts: None, stream: None, text: line };
    let Some(space) = line.iter().position(|&b| b == b' ') else {
        return plain;
    };
    let Some(ts) = std::str::from_utf8(&line[..space]).ok().and_then(WallTime::parse_rfc3339)
    else {
        return plain;
    };
    let rest = &line[space + 1..];
    let (word, text) = match rest.iter().position(|&b| b == b' ') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &rest[rest.len()..]),
    };
    let stream = match word {
        b"out" => Stream::Out,
        b"err" => Stream::Err,
        b"harn" => Stream::Harn,
        _ => return plain,
    };
    LogLine { ts: Some(ts), stream: Some(stream), text }
}

/// The framing of one pipe: bytes in, whole prefixed lines out.
#[derive(Clone, Debug)]
pub struct Framer {
    stream: Stream,
    pending: Vec<u8>,
    /// When the first pending byte was read: its line's time, and the start of its hold.
    since: Option<(WallTime, Instant)>,
}

impl Framer {
    /// A framer for one of a child's pipes.
    pub fn new(stream: Stream) -> Framer {
        Framer { stream, pending: Vec::new(), since: None }
    }

    /// Takes `bytes` read at `now` (`wall` on the wall clock) and appends every line they
    /// complete to `out`.
    pub fn push(&mut self, now: Instant, wall: WallTime, bytes: &[u8], out: &mut Vec<u8>) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let (ts, _) = *self.since.get_or_insert((wall, now));
            let room = MAX_LINE - self.pending.len();
            // A newline right after a full line ends that line, not one more empty line.
            let end = rest.iter().take(room + 1).position(|&b| b == b'\n');
            match end {
                Some(i) => {
                    self.pending.extend_from_slice(&rest[..i]);
                    rest = &rest[i + 1..];
                }
                None => {
                    let take = rest.len().min(room);
                    self.pending.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if self.pending.len() < MAX_LINE {
                        break;
                    }
                }
            }
            out.extend_from_slice(&format(ts, self.stream, &self.pending));
            self.pending.clear();
            self.since = None;
        }
    }

    /// When the partial line held must be written, if one is held.
    pub fn due(&self) -> Option<Instant> {
        self.since.map(|(_, at)| at.saturating_add(HOLD))
    }

    /// Writes the partial line held, if it was held [`HOLD`] by `now`, or at once with
    /// `force` (the pipe closed). Harmless when early or repeated.
    pub fn flush(&mut self, now: Instant, force: bool, out: &mut Vec<u8>) {
        if let Some((ts, at)) = self.since {
            if force || now >= at.saturating_add(HOLD) {
                out.extend_from_slice(&format(ts, self.stream, &self.pending));
                self.pending.clear();
                self.since = None;
            }
        }
    }
}

/// Fuzz body: arbitrary bytes, cut into reads at positions drawn from the first bytes, through
/// a framer and back through [`parse`]. Never panics; every framed line parses with its
/// stream and time, is at most [`MAX_LINE`] long, and holds no newline; and every byte that
/// was not a newline comes back, in order.
pub fn fuzz_logline(data: &[u8]) {
    let (cuts, bytes) = data.split_at(data.len().min(4));
    let _ = parse(bytes);
    let mut framer = Framer::new(Stream::Err);
    let mut out = Vec::new();
    let mut from = 0;
    let mut now = Instant::ZERO;
    for &c in cuts {
        let to = (from + usize::from(c) * 7).min(bytes.len());
        framer.push(now, WallTime(1), &bytes[from..to], &mut out);
        now = now.saturating_add(Duration::from_millis(u64::from(c) * 10));
        framer.flush(now, false, &mut out);
        from = to;
    }
    framer.push(now, WallTime(1), &bytes[from..], &mut out);
    framer.flush(now, true, &mut out);
    assert!(framer.due().is_none(), "a forced flush leaves nothing held");
    let mut text = Vec::new();
    if !out.is_empty() {
        assert!(out.ends_with(b"\n"));
        for line in out[..out.len() - 1].split(|&b| b == b'\n') {
            let l = parse(line);
            assert_eq!((l.ts, l.stream), (Some(WallTime(1)), Some(Stream::Err)));
            assert!(l.text.len() <= MAX_LINE);
            text.extend_from_slice(l.text);
        }
    }
    let kept: Vec<u8> = bytes.iter().copied().filter(|&b| b != b'\n').collect();
    assert_eq!(text, kept);
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: WallTime = WallTime(1_767_225_600_123);

    fn ms(n: u64) -> Instant {
        Instant(n * 1_000_000)
    }

    #[test]
    fn a_line_reads_back_as_written_and_old_lines_are_plain_text() {
        let line = format(T, Stream::Err, b"boom: at x");
        assert_eq!(line, b"2026-01-01T00:00:00.123Z err boom: at x\n");
        let parsed = parse(&line[..line.len() - 1]);
        assert_eq!(parsed, LogLine { ts: Some(T), stream: Some(Stream::Err), text: b"boom: at x" });
        assert_eq!(parse(b"2026-01-01T00:00:00.123Z out").text, b"");
        assert_eq!(parse(b"2026-01-01T00:00:00.123Z harn a b").stream, Some(Stream::Harn));
        for old in [&b"hello world"[..], b"", b"2026-01-01T00:00:00.123Z what", b"x y z"] {
            assert_eq!(parse(old), LogLine { ts: None, stream: None, text: old });
        }
    }

    #[test]
    fn lines_are_framed_at_newlines_with_the_time_of_their_first_byte() {
        let mut f = Framer::new(Stream::Out);
        let mut out = Vec::new();
        f.push(ms(0), T, b"one\ntw", &mut out);
        assert_eq!(out, format(T, Stream::Out, b"one"));
        assert_eq!(f.due(), Some(ms(1_000)));
        out.clear();
        f.push(ms(10), WallTime(T.0 + 10), b"o\nthree\n", &mut out);
        let mut want = format(T, Stream::Out, b"two");
        want.extend(format(WallTime(T.0 + 10), Stream::Out, b"three"));
        assert_eq!(out, want);
        assert_eq!(f.due(), None);
    }

    #[test]
    fn a_partial_line_is_written_after_its_hold_or_when_the_pipe_closes() {
        let mut f = Framer::new(Stream::Err);
        let mut out = Vec::new();
        f.push(ms(0), T, b"progress 10%", &mut out);
        f.flush(ms(999), false, &mut out);
        assert!(out.is_empty(), "early");
        f.flush(ms(1_000), false, &mut out);
        assert_eq!(out, format(T, Stream::Err, b"progress 10%"));
        f.flush(ms(5_000), false, &mut out);
        assert_eq!(out, format(T, Stream::Err, b"progress 10%"), "repeated: nothing more");
        out.clear();
        f.push(ms(6_000), T, b"tail", &mut out);
        f.flush(ms(6_000), true, &mut out);
        assert_eq!(out, format(T, Stream::Err, b"tail"));
    }

    #[test]
    fn a_line_longer_than_the_limit_is_split() {
        let mut f = Framer::new(Stream::Out);
        let mut out = Vec::new();
        let long = vec![b'a'; MAX_LINE * 2 + 5];
        f.push(ms(0), T, &long, &mut out);
        let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 2);
        assert!(lines.iter().all(|l| parse(l).text.len() == MAX_LINE));
        f.flush(ms(0), true, &mut out);
        assert!(out.ends_with(b"out aaaaa\n"));
        // Exactly the limit, then its newline: one line, not one and an empty one.
        let mut exact = vec![b'b'; MAX_LINE];
        exact.push(b'\n');
        out.clear();
        f.push(ms(0), T, &exact, &mut out);
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(f.due(), None);
    }

    proptest::proptest! {
        /// However the bytes are cut into reads, the text read back is the bytes written,
        /// newlines where the child wrote them (and where a partial line was flushed).
        #[test]
        fn framing_keeps_every_byte(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000),
                                    cuts in proptest::collection::vec(0usize..2000, 0..8)) {
            let mut f = Framer::new(Stream::Out);
            let mut out = Vec::new();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut from = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                f.push(ms(0), T, &bytes[from..c], &mut out);
                from = c;
            }
            f.flush(ms(0), true, &mut out);
            proptest::prop_assert_eq!(out.is_empty(), bytes.is_empty());
            proptest::prop_assume!(!bytes.is_empty());
            let mut text = Vec::new();
            for line in out.strip_suffix(b"\n").unwrap_or(&out).split(|&b| b == b'\n') {
                let l = parse(line);
                proptest::prop_assert_eq!(l.stream, Some(Stream::Out));
                text.extend_from_slice(l.text);
                text.push(b'\n');
            }
            let mut want = bytes.clone();
            if !want.ends_with(b"\n") { want.push(b'\n'); }
            proptest::prop_assert_eq!(text, want);
        }
    }
}
