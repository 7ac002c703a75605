//! `harn work run|retry|accept|reconcile`: one attempt of a work item to its proof, the
//! operator's acceptance of that proof, and receipts of projections.

use super::attempt::{run_attempt, AttemptRefusal, Ended, RunLimits};
use super::host_args::HostArgs;
use super::show::show;
use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use crate::os::store::{run_dir, Store, StoreError};
use crate::verb::actor;
use clap::Args;
use harn_core::ids::Id;
use harn_core::work::approval::ApprovalRequest;
use harn_core::work::events::Disposition;
use harn_core::work::team::{parse_team, Team};
use serde_json::json;

/// `harn work run|retry`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The work id (or a unique prefix of it).
    pub(crate) id: String,
    #[command(flatten)]
    host: HostArgs,
    /// A team file (JSON keyed by role: instructions, harness, model, effort, maxTurns,
    /// timeoutMs, maxAttempts), frozen into the run by value; a relative path is taken from
    /// the root.
    #[arg(long)]
    team: Option<std::path::PathBuf>,
    /// Most agent calls the run may make.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_agents: u32,
    /// Agent calls in flight at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    concurrency: u64,
    /// Who runs it (default: $USER).
    #[arg(long)]
    actor: Option<String>,
    /// Print each stage, agent call and tool use as the run goes (the default when standard
    /// output is a terminal).
    #[arg(long)]
    progress: bool,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// `harn work accept`
#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// The work id (or a unique prefix of it).
    pub(crate) id: String,
    /// How an open finding was disposed of: `f1=fixed` or `f1=deferred:<reason>` (repeatable).
    #[arg(long = "dispose")]
    dispositions: Vec<String>,
    /// Confirms, after reviewing them, the changes its runs made to what git or harn would
    /// execute (a worktree's `config.worktree`, a nested repository, `harness.toml`): they are
    /// accepted with the item.
    #[arg(long)]
    accept_guarded_change: bool,
    #[command(flatten)]
    signed: crate::verb::Signed,
}

/// Runs one attempt; exit 0 when its proof passes, 1 when it fails or cannot start.
pub fn run(store: &mut Store, a: RunArgs, retry: bool) -> Exit {
    let id = match Id::new(&a.id) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{:?}: {e}", a.id)),
    };
    let limits = match freeze(store, &a) {
        Ok(limits) => limits,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if let Err(e) = crate::os::children::interrupt_on_signals() {
        return fail(EXIT_FAILED, format!("signal handling: {e}"));
    }
    // In a terminal, the run says what it does as it goes.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    super::progress::live(!a.json && (a.progress || terminal));
    let (run_id, proof) = match run_attempt(store, &id, retry, &limits, &actor(a.actor)) {
        Ok(Ended::Proof(run_id, proof)) => (run_id, proof),
        Ok(Ended::Parked(request)) => return parked(store, &request, a.json),
        Err(AttemptRefusal::NotNow(why)) => return fail(EXIT_FAILED, why),
        Err(AttemptRefusal::Store(e)) => return fail(EXIT_FAILED, e),
    };
    let proof_path = store.root().join(format!("{}/proof.json", run_dir(&run_id)));
    let passed = proof.passes();
    if a.json {
        outln!(
            "{}",
            json!({ "run_id": run_id, "passed": passed, "proof_path": proof_path, "proof": proof })
        );
    } else {
        let s = &proof.acceptance.summary;
        outln!("run {run_id}: {}", json!(proof.run.status).as_str().unwrap_or(""));
        if let Some(e) = &proof.run.error {
            outln!("  error      {e}");
        }
        if proof.acceptance.none_checked() {
            outln!("  acceptance no criteria were checked");
        } else {
            outln!(
                "  acceptance {} satisfied, {} unsatisfied, {} unknown, {} undeclared",
                s.satisfied,
                s.unsatisfied,
                s.unknown,
                s.undeclared
            );
        }
        for d in &proof.declined {
            outln!("  declined   {d}");
        }
        for c in &proof.agents {
            let how = if c.ok { "ok".to_owned() } else { c.error.clone().unwrap_or_default() };
            outln!("  agent      {} ({}): {how}", c.id, c.adapter);
            for d in &c.denials {
                outln!(
                    "  denied     {} {} (the agent's own permissions refused it)",
                    d.tool,
                    d.summary
                );
            }
        }
        if let Some(u) = &proof.usage {
            outln!("  agents     {}", super::progress::usage(u));
        }
        outln!("  proof      {}", proof_path.display());
        let _ = crate::exit::report(show(store, id.as_str(), false));
    }
    if passed {
        Ok(0)
    } else {
        Ok(EXIT_FAILED)
    }
}

/// Reports a run parked on an approval. Exit 1: the attempt has not ended.
fn parked(store: &mut Store, r: &ApprovalRequest, json: bool) -> Exit {
    if json {
        outln!("{}", json!({ "run_id": r.run_id, "parked": true, "approval": r }));
    } else {
        let rules = r.evaluation.matched.join(", ");
        outln!("run {}: parked on approval {} (rule {rules})", r.run_id, r.approval_id);
        outln!("  asks       {}", r.addressee);
        outln!(
            "  next       harn approval approve {0} (or deny {0}), then harn work run {1}",
            r.approval_id,
            r.work_id
        );
        let _ = crate::exit::report(show(store, r.work_id.as_str(), false));
    }
    Ok(EXIT_FAILED)
}

/// Accepts the latest proof of an item in review.
pub fn accept(store: &mut Store, a: AcceptArgs) -> Exit {
    let id = match Id::new(&a.id) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{:?}: {e}", a.id)),
    };
    let dispositions: Vec<Disposition> =
        match a.dispositions.iter().map(|d| parse_disposition(d)).collect() {
            Ok(d) => d,
            Err(e) => return fail(EXIT_USAGE, format!("--dispose: {e}")),
        };
    let confirmed = a.accept_guarded_change;
    let accepted =
        accept_item(store, &id, dispositions, &actor(a.signed.actor), a.signed.reason, confirmed);
    if let Err(refused) = accepted {
        return fail(EXIT_FAILED, refused);
    }
    show(store, id.as_str(), a.signed.json)
}

/// Accepts the latest proof of `id` (in review, every open finding disposed of), recording
/// the proof's digest; the history lock is held from the read to the append. A change its
/// runs made to what git or harn executes refuses it unless `confirmed` (a person who
/// reviewed it), which records the change as accepted first.
pub fn accept_item(
    store: &mut Store,
    id: &Id,
    dispositions: Vec<Disposition>,
    actor: &str,
    reason: Option<String>,
    confirmed: bool,
) -> Result<(), harn_core::work::ledger::Refusal<StoreError>> {
    use harn_core::work::ledger::Refusal;
    let guarded = crate::os::guarded::unaccepted_of(store, id.as_str()).map_err(Refusal::Store)?;
    if !guarded.is_empty() {
        if !confirmed {
            return Err(Refusal::NotNow(crate::os::guarded::refusal(
                &guarded,
                id.as_str(),
                "accepted",
            )));
        }
        crate::os::guarded::accept_changes(store, &guarded, actor).map_err(Refusal::Store)?;
    }
    let (lock, item) = store.lock_and_read(id).map_err(Refusal::Store)?;
    let now = store.now();
    let accepted = store.ledger().accept(&item, dispositions, actor, reason, now);
    drop(lock);
    accepted.map_err(|r| r.map(StoreError::from))
}

/// `f1=fixed` or `f1=deferred:<reason>`.
fn parse_disposition(s: &str) -> Result<Disposition, String> {
    let (id, how) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected <finding>=fixed or <finding>=deferred:<reason>"))?;
    let id = id.trim().to_owned();
    match how.split_once(':') {
        None if how == "fixed" => Ok(Disposition::Fixed { id }),
        Some(("deferred", reason)) => {
            Ok(Disposition::Deferred { id, reason: reason.trim().to_owned() })
        }
        _ => Err(format!("{s:?}: expected <finding>=fixed or <finding>=deferred:<reason>")),
    }
}

/// Appends a receipt for each item whose projection changed since its last one.
pub fn reconcile(store: &mut Store, id: Option<&str>, actor: &str, json: bool) -> Exit {
    let (ids, warnings) = match id.map(Id::new) {
        Some(Ok(id)) => (vec![id], Vec::new()),
        Some(Err(e)) => return fail(EXIT_USAGE, format!("{id:?}: {e}")),
        None => match store.ids() {
            Ok(listing) => (listing.ids, listing.problems),
            Err(e) => return fail(EXIT_FAILED, e),
        },
    };
    for w in &warnings {
        errln!("harn: warning: {w}");
    }
    let (mut rows, mut errors) = (Vec::new(), Vec::new());
    // An item whose last receipt already records its projection has nothing to write: the
    // index says so without reading it (or taking its lock) while its row stands.
    store.use_index();
    store.verify_histories();
    store.examine(Some(&ids));
    let mut known = harn_core::work::ledger::Known::new();
    for id in ids {
        let settled = store.summary(&id, &mut known).ok().filter(|r| r.receipt_current);
        if let Some(row) = settled {
            rows.push(json!({
                "id": id, "state": row.projection.state,
                "next_action": row.projection.next_action, "written": false,
            }));
            continue;
        }
        match store.reconcile(&id, actor) {
            Ok((item, written)) => rows.push(json!({
                "id": id, "state": item.projection.state,
                "next_action": item.projection.next_action, "written": written,
            })),
            Err(e) => errors.push(e.to_string()),
        }
    }
    store.save_index();
    if json {
        outln!("{}", json!({ "items": rows, "errors": errors, "warnings": warnings }));
    } else {
        for r in &rows {
            let mark = if r["written"] == true { "recorded" } else { "unchanged" };
            outln!(
                "{:<32} {:<18} {mark}",
                r["id"].as_str().unwrap_or(""),
                r["state"].as_str().unwrap_or("")
            );
        }
        for e in &errors {
            errln!("harn: {e}");
        }
    }
    crate::exit::listed(&errors)
}

/// The run's limits: the team file read and everything it names frozen with the host
/// options.
fn freeze(store: &Store, a: &RunArgs) -> Result<RunLimits, String> {
    let team = match a.team.as_deref() {
        None => Team::new(),
        Some(path) => read_team(store, path)?,
    };
    a.host.freeze(store, team, a.max_agents, a.concurrency as usize).map_err(|e| match &a.team {
        Some(path) if e.starts_with("--team: ") => {
            format!("{}: {}", store.given(path).display(), &e["--team: ".len()..])
        }
        _ => e,
    })
}

/// Reads and checks a team file (a relative path as [`Store::given`] takes it).
pub fn read_team(store: &Store, path: &std::path::Path) -> Result<Team, String> {
    let path = &store.given(path);
    let bytes = crate::input::read(path, crate::input::CONFIG_MAX)?;
    parse_team(&path.display().to_string(), &bytes).map_err(|e| e.to_string())
}
