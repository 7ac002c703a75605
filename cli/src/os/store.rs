//! The work ledger on the real filesystem: the core's [`Ledger`] over [`RealFs`], plus what
//! only a real process has: flock-held history locks and run leases, a probe of another
//! process's lease, item creation by a staging-directory rename, and run ids.

use crate::exit::Failure;
use crate::os::clock::RealClock;
use crate::os::fs::RealFs;
use harn_core::env::{Clock, Fs};
use harn_core::error::RecordError;
use harn_core::ids::Id;
use harn_core::index::Change;
use harn_core::journal::JournalWriter;
use harn_core::time::WallTime;
use harn_core::work::events::{EventKind, WorkEvent};
use harn_core::work::index::Row;
pub use harn_core::work::ledger::{run_dir, Item};
use harn_core::work::ledger::{work_dir, Known, Ledger};
use harn_core::work::run::{Proof, RunManifest};
use harn_core::work::WorkIntent;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The work ledger of one coordination root.
pub struct Store {
    root: PathBuf,
    ledger: Ledger<RealFs>,
    clock: RealClock,
    /// History locks this process holds (a lock lasts as long as `fs`).
    held: std::collections::BTreeSet<String>,
    /// Where a relative path a person typed is taken from: the current directory when the
    /// root was found from it, the root when `--root` named it (as `git -C`).
    paths_from: PathBuf,
}

/// Why a read or a write failed, naming the file. What the core says stays typed (a
/// [`RecordError`]: the filesystem refused, a record is damaged, the request is refused), so
/// a caller can tell an IO fault from damage or a refusal; what only this process meets
/// outside the core's `Fs` seam is said in its own words.
#[derive(Debug)]
pub enum StoreError {
    /// What the core's ledger said, or this process's own refusal in the core's terms.
    Record(RecordError),
    /// A write a new attempt starts with failed before anything was spawned: nothing ran
    /// and no attempt was charged.
    Unstarted(RecordError),
    /// A writer's lock another process held past the wait (the lock file, as shown).
    Busy(String),
    /// An OS call outside the core's seam failed (opening a lock, linking a record, waiting
    /// for a child), in words naming the path.
    Os(String),
}

impl StoreError {
    /// This process's refusal, in the words the operator reads.
    pub fn refused(why: impl Into<String>) -> StoreError {
        StoreError::Record(RecordError::refused(why))
    }

    /// The core's error, when it is one.
    pub fn record(&self) -> Option<&RecordError> {
        match self {
            StoreError::Record(e) | StoreError::Unstarted(e) => Some(e),
            StoreError::Busy(_) | StoreError::Os(_) => None,
        }
    }
}

impl From<RecordError> for StoreError {
    fn from(e: RecordError) -> StoreError {
        StoreError::Record(e)
    }
}

impl From<harn_core::env::FsError> for StoreError {
    fn from(e: harn_core::env::FsError) -> StoreError {
        StoreError::Record(RecordError::Fs(e))
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Record(e) => write!(f, "{e}"),
            StoreError::Unstarted(e) => write!(f, "{e}; nothing ran and no attempt was charged"),
            StoreError::Busy(lock) => write!(f, "{lock}: held by another writer"),
            StoreError::Os(words) => f.write_str(words),
        }
    }
}

impl std::error::Error for StoreError {}

/// The one way a store's error ends a verb: the operation failed, in the store's words,
/// whichever kind it is (an IO fault, damage, a refusal).
impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure::failed(e)
    }
}

/// How long a writer waits for another writer of the same item's history.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn dir_of(id: &Id) -> String {
    work_dir(id)
}

/// The run lease: held (flock) by the process running one of the item's attempts.
pub fn run_lock(id: &Id) -> String {
    format!("{}/run.lock", dir_of(id))
}

/// The lease a run's host holds while the run goes: its item's run lease, or for a planning
/// run (which no item owns) the run's own, in its directory.
pub fn lease_of(work: &Id, run: &Id, planning: bool) -> String {
    match planning {
        true => format!("{}/planning.lock", run_dir(run)),
        false => run_lock(work),
    }
}

/// How many times `hold` tries a busy lease, 2 ms apart, before saying another process holds it.
const LEASE_TRIES: u32 = 10;

/// The store of the coordination root `--root` names, or the one found from the current
/// directory as git finds its repository ([`crate::os::root`]), or the exit code of a root that
/// does not resolve (bad input).
pub fn open_root(root: Option<PathBuf>) -> Result<Store, Failure> {
    match crate::os::root::discover(root.as_deref()) {
        Ok(r) => {
            let mut store = Store::new(&r);
            if root.is_none() {
                store.paths_from = std::env::current_dir().unwrap_or_else(|_| r.clone());
            }
            Ok(store)
        }
        Err(e) => {
            let shown = root.unwrap_or_else(|| PathBuf::from("."));
            crate::exit::fail(crate::exit::EXIT_USAGE, format!("{}: {e}", shown.display()))
        }
    }
}

/// The entries of one of the root's directories.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// The valid ids, sorted.
    pub ids: Vec<Id>,
    /// What is wrong with each other entry.
    pub problems: Vec<String>,
}

impl Store {
    /// The ledger under `root`.
    pub fn new(root: &Path) -> Store {
        let (fs, clock, held) =
            (RealFs::new(root.to_owned()), RealClock::new(), Default::default());
        let ledger = Ledger::new(fs, &root.display().to_string());
        Store { root: root.to_owned(), ledger, clock, held, paths_from: root.to_owned() }
    }

    /// The coordination root this ledger lives under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A file a person named on the command line: a relative path is taken from where they
    /// stand, as git takes it, or from the root `--root` named.
    pub fn given(&self, path: &Path) -> PathBuf {
        self.paths_from.join(path)
    }

    /// Wall time now.
    pub fn now(&self) -> WallTime {
        self.clock.wall()
    }

    /// Every work id, sorted.
    pub fn ids(&mut self) -> Result<Listing, StoreError> {
        self.list_ids(harn_core::layout::WORK)
    }

    /// The entries of directory `dir`: the valid ids, sorted, and a problem for each other
    /// name (one not UTF-8, one harn never makes), so one bad entry never hides the others.
    /// Names starting with `.` are harn's own staging and temporary files and are skipped.
    pub fn list_ids(&mut self, dir: &str) -> Result<Listing, StoreError> {
        let names = self.ledger.fs.list(dir).map_err(StoreError::from)?;
        let mut listing = Listing::default();
        for name in names.iter().filter(|n| !n.starts_with('.')) {
            match Id::new(name) {
                Ok(id) => listing.ids.push(id),
                Err(e) => listing.problems.push(format!(
                    "{}: {name:?} is not an id harn made ({e}); move it away",
                    self.root.join(dir).display()
                )),
            }
        }
        Ok(listing)
    }

    /// The id an operator typed, completed when it is a unique prefix of one item's id and no
    /// item has exactly that id; an id nothing begins with, or a prefix of several, is bad
    /// input saying so. A typed word that is no id is left for the verb to refuse.
    pub fn expand_work_id(&mut self, typed: String) -> Result<String, Failure> {
        let Ok(id) = Id::new(&typed) else { return Ok(typed) };
        if self.exists(&id) {
            return Ok(typed);
        }
        let listing = self.ids()?;
        complete(&typed, listing.ids.iter().map(Id::as_str), "work item")
    }

    /// True when a work item with this id exists.
    pub fn exists(&mut self, id: &Id) -> bool {
        matches!(self.ledger.fs.read(&format!("{}/intent.json", dir_of(id))), Ok(Some(_)))
    }

    /// The intent of `id`; `None` when there is no such item.
    pub fn intent(&mut self, id: &Id) -> Result<Option<WorkIntent>, StoreError> {
        Ok(self.ledger.intent(id)?)
    }

    /// The verified history of `id`.
    pub fn events(&mut self, id: &Id) -> Result<Vec<WorkEvent>, StoreError> {
        Ok(self.ledger.events(id)?)
    }

    /// Reads `id` and projects it, projecting its prerequisites through `known` (filled as it
    /// goes, so each item is read and projected once per command).
    pub fn read(&mut self, id: &Id, known: &mut Known) -> Result<Item, StoreError> {
        let (root, held) = (&self.root, &self.held);
        Ok(self.ledger.read(id, known, &mut |id| runner_live(root, held, id))?)
    }

    /// Serves this process's reads through the index of projections
    /// (`harn_core::work::index`): for verbs that only show, never for one that decides.
    pub fn use_index(&mut self) {
        let now = self.now();
        let (root, held) = (self.root.clone(), self.held.clone());
        let busy = Box::new(move |change: &Change| match change {
            Change::Work(id) => {
                probe(&root, &held, &run_lock(id))
                    || probe(&root, &held, &format!("{}/events.lock", dir_of(id)))
            }
            Change::Goal(id) => probe(&root, &held, &harn_core::layout::goal_lease(id)),
        });
        self.ledger.open_index(now, &boot_id(), busy);
    }

    /// The index of goal listings as of now (`harn_core::goal::index`); `None` where the
    /// filesystem gives no metadata.
    pub fn goal_index(&mut self) -> Option<harn_core::goal::index::GoalIndex> {
        let now = self.now();
        harn_core::goal::index::GoalIndex::open(&mut self.ledger.fs, now, &boot_id())
    }

    /// Writes back the goal index; a failure costs the next reader a full read.
    pub fn save_goal_index(&mut self, index: harn_core::goal::index::GoalIndex) {
        let _ = index.save(&mut self.ledger.fs);
    }

    /// Whether another process holds goal `id`'s lease: asked before the goal is read, so
    /// a read made while it was being written is not stored.
    pub fn goal_busy(&self, id: &Id) -> bool {
        probe(&self.root, &self.held, &harn_core::layout::goal_lease(id))
    }

    /// The root's filesystem, for the indexes' checks of file metadata.
    pub fn fs(&mut self) -> &mut RealFs {
        &mut self.ledger.fs
    }

    /// Has every work row's history checked before it stands (a listing's reads).
    pub fn verify_histories(&mut self) {
        self.ledger.verify_histories();
    }

    /// Loads the work index's rows now (see `Ledger::load_index`).
    pub fn load_index(&mut self) {
        self.ledger.load_index();
    }

    /// Whether this process's work index vouches for the row of `id`.
    pub fn vouched(&self, id: &Id) -> bool {
        self.ledger.vouched(id)
    }

    /// Writes back what the reads stored in the index. A failure costs the next reader a
    /// full read, so it is never an error of the verb.
    pub fn save_index(&mut self) {
        let _ = self.ledger.save_index();
    }

    /// Examines together the files of the index's rows of `ids` (all when `None`), ahead
    /// of their checks ([`Ledger::examine`]).
    pub fn examine(&mut self, ids: Option<&[Id]>) {
        self.ledger.examine(ids);
    }

    /// [`Store::examine`] of `root`'s dependency closure as the index has it.
    pub fn examine_closure(&mut self, root: &Id) {
        self.ledger.examine_closure(root);
    }

    /// `id`'s row: what listings show and dependents need, from the index while it stands.
    pub fn summary(&mut self, id: &Id, known: &mut Known) -> Result<Arc<Row>, StoreError> {
        let (root, held) = (&self.root, &self.held);
        Ok(self.ledger.summary(id, known, &mut |id| runner_live(root, held, id))?)
    }

    /// What goal `view`'s work and planning spent (see `harn_core::goal::spend`), with this
    /// process's leases excluded.
    pub fn goal_usage(
        &mut self,
        view: &harn_core::goal::engine::GoalView,
    ) -> Option<harn_core::work::adapter::Usage> {
        let (root, held) = (&self.root, &self.held);
        harn_core::goal::spend::usage(&mut self.ledger, view, &mut |id| runner_live(root, held, id))
    }

    /// The dependency closure of `root`, prerequisites first, each item read once.
    pub fn graph(&mut self, root: &Id) -> Result<Vec<harn_core::goal::GraphItem>, StoreError> {
        let (root_dir, held) = (&self.root, &self.held);
        Ok(self.ledger.graph(root, &mut |id| runner_live(root_dir, held, id))?)
    }

    /// A goal's plans, active graph and projection, with this process's leases excluded.
    pub fn goal_view(
        &mut self,
        intent: &harn_core::goal::GoalIntent,
        lease_held_elsewhere: bool,
    ) -> Result<harn_core::goal::engine::GoalView, StoreError> {
        let (root_dir, held) = (&self.root, &self.held);
        let mut live = |id: &Id| runner_live(root_dir, held, id);
        let view = harn_core::goal::plan::goal_view(
            &mut self.ledger,
            intent,
            &mut live,
            lease_held_elsewhere,
        )?;
        Ok(view)
    }

    /// Reads `id` afresh.
    fn read_fresh(&mut self, id: &Id) -> Result<Item, StoreError> {
        let (root, held) = (&self.root, &self.held);
        let mut live = |id: &Id| runner_live(root, held, id);
        Ok(self.ledger.read_uncached(id, &mut Known::new(), &mut live)?)
    }

    /// A fresh id: `PREFIX-<UTC time>-<6 hex>`.
    pub fn new_id(&self, prefix: &str) -> Id {
        let now = self.now().0;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let salt =
            harn_core::hash::fnv64(format!("{now}-{nanos}-{}", std::process::id()).as_bytes());
        let stamp = crate::os::clock::utc(now).replace([' ', ':', '.'], "-");
        Id::new(&format!("{prefix}-{stamp}-{:06x}", salt & 0xff_ffff))
            .expect("a valid generated id")
    }

    /// A fresh workflow run id.
    pub fn new_run_id(&self) -> Id {
        self.new_id("wf")
    }

    /// Opens a journal for appending, cutting a torn tail.
    pub fn open_journal(&mut self, path: &str) -> Result<JournalWriter, StoreError> {
        self.ledger.note(path)?;
        JournalWriter::open_tail(&mut self.ledger.fs, path)
            .map(|(w, _)| w)
            .map_err(|e| StoreError::Record(e.into()))
    }

    /// Appends one synced line to a journal opened with [`Store::open_journal`] (a failed
    /// append names the journal's path).
    pub fn append_journal(
        &mut self,
        writer: &mut JournalWriter,
        body: &impl serde::Serialize,
    ) -> Result<(), StoreError> {
        let now = self.clock.wall();
        writer.append(&mut self.ledger.fs, now, std::slice::from_ref(body))?;
        Ok(())
    }

    /// Appends a `work.reconciled` receipt when the projected state, reason or next action
    /// differs from the last receipt, unless another process is running an attempt (its
    /// runner appends one when it ends); returns the item and whether a receipt was written.
    pub fn reconcile(&mut self, id: &Id, actor: &str) -> Result<(Item, bool), StoreError> {
        let _lock = self.lock_events(id)?;
        let item = self.read_fresh(id)?;
        if runner_live(&self.root, &self.held, id) {
            return Ok((item, false));
        }
        let now = self.now();
        if !self.ledger.reconcile(&item, actor, now)? {
            return Ok((item, false));
        }
        Ok((self.read_fresh(id)?, true))
    }

    /// Reaps every run whose host died (see [`harn_core::work::live::recover`]): what it left
    /// running is killed by `reap` (given the root), its transcript says so and its record
    /// goes. Runners call it before they start anything.
    pub fn recover(
        &mut self,
        reap: fn(&Path, &harn_core::work::live::LiveRun) -> usize,
    ) -> Result<harn_core::work::live::Recovered, StoreError> {
        let now = self.now();
        let (root, held) = (&self.root, &self.held);
        let mut lease_free = |live: &harn_core::work::live::LiveRun| {
            !probe(root, held, &lease_of(&live.work_id, &live.run_id, live.planning))
        };
        let mut kill = |live: &harn_core::work::live::LiveRun| reap(root, live);
        Ok(harn_core::work::live::recover(&mut self.ledger, &mut lease_free, &mut kill, now)?)
    }

    /// Runs whose host is gone (their lease free) and that left processes behind, with how
    /// many (`count` says, reading only): what a read reports until a run, retry, cancel,
    /// tick or the service's sweep reaps them. `only` narrows it to one item's runs.
    pub fn lost_runs(
        &mut self,
        only: Option<&Id>,
        count: fn(&Path, &harn_core::work::live::LiveRun) -> usize,
    ) -> Vec<(harn_core::work::live::LiveRun, usize)> {
        let Ok((live, _)) = self.ledger.live_runs() else { return Vec::new() };
        let (root, held) = (&self.root, &self.held);
        live.into_iter()
            .filter(|l| only.is_none_or(|id| l.work_id == *id))
            .filter(|l| !probe(root, held, &lease_of(&l.work_id, &l.run_id, l.planning)))
            .map(|l| {
                let n = count(root, &l);
                (l, n)
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Takes `id`'s run lease for the life of this store, or says who holds it.
    pub fn lock_run(&mut self, id: &Id) -> Result<(), StoreError> {
        if !self.hold(&run_lock(id))? {
            return Err(StoreError::refused(format!(
                "work item {id} is being run by another process"
            )));
        }
        Ok(())
    }

    /// Takes the lease `lock` (a flock on that file) for the life of this store; false when
    /// another process holds it.
    pub fn hold(&mut self, lock: &str) -> Result<bool, StoreError> {
        if self.held.contains(lock) {
            return Ok(true);
        }
        if let Some(dir) = lock.rsplit_once('/').map(|(d, _)| d) {
            self.ledger.fs.create_dir_all(dir).map_err(StoreError::from)?;
        }
        // A reader's probe (`held_elsewhere`) holds the lock for a few microseconds; a few
        // short retries keep it from ever being mistaken for a live holder.
        for attempt in 0..LEASE_TRIES {
            if self.ledger.fs.try_lock(lock).map_err(StoreError::from)? {
                self.held.insert(lock.to_owned());
                // Taking a lease changes what its record shows (running): readers of the
                // indexes learn it from the change log.
                self.ledger.note(lock)?;
                return Ok(true);
            }
            if attempt + 1 < LEASE_TRIES {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        Ok(false)
    }

    /// True while another process holds the lease `lock`.
    pub fn held_elsewhere(&self, lock: &str) -> bool {
        probe(&self.root, &self.held, lock)
    }

    /// The bytes of one of a run's records, when present.
    pub fn run_record_bytes(
        &mut self,
        run_id: &Id,
        name: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.ledger.fs.read(&format!("{}/{name}", run_dir(run_id))).map_err(StoreError::from)
    }

    /// A run's manifest and proof, each when present.
    pub fn run_records(
        &mut self,
        run_id: &Id,
    ) -> Result<(Option<RunManifest>, Option<Proof>), StoreError> {
        Ok(self.ledger.run_records(run_id)?)
    }

    /// The bytes of a file under the root, when present.
    pub fn read_bytes(&mut self, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.ledger.fs.read(path).map_err(StoreError::from)
    }

    /// A JSON record under the root, when present; a malformed one names file and line.
    pub fn read_record<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.ledger.read_json(path)?)
    }

    /// The core ledger, for the durable steps of an attempt.
    pub fn ledger(&mut self) -> &mut Ledger<RealFs> {
        &mut self.ledger
    }

    /// Writes a file under the root whole (temporary name, fsync, rename).
    pub fn write_file(&mut self, path: &str, bytes: &[u8]) -> Result<(), StoreError> {
        harn_core::atomic::atomic_replace(&mut self.ledger.fs, path, bytes)
            .map_err(StoreError::from)
    }

    /// Writes a run record once, whole (see [`Ledger::write_record`]). Returns its bytes.
    pub fn write_run_record(
        &mut self,
        run_id: &Id,
        name: &str,
        record: &impl serde::Serialize,
    ) -> Result<Vec<u8>, StoreError> {
        Ok(self.ledger.write_record(&run_dir(run_id), name, record)?)
    }

    /// Writes `dir/name` once: temporary name, fsync, hard link into place (refused if it
    /// exists), directory fsync. Returns its bytes.
    pub fn write_once(
        &mut self,
        dir: &str,
        name: &str,
        record: &impl serde::Serialize,
    ) -> Result<Vec<u8>, StoreError> {
        let err = StoreError::from;
        self.ledger.note(&format!("{dir}/{name}"))?;
        self.ledger.fs.create_dir_all(dir).map_err(err)?;
        let mut bytes = serde_json::to_vec_pretty(record).expect("run records serialize");
        bytes.push(b'\n');
        // Written whole under a temporary name, then linked into place: a crash never leaves
        // a partial record that would make every later read of the item fail.
        let temp_name = format!(".{name}.{}.tmp", std::process::id());
        let temp = format!("{dir}/{temp_name}");
        self.ledger.fs.write_temp(&temp, &bytes).map_err(err)?;
        self.ledger.fs.sync_file(&temp).map_err(err)?;
        let full = self.root.join(format!("{dir}/{name}"));
        let linked = crate::os::private::Dir::open(&self.root, dir, false).and_then(|d| {
            let linked = d.link(&temp_name, &d, name);
            let _ = d.remove(&temp_name);
            // The next writer of the directory sweeps what a killed one left.
            d.sweep_residue();
            linked
        });
        linked.map_err(|e| StoreError::Os(format!("{}: {e}", full.display())))?;
        self.ledger.fs.sync_dir(dir).map_err(err)?;
        Ok(bytes)
    }

    /// Creates a work item in the core's one protocol (`Ledger::create_item`: its creation
    /// event first, then its intent whole), so a kill leaves it absent, or pending and
    /// completed by the same `create` run again. Refused if the item exists.
    pub fn create(&mut self, intent: &WorkIntent, actor: &str) -> Result<(), StoreError> {
        let parent = harn_core::layout::WORK;
        self.ledger.fs.create_dir_all(parent).map_err(StoreError::from)?;
        // Temporary files and staging directories of writers a kill cut short go first
        // (earlier versions staged a whole item and renamed it into place).
        if let Ok(work) = crate::os::private::Dir::open(&self.root, parent, false) {
            work.sweep_residue();
        }
        // Under the item's history lock: two creators of one id never both write its first
        // event or its intent; the second finds the item made.
        let _lock = self.lock_events(&intent.id)?;
        self.ledger.create_item(intent, actor, None).map(drop).map_err(StoreError::from)
    }

    /// True when `id` is a creation a kill cut short (see `Ledger::creation_pending`).
    pub fn creation_pending(&mut self, id: &Id) -> bool {
        self.ledger.creation_pending(id).unwrap_or(false)
    }

    /// Takes `id`'s history lock (flock on `events.lock`), waiting a little for another
    /// writer. Hold it across a read, a decision and the append it leads to, so no other
    /// writer changes the history in between; dropping it releases it.
    pub fn lock_events(&self, id: &Id) -> Result<EventsLock, StoreError> {
        let file = self.lock_file(&format!("{}/events.lock", dir_of(id))).map_err(|e| match e {
            StoreError::Busy(_) => {
                StoreError::refused(format!("work item {id} is being written by another process"))
            }
            e => e,
        })?;
        Ok(EventsLock { _file: file, id: id.clone() })
    }

    /// Takes the writer's lock `path` (a flock, its directory made if needed), waiting a
    /// little for another writer; dropping the file releases it.
    pub fn lock_file(&self, path: &str) -> Result<std::fs::File, StoreError> {
        let shown = self.root.join(path);
        let (dir, name) = path.rsplit_once('/').unwrap_or((".", path));
        let file = crate::os::private::Dir::open(&self.root, dir, true)
            .and_then(|d| d.open_lock(name))
            .map_err(|e| StoreError::Os(format!("{}: {e}", shown.display())))?;
        let started = std::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(StoreError::Busy(shown.display().to_string()));
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(StoreError::Os(format!("{}: {e}", shown.display())));
                }
            }
        }
    }

    /// Takes `id`'s history lock, then reads it: for a decision that ends in an append.
    pub fn lock_and_read(&mut self, id: &Id) -> Result<(EventsLock, Item), StoreError> {
        if !self.exists(id) {
            return Err(StoreError::refused(format!("no work item {id}")));
        }
        let lock = self.lock_events(id)?;
        let item = self.read(id, &mut Known::new())?;
        Ok((lock, item))
    }

    /// Appends one event to `id`'s history with the next sequence number, under its lock.
    pub fn append(
        &mut self,
        lock: &EventsLock,
        kind: EventKind,
        actor: &str,
        reason: Option<String>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        self.ledger.append(&lock.id, kind, actor, reason, now)?;
        Ok(())
    }
}

/// A held history lock; see [`Store::lock_events`].
pub struct EventsLock {
    _file: std::fs::File,
    id: Id,
}

/// True while another process holds `id`'s run lease (this process's own hold, in `held`,
/// does not count, so a runner re-reads its item as others would see it without it).
fn runner_live(root: &Path, held: &std::collections::BTreeSet<String>, id: &Id) -> bool {
    probe(root, held, &run_lock(id))
}

/// This boot's id (Linux's `/proc/sys/kernel/random/boot_id`), empty when unknown: an index
/// is trusted on the change log only within the boot it was written in.
fn boot_id() -> String {
    crate::os::procfs::boot_id()
}

/// True while a process other than this one holds `lock`.
fn probe(root: &Path, held: &std::collections::BTreeSet<String>, lock: &str) -> bool {
    if held.contains(lock) {
        return false;
    }
    // A probe takes the lock shared for an instant: a holder (always exclusive) refuses it,
    // another probe does not, so two readers never take each other for a runner (a service's
    // read while `approval approve` looks). A runner starting at that very instant may be
    // told the item is busy; a probe never makes a dead runner look alive.
    match std::fs::File::open(root.join(lock)) {
        Ok(file) => matches!(file.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

/// `typed` completed to the one of `ids` it is a prefix of; bad input (exit 2) when none is,
/// `no KIND TYPED`, as an unknown name is, and naming them when several are.
pub fn complete<'a>(
    typed: &str,
    ids: impl Iterator<Item = &'a str>,
    kind: &str,
) -> Result<String, Failure> {
    let matches: Vec<&str> = ids.filter(|id| id.starts_with(typed)).collect();
    // An exact id wins over the longer ones it begins.
    if matches.contains(&typed) {
        return Ok(typed.to_owned());
    }
    match matches.as_slice() {
        [] => Err(Failure::new(crate::exit::EXIT_USAGE, format!("no {kind} {typed}"))),
        [one] => Ok((*one).to_owned()),
        many => {
            let shown: Vec<&str> = many.iter().take(8).copied().collect();
            let more = if many.len() > 8 {
                format!(" and {} more", many.len() - 8)
            } else {
                String::new()
            };
            Err(Failure::new(
                crate::exit::EXIT_USAGE,
                format!(
                    "{typed:?} is the start of {} {kind} ids ({}{more}): type more of it",
                    many.len(),
                    shown.join(", ")
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::probe;
    use std::collections::BTreeSet;

    #[test]
    fn a_probe_sees_a_holder_and_never_another_probe() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.lock");
        let other = std::fs::File::create(&path).unwrap();
        let none = BTreeSet::new();
        assert!(!probe(dir.path(), &none, "run.lock"), "nobody holds it");
        other.try_lock_shared().unwrap(); // another process, probing at this instant
        assert!(!probe(dir.path(), &none, "run.lock"), "a probe is no runner");
        other.unlock().unwrap();
        other.try_lock().unwrap(); // a runner
        assert!(probe(dir.path(), &none, "run.lock"));
        let held: BTreeSet<String> = ["run.lock".to_owned()].into();
        assert!(!probe(dir.path(), &held, "run.lock"), "this process's own hold does not count");
    }
}
