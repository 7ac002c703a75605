//! One sweep of the daemon over its enrolled goals (the decisions are the core's
//! `service::sweep`), and the read cache that makes a quiescent goal cheap: a goal is read in
//! full only when the metadata of the files its state comes from changed, when it has work in
//! flight, or when its last full read is older than `FULL_READ_EVERY` (the rule is the core's
//! `service::cache`; this collects the metadata).

use super::shared::Shared;
use crate::goal::engine::{drive, goal_limits};
use crate::goal::store;
use crate::os::store::Store;
use harn_core::env::Clock;
use harn_core::goal::{goal_fingerprint, GoalState, Mode};
use harn_core::ids::Id;
use harn_core::service::cache::{self, PathMeta, Signature};
use harn_core::service::driver::SweepOutcome;
use harn_core::service::wake::{Fingerprint, GoalWake, ServiceScheduler};
use harn_core::service::{ServiceConfig, SweepHost, Ticked};
use harn_core::time::Duration as CoreDuration;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What the last full read of each goal found, and the signature of its files then.
#[derive(Debug, Default)]
pub struct ReadCache {
    goals: BTreeMap<Id, Cached>,
    directories: std::collections::BTreeSet<String>,
    /// Where each goal stood at its last full read: `"state: reason"`.
    standing: BTreeMap<Id, String>,
}

#[derive(Debug)]
struct Cached {
    paths: Vec<String>,
    signature: Signature,
    read: (Fingerprint, bool),
    at: Instant,
}

impl ReadCache {
    /// Every directory a full read so far took a goal's state from.
    pub fn directories(&self) -> &std::collections::BTreeSet<String> {
        &self.directories
    }

    /// A goal's fingerprint and readiness: from the cache when its files' signature is the one
    /// of its last full read, else read in full (and cached when nothing of it is in flight).
    pub fn read(&mut self, store: &mut Store, goal: &Id) -> Result<(Fingerprint, bool), String> {
        if let Some(c) = self.goals.get(goal) {
            let age = CoreDuration(u64::try_from(c.at.elapsed().as_nanos()).unwrap_or(u64::MAX));
            if cache::still_valid(&c.signature, &signature(store.root(), &c.paths), age) {
                return Ok(c.read);
            }
        }
        self.goals.remove(goal);
        let read_at = unix_ns(std::time::SystemTime::now());
        let g = store::read(store, goal).map_err(|e| e.to_string())?;
        let read = (
            Fingerprint::new(goal_fingerprint(&g.projection, &g.items)),
            g.projection.state == GoalState::Ready,
        );
        let state = json!(g.projection.state);
        let standing = format!("{}: {}", state.as_str().unwrap_or(""), g.projection.reason);
        self.standing.insert(goal.clone(), standing);
        let paths = cache::watched_paths(&g);
        self.directories.extend(paths.iter().map(|p| {
            let file = p.strip_suffix("/events.jsonl").or_else(|| p.strip_suffix("/intent.json"));
            file.map_or_else(|| p.clone(), str::to_owned)
        }));
        if cache::settled(&g) {
            let signature = signature(store.root(), &paths);
            if cache::cacheable(&signature, read_at) {
                self.goals
                    .insert(goal.clone(), Cached { paths, signature, read, at: Instant::now() });
            }
        }
        Ok(read)
    }
}

/// The signature of the paths' metadata (a missing path counts too, as missing).
pub(crate) fn signature(root: &Path, paths: &[String]) -> Signature {
    use std::os::unix::fs::MetadataExt;
    let metas: Vec<PathMeta> = paths
        .iter()
        .map(|p| match std::fs::symlink_metadata(root.join(p)) {
            Ok(m) => PathMeta::Present {
                ino: m.ino(),
                size: m.size(),
                mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
                ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
            },
            Err(_) => PathMeta::Missing,
        })
        .collect();
    cache::signature(&metas)
}

/// A wall-clock time in nanoseconds since the unix epoch (negative before it).
pub(crate) fn unix_ns(t: std::time::SystemTime) -> i128 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// The daemon's sweep host: goals read through the cache, ticked through the supervisor loop
/// with the frozen engine options.
struct RealSweep<'a> {
    store: &'a mut Store,
    config: &'a ServiceConfig,
    shared: &'a Shared,
    cache: &'a mut ReadCache,
}

impl SweepHost for RealSweep<'_> {
    type Error = String;

    fn now(&mut self) -> harn_core::time::Instant {
        crate::os::clock::RealClock::new().now()
    }

    fn read(&mut self, goal: &Id) -> Result<(Fingerprint, bool), String> {
        self.cache.read(self.store, goal)
    }

    fn tick(&mut self, goal: &Id) -> Result<Ticked, String> {
        tick(self.store, self.config, self.shared, goal)
    }

    fn ticking(&mut self, goal: Option<&Id>) {
        self.shared.update(|s| s.active_goal_id = goal.cloned());
    }

    fn failed(&mut self, goal: &Id, error: &str, wake: &GoalWake) {
        self.shared.audit.record(json!({
            "event": "goal.error", "goal_id": goal, "error": error,
            "consecutive_errors": wake.consecutive_errors,
        }));
    }

    fn stopping(&mut self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    fn standing(&mut self, goal: &Id, first: bool) -> Option<String> {
        let standing = self.cache.standing.get(goal)?.clone();
        // Found so at start, or changed with no tick of ours: a person's acceptance, ruling
        // or reopen.
        let event = if first { "goal.found" } else { "goal.changed" };
        self.shared.audit.record(json!({ "event": event, "goal_id": goal, "standing": standing }));
        Some(standing)
    }
}

/// One sweep (see `harn_core::service::sweep`).
pub fn sweep(
    store: &mut Store,
    config: &ServiceConfig,
    scheduler: &mut ServiceScheduler,
    shared: &Shared,
    cache: &mut ReadCache,
) -> SweepOutcome {
    reap_lost(store, shared);
    let mut host = RealSweep { store, config, shared, cache };
    let outcome = harn_core::service::sweep(&mut host, scheduler);
    tell(shared);
    outcome
}

/// Records and delivers what the sweep's ticks left waiting for a person, on a thread of its
/// own (one at a time: while one still delivers, the next sweep leaves it be), so a receiver
/// that is slow to answer never holds the service's ticks. What is not delivered is retried
/// at a later sweep; a delivery the service's exit cuts short is sent again under its key.
fn tell(shared: &Shared) {
    let mut telling = shared.telling.lock().unwrap_or_else(|e| e.into_inner());
    if telling.as_ref().is_some_and(|t| !t.is_finished()) {
        return;
    }
    if let Some(done) = telling.take() {
        let _ = done.join();
    }
    let root = shared.root.clone();
    *telling = Some(std::thread::spawn(move || {
        let mut store = Store::new(&root);
        crate::notify::after(&mut store, crate::notify::VERB_BUDGET, super::view::waiting);
    }));
}

/// Ends what runs whose host died left running (a tick killed with the service, a `work run`
/// killed by hand): their cgroups and processes, and their records in `.harnery/running/`,
/// at every sweep, so orphans never live until some later command on their item. A run whose
/// host lives holds its lease and is left alone.
fn reap_lost(store: &mut Store, shared: &Shared) {
    match store.recover(crate::work::hold::reap) {
        Ok(recovered) => {
            for (run, killed) in &recovered.reaped {
                shared.audit.say(&format!(
                    "run {run} had lost its host; {killed} of its processes were stopped"
                ));
                shared
                    .audit
                    .record(json!({ "event": "run.reaped", "run_id": run, "processes": killed }));
            }
            for problem in &recovered.problems {
                shared.audit.say(&format!("warning: {problem}"));
            }
        }
        Err(e) => shared.audit.say(&format!("warning: lost runs were not looked for: {e}")),
    }
}

/// One tick of a ready goal, under its goal lease (released when the tick ends, so readers
/// and a person's `plan approve` see the goal between ticks).
fn tick(
    store: &mut Store,
    config: &ServiceConfig,
    shared: &Shared,
    goal: &Id,
) -> Result<Ticked, String> {
    let intent = store::intent(store, goal).map_err(|e| e.to_string())?;
    let mut limits = goal_limits(store, &intent, &super::host_args(config))?;
    limits.policy = config.engine.policy.clone();
    if let Some(cluster) = &config.engine.cluster {
        limits.cluster = Some(cluster.clone());
        limits.isolation = harn_core::work::run::Isolation::Worktree;
    }
    // The tick's decisions (each dispatch, its outcome, each acceptance) go to the log.
    let mut say = |line: String| shared.audit.say(&format!("goal {goal}: {}", line.trim_start()));
    let mut tick_store = Store::new(store.root());
    let report =
        drive(&mut tick_store, goal, Mode::Tick, &limits, &mut say).map_err(|e| e.to_string())?;
    shared.audit.record(json!({
        "event": "goal.tick", "goal_id": goal, "stop_reason": report.stop.reason,
        "reason": report.stop.detail, "cycles": report.cycles,
        "dispatches": report.dispatches, "acceptances": report.acceptances,
    }));
    Ok(Ticked { reason: report.stop.reason, detail: report.stop.detail })
}
