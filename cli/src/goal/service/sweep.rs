//! One sweep of the daemon over its enrolled goals (the decisions are the core's
//! `service::sweep`), and the read cache that makes a quiescent goal cheap: a goal is read in
//! full only when the metadata of the files its state comes from changed, when it has work in
//! flight, or when its last full read is older than [`FULL_READ_EVERY`].

use super::daemon::Shared;
use crate::goal::runner::{drive, goal_limits};
use crate::goal::store;
use crate::work::store::Store;
use harn_core::env::Clock;
use harn_core::goal::planning::goal_dir;
use harn_core::goal::{goal_fingerprint, GoalState, Mode};
use harn_core::ids::Id;
use harn_core::service::wake::{Fingerprint, GoalWake, ServiceScheduler};
use harn_core::service::{ServiceConfig, SweepHost, Ticked};
use harn_core::work::WorkState;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The longest a goal goes without a full read, whatever its files' metadata says: a bound on
/// how long a change the metadata cannot show (a rewrite within one timestamp tick that keeps
/// the size) can go unnoticed.
pub const FULL_READ_EVERY: Duration = Duration::from_secs(60);

/// How far file timestamps may lag the change they record (coarse kernel clocks, file systems
/// with whole-second times).
const TIMESTAMP_SLACK: Duration = Duration::from_secs(2);

/// What the last full read of each goal found, and the signature of its files then.
#[derive(Debug, Default)]
pub struct ReadCache {
    goals: BTreeMap<Id, Cached>,
    directories: std::collections::BTreeSet<String>,
}

#[derive(Debug)]
struct Cached {
    paths: Vec<String>,
    signature: Fingerprint,
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
            if c.at.elapsed() < FULL_READ_EVERY
                && signature(store.root(), &c.paths).0 == c.signature
            {
                return Ok(c.read);
            }
        }
        self.goals.remove(goal);
        let read_at = std::time::SystemTime::now();
        let g = store::read(store, goal).map_err(|e| e.to_string())?;
        let read = (
            Fingerprint::new(goal_fingerprint(&g.projection, &g.items)),
            g.projection.state == GoalState::Ready,
        );
        let paths = watched_paths(&g);
        self.directories.extend(paths.iter().map(|p| {
            let file = p.strip_suffix("/events.jsonl").or_else(|| p.strip_suffix("/intent.json"));
            file.map_or_else(|| p.clone(), str::to_owned)
        }));
        if cacheable(&g) {
            let (signature, newest) = signature(store.root(), &paths);
            // A file changed during the read, or so close before it that the file system's
            // coarse timestamps cannot tell, may not be in what was read: such a goal is read
            // in full again next sweep rather than trusted (git's "racily clean" rule).
            if newest.is_some_and(|t| t + TIMESTAMP_SLACK < read_at) {
                self.goals
                    .insert(goal.clone(), Cached { paths, signature, read, at: Instant::now() });
            }
        }
        Ok(read)
    }
}

/// Whether a goal's state follows from its files alone: nothing running or parked, whose end
/// or ruling shows first in a lease or in a file this cache does not watch.
fn cacheable(g: &store::Goal) -> bool {
    g.projection.state != GoalState::Running
        && g.items.iter().all(|i| {
            !matches!(i.projection.state, WorkState::Running | WorkState::AwaitingApproval)
        })
}

/// The files and directories a goal's state is read from: its directory, intent and plans, and
/// for every work item of its graph the item's directory, journal and latest run.
fn watched_paths(g: &store::Goal) -> Vec<String> {
    let dir = goal_dir(&g.intent.id);
    // The intent is written once, but one edited or damaged by hand must be noticed (and
    // refused) at once, not at the next full read.
    let mut paths = vec![
        dir.clone(),
        format!("{dir}/intent.json"),
        format!("{dir}/events.jsonl"),
        format!("{dir}/plans"),
        harn_core::layout::WORK.to_owned(),
    ];
    let mut items: std::collections::BTreeSet<&Id> = g.items.iter().map(|i| &i.id).collect();
    items.extend(g.intent.root_work_id.iter());
    for p in &g.plans {
        let plan = harn_core::goal::planning::plan_dir(&g.intent.id, &p.request.plan_id);
        paths.push(format!("{plan}/events.jsonl"));
        paths.push(plan);
        // Work of earlier plans still counts against the goal's attempts.
        items.extend(p.applied.iter().flat_map(|(_, work)| work));
    }
    for id in items {
        paths.push(harn_core::layout::work_dir(id));
        paths.push(format!("{}/events.jsonl", harn_core::layout::work_dir(id)));
    }
    for run in g.items.iter().filter_map(|i| i.projection.latest_run_id.as_ref()) {
        paths.push(harn_core::layout::run_dir(run));
    }
    paths
}

/// A digest of the paths' metadata: inode, size, modification and change times (a missing
/// path counts too, as missing); and the newest of those times.
fn signature(root: &Path, paths: &[String]) -> (Fingerprint, Option<std::time::SystemTime>) {
    use std::os::unix::fs::MetadataExt;
    let mut bytes = Vec::with_capacity(paths.len() * 40);
    let mut newest = Some(std::time::UNIX_EPOCH);
    for p in paths {
        match std::fs::symlink_metadata(root.join(p)) {
            Ok(m) => {
                let ctime = std::time::UNIX_EPOCH
                    + Duration::new(
                        m.ctime().max(0) as u64,
                        m.ctime_nsec().clamp(0, 999_999_999) as u32,
                    );
                newest = newest.max(m.modified().ok()).max(Some(ctime));
                for n in
                    [m.ino() as i64, m.size() as i64, m.mtime(), m.mtime_nsec(), m.ctime_nsec()]
                {
                    bytes.extend_from_slice(&n.to_le_bytes());
                }
            }
            Err(_) => bytes.push(0),
        }
    }
    (Fingerprint::new(bytes), newest)
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
    fn now(&mut self) -> harn_core::time::Instant {
        crate::real_clock::RealClock::new().now()
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
}

/// One sweep (see `harn_core::service::sweep`).
pub fn sweep(
    store: &mut Store,
    config: &ServiceConfig,
    scheduler: &mut ServiceScheduler,
    shared: &Shared,
    cache: &mut ReadCache,
) -> Result<(), String> {
    let mut host = RealSweep { store, config, shared, cache };
    harn_core::service::sweep(&mut host, scheduler)
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
    let mut quiet = |_: String| {};
    let mut tick_store = Store::new(store.root());
    let report =
        drive(&mut tick_store, goal, Mode::Tick, &limits, &mut quiet).map_err(|e| e.to_string())?;
    shared.audit.record(json!({
        "event": "goal.tick", "goal_id": goal, "stop_reason": report.stop.reason,
        "reason": report.stop.detail, "cycles": report.cycles,
        "dispatches": report.dispatches, "acceptances": report.acceptances,
    }));
    Ok(Ticked { reason: report.stop.reason, detail: report.stop.detail })
}
