//! A real-IO service sweep over 1,000 enrolled quiescent goals read from their files: through
//! the daemon's read cache (a signature of each goal's file metadata), next to the baseline
//! that reads and re-projects every goal from its journals, in the same run.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use harn::os::store::Store;
use harn::service::sweep::ReadCache;

use harn_core::ids::Id;
use harn_core::service::wake::{Fingerprint, GoalWake, ServiceScheduler, WakeConfig};
use harn_core::service::{sweep, SweepHost, Ticked};
use harn_core::time::Instant;
use std::path::Path;

const GOALS: usize = 1_000;

/// Reads goals through a cache; `fresh` drops it before every read (the baseline).
struct FileHost<'a> {
    store: &'a mut Store,
    cache: &'a mut ReadCache,
    fresh: bool,
}

impl SweepHost for FileHost<'_> {
    type Error = String;

    fn now(&mut self) -> Instant {
        Instant(1_000)
    }

    fn read(&mut self, goal: &Id) -> Result<(Fingerprint, bool), String> {
        if self.fresh {
            *self.cache = ReadCache::default();
        }
        self.cache.read(self.store, goal)
    }

    fn tick(&mut self, goal: &Id) -> Result<Ticked, String> {
        unreachable!("{goal} is quiescent")
    }

    fn ticking(&mut self, _goal: Option<&Id>) {}

    fn failed(&mut self, goal: &Id, error: &str, _wake: &GoalWake) {
        panic!("{goal}: {error}")
    }
}

/// Runs harn commands in this process with their output discarded.
fn harn(root: &Path, args: &[&str]) {
    let mut all = vec!["harn"];
    all.extend(args);
    all.extend(["--root", root.to_str().unwrap()]);
    assert_eq!(harn::cli::run_args(all), 0, "{args:?}");
}

/// A root with `GOALS` goals, each over one cancelled work item: blocked, so quiescent.
fn root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    std::fs::write(r.join("wf.sh"), "#!/bin/sh\nread start\n").unwrap();
    std::fs::write(r.join("team.json"), r#"{"implementer": {"instructions": "x"}}"#).unwrap();
    let stdout = rustix::io::dup(rustix::stdio::stdout()).unwrap();
    let null = std::fs::File::create("/dev/null").unwrap();
    rustix::stdio::dup2_stdout(&null).unwrap();
    for n in 0..GOALS {
        let (w, g) = (format!("w{n}"), format!("g{n}"));
        harn(r, &["work", "create", "w", "wf.sh", "--id", &w, "--objective", "o"]);
        harn(r, &["work", "cancel", &w]);
        harn(r, &["supervisor", "create", &w, "--team", "team.json", "--id", &g]);
    }
    rustix::stdio::dup2_stdout(&stdout).unwrap();
    dir
}

fn bench(c: &mut Criterion) {
    let dir = root();
    let mut store = Store::new(&std::fs::canonicalize(dir.path()).unwrap());
    let ids: Vec<Id> = (0..GOALS).map(|n| Id::new(&format!("g{n}")).unwrap()).collect();
    let mut scheduler =
        ServiceScheduler::new(WakeConfig::default(), ids, Default::default(), Instant(0)).unwrap();
    let mut cache = ReadCache::default();
    // Files changed within the timestamps' slack are not trusted to the cache; let them age.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    // The first sweep reads every goal in full and quiesces it.
    let mut host = FileHost { store: &mut store, cache: &mut cache, fresh: false };
    sweep(&mut host, &mut scheduler).unwrap();
    let mut group = c.benchmark_group("service_io");
    group.sample_size(20);
    for (name, fresh) in
        [("sweep_1000_quiescent_cached", false), ("sweep_1000_quiescent_full_read", true)]
    {
        group.bench_function(name, |b| {
            b.iter_batched(
                || scheduler.clone(),
                |mut scheduler| {
                    let mut host = FileHost { store: &mut store, cache: &mut cache, fresh };
                    sweep(&mut host, &mut scheduler).unwrap();
                    scheduler
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
