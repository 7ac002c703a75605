//! `harn sim …`: run one seed or many, replay and minimize deterministic simulations, and `sim day`, a
//! simulated day of harnesses under faults with a summary.

use crate::exit::{fail, Exit, Failure, EXIT_FAILED, EXIT_USAGE};
#[cfg(feature = "planted-bugs")]
use clap::ValueEnum;
use clap::{Args, Subcommand};
use harn_core::harness::lifecycle::RestartPolicy;
use harn_core::journal;
use harn_core::time::{Duration, Instant};
use harn_sim::entropy::SeededEntropy;
use harn_sim::harness::options::{InjectedBug, SimHarness, SimOptions};
use harn_sim::harness::process::Behaviour;
use harn_sim::harness::seeds::{self, RunOutcome, DEFAULT_STEPS};
use harn_sim::harness::trace::Trace;
use harn_sim::harness::world::HarnessWorld;
use harn_sim::worlds::{self, ActionLog, WorldKind, WorldOptions, WorldTrace, WORLD_TRACE_FORMAT};
use std::path::{Path, PathBuf};

/// The `sim` verbs.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Run one seed of the harness daemon and report whether every invariant held.
    Run(RunArgs),
    /// Run a range of the harness daemon's seeds (optionally within a time budget); write a
    /// trace per failing seed.
    #[command(alias = "sweep")]
    Seeds(SeedsArgs),
    /// Re-run a recorded trace (of any world) and name the first step or action that
    /// diverges.
    Replay {
        /// The trace file (JSON Lines) to replay.
        file: PathBuf,
    },
    /// Shrink a failing trace (of any world) to a smaller run that breaks the same invariant.
    Minimize {
        /// The failing trace file.
        file: PathBuf,
        /// Where to write the smaller trace (default: next to the input, `.min` added).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print one JSON document comparing the run before and after.
        #[arg(long)]
        json: bool,
    },
    /// Work attempts under crashes: the work ledger with simulated workflows, agents,
    /// policy asks and approvals, a crash armed before each operator action.
    Work(WorldArgs),
    /// Goals under crashes: the supervisor loop over the work world, with drawn automation
    /// and limits, a person ruling and reviewing, and crashes armed before actions.
    Goals(WorldArgs),
    /// The supervisor service under faults: its wake machine and sweep over the goal world,
    /// an unreadable goal, failing ticks, late and missed wakes, and crashes mid-sweep.
    Service(WorldArgs),
    /// Simulate a day of four harnesses under faults and print what happened.
    Day {
        /// Seed of the day.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// A planted bug, to check that the checker finds it (test builds only).
#[cfg(feature = "planted-bugs")]
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BugArg {
    /// `sync_dir` silently does nothing, so renamed files are lost by a crash.
    LyingDirSync,
    /// Some child-exit reports are lost, so the daemon believes dead children are alive.
    LostExitReport,
    /// The core queues spawns ahead of the state.json barrier.
    SpawnBeforePersist,
    /// The core acknowledges commands ahead of the state.json barrier.
    AckBeforePersist,
    /// A new daemon boots without stopping what an earlier one left running.
    SkipReclaim,
    /// The core lets a second client type into a terminal harness.
    SecondTypist,
    /// The core sends SIGTERM to a terminal harness without hanging its session up.
    TermWithoutHangup,
    /// The work world's segment driver records a resumed segment as a new start.
    ResumeAsStart,
    /// The goal world's planning attempt records a new run's manifest before its lease.
    ManifestBeforeLease,
    /// The work world's segment driver ends a segment its cluster ended as a plain exit.
    FaultAsExit,
}

#[cfg(feature = "planted-bugs")]
impl From<BugArg> for InjectedBug {
    fn from(b: BugArg) -> InjectedBug {
        match b {
            BugArg::LyingDirSync => InjectedBug::LyingDirSync,
            BugArg::LostExitReport => InjectedBug::LostExitReport,
            BugArg::SpawnBeforePersist => InjectedBug::SpawnBeforePersist,
            BugArg::AckBeforePersist => InjectedBug::AckBeforePersist,
            BugArg::SkipReclaim => InjectedBug::SkipReclaim,
            BugArg::SecondTypist => InjectedBug::SecondTypist,
            BugArg::TermWithoutHangup => InjectedBug::TermWithoutHangup,
            BugArg::ResumeAsStart => InjectedBug::ResumeAsStart,
            BugArg::ManifestBeforeLease => InjectedBug::ManifestBeforeLease,
            BugArg::FaultAsExit => InjectedBug::FaultAsExit,
        }
    }
}

/// Options of `sim run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The seed.
    #[arg(long)]
    seed: u64,
    /// Steps of the fault phase.
    #[arg(long, default_value_t = DEFAULT_STEPS)]
    steps: u64,
    /// Write the trace to this file.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Plant a bug (for checking the checker; test builds only).
    #[cfg(feature = "planted-bugs")]
    #[arg(long, value_enum)]
    inject_bug: Option<BugArg>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// Options of `sim seeds`.
#[derive(Debug, Args)]
pub struct SeedsArgs {
    /// Seeds to run, as `A..B` (B excluded).
    #[arg(long, value_parser = parse_range)]
    seeds: (u64, u64),
    /// Stop starting new seeds after this many seconds.
    #[arg(long)]
    budget_secs: Option<u64>,
    /// Steps of the fault phase per seed.
    #[arg(long, default_value_t = DEFAULT_STEPS)]
    steps: u64,
    /// Directory for the traces of failing seeds.
    #[arg(long, default_value = "sim-failures")]
    trace_dir: PathBuf,
    /// Plant a bug (for checking the checker; test builds only).
    #[cfg(feature = "planted-bugs")]
    #[arg(long, value_enum)]
    inject_bug: Option<BugArg>,
    /// Seeds run at once, each on a thread of its own (default: one per CPU). Every seed's
    /// run is the same whatever the number; only the wall time changes.
    #[arg(long)]
    jobs: Option<usize>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// The planted bug asked for, if any (always none without the planted-bugs feature).
#[cfg(feature = "planted-bugs")]
fn planted(arg: Option<BugArg>) -> Option<InjectedBug> {
    arg.map(Into::into)
}

#[cfg(not(feature = "planted-bugs"))]
fn planted(_: Option<std::convert::Infallible>) -> Option<InjectedBug> {
    None
}

/// The bug a run or a range of seeds plants: none, in a build without planted bugs.
macro_rules! inject_bug {
    ($($args:ty),*) => {$(
        impl $args {
            #[cfg(feature = "planted-bugs")]
            fn inject_bug(&self) -> Option<BugArg> {
                self.inject_bug
            }
            #[cfg(not(feature = "planted-bugs"))]
            fn inject_bug(&self) -> Option<std::convert::Infallible> {
                None
            }
        }
    )*};
}

/// Options of `sim work`, `sim goals` and `sim service`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  harn sim work --seeds 0..500\n  harn sim replay sim-failures/work-seed-17.trace.jsonl\n  harn sim minimize sim-failures/work-seed-17.trace.jsonl"
)]
pub struct WorldArgs {
    /// Seeds to run, as `A..B` (B excluded).
    #[arg(long, value_parser = parse_range)]
    seeds: (u64, u64),
    /// Directory for the traces of failing seeds, which `sim replay` and `sim minimize` take.
    #[arg(long, default_value = "sim-failures")]
    trace_dir: PathBuf,
    /// Plant a bug (for checking the checks; test builds only; lying-dir-sync applies to every world, resume-as-start and fault-as-exit to work, manifest-before-lease to goals).
    #[cfg(feature = "planted-bugs")]
    #[arg(long, value_enum)]
    inject_bug: Option<BugArg>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

inject_bug!(RunArgs, SeedsArgs, WorldArgs);

fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once("..").ok_or("expected A..B, for example 0..1000")?;
    let a: u64 = a.trim().parse().map_err(|e| format!("start {a:?}: {e}"))?;
    let b: u64 = b.trim().parse().map_err(|e| format!("end {b:?}: {e}"))?;
    if b <= a {
        return Err(format!("the range {a}..{b} is empty"));
    }
    Ok((a, b))
}

/// Runs a `sim` verb; returns the exit code.
pub fn run(cmd: SimCommand) -> Exit {
    match cmd {
        SimCommand::Run(args) => run_one(args),
        SimCommand::Seeds(args) => seeds(args),
        SimCommand::Work(args) => work_sweep(&args),
        SimCommand::Goals(args) => goal_sweep(&args),
        SimCommand::Service(args) => service_sweep(&args),
        SimCommand::Replay { file } => match read_any_trace(&file)? {
            AnyTrace::Harness(trace) => replay(&trace),
            AnyTrace::World(trace) => replay_world(&trace),
        },
        SimCommand::Minimize { file, out, json } => match read_any_trace(&file)? {
            AnyTrace::Harness(trace) => minimize(&file, &trace, out, json),
            AnyTrace::World(trace) => minimize_world(&file, &trace, out, json),
        },
        SimCommand::Day { seed, json } => day(seed, json),
    }
}

fn outcome_for(seed: u64, steps: u64, bug: Option<InjectedBug>, trace: bool) -> RunOutcome {
    let mut options = seeds::options_for_seed(seed, steps);
    options.bug = bug;
    seeds::run_with(seed, options, trace)
}

fn run_one(args: RunArgs) -> Exit {
    let out = outcome_for(args.seed, args.steps, planted(args.inject_bug()), args.trace.is_some());
    if let (Some(path), Some(trace)) = (&args.trace, &out.trace) {
        if let Err(e) = std::fs::write(path, trace.to_jsonl()) {
            return fail(EXIT_FAILED, format!("{}: {e}", path.display()));
        }
    }
    let last_hash = out.hashes.last().copied().unwrap_or(0);
    if args.json {
        let doc = serde_json::json!({
            "seed": out.seed, "steps": out.steps, "harnesses": out.options.harnesses.len(),
            "final_hash": format!("{last_hash:016x}"), "violation": out.violation,
        });
        outln!("{doc}");
    } else {
        match &out.violation {
            None => outln!(
                "seed {}: {} steps, {} harnesses, every invariant held (final hash {last_hash:016x})",
                out.seed,
                out.steps,
                out.options.harnesses.len()
            ),
            Some(v) => outln!("seed {}: {v}", out.seed),
        }
    }
    if out.violation.is_some() {
        Ok(EXIT_FAILED)
    } else {
        Ok(0)
    }
}

fn seeds(args: SeedsArgs) -> Exit {
    let started = std::time::Instant::now();
    let budget = args.budget_secs.map(std::time::Duration::from_secs);
    let bug = planted(args.inject_bug());
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let ran = sweep(args.seeds, jobs.max(1), |seed| {
        if budget.is_some_and(|b| started.elapsed() >= b) {
            return None;
        }
        let out = outcome_for(seed, args.steps, bug, false);
        Some((out.steps, out.violation))
    });
    let (mut seeds, mut steps) = (0u64, 0u64);
    let mut failures = Vec::new();
    // Reported in seed order, whichever thread ran which.
    for (seed, (ran_steps, violation)) in ran {
        seeds += 1;
        steps += ran_steps;
        if let Some(v) = violation {
            let traced = outcome_for(seed, args.steps, bug, true);
            let file = args.trace_dir.join(format!("seed-{seed}.trace.jsonl"));
            let written = std::fs::create_dir_all(&args.trace_dir)
                .and_then(|()| std::fs::write(&file, traced.trace.expect("traced").to_jsonl()));
            if let Err(e) = written {
                return fail(EXIT_FAILED, format!("{}: {e}", file.display()));
            }
            if !args.json {
                outln!("FAIL seed {seed}: {v}\n     trace: {}", file.display());
            }
            failures.push((seed, v, file));
        }
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    if args.json {
        let failing: Vec<_> = failures
            .iter()
            .map(|(s, v, f)| serde_json::json!({"seed": s, "violation": v, "trace": f}))
            .collect();
        let doc = serde_json::json!({
            "seeds": seeds, "steps": steps, "seconds": secs,
            "seeds_per_second": seeds as f64 / secs, "steps_per_second": steps as f64 / secs,
            "failures": failing,
        });
        outln!("{doc}");
    } else {
        outln!(
            "swept {seeds} seeds ({steps} steps) in {secs:.1} s: {:.1} seeds/s, {:.0} steps/s; {} failing",
            seeds as f64 / secs,
            steps as f64 / secs,
            failures.len()
        );
    }
    if failures.is_empty() {
        Ok(0)
    } else {
        Ok(EXIT_FAILED)
    }
}

/// Runs `one` for each seed of `range` on `jobs` threads, each taking the next seed not yet
/// taken, and returns what each gave, by seed; a seed for which `one` gives `None` (its
/// time budget ran out) is left out.
fn sweep<T: Send>(
    range: (u64, u64),
    jobs: usize,
    one: impl Fn(u64) -> Option<T> + Sync,
) -> std::collections::BTreeMap<u64, T> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let next = AtomicU64::new(range.0);
    let done = std::sync::Mutex::new(std::collections::BTreeMap::new());
    let work = || loop {
        let seed = next.fetch_add(1, Ordering::Relaxed);
        if seed >= range.1 {
            return;
        }
        match one(seed) {
            Some(result) => {
                done.lock().expect("no worker panicked holding it").insert(seed, result);
            }
            None => return,
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..jobs {
            scope.spawn(work);
        }
        work();
    });
    done.into_inner().expect("no worker panicked holding it")
}

/// A trace of the harness world (steps) or of an action world (work, goals, service).
enum AnyTrace {
    Harness(Trace),
    World(WorldTrace),
}

/// Reads a trace, telling the kinds apart by the `format` of its first line.
fn read_any_trace(file: &Path) -> Result<AnyTrace, Failure> {
    let text = crate::input::read_text(file, 1 << 30).map_err(|e| Failure::new(EXIT_USAGE, e))?;
    let bad = |e: String| Failure::new(EXIT_USAGE, format!("{}:{e}", file.display()));
    let first = text.lines().next().unwrap_or_default();
    let format = serde_json::from_str::<serde_json::Value>(first)
        .ok()
        .and_then(|v| v.get("format").and_then(|f| f.as_str()).map(str::to_owned));
    match format.as_deref() {
        Some(WORLD_TRACE_FORMAT) => WorldTrace::parse(&text).map(AnyTrace::World).map_err(bad),
        _ => Trace::parse(&text).map(AnyTrace::Harness).map_err(bad),
    }
}

fn replay(trace: &Trace) -> Exit {
    let report = seeds::replay(trace);
    match report.first_divergence {
        None => outln!("replayed {} steps of seed {}: every state hash matches", report.steps_compared, trace.header.seed),
        Some((step, want, got)) => outln!(
            "replay of seed {} diverges at step {step}: recorded hash {want:016x}, replayed {got:016x}",
            trace.header.seed
        ),
    }
    replayed_outcome(&report.recorded, &report.replayed, report.identical())
}

/// Says whether a replay found the outcome its trace recorded; exit 1 unless the replay was
/// `identical`.
fn replayed_outcome<T: PartialEq + std::fmt::Display + std::fmt::Debug>(
    recorded: &Option<T>,
    replayed: &Option<T>,
    identical: bool,
) -> Exit {
    match (recorded, replayed) {
        (Some(r), Some(p)) if r == p => outln!("reproduced: {p}"),
        (None, None) => {}
        (r, p) => outln!("outcome differs: recorded {r:?}, replayed {p:?}"),
    }
    if identical {
        Ok(0)
    } else {
        Ok(EXIT_FAILED)
    }
}

/// The size of a run, as minimizing reduces it.
fn run_size(steps: u64, o: &SimOptions) -> serde_json::Value {
    let mut faults: Vec<&str> = Vec::new();
    for (name, rate) in [
        ("host-crash", o.crash_per_mille),
        ("daemon-crash", o.daemon_crash_per_mille),
        ("io-error", o.io_fault_per_mille),
        ("wake", o.wake_fault_per_mille),
        ("wall-jump", o.wall_jump_per_mille),
    ] {
        if rate > 0 {
            faults.push(name);
        }
    }
    if o.command_mean_secs < 1 << 40 {
        faults.push("operator");
    }
    serde_json::json!({ "steps": steps, "harnesses": o.harnesses.len(), "fault_classes": faults })
}

fn minimize(file: &Path, trace: &Trace, out: Option<PathBuf>, json: bool) -> Exit {
    if trace.end.violation.is_none() {
        return fail(
            EXIT_USAGE,
            format!("{}: the trace records no violation to minimize", file.display()),
        );
    }
    let Some(small) = seeds::minimize(trace.header.seed, trace.header.options.clone()) else {
        return fail(
            EXIT_FAILED,
            "the recorded violation does not reproduce; replay it to see where it diverges",
        );
    };
    let out = out.unwrap_or_else(|| minimized_path(file));
    let text = small.trace.as_ref().expect("minimize traces").to_jsonl();
    if let Err(e) = std::fs::write(&out, text) {
        return fail(EXIT_FAILED, format!("{}: {e}", out.display()));
    }
    let before = run_size(trace.end.steps, &trace.header.options);
    let after = run_size(small.steps, &small.options);
    if json {
        let doc = serde_json::json!({
            "seed": trace.header.seed, "before": before, "after": after,
            "violation": small.violation, "trace": out,
        });
        outln!("{doc}");
        return Ok(0);
    }
    outln!(
        "minimized seed {}: {} -> {} steps, {} -> {} harnesses, fault classes {} -> {}; {}\nwrote {}",
        trace.header.seed,
        before["steps"],
        after["steps"],
        before["harnesses"],
        after["harnesses"],
        before["fault_classes"],
        after["fault_classes"],
        small.violation.as_ref().map_or("no violation".into(), |v| v.to_string()),
        out.display()
    );
    Ok(0)
}

/// Where a minimized trace goes by default: beside `file`, `.min` added.
fn minimized_path(file: &Path) -> PathBuf {
    let name = file.file_name().map_or("trace".into(), |n| n.to_string_lossy().into_owned());
    let stem = name
        .strip_suffix(".trace.jsonl")
        .or(name.strip_suffix(".jsonl"))
        .unwrap_or(&name)
        .to_owned();
    file.with_file_name(format!("{stem}.min.trace.jsonl"))
}

fn replay_world(trace: &WorldTrace) -> Exit {
    let h = &trace.header;
    let report = worlds::replay(trace);
    let what = format!("{} seed {}", h.world.verb(), h.seed);
    match report.first_divergence {
        None => outln!("replayed {} actions of {what}: every state hash matches", report.compared),
        Some((action, want, got)) => outln!(
            "replay of {what} diverges at action {action}: recorded hash {want:016x}, replayed {got:016x}"
        ),
    }
    replayed_outcome(&report.recorded, &report.replayed, report.identical())
}

fn minimize_world(file: &Path, trace: &WorldTrace, out: Option<PathBuf>, json: bool) -> Exit {
    let h = &trace.header;
    if trace.end.failure.is_none() {
        return fail(
            EXIT_USAGE,
            format!("{}: the trace records no failure to minimize", file.display()),
        );
    }
    let Some(small) = worlds::minimize(h.world, h.seed, h.options) else {
        return fail(
            EXIT_FAILED,
            "the recorded failure does not reproduce; replay it to see where it diverges",
        );
    };
    let out = out.unwrap_or_else(|| minimized_path(file));
    if let Err(e) = std::fs::write(&out, small.trace().to_jsonl()) {
        return fail(EXIT_FAILED, format!("{}: {e}", out.display()));
    }
    let size = |actions: u64, o: &WorldOptions| serde_json::json!({ "actions": actions, "faulty": o.faulty, "crashes": o.crashes });
    let (before, after) =
        (size(trace.end.actions, &h.options), size(small.actions(), &small.options));
    if json {
        let doc = serde_json::json!({
            "world": h.world, "seed": h.seed, "before": before, "after": after,
            "failure": small.failure, "trace": out,
        });
        outln!("{doc}");
        return Ok(0);
    }
    outln!(
        "minimized {} seed {}: {} -> {} actions ({} -> {} with faults), crashes {} -> {}; {}\nwrote {}",
        h.world.verb(),
        h.seed,
        before["actions"],
        after["actions"],
        before["faulty"],
        after["faulty"],
        if h.options.crashes { "on" } else { "off" },
        if small.options.crashes { "on" } else { "off" },
        small.failure.as_deref().unwrap_or("no failure"),
        out.display()
    );
    Ok(0)
}

/// The options a world sweep runs its seeds with.
fn world_options(kind: WorldKind, args: &WorldArgs) -> Result<WorldOptions, Failure> {
    let bug = planted(args.inject_bug());
    #[cfg(feature = "planted-bugs")]
    {
        // The bugs each world plants: the filesystem's everywhere, the drivers' where they run.
        let applies: &[(InjectedBug, &str)] = match kind {
            WorldKind::Work => &[
                (InjectedBug::LyingDirSync, "lying-dir-sync"),
                (InjectedBug::ResumeAsStart, "resume-as-start"),
                (InjectedBug::FaultAsExit, "fault-as-exit"),
            ],
            WorldKind::Goals => &[
                (InjectedBug::LyingDirSync, "lying-dir-sync"),
                (InjectedBug::ManifestBeforeLease, "manifest-before-lease"),
            ],
            WorldKind::Service => &[(InjectedBug::LyingDirSync, "lying-dir-sync")],
        };
        if bug.is_some_and(|b| !applies.iter().any(|(a, _)| *a == b)) {
            let names: Vec<&str> = applies.iter().map(|(_, n)| *n).collect();
            let verb = if names.len() == 1 { "applies" } else { "apply" };
            let why =
                format!("--inject-bug: only {} {verb} to `sim {}`", names.join(", "), kind.verb());
            return Err(Failure::new(EXIT_USAGE, why));
        }
    }
    Ok(WorldOptions { bug, ..kind.sweep() })
}

/// Writes a trace of each failing seed of `kind` into `dir`; returns `(seed, message,
/// trace)` for each, in seed order.
fn trace_failures(
    kind: WorldKind,
    options: WorldOptions,
    failures: Vec<(u64, String)>,
    dir: &Path,
) -> Result<Vec<(u64, String, PathBuf)>, Failure> {
    let mut traced = Vec::new();
    for (seed, message) in failures {
        let file = dir.join(format!("{}-seed-{seed}.trace.jsonl", kind.verb()));
        let text = worlds::run(kind, seed, options, true).trace().to_jsonl();
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&file, text))
            .map_err(|e| Failure::new(EXIT_FAILED, format!("{}: {e}", file.display())))?;
        traced.push((seed, message, file));
    }
    Ok(traced)
}

/// The harnesses of the simulated day: one of each interesting kind.
fn day_options() -> SimOptions {
    let h = |behaviour, restart| SimHarness { behaviour, restart, enabled: true, tty: false };
    let mut o = seeds::options_for_seed(0, 0);
    o.harnesses = vec![
        h(Behaviour::Healthy, RestartPolicy::Always),
        h(Behaviour::Flaky, RestartPolicy::Always),
        h(Behaviour::Stubborn, RestartPolicy::UnlessStopped),
        h(Behaviour::Crashy, RestartPolicy::Always),
    ];
    o.limits = Default::default();
    o.crash_per_mille = 3;
    o.io_fault_per_mille = 1;
    o.wake_fault_per_mille = 50;
    o.command_mean_secs = 3 * 3600;
    o.wall_jump_per_mille = 1;
    o
}

fn day(seed: u64, json: bool) -> Exit {
    const DAY: Duration = Duration::from_secs(24 * 3600);
    let started = std::time::Instant::now();
    let mut world = HarnessWorld::new(day_options(), SeededEntropy::new(seed), false);
    let result = world.run_until(Instant::ZERO.saturating_add(DAY), 5_000_000);
    let elapsed = started.elapsed();
    let events = world
        .events_journal()
        .and_then(|b| journal::parse("events.jsonl", &b).ok())
        .map_or(0, |r| r.records.len());
    let Some(daemon) = world.daemon() else {
        return fail(EXIT_FAILED, "the simulated host ended the day down");
    };
    let rows: Vec<serde_json::Value> = daemon
        .harnesses()
        .iter()
        .map(|(name, h)| {
            let d = h.durable();
            let program = h.active_spec().spawn.argv.first().cloned().unwrap_or_default();
            serde_json::json!({
                "name": name, "program": program,
                "restart": h.active_spec().restart, "state": h.state().as_str(), "enabled": d.enabled,
                "runs": d.runs, "restarts": d.restarts, "consecutive_failures": d.consecutive_failures,
            })
        })
        .collect();
    let summary = serde_json::json!({
        "seed": seed, "virtual_hours": world.now().0 / 3_600_000_000_000, "steps": world.steps(),
        "host_crashes": world.fs_stats().crashes, "journal_events": events,
        "wall_ms": elapsed.as_millis() as u64, "harnesses": rows,
        "violation": result.as_ref().err(),
    });
    if json {
        outln!("{summary}");
    } else {
        print_day(&summary, &rows);
    }
    if result.is_err() {
        Ok(EXIT_FAILED)
    } else {
        Ok(0)
    }
}

fn print_day(s: &serde_json::Value, rows: &[serde_json::Value]) {
    outln!(
        "simulated {} h of the harness daemon (seed {}): {} steps, {} host crashes, {} journal events, {} ms of real time",
        s["virtual_hours"], s["seed"], s["steps"], s["host_crashes"], s["journal_events"], s["wall_ms"]
    );
    outln!(
        "{:<6} {:<14} {:<15} {:<11} {:>7} {:>6} {:>9}",
        "NAME",
        "PROGRAM",
        "RESTART",
        "STATE",
        "ENABLED",
        "RUNS",
        "RESTARTS"
    );
    for r in rows {
        outln!(
            "{:<6} {:<14} {:<15} {:<11} {:>7} {:>6} {:>9}",
            r["name"].as_str().unwrap_or(""),
            r["program"].as_str().unwrap_or(""),
            r["restart"].as_str().unwrap_or(""),
            r["state"].as_str().unwrap_or(""),
            if r["enabled"].as_bool() == Some(true) { "yes" } else { "no" },
            r["runs"].as_u64().unwrap_or(0),
            r["restarts"].as_u64().unwrap_or(0)
        );
    }
    match s["violation"].as_object() {
        None => outln!("every invariant held after every step"),
        Some(_) => outln!("INVARIANT BROKEN: {}", s["violation"]),
    }
}

/// Runs seeds `from..to` with `run`, handing each summary to `each`; returns the failing
/// seeds with their failures.
fn over_seeds<S: Send>(
    range: (u64, u64),
    run: impl Fn(u64) -> Result<S, String> + Sync,
    mut each: impl FnMut(S),
) -> Vec<(u64, String)> {
    let jobs = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let mut failures = Vec::new();
    // One seed per thread at a time; summaries are taken in seed order, as one thread would.
    for (seed, outcome) in sweep(range, jobs, |seed| Some(run(seed))) {
        match outcome {
            Ok(s) => each(s),
            Err(e) => failures.push((seed, e)),
        }
    }
    failures
}

/// Prints a range of seeds as one JSON document: how many, the failures (each with its
/// trace, when it has one), and `counts`.
fn print_json(seeds: u64, failures: &[Traced], counts: serde_json::Value) {
    let failures: Vec<serde_json::Value> = failures
        .iter()
        .map(|(seed, f, trace)| serde_json::json!({ "seed": seed, "failure": f, "trace": trace }))
        .collect();
    let mut doc = serde_json::json!({ "seeds": seeds, "failures": failures });
    if let (Some(doc), serde_json::Value::Object(counts)) = (doc.as_object_mut(), counts) {
        doc.extend(counts);
    }
    outln!("{doc}");
}

/// A failing seed, what failed, and its trace (none for the landing world, which has none).
type Traced = (u64, String, Option<PathBuf>);

/// Runs the seeds of an action world with `run` and writes a trace of each that fails.
fn world_seeds<S: Send>(
    kind: WorldKind,
    args: &WorldArgs,
    run: fn(u64, WorldOptions, &mut ActionLog) -> Result<S, String>,
    each: impl FnMut(S),
) -> Result<Vec<Traced>, Failure> {
    let options = world_options(kind, args)?;
    let failures =
        over_seeds(args.seeds, |seed| run(seed, options, &mut ActionLog::new(false)), each);
    let traced = trace_failures(kind, options, failures, &args.trace_dir)?;
    Ok(traced.into_iter().map(|(seed, f, file)| (seed, f, Some(file))).collect())
}

/// Runs work-ledger seeds; exit 1 naming the first broken invariant of each failing seed.
fn work_sweep(args: &WorldArgs) -> Exit {
    let ((from, to), json) = (args.seeds, args.json);
    let mut total = harn_sim::work::WorkSimSummary::default();
    let mut failures =
        world_seeds(WorldKind::Work, args, harn_sim::work::run_work, |s| total.add(&s))?;
    // The same seeds land accepted work under crashes.
    let mut lands = harn_sim::work::land::LandSimSummary::default();
    let landing = over_seeds((from, to), harn_sim::work::land::run_land_seed, |s| lands.add(&s));
    failures.extend(landing.into_iter().map(|(seed, f)| (seed, f, None)));
    let l = &lands;
    if json {
        let t = &total;
        print_json(
            to - from,
            &failures,
            serde_json::json!({
                "actions": t.actions,
                "crashes": t.crashes, "attempts": t.attempts, "parked": t.parked,
                "resumed": t.resumed, "proofs": t.proofs, "accepted": t.accepted,
                "damaged": t.damaged, "not_started": t.not_started, "interrupted": t.interrupted,
                "engine_faults": t.engine_faults,
                "cancelled": t.cancelled, "timed_out": t.timed_out,
                "silent_calls": t.silent_calls, "hosts_killed": t.hosts_killed, "reaped": t.reaped,
                "limited": t.limited,
                "landing": { "landed": l.landed, "fast_forwards": l.fast_forwards,
                             "crashes": l.crashes, "found": l.found,
                             "refused_moved": l.refused_moved },
            }),
        );
    } else {
        outln!(
            "{} seeds: {} actions, {} crashes, {} attempts, {} parked, {} resumed, {} proofs, \
             {} accepted, {} histories damaged, {} starts that never ran, {} interrupted, {} \
             ended by their cluster, {} cancelled while running, {} timed out, {} silent calls, {} hosts killed mid-run, {} \
             runs reaped, {} at a resource limit; {} failed",
            to - from,
            total.actions,
            total.crashes,
            total.attempts,
            total.parked,
            total.resumed,
            total.proofs,
            total.accepted,
            total.damaged,
            total.not_started,
            total.interrupted,
            total.engine_faults,
            total.cancelled,
            total.timed_out,
            total.silent_calls,
            total.hosts_killed,
            total.reaped,
            total.limited,
            failures.len()
        );
        outln!(
            "landing: {} lands ({} fast-forwards), {} cut short by a crash before their record \
             and {} found and recorded after one, {} refused because the branch moved after \
             its review",
            l.landed,
            l.fast_forwards,
            l.crashes,
            l.found,
            l.refused_moved
        );
    }
    seeds_exit(&failures, !json)
}

/// Runs goal seeds; exit 1 naming the first broken invariant of each failing seed.
fn goal_sweep(args: &WorldArgs) -> Exit {
    let ((from, to), json) = (args.seeds, args.json);
    let mut total = harn_sim::goal::GoalSimSummary::default();
    let mut succeeded = 0u64;
    let failures = world_seeds(WorldKind::Goals, args, harn_sim::goal::run_goals, |s| {
        total.ticks += s.ticks;
        total.crashes += s.crashes;
        total.dispatches += s.dispatches;
        total.acceptances += s.acceptances;
        total.plans += s.plans;
        total.applied += s.applied;
        total.resumed_reviews += s.resumed_reviews;
        succeeded += u64::from(s.succeeded);
    })?;
    if json {
        print_json(
            to - from,
            &failures,
            serde_json::json!({
                "ticks": total.ticks, "crashes": total.crashes,
                "dispatches": total.dispatches, "acceptances": total.acceptances, "plans": total.plans,
                "applied": total.applied, "resumed_reviews": total.resumed_reviews,
                "succeeded": succeeded,
            }),
        );
    } else {
        outln!(
            "{} seeds: {} ticks, {} crashes, {} dispatches, {} acceptances, {} plans ({} applied, \
             {} reviews resumed), {} goals succeeded; {} failed",
            to - from,
            total.ticks,
            total.crashes,
            total.dispatches,
            total.acceptances,
            total.plans,
            total.applied,
            total.resumed_reviews,
            succeeded,
            failures.len()
        );
    }
    seeds_exit(&failures, !json)
}

/// Runs service seeds; exit 1 naming the first broken invariant of each failing seed.
fn service_sweep(args: &WorldArgs) -> Exit {
    let ((from, to), json) = (args.seeds, args.json);
    let mut total = harn_sim::service::ServiceSimSummary::default();
    let failures =
        world_seeds(WorldKind::Service, args, harn_sim::service::run_service, |s| total.add(&s))?;
    let t = &total;
    if json {
        print_json(
            to - from,
            &failures,
            serde_json::json!({
                "sweeps": t.sweeps, "ticks": t.ticks, "failed_ticks": t.failed_ticks,
                "plan_failures": t.plan_failures, "beats": t.beats, "crashes": t.crashes,
                "stops": t.stops, "forced_stops": t.forced_stops, "killed_runs": t.killed_runs,
                "wall_jumps": t.wall_jumps,
            }),
        );
        return seeds_exit(&failures, false);
    }
    outln!(
        "{} seeds: {} sweeps, {} ticks ({} failed outside the goal, {} stopped by a planner \
         failure), {} heartbeats, {} service crashes, {} stops ({} forced, killing {} runs), {} \
         wall-clock jumps; {} failed",
        to - from,
        total.sweeps,
        total.ticks,
        total.failed_ticks,
        total.plan_failures,
        total.beats,
        total.crashes,
        total.stops,
        total.forced_stops,
        total.killed_runs,
        total.wall_jumps,
        failures.len()
    );
    seeds_exit(&failures, true)
}

/// The exit code of a seed sweep: 1 when any seed failed, whose first ten are named on
/// stderr, with their traces, when `print` (a JSON document already carries them all).
fn seeds_exit(failures: &[Traced], print: bool) -> Exit {
    if print {
        for (_, f, trace) in failures.iter().take(10) {
            errln!("harn: {f}");
            if let Some(trace) = trace {
                errln!("      trace: {} (harn sim replay, harn sim minimize)", trace.display());
            }
        }
        if failures.len() > 10 {
            errln!("harn: … and {} more", failures.len() - 10);
        }
    }
    if failures.is_empty() {
        Ok(0)
    } else {
        Ok(EXIT_FAILED)
    }
}
