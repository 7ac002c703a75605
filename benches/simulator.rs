//! Simulator steps per second: whole runs of the deterministic simulator (fault phase and
//! liveness phase, invariants checked after every step, no trace), for a few fixed seeds.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use harn_sim::entropy::SeededEntropy;
use harn_sim::harness::seeds::options_for_seed;
use harn_sim::harness::world::HarnessWorld;
use std::hint::black_box;

const STEPS: u64 = 2_000;
const SEEDS: [u64; 4] = [1, 2, 3, 4];

fn steps_of(seed: u64) -> u64 {
    let mut w = HarnessWorld::new(options_for_seed(seed, STEPS), SeededEntropy::new(seed), false);
    w.run().expect("the benchmark seeds hold every invariant");
    w.steps()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulator_steps");
    for seed in SEEDS {
        let steps = steps_of(seed);
        group.throughput(Throughput::Elements(steps));
        group.bench_function(format!("seed_{seed}"), |b| {
            b.iter_batched(
                || {
                    HarnessWorld::new(
                        options_for_seed(seed, STEPS),
                        SeededEntropy::new(seed),
                        false,
                    )
                },
                |mut w| black_box(w.run()),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
