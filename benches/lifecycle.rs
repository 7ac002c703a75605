//! Lifecycle inputs per second: one harness cycling through spawn, readiness, exit and the
//! restart timeout, at the harness level and through the daemon core (which adds the durable
//! view, the state.json encoding and effect batching).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use harn_core::env::{ExitStatus, SpawnSpec};
use harn_core::harness::daemon::{Daemon, DaemonConfig, DaemonEffect, DaemonInput};
use harn_core::harness::lifecycle::harness::Durable;
use harn_core::harness::lifecycle::{Harness, HarnessInput, HarnessSpec, LifecycleLimits};
use harn_core::ids::Id;
use harn_core::time::{Duration, Instant};
use std::hint::black_box;

/// Inputs per measured batch.
const CYCLES: u64 = 10_000;
const INPUTS_PER_CYCLE: u64 = 4;

fn spec() -> HarnessSpec {
    HarnessSpec {
        spawn: SpawnSpec { argv: vec!["agent".into(), "--serve".into()], ..Default::default() },
        enabled: true,
        ..Default::default()
    }
}

fn limits() -> LifecycleLimits {
    // Never give up, so the cycle can run forever.
    LifecycleLimits { give_up_after: 0, ..LifecycleLimits::default() }
}

/// One harness: timeout (spawn), spawned, ready, exited; `CYCLES` times.
fn harness_cycles(h: &mut Harness, now: &mut Instant, limits: &LifecycleLimits) {
    let mut out = Vec::with_capacity(8);
    for _ in 0..CYCLES {
        *now = h.retry_at().unwrap_or(*now);
        out.clear();
        h.handle_timeout(*now, limits, &mut out);
        let run = h.current_run().expect("the timeout started a run");
        out.clear();
        h.handle(*now, limits, HarnessInput::Spawned { run, pid: 7 }, &mut out);
        h.handle(*now, limits, HarnessInput::Ready { run }, &mut out);
        *now = now.saturating_add(Duration::from_secs(20));
        h.handle(*now, limits, HarnessInput::Exited { run, status: ExitStatus::Code(1) }, &mut out);
        black_box(&out);
    }
}

fn daemon_cycles(d: &mut Daemon, now: &mut Instant) {
    let name = Id::new("agent").unwrap();
    for _ in 0..CYCLES {
        *now = d.poll_timeout().unwrap_or(*now);
        d.handle_timeout(*now);
        let mut run = 0;
        while let Some(e) = d.poll_effect() {
            if let DaemonEffect::Spawn { run: r, .. } = e {
                run = r;
            }
        }
        let report = |report| DaemonInput::Process { name: name.clone(), report };
        d.handle(*now, report(HarnessInput::Spawned { run, pid: 7 }));
        d.handle(*now, report(HarnessInput::Ready { run }));
        *now = now.saturating_add(Duration::from_secs(20));
        d.handle(*now, report(HarnessInput::Exited { run, status: ExitStatus::Code(1) }));
        while let Some(e) = d.poll_effect() {
            black_box(e);
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("lifecycle_inputs");
    group.throughput(Throughput::Elements(CYCLES * INPUTS_PER_CYCLE));
    let limits = limits();
    group.bench_function("harness", |b| {
        let mut h = Harness::new(
            Id::new("agent").unwrap(),
            spec(),
            Durable { enabled: true, ..Durable::default() },
        );
        let mut now = Instant(0);
        h.boot(now, &mut Vec::new());
        let run = h.current_run().unwrap();
        h.handle(now, &limits, HarnessInput::Spawned { run, pid: 7 }, &mut Vec::new());
        h.handle(
            now,
            &limits,
            HarnessInput::Exited { run, status: ExitStatus::Code(1) },
            &mut Vec::new(),
        );
        b.iter(|| harness_cycles(&mut h, &mut now, &limits));
    });
    group.bench_function("daemon_core", |b| {
        let mut config = DaemonConfig { limits, ..DaemonConfig::default() };
        config.harnesses.insert(Id::new("agent").unwrap(), spec());
        let mut d = Daemon::boot(config, None, Instant(0)).unwrap();
        let mut now = Instant(0);
        let mut run = 0;
        while let Some(e) = d.poll_effect() {
            if let DaemonEffect::Spawn { run: r, .. } = e {
                run = r;
            }
        }
        let name = Id::new("agent").unwrap();
        d.handle(
            now,
            DaemonInput::Process {
                name: name.clone(),
                report: HarnessInput::Spawned { run, pid: 7 },
            },
        );
        d.handle(
            now,
            DaemonInput::Process {
                name,
                report: HarnessInput::Exited { run, status: ExitStatus::Code(1) },
            },
        );
        while d.poll_effect().is_some() {}
        b.iter(|| daemon_cycles(&mut d, &mut now));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
