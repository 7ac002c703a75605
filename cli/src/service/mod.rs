//! `harn supervisor service start|run|status|stop|logs|unit`: the optional per-repository
//! daemon that ticks enrolled goals. The core's wake machine (`wake::ServiceScheduler`)
//! decides when to sweep and, per goal, whether to tick, wait for a change, or back off; this
//! module carries that out: the lease, a heartbeat on its own thread (so it beats during long
//! ticks), the status and wake-hint files, the audit log, stop requests and signals.

mod changes;
mod files;
mod run_loop;
mod shared;
mod stop;
pub mod sweep;
pub mod view;

use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use crate::goal::store;
use crate::os::store::Store;
use crate::work::host_args::HostArgs;
use clap::{Args, Subcommand};
use files::{path, DIR};
use harn_core::ids::Id;
use harn_core::service::{
    EngineOptions, Liveness, ServiceConfig, ServiceState, ServiceStatus, SERVICE_VERSION,
};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

/// `harn supervisor service …`
#[derive(Debug, Subcommand)]
pub enum ServiceVerb {
    /// Start the daemon in the background (goals enroll anew; none reuses the enrollment).
    Start(EnrollArgs),
    /// Run the daemon in the foreground, for a process manager.
    Run(EnrollArgs),
    /// Whether the service runs, its goals and their wake state.
    Status {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Ask the daemon to stop after its current tick, and wait for it.
    Stop {
        /// Bound the drain: after this many seconds the tick's children are terminated (TERM,
        /// a grace period, KILL). Without it the tick finishes however long it takes.
        #[arg(long)]
        timeout: Option<u64>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// The daemon's log.
    Logs {
        /// Lines from the end (1 to 10000).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        lines: u64,
        /// Keep printing what is appended, until interrupted.
        #[arg(long)]
        follow: bool,
    },
    /// A systemd unit for `harn supervisor service run`, named after the root; printed, or
    /// written where systemd looks with `--install`.
    #[command(
        after_help = "Examples:\n  harn supervisor service unit                    # print it\n  harn supervisor service unit --install --user   # write it for the user's systemd"
    )]
    Unit(crate::verb::UnitArgs),
}

impl ServiceVerb {
    /// Whether this verb only reads.
    pub fn reads(&self) -> bool {
        matches!(self, ServiceVerb::Status { .. } | ServiceVerb::Logs { .. })
    }
}

/// Enrollment: goals and intervals, and how their work runs.
#[derive(Debug, Args)]
pub struct EnrollArgs {
    /// Goals to enroll, ticked in this order; none reuses the frozen enrollment.
    goals: Vec<String>,
    /// Pause between sweeps, in ms.
    #[arg(long, default_value_t = 5_000)]
    wake_interval_ms: u64,
    /// Heartbeat period, in ms.
    #[arg(long, default_value_t = 2_000)]
    heartbeat_interval_ms: u64,
    /// Backoff after a goal's first failed tick, in ms.
    #[arg(long, default_value_t = 2_000)]
    error_backoff_base_ms: u64,
    /// Cap of every backoff, in ms.
    #[arg(long, default_value_t = 300_000)]
    error_backoff_max_ms: u64,
    #[command(flatten)]
    host: HostArgs,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
    /// The file the daemon's output goes to, rotated at its cap (set by `start`).
    #[arg(long, hide = true)]
    log_file: Option<PathBuf>,
    /// A new enrollment `start` checked, to be frozen once this daemon holds the lease.
    #[arg(long, hide = true, conflicts_with = "goals")]
    enroll_from: Option<PathBuf>,
    /// The size at which the log and the audit ledger rotate, in bytes.
    #[arg(long, default_value_t = files::ROTATION.max_file_bytes,
          value_parser = clap::value_parser!(u64).range(1_024..))]
    log_max_bytes: u64,
    /// The options typed on the command line (clap ids), filled in after parsing.
    #[arg(skip)]
    typed: Vec<String>,
}

/// Options of `service start|run` that shape the daemon's process, not its enrollment: a
/// start that reuses the frozen enrollment takes them.
const RUNTIME_OPTIONS: [&str; 6] =
    ["goals", "json", "log_file", "enroll_from", "log_max_bytes", "root"];

/// Records which options of `verb` were typed (see `cli::run_args`).
pub fn note_typed(verb: &mut ServiceVerb, typed: Vec<String>) {
    if let ServiceVerb::Start(a) | ServiceVerb::Run(a) = verb {
        a.typed = typed;
    }
}

/// Runs a service verb at `root` (found as for every verb when not given).
pub fn run_at(root: Option<PathBuf>, verb: ServiceVerb) -> Exit {
    let explicit = root.is_some();
    let mut store = crate::os::store::open_root(root)?;
    if verb.reads() {
        crate::os::root::require_ledger(store.root(), explicit)
            .map_err(|e| crate::exit::Failure::new(EXIT_FAILED, e))?;
    }
    run(&mut store, verb)
}

/// Runs a service verb; returns the exit code.
pub fn run(store: &mut Store, verb: ServiceVerb) -> Exit {
    match verb {
        ServiceVerb::Run(a) => match enroll(store, &a) {
            Ok(enrollment) => {
                let rotation =
                    files::Rotation { max_file_bytes: a.log_max_bytes, ..files::ROTATION };
                run_loop::serve(store, enrollment, a.log_file.clone(), rotation)
            }
            Err((code, e)) => fail(code, e),
        },
        ServiceVerb::Start(a) => start(store, a),
        ServiceVerb::Status { json } => status_cmd(store, json),
        ServiceVerb::Stop { timeout, json } => stop::stop(store, timeout, json),
        ServiceVerb::Logs { lines, follow } => logs(store, lines, follow),
        ServiceVerb::Unit(crate::verb::UnitArgs { install, user, as_user }) => {
            let shown = store.root().display().to_string();
            if shown.contains(['\n', '\r']) {
                let why = "a root with a line break cannot go in a unit";
                return Err(crate::exit::Failure::new(crate::exit::EXIT_USAGE, why));
            }
            let interval = crate::service::view::service(store)
                .config
                .map_or(2_000, |c| c.heartbeat_interval_ms);
            let run_as = crate::os::identity::unit_lines(as_user.as_deref(), user)
                .map_err(|why| crate::exit::Failure::new(crate::exit::EXIT_USAGE, why))?;
            let text = unit(store.root(), interval, &run_as);
            let name = harn_core::harness::unit::service_unit_name(&shown);
            if !install {
                print!(
                    "# Save as {name}, or run `harn supervisor service unit --install --user`.\n{text}"
                );
                return Ok(0);
            }
            crate::os::unit::write_unit(
                &name,
                &text,
                user,
                "`harn supervisor service status` its goals",
            )
        }
    }
}

/// What a daemon runs: the frozen enrollment, or a new one it freezes (writes
/// `config.json`) only once it holds the lease, so a daemon that loses the race for the root
/// never replaces the enrollment of the one that won.
pub struct Enrollment {
    /// The enrollment.
    pub config: ServiceConfig,
    /// Whether it is new, to be frozen by the lease holder.
    pub fresh: bool,
}

/// The enrollment to run: a new one from goals and options (refused while a service runs),
/// one `start` checked and handed over, or the frozen one when no goals are given. Nothing is
/// written here.
fn enroll(store: &mut Store, a: &EnrollArgs) -> Result<Enrollment, (i32, String)> {
    if let Some(pending) = &a.enroll_from {
        let shown = pending.display();
        // Only the service's own directory hands over an enrollment, read without following
        // a symlink.
        let dir = store.root().join(DIR);
        if pending.parent() != Some(dir.as_path()) {
            return Err((EXIT_USAGE, format!("{shown}: not in {}", dir.display())));
        }
        let bytes = crate::os::private::read_below(store.root(), pending)
            .map_err(|e| (EXIT_FAILED, e.to_string()))?
            .ok_or_else(|| (EXIT_FAILED, format!("{shown}: missing")))?;
        let _ = crate::os::private::remove_below(store.root(), pending);
        let config: ServiceConfig =
            serde_json::from_slice(&bytes).map_err(|e| (EXIT_USAGE, format!("{shown}: {e}")))?;
        config.validate().map_err(|e| (EXIT_USAGE, format!("{shown}: {e}")))?;
        return Ok(Enrollment { config, fresh: true });
    }
    if a.goals.is_empty() {
        let frozen: Vec<String> = a
            .typed
            .iter()
            .filter(|id| !RUNTIME_OPTIONS.contains(&id.as_str()))
            .map(|id| format!("--{}", id.replace('_', "-")))
            .collect();
        if !frozen.is_empty() {
            return Err((
                EXIT_USAGE,
                format!(
                    "{} would change the frozen enrollment, which a start without goal ids \
                     reuses unchanged; name the goals to enroll anew with them",
                    frozen.join(", ")
                ),
            ));
        }
        let config = store
            .read_record::<ServiceConfig>(&path("config.json"))
            .map_err(|e| (EXIT_FAILED, e.to_string()))?
            .ok_or((EXIT_USAGE, "no enrollment yet: name the goals to enroll".into()))?;
        // The frozen enrollment grants authority (billing, a policy): reused only if no one
        // else could have written it, and only if its policy is the one its digest names.
        let file = store.root().join(path("config.json"));
        crate::os::private::check_ours(store.root(), &file).map_err(|e| {
            (EXIT_FAILED, format!("{e}; enroll anew by naming the goals, after checking it"))
        })?;
        config.validate().map_err(|e| {
            (EXIT_FAILED, format!("{}: {e}; enroll anew by naming the goals", file.display()))
        })?;
        return Ok(Enrollment { config, fresh: false });
    }
    if store.held_elsewhere(&path("lease.lock")) {
        return Err((
            EXIT_FAILED,
            "a service runs for this root; stop it before enrolling anew".into(),
        ));
    }
    let mut goal_ids = Vec::new();
    for g in &a.goals {
        let id = Id::new(g).map_err(|e| (EXIT_USAGE, format!("{g:?}: {e}")))?;
        store::intent(store, &id).map_err(|e| (EXIT_USAGE, e.to_string()))?;
        goal_ids.push(id);
    }
    // The host options are checked (and frozen) exactly as a tick would take them.
    let limits = a.host.freeze(store, Default::default(), 1, 1).map_err(|e| (EXIT_USAGE, e))?;
    let engine = EngineOptions {
        harness: a.host.harness.clone(),
        cwd: limits.cwd.clone(),
        billing: limits.billing,
        isolation: limits.isolation,
        approval_to: limits.approval_to.clone(),
        policy: limits.policy.clone(),
        timeout_secs: a.host.timeout_secs,
        no_containment: a.host.no_containment,
        workspace_root: limits.workspace_root.as_ref().map(|p| p.display().to_string()),
        base: limits.base.clone(),
        cluster: limits.cluster.clone(),
        network: Some(limits.network.clone()),
    };
    let config = ServiceConfig {
        schema_version: SERVICE_VERSION,
        goal_ids,
        wake_interval_ms: a.wake_interval_ms,
        heartbeat_interval_ms: a.heartbeat_interval_ms,
        error_backoff_base_ms: a.error_backoff_base_ms,
        error_backoff_max_ms: a.error_backoff_max_ms,
        engine,
        created_at: store.now(),
    };
    config.validate().map_err(|e| (EXIT_USAGE, format!("service: {e}")))?;
    Ok(Enrollment { config, fresh: true })
}

/// Freezes a new enrollment as `config.json`; only the lease holder calls it.
pub fn freeze(store: &mut Store, config: &ServiceConfig) -> Result<(), String> {
    let mut bytes = serde_json::to_vec_pretty(config).expect("configs serialize");
    bytes.push(b'\n');
    harn_core::env::Fs::create_dir_all(&mut store.ledger().fs, DIR).map_err(|e| e.to_string())?;
    store.write_file(&path("config.json"), &bytes).map_err(|e| e.to_string())
}

/// The host options a goal's ticks run with, from the frozen engine options.
pub(crate) fn host_args(config: &ServiceConfig) -> HostArgs {
    let e = &config.engine;
    HostArgs {
        timeout_secs: e.timeout_secs,
        harness: e.harness.clone(),
        billing: if e.billing == harn_core::work::run::Billing::Api {
            "api"
        } else {
            "subscription"
        }
        .into(),
        subscription_only: false,
        allow_api_billing: false,
        policy: None,
        approval_to: e.approval_to.clone(),
        isolation: json!(e.isolation).as_str().unwrap_or("shared").into(),
        cwd: e.cwd.as_ref().map(PathBuf::from),
        no_containment: e.no_containment,
        workspace_root: e.workspace_root.as_ref().map(PathBuf::from),
        base: e.base.clone(),
        // The cluster is taken frozen from the enrollment, never from today's configuration.
        cluster: None,
        // The root's configured limits: the service's enrollment freezes none of its own.
        limits: Vec::new(),
        // Frozen at enrollment; an older enrollment takes the root's configuration.
        network: e.network.as_ref().map(|n| n.to_flag()),
    }
}

/// The service's liveness as a reader sees it.
fn read_liveness(store: &mut Store) -> (Liveness, Option<ServiceConfig>, Option<ServiceStatus>) {
    let view = crate::service::view::service(store);
    (view.liveness, view.config, view.status)
}

fn status_cmd(store: &mut Store, as_json: bool) -> Exit {
    let view = crate::service::view::service(store);
    let (live, config, status, hints) = (view.liveness, view.config, view.status, view.hints);
    if as_json {
        outln!(
            "{}",
            json!({ "liveness": live, "config": config, "status": status, "runtime": hints,
                    "problems": view.problems })
        );
        return Ok(0);
    }
    for p in &view.problems {
        errln!("harn: warning: {p}");
    }
    outln!("service: {}", json!(live).as_str().unwrap_or(""));
    // What to type next where the service cannot go on by itself.
    match live {
        Liveness::Stale => outln!(
            "  next       harn supervisor service start   # it died without stopping: starts \
             it again with its frozen enrollment"
        ),
        Liveness::Stopped if config.is_some() => {
            outln!("  next       harn supervisor service start")
        }
        _ => {}
    }
    if let Some(s) = &status {
        let age = s.heartbeat_age(store.now(), crate::os::clock::boot_mark().as_ref());
        let took = s.last_sweep_ms.map_or(String::new(), |ms| format!(", the last took {ms} ms"));
        outln!("  pid        {} (heartbeat {age} ms ago, {} sweeps{took})", s.pid, s.sweep_count);
        if let Some(g) = &s.active_goal_id {
            outln!("  ticking    {g}");
        }
        if let Some(e) = &s.last_error {
            outln!("  last error {e}");
        }
    }
    if let Some(c) = &config {
        for g in &c.goal_ids {
            let wake = hints.as_ref().and_then(|h| h.goals.get(g));
            let state =
                wake.map_or("idle".into(), |w| json!(w.state).as_str().unwrap_or("").to_owned());
            let errors = wake.map_or(0, |w| w.consecutive_errors);
            let last =
                hints.as_ref().and_then(|h| h.last_outcome.get(g)).cloned().unwrap_or_default();
            // A goal in backoff says when it is tried again, on the wall clock.
            let next = wake
                .and_then(|w| w.next_wake_at)
                .and_then(|at| hints.as_ref().and_then(|h| h.wall_of(at)))
                .map(|t| format!(" (next try {})", t.utc()))
                .unwrap_or_default();
            outln!("  goal       {g:<24} {state:<16} errors {errors}{next}  {last}");
        }
    }
    Ok(0)
}

/// Records a refused second start in the service's ledger and log; a record that cannot be
/// written is said, and the refusal stands either way.
pub(crate) fn refused(store: &Store, running: Option<u32>) {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    if let Err(e) = files::refused_start(store.root(), running, &command) {
        errln!("harn: warning: the refused start is not recorded: {e}");
    }
}

fn start(store: &mut Store, a: EnrollArgs) -> Exit {
    let (live, _, status) = read_liveness(store);
    if matches!(live, Liveness::Running | Liveness::Stopping) {
        let running = status.as_ref().map(|s| s.pid);
        refused(store, running);
        let pid = status.map_or_else(String::new, |s| format!(" (pid {})", s.pid));
        return fail(
            EXIT_FAILED,
            format!(
                "a service already runs for this root{pid}: `harn supervisor service status` \
                 shows it, `harn supervisor service stop` stops it"
            ),
        );
    }
    let enrollment = match enroll(store, &a) {
        Ok(enrollment) => enrollment,
        Err((code, e)) => return fail(code, e),
    };
    // A new enrollment goes to the daemon in a file of its own; the daemon freezes it once it
    // holds the lease.
    let pending_name = format!("enroll-{}.json", std::process::id());
    let pending = store.root().join(path(&pending_name));
    if enrollment.fresh {
        if let Err(e) = files::write_whole(store.root(), &pending_name, &enrollment.config) {
            return fail(EXIT_FAILED, format!("{}: {e}", pending.display()));
        }
    }
    let root = store.root().to_owned();
    let log = match crate::os::private::append_below(&root, &root.join(path("service.log"))) {
        Ok(f) => f,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let mut cmd = match std::env::current_exe() {
        Ok(exe) => std::process::Command::new(exe),
        Err(e) => return fail(EXIT_FAILED, e.to_string()),
    };
    cmd.args(["supervisor", "service", "run", "--root"]).arg(&root);
    if enrollment.fresh {
        cmd.arg("--enroll-from").arg(&pending);
    }
    cmd.arg("--log-file").arg(root.join(path("service.log")));
    cmd.arg("--log-max-bytes").arg(a.log_max_bytes.to_string());
    cmd.stdin(std::process::Stdio::null())
        .stdout(log.try_clone().expect("a log handle"))
        .stderr(log);
    cmd.env_remove("NOTIFY_SOCKET");
    // SAFETY: runs in the forked child before exec; setsid(2) is async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| rustix::process::setsid().map(drop).map_err(std::io::Error::from));
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = crate::os::private::remove_below(&root, &pending);
            return fail(EXIT_FAILED, format!("starting the service: {e}"));
        }
    };
    let deadline = std::time::Instant::now() + StdDuration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let (live, _, status) = read_liveness(store);
        if live == Liveness::Running
            && status.is_some_and(|s| s.pid == child.id() && s.state == ServiceState::Running)
        {
            if a.json {
                outln!("{}", json!({ "liveness": live, "pid": child.id() }));
            } else {
                outln!("service: running (pid {})", child.id());
            }
            return Ok(0);
        }
        std::thread::sleep(StdDuration::from_millis(50));
    }
    fail(
        EXIT_FAILED,
        format!("the service did not start; see {}", root.join(path("service.log")).display()),
    )
}

fn logs(store: &mut Store, lines: u64, follow: bool) -> Exit {
    use std::io::{Read, Seek, Write};
    let log = store.root().join(path("service.log"));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    for line in &all[all.len().saturating_sub(lines as usize)..] {
        outln!("{line}");
    }
    if !follow {
        return Ok(0);
    }
    // Polls for appended bytes; a log that shrinks (replaced) is read again from its start.
    let mut at = text.len() as u64;
    let mut out = std::io::stdout();
    loop {
        let _ = out.flush();
        std::thread::sleep(StdDuration::from_millis(200));
        let Ok(mut f) = std::fs::File::open(&log) else { continue };
        let len = f.metadata().map_or(0, |m| m.len());
        if len < at {
            at = 0;
        }
        if len == at || f.seek(std::io::SeekFrom::Start(at)).is_err() {
            continue;
        }
        let mut fresh = Vec::new();
        if f.read_to_end(&mut fresh).is_ok() {
            at += fresh.len() as u64;
            if out.write_all(&harn_core::text::neutralize_bytes(&fresh)).is_err() {
                return Ok(0); // The reader went away.
            }
        }
    }
}

/// A systemd unit running the service in the foreground for this root: started means ready
/// (`READY=1` once the lease is held and the records loaded), the watchdog fed by the
/// heartbeat, restarted after a crash, and a stop that waits for the tick in progress.
fn unit(root: &Path, heartbeat_interval_ms: u64, run_as: &str) -> String {
    let exe =
        std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "harn".into());
    // Three missed beats, and never under 30 s: a wedged daemon is restarted, a slow disk is not.
    let watchdog_secs = (heartbeat_interval_ms * 3).div_ceil(1_000).max(30);
    // Every path escaped for the line it is on, as the harness daemon's unit does: no
    // specifier or variable expansion, quotes where it has spaces.
    use harn_core::harness::unit::{exec_word, path_value};
    let shown = root.display().to_string();
    let exec = [exe.as_str(), "supervisor", "service", "run", "--root", &shown]
        .iter()
        .map(|w| exec_word(w))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "[Unit]\nDescription=harn supervisor service for {described}\n\n[Service]\nType=notify\n\
         NotifyAccess=main\n{run_as}ExecStart={exec}\n\
         WorkingDirectory={workdir}\nRestart=on-failure\nRestartSec=2\nWatchdogSec={watchdog_secs}\n\
         KillMode=mixed\nTimeoutStopSec=infinity\nLimitNOFILE=524288\n\n[Install]\nWantedBy=default.target\n",
        described = path_value(&shown),
        workdir = path_value(&shown),
    )
}
