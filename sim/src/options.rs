//! What one simulation run looks like: its harnesses, limits and fault rates, drawn from the
//! seed (swarm testing: each seed explores a different mix) and recorded in the trace header.

use crate::entropy::Entropy;
use crate::process::Behaviour;
use harn_core::daemon::{DaemonConfig, Profile};
use harn_core::env::SpawnSpec;
use harn_core::ids::Id;
use harn_core::lifecycle::{HarnessSpec, LifecycleLimits, RestartPolicy};
use harn_core::time::Duration;
use serde::{Deserialize, Serialize};

/// A bug the simulator can plant on purpose, to prove the checker finds that class of bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InjectedBug {
    /// The filesystem acknowledges `sync_dir` without doing it, so a renamed `state.json` is
    /// lost by a crash: an acknowledged record disappears.
    LyingDirSync,
    /// The exit watcher loses some child-exit reports, as a SIGCHLD handler that forgets
    /// signals coalesce would: the daemon keeps believing a dead child is alive.
    LostExitReport,
}

/// One simulated harness.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimHarness {
    /// How its program behaves.
    pub behaviour: Behaviour,
    /// Its restart policy.
    pub restart: RestartPolicy,
    /// Its configured default intent.
    pub enabled: bool,
}

/// Everything that shapes a run besides the entropy stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimOptions {
    /// The harnesses, named `h0`, `h1`, …
    pub harnesses: Vec<SimHarness>,
    /// Lifecycle limits in force.
    pub limits: LifecycleLimits,
    /// Steps of the fault phase.
    pub steps: u64,
    /// Per-mille chance, per step, of a whole-host crash somewhere inside the step.
    pub crash_per_mille: u32,
    /// Per-mille chance, per step, of an EIO or ENOSPC on one filesystem call.
    pub io_fault_per_mille: u32,
    /// Per-mille chance that a timer wake is late, missed or spurious.
    pub wake_fault_per_mille: u32,
    /// Mean virtual seconds between operator commands.
    pub command_mean_secs: u64,
    /// Per-mille chance, per step, of a wall-clock jump.
    pub wall_jump_per_mille: u32,
    /// Virtual seconds the fault-free liveness phase may take.
    pub liveness_secs: u64,
    /// A planted bug, for checking the checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bug: Option<InjectedBug>,
}

impl SimOptions {
    /// Draws a run's shape from `entropy`.
    pub fn swarm(e: &mut dyn Entropy, steps: u64) -> SimOptions {
        let count = e.between(1, 4) as usize;
        let harnesses = (0..count)
            .map(|_| SimHarness {
                behaviour: Behaviour::ALL[e.below(Behaviour::ALL.len() as u64) as usize],
                restart: [
                    RestartPolicy::Always,
                    RestartPolicy::UnlessStopped,
                    RestartPolicy::OnFailure,
                    RestartPolicy::No,
                ][e.below(4) as usize],
                enabled: e.chance(3, 4),
            })
            .collect();
        let flap_window = Duration::from_millis(e.between(2_000, 20_000));
        let restart_delay = Duration::from_millis(e.between(100, 2_000));
        let limits = LifecycleLimits {
            flap_threshold: e.between(1, 4) as u32,
            flap_window,
            restart_delay,
            restart_delay_max: Duration::from_millis(e.between(restart_delay.as_millis(), 30_000)),
            give_up_after: e.below(7) as u32,
            healthy_run: Duration::from_millis(e.between(flap_window.as_millis(), 300_000)),
            stop_grace: Duration::from_millis(e.between(100, 10_000)),
        };
        SimOptions {
            harnesses,
            limits,
            steps,
            crash_per_mille: e.below(30) as u32,
            io_fault_per_mille: e.below(20) as u32,
            wake_fault_per_mille: e.below(300) as u32,
            command_mean_secs: e.between(1, 120),
            wall_jump_per_mille: e.below(10) as u32,
            liveness_secs: 600,
            bug: None,
        }
    }

    /// The daemon configuration these options describe. `revision` changes the argv of every
    /// harness, which is how simulated reloads make run-affecting edits.
    pub fn config(&self, revision: u64, policies: &[RestartPolicy]) -> DaemonConfig {
        let mut config = DaemonConfig { limits: self.limits, ..Default::default() };
        for (i, h) in self.harnesses.iter().enumerate() {
            let mut argv = vec![h.behaviour.program().to_owned()];
            if revision > 0 {
                argv.push(format!("--revision={revision}"));
            }
            let spec = HarnessSpec {
                spawn: SpawnSpec { argv, ..Default::default() },
                restart: policies.get(i).copied().unwrap_or(h.restart),
                enabled: h.enabled,
                ..Default::default()
            };
            config.harnesses.insert(harness_name(i), spec);
        }
        let all: Vec<Id> = (0..self.harnesses.len()).map(harness_name).collect();
        let first_half: Vec<Id> = all.iter().take(all.len().div_ceil(2)).cloned().collect();
        config
            .profiles
            .insert(Id::new("all").unwrap(), Profile { harnesses: all, autostart: false });
        config
            .profiles
            .insert(Id::new("half").unwrap(), Profile { harnesses: first_half, autostart: true });
        config
    }
}

/// The name of the `i`-th simulated harness.
pub fn harness_name(i: usize) -> Id {
    Id::new(&format!("h{i}")).expect("valid")
}
