"""What the benches that time harn as whole processes against targets share: the --harn
option, the timed runs, and the check of the medians against the targets."""

import argparse
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_HARN = os.path.join(REPO, "target", "release", "harn")


def parser(doc):
    """An argument parser described by the first line of `doc`, with --harn."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--harn", default=DEFAULT_HARN, help="the harn binary (default: target/release/harn)")
    return p


def parse(p):
    """The arguments of `p`; exits at once when --harn is not an executable, before any
    ledger is built for it."""
    a = p.parse_args()
    if not os.access(a.harn, os.X_OK):
        sys.exit(f"{a.harn}: not an executable; run `cargo build --release -p harn` first")
    return a


def time_runs(cmd, runs):
    """The milliseconds each of `runs` runs of `cmd` takes, its output discarded."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def check_targets(results, targets_ms):
    """The exit status: 1 when the median of any samples in `results` is over its target in
    `targets_ms` (each one missed is named on stderr), else 0."""
    missed = [n for n, s in results.items() if statistics.median(s) > targets_ms[n]]
    for n in missed:
        print(f"target missed: {n}", file=sys.stderr)
    return 1 if missed else 0
