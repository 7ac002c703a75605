//! `harn supervisor service stop`: a durable request (`stop.json`), SIGTERM to the daemon, and
//! a wait for its lease. By default the active tick finishes however long it takes; with
//! `--timeout` the daemon terminates the tick's children once the drain exceeds it.

use super::files::{path, write_whole};
use super::run_loop::{StopRequest, FORCED_STOP_GRACE};
use crate::exit::{fail, Exit, EXIT_FAILED};
use crate::os::store::Store;
use harn_core::service::Liveness;
use serde_json::json;
use std::time::{Duration, Instant};

/// How long past the drain deadline and the grace period the command still waits.
const MARGIN: Duration = Duration::from_secs(5);
/// How often a long wait says what it waits for.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Stops the service; returns the exit code.
pub fn stop(store: &mut Store, timeout_secs: Option<u64>, as_json: bool) -> Exit {
    let before = crate::service::view::service(store);
    let requested_at = store.now();
    // A holder of the lease is stopped even if its heartbeat lapsed (a wedged watcher, a
    // wall-clock jump): it still runs.
    let held = store.held_elsewhere(&path("lease.lock"));
    if held || matches!(before.liveness, Liveness::Running | Liveness::Stopping) {
        let request = StopRequest {
            requested_at,
            requested_by_pid: std::process::id(),
            drain_timeout_ms: timeout_secs.map(|s| s.saturating_mul(1_000)),
        };
        if let Err(e) = write_whole(store.root(), "stop.json", &request) {
            return fail(EXIT_FAILED, format!("{}: {e}", path("stop.json")));
        }
        let pid = before.status.as_ref().map(|s| s.pid as i32);
        if let Some(pid) = pid.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let bound = timeout_secs.map(|s| Duration::from_secs(s) + FORCED_STOP_GRACE + MARGIN);
        wait_for_lease(store, bound, as_json);
    }
    let after = crate::service::view::service(store).liveness;
    let forced = forced_since(store, requested_at);
    let name = |l: Liveness| json!(l).as_str().unwrap_or("").to_owned();
    if as_json {
        outln!("{}", json!({ "before": before.liveness, "after": after, "forced": forced }));
    } else if forced {
        outln!("service: {} (the tick's children were terminated; see its events)", name(after));
    } else {
        outln!("service: {}", name(after));
    }
    if store.held_elsewhere(&path("lease.lock")) {
        return fail(
            EXIT_FAILED,
            "the service has not stopped yet; it is still finishing its tick",
        );
    }
    Ok(0)
}

/// Waits until the daemon lets go of its lease, or `bound` passes.
fn wait_for_lease(store: &mut Store, bound: Option<Duration>, quiet: bool) {
    let started = Instant::now();
    // Said at once (after a moment, so a quick stop says nothing), then every
    // PROGRESS_EVERY.
    let mut said: Option<Instant> = None;
    while store.held_elsewhere(&path("lease.lock")) {
        if bound.is_some_and(|b| started.elapsed() >= b) {
            return;
        }
        let due = match said {
            None => started.elapsed() >= Duration::from_secs(1),
            Some(at) => at.elapsed() >= PROGRESS_EVERY,
        };
        if !quiet && due {
            let view = crate::service::view::service(store);
            let goal = view.status.and_then(|s| s.active_goal_id);
            let what = goal.map_or("its sweep".to_owned(), |g| format!("its tick of goal {g}"));
            errln!("harn: waiting for the service to finish {what}");
            said = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the audit ledger records a forced stop since `since`.
fn forced_since(store: &Store, since: harn_core::time::WallTime) -> bool {
    let events = store.root().join(path("events.jsonl"));
    let tail = crate::os::logs::tail(&events, 50).unwrap_or_default();
    String::from_utf8_lossy(&tail).lines().any(|line| {
        serde_json::from_str::<serde_json::Value>(line).is_ok_and(|e| {
            e["event"] == "service.forced_stop" && e["ts"].as_i64().is_some_and(|t| t >= since.0)
        })
    })
}
