//! `harn run show`: one workflow run's manifest, a summary of its transcript, and its proof.

use super::store::{run_dir, Store};
use crate::cli::{fail, EXIT_FAILED, EXIT_USAGE};
use clap::{Args, Subcommand};
use harn_core::ids::Id;
use harn_core::journal;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `harn run …`
#[derive(Debug, Args)]
pub struct RunCmd {
    /// The coordination root (the repository); default: the current directory.
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
}

/// Runs a `run` verb; returns the exit code.
pub fn run(cmd: RunCmd) -> i32 {
    let mut store = match super::store::open_root(cmd.root) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let RunVerb::Show { run_id, json } = cmd.verb;
    let run_id = match Id::new(&run_id) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{run_id:?}: {e}")),
    };
    let (manifest, proof) = match store.run_records(&run_id) {
        Ok((Some(m), p)) => (m, p),
        Ok((None, _)) => return fail(EXIT_FAILED, format!("no workflow run {run_id}")),
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let transcript = match transcript_summary(&mut store, &run_id) {
        Ok(t) => t,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    if json {
        outln!("{}", json!({ "manifest": manifest, "transcript": transcript, "proof": proof }));
        return 0;
    }
    let trigger = json!(manifest.trigger);
    outln!(
        "{run_id}  attempt {} of {} ({})",
        manifest.attempt,
        manifest.work_id,
        trigger.as_str().unwrap_or("")
    );
    outln!("  workflow   {} (sha256 {})", manifest.script.path, &manifest.script.sha256[..12]);
    outln!("  timeout    {} ms", manifest.timeout_ms);
    let isolation = json!(manifest.isolation);
    outln!("  isolation  {} (declared)", isolation.as_str().unwrap_or(""));
    if let Some(cwd) = &manifest.cwd {
        outln!("  cwd        {cwd}");
    }
    if let Some(h) = &manifest.harness {
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
        None => outln!("  proof      none yet (running, or lost if its host is gone)"),
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
            if p.acceptance.none_checked() {
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
            for a in &p.agents {
                let how = match (a.ok, a.cached) {
                    (true, true) => "ok (answered from the transcript)".to_owned(),
                    (true, false) => "ok".to_owned(),
                    _ => a.error.clone().unwrap_or_default(),
                };
                outln!("  agent      {} ({}): {how}", a.id, a.harness);
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
    0
}

/// How many transcript records of each kind, read with the journal's checks.
fn transcript_summary(store: &mut Store, run_id: &Id) -> Result<Value, String> {
    let path = format!("{}/transcript.jsonl", run_dir(run_id));
    let shown = store.root().join(&path).display().to_string();
    let bytes = store.run_record_bytes(run_id, "transcript.jsonl").map_err(|e| e.to_string())?;
    let read = journal::parse(&shown, &bytes.unwrap_or_default()).map_err(|e| e.to_string())?;
    let mut events: BTreeMap<String, u64> = BTreeMap::new();
    for r in &read.records {
        let kind = r.body["event"].as_str().unwrap_or("?").to_owned();
        *events.entry(kind).or_default() += 1;
    }
    Ok(
        json!({ "path": shown, "records": read.records.len(), "events": events, "torn_tail_bytes": read.torn_tail_bytes }),
    )
}
