//! `harn run show`: one workflow run's manifest, a summary of its transcript, and its proof.

use crate::exit::{fail, Exit, Failure, EXIT_FAILED, EXIT_USAGE};
use crate::os::store::{run_dir, Store};
use clap::{Args, Subcommand};
use harn_core::ids::Id;
use harn_core::journal;
use harn_core::work::containment::guard::GuardRecord;
use harn_core::work::run::RunManifest;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `harn run …`
#[derive(Debug, Args)]
pub struct RunCmd {
    /// The coordination root (the repository); default: found from the current directory as
    /// git finds its repository (the nearest `.harnery/` above, else the git top level).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    verb: RunVerb,
}

#[derive(Debug, Subcommand)]
enum RunVerb {
    /// A run's manifest, transcript summary and proof.
    Show {
        /// The run id (`wf-…`).
        run_id: String,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Recent runs, newest first: the item and attempt, where the run stands, how long it
    /// has taken, and what its agent calls cost.
    List {
        /// How many runs.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Print what a run does as it goes (each stage, agent call and tool use), until it ends
    /// or parks on an approval.
    Follow {
        /// The run id (`wf-…`).
        run_id: String,
    },
}

/// Runs a `run` verb; returns the exit code.
pub fn run(cmd: RunCmd) -> Exit {
    let explicit = cmd.root.is_some();
    let mut store = crate::os::store::open_root(cmd.root)?;
    crate::os::root::require_ledger(store.root(), explicit)
        .map_err(|e| Failure::new(EXIT_FAILED, e))?;
    let (run_id, json) = match cmd.verb {
        RunVerb::Show { run_id, json } => (run_id_of(&mut store, &run_id)?, json),
        RunVerb::List { limit, json } => return list(&mut store, limit, json),
        RunVerb::Follow { run_id } => {
            let run_id = run_id_of(&mut store, &run_id)?;
            return follow(&mut store, &run_id);
        }
    };
    let run_id = match Id::new(&run_id) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{run_id:?}: {e}")),
    };
    let (manifest, proof) = match store.run_records(&run_id) {
        Ok((Some(m), p)) => (m, p),
        Ok((None, _)) if store.root().join(run_dir(&run_id)).is_dir() => {
            return fail(
                EXIT_FAILED,
                format!(
                    "run {run_id} has no manifest: its start was cut short before it wrote \
                     run.json (a full disk, a kill), so nothing ran and nothing was charged; \
                     {} may be removed",
                    store.root().join(run_dir(&run_id)).display()
                ),
            )
        }
        Ok((None, _)) => return fail(EXIT_FAILED, format!("no workflow run {run_id}")),
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let (transcript, kept) = match scan_transcript(&mut store, &run_id) {
        Ok(t) => (t.summary, t.kept),
        Err(e) => return fail(EXIT_FAILED, e),
    };
    // What this run changed of what it must not change (a machine that could not hold it).
    let changed: Vec<_> = match crate::os::guarded::records(&mut store) {
        Ok(records) => records
            .into_iter()
            .filter(|r| matches!(r, GuardRecord::Changed { run_id: r, .. } if r == run_id.as_str()))
            .collect(),
        Err(e) => return fail(EXIT_FAILED, e),
    };
    // Where each segment of a remote run ran, from its start record.
    let jobs: Vec<Value> = match manifest.cluster {
        None => Vec::new(),
        Some(_) => store
            .ledger()
            .transcript(&run_id)
            .unwrap_or_default()
            .into_iter()
            .filter(|r| matches!(r["event"].as_str(), Some("run.start" | "run.resume")))
            .filter(|r| r.get("job").is_some())
            .map(|r| {
                json!({ "engine": r["engine"], "cluster": r["cluster"], "job": r["job"],
                        "node": r["node"] })
            })
            .collect(),
    };
    // Each connection the run's proxy refused: where to, and how often.
    let refused: Vec<Value> = kept
        .iter()
        .filter(|r| r["event"] == "network.refused")
        .map(|r| json!({ "host": r["host"], "port": r["port"], "times": r["times"] }))
        .collect();
    if json {
        let body = json!({
            "manifest": manifest, "transcript": transcript, "proof": proof,
            "guarded_changes": changed, "cluster_jobs": jobs, "network_refused": refused,
        });
        outln!("{body}");
        return Ok(0);
    }
    let trigger = json!(manifest.trigger);
    match &manifest.planning {
        Some(step) => {
            let what = json!(step.step);
            outln!(
                "{run_id}  {} call {} for goal {} ({})",
                what.as_str().unwrap_or(""),
                step.label,
                step.goal,
                step.role
            );
        }
        None => outln!(
            "{run_id}  attempt {} of {} ({})",
            manifest.attempt,
            manifest.work_id,
            trigger.as_str().unwrap_or("")
        ),
    }
    outln!("  workflow   {} (sha256 {})", manifest.script.path, &manifest.script.sha256[..12]);
    outln!("  timeout    {} ms", manifest.timeout_ms);
    // Where the workflow's own words went: the first place to look when it failed.
    let stderr = store.root().join(run_dir(&run_id)).join("stderr.log");
    if let Ok(meta) = std::fs::metadata(&stderr) {
        outln!("  stderr     {} ({} bytes)", stderr.display(), meta.len());
        let failed = proof.as_ref().is_none_or(|p| !p.passes());
        if failed && meta.len() > 0 {
            let tail = crate::os::logs::tail(&stderr, 5).unwrap_or_default();
            for line in tail.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let text = harn_core::harness::logline::parse(line).text;
                outln!("    {}", String::from_utf8_lossy(text));
            }
        }
    }
    let isolation = json!(manifest.isolation);
    outln!("  isolation  {} (declared)", isolation.as_str().unwrap_or(""));
    if let Some(cwd) = &manifest.cwd {
        outln!("  cwd        {cwd}");
    }
    if let Some(cluster) = &manifest.cluster {
        let engine = json!(cluster.spec.engine);
        let engine = engine.as_str().unwrap_or("");
        if jobs.is_empty() {
            outln!("  cluster    {} ({engine}): no job started", cluster.name);
        }
        for j in &jobs {
            let (job, node) = (j["job"].as_str().unwrap_or("?"), j["node"].as_str().unwrap_or("?"));
            outln!("  cluster    {} ({engine}): job {job} on {node}", cluster.name);
        }
    }
    if let Some(ws) = &manifest.workspace {
        let again = if ws.reused { ", found again" } else { "" };
        outln!("  worktree   {} on {} from {}{again}", ws.path, ws.branch, short(&ws.base_commit));
    }
    if let Some(a) = proof.as_ref().and_then(|p| p.workspace.as_ref()) {
        let left = if a.uncommitted { ", changes left uncommitted" } else { "" };
        outln!(
            "  final      {}: {} bytes of diff over {} files (sha256 {}){left}",
            short(&a.final_commit),
            a.diff_bytes,
            a.files_changed,
            short(&a.diff_sha256)
        );
    }
    // What the last segment reached; before its end only the plan is known.
    let reached = proof.as_ref().and_then(|p| p.containment.clone());
    match reached.as_ref().or(manifest.containment.as_ref()) {
        Some(c) => {
            let planned = if reached.is_none() { " (planned)" } else { "" };
            outln!("  contained  {}{planned}", c.summary());
            let holding = json!(c.holding);
            let why = c.holding_why.as_deref().map(|w| format!(" ({w})")).unwrap_or_default();
            outln!("  processes  held by {}{why}", holding.as_str().unwrap_or(""));
            if let Some(limits) = &c.limits {
                outln!("  limits     {limits}");
            }
            if let Some(n) = &c.network {
                let held = match (&n.held, &n.why) {
                    (true, _) => String::new(),
                    (false, why) => format!(
                        "; not held: {} (the run had the machine's network)",
                        why.as_deref().unwrap_or("no namespace")
                    ),
                };
                outln!("  network    {}{held}", n.allowed.summary());
            }
            for r in &refused {
                let times = r["times"].as_u64().unwrap_or(1);
                let host = r["host"].as_str().unwrap_or("");
                outln!(
                    "  refused    {host}:{} ({times} time{})",
                    r["port"],
                    if times == 1 { "" } else { "s" }
                );
            }
            for missing in &c.unenforced {
                outln!("  not held   {missing}");
            }
            // Shown relative to the root only when below it (by components, not text: a
            // sibling `ROOT.worktrees/…` is not below `ROOT`).
            let root = store.root().to_path_buf();
            let shown: Vec<String> = c
                .protected
                .iter()
                .map(|p| match std::path::Path::new(p).strip_prefix(&root) {
                    Ok(rel) => rel.display().to_string(),
                    Err(_) => p.clone(),
                })
                .collect();
            if !shown.is_empty() {
                outln!("  read-only  {}", shown.join(", "));
            }
            if c.sealed {
                outln!("  sealed     calls whose program sandboxes itself (codex)");
            }
            for gap in &c.gaps {
                outln!("  gap        {gap}");
            }
        }
        None => outln!("  contained  none (a run started before harn confined runs)"),
    }
    for change in &changed {
        if let GuardRecord::Changed { path, before, after, .. } = change {
            let what = match (before, after) {
                (None, _) => "made",
                (_, None) => "removed",
                _ => "changed",
            };
            outln!("  changed    {path}: {what} by this run, which it must not change");
        }
    }
    if !changed.is_empty() {
        outln!("  review it; the item is accepted and landed only with --accept-guarded-change,");
        outln!("             and `harn harness up` and `reload` refuse a changed harness.toml");
        outln!("             until you accept it with --accept-config-change");
    }
    if let Some(h) = &manifest.adapter {
        outln!("  harness    {} ({})", h.name, h.spec.command.join(" "));
    }
    if let Some(p) = &manifest.policy {
        let to = manifest.approval_to.as_deref().unwrap_or("nobody: ask is a denial");
        outln!(
            "  policy     {} rules, sha256 {}; asks {to}",
            p.policy.rules.len(),
            &p.sha256[..12]
        );
    }
    let counts = transcript["events"].as_object().cloned().unwrap_or_default();
    let counts: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    outln!("  transcript {} records: {}", transcript["records"], counts.join(", "));
    match &proof {
        None => {
            let said = match standing(&mut store, &manifest, &kept) {
                "running" => "none yet (running)",
                "parked" => "none yet (parked on an approval)",
                "interrupted" => "none: an operator's stop ended it (not charged)",
                "ended_by_cluster" => {
                    "none: its cluster's engine ended it (infrastructure, not charged)"
                }
                "not_started" => "none: its workflow never started (not charged)",
                "unsealed" => {
                    "none: it ran; its proof could not be written, the disk too full (not \
                     charged; it is retried like a run that never started once there is room)"
                }
                "host_died" => {
                    "none: its host died before the workflow's result, and the workflow could \
                     not signal it (Landlock's signal scope): not the work's doing, not charged"
                }
                _ => {
                    "none: its host is gone and the run is lost (charged: its workflow could \
                     signal its host, without Landlock's signal scope (ABI 6), so its death \
                     may be the work's doing)"
                }
            };
            outln!("  proof      {said}");
        }
        Some(p) => {
            let status = json!(p.run.status);
            outln!(
                "  proof      {} ({} ms)",
                status.as_str().unwrap_or(""),
                p.run.ended_at.0 - p.run.started_at.0
            );
            if let Some(e) = &p.run.error {
                outln!("  error      {e}");
            }
            if let Some(digest) = p.planning.as_ref().and_then(|p| p.reply_sha256.as_deref()) {
                outln!("  reply      sha256 {}", short(digest));
            }
            if p.acceptance.none_checked() && p.planning.is_none() {
                outln!("  acceptance no criteria were checked");
            }
            for c in &p.acceptance.criteria {
                let verdict = json!(c.verdict);
                let flag = if json!(c.source) == "undeclared" { " (undeclared)" } else { "" };
                outln!("  {:<10} {}{flag}: {}", c.id, verdict.as_str().unwrap_or(""), c.statement);
            }
            for e in &p.evidence {
                let status = json!(e.status);
                outln!("  evidence   {} {}: {}", e.kind, status.as_str().unwrap_or(""), e.label);
            }
            if let Some(u) = &p.usage {
                outln!("  agents     {}", super::progress::usage(u));
            }
            for a in &p.agents {
                let how = match (a.ok, a.cached) {
                    (true, true) => "ok (answered from the transcript)".to_owned(),
                    (true, false) => "ok".to_owned(),
                    _ => a.error.clone().unwrap_or_default(),
                };
                outln!("  agent      {} ({}): {how}", a.id, a.adapter);
                if let Some(session) = &a.session_id {
                    outln!("               session {session}");
                }
                if let Some(u) = &a.usage {
                    let took = a.elapsed_ms.map(|ms| format!("{}, ", super::progress::elapsed(ms)));
                    outln!(
                        "               {}{}",
                        took.unwrap_or_default(),
                        super::progress::usage(u)
                    );
                }
                for d in &a.denials {
                    outln!("               denied {} {}", d.tool, d.summary);
                }
            }
            for d in p.policy.iter().flat_map(|p| &p.decisions) {
                let outcome = json!(d.outcome);
                let by = d.approval_id.as_deref().map(|a| format!(" by approval {a}"));
                let request = serde_json::to_string(&d.request).unwrap_or_default();
                outln!(
                    "  policy p{:<3} {}{}: {request}",
                    d.slot,
                    outcome.as_str().unwrap_or(""),
                    by.unwrap_or_default()
                );
            }
            for d in &p.declined {
                outln!("  declined   {d}");
            }
        }
    }
    Ok(0)
}

/// What `run show` and `run list` need of a transcript, read one verified record at a
/// time: memory stays bounded by a chunk and the longest line, however long the run.
struct Scanned {
    /// `path`, `records`, `events` (a count per kind), `torn_tail_bytes`.
    summary: Value,
    /// The lifecycle records (`run.*`) and each `agent.end`'s usage, in order: all that
    /// [`standing`] and [`usage_so_far`] read.
    kept: Vec<Value>,
    /// When the last record was written, unix ms: where a run that is gone stopped.
    last_ts: Option<i64>,
}

fn scan_transcript(store: &mut Store, run_id: &Id) -> Result<Scanned, String> {
    use harn_core::journal::EachError;
    let path = format!("{}/transcript.jsonl", run_dir(run_id));
    let shown = store.root().join(&path).display().to_string();
    let mut events: BTreeMap<String, u64> = BTreeMap::new();
    let (mut records, mut kept, mut last_ts) = (0u64, Vec::new(), None);
    let read =
        journal::read_each::<Value, std::convert::Infallible>(store.fs(), &path, &shown, |r| {
            records += 1;
            last_ts = Some(r.ts.0);
            let kind = r.body["event"].as_str().unwrap_or("?");
            *events.entry(kind.to_owned()).or_default() += 1;
            if kind.starts_with("run.") || kind == "network.refused" {
                kept.push(r.body);
            } else if kind == "agent.end" {
                kept.push(json!({ "event": "agent.end", "usage": r.body["usage"] }));
            }
            Ok(())
        });
    let torn = match read {
        Ok(found) => found.map_or(0, |(_, torn)| torn),
        Err(EachError::Corrupt(e)) => return Err(e.to_string()),
        Err(EachError::Fs(e)) => return Err(format!("{shown}: {e}")),
        Err(EachError::Refused(never)) => match never {},
    };
    let summary = json!({
        "path": shown, "records": records, "events": events, "torn_tail_bytes": torn,
    });
    Ok(Scanned { summary, kept, last_ts })
}

/// Where a run without a proof stands, from its transcript and the lease its host holds.
pub fn standing(store: &mut Store, m: &RunManifest, records: &[Value]) -> &'static str {
    use harn_core::work::transcript;
    let lease = crate::os::store::lease_of(&m.work_id, &m.run_id, m.planning.is_some());
    if store.held_elsewhere(&lease) {
        "running"
    } else if transcript::parked_on(records).is_some() {
        "parked"
    } else {
        match transcript::started(records) {
            transcript::Started::Ran => "lost",
            transcript::Started::Interrupted => "interrupted",
            transcript::Started::EngineFault => "ended_by_cluster",
            transcript::Started::Unsealed => "unsealed",
            transcript::Started::HostDied => "host_died",
            transcript::Started::Never => "not_started",
        }
    }
}

/// The agent calls' usage a transcript records so far (a run without a proof yet).
fn usage_so_far(records: &[Value]) -> Option<harn_core::work::adapter::Usage> {
    let mut total: Option<harn_core::work::adapter::Usage> = None;
    for r in records.iter().filter(|r| r["event"] == "agent.end") {
        if let Ok(u) = serde_json::from_value(r["usage"].clone()) {
            total.get_or_insert_with(Default::default).add(&u);
        }
    }
    total
}

fn list(store: &mut Store, limit: usize, json: bool) -> Exit {
    let names = match harn_core::env::Fs::list(&mut store.ledger().fs, harn_core::layout::WORKFLOWS)
    {
        Ok(names) => names,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    // Run ids start with their UTC start time, so names sort by age.
    let ids: Vec<Id> = names.iter().rev().filter_map(|n| Id::new(n).ok()).take(limit).collect();
    let now = store.now().0;
    let mut rows = Vec::new();
    for id in ids {
        let Ok((Some(m), proof)) = store.run_records(&id) else { continue };
        let (records, last_ts) =
            scan_transcript(store, &id).map(|t| (t.kept, t.last_ts)).unwrap_or_default();
        let (state, ended, usage) = match &proof {
            Some(p) => {
                let class = p.run.class.map(|c| json!(c).as_str().unwrap_or("").to_owned());
                let status = json!(p.run.status).as_str().unwrap_or("").to_owned();
                let state = class.map_or(status.clone(), |c| format!("{status} ({c})"));
                (state, Some(p.run.ended_at.0), p.usage.clone())
            }
            None => {
                let state = standing(store, &m, &records);
                // A run that is gone stopped at its last record; only a live one is still
                // counting.
                let ended = match state {
                    "running" | "parked" => None,
                    _ => Some(last_ts.unwrap_or(m.started_at.0)),
                };
                (state.to_owned(), ended, usage_so_far(&records))
            }
        };
        let elapsed = ended.unwrap_or(now).saturating_sub(m.started_at.0).max(0) as u64;
        let mut row = json!({
            "run_id": id, "work_id": m.work_id, "attempt": m.attempt, "state": state,
            "started_at": m.started_at, "elapsed_ms": elapsed, "usage": usage,
        });
        if let Some(step) = &m.planning {
            row["planning"] = json!(step);
        }
        rows.push(row);
    }
    if json {
        outln!("{}", json!({ "runs": rows }));
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("no runs yet");
        return Ok(0);
    }
    outln!("{:<38} {:<16} {:>3}  {:<22} {:>10}  COST", "RUN", "ITEM", "#", "STATE", "ELAPSED");
    for r in &rows {
        let cost = serde_json::from_value::<harn_core::work::adapter::Usage>(r["usage"].clone())
            .ok()
            .and_then(|u| u.cost_micro_usd)
            .map_or_else(|| "-".to_owned(), harn_core::work::adapter::dollars);
        // A planning run is named by its goal and its step.
        let item = match r["planning"]["step"].as_str() {
            Some(step) => format!("{} ({step})", r["work_id"].as_str().unwrap_or("")),
            None => r["work_id"].as_str().unwrap_or("").to_owned(),
        };
        outln!(
            "{:<38} {:<16} {:>3}  {:<22} {:>10}  {cost}",
            r["run_id"].as_str().unwrap_or(""),
            item,
            // A number, not a JSON value: a value's Display ignores the column's width.
            r["attempt"].as_u64().unwrap_or(0),
            r["state"].as_str().unwrap_or(""),
            super::progress::elapsed(r["elapsed_ms"].as_u64().unwrap_or(0))
        );
    }
    Ok(0)
}

/// How often `follow` looks for new transcript records.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// The run an operator named: its id, or a unique prefix of one run's id.
fn run_id_of(store: &mut Store, typed: &str) -> Result<String, Failure> {
    if Id::new(typed).is_err() {
        return Ok(typed.to_owned()); // Refused with its reason by the verb.
    }
    let listing = store.list_ids(harn_core::layout::WORKFLOWS)?;
    crate::os::store::complete(typed, listing.ids.iter().map(Id::as_str), "workflow run")
}

fn follow(store: &mut Store, run_id: &str) -> Exit {
    let run_id = match Id::new(run_id) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{run_id:?}: {e}")),
    };
    let manifest = match store.run_records(&run_id) {
        Ok((Some(m), _)) => m,
        Ok((None, _)) => return fail(EXIT_FAILED, format!("no workflow run {run_id}")),
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let mut shown = 0;
    loop {
        let records = match store.ledger().transcript(&run_id) {
            Ok(records) => records,
            Err(e) => return fail(EXIT_FAILED, e),
        };
        for r in records.iter().skip(shown) {
            if let Some(line) = super::progress::line(r) {
                outln!("{line}");
            }
        }
        shown = records.len();
        let proof = store.run_records(&run_id).ok().and_then(|(_, p)| p);
        if let Some(p) = proof {
            let status = json!(p.run.status);
            let error = p.run.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
            outln!("run {run_id} {}{error}", status.as_str().unwrap_or(""));
            return Ok(if p.passes() { 0 } else { EXIT_FAILED });
        }
        match standing(store, &manifest, &records) {
            "running" => std::thread::sleep(FOLLOW_EVERY),
            // Not running and no proof: it waits on a person, or its host is gone.
            other => {
                outln!("run {run_id} is {}", other.replace('_', " "));
                return Ok(EXIT_FAILED);
            }
        }
    }
}

/// The first 12 characters of a commit or a digest.
fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}
