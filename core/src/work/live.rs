//! Runs in progress (`.harnery/running/RUN.json`): the record a run's host writes before it
//! spawns a segment's workflow and removes once everything that segment started is gone. A
//! record left behind names a run whose host died with processes of the run perhaps still
//! alive; the next runner reaps it, before it starts anything, through [`recover`]: for each
//! record whose item's run lease nobody holds, the host's effect kills what the run left (its
//! cgroup, the processes that carry its `HARN_RUN_ID`), the run's transcript says so, and the
//! record goes.

use super::ledger::{run_dir, Ledger};
use crate::env::Fs;
use crate::error::RecordError;
use crate::ids::Id;
use crate::time::WallTime;
use serde::{Deserialize, Serialize};

/// Where the records of runs in progress live.
pub(crate) const LIVE_DIR: &str = crate::layout::RUNNING;

/// Schema version of a live-run record.
pub const LIVE_VERSION: u32 = 1;

/// One run segment in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveRun {
    /// [`LIVE_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run_id: Id,
    /// Its work item, whose run lease its host holds.
    pub work_id: Id,
    /// The host's pid.
    pub host_pid: u32,
    /// The segment's cgroup (absolute), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// When the segment began.
    pub started_at: WallTime,
    /// True for a planning run, whose host holds the run's own lease rather than an
    /// item's (the goal it plans for is in `work_id`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub planning: bool,
    /// The engine's job a remote segment runs as, once its node said which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<crate::work::cluster::EngineJob>,
}

/// The path of `run`'s record.
pub(crate) fn live_path(run: &Id) -> String {
    format!("{LIVE_DIR}/{run}.json")
}

/// What one recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Runs whose host was gone, with how many of their processes were killed.
    pub reaped: Vec<(Id, usize)>,
    /// Records that could not be read or name another run, each with why.
    pub problems: Vec<String>,
}

impl<F: Fs> Ledger<F> {
    /// Records that `live`'s segment is about to spawn, whole (a temporary file renamed into
    /// place). Not synced: the record matters only while the machine stays up, since a crash
    /// of the machine ends every process it could name; one a crash cut short is dropped by
    /// the next [`Ledger::live_runs`].
    pub fn begin_live(&mut self, live: &LiveRun) -> Result<(), RecordError> {
        self.fs.create_dir_all(LIVE_DIR)?;
        let bytes = super::ledger::record_bytes(live);
        let (path, temp) =
            (live_path(&live.run_id), crate::atomic::temp_path(&live_path(&live.run_id)));
        self.fs.write_temp(&temp, &bytes)?;
        Ok(self.fs.rename(&temp, &path)?)
    }

    /// Removes `run`'s record once everything its segment started is gone.
    pub fn end_live(&mut self, run: &Id) -> Result<(), RecordError> {
        match self.fs.remove(&live_path(run)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind == crate::env::FsErrorKind::NotFound => Ok(()),
            Err(e) => Err(RecordError::Fs(e)),
        }
    }

    /// Every record of a run in progress, and a problem for each that cannot be read.
    pub fn live_runs(&mut self) -> Result<(Vec<LiveRun>, Vec<String>), RecordError> {
        let names = self.fs.list(LIVE_DIR)?;
        let (mut found, mut problems) = (Vec::new(), Vec::new());
        // A name with a leading dot or a `.tmp` end is a write a crash cut short.
        for name in names.iter().filter(|n| !n.starts_with('.') && !n.ends_with(".tmp")) {
            let path = format!("{LIVE_DIR}/{name}");
            let named = name.strip_suffix(".json").and_then(|r| Id::new(r).ok());
            match (named, self.read_json::<LiveRun>(&path)) {
                (Some(run), Ok(Some(live))) if live.run_id == run => found.push(live),
                (_, Ok(None)) => {}
                // Cut short by a crash of the machine, which took every process it could
                // name with it; or not harn's. Either way nothing to reap: it goes.
                (_, Err(e)) => {
                    let _ = self.fs.remove(&path);
                    problems.push(format!("{e} (removed)"));
                }
                _ => problems.push(format!("{}: not a record harn wrote", self.shown(&path))),
            }
        }
        Ok((found, problems))
    }
}

/// Reaps every run whose host is gone: for each record whose item's run lease is free
/// (`lease_free`), `kill` ends what the run left and returns how many processes it found; the
/// run's transcript records `run.reaped` and the record is removed. A record whose lease is
/// held belongs to a live host and is left alone. Runs before a runner starts anything.
pub fn recover<F: Fs>(
    ledger: &mut Ledger<F>,
    lease_free: &mut dyn FnMut(&LiveRun) -> bool,
    kill: &mut dyn FnMut(&LiveRun) -> usize,
    now: WallTime,
) -> Result<Recovered, RecordError> {
    let (live, problems) = ledger.live_runs()?;
    let mut done = Recovered { problems, ..Recovered::default() };
    for run in live {
        if !lease_free(&run) {
            continue;
        }
        let killed = kill(&run);
        // The host is gone, so nobody else writes this transcript now. A run whose records
        // are gone (its directory removed by hand) still has its processes reaped.
        if ledger.fs.read(&format!("{}/run.json", run_dir(&run.run_id))).ok().flatten().is_some() {
            let body = serde_json::json!({
                "event": "run.reaped", "host_pid": run.host_pid, "processes": killed,
            });
            ledger.append_transcript(&run.run_id, body, now)?;
        }
        ledger.end_live(&run.run_id)?;
        done.reaped.push((run.run_id, killed));
    }
    Ok(done)
}
