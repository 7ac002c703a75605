#!/usr/bin/env python3
"""Times harn's read verbs at scale against the physical floor measured in the same run.

Builds two roots with the real binary (or reuses them from --data): "items", N independent
work items in groups of ten with a goal on each group (the tenth item depends on the other
nine and roots the goal), and "chain", a chain of C items each depending on the one before,
with a goal on the last. Then it times, alternately, each verb and the floor: one `cat` of
every file a read without an index would have to read (every record file under the root's
`.harnery/work` and `.harnery/supervisors`). A verb's figure is its median over --runs runs;
its ratio is that median over the floor's median in the same run, so a slower or busier
machine moves both. --check and --record use the lower quartiles instead, which move least
when the machine is busy.

    cargo build --release -p harn
    python3 benches/scale/scale.py                        # 10,000 items, 1,000 goals, chain of 1,000
    python3 benches/scale/scale.py --items 2000 --check benches/scale/baseline.json   # CI

--check compares the ratios with the recorded ones and exits 1 when any ratio grew by more
than a third, or their geometric mean by more than a fifth (so a build 30 % slower in every
verb fails, and one noisy verb does not), after measuring up to twice more when the first look
fails, each verb keeping its lowest ratio of any look (a neighbour busy for one measurement
slows only it); --record writes the ratios measured. --slower F
makes every harn command take F more of its own time (it waits that long after it), which
is how the check is shown to catch a slower build. Standard library only; roots built in
temporary directories are removed at the end unless --data keeps them.
"""

import argparse
import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_HARN = os.path.join(REPO, "target", "release", "harn")
# A marker a built root carries, so --data reuses only a root built for the same shape.
MARKER = "scale-bench.json"
# How much a ratio, and the ratios' geometric mean, may grow before --check fails.
GROWTH_ONE = 1.0 / 3.0
GROWTH_MEAN = 0.2
# How many measurements --check takes at most before it fails.
LOOKS = 3


def harn(binary, root, *args):
    out = subprocess.run([binary, *args, "--root", root], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"harn {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def prepare(root):
    os.makedirs(os.path.join(root, ".harnery"), exist_ok=True)
    with open(os.path.join(root, "wf.sh"), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(root, "wf.sh"), 0o755)
    shutil.copy(os.path.join(REPO, "examples", "team.json"), os.path.join(root, "team.json"))
    # The team names the scripted harness; nothing here runs it.
    shutil.copy(os.path.join(REPO, "examples", "harnesses", "scripted.sh"), os.path.join(root, "harness.sh"))
    with open(os.path.join(root, ".harnery", "config.json"), "w") as f:
        f.write('{"harnesses": {"scripted": {"command": ["./harness.sh"]}}}\n')


def create(binary, root, wid, deps=()):
    args = ["work", "create", f"Item {wid}", "wf.sh", "--objective", f"Objective {wid}",
            "--accept", "tests pass", "--id", wid, "--actor", "bench", "--quiet"]
    for d in deps:
        args += ["--depends-on", d]
    harn(binary, root, *args)


def build_items(binary, root, items):
    prepare(root)
    for g in range(items // 10):
        members = [f"w{g:04}-{k}" for k in range(10)]
        for wid in members[:9]:
            create(binary, root, wid)
        create(binary, root, members[9], members[:9])
        harn(binary, root, "supervisor", "create", members[9], "--team", "team.json",
             "--id", f"g{g:04}")
        if g % 100 == 99:
            print(f"  {(g + 1) * 10} items", file=sys.stderr)


def build_chain(binary, root, items):
    prepare(root)
    for i in range(items):
        create(binary, root, f"c{i:04}", [f"c{i - 1:04}"] if i else [])
    harn(binary, root, "supervisor", "create", f"c{items - 1:04}", "--team", "team.json",
         "--id", "chain")


def root_for(data, name, shape, build, binary):
    """A root of `shape`, reused from `data` when one of that shape is there."""
    if data is None:
        root = tempfile.mkdtemp(prefix=f"harn-scale-{name}-")
    else:
        root = os.path.join(data, name)
        try:
            with open(os.path.join(root, MARKER)) as f:
                if json.load(f) == shape:
                    return root, False
        except (OSError, ValueError):
            pass
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
    print(f"building {name} {shape} ...", file=sys.stderr)
    started = time.perf_counter()
    build(binary, root)
    print(f"  built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    with open(os.path.join(root, MARKER), "w") as f:
        json.dump(shape, f)
    return root, data is None


# Beside the records, and not in the floor: locks, and a history's witness of its length
# (`events.reach`, a few bytes a full read checks), so the floor stays what it was recorded as.
NOT_RECORDS = ("events.reach",)


def record_files(root):
    files = []
    for top in ("work", "supervisors"):
        for d, _, names in os.walk(os.path.join(root, ".harnery", top)):
            files.extend(os.path.join(d, n) for n in names
                         if not n.endswith(".lock") and n not in NOT_RECORDS)
    return sorted(files)


class Timer:
    """Runs commands and times them; harn's are made `slower` by waiting after them."""

    def __init__(self, binary, slower):
        self.binary, self.slower = binary, slower

    def sample(self, cmd):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        ms = (time.perf_counter() - start) * 1000.0
        if self.slower and cmd[0] == self.binary:
            until = time.perf_counter() + ms * self.slower / 1000.0
            while time.perf_counter() < until:
                pass
            ms = (time.perf_counter() - start) * 1000.0
        return ms


def timed(timer, verbs, floor, runs):
    """Medians of each verb and of the floor, run alternately, after one warm-up each. A verb
    is a command, or a callable taking the timer (for one that needs a fresh root each run)."""
    run = lambda v: v(timer) if callable(v) else timer.sample(v)
    timer.sample(floor)
    for v in verbs.values():
        run(v)
    samples = {name: [] for name in verbs}
    floors = []
    for _ in range(runs):
        floors.append(timer.sample(floor))
        for name, v in verbs.items():
            samples[name].append(run(v))
    return {n: figures(s) for n, s in samples.items()}, figures(floors)


def figures(samples):
    """The median (what the tables show) and the lower quartile (what --check compares: it
    moves least when the machine is busy, since interference only ever adds time)."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[(len(ordered) - 1) // 4]


# Items created by the timing of `work create`, numbered across measurements so a second look
# makes new ones.
CREATED = itertools.count(1)


def creating(binary, root, tail):
    """`work create --depends-on` at the chain's end with its default output, each run a new
    item, cancelled after (so the chain's goal is not changed by it)."""
    def once(timer):
        wid = f"new-{os.getpid()}-{next(CREATED)}"
        cmd = [binary, "work", "create", "New", "wf.sh", "--objective", "more",
               "--id", wid, "--depends-on", tail, "--root", root]
        ms = timer.sample(cmd)
        subprocess.run([binary, "work", "cancel", wid, "--root", root],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return ms

    return once


def measure(timer, items, chain, a):
    binary = timer.binary

    def verb(root, *args):
        return [binary, *args, "--root", root]

    last = f"c{a.chain - 1:04}"
    groups = {
        "items": (items, {
            "work list --json": verb(items, "work", "list", "--json"),
            "work show --json": verb(items, "work", "show", "w0000-9", "--json"),
            "work reconcile (unchanged)": verb(items, "work", "reconcile", "--json"),
            "supervisor list --json": verb(items, "supervisor", "list", "--json"),
            "supervisor show --json": verb(items, "supervisor", "show", "g0000", "--json"),
            "--help": [binary, "--help"],
        }),
        "chain": (chain, {
            "chain: supervisor show --json": verb(chain, "supervisor", "show", "chain", "--json"),
            "chain: work show --json": verb(chain, "work", "show", last, "--json"),
            "chain: work create --depends-on": creating(binary, chain, last),
        }),
    }
    verbs = {}
    for name, (root, cmds) in groups.items():
        files = record_files(root)
        floor = ["cat", *files]
        print(f"timing {name}: {len(files):,} record files ...", file=sys.stderr)
        measured, (floor_ms, floor_low) = timed(timer, cmds, floor, a.runs)
        for n, (ms, low) in measured.items():
            verbs[n] = {"ms": ms, "floor_ms": floor_ms, "ratio": ms / floor_ms,
                        "low_ratio": low / floor_low}
    return {"verbs": verbs}


def check(results, shape, baseline_path):
    """Exit status 1 when a ratio grew past the recorded one by more than GROWTH_ONE, or the
    geometric mean of the growths by more than GROWTH_MEAN."""
    with open(baseline_path) as f:
        baseline = json.load(f)
    if baseline["shape"] != shape:
        sys.exit(f"{baseline_path} was recorded for {baseline['shape']}, not {shape}")
    growth = {n: results["verbs"][n]["low_ratio"] / r for n, r in baseline["ratios"].items()}
    mean = math.exp(sum(math.log(g) for g in growth.values()) / len(growth))
    failed = [f"{n}: ratio {results['verbs'][n]['low_ratio']:.4f}, recorded "
              f"{baseline['ratios'][n]:.4f} ({g - 1:+.0%}, allowed +{GROWTH_ONE:.0%})"
              for n, g in growth.items() if g > 1 + GROWTH_ONE]
    if mean > 1 + GROWTH_MEAN:
        failed.append(f"every verb together: {mean - 1:+.0%} (allowed +{GROWTH_MEAN:.0%})")
    for line in failed:
        print(f"slower than recorded: {line}", file=sys.stderr)
    if not failed:
        print(f"within what {baseline_path} allows: growth of the geometric mean "
              f"{mean - 1:+.0%}, largest "
              f"{max(growth.values()) - 1:+.0%} ({max(growth, key=growth.get)})",
              file=sys.stderr)
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harn", default=DEFAULT_HARN, help="the harn binary (default: target/release/harn)")
    p.add_argument("--items", type=int, default=10000, help="independent items, in goals of ten (default 10000)")
    p.add_argument("--chain", type=int, default=1000, help="items in the chain (default 1000)")
    p.add_argument("--runs", type=int, default=15, help="timed runs of each verb (default 15)")
    p.add_argument("--data", help="keep the built roots here and reuse them next time")
    p.add_argument("--check", metavar="BASELINE", help="exit 1 when the ratios grew past the recorded ones")
    p.add_argument("--record", metavar="BASELINE", help="write the ratios measured to this file")
    p.add_argument("--slower", type=float, default=0.0, metavar="F",
                   help="make every harn command take F more of its own time (default 0)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = p.parse_args()
    binary = os.path.abspath(a.harn)
    if not os.access(binary, os.X_OK):
        sys.exit(f"{binary}: not an executable; run `cargo build --release -p harn` first")
    if a.items < 10 or a.items % 10:
        sys.exit("--items must be a positive multiple of ten")
    shape = {"items": a.items, "chain": a.chain}
    items, drop_items = root_for(a.data, "items", {"items": a.items},
                                 lambda b, r: build_items(b, r, a.items), binary)
    chain, drop_chain = root_for(a.data, "chain", {"chain": a.chain},
                                 lambda b, r: build_chain(b, r, a.chain), binary)
    try:
        results = measure(Timer(binary, a.slower), items, chain, a)
        report(results, shape, a)
        status = check(results, shape, a.check) if a.check else 0
        for _ in range(LOOKS - 1):
            if not (status and a.check):
                break
            # Another look: a neighbour busy for the length of one measurement slows it
            # alone, while a slower build is slower in every look. Interference only ever
            # adds time, so each verb keeps the lowest ratio any look found.
            print("measuring again before failing ...", file=sys.stderr)
            again = measure(Timer(binary, a.slower), items, chain, a)
            report(again, shape, a)
            for name, r in again["verbs"].items():
                kept = results["verbs"][name]
                kept["low_ratio"] = min(kept["low_ratio"], r["low_ratio"])
            status = check(results, shape, a.check)
    finally:
        for root, drop in ((items, drop_items), (chain, drop_chain)):
            if drop:
                shutil.rmtree(root, ignore_errors=True)
    if a.record:
        with open(a.record, "w") as f:
            json.dump({"shape": shape, "ratios": {n: round(r["low_ratio"], 5)
                                                  for n, r in results["verbs"].items()}}, f, indent=2)
            f.write("\n")
    return status


def report(results, shape, a):
    results["shape"] = shape
    if a.json:
        print(json.dumps(results, indent=2))
        return
    print(f"| read ({a.items:,} items, {a.items // 10:,} goals; chain of {a.chain:,}) "
          "| median ms | floor ms | ratio |")
    print("|---|---|---|---|")
    for name, r in results["verbs"].items():
        print(f"| `{name}` | {r['ms']:.1f} | {r['floor_ms']:.1f} | {r['ratio']:.4f} |")


if __name__ == "__main__":
    sys.exit(main())
