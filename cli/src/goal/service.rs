//! `harn supervisor service start|run|status|stop|logs|unit`: the optional per-repository
//! daemon that ticks enrolled goals. The core's wake machine (`wake::ServiceScheduler`)
//! decides when to sweep and, per goal, whether to tick, wait for a change, or back off; this
//! module carries that out: the lease, a heartbeat on its own thread (so it beats during long
//! ticks), the status and wake-hint files, the audit log, stop requests and signals.

use super::runner::{drive, goal_limits};
use super::store;
use crate::cli::{fail, EXIT_FAILED, EXIT_USAGE};
use crate::real_clock::RealClock;
use crate::work::host_args::HostArgs;
use crate::work::store::Store;
use clap::{Args, Subcommand};
use harn_core::env::Clock;
use harn_core::goal::{goal_fingerprint, GoalState, Mode, StopReason};
use harn_core::ids::Id;
use harn_core::service::{
    EngineOptions, Liveness, RuntimeHints, ServiceConfig, ServiceState, ServiceStatus, SweepHost,
    SERVICE_VERSION,
};
use harn_core::wake::{Fingerprint, GoalWake, ServiceEffect, ServiceScheduler};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

const DIR: &str = ".harnery/supervisor-service";

fn path(name: &str) -> String {
    format!("{DIR}/{name}")
}

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
        /// Seconds to wait for it to stop.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
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
    /// A systemd unit for `harn supervisor service run`.
    Unit,
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
}

/// Runs a service verb; returns the exit code.
pub fn run(store: &mut Store, verb: ServiceVerb) -> i32 {
    match verb {
        ServiceVerb::Run(a) => match enroll(store, &a) {
            Ok(config) => daemon(store, &config),
            Err((code, e)) => fail(code, e),
        },
        ServiceVerb::Start(a) => start(store, a),
        ServiceVerb::Status { json } => status_cmd(store, json),
        ServiceVerb::Stop { timeout, json } => stop(store, timeout, json),
        ServiceVerb::Logs { lines, follow } => logs(store, lines, follow),
        ServiceVerb::Unit => {
            print!("{}", unit(store.root()));
            0
        }
    }
}

/// The enrollment to run: a new one from goals and options (refused while a service runs),
/// or the frozen one when no goals are given.
fn enroll(store: &mut Store, a: &EnrollArgs) -> Result<ServiceConfig, (i32, String)> {
    if a.goals.is_empty() {
        return store
            .read_record::<ServiceConfig>(&path("config.json"))
            .map_err(|e| (EXIT_FAILED, e.to_string()))?
            .ok_or((EXIT_USAGE, "no enrollment yet: name the goals to enroll".into()));
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
    let mut bytes = serde_json::to_vec_pretty(&config).expect("configs serialize");
    bytes.push(b'\n');
    harn_core::env::Fs::create_dir_all(&mut store.ledger().fs, DIR)
        .map_err(|e| (EXIT_FAILED, e.to_string()))?;
    store.write_file(&path("config.json"), &bytes).map_err(|e| (EXIT_FAILED, e.to_string()))?;
    Ok(config)
}

/// The host options a goal's ticks run with, from the frozen engine options.
fn host_args(config: &ServiceConfig) -> HostArgs {
    let e = &config.engine;
    HostArgs {
        timeout_secs: e.timeout_secs,
        harness: e.harness.clone(),
        billing: if e.billing == harn_core::workflow::run::Billing::Api {
            "api"
        } else {
            "subscription"
        }
        .into(),
        subscription_only: false,
        policy: None,
        approval_to: e.approval_to.clone(),
        isolation: json!(e.isolation).as_str().unwrap_or("shared").into(),
        cwd: e.cwd.as_ref().map(PathBuf::from),
    }
}

/// What the heartbeat thread and the loop share.
struct Shared {
    status: Mutex<ServiceStatus>,
    stop: Arc<AtomicBool>,
    root: PathBuf,
}

impl Shared {
    fn write(&self) {
        self.update(|_| {});
    }

    /// Changes the status and writes it, under the lock, so two writers can never leave an
    /// older record on disk after a newer one.
    fn update(&self, f: impl FnOnce(&mut ServiceStatus)) {
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut status);
        let _ = write_whole(&self.root.join(path("status.json")), &*status);
    }
}

/// Writes a hint file whole: temporary name, fsync, rename (a lost hint costs nothing).
fn write_whole(target: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
    use std::io::Write;
    let temp = target.with_extension(format!("tmp.{}", std::process::id()));
    let mut f = std::fs::File::create(&temp)?;
    f.write_all(&serde_json::to_vec_pretty(value).expect("records serialize"))?;
    f.sync_all()?;
    std::fs::rename(&temp, target)
}

fn audit(root: &Path, body: serde_json::Value) {
    use std::io::Write;
    let mut line = body;
    line["schema_version"] = json!(SERVICE_VERSION);
    line["ts"] = json!(RealClock::new().wall());
    // One write of the whole line: an append a kill interrupts is never half a line followed
    // by the next one.
    let mut bytes = line.to_string().into_bytes();
    bytes.push(b'\n');
    let file =
        std::fs::OpenOptions::new().create(true).append(true).open(root.join(path("events.jsonl")));
    if let Ok(mut f) = file {
        let _ = f.write_all(&bytes);
    }
}

/// The daemon: lease, heartbeat, sweeps until asked to stop.
fn daemon(store: &mut Store, config: &ServiceConfig) -> i32 {
    match store.hold(&path("lease.lock")) {
        Ok(true) => {}
        Ok(false) => return fail(EXIT_FAILED, "a service already runs for this root"),
        Err(e) => return fail(EXIT_FAILED, e),
    }
    let root = store.root().to_owned();
    let _ = std::fs::remove_file(root.join(path("stop.json")));
    let clock = RealClock::new();
    let started = clock.wall();
    let shared = Arc::new(Shared {
        status: Mutex::new(ServiceStatus {
            schema_version: SERVICE_VERSION,
            pid: std::process::id(),
            state: ServiceState::Starting,
            started_at: started,
            heartbeat_at: started,
            config_created_at: config.created_at,
            sweep_count: 0,
            active_goal_id: None,
            last_sweep_at: None,
            last_error: None,
            stopped_at: None,
        }),
        stop: Arc::new(AtomicBool::new(false)),
        root: root.clone(),
    });
    shared.write();
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, shared.stop.clone()) {
            return fail(EXIT_FAILED, format!("signal handler: {e}"));
        }
    }
    let hints: RuntimeHints = store
        .read_record::<RuntimeHints>(&path("runtime.json"))
        .ok()
        .flatten()
        .unwrap_or_default()
        .for_config(config);
    let mut scheduler = match ServiceScheduler::new(
        config.wake_config(),
        config.goal_ids.clone(),
        hints.goals.clone(),
        clock.now(),
    ) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, format!("service: {e}")),
    };
    let beating = heartbeat(shared.clone(), config.heartbeat_interval_ms);
    shared.update(|s| s.state = ServiceState::Running);
    crate::harness::sdnotify::notify("READY=1");
    audit(
        &root,
        json!({ "event": "service.started", "pid": std::process::id(), "goals": config.goal_ids, "config_created_at": config.created_at }),
    );
    let mut outcomes = hints.last_outcome;
    loop {
        if shared.stop.load(Ordering::SeqCst) || root.join(path("stop.json")).exists() {
            shared.stop.store(true, Ordering::SeqCst);
            shared.update(|s| s.state = ServiceState::Stopping);
            crate::harness::sdnotify::notify("STOPPING=1");
            break;
        }
        scheduler.handle_timeout(clock.now());
        while let Some(effect) = scheduler.poll_effect() {
            if effect != ServiceEffect::Sweep {
                continue; // The heartbeat thread beats on its own schedule.
            }
            let result = sweep(store, config, &mut scheduler, &shared, &mut outcomes);
            let wall = clock.wall();
            scheduler.sweep_finished(clock.now(), result.clone());
            shared.update(|s| {
                s.active_goal_id = None;
                s.sweep_count = scheduler.sweep_count();
                s.last_sweep_at = Some(wall);
                s.last_error = result.clone().err();
            });
            let hints = RuntimeHints {
                config_created_at: config.created_at,
                goals: scheduler.wakes().clone(),
                last_outcome: outcomes.clone(),
                written_at: Some((clock.wall(), clock.now())),
            };
            let _ = write_whole(&root.join(path("runtime.json")), &hints);
            if let Err(e) = result {
                audit(&root, json!({ "event": "service.sweep_error", "error": e }));
            }
        }
        let wait = scheduler
            .poll_timeout()
            .map_or(100, |at| at.0.saturating_sub(clock.now().0) / 1_000_000);
        std::thread::sleep(StdDuration::from_millis(wait.clamp(1, 100)));
    }
    let (flag, thread) = beating;
    flag.store(false, Ordering::SeqCst);
    let _ = thread.join();
    let wall = clock.wall();
    shared.update(|s| {
        s.state = ServiceState::Stopped;
        s.stopped_at = Some(wall);
    });
    audit(
        &root,
        json!({ "event": "service.stopped", "pid": std::process::id(), "sweeps": scheduler.sweep_count() }),
    );
    let _ = std::fs::remove_file(root.join(path("stop.json")));
    0
}

/// Beats `status.json` every `interval_ms` until the returned flag is cleared, whatever the
/// loop is doing (a long tick included).
fn heartbeat(
    shared: Arc<Shared>,
    interval_ms: u64,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let alive = Arc::new(AtomicBool::new(true));
    let flag = alive.clone();
    let thread = std::thread::spawn(move || {
        let clock = RealClock::new();
        while flag.load(Ordering::SeqCst) {
            let now = clock.wall();
            shared.update(|s| s.heartbeat_at = now);
            crate::harness::sdnotify::notify("WATCHDOG=1");
            // Sleeps in short slices, so a stop is not held up by a long interval.
            let until = std::time::Instant::now() + StdDuration::from_millis(interval_ms);
            while flag.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                std::thread::sleep(StdDuration::from_millis(20));
            }
        }
    });
    (alive, thread)
}

/// The daemon's sweep host: goals read from the ledger, ticked through the supervisor loop
/// with the frozen engine options.
struct RealSweep<'a> {
    store: &'a mut Store,
    config: &'a ServiceConfig,
    shared: &'a Shared,
    outcomes: &'a mut std::collections::BTreeMap<Id, String>,
}

impl SweepHost for RealSweep<'_> {
    fn now(&mut self) -> harn_core::time::Instant {
        RealClock::new().now()
    }

    fn read(&mut self, goal: &Id) -> Result<(Fingerprint, bool), String> {
        let g = store::read(self.store, goal).map_err(|e| e.to_string())?;
        let fp = Fingerprint::new(goal_fingerprint(&g.projection, &g.items));
        Ok((fp, g.projection.state == GoalState::Ready))
    }

    fn tick(&mut self, goal: &Id) -> Result<StopReason, String> {
        tick(self.store, self.config, goal, self.outcomes)
    }

    fn ticking(&mut self, goal: Option<&Id>) {
        self.shared.update(|s| s.active_goal_id = goal.cloned());
    }

    fn failed(&mut self, goal: &Id, error: &str, wake: &GoalWake) {
        record_error(self.store.root(), goal, error, wake);
    }
}

/// One sweep (see `harn_core::service::sweep`).
fn sweep(
    store: &mut Store,
    config: &ServiceConfig,
    scheduler: &mut ServiceScheduler,
    shared: &Shared,
    outcomes: &mut std::collections::BTreeMap<Id, String>,
) -> Result<(), String> {
    let mut host = RealSweep { store, config, shared, outcomes };
    harn_core::service::sweep(&mut host, scheduler)
}

/// One tick of a ready goal, under its goal lease (released when the tick ends, so readers
/// and a person's `plan approve` see the goal between ticks).
fn tick(
    store: &mut Store,
    config: &ServiceConfig,
    goal: &Id,
    outcomes: &mut std::collections::BTreeMap<Id, String>,
) -> Result<StopReason, String> {
    let intent = store::intent(store, goal).map_err(|e| e.to_string())?;
    let mut limits = goal_limits(store, &intent, &host_args(config))?;
    limits.policy = config.engine.policy.clone();
    let root = store.root().to_owned();
    let mut quiet = |_: String| {};
    let mut tick_store = Store::new(&root);
    let report =
        drive(&mut tick_store, goal, Mode::Tick, &limits, &mut quiet).map_err(|e| e.to_string())?;
    let reason = json!(report.stop.reason);
    outcomes
        .insert(goal.clone(), format!("{}: {}", reason.as_str().unwrap_or(""), report.stop.detail));
    audit(
        &root,
        json!({
            "event": "goal.tick", "goal_id": goal, "stop_reason": report.stop.reason,
            "reason": report.stop.detail, "cycles": report.cycles,
            "dispatches": report.dispatches, "acceptances": report.acceptances,
        }),
    );
    Ok(report.stop.reason)
}

fn record_error(root: &Path, goal: &Id, error: &str, wake: &GoalWake) {
    audit(
        root,
        json!({
            "event": "goal.error", "goal_id": goal, "error": error,
            "consecutive_errors": wake.consecutive_errors,
        }),
    );
}

/// The service's liveness as a reader sees it.
fn read_liveness(store: &mut Store) -> (Liveness, Option<ServiceConfig>, Option<ServiceStatus>) {
    let view = crate::readers::service(store);
    (view.liveness, view.config, view.status)
}

fn status_cmd(store: &mut Store, as_json: bool) -> i32 {
    let view = crate::readers::service(store);
    let (live, config, status, hints) = (view.liveness, view.config, view.status, view.hints);
    if as_json {
        println!(
            "{}",
            json!({ "liveness": live, "config": config, "status": status, "runtime": hints,
                    "problems": view.problems })
        );
        return 0;
    }
    for p in &view.problems {
        eprintln!("harn: warning: {p}");
    }
    println!("service: {}", json!(live).as_str().unwrap_or(""));
    if let Some(s) = &status {
        let age = store.now().0.saturating_sub(s.heartbeat_at.0);
        println!("  pid        {} (heartbeat {age} ms ago, {} sweeps)", s.pid, s.sweep_count);
        if let Some(g) = &s.active_goal_id {
            println!("  ticking    {g}");
        }
        if let Some(e) = &s.last_error {
            println!("  last error {e}");
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
            println!("  goal       {g:<24} {state:<16} errors {errors}  {last}");
        }
    }
    0
}

fn stop(store: &mut Store, timeout: u64, as_json: bool) -> i32 {
    let (live, _, status) = read_liveness(store);
    if matches!(live, Liveness::Running | Liveness::Stopping) {
        let now = store.now();
        let request = json!({ "requested_at": now, "requested_by_pid": std::process::id() });
        let _ = write_whole(&store.root().join(path("stop.json")), &request);
        if let Some(pid) =
            status.as_ref().and_then(|s| rustix::process::Pid::from_raw(s.pid as i32))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = std::time::Instant::now() + StdDuration::from_secs(timeout);
        while std::time::Instant::now() < deadline && store.held_elsewhere(&path("lease.lock")) {
            std::thread::sleep(StdDuration::from_millis(50));
        }
    }
    let (after, _, _) = read_liveness(store);
    if as_json {
        println!("{}", json!({ "before": live, "after": after }));
    } else {
        println!("service: {}", json!(after).as_str().unwrap_or(""));
    }
    if matches!(after, Liveness::Running | Liveness::Stopping) {
        return fail(
            EXIT_FAILED,
            format!("the service is still finishing its tick after {timeout} s"),
        );
    }
    0
}

fn start(store: &mut Store, a: EnrollArgs) -> i32 {
    let (live, _, _) = read_liveness(store);
    if matches!(live, Liveness::Running | Liveness::Stopping) {
        return fail(EXIT_FAILED, "a service already runs for this root");
    }
    if let Err((code, e)) = enroll(store, &a) {
        return fail(code, e);
    }
    let root = store.root().to_owned();
    let log = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(root.join(path("service.log")))
    {
        Ok(f) => f,
        Err(e) => return fail(EXIT_FAILED, format!("{}: {e}", path("service.log"))),
    };
    let mut cmd = match std::env::current_exe() {
        Ok(exe) => std::process::Command::new(exe),
        Err(e) => return fail(EXIT_FAILED, e.to_string()),
    };
    cmd.args(["supervisor", "service", "run", "--root"]).arg(&root);
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
        Err(e) => return fail(EXIT_FAILED, format!("starting the service: {e}")),
    };
    let deadline = std::time::Instant::now() + StdDuration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let (live, _, status) = read_liveness(store);
        if live == Liveness::Running
            && status.is_some_and(|s| s.pid == child.id() && s.state == ServiceState::Running)
        {
            if a.json {
                println!("{}", json!({ "liveness": live, "pid": child.id() }));
            } else {
                println!("service: running (pid {})", child.id());
            }
            return 0;
        }
        std::thread::sleep(StdDuration::from_millis(50));
    }
    fail(
        EXIT_FAILED,
        format!("the service did not start; see {}", root.join(path("service.log")).display()),
    )
}

fn logs(store: &mut Store, lines: u64, follow: bool) -> i32 {
    use std::io::{Read, Seek, Write};
    let log = store.root().join(path("service.log"));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    for line in &all[all.len().saturating_sub(lines as usize)..] {
        println!("{line}");
    }
    if !follow {
        return 0;
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
            if out.write_all(&fresh).is_err() {
                return 0; // The reader went away.
            }
        }
    }
}

/// A systemd unit running the service in the foreground for this root.
fn unit(root: &Path) -> String {
    let exe =
        std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "harn".into());
    format!(
        "[Unit]\nDescription=harn supervisor service for {root}\n\n[Service]\nType=notify\n\
         ExecStart={exe} supervisor service run --root {root}\nWorkingDirectory={root}\n\
         Restart=on-failure\nWatchdogSec=30\nKillMode=mixed\nTimeoutStopSec=infinity\n\n\
         [Install]\nWantedBy=default.target\n",
        root = root.display()
    )
}
