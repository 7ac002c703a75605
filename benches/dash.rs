//! One dashboard refresh over 10,000 goals, each over one cancelled work item (so 10,000
//! items too): through the reads the dashboard's reader keeps between refreshes (a
//! signature of each goal's and item's file metadata), next to reading every goal and item
//! in full, in the same run. `HARN_DASH_ROOT=DIR` reuses a root made earlier (and keeps it);
//! `HARN_DASH_GOALS=N` makes a smaller one.

use criterion::{criterion_group, criterion_main, Criterion};
use harn::dash::readers::Kept;
use harn::dash::Snapshot;
use std::path::{Path, PathBuf};

fn goals() -> usize {
    std::env::var("HARN_DASH_GOALS").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000)
}

/// Runs harn commands in this process.
fn harn(root: &Path, args: &[&str]) {
    let mut all = vec!["harn"];
    all.extend(args);
    all.extend(["--root", root.to_str().unwrap()]);
    assert_eq!(harn::cli::run_args(all), 0, "{args:?}");
}

/// The root: the one `HARN_DASH_ROOT` names, made on first use, or a temporary one.
fn root() -> (PathBuf, Option<tempfile::TempDir>) {
    let (path, temp) = match std::env::var_os("HARN_DASH_ROOT") {
        Some(p) => (PathBuf::from(p), None),
        None => {
            let t = tempfile::tempdir().unwrap();
            (t.path().to_owned(), Some(t))
        }
    };
    if !path.join(".harnery/supervisors").exists() {
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("wf.sh"), "#!/bin/sh\nread start\n").unwrap();
        std::fs::write(path.join("team.json"), r#"{"implementer": {"instructions": "x"}}"#)
            .unwrap();
        let stdout = rustix::io::dup(rustix::stdio::stdout()).unwrap();
        let null = std::fs::File::create("/dev/null").unwrap();
        rustix::stdio::dup2_stdout(&null).unwrap();
        for n in 0..goals() {
            let (w, g) = (format!("w{n}"), format!("g{n}"));
            harn(&path, &["work", "create", "w", "wf.sh", "--id", &w, "--objective", "o"]);
            harn(&path, &["work", "cancel", &w]);
            harn(&path, &["supervisor", "create", &w, "--team", "team.json", "--id", &g]);
        }
        rustix::stdio::dup2_stdout(&stdout).unwrap();
        // Files changed within the timestamps' slack are not kept; let them age.
        std::thread::sleep(std::time::Duration::from_millis(2_500));
    }
    (std::fs::canonicalize(path).unwrap(), temp)
}

fn bench(c: &mut Criterion) {
    let (root, _temp) = root();
    let mut kept = Kept::default();
    let first = Snapshot::take(&root, None, &mut kept);
    let listed = first.goals.as_ref().map(|(rows, _)| rows.len()).unwrap_or(0);
    assert!(listed > 0, "no goals read from {}", root.display());
    let mut group = c.benchmark_group("dash");
    group.sample_size(10);
    group.bench_function("refresh_kept", |b| b.iter(|| Snapshot::take(&root, None, &mut kept)));
    group.bench_function("refresh_full_read", |b| {
        b.iter(|| Snapshot::take(&root, None, &mut Kept::default()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
