//! The recovery ledger: an append-only journal (`ledger.jsonl`) with one record per lifecycle
//! decision, saying what was wanted, what was observed, who started or stopped what, the
//! evidence of readiness and liveness, the crash-loop bookkeeping and how a run ended. It is
//! what an operator reads after the fact to learn why the daemon did what it did.

use super::paths::Paths;
use harn_core::env::{Clock, Fs, FsError};
use harn_core::harness::daemon::{Daemon, DaemonConfig};
use harn_core::harness::driver::Executed;
use harn_core::harness::lifecycle::{Cause, Event, Harness, State};
use harn_core::ids::Id;
use harn_core::journal::{JournalWriter, SetAside};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Facts that hold for the daemon's whole life.
struct Owner {
    uid: u32,
    user: String,
    lock_holder_pid: u32,
    boot_id: String,
    state_path: String,
    /// Which service manager owns the daemon: systemd (it gave `NOTIFY_SOCKET`) or none.
    service_manager: &'static str,
}

/// Per-harness notes kept between records. Who started or stopped a harness is not among
/// them: the core's state change carries its cause.
#[derive(Default)]
struct Notes {
    /// The last stop request: when and by whom (from the state change that began it).
    stop_requested: Option<Value>,
    /// Orphans of an earlier daemon stopped before this harness's first spawn.
    reclaimed: Option<Value>,
    /// The columns of the last record, for the records that follow the harness's removal.
    last: Option<String>,
    /// Why the run being stopped was judged hung, until it ends.
    hung: Option<&'static str>,
    /// The limits the last run to end had reached, as the kernel counted them.
    reached: Vec<harn_core::limits::LimitReached>,
}

/// Everything a record needs from the loop besides the core.
pub struct Facts<'a> {
    /// The configuration in force.
    pub config: &'a DaemonConfig,
    /// Readiness kind per harness (`none`, `file`, `probe`, `notify`).
    pub readiness: &'a dyn Fn(&Id) -> &'static str,
    /// The last WATCHDOG=1 the daemon sent to systemd, unix ms.
    pub last_watchdog_ms: Option<i64>,
    /// The processes in a harness's cgroup; `None` without cgroups.
    pub cgroup_members: &'a dyn Fn(&Id) -> Option<Vec<u32>>,
    /// The drain deadline, unix ms, when a shutdown has one.
    pub drain_deadline_ms: Option<i64>,
    /// Whether that deadline has passed.
    pub drain_expired: bool,
    /// Monotonic now, for the clocks a record shows (the healthy-run one).
    pub now: harn_core::time::Instant,
    /// Wall now, unix ms, to date what the monotonic clock timed (a harness's last ping).
    pub wall_ms: i64,
}

/// What a full disk kept out of the daemon's history since it last wrote there: counted
/// while it lasts, recorded (`records_dropped`) by the first record that fits, and shown by
/// `harness list` meanwhile.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Unwritten {
    /// What the filesystem said, the last time.
    pub cause: String,
    /// When the first write failed, unix ms.
    pub since_ms: i64,
    /// Ledger records not written.
    pub records: u64,
    /// Events not journaled (`events.jsonl`).
    pub events: u64,
}

/// The ledger writer.
pub struct RecoveryLedger {
    writer: JournalWriter,
    /// History a full disk kept out, until a record fits again.
    unwritten: Option<Unwritten>,
    /// When `ledger.jsonl` rotates: the configuration's, as of the last record.
    retention: harn_core::journal::Retention,
    owner: Owner,
    notes: BTreeMap<Id, Notes>,
    paths: Paths,
}

impl RecoveryLedger {
    /// Opens `ledger.jsonl` for appending after verifying every line (cutting a torn tail; a
    /// corrupt line anywhere refuses the open, so nothing is appended after it).
    /// A damaged ledger is history, not the daemon's truth: it is set aside whole and a new one
    /// begun (returned, for the caller to record once the ledger can take records).
    pub fn open(
        fs: &mut dyn Fs,
        paths: &Paths,
        now: harn_core::time::WallTime,
    ) -> Result<(RecoveryLedger, Option<SetAside>), FsError> {
        let (writer, set_aside) =
            JournalWriter::open_setting_aside(fs, Paths::ledger_relative(), now)?;
        let uid = rustix::process::geteuid().as_raw();
        let owner = Owner {
            uid,
            user: user_name(uid),
            lock_holder_pid: std::process::id(),
            boot_id: crate::os::procfs::boot_id(),
            state_path: paths.state().display().to_string(),
            service_manager: if std::env::var_os("NOTIFY_SOCKET").is_some() {
                "systemd (NOTIFY_SOCKET)"
            } else {
                "none"
            },
        };
        let retention = Default::default();
        let ledger = RecoveryLedger {
            writer,
            unwritten: None,
            retention,
            owner,
            notes: BTreeMap::new(),
            paths: paths.clone(),
        };
        Ok((ledger, set_aside))
    }

    /// Notes processes of an earlier daemon stopped before this harness's first spawn.
    pub fn note_reclaimed(&mut self, name: &Id, pids: &[u32], forced: bool) {
        let note = json!({ "pids": pids, "forced": forced });
        self.notes.entry(name.clone()).or_default().reclaimed = Some(note);
    }

    /// Notes the limits the run of `name` that just ended had reached (none: none), for its
    /// termination evidence.
    pub fn note_limits(&mut self, name: &Id, reached: &[harn_core::limits::LimitReached]) {
        self.notes.entry(name.clone()).or_default().reached = reached.to_vec();
    }

    /// Appends one record per lifecycle decision found in `executed`, durably.
    pub fn record(
        &mut self,
        fs: &mut dyn Fs,
        clock: &dyn Clock,
        executed: &[Executed],
        daemon: &Daemon,
        facts: &Facts<'_>,
    ) -> Result<(), FsError> {
        let mut records = Vec::new();
        let wall_ms = clock.wall().0;
        for e in executed {
            let events = match e {
                Executed::Appended { events, .. } => events,
                // Events the journal could not take are still decisions: the ledger records
                // them if it can, and counts them either way.
                Executed::Dropped { cause, events } => {
                    self.unwritten_now(cause, wall_ms).events += events.len() as u64;
                    events
                }
                _ => continue,
            };
            for event in events {
                if let Some(record) = self.decision(event, wall_ms, daemon, facts) {
                    records.push(record);
                }
            }
        }
        self.retention = facts.config.retention;
        if records.is_empty() {
            return Ok(());
        }
        self.append(fs, clock, &records)
    }

    /// Appends durably, then starts a new file when this one is full (`ledger.jsonl.1` …).
    /// On a full disk the records are dropped and counted, never fatal: the ledger is
    /// history, and supervision goes on without it. The first append that fits again
    /// begins with what was dropped.
    fn append(
        &mut self,
        fs: &mut dyn Fs,
        clock: &dyn Clock,
        records: &[Value],
    ) -> Result<(), FsError> {
        let wall = clock.wall();
        let mut batch = Vec::with_capacity(records.len() + 1);
        if let Some(u) = &self.unwritten {
            batch.push(json!({
                "harness": Value::Null,
                "decision": "records_dropped",
                "detail": { "cause": u.cause, "since_ms": u.since_ms, "until_ms": wall.0,
                            "records": u.records, "events": u.events },
            }));
        }
        batch.extend_from_slice(records);
        match self.writer.append(fs, wall, &batch) {
            Ok(_) => self.unwritten = None,
            Err(e) if e.kind == harn_core::env::FsErrorKind::NoSpace => {
                self.writer.recover(fs)?;
                self.unwritten_now(&e.to_string(), wall.0).records += records.len() as u64;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        match self.writer.rotate_if_full(fs, self.retention) {
            Err(e) if e.kind == harn_core::env::FsErrorKind::NoSpace => Ok(()),
            other => other.map(drop),
        }
    }

    /// The count of what a full disk keeps out, begun now if it was not already.
    fn unwritten_now(&mut self, cause: &str, wall_ms: i64) -> &mut Unwritten {
        let u = self.unwritten.get_or_insert_with(|| Unwritten {
            cause: String::new(),
            since_ms: wall_ms,
            records: 0,
            events: 0,
        });
        u.cause = cause.to_owned();
        u
    }

    /// What a full disk keeps out of the history now, if anything.
    pub fn unwritten(&self) -> Option<&Unwritten> {
        self.unwritten.as_ref()
    }

    /// Records that a second daemon for this root (`pid`, running `command`) was refused
    /// because this one holds the lock: a record of the daemon's, with no harness.
    pub fn refused_start(
        &mut self,
        fs: &mut dyn Fs,
        clock: &dyn Clock,
        pid: u32,
        command: &str,
    ) -> Result<(), FsError> {
        let detail = json!({ "pid": pid, "command": command,
                             "why": "another daemon holds the lock of this root" });
        self.note(fs, clock, Value::Null, "duplicate_start_refused", detail)
    }

    /// Records that boot found the daemon's history journal damaged and set it aside.
    pub fn set_aside(
        &mut self,
        fs: &mut dyn Fs,
        clock: &dyn Clock,
        what: &SetAside,
    ) -> Result<(), FsError> {
        let detail = json!({ "moved_to": what.moved_to, "damage": what.damage,
                             "why": "history, not the daemon's truth: a new journal was begun" });
        self.note(fs, clock, Value::Null, "log_set_aside", detail)
    }

    /// Records that boot found `state.json` gone though the daemon had run here before.
    pub fn state_lost(
        &mut self,
        fs: &mut dyn Fs,
        clock: &dyn Clock,
        why: &str,
    ) -> Result<(), FsError> {
        self.note(fs, clock, Value::Null, "state_lost", json!({ "why": why }))
    }

    /// Records that `by` typed `bytes` bytes into harness `name`'s terminal.
    pub fn sent(
        &mut self,
        fs: &mut dyn Fs,
        clock: &dyn Clock,
        name: &Id,
        bytes: usize,
        by: &str,
    ) -> Result<(), FsError> {
        let detail = json!({ "bytes": bytes, "by": by });
        self.note(fs, clock, json!(name), "input_sent", detail)
    }

    /// Appends one record that is no lifecycle decision (a refused start, input sent), with
    /// who decided it and where the state lives.
    fn note(
        &mut self,
        fs: &mut dyn Fs,
        clock: &dyn Clock,
        harness: Value,
        decision: &str,
        detail: Value,
    ) -> Result<(), FsError> {
        let record = json!({
            "harness": harness,
            "decision": decision,
            "detail": detail,
            "ownership": { "lock_holder_pid": self.owner.lock_holder_pid,
                           "boot_id": self.owner.boot_id, "user": self.owner.user },
            "state_path": self.owner.state_path,
            "files": self.files(None),
        });
        self.append(fs, clock, &[record])
    }

    /// Owner and mode of every file the daemon keeps, and of `harness`'s log: what a
    /// person checks when a record says who decided.
    fn files(&self, harness: Option<&Id>) -> Value {
        let p = &self.paths;
        let mut paths = vec![p.state(), p.events(), p.ledger(), p.daemon_log()];
        paths.extend(harness.map(|name| p.log(name)));
        Value::Array(paths.iter().map(|path| file_facts(path)).collect())
    }

    /// Who a harness's processes run as: its configured `user` and `group` (resolved now),
    /// else the daemon's own user.
    fn run_as(&self, spec: &harn_core::harness::lifecycle::HarnessSpec) -> Value {
        let Some(user) = &spec.spawn.user else {
            return json!({ "uid": self.owner.uid, "user": self.owner.user, "configured": false });
        };
        match crate::os::identity::resolve(user, spec.spawn.group.as_deref()) {
            Ok(id) => json!({ "uid": id.uid, "user": id.user, "gid": id.gid, "group": id.group,
                              "groups": id.groups, "configured": true }),
            Err(e) => json!({ "user": user, "group": spec.spawn.group, "configured": true,
                              "error": e }),
        }
    }

    fn decision(
        &mut self,
        event: &Event,
        wall_ms: i64,
        daemon: &Daemon,
        facts: &Facts<'_>,
    ) -> Option<Value> {
        let (name, decision, detail) = match event {
            Event::HarnessStateChanged { name, from, to, .. } => {
                (name, "state_changed", json!({ "from": from, "to": to }))
            }
            Event::HarnessExited { name, code, signal } => {
                (name, "exited", json!({ "code": code, "signal": signal }))
            }
            Event::HarnessReady { name, run } => (name, "ready", json!({ "run": run })),
            Event::HarnessUnready { name, run } => (
                name,
                "readiness_lost",
                json!({ "run": run, "why": "a recheck of its readiness evidence failed" }),
            ),
            Event::HarnessHung { name, reason, after_ms } => (
                name,
                "hung",
                json!({ "reason": reason, "why": reason.as_str(), "after_ms": after_ms }),
            ),
            Event::HarnessFlapping { name, restarts, next_retry_in } => (
                name,
                "flapping",
                json!({ "restarts": restarts, "next_retry_in_ms": next_retry_in }),
            ),
        };
        let notes = self.notes.entry(name.clone()).or_default();
        if let Event::HarnessHung { reason, .. } = event {
            notes.hung = Some(reason.as_str());
        }
        let started_by = match event {
            Event::HarnessStateChanged { to: State::Starting, cause, .. } => {
                notes.stop_requested = None;
                notes.hung = None;
                cause.map(Cause::as_str)
            }
            Event::HarnessStateChanged { cause: Some(cause), .. } => {
                notes.stop_requested = Some(json!({ "at_ms": wall_ms, "by": cause.as_str() }));
                None
            }
            _ => None,
        };
        let mut record = match daemon.harnesses().get(name) {
            Some(h) => self.columns(name, h, daemon, facts),
            // Removed by a reload after this step: the last known columns, with what changed.
            None => {
                let last = self.notes.get(name).and_then(|n| n.last.as_deref())?;
                let mut last: Value = serde_json::from_str(last).ok()?;
                if let Event::HarnessStateChanged { to, .. } = event {
                    last["observed"] = json!(to.as_str());
                    last["liveness"] = json!({ "pid": null, "alive": false });
                }
                last
            }
        };
        // Evidence as it stood at the decision, not after the step carried it out: a move
        // is observed in the state it moved to, and a start has no process yet (the run it
        // spawned in the same step is named apart).
        if let Event::HarnessStateChanged { to, .. } = event {
            record["observed"] = json!(to.as_str());
            if *to == State::Starting {
                let spawned = record["liveness"]["pid"].take();
                record["liveness"] = json!({ "pid": null, "alive": false, "spawned_pid": spawned });
            }
        }
        let map = record.as_object_mut().expect("an object");
        map.insert("decision".into(), decision.into());
        map.insert("detail".into(), detail);
        map.insert("started_by".into(), json!(started_by));
        if started_by.is_some() {
            map.insert("duplicate_start_check".into(), self.duplicate_check(name, daemon, facts));
        }
        // Kept as text: a record as a JSON tree is many small allocations, for every
        // harness, and it is read back only if a reload removes the harness.
        self.notes.entry(name.clone()).or_default().last = Some(record.to_string());
        Some(record)
    }

    /// Checks, as a run starts, that no other process of the harness is alive: its cgroup
    /// holds nothing but the new run. Without cgroups it says so instead of claiming a check.
    fn duplicate_check(&self, name: &Id, daemon: &Daemon, facts: &Facts<'_>) -> Value {
        let reclaimed = self.notes.get(name).and_then(|n| n.reclaimed.clone());
        let own = daemon.harnesses().get(name).and_then(|h| h.pid());
        let Some(members) = (facts.cgroup_members)(name) else {
            let result =
                "not checked: no cgroup (earlier runs are stopped with their process group)";
            return json!({ "result": result, "reclaimed": reclaimed });
        };
        // The new run's own children (in the session it leads) are the new run, however
        // quickly it made them: only a process outside it is another instance.
        let others: Vec<u32> = members
            .into_iter()
            .filter(|p| Some(*p) != own)
            .filter(|p| own.is_none() || crate::os::procfs::session_of(*p) != own)
            .collect();
        if others.is_empty() {
            json!({ "result": "passed: the harness's cgroup holds only the new run", "reclaimed": reclaimed })
        } else {
            json!({ "result": "FAILED: other processes in the harness's cgroup", "pids": others, "reclaimed": reclaimed })
        }
    }

    fn columns(&self, name: &Id, h: &Harness, daemon: &Daemon, facts: &Facts<'_>) -> Value {
        let d = h.durable();
        let limits = &h.active_spec().crash_loop.apply(&facts.config.limits);
        let notes = self.notes.get(name);
        let latch = if d.failed {
            Some("failed")
        } else if h.flapping() {
            Some("crash-loop")
        } else {
            None
        };
        let hung = notes.and_then(|n| n.hung);
        let termination = d.last_exit.map(|e| {
            let (code, signal) = match e.status {
                Some(harn_core::env::ExitStatus::Code(c)) => (Some(c), None),
                Some(harn_core::env::ExitStatus::Signal(s)) => (None, Some(s)),
                None => (None, None),
            };
            // Why SIGKILL was needed, as a field of its own.
            let grace = h.active_spec().stop_grace.unwrap_or(limits.stop_grace).as_millis();
            let forced_because = e.forced.then(|| match (facts.drain_expired, hung) {
                (true, _) => "the drain deadline passed".to_owned(),
                (false, Some(why)) => format!("hung ({why}), then its {grace} ms grace ran out"),
                (false, None) => format!("its {grace} ms grace after SIGTERM ran out"),
            });
            // An OOM kill is the kernel's at the harness's own limit: said as such.
            let reached = notes.map(|n| n.reached.clone()).unwrap_or_default();
            let oom = reached.iter().find_map(|r| match r {
                harn_core::limits::LimitReached::Memory { oom_kills, .. } => Some(*oom_kills),
                _ => None,
            });
            json!({ "exit_code": code, "signal": signal, "forced": e.forced,
                    "forced_because": forced_because, "spawn_failed": e.status.is_none(),
                    "hung": hung, "oom_killed": oom.is_some(), "oom_kills": oom,
                    "limits_reached": reached,
                    "limits_said": reached.iter().map(|r| r.to_string()).collect::<Vec<_>>() })
        });
        let lived =
            h.started_at().filter(|_| h.pid().is_some()).map(|t| facts.now.saturating_since(t));
        let rotation = crate::os::logs::Rotation::from(facts.config.retention);
        // A live pid is not readiness: with none configured, nothing proves the run ready.
        let kind = (facts.readiness)(name);
        let readiness = match kind {
            "none" => json!({ "kind": kind, "ready": null, "proven": false,
                              "why": "readiness = \"none\": a live pid is not readiness" }),
            _ => json!({ "kind": kind, "ready": h.pid().is_some() && h.ready(),
                         "proven": h.pid().is_some() && h.ready(),
                         "recheck_ms": h.active_spec().recheck.map(|d| d.as_millis()) }),
        };
        // The harness's own last WATCHDOG=1, dated on the wall clock.
        let last_ping_ms =
            h.pinged_at().map(|t| facts.wall_ms - facts.now.saturating_since(t).as_millis() as i64);
        json!({
            "harness": name,
            "run_as": self.run_as(h.active_spec()),
            "desired": if d.enabled { "running" } else { "stopped" },
            "observed": h.state().as_str(),
            "run": h.current_run().unwrap_or(d.runs),
            "ownership": { "lock_holder_pid": self.owner.lock_holder_pid, "boot_id": self.owner.boot_id },
                        "duplicate_start_check": null,
            "dependencies": dependencies(name, h, daemon),
            "readiness": readiness,
            "liveness": { "pid": h.pid(), "alive": h.pid().is_some() },
            "watchdog": {
                "interval_ms": h.active_spec().watchdog.map(|d| d.as_millis()),
                "last_ping_ms": last_ping_ms,
            },
            "last_watchdog_ping_ms": last_ping_ms,
            "daemon_watchdog_ping_ms": facts.last_watchdog_ms,
            "restart_policy": h.active_spec().restart,
            "failures_in_window": h.recent_exit_count(),
            "window_ms": limits.flap_window.as_millis(),
            "current_delay_ms": h.retry_delay().map(|d| d.as_millis()),
            "consecutive_failures": d.consecutive_failures,
            "give_up_ceiling": limits.give_up_after,
            "latch": latch,
            "stop_requested": notes.and_then(|n| n.stop_requested.clone()),
            "intake_closed": daemon.draining(),
            "drain": facts.drain_deadline_ms.map(|at| json!({ "deadline_ms": at, "expired": facts.drain_expired })),
            "termination": termination,
            "healthy_run": {
                "after_ms": limits.healthy_run.as_millis(),
                "run_for_ms": lived.map(|l| l.as_millis()),
                "reached": lived.is_some_and(|l| l >= limits.healthy_run),
            },
            "service_manager": self.owner.service_manager,
            "state_path": self.owner.state_path,
            "log_path": self.paths.log(name),
            "files": self.files(Some(name)),
            "log_retention": { "max_file_bytes": rotation.max_file_bytes, "rotated_kept": rotation.keep },
            "retention": facts.config.retention,
        })
    }
}

/// A file's path, owner and mode (`"0600"`), or that it does not exist yet.
fn file_facts(path: &std::path::Path) -> Value {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) => json!({ "path": path, "owner": user_name(m.uid()), "uid": m.uid(),
                         "mode": format!("{:04o}", m.mode() & 0o7777) }),
        Err(_) => json!({ "path": path, "owner": null, "uid": null, "mode": null }),
    }
}

/// The login name of `uid` from /etc/passwd, or the number.
fn user_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
        })
        .unwrap_or_else(|| uid.to_string())
}

/// Hands each ledger record of `name` (every harness when `None`) at or after `since` to
/// `each`, oldest first across the rotated files, verified line by line and read a chunk
/// at a time: memory stays bounded by a chunk and the longest line, however long the
/// ledger. Each record gets `seq`, `ts` and `file`.
pub fn each_record(
    paths: &Paths,
    name: Option<&str>,
    since: Option<harn_core::time::WallTime>,
    mut each: impl FnMut(Value),
) -> Result<(), String> {
    use harn_core::journal::EachError;
    let mut fs = crate::os::fs::RealFs::new(paths.root.clone());
    for path in crate::os::logs::oldest_first(&paths.ledger()) {
        let Ok(rel) = path.strip_prefix(&paths.root) else { continue };
        let rel = rel.to_string_lossy().into_owned();
        let shown = path.display().to_string();
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
        let read = harn_core::journal::read_each::<Value, std::convert::Infallible>(
            &mut fs,
            &rel,
            &shown,
            |r| {
                let wanted =
                    name.is_none_or(|n| r.body["harness"] == n) && since.is_none_or(|t| r.ts >= t);
                if wanted {
                    let mut body = r.body;
                    if let Some(map) = body.as_object_mut() {
                        map.insert("seq".into(), r.seq.into());
                        map.insert("ts".into(), r.ts.0.into());
                        map.insert("file".into(), file.clone().into());
                    }
                    each(body);
                }
                Ok(())
            },
        );
        match read {
            Ok(_) => {}
            Err(EachError::Corrupt(e)) => return Err(e.to_string()),
            Err(EachError::Fs(e)) => return Err(format!("{shown}: {e}")),
            Err(EachError::Refused(never)) => match never {},
        }
    }
    Ok(())
}

/// The last `last` records of `name` (see [`each_record`]), oldest first.
pub fn last_records(paths: &Paths, name: Option<&str>, last: usize) -> Result<Vec<Value>, String> {
    let mut kept = std::collections::VecDeque::with_capacity(last.min(4096));
    each_record(paths, name, None, |r| {
        if kept.len() == last {
            kept.pop_front();
        }
        if last > 0 {
            kept.push_back(r);
        }
    })?;
    Ok(kept.into())
}

/// `harn harness ledger [NAME] [--since WHEN] [--last N] [--json]`: prints the ledger,
/// verified line by line, as it is read (the whole of it by default); `--last` keeps only
/// the last N records in memory.
pub fn show(
    paths: &Paths,
    name: Option<&str>,
    since: Option<harn_core::time::WallTime>,
    last: Option<usize>,
    json: bool,
) -> crate::exit::Exit {
    use std::io::Write;
    let failed = crate::exit::Failure::failed;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    // A reader that went away (a pager closed) ends the listing, never a panic.
    let mut broken = false;
    let mut put = |bytes: &[u8]| {
        if !broken && out.write_all(bytes).is_err() {
            broken = true;
        }
    };
    let mut first = true;
    let mut print = |r: Value| {
        if json {
            put(if first { b"{\"records\":[" } else { b"," });
            put(r.to_string().as_bytes());
        } else {
            put(line(&r).as_bytes());
            put(b"\n");
        }
        first = false;
    };
    match last {
        Some(n) => {
            let kept = last_records(paths, name, n).map_err(failed)?;
            kept.into_iter()
                .filter(|r| since.is_none_or(|t| r["ts"].as_i64() >= Some(t.0)))
                .for_each(&mut print);
        }
        None => each_record(paths, name, since, &mut print).map_err(failed)?,
    }
    if json {
        put(if first { b"{\"records\":[]}\n" } else { b"]}\n" });
    }
    let _ = out.flush();
    Ok(0)
}

/// One record as a line: when, which harness, what was decided, and the facts around it.
pub fn line(r: &Value) -> String {
    let detail = match r["decision"].as_str() {
        Some("state_changed") => format!(
            "{} -> {}",
            r["detail"]["from"].as_str().unwrap_or("?"),
            r["detail"]["to"].as_str().unwrap_or("?")
        ),
        Some("exited") => match (r["detail"]["code"].as_i64(), r["detail"]["signal"].as_i64()) {
            (Some(c), _) => format!("exited {c}"),
            (_, Some(s)) => format!("signal {s}"),
            _ => "did not start".into(),
        },
        Some("flapping") => format!("flapping, next try in {} ms", r["detail"]["next_retry_in_ms"]),
        Some("input_sent") => {
            return format!(
                "{} #{:<5} {:<16} {} sent {} bytes to its terminal",
                crate::os::clock::utc(r["ts"].as_i64().unwrap_or(0)),
                r["seq"].as_u64().unwrap_or(0),
                r["harness"].as_str().unwrap_or("?"),
                r["detail"]["by"].as_str().unwrap_or("?"),
                r["detail"]["bytes"]
            )
        }
        Some("duplicate_start_refused") => {
            return format!(
                "{} #{:<5} {:<16} a second daemon (pid {}) was refused: pid {} owns the root",
                crate::os::clock::utc(r["ts"].as_i64().unwrap_or(0)),
                r["seq"].as_u64().unwrap_or(0),
                "(daemon)",
                r["detail"]["pid"],
                r["ownership"]["lock_holder_pid"]
            )
        }
        other => other.unwrap_or("?").to_owned(),
    };
    let mut facts = vec![format!("want {}", r["desired"].as_str().unwrap_or("?"))];
    if let Some(by) = r["started_by"].as_str() {
        facts.push(format!("started by {by}"));
    }
    if let Some(stop) = r["stop_requested"].as_object() {
        facts.push(format!(
            "stop asked by {}",
            stop.get("by").and_then(Value::as_str).unwrap_or("?")
        ));
    }
    if let Some(latch) = r["latch"].as_str() {
        facts.push(format!("latch {latch}"));
    }
    facts.push(format!("{} in {} ms window", r["failures_in_window"], r["window_ms"]));
    if let Some(ms) = r["current_delay_ms"].as_u64() {
        facts.push(format!("delay {ms} ms"));
    }
    if r["termination"]["forced"] == true {
        facts.push("killed after grace".into());
    }
    if r["duplicate_start_check"]["reclaimed"].is_object() {
        facts.push("stopped an earlier daemon's processes first".into());
    }
    format!(
        "{} #{:<5} {:<16} {:<28} {}",
        crate::os::clock::utc(r["ts"].as_i64().unwrap_or(0)),
        r["seq"].as_u64().unwrap_or(0),
        r["harness"].as_str().unwrap_or("?"),
        detail,
        facts.join(", ")
    )
}

/// The ledger's `dependencies` column: what the harness declares, and for each dependency the
/// evidence the daemon went by (ready with a live pid, or where it stands while it is waited for).
fn dependencies(name: &Id, h: &harn_core::harness::lifecycle::Harness, daemon: &Daemon) -> Value {
    let spec = h.active_spec();
    if spec.requires.is_empty() && spec.after.is_empty() {
        return json!({ "declared": [], "evidence": "none declared" });
    }
    let waiting = daemon.waiting_for(name);
    let evidence: Vec<Value> = spec
        .requires
        .iter()
        .map(|d| (d, "requires"))
        .chain(spec.after.iter().map(|d| (d, "after")))
        .map(|(dep, kind)| {
            let state = daemon.harnesses().get(dep).map(|d| d.state().as_str());
            let pid = daemon.harnesses().get(dep).and_then(|d| d.pid());
            let wait = waiting.iter().find(|(n, _)| n == dep).map(|(_, how)| *how);
            // What this harness does while the dependency is not there, in words.
            let when_unavailable = match kind {
                "requires" => "a run waits in starting, unspawned, until it is ready",
                _ => "a run waits only while it is on its way up (starting, restarting)",
            };
            json!({ "name": dep, "kind": kind, "state": state, "pid": pid,
                    "ready": wait.is_none(), "waited_for": wait,
                    "when_unavailable": when_unavailable })
        })
        .collect();
    json!({ "declared": { "requires": spec.requires, "after": spec.after }, "evidence": evidence })
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(crate::os::clock::utc(0), "1970-01-01 00:00:00.000");
        assert_eq!(crate::os::clock::utc(1_767_225_600_123), "2026-01-01 00:00:00.123");
        assert_eq!(crate::os::clock::utc(951_782_400_000), "2000-02-29 00:00:00.000");
    }
}
