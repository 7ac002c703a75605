#!/usr/bin/env python3
"""Measures the supervisor service idle: 100 enrolled goals, each blocked on a cancelled work
item (so quiescent), ticked by a daemon with the default intervals (a sweep every 5 s, a
heartbeat every 2 s). After a warm-up, CPU time (user + system, all threads, from
/proc/PID/stat) and resident memory (VmRSS, and the peak VmHWM, from /proc/PID/status) are
read over --seconds. Targets: <= 0.1 % of one core and <= 15 MiB resident. Exit status 1 when
one is missed. Standard library only; the daemon is stopped and the root removed at the end.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from common import DEFAULT_HARN, harn, quiescent_goals

CPU_TARGET_PCT = 0.1
RSS_TARGET_KIB = 15 * 1024


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def memory_kib(pid):
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    return values["VmRSS"], values["VmHWM"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--harn", default=DEFAULT_HARN)
    p.add_argument("--goals", type=int, default=100)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--warmup", type=float, default=12.0)
    a = p.parse_args()
    root = tempfile.mkdtemp(prefix="harn-idle-")
    try:
        goals = quiescent_goals(a.harn, root, a.goals)
        harn(a.harn, root, "supervisor", "service", "start", *goals)
        pid = int(open(os.path.join(root, ".harnery", "supervisor-service", "status.json")).read().split('"pid":')[1].split(",")[0])
        time.sleep(a.warmup)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(a.seconds)
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        rss, peak = memory_kib(pid)
        pct = (cpu1 - cpu0) / (t1 - t0) * 100.0
        print(f"goals {a.goals}, idle {t1 - t0:.1f} s: cpu {pct:.3f} % of a core "
              f"(target <= {CPU_TARGET_PCT} %), rss {rss / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB "
              f"(target <= {RSS_TARGET_KIB / 1024:.0f} MiB)")
        missed = pct > CPU_TARGET_PCT or rss > RSS_TARGET_KIB
    finally:
        subprocess.run([a.harn, "supervisor", "service", "stop", "--timeout", "10", "--root", root],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
