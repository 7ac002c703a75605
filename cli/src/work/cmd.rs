//! `harn work …`: the verbs and their arguments; creating, listing, showing, cancelling and
//! reopening work items on the core projection. Attempts and acceptance are in `run_cmd`.

use super::show::{show, state_name};
use crate::exit::{fail, Exit, Failure, EXIT_FAILED, EXIT_USAGE};
use crate::os::store::Store;
use crate::verb::actor;
use crate::verb::Shown;
use clap::{Args, Subcommand};
use harn_core::ids::Id;
use harn_core::work::events::{EventKind, Finding};
use harn_core::work::index::Row;
use harn_core::work::intent::{check_dependency_graph, INTENT_VERSION};
use harn_core::work::projection::{cancellable, reopenable};
use harn_core::work::{WorkIntent, WorkflowRef};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// `harn work …`
#[derive(Debug, Args)]
pub struct WorkArgs {
    /// The coordination root (the repository); default: found from the current directory as
    /// git finds its repository (the nearest `.harnery/` above, else the git top level).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
enum Verb {
    /// Create a work item: an objective, a workflow frozen by digest, acceptance statements.
    Create(CreateArgs),
    /// Every work item with its state and next action.
    List {
        /// Only items in this state.
        #[arg(long, value_parser = ["waiting", "ready", "running", "awaiting_approval", "in_review", "blocked", "succeeded", "cancelled"])]
        state: Option<String>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// One work item: intent, projection and history.
    Show(Shown),
    /// Cancel a work item (attempts are not consumed).
    Cancel(Governance),
    /// Reopen a work item, keeping its history and budgets, optionally with findings.
    Reopen(Governance),
    /// Send an item in review back with words: reopened, the feedback recorded with its
    /// author and given to the next attempt's workflow in its start line.
    #[command(
        after_help = "Examples:\n  harn work reject parser --feedback \"the tabs are still dropped: see tests/tabs.txt\""
    )]
    Reject(Governance),
    /// Run the next attempt of a ready work item: its workflow, to a proof.
    #[command(after_help = RUN_EXAMPLES)]
    Run(super::run_cmd::RunArgs),
    /// Retry a blocked work item: a new attempt that sees the prior attempt's outcome.
    #[command(after_help = RUN_EXAMPLES)]
    Retry(super::run_cmd::RunArgs),
    /// Accept the proof of a work item in review, disposing of every open finding.
    Accept(super::run_cmd::AcceptArgs),
    /// Land an accepted item's worktree branch on its base branch, only if the branch holds
    /// exactly the commit and the changes the accepted proof attests.
    #[command(after_help = LAND_EXAMPLES)]
    Land(super::land::LandArgs),
    /// Remove the item worktrees no attempt will use again: landed, cancelled, or of no item.
    #[command(after_help = PRUNE_EXAMPLES)]
    Prune(super::prune::PruneArgs),
    /// Record a receipt of each item's projection where it changed (observational: never
    /// starts, retries, accepts or cancels anything).
    Reconcile {
        /// One work id (default: every item).
        id: Option<String>,
        /// Who reconciles (default: $USER).
        #[arg(long)]
        actor: Option<String>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct CreateArgs {
    /// A short title.
    title: String,
    /// The workflow program (frozen by path and SHA-256); a relative path is taken from the root.
    workflow: PathBuf,
    /// What must be achieved.
    #[arg(long)]
    objective: String,
    /// An acceptance statement (repeatable).
    #[arg(long = "accept")]
    accept: Vec<String>,
    /// Work items that must be accepted first (comma-separated or repeated).
    #[arg(long = "depends-on", value_delimiter = ',')]
    depends_on: Vec<String>,
    /// Budget of charged attempts.
    #[arg(long, default_value_t = 3)]
    max_attempts: u32,
    /// Uncharged attempts in a row that are retried (refused upstream, never started,
    /// interrupted, ended by a cluster, a host's death, an unwritten proof) before a person
    /// looks.
    #[arg(long, default_value_t = 3)]
    max_uncharged_attempts: u32,
    /// Count an `--accept` statement no evidence cites as unknown, so the proof does not
    /// pass (frozen in the intent). By default the statements are context for the workflow
    /// and the proof, and only the criteria the workflow declares decide.
    #[arg(long)]
    strict_acceptance: bool,
    /// The work id (default: from the title, `fix-the-parser`; `-2` … when taken).
    #[arg(long)]
    id: Option<String>,
    /// Who is creating it (default: $USER).
    #[arg(long)]
    actor: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
    /// Print only the new item's id (for scripts: `id=$(harn work create … --quiet)`).
    #[arg(long, conflicts_with = "json")]
    quiet: bool,
}

#[derive(Debug, Args)]
struct Governance {
    /// The work id (or a unique prefix of it).
    id: String,
    /// Who decides (default: $USER).
    #[arg(long)]
    actor: Option<String>,
    /// Why.
    #[arg(long)]
    reason: Option<String>,
    /// A finding the next acceptance must dispose of (reopen only; repeatable).
    #[arg(long = "finding")]
    findings: Vec<String>,
    /// Words for the next attempt (reopen and reject; reject needs them): recorded with the
    /// actor and given to the workflow in its start line (`attempt.feedback`).
    #[arg(long)]
    feedback: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// Examples shown under `work run --help` and `work retry --help`.
const RUN_EXAMPLES: &str = "Examples:
  harn work run fix-parser --harness claude-code
      one attempt in the repository, confined (see `harn run show RUN` for what was reached)
  harn work run fix-parser --harness codex --isolation worktree --base main
      in the item's own worktree on branch harn/fix-parser, beside the repository
  harn work retry fix-parser --harness claude-code --policy policy.json
      a new attempt after a blocked one, under a host policy
  harn work run fix-parser --harness claude-code --no-containment
      unconfined, recorded as such in run.json and the proof";

/// Runs a `work` verb; returns the exit code.
/// A complete mission that reopening an item reopens too, found (and its goal lease taken)
/// before anything is written.
pub struct MissionReopen {
    /// The goal.
    pub goal: Id,
    /// The goal as read under its lease.
    pub view: harn_core::goal::engine::GoalView,
    /// What to tell the person, when the item is outside the mission's active graph.
    pub warning: Option<String>,
}

const LAND_EXAMPLES: &str = "Examples:
  harn work land parser                 # onto the branch its worktree was made from
  harn work land parser --into release  # onto another branch
  harn work land parser --squash        # one commit with its changes

A fast-forward when the branch allows it, else a merge commit (or, with --squash, one
commit) whose message names the item and its accepted proof. Refused, changing nothing,
when the item's branch moved after the review, when its changes are not the attested ones,
on a conflict (the files are named), or when the target branch is checked out with
uncommitted changes. Landing twice does nothing.";

const PRUNE_EXAMPLES: &str = "Examples:
  harn work prune --dry-run             # what would go, and why each other one stays
  harn work prune --older-than 7d       # only items untouched for a week
  harn work prune --force               # worktrees with uncommitted changes too

A worktree goes when no attempt will use it again: its item landed (harn work land) or
was cancelled, or no work item has it. An accepted item not landed yet, and every item
that may still run, keeps its worktree. Branches are kept.";

/// Finds the missions reopening an item reopens (the goals live above this module).
pub type FindMissions = fn(&mut Store, &Id) -> Result<Vec<MissionReopen>, String>;

impl Verb {
    /// The work id an operator typed, for the verbs that address one existing item.
    fn typed_id(&mut self) -> Option<&mut String> {
        match self {
            Verb::Show(Shown { id, .. }) => Some(id),
            Verb::Cancel(g) | Verb::Reopen(g) | Verb::Reject(g) => Some(&mut g.id),
            Verb::Run(a) | Verb::Retry(a) => Some(&mut a.id),
            Verb::Accept(a) => Some(&mut a.id),
            Verb::Land(a) => Some(&mut a.id),
            Verb::Reconcile { id, .. } => id.as_mut(),
            Verb::Create(_) | Verb::List { .. } | Verb::Prune(_) => None,
        }
    }
}

/// Runs a `work` verb; `missions` finds the complete missions a reopen reopens.
impl WorkArgs {
    /// The root a verb that runs attempts works in (`work run`, `retry`), after which what
    /// waits for a person is told; `None` for the other verbs.
    pub fn notifies(&self) -> Option<Option<PathBuf>> {
        matches!(self.verb, Verb::Run(_) | Verb::Retry(_)).then(|| self.root.clone())
    }
}

pub fn run(args: WorkArgs, missions: FindMissions) -> Exit {
    let explicit = args.root.is_some();
    let mut store = crate::os::store::open_root(args.root)?;
    if matches!(args.verb, Verb::List { .. } | Verb::Show(_)) {
        crate::os::root::require_ledger(store.root(), explicit)
            .map_err(|e| Failure::new(EXIT_FAILED, e))?;
    }
    // An item may be named by a unique prefix of its id.
    let mut verb = args.verb;
    if let Some(id) = verb.typed_id() {
        *id = store.expand_work_id(std::mem::take(id))?;
        // An unknown name is bad input (exit 2), as an ambiguous prefix is; a directory
        // without its intent is a creation a kill cut short, which reconcile deals with.
        let missing = Id::new(id.as_str()).is_ok_and(|i| {
            !store.exists(&i) && !store.root().join(harn_core::layout::work_dir(&i)).exists()
        });
        if missing {
            return fail(EXIT_USAGE, format!("no work item {id}"));
        }
    }
    // Every verb that writes reaps the runs whose host died first; `run` and `retry` do it
    // under their item's lease, and the reads stay read-only.
    if !matches!(verb, Verb::List { .. } | Verb::Show(_) | Verb::Run(_) | Verb::Retry(_)) {
        super::hold::reap_before_writing(&mut store);
    }
    match verb {
        Verb::Create(a) => create(&mut store, a),
        Verb::List { state, json } => list(&mut store, state.as_deref(), json),
        Verb::Show(Shown { id, json }) => show(&mut store, &id, json),
        Verb::Cancel(g) => govern(&mut store, g, None, false),
        Verb::Reopen(g) => govern(&mut store, g, Some(missions), false),
        Verb::Reject(g) => govern(&mut store, g, Some(missions), true),
        Verb::Run(a) => super::run_cmd::run(&mut store, a, false),
        Verb::Retry(a) => super::run_cmd::run(&mut store, a, true),
        Verb::Accept(a) => super::run_cmd::accept(&mut store, a),
        Verb::Land(a) => super::land::land(&mut store, a),
        Verb::Prune(a) => super::prune::prune(&mut store, a),
        Verb::Reconcile { id, actor: who, json } => {
            super::run_cmd::reconcile(&mut store, id.as_deref(), &actor(who), json)
        }
    }
}

/// A relative workflow path is taken as [`Store::given`] takes it.
fn create(store: &mut Store, a: CreateArgs) -> Exit {
    // Named after its title (`parser`, `parser-2`), else stamped; any entry by that name is
    // taken: an item, one a kill cut short, a stray file.
    let generated = a.id.is_none();
    let next_id = |store: &Store| {
        let dir = |c: &str| store.root().join(harn_core::layout::WORK).join(c);
        harn_core::ids::readable(&a.title, |c| std::fs::symlink_metadata(dir(c)).is_ok())
            .unwrap_or_else(|| store.new_id("work"))
    };
    let mut id = match a.id.as_deref().map(Id::new).transpose() {
        Ok(Some(id)) => id,
        Ok(None) => next_id(store),
        Err(e) => return fail(EXIT_USAGE, format!("--id: {e}")),
    };
    let dependencies = match a.depends_on.iter().map(|d| Id::new(d)).collect::<Result<Vec<Id>, _>>()
    {
        Ok(d) => d,
        Err(e) => return fail(EXIT_USAGE, format!("--depends-on: {e}")),
    };
    let workflow = match frozen_workflow(&store.given(&a.workflow)) {
        Ok(w) => w,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let make = |id: &Id, now| {
        WorkIntent {
            schema_version: INTENT_VERSION,
            id: id.clone(),
            title: a.title.clone(),
            objective: a.objective.clone(),
            acceptance: a.accept.clone(),
            dependencies: dependencies.clone(),
            workflow: workflow.clone(),
            max_attempts: a.max_attempts,
            max_uncharged_attempts: a.max_uncharged_attempts,
            created_at: now,
            sha256: None,
            strict_acceptance: a.strict_acceptance,
            source: None,
        }
        .sealed()
    };
    let intent = make(&id, store.now());
    if let Err(e) = intent.validate() {
        return fail(EXIT_USAGE, format!("work item: {e}"));
    }
    // A new item cannot close a cycle (nothing can name it before it exists), so only its
    // prerequisites' existence is checked; readers bound the depth against hand-edited files.
    let existing: BTreeMap<Id, Vec<Id>> = intent
        .dependencies
        .iter()
        .filter(|d| store.exists(d))
        .map(|d| (d.clone(), Vec::new()))
        .collect();
    let known = |d: &Id| existing.get(d).cloned();
    if let Err(e) = check_dependency_graph(&id, &intent.dependencies, &known, 10_000) {
        return fail(EXIT_USAGE, format!("work item: {e}"));
    }
    let actor = actor(a.actor.clone());
    let mut intent = intent;
    // Choosing a generated id and creating the item are one exclusive step: another create
    // of the same title that took the name first sends this one on to the next name.
    for _ in 0..CREATE_TRIES {
        match store.create(&intent, &actor) {
            Ok(()) => break,
            Err(_) if generated && store.exists(&id) => {
                id = next_id(store);
                intent = make(&id, store.now());
            }
            Err(e) => return fail(EXIT_FAILED, e),
        }
    }
    if !store.exists(&id) {
        return fail(EXIT_FAILED, format!("no free id after {CREATE_TRIES} names were taken"));
    }
    // A root begun by its first item keeps its records out of git, as `harn init`'s does.
    if let Err(e) = crate::os::root::keep_out_of_git(store.root()) {
        errln!("harn: warning: {}/.harnery/.gitignore: {e}", store.root().display());
    }
    if a.quiet {
        outln!("{id}");
        return Ok(0);
    }
    show(store, id.as_str(), a.json)
}

/// How many generated names a create tries while others take them first.
const CREATE_TRIES: usize = 64;

/// The workflow's absolute path and the SHA-256 of its bytes.
fn frozen_workflow(path: &std::path::Path) -> Result<WorkflowRef, String> {
    let abs =
        std::fs::canonicalize(path).map_err(|e| format!("workflow {}: {e}", path.display()))?;
    let bytes = crate::input::read(&abs, crate::input::WORKFLOW_MAX)
        .map_err(|e| format!("workflow {e}"))?;
    // What runs is the bytes themselves (or node, for a module): a file that is neither a
    // script with its interpreter line nor a program would only fail at its first run.
    let shown = abs.display().to_string();
    let runnable = bytes.starts_with(b"#!") || bytes.starts_with(b"\x7fELF");
    if !runnable && !super::process::is_module(&shown) {
        return Err(format!(
            "workflow {shown}: not a script with a #! line, a program, or a .mjs/.js module; \
             begin it with #!/bin/sh (or the interpreter it needs)"
        ));
    }
    let sha256 = harn_core::hash::sha256_hex(&bytes);
    Ok(WorkflowRef { path: shown, sha256 })
}

fn list(store: &mut Store, state: Option<&str>, json: bool) -> Exit {
    let listing = match store.ids() {
        Ok(listing) => listing,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    store.use_index();
    store.verify_histories();
    store.examine(Some(&listing.ids));
    let mut known = harn_core::work::ledger::Known::new();
    let mut rows = Vec::new();
    for id in listing.ids {
        // One unreadable item is a row with its error; it never hides the others. A creation
        // a kill cut short is no item yet.
        let read = store.summary(&id, &mut known).map_err(|e| e.to_string());
        if read.is_err() && store.creation_pending(&id) {
            continue;
        }
        rows.push((id.clone(), read));
    }
    store.save_index();
    if let Some(s) = state {
        let wanted = |r: &Result<Arc<Row>, String>| match r {
            Ok(i) => state_name(i.projection.state) == s,
            Err(_) => s == UNREADABLE,
        };
        rows.retain(|(_, r)| wanted(r));
    }
    let mut warnings = listing.problems;
    for (live, n) in store.lost_runs(None, super::hold::left_behind) {
        let line = super::show::lost_line(&live.run_id, n);
        warnings.push(format!("{}: {line}", live.work_id));
    }
    if json {
        let items: Vec<Listed> = rows
            .iter()
            .map(|(id, r)| match r {
                Ok(row) => Listed::Item(summary(id, row)),
                Err(error) => Listed::Unreadable { id, state: UNREADABLE, error },
            })
            .collect();
        let doc = Listing { items, warnings };
        outln!("{}", serde_json::to_string(&doc).expect("a listing serializes"));
    } else {
        // The id column fits the longest id: ids are never cut, so they can be copied.
        let w = rows.iter().map(|(id, _)| id.as_str().len()).max().unwrap_or(0).max(2);
        outln!("{:<w$} {:<18} {:<22} {:>8}  TITLE", "ID", "STATE", "NEXT", "ATTEMPTS");
        for (id, r) in &rows {
            match r {
                Ok(i) => {
                    let p = &i.projection;
                    let attempts = format!("{}/{}", p.charged_attempts, i.max_attempts);
                    crate::paint::line(&[
                        format!("{:<w$} ", id.as_str()),
                        crate::paint::state(&state_name(p.state), 18),
                        format!(
                            " {:<22} {attempts:>8}  ",
                            json!(p.next_action).as_str().unwrap_or("")
                        ),
                        crate::paint::plain(&i.title),
                    ]);
                }
                Err(e) => crate::paint::line(&[
                    format!("{:<w$} ", id.as_str()),
                    crate::paint::state(UNREADABLE, 18),
                    format!(" {}", crate::paint::plain(&e.to_string())),
                ]),
            }
        }
        for w in &warnings {
            errln!("harn: warning: {w}");
        }
    }
    Ok(0)
}

/// The state `list` shows for an item whose records cannot be read.
const UNREADABLE: &str = "unreadable";

/// `work list --json`: its items, and the problems of entries that are no item.
#[derive(serde::Serialize)]
struct Listing<'a> {
    items: Vec<Listed<'a>>,
    warnings: Vec<String>,
}

/// One row of `work list --json`.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Listed<'a> {
    Item(Summary<'a>),
    Unreadable { id: &'a Id, state: &'static str, error: &'a str },
}

/// An item as `work list --json` shows it, borrowed from its row.
#[derive(serde::Serialize)]
struct Summary<'a> {
    id: &'a Id,
    title: &'a str,
    state: harn_core::work::WorkState,
    next_action: harn_core::work::NextAction,
    reason: &'a str,
    attempts_used: u32,
    charged_attempts: u32,
    attempts_remaining: u32,
    unresolved_dependencies: &'a [Id],
}

fn summary<'a>(id: &'a Id, i: &'a Row) -> Summary<'a> {
    let p = &i.projection;
    Summary {
        id,
        title: &i.title,
        state: p.state,
        next_action: p.next_action,
        reason: &p.reason,
        attempts_used: p.attempts_used,
        charged_attempts: p.charged_attempts,
        attempts_remaining: p.attempts_remaining,
        unresolved_dependencies: &p.unresolved_dependencies,
    }
}

/// Cancels an item, or reopens it (`missions` given) together with every complete mission
/// holding it; a rejection (`reject`) is a reopen of an item in review with feedback. Every
/// check, the missions' leases included, comes before the first write, so a refusal leaves
/// nothing half-done; the missions' reopening is recorded before the item's.
fn govern(store: &mut Store, g: Governance, missions: Option<FindMissions>, reject: bool) -> Exit {
    let reopen = missions.is_some();
    if !reopen && g.feedback.is_some() {
        return fail(EXIT_USAGE, "--feedback belongs to reopen and reject");
    }
    if reject && g.feedback.is_none() {
        return fail(EXIT_USAGE, "reject needs --feedback TEXT: what the next attempt must do");
    }
    if let Some(words) = &g.feedback {
        if let Err(e) = harn_core::work::events::validate_feedback(words) {
            return fail(EXIT_USAGE, format!("--feedback: {e}"));
        }
    }
    let id = match Id::new(&g.id) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{:?}: {e}", g.id)),
    };
    if !reopen && !g.findings.is_empty() {
        return fail(EXIT_USAGE, "--finding belongs to reopen");
    }
    if g.reason.as_ref().is_some_and(|r| r.len() > 2_000) {
        return fail(EXIT_USAGE, "--reason: at most 2000 bytes");
    }
    if !store.exists(&id) {
        return fail(EXIT_FAILED, format!("no work item {id}"));
    }
    let held = match missions.map(|find| find(store, &id)).transpose() {
        Ok(held) => held.unwrap_or_default(),
        Err(e) => return fail(EXIT_FAILED, e),
    };
    // The lock is held from the read to the append: the decision stands on that history.
    let (lock, item) = match store.lock_and_read(&id) {
        Ok(locked) => locked,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let state = item.projection.state;
    let (allowed, kind) = if reopen {
        let findings: Vec<Finding> = g
            .findings
            .iter()
            .enumerate()
            .map(|(n, s)| Finding { id: format!("f{}", n + 1), statement: s.clone() })
            .collect();
        if let Err(e) = harn_core::work::events::validate_findings(&findings) {
            return fail(EXIT_USAGE, format!("--finding: {e}"));
        }
        let allowed =
            if reject { state == harn_core::work::WorkState::InReview } else { reopenable(state) };
        (allowed, EventKind::Reopened { findings, feedback: g.feedback.clone() })
    } else {
        (cancellable(state), EventKind::Cancelled)
    };
    if !allowed {
        let verb = match (reopen, reject) {
            (_, true) => "reject",
            (true, false) => "reopen",
            (false, _) => "cancel",
        };
        let only = if reject { "; only an item in review is rejected" } else { "" };
        return fail(EXIT_FAILED, format!("cannot {verb} {id}: it is {}{only}", state_name(state)));
    }
    let who = actor(g.actor);
    for m in &held {
        let why = g.reason.clone().unwrap_or_else(|| format!("{id} was reopened"));
        let now = store.now();
        let reopened =
            harn_core::goal::plan::reopen_mission(store.ledger(), &m.view, &who, &why, now);
        match reopened {
            Ok(line) => errln!("harn: {line}: {id} runs again before the mission is reassessed"),
            Err(e) => {
                return fail(EXIT_FAILED, format!("mission {}: {e}; {id} is unchanged", m.goal))
            }
        }
        if let Some(w) = &m.warning {
            errln!("harn: warning: {w}");
        }
    }
    if let Err(e) = store.append(&lock, kind, &who, g.reason) {
        return fail(EXIT_FAILED, e);
    }
    drop(lock);
    if !reopen {
        if let Err(e) = stop_running(store, &id) {
            return fail(EXIT_FAILED, e);
        }
        // No attempt will use a cancelled item's worktree again; one with changes stays.
        if let Some(why) = super::land::remove_worktree_of(store, &id) {
            errln!("harn: {why}");
        }
    }
    show(store, id.as_str(), g.json)
}

/// After a cancel: waits for the host running `id` to stop its run (it sees the cancel in
/// the history, then TERM, the grace, KILL), and reaps a run whose host is gone.
fn stop_running(store: &mut Store, id: &Id) -> Result<(), String> {
    let lease = crate::os::store::run_lock(id);
    if store.held_elsewhere(&lease) {
        let grace = super::host::CANCEL_GRACE.as_secs();
        errln!("harn: stopping the run of {id} in progress (TERM, then KILL after {grace} s)");
        let started = std::time::Instant::now();
        let limit = super::host::CANCEL_GRACE + std::time::Duration::from_secs(10);
        while store.held_elsewhere(&lease) {
            if started.elapsed() > limit {
                return Err(format!(
                    "the run of {id} was cancelled but its host has not stopped it after {} s",
                    limit.as_secs()
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        errln!("harn: the run of {id} stopped");
    }
    let recovered = store.recover(super::hold::reap).map_err(|e| e.to_string())?;
    for (run, killed) in &recovered.reaped {
        errln!("harn: run {run} had lost its host; {killed} of its processes were stopped");
    }
    Ok(())
}
