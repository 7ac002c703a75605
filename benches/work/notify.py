"""What telling a person costs a run: `harn work run` of a fresh item on a root of N items,
alternating between a root without channels and one whose `notify` names a webhook receiver
on loopback (run by this script), each run putting its item in review and so recording and
posting one notice after looking at every item, approval, goal and harness of the root.
"""

import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cli_timing  # noqa: E402

WORKFLOW = "#!/bin/sh\nread start\necho '{\"op\":\"result\",\"ok\":true}'\n"


class Receiver(http.server.BaseHTTPRequestHandler):
    """Takes every POST."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def root(harn, path, items, config):
    os.makedirs(os.path.join(path, ".harnery"))
    with open(os.path.join(path, ".harnery", "config.json"), "w") as f:
        json.dump(config, f)
    wf = os.path.join(path, "wf.sh")
    with open(wf, "w") as f:
        f.write(WORKFLOW)
    os.chmod(wf, 0o755)
    for i in range(items):
        create(harn, path, f"i{i}")


def create(harn, path, id):
    args = [harn, "work", "create", "t", "wf.sh", "--id", id, "--objective", "o", "--root", path]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def main():
    p = cli_timing.parser(__doc__)
    p.add_argument("--items", type=int, default=1000, help="items in each root (default 1000)")
    p.add_argument("--runs", type=int, default=15, help="runs of each kind (default 15)")
    a = cli_timing.parse(p)
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = {"notify": [{"webhook": f"http://127.0.0.1:{server.server_address[1]}/hook"}]}
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"no channels": os.path.join(tmp, "plain"), "a webhook": os.path.join(tmp, "told")}
        root(a.harn, roots["no channels"], a.items, {})
        root(a.harn, roots["a webhook"], a.items, hook)
        samples = {k: [] for k in roots}
        for n in range(a.runs):
            for kind, path in roots.items():
                create(a.harn, path, f"x{n}")
                start = time.perf_counter()
                run = [a.harn, "work", "run", f"x{n}", "--root", path]
                subprocess.run(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                samples[kind].append((time.perf_counter() - start) * 1000.0)
    plain, told = (statistics.median(samples[k]) for k in roots)
    print(f"work run at {a.items} items: no channels {plain:.1f} ms, a webhook {told:.1f} ms "
          f"(+{told - plain:.1f} ms, {told / plain:.2f}x; medians of {a.runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
