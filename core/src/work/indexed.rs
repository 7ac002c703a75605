//! Reads that only show, served through the index of work projections ([`super::index`]) and
//! kept honest by the change log ([`crate::index`]): a row stands while the log names neither
//! it nor anything it follows (and, at the check every minute, while its files' metadata is
//! what it was); anything else is read in full and stored for the next reader. Also the one
//! function every writer of a work item's or a goal's files calls first: [`Ledger::note`].
//!
//! A ledger that decides (starts, accepts, lands, ticks) never opens the index: every
//! decision reads the journals.

use super::index::{self, keepable, Busy, Indexed, Open, Row};
use super::ledger::{receipt_current, Known, Ledger};
use crate::env::{Fs, FsErrorKind};
use crate::error::RecordError;
use crate::ids::Id;
use crate::index::{parse_changes, trust, Change, Changed, Seen, Trust, CHANGES};
use crate::signature::PathMeta;
use crate::time::WallTime;
use crate::work::projection::Prerequisite;
use std::collections::BTreeSet;
use std::sync::Arc;

/// What a reader saw of the change log before it read anything: the log's identity and
/// length, and what it names past `from`; `None` when it could not be read (then nothing
/// derived is trusted).
pub(crate) fn changes_since<F: Fs>(fs: &mut F, from: u64, length: u64) -> Option<Changed> {
    let len = usize::try_from(length.checked_sub(from)?).ok()?;
    let (bytes, _) = fs.read_at(CHANGES, from, len).ok()??;
    (bytes.len() == len).then(|| parse_changes(&bytes)).flatten()
}

/// The log's inode number and length, making it (empty) when there is none, so the first
/// writer does not replace what readers marked; `None` when the filesystem cannot say.
pub(crate) fn log_seen<F: Fs>(fs: &mut F) -> Option<(u64, u64)> {
    if let Some(PathMeta::Missing) = fs.meta(CHANGES) {
        let _ = fs.create_dir_all(crate::layout::INDEX);
        let _ = fs.create_new(CHANGES, b"");
    }
    match fs.meta(CHANGES)? {
        PathMeta::Present { ino, size, .. } => Some((ino, size)),
        PathMeta::Missing => None,
    }
}

impl<F: Fs> Ledger<F> {
    /// Notes in the change log that the work item or goal whose directory holds `path` is
    /// about to change (nothing for other paths). Every writer of those files calls it after
    /// taking the lock that makes it their writer and before its first write; when the note
    /// cannot be written, nothing is, and the write fails.
    pub fn note(&mut self, path: &str) -> Result<(), RecordError> {
        let Some(change) = Change::of_path(path) else { return Ok(()) };
        let line = change.line();
        match self.fs.append(CHANGES, line.as_bytes()) {
            Err(e) if e.kind == FsErrorKind::NotFound => {
                self.fs.create_dir_all(crate::layout::INDEX)?;
                match self.fs.create_new(CHANGES, line.as_bytes()) {
                    Err(e) if e.kind == FsErrorKind::AlreadyExists => {
                        self.fs.append(CHANGES, line.as_bytes())?
                    }
                    other => other?,
                }
            }
            other => other?,
        }
        Ok(())
    }

    /// Serves this ledger's reads through the index of work projections, as of `now` in boot
    /// `boot` (Linux's `boot_id`; empty when unknown, and then nothing stored is trusted):
    /// the change log is looked at once, here, before anything is read. `busy` probes
    /// writers' locks. Without metadata from the filesystem the index is not used.
    pub fn open_index(&mut self, now: WallTime, boot: &str, busy: Busy) {
        let Some(log) = log_seen(&mut self.fs) else { return };
        let seen = (Some(log), boot.to_owned(), now);
        let patience = index::PATIENCE;
        let fresh = std::collections::BTreeMap::new();
        self.index = Some(Indexed { seen, loaded: None, busy, found: None, patience, fresh });
    }

    /// The index's rows, loaded (and the change log's unread part applied) on first use.
    fn rows(&mut self) -> Option<&mut Open> {
        let ix = self.index.as_mut()?;
        if ix.loaded.is_none() && ix.patience > 0 {
            return None;
        }
        self.load_rows()
    }

    /// The index's rows, loaded now if they were not.
    fn load_rows(&mut self) -> Option<&mut Open> {
        let ix = self.index.as_mut()?;
        if ix.loaded.is_none() {
            let (log, boot, now) = ix.seen.clone();
            let file = self.fs.read(index::WORK_INDEX).ok().flatten();
            let file = file.and_then(crate::index::decode);
            let seen = Seen { log, boot: &boot, now };
            let (trusted, mark) = trust(file.as_ref().map(|f| &f.mark), seen);
            let length = log.map_or(0, |l| l.1);
            let (lines, changed, full, found) = match (trusted, file) {
                (Trust::Log { from, full }, Some(file)) => {
                    match changes_since(&mut self.fs, from, length) {
                        Some(changed) => (file.rows, changed.work, full, Some(file.mark)),
                        None => Default::default(),
                    }
                }
                _ => Default::default(),
            };
            let read_at_ns = i128::from(now.0) * 1_000_000;
            let ix = self.index.as_mut()?;
            ix.loaded = Some(Open::new(lines, &changed, mark, full, read_at_ns));
            ix.found = found;
        }
        self.index.as_mut()?.loaded.as_mut()
    }

    /// Loads the index's rows now, whatever the read so far cost: for a reader about to read
    /// many items (a goal listing that must read a goal again).
    pub fn load_index(&mut self) {
        let _ = self.load_rows();
    }

    /// Counts one item read from its own files while the rows are not loaded.
    pub(super) fn spend_patience(&mut self) {
        if let Some(ix) = self.index.as_mut().filter(|ix| ix.loaded.is_none()) {
            ix.patience = ix.patience.saturating_sub(1);
        }
    }

    /// Whether this process's index vouches for the row of `id`: it stood, or was read in
    /// full and stored over prerequisites that are vouched for too.
    pub fn vouched(&self, id: &Id) -> bool {
        let loaded = self.index.as_ref().and_then(|ix| ix.loaded.as_ref());
        loaded.is_some_and(|open| open.stable(id))
    }

    /// The row of `id`: from the index while it stands, else read in full (and stored).
    pub fn summary(
        &mut self,
        id: &Id,
        known: &mut Known,
        runner_live: &mut dyn FnMut(&Id) -> bool,
    ) -> Result<Arc<Row>, RecordError> {
        self.summary_at(id, known, runner_live)
    }

    /// The view of `id` its stored row gives, also when the row is suspect: a view says only
    /// what the item's own history says ([`Prerequisite`]), and a row stays stored only while
    /// its own files are as it recorded; what made it suspect is below it.
    pub(super) fn stored_view(&mut self, id: &Id) -> Option<Prerequisite> {
        self.checked_row(id).map(|(row, _)| row.view())
    }

    /// Walks `root`'s closure through intents while the index's rows are not loaded, each
    /// intent counting against the index's patience: a graph larger than the patience loads
    /// the rows before any of its items is read in full, and a smaller one is read from its
    /// own files.
    pub(super) fn look_below(&mut self, root: &Id) {
        let (mut stack, mut seen) = (vec![root.clone()], BTreeSet::new());
        while let Some(id) = stack.pop() {
            let waiting = self.index.as_ref().is_some_and(|ix| ix.loaded.is_none());
            if !waiting {
                return;
            }
            if seen.insert(id.clone()) {
                stack.extend(self.dependencies_of(&id));
            }
        }
    }

    /// What `id` depends on: from its stored row when there is one, else from its intent
    /// (nothing when that cannot be read; its read will say why).
    fn dependencies_of(&mut self, id: &Id) -> Vec<Id> {
        if let Some(follows) = self.rows().and_then(|open| open.lines.follows(id)) {
            return follows;
        }
        self.spend_patience();
        self.intent(id).ok().flatten().map(|i| i.dependencies).unwrap_or_default()
    }

    /// The row of `id` through `known`: the stored one while it stands, else read in full.
    pub(super) fn summary_at(
        &mut self,
        id: &Id,
        known: &mut Known,
        runner_live: &mut dyn FnMut(&Id) -> bool,
    ) -> Result<Arc<Row>, RecordError> {
        if let Some(done) = known.rows.get(id) {
            return done.clone();
        }
        if let Some(row) = self.index.as_ref().and_then(|ix| ix.fresh.get(id)) {
            let row = Arc::clone(row);
            known.rows.insert(id.clone(), Ok(Arc::clone(&row)));
            return Ok(row);
        }
        let result = match self.standing(id, known) {
            Some(row) => Ok(row),
            None => self.read_row(id, known, runner_live),
        };
        known.rows.insert(id.clone(), result.clone());
        result
    }

    /// `id`'s stored row, when it stands: under the check every minute, its files' metadata
    /// unchanged; when suspect, each prerequisite's view still the one it recorded.
    fn standing(&mut self, id: &Id, known: &mut Known) -> Option<Arc<Row>> {
        let (row, suspect) = self.checked_row(id)?;
        if !suspect {
            self.rows()?.stood(id);
            return Some(row);
        }
        for (dep, was) in &row.prerequisites {
            if self.prerequisite(dep, known) != *was {
                self.rows()?.drop_row(id);
                return None;
            }
        }
        let open = self.rows()?;
        if row.dependencies.iter().all(|d| open.stable(d)) {
            open.stood(id);
        }
        Some(row)
    }

    /// `id`'s stored row after the checks of its own files this process makes (its history
    /// under a listing, every file under the check every minute), and whether it is suspect;
    /// a row failing them is dropped.
    fn checked_row(&mut self, id: &Id) -> Option<(Arc<Row>, bool)> {
        let open = self.rows()?;
        let row = open.row(id)?;
        if open.needs_check(id) {
            let paths = open.check_paths(id, &row);
            let metas: Vec<_> = paths.iter().map(|p| self.fs.meta(p)).collect();
            if !self.rows()?.check(id, &metas) {
                return None;
            }
        }
        let open = self.rows()?;
        Some((row, open.suspect(id)))
    }

    /// Reads `id` in full for its row, and stores the row when it may be kept: no other
    /// process held its locks just before the read, its state follows from its files, and
    /// its files could be examined.
    fn read_row(
        &mut self,
        id: &Id,
        known: &mut Known,
        runner_live: &mut dyn FnMut(&Id) -> bool,
    ) -> Result<Arc<Row>, RecordError> {
        // The probe comes before the read: a writer that takes the locks after it notes the
        // item past this reader's look at the log.
        self.spend_patience();
        let busy = match self.index.as_mut() {
            Some(ix) => (ix.busy)(&Change::Work(id.clone())),
            None => false,
        };
        let read = self.read_live(id, known, runner_live)?;
        let (item, live) = (read.item, read.live);
        let prerequisites = item
            .intent
            .dependencies
            .iter()
            .map(|d| (d.clone(), read.prerequisites.get(d).copied().flatten()))
            .collect();
        let mut row = Row {
            title: item.intent.title.clone(),
            dependencies: item.intent.dependencies.clone(),
            max_attempts: item.intent.max_attempts,
            projection: item.projection.clone(),
            usage: item.usage.clone(),
            history_len: item.history_len,
            prerequisites,
            receipt_current: receipt_current(&item),
            signature: [0; 16],
            racy: false,
            history: [0; 16],
        };
        known.items.insert(id.clone(), Ok(item));
        let Some(open) = self.rows() else {
            let row = Arc::new(row);
            if let Some(ix) = self.index.as_mut() {
                ix.fresh.insert(id.clone(), Arc::clone(&row));
            }
            return Ok(row);
        };
        let read_at = open.read_at_ns;
        if busy || live || !keepable(&row.projection) {
            open.drop_row(id);
            return Ok(Arc::new(row));
        }
        let metas: Vec<_> = row.paths(id).iter().map(|p| self.fs.meta(p)).collect();
        let open = self.rows().expect("the index is open");
        let row = match index::signed(&metas, read_at) {
            Some((signature, racy)) => {
                row.signature = signature;
                row.racy = racy;
                // The paths are the intent, then the history.
                let history = metas[1].expect("examined with the others");
                row.history = crate::signature::signature(&[history]).digest;
                let row = Arc::new(row);
                open.store(id, Arc::clone(&row));
                row
            }
            None => {
                open.drop_row(id);
                Arc::new(row)
            }
        };
        Ok(row)
    }

    /// Has every row's history file checked before the row stands, as a listing needs (see
    /// [`Open::verify_histories`]).
    pub fn verify_histories(&mut self) {
        if let Some(open) = self.load_rows() {
            open.verify_histories = true;
        }
    }

    /// Checks together the files of the rows of `ids` (all when `None`) this process's
    /// checks will look at: each row's files under the check every minute, its history when
    /// histories are verified, nothing otherwise (rows failing are dropped). Only a
    /// speed-up: a row not checked here is checked when first used.
    pub fn examine(&mut self, ids: Option<&[Id]>) {
        let Some(open) = self.load_rows().filter(|open| open.full || open.verify_histories) else {
            return;
        };
        let wanted: Vec<Id> = match ids {
            None => open.lines.ids(),
            Some(ids) => ids.iter().filter(|id| open.needs_check(id)).cloned().collect(),
        };
        let mut planned = Vec::with_capacity(wanted.len());
        for id in wanted {
            if let Some(row) = open.row(&id) {
                let paths = open.check_paths(&id, &row);
                planned.push((id, paths));
            }
        }
        let all: Vec<String> = planned.iter().flat_map(|(_, p)| p.iter().cloned()).collect();
        let mut metas = self.fs.metas(&all).into_iter();
        let open = self.rows().expect("the index is open");
        for (id, paths) in planned {
            let mine: Vec<_> = metas.by_ref().take(paths.len()).collect();
            open.check(&id, &mine);
        }
    }

    /// [`Ledger::examine`] of the rows the index says `root`'s dependency closure holds.
    pub fn examine_closure(&mut self, root: &Id) {
        let Some(open) = self.rows().filter(|open| open.full) else { return };
        let (mut wanted, mut seen, mut stack) = (Vec::new(), BTreeSet::new(), vec![root.clone()]);
        while let Some(id) = stack.pop() {
            let Some(follows) = open.lines.follows(&id).filter(|_| seen.insert(id.clone())) else {
                continue;
            };
            stack.extend(follows);
            wanted.push(id);
        }
        self.examine(Some(&wanted));
    }

    /// Writes the index back when this process changed it, and closes it: a whole new file
    /// renamed over the old one, unsynced (a torn or lost index is only rebuilt). Nothing is
    /// written when the log was replaced meanwhile. A log grown past
    /// [`crate::index::ROTATE_AT`] is set aside for a new one, and every index with it.
    pub fn save_index(&mut self) -> Result<(), RecordError> {
        let Some(ix) = self.index.take() else { return Ok(()) };
        let Indexed { loaded, found, .. } = ix;
        let Some(open) = loaded else { return Ok(()) };
        let mut mark = open.mark.clone();
        if let Some(found) = found.as_ref().filter(|_| open.full && !open.checked_all()) {
            // Rows this process did not look at were not checked: the next reader checks.
            mark.checked_at = found.checked_at;
        }
        if !open.dirty && found.as_ref() == Some(&mark) {
            return Ok(());
        }
        match log_seen(&mut self.fs) {
            Some((log, _)) if log == mark.log => {}
            _ => return Ok(()),
        }
        if mark.offset >= crate::index::ROTATE_AT {
            return self.rotate_log();
        }
        let file = crate::index::File { mark, rows: open.lines };
        let bytes = crate::index::encode(&file);
        write_derived(&mut self.fs, index::WORK_INDEX, &bytes, open.read_at_ns)
    }

    /// Sets the change log aside for a new, empty one and removes every index made over it,
    /// so each is rebuilt once over the new log.
    fn rotate_log(&mut self) -> Result<(), RecordError> {
        let aside = format!("{CHANGES}.1");
        self.fs.rename(CHANGES, &aside)?;
        let _ = self.fs.create_new(CHANGES, b"");
        self.fs.remove(index::WORK_INDEX)?;
        self.fs.remove(crate::layout::GOAL_INDEX)?;
        Ok(())
    }
}

/// Writes a derived file whole: a temporary file renamed over it, never synced.
pub(crate) fn write_derived<F: Fs>(
    fs: &mut F,
    path: &str,
    bytes: &[u8],
    read_at_ns: i128,
) -> Result<(), RecordError> {
    let temp = format!("{path}.{read_at_ns}.tmp");
    fs.create_dir_all(crate::layout::INDEX)?;
    fs.write_temp(&temp, bytes)?;
    if let Err(e) = fs.rename(&temp, path) {
        let _ = fs.remove(&temp);
        return Err(e.into());
    }
    Ok(())
}
