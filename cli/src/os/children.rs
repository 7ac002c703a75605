//! The process groups this process started and has not yet seen end (workflows and agent
//! calls), so a forced stop of the supervisor service can terminate exactly the children of
//! its tick: TERM to each group, a grace period, then KILL to the groups still there.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
/// Each running workflow's run id and what to do before its group is signalled (record that
/// the stop reached it), by the workflow's process group.
static RUNS: Mutex<BTreeMap<i32, (String, Option<Hook>)>> = Mutex::new(BTreeMap::new());
static FORCED: AtomicBool = AtomicBool::new(false);
/// Whose stop terminated the children, for the proofs of the runs it interrupted.
static BY: Mutex<Option<String>> = Mutex::new(None);

/// How long a workflow interrupted by an operator's stop has to end before it is killed.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// Records a group this process just started; removed again when the guard drops.
#[must_use = "the group is forgotten when the guard drops"]
pub struct Tracked(i32);

/// Starts tracking process group `pgid`.
pub fn track(pgid: i32) -> Tracked {
    let mut groups = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    // Checked under the same lock a forced stop takes its list under: a group started while
    // the stop began is either on that list or killed here.
    if FORCED.load(Ordering::SeqCst) {
        signal_group(pgid, rustix::process::Signal::KILL);
    }
    groups.insert(pgid);
    Tracked(pgid)
}

impl Drop for Tracked {
    fn drop(&mut self) {
        GROUPS.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.0);
    }
}

/// What a run does when an operator's stop reaches it, given whose stop it is; it returns
/// once the run has recorded it (or could not).
pub type Hook = Box<dyn Fn(&str) + Send>;

/// A running workflow known to the stop; forgotten when dropped.
#[must_use = "the run is forgotten when the guard drops"]
pub struct Registered(i32);

/// Registers the running workflow of `run_id` in group `pgid`: a stop calls `hook` before it
/// signals the group, and a signal sent by one of the run's own processes is not a stop.
pub fn register_run(pgid: i32, run_id: &str, hook: Hook) -> Registered {
    RUNS.lock().unwrap_or_else(|e| e.into_inner()).insert(pgid, (run_id.to_owned(), Some(hook)));
    Registered(pgid)
}

impl Drop for Registered {
    fn drop(&mut self) {
        RUNS.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.0);
    }
}

/// True when `pid` is one of the processes of the runs this process is running: in a group
/// it started, or carrying one of its runs' `HARN_RUN_ID` (which survives `setsid` and a
/// double fork). Their signals are not an operator's.
fn of_our_runs(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let pgid =
        stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse().ok());
    if pgid.is_some_and(|g: i32| GROUPS.lock().unwrap_or_else(|e| e.into_inner()).contains(&g)) {
        return true;
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let runs: Vec<String> = RUNS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .map(|(run, _)| format!("HARN_RUN_ID={run}"))
        .collect();
    environ.split(|&b| b == 0).any(|var| runs.iter().any(|r| r.as_bytes() == var))
}

/// Whether a forced stop began: nothing new may be started from then on.
pub fn forced() -> bool {
    FORCED.load(Ordering::SeqCst)
}

/// Whose stop began, in words.
pub fn stopper() -> String {
    interrupted_by().unwrap_or_else(|| "an operator's stop".to_owned())
}

/// Why nothing new may start once a stop began, in words.
pub fn stopping() -> String {
    format!("{} is stopping this process's runs", stopper())
}

/// Whose stop terminated this process's children, once one did: a run it ended was
/// interrupted, not failed, and is not charged.
pub fn interrupted_by() -> Option<String> {
    BY.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Makes SIGTERM and SIGINT an operator's stop of whatever this process runs: the children
/// get TERM, [`INTERRUPT_GRACE`], then KILL, and each run records that it was interrupted
/// (a foreground `work run`, `supervisor tick` or `run`, stopped by a person or by the
/// harness it runs in). A second signal is not waited for: the process exits at once.
pub fn interrupt_on_signals() -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::iterator::{exfiltrator::WithOrigin, SignalsInfo};
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGTERM, SIGINT])?;
    std::thread::Builder::new().name("interrupt".into()).spawn(move || {
        let mut stopping = false;
        for origin in signals.forever() {
            let name = if origin.signal == SIGINT { "SIGINT" } else { "SIGTERM" };
            // A run may not stop its own host to make its failure an uncharged interruption.
            if let Some(sender) = origin.process.filter(|p| of_our_runs(p.pid)) {
                errln!(
                    "harn: {name} from pid {}, a process of a run in progress: ignored",
                    sender.pid
                );
                continue;
            }
            if stopping {
                std::process::exit(crate::exit::EXIT_FAILED);
            }
            stopping = true;
            errln!("harn: {name}: stopping the runs in progress (their attempts are not charged)");
            std::thread::spawn(move || {
                terminate_all_for(&format!("an operator's stop ({name} to harn)"), INTERRUPT_GRACE)
            });
        }
    })?;
    Ok(())
}

/// [`terminate_all`], naming whose stop it is.
pub fn terminate_all_for(by: &str, grace: Duration) -> Termination {
    BY.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| by.to_owned());
    terminate_all(grace)
}

/// What a forced stop did, for the audit record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Termination {
    /// Groups sent SIGTERM.
    pub terminated: Vec<i32>,
    /// Groups that were gone before the grace period ended.
    pub exited_in_grace: Vec<i32>,
    /// Groups sent SIGKILL after the grace period.
    pub killed: Vec<i32>,
    /// How long the grace period lasted, in ms.
    pub grace_waited_ms: u64,
}

/// Refuses new children, lets every running workflow record that the stop reached it, sends
/// TERM to every tracked group, waits up to `grace` for them to go, and sends KILL to the
/// ones left.
pub fn terminate_all(grace: Duration) -> Termination {
    let groups: Vec<i32> = {
        let groups = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
        FORCED.store(true, Ordering::SeqCst);
        groups.iter().copied().collect()
    };
    // Recorded before any signal: a host killed during the drain leaves runs that read as
    // interrupted, not lost. Each hook is taken, so it runs once, and called with no lock
    // held; the runs stay known, so their own signals are still told apart.
    let by = interrupted_by().unwrap_or_else(|| "an operator's stop".to_owned());
    let hooks: Vec<Hook> = RUNS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values_mut()
        .filter_map(|(_, hook)| hook.take())
        .collect();
    for hook in hooks {
        hook(&by);
    }
    let stopped = stop(&groups, grace, signal_group, group_exists);
    let exited_in_grace =
        stopped.sent.iter().copied().filter(|g| !stopped.left.contains(g)).collect();
    Termination {
        terminated: stopped.sent,
        exited_in_grace,
        killed: stopped.left,
        grace_waited_ms: stopped.waited.as_millis() as u64,
    }
}

/// What [`stop`] did.
pub struct Stopped<T> {
    /// The targets SIGTERM reached.
    pub sent: Vec<T>,
    /// Those still there when the grace ended, sent SIGKILL.
    pub left: Vec<T>,
    /// How long the grace lasted.
    pub waited: Duration,
}

/// The one stop sequence: SIGTERM to each target (a process group, a process), up to `grace`
/// for them to go, SIGKILL to those left. `signal` says whether a signal reached its target;
/// `alive` whether it is still there.
pub fn stop<T: Copy + PartialEq>(
    targets: &[T],
    grace: Duration,
    signal: impl Fn(T, rustix::process::Signal) -> bool,
    alive: impl Fn(T) -> bool,
) -> Stopped<T> {
    let sent: Vec<T> =
        targets.iter().copied().filter(|&t| signal(t, rustix::process::Signal::TERM)).collect();
    let started = Instant::now();
    let mut left = sent.clone();
    while !left.is_empty() && started.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(20));
        left.retain(|&t| alive(t));
    }
    let waited = started.elapsed();
    for &t in &left {
        signal(t, rustix::process::Signal::KILL);
    }
    Stopped { sent, left, waited }
}

fn signal_group(pgid: i32, signal: rustix::process::Signal) -> bool {
    rustix::process::Pid::from_raw(pgid)
        .is_some_and(|pid| rustix::process::kill_process_group(pid, signal).is_ok())
}

/// Whether any process is still in group `pgid` (a zombie not yet reaped counts).
fn group_exists(pgid: i32) -> bool {
    rustix::process::Pid::from_raw(pgid)
        .is_some_and(|pid| rustix::process::test_kill_process_group(pid).is_ok())
}

/// Blocks SIGPIPE on the calling thread, so writing to a pipe whose reader is gone fails with
/// EPIPE there instead of killing the process (harn restores SIGPIPE's default at startup so
/// that `harn … | head` ends quietly). A signal a write raises goes to the writing thread and
/// is discarded with it.
pub fn block_sigpipe() {
    // SAFETY: plain libc calls on a local signal set; they only change this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Marks every descriptor above standard error that this process inherited close-on-exec, so
/// no child (a workflow, an agent, git, a harness) gets a terminal or a file of the caller's
/// it was never meant to have (`exec 7<>/dev/tty 8>>.git/config; harn work run …`). What
/// harn itself hands a child is given on purpose, after this.
pub fn close_inherited() {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only sets a flag on descriptors; it
    // closes none and touches no memory. A kernel without it (before 5.11) refuses, and the
    // confined children still get the same in their `pre_exec`.
    unsafe {
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    }
}
