//! `harn harness daemon`: the foreground daemon. One loop owns the core and the driver and
//! takes one message at a time from a channel fed by the signal thread, the control socket's
//! connection threads and the readiness watchers. It sleeps until a message or the core's
//! next deadline; with nothing due it blocks without waking.

use super::config::{self, ConfigError};
use super::contain::HarnessCgroups;
use super::ledger::{Facts, RecoveryLedger};
use super::paths::Paths;
use super::protocol::Msg;
use super::protocol::{err, ok, Request};
use super::readiness::ReadinessWatch;
use super::spawner::RealSpawner;
use super::status;
use crate::os::clock::RealClock;
use crate::os::fs::RealFs;
use crate::os::logs::Rotation;
use crate::os::sdnotify;
use harn_core::env::{Clock, ExitStatus, Fs, Pid};
use harn_core::harness::daemon::{Command, Daemon, DaemonConfig, DaemonInput, ReloadRefused};
use harn_core::harness::driver::{Driver, Env, Executed, Fatal, Wake};
use harn_core::harness::lifecycle::HarnessInput;
use harn_core::ids::Id;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// Options of the foreground daemon.
#[derive(Clone, Debug)]
pub struct Options {
    /// The coordination root.
    pub root: PathBuf,
    /// `harness.toml`.
    pub config: PathBuf,
}

/// Why the daemon could not start or had to stop.
#[derive(Debug)]
pub enum DaemonError {
    /// Another daemon holds the lock.
    AlreadyRunning(String),
    /// The configuration was refused.
    Config(ConfigError),
    /// Anything else, with context.
    Failed(String),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::AlreadyRunning(s) | DaemonError::Failed(s) => f.write_str(s),
            DaemonError::Config(e) => write!(f, "{e}"),
        }
    }
}

/// Subscribers to the event stream; one that falls behind is told what it missed.
struct Subscribers {
    list: Vec<super::subscribers::Subscriber>,
}

impl Subscribers {
    fn publish(&mut self, seq: u64, line: &str) {
        self.list.retain(|s| s.send(seq, line));
    }
}

/// The running daemon's state outside the core.
struct HarnessHost {
    paths: Paths,
    options: Options,
    fs: RealFs,
    spawner: RealSpawner,
    clock: RealClock,
    driver: Driver,
    daemon: Daemon,
    config: DaemonConfig,
    pids: BTreeMap<Pid, (Id, u64)>,
    subscribers: Subscribers,
    readiness: ReadinessWatch,
    watchdog: Option<(Duration, std::time::Instant)>,
    /// When WATCHDOG=1 was last sent, unix ms.
    last_watchdog_ms: Option<i64>,
    ledger: RecoveryLedger,
    next_command_id: u64,
    /// The last id given to an attaching client.
    next_client: u64,
    started_wall_ms: i64,
    /// What this boot found lost (`state.json` gone), said in every status.
    state_lost: Option<String>,
    /// When it started, on the monotonic clock: its uptime is measured from here.
    started: harn_core::time::Instant,
    /// Set when the loop woke since the code it ran was last unmapped
    /// (`os::memory::shed_code`, before a long sleep).
    shed_pending: bool,
    /// Set when a reap stopped at its bound with children possibly still to reap: the loop
    /// serves what waits (the socket, signals) and then reaps on.
    reap_pending: bool,
}

/// Runs the daemon in the foreground until it is shut down. `ready` is told once the lock is
/// held, state is loaded and the control socket listens.
pub fn run(options: Options, ready: impl FnOnce(&Paths)) -> Result<(), DaemonError> {
    let paths = Paths::new(&options.root)
        .map_err(|e| DaemonError::Failed(format!("{}: {e}", options.root.display())))?;
    // Bad input writes nothing: the configuration is read before anything is created.
    let config = config::load(&options.config).map_err(DaemonError::Config)?;
    config::check_cwds(&options.config, &config, &options.root).map_err(DaemonError::Config)?;
    // A configuration a run changed is run by no daemon until a person accepts it.
    crate::os::guarded::check_config(&options.root, &options.config)
        .map_err(DaemonError::Failed)?;
    // Started from inside a harness (an agent's shell), the daemon must not carry that
    // harness's markers, or it would mistake itself for one of its processes. No thread
    // exists yet, so changing the environment is safe here.
    std::env::remove_var(super::contain::HARNESS_ENV);
    std::env::remove_var(super::contain::ROOT_ENV);
    // Three descriptors per harness: at the usual soft limit of 1,024 a few hundred harnesses
    // would exhaust it.
    let nofile = super::fds::raise_limit();
    let mut fs = RealFs::new(paths.root.clone());
    let failed = |e: &dyn std::fmt::Display| DaemonError::Failed(e.to_string());
    fs.create_dir_all(".harnery/harness/logs").map_err(|e| failed(&e))?;
    if !fs.try_lock(Paths::lock_relative()).map_err(|e| failed(&e))? {
        // The owner records the refusal in its ledger; a refusal it cannot hear of is said
        // here only.
        let command: Vec<String> = std::env::args().collect();
        let refused = Request::RefusedStart { pid: std::process::id(), command: command.join(" ") };
        let told = super::client::request(&paths, &refused, std::time::Duration::from_secs(2));
        let mut why = owner_message(&paths);
        if !told.as_ref().is_ok_and(super::client::is_ok) {
            why.push_str(" (the refusal could not be recorded in its ledger)");
        }
        return Err(DaemonError::AlreadyRunning(why));
    }
    let wall = RealClock::new().wall();
    let (mut ledger, ledger_aside) =
        RecoveryLedger::open(&mut fs, &paths, wall).map_err(|e| failed(&e))?;
    if let Ok(dir) = crate::os::private::Dir::open(&paths.root, harn_core::layout::HARNESS, false) {
        dir.sweep_residue();
    }
    // Orphaned grandchildren are re-parented to us and reaped, not to init.
    let subreaper = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let (tx, rx) = mpsc::channel();
    super::signals::forward(tx.clone()).map_err(|e| failed(&e))?;
    let contain = HarnessCgroups::detect(&paths);
    if let Some(why) = contain.hint_refused() {
        log(why);
    }
    reclaim_orphans(&contain, &config, &mut ledger);
    let mut spawner = RealSpawner::new(paths.clone(), Rotation::from(config.retention), contain)
        .map_err(|e| failed(&e))?;
    let readiness =
        ReadinessWatch::new(&paths, &config, &mut spawner, tx.clone()).map_err(|e| failed(&e))?;
    let clock = RealClock::new();
    let mut env = Env { fs: &mut fs, spawner: &mut spawner, clock: &clock };
    let (mut driver, mut daemon) =
        Driver::open(&mut env, Paths::relative(), config.clone()).map_err(|e| failed(&e))?;
    // Damaged history was set aside rather than holding the boot: said in the log and, once
    // the ledger takes records, in the ledger.
    for aside in [ledger_aside, driver.take_set_aside()].into_iter().flatten() {
        log(&format!(
            "damaged history set aside: {} (as {}); a new journal was begun, the damaged one \
             is kept for a person to read (harn harness ledger reads only the new one)",
            aside.damage, aside.moved_to
        ));
        if let Err(e) = ledger.set_aside(env.fs, &clock, &aside) {
            log(&format!("the ledger could not record it: {e}"));
        }
    }
    // A `state.json` gone since an earlier boot took the operator's pinned stops with it:
    // said in the log, the ledger and every status, never silently.
    let state_lost = driver.state_lost().then(|| {
        let why = "state.json was missing at boot though the daemon had run here before: every \
                   harness starts as the configuration says, and stops an operator pinned \
                   (harness stop) and the restart counters were forgotten"
            .to_owned();
        log(&why);
        if let Err(e) = ledger.state_lost(env.fs, &clock, &why) {
            log(&format!("the ledger could not record it: {e}"));
        }
        why
    });
    let executed = driver.drain(&mut env, &mut daemon, clock.now()).map_err(|e| failed(&e))?;
    // Clients are let in only once the daemon has booted; the socket goes with the daemon,
    // whatever way it ends.
    let listener = super::server::listen(&paths, tx.clone()).map_err(|e| failed(&e))?;
    let _socket = RemoveOnDrop(listener.clone());
    let mut host = HarnessHost {
        paths,
        options,
        fs,
        spawner,
        driver,
        daemon,
        config,
        pids: BTreeMap::new(),
        subscribers: Subscribers { list: Vec::new() },
        readiness,
        watchdog: sdnotify::watchdog_interval().map(|d| (d, std::time::Instant::now())),
        last_watchdog_ms: None,
        shed_pending: true,
        reap_pending: false,
        ledger,
        next_command_id: 0,
        next_client: 0,
        started_wall_ms: clock.wall().0,
        state_lost,
        started: clock.now(),
        clock,
    };
    host.write_owner_hint(listener.display().to_string()).map_err(|e| failed(&e))?;
    if let Err(e) = subreaper {
        log(&format!("not a child subreaper ({e}): orphaned grandchildren go to init"));
    }
    log(&format!("daemon {} up in {}", std::process::id(), host.paths.root.display()));
    let show = |n: Option<u64>| n.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
    log(&format!("open files: soft limit {} (was {})", show(nofile.1), show(nofile.0)));
    host.after(executed.clone());
    host.record(&executed).map_err(|e| failed(&e))?;
    sdnotify::notify("READY=1\nSTATUS=supervising");
    ready(&host.paths);
    let result = host.serve(rx);
    if result.is_ok() {
        // Drained: every harness is at rest, so every cgroup of this root is empty.
        host.spawner.containment().remove_empty(&[]);
    }
    let _ = std::fs::remove_file(host.paths.owner());
    sdnotify::notify("STOPPING=1");
    result
}

/// Removes a file when dropped: the control socket, on every way out of the daemon.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Stops every process an earlier daemon of this root left behind (it was killed, or crashed)
/// before anything is spawned, so one harness never has two live instances.
fn reclaim_orphans(contain: &HarnessCgroups, config: &DaemonConfig, ledger: &mut RecoveryLedger) {
    let names: Vec<Id> = config.harnesses.keys().cloned().collect();
    let grace_of = |name: &Id| {
        let grace = config.harnesses.get(name).and_then(|h| h.stop_grace);
        Duration::from_nanos(grace.unwrap_or(config.limits.stop_grace).0)
    };
    let left_by: Vec<Id> = contain.orphans().into_keys().collect();
    if let Some(longest) = left_by.iter().map(grace_of).max() {
        // systemd's start timeout must not run out while an earlier daemon's processes get
        // their grace: ask for that much more, and say why.
        let extend = (longest + Duration::from_secs(10)).as_micros();
        sdnotify::notify(&format!(
            "EXTEND_TIMEOUT_USEC={extend}\nSTATUS=stopping what an earlier daemon left"
        ));
    }
    let reclaimed = contain.reclaim(&grace_of);
    contain.remove_empty(&names);
    for (name, (pids, forced)) in reclaimed {
        let how = if forced { "killed after the grace period" } else { "stopped" };
        log(&format!("{name}: {how} {} processes left by an earlier daemon: {pids:?}", pids.len()));
        ledger.note_reclaimed(&name, &pids, forced);
    }
}

fn owner_message(paths: &Paths) -> String {
    let owner = std::fs::read(paths.owner())
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    match owner.and_then(|o| o["pid"].as_u64()) {
        Some(pid) => {
            format!("another harness daemon (pid {pid}) already owns {}", paths.root.display())
        }
        None => format!(
            "another harness daemon already owns {} (it holds {})",
            paths.root.display(),
            paths.lock().display()
        ),
    }
}

/// Most exited children one turn of the loop reaps before it serves what else waits.
const REAP_BATCH: usize = 16;

/// Most messages one turn takes beyond the first (the rest wait for the next turn).
const TURN_MESSAGES: usize = 4096;

/// The shortest sleep before which the daemon gives freed heap back.
const TRIM_BEFORE: Duration = Duration::from_secs(1);

/// How long the daemon is idle before it unmaps the code its last steps ran.
const SHED_AFTER: Duration = Duration::from_secs(5);

/// One line per decision on the daemon's output. A closed or broken output (a pipe whose
/// reader went away, a restarted journal) loses the line, never the daemon.
fn log(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

impl HarnessHost {
    fn serve(&mut self, rx: Receiver<Msg>) -> Result<(), DaemonError> {
        loop {
            let mut wait = self.wait_for();
            // Before a long sleep (a flap window or a healthy-run clock may keep a deadline
            // minutes away for as long as the harnesses run) the heap a busy step freed goes
            // back to the system; before a short one it is kept for the next step.
            if wait.is_none_or(|d| d >= TRIM_BEFORE) {
                crate::os::memory::release_free_heap();
            }
            // Once the daemon has been idle a while, the code its last steps mapped goes too
            // (the kernel maps a binary's code a large folio at a time; it stays cached). Not
            // before: a harness respawning every second would fault it back in each time.
            let idle = self.shed_pending && wait.is_none_or(|d| d > SHED_AFTER);
            let early = match idle {
                false => None,
                true => match rx.recv_timeout(SHED_AFTER) {
                    Ok(m) => Some(m),
                    Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        crate::os::memory::shed_code();
                        self.shed_pending = false;
                        wait = wait.map(|d| d.saturating_sub(SHED_AFTER));
                        None
                    }
                },
            };
            let msg = match (early, wait) {
                (Some(m), _) => Some(m),
                (None, None) => rx.recv().ok(),
                (None, Some(d)) => match rx.recv_timeout(d) {
                    Ok(m) => Some(m),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                },
            };
            self.shed_pending = true;
            self.tick_watchdog();
            // Everything that waits is taken at once and the control plane served first: a
            // request, a signal or an attach never queues behind a storm of exits, and any
            // number of SIGCHLDs waiting make one bounded reap. Whatever is due runs after
            // every turn too: a chatty client must not starve restart delays, kill deadlines
            // or readiness checks.
            let mut waiting: Vec<Msg> = msg.into_iter().collect();
            waiting.extend(rx.try_iter().take(TURN_MESSAGES));
            let result = self.on_turn(waiting).and_then(|()| self.on_due());
            if let Err(fatal) = result {
                log(&format!("fatal: {fatal}; stopping (children keep running; the next daemon deals with them)"));
                return Err(DaemonError::Failed(fatal.to_string()));
            }
            if self.daemon.drained() {
                log("drained: every harness is stopped; exiting");
                return Ok(());
            }
        }
    }

    /// How long to sleep: until the core's next deadline, the drain deadline, the watchdog,
    /// or a readiness check; `None` blocks until a message.
    fn wait_for(&self) -> Option<Duration> {
        let now = self.clock.now();
        let core =
            self.daemon.poll_timeout().map(|t| Duration::from_nanos(t.saturating_since(now).0));
        let watchdog = self.watchdog.map(|(every, last)| every.saturating_sub(last.elapsed()));
        let readiness =
            self.readiness.poll_timeout().map(|t| Duration::from_nanos(t.saturating_since(now).0));
        let reap = self.reap_pending.then_some(Duration::ZERO);
        [core, watchdog, readiness, reap].into_iter().flatten().min()
    }

    fn tick_watchdog(&mut self) {
        if let Some((every, last)) = self.watchdog.as_mut() {
            if last.elapsed() >= *every {
                sdnotify::notify("WATCHDOG=1");
                *last = std::time::Instant::now();
                self.last_watchdog_ms = Some(self.clock.wall().0);
            }
        }
    }

    /// Acts on every deadline that has passed: the drain deadline, readiness checks, the
    /// core's timers. Harmless when nothing is due.
    fn on_due(&mut self) -> Result<(), Fatal> {
        if self.reap_pending {
            self.reap()?;
        }
        let now = self.clock.now();
        for (name, run, finding) in self.readiness.check(now, &self.daemon) {
            let report = finding.report(run);
            self.step(Wake::Input(DaemonInput::Process { name, report }))?;
        }
        if self.daemon.poll_timeout().is_some_and(|t| t <= now) {
            let forced = self.daemon.drain_forced();
            self.step(Wake::Timeout)?;
            if self.daemon.drain_forced() && !forced {
                log("drain deadline expired: SIGKILL to everything still stopping");
            }
        }
        Ok(())
    }

    /// One turn's messages: the control plane (requests, signals, attaches) first, in the
    /// order they came; then one reap for every SIGCHLD waiting; then what harnesses said on
    /// their notify sockets.
    fn on_turn(&mut self, waiting: Vec<Msg>) -> Result<(), Fatal> {
        let child = |m: &Msg| matches!(m, Msg::Signal(s) if *s == signal_hook::consts::SIGCHLD);
        let notify = |m: &Msg| matches!(m, Msg::Notified(..) | Msg::Pinged(..));
        let (lifecycle, control): (Vec<Msg>, Vec<Msg>) =
            waiting.into_iter().partition(|m| child(m) || notify(m));
        for msg in control {
            self.on_message(msg)?;
        }
        let (exits, said): (Vec<Msg>, Vec<Msg>) = lifecycle.into_iter().partition(child);
        if !exits.is_empty() {
            self.reap()?;
        }
        for msg in said {
            self.on_message(msg)?;
        }
        Ok(())
    }

    fn on_message(&mut self, msg: Msg) -> Result<(), Fatal> {
        match msg {
            Msg::Signal(sig) if sig == signal_hook::consts::SIGCHLD => self.reap(),
            Msg::Signal(sig) if sig == signal_hook::consts::SIGHUP => {
                match self.reload(None, false) {
                    Ok(message) | Err((message, _)) => log(&format!("SIGHUP: {message}")),
                }
                Ok(())
            }
            Msg::Signal(sig) => {
                log(&format!("signal {sig}: shutting down"));
                sdnotify::notify("STOPPING=1\nSTATUS=draining: stopping every harness");
                self.command(Command::Shutdown { drain_timeout: None }).map(drop)
            }
            Msg::Request(request, reply) => {
                let answer = self.request(request)?;
                let _ = reply.send(answer);
                Ok(())
            }
            Msg::Subscribe(tx) => {
                self.subscribers.list.push(tx);
                Ok(())
            }
            Msg::Notified(name, sender) => {
                let run = self.daemon.harnesses().get(&name).and_then(|h| h.current_run());
                let Some(run) = run else { return Ok(()) };
                if !self.sent_by_harness(&name, sender) {
                    log(&format!(
                        "{name}: ignored READY=1 from pid {sender}, which is not this harness's"
                    ));
                    return Ok(());
                }
                let report = HarnessInput::Ready { run };
                self.step(Wake::Input(DaemonInput::Process { name, report }))
            }
            Msg::Pinged(name, sender) => {
                let run = self.daemon.harnesses().get(&name).and_then(|h| h.current_run());
                // Only the harness's own processes keep its watchdog quiet.
                let Some(run) = run.filter(|_| self.sent_by_harness(&name, sender)) else {
                    return Ok(());
                };
                let report = HarnessInput::Watchdog { run };
                self.step(Wake::Input(DaemonInput::Process { name, report }))
            }
            Msg::Attach { name, read_only, answer } => {
                let _ = answer.send(self.attach(&name, read_only)?);
                Ok(())
            }
            Msg::Detach(client) => self.step(Wake::Input(DaemonInput::Detach { client })),
        }
    }

    /// Reaps exited children, at most [`REAP_BATCH`] a turn; reports the ones that are
    /// harness runs. A bounded turn keeps the socket and signals served however many children
    /// exit at once; the rest are reaped on the next turn (`reap_pending`).
    fn reap(&mut self) -> Result<(), Fatal> {
        use rustix::process::{wait, WaitOptions};
        self.reap_pending = false;
        let mut reaped = 0;
        // The runs that ended, fed to the core together: one drain, one fsync of each journal.
        let mut ended: Vec<DaemonInput> = Vec::new();
        // `wait` is waitpid(-1): any child. (`waitpid(None)` would be pid 0, only children in
        // our own process group, and every harness runs in a group of its own.)
        loop {
            if reaped == REAP_BATCH {
                self.reap_pending = true;
                break;
            }
            let Ok(Some((pid, status))) = wait(WaitOptions::NOHANG) else { break };
            reaped += 1;
            let pid = pid.as_raw_nonzero().get() as Pid;
            let status = match (status.exit_status(), status.terminating_signal()) {
                (Some(code), _) => ExitStatus::Code(code),
                (None, Some(sig)) => ExitStatus::Signal(sig),
                (None, None) => continue, // Stopped or continued, not ended.
            };
            let now = self.clock.now();
            let passed = status == ExitStatus::Code(0);
            if let Some(found) = self.readiness.schedule.probe_exited(now, pid, passed) {
                if let Some((name, run, finding)) = found {
                    let report = finding.report(run);
                    self.step(Wake::Input(DaemonInput::Process { name, report }))?;
                }
                continue;
            }
            let Some((name, run)) = self.pids.remove(&pid) else {
                continue; // An orphaned grandchild we inherited as subreaper.
            };
            let (left, reached) = self.spawner.run_ended(pid);
            let how = match status {
                ExitStatus::Code(c) => format!("exited with code {c}"),
                ExitStatus::Signal(n) => format!("killed by signal {n}"),
            };
            log(&format!("{name}: run {run} (pid {pid}) {how}"));
            if left > 0 {
                log(&format!("{name}: killed {left} leftover processes of run {run} (its cgroup)"));
            }
            for r in &reached {
                log(&format!("{name}: run {run} {r}"));
            }
            self.ledger.note_limits(&name, &reached);
            let report = HarnessInput::Exited { run, status };
            ended.push(DaemonInput::Process { name, report });
        }
        if !ended.is_empty() {
            self.step_all(ended)?;
        }
        Ok(())
    }

    fn request(&mut self, request: Request) -> Result<serde_json::Value, Fatal> {
        let names = |names: Vec<String>| -> Result<Vec<Id>, serde_json::Value> {
            names.iter().map(|n| Id::new(n).map_err(|e| err(format!("{n:?}: {e}")))).collect()
        };
        // Every name in one command: one durable write and one acknowledgement for all.
        let per_name = |host: &mut HarnessHost, list: Vec<String>, make: fn(Vec<Id>) -> Command| {
            let ids = match names(list) {
                Ok(ids) => ids,
                Err(e) => return Ok(e),
            };
            // A name the daemon does not have is bad input (exit 2): the core's rule, asked
            // before the command so the answer can say which kind of refusal it is.
            let unknown = host.daemon.unknown_names(&ids);
            if !unknown.is_empty() {
                let message = harn_core::harness::daemon::no_such_harness(&unknown);
                return Ok(super::protocol::bad_input(message));
            }
            Ok(match host.command(make(ids))? {
                Ok(()) => ok(serde_json::json!({})),
                Err(e) => err(e),
            })
        };
        match request {
            Request::Ping => Ok(ok(serde_json::json!({ "pid": std::process::id() }))),
            Request::Status { name } => Ok(self.status(name.as_deref())),
            Request::Start { names } => per_name(self, names, |names| Command::Start { names }),
            Request::Stop { names } => per_name(self, names, |names| Command::Stop { names }),
            Request::Restart { names } => per_name(self, names, |names| Command::Restart { names }),
            Request::UseProfile { name } => match Id::new(&name) {
                Err(e) => Ok(super::protocol::bad_input(format!("{name:?}: {e}"))),
                Ok(profile) if !self.daemon.config().profiles.contains_key(&profile) => {
                    Ok(super::protocol::bad_input(format!("no profile named \"{profile}\"")))
                }
                Ok(profile) => Ok(match self.command(Command::UseProfile { profile })? {
                    Ok(()) => ok(serde_json::json!({})),
                    Err(e) => err(e),
                }),
            },
            Request::Reload { config, force } => {
                Ok(match self.reload(config.map(PathBuf::from), force) {
                    Ok(message) => ok(serde_json::json!({ "message": message })),
                    Err((message, true)) => super::protocol::bad_input(message),
                    Err((message, false)) => err(message),
                })
            }
            Request::Shutdown { timeout_ms } => {
                log("shutdown requested: intake closed, stopping every harness");
                let drain_timeout = timeout_ms.map(harn_core::time::Duration::from_millis);
                // The service manager hears of the stop when it begins, not when it ends.
                sdnotify::notify("STOPPING=1\nSTATUS=draining: stopping every harness");
                Ok(match self.command(Command::Shutdown { drain_timeout })? {
                    Ok(()) => ok(serde_json::json!({})),
                    Err(e) => err(e),
                })
            }
            Request::Subscribe => Ok(err("subscribe is handled by the connection")),
            Request::Screen { name } => Ok(match self.terminal_of(&name) {
                Err(why) => err(why),
                Ok(terminal) => {
                    let (text, size) = terminal.contents();
                    ok(serde_json::json!({ "harness": name, "screen": text,
                                           "cols": size.cols, "rows": size.rows }))
                }
            }),
            Request::Send { name, text, by } => Ok(match self.terminal_of(&name) {
                Err(why) => err(why),
                Ok(terminal) => match terminal.send(text.as_bytes()) {
                    Err(e) => err(format!("{name}: the terminal: {e}")),
                    Ok(()) => {
                        let (fs, clock) = (&mut self.fs, &self.clock);
                        let id = Id::new(&name).expect("a harness's name");
                        match self.ledger.sent(fs, clock, &id, text.len(), &by) {
                            Ok(()) => ok(serde_json::json!({ "sent_bytes": text.len() })),
                            Err(e) => err(format!("sent, but the ledger: {e}")),
                        }
                    }
                },
            }),
            Request::Attach { .. } => Ok(err("attach is handled by the connection")),
            Request::RefusedStart { pid, command } => {
                log(&format!("a second daemon (pid {pid}) was refused: this one owns the root"));
                let (fs, clock) = (&mut self.fs, &self.clock);
                Ok(match self.ledger.refused_start(fs, clock, pid, &command) {
                    Ok(()) => ok(serde_json::json!({})),
                    Err(e) => err(format!("the ledger: {e}")),
                })
            }
        }
    }

    /// The terminal of harness `name`'s live run, or why there is none.
    /// Asks the core whether a client may attach to `name` (and type), then hands it the
    /// run's terminal.
    fn attach(
        &mut self,
        name: &str,
        read_only: bool,
    ) -> Result<Result<super::protocol::Attached, String>, Fatal> {
        let id = match Id::new(name) {
            Ok(id) => id,
            Err(e) => return Ok(Err(format!("{name:?}: {e}"))),
        };
        self.next_client += 1;
        let client = self.next_client;
        let done = self.step_collect(Wake::Input(DaemonInput::Attach {
            client,
            name: id.clone(),
            read_only,
        }))?;
        let answer = done.into_iter().find_map(|e| match e {
            Executed::Attached { client: c, writes, error, .. } if c == client => {
                Some((writes, error))
            }
            _ => None,
        });
        Ok(match answer {
            Some((writes, None)) => match self.spawner.terminal(&id) {
                Some(t) => Ok(super::protocol::Attached { client, terminal: t.clone(), writes }),
                None => Err(format!("{name} has no terminal open")),
            },
            Some((_, Some(why))) => Err(why),
            None => Err("the daemon did not answer the attach".into()),
        })
    }

    fn terminal_of(&self, name: &str) -> Result<super::terminal::Terminal, String> {
        let id = Id::new(name).map_err(|e| format!("{name:?}: {e}"))?;
        let Some(spec) = self.config.harnesses.get(&id) else {
            return Err(format!("no harness named {name:?}"));
        };
        if spec.spawn.tty.is_none() {
            return Err(format!("{name} is not a terminal harness (tty = true in harness.toml)"));
        }
        let live = self.daemon.harnesses().get(&id).and_then(|h| h.pid()).is_some();
        match self.spawner.terminal(&id) {
            Some(t) if live => Ok(t.clone()),
            _ => Err(format!("{name} has no live run: start it with `harn harness start {name}`")),
        }
    }

    fn status(&self, name: Option<&str>) -> serde_json::Value {
        let doc = status::document(
            self.status_context(),
            &self.daemon,
            &self.config,
            &self.readiness,
            name,
        );
        match doc {
            Ok(doc) => ok(doc),
            Err(f) if f.code == crate::exit::EXIT_USAGE => super::protocol::bad_input(f.message),
            Err(f) => err(f.message),
        }
    }

    fn status_context(&self) -> status::Context<'_> {
        status::Context {
            paths: &self.paths,
            now: self.clock.now(),
            wall_ms: self.clock.wall().0,
            pid: std::process::id(),
            started_wall_ms: self.started_wall_ms,
            started: self.started,
            state_lost: self.state_lost.as_deref(),
            containment: self.spawner.containment().kind(),
            unwritten: self.ledger.unwritten(),
        }
    }

    /// Re-reads the configuration (or `file`, which then becomes the daemon's configuration
    /// file); on error keeps the last good one. `Err` carries the message and whether the
    /// input was bad (a bad file, a reload that would remove every harness without `force`)
    /// rather than the moment.
    fn reload(&mut self, file: Option<PathBuf>, force: bool) -> Result<String, (String, bool)> {
        let kept = |e: &dyn std::fmt::Display| format!("kept the last good configuration: {e}");
        let path = file.unwrap_or_else(|| self.options.config.clone());
        let config = config::load(&path).map_err(|e| (kept(&e), true))?;
        config::check_cwds(&path, &config, &self.paths.root).map_err(|e| (kept(&e), true))?;
        crate::os::guarded::check_config(&self.paths.root, &path).map_err(|e| (kept(&e), true))?;
        // The core's rules are asked before readiness watches change, so a refused reload
        // changes nothing at all.
        if let Err(refused) = self.daemon.check_reload(&config, force) {
            let why = match refused {
                ReloadRefused::RemovesEvery => format!("{}: {refused}", path.display()),
                _ => refused.to_string(),
            };
            return Err((kept(&why), refused.bad_input()));
        }
        self.readiness
            .configure(&self.paths, &config, &mut self.spawner)
            .map_err(|e| (kept(&e), false))?;
        match self.command(Command::Reload { config: config.clone(), force }) {
            Ok(Ok(())) => {
                self.spawner.set_rotation(Rotation::from(config.retention));
                self.config = config;
                self.options.config = path;
                Ok(format!("reloaded {}", self.options.config.display()))
            }
            Ok(Err(e)) => Err((kept(&e), false)),
            Err(fatal) => Err((format!("fatal while reloading: {fatal}"), false)),
        }
    }

    /// Runs one operator command through the core; the outer error is fatal, the inner one
    /// is the core's refusal.
    fn command(&mut self, command: Command) -> Result<Result<(), String>, Fatal> {
        self.next_command_id += 1;
        let id = self.next_command_id;
        let wake = Wake::Input(DaemonInput::Command { id, command });
        let done = self.step_collect(wake)?;
        let answer = done.iter().find_map(|e| match e {
            Executed::Acked { id: acked, error } if *acked == id => Some(error.clone()),
            _ => None,
        });
        Ok(match answer.flatten() {
            None => Ok(()),
            Some(e) => Err(e),
        })
    }

    fn step(&mut self, wake: Wake) -> Result<(), Fatal> {
        self.step_collect(wake).map(drop)
    }

    /// [`HarnessHost::step`] for inputs that arrived together (see `Driver::step_all`).
    fn step_all(&mut self, inputs: Vec<DaemonInput>) -> Result<(), Fatal> {
        let now = self.clock.now();
        let mut env = Env { fs: &mut self.fs, spawner: &mut self.spawner, clock: &self.clock };
        let done = self.driver.step_all(&mut env, &mut self.daemon, now, inputs)?;
        self.after(done.clone());
        self.record(&done)
    }

    fn step_collect(&mut self, wake: Wake) -> Result<Vec<Executed>, Fatal> {
        let now = self.clock.now();
        let mut env = Env { fs: &mut self.fs, spawner: &mut self.spawner, clock: &self.clock };
        let done = self.driver.step(&mut env, &mut self.daemon, now, wake)?;
        self.after(done.clone());
        self.record(&done)?;
        Ok(done)
    }

    /// Appends the step's lifecycle decisions to the recovery ledger, durably.
    fn record(&mut self, done: &[Executed]) -> Result<(), Fatal> {
        let readiness = &self.readiness;
        let kind = |name: &Id| readiness.kind(name);
        let now = self.clock.now();
        let drain_deadline_ms = self.daemon.drain_deadline().map(|d| {
            let ahead_ns = d.0 as i64 - now.0 as i64;
            self.clock.wall().0 + ahead_ns / 1_000_000
        });
        let contain = self.spawner.containment();
        let members = |name: &Id| (contain.kind() == "cgroup").then(|| contain.members(name));
        let facts = Facts {
            config: &self.config,
            readiness: &kind,
            cgroup_members: &members,
            last_watchdog_ms: self.last_watchdog_ms,
            drain_deadline_ms,
            drain_expired: self.daemon.drain_forced(),
            now: self.clock.now(),
            wall_ms: self.clock.wall().0,
        };
        let (fs, clock) = (&mut self.fs, &self.clock);
        self.ledger.record(fs, clock, done, &self.daemon, &facts).map_err(Fatal::Fs)?;
        // A full daemon.log is rotated after a step that wrote to it (only a step that did
        // something logs); failing to is said, never fatal.
        if done.is_empty() {
            return Ok(());
        }
        let rotation = Rotation::from(self.config.retention);
        match super::detach::rotate_log_if_full(&self.paths, rotation) {
            Ok(true) => log(&format!("{} was full: rotated", self.paths.daemon_log().display())),
            Ok(false) => {}
            Err(e) => log(&format!("{}: not rotated: {e}", self.paths.daemon_log().display())),
        }
        Ok(())
    }

    /// Bookkeeping after the driver carried out effects: the pid map, the decision log, the
    /// event stream, readiness watches.
    fn after(&mut self, executed: Vec<Executed>) {
        for e in executed {
            match e {
                Executed::Spawned { name, run, pid } => {
                    log(&format!("{name}: started run {run} as pid {pid}"));
                    self.pids.insert(pid, (name.clone(), run));
                    self.readiness.started(self.clock.now(), &name, run);
                }
                Executed::SpawnFailed { name, run, detail } => {
                    log(&format!("{name}: run {run} could not start: {detail}"));
                    self.spawner.note(&name, &format!("run {run} could not start: {detail}"));
                }
                Executed::Signalled { name, pid, signal } => {
                    let said = match signal {
                        harn_core::env::Signal::Hangup => {
                            format!("{name}: hung up the terminal of process group {pid}")
                        }
                        harn_core::env::Signal::Term => {
                            format!("{name}: sent SIGTERM to process group {pid}")
                        }
                        harn_core::env::Signal::Kill => {
                            format!("{name}: sent SIGKILL to process group {pid}")
                        }
                    };
                    log(&said);
                }
                Executed::Attached { client, name, run: Some(run), writes, .. } => {
                    let role = if writes { "types" } else { "watches" };
                    log(&format!("{name}: client {client} attached to run {run} ({role})"));
                }
                Executed::Attached { run: None, .. } => {}
                Executed::Rotated { path } => log(&format!("{path} was full: rotated to {path}.1")),
                Executed::Appended { first, ts, events, .. } => {
                    for (seq, event) in (first..).zip(events) {
                        log(&super::logs_cmd::describe_event(&event));
                        // As `events.jsonl` has it: the sequence number and time, then the body.
                        let mut line = serde_json::json!({ "seq": seq, "ts": ts.0 });
                        if let (Some(map), serde_json::Value::Object(body)) =
                            (line.as_object_mut(), serde_json::json!(event))
                        {
                            map.extend(body);
                        }
                        self.subscribers.publish(seq, &line.to_string());
                    }
                }
                Executed::Dropped { cause, events } => {
                    log(&format!("{} events not journaled: {cause}", events.len()));
                    for event in &events {
                        log(&super::logs_cmd::describe_event(event));
                    }
                }
                Executed::Persisted { .. } | Executed::Acked { .. } => {}
            }
        }
    }

    /// True when `pid` is the harness's live run or one of its processes: a member of its
    /// cgroup, or in the run's process group.
    fn sent_by_harness(&self, name: &Id, pid: u32) -> bool {
        let Some(main) = self.daemon.harnesses().get(name).and_then(|h| h.pid()) else {
            return false;
        };
        if pid == main || self.spawner.containment().members(name).contains(&pid) {
            return true;
        }
        crate::os::procfs::group_of(pid) == Some(main)
    }

    fn write_owner_hint(&mut self, socket: String) -> Result<(), harn_core::env::FsError> {
        let hint = serde_json::json!({
            "pid": std::process::id(),
            "socket": socket,
            "started_at_ms": self.started_wall_ms,
            "version": env!("CARGO_PKG_VERSION"),
        });
        let mut bytes = serde_json::to_vec(&hint).expect("serializes");
        bytes.push(b'\n');
        harn_core::atomic::replace_kept(&mut self.fs, Paths::owner_relative(), &bytes)
    }
}
