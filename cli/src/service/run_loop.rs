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
use harn_core::service::driver::{self, ServiceHost, ServiceStep, SweepOutcome};
use harn_core::service::wake::ServiceScheduler;
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
        Ok(false) => {
            let running = super::read_liveness(store).2.map(|s| s.pid);
            super::refused(store, running);
            let pid = running.map(|p| format!(" (pid {p})")).unwrap_or_default();
            return fail(EXIT_FAILED, format!("a service already runs for this root{pid}"));
        }
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
    let mut host = LoopHost {
        store,
        config,
        shared: &shared,
        cache: ReadCache::default(),
        changes: Changes::start(tx),
        clock: RealClock::new(),
        began: clock.now(),
    };
    shared.update(|s| s.state = ServiceState::Running);
    crate::os::sdnotify::notify("READY=1");
    shared.audit.record(json!({
        "event": "service.started", "pid": std::process::id(), "goals": config.goal_ids.len(),
        "config_created_at": config.created_at, "file_change_hints": host.changes.is_some(),
    }));
    // The watcher beats on its own schedule and begins the drain; the core's driver carries
    // out the scheduler's effects through this host until the drain has stopped it.
    loop {
        match driver::wake(&mut scheduler, &mut host) {
            Ok(ServiceStep::Stopped) | Ok(ServiceStep::Lost) => break,
            Ok(ServiceStep::Wait(next)) => host.wait(next, &mut scheduler, &wakes),
            Err(never) => match never {},
        }
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

/// The loop's host of the core's service driver: the store, the read cache and the
/// file-change watches between sweeps.
struct LoopHost<'a> {
    store: &'a mut Store,
    config: &'a ServiceConfig,
    shared: &'a Shared,
    cache: ReadCache,
    changes: Option<Changes>,
    clock: RealClock,
    /// When the running (or last) sweep began.
    began: harn_core::time::Instant,
}

impl ServiceHost for LoopHost<'_> {
    type Error = std::convert::Infallible;

    fn now(&mut self) -> harn_core::time::Instant {
        self.clock.now()
    }

    fn draining(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    fn sweep(
        &mut self,
        scheduler: &mut ServiceScheduler,
    ) -> Result<Option<SweepOutcome>, Self::Error> {
        self.began = self.clock.now();
        Ok(Some(sweep(self.store, self.config, scheduler, self.shared, &mut self.cache)))
    }

    /// The sweep's records: the status, a sweep-level error, and watches for the directories
    /// the sweep read.
    fn swept(
        &mut self,
        scheduler: &ServiceScheduler,
        outcome: &SweepOutcome,
    ) -> Result<(), Self::Error> {
        let took = self.clock.now().saturating_since(self.began).as_millis();
        let wall = self.clock.wall();
        self.shared.update(|s| {
            s.active_goal_id = None;
            s.sweep_count = scheduler.sweep_count();
            s.last_sweep_at = Some(wall);
            s.last_sweep_ms = Some(took);
            s.last_error = outcome.as_ref().err().map(ToString::to_string);
        });
        if let Err(e) = outcome {
            let error = e.to_string();
            self.shared.audit.record(json!({ "event": "service.sweep_error", "error": error }));
        }
        if let Some(c) = self.changes.as_mut() {
            c.watch(&self.shared.root, self.cache.directories());
        }
        Ok(())
    }

    fn write_hints(&mut self, scheduler: &ServiceScheduler) -> bool {
        write_hints(self.config, scheduler, self.shared)
    }
}

impl LoopHost<'_> {
    /// Sleeps until `next` (the next sweep), a stop, or a file change (which the scheduler
    /// may take to bring the next sweep forward).
    fn wait(
        &self,
        next: Option<harn_core::time::Instant>,
        scheduler: &mut ServiceScheduler,
        wakes: &mpsc::Receiver<Wake>,
    ) {
        let wait_ms = next.map_or(1_000, |at| at.0.saturating_sub(self.clock.now().0) / 1_000_000);
        match wakes.recv_timeout(Duration::from_millis(wait_ms.max(1))) {
            Ok(Wake::Changed(seen_at)) => scheduler.file_changed(self.clock.now(), seen_at),
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
            let (now, boot) = (RealClock::new().wall(), crate::os::clock::boot_mark());
            shared.update(|s| (s.heartbeat_at, s.heartbeat_boot) = (now, boot));
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
