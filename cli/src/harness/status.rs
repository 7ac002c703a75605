//! The status document of `harn harness list|status --json`: one stable JSON shape, built
//! from the daemon core's state when the daemon is up, or from `state.json` when it is not.

use super::paths::Paths;
use super::readiness::ReadinessWatch;
use crate::exit::{Failure, EXIT_USAGE};
use harn_core::env::ExitStatus;
use harn_core::harness::daemon::{Daemon, DaemonConfig, PersistedState};
use harn_core::harness::lifecycle::harness::{Durable, LastExit};
use harn_core::harness::lifecycle::Harness;
use harn_core::ids::Id;
use harn_core::time::Instant;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Facts about the running daemon that the core does not know.
pub struct Context<'a> {
    /// Where it runs.
    pub paths: &'a Paths,
    /// Monotonic now.
    pub now: Instant,
    /// Wall-clock now, unix ms.
    pub wall_ms: i64,
    /// The daemon's pid.
    pub pid: u32,
    /// When it started, unix ms.
    pub started_wall_ms: i64,
    /// When it started, on the monotonic clock (its uptime, which no step of the wall clock
    /// moves, counts from here).
    pub started: Instant,
    /// What its boot found lost, in words (`state.json` gone).
    pub state_lost: Option<&'a str>,
    /// How children are contained: `cgroup` or `process-group`.
    pub containment: &'a str,
    /// What a full disk keeps out of the daemon's history, if anything.
    pub unwritten: Option<&'a super::ledger::Unwritten>,
}

/// The document for a running daemon; `name` narrows it to one harness (bad input when it
/// names none).
pub fn document(
    ctx: Context<'_>,
    daemon: &Daemon,
    config: &DaemonConfig,
    readiness: &ReadinessWatch,
    name: Option<&str>,
) -> Result<Value, Failure> {
    let mut rows = Vec::new();
    for (id, h) in daemon.harnesses() {
        if name.is_some_and(|n| n != id.as_str()) {
            continue;
        }
        let mut row = live_row(id, h, config, readiness, ctx.now);
        let waiting: Vec<Value> = daemon
            .waiting_for(id)
            .into_iter()
            .map(|(dep, how)| json!({ "name": dep, "state": how }))
            .collect();
        let deps = json!({ "requires": h.active_spec().requires, "after": h.active_spec().after });
        merge(&mut row, json!({ "dependencies": deps }));
        // Only a run held back for its dependencies waits; a live one has what it needed.
        if h.state() == harn_core::harness::lifecycle::State::Starting && h.pid().is_none() {
            merge(&mut row, json!({ "waiting_for": waiting }));
        }
        rows.push(row);
    }
    if let Some(n) = name.filter(|_| rows.is_empty()) {
        return Err(Failure::new(EXIT_USAGE, format!("no harness named {n:?}")));
    }
    Ok(json!({
        "daemon": {
            "running": true,
            "pid": ctx.pid,
            "root": ctx.paths.root,
            "socket": ctx.paths.socket(),
            "started_at_ms": ctx.started_wall_ms,
            "uptime_ms": ctx.now.saturating_since(ctx.started).as_millis(),
            "draining": daemon.draining(),
            "active_profile": daemon.active_profile(),
            "containment": ctx.containment,
            "unwritten": ctx.unwritten,
            "state_lost": ctx.state_lost,
        },
        "harnesses": rows,
    }))
}

fn live_row(
    id: &Id,
    h: &Harness,
    config: &DaemonConfig,
    readiness: &ReadinessWatch,
    now: Instant,
) -> Value {
    let spec = h.active_spec();
    let mut row = durable_row(id, &h.durable());
    let fields = json!({
        "state": h.state().as_str(),
        "pid": h.pid(),
        "uptime_ms": h.started_at().filter(|_| h.pid().is_some()).map(|t| now.saturating_since(t).as_millis()),
        "ready": h.pid().is_some() && h.ready(),
        // As the ledger says it: a harness without a readiness check is taken as ready,
        // never proven so.
        "proven": h.pid().is_some() && h.ready() && readiness.kind(id) != "none",
        "readiness": readiness.kind(id),
        "flapping": h.flapping(),
        "next_retry_in_ms": h.next_retry_in(now).map(|d| d.as_millis()),
        "config_changed": h.config_changed(),
        "restart": spec.restart,
        "command": spec.spawn.argv,
        "user": spec.spawn.user,
        "group": spec.spawn.group,
        "limits": spec.spawn.limits.map(|l| json!({
            "memory_max": l.memory, "tasks_max": l.tasks, "cpu_weight": l.cpu_weight,
        })),
        "in_config": config.harnesses.contains_key(id),
    });
    merge(&mut row, fields);
    row
}

/// The fields every row has, from the durable record.
fn durable_row(id: &Id, d: &Durable) -> Value {
    json!({
        "name": id,
        "enabled": d.enabled,
        "failed": d.failed,
        "restarts": d.restarts,
        "consecutive_failures": d.consecutive_failures,
        "runs": d.runs,
        "last_exit": d.last_exit.map(exit_json),
    })
}

fn exit_json(e: LastExit) -> Value {
    match e.status {
        None => json!({ "spawn_failed": true, "forced": e.forced }),
        Some(ExitStatus::Code(c)) => json!({ "code": c, "forced": e.forced }),
        Some(ExitStatus::Signal(s)) => json!({ "signal": s, "forced": e.forced }),
    }
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), from) {
        a.extend(b);
    }
}

/// The document when no daemon runs: intent and counters from `state.json`, nothing observed.
pub fn offline_document(
    paths: &Paths,
    config: Option<&DaemonConfig>,
    name: Option<&str>,
) -> Result<Value, Failure> {
    let state = match std::fs::read(paths.state()) {
        Ok(bytes) => PersistedState::decode(&bytes)
            .map_err(|e| Failure::failed(format!("{}: {}", paths.state().display(), e.reason)))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => PersistedState::default(),
        Err(e) => return Err(Failure::failed(format!("{}: {e}", paths.state().display()))),
    };
    // What a daemon that died (SIGKILL, a crash) left running: its cgroups' members and the
    // processes carrying this root's harness markers. They are alive and nobody supervises
    // them; the next daemon stops them before it starts anything.
    let orphans = super::contain::HarnessCgroups::observe(paths).orphans();
    // A configured harness no daemon ever ran has no durable state yet: it reads as its
    // configuration's intent, never run.
    let fresh: BTreeMap<Id, Durable> = config
        .into_iter()
        .flat_map(|c| c.harnesses.iter())
        .filter(|(id, _)| !state.harnesses.contains_key(*id))
        .map(|(id, spec)| (id.clone(), Durable { enabled: spec.enabled, ..Durable::default() }))
        .collect();
    let rows: Vec<Value> = state
        .harnesses
        .iter()
        .chain(fresh.iter())
        .filter(|(id, _)| name.is_none_or(|n| n == id.as_str()))
        .map(|(id, d)| {
            let mut row = durable_row(id, d);
            if let Some(c) = config {
                merge(&mut row, json!({ "in_config": c.harnesses.contains_key(id) }));
            }
            let live = orphans.get(id).filter(|pids| !pids.is_empty());
            let shown = match live {
                Some(pids) => json!({
                    "state": "orphaned", "pid": pids[0], "pids": pids, "alive": true,
                }),
                None => json!({ "state": "unsupervised", "pid": null, "alive": false }),
            };
            merge(&mut row, shown);
            row
        })
        .collect();
    if let Some(n) = name.filter(|_| rows.is_empty()) {
        let message = format!("no harness named {n:?} in {}", paths.state().display());
        return Err(Failure::new(EXIT_USAGE, message));
    }
    Ok(json!({ "daemon": { "running": false, "root": paths.root }, "harnesses": rows }))
}

/// The human table of a status document.
pub fn table(doc: &Value) -> String {
    let mut out = String::new();
    let d = &doc["daemon"];
    if d["running"] == true {
        out.push_str(&format!(
            "daemon pid {} in {} ({}){}\n",
            d["pid"],
            d["root"].as_str().unwrap_or(""),
            d["containment"].as_str().unwrap_or(""),
            if d["draining"] == true { ", shutting down" } else { "" }
        ));
        if let Some(why) = d["state_lost"].as_str() {
            out.push_str(&format!("warning: {why}\n"));
        }
        let u = &d["unwritten"];
        if let Some(cause) = u["cause"].as_str() {
            out.push_str(&format!(
                "warning: the disk is full ({cause}): {} events and {} ledger records not \
                 written so far; supervision goes on, and the ledger records the count once \
                 there is room\n",
                u["events"], u["records"]
            ));
        }
    } else {
        out.push_str(
            "no daemon is running (`harn harness up` starts it); intent and counters from \
             state.json, or harness.toml for what never ran\n",
        );
        let orphaned = doc["harnesses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|h| h["state"] == "orphaned")
            .count();
        if orphaned > 0 {
            out.push_str(&format!(
                "{orphaned} harness{} still running with nobody supervising; `harn harness up` \
                 stops what the dead daemon left and starts afresh\n",
                if orphaned == 1 { " is" } else { "es are" }
            ));
        }
    }
    out.push_str(&format!(
        "  {:<20} {:<12} {:>7} {:>8} {:>9} {:>5}  {}\n",
        "NAME", "STATE", "ENABLED", "PID", "UPTIME", "↻", "NOTES"
    ));
    for h in doc["harnesses"].as_array().into_iter().flatten() {
        out.push_str(&row_line(h));
    }
    out
}

/// The glyph of a harness state: ○ stopped, ◌ on its way (starting, restarting, stopping),
/// ● running, ◐ degraded, ✖ failed.
pub fn state_glyph(state: &str) -> char {
    match state {
        "running" => '●',
        "degraded" => '◐',
        "failed" => '✖',
        "stopped" | "unsupervised" => '○',
        "orphaned" => '◍',
        _ => '◌',
    }
}

/// A row's `last_exit` in words (`exit 1`, `signal 9, killed`, `spawn failed`), if it has one.
pub fn last_exit_text(h: &Value) -> Option<String> {
    let e = h["last_exit"].as_object()?;
    let how = match (e.get("code"), e.get("signal")) {
        (Some(c), _) => format!("exit {c}"),
        (_, Some(s)) => format!("signal {s}"),
        _ => "spawn failed".into(),
    };
    let forced = if e.get("forced") == Some(&Value::Bool(true)) { ", killed" } else { "" };
    Some(format!("{how}{forced}"))
}

fn row_line(h: &Value) -> String {
    let state = h["state"].as_str().unwrap_or("?");
    let glyph = state_glyph(state);
    let uptime = h["uptime_ms"].as_u64().map_or("-".into(), human_ms);
    let pid = h["pid"].as_u64().map_or("-".into(), |p| p.to_string());
    let mut notes = Vec::new();
    if let Some(ms) = h["next_retry_in_ms"].as_u64() {
        notes.push(format!("retry in {}", human_ms(ms)));
    }
    if h["pid"].is_u64() && h["ready"] == false {
        notes.push(format!("not ready ({})", h["readiness"].as_str().unwrap_or("?")));
    }
    if h["runs"] == 0
        && h["in_config"] == true
        && h["pid"].is_null()
        && h["state"] == "unsupervised"
    {
        notes.push("never run".into());
    }
    if h["config_changed"] == true {
        notes.push("config changed, restart to apply".into());
    }
    let waiting: Vec<String> = h["waiting_for"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            format!(
                "{} ({})",
                w["name"].as_str().unwrap_or("?"),
                w["state"].as_str().unwrap_or("?")
            )
        })
        .collect();
    if !waiting.is_empty() {
        notes.push(format!("waits for {}", waiting.join(", ")));
    }
    if let Some(exit) = last_exit_text(h) {
        notes.push(format!("last {exit}"));
    }
    format!(
        "{glyph} {:<20} {} {:>7} {:>8} {:>9} {:>5}  {}\n",
        h["name"].as_str().unwrap_or(""),
        crate::paint::state(state, 12),
        if h["enabled"] == true { "yes" } else { "no" },
        pid,
        uptime,
        h["restarts"].as_u64().unwrap_or(0),
        notes.join("; ")
    )
}

fn human_ms(ms: u64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms}ms"),
        ms if ms < 60_000 => format!("{}s", ms / 1000),
        ms if ms < 3_600_000 => format!("{}m{}s", ms / 60_000, ms % 60_000 / 1000),
        ms => format!("{}h{}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}
