//! The environment seams as the simulated daemon sees them: the filesystem shared with the
//! checker, and a spawner that records, at the moment of each spawn, what `state.json`
//! durably says, so persist-before-spawn is checked at the instant it matters.

use crate::fs::SimFs;
use crate::harness::options::InjectedBug;
use crate::harness::process::SimProcesses;
use harn_core::env::{Clock, Fs, FsError, Pid, Signal, SpawnError, SpawnSpec, Spawner};
use harn_core::harness::daemon::PersistedState;
use harn_core::harness::driver::Env;
use harn_core::ids::Id;
use std::cell::RefCell;
use std::rc::Rc;

/// A `SimFs` shared by the daemon's driver and the checker's auditing spawner.
pub struct SharedFs(pub Rc<RefCell<SimFs>>);

macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $name(&mut self, $($arg: $ty),*) -> $ret { self.0.borrow_mut().$name($($arg),*) })*
    };
}

impl Fs for SharedFs {
    delegate! {
        read(path: &str) -> Result<Option<Vec<u8>>, FsError>;
        list(dir: &str) -> Result<Vec<String>, FsError>;
        create_dir_all(dir: &str) -> Result<(), FsError>;
        create_new(path: &str, bytes: &[u8]) -> Result<(), FsError>;
        write_temp(path: &str, bytes: &[u8]) -> Result<(), FsError>;
        append(path: &str, bytes: &[u8]) -> Result<(), FsError>;
        truncate(path: &str, len: u64) -> Result<(), FsError>;
        sync_file(path: &str) -> Result<(), FsError>;
        rename(from: &str, to: &str) -> Result<(), FsError>;
        sync_dir(dir: &str) -> Result<(), FsError>;
        remove(path: &str) -> Result<(), FsError>;
        try_lock(path: &str) -> Result<bool, FsError>;
    }
}

/// What `state.json` durably said when a run was spawned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnAudit {
    /// The harness.
    pub name: Id,
    /// Its durable run count at that instant (0 when the file or the harness is absent).
    pub durable_runs: u64,
}

/// The last `state.json` bytes decoded and what they said: the durable state changes only at
/// a persist, so the acknowledgements and spawns between two persists decode it once.
#[derive(Clone, Debug, Default)]
pub struct Decoded {
    last: Vec<(Vec<u8>, std::rc::Rc<PersistedState>)>,
}

impl Decoded {
    /// What `bytes` say, as the daemon's own reader reads them.
    pub fn state(&mut self, bytes: &[u8]) -> Result<std::rc::Rc<PersistedState>, String> {
        if let Some((_, state)) = self.last.iter().find(|(b, _)| b == bytes) {
            return Ok(std::rc::Rc::clone(state));
        }
        let state = PersistedState::decode(bytes).map_err(|e| e.to_string())?;
        let state = std::rc::Rc::new(state);
        if self.last.len() == 2 {
            self.last.remove(0);
        }
        self.last.push((bytes.to_vec(), std::rc::Rc::clone(&state)));
        Ok(state)
    }
}

/// Spawns through the simulated process table after noting what is durable.
struct AuditingSpawner<'a> {
    procs: &'a mut SimProcesses,
    fs: &'a Rc<RefCell<SimFs>>,
    state_path: &'a str,
    audits: &'a mut Vec<SpawnAudit>,
    decoded: &'a mut Decoded,
}

impl Spawner for AuditingSpawner<'_> {
    fn spawn(&mut self, name: &Id, run: u64, spec: &SpawnSpec) -> Result<Pid, SpawnError> {
        let fs = self.fs.borrow();
        let durable_runs = fs
            .durable_bytes(self.state_path)
            .and_then(|bytes| self.decoded.state(&bytes).ok())
            .and_then(|state| state.harnesses.get(name).map(|d| d.runs.max(d.reserved_runs)))
            .unwrap_or(0);
        drop(fs);
        self.audits.push(SpawnAudit { name: name.clone(), durable_runs });
        self.procs.spawn(name, run, spec)
    }

    fn signal(&mut self, pid: Pid, signal: Signal) -> Result<(), SpawnError> {
        self.procs.signal(pid, signal)
    }
}

/// Everything `with_env` lends to one driver call.
pub struct Lent<'a> {
    /// The shared filesystem.
    pub fs: &'a Rc<RefCell<SimFs>>,
    /// The process table.
    pub procs: &'a mut SimProcesses,
    /// The clock.
    pub clock: &'a dyn Clock,
    /// A planted bug, if any.
    pub bug: Option<InjectedBug>,
    /// Where `state.json` lives.
    pub state_path: &'a str,
    /// Spawn audits, appended in spawn order.
    pub audits: &'a mut Vec<SpawnAudit>,
    /// `state.json` decoded, shared with the checker.
    pub decoded: &'a mut Decoded,
}

/// Runs `f` with the seams built from `lent`, behind the lying `sync_dir` when planted.
pub fn with_env<R>(lent: Lent<'_>, f: impl FnOnce(&mut Env<'_>) -> R) -> R {
    let mut shared = SharedFs(lent.fs.clone());
    #[cfg(feature = "planted-bugs")]
    let mut lying;
    let fs: &mut dyn Fs = if crate::harness::options::lies_about_dir_sync(lent.bug) {
        #[cfg(feature = "planted-bugs")]
        {
            lying = crate::lying::LyingDirSync(&mut shared);
            &mut lying
        }
        #[cfg(not(feature = "planted-bugs"))]
        unreachable!("no bug is planted without the planted-bugs feature")
    } else {
        &mut shared
    };
    let mut spawner = AuditingSpawner {
        procs: lent.procs,
        fs: lent.fs,
        state_path: lent.state_path,
        audits: lent.audits,
        decoded: lent.decoded,
    };
    let mut env = Env { fs, spawner: &mut spawner, clock: lent.clock };
    f(&mut env)
}
