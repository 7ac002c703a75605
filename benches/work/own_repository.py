#!/usr/bin/env python3
"""Measures what a run's repository of its own costs an attempt, against `git worktree add`.

Two repositories: a clone of this project's (its HEAD), and a generated one of --files files
(10,000 by default). In each, one workflow writes a clock reading as its first act, commits
one file, and writes a second reading as its last. Each sample is one `harn work run` of a
fresh item, alternating `--isolation shared` (no repository made) and `--isolation worktree`;
the readings split a run into its start (the process started to the workflow's first byte)
and its end (the workflow's last byte to the process's exit). The start of an attempt in its
own repository is the worktree start less the shared start (the repository made at the base);
its bring-back is the worktree end less the shared end (the files committed, bundled,
verified, fetched and attested). Both are quoted beside `git worktree add` (and remove) of the
same tree, timed alone. With --harn-old a second build runs the same samples in turn (for a
build before repositories of their own: its linked worktree). With --check the figures are held
(medians): the start at most 1.5 times `git worktree add`, and the end (bring-back, attestation
and records) at most 200 ms, twice what it takes here, so a regression shows. This shared
machine's disk is noisy (git itself takes two to ten times as long for minutes on end): a
repository whose figures miss is measured again, up to LOOKS looks in all, and holds if one
look does; a regression misses every look. Standard library only; the temporary directory is
removed at the end.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_HARN = os.path.join(PROJECT, "target", "release", "harn")

WORKFLOW = """#!/bin/sh
date +%s%N > "$MARKS/$HARN_WORK_ID.first"
read -r start
echo "$HARN_WORK_ID" > "note-$HARN_WORK_ID.md"
git add "note-$HARN_WORK_ID.md" && git commit -qm "$HARN_WORK_ID" >/dev/null 2>&1
echo '{"op":"result","ok":true,"summary":"noted"}'
date +%s%N > "$MARKS/$HARN_WORK_ID.last"
"""

ENV = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.invalid",
           GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.invalid")


def git(*args, cwd=None):
    subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL)


def make_repo(path, source, files, marks):
    if source:
        git("clone", "-q", "--no-hardlinks", source, path)
    else:
        git("init", "-q", "-b", "main", path)
        for i in range(files):
            d = os.path.join(path, "src", f"d{i // 100:03}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"f{i:05}.txt"), "w") as f:
                f.write(f"file {i}\n" * 4)
        git("add", "-A", cwd=path)
        git("commit", "-qm", "generated", cwd=path)
    os.makedirs(os.path.join(path, ".harnery"), exist_ok=True)
    # The workflow's clock readings go where a confined run may write.
    with open(os.path.join(path, ".harnery", "config.json"), "w") as f:
        f.write('{"containment": {"writable": ["%s"]}}\n' % marks)
    with open(os.path.join(path, "bench-wf.sh"), "w") as f:
        f.write(WORKFLOW)
    os.chmod(os.path.join(path, "bench-wf.sh"), 0o755)
    with open(os.path.join(path, ".git", "info", "exclude"), "a") as f:
        f.write(".harnery/\nbench-wf.sh\n")


def worktree_add(repo, n):
    """Medians of `git worktree add` and `git worktree remove` of HEAD's tree, in ms."""
    adds = []
    for i in range(n):
        where = os.path.join(os.path.dirname(repo), f"wt-{i}")
        t = time.perf_counter_ns()
        git("worktree", "add", "-q", "--detach", where, cwd=repo)
        adds.append((time.perf_counter_ns() - t) / 1e6)
        git("worktree", "remove", "--force", where, cwd=repo)
    return statistics.median(adds)


def one_run(harn, repo, marks, item, isolation):
    args = [harn, "work", "create", item, "bench-wf.sh", "--id", item, "--objective", "o",
            "--root", repo]
    subprocess.run(args, check=True, env=ENV, stdout=subprocess.DEVNULL)
    env = dict(ENV, MARKS=marks)
    t0 = time.time_ns()
    out = subprocess.run([harn, "work", "run", item, "--isolation", isolation, "--root", repo],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t1 = time.time_ns()
    if out.returncode != 0:
        sys.exit(f"{item}: harn work run failed: {out.stderr.decode()[-400:]}")
    first = int(open(os.path.join(marks, f"{item}.first")).read())
    last = int(open(os.path.join(marks, f"{item}.last")).read())
    return (first - t0) / 1e6, (t1 - last) / 1e6


# Looks a repository's figures get before a miss is a failure (see the module's text).
LOOKS = 3


def measure(label, harn, repo, marks, runs):
    starts = {"shared": [], "worktree": []}
    ends = {"shared": [], "worktree": []}
    for i in range(runs + 1):
        for isolation in ("shared", "worktree"):
            s, e = one_run(harn, repo, marks, f"{label}-{isolation[0]}{i}", isolation)
            if i > 0:
                starts[isolation].append(s)
                ends[isolation].append(e)
    med = {k: statistics.median(v) for k, v in starts.items()}
    emed = {k: statistics.median(v) for k, v in ends.items()}
    return med["worktree"] - med["shared"], emed["worktree"] - emed["shared"], med, emed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harn", default=DEFAULT_HARN)
    p.add_argument("--harn-old", help="a second build, run in turn with the same samples")
    p.add_argument("--files", type=int, default=10000)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        marks = os.path.join(tmp, "marks")
        os.makedirs(marks)
        for name, source in (("this repository", PROJECT), (f"{a.files} files", None)):
            repo = os.path.join(tmp, name.replace(" ", "-").replace(",", ""), "repo")
            os.makedirs(os.path.dirname(repo))
            make_repo(repo, source, a.files, marks)
            for look in range(1, (LOOKS if a.check else 1) + 1):
                missed = []
                add = worktree_add(repo, a.runs)
                builds = [("new", a.harn)] + ([("old", a.harn_old)] if a.harn_old else [])
                print(f"{name}: git worktree add {add:.1f} ms (median of {a.runs})")
                for label, harn in builds:
                    start, back, med, emed = measure(f"{label}{look}", harn, repo, marks, a.runs)
                    print(f"  {label}: start {start:.1f} ms ({start / add:.2f}x worktree add; "
                          f"shared {med['shared']:.1f}, worktree {med['worktree']:.1f}), "
                          f"bring-back {back:.1f} ms (shared end {emed['shared']:.1f}, "
                          f"worktree end {emed['worktree']:.1f})")
                    if a.check and label == "new":
                        if start > 1.5 * add:
                            missed.append(f"{name}: start {start:.1f} ms > 1.5 x {add:.1f} ms")
                        if back > 200:
                            missed.append(f"{name}: bring-back {back:.1f} ms > 200 ms")
                if not missed:
                    break
                print(f"  look {look} of {LOOKS} missed: {'; '.join(missed)}")
            failed.extend(missed)
    for f in failed:
        print(f"FAILED: {f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
