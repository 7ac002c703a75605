//! The invariant checker: safety properties checked after every simulated step and at every
//! boot, independent of the core's own `check` (which it also runs).

use crate::process::SimProcesses;
use harn_core::daemon::{Command, Daemon, PersistedState};
use harn_core::driver::{DaemonPaths, Executed};
use harn_core::env::Pid;
use harn_core::hash::fnv64;
use harn_core::ids::Id;
use harn_core::journal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A broken invariant: which one, at which step, and the facts that show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The step after which it was found.
    pub step: u64,
    /// A stable short name of the invariant.
    pub invariant: String,
    /// The facts.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {}: {}: {}", self.step, self.invariant, self.detail)
    }
}

/// What the checker remembers across steps and crashes: everything that was acknowledged.
#[derive(Clone, Debug, Default)]
pub struct Checker {
    /// Highest `state.json` generation reported durable.
    acked_generation: u64,
    /// Highest journal sequence number reported durable.
    acked_seq: u64,
    /// Hash of every journal line seen at a boot, by sequence number; lines never change.
    journal_lines: Vec<u64>,
}

type Check = Result<(), (String, String)>;

fn broken(invariant: &str, detail: String) -> Check {
    Err((invariant.to_owned(), detail))
}

impl Checker {
    /// Records what the driver reported durable.
    pub fn observe(&mut self, executed: &[Executed]) {
        for e in executed {
            match e {
                Executed::Persisted { generation } => {
                    self.acked_generation = self.acked_generation.max(*generation)
                }
                Executed::Appended { last, .. } => self.acked_seq = self.acked_seq.max(*last),
                _ => {}
            }
        }
    }

    /// After a boot: nothing acknowledged was lost, and no journal line was rewritten.
    pub fn check_boot(
        &mut self,
        paths: &DaemonPaths,
        state: Option<&[u8]>,
        events: Option<&[u8]>,
    ) -> Check {
        let generation = match state {
            None => 0,
            Some(bytes) => match PersistedState::decode(bytes) {
                Ok(s) => s.generation,
                Err(e) => return broken("state-readable", e.to_string()),
            },
        };
        if generation < self.acked_generation {
            let detail = format!(
                "state.json has generation {generation}, {} was acknowledged",
                self.acked_generation
            );
            return broken("acknowledged-state-kept", detail);
        }
        let read = match journal::parse_as::<serde::de::IgnoredAny>(
            &paths.events,
            events.unwrap_or_default(),
        ) {
            Ok(read) => read,
            Err(e) => return broken("journal-readable", e.to_string()),
        };
        let last = read.records.last().map_or(0, |r| r.seq);
        if last < self.acked_seq {
            return broken(
                "acknowledged-records-kept",
                format!("journal ends at {last}, {} was acknowledged", self.acked_seq),
            );
        }
        self.check_lines_unchanged(events.unwrap_or_default(), read.valid_len)
    }

    fn check_lines_unchanged(&mut self, bytes: &[u8], valid_len: u64) -> Check {
        let lines = bytes[..valid_len as usize].split_inclusive(|&b| b == b'\n');
        for (i, line) in lines.enumerate() {
            let h = fnv64(line);
            match self.journal_lines.get(i) {
                Some(&seen) if seen != h => {
                    return broken(
                        "journal-append-only",
                        format!("line {} changed after it was read", i + 1),
                    );
                }
                Some(_) => {}
                None => self.journal_lines.push(h),
            }
        }
        Ok(())
    }

    /// After every step while the daemon is up.
    pub fn check_step(
        &self,
        daemon: &Daemon,
        procs: &SimProcesses,
        durable_state: Option<&[u8]>,
        executed: &[Executed],
        acked_commands: &BTreeMap<u64, Command>,
    ) -> Check {
        if let Err(e) = daemon.check() {
            return broken("core-invariants", e);
        }
        check_ownership(daemon, procs)?;
        let durable = durable_state.map(PersistedState::decode).transpose();
        let durable = match durable {
            Ok(d) => d.unwrap_or_default(),
            Err(e) => return broken("state-readable", e.to_string()),
        };
        for e in executed {
            check_persisted_before(e, &durable, acked_commands)?;
        }
        Ok(())
    }
}

/// One live process per harness at most, and the core's view of pids matches the world's.
fn check_ownership(daemon: &Daemon, procs: &SimProcesses) -> Check {
    let mut owners: BTreeMap<&Id, Pid> = BTreeMap::new();
    for (pid, p) in procs.live() {
        let Some((name, run)) = &p.owner else {
            return broken("no-orphans", format!("pid {pid} has no owner after its spawn step"));
        };
        if let Some(other) = owners.insert(name, *pid) {
            return broken("single-instance", format!("{name} has live pids {other} and {pid}"));
        }
        let h = daemon.harnesses().get(name);
        if h.and_then(|h| h.current_run()) != Some(*run) || h.and_then(|h| h.pid()) != Some(*pid) {
            return broken(
                "no-orphans",
                format!("{name} run {run} (pid {pid}) is alive but the daemon forgot it"),
            );
        }
    }
    for (name, h) in daemon.harnesses() {
        if let Some(pid) = h.pid() {
            if owners.get(name) != Some(&pid) {
                return broken(
                    "pid-is-alive",
                    format!("{name} believes pid {pid} is alive; it is not"),
                );
            }
        }
    }
    Ok(())
}

/// A spawn or an acknowledgement happened only after the intent it depends on was durable.
fn check_persisted_before(
    e: &Executed,
    durable: &PersistedState,
    acked: &BTreeMap<u64, Command>,
) -> Check {
    match e {
        Executed::Spawned { name, run, .. } | Executed::SpawnFailed { name, run, .. } => {
            let runs = durable.harnesses.get(name).map_or(0, |d| d.runs);
            if runs < *run {
                return broken(
                    "persist-before-spawn",
                    format!("{name} run {run} spawned; durable state says {runs} runs"),
                );
            }
        }
        Executed::Acked { id, error: None } => {
            let (name, want) = match acked.get(id) {
                Some(Command::Stop { name }) => (name, false),
                Some(Command::Start { name } | Command::Restart { name }) => (name, true),
                _ => return Ok(()),
            };
            let got = durable.harnesses.get(name).map(|d| d.enabled);
            if got != Some(want) {
                return broken(
                    "persist-before-ack",
                    format!("command {id} on {name} acknowledged; durable intent is {got:?}"),
                );
            }
        }
        _ => {}
    }
    Ok(())
}
