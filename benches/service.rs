//! The service's pure sweep over 100,000 enrolled goals of which 1 % changed since the last
//! sweep: what a quiescent goal costs the sweep itself, the reads being already in memory.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

use harn_core::ids::Id;
use harn_core::service::wake::{Fingerprint, GoalWake, ServiceScheduler, WakeConfig};
use harn_core::service::{sweep, SweepHost, Ticked};
use harn_core::time::Instant;
use std::hint::black_box;

const GOALS: usize = 100_000;
/// One goal in this many changes between sweeps.
const CHANGED_EVERY: usize = 100;

/// Goals whose fingerprints are in memory; none is ever ready, so a changed goal quiesces on
/// its new fingerprint and an unchanged one is skipped.
struct MemoryHost {
    fingerprints: Vec<Fingerprint>,
    next: usize,
}

impl SweepHost for MemoryHost {
    type Error = String;

    fn now(&mut self) -> Instant {
        Instant(1_000)
    }

    fn read(&mut self, _goal: &Id) -> Result<(Fingerprint, bool), String> {
        let fp = self.fingerprints[self.next % GOALS];
        self.next += 1;
        Ok((fp, false))
    }

    fn tick(&mut self, _goal: &Id) -> Result<Ticked, String> {
        unreachable!("no goal is ready")
    }

    fn ticking(&mut self, _goal: Option<&Id>) {}

    fn failed(&mut self, _goal: &Id, _error: &str, _wake: &GoalWake) {}
}

fn quiesced() -> (ServiceScheduler, Vec<Fingerprint>) {
    let ids: Vec<Id> = (0..GOALS).map(|n| Id::new(&format!("goal-{n:06}")).unwrap()).collect();
    let fps: Vec<Fingerprint> = (0..GOALS).map(|n| Fingerprint::new(n.to_le_bytes())).collect();
    let prior = ids.iter().cloned().zip(fps.iter().map(|fp| GoalWake::awaiting(*fp))).collect();
    let scheduler = ServiceScheduler::new(WakeConfig::default(), ids, prior, Instant(0)).unwrap();
    (scheduler, fps)
}

fn bench(c: &mut Criterion) {
    let (scheduler, fps) = quiesced();
    let mut changed = fps.clone();
    for (n, fp) in changed.iter_mut().enumerate().step_by(CHANGED_EVERY) {
        *fp = Fingerprint::new((n + GOALS).to_le_bytes());
    }
    let mut group = c.benchmark_group("service");
    group.throughput(Throughput::Elements(GOALS as u64));
    group.bench_function("sweep_100k_goals_1pct_changed", |b| {
        b.iter_batched(
            || (scheduler.clone(), MemoryHost { fingerprints: changed.clone(), next: 0 }),
            |(mut scheduler, mut host)| {
                sweep(&mut host, &mut scheduler).unwrap();
                black_box(scheduler)
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("sweep_100k_goals_none_changed", |b| {
        b.iter_batched(
            || (scheduler.clone(), MemoryHost { fingerprints: fps.clone(), next: 0 }),
            |(mut scheduler, mut host)| {
                sweep(&mut host, &mut scheduler).unwrap();
                black_box(scheduler)
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
