#!/usr/bin/env python3
"""A crash storm: N harnesses that exit at once (`false`), configured to restart as fast as
anything may ask (`restart_delay_ms = 0`, `restart_delay_max_ms = 0`, `give_up_after = 0`).
The daemon restarts them no faster than its floor; this measures whether it stays answerable
while it does: the latency of `harn harness list --json` over repeated calls (median, p99,
worst), then that `down` stops everything, and that SIGTERM to the daemon ends it within a
second. Standard library only; everything started is stopped and the root removed.

    cargo build --release -p harn
    python3 benches/harness/storm.py --harnesses 500
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_HARN = os.path.join(REPO, "target", "release", "harn")


def harn(binary, root, *args, timeout=60):
    return subprocess.run([binary, "harness", *args, "--root", root],
                          capture_output=True, text=True, timeout=timeout)


def daemon_pid(binary, root):
    out = harn(binary, root, "list", "--json")
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)["daemon"]["pid"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harn", default=DEFAULT_HARN)
    p.add_argument("--harnesses", type=int, default=500)
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--storm-secs", type=float, default=3.0, help="let the storm run first")
    p.add_argument("--check", action="store_true",
                   help="fail unless list's p99 is under 100 ms and SIGTERM ends it within 1 s")
    a = p.parse_args()
    root = tempfile.mkdtemp(prefix="harn-storm-")
    try:
        lines = ["[limits]", "restart_delay_ms = 0", "restart_delay_max_ms = 0",
                 "give_up_after = 0", ""]
        for i in range(a.harnesses):
            lines += [f"[harness.h{i}]", 'command = ["false"]', ""]
        with open(os.path.join(root, "harness.toml"), "w") as f:
            f.write("\n".join(lines))
        # `up` waits for the harnesses, which never stay up: its answer does not matter here.
        harn(a.harn, root, "up", "--timeout", "2", timeout=120)
        time.sleep(a.storm_secs)
        took, failed = [], 0
        for _ in range(a.calls):
            t = time.monotonic()
            out = harn(a.harn, root, "list", "--json")
            took.append((time.monotonic() - t) * 1000)
            failed += out.returncode != 0
        took.sort()
        p99 = took[min(len(took) - 1, int(len(took) * 0.99))]
        doc = json.loads(harn(a.harn, root, "list", "--json").stdout)
        restarts = sum(h.get("restarts", 0) for h in doc["harnesses"])
        print(f"{a.harnesses} harnesses crashing: list --json median {statistics.median(took):.1f} ms, "
              f"p99 {p99:.1f} ms, worst {took[-1]:.1f} ms, {failed} failed of {a.calls}; "
              f"{restarts} restarts so far")
        t = time.monotonic()
        down = harn(a.harn, root, "down", timeout=120)
        down_ms = (time.monotonic() - t) * 1000
        print(f"down: exit {down.returncode} in {down_ms:.0f} ms")
        # SIGTERM: start again, storm, and time the daemon's end.
        harn(a.harn, root, "up", "--timeout", "2", timeout=120)
        time.sleep(a.storm_secs)
        pid = daemon_pid(a.harn, root)
        t = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        while os.path.exists(f"/proc/{pid}") and time.monotonic() - t < 30:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break
            except OSError:
                break
            time.sleep(0.005)
        term_ms = (time.monotonic() - t) * 1000
        print(f"SIGTERM: the daemon ended in {term_ms:.0f} ms")
        ok = failed == 0 and down.returncode == 0
        if a.check and (p99 >= 100 or term_ms >= 1000):
            print("check failed: list p99 must stay under 100 ms and SIGTERM within 1 s")
            ok = False
        return 0 if ok else 1
    finally:
        harn(a.harn, root, "down", timeout=120)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
