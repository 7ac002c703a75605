//! The invariant checker: safety properties checked after every simulated step and at every
//! boot, independent of the core's own `check` (which it also runs).

use crate::harness::process::SimProcesses;
use crate::harness::seams::SpawnAudit;
use harn_core::env::Pid;
use harn_core::harness::daemon::{Command, Daemon, PersistedState};
use harn_core::harness::driver::{DaemonPaths, Executed};
use harn_core::ids::Id;
use harn_core::journal;
use serde::de::IgnoredAny;
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
    /// The journal bytes verified at earlier boots: every later journal must start with them.
    journal_verified: Vec<u8>,
    /// The sequence number of the first line after `journal_verified`.
    journal_next_seq: u64,
    /// The journal verified before the daemon began a new file at a boot that finished a
    /// rotation a crash cut short: it must be whole as `PATH.1` at the next boot.
    journal_before_rotation: Option<Vec<u8>>,
    /// Boots checked so far.
    boots: u64,
    /// The highest run spawned per harness, across every boot: runs are never reused.
    last_run: BTreeMap<Id, u64>,
    /// Rotations of the events journal seen.
    pub rotations: u64,
    /// `state.json` bytes decoded, shared with the spawner's audits.
    pub decoded: crate::harness::seams::Decoded,
}

/// What one step did, for the checks that depend on the order of its effects.
pub struct StepFacts<'a> {
    /// The effects carried out, in order (before a crash, those that finished).
    pub executed: &'a [Executed],
    /// What `state.json` durably said at each spawn, in spawn order.
    pub audits: &'a [SpawnAudit],
    /// `state.json`'s durable bytes before the step.
    pub durable_before: Option<&'a [u8]>,
    /// `state.json`'s durable bytes after the step.
    pub durable_after: Option<&'a [u8]>,
    /// The operator's start, stop and restart commands so far, by id: those whose
    /// acknowledgement promises a durable intent.
    pub commands: &'a BTreeMap<u64, Command>,
}

/// Every this many boots the whole verified journal prefix is compared byte for byte; the
/// boots in between compare its last line and its length, which is where a wrong truncation
/// (the only way harn's writer changes old bytes) would show. Keeps a boot O(1) in the length
/// of the journal most of the time.
const FULL_JOURNAL_COMPARE_EVERY: u64 = 16;

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
                // A first line where the checker knows of earlier ones: a daemon that died
                // after renaming the full journal (and before syncing the rename) left the
                // rename to its successor, which began a new file. The append's directory sync
                // made the rename durable, so the old journal is `PATH.1` now.
                Executed::Appended { first: 1, last, .. }
                    if self.acked_seq > 0 || self.journal_next_seq > 1 =>
                {
                    self.journal_before_rotation = Some(std::mem::take(&mut self.journal_verified));
                    self.journal_next_seq = 1;
                    self.acked_seq = *last;
                    self.rotations += 1;
                }
                Executed::Appended { last, .. } => self.acked_seq = self.acked_seq.max(*last),
                // The full file is durably `PATH.1` now: the journal to check starts afresh.
                Executed::Rotated { .. } => {
                    self.acked_seq = 0;
                    self.journal_verified.clear();
                    self.journal_before_rotation = None;
                    self.journal_next_seq = 1;
                    self.rotations += 1;
                }
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
        rotated: Option<&[u8]>,
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
        if let Some(before) = self.journal_before_rotation.take() {
            if !rotated.is_some_and(|r| r.starts_with(&before)) {
                let detail = format!(
                    "{}.1 does not hold the journal a new file was begun after",
                    paths.events
                );
                return broken("acknowledged-records-kept", detail);
            }
        }
        let bytes = events.unwrap_or_default();
        // A rotation a crash interrupted after its rename reached the disk: the journal
        // verified so far is whole as `PATH.1`, and the current file starts afresh.
        let moved = rotated.is_some_and(|r| r.starts_with(&self.journal_verified));
        if !bytes.starts_with(&self.journal_verified) && moved && !self.journal_verified.is_empty()
        {
            let old = rotated.unwrap_or_default();
            let rest = &old[self.journal_verified.len()..];
            let next = self.journal_next_seq.max(1);
            let read = journal::parse_continuing_as::<IgnoredAny>(&paths.events, rest, next);
            let last = match read {
                Ok(read) => read.next_seq() - 1,
                Err(e) => return broken("journal-readable", format!("{}.1: {e}", paths.events)),
            };
            if last < self.acked_seq {
                let detail = format!(
                    "{}.1 ends at {last}, {} was acknowledged",
                    paths.events, self.acked_seq
                );
                return broken("acknowledged-records-kept", detail);
            }
            self.acked_seq = 0;
            self.journal_verified.clear();
            self.journal_next_seq = 1;
        }
        let verified = self.journal_verified.len();
        self.boots += 1;
        let full = self.boots.is_multiple_of(FULL_JOURNAL_COMPARE_EVERY);
        let checked_from = if full { 0 } else { last_line_start(&self.journal_verified) };
        let kept = bytes.len() >= verified
            && bytes[checked_from..verified] == self.journal_verified[checked_from..];
        if !kept {
            let detail = if bytes.len() < verified {
                format!("the journal shrank from {verified} to {} bytes", bytes.len())
            } else {
                "a journal line verified at an earlier boot changed".to_owned()
            };
            return broken("journal-append-only", detail);
        }
        let next = self.journal_next_seq.max(1);
        let read = match journal::parse_continuing_as::<IgnoredAny>(
            &paths.events,
            &bytes[verified..],
            next,
        ) {
            Ok(read) => read,
            Err(e) => return broken("journal-readable", e.to_string()),
        };
        let last = read.next_seq() - 1;
        if last < self.acked_seq {
            let detail = format!("journal ends at {last}, {} was acknowledged", self.acked_seq);
            return broken("acknowledged-records-kept", detail);
        }
        let valid_end = verified + read.valid_len as usize;
        self.journal_verified.extend_from_slice(&bytes[verified..valid_end]);
        self.journal_next_seq = read.next_seq();
        Ok(())
    }

    /// After every step while the daemon is up.
    pub fn check_step(
        &mut self,
        daemon: &Daemon,
        procs: &SimProcesses,
        facts: &StepFacts<'_>,
    ) -> Check {
        if let Err(e) = daemon.check() {
            return broken("core-invariants", e.to_string());
        }
        check_ownership(daemon, procs)?;
        self.check_effects(facts)
    }

    /// The checks that hold even for a step a crash cut short: each spawn came after its run
    /// was durable, runs are never reused, and each acknowledged intent was durable first.
    pub fn check_effects(&mut self, facts: &StepFacts<'_>) -> Check {
        self.check_spawns(facts)?;
        self.check_acks(facts)
    }

    /// What `state.json`'s `bytes` say (nothing: the default).
    fn intents(
        &mut self,
        bytes: Option<&[u8]>,
    ) -> Result<std::rc::Rc<PersistedState>, (String, String)> {
        let Some(bytes) = bytes else { return Ok(Default::default()) };
        self.decoded.state(bytes).map_err(|e| ("state-readable".to_owned(), e))
    }

    fn check_spawns(&mut self, facts: &StepFacts<'_>) -> Check {
        let spawns: Vec<(&Id, u64)> = facts
            .executed
            .iter()
            .filter_map(|e| match e {
                Executed::Spawned { name, run, .. } | Executed::SpawnFailed { name, run, .. } => {
                    Some((name, *run))
                }
                _ => None,
            })
            .collect();
        if spawns.len() != facts.audits.len() {
            let detail = format!(
                "{} spawns executed, {} reached the spawner",
                spawns.len(),
                facts.audits.len()
            );
            return broken("spawns-accounted", detail);
        }
        for ((name, run), audit) in spawns.into_iter().zip(facts.audits) {
            if audit.name != *name || audit.durable_runs < run {
                let detail = format!(
                    "{name} run {run} spawned while state.json said {} runs",
                    audit.durable_runs
                );
                return broken("persist-before-spawn", detail);
            }
            let last = self.last_run.insert(name.clone(), run).unwrap_or(0);
            if run <= last {
                return broken(
                    "runs-never-reused",
                    format!("{name} run {run} spawned after run {last}"),
                );
            }
        }
        Ok(())
    }
}

impl Checker {
    /// Each acknowledged start, restart or stop is the durable intent afterwards, and when it
    /// changed the durable intent, a persist came before the acknowledgement.
    fn check_acks(&mut self, facts: &StepFacts<'_>) -> Check {
        let acks: Vec<(usize, u64)> = facts
            .executed
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                Executed::Acked { id, error: None } => Some((i, *id)),
                _ => None,
            })
            .collect();
        if acks.is_empty() {
            return Ok(());
        }
        let before = self.intents(facts.durable_before)?;
        let after = self.intents(facts.durable_after)?;
        let named = acks.into_iter().flat_map(|(index, id)| {
            let (names, want) = match facts.commands.get(&id) {
                Some(Command::Stop { names }) => (names.as_slice(), false),
                Some(Command::Start { names } | Command::Restart { names }) => {
                    (names.as_slice(), true)
                }
                _ => (&[][..], false),
            };
            names.iter().map(move |name| (index, id, name, want))
        });
        for (index, id, name, want) in named {
            let was = before.harnesses.get(name).map(|d| d.enabled);
            let is = after.harnesses.get(name).map(|d| d.enabled);
            if is != Some(want) {
                return broken(
                    "persist-before-ack",
                    format!("command {id} on {name} acknowledged; durable intent is {is:?}"),
                );
            }
            let persisted_first =
                facts.executed[..index].iter().any(|e| matches!(e, Executed::Persisted { .. }));
            if was != is && !persisted_first {
                return broken(
                    "persist-before-ack",
                    format!("command {id} on {name} acknowledged before its intent was persisted"),
                );
            }
        }
        Ok(())
    }
}

/// Where the last line of a journal prefix (which ends in a newline) begins.
fn last_line_start(prefix: &[u8]) -> usize {
    match prefix.len() {
        0 => 0,
        n => prefix[..n - 1].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1),
    }
}

/// One live process per harness at most, and the core's view of pids matches the world's.
fn check_ownership(daemon: &Daemon, procs: &SimProcesses) -> Check {
    // A handful of live processes: a list searched in place costs less than a map built and
    // dropped at every step.
    let mut owners: Vec<(&Id, Pid)> = Vec::new();
    for (pid, p) in procs.live() {
        let Some((name, run)) = &p.owner else {
            return broken("no-orphans", format!("pid {pid} has no owner after its spawn step"));
        };
        if let Some((_, other)) = owners.iter().find(|(n, _)| *n == name) {
            return broken("single-instance", format!("{name} has live pids {other} and {pid}"));
        }
        owners.push((name, *pid));
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
            if !owners.iter().any(|(n, p)| *n == name && *p == pid) {
                return broken(
                    "pid-is-alive",
                    format!("{name} believes pid {pid} is alive; it is not"),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use harn_core::time::WallTime;

    fn journal(seqs: std::ops::RangeInclusive<u64>, tag: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for seq in seqs {
            journal::encode_line_into(&mut out, seq, WallTime(seq as i64), &(tag, seq));
        }
        out
    }

    fn appended(first: u64, last: u64) -> Executed {
        Executed::Appended { first, last, ts: WallTime(0), events: Vec::new() }
    }

    /// A checker that verified `old` (seqs 1..=32) at a boot, as after a daemon that died
    /// between renaming its full journal and syncing the rename.
    fn verified_old() -> (Checker, DaemonPaths, Vec<u8>) {
        let paths = DaemonPaths::default();
        let old = journal(1..=32, "old");
        let mut checker = Checker::default();
        checker.observe(&[appended(1, 32)]);
        checker.check_boot(&paths, None, Some(&old), None).expect("the old journal is whole");
        (checker, paths, old)
    }

    #[test]
    fn a_new_file_begun_at_boot_counts_its_own_acknowledgements() {
        let (mut checker, paths, old) = verified_old();
        // The next daemon found no journal under its name and began one; its first append
        // made the rename durable.
        checker.observe(&[appended(1, 36)]);
        let new = journal(1..=36, "new");
        checker.check_boot(&paths, None, Some(&new), Some(&old)).expect("nothing was lost");
        let longer = [new.clone(), journal(37..=40, "new")].concat();
        checker.observe(&[appended(37, 40)]);
        checker.check_boot(&paths, None, Some(&longer), Some(&old)).expect("appended to");
    }

    #[test]
    fn a_new_file_begun_while_the_old_one_vanished_is_a_loss() {
        let (mut checker, paths, _) = verified_old();
        checker.observe(&[appended(1, 4)]);
        let new = journal(1..=4, "new");
        let lost = checker.check_boot(&paths, None, Some(&new), None).unwrap_err();
        assert_eq!(lost.0, "acknowledged-records-kept", "{}", lost.1);
    }

    #[test]
    fn a_new_file_shorter_than_its_acknowledgements_is_a_loss() {
        let (mut checker, paths, old) = verified_old();
        checker.observe(&[appended(1, 6)]);
        let lost = checker.check_boot(&paths, None, Some(&journal(1..=4, "new")), Some(&old));
        assert_eq!(lost.unwrap_err().0, "acknowledged-records-kept");
    }
}
