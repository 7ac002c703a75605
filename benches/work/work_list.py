#!/usr/bin/env python3
"""Times `harn work list --json` as a whole process over 1,000 work items.

Two ledgers are built with `harn work create` in temporary directories: 1,000 independent
items, and a dependency chain of 1,000 items where each depends on the one before (so every
item's projection needs its prerequisite's). Each listing is run --runs times after one
warm-up run; the median and the spread are printed, then checked against the targets
(independent <= 50 ms, chain <= 100 ms). Exit status 1 when a target is missed.
Standard library only; the temporary directories are removed at the end.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# Run by its path, this script has only its own folder on the import path, not benches/.
sys.path.insert(0, os.path.dirname(HERE))
from cli_timing import check_targets, parse, parser, time_runs  # noqa: E402

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
    return time_runs(cmd, runs)


def main():
    p = parser(__doc__)
    p.add_argument("--items", type=int, default=1000, help="work items per ledger (default 1000)")
    p.add_argument("--runs", type=int, default=31, help="timed runs per ledger (default 31)")
    p.add_argument("--json", action="store_true", help="print every sample as JSON")
    a = parse(p)
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
    return check_targets(results, TARGETS_MS)


if __name__ == "__main__":
    sys.exit(main())
