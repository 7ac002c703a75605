//! `harn work show`: one item, its intent, state, history and usage, as text or JSON; also
//! printed after `work create`, `run`, `retry` and `accept`.

use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use crate::os::store::Store;
use harn_core::ids::Id;
use harn_core::work::WorkState;
use serde_json::json;

/// The latest events `work show` prints; `--json` has them all.
const HISTORY_SHOWN: usize = 20;

pub fn show(store: &mut Store, id: &str, json: bool) -> Exit {
    let id = match Id::new(id) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{id:?}: {e}")),
    };
    // The item is read in full; its prerequisites through the index.
    store.use_index();
    store.examine_closure(&id);
    let item = match store.read(&id, &mut Default::default()) {
        Ok(item) => item,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    store.save_index();
    // A history that lost an attempt that ran reads as fewer attempts than there were.
    let damage = match store.ledger().lost_attempt(&item) {
        Ok(found) => found.map(|(file, what)| format!("{file}: {what}")),
        Err(e) => Some(e.to_string()),
    };
    // Processes of a run whose host died, until something reaps them.
    let lost: Vec<String> = store
        .lost_runs(Some(&id), super::hold::left_behind)
        .into_iter()
        .map(|(live, n)| lost_line(&live.run_id, n))
        .collect();
    // Where the item's worktree is, and what it takes on disk.
    let worktree = super::attempt::recorded_workspace(store, &item).map(|ws| {
        let path = std::path::Path::new(&ws.path);
        let exists = path.is_dir();
        let bytes = exists.then(|| super::prune::size(path));
        json!({ "path": ws.path, "branch": ws.branch, "exists": exists, "bytes": bytes })
    });
    if json {
        let doc = json!({
            "intent": item.intent, "projection": item.projection, "events": item.events,
            "history_len": item.history_len, "worktree": worktree,
            "usage": item.usage, "damage": damage, "lost_processes": lost,
            "next_commands": harn_core::work::next::next_commands(&item.intent.id, &item.projection),
        });
        outln!("{doc}");
        return Ok(0);
    }
    let (i, p) = (&item.intent, &item.projection);
    outln!("{}  {}", i.id, i.title);
    crate::paint::line(&[
        "  state      ".into(),
        crate::paint::state(&state_name(p.state), 0),
        crate::paint::plain(&format!(
            " (next: {}) — {}",
            json!(p.next_action).as_str().unwrap_or(""),
            p.reason
        )),
    ]);
    if let Some(damage) = &damage {
        outln!("  damage     {damage}");
    }
    for line in &lost {
        outln!("  lost run   {line}");
    }
    outln!("  objective  {}", i.objective);
    if let Some(source) = &i.source {
        outln!("  source     plan {} of goal {}", source.plan, source.goal);
    }
    for (n, a) in i.acceptance.iter().enumerate() {
        outln!("  accept-{}   {a}", n + 1);
    }
    if !i.dependencies.is_empty() {
        let deps: Vec<&str> = i.dependencies.iter().map(Id::as_str).collect();
        outln!("  depends on {}", deps.join(", "));
    }
    outln!("  workflow   {} (sha256 {})", i.workflow.path, &i.workflow.sha256[..12]);
    outln!(
        "  attempts   {} used, {} charged, {} left",
        p.attempts_used,
        p.charged_attempts,
        p.attempts_remaining
    );
    if let Some(u) = &item.usage {
        outln!("  agents     {}", super::progress::usage(u));
    }
    if let Some(w) = &worktree {
        let (path, branch) = (w["path"].as_str().unwrap_or(""), w["branch"].as_str().unwrap_or(""));
        match w["bytes"].as_u64() {
            Some(b) => outln!("  worktree   {path} on {branch} ({:.1} MiB)", b as f64 / 1048576.0),
            None => outln!("  worktree   {path} on {branch} (removed)"),
        }
    }
    for f in &p.open_findings {
        outln!("  finding    {}: {}", f.id, f.statement);
    }
    let n = item.history_len;
    outln!("  history    {n} event{}", if n == 1 { "" } else { "s" });
    for line in harn_core::work::history::lines(&item.events, HISTORY_SHOWN) {
        outln!("    {line}");
    }
    for (n, command) in harn_core::work::next::next_commands(&i.id, p).iter().enumerate() {
        outln!("  {}  {command}", if n == 0 { "next     " } else { "or       " });
    }
    Ok(0)
}

pub(super) fn state_name(s: WorkState) -> String {
    json!(s).as_str().unwrap_or("").to_owned()
}

/// What a read says of a run whose host died and left processes behind.
pub(super) fn lost_line(run: &Id, processes: usize) -> String {
    let s = if processes == 1 { "" } else { "es" };
    format!(
        "{processes} process{s} of lost run {run} still running (the next run, retry, cancel \
         or tick of this item stops them)"
    )
}
