//! What harn asks of Slurm for a remote segment: the step that runs it, the state of its job
//! (judged in core), and its cancel. Every question is bounded.

use harn_core::work::cluster::FrozenCluster;
use harn_core::work::cluster::{judge_job, parse_job, Job, JobVerdict};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one question to the engine may take.
const ASK: Duration = Duration::from_secs(20);

/// The step of one segment of `run`: one task on one node, named for the run so a person
/// finds it in `squeue`, its output relayed unbuffered.
pub fn step(cluster: &FrozenCluster, run: &str) -> Command {
    let spec = &cluster.spec;
    let mut cmd = Command::new("srun");
    cmd.args(["--nodes=1", "--ntasks=1", "--unbuffered", "--quiet"]);
    cmd.arg(format!("--job-name=harn-{run}"));
    if let Some(p) = &spec.partition {
        cmd.arg(format!("--partition={p}"));
    }
    cmd.args(&spec.args);
    cmd.args(["--", &spec.harn, "cluster", "segment"]);
    cmd
}

/// Job `id` as the engine says it once its state is final or `wait` has passed: `None`
/// when the engine does not answer or no longer knows the job.
pub fn settled(id: &str, wait: Duration) -> Option<Job> {
    let until = Instant::now() + wait;
    loop {
        let job = ask(id);
        match &job {
            Some(j) if judge_job(j, false) == JobVerdict::Live && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(250));
            }
            _ => return job,
        }
    }
}

fn ask(id: &str) -> Option<Job> {
    let mut cmd = Command::new("scontrol");
    cmd.args(["show", "job", "-o", id]);
    let out = run_bounded(cmd, ASK).ok()?;
    let line = out.lines().find(|l| l.contains("JobId="))?;
    parse_job(line).ok()
}

/// Cancels job `id` (bounded); a job already gone is no error.
pub fn cancel(id: &str) {
    let mut cmd = Command::new("scancel");
    cmd.arg(id);
    if let Err(e) = run_bounded(cmd, ASK) {
        errln!("harn: warning: scancel {id}: {e}");
    }
}

/// Whether job `id` still runs, as the engine says.
pub fn live(id: &str) -> bool {
    ask(id).is_some_and(|j| judge_job(&j, false) == JobVerdict::Live)
}

/// Runs `cmd` with no input and returns its standard output; a failure, or no exit within
/// `deadline` (Slurm's clients retry an absent controller for a minute), says why.
pub fn run_bounded(mut cmd: Command, deadline: Duration) -> Result<String, String> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("{program}: {e}"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("{program}: {e}"))? {
            break status;
        }
        if started.elapsed() > deadline {
            // TERM first: srun then cancels its step; KILL only if it does not go.
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let grace = Instant::now();
            while grace.elapsed() < Duration::from_secs(5) {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{program} did not answer within {} s", deadline.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    if status.success() {
        Ok(out)
    } else {
        let said = err.trim().lines().last().unwrap_or("").to_owned();
        Err(format!("{program} failed ({status}): {said}"))
    }
}
