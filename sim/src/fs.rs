//! The simulated filesystem: an in-memory [`Fs`] that keeps durable and pending state apart, so
//! a simulated crash loses exactly what a real kernel may lose (docs/SIMULATION.md).
//!
//! # Durability model
//!
//! - Every file is an inode with *current* bytes and *durable* bytes. `sync_file` makes the
//!   current bytes durable.
//! - Every directory maps names to inodes twice: a durable map and a set of pending changes
//!   (new, replaced or removed names). `sync_dir` makes the pending changes of that directory
//!   durable. So `create_new`, `write_temp` of a new file and `rename` survive a crash only
//!   once the parent is synced, and so does `remove`.
//! - Directories themselves are durable at once: `create_dir_all` promises to sync the parents
//!   it changes, and nothing removes a directory.
//! - [`SimFs::crash`] reverts every directory to its durable map and every file to its durable
//!   bytes, except that pending bytes that extend the durable ones (an append) may survive as
//!   any drawn prefix: nothing, all of it, or a torn part. All locks are released.
//!
//! Faults come on demand: [`SimFs::fail_next`] makes the next call fail with no effect, and
//! [`SimFs::crash_after`] makes a later call the moment of the crash, after which every call
//! fails with [`FsErrorKind::Crashed`] until [`SimFs::crash`] runs.

use crate::entropy::Entropy;
use harn_core::env::{parent_dir, Fs, FsError, FsErrorKind};
use harn_core::hash::Fnv64;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

type Ino = u64;

/// The times [`SimFs`]'s `meta` gives fall within this many nanoseconds of the epoch.
const META_TIME_SPAN: u64 = 1_000_000_000_000_000;

/// What a directory entry names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    File(Ino),
    Dir,
}

/// One file's bytes. The durable bytes are `data[..common]` followed by `durable_tail`, so the
/// common case (appends, then a sync) never copies the file.
#[derive(Clone, Debug)]
struct Inode {
    data: Vec<u8>,
    common: usize,
    durable_tail: Vec<u8>,
    /// Directory entries, durable or pending, that name this inode; freed at zero.
    links: u32,
    /// Changes of the durable bytes so far: with the inode number, a stamp that tells a
    /// reader its copy of them is still current without comparing bytes.
    durable_changes: u64,
}

impl Inode {
    fn new(bytes: &[u8]) -> Inode {
        Inode {
            data: bytes.to_vec(),
            common: 0,
            durable_tail: Vec::new(),
            links: 0,
            durable_changes: 0,
        }
    }

    fn durable_len(&self) -> usize {
        self.common + self.durable_tail.len()
    }

    fn durable_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.durable_len());
        out.extend_from_slice(&self.data[..self.common]);
        out.extend_from_slice(&self.durable_tail);
        out
    }

    fn append(&mut self, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
    }

    fn truncate(&mut self, len: usize) {
        if len < self.common {
            // Durable bytes are about to leave `data`: keep them aside for a crash.
            let mut cut = self.data.split_off(len);
            cut.truncate(self.common - len);
            cut.extend_from_slice(&self.durable_tail);
            self.durable_tail = cut;
            self.common = len;
        }
        self.data.resize(len, 0);
    }

    fn sync(&mut self) {
        self.common = self.data.len();
        self.durable_tail.clear();
        self.durable_changes += 1;
    }

    /// Reverts to the durable bytes, keeping a drawn prefix of pending bytes that only extend
    /// them. Afterwards everything left is durable.
    fn crash(&mut self, entropy: &mut dyn Entropy) {
        if !self.durable_tail.is_empty() && self.data[self.common..].starts_with(&self.durable_tail)
        {
            self.common += self.durable_tail.len();
            self.durable_tail.clear();
        }
        if self.durable_tail.is_empty() {
            let pending = self.data.len() - self.common;
            let keep = if pending == 0 { 0 } else { draw_torn_len(entropy, pending) };
            self.data.truncate(self.common + keep);
        } else {
            let tail = std::mem::take(&mut self.durable_tail);
            self.data.truncate(self.common);
            self.data.extend_from_slice(&tail);
        }
        self.common = self.data.len();
        // Torn bytes that survived are durable now.
        self.durable_changes += 1;
    }
}

/// How many of `pending` unsynced appended bytes a crash keeps. Whole-or-nothing outcomes get
/// their own weight, since a uniform draw would almost never keep a long tail whole; an
/// exhausted fuzz source (always 0) keeps nothing.
fn draw_torn_len(entropy: &mut dyn Entropy, pending: usize) -> usize {
    match entropy.below(4) {
        0 => 0,
        1 => pending,
        _ => entropy.below(pending as u64 + 1) as usize,
    }
}

/// One directory: per name, what a crash would keep (`durable`) and what the name means now
/// (`current`); they differ for a change not yet made durable by `sync_dir` (a `None` current
/// is a removal). One map, so a call finds a name with one search. A name neither durable
/// nor current is not kept.
#[derive(Clone, Debug, Default)]
struct Dir {
    entries: BTreeMap<String, Entry>,
    /// Names whose current node differs from their durable one.
    pending: usize,
}

/// One name of a [`Dir`]. The durable node holds one link on its inode, and a current node
/// that differs from it holds another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    durable: Option<Node>,
    current: Option<Node>,
}

impl Entry {
    fn is_pending(&self) -> bool {
        self.durable != self.current
    }
}

impl Dir {
    fn get(&self, name: &str) -> Option<Node> {
        self.entries.get(name).and_then(|e| e.current)
    }

    fn durable(&self, name: &str) -> Option<Node> {
        self.entries.get(name).and_then(|e| e.durable)
    }

    /// Points `name` at `node` in the current namespace, keeping inode link counts exact.
    fn set(&mut self, name: &str, node: Option<Node>, inodes: &mut BTreeMap<Ino, Inode>) {
        let entry = match self.entries.get_mut(name) {
            Some(entry) => entry,
            None if node.is_none() => return,
            None => self
                .entries
                .entry(name.to_owned())
                .or_insert(Entry { durable: None, current: None }),
        };
        if entry.current == node {
            return;
        }
        let was_pending = entry.is_pending();
        if was_pending {
            if let Some(Node::File(old)) = entry.current {
                unlink(inodes, old);
            }
        }
        entry.current = node;
        let pending = entry.is_pending();
        if pending {
            if let Some(Node::File(ino)) = node {
                link(inodes, ino);
            }
        }
        let gone = entry.durable.is_none() && entry.current.is_none();
        match (was_pending, pending) {
            (false, true) => self.pending += 1,
            (true, false) => self.pending -= 1,
            _ => {}
        }
        if gone {
            self.entries.remove(name);
        }
    }

    /// Makes a directory named `name` durable at once, replacing whatever the name meant.
    fn set_durable_dir(&mut self, name: &str, inodes: &mut BTreeMap<Ino, Inode>) {
        if let Some(old) = self.entries.remove(name) {
            if old.is_pending() {
                self.pending -= 1;
                if let Some(Node::File(ino)) = old.current {
                    unlink(inodes, ino);
                }
            }
            if let Some(Node::File(ino)) = old.durable {
                unlink(inodes, ino);
            }
        }
        let dir = Some(Node::Dir);
        self.entries.insert(name.to_owned(), Entry { durable: dir, current: dir });
    }

    fn sync(&mut self, inodes: &mut BTreeMap<Ino, Inode>) {
        if self.pending == 0 {
            return;
        }
        self.entries.retain(|_, e| {
            if e.is_pending() {
                // The current entry's link becomes the durable entry's link.
                if let Some(Node::File(ino)) = e.durable {
                    unlink(inodes, ino);
                }
                e.durable = e.current;
            }
            e.current.is_some()
        });
        self.pending = 0;
    }

    fn crash(&mut self, inodes: &mut BTreeMap<Ino, Inode>) {
        if self.pending == 0 {
            return;
        }
        self.entries.retain(|_, e| {
            if e.is_pending() {
                if let Some(Node::File(ino)) = e.current {
                    unlink(inodes, ino);
                }
                e.current = e.durable;
            }
            e.durable.is_some()
        });
        self.pending = 0;
    }

    fn names(&self) -> Vec<String> {
        self.entries.iter().filter(|(_, e)| e.current.is_some()).map(|(n, _)| n.clone()).collect()
    }
}

fn link(inodes: &mut BTreeMap<Ino, Inode>, ino: Ino) {
    inodes.get_mut(&ino).expect("a linked inode exists").links += 1;
}

fn unlink(inodes: &mut BTreeMap<Ino, Inode>, ino: Ino) {
    let inode = inodes.get_mut(&ino).expect("an unlinked inode exists");
    assert!(inode.links > 0, "inode {ino} unlinked more often than linked");
    inode.links -= 1;
    if inode.links == 0 {
        inodes.remove(&ino);
    }
}

/// The directories by path, found through a one-entry cache: nearly every call names the same
/// directory as the call before, and a path compared once costs less than a search of the
/// map. Directories are never removed, so an index stays valid.
#[derive(Clone, Debug)]
struct Dirs {
    index: BTreeMap<String, usize>,
    list: Vec<Dir>,
    paths: Vec<String>,
    last: std::cell::Cell<usize>,
}

impl Dirs {
    fn with_root() -> Dirs {
        Dirs {
            index: BTreeMap::from([(String::new(), 0)]),
            list: vec![Dir::default()],
            paths: vec![String::new()],
            last: std::cell::Cell::new(0),
        }
    }

    fn position(&self, path: &str) -> Option<usize> {
        let last = self.last.get();
        if self.paths[last] == path {
            return Some(last);
        }
        let found = *self.index.get(path)?;
        self.last.set(found);
        Some(found)
    }

    fn get(&self, path: &str) -> Option<&Dir> {
        self.position(path).map(|i| &self.list[i])
    }

    fn get_mut(&mut self, path: &str) -> Option<&mut Dir> {
        self.position(path).map(|i| &mut self.list[i])
    }

    #[cfg(test)]
    fn contains_key(&self, path: &str) -> bool {
        self.index.contains_key(path)
    }

    fn insert(&mut self, path: String, dir: Dir) {
        match self.index.get(&path) {
            Some(&i) => self.list[i] = dir,
            None => {
                self.index.insert(path.clone(), self.list.len());
                self.list.push(dir);
                self.paths.push(path);
            }
        }
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Dir> {
        self.list.iter_mut()
    }

    /// Every directory in path order.
    fn iter(&self) -> impl Iterator<Item = (&String, &Dir)> {
        self.index.iter().map(|(path, &i)| (path, &self.list[i]))
    }
}

impl<'a> IntoIterator for &'a Dirs {
    type Item = (&'a String, &'a Dir);
    type IntoIter = Box<dyn Iterator<Item = (&'a String, &'a Dir)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

/// Counts of the calls a [`SimFs`] performed, for the simulator's reports and budgets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimFsStats {
    /// Every call, including refused ones.
    pub calls: u64,
    /// Calls refused by [`SimFs::fail_next`].
    pub injected_errors: u64,
    /// Calls refused because the host had crashed.
    pub refused_crashed: u64,
    /// `read` calls performed.
    pub reads: u64,
    /// `list` calls performed.
    pub lists: u64,
    /// `create_new`, `write_temp`, `append` and `truncate` calls performed.
    pub writes: u64,
    /// Bytes passed to the write calls.
    pub bytes_written: u64,
    /// `sync_file` calls performed.
    pub file_syncs: u64,
    /// `sync_dir` calls performed.
    pub dir_syncs: u64,
    /// `create_dir_all` calls performed.
    pub dir_creates: u64,
    /// `rename` calls performed.
    pub renames: u64,
    /// `remove` calls performed.
    pub removes: u64,
    /// `try_lock` calls performed.
    pub locks: u64,
    /// Crashes applied by [`SimFs::crash`].
    pub crashes: u64,
}

/// The simulated filesystem. Paths are `/`-separated and relative to a root that always exists.
#[derive(Clone, Debug)]
pub struct SimFs {
    /// Every directory by path; `""` is the root.
    dirs: Dirs,
    inodes: BTreeMap<Ino, Inode>,
    next_ino: Ino,
    locks: BTreeSet<String>,
    fail_next: Option<FsErrorKind>,
    /// A call to fail later: after this many more calls, with this kind.
    fail_countdown: Option<(u64, FsErrorKind)>,
    crash_countdown: Option<u64>,
    crashed: bool,
    stats: SimFsStats,
    /// Bumped by everything that may change what a crash would keep: file and directory
    /// syncs, new directories, crashes and foreign writes. While it stands still, every
    /// durable byte and name does too.
    durable_epoch: u64,
    /// A planted bug: `sync_dir` does nothing (test builds only).
    lying_dir_sync: bool,
}

impl Default for SimFs {
    fn default() -> SimFs {
        SimFs::new()
    }
}

impl SimFs {
    /// An empty filesystem holding only the root directory.
    pub fn new() -> SimFs {
        SimFs {
            dirs: Dirs::with_root(),
            inodes: BTreeMap::new(),
            next_ino: 1,
            locks: BTreeSet::new(),
            fail_next: None,
            fail_countdown: None,
            crash_countdown: None,
            crashed: false,
            stats: SimFsStats::default(),
            durable_epoch: 0,
            lying_dir_sync: false,
        }
    }

    /// Makes the next call fail with `kind` (EIO or ENOSPC in practice) and change nothing.
    pub fn fail_next(&mut self, kind: FsErrorKind) {
        assert!(kind != FsErrorKind::Crashed, "use crash_after to inject a crash");
        self.fail_next = Some(kind);
    }

    /// After `ops` more calls, the next call fails with `kind` (EIO or ENOSPC in practice)
    /// and changes nothing; the calls after it work again.
    pub fn fail_after(&mut self, ops: u64, kind: FsErrorKind) {
        assert!(kind != FsErrorKind::Crashed, "use crash_after to inject a crash");
        self.fail_countdown = Some((ops, kind));
    }

    /// Cancels a fault armed with [`SimFs::fail_after`] that has not fired yet (a crash armed
    /// stays armed).
    pub fn cancel_fail_after(&mut self) {
        self.fail_countdown = None;
    }

    /// After `ops` more calls, the next call is the crash: it fails with
    /// [`FsErrorKind::Crashed`] without effect, and so does every call after it until
    /// [`SimFs::crash`] is applied. `crash_after(0)` crashes the very next call.
    pub fn crash_after(&mut self, ops: u64) {
        self.crash_countdown = Some(ops);
    }

    /// True between the crashing call and [`SimFs::crash`].
    pub fn is_crashed(&self) -> bool {
        self.crashed
    }

    /// Applies a crash: the namespace reverts to the durable one, every file to its durable
    /// bytes (an unsynced append may survive in part, as drawn from `entropy`), all locks are
    /// released and pending faults are cleared. Afterwards the filesystem works again.
    pub fn crash(&mut self, entropy: &mut dyn Entropy) {
        for dir in self.dirs.values_mut() {
            dir.crash(&mut self.inodes);
        }
        for inode in self.inodes.values_mut() {
            inode.crash(entropy);
        }
        self.locks.clear();
        self.fail_next = None;
        self.fail_countdown = None;
        self.crash_countdown = None;
        self.crashed = false;
        self.stats.crashes += 1;
        self.durable_epoch += 1;
    }

    /// The process using the filesystem died, but the host did not: nothing written is lost
    /// (the kernel keeps unsynced bytes), the crash that stopped it is over, and its locks
    /// are released.
    pub fn process_died(&mut self) {
        self.crashed = false;
        self.crash_countdown = None;
        self.fail_next = None;
        self.fail_countdown = None;
        self.locks.clear();
    }

    /// Cancels any injected fault or pending crash that has not fired yet.
    pub fn clear_faults(&mut self) {
        self.fail_next = None;
        self.fail_countdown = None;
        self.crash_countdown = None;
    }

    /// Releases every lock, as when the process holding them exits cleanly.
    pub fn release_locks(&mut self) {
        self.locks.clear();
    }

    /// What a crash right now would keep of `path`, ignoring torn appends; `None` if the file
    /// would not exist.
    pub fn durable_read(&self, path: &str) -> Option<Vec<u8>> {
        self.durable_bytes(path).map(Cow::into_owned)
    }

    /// Plants a bug: from now on `sync_dir` succeeds without syncing, so new and renamed
    /// files never become durable (for proving that a world's checks find the loss).
    #[cfg(feature = "planted-bugs")]
    pub fn lie_about_dir_sync(&mut self) {
        self.lying_dir_sync = true;
    }

    /// Changes whenever anything durable may have changed (see the field); equal epochs
    /// mean nothing a crash would keep changed in between.
    pub fn durable_epoch(&self) -> u64 {
        self.durable_epoch
    }

    /// Which durable bytes `path` names now: its inode and how often their durable bytes
    /// changed. Equal stamps mean equal durable bytes; `None` if the file would not exist
    /// after a crash.
    pub fn durable_stamp(&self, path: &str) -> Option<(u64, u64)> {
        let dir = self.dirs.get(parent_dir(path))?;
        match dir.durable(base_name(path))? {
            Node::File(ino) => Some((ino, self.inodes[&ino].durable_changes)),
            Node::Dir => None,
        }
    }

    /// [`SimFs::durable_read`] without a copy when the durable bytes are a prefix of the
    /// current ones (always, except after a truncation not yet synced).
    pub fn durable_bytes(&self, path: &str) -> Option<Cow<'_, [u8]>> {
        let dir = self.dirs.get(parent_dir(path))?;
        match dir.durable(base_name(path))? {
            Node::File(ino) => {
                let inode = &self.inodes[&ino];
                Some(match inode.durable_tail.is_empty() {
                    true => Cow::Borrowed(&inode.data[..inode.common]),
                    false => Cow::Owned(inode.durable_bytes()),
                })
            }
            Node::Dir => None,
        }
    }

    /// Another process writes `bytes` into `path` at `offset` (extending it if needed) and
    /// syncs it, as a foreign writer or a damaged disk would: harn's code never sees the write
    /// happen, only its result. Returns false (and changes nothing) when `path` is not a file.
    pub fn foreign_write(&mut self, path: &str, offset: usize, bytes: &[u8]) -> bool {
        let Some(Node::File(ino)) =
            self.dirs.get(parent_dir(path)).and_then(|d| d.get(base_name(path)))
        else {
            return false;
        };
        let inode = self.inodes.get_mut(&ino).expect("a named inode exists");
        let end = offset + bytes.len();
        if inode.data.len() < end {
            inode.data.resize(end, 0);
        }
        inode.data[offset..end].copy_from_slice(bytes);
        inode.sync();
        self.durable_epoch += 1;
        true
    }

    /// Damages the last complete line of `path` whole, keeping its newline: one drawn byte of
    /// it changes (never into a newline) and the change is durable. Returns the damaged bytes,
    /// or `None` when the file has no complete line.
    pub fn damage_last_line(&mut self, path: &str, entropy: &mut dyn Entropy) -> Option<Vec<u8>> {
        let bytes = self.current_bytes(path)?;
        let end = bytes.iter().rposition(|&b| b == b'\n')?;
        let start = bytes[..end].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if start == end {
            return None;
        }
        let at = start + entropy.below((end - start) as u64) as usize;
        let mut changed = bytes[at] ^ (1 + entropy.below(255) as u8);
        if changed == b'\n' {
            changed = if bytes[at] == b'#' { b'%' } else { b'#' };
        }
        self.foreign_write(path, at, &[changed]);
        self.current_bytes(path)
    }

    /// The current bytes of `path`, without counting a call.
    fn current_bytes(&self, path: &str) -> Option<Vec<u8>> {
        match self.dirs.get(parent_dir(path))?.get(base_name(path))? {
            Node::File(ino) => Some(self.inodes[&ino].data.clone()),
            Node::Dir => None,
        }
    }

    /// The calls performed so far.
    pub fn stats(&self) -> SimFsStats {
        self.stats
    }

    /// A deterministic FNV-1a hash of the whole state: every name, current and durable, every
    /// file's current and durable bytes, and the locks. Costs one pass over the entries, not
    /// over the bytes, because file hashes are kept up to date as bytes change.
    pub fn state_hash(&self) -> u64 {
        let mut h = Fnv64::default();
        for (path, dir) in &self.dirs {
            put_str(&mut h, path);
            for (name, e) in dir.entries.iter().filter(|(_, e)| e.durable.is_some()) {
                put_str(&mut h, name);
                self.put_node(&mut h, e.durable);
            }
            h.write(b"|");
            for (name, e) in dir.entries.iter().filter(|(_, e)| e.is_pending()) {
                put_str(&mut h, name);
                self.put_node(&mut h, e.current);
            }
        }
        for path in &self.locks {
            put_str(&mut h, path);
        }
        h.write(&[u8::from(self.crashed)]);
        h.finish()
    }

    fn put_node(&self, h: &mut Fnv64, node: Option<Node>) {
        match node {
            None => h.write(b"-"),
            Some(Node::Dir) => h.write(b"d"),
            Some(Node::File(ino)) => {
                let inode = &self.inodes[&ino];
                h.write(b"f");
                // Hashed here, when asked, not at every write: only tests ask.
                h.write(&harn_core::hash::fnv64(&inode.data).to_le_bytes());
                h.write(&harn_core::hash::fnv64(&inode.durable_bytes()).to_le_bytes());
                h.write(&(inode.data.len() as u64).to_le_bytes());
                h.write(&(inode.durable_len() as u64).to_le_bytes());
            }
        }
    }

    /// Counts the call and applies injected faults; `Err` means the call has no effect.
    fn begin(&mut self, path: &str) -> Result<(), FsError> {
        self.stats.calls += 1;
        if !self.crashed && self.crash_countdown == Some(0) {
            self.crashed = true;
            self.crash_countdown = None;
        }
        if self.crashed {
            self.stats.refused_crashed += 1;
            return Err(FsError::new(FsErrorKind::Crashed, path, "the host crashed"));
        }
        if let Some(n) = &mut self.crash_countdown {
            *n -= 1;
        }
        let due = match &mut self.fail_countdown {
            Some((0, kind)) => Some(*kind),
            Some((n, _)) => {
                *n -= 1;
                None
            }
            None => None,
        };
        if let Some(kind) = due.or_else(|| self.fail_next.take()) {
            if due.is_some() {
                self.fail_countdown = None;
            }
            self.stats.injected_errors += 1;
            return Err(FsError::new(kind, path, "injected fault"));
        }
        Ok(())
    }

    fn lookup(&self, path: &str) -> Option<Node> {
        let (dir, name) = split(path);
        self.dirs.get(dir)?.get(name)
    }

    fn file(&self, path: &str) -> Result<Ino, FsError> {
        match self.lookup(path) {
            Some(Node::File(ino)) => Ok(ino),
            Some(Node::Dir) => Err(FsError::new(FsErrorKind::Other, path, "is a directory")),
            None => Err(FsError::new(FsErrorKind::NotFound, path, "no such file")),
        }
    }

    fn inode_mut(&mut self, path: &str) -> Result<&mut Inode, FsError> {
        let ino = self.file(path)?;
        Ok(self.inodes.get_mut(&ino).expect("a named inode exists"))
    }

    /// Names a new inode holding `bytes` at `path`, whose parent must exist.
    fn create(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        let dir = self
            .dirs
            .get_mut(parent_dir(path))
            .ok_or_else(|| FsError::new(FsErrorKind::NotFound, path, "no such directory"))?;
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, Inode::new(bytes));
        dir.set(base_name(path), Some(Node::File(ino)), &mut self.inodes);
        Ok(())
    }

    fn wrote(&mut self, bytes: usize) {
        self.stats.writes += 1;
        self.stats.bytes_written += bytes as u64;
    }
}

/// A path's directory and name, found with one search.
fn split(path: &str) -> (&str, &str) {
    let dir = parent_dir(path);
    let name = if dir.is_empty() && !path.starts_with('/') { path } else { &path[dir.len() + 1..] };
    (dir, name)
}

fn base_name(path: &str) -> &str {
    match path.bytes().rposition(|b| b == b'/') {
        Some(slash) => &path[slash + 1..],
        None => path,
    }
}

fn put_str(h: &mut Fnv64, s: &str) {
    h.write(&(s.len() as u64).to_le_bytes());
    h.write(s.as_bytes());
}

/// Refuses paths the core never produces: absolute, empty components, `.` or `..`.
fn check_path(path: &str, allow_root: bool) -> Result<(), FsError> {
    if path.is_empty() {
        return if allow_root {
            Ok(())
        } else {
            Err(FsError::new(FsErrorKind::Other, path, "empty path"))
        };
    }
    // One pass over the bytes (every call checks its path): no component may be empty,
    // `.` or `..`.
    let plain = path.as_bytes().split(|&b| b == b'/').all(|c| !matches!(c, b"" | b"." | b".."));
    if !plain {
        return Err(FsError::new(FsErrorKind::Other, path, "not a plain relative path"));
    }
    Ok(())
}

impl Fs for SimFs {
    fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        self.begin(path)?;
        check_path(path, false)?;
        self.stats.reads += 1;
        match self.lookup(path) {
            None => Ok(None),
            Some(Node::Dir) => Err(FsError::new(FsErrorKind::Other, path, "is a directory")),
            Some(Node::File(ino)) => Ok(Some(self.inodes[&ino].data.clone())),
        }
    }

    fn list(&mut self, dir: &str) -> Result<Vec<String>, FsError> {
        self.begin(dir)?;
        check_path(dir, true)?;
        self.stats.lists += 1;
        Ok(self.dirs.get(dir).map(Dir::names).unwrap_or_default())
    }

    fn create_dir_all(&mut self, dir: &str) -> Result<(), FsError> {
        self.begin(dir)?;
        check_path(dir, true)?;
        self.stats.dir_creates += 1;
        let mut parent = String::new();
        for name in dir.split('/').filter(|c| !c.is_empty()) {
            let child =
                if parent.is_empty() { name.to_owned() } else { format!("{parent}/{name}") };
            let entries = self.dirs.get_mut(&parent).expect("every prefix was created first");
            match entries.get(name) {
                Some(Node::Dir) => {}
                Some(Node::File(_)) => {
                    return Err(FsError::new(FsErrorKind::Other, &child, "not a directory"));
                }
                None => {
                    // Durable at once: the contract syncs every parent it changes. If a durable
                    // file of this name was removed (a pending change), the directory replaces it.
                    entries.set_durable_dir(name, &mut self.inodes);
                    self.dirs.insert(child.clone(), Dir::default());
                    self.durable_epoch += 1;
                }
            }
            parent = child;
        }
        Ok(())
    }

    fn create_new(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.begin(path)?;
        check_path(path, false)?;
        if self.lookup(path).is_some() {
            return Err(FsError::new(FsErrorKind::AlreadyExists, path, "file exists"));
        }
        self.create(path, bytes)?;
        self.wrote(bytes.len());
        Ok(())
    }

    fn write_temp(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.begin(path)?;
        check_path(path, false)?;
        if self.lookup(path).is_some() {
            let inode = self.inode_mut(path)?;
            inode.truncate(0);
            inode.append(bytes);
        } else {
            self.create(path, bytes)?;
        }
        self.wrote(bytes.len());
        Ok(())
    }

    fn append(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.begin(path)?;
        check_path(path, false)?;
        self.inode_mut(path)?.append(bytes);
        self.wrote(bytes.len());
        Ok(())
    }

    fn truncate(&mut self, path: &str, len: u64) -> Result<(), FsError> {
        self.begin(path)?;
        check_path(path, false)?;
        let len = usize::try_from(len)
            .map_err(|_| FsError::new(FsErrorKind::NoSpace, path, "length beyond memory"))?;
        self.inode_mut(path)?.truncate(len);
        self.wrote(0);
        Ok(())
    }

    fn sync_file(&mut self, path: &str) -> Result<(), FsError> {
        self.begin(path)?;
        check_path(path, false)?;
        self.inode_mut(path)?.sync();
        self.durable_epoch += 1;
        self.stats.file_syncs += 1;
        Ok(())
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        self.begin(from)?;
        check_path(from, false)?;
        check_path(to, false)?;
        let node = Node::File(self.file(from)?);
        match self.lookup(to) {
            Some(Node::Dir) => return Err(FsError::new(FsErrorKind::Other, to, "is a directory")),
            Some(existing) if existing == node => return Ok(()), // POSIX: same file, no-op.
            _ => {}
        }
        let to_dir = self
            .dirs
            .get_mut(parent_dir(to))
            .ok_or_else(|| FsError::new(FsErrorKind::NotFound, to, "no such directory"))?;
        to_dir.set(base_name(to), Some(node), &mut self.inodes);
        let from_dir = self.dirs.get_mut(parent_dir(from)).expect("the source was found in it");
        from_dir.set(base_name(from), None, &mut self.inodes);
        self.stats.renames += 1;
        Ok(())
    }

    fn sync_dir(&mut self, dir: &str) -> Result<(), FsError> {
        self.begin(dir)?;
        check_path(dir, true)?;
        let entries = self
            .dirs
            .get_mut(dir)
            .ok_or_else(|| FsError::new(FsErrorKind::NotFound, dir, "no such directory"))?;
        if self.lying_dir_sync {
            return Ok(());
        }
        entries.sync(&mut self.inodes);
        self.durable_epoch += 1;
        self.stats.dir_syncs += 1;
        Ok(())
    }

    fn remove(&mut self, path: &str) -> Result<(), FsError> {
        self.begin(path)?;
        check_path(path, false)?;
        match self.lookup(path) {
            None => {}
            Some(Node::Dir) => {
                return Err(FsError::new(FsErrorKind::Other, path, "is a directory"));
            }
            Some(Node::File(_)) => {
                let dir = self.dirs.get_mut(parent_dir(path)).expect("the file was found in it");
                dir.set(base_name(path), None, &mut self.inodes);
            }
        }
        self.stats.removes += 1;
        Ok(())
    }

    fn try_lock(&mut self, path: &str) -> Result<bool, FsError> {
        self.begin(path)?;
        check_path(path, false)?;
        self.stats.locks += 1;
        if self.locks.contains(path) {
            return Ok(false);
        }
        // Like the real one, locking opens the lock file, creating it empty if need be.
        match self.lookup(path) {
            Some(Node::Dir) => {
                return Err(FsError::new(FsErrorKind::Other, path, "is a directory"))
            }
            Some(Node::File(_)) => {}
            None => self.create(path, b"")?,
        }
        self.locks.insert(path.to_owned());
        Ok(true)
    }

    /// A file's inode number, length and a digest of its bytes as both times (every write
    /// that changes a file changes them, as a real clock's nanoseconds would; always long
    /// before any reader's clock, so never racily clean); a directory's entry count and a
    /// digest of its names. Not a call that can fail or crash: a reader's
    /// `stat` changes nothing.
    fn meta(&mut self, path: &str) -> Option<harn_core::signature::PathMeta> {
        use harn_core::signature::PathMeta;
        check_path(path, true).ok()?;
        Some(match self.lookup(path) {
            None => PathMeta::Missing,
            Some(Node::File(ino)) => {
                let inode = &self.inodes[&ino];
                let at = i128::from(harn_core::hash::fnv64(&inode.data) % META_TIME_SPAN);
                PathMeta::Present { ino, size: inode.data.len() as u64, mtime_ns: at, ctime_ns: at }
            }
            Some(Node::Dir) => {
                let names = self.dirs.get(path).map(Dir::names).unwrap_or_default();
                let mut digest = Fnv64::default();
                for name in &names {
                    digest.write(name.as_bytes());
                    digest.write(&[0]);
                }
                let at = i128::from(digest.finish() % META_TIME_SPAN);
                PathMeta::Present { ino: 0, size: names.len() as u64, mtime_ns: at, ctime_ns: at }
            }
        })
    }
}

#[cfg(test)]
mod tests;
