//! The service as a reader sees it: its frozen enrollment, last heartbeat and wake hints,
//! and whether it is live, read without writing, locking for writing or running anything.
//! The service's verbs and the dashboard both read it here.

use crate::os::store::Store;
use harn_core::service::{liveness, Liveness, RuntimeHints, ServiceConfig, ServiceStatus};
use serde::Serialize;

/// Where the service keeps its files, relative to the root.
pub const SERVICE_DIR: &str = harn_core::layout::SERVICE;

/// The supervisor service as a reader sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServiceView {
    /// Running, stopping, stopped, stale or never enrolled.
    pub liveness: Liveness,
    /// The frozen enrollment.
    pub config: Option<ServiceConfig>,
    /// The last heartbeat record.
    pub status: Option<ServiceStatus>,
    /// The per-goal wake hints.
    pub hints: Option<RuntimeHints>,
    /// A service file that could not be read, named.
    pub problems: Vec<String>,
}

/// Reads the service's files and lease; a file that does not parse is named in `problems`
/// and read as absent.
pub fn service(store: &mut Store) -> ServiceView {
    let mut problems = Vec::new();
    let config: Option<ServiceConfig> = hint(store, "config.json", &mut problems);
    let status: Option<ServiceStatus> = hint(store, "status.json", &mut problems);
    let hints: Option<RuntimeHints> = hint(store, "runtime.json", &mut problems);
    let held = store.held_elsewhere(&format!("{SERVICE_DIR}/lease.lock"));
    let interval = config.as_ref().map_or(2_000, |c| c.heartbeat_interval_ms);
    let boot = crate::os::clock::boot_mark();
    let live =
        liveness(status.as_ref(), config.is_some(), held, interval, store.now(), boot.as_ref());
    let hints = hints.map(|h| match &config {
        Some(c) => h.for_config(c),
        None => h,
    });
    ServiceView { liveness: live, config, status, hints, problems }
}

/// One of the service's files, parsed; a file that does not parse is named in `problems`.
fn hint<T: serde::de::DeserializeOwned>(
    store: &mut Store,
    name: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    store.read_record::<T>(&format!("{SERVICE_DIR}/{name}")).unwrap_or_else(|e| {
        problems.push(e.to_string());
        None
    })
}

/// What the service says of work item `work` for the approval verbs.
pub fn facts(store: &mut Store, work: &harn_core::ids::Id) -> crate::work::approvals::ServiceFacts {
    let view = service(store);
    let enrolled = view.config.map_or(Vec::new(), |c| c.goal_ids);
    let governing = crate::goal::store::governing(store, &enrolled, work);
    crate::work::approvals::ServiceFacts { liveness: view.liveness, enrolled, governing }
}

/// What of the service waits for a person: a service that died without stopping, and goals
/// it backs off after [`harn_core::notify::BACKOFF_NOTICE_ERRORS`] failed ticks in a row (or a
/// multiple). Read as every reader reads the service: a hint, never a write.
pub fn waiting(store: &mut Store) -> Vec<harn_core::notify::Waiting> {
    use harn_core::notify::{Waiting, BACKOFF_NOTICE_ERRORS};
    let view = service(store);
    let mut found = Vec::new();
    let Some(status) = view.status else { return found };
    if view.liveness == Liveness::Stale {
        let hung = store.held_elsewhere(&format!("{SERVICE_DIR}/lease.lock"));
        let (pid, started_at) = (status.pid, status.started_at);
        found.push(Waiting::ServiceStale { pid, started_at, hung });
    }
    let Some(hints) = view.hints else { return found };
    for (goal, wake) in &hints.goals {
        let errors = wake.consecutive_errors;
        if errors >= BACKOFF_NOTICE_ERRORS {
            let why = hints.last_outcome.get(goal).cloned().unwrap_or_default();
            let (goal, started_at) = (goal.to_string(), status.started_at);
            found.push(Waiting::ServiceBackoff { goal, errors, started_at, why });
        }
    }
    found
}
