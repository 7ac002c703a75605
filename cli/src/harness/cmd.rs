//! The `harn harness` verbs: clap definitions and what each does on the client side.

use super::client::{self, is_ok};
use super::daemon::{self, DaemonError, Options};
use super::logview::Format;
use super::paths::Paths;
use super::protocol::Request;
use super::status;
use crate::exit::{fail, Exit, Failure, EXIT_FAILED, EXIT_USAGE};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a client waits for an answer to an ordinary request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The coordination root and configuration every verb takes.
#[derive(Debug, Clone, Args)]
pub struct Where {
    /// The coordination root (the repository); default: found from the current directory as
    /// git finds its repository (the nearest `.harnery/` above, else the git top level).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    /// The harness configuration; default: ROOT/harness.toml.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
}

impl Where {
    fn paths(&self) -> Result<Paths, Failure> {
        let shown =
            || self.root.clone().unwrap_or_else(|| PathBuf::from(".")).display().to_string();
        let root = crate::os::root::discover(self.root.as_deref())
            .map_err(|e| Failure::new(EXIT_USAGE, format!("{}: {e}", shown())))?;
        Paths::new(&root).map_err(|e| Failure::new(EXIT_USAGE, format!("{}: {e}", shown())))
    }

    fn config_file(&self, paths: &Paths) -> PathBuf {
        match &self.config {
            Some(c) if c.is_absolute() => c.clone(),
            Some(c) => std::env::current_dir().map(|d| d.join(c)).unwrap_or_else(|_| c.clone()),
            None => paths.root.join("harness.toml"),
        }
    }
}

/// `harn harness …`
#[derive(Debug, Args)]
pub struct HarnessArgs {
    #[command(flatten)]
    at: Where,
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
enum Verb {
    /// Run the daemon in the foreground (what systemd, launchd or a terminal runs).
    Daemon,
    /// Start the daemon detached and wait until it is ready.
    #[command(
        after_help = "Examples:\n  harn harness up\n  harn harness up --accept-config-change   # after reviewing what a run changed"
    )]
    Up {
        /// Seconds to wait for readiness (a boot first stops what an earlier daemon left,
        /// which can take the longest grace period).
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// Accept harness.toml and the programs it names as they are now, after a run
        /// changed them (which `run show` reports); without it such a change is refused.
        #[arg(long)]
        accept_config_change: bool,
    },
    /// Drain the daemon: close intake, stop every harness gracefully, then exit.
    Down {
        /// Seconds after which harnesses still stopping are killed.
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// Every harness: state, intent, pid, uptime, restarts, last exit, next retry, readiness.
    List {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// One harness, or all: the same as list, narrowed.
    Status {
        /// The harness.
        name: Option<String>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Start harnesses and wait until each runs (and is ready, when it has readiness).
    #[command(
        after_help = "Examples:\n  harn harness start web worker\n  harn harness start web --no-block"
    )]
    Start {
        /// Harness names.
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Stop harnesses (they stay stopped across daemon restarts) and wait until each is.
    #[command(
        after_help = "Examples:\n  harn harness stop web\n  harn harness stop web --timeout 5"
    )]
    Stop {
        /// Harness names.
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Restart harnesses (clears a failure latch) and wait until a new run of each runs.
    #[command(after_help = "Examples:\n  harn harness restart web")]
    Restart {
        /// Harness names.
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Connect this terminal to a terminal harness: its screen drawn, what you type sent, your
    /// window size forwarded, until the detach keys (Ctrl-] by default); detaching, or a
    /// dropped connection, never stops the harness. One client types; others may watch.
    #[command(
        after_help = "Examples:\n  harn harness attach agent                       # Ctrl-] to detach\n  harn harness attach agent --read-only           # watch only\n  harn harness attach agent --detach-keys ctrl-p,ctrl-q"
    )]
    Attach {
        /// The harness (one with tty = true).
        name: String,
        /// Watch only: nothing typed is sent.
        #[arg(long)]
        read_only: bool,
        /// The keys that detach, as docker writes them (ctrl-X or single characters,
        /// comma-separated).
        #[arg(long, default_value = "ctrl-]")]
        detach_keys: String,
    },
    /// Print a terminal harness's current screen as text (its rows as the terminal shows
    /// them).
    #[command(
        after_help = "Examples:\n  harn harness screen agent\n  harn harness screen agent --json"
    )]
    Screen {
        /// The harness (one with tty = true).
        name: String,
        /// Print one JSON document: harness, screen, cols, rows.
        #[arg(long)]
        json: bool,
    },
    /// Type TEXT into a terminal harness, as a keyboard would; recorded in the ledger with
    /// who sent it.
    #[command(
        after_help = "Examples:\n  harn harness send agent 'run the tests' --enter\n  harn harness send agent $'\\x03'     # Ctrl-C"
    )]
    Send {
        /// The harness (one with tty = true).
        name: String,
        /// What to type.
        text: String,
        /// Press Enter after it (a carriage return, as a terminal sends).
        #[arg(long)]
        enter: bool,
    },
    /// Profiles: `profile use NAME` starts its harnesses and stops the others.
    #[command(subcommand)]
    Profile(ProfileVerb),
    /// Re-read harness.toml (or the file --config names, which the daemon then keeps
    /// using); a bad file is refused and the last good one kept.
    Reload {
        /// Apply a file that removes every harness (stopping them all).
        #[arg(long)]
        force: bool,
        /// Accept the configuration and the programs it names as they are now, after a run
        /// changed them; without it such a change is refused.
        #[arg(long)]
        accept_config_change: bool,
    },
    /// Print a harness's log, or every harness's interleaved by time (works when the
    /// harnesses or the daemon are down). Each line shows when it was written, the harness
    /// (when more than one is shown) and its stream: out, err, or harn for the daemon's own
    /// notes.
    #[command(
        after_help = "Examples:\n  harn harness logs                  # every harness, last 50 lines\n  harn harness logs web --follow     # one harness, as it grows\n  harn harness logs --since 10m      # every line of the last ten minutes\n  harn harness logs web --plain      # the text only, as the child wrote it"
    )]
    Logs {
        /// The harness; every harness when left out.
        name: Option<String>,
        /// Lines from the end (default 50; every line from --since when that is given).
        #[arg(long)]
        lines: Option<usize>,
        /// Keep printing what is appended.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Only lines from this time on: a span back from now (90s, 10m, 2h, 1d) or a UTC
        /// time (2026-12-01T21:00:00Z).
        #[arg(long)]
        since: Option<String>,
        /// Print the text only, without time, harness and stream.
        #[arg(long, conflicts_with = "json")]
        plain: bool,
        /// One JSON object per line: ts (unix ms), time, harness, stream, text.
        #[arg(long)]
        json: bool,
        /// Print the bytes as the child wrote them, control sequences included (by default a
        /// terminal's drawing is removed and other control bytes are shown, not sent).
        #[arg(long)]
        raw: bool,
    },
    /// Stream lifecycle events as they happen.
    Events {
        /// Print the raw JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// The recovery ledger: one record per lifecycle decision, with its evidence.
    Ledger {
        /// Only this harness.
        name: Option<String>,
        /// Only records from this time on: a span back from now (90s, 10m, 2h, 1d) or a
        /// UTC time (2026-12-01T21:00:00Z).
        #[arg(long)]
        since: Option<String>,
        /// Only the last N records.
        #[arg(long)]
        last: Option<usize>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Print a systemd unit that runs this daemon as a service, named after the root, or
    /// install it.
    #[command(
        after_help = "Examples:\n  harn harness unit > harn.service\n  harn harness unit --install --user\n  harn harness unit --install --as agent   # a system unit whose daemon runs as agent"
    )]
    Unit(crate::verb::UnitArgs),
}

/// How a control verb waits for the state it asked for.
#[derive(Debug, Clone, Copy, Args)]
struct WaitArgs {
    /// Return once the daemon accepted the request, without waiting (as `systemctl
    /// --no-block`).
    #[arg(long)]
    no_block: bool,
    /// Seconds to wait for the state before giving up (exit 1; the harness goes on).
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

#[derive(Debug, Subcommand)]
enum ProfileVerb {
    /// Make a profile active.
    Use {
        /// The profile.
        name: String,
    },
}

impl HarnessArgs {
    /// True for `harness daemon`, the long-running server.
    pub fn is_daemon(&self) -> bool {
        matches!(self.verb, Verb::Daemon)
    }
}

/// Runs a `harness` verb; returns the exit code.
pub fn run(args: HarnessArgs) -> Exit {
    let paths = args.at.paths()?;
    let config = args.at.config_file(&paths);
    match args.verb {
        Verb::Daemon => foreground(paths, config),
        Verb::Up { timeout, accept_config_change } => {
            if accept_config_change {
                accept(&paths, &config)?;
            }
            up(&paths, &config, Duration::from_secs(timeout))
        }
        Verb::Down { timeout } => down(&paths, timeout),
        Verb::List { json } => show(&paths, &config, None, json),
        Verb::Status { name, json } => show(&paths, &config, name.as_deref(), json),
        Verb::Start { names, wait } => control(&paths, Request::Start { names }, wait),
        Verb::Stop { names, wait } => control(&paths, Request::Stop { names }, wait),
        Verb::Restart { names, wait } => control(&paths, Request::Restart { names }, wait),
        Verb::Profile(ProfileVerb::Use { name }) => simple(&paths, Request::UseProfile { name }),
        Verb::Reload { force, accept_config_change } => {
            if accept_config_change {
                accept(&paths, &config)?;
            }
            // Only a file named on this command line replaces the daemon's own.
            let config = args.at.config.is_some().then(|| config.display().to_string());
            simple(&paths, Request::Reload { config, force })
        }
        Verb::Logs { name, lines, follow, since, plain, json, raw } => {
            let format = match (plain, json) {
                (true, _) => Format::Plain,
                (_, true) => Format::Json,
                _ => Format::Prefixed,
            };
            let args = super::logs_cmd::LogsArgs { name, lines, follow, since, format, raw };
            super::logs_cmd::logs(&paths, &config, args)
        }
        Verb::Screen { name, json } => screen(&paths, name, json),
        Verb::Attach { name, read_only, detach_keys } => {
            super::attach::run(&paths, &name, read_only, &detach_keys)
        }
        Verb::Send { name, text, enter } => {
            let text = if enter { format!("{text}\r") } else { text };
            let by = crate::verb::actor(None);
            simple(&paths, Request::Send { name, text, by })
        }
        Verb::Events { json } => super::logs_cmd::events(&paths, json),
        Verb::Ledger { name, since, last, json } => {
            let now = harn_core::env::Clock::wall(&crate::os::clock::RealClock::new());
            let since = match since.as_deref().map(|s| super::logview::parse_since(s, now)) {
                None => None,
                Some(Ok(t)) => Some(t),
                Some(Err(e)) => return fail(EXIT_USAGE, e),
            };
            super::ledger::show(&paths, name.as_deref(), since, last, json)
        }
        Verb::Unit(crate::verb::UnitArgs { install, user, as_user }) => {
            super::unit::run(&paths, &config, install, user, as_user.as_deref())
        }
    }
}

fn foreground(paths: Paths, config: PathBuf) -> Exit {
    // Started by `up`: why a start failed goes to `up` too, whatever the log could take.
    let report = std::cell::RefCell::new(super::detach::take_report());
    let result = daemon::run(Options { root: paths.root, config }, |_| {
        drop(report.borrow_mut().take());
    });
    if let (Err(e), Some(fd)) = (&result, report.borrow_mut().take()) {
        let _ = rustix::io::write(&fd, e.to_string().as_bytes());
    }
    match result {
        Ok(()) => Ok(0),
        Err(e @ DaemonError::Config(_)) => fail(EXIT_USAGE, e),
        Err(e) => fail(EXIT_FAILED, e),
    }
}

/// `harn harness screen NAME`.
fn screen(paths: &Paths, name: String, json: bool) -> Exit {
    if let Err(e) = harn_core::ids::Id::new(&name) {
        return fail(EXIT_USAGE, format!("{name:?}: {e}"));
    }
    match client::request(paths, &Request::Screen { name }, ANSWER_TIMEOUT) {
        Err(e) => fail(EXIT_FAILED, e),
        Ok(answer) if is_ok(&answer) => {
            if json {
                let mut doc = answer.clone();
                if let Some(map) = doc.as_object_mut() {
                    map.remove("ok");
                }
                outln!("{doc}");
            } else {
                outln!("{}", answer["screen"].as_str().unwrap_or(""));
            }
            Ok(0)
        }
        Ok(answer) => fail(EXIT_FAILED, answer["error"].as_str().unwrap_or("refused")),
    }
}

fn simple(paths: &Paths, request: Request) -> Exit {
    let names: &[String] = match &request {
        Request::Start { names } | Request::Stop { names } | Request::Restart { names } => names,
        Request::UseProfile { name } | Request::Send { name, .. } => std::slice::from_ref(name),
        _ => &[],
    };
    if let Some((name, e)) =
        names.iter().find_map(|n| harn_core::ids::Id::new(n).err().map(|e| (n, e)))
    {
        return fail(EXIT_USAGE, format!("{name:?}: {e}"));
    }
    match client::request(paths, &request, ANSWER_TIMEOUT) {
        Err(e) => fail(EXIT_FAILED, e),
        Ok(answer) if is_ok(&answer) => {
            if let Some(m) = answer["message"].as_str() {
                outln!("{m}");
            }
            Ok(0)
        }
        Ok(answer) => {
            let code = if answer["bad_input"] == true { EXIT_USAGE } else { EXIT_FAILED };
            fail(code, answer["error"].as_str().unwrap_or("refused"))
        }
    }
}

/// A start, stop or restart, then (unless `--no-block`) a wait until each harness reaches
/// the state asked for, printing what it came to.
fn control(paths: &Paths, request: Request, wait: WaitArgs) -> Exit {
    let (names, goal) = match &request {
        Request::Start { names } => (names.clone(), super::waiting::Goal::Running),
        Request::Stop { names } => (names.clone(), super::waiting::Goal::Stopped),
        Request::Restart { names } => (names.clone(), super::waiting::Goal::NewRun),
        _ => unreachable!("only start, stop and restart wait"),
    };
    // What each run was before, so a restart waits for a new one.
    let before = if wait.no_block { None } else { Some(super::waiting::snapshot(paths, &names)) };
    simple(paths, request)?;
    let Some(before) = before else { return Ok(0) };
    let limit = Duration::from_secs(wait.timeout);
    let outcomes = super::waiting::wait(paths, &names, goal, &before, limit);
    let mut code = 0;
    for o in &outcomes {
        outln!("{}", o.line);
        if !o.reached {
            code = EXIT_FAILED;
        }
    }
    Ok(code)
}

fn show(paths: &Paths, config: &Path, name: Option<&str>, json: bool) -> Exit {
    let doc = match client::request(
        paths,
        &Request::Status { name: name.map(Into::into) },
        ANSWER_TIMEOUT,
    ) {
        Ok(answer) if is_ok(&answer) => Ok(answer),
        Ok(answer) => {
            let code = if answer["bad_input"] == true { EXIT_USAGE } else { EXIT_FAILED };
            Err(Failure::new(code, answer["error"].as_str().unwrap_or("refused")))
        }
        Err(client::ClientError::NotRunning(_)) => {
            // What the configuration names shows too, before any daemon ever ran it.
            // A configuration that does not load is bad input, said as `up` says it.
            match super::config::load(config) {
                Ok(c) => status::offline_document(paths, Some(&c), name),
                Err(e) if config.exists() => return fail(EXIT_USAGE, e),
                Err(_) => status::offline_document(paths, None, name),
            }
        }
        Err(e) => Err(Failure::failed(e)),
    };
    match doc {
        Err(f) => Err(f),
        Ok(mut doc) => {
            if let Some(map) = doc.as_object_mut() {
                map.remove("ok");
            }
            if json {
                outln!("{doc}");
            } else {
                print!("{}", status::table(&doc));
            }
            Ok(0)
        }
    }
}

/// Records that the person accepted the configuration as it is, and says what that covered.
fn accept(paths: &Paths, config: &Path) -> Result<(), Failure> {
    let by = crate::verb::actor(None);
    let accepted = crate::os::guarded::accept_config(&paths.root, config, &by)
        .map_err(|e| Failure::new(EXIT_FAILED, e))?;
    for path in accepted {
        outln!("accepted {path} as it is now");
    }
    Ok(())
}

fn up(paths: &Paths, config: &Path, timeout: Duration) -> Exit {
    if let Ok(answer) = client::request(paths, &Request::Ping, Duration::from_secs(2)) {
        let pid = answer["pid"].as_u64().unwrap_or(0);
        // The running daemon records the refusal in its ledger.
        let command: Vec<String> = std::env::args().collect();
        let refused = Request::RefusedStart { pid: std::process::id(), command: command.join(" ") };
        let _ = client::request(paths, &refused, Duration::from_secs(2));
        return fail(
            EXIT_FAILED,
            format!("a harness daemon (pid {pid}) already runs in {}", paths.root.display()),
        );
    }
    match super::config::load(config) {
        Err(e) => return fail(EXIT_USAGE, e),
        Ok(c) => {
            if let Err(e) = super::config::check_cwds(config, &c, &paths.root) {
                return fail(EXIT_USAGE, e);
            }
        }
    }
    if let Err(e) = crate::os::guarded::check_config(&paths.root, config) {
        return fail(EXIT_FAILED, e);
    }
    let (mut child, report) = match super::detach::spawn_daemon(paths, config) {
        Ok(c) => c,
        Err(e) => return fail(EXIT_FAILED, format!("starting the daemon: {e}")),
    };
    let started = Instant::now();
    while started.elapsed() < timeout {
        if let Ok(Some(status)) = child.try_wait() {
            return fail(EXIT_FAILED, exited_early(paths, status, report));
        }
        if let Ok(answer) = client::request(paths, &Request::Ping, Duration::from_secs(2)) {
            if is_ok(&answer) {
                outln!("harness daemon up (pid {}) in {}", answer["pid"], paths.root.display());
                return Ok(0);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    fail(
        EXIT_FAILED,
        format!(
            "the daemon did not become ready within {}s; see {}",
            timeout.as_secs(),
            paths.daemon_log().display()
        ),
    )
}

/// Why the daemon `up` started exited before it was ready: what it said on its report
/// pipe (it reaches `up` when the disk is too full for the log), then its log's last lines.
fn exited_early(
    paths: &Paths,
    status: std::process::ExitStatus,
    report: std::os::fd::OwnedFd,
) -> String {
    let said = super::detach::read_report(report);
    let log = crate::os::logs::tail(&paths.daemon_log(), 20).unwrap_or_default();
    let log = String::from_utf8_lossy(&log);
    let mut message = format!("the daemon exited ({status}) before it was ready");
    if !said.is_empty() {
        message.push_str(&format!(": {said}"));
    }
    match log.trim().is_empty() {
        true if said.is_empty() => {
            message.push_str(&format!("; {} is empty", paths.daemon_log().display()))
        }
        true => {}
        false => message.push_str(&format!("; {}:\n{log}", paths.daemon_log().display())),
    }
    message
}

/// True once no daemon holds the root's lock, waiting up to `limit`.
fn wait_for_free_lock(paths: &Paths, limit: Duration) -> bool {
    let started = Instant::now();
    loop {
        if super::detach::lock_is_free(paths) {
            return true;
        }
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn down(paths: &Paths, timeout: Option<u64>) -> Exit {
    let request = Request::Shutdown { timeout_ms: timeout.map(|s| s * 1000) };
    match client::request(paths, &request, ANSWER_TIMEOUT) {
        Err(client::ClientError::NotRunning(_)) => {
            outln!("no harness daemon is running in {}", paths.root.display());
            return Ok(0);
        }
        // A daemon with nothing left to stop may drain and exit before its answer is
        // written: the connection closes unanswered, and the free lock says it is gone.
        Err(_) if wait_for_free_lock(paths, Duration::from_secs(2)) => {
            outln!("harness daemon stopped");
            return Ok(0);
        }
        Err(e) => return fail(EXIT_FAILED, e),
        Ok(answer) if !is_ok(&answer) => {
            return fail(EXIT_FAILED, answer["error"].as_str().unwrap_or("refused"))
        }
        Ok(_) => {}
    }
    outln!("draining: stopping every harness");
    // The daemon holds its lock until it exits; when the lock is free, it is gone.
    let limit = Duration::from_secs(timeout.unwrap_or(3600) + 30);
    let started = Instant::now();
    while started.elapsed() < limit {
        if super::detach::lock_is_free(paths) {
            outln!("harness daemon stopped");
            return Ok(0);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    fail(EXIT_FAILED, "the daemon did not exit in time")
}
