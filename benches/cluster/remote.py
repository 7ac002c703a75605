"""What running attempts on a Slurm cluster costs and gives: a remote segment's own overhead over
a local worktree run, and twelve ten-second items of a goal on one node against three.

Needs the test cluster (.ci/slurm/cluster.sh start; SLURM_CONF exported) and a release build.
The overhead is the median wall time of `harn work run ID --cluster lab` minus that of `harn
work run ID --isolation worktree`, alternating, for an item whose workflow writes a file and
commits it: submission, the node's clone, the relay, the push, the coordinator's fetch and
attestation. The scale-out is `harn supervisor run` of a goal of twelve items each sleeping ten
seconds (its root item quick), with --max-parallel-work 12, on the partition `one` (n1 alone)
and on the default one (n1 to n3); each segment asks for a quarter of a node's CPUs, so a node
holds four at once whatever the machine.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cli_timing  # noqa: E402

QUICK = """#!/bin/sh
read start
echo "$HARN_WORK_ID" > "out-$HARN_WORK_ID.txt"
git add "out-$HARN_WORK_ID.txt" && git -c user.name=b -c user.email=b@b commit -qm "$HARN_WORK_ID"
echo '{"op":"result","ok":true,"summary":"committed"}'
"""

SLEEPY = """#!/bin/sh
read start
sleep 10
echo '{"op":"result","ok":true,"summary":"slept"}'
"""


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def node_cpus():
    """The CPUs Slurm gives node n1."""
    out = subprocess.run(["scontrol", "show", "node", "n1"], capture_output=True, text=True, check=True)
    for word in out.stdout.split():
        if word.startswith("CPUTot="):
            return int(word.split("=", 1)[1])
    sys.exit("scontrol show node n1: no CPUTot")


class Root:
    """A coordinator's root: a clone of a bare repository the nodes clone and push to."""

    def __init__(self, harn, tmp):
        self.harn = harn
        self.dir = tmp
        git(tmp, "init", "-q", "--bare", "remote.git")
        git(tmp, "clone", "-q", "remote.git", "repo")
        self.repo = os.path.join(tmp, "repo")
        git(self.repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "base")
        git(self.repo, "push", "-q", "origin", "HEAD")
        os.makedirs(os.path.join(self.repo, ".harnery"))
        quarter = max(1, node_cpus() // 4)
        base = {
            "engine": "slurm",
            "repository": os.path.join(tmp, "remote.git"),
            "harn": harn,
            "scratch": os.path.join(tmp, "scratch"),
            "args": [f"--cpus-per-task={quarter}"],
        }
        clusters = {"lab": base, "one": dict(base, partition="one")}
        with open(os.path.join(self.repo, ".harnery", "config.json"), "w") as f:
            json.dump({"clusters": clusters}, f)
        for name, body in [("quick.sh", QUICK), ("sleepy.sh", SLEEPY)]:
            path = os.path.join(self.repo, name)
            with open(path, "w") as f:
                f.write(body)
            os.chmod(path, 0o755)
        with open(os.path.join(self.repo, "team.json"), "w") as f:
            f.write('{"implementer": {"instructions": "Do it."}}')
        self.items = 0

    def run(self, *args):
        out = subprocess.run([self.harn, *args], cwd=self.repo, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"harn {' '.join(args)}: {out.returncode}\n{out.stdout}{out.stderr}")
        return out

    def item(self, workflow, deps=()):
        self.items += 1
        id = f"w{self.items}"
        args = ["work", "create", id, workflow, "--id", id, "--objective", "bench"]
        for d in deps:
            args += ["--depends-on", d]
        self.run(*args)
        return id

    def timed(self, *args):
        start = time.perf_counter()
        self.run(*args)
        return (time.perf_counter() - start) * 1000.0


def overhead(harn, runs):
    with tempfile.TemporaryDirectory() as tmp:
        root = Root(harn, tmp)
        local, remote = [], []
        for _ in range(runs):
            local.append(root.timed("work", "run", root.item("quick.sh"), "--isolation", "worktree"))
            remote.append(root.timed("work", "run", root.item("quick.sh"), "--cluster", "lab"))
        return statistics.median(local), statistics.median(remote)


def scale_out(harn, cluster):
    with tempfile.TemporaryDirectory() as tmp:
        root = Root(harn, tmp)
        items = [root.item("sleepy.sh") for _ in range(12)]
        top = root.item("quick.sh", items)
        root.run("supervisor", "create", top, "--team", "team.json", "--id", "g", "--accept-passing-proof", "--max-parallel-work", "12")
        ms = root.timed("supervisor", "run", "g", "--cluster", cluster)
        view = json.loads(root.run("supervisor", "show", "g", "--json").stdout)
        state = view["projection"]["state"]
        if state != "succeeded":
            sys.exit(f"the goal on {cluster} ended {state}")
        return ms


def main():
    p = cli_timing.parser(__doc__)
    p.add_argument("--runs", type=int, default=9, help="runs of each kind for the overhead (default 9)")
    p.add_argument("--check", action="store_true", help="exit 1 when three nodes are not 2.4 times one")
    a = cli_timing.parse(p)
    if not os.environ.get("SLURM_CONF"):
        sys.exit("no SLURM_CONF: start the test cluster (.ci/slurm/cluster.sh start) and export its env")
    local, remote = overhead(a.harn, a.runs)
    print(f"one segment, worktree here:  {local:8.1f} ms (median of {a.runs})")
    print(f"one segment, on the cluster: {remote:8.1f} ms (median of {a.runs})")
    print(f"remote overhead:             {remote - local:8.1f} ms ({remote / local:.2f}x)")
    one = scale_out(a.harn, "one")
    three = scale_out(a.harn, "lab")
    print(f"12 items of 10 s, one node:    {one / 1000:6.1f} s")
    print(f"12 items of 10 s, three nodes: {three / 1000:6.1f} s ({one / three:.2f}x faster)")
    if a.check and one / three < 2.4:
        print("target missed: three nodes at least 2.4 times one", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
