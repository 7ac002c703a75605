//! The index of goal listings (`.harnery/index/goals`): per goal, what `supervisor list`
//! prints, following the work items its projection was computed from. In the shared format
//! of [`crate::index`]: a goal's row stands while the change log names neither the goal nor
//! any item it follows; at the check every minute every goal is read again (over the work
//! index, whose rows are checked against their files then). This module decides; the shell
//! reads the goals.

use super::engine::GoalView;
use super::projection::{GoalNext, GoalState};
use crate::env::Fs;
use crate::error::RecordError;
use crate::ids::Id;
use crate::index::{trust, Line, Mark, Rows, Seen, Trust};
use crate::signature::{cacheable, signature, PathMeta};
use crate::time::WallTime;
use crate::work::indexed::{changes_since, log_seen, write_derived};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) use crate::layout::GOAL_INDEX;

/// One goal as the index keeps it: what a listing prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalRow {
    /// The goal's title.
    pub title: String,
    /// Its projected state.
    pub state: GoalState,
    /// What should happen next.
    pub next_action: GoalNext,
    /// Why, in words.
    pub reason: String,
    /// The root it was created with.
    pub root_work_id: Option<Id>,
    /// The signature of the goal's history file when it was read, which a listing
    /// compares on every read.
    #[serde(with = "crate::work::index::hex16")]
    pub history: [u8; 16],
    /// Set when the history was too new for its metadata to vouch for the read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub racy: bool,
}

impl GoalRow {
    /// The row of a goal read in full (its history's signature unset).
    pub fn of(view: &GoalView) -> GoalRow {
        GoalRow {
            title: view.intent.title.clone(),
            state: view.projection.state,
            next_action: view.projection.next_action,
            reason: view.projection.reason.clone(),
            root_work_id: view.intent.root_work_id.clone(),
            history: [0; 16],
            racy: false,
        }
    }
}

/// The history file of goal `id`, the one path a listing checks on every read.
pub(crate) fn history_path(id: &Id) -> String {
    format!("{}/events.jsonl", crate::layout::goal_dir(id))
}

/// The work items a goal's projection was computed from: its active graph, the governed
/// work outside it, and each applied plan's root.
pub fn follows(view: &GoalView) -> Vec<Id> {
    let mut ids: BTreeSet<Id> = view.items.iter().map(|i| i.id.clone()).collect();
    ids.extend(view.outside.iter().cloned());
    for p in &view.plans {
        if let Some((root, work)) = &p.applied {
            ids.insert(root.clone());
            ids.extend(work.iter().cloned());
        }
    }
    ids.into_iter().collect()
}

/// Whether a goal read in full may be stored: nobody ticking it (nor held its lease just
/// before the read: `busy`), and every item it follows vouched for by this process's work
/// index.
pub fn storable(view: &GoalView, busy: bool, stable: &dyn Fn(&Id) -> bool) -> bool {
    !busy && view.projection.state != GoalState::Running && follows(view).iter().all(stable)
}

/// The goal index as one process holds it.
#[derive(Debug)]
pub struct GoalIndex {
    lines: Rows,
    /// The metadata of each row's history, examined together before the rows are used.
    examined: BTreeMap<Id, Option<PathMeta>>,
    mark: Mark,
    found: Option<Mark>,
    dirty: bool,
    read_at_ns: i128,
}

impl GoalIndex {
    /// The goal index as of `now` in boot `boot`, after what the change log names past its
    /// mark; `None` when the filesystem gives no metadata (then every goal is read in full).
    pub fn open<F: Fs>(fs: &mut F, now: WallTime, boot: &str) -> Option<GoalIndex> {
        let log = log_seen(fs)?;
        let file = fs.read(GOAL_INDEX).ok().flatten().and_then(crate::index::decode);
        let (trusted, mark) =
            trust(file.as_ref().map(|f| &f.mark), Seen { log: Some(log), boot, now });
        let mut index = GoalIndex {
            lines: Rows::default(),
            examined: BTreeMap::new(),
            mark,
            found: None,
            dirty: false,
            read_at_ns: i128::from(now.0) * 1_000_000,
        };
        let (Trust::Log { from, full: false }, Some(file)) = (trusted, file) else {
            // Rebuilt, or read again whole at the check every minute.
            index.dirty = true;
            return Some(index);
        };
        let Some(changed) = changes_since(fs, from, log.1) else {
            index.dirty = true;
            return Some(index);
        };
        index.found = Some(file.mark);
        index.lines = file.rows;
        let stale: Vec<Id> = index
            .lines
            .iter()
            .filter(|(id, line)| {
                changed.goals.contains(*id)
                    || line.follows().iter().any(|f| changed.work.contains(*f))
            })
            .filter_map(|(id, _)| Id::new(id).ok())
            .collect();
        for id in &stale {
            index.lines.remove(id);
        }
        index.dirty = !changed.goals.is_empty() || !changed.work.is_empty();
        Some(index)
    }

    /// Examines every row's history file together, ahead of [`GoalIndex::standing`].
    pub fn examine<F: Fs>(&mut self, fs: &mut F) {
        let ids: Vec<Id> = self.lines.ids();
        let paths: Vec<String> = ids.iter().map(history_path).collect();
        self.examined = ids.into_iter().zip(fs.metas(&paths)).collect();
    }

    /// The stored row of `id`, when it stands: its history file's metadata what it was when
    /// read. A row that does not decode, or whose history changed, is dropped.
    pub fn standing<F: Fs>(&mut self, fs: &mut F, id: &Id) -> Option<GoalRow> {
        let row: Option<GoalRow> = serde_json::from_str(self.lines.get(id)?.body).ok();
        let meta = match self.examined.remove(id) {
            Some(meta) => meta,
            None => fs.meta(&history_path(id)),
        };
        let same =
            |r: &GoalRow| meta.is_some_and(|m| !r.racy && signature(&[m]).digest == r.history);
        match row.filter(same) {
            Some(row) => Some(row),
            None => {
                self.forget(id);
                None
            }
        }
    }

    /// Stores goal `id` read in full as `view` when `storable`, else forgets its row; its
    /// history's metadata is taken now, right after the read.
    pub fn store<F: Fs>(&mut self, fs: &mut F, id: &Id, view: &GoalView, storable: bool) {
        let history = fs.meta(&history_path(id));
        let Some(history) = history.filter(|_| storable) else { return self.forget(id) };
        let sig = signature(&[history]);
        let mut row = GoalRow::of(view);
        row.history = sig.digest;
        row.racy = !cacheable(&sig, self.read_at_ns);
        let body = serde_json::to_string(&row).expect("a goal row serializes");
        let line = Line { suspect: false, follows: follows(view), body };
        self.dirty |= self.lines.insert(id.clone(), line);
    }

    /// Drops the row of `id`.
    pub fn forget(&mut self, id: &Id) {
        self.dirty |= self.lines.remove(id);
    }

    /// Writes the index back when this process changed it (not when the change log was
    /// replaced meanwhile).
    pub fn save<F: Fs>(self, fs: &mut F) -> Result<(), RecordError> {
        if !self.dirty && self.found.as_ref() == Some(&self.mark) {
            return Ok(());
        }
        match log_seen(fs) {
            Some((log, _)) if log == self.mark.log => {}
            _ => return Ok(()),
        }
        let bytes = crate::index::encode(&crate::index::File { mark: self.mark, rows: self.lines });
        write_derived(fs, GOAL_INDEX, &bytes, self.read_at_ns)
    }
}
