//! Read-only views of a coordination root: the service's liveness and hints, every goal, every
//! work item, every approval, the harness daemon's status, and the detail of one goal, item or
//! harness. `harn dash` reaches the root only through this
//! module, and nothing here writes a file, takes a lease, spawns a process or runs a tick
//! (`tests/readers.rs` checks both sides of that boundary).

use crate::goal::store as goal_store;
use crate::harness::client::{self, is_ok, ClientError};
use crate::harness::paths::Paths;
use crate::harness::protocol::Request;
use crate::os::store::Store;
pub use crate::service::view::{service, ServiceView, SERVICE_DIR};
use harn_core::goal::{GoalNext, GoalState};
use harn_core::ids::Id;
use harn_core::service::wake::GoalWake;

use harn_core::time::WallTime;
use harn_core::work::{NextAction, WorkState};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// How a harness's state and last exit are shown, the same as `harn harness list`.
pub use crate::harness::status::{last_exit_text, state_glyph};

/// A coordination root opened for reading only: it offers no way to write, lock or run.
pub struct Reader {
    store: Store,
}

impl Reader {
    /// The root at `root` (already resolved).
    pub fn open(root: &Path) -> Reader {
        Reader { store: Store::new(root) }
    }

    /// The coordination root.
    pub fn root(&self) -> &Path {
        self.store.root()
    }

    /// The wall-clock time now, as readings are stamped.
    pub fn now(&self) -> WallTime {
        self.store.now()
    }

    /// See [`service`].
    pub fn service(&mut self) -> ServiceView {
        service(&mut self.store)
    }

    /// See [`goals_kept`].
    pub fn goals(&mut self, service: &ServiceView, kept: &mut Kept) -> Result<GoalListing, String> {
        goals_kept(&mut self.store, service, kept)
    }

    /// See [`work_kept`].
    pub fn work(&mut self, kept: &mut Kept) -> Result<(Vec<WorkRow>, Vec<String>), String> {
        work_kept(&mut self.store, kept)
    }

    /// See [`harnesses`].
    pub fn harnesses(&self, timeout: Duration) -> Result<serde_json::Value, String> {
        harnesses(self.store.root(), timeout)
    }

    /// See [`approvals`].
    pub fn approvals(&mut self) -> Result<(Vec<ApprovalRow>, Vec<String>), String> {
        approvals(&mut self.store)
    }

    /// See [`detail`].
    pub fn detail(&mut self, focus: &Focus) -> Result<Detail, String> {
        detail(&mut self.store, focus)
    }
}

/// One goal as the dashboard shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoalRow {
    /// The goal.
    pub id: Id,
    /// Its state and next action, or the error that kept it from being read.
    pub read: Result<GoalSummary, String>,
    /// Whether the service ticks it.
    pub enrolled: bool,
    /// Its wake hint, when enrolled and swept.
    pub wake: Option<GoalWake>,
    /// What its last service tick came to.
    pub last_outcome: Option<String>,
}

/// A goal's projection, in brief.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoalSummary {
    /// Where it stands.
    pub state: GoalState,
    /// What it needs next.
    pub next_action: GoalNext,
    /// Why, in a sentence.
    pub reason: String,
    /// Work items in its active graph.
    pub work_items: usize,
    /// Attempts used of its ceiling.
    pub attempts_used: u32,
    /// Attempts it may still start.
    pub attempts_remaining: u32,
}

/// Reads a long-lived reader (the dashboard's) keeps between refreshes: each trusted while
/// the metadata of the files it came from is unchanged, by the rule the service's sweep uses
/// (`harn_core::service::cache`: not within the timestamp slack of a change, and never
/// older than a minute). Only what follows from its files alone is kept: nothing running or
/// parked, whose end shows first in a lease.
#[derive(Debug, Default)]
pub struct Kept {
    /// Each goal's summary, with the items (of its graph and of earlier plans) it follows.
    goals: BTreeMap<Id, (KeptRead<GoalSummary>, Vec<Id>)>,
    work: BTreeMap<Id, KeptRead<WorkRow>>,
    /// The items whose kept row held in the latest [`work_kept`]: a goal whose items are
    /// all here, and whose own files did not change, is unchanged too.
    unchanged: std::collections::BTreeSet<Id>,
}

#[derive(Debug)]
struct KeptRead<T> {
    paths: Vec<String>,
    signature: harn_core::service::cache::Signature,
    value: T,
    at: std::time::Instant,
}

impl<T: Clone> KeptRead<T> {
    /// The value, when the files it came from still have its signature.
    fn fresh(&self, root: &Path) -> Option<T> {
        use harn_core::service::cache::still_valid;
        let age = harn_core::time::Duration(
            u64::try_from(self.at.elapsed().as_nanos()).unwrap_or(u64::MAX),
        );
        let now = crate::service::sweep::signature(root, &self.paths);
        still_valid(&self.signature, &now, age).then(|| self.value.clone())
    }
}

/// `value`, read at `read_at_ns` from `paths`, as a kept read if it may be trusted later.
fn keep<T>(root: &Path, paths: Vec<String>, value: T, read_at_ns: i128) -> Option<KeptRead<T>> {
    let signature = crate::service::sweep::signature(root, &paths);
    harn_core::service::cache::cacheable(&signature, read_at_ns).then(|| KeptRead {
        paths,
        signature,
        value,
        at: std::time::Instant::now(),
    })
}

fn unix_now_ns() -> i128 {
    crate::service::sweep::unix_ns(std::time::SystemTime::now())
}

/// The files a goal's summary follows besides its items: its journal and its plans (the
/// directory, for a new one, and each one's journal); and the items it follows, those of its
/// graph and of earlier plans (whose work still counts against its attempts), whose own rows
/// carry their files. Fewer files than the service watches: an intent is written once (one
/// edited by hand shows at the full read every minute, where the service refuses it at
/// once); this keeps a refresh of 10,000 goals cheap.
fn goal_paths(g: &harn_core::goal::engine::GoalView) -> (Vec<String>, Vec<Id>) {
    use harn_core::goal::plan::{goal_dir, plan_dir};
    let dir = goal_dir(&g.intent.id);
    let mut paths = vec![format!("{dir}/events.jsonl")];
    // Only a goal that may replan ever gets a plan.
    if g.intent.replanning.is_some() || !g.plans.is_empty() {
        paths.push(format!("{dir}/plans"));
    }
    let mut items: std::collections::BTreeSet<Id> = g.items.iter().map(|i| i.id.clone()).collect();
    for p in &g.plans {
        paths.push(format!("{}/events.jsonl", plan_dir(&g.intent.id, &p.request.plan_id)));
        items.extend(p.applied.iter().flat_map(|(_, work)| work).cloned());
    }
    (paths, items.into_iter().collect())
}

/// A goal's summary: kept, or read in full (and kept when it may be).
fn goal_summary(
    store: &mut Store,
    id: &Id,
    kept: &mut Kept,
) -> Result<Option<GoalSummary>, String> {
    let root = store.root().to_path_buf();
    let unchanged = &kept.unchanged;
    let held = kept.goals.get(id).and_then(|(k, items)| {
        items.iter().all(|i| unchanged.contains(i)).then(|| k.fresh(&root)).flatten()
    });
    // A ready goal is the one a tick takes next, and taking its lease changes no file: a kept
    // ready goal holds only while nobody holds its lease, so `running` shows the moment
    // another process ticks it (a probe of one lock, not a read of its graph).
    let held = held.filter(|v| {
        v.state != GoalState::Ready || !store.held_elsewhere(&goal_store::goal_lease(id))
    });
    if let Some(value) = held {
        return Ok(Some(value));
    }
    let read_at = unix_now_ns();
    let Some(g) = goal_store::read_listed(store, id).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let value = summary(&g);
    let keepable = harn_core::service::cache::settled(&g);
    let (paths, items) = goal_paths(&g);
    // A read not kept leaves any older one in place: its files or its items changed since,
    // so it is never trusted again.
    if let Some(k) = keep(&root, paths, value.clone(), read_at).filter(|_| keepable) {
        kept.goals.insert(id.clone(), (k, items));
    }
    Ok(Some(value))
}

/// Every goal under the root, enrolled ones first in enrollment order; one that cannot be
/// read is a row carrying its error, never a reason to hide the others.
pub fn goals(store: &mut Store, service: &ServiceView) -> Result<GoalListing, String> {
    goals_kept(store, service, &mut Kept::default())
}

/// [`goals`], through the reads `kept` has; call [`work_kept`] first, in the same refresh,
/// or every goal is read in full.
pub fn goals_kept(
    store: &mut Store,
    service: &ServiceView,
    kept: &mut Kept,
) -> Result<GoalListing, String> {
    let listing = goal_store::ids(store).map_err(|e| e.to_string())?;
    let mut ids = listing.ids;
    let enrolled: Vec<Id> = service.config.as_ref().map_or(Vec::new(), |c| c.goal_ids.clone());
    ids.retain(|id| !enrolled.contains(id));
    let (no_wakes, no_outcomes) = (BTreeMap::new(), BTreeMap::new());
    let hints = service.hints.as_ref();
    let wakes = hints.map_or(&no_wakes, |h| &h.goals);
    let outcomes = hints.map_or(&no_outcomes, |h| &h.last_outcome);
    let rows = enrolled
        .iter()
        .map(|id| (id, true))
        .chain(ids.iter().map(|id| (id, false)))
        .filter_map(|(id, enrolled)| {
            let read = match goal_summary(store, id, kept) {
                Ok(Some(g)) => Ok(g),
                Ok(None) if !enrolled => return None, // A creation cut short: not a goal.
                Ok(None) => Err(format!("no goal {id}")),
                Err(e) => Err(e),
            };
            Some(GoalRow {
                id: id.clone(),
                read,
                enrolled,
                wake: wakes.get(id).cloned(),
                last_outcome: outcomes.get(id).cloned(),
            })
        })
        .collect();
    Ok((rows, listing.problems))
}

/// Every goal, and what is wrong with the entries that are not goals.
pub type GoalListing = (Vec<GoalRow>, Vec<String>);

fn summary(g: &harn_core::goal::engine::GoalView) -> GoalSummary {
    let p = &g.projection;
    GoalSummary {
        state: p.state,
        next_action: p.next_action,
        reason: p.reason.clone(),
        work_items: g.items.len(),
        attempts_used: p.attempts_used,
        attempts_remaining: p.attempts_remaining,
    }
}

/// One work item as the dashboard shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkRow {
    /// The item.
    pub id: Id,
    /// Its title.
    pub title: String,
    /// Where it stands.
    pub state: WorkState,
    /// What it needs next.
    pub next_action: NextAction,
    /// Attempts charged against its budget.
    pub charged: u32,
    /// Its attempt budget.
    pub max_attempts: u32,
    /// Attempts that ran but were not charged (not started, upstream, environment …).
    pub uncharged: u32,
    /// What its agent calls cost, in millionths of a dollar, when any reported a cost.
    pub cost_micro_usd: Option<u64>,
    /// Its run in progress, while one runs.
    pub running: Option<RunningNow>,
}

/// A run in progress, as its manifest and transcript show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunningNow {
    /// The run.
    pub run_id: Id,
    /// When it started.
    pub started_at: WallTime,
    /// The agent call it waits on, if any: its request id and harness.
    pub call: Option<(String, String)>,
}

/// The latest run of a running item: when it started and the call it waits on.
fn running_now(store: &mut Store, run_id: &Id) -> Option<RunningNow> {
    let (manifest, proof) = store.run_records(run_id).ok()?;
    if proof.is_some() {
        return None;
    }
    let records = store.ledger().transcript(run_id).unwrap_or_default();
    let mut open: Vec<(String, String)> = Vec::new();
    for r in &records {
        let id = r["id"].as_str().unwrap_or("").to_owned();
        match r["event"].as_str() {
            Some("agent.start") => open.push((id, r["harness"].as_str().unwrap_or("").to_owned())),
            Some("agent.end") => open.retain(|(i, _)| *i != id),
            _ => {}
        }
    }
    Some(RunningNow { run_id: run_id.clone(), started_at: manifest?.started_at, call: open.pop() })
}

/// Every work item, and the errors of the ones that could not be read.
pub fn work(store: &mut Store) -> Result<(Vec<WorkRow>, Vec<String>), String> {
    work_kept(store, &mut Kept::default())
}

/// [`work`], through the reads `kept` has. An item's row is kept with the signature of its
/// journal and latest run, and of its prerequisites' journals (its state follows theirs).
pub fn work_kept(
    store: &mut Store,
    kept: &mut Kept,
) -> Result<(Vec<WorkRow>, Vec<String>), String> {
    use harn_core::layout::{run_dir, work_dir};
    let listing = store.ids().map_err(|e| e.to_string())?;
    let root = store.root().to_path_buf();
    let mut known = harn_core::work::ledger::Known::new();
    let (mut rows, mut problems) = (Vec::new(), listing.problems);
    kept.unchanged.clear();
    for id in listing.ids {
        if let Some(row) = kept.work.get(&id).and_then(|k| k.fresh(&root)) {
            rows.push(row);
            kept.unchanged.insert(id);
            continue;
        }
        let read_at = unix_now_ns();
        match store.read(&id, &mut known) {
            Ok(item) => {
                let p = &item.projection;
                let running = match (&p.state, &p.latest_run_id) {
                    (WorkState::Running, Some(run)) => running_now(store, run),
                    _ => None,
                };
                let mut paths = Vec::new();
                for of in std::iter::once(&id).chain(&item.intent.dependencies) {
                    paths.push(format!("{}/events.jsonl", work_dir(of)));
                }
                paths.extend(p.latest_run_id.iter().map(run_dir));
                let settled = !matches!(p.state, WorkState::Running | WorkState::AwaitingApproval);
                let row = WorkRow {
                    id: id.clone(),
                    title: item.intent.title.clone(),
                    state: p.state,
                    next_action: p.next_action,
                    charged: p.charged_attempts,
                    max_attempts: item.intent.max_attempts,
                    uncharged: p.attempts_used.saturating_sub(p.charged_attempts),
                    cost_micro_usd: item.usage.as_ref().and_then(|u| u.cost_micro_usd),
                    running,
                };
                let k = keep(&root, paths, row.clone(), read_at);
                if let Some(k) = k.filter(|_| settled) {
                    kept.work.insert(id.clone(), k);
                }
                rows.push(row);
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    Ok((rows, problems))
}

/// The harness daemon's status document (as `harn harness status --json` prints it): asked of
/// the daemon when it runs, else read from its `state.json`.
pub fn harnesses(root: &Path, timeout: Duration) -> Result<serde_json::Value, String> {
    let paths = Paths::new(root).map_err(|e| e.to_string())?;
    match client::request(&paths, &Request::Status { name: None }, timeout) {
        Ok(answer) if is_ok(&answer) => Ok(answer),
        Ok(answer) => Err(answer["error"].as_str().unwrap_or("refused").to_owned()),
        Err(ClientError::NotRunning(_)) => {
            // A configuration that does not load is said, not taken for none.
            let file = root.join("harness.toml");
            let config = match crate::harness::config::load(&file) {
                Ok(c) => Some(c),
                Err(e) if file.exists() => return Err(e.to_string()),
                Err(_) => None,
            };
            crate::harness::status::offline_document(&paths, config.as_ref(), None)
                .map_err(|f| f.message)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The wall-clock time now, for ages shown next to what was read.
pub fn wall_now() -> WallTime {
    use harn_core::env::Clock;
    crate::os::clock::RealClock::new().wall()
}

/// One approval as the dashboard lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalRow {
    /// Its id.
    pub id: Id,
    /// `pending`, `approved` or `denied`.
    pub status: String,
    /// The parked item.
    pub work_id: String,
    /// Whom it asks.
    pub addressee: String,
    /// What it asks, in a few words.
    pub asks: String,
}

/// Every approval, pending ones first; unreadable ones as lines of their own.
pub fn approvals(store: &mut Store) -> Result<(Vec<ApprovalRow>, Vec<String>), String> {
    let listing = store.approval_ids().map_err(|e| e.to_string())?;
    let (mut rows, mut problems) = (Vec::new(), listing.problems);
    for id in listing.ids {
        match store.approval(&id) {
            Ok(Some((request, decision))) => {
                let request = serde_json::json!(request);
                let status = match decision.map(|d| d.verdict) {
                    None => "pending".to_owned(),
                    Some(v) => match name_of(&v).as_str() {
                        "allow" => "approved".to_owned(),
                        _ => "denied".to_owned(),
                    },
                };
                rows.push(ApprovalRow {
                    id,
                    status,
                    work_id: request["work_id"].as_str().unwrap_or("").to_owned(),
                    addressee: request["addressee"].as_str().unwrap_or("").to_owned(),
                    asks: crate::work::approvals::summary(&request["request"]),
                });
            }
            Ok(None) => {}
            Err(e) => problems.push(format!("{id}: {e}")),
        }
    }
    rows.sort_by_key(|r| r.status != "pending");
    Ok((rows, problems))
}

/// What one entity the dashboard opens is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Focus {
    /// A goal.
    Goal(Id),
    /// A work item.
    Work(Id),
    /// A harness of the daemon.
    Harness(Id),
}

/// The detail view of one entity: a title and sections, each a heading and its lines.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Detail {
    /// What it is, in one line.
    pub title: String,
    /// Each heading with its lines.
    pub sections: Vec<(String, Vec<String>)>,
}

/// How many lines of a history, a ledger or a log a detail view keeps.
const DETAIL_TAIL: usize = 40;

/// Reads the detail of `focus`.
pub fn detail(store: &mut Store, focus: &Focus) -> Result<Detail, String> {
    match focus {
        Focus::Work(id) => work_detail(store, id),
        Focus::Goal(id) => goal_detail(store, id),
        Focus::Harness(name) => harness_detail(store.root(), name),
    }
}

fn work_detail(store: &mut Store, id: &Id) -> Result<Detail, String> {
    use harn_core::work::events::EventKind;
    let item = store.read(id, &mut Default::default()).map_err(|e| e.to_string())?;
    let (i, p) = (&item.intent, &item.projection);
    let state = vec![
        format!("{} (next: {}) — {}", name_of(&p.state), name_of(&p.next_action), p.reason),
        format!(
            "attempts {} used, {} charged, {} left",
            p.attempts_used, p.charged_attempts, p.attempts_remaining
        ),
        format!("objective {}", i.objective),
    ];
    let mut attempts = Vec::new();
    let mut latest_proof = None;
    for e in &item.events {
        if let EventKind::AttemptStarted { run_id, attempt, .. } = &e.kind {
            let (_, proof) = store.run_records(run_id).unwrap_or((None, None));
            let status =
                proof.as_ref().map_or("no proof (running, parked or lost)".to_owned(), |pr| {
                    name_of(&pr.run.status)
                });
            attempts.push(format!("attempt {attempt}  run {run_id}  {status}"));
            latest_proof = proof;
        }
    }
    let criteria = match &latest_proof {
        Some(proof) => proof
            .acceptance
            .criteria
            .iter()
            .map(|c| {
                let verdict = name_of(&c.verdict);
                format!("{} {verdict} — {} ({} evidence)", c.id, c.statement, c.evidence)
            })
            .collect(),
        None => i
            .acceptance
            .iter()
            .enumerate()
            .map(|(n, a)| format!("accept-{} {a} (no proof yet)", n + 1))
            .collect(),
    };
    let findings = p.open_findings.iter().map(|f| format!("{}: {}", f.id, f.statement)).collect();
    Ok(Detail {
        title: format!("work {id} — {}", i.title),
        sections: vec![
            ("state".into(), state),
            ("attempts and runs".into(), attempts),
            ("proof criteria".into(), criteria),
            ("open findings".into(), findings),
            ("next".into(), harn_core::work::next::next_commands(id, p)),
            ("history".into(), harn_core::work::history::lines(&item.events, DETAIL_TAIL)),
        ],
    })
}

fn goal_detail(store: &mut Store, id: &Id) -> Result<Detail, String> {
    let g = goal_store::read(store, id).map_err(|e| e.to_string())?;
    let p = &g.projection;
    let state = vec![
        format!("{} (next: {}) — {}", name_of(&p.state), name_of(&p.next_action), p.reason),
        format!(
            "attempts {} used, {} charged, {} left; replans {} asked for, {} left",
            p.attempts_used,
            p.charged_attempts,
            p.attempts_remaining,
            p.replans_used,
            p.replans_remaining
        ),
    ];
    let graph = g
        .items
        .iter()
        .map(|i| {
            let q = &i.projection;
            format!("{:<24} {:<18} {}", i.id.as_str(), name_of(&q.state), q.reason)
        })
        .collect();
    let plans = g
        .plans
        .iter()
        .map(|plan| {
            let review =
                plan.review.as_ref().map_or(String::new(), |r| format!("  review {}", name_of(r)));
            format!("{} {} — {}{review}", plan.request.plan_id, name_of(&plan.status), plan.reason)
        })
        .collect();
    Ok(Detail {
        title: format!("goal {id} — {}", g.intent.title),
        sections: vec![
            ("state".into(), state),
            ("graph".into(), graph),
            ("plans and review receipts".into(), plans),
            ("next".into(), harn_core::goal::next::next_commands(id, p, &g.items)),
        ],
    })
}

fn harness_detail(root: &Path, name: &Id) -> Result<Detail, String> {
    let paths = Paths::new(root).map_err(|e| e.to_string())?;
    let records = crate::harness::ledger::last_records(&paths, Some(name.as_str()), DETAIL_TAIL)?;
    let ledger = records.iter().map(crate::harness::ledger::line).collect();
    let log = crate::os::logs::tail(&paths.log(name), DETAIL_TAIL)
        .map_err(|e| format!("{}: {e}", paths.log(name).display()))?;
    let log = String::from_utf8_lossy(&log).lines().map(str::to_owned).collect();
    Ok(Detail {
        title: format!("harness {name}"),
        sections: vec![("ledger (latest)".into(), ledger), ("log (latest)".into(), log)],
    })
}

/// The snake_case name serde gives a state, an action or a verdict.
pub fn name_of(value: &impl Serialize) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}
