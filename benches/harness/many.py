#!/usr/bin/env python3
"""Starts and stops many harnesses under one daemon, with the usual soft descriptor limit of
1,024 (the daemon raises it to the hard limit), and measures: `harn harness up` until every
harness runs, `list --json` latency (median of repeated calls), the daemon's resident and
proportional memory, and `harn harness down` until every child is gone. Standard library
only; the daemon is stopped and the root removed at the end, even on failure.

    cargo build --release -p harn
    python3 benches/harness/many.py --harnesses 1000
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_HARN = os.path.join(REPO, "target", "release", "harn")
CHILD = os.path.join(REPO, "tests", "fixtures", "child.sh")


def run(args, limit=None, timeout=120):
    prefix = ["prlimit", f"--nofile={limit}", "--"] if limit else []
    return subprocess.run(prefix + args, capture_output=True, text=True, timeout=timeout)


def listing(binary, root):
    out = run([binary, "harness", "list", "--json", "--root", root])
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)


def memory_kib(pid):
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def alive_children(marker):
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    with open(f"/proc/{pid}/stat") as s:
                        if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                            n += 1
        except OSError:
            pass
    return n


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--harn", default=DEFAULT_HARN)
    p.add_argument("--harnesses", type=int, default=1000)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    hard = 524288 if hard == resource.RLIM_INFINITY else min(hard, 524288)
    p.add_argument("--nofile", default=f"1024:{hard}", help="soft:hard descriptor limit the daemon starts with (default 1024 and this shell's hard limit, at most 524288)")
    p.add_argument("--list-calls", type=int, default=11)
    a = p.parse_args()
    if shutil.which("prlimit") is None:
        sys.exit("prlimit (util-linux) is needed")
    root = tempfile.mkdtemp(prefix="harn-many-")
    marker = f"77{os.getpid() % 10000:04d}"
    try:
        with open(os.path.join(root, "harness.toml"), "w") as f:
            for n in range(a.harnesses):
                f.write(f'[harness.h{n}]\ncommand = ["{CHILD}", "run", "{marker}"]\n')
        t0 = time.monotonic()
        out = run([a.harn, "harness", "up", "--root", root], limit=a.nofile)
        if out.returncode != 0:
            sys.exit(f"up failed: {out.stdout}{out.stderr}")
        running = 0
        while time.monotonic() - t0 < 300:
            doc = listing(a.harn, root)
            if doc is None:
                sys.exit("the daemon is gone: " + open(os.path.join(root, ".harnery/harness/daemon.log")).read()[-2000:])
            running = sum(1 for h in doc["harnesses"] if h["state"] == "running")
            if running == a.harnesses:
                break
            time.sleep(0.1)
        up_s = time.monotonic() - t0
        if running != a.harnesses:
            sys.exit(f"only {running} of {a.harnesses} harnesses ran after {up_s:.0f} s")
        daemon = doc["daemon"]["pid"]
        with open(f"/proc/{daemon}/limits") as f:
            nofile = next(l for l in f if l.startswith("Max open files")).split()[3:5]
        time.sleep(1)
        rss, pss = memory_kib(daemon)
        fds = len(os.listdir(f"/proc/{daemon}/fd"))
        lists = []
        for _ in range(a.list_calls):
            t = time.monotonic()
            listing(a.harn, root)
            lists.append((time.monotonic() - t) * 1000)
        # `stop` and `start` of every harness at once, each waiting until all are there.
        names = [f"h{n}" for n in range(a.harnesses)]
        t = time.monotonic()
        stopped = run([a.harn, "harness", "stop", *names, "--root", root], timeout=300)
        stop_s = time.monotonic() - t
        t = time.monotonic()
        started = run([a.harn, "harness", "start", *names, "--root", root], timeout=300)
        start_s = time.monotonic() - t
        if stopped.returncode != 0 or started.returncode != 0:
            sys.exit(f"stop/start failed: {stopped.stderr}{started.stderr}")
        t = time.monotonic()
        out = run([a.harn, "harness", "down", "--root", root], timeout=300)
        down_s = time.monotonic() - t
        left = alive_children(marker)
        print(f"harnesses: {a.harnesses} (daemon started with nofile {a.nofile}; its limit is {nofile[0]} soft, {nofile[1]} hard)")
        print(f"up until every harness runs: {up_s:.2f} s")
        print(f"daemon: {fds} descriptors, RSS {rss / 1024:.1f} MiB, PSS {pss / 1024:.1f} MiB")
        print(f"list --json: median {statistics.median(lists):.1f} ms over {len(lists)} calls")
        print(f"stop of all, waiting until stopped: {stop_s:.2f} s; start of all, waiting until running: {start_s:.2f} s")
        print(f"down: {down_s:.2f} s (exit {out.returncode}); children left: {left}")
        if out.returncode != 0 or left:
            sys.exit("down did not stop everything")
    finally:
        run([a.harn, "harness", "down", "--timeout", "5", "--root", root], timeout=60)
        subprocess.run(["pkill", "-9", "-f", marker], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
