#!/usr/bin/env python3
"""Peak resident memory and time of the readers over a 200 MB transcript and ledger.

Makes the example's root, runs one attempt, grows its transcript to SIZE with workflow
messages and a harness ledger to SIZE with exit records (valid journal lines), then runs
each reader RUNS times and prints the median peak RSS (MiB) and wall time (s).

    python3 benches/readers/big_files.py --harn target/release/harn [--size-mb 200] [--runs 3]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time, zlib


def line(seq, body):
    head = '{"v":1,"seq":%d,"ts":1790000000000,"body":%s,' % (seq, json.dumps(body, separators=(",", ":")))
    return (head + '"crc":"%08x"}\n' % zlib.crc32(head.encode())).encode()


def grow(path, size, body):
    seq, length = 0, 0
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
        seq, length = data.count(b"\n"), len(data)
    with open(path, "ab") as f:
        while length < size:
            seq += 1
            b = line(seq, body(seq))
            length += len(b)
            f.write(b)


def measure(cmd):
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    return usage.ru_maxrss / 1024, time.monotonic() - start, os.waitstatus_to_exitcode(status)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harn", required=True)
    ap.add_argument("--size-mb", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    harn, size = os.path.abspath(a.harn), a.size_mb << 20
    tmp = tempfile.mkdtemp()
    root = os.path.join(tmp, "r")
    run = lambda *args: subprocess.run([harn, *args, "--root", root], capture_output=True, check=True)
    run("example")
    run("work", "create", "Docs", "wf.sh", "--id", "docs", "--objective", "o")
    run("work", "run", "docs", "--harness", "scripted")
    show = json.loads(run("work", "show", "docs", "--json").stdout)
    run_id = show["projection"]["latest_run_id"]
    filler = "x" * 900
    grow(os.path.join(root, ".harnery/workflows", run_id, "transcript.jsonl"), size,
         lambda i: {"event": "workflow.message", "run_id": run_id, "message": {"op": "log", "n": i, "text": filler}})
    ledger_dir = os.path.join(root, ".harnery/harness")
    os.makedirs(ledger_dir, exist_ok=True)
    evidence = "y" * 700
    grow(os.path.join(ledger_dir, "ledger.jsonl"), size,
         lambda i: {"harness": "h1" if i % 2 == 0 else "h2", "decision": "exited",
                    "detail": {"code": 1, "run": i}, "desired": "running", "evidence": evidence})
    cases = [
        ("run show", ["run", "show", run_id]),
        ("run list", ["run", "list"]),
        ("harness ledger --json", ["harness", "ledger", "--json"]),
        ("harness ledger h1", ["harness", "ledger", "h1"]),
        ("harness ledger --last 20", ["harness", "ledger", "--last", "20"]),
    ]
    for name, args in cases:
        got = [measure([harn, *args, "--root", root]) for _ in range(a.runs)]
        if any(code != 0 for _, _, code in got):
            sys.exit(f"{name}: failed")
        rss = statistics.median(g[0] for g in got)
        secs = statistics.median(g[1] for g in got)
        print(f"{name:28} peak {rss:7.1f} MiB  {secs:6.2f} s  ({a.size_mb} MB file, median of {a.runs})")


if __name__ == "__main__":
    main()
