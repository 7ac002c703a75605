#!/usr/bin/env python3
"""Times `harn work list --json` as a whole process over 1,000 work items.

Two ledgers are built with `harn work create` in temporary directories: 1,000 independent
items, and a dependency chain of 1,000 items where each depends on the one before (so every
item's projection needs its prerequisite's). Each listing is run --runs times after one
warm-up run; the median and the spread are printed, then checked against the targets
(independent <= 50 ms, chain <= 100 ms). Exit status 1 when a target is missed.
Standard library only; the temporary directories are removed at the end.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_HARN = os.path.normpath(os.path.join(HERE, "..", "..", "target", "release", "harn"))
TARGETS_MS = {"independent": 50.0, "chain": 100.0}


def harn(binary, root, *args):
    out = subprocess.run([binary, "work", *args, "--root", root], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"harn work {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def build_ledger(binary, root, items, chain):
    with open(os.path.join(root, "wf.sh"), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    for i in range(items):
        args = ["create", f"Item {i}", "wf.sh", "--objective", f"Objective {i}",
                "--accept", "tests pass", "--id", f"w{i:04}", "--actor", "bench"]
        if chain and i > 0:
            args += ["--depends-on", f"w{i - 1:04}"]
        harn(binary, root, *args)


def time_list(binary, root, runs, items):
    cmd = [binary, "work", "list", "--json", "--root", root]
    listed = json.loads(subprocess.run(cmd, capture_output=True, check=True).stdout)
    if len(listed["items"]) != items or listed["warnings"]:
        sys.exit(f"expected {items} items and no warnings, got {len(listed['items'])} "
                 f"and {listed['warnings'][:3]}")
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harn", default=DEFAULT_HARN, help="the harn binary (default: target/release/harn)")
    p.add_argument("--items", type=int, default=1000, help="work items per ledger (default 1000)")
    p.add_argument("--runs", type=int, default=31, help="timed runs per ledger (default 31)")
    p.add_argument("--json", action="store_true", help="print every sample as JSON")
    a = p.parse_args()
    if not os.access(a.harn, os.X_OK):
        sys.exit(f"{a.harn}: not an executable; run `cargo build --release -p harn` first")
    results = {}
    for name, chain in (("independent", False), ("chain", True)):
        with tempfile.TemporaryDirectory(prefix="harn-work-list-") as root:
            print(f"building {a.items} {name} items ...", file=sys.stderr)
            build_ledger(a.harn, root, a.items, chain)
            results[name] = time_list(a.harn, root, a.runs, a.items)
    if a.json:
        print(json.dumps(results))
    else:
        print("| ledger | median ms | min ms | max ms | target ms |")
        print("|---|---|---|---|---|")
        for name, s in results.items():
            print(f"| {name} ({a.items} items) | {statistics.median(s):.1f} | {min(s):.1f} "
                  f"| {max(s):.1f} | {TARGETS_MS[name]:.0f} |")
    missed = [n for n, s in results.items() if statistics.median(s) > TARGETS_MS[n]]
    for n in missed:
        print(f"target missed: {n}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
