//! The service's loop: the lease, the sweep loop the core's scheduler drives, and a watcher
//! thread that beats the heartbeat on its own schedule (also during a long tick), notices a
//! stop request, and past a requested drain deadline terminates the tick's children.

use super::changes::{Changes, Wake};
use super::files::{path, write_whole, Audit};
use super::shared::Shared;
use super::sweep::{sweep, ReadCache};
use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use crate::os::clock::RealClock;
use crate::os::store::Store;
use harn_core::env::Clock;
use harn_core::service::wake::{ServiceEffect, ServicePhase, ServiceScheduler};
use harn_core::service::watch::{WatchEffect, Watcher};
use harn_core::service::{RuntimeHints, ServiceConfig, ServiceState};
use harn_core::time::Duration as CoreDuration;
use rustix::pipe::PipeFlags;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// How long a forced stop waits between TERM and KILL.
pub const FORCED_STOP_GRACE: Duration = Duration::from_secs(5);

/// `stop.json`: a durable request to stop, and how long the active tick may drain.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StopRequest {
    /// When it was asked for.
    pub requested_at: harn_core::time::WallTime,
    /// Who asked.
    pub requested_by_pid: u32,
    /// How long the active tick may run on before its children are terminated; none waits
    /// for it to finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_timeout_ms: Option<u64>,
}

/// Runs the daemon for `enrollment` (frozen first if new, once the lease is held) until asked
/// to stop; `log` is its output file when `start` made one. The log and the audit ledger rotate as `rotation` says. Returns the exit code.
pub fn serve(
    store: &mut Store,
    enrollment: super::Enrollment,
    log: Option<PathBuf>,
    rotation: super::files::Rotation,
) -> Exit {
    match store.hold(&path("lease.lock")) {
        Ok(true) => {}
        Ok(false) => return fail(EXIT_FAILED, "a service already runs for this root"),
        Err(e) => return fail(EXIT_FAILED, e),
    }
    let config = &enrollment.config;
    if enrollment.fresh {
        if let Err(e) = super::freeze(store, config) {
            return fail(EXIT_FAILED, format!("{}: {e}", path("config.json")));
        }
    }
    let root = store.root().to_owned();
    let _ = crate::os::private::remove_below(&root, &root.join(path("stop.json")));
    // Temporary files a killed daemon or client left here (`.status.json.tmp.PID`, and
    // `status.tmp.PID` as earlier versions named them).
    if let Ok(dir) = crate::os::private::Dir::open(&root, super::DIR, false) {
        dir.sweep_residue();
    }
    let audit = match Audit::open(&root, log, rotation) {
        Ok(audit) => audit,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let shared = Arc::new(Shared::new(&root, config, audit));
    shared.update(|_| {});
    let (wake_rd, poke) = match wake_on_signals(&shared) {
        Ok(pipe) => pipe,
        Err(e) => return fail(EXIT_FAILED, format!("signal handling: {e}")),
    };
    let hints: RuntimeHints = store
        .read_record::<RuntimeHints>(&path("runtime.json"))
        .ok()
        .flatten()
        .unwrap_or_default()
        .for_config(config);
    let clock = RealClock::new();
    let mut scheduler = match ServiceScheduler::new(
        config.wake_config(),
        config.goal_ids.clone(),
        hints.goals.clone(),
        clock.now(),
    ) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, format!("service: {e}")),
    };
    scheduler.restore_outcomes(hints.last_outcome);
    let (tx, wakes) = mpsc::channel::<Wake>();
    let (alive, watching) =
        watcher(shared.clone(), config.heartbeat_interval_ms, wake_rd, tx.clone());
    let mut sweeper = Sweeper::new(Changes::start(tx));
    shared.update(|s| s.state = ServiceState::Running);
    crate::os::sdnotify::notify("READY=1");
    shared.audit.record(json!({
        "event": "service.started", "pid": std::process::id(), "goals": config.goal_ids.len(),
        "config_created_at": config.created_at, "file_change_hints": sweeper.changes.is_some(),
    }));
    // The watcher beats on its own schedule and begins the drain; this loop carries out the
    // scheduler's effects until the drain has stopped it.
    loop {
        scheduler.wake(clock.now(), shared.stop.load(Ordering::SeqCst));
        while let Some(effect) = scheduler.poll_effect() {
            match effect {
                ServiceEffect::Sweep => sweeper.sweep(store, config, &mut scheduler, &shared),
                ServiceEffect::WriteHints => {
                    if !write_hints(config, &scheduler, &shared) {
                        scheduler.hints_lost();
                    }
                }
            }
        }
        if scheduler.phase() == ServicePhase::Stopped {
            break;
        }
        sweeper.wait(&mut scheduler, &wakes);
    }
    alive.store(false, Ordering::SeqCst);
    let _ = rustix::io::write(&*poke, b"x");
    let _ = watching.join();
    if let Some(forcing) = shared.forcing.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = forcing.join();
    }
    let wall = clock.wall();
    shared.update(|s| {
        s.state = ServiceState::Stopped;
        s.stopped_at = Some(wall);
    });
    shared.audit.record(json!({
        "event": "service.stopped", "pid": std::process::id(), "sweeps": scheduler.sweep_count(),
    }));
    let _ = crate::os::private::remove_below(&root, &root.join(path("stop.json")));
    Ok(0)
}

/// Makes SIGTERM and SIGINT set the stop flag and write to a pipe the watcher sleeps on, so a
/// stop is seen at once without anyone polling for it. Returns the pipe's read end and a write
/// end the loop uses to wake the watcher when it ends.
fn wake_on_signals(shared: &Shared) -> std::io::Result<(OwnedFd, Arc<OwnedFd>)> {
    let (wake_rd, wake_wr) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    let poke = Arc::new(wake_wr);
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, shared.stop.clone())?;
        signal_hook::low_level::pipe::register(sig, poke.try_clone()?)?;
    }
    Ok((wake_rd, poke))
}

/// Writes the wake hints (`runtime.json`) the scheduler holds now; false if the write failed.
fn write_hints(config: &ServiceConfig, scheduler: &ServiceScheduler, shared: &Shared) -> bool {
    let clock = RealClock::new();
    let hints = RuntimeHints {
        config_created_at: config.created_at,
        goals: scheduler.wakes(),
        last_outcome: scheduler.outcomes().clone(),
        written_at: Some((clock.wall(), clock.now())),
    };
    write_whole(&shared.root, "runtime.json", &hints).is_ok()
}

/// The loop's state between sweeps: the read cache and the file-change watches.
struct Sweeper {
    cache: ReadCache,
    changes: Option<Changes>,
}

impl Sweeper {
    fn new(changes: Option<Changes>) -> Sweeper {
        Sweeper { cache: ReadCache::default(), changes }
    }

    /// One sweep, then its records: the status, a sweep-level error, and watches for the
    /// directories the sweep read. A stop asked for during the sweep is handed to the
    /// scheduler before the sweep's end, so the scheduler stops instead of waiting again.
    fn sweep(
        &mut self,
        store: &mut Store,
        config: &ServiceConfig,
        scheduler: &mut ServiceScheduler,
        shared: &Shared,
    ) {
        let clock = RealClock::new();
        let began = clock.now();
        let result = sweep(store, config, scheduler, shared, &mut self.cache);
        let ended = clock.now();
        scheduler.sweep_ended(ended, shared.stop.load(Ordering::SeqCst), result.clone());
        let wall = clock.wall();
        shared.update(|s| {
            s.active_goal_id = None;
            s.sweep_count = scheduler.sweep_count();
            s.last_sweep_at = Some(wall);
            s.last_sweep_ms = Some(ended.saturating_since(began).as_millis());
            s.last_error = result.clone().err();
        });
        if let Err(e) = result {
            shared.audit.record(json!({ "event": "service.sweep_error", "error": e }));
        }
        if let Some(c) = self.changes.as_mut() {
            c.watch(&shared.root, self.cache.directories());
        }
    }

    /// Sleeps until the next sweep is due, a stop, or a file change (which the scheduler may
    /// take to bring the next sweep forward).
    fn wait(&self, scheduler: &mut ServiceScheduler, wakes: &mpsc::Receiver<Wake>) {
        let clock = RealClock::new();
        let wait_ms = scheduler
            .next_sweep_at()
            .map_or(1_000, |at| at.0.saturating_sub(clock.now().0) / 1_000_000);
        match wakes.recv_timeout(Duration::from_millis(wait_ms.max(1))) {
            Ok(Wake::Changed(seen_at)) => scheduler.file_changed(clock.now(), seen_at),
            Ok(Wake::Stop) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(wait_ms.clamp(1, 100)));
            }
        }
    }
}

/// The watcher thread: drives the core's `watch::Watcher` with the real clock. It beats
/// `status.json` (and the systemd watchdog), turns a signal or a `stop.json` into a drain, and
/// past a requested drain deadline terminates the tick's children, whatever the loop is doing.
/// It sleeps on `wake_rd`, which signals (and the loop, to end it) write to.
fn watcher(
    shared: Arc<Shared>,
    interval_ms: u64,
    wake_rd: OwnedFd,
    tx: mpsc::Sender<Wake>,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let alive = Arc::new(AtomicBool::new(true));
    let flag = alive.clone();
    let thread = std::thread::spawn(move || {
        let clock = RealClock::new();
        let mut w = Watcher::new(CoreDuration::from_millis(interval_ms), clock.now());
        while flag.load(Ordering::SeqCst) {
            let now = clock.now();
            // Looked at on every wake, also while draining: a bounded stop may follow an
            // unbounded one and bring the deadline forward (the watcher decides which wins).
            if let Some(request) = stop_asked(&shared) {
                w.stop_requested(now, request.drain_timeout_ms.map(CoreDuration::from_millis));
            }
            w.set_ticking(shared.active_goal().is_some());
            w.handle_timeout(now);
            let timeout_ms = w.drain_timeout().map(|d| d.as_millis());
            while let Some(effect) = w.poll_effect() {
                carry_out(effect, &shared, &tx, timeout_ms);
            }
            let wait = w.poll_timeout().0.saturating_sub(clock.now().0);
            sleep_on(&wake_rd, Duration::from_nanos(wait));
        }
    });
    (alive, thread)
}

/// The stop asked for, if any: `stop.json` (with its drain deadline), or a signal.
fn stop_asked(shared: &Shared) -> Option<StopRequest> {
    match std::fs::read(shared.root.join(path("stop.json"))) {
        Ok(bytes) => Some(serde_json::from_slice(&bytes).unwrap_or_default()),
        Err(_) if shared.stop.load(Ordering::SeqCst) => Some(StopRequest::default()),
        Err(_) => None,
    }
}

/// Carries out one effect of the watcher.
fn carry_out(
    effect: WatchEffect,
    shared: &Arc<Shared>,
    tx: &mpsc::Sender<Wake>,
    timeout_ms: Option<u64>,
) {
    match effect {
        WatchEffect::Beat => {
            let now = RealClock::new().wall();
            shared.update(|s| s.heartbeat_at = now);
            crate::os::sdnotify::notify("WATCHDOG=1");
        }
        WatchEffect::BeginDrain => {
            shared.stop.store(true, Ordering::SeqCst);
            shared.update(|s| s.state = ServiceState::Stopping);
            crate::os::sdnotify::notify("STOPPING=1");
            shared.audit.record(json!({
                "event": "service.stopping", "active_goal_id": shared.active_goal(),
                "drain_timeout_ms": timeout_ms,
            }));
            let _ = tx.send(Wake::Stop);
        }
        WatchEffect::ForceStop => {
            // On a thread of its own, so the heartbeat keeps beating through the grace period.
            let (forcing, goal) = (shared.clone(), shared.active_goal());
            let shared = forcing.clone();
            let thread = std::thread::spawn(move || {
                let by = "a bounded stop of the supervisor service (service stop --timeout)";
                let evidence = crate::os::children::terminate_all_for(by, FORCED_STOP_GRACE);
                shared.audit.record(json!({
                    "event": "service.forced_stop", "goal_id": goal, "drain_timeout_ms": timeout_ms,
                    "grace_ms": FORCED_STOP_GRACE.as_millis() as u64, "evidence": evidence,
                }));
            });
            *forcing.forcing.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
        }
    }
}

/// Sleeps until `fd` is readable or `timeout` passes, then empties it.
fn sleep_on(fd: &OwnedFd, timeout: Duration) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let timeout =
        Timespec { tv_sec: timeout.as_secs() as i64, tv_nsec: i64::from(timeout.subsec_nanos()) };
    let _ = poll(&mut fds, Some(&timeout));
    let mut buf = [0u8; 64];
    while rustix::io::read(fd, &mut buf).is_ok_and(|n| n > 0) {}
}
