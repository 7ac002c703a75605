"""What the service scripts share: running harn, and a root of quiescent goals."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_HARN = os.path.join(REPO, "target", "release", "harn")


def harn(binary, root, *args):
    out = subprocess.run([binary, *args, "--root", root], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"harn {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def quiescent_goals(binary, root, count):
    """Creates `count` goals g0.., each over one cancelled work item (blocked, so quiescent);
    returns their ids."""
    with open(os.path.join(root, "wf.sh"), "w") as f:
        f.write("#!/bin/sh\nread start\n")
    with open(os.path.join(root, "team.json"), "w") as f:
        f.write('{"implementer": {"instructions": "x"}}\n')
    goals = []
    for n in range(count):
        w, g = f"w{n}", f"g{n}"
        harn(binary, root, "work", "create", "w", "wf.sh", "--id", w, "--objective", "o")
        harn(binary, root, "work", "cancel", w)
        harn(binary, root, "supervisor", "create", w, "--team", "team.json", "--id", g)
        goals.append(g)
    return goals
