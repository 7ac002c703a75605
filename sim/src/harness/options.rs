//! What one simulation run looks like: its harnesses, limits and fault rates, drawn from the
//! seed (swarm testing: each seed explores a different mix) and recorded in the trace header.

use crate::entropy::Entropy;
use crate::harness::process::Behaviour;
use harn_core::env::SpawnSpec;
use harn_core::harness::daemon::{DaemonConfig, Profile};
use harn_core::harness::lifecycle::{
    CrashLoop, HarnessSpec, LifecycleLimits, Readiness, RestartPolicy,
};
use harn_core::ids::Id;
use harn_core::time::Duration;
use serde::{Deserialize, Serialize};

/// A bug the simulator can plant on purpose, to prove the checker finds that class of bug.
/// The variants exist only with the `planted-bugs` feature, which only test builds enable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InjectedBug {
    /// The filesystem acknowledges `sync_dir` without doing it, so a renamed `state.json` is
    /// lost by a crash: an acknowledged record disappears.
    #[cfg(feature = "planted-bugs")]
    LyingDirSync,
    /// The exit watcher loses some child-exit reports, as a SIGCHLD handler that forgets
    /// signals coalesce would: the daemon keeps believing a dead child is alive.
    #[cfg(feature = "planted-bugs")]
    LostExitReport,
    /// The daemon core queues spawns ahead of the `state.json` barrier.
    #[cfg(feature = "planted-bugs")]
    SpawnBeforePersist,
    /// The daemon core acknowledges commands ahead of the `state.json` barrier.
    #[cfg(feature = "planted-bugs")]
    AckBeforePersist,
    /// A new daemon boots without stopping the processes an earlier one left behind.
    #[cfg(feature = "planted-bugs")]
    SkipReclaim,
    /// The daemon core lets a second client type into a terminal harness.
    #[cfg(feature = "planted-bugs")]
    SecondTypist,
    /// The daemon core sends SIGTERM to a terminal harness without hanging it up first.
    #[cfg(feature = "planted-bugs")]
    TermWithoutHangup,
    /// The work world's segment driver records a resumed segment as `run.start`.
    #[cfg(feature = "planted-bugs")]
    ResumeAsStart,
    /// The goal world's planning attempt records a new run's manifest before its lease.
    #[cfg(feature = "planted-bugs")]
    ManifestBeforeLease,
    /// The work world's segment driver ends a segment its cluster ended as a plain exit.
    #[cfg(feature = "planted-bugs")]
    FaultAsExit,
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
    /// Whether it runs on a terminal of its own (`tty = true`).
    #[serde(default)]
    pub tty: bool,
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
    /// Per-mille chance, per step, that the daemon alone dies (SIGKILL) somewhere inside the
    /// step: its children live on as orphans and nothing written is lost.
    #[serde(default)]
    pub daemon_crash_per_mille: u32,
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
                tty: false,
            })
            .collect::<Vec<_>>();
        let limits = draw_limits(e);
        SimOptions {
            harnesses,
            limits,
            steps,
            crash_per_mille: e.below(30) as u32,
            daemon_crash_per_mille: e.below(20) as u32,
            io_fault_per_mille: e.below(20) as u32,
            wake_fault_per_mille: e.below(300) as u32,
            command_mean_secs: e.between(1, 120),
            wall_jump_per_mille: e.below(10) as u32,
            liveness_secs: 600,
            bug: None,
        }
        .with_terminals(e)
    }

    /// Draws which harnesses run on a terminal, after everything else, so the rest of a
    /// seed's shape is what it was before terminals were drawn.
    fn with_terminals(mut self, e: &mut dyn Entropy) -> SimOptions {
        for h in &mut self.harnesses {
            h.tty = e.chance(1, 2);
        }
        self
    }

    /// The daemon configuration these options describe at the start of a run.
    pub fn initial_config(&self) -> DaemonConfig {
        let knobs = ConfigKnobs {
            revision: 0,
            policies: self.harnesses.iter().map(|h| h.restart).collect(),
            present: vec![true; self.harnesses.len()],
            limits: self.limits,
        };
        self.config(&knobs)
    }

    /// The daemon configuration for `knobs`. A revision changes every harness's argv (a
    /// run-affecting edit) and, every third one, sets per-harness delay and grace overrides.
    pub fn config(&self, knobs: &ConfigKnobs) -> DaemonConfig {
        // Small journal files, so rotations happen under crashes too.
        let retention = harn_core::journal::Retention { max_file_bytes: 4 << 10, kept: 2 };
        let mut config = DaemonConfig { limits: knobs.limits, retention, ..Default::default() };
        for (i, h) in self.harnesses.iter().enumerate().filter(|(i, _)| knobs.present[*i]) {
            let mut argv = vec![h.behaviour.program().to_owned()];
            if knobs.revision > 0 {
                argv.push(format!("--revision={}", knobs.revision));
            }
            let overrides = knobs.revision % 3 == 2;
            let previous = |wanted: bool| match wanted && knobs.present[i - 1] {
                true => vec![harness_name(i - 1)],
                false => Vec::new(),
            };
            let spec = HarnessSpec {
                spawn: SpawnSpec {
                    argv,
                    tty: h.tty.then(harn_core::env::TtySize::default),
                    ..Default::default()
                },
                restart: knobs.policies[i],
                restart_delay: overrides.then(|| knobs.limits.restart_delay.saturating_shl(1)),
                stop_grace: overrides.then(|| Duration::from_millis(500)),
                enabled: h.enabled,
                readiness: readiness_of(i),
                // Every other harness with readiness gives up on a run not ready in time:
                // files found by chance and probes failing half the time make that happen.
                // The notify harness (the fourth) has both: a child that never says READY=1
                // is a failed start, and one that stops pinging is hung.
                ready_timeout: (readiness_of(i) == Readiness::Notify || (i % 3 != 0 && i % 2 == 0))
                    .then(|| Duration::from_millis(3_000)),
                // The others with readiness keep being rechecked: a flapping file or probe
                // loses readiness and shows it again.
                recheck: (i % 3 != 0 && i % 2 == 1).then(|| Duration::from_millis(1_000)),
                watchdog: (readiness_of(i) == Readiness::Notify)
                    .then(|| Duration::from_millis(2_000)),
                // Every fifth harness requires the one before it (when that is configured),
                // and every fifth, from the third, starts after the one before.
                requires: previous(i % 5 == 4),
                after: previous(i % 5 == 2),
                // Every fourth harness gives up and flaps by limits of its own.
                crash_loop: if i % 4 == 1 {
                    CrashLoop {
                        flap_threshold: Some(2),
                        give_up_after: Some(2),
                        ..CrashLoop::default()
                    }
                } else {
                    CrashLoop::default()
                },
            };
            config.harnesses.insert(harness_name(i), spec);
        }
        let all: Vec<Id> = config.harnesses.keys().cloned().collect();
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

/// What simulated reloads change in the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigKnobs {
    /// Bumped by run-affecting edits.
    pub revision: u64,
    /// Restart policy of each harness.
    pub policies: Vec<RestartPolicy>,
    /// Whether each harness is in the configuration (at least one always is).
    pub present: Vec<bool>,
    /// The limits in force.
    pub limits: LifecycleLimits,
}

/// Draws lifecycle limits within the ranges the simulator explores.
pub fn draw_limits(e: &mut dyn Entropy) -> LifecycleLimits {
    let flap_window = Duration::from_millis(e.between(2_000, 20_000));
    let restart_delay = Duration::from_millis(e.between(100, 2_000));
    LifecycleLimits {
        flap_threshold: e.between(1, 4) as u32,
        flap_window,
        restart_delay,
        restart_delay_max: Duration::from_millis(e.between(restart_delay.as_millis(), 30_000)),
        give_up_after: e.below(7) as u32,
        healthy_run: Duration::from_millis(e.between(flap_window.as_millis(), 300_000)),
        stop_grace: Duration::from_millis(e.between(100, 10_000)),
    }
}

/// The name of the `i`-th simulated harness.
pub fn harness_name(i: usize) -> Id {
    // Named from a table while there are few (always, in the sweeps): this is drawn for
    // every command and every configuration.
    const NAMES: [&str; 8] = ["h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"];
    match NAMES.get(i) {
        Some(name) => Id::new(name),
        None => Id::new(&format!("h{i}")),
    }
    .expect("valid")
}

/// True when the planted bug makes `sync_dir` a no-op.
pub(crate) fn lies_about_dir_sync(bug: Option<InjectedBug>) -> bool {
    #[cfg(feature = "planted-bugs")]
    return bug == Some(InjectedBug::LyingDirSync);
    #[cfg(not(feature = "planted-bugs"))]
    return bug.is_some();
}

/// True when the planted bug skips reclaiming orphans before a boot.
pub(crate) fn skips_reclaim(bug: Option<InjectedBug>) -> bool {
    #[cfg(feature = "planted-bugs")]
    return bug == Some(InjectedBug::SkipReclaim);
    #[cfg(not(feature = "planted-bugs"))]
    return bug.is_some();
}

/// True when the planted bug loses child-exit reports.
pub(crate) fn loses_exit_reports(bug: Option<InjectedBug>) -> bool {
    #[cfg(feature = "planted-bugs")]
    return bug == Some(InjectedBug::LostExitReport);
    #[cfg(not(feature = "planted-bugs"))]
    return bug.is_some();
}

/// Plants the core-level bug, if that is the one chosen, in a freshly booted core.
pub(crate) fn plant_core_bug(
    bug: Option<InjectedBug>,
    daemon: &mut harn_core::harness::daemon::Daemon,
) {
    #[cfg(feature = "planted-bugs")]
    {
        use harn_core::planted::PlantedBug;
        match bug {
            Some(InjectedBug::SpawnBeforePersist) => daemon.plant(PlantedBug::SpawnBeforePersist),
            Some(InjectedBug::AckBeforePersist) => daemon.plant(PlantedBug::AckBeforePersist),
            Some(InjectedBug::SecondTypist) => daemon.plant(PlantedBug::SecondTypist),
            Some(InjectedBug::TermWithoutHangup) => daemon.plant(PlantedBug::TermWithoutHangup),
            _ => {}
        }
    }
    #[cfg(not(feature = "planted-bugs"))]
    let _ = (bug, daemon);
}

/// The readiness evidence harness `i` asks for: none, a file, a probe, then notify (with a
/// watchdog) in turn, so every run with three harnesses or more exercises the core's
/// readiness schedule, and one with four its watchdog.
pub fn readiness_of(i: usize) -> Readiness {
    match i % 3 {
        1 => Readiness::File { path: "ready.flag".into() },
        2 => Readiness::Probe { command: vec!["probe".into()] },
        _ if i % 2 == 1 => Readiness::Notify,
        _ => Readiness::None,
    }
}
