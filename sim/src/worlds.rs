//! Traces, replay and minimizing for the action worlds ([`crate::work`], [`crate::goal`] and
//! [`crate::service`]), as the harness world has them: a run is its seed and its
//! [`WorldOptions`]; its trace records the simulated filesystem's state hash after every
//! action, so a replay names the first action whose outcome differs; minimizing shrinks the
//! faulty phase and turns crashes off while a failure of the same shape remains.

pub use crate::actions::{ActionLog, ActionRecord, WorldOptions};
#[cfg(all(test, feature = "planted-bugs"))]
use crate::harness::options::InjectedBug;
use serde::{Deserialize, Serialize};

/// Which world a run is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorldKind {
    /// Work attempts under crashes ([`crate::work`]).
    Work,
    /// Goals under crashes ([`crate::goal`]).
    Goals,
    /// The supervisor service under faults ([`crate::service`]).
    Service,
}

impl WorldKind {
    /// The options every seed of this world runs with in a sweep.
    pub fn sweep(self) -> WorldOptions {
        WorldOptions::new(match self {
            WorldKind::Work => crate::work::FAULTY_ACTIONS,
            WorldKind::Goals => crate::goal::FAULTY_ACTIONS,
            WorldKind::Service => crate::service::STEPS,
        })
    }

    /// The `harn sim` verb that sweeps this world.
    pub fn verb(self) -> &'static str {
        match self {
            WorldKind::Work => "work",
            WorldKind::Goals => "goals",
            WorldKind::Service => "service",
        }
    }
}

/// One run of a world.
#[derive(Clone, Debug)]
pub struct WorldRun {
    /// The world.
    pub kind: WorldKind,
    /// The seed.
    pub seed: u64,
    /// Its shape.
    pub options: WorldOptions,
    /// The first promise broken, if any.
    pub failure: Option<String>,
    /// The records, when traced.
    pub records: Option<Vec<ActionRecord>>,
}

impl WorldRun {
    /// Actions taken, as recorded (0 when not traced).
    pub fn actions(&self) -> u64 {
        self.records.as_ref().map_or(0, |r| r.len() as u64)
    }

    /// Its trace (empty records when it was not traced).
    pub fn trace(&self) -> WorldTrace {
        WorldTrace {
            header: WorldTraceHeader {
                format: WORLD_TRACE_FORMAT.into(),
                version: WORLD_TRACE_VERSION,
                world: self.kind,
                seed: self.seed,
                options: self.options,
                harn_version: env!("CARGO_PKG_VERSION").into(),
            },
            actions: self.records.clone().unwrap_or_default(),
            end: WorldTraceEnd { failure: self.failure.clone(), actions: self.actions() },
        }
    }
}

/// Runs `seed` of `kind` with `options`, recording the state after each action when `trace`.
pub fn run(kind: WorldKind, seed: u64, options: WorldOptions, trace: bool) -> WorldRun {
    let mut log = ActionLog::new(trace);
    let failure = match kind {
        WorldKind::Work => crate::work::run_work(seed, options, &mut log).err(),
        WorldKind::Goals => crate::goal::run_goals(seed, options, &mut log).err(),
        WorldKind::Service => crate::service::run_service(seed, options, &mut log).err(),
    };
    WorldRun { kind, seed, options, failure, records: log.take() }
}

/// The `format` of a world trace's first line.
pub const WORLD_TRACE_FORMAT: &str = "harn-sim-world-trace";
/// Version of the world trace format written today.
pub const WORLD_TRACE_VERSION: u32 = 1;

/// The first line of a world trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldTraceHeader {
    /// Always [`WORLD_TRACE_FORMAT`].
    pub format: String,
    /// [`WORLD_TRACE_VERSION`].
    pub version: u32,
    /// The world.
    pub world: WorldKind,
    /// The seed.
    pub seed: u64,
    /// The run's shape.
    pub options: WorldOptions,
    /// The harn version that wrote it.
    pub harn_version: String,
}

/// The last line of a world trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldTraceEnd {
    /// The first promise broken, if any.
    pub failure: Option<String>,
    /// Actions taken.
    pub actions: u64,
}

/// A whole world trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldTrace {
    /// The header.
    pub header: WorldTraceHeader,
    /// One record per action.
    pub actions: Vec<ActionRecord>,
    /// The outcome.
    pub end: WorldTraceEnd,
}

impl WorldTrace {
    /// The JSON Lines text of the trace.
    pub fn to_jsonl(&self) -> String {
        let mut out = serde_json::to_string(&self.header).expect("serializes");
        out.push('\n');
        for a in &self.actions {
            out.push_str(&serde_json::to_string(a).expect("serializes"));
            out.push('\n');
        }
        out.push_str(&serde_json::to_string(&self.end).expect("serializes"));
        out.push('\n');
        out
    }

    /// Parses a world trace; the error names the line.
    pub fn parse(text: &str) -> Result<WorldTrace, String> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let (_, first) = lines.next().ok_or("line 1: the trace is empty")?;
        let header: WorldTraceHeader =
            serde_json::from_str(first).map_err(|e| format!("line 1: header: {e}"))?;
        if header.format != WORLD_TRACE_FORMAT || header.version > WORLD_TRACE_VERSION {
            return Err(format!(
                "line 1: not a {WORLD_TRACE_FORMAT} of version <= {WORLD_TRACE_VERSION}"
            ));
        }
        let rest: Vec<(usize, &str)> = lines.collect();
        let Some(((last_no, last), body)) = rest.split_last() else {
            return Err("line 2: the trace has no end record".into());
        };
        let end: WorldTraceEnd = serde_json::from_str(last)
            .map_err(|e| format!("line {}: end record: {e}", last_no + 1))?;
        let actions = body
            .iter()
            .map(|(no, l)| {
                serde_json::from_str(l).map_err(|e| format!("line {}: action: {e}", no + 1))
            })
            .collect::<Result<Vec<ActionRecord>, String>>()?;
        Ok(WorldTrace { header, actions, end })
    }
}

/// How a replay compared with its trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldReplay {
    /// Actions compared.
    pub compared: u64,
    /// The first action whose state differs: its number, the recorded and the replayed hash
    /// (0 where a run has no such action).
    pub first_divergence: Option<(u64, u64, u64)>,
    /// The failure the trace recorded.
    pub recorded: Option<String>,
    /// The failure the replay found.
    pub replayed: Option<String>,
}

impl WorldReplay {
    /// True when every action matched and the outcome is the same.
    pub fn identical(&self) -> bool {
        self.first_divergence.is_none() && self.recorded == self.replayed
    }
}

/// Re-runs a trace's seed and options and compares action by action.
pub fn replay(trace: &WorldTrace) -> WorldReplay {
    let h = &trace.header;
    let again = run(h.world, h.seed, h.options, true).records.unwrap_or_default();
    let mut first_divergence = None;
    for i in 0..trace.actions.len().max(again.len()) {
        let recorded = trace.actions.get(i).map_or(0, |a| a.hash);
        let replayed = again.get(i).map_or(0, |a| a.hash);
        if recorded != replayed {
            first_divergence = Some((i as u64 + 1, recorded, replayed));
            break;
        }
    }
    WorldReplay {
        compared: trace.actions.len() as u64,
        first_divergence,
        recorded: trace.end.failure.clone(),
        replayed: run(h.world, h.seed, h.options, false).failure,
    }
}

/// A failure's shape: its text with every number replaced, so the same broken promise found
/// at another action or seed, or about another run number, counts as the same.
pub fn shape(failure: &str) -> String {
    let mut out = String::with_capacity(failure.len());
    let mut in_number = false;
    for c in failure.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

/// Shrinks a failing run: the shortest faulty phase that still fails the same way (by
/// bisection), then crashes off if it still fails so. Returns the smallest failing run found,
/// traced; `None` when the run given does not fail.
pub fn minimize(kind: WorldKind, seed: u64, options: WorldOptions) -> Option<WorldRun> {
    let target = shape(&run(kind, seed, options, false).failure?);
    let fails =
        |o: WorldOptions| run(kind, seed, o, false).failure.is_some_and(|f| shape(&f) == target);
    let mut best = options;
    let (mut lo, mut hi) = (0u64, best.faulty);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fails(WorldOptions { faulty: mid, ..best }) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    best.faulty = hi;
    if best.crashes && fails(WorldOptions { crashes: false, ..best }) {
        best.crashes = false;
    }
    // Bisection assumes failing is monotone in the phase's length, which holds only roughly:
    // keep what was given when the result does not fail.
    let small = run(kind, seed, best, true);
    match small.failure {
        Some(_) => Some(small),
        None => Some(run(kind, seed, options, true)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_ignore_numbers_only() {
        assert_eq!(
            shape("seed 12 action 3 on w1: run 7 spawned"),
            "seed # action # on w#: run # spawned"
        );
        assert_ne!(shape("action 3: charged twice"), shape("action 3: never charged"));
    }

    #[test]
    fn every_world_replays_its_own_trace() {
        for kind in [WorldKind::Work, WorldKind::Goals, WorldKind::Service] {
            let options = WorldOptions { faulty: 12, ..kind.sweep() };
            let traced = run(kind, 3, options, true);
            assert!(traced.failure.is_none(), "{kind:?}: {:?}", traced.failure);
            let trace = WorldTrace::parse(&traced.trace().to_jsonl()).expect("parses");
            assert_eq!(trace, traced.trace());
            assert!(trace.actions.len() >= 12, "{kind:?}: {} actions", trace.actions.len());
            let report = replay(&trace);
            assert!(report.identical(), "{kind:?}: {report:?}");
            let mut tampered = trace.clone();
            tampered.actions[5].hash ^= 1;
            assert_eq!(replay(&tampered).first_divergence.map(|d| d.0), Some(6), "{kind:?}");
        }
    }
}

#[cfg(all(test, feature = "planted-bugs"))]
mod planted {
    use super::*;

    #[test]
    fn a_directory_sync_that_lies_is_found_in_every_world_and_minimized() {
        for kind in [WorldKind::Work, WorldKind::Goals, WorldKind::Service] {
            let options = WorldOptions { bug: Some(InjectedBug::LyingDirSync), ..kind.sweep() };
            let (seed, failure) = (0..40)
                .find_map(|seed| run(kind, seed, options, false).failure.map(|f| (seed, f)))
                .unwrap_or_else(|| panic!("{kind:?}: no seed of 40 found the lost records"));
            let small = minimize(kind, seed, options).expect("it fails");
            let found = small.failure.as_deref().expect("still fails");
            assert_eq!(shape(found), shape(&failure), "{kind:?}");
            assert!(small.options.faulty <= options.faulty, "{kind:?}");
            assert!(replay(&small.trace()).identical(), "{kind:?}");
        }
    }

    /// The planning attempt's planted bug (a new run's manifest recorded before its lease)
    /// is found by the goal world's planning host within the first seeds that plan.
    #[test]
    fn a_planning_manifest_recorded_before_its_lease_is_found_in_the_goal_world() {
        let kind = WorldKind::Goals;
        let options = WorldOptions { bug: Some(InjectedBug::ManifestBeforeLease), ..kind.sweep() };
        let (seed, failure) = (0..40)
            .find_map(|seed| run(kind, seed, options, false).failure.map(|f| (seed, f)))
            .expect("no seed of 40 found the manifest recorded before its lease");
        assert!(failure.contains("before its lease was held"), "seed {seed}: {failure}");
        assert!(run(kind, seed, kind.sweep(), false).failure.is_none(), "seed {seed} without it");
    }

    /// The segment driver's planted bug that charges an engine's fault (a segment its
    /// cluster ended taken for a plain exit) is found by the work world's charging check.
    #[test]
    fn an_engine_fault_taken_for_an_exit_is_found_in_the_work_world() {
        let kind = WorldKind::Work;
        let options = WorldOptions { bug: Some(InjectedBug::FaultAsExit), ..kind.sweep() };
        let (seed, failure) = (0..200)
            .find_map(|seed| run(kind, seed, options, false).failure.map(|f| (seed, f)))
            .expect("no seed of 200 found the engine's fault charged");
        assert!(failure.contains("workflows ran to an end of their own"), "seed {seed}: {failure}");
        assert!(run(kind, seed, kind.sweep(), false).failure.is_none(), "seed {seed} without it");
    }

    /// The segment driver's planted bug (a resumed segment recorded as a new start) is found
    /// by the work world's check of every run's transcript, within the first seeds.
    #[test]
    fn a_resume_recorded_as_a_start_is_found_in_the_work_world() {
        let kind = WorldKind::Work;
        let options = WorldOptions { bug: Some(InjectedBug::ResumeAsStart), ..kind.sweep() };
        let (seed, failure) = (0..20)
            .find_map(|seed| run(kind, seed, options, false).failure.map(|f| (seed, f)))
            .expect("no seed of 20 found the resume recorded as a start");
        assert!(failure.contains("after its park recorded run.start"), "seed {seed}: {failure}");
        assert!(run(kind, seed, kind.sweep(), false).failure.is_none(), "seed {seed} without it");
    }
}
