#!/usr/bin/env python3
"""Times each page of `harn web` on a root of N work items (10,000 by default) in groups of
ten with a goal on each group, as benches/scale/scale.py builds it, plus one item that ran
(so a run's page and its proof have something to show) and one run parked on an approval.

Starts the real server on 127.0.0.1, logs in with the address it prints, and asks each page
--runs times in turn, each on a fresh connection as a browser's first request is (the door
places every connection's peer by its socket and the cgroup of its holder, so that cost is in
every figure). The server reads every item and goal once as it starts, and then keeps what it
read while its files are unchanged (as `harn dash` does); the bench waits --settle seconds
after logging in, as a person opening the address does, then gives the first request of each
page apart from the rest: the median and the 90th percentile of the rest, and the first.

    cargo build --release -p harn
    python3 benches/web/pages.py --data /tmp/harn-web-bench          # 10,000 items (builds
                                                                      # the root once, ~4 min)
    python3 benches/web/pages.py --items 2000 --check                 # exit 1 past 100 ms

--check exits 1 when a page's median is 100 ms or more. Standard library only.
"""

import argparse
import http.client
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "benches", "scale"))
import scale  # noqa: E402  (its root builder, so both benches read the same shape)

LIMIT_MS = 100.0


def harn(binary, root, *args, ok=True):
    out = subprocess.run([binary, *args, "--root", root], capture_output=True, text=True)
    if ok and out.returncode != 0:
        sys.exit(f"harn {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


def build(items):
    def go(binary, root):
        scale.build_items(binary, root, items)
        # One item that ran, and one run parked on an approval.
        harn(binary, root, "work", "create", "Ran", "wf.sh", "--objective", "o", "--id", "ran")
        harn(binary, root, "work", "run", "ran", ok=False)
        shutil.copy(os.path.join(REPO, "examples", "workflows", "ship.sh"), os.path.join(root, "ship.sh"))
        shutil.copy(os.path.join(REPO, "examples", "policy.json"), os.path.join(root, "policy.json"))
        harn(binary, root, "work", "create", "Ship", "ship.sh", "--objective", "o", "--id", "ship")
        harn(binary, root, "work", "run", "ship", "--harness", "scripted", "--policy", "policy.json", ok=False)
    return go


class Server:
    def __init__(self, binary, root):
        self.proc = subprocess.Popen([binary, "web", "--root", root], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        login = self.proc.stdout.readline().strip()
        m = re.match(r"http://([\d.]+):(\d+)(/login\?key=\w+)$", login)
        if not m:
            self.proc.kill()
            sys.exit(f"harn web printed {login!r}")
        self.host, self.port = m.group(1), int(m.group(2))
        status, headers, _ = self.get(m.group(3))
        if status != 303:
            sys.exit(f"login: {status}")
        self.cookie = headers["set-cookie"].split(";")[0]

    def get(self, path, cookie=None):
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        headers = {"Host": f"{self.host}:{self.port}"}
        if cookie:
            headers["Cookie"] = cookie
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--items", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--data", help="keep the root here and reuse it")
    p.add_argument("--settle", type=float, default=3.0, help="seconds between the login and the first page")
    p.add_argument("--harn", default=scale.DEFAULT_HARN)
    p.add_argument("--check", action="store_true", help=f"exit 1 when a median is {LIMIT_MS:.0f} ms or more")
    a = p.parse_args()
    shape = {"items": a.items, "web": 1}
    root, temporary = scale.root_for(a.data, "web", shape, build(a.items), a.harn)
    try:
        run = scale.harn(a.harn, root, "work", "show", "ran", "--json")
        run_id = re.search(r'"latest_run_id":\s*"([^"]+)"', run).group(1)
        pages = ["/", "/items", "/items?state=ready&from=200", "/items/w0500-9", "/goals/g0500",
                 f"/runs/{run_id}", f"/runs/{run_id}/proof", "/approvals", "/harnesses",
                 "/items/ship"]
        server = Server(a.harn, root)
        time.sleep(a.settle)
        try:
            first = {}
            times = {page: [] for page in pages}
            for n in range(a.runs + 1):
                for page in pages:
                    started = time.perf_counter()
                    status, _, body = server.get(page, server.cookie)
                    ms = (time.perf_counter() - started) * 1000
                    if status != 200:
                        sys.exit(f"{page}: {status} {body[:300]!r}")
                    if n == 0:
                        first[page] = ms
                    else:
                        times[page].append(ms)
        finally:
            server.stop()
    finally:
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
    print(f"harn web, {a.items:,} items in groups of ten with a goal on each; "
          f"{a.runs} requests a page, each on a new connection, from {a.settle:g} s after the login")
    print(f"| page | median | p90 | first request |")
    print(f"|---|---|---|---|")
    worst = 0.0
    for page in pages:
        t = sorted(times[page])
        median = statistics.median(t)
        p90 = t[min(len(t) - 1, int(len(t) * 0.9))]
        worst = max(worst, median)
        print(f"| `{page}` | {median:.1f} ms | {p90:.1f} ms | {first[page]:.1f} ms |")
    if a.check and worst >= LIMIT_MS:
        sys.exit(f"a page's median is {worst:.1f} ms, at or past {LIMIT_MS:.0f} ms")


if __name__ == "__main__":
    main()
