//! Fuzz bodies that live in the library, so cargo-fuzz targets are one-liners and the
//! committed corpus replays under `cargo test` on stable.

use crate::env::{ExitStatus, SpawnSpec};
use crate::ids::Id;
use crate::lifecycle::harness::Durable;
use crate::lifecycle::{
    Harness, HarnessInput, HarnessSpec, LifecycleLimits, Readiness, RestartPolicy,
};
use crate::time::{Duration, Instant};
use arbitrary::{Arbitrary, Result, Unstructured};

/// One fuzzed step against a single harness.
#[derive(Debug, Arbitrary)]
enum Op {
    Start,
    Stop,
    Restart,
    Halt,
    KillNow,
    FollowConfig(bool),
    /// Reports about the current run (`stale == false`) or an arbitrary one.
    Spawned {
        stale: bool,
        run: u8,
        pid: u16,
    },
    SpawnFailed {
        stale: bool,
        run: u8,
    },
    Exited {
        stale: bool,
        run: u8,
        code: i8,
        signalled: bool,
    },
    Ready {
        stale: bool,
        run: u8,
    },
    Reconfigure {
        policy: u8,
        argv_rev: u8,
        notify: bool,
    },
    /// Moves time forward by up to about 18 minutes and delivers a timeout.
    Advance {
        millis: u16,
        scale: u8,
    },
}

fn policy(n: u8) -> RestartPolicy {
    [
        RestartPolicy::Always,
        RestartPolicy::UnlessStopped,
        RestartPolicy::OnFailure,
        RestartPolicy::No,
    ][usize::from(n % 4)]
}

fn spec(policy_n: u8, rev: u8, notify: bool) -> HarnessSpec {
    HarnessSpec {
        spawn: SpawnSpec {
            argv: vec!["agent".into(), format!("--rev={rev}")],
            ..Default::default()
        },
        restart: policy(policy_n),
        readiness: if notify { Readiness::Notify } else { Readiness::None },
        ..Default::default()
    }
}

fn limits(u: &mut Unstructured<'_>) -> Result<LifecycleLimits> {
    let flap_window = Duration::from_millis(u.int_in_range(1..=20_000)?);
    let restart_delay = Duration::from_millis(u.int_in_range(0..=5_000)?);
    Ok(LifecycleLimits {
        flap_threshold: u.int_in_range(1..=5)?,
        flap_window,
        restart_delay,
        restart_delay_max: restart_delay
            .saturating_add(Duration::from_millis(u.int_in_range(0..=60_000)?)),
        give_up_after: u.int_in_range(0..=6)?,
        healthy_run: flap_window
            .saturating_add(Duration::from_millis(u.int_in_range(0..=600_000)?)),
        stop_grace: Duration::from_millis(u.int_in_range(0..=20_000)?),
    })
}

/// Drives one harness with arbitrary inputs, including stale reports and late, early and
/// repeated timeouts, and checks its invariants after every input. Panics on a violation.
pub fn fuzz_lifecycle(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(limits) = limits(&mut u) else { return };
    let Ok(first) = u8::arbitrary(&mut u) else { return };
    let durable = Durable { enabled: first & 1 == 1, failed: first & 2 == 2, ..Durable::default() };
    let mut h = Harness::new(Id::new("fuzz").expect("valid"), spec(first >> 2, 0, false), durable);
    let mut now = Instant(0);
    let mut out = Vec::new();
    h.boot(now, &mut out);
    h.check(&limits).unwrap_or_else(|e| panic!("after boot: {e}"));
    for _ in 0..512 {
        let Ok(op) = Op::arbitrary(&mut u) else { break };
        out.clear();
        let input = to_input(&h, &op);
        match (input, op) {
            (Some(input), _) => h.handle(now, &limits, input, &mut out),
            (None, Op::Advance { millis, scale }) => {
                now = now.saturating_add(Duration::from_millis(u64::from(millis) << (scale % 5)));
                h.handle_timeout(now, &limits, &mut out);
                // A wake must consume everything due, or the driver would spin.
                if let Some(next) = h.poll_timeout(&limits) {
                    assert!(next > now, "deadline {next:?} still due after a wake at {now:?}");
                }
            }
            (None, _) => unreachable!("every other op is an input"),
        }
        h.check(&limits).unwrap_or_else(|e| panic!("{e}"));
    }
}

fn to_input(h: &Harness, op: &Op) -> Option<HarnessInput> {
    let pick = |stale: bool, run: u8| match h.current_run() {
        Some(current) if !stale => current,
        _ => u64::from(run),
    };
    Some(match *op {
        Op::Start => HarnessInput::Start,
        Op::Stop => HarnessInput::Stop,
        Op::Restart => HarnessInput::Restart,
        Op::Spawned { stale, run, pid } => {
            HarnessInput::Spawned { run: pick(stale, run), pid: u32::from(pid) + 2 }
        }
        Op::SpawnFailed { stale, run } => HarnessInput::SpawnFailed { run: pick(stale, run) },
        Op::Exited { stale, run, code, signalled } => {
            let status = if signalled {
                ExitStatus::Signal(i32::from(code))
            } else {
                ExitStatus::Code(i32::from(code))
            };
            HarnessInput::Exited { run: pick(stale, run), status }
        }
        Op::Ready { stale, run } => HarnessInput::Ready { run: pick(stale, run) },
        Op::Reconfigure { policy, argv_rev, notify } => {
            HarnessInput::Reconfigure(spec(policy, argv_rev, notify))
        }
        Op::Halt => HarnessInput::Halt,
        Op::FollowConfig(want) => HarnessInput::FollowConfig(want),
        Op::KillNow => HarnessInput::KillNow,
        Op::Advance { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]
        #[test]
        fn arbitrary_input_sequences_keep_the_invariants(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            super::fuzz_lifecycle(&data);
        }
    }
}
