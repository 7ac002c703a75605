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
pub const FULL_CHECK_EVERY: Duration = Duration::from_millis(60_000);

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
    pub fn of_path(path: &str) -> Option<Change> {
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
pub fn parse_changes(bytes: &[u8]) -> Option<Changed> {
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

/// The version of the index files' format; an index of another version is rebuilt.
pub const FORMAT_VERSION: u32 = 1;

/// One row of an index file as stored: whether it is suspect (it stands only while what it
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

/// An index file: its mark and its rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    /// How far its rows follow the change log.
    pub mark: Mark,
    /// The rows, by id.
    pub rows: BTreeMap<Id, Line>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    v: u32,
    mark: Mark,
    crc: u32,
    len: u64,
}

/// The file's bytes: a header line (version, mark, and the CRC-32 and length of what
/// follows), then one line per row: `+` or `?` (suspect), the id, what it follows
/// (comma-separated, `-` for nothing), and the body.
pub fn encode(file: &File) -> Vec<u8> {
    let mut body = Vec::with_capacity(file.rows.values().map(|l| l.body.len() + 40).sum());
    for (id, line) in &file.rows {
        body.push(if line.suspect { b'?' } else { b'+' });
        body.push(b' ');
        body.extend_from_slice(id.as_str().as_bytes());
        body.push(b' ');
        if line.follows.is_empty() {
            body.push(b'-');
        }
        for (i, f) in line.follows.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(f.as_str().as_bytes());
        }
        body.push(b' ');
        body.extend_from_slice(line.body.as_bytes());
        body.push(b'\n');
    }
    let header = Header {
        v: FORMAT_VERSION,
        mark: file.mark.clone(),
        crc: crc32fast::hash(&body),
        len: body.len() as u64,
    };
    let mut out = serde_json::to_vec(&header).expect("a header serializes");
    out.push(b'\n');
    out.extend_from_slice(&body);
    out
}

/// The index file in `bytes`; `None` when it is of another version, cut short or damaged
/// (then it is rebuilt: nothing in it is ever needed).
pub fn decode(bytes: &[u8]) -> Option<File> {
    let newline = bytes.iter().position(|b| *b == b'\n')?;
    let header: Header = serde_json::from_slice(&bytes[..newline]).ok()?;
    let body = &bytes[newline + 1..];
    let intact = header.v == FORMAT_VERSION
        && header.len == body.len() as u64
        && header.crc == crc32fast::hash(body);
    if !intact {
        return None;
    }
    let text = std::str::from_utf8(body).ok()?;
    let mut rows = BTreeMap::new();
    for line in text.split_terminator('\n') {
        let (flag, rest) = line.split_once(' ')?;
        let (id, rest) = rest.split_once(' ')?;
        let (follows, body) = rest.split_once(' ')?;
        let follows = match follows {
            "-" => Vec::new(),
            list => list.split(',').map(Id::new).collect::<Result<_, _>>().ok()?,
        };
        let suspect = match flag {
            "+" => false,
            "?" => true,
            _ => return None,
        };
        rows.insert(Id::new(id).ok()?, Line { suspect, follows, body: body.to_owned() });
    }
    Some(File { mark: header.mark, rows })
}

/// Of `rows`, those that follow any of `changed`, directly or through one another: what
/// becomes suspect when `changed` are dropped.
pub fn followers(rows: &BTreeMap<Id, Line>, changed: &BTreeSet<Id>) -> BTreeSet<Id> {
    let mut by_followed: BTreeMap<&Id, Vec<&Id>> = BTreeMap::new();
    for (id, line) in rows {
        for f in &line.follows {
            by_followed.entry(f).or_default().push(id);
        }
    }
    let mut found = BTreeSet::new();
    let mut stack: Vec<&Id> = changed.iter().collect();
    while let Some(at) = stack.pop() {
        for follower in by_followed.get(at).into_iter().flatten() {
            if found.insert((*follower).clone()) {
                stack.push(follower);
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

    #[test]
    fn a_file_round_trips_and_any_damage_reads_as_nothing() {
        let rows = BTreeMap::from([
            (id("a"), Line { suspect: false, follows: vec![], body: "{\"x\":1}".into() }),
            (id("b"), Line { suspect: true, follows: vec![id("a"), id("c")], body: "{}".into() }),
        ]);
        let file = File { mark: mark(3, 40, "b", 5), rows };
        let bytes = encode(&file);
        assert_eq!(decode(&bytes), Some(file));
        let mut flipped = bytes.clone();
        let at = flipped.len() - 3;
        flipped[at] ^= 1;
        assert_eq!(decode(&flipped), None);
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None, "cut short");
        let other = String::from_utf8(bytes).unwrap().replacen("\"v\":1", "\"v\":2", 1);
        assert_eq!(decode(other.as_bytes()), None);
        assert_eq!(decode(b""), None);
    }

    #[test]
    fn followers_are_found_through_one_another() {
        let line = |follows: &[&str]| Line {
            suspect: false,
            follows: follows.iter().map(|f| id(f)).collect(),
            body: String::new(),
        };
        let rows = BTreeMap::from([
            (id("a"), line(&[])),
            (id("b"), line(&["a"])),
            (id("c"), line(&["b"])),
            (id("d"), line(&[])),
        ]);
        let found = followers(&rows, &BTreeSet::from([id("a")]));
        assert_eq!(found, BTreeSet::from([id("b"), id("c")]));
    }
}
