//! The one driver loop: executes the daemon core's effects against the environment seams, in
//! order, feeding spawn outcomes straight back. The simulator and the real daemon both call it.
//!
//! An IO error on the durable state is fatal by design (fail-stop): the caller drops the core
//! and boots again from disk, which is the recovery path anyway. Retrying a failed fsync in
//! place is how data gets lost; a fresh boot cannot be wrong about what is durable.

use crate::env::{Clock, Fs, FsError, FsErrorKind, Pid, Signal, SpawnError, Spawner};
use crate::harness::daemon::{
    BootError, Daemon, DaemonConfig, DaemonEffect, DaemonInput, PersistedState,
};
use crate::harness::lifecycle::{Event, HarnessInput};
use crate::ids::Id;
use crate::journal::JournalWriter;
use crate::time::Instant;
use serde::Serialize;

/// Where the daemon keeps its durable files, relative to the coordination root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonPaths {
    /// The directory holding the rest.
    pub dir: String,
    /// Intent and counters, replaced atomically.
    pub state: String,
    /// The append-only events journal.
    pub events: String,
}

impl Default for DaemonPaths {
    fn default() -> DaemonPaths {
        DaemonPaths {
            dir: crate::layout::HARNESS.into(),
            state: ".harnery/harness/state.json".into(),
            events: ".harnery/harness/events.jsonl".into(),
        }
    }
}

/// Why the daemon must stop and boot again.
#[derive(Debug)]
pub enum Fatal {
    /// A call on the durable files failed.
    Fs(FsError),
    /// The durable files are not readable as written.
    Corrupt(String),
    /// The core refused to boot.
    Boot(BootError),
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fatal::Fs(e) => write!(f, "{e}"),
            Fatal::Corrupt(e) => write!(f, "{e}"),
            Fatal::Boot(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Fatal {}

impl From<FsError> for Fatal {
    fn from(e: FsError) -> Fatal {
        Fatal::Fs(e)
    }
}

/// One effect as it was carried out; the trace and the caller's bookkeeping read these.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "done")]
pub enum Executed {
    /// `state.json` now durably holds this generation.
    Persisted {
        /// The generation written.
        generation: u64,
    },
    /// These journal records are durable.
    Appended {
        /// First sequence number written.
        first: u64,
        /// Last sequence number written.
        last: u64,
        /// The time every one of them was journaled with.
        ts: crate::time::WallTime,
        /// The events, in order, for subscribers.
        events: Vec<Event>,
    },
    /// A run started.
    Spawned {
        /// The harness.
        name: Id,
        /// The run.
        run: u64,
        /// Its pid.
        pid: Pid,
    },
    /// A run could not start.
    SpawnFailed {
        /// The harness.
        name: Id,
        /// The run.
        run: u64,
        /// The spawner's words.
        detail: String,
    },
    /// A signal was sent.
    Signalled {
        /// The harness.
        name: Id,
        /// Its process group.
        pid: Pid,
        /// Which signal.
        signal: Signal,
    },
    /// An attach was answered.
    Attached {
        /// The connection's id.
        client: u64,
        /// The harness.
        name: Id,
        /// The run attached to, when granted.
        run: Option<u64>,
        /// True when the client types.
        writes: bool,
        /// Why not, when refused.
        error: Option<String>,
    },
    /// The disk was full: these events could not be journaled and are not in it (nothing
    /// acknowledged depends on them); subscribers and the ledger still see them.
    Dropped {
        /// What the filesystem said.
        cause: String,
        /// The events, in order.
        events: Vec<Event>,
    },
    /// The events journal was full: it is now `PATH.1` (older ones shifted), durably, and
    /// the next event is line 1 of a new file.
    Rotated {
        /// The journal.
        path: String,
    },
    /// A command was acknowledged.
    Acked {
        /// The command's id.
        id: u64,
        /// The operator-facing error, if it was refused.
        error: Option<String>,
    },
}

/// What wakes the loop.
#[derive(Clone, Debug, PartialEq)]
pub enum Wake {
    /// An input arrived.
    Input(DaemonInput),
    /// A deadline may be due.
    Timeout,
}

/// The environment seams one step needs, borrowed for that step only.
pub struct Env<'e> {
    /// The filesystem holding `.harnery/`.
    pub fs: &'e mut dyn Fs,
    /// Starts and signals children.
    pub spawner: &'e mut dyn Spawner,
    /// Reads time for journal timestamps.
    pub clock: &'e dyn Clock,
}

/// The driver's own state between steps: where the files are and the journal's write position.
#[derive(Clone, Debug)]
pub struct Driver {
    paths: DaemonPaths,
    journal: JournalWriter,
    /// What the last drain carried out before it failed; see [`Driver::take_partial`].
    partial: Vec<Executed>,
    /// The events journal a boot found damaged and set aside, until the host records it.
    set_aside: Option<crate::journal::SetAside>,
    /// True when this boot found no `state.json` though an earlier boot had run (its events
    /// journal held records): the operator's pinned stops and the counters were lost with it.
    state_lost: bool,
}

/// Upper bound on effects executed for one wake; more means a feedback loop.
const MAX_EFFECTS_PER_WAKE: usize = 1 << 16;

impl Driver {
    /// Reads the durable files (truncating a torn journal tail) and boots the core; the
    /// caller then runs the boot's effects with [`Driver::drain`]. The same path serves a
    /// first start and a restart after a crash.
    pub fn open(
        env: &mut Env<'_>,
        paths: DaemonPaths,
        config: DaemonConfig,
    ) -> Result<(Driver, Daemon), Fatal> {
        env.fs.create_dir_all(&paths.dir)?;
        let persisted = match env.fs.read(&paths.state)? {
            None => None,
            Some(bytes) => Some(
                PersistedState::decode(&bytes)
                    .map_err(|e| Fatal::Corrupt(format!("{}: {}", paths.state, e.reason)))?,
            ),
        };
        // Every line is verified at boot, not only the tail: the daemon never appends after a
        // corrupt line, wherever it is (bodies are not materialized, so this stays cheap).
        // The events are history, not the daemon's truth (`state.json` is): a damaged journal
        // is set aside whole and a new one begun, never holding the boot hostage.
        let (journal, set_aside) =
            JournalWriter::open_setting_aside(env.fs, &paths.events, env.clock.wall())?;
        let ran_before = journal.next_seq() > 1 || set_aside.is_some();
        make_durable(env.fs, &paths, persisted.is_some(), journal.next_seq() > 1)?;
        let state_lost = persisted.is_none() && ran_before;
        let daemon = Daemon::boot(config, persisted, env.clock.now()).map_err(Fatal::Boot)?;
        Ok((Driver { paths, journal, partial: Vec::new(), set_aside, state_lost }, daemon))
    }

    /// True when this boot found `state.json` gone though an earlier boot had run: every
    /// harness starts from the configuration, pinned stops forgotten (for the host to say at
    /// boot, in the ledger and in `harness list`).
    pub fn state_lost(&self) -> bool {
        self.state_lost
    }

    /// The events journal this boot found damaged and set aside, once (for the host to
    /// record and say).
    pub fn take_set_aside(&mut self) -> Option<crate::journal::SetAside> {
        self.set_aside.take()
    }

    /// Feeds one wake to the core and carries out everything it asks, in order.
    pub fn step(
        &mut self,
        env: &mut Env<'_>,
        daemon: &mut Daemon,
        now: Instant,
        wake: Wake,
    ) -> Result<Vec<Executed>, Fatal> {
        match wake {
            Wake::Input(input) => daemon.handle(now, input),
            Wake::Timeout => daemon.handle_timeout(now),
        }
        self.drain(env, daemon, now)
    }

    /// Feeds several inputs that arrived together (children reaped in one turn) and carries
    /// out everything they ask with one drain: their events take one append and one fsync,
    /// not one each, so a storm of exits costs the daemon a bounded amount per turn. Each
    /// input is handled in order, as [`Driver::step`] would.
    pub fn step_all(
        &mut self,
        env: &mut Env<'_>,
        daemon: &mut Daemon,
        now: Instant,
        inputs: Vec<DaemonInput>,
    ) -> Result<Vec<Executed>, Fatal> {
        for input in inputs {
            daemon.handle(now, input);
        }
        self.drain(env, daemon, now)
    }

    /// Executes queued effects until the core has none left. Events are history, not
    /// barriers: they are collected over the whole drain and appended to the journal with one
    /// write and one fsync at its end.
    pub fn drain(
        &mut self,
        env: &mut Env<'_>,
        daemon: &mut Daemon,
        now: Instant,
    ) -> Result<Vec<Executed>, Fatal> {
        let mut done = Vec::new();
        let result = self.drain_into(env, daemon, now, &mut done);
        match result {
            Ok(()) => Ok(done),
            Err(fatal) => {
                self.partial = done;
                Err(fatal)
            }
        }
    }

    /// What was carried out before the last fatal error: a `Persisted` or `Appended` among
    /// them is durable and must survive whatever follows.
    pub fn take_partial(&mut self) -> Vec<Executed> {
        std::mem::take(&mut self.partial)
    }

    fn drain_into(
        &mut self,
        env: &mut Env<'_>,
        daemon: &mut Daemon,
        now: Instant,
        done: &mut Vec<Executed>,
    ) -> Result<(), Fatal> {
        let mut events = Vec::new();
        while let Some(effect) = daemon.poll_effect() {
            assert!(done.len() < MAX_EFFECTS_PER_WAKE, "effect feedback loop");
            if let DaemonEffect::AppendEvents(batch) = effect {
                events.extend(batch);
            } else if let Some(report) = self.execute(env, effect, done)? {
                daemon.handle(now, report);
            }
        }
        if !events.is_empty() {
            let ts = env.clock.wall();
            let seqs = match self.journal.append_with(env.fs, ts, &events, Event::write_json) {
                Ok(seqs) => seqs,
                // The journal is history, not the daemon's truth: on a full disk its records
                // are dropped (and counted by whoever reads `Dropped`) while supervision
                // goes on; the journal is cut back to its last whole record.
                Err(e) if e.kind == FsErrorKind::NoSpace => {
                    self.journal.recover(env.fs)?;
                    done.push(Executed::Dropped { cause: e.to_string(), events });
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            };
            done.push(Executed::Appended { first: *seqs.start(), last: *seqs.end(), ts, events });
            if self.journal.rotate_if_full(env.fs, daemon.config().retention)? {
                done.push(Executed::Rotated { path: self.paths.events.clone() });
            }
        }
        Ok(())
    }

    fn execute(
        &mut self,
        env: &mut Env<'_>,
        effect: DaemonEffect,
        done: &mut Vec<Executed>,
    ) -> Result<Option<DaemonInput>, Fatal> {
        match effect {
            DaemonEffect::PersistState { generation, bytes } => {
                crate::atomic::replace_kept(env.fs, &self.paths.state, &bytes)?;
                done.push(Executed::Persisted { generation });
            }
            DaemonEffect::AppendEvents(_) => unreachable!("drain collects events"),
            DaemonEffect::Spawn { name, run, spec } => {
                let report = match env.spawner.spawn(&name, run, &spec) {
                    Ok(pid) => {
                        done.push(Executed::Spawned { name: name.clone(), run, pid });
                        HarnessInput::Spawned { run, pid }
                    }
                    Err(SpawnError { detail, .. }) => {
                        done.push(Executed::SpawnFailed { name: name.clone(), run, detail });
                        HarnessInput::SpawnFailed { run }
                    }
                };
                return Ok(Some(DaemonInput::Process { name, report }));
            }
            DaemonEffect::Signal { name, pid, signal, .. } => {
                // A group that already exited is not an error: its exit report is on its way.
                let _ = env.spawner.signal(pid, signal);
                done.push(Executed::Signalled { name, pid, signal });
            }
            DaemonEffect::Attached { client, name, result } => {
                let (run, writes, error) = match result {
                    Ok(a) => (Some(a.run), a.writes, None),
                    Err(e) => (None, false, Some(e.to_string())),
                };
                done.push(Executed::Attached { client, name, run, writes, error });
            }
            DaemonEffect::Ack { id, result } => {
                done.push(Executed::Acked { id, error: result.err().map(|e| e.to_string()) });
            }
        }
        Ok(None)
    }

    /// The paths in use.
    pub fn paths(&self) -> &DaemonPaths {
        &self.paths
    }
}

/// Makes what a boot read durable before the daemon acts on it. After the daemon alone died,
/// the files it left may hold bytes the kernel has not written yet; a new daemon that
/// acknowledged commands against them could see them vanish in a later host crash.
fn make_durable(
    fs: &mut dyn Fs,
    paths: &DaemonPaths,
    state: bool,
    journal: bool,
) -> Result<(), Fatal> {
    if state {
        fs.sync_file(&paths.state)?;
    }
    if journal {
        fs.sync_file(&paths.events)?;
    }
    if state || journal {
        fs.sync_dir(&paths.dir)?;
    }
    Ok(())
}
