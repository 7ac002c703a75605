//! The index of work projections (`.harnery/index/work`): per item, what listings print and
//! dependents need, with the signature of the files it was read from. A derived file in the
//! shared format of [`crate::index`]: never a source of truth, rebuilt row by row whenever a
//! row is missing, named by the change log, or (at the check every minute) no longer matching
//! its files. This module decides which files a row follows, whether it may be stored and
//! whether it still stands; the ledger reads files through its `Fs`
//! ([`super::indexed`]).

use crate::ids::Id;
use crate::index::{Change, Line, LineRef, Mark, Rows};
use crate::signature::{cacheable, signature, PathMeta};
use crate::work::projection::{Prerequisite, Projection};
use crate::work::reading::Usage;
use crate::work::WorkState;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use crate::layout::WORK_INDEX;

/// One item as the index keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// The title, from the intent.
    pub title: String,
    /// The prerequisites, from the intent, in declared order (kept on the row's line, as
    /// what it follows, not in its body).
    #[serde(skip)]
    pub dependencies: Vec<Id>,
    /// The attempt budget, from the intent.
    pub max_attempts: u32,
    /// The projection.
    pub projection: Projection,
    /// The usage its attempts' proofs report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// How many events its history holds.
    pub history_len: u64,
    /// Each prerequisite's view the projection was computed with (`None`: unreadable). A
    /// suspect row stands only while each prerequisite's view is still this.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prerequisites: Vec<(Id, Option<Prerequisite>)>,
    /// Whether the history's last `work.reconciled` receipt records this projection, so a
    /// reconcile has nothing to write.
    pub receipt_current: bool,
    /// The signature of [`paths`] taken right after the read (32 hex digits on disk).
    #[serde(with = "hex16")]
    pub signature: [u8; 16],
    /// Set when a file was too new for its metadata to vouch for what was read (git's
    /// "racily clean"): the row then stands on the change log alone, and the check against
    /// files drops it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub racy: bool,
    /// The signature of the history file alone, which a listing compares on every read.
    #[serde(with = "hex16")]
    pub history: [u8; 16],
}

impl Row {
    /// What a dependent's projection needs of this item.
    pub fn view(&self) -> Prerequisite {
        Prerequisite::of(&self.projection)
    }

    /// The row as stored: suspect or not, following its prerequisites.
    pub fn line(&self, suspect: bool) -> Line {
        let body = serde_json::to_string(self).expect("a row serializes");
        Line { suspect, follows: self.dependencies.clone(), body }
    }

    /// The row a stored line holds; `None` when it does not decode (it is read again).
    pub fn of_line(line: LineRef<'_>) -> Option<Row> {
        let mut row: Row = serde_json::from_str(line.body).ok()?;
        row.dependencies = line.follows_ids()?;
        Some(row)
    }

    /// The files this row of `id` follows ([`paths`]).
    pub fn paths(&self, id: &Id) -> Vec<String> {
        paths(id, self.projection.latest_run_id.as_ref())
    }
}

/// The files an item's row follows, relative to the root: its intent and history, and its
/// latest run's directory (where a run in progress adds its transcript and proof). Older
/// runs' records are written once and only read.
pub fn paths(id: &Id, latest_run: Option<&Id>) -> Vec<String> {
    let dir = crate::layout::work_dir(id);
    let mut paths = vec![format!("{dir}/intent.json"), format!("{dir}/events.jsonl")];
    paths.extend(latest_run.map(crate::layout::run_dir));
    paths
}

/// The history file of item `id`, the one path a listing checks on every read (see
/// [`Open::verify_histories`]).
pub(crate) fn history_path(id: &Id) -> String {
    format!("{}/events.jsonl", crate::layout::work_dir(id))
}

/// Whether a projection follows from the item's files alone, so its row may be kept: not
/// running or waiting for a ruling, whose end shows first in a lease or another record.
pub fn keepable(projection: &Projection) -> bool {
    !matches!(projection.state, WorkState::Running | WorkState::AwaitingApproval)
}

/// Whether a row still matches its files' metadata `now` (every path examined) and was not
/// racy when read: what the check every minute asks of each row.
pub(crate) fn matches_files(row: &Row, now: &[Option<PathMeta>]) -> bool {
    let Some(metas) = now.iter().copied().collect::<Option<Vec<_>>>() else { return false };
    !row.racy && signature(&metas).digest == row.signature
}

/// The signature a row read in full at `read_at_ns` gets from its files' metadata taken
/// right after the read, and whether it is racy; `None` when a path could not be examined.
pub fn signed(metas: &[Option<PathMeta>], read_at_ns: i128) -> Option<([u8; 16], bool)> {
    let metas = metas.iter().copied().collect::<Option<Vec<_>>>()?;
    let sig = signature(&metas);
    let racy = !cacheable(&sig, read_at_ns);
    Some((sig.digest, racy))
}

/// Whether a row's history file still has the metadata it had when read (and the row was
/// not racy then): what a listing asks of every row it prints.
pub(crate) fn history_matches(row: &Row, now: Option<PathMeta>) -> bool {
    now.is_some_and(|meta| !row.racy && signature(&[meta]).digest == row.history)
}

/// The work index as one process holds it while its reads use it.
#[derive(Debug)]
pub struct Open {
    /// The rows as stored, by id; a row found stale is removed.
    pub lines: Rows,
    /// Rows decoded, by id, with what this process learned of them.
    decoded: BTreeMap<Id, Decoded>,
    /// The mark the index is saved with.
    pub mark: Mark,
    /// Whether every row must be checked against its files before it stands.
    pub full: bool,
    /// Whether each row's history file is checked before it stands (a listing asks this:
    /// a history damaged or edited outside harn shows in the next listing).
    pub verify_histories: bool,
    /// Whether anything changed that the file does not hold yet.
    pub dirty: bool,
    /// When this process's reads began (wall clock, nanoseconds since the unix epoch).
    pub read_at_ns: i128,
}

/// A row decoded in this process.
#[derive(Debug)]
struct Decoded {
    row: Arc<Row>,
    /// Its own files were checked (what `full` or `verify_histories` asks).
    checked: bool,
    /// This process vouches for it: it stood, or was read in full and stored as not
    /// suspect. A row read over a prerequisite not vouched for is stored as suspect.
    stable: bool,
}

impl Open {
    /// The index over `lines` after the change log named `changed`: their rows dropped, and
    /// every row that follows one of them, directly or not, suspect.
    pub fn new(
        mut lines: Rows,
        changed: &BTreeSet<Id>,
        mark: Mark,
        full: bool,
        read_at_ns: i128,
    ) -> Open {
        let dirty = !changed.is_empty();
        if dirty {
            for id in crate::index::followers(&lines, changed) {
                lines.set_suspect(&id, true);
            }
            for id in changed {
                lines.remove(id);
            }
        }
        Open {
            lines,
            decoded: BTreeMap::new(),
            mark,
            full,
            verify_histories: false,
            dirty,
            read_at_ns,
        }
    }

    /// The stored row of `id`, decoded once; a line that does not decode is dropped.
    pub fn row(&mut self, id: &Id) -> Option<Arc<Row>> {
        if let Some(d) = self.decoded.get(id) {
            return Some(Arc::clone(&d.row));
        }
        let line = self.lines.get(id)?;
        match Row::of_line(line) {
            Some(row) => {
                let row = Arc::new(row);
                let d = Decoded { row: Arc::clone(&row), checked: false, stable: false };
                self.decoded.insert(id.clone(), d);
                Some(row)
            }
            None => {
                self.drop_row(id);
                None
            }
        }
    }

    /// Whether the row of `id` still needs its own files checked in this process.
    pub(crate) fn needs_check(&self, id: &Id) -> bool {
        (self.full || self.verify_histories)
            && self.decoded.get(id).is_none_or(|d| !d.checked)
            && self.lines.contains_key(id)
    }

    /// The paths the check of the row of `id` looks at: every file under `full`, else the
    /// history alone.
    pub(crate) fn check_paths(&self, id: &Id, row: &Row) -> Vec<String> {
        match self.full {
            true => row.paths(id),
            false => vec![history_path(id)],
        }
    }

    /// Checks the row of `id` against `metas` of its [`Open::check_paths`]: kept as
    /// checked, or dropped, its followers made suspect as though the change log had named
    /// it (a change made outside harn, found by its files). Returns whether it passed.
    pub fn check(&mut self, id: &Id, metas: &[Option<PathMeta>]) -> bool {
        let Some(row) = self.row(id) else { return false };
        let fine = match self.full {
            true => matches_files(&row, metas),
            false => history_matches(&row, metas.first().copied().flatten()),
        };
        match self.decoded.get_mut(id).filter(|_| fine) {
            Some(d) => d.checked = true,
            None => {
                let changed = BTreeSet::from([id.clone()]);
                for follower in crate::index::followers(&self.lines, &changed) {
                    self.dirty |= self.lines.set_suspect(&follower, true);
                    if let Some(d) = self.decoded.get_mut(&follower) {
                        d.stable = false;
                    }
                }
                self.drop_row(id);
            }
        }
        fine
    }

    /// Whether the stored row of `id` is suspect (or, under `full`, every row is until its
    /// prerequisites are compared).
    pub fn suspect(&self, id: &Id) -> bool {
        self.full || self.lines.get(id).is_some_and(|l| l.suspect)
    }

    /// Whether this process vouches for the row of `id`.
    pub fn stable(&self, id: &Id) -> bool {
        self.decoded.get(id).is_some_and(|d| d.stable)
    }

    /// Removes a row found stale.
    pub(crate) fn drop_row(&mut self, id: &Id) {
        self.decoded.remove(id);
        self.dirty |= self.lines.remove(id);
    }

    /// Records that the row of `id` stands after its checks.
    pub fn stood(&mut self, id: &Id) {
        self.dirty |= self.lines.set_suspect(id, false);
        if let Some(d) = self.decoded.get_mut(id) {
            d.stable = true;
        }
    }

    /// Stores `row` of `id`, read in full: suspect unless every prerequisite is stable here.
    pub fn store(&mut self, id: &Id, row: Arc<Row>) {
        let suspect = !row.dependencies.iter().all(|d| self.stable(d));
        self.dirty |= self.lines.insert(id.clone(), row.line(suspect));
        self.decoded.insert(id.clone(), Decoded { row, checked: true, stable: !suspect });
    }

    /// Whether a check against files begun by this process covered every row, so the saved
    /// mark may say every row was checked now.
    pub(crate) fn checked_all(&self) -> bool {
        self.lines.iter().all(|(id, _)| self.decoded.get(id).is_some_and(|d| d.checked))
    }
}

/// Tells whether another process holds a lock that makes it the writer of a record (its
/// history lock or run lease, a goal's lease): a record read while it does is not stored.
pub type Busy = Box<dyn FnMut(&Change) -> bool>;

/// The index as a ledger holds it while its reads use it: the log as seen before anything
/// was read, and the rows, loaded when first needed (a goal listing whose rows all stand
/// never loads them).
pub(crate) struct Indexed {
    /// What the reader saw of the change log and when.
    pub(crate) seen: (Option<(u64, u64)>, String, crate::time::WallTime),
    /// The rows and what this process learned of them, once loaded.
    pub(crate) loaded: Option<Open>,
    /// The probe of writers' locks, asked just before an item is read in full.
    pub busy: Busy,
    /// The mark of the index file as found, when its rows were used.
    pub found: Option<Mark>,
    /// Items this process may still read from their own files before the rows are
    /// loaded: a read of a few items (a `show` of one with a handful of prerequisites) costs
    /// less than loading the rows of thousands, so the index is loaded only once a read
    /// turns out bigger, or when a listing asks for it.
    pub(crate) patience: u32,
    /// Rows this process read in full, kept for its later reads whether or not they could
    /// be stored (one command's reads all count from the same look at the log).
    pub(crate) fresh: BTreeMap<Id, Arc<Row>>,
}

/// How many reads of items' own files (an intent for the dependency walk, an item in full) a
/// read makes before it loads the index.
pub(crate) const PATIENCE: u32 = 32;

/// Sixteen bytes as 32 lowercase hex digits.
pub(crate) mod hex16 {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
        let mut out = String::with_capacity(32);
        for b in bytes {
            out.push_str(&format!("{b:02x}"));
        }
        s.serialize_str(&out)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 16], D::Error> {
        let text = <&str>::deserialize(d)?;
        let mut out = [0; 16];
        if text.len() != 32 {
            return Err(D::Error::custom("a signature is 32 hex digits"));
        }
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(D::Error::custom)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::WallTime;
    use crate::work::NextAction;

    const S: i128 = 1_000_000_000;

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    fn projection(state: WorkState) -> Projection {
        Projection {
            state,
            reason: "no attempt yet".into(),
            next_action: NextAction::Run,
            unresolved_dependencies: vec![],
            attempts_used: 0,
            charged_attempts: 0,
            attempts_remaining: 3,
            latest_run_id: None,
            approval_id: None,
            blocked_on_decision: None,
            open_findings: vec![],
            accepted_seq: None,
            landed: false,
        }
    }

    fn file(ino: u64, size: u64, at_s: i128) -> Option<PathMeta> {
        Some(PathMeta::Present { ino, size, mtime_ns: at_s * S, ctime_ns: at_s * S })
    }

    fn row(deps: &[&str], signature: [u8; 16], racy: bool) -> Row {
        Row {
            title: "T".into(),
            dependencies: deps.iter().map(|d| id(d)).collect(),
            max_attempts: 3,
            projection: projection(WorkState::Ready),
            usage: None,
            history_len: 1,
            prerequisites: vec![],
            receipt_current: false,
            signature,
            racy,
            history: [0; 16],
        }
    }

    fn mark() -> Mark {
        Mark { log: 1, offset: 0, boot: "b".into(), checked_at: WallTime(0) }
    }

    #[test]
    fn a_row_read_too_close_to_its_files_change_is_racy_and_fails_the_check() {
        let metas = [file(1, 10, 100), file(2, 20, 100)];
        assert!(signed(&metas, 101 * S).unwrap().1, "within the slack");
        let (digest, racy) = signed(&metas, 103 * S).unwrap();
        assert!(!racy);
        assert!(signed(&[file(1, 10, 100), None], 103 * S).is_none());
        let r = row(&[], digest, false);
        assert!(matches_files(&r, &metas));
        assert!(!matches_files(&r, &[file(1, 10, 100), file(2, 21, 100)]), "the history grew");
        assert!(!matches_files(&r, &[file(3, 10, 100), file(2, 20, 100)]), "replaced");
        assert!(!matches_files(&r, &[file(1, 10, 100), None]), "not examined");
        assert!(!matches_files(&row(&[], digest, true), &metas), "racy");
    }

    #[test]
    fn a_row_round_trips_through_its_line_with_its_prerequisites_on_the_line() {
        let r = row(&["a", "b"], [7; 16], true);
        let line = r.line(true);
        assert_eq!(line.follows, vec![id("a"), id("b")]);
        assert!(!line.body.contains("\"dependencies\""));
        let rows = Rows::of_lines(BTreeMap::from([(id("x"), line)]));
        assert_eq!(Row::of_line(rows.get(&id("x")).unwrap()), Some(r));
        let bad = Line { suspect: false, follows: vec![], body: "{".into() };
        let rows = Rows::of_lines(BTreeMap::from([(id("x"), bad)]));
        assert_eq!(Row::of_line(rows.get(&id("x")).unwrap()), None);
    }

    #[test]
    fn the_log_drops_a_changed_row_and_makes_its_followers_suspect() {
        let lines = Rows::of_lines(BTreeMap::from([
            (id("a"), row(&[], [1; 16], false).line(false)),
            (id("b"), row(&["a"], [2; 16], false).line(false)),
            (id("c"), row(&["b"], [3; 16], false).line(false)),
            (id("d"), row(&[], [4; 16], false).line(false)),
        ]));
        let mut open = Open::new(lines, &BTreeSet::from([id("a")]), mark(), false, 0);
        assert!(open.row(&id("a")).is_none());
        assert!(open.suspect(&id("b")) && open.suspect(&id("c")));
        assert!(!open.suspect(&id("d")));
        assert!(open.dirty);
        open.stood(&id("b"));
        assert!(!open.suspect(&id("b")));
    }

    #[test]
    fn a_row_stored_over_a_prerequisite_not_vouched_for_is_suspect() {
        let mut open = Open::new(Rows::default(), &BTreeSet::new(), mark(), false, 0);
        open.store(&id("b"), Arc::new(row(&["a"], [2; 16], false)));
        assert!(open.suspect(&id("b")), "a was never vouched for");
        open.store(&id("a"), Arc::new(row(&[], [1; 16], false)));
        open.store(&id("c"), Arc::new(row(&["a"], [3; 16], false)));
        assert!(!open.suspect(&id("a")) && !open.suspect(&id("c")));
        assert!(!open.stable(&id("b")) && open.stable(&id("c")));
    }
}
