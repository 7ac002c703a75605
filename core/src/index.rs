//! What the derived indexes share: the change log a writer notes a work item or a goal in
//! before it changes that record's files, the mark an index keeps of how far it has read the
//! log, when an index is trusted on the log alone, checked row by row against its files, or
//! rebuilt, and the file format both indexes use. Decision record 0012 says why reads trust
//! the log, and what each guarantee rests on.
//!
//! The protocol, in one place:
//!
//! - A writer notes the record it is about to change (a line `w ID` or `g ID`) after taking
//!   the lock that makes it the record's writer (the history lock, the run lease, the goal
//!   lease) and before its first write, and keeps the lock until its writes are done.
//! - A reader takes a snapshot of the log's length before it reads anything. Rows the log
//!   names past the index's mark are dropped (their dependents become suspect); every other
//!   row stands. An item or goal read in full is stored only if no other process held its
//!   locks just before the read: a writer that noted it before the snapshot still holds them,
//!   and one that takes them after the probe notes it past the snapshot.
//! - Notes are never synced: within one boot a written line is seen by every later reader,
//!   and an index written in another boot, or over another log, is rebuilt.

use crate::ids::Id;
use crate::layout;
use crate::time::{Duration, WallTime};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub use crate::layout::CHANGES;

/// How long an index is trusted on the change log alone: a change made outside harn (a file
/// edited by hand) notes nothing, so every row is checked against its files' metadata at
/// least this often.
pub(crate) const FULL_CHECK_EVERY: Duration = Duration::from_millis(60_000);

/// How long the change log grows before a reader starts a new one (and every index is
/// rebuilt once): about two hundred thousand changes.
pub const ROTATE_AT: u64 = 4 << 20;

/// A record a writer is about to change.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// A work item: its intent, history or run lease.
    Work(Id),
    /// A goal: its intent, history, plans or lease.
    Goal(Id),
}

impl Change {
    /// What a write to `path` changes: the work item or goal whose directory holds it; `None`
    /// elsewhere (a run's records change under its item's run lease, whose taking is noted).
    pub(crate) fn of_path(path: &str) -> Option<Change> {
        let below = |top: &str| path.strip_prefix(top).and_then(|r| r.strip_prefix('/'));
        let (work, rest) = match (below(layout::WORK), below(layout::GOALS)) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => return None,
        };
        let id = Id::new(rest.split('/').next()?).ok()?;
        Some(if work { Change::Work(id) } else { Change::Goal(id) })
    }

    /// The change as a line of the log.
    pub fn line(&self) -> String {
        match self {
            Change::Work(id) => format!("w {id}\n"),
            Change::Goal(id) => format!("g {id}\n"),
        }
    }
}

/// The work items and goals the log names past a mark.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// Work items.
    pub work: BTreeSet<Id>,
    /// Goals.
    pub goals: BTreeSet<Id>,
}

/// The changes in the log's bytes from a mark on; `None` when a line is not a change or the
/// last one has no newline (a foreign write, or a mark that is not at a line's start): then
/// nothing an index holds is trusted.
pub(crate) fn parse_changes(bytes: &[u8]) -> Option<Changed> {
    let mut changed = Changed::default();
    if bytes.is_empty() {
        return Some(changed);
    }
    let text = std::str::from_utf8(bytes.strip_suffix(b"\n")?).ok()?;
    for line in text.split('\n') {
        let (tag, id) = line.split_once(' ')?;
        let id = Id::new(id).ok()?;
        match tag {
            "w" => changed.work.insert(id),
            "g" => changed.goals.insert(id),
            _ => return None,
        };
    }
    Some(changed)
}

/// How far an index has read the change log, in which boot, and when it last checked every
/// row against its files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The log's inode number (`0`: there was no log).
    pub log: u64,
    /// The length of the log read.
    pub offset: u64,
    /// The machine's boot (Linux's `boot_id`) the reader ran in: a note is never synced, so
    /// one made in an earlier boot may be lost while the change it announced was not.
    pub boot: String,
    /// When every row was last checked against its files' metadata.
    pub checked_at: WallTime,
}

/// What a reader sees before it reads anything: the log (inode and length) and the boot.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    /// The log's inode number and length; `None` when there is none.
    pub log: Option<(u64, u64)>,
    /// This boot's id; empty when unknown, and then nothing is trusted across processes.
    pub boot: &'a str,
    /// The wall clock.
    pub now: WallTime,
}

/// How a reader may use an index it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Nothing in it: another boot, another log, a log cut shorter than the mark, no boot id,
    /// or no index at all. Every row is read in full.
    Rebuild,
    /// Rows stand unless the log names them past `from`; with `full`, each row that stands
    /// is also checked against its files' metadata first.
    Log {
        /// Where the log's unread part starts.
        from: u64,
        /// Whether every row must also be checked against its files.
        full: bool,
    },
}

/// How far an index found with mark `old` may be trusted, and the mark it carries once this
/// reader has done what the trust asks.
pub fn trust(old: Option<&Mark>, seen: Seen<'_>) -> (Trust, Mark) {
    let (log, length) = seen.log.unwrap_or((0, 0));
    let mut mark = Mark { log, offset: length, boot: seen.boot.to_owned(), checked_at: seen.now };
    let Some(old) = old else { return (Trust::Rebuild, mark) };
    if seen.boot.is_empty() || old.boot != seen.boot || old.log != log || old.offset > length {
        return (Trust::Rebuild, mark);
    }
    let age = seen.now.0.checked_sub(old.checked_at.0).filter(|age| *age >= 0);
    let full = age.is_none_or(|age| age as u64 >= FULL_CHECK_EVERY.as_millis());
    if !full {
        mark.checked_at = old.checked_at;
    }
    (Trust::Log { from: old.offset, full }, mark)
}

/// The version of the index files' format; an index of another version is rebuilt. 3: a
/// work row's prerequisite views say only accepted, cancelled or waiting.
pub(crate) const FORMAT_VERSION: u32 = 3;

/// One row of an index file, owned: whether it is suspect (it stands only while what it
/// follows still looks as it recorded), the records it follows (a work item's
/// prerequisites, a goal's items), and its body, decoded only when used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Set when something it follows changed since it was read.
    pub suspect: bool,
    /// The work items this row's projection was computed from, besides its own files.
    pub follows: Vec<Id>,
    /// The row's JSON body.
    pub body: String,
}

/// A row as the file holds it (or as this process stored it), borrowed: nothing is copied
/// or decoded until asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineRef<'a> {
    /// Set when something it follows changed since it was read.
    pub suspect: bool,
    follows: Follows<'a>,
    /// The row's JSON body.
    pub body: &'a str,
}

/// What a borrowed row follows: as stored (comma-separated, `-` for nothing) or as ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Follows<'a> {
    Stored(&'a str),
    Owned(&'a [Id]),
}

impl<'a> LineRef<'a> {
    /// The ids it follows, as text (each checked when it becomes an [`Id`]).
    pub fn follows(&self) -> Vec<&'a str> {
        match self.follows {
            Follows::Stored("-") => Vec::new(),
            Follows::Stored(list) => list.split(',').collect(),
            Follows::Owned(ids) => ids.iter().map(Id::as_str).collect(),
        }
    }

    /// The ids it follows; `None` when one is not a valid id (the file is damaged).
    pub(crate) fn follows_ids(&self) -> Option<Vec<Id>> {
        self.follows().into_iter().map(|f| Id::new(f).ok()).collect()
    }

    /// The row, owned; `None` when what it follows does not parse.
    pub(crate) fn to_line(self) -> Option<Line> {
        let follows = self.follows_ids()?;
        Some(Line { suspect: self.suspect, follows, body: self.body.to_owned() })
    }
}

impl Line {
    fn as_ref(&self) -> LineRef<'_> {
        LineRef { suspect: self.suspect, follows: Follows::Owned(&self.follows), body: &self.body }
    }
}

/// Where one stored line lies in the file's body: the whole line (without its newline) and
/// the end of its id.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    id_end: usize,
    end: usize,
}

/// The rows of an index file, sorted by id, read lazily: the file's bytes stay as they were
/// read, a row is found by binary search over them and checked and parsed only when used,
/// and what this process changed lies over them. A read of three rows of an index of ten
/// thousand touches three lines (and the dozen or so the search passes), not ten thousand.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    /// The file as read; its rows begin at `start`.
    body: Vec<u8>,
    start: usize,
    /// Rows stored (`Some`) or dropped (`None`) since the file was read.
    changed: BTreeMap<Id, Option<Line>>,
}

impl Rows {
    /// Rows holding `lines`, as though stored by this process.
    #[cfg(test)]
    pub(crate) fn of_lines(lines: BTreeMap<Id, Line>) -> Rows {
        Rows {
            changed: lines.into_iter().map(|(id, l)| (id, Some(l))).collect(),
            ..Rows::default()
        }
    }

    /// The stored line starting at `start` (a line boundary); `None` past the end or for a
    /// line without an id.
    fn span_at(&self, start: usize) -> Option<Span> {
        let rest = self.body.get(start..)?;
        let end = start + memchr::memchr(b'\n', rest)?;
        let id_end = start + 2 + memchr::memchr(b' ', self.body.get(start + 2..end)?)?;
        Some(Span { start, id_end, end })
    }

    fn id_of(&self, span: &Span) -> &[u8] {
        &self.body[span.start + 2..span.id_end]
    }

    /// The stored line of `id`, by binary search over the file's sorted lines.
    fn span_of(&self, id: &str) -> Option<Span> {
        let (mut lo, mut hi) = (self.start, self.body.len());
        // Both bounds are always line starts (or the end).
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let start = memchr::memrchr(b'\n', &self.body[lo..mid]).map_or(lo, |i| lo + i + 1);
            let span = self.span_at(start)?;
            match self.id_of(&span).cmp(id.as_bytes()) {
                std::cmp::Ordering::Equal => return Some(span),
                std::cmp::Ordering::Less => lo = span.end + 1,
                std::cmp::Ordering::Greater => hi = start,
            }
        }
        None
    }

    /// Every stored line, in file order.
    fn spans(&self) -> impl Iterator<Item = Span> + '_ {
        let mut at = self.start;
        std::iter::from_fn(move || {
            let span = self.span_at(at)?;
            at = span.end + 1;
            Some(span)
        })
    }

    /// The row a stored line holds, when its flag, its fields and its checksum are right.
    fn line_at(&self, span: &Span) -> Option<LineRef<'_>> {
        let line = std::str::from_utf8(&self.body[span.start..span.end]).ok()?;
        let suspect = match line.as_bytes()[0] {
            b'+' => false,
            b'?' => true,
            _ => return None,
        };
        let rest = &line[span.id_end - span.start + 1..];
        let (follows, rest) = rest.split_once(' ')?;
        let (crc, body) = rest.split_once(' ')?;
        (crc.as_bytes() == hex8(crc32fast::hash(body.as_bytes()))).then_some(())?;
        Some(LineRef { suspect, follows: Follows::Stored(follows), body })
    }

    /// The row of `id`, when there is one (a stored line that does not parse is none).
    pub fn get(&self, id: &Id) -> Option<LineRef<'_>> {
        match self.changed.get(id) {
            Some(change) => change.as_ref().map(Line::as_ref),
            None => self.span_of(id.as_str()).and_then(|s| self.line_at(&s)),
        }
    }

    /// The ids the row of `id` follows.
    pub fn follows(&self, id: &Id) -> Option<Vec<Id>> {
        self.get(id)?.follows_ids()
    }

    /// Whether `id` has a row.
    pub fn contains_key(&self, id: &Id) -> bool {
        match self.changed.get(id) {
            Some(change) => change.is_some(),
            None => self.span_of(id.as_str()).and_then(|s| self.line_at(&s)).is_some(),
        }
    }

    /// Stores `line` as the row of `id`; whether that changed anything.
    pub fn insert(&mut self, id: Id, line: Line) -> bool {
        let same = self.get(&id).is_some_and(|r| {
            r.suspect == line.suspect
                && r.body == line.body
                && r.follows() == line.as_ref().follows()
        });
        if !same {
            self.changed.insert(id, Some(line));
        }
        !same
    }

    /// Drops the row of `id`; whether there was one.
    pub fn remove(&mut self, id: &Id) -> bool {
        let had = self.contains_key(id);
        if had {
            self.changed.insert(id.clone(), None);
        }
        had
    }

    /// Marks the row of `id` suspect or not; whether that changed it.
    pub(crate) fn set_suspect(&mut self, id: &Id, suspect: bool) -> bool {
        let Some(row) = self.get(id).filter(|r| r.suspect != suspect) else { return false };
        let Some(mut line) = row.to_line() else { return false };
        line.suspect = suspect;
        self.changed.insert(id.clone(), Some(line));
        true
    }

    /// Every row, in id order: each id as stored and its row (a stored line that does not
    /// check out is left out).
    pub fn iter(&self) -> impl Iterator<Item = (&str, LineRef<'_>)> {
        let mut stored = self.spans().peekable();
        let mut changed = self.changed.iter().peekable();
        std::iter::from_fn(move || loop {
            let next_stored = stored.peek().map(|s| self.id_of(s));
            let next_changed = changed.peek().map(|(id, _)| id.as_str().as_bytes());
            match (next_stored, next_changed) {
                (None, None) => return None,
                (Some(a), Some(b)) if a == b => {
                    stored.next();
                }
                (Some(a), b) if b.is_none_or(|b| a < b) => {
                    let span = stored.next().expect("peeked");
                    let id = std::str::from_utf8(self.id_of(&span)).ok();
                    if let (Some(id), Some(row)) = (id, self.line_at(&span)) {
                        return Some((id, row));
                    }
                }
                _ => {
                    let (id, change) = changed.next().expect("peeked");
                    if let Some(line) = change {
                        return Some((id.as_str(), line.as_ref()));
                    }
                }
            }
        })
    }

    /// The ids of every row, in order.
    pub fn ids(&self) -> Vec<Id> {
        self.iter().filter_map(|(id, _)| Id::new(id).ok()).collect()
    }
}

/// An index file: its mark and its rows.
#[derive(Clone, Debug)]
pub struct File {
    /// How far its rows follow the change log.
    pub mark: Mark,
    /// The rows, by id.
    pub rows: Rows,
}

#[derive(Serialize, Deserialize)]
struct Header {
    v: u32,
    mark: Mark,
    len: u64,
}

/// Eight lowercase hex digits.
fn hex8(n: u32) -> [u8; 8] {
    let digits = b"0123456789abcdef";
    let mut out = [0; 8];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = digits[((n >> (28 - 4 * i)) & 0xf) as usize];
    }
    out
}

/// The file's bytes: a header line (version, mark, and the length of what follows), then one
/// line per row in id order: `+` or `?` (suspect), the id, what it follows (comma-separated,
/// `-` for nothing), the CRC-32 of the body (8 hex digits), and the body. Each row is checked
/// against its checksum when it is used.
pub(crate) fn encode(file: &File) -> Vec<u8> {
    let rows = &file.rows;
    let mut body = Vec::with_capacity(rows.body.len() + rows.changed.len() * 600);
    for (id, row) in rows.iter() {
        body.push(if row.suspect { b'?' } else { b'+' });
        body.push(b' ');
        body.extend_from_slice(id.as_bytes());
        body.push(b' ');
        match row.follows {
            Follows::Stored(list) => body.extend_from_slice(list.as_bytes()),
            Follows::Owned([]) => body.push(b'-'),
            Follows::Owned(ids) => {
                for (i, f) in ids.iter().enumerate() {
                    if i > 0 {
                        body.push(b',');
                    }
                    body.extend_from_slice(f.as_str().as_bytes());
                }
            }
        }
        body.push(b' ');
        body.extend_from_slice(&hex8(crc32fast::hash(row.body.as_bytes())));
        body.push(b' ');
        body.extend_from_slice(row.body.as_bytes());
        body.push(b'\n');
    }
    let header = Header { v: FORMAT_VERSION, mark: file.mark.clone(), len: body.len() as u64 };
    let mut out = serde_json::to_vec(&header).expect("a header serializes");
    out.push(b'\n');
    out.extend_from_slice(&body);
    out
}

/// The index file in `bytes`; `None` when it is of another version or cut short (then it is
/// rebuilt: nothing in it is ever needed). A row is checked when it is used; one that does
/// not check out is no row, and is read again from the journals.
pub fn decode(bytes: Vec<u8>) -> Option<File> {
    let newline = memchr::memchr(b'\n', &bytes)?;
    let header: Header = serde_json::from_slice(&bytes[..newline]).ok()?;
    // The header stays in front of the rows, skipped, rather than the rows copied out.
    let start = newline + 1;
    let intact = header.v == FORMAT_VERSION
        && header.len == (bytes.len() - start) as u64
        && bytes.last().is_none_or(|b| *b == b'\n');
    let rows = Rows { body: bytes, start, changed: BTreeMap::new() };
    intact.then_some(File { mark: header.mark, rows })
}

/// Of `rows`, those that follow any of `changed`, directly or through one another: what
/// becomes suspect when `changed` are dropped.
pub(crate) fn followers(rows: &Rows, changed: &BTreeSet<Id>) -> BTreeSet<Id> {
    let mut by_followed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, row) in rows.iter() {
        for f in row.follows() {
            by_followed.entry(f).or_default().push(id);
        }
    }
    let mut found = BTreeSet::new();
    let mut stack: Vec<&str> = changed.iter().map(Id::as_str).collect();
    while let Some(at) = stack.pop() {
        for follower in by_followed.get(at).into_iter().flatten() {
            if let Ok(id) = Id::new(follower) {
                if found.insert(id) {
                    stack.push(follower);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    #[test]
    fn a_write_changes_the_item_or_goal_whose_directory_holds_it() {
        let w = Change::of_path(".harnery/work/parser/events.jsonl");
        assert_eq!(w, Some(Change::Work(id("parser"))));
        let g = Change::of_path(".harnery/supervisors/g1/plans/p/events.jsonl");
        assert_eq!(g, Some(Change::Goal(id("g1"))));
        assert_eq!(Change::of_path(".harnery/workflows/wf-1/proof.json"), None);
        assert_eq!(Change::of_path(".harnery/workers/x"), None, "a prefix is not a directory");
        assert_eq!(Change::of_path(".harnery/work"), None);
    }

    #[test]
    fn the_log_parses_to_what_it_names_and_anything_else_is_damage() {
        let bytes = [Change::Work(id("a")), Change::Goal(id("g")), Change::Work(id("a"))]
            .iter()
            .map(Change::line)
            .collect::<String>();
        let changed = parse_changes(bytes.as_bytes()).unwrap();
        assert_eq!(changed.work, BTreeSet::from([id("a")]));
        assert_eq!(changed.goals, BTreeSet::from([id("g")]));
        assert_eq!(parse_changes(b""), Some(Changed::default()));
        assert_eq!(parse_changes(b"w a"), None, "no newline: cut short");
        assert_eq!(parse_changes(b"x a\n"), None);
        assert_eq!(parse_changes(b"w ../a\n"), None);
        assert_eq!(parse_changes(b"a\n"), None, "mid-line: a mark not at a line's start");
    }

    fn mark(log: u64, offset: u64, boot: &str, at: i64) -> Mark {
        Mark { log, offset, boot: boot.into(), checked_at: WallTime(at) }
    }

    #[test]
    fn an_index_is_trusted_on_the_log_only_in_its_boot_over_its_log() {
        let old = mark(7, 100, "b1", 1_000);
        let seen = |log, boot, now| Seen { log, boot, now: WallTime(now) };
        let (t, m) = trust(Some(&old), seen(Some((7, 150)), "b1", 2_000));
        assert_eq!(t, Trust::Log { from: 100, full: false });
        assert_eq!(m, mark(7, 150, "b1", 1_000), "the check time is kept");
        for (log, boot) in [(Some((7, 150)), "b2"), (Some((8, 150)), "b1"), (Some((7, 99)), "b1")] {
            assert_eq!(trust(Some(&old), seen(log, boot, 2_000)).0, Trust::Rebuild);
        }
        assert_eq!(trust(Some(&old), seen(None, "b1", 2_000)).0, Trust::Rebuild);
        assert_eq!(trust(None, seen(Some((7, 150)), "b1", 2_000)).0, Trust::Rebuild);
        let unknown = mark(7, 100, "", 1_000);
        assert_eq!(trust(Some(&unknown), seen(Some((7, 100)), "", 2_000)).0, Trust::Rebuild);
    }

    #[test]
    fn every_row_is_checked_against_its_files_once_a_minute_and_after_a_clock_jump() {
        let old = mark(7, 100, "b1", 1_000);
        let seen = |now| Seen { log: Some((7, 100)), boot: "b1", now: WallTime(now) };
        assert_eq!(trust(Some(&old), seen(60_999)).0, Trust::Log { from: 100, full: false });
        let (t, m) = trust(Some(&old), seen(61_000));
        assert_eq!(t, Trust::Log { from: 100, full: true });
        assert_eq!(m.checked_at, WallTime(61_000));
        assert_eq!(trust(Some(&old), seen(999)).0, Trust::Log { from: 100, full: true });
    }

    fn lines(rows: &Rows) -> Vec<(String, Line)> {
        rows.iter().map(|(id, r)| (id.to_owned(), r.to_line().unwrap())).collect()
    }

    #[test]
    fn a_file_round_trips_and_any_damage_reads_as_nothing() {
        let rows = BTreeMap::from([
            (id("a"), Line { suspect: false, follows: vec![], body: "{\"x\":1}".into() }),
            (id("b"), Line { suspect: true, follows: vec![id("a"), id("c")], body: "{}".into() }),
        ]);
        let file = File { mark: mark(3, 40, "b", 5), rows: Rows::of_lines(rows.clone()) };
        let bytes = encode(&file);
        let read = decode(bytes.clone()).unwrap();
        assert_eq!(read.mark, file.mark);
        assert_eq!(lines(&read.rows), lines(&file.rows));
        assert_eq!(read.rows.get(&id("b")).unwrap().follows(), ["a", "c"]);
        assert!(read.rows.get(&id("c")).is_none());
        assert_eq!(encode(&read), bytes, "unchanged rows are copied as they were");
        // A byte of b's body damaged: that row does not check out; a's still does.
        let mut flipped = bytes.clone();
        let at = flipped.len() - 3;
        flipped[at] ^= 1;
        let damaged = decode(flipped).unwrap();
        assert!(damaged.rows.get(&id("b")).is_none());
        assert!(damaged.rows.get(&id("a")).is_some());
        assert_eq!(damaged.rows.ids(), [id("a")]);
        assert!(decode(bytes[..bytes.len() - 1].to_vec()).is_none(), "cut short");
        let ours = format!("\"v\":{FORMAT_VERSION}");
        let other = String::from_utf8(bytes).unwrap().replacen(&ours, "\"v\":1", 1);
        assert!(decode(other.into_bytes()).is_none());
        assert!(decode(Vec::new()).is_none());
    }

    #[test]
    fn any_row_of_many_is_found_by_its_id_and_no_other() {
        let rows: BTreeMap<Id, Line> = (0..500)
            .map(|n| {
                let body = format!("{{\"n\":{}}}", "x".repeat(n % 37));
                (id(&format!("w{n:04}")), Line { suspect: n % 3 == 0, follows: vec![], body })
            })
            .collect();
        let file = File { mark: mark(1, 0, "b", 0), rows: Rows::of_lines(rows.clone()) };
        let read = decode(encode(&file)).unwrap().rows;
        for (k, line) in &rows {
            let found = read.get(k).unwrap();
            assert_eq!((found.suspect, found.body), (line.suspect, line.body.as_str()));
        }
        for missing in ["w", "w00000", "w0500", "a", "z", "w0249x"] {
            assert!(read.get(&id(missing)).is_none(), "{missing}");
        }
    }

    #[test]
    fn rows_changed_lie_over_the_file_in_id_order() {
        let line = |body: &str| Line { suspect: false, follows: vec![], body: body.into() };
        let stored = BTreeMap::from([(id("a"), line("1")), (id("c"), line("3"))]);
        let file = File { mark: mark(1, 0, "b", 0), rows: Rows::of_lines(stored) };
        let mut rows = decode(encode(&file)).unwrap().rows;
        assert!(rows.insert(id("b"), line("2")));
        assert!(!rows.insert(id("a"), line("1")), "the same row changes nothing");
        assert!(rows.remove(&id("c")));
        assert!(!rows.remove(&id("c")));
        assert!(rows.set_suspect(&id("a"), true));
        let bodies: Vec<(String, bool)> =
            rows.iter().map(|(id, r)| (format!("{id}={}", r.body), r.suspect)).collect();
        assert_eq!(bodies, [("a=1".to_owned(), true), ("b=2".to_owned(), false)]);
    }

    #[test]
    fn followers_are_found_through_one_another() {
        let line = |follows: &[&str]| Line {
            suspect: false,
            follows: follows.iter().map(|f| id(f)).collect(),
            body: String::new(),
        };
        let rows = Rows::of_lines(BTreeMap::from([
            (id("a"), line(&[])),
            (id("b"), line(&["a"])),
            (id("c"), line(&["b"])),
            (id("d"), line(&[])),
        ]));
        let found = followers(&rows, &BTreeSet::from([id("a")]));
        assert_eq!(found, BTreeSet::from([id("b"), id("c")]));
    }
}
