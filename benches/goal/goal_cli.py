#!/usr/bin/env python3
"""Times the supervisor as whole processes: `harn supervisor show --json` on a goal whose
graph is a chain of 1,000 work items (target <= 50 ms median), and `harn supervisor tick` of
a one-item goal with the scripted harness and the example workflow (target <= 50 ms median,
which includes starting harn, the workflow and the harness). Each is run --runs times after a
warm-up; the median and spread are printed and checked. Exit status 1 when a target is
missed. Standard library only; temporary directories are removed at the end.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
# Run by its path, this script has only its own folder on the import path, not benches/.
sys.path.insert(0, os.path.dirname(HERE))
from cli_timing import check_targets, parse, parser, time_runs  # noqa: E402

TARGETS_MS = {"show (chain of 1000)": 50.0, "tick (one item)": 50.0}


def harn(binary, root, *args):
    out = subprocess.run([binary, *args, "--root", root], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"harn {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def timed(cmd, runs):
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)  # warm-up
    return time_runs(cmd, runs)


def setup(root):
    shutil.copy(os.path.join(REPO, "examples", "workflows", "agent-review.sh"), os.path.join(root, "wf.sh"))
    shutil.copy(os.path.join(REPO, "examples", "harnesses", "scripted.sh"), os.path.join(root, "harness.sh"))
    shutil.copy(os.path.join(REPO, "examples", "team.json"), os.path.join(root, "team.json"))
    os.makedirs(os.path.join(root, ".harnery"), exist_ok=True)
    with open(os.path.join(root, ".harnery", "config.json"), "w") as f:
        f.write('{"harnesses": {"scripted": {"command": ["./harness.sh"]}}}\n')


def bench_show(binary, runs, items):
    with tempfile.TemporaryDirectory(prefix="harn-goal-show-") as root:
        setup(root)
        print(f"building a chain of {items} items ...", file=sys.stderr)
        for i in range(items):
            args = ["work", "create", f"Item {i}", "wf.sh", "--objective", f"Objective {i}",
                    "--id", f"w{i:04}", "--actor", "bench"]
            if i > 0:
                args += ["--depends-on", f"w{i - 1:04}"]
            harn(binary, root, *args)
        harn(binary, root, "supervisor", "create", f"w{items - 1:04}", "--team", "team.json", "--id", "chain")
        shown = json.loads(harn(binary, root, "supervisor", "show", "chain", "--json"))
        if len(shown["work"]) != items:
            sys.exit(f"expected {items} items in the graph, got {len(shown['work'])}")
        return timed([binary, "supervisor", "show", "chain", "--json", "--root", root], runs)


def bench_tick(binary, runs):
    samples = []
    for n in range(runs + 1):
        with tempfile.TemporaryDirectory(prefix="harn-goal-tick-") as root:
            setup(root)
            harn(binary, root, "work", "create", "One", "wf.sh", "--objective", "do it", "--id", "one")
            harn(binary, root, "supervisor", "create", "one", "--team", "team.json", "--id", "g")
            cmd = [binary, "supervisor", "tick", "g", "--harness", "scripted", "--root", root]
            start = time.perf_counter()
            out = subprocess.run(cmd, capture_output=True, text=True)
            elapsed = (time.perf_counter() - start) * 1000.0
            if out.returncode != 0 or "dispatch one" not in out.stdout:
                sys.exit(f"the tick did not dispatch: {out.stdout}{out.stderr}")
            if n > 0:  # the first is the warm-up
                samples.append(elapsed)
    return samples


def main():
    p = parser(__doc__)
    p.add_argument("--items", type=int, default=1000, help="items in the chain (default 1000)")
    p.add_argument("--runs", type=int, default=21, help="timed runs (default 21)")
    a = parse(p)
    results = {
        "show (chain of 1000)": bench_show(a.harn, a.runs, a.items),
        "tick (one item)": bench_tick(a.harn, a.runs),
    }
    print("| command | median ms | min ms | max ms | target ms |")
    print("|---|---|---|---|---|")
    for name, s in results.items():
        print(f"| {name} | {statistics.median(s):.1f} | {min(s):.1f} | {max(s):.1f} | {TARGETS_MS[name]:.0f} |")
    return check_targets(results, TARGETS_MS)


if __name__ == "__main__":
    sys.exit(main())
