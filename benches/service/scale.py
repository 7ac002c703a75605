#!/usr/bin/env python3
"""Enrolls 10,000 goals (each blocked on a cancelled work item, so quiescent) in one service
and measures what that costs: `service start` until running, the first sweep (every goal read
in full), later sweeps (through the read cache), `service status --json`, and the daemon's
resident memory. The reference tool refuses more than 100 goals. Standard library only; the
daemon is stopped and the root removed at the end. Setup runs about 30,000 short commands.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from common import DEFAULT_HARN, harn, quiescent_goals



def status(binary, root):
    return json.loads(harn(binary, root, "supervisor", "service", "status", "--json"))


def wait_sweeps(binary, root, n, limit_s=600):
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        s = status(binary, root)["status"] or {}
        if s.get("sweep_count", 0) >= n:
            return
        time.sleep(0.05)
    sys.exit(f"no sweep {n} within {limit_s} s")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--harn", default=DEFAULT_HARN)
    p.add_argument("--goals", type=int, default=10_000)
    a = p.parse_args()
    root = tempfile.mkdtemp(prefix="harn-scale-")
    try:
        began = time.monotonic()
        goals = quiescent_goals(a.harn, root, a.goals)
        print(f"setup: {a.goals} goals in {time.monotonic() - began:.0f} s")
        t0 = time.monotonic()
        harn(a.harn, root, "supervisor", "service", "start", *goals, "--wake-interval-ms", "2000")
        t1 = time.monotonic()
        wait_sweeps(a.harn, root, 1)
        t2 = time.monotonic()
        wait_sweeps(a.harn, root, 3)
        s = status(a.harn, root)
        pid = s["status"]["pid"]
        states = {w["state"] for w in s["runtime"]["goals"].values()}
        t3 = time.monotonic()
        status(a.harn, root)
        t4 = time.monotonic()
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))
        events = os.path.join(root, ".harnery", "supervisor-service", "events.jsonl")
        print(f"start: {(t1 - t0) * 1000:.0f} ms until running; first sweep done "
              f"{(t2 - t0):.1f} s after start; wake states {sorted(states)}")
        print(f"later sweeps: {s['status'].get('last_sweep_ms')} ms each (through the read cache)")
        print(f"status --json: {(t4 - t3) * 1000:.0f} ms; daemon rss {rss / 1024:.1f} MiB; "
              f"audit {os.path.getsize(events)} bytes")
        with open(os.path.join(root, ".harnery", "supervisor-service", "service.log")) as f:
            print("log tail:", f.read().splitlines()[-1][:160])
    finally:
        subprocess.run([a.harn, "supervisor", "service", "stop", "--timeout", "10", "--root", root],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
