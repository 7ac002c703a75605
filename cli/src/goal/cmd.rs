//! `harn supervisor create|list|show|tick|run`: goals that drive a work graph to accepted
//! completion inside frozen limits.

use super::engine::{drive, goal_limits, words};
use super::store::{self, goal_id, parse_id};
use crate::exit::{fail, Exit, Failure, EXIT_FAILED, EXIT_USAGE};
use crate::os::store::Store;
use crate::verb::Shown;
use crate::work::config::frozen_harness;
use crate::work::host_args::HostArgs;
use crate::work::run_cmd::read_team;
use clap::{Args, Subcommand};
use harn_core::goal::{Automation, GoalIntent, GoalLimits, Mode};
use serde_json::json;
use std::path::PathBuf;
use GoalVerb as Verb;

/// `harn supervisor create|list|show|tick|run|plan`: the verbs of goals (the service's are
/// beside them, in [`crate::service`]).
#[derive(Debug, Subcommand)]
pub enum GoalVerb {
    /// Create a goal: freeze its root, team, limits and automation.
    Create(CreateArgs),
    /// Every goal with its state and next action.
    List {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// One goal: its projection, its graph and its limits.
    Show(Shown),
    /// One cycle of legal progress actions.
    Tick(DriveArgs),
    /// Cycles until success, a person, a ceiling or no progress.
    Run(DriveArgs),
    /// A goal's plans: list, show, approve, reject, retry.
    #[command(subcommand)]
    Plan(super::plan_cmd::PlanVerb),
}

impl GoalVerb {
    /// True for the verbs that dispatch attempts (`tick`, `run`), after which what waits for
    /// a person is told.
    pub fn drives(&self) -> bool {
        matches!(self, GoalVerb::Tick(_) | GoalVerb::Run(_))
    }
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The root work item: the goal succeeds when it is accepted (a mission may start
    /// without one: its first plan makes it).
    root_work_id: Option<String>,
    /// The team file (JSON keyed by role), frozen by value; a relative path is taken from
    /// the root.
    #[arg(long)]
    team: PathBuf,
    /// The goal id (default: from the title, as a work id is).
    #[arg(long)]
    id: Option<String>,
    /// The title (default: the root item's).
    #[arg(long)]
    title: Option<String>,
    /// Cycles one `run` may take (1 to 1000).
    #[arg(long, default_value_t = GoalLimits::default().max_cycles)]
    max_cycles: u32,
    /// Wall time one `run` may take, in ms (up to 7 days).
    #[arg(long, default_value_t = GoalLimits::default().max_runtime_ms)]
    max_runtime_ms: u64,
    /// Work items dispatched at once (1 to 20).
    #[arg(long, default_value_t = GoalLimits::default().max_parallel_work)]
    max_parallel_work: u32,
    /// Charged attempts over every governed item (1 to 10000).
    #[arg(long, default_value_t = GoalLimits::default().max_total_attempts)]
    max_total_attempts: u32,
    /// Agent calls one attempt may make (1 to 1000).
    #[arg(long, default_value_t = GoalLimits::default().max_agents_per_work)]
    max_agents_per_work: u32,
    /// Agent calls of one attempt in flight at once (1 to 100).
    #[arg(long, default_value_t = GoalLimits::default().agent_concurrency)]
    agent_concurrency: u32,
    /// Accept an item whose proof passes (otherwise it waits in review).
    #[arg(long)]
    accept_passing_proof: bool,
    /// Do not resume an attempt whose approval was ruled on; a person runs it.
    #[arg(long)]
    no_resume_approved: bool,
    /// Retry a blocked item that may be retried, inside every ceiling.
    #[arg(long)]
    retry_blocked: bool,
    /// Land accepted work made in a worktree (harn work land) as it is accepted, so the
    /// base branch holds it in dependency order.
    #[arg(long)]
    land_accepted: bool,
    /// A resource limit of every run the goal dispatches, frozen with it over the root's
    /// configured ones (repeatable): `tasks=64`, `memory=4G`, `cpu_weight=50`, `tmpfs=512M`, `disk=10G`.
    #[arg(long = "limit", value_name = "KEY=VALUE")]
    limits: Vec<String>,
    /// What every run the goal dispatches may reach over the network, frozen with it over
    /// the root's configuration and any tick's `--network`: `adapters`, `none`, `open`, or
    /// `HOST:PORT` entries separated by commas.
    #[arg(long, value_name = "POLICY")]
    network: Option<String>,
    /// A replanning policy file (JSON: planner_specialist, auto_apply, max_replans,
    /// max_work_items_per_plan, max_total_work_items, templates), frozen by value with every
    /// template's workflow digest; a relative path is taken from the root.
    #[arg(long)]
    replanning: Option<PathBuf>,
    /// A mission file (JSON: objective, acceptance, max_milestones) reached through
    /// milestones the planner proposes; needs --replanning.
    #[arg(long)]
    mission: Option<PathBuf>,
    /// Create the goal even though every specialist runs on one harness while another is
    /// installed and logged in on this machine.
    #[arg(long)]
    allow_single_adapter: bool,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
    /// Print only the new goal's id.
    #[arg(long, conflicts_with = "json")]
    quiet: bool,
}

#[derive(Debug, Args)]
pub struct DriveArgs {
    /// The goal id.
    id: String,
    #[command(flatten)]
    host: HostArgs,
    /// Print one JSON document (the report) instead of a line per decision.
    #[arg(long)]
    json: bool,
    /// Print only how it stopped and what to type next, not a line per decision.
    #[arg(long, short, conflicts_with = "json")]
    quiet: bool,
}

/// Runs a goal verb at `root`; returns the exit code.
pub fn run(root: Option<PathBuf>, verb: GoalVerb) -> Exit {
    let explicit = root.is_some();
    let mut store = crate::os::store::open_root(root)?;
    let reads = match &verb {
        Verb::List { .. } | Verb::Show(_) => true,
        Verb::Plan(p) => p.reads(),
        _ => false,
    };
    if reads {
        crate::os::root::require_ledger(store.root(), explicit)
            .map_err(|e| Failure::new(EXIT_FAILED, e))?;
    }
    match verb {
        Verb::Create(a) => create(&mut store, a),
        Verb::List { json } => list(&mut store, json),
        Verb::Show(Shown { id, json }) => show(&mut store, &id, json),
        Verb::Tick(a) => drive_cmd(&mut store, a, Mode::Tick),
        Verb::Run(a) => drive_cmd(&mut store, a, Mode::Run),
        Verb::Plan(verb) => super::plan_cmd::run(&mut store, verb),
    }
}

fn create(store: &mut Store, a: CreateArgs) -> Exit {
    let root_id = match a.root_work_id.as_deref().map(parse_id) {
        Some(Ok(id)) => Some(id),
        Some(Err(f)) => return Err(f),
        None => None,
    };
    let root_title = match &root_id {
        None => None,
        Some(root) => match store.intent(root) {
            Ok(Some(intent)) => Some(intent.title),
            Ok(None) => return fail(EXIT_USAGE, format!("root: no work item {root}")),
            Err(e) => return fail(EXIT_FAILED, e),
        },
    };
    let mission = match a.mission.as_deref() {
        None => None,
        Some(file) => {
            let path = store.given(file);
            let read = crate::input::read(&path, crate::input::CONFIG_MAX).and_then(|b| {
                serde_json::from_slice::<harn_core::goal::plan::Mission>(&b)
                    .map_err(|e| format!("{}:{}: {e}", path.display(), e.line()))
            });
            match read {
                Ok(m) => Some(m),
                Err(e) => return fail(EXIT_USAGE, e),
            }
        }
    };
    let team = match read_team(store, &a.team) {
        Ok(team) => team,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if let Err(e) = harn_core::goal::intent::check_new_team(&team) {
        return fail(EXIT_USAGE, format!("{}: {e}", store.given(&a.team).display()));
    }
    // An effort word no preset takes is checked when a run names the harness; said now, so
    // a typo is not frozen into the goal unseen (a text harness passes any word on).
    for (role, profile) in &team {
        let Some(effort) = profile.effort.as_deref() else { continue };
        use harn_core::work::adapter::{efforts, Kind};
        let known = [Kind::ClaudeCode, Kind::Codex]
            .iter()
            .any(|k| efforts(*k).is_some_and(|words| words.contains(&effort)));
        if !known {
            errln!(
                "harn: warning: {}: role {role}: effort {effort:?} is no word claude-code or \
                 codex takes; a run on either refuses it, a text harness passes it on",
                store.given(&a.team).display()
            );
        }
    }
    // Every harness a specialist pins must resolve now, not at the first dispatch.
    for (role, profile) in &team {
        if let Some(h) = &profile.adapter {
            let checked = frozen_harness(store.root(), h).and_then(|frozen| {
                let kind_of = |_: &str| Some(frozen.spec.kind);
                let one = harn_core::work::team::Team::from([(role.clone(), profile.clone())]);
                harn_core::work::team::check_efforts(&one, None, &kind_of).map_err(String::from)
            });
            if let Err(e) = checked {
                let e = e.strip_prefix(&format!("role {role}: ")).unwrap_or(&e).to_owned();
                return fail(EXIT_USAGE, format!("{}: role {role}: {e}", a.team.display()));
            }
        }
    }
    if !a.allow_single_adapter {
        check_spread(&team)?;
    }
    let limits = GoalLimits {
        max_cycles: a.max_cycles,
        max_runtime_ms: a.max_runtime_ms,
        max_parallel_work: a.max_parallel_work,
        max_total_attempts: a.max_total_attempts,
        max_agents_per_work: a.max_agents_per_work,
        agent_concurrency: a.agent_concurrency,
    };
    let automation = Automation {
        accept_passing_proof: a.accept_passing_proof,
        resume_approved: !a.no_resume_approved,
        retry_blocked: a.retry_blocked,
        land_accepted: a.land_accepted,
    };
    let title = a.title.or(root_title).unwrap_or_else(|| {
        let objective = mission.as_ref().map_or("a goal", |m| m.objective.as_str());
        objective.chars().take(200).collect()
    });
    let id = match a.id.as_deref().map(parse_id) {
        Some(Ok(id)) => id,
        Some(Err(f)) => return Err(f),
        // Named after its title, else stamped.
        None => {
            let taken = store::ids(store).map(|l| l.ids).unwrap_or_default();
            let taken = |c: &str| taken.iter().any(|t| t.as_str() == c);
            harn_core::ids::readable(&title, taken).unwrap_or_else(|| store.new_id("g"))
        }
    };
    let now = store.now();
    let mut intent =
        match GoalIntent::new(id.clone(), title, root_id, team, limits, automation, now) {
            Ok(intent) => intent,
            Err(e) => return fail(EXIT_USAGE, format!("goal: {e}")),
        };
    if mission.is_some() && a.replanning.is_none() {
        return fail(EXIT_USAGE, "--mission needs --replanning");
    }
    if let Some(file) = &a.replanning {
        let policy = match super::plan_cmd::read_policy(store.root(), file) {
            Ok(p) => p,
            Err(e) => return fail(EXIT_USAGE, e),
        };
        intent = match intent.with_replanning(policy) {
            Ok(intent) => intent,
            Err(e) => return fail(EXIT_USAGE, format!("{}: {e}", file.display())),
        };
    }
    if !a.limits.is_empty() {
        let mut frozen = harn_core::limits::ResourceLimits::default();
        for given in &a.limits {
            if let Err(e) = frozen.set(given) {
                return fail(EXIT_USAGE, format!("--limit {e}"));
            }
        }
        intent = match intent.with_resource_limits(frozen) {
            Ok(intent) => intent,
            Err(e) => return fail(EXIT_USAGE, format!("goal: {e}")),
        };
    }
    if let Some(text) = &a.network {
        match harn_core::work::network::NetworkPolicy::from_flag(text) {
            Ok(policy) => intent = intent.with_network(policy),
            Err(e) => return fail(EXIT_USAGE, e.to_string()),
        }
    }
    if let Some(m) = mission {
        let file = a.mission.as_deref().map(|f| store.root().join(f)).unwrap_or_default();
        intent = match intent.with_mission(m) {
            Ok(intent) => intent,
            Err(e) => return fail(EXIT_USAGE, format!("{}: {e}", file.display())),
        };
    }
    if let Err(e) = intent.validate() {
        return fail(EXIT_USAGE, format!("goal: {e}"));
    }
    if let Err(e) = store::create(store, &intent) {
        return fail(EXIT_FAILED, e);
    }
    if a.quiet {
        outln!("{id}");
        return Ok(0);
    }
    show(store, id.as_str(), a.json)
}

/// The adapter-spread refusal: the programs are asked whether they are logged in only when
/// the team could be refused at all (it would be if every built-in harness were live).
fn check_spread(team: &harn_core::work::team::Team) -> Result<(), Failure> {
    use harn_core::goal::intent::check_adapter_spread;
    let every: Vec<String> = harn_core::work::agent::presets().into_keys().collect();
    if check_adapter_spread(team, &every).is_ok() {
        return Ok(());
    }
    let live = crate::work::calls::live_presets();
    check_adapter_spread(team, &live).map_err(|e| Failure::new(EXIT_USAGE, e))
}

fn list(store: &mut Store, as_json: bool) -> Exit {
    use harn_core::goal::index::{storable, GoalRow};
    use harn_core::ids::Id;
    let listing = match store::ids(store) {
        Ok(listing) => listing,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let (mut rows, mut errors) = (Vec::new(), Vec::new());
    // Goals whose rows stand in the goal index are not read; the rest are read over the
    // work index and stored for the next listing.
    store.use_index();
    let mut index = store.goal_index();
    if let Some(ix) = index.as_mut() {
        ix.examine(store.fs());
    }
    let listed = |id: &Id, row: GoalRow| {
        json!({
            "id": id, "title": row.title, "state": row.state, "next_action": row.next_action,
            "reason": row.reason, "root_work_id": row.root_work_id,
        })
    };
    for id in listing.ids {
        if let Some(row) = index.as_mut().and_then(|ix| ix.standing(store.fs(), &id)) {
            rows.push(listed(&id, row));
            continue;
        }
        // A goal read again is read over the work index, so that it may be stored.
        store.load_index();
        let busy = store.goal_busy(&id);
        let read = store::read_listed(store, &id);
        if let Some(ix) = index.as_mut() {
            match &read {
                Ok(Some(g)) => {
                    let storable = storable(g, busy, &|w| store.vouched(w));
                    ix.store(store.fs(), &id, g, storable);
                }
                _ => ix.forget(&id),
            }
        }
        match read {
            Ok(Some(g)) => rows.push(listed(&id, GoalRow::of(&g))),
            Ok(None) => {} // A creation a kill cut short: not a goal.
            // One unreadable goal is reported, never hides the others.
            Err(e) => errors.push(json!({ "id": id, "error": e.to_string() })),
        }
    }
    if let Some(ix) = index {
        store.save_goal_index(ix);
    }
    store.save_index();
    let warnings = listing.problems;
    if as_json {
        outln!("{}", json!({ "goals": rows, "errors": errors, "warnings": warnings }));
    } else {
        for w in &warnings {
            errln!("harn: warning: {w}");
        }
        if !rows.is_empty() {
            outln!("{:<28} {:<32} TITLE", "ID", "STATE/NEXT");
        }
        for r in &rows {
            let state = r["state"].as_str().unwrap_or("");
            let next = format!("/{}", r["next_action"].as_str().unwrap_or(""));
            crate::paint::line(&[
                format!("{:<28} ", r["id"].as_str().unwrap_or("")),
                crate::paint::state(state, 0),
                format!("{next:<w$} ", w = 32usize.saturating_sub(state.chars().count())),
                crate::paint::plain(r["title"].as_str().unwrap_or("")),
            ]);
        }
        for e in &errors {
            errln!(
                "harn: goal {}: {}",
                e["id"].as_str().unwrap_or(""),
                e["error"].as_str().unwrap_or("")
            );
        }
        if rows.is_empty() && errors.is_empty() {
            outln!("no goals");
        }
    }
    crate::exit::listed(&errors)
}

fn show(store: &mut Store, id: &str, as_json: bool) -> Exit {
    let id = goal_id(store, id)?;
    store.use_index();
    let g = match store::read(store, &id) {
        Ok(g) => g,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let fingerprint = harn_core::goal::goal_fingerprint(&g.projection, &g.items);
    let usage = super::engine::usage_of(store, &g);
    // A mission's progress: milestones accepted so far, the one in flight, the cap.
    let milestones = match &g.intent.mission {
        None => serde_json::Value::Null,
        Some(m) => {
            let completed = harn_core::goal::plan::milestones_completed(store.ledger(), &g.plans)
                .map_err(crate::exit::Failure::failed)?;
            let current = g.plans.iter().rev().find_map(|p| p.milestone);
            let done =
                g.plans.iter().any(|p| p.status == harn_core::goal::plan::PlanStatus::Completed);
            json!({ "completed": completed, "current": current, "max": m.max_milestones,
                    "mission_complete": done })
        }
    };
    store.save_index();
    if as_json {
        // Serialized straight from the goal as read, without building a JSON tree of its
        // graph first (a chain of a thousand items is most of the document).
        #[derive(serde::Serialize)]
        struct Work<'a> {
            id: &'a harn_core::ids::Id,
            projection: &'a harn_core::work::Projection,
        }
        #[derive(serde::Serialize)]
        struct Document<'a> {
            intent: &'a harn_core::goal::GoalIntent,
            projection: &'a harn_core::goal::GoalProjection,
            work: Vec<Work<'a>>,
            fingerprint: &'a str,
            usage: &'a Option<harn_core::work::adapter::Usage>,
            milestones: &'a serde_json::Value,
            next_commands: Vec<String>,
        }
        let work = g.items.iter().map(|i| Work { id: &i.id, projection: &i.projection }).collect();
        let shown = Document {
            intent: &g.intent,
            projection: &g.projection,
            work,
            fingerprint: &fingerprint,
            usage: &usage,
            milestones: &milestones,
            next_commands: harn_core::goal::next::next_commands(&id, &g.projection, &g.items),
        };
        outln!("{}", serde_json::to_string(&shown).expect("a goal serializes"));
        return Ok(0);
    }
    let (p, l, a) = (&g.projection, &g.intent.limits, &g.intent.automation);
    outln!("{id}  {}", g.intent.title);
    outln!("  state      {} — {}", words(p), p.reason);
    let root = g.projection.root_work_id.as_ref().map_or("(none yet)".into(), |r| r.to_string());
    outln!("  root       {root}");
    if let Some(m) = &g.intent.mission {
        outln!("  mission    {} (at most {} milestones)", m.objective, m.max_milestones);
        outln!(
            "  milestones {} completed{}",
            milestones["completed"],
            milestones["current"]
                .as_u64()
                .map_or(String::new(), |c| format!(", milestone {c} planned"))
        );
    }
    outln!(
        "  attempts   {} used, {} charged, {} left of {}",
        p.attempts_used,
        p.charged_attempts,
        p.attempts_remaining,
        l.max_total_attempts
    );
    if let Some(r) = &g.intent.replanning {
        // Which replans moved nothing, and why: the planner made no proposal, or its review
        // did not pass it.
        let spent = p.replan_consumption.map_or(String::new(), |c| {
            format!(
                "; {} ended without a proposal, {} not passed by review",
                c.planner_no_proposal, c.reviewer_rejection
            )
        });
        outln!(
            "  replans    {} asked for, {} left of {}{spent}",
            p.replans_used,
            p.replans_remaining,
            r.max_replans
        );
    }
    if let Some(u) = &usage {
        outln!("  agents     {}", crate::work::progress::usage(u));
    }
    use harn_core::text::{count, duration_words};
    outln!(
        "  limits     {}, {} a run, {} in parallel, {} a work item, {} at once",
        count(u64::from(l.max_cycles), "cycle", "cycles"),
        duration_words(l.max_runtime_ms),
        l.max_parallel_work,
        count(u64::from(l.max_agents_per_work), "agent", "agents"),
        l.agent_concurrency
    );
    outln!(
        "  automation accept passing proof: {}, resume approved: {}, retry blocked: {}, land \
         accepted: {}",
        a.accept_passing_proof,
        a.resume_approved,
        a.retry_blocked,
        a.land_accepted
    );
    if let Some(r) = &g.intent.resource_limits {
        let mut frozen = Vec::new();
        if let Some(m) = r.memory {
            frozen.push(format!("memory {}", harn_core::limits::show_bytes(m)));
        }
        if let Some(t) = r.tasks {
            frozen.push(format!("tasks {t}"));
        }
        if let Some(w) = r.cpu_weight {
            frozen.push(format!("cpu weight {w}"));
        }
        if let Some(t) = r.tmpfs {
            frozen.push(format!("tmpfs {}", harn_core::limits::show_bytes(t)));
        }
        outln!(
            "  runs       {} (frozen; the rest as .harnery/config.json says)",
            frozen.join(", ")
        );
    }
    if let Some(n) = &g.intent.network {
        outln!("  network    {} (frozen for every run it dispatches)", n.to_flag());
    }
    let team: Vec<&str> = g.intent.team.keys().map(String::as_str).collect();
    outln!("  team       {}", if team.is_empty() { "(none)".into() } else { team.join(", ") });
    for i in &g.items {
        let q = &i.projection;
        let state = json!(q.state);
        outln!(
            "  work       {:<24} {:<18} {}",
            i.id.as_str(),
            state.as_str().unwrap_or(""),
            q.reason
        );
    }
    let next = harn_core::goal::next::next_commands(&id, &g.projection, &g.items);
    for (i, cmd) in next.iter().enumerate() {
        outln!("  {} {cmd}", if i == 0 { "next      " } else { "or        " });
    }
    Ok(0)
}

fn drive_cmd(store: &mut Store, a: DriveArgs, mode: Mode) -> Exit {
    let id = goal_id(store, &a.id)?;
    let quiet = a.json || a.quiet;
    let mut say = |line: String| {
        if !quiet {
            outln!("{line}");
        }
    };
    let intent = match store::intent(store, &id) {
        Ok(intent) => intent,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let limits = match goal_limits(store, &intent, &a.host) {
        Ok(limits) => limits,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if let Err(e) = crate::os::children::interrupt_on_signals() {
        return fail(EXIT_FAILED, format!("signal handling: {e}"));
    }
    let report = match drive(store, &id, mode, &limits, &mut say) {
        Ok(report) => report,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    if a.json {
        let mut doc = json!(report);
        doc["goal_id"] = json!(id);
        outln!("{doc}");
    } else {
        let reason = json!(report.stop.reason);
        outln!(
            "stop: {} — {} ({}, {} dispatched, {} accepted)",
            reason.as_str().unwrap_or(""),
            report.stop.detail,
            harn_core::text::count(u64::from(report.cycles), "cycle", "cycles"),
            report.dispatches,
            report.acceptances
        );
        // Where the loop stopped for a person, what they type; read afresh, as it stands.
        if let Ok(g) = store::read(store, &id) {
            let next = harn_core::goal::next::next_commands(&id, &g.projection, &g.items);
            for (i, cmd) in next.iter().enumerate() {
                outln!("{} {cmd}", if i == 0 { "next:" } else { "or:  " });
            }
        }
    }
    // An attempt that could not start is a failure of the host, not a decision of the loop.
    if report.stop.reason == harn_core::goal::StopReason::NotStarted {
        Ok(EXIT_FAILED)
    } else {
        Ok(0)
    }
}
