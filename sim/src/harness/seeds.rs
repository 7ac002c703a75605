//! Running seeds: one run, replay of a recorded trace to its first divergence, minimizing a
//! failing run, and the fuzz entry point.

use crate::entropy::{ByteEntropy, Entropy, SeededEntropy};
use crate::harness::checker::Violation;
use crate::harness::options::SimOptions;
use crate::harness::trace::{Trace, TraceEnd, TraceHeader, TRACE_VERSION};
use crate::harness::world::HarnessWorld;

/// Steps of the fault phase when none are asked for.
pub const DEFAULT_STEPS: u64 = 2_000;

/// Salt that separates the stream drawing a run's options from the stream driving it, so a
/// minimized run with other options still draws from the same run stream.
const OPTIONS_SALT: u64 = 0x6861_726e_5f6f_7074;

/// The result of one run.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The seed.
    pub seed: u64,
    /// The shape it ran with.
    pub options: SimOptions,
    /// Steps taken.
    pub steps: u64,
    /// The state hash after every step.
    pub hashes: Vec<u64>,
    /// The first broken invariant.
    pub violation: Option<Violation>,
    /// The trace, when asked for.
    pub trace: Option<Trace>,
}

/// The options a seed draws.
pub fn options_for_seed(seed: u64, steps: u64) -> SimOptions {
    SimOptions::swarm(&mut SeededEntropy::new(seed ^ OPTIONS_SALT), steps)
}

/// Runs `seed` with the options it draws.
pub fn run_seed(seed: u64, steps: u64, trace: bool) -> RunOutcome {
    run_with(seed, options_for_seed(seed, steps), trace)
}

/// Runs `seed` with given options.
pub fn run_with(seed: u64, options: SimOptions, trace: bool) -> RunOutcome {
    let mut world = HarnessWorld::new(options.clone(), SeededEntropy::new(seed), trace);
    let violation = world.run().err();
    let steps = world.steps();
    let trace = world.records.take().map(|steps_recorded| Trace {
        header: TraceHeader {
            format: "harn-sim-trace".into(),
            version: TRACE_VERSION,
            seed,
            options: options.clone(),
            harn_version: env!("CARGO_PKG_VERSION").into(),
        },
        steps: steps_recorded,
        end: TraceEnd { violation: violation.clone(), steps },
    });
    RunOutcome { seed, options, steps, hashes: std::mem::take(&mut world.hashes), violation, trace }
}

/// How a replay compared with its trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayReport {
    /// Steps compared.
    pub steps_compared: u64,
    /// The first step whose state hash differs, with the recorded and replayed hashes.
    pub first_divergence: Option<(u64, u64, u64)>,
    /// The violation the trace recorded.
    pub recorded: Option<Violation>,
    /// The violation the replay found.
    pub replayed: Option<Violation>,
}

impl ReplayReport {
    /// True when every step matched and the outcome is the same.
    pub fn identical(&self) -> bool {
        self.first_divergence.is_none() && self.recorded == self.replayed
    }
}

/// Re-runs a trace's seed and options and compares step by step.
pub fn replay(trace: &Trace) -> ReplayReport {
    let again = run_with(trace.header.seed, trace.header.options.clone(), false);
    let mut first_divergence = None;
    for (i, recorded) in trace.steps.iter().enumerate() {
        let replayed = again.hashes.get(i).copied().unwrap_or(0);
        if recorded.hash != replayed {
            first_divergence = Some((recorded.step, recorded.hash, replayed));
            break;
        }
    }
    if first_divergence.is_none() && again.hashes.len() != trace.steps.len() {
        let step = trace.steps.len().min(again.hashes.len()) as u64 + 1;
        first_divergence = Some((step, 0, 0));
    }
    ReplayReport {
        steps_compared: trace.steps.len() as u64,
        first_divergence,
        recorded: trace.end.violation.clone(),
        replayed: again.violation,
    }
}

/// Shrinks a failing run: fewer fault steps, fewer harnesses, each fault class switched off
/// in turn, keeping every change after which the same invariant still breaks. Returns the
/// smallest failing run found, with its trace.
pub fn minimize(seed: u64, options: SimOptions) -> Option<RunOutcome> {
    let target = run_with(seed, options.clone(), false).violation?.invariant;
    let fails = |o: &SimOptions| {
        run_with(seed, o.clone(), false).violation.is_some_and(|v| v.invariant == target)
    };
    let mut best = options;
    best.steps = shrink_steps(&best, &fails);
    for candidate in candidates(&best) {
        if fails(&candidate) {
            best = candidate;
            best.steps = shrink_steps(&best, &fails);
        }
    }
    Some(run_with(seed, best, true))
}

/// The smallest fault-phase length that still fails, by bisection (failures are monotone in
/// the step count only approximately, so the result is re-checked by the caller's loop).
fn shrink_steps(o: &SimOptions, fails: &dyn Fn(&SimOptions) -> bool) -> u64 {
    let (mut lo, mut hi) = (0u64, o.steps);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let mut c = o.clone();
        c.steps = mid;
        if fails(&c) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

/// Simpler variants of `o`, one change each.
fn candidates(o: &SimOptions) -> Vec<SimOptions> {
    let mut out = Vec::new();
    for i in (0..o.harnesses.len()).rev().filter(|_| o.harnesses.len() > 1) {
        let mut c = o.clone();
        c.harnesses.remove(i);
        out.push(c);
    }
    let knobs: [fn(&mut SimOptions); 5] = [
        |c| c.crash_per_mille = 0,
        |c| c.io_fault_per_mille = 0,
        |c| c.wake_fault_per_mille = 0,
        |c| c.wall_jump_per_mille = 0,
        |c| c.command_mean_secs = 1 << 40,
    ];
    for knob in knobs {
        let mut c = o.clone();
        knob(&mut c);
        if &c != o {
            out.push(c);
        }
    }
    out
}

/// The fuzz body: the bytes choose the run's shape and drive every fault; once they run out
/// the run is fault-free, which makes the liveness phase meaningful. Panics on a violation.
pub fn fuzz_simulation(data: &[u8]) {
    let (head, rest) = data.split_at(data.len().min(16));
    let mut shape = ByteEntropy::new(head);
    let steps = 20 + shape.below(300);
    let options = SimOptions::swarm(&mut shape, steps);
    let mut world = HarnessWorld::new(options, ByteEntropy::new(rest), false);
    if let Err(v) = world.run() {
        panic!("simulation invariant broken: {v}");
    }
}
