#!/usr/bin/env python3
"""Measures what confining a run costs per agent call: the same run, contained and open.

One root holds a workflow that makes --calls agent calls in a row to a harness that reads
its prompt and answers at once, so a run is almost nothing but spawns. Each sample is one
`harn work run` of a fresh item, alternating contained (the default) and
`--no-containment`, --runs samples of each after one warm-up of each. The cost per spawned
child is the difference of the medians over the children a run starts (the calls and the
workflow itself). With --sealed the harness speaks Codex's dialect, so each call runs sealed
(decision record 0010) rather than under Landlock. Standard library only; the temporary
directory is removed at the end.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_HARN = os.path.normpath(os.path.join(HERE, "..", "..", "target", "release", "harn"))

WORKFLOW = """#!/bin/sh
read -r start
i=0
while [ $i -lt $CALLS ]; do
  i=$((i + 1))
  echo "{\\"op\\":\\"agent\\",\\"id\\":\\"a$i\\",\\"prompt\\":\\"p\\"}"
  read -r reply
done
echo '{"op":"result","ok":false,"error":"measured"}'
exit 1
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harn", default=DEFAULT_HARN, help="the harn binary (default: target/release/harn)")
    p.add_argument("--calls", type=int, default=40, help="agent calls per run (default 40)")
    p.add_argument("--runs", type=int, default=15, help="samples of each kind (default 15)")
    p.add_argument("--sealed", action="store_true",
                   help="a Codex-speaking harness, whose calls run sealed")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, ".harnery"))
        wf = os.path.join(root, "wf.sh")
        with open(wf, "w") as f:
            f.write(WORKFLOW)
        os.chmod(wf, 0o755)
        config = {"harnesses": {"echo": {"command": ["sh", "-c", "cat >/dev/null; echo ok"]}}}
        if a.sealed:
            lines = ('echo \'{"type":"thread.started","thread_id":"t"}\'; '
                     'echo \'{"type":"item.completed","item":{"type":"agent_message","text":"ok"}}\'; '
                     'echo \'{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}\'')
            config = {"harnesses": {"echo": {"kind": "codex",
                                             "command": ["sh", "-c", f"cat >/dev/null; {lines}"]}}}
        with open(os.path.join(root, ".harnery", "config.json"), "w") as f:
            json.dump(config, f)
        env = dict(os.environ, CALLS=str(a.calls))
        samples = {"contained": [], "open": []}
        confined = None
        for n in range(a.runs + 1):
            for kind, extra in (("contained", []), ("open", ["--no-containment"])):
                item = f"{kind}-{n}"
                subprocess.run([a.harn, "work", "create", item, "wf.sh", "--id", item,
                                "--objective", "o", "--root", root], check=True,
                               capture_output=True)
                cmd = [a.harn, "work", "run", item, "--harness", "echo", "--json",
                       "--root", root, *extra]
                start = time.perf_counter()
                out = subprocess.run(cmd, capture_output=True, text=True, env=env)
                took = (time.perf_counter() - start) * 1000.0
                if out.returncode != 1:
                    sys.exit(f"{item}: exit {out.returncode}: {out.stderr.strip()}")
                if kind == "contained" and confined is None:
                    run = json.loads(out.stdout)["run_id"]
                    with open(os.path.join(root, ".harnery", "workflows", run, "run.json")) as f:
                        confined = json.load(f).get("containment", {})
                if n > 0:
                    samples[kind].append(took)
    med = {k: statistics.median(v) for k, v in samples.items()}
    children = a.calls + 1
    print(f"containment: {confined.get('landlock')=} {confined.get('namespace')=} "
          f"{confined.get('sealed')=} {confined.get('confined')=}")
    for k, v in samples.items():
        print(f"{k:>9}: median {med[k]:.1f} ms per run of {a.calls} calls "
              f"(min {min(v):.1f}, max {max(v):.1f}, {len(v)} runs)")
    per = (med["contained"] - med["open"]) / children
    print(f"cost per confined child: {per:.2f} ms "
          f"({med['contained'] / med['open']:.2f}x the open run)")


if __name__ == "__main__":
    main()
