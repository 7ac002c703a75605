#!/usr/bin/env python3
"""Side-by-side bench: the Rust `harn` against harnery, the TypeScript tool it re-implements.

One run measures both tools on the same dataset shapes and prints markdown tables of medians
and ratios (TS median / harn median). It is a measurement, not a check: it exits 0 whatever
the ratios are, and 1 only when a tool fails a command (or cannot be set up).

The TypeScript tool
  harnery 0.34.1 (npm package `harnery`; its binary is also called `harn`; goals are
  "governors" there). Unless --ts names an existing TS `harn`, the script runs
  `npm install --prefix DIR --ignore-scripts harnery@0.34.1` (no install script runs, so
  nothing downloads a browser). If the registry does not serve that package, it
  builds the same release from source instead: `git archive` of --ts-source (a git
  repository, bare or not, or a plain directory), `npm install --ignore-scripts` of its
  declared dependencies, then `tsc -p tsconfig.build.json` (the package's own `build`
  script) to make `dist/`. It runs the CLI as `node DIR/dist/cli.js`, which is what the
  package's `bin/harn` wrapper execs on a machine without Bun (with Bun it would run
  `src/cli.ts` under Bun instead). With --ts, the named executable is run as given.

  Every TS command runs with the coordination root as its working directory and
  HARNERY_COORD_ROOT_OVERRIDE set to it (the TS CLI has no --root; this is its explicit pin).
  Each TS repository is set up with the TS tool's own `harn init`: under Node, a workflow's
  first agent call needs the V3 event ledger that `init` creates (harnery's lazy
  initialisation uses Bun's `import.meta.dir` and fails under Node). `init` also pins
  `workflow.subscriptionOnly`, so the temporary HOME holds a fake Claude Code login file
  (`.claude/.credentials.json`, no real credential) and no API-key variable is passed on.
  Agent calls go to a fake `claude` (a shell script first on PATH that prints a canned
  `--output-format json` envelope): the TS tool never calls a real agent and never needs the
  network. Both tools get the same temporary HOME and an environment without CLAUDE*,
  HARNERY_*, HARN_* and API-key variables.

Datasets (built once per tool, with the tool's own code, in fresh git repositories)
  items  N independent work items (--items, default 1000), each with a goal over it.
  chain  C items (--chain, default 1000), each depending on the previous one, and one goal
         on the last.
  harn builds them with its CLI (`harn work create`, `harn supervisor create`), with
  examples/workflows/agent-review.sh as the workflow and examples/team.json as the team.
  The TS datasets are built by default in ONE node process through the package's own library
  API (`createWorkItem`, `createGovernor` from `harnery/core/work` and
  `harnery/core/governor`, called with the arguments its CLI passes), since one TS CLI
  process costs about 1.4 s and 3,000 of them would take over an hour; --ts-build cli uses
  the TS CLI instead. The TS workflow is a ten-line ES module (the TS tool runs workflows
  as JavaScript modules); the TS team has the same two roles and instructions as
  examples/team.json. --data DIR keeps the built repositories (and the TS install) there,
  and a rerun with the same sizes reuses them.

Read verbs (per verb, each tool in a block: one warm-up, then --runs runs back to back;
wall time of the whole process, medians)
  harn work list --json             TS work list --json
  harn work show ID --json          TS work show ID --json
  harn supervisor list --json       TS governor list --json
  harn supervisor show GOAL --json  TS governor show GOAL --json
  and on the chain: the goal on the last item (`supervisor show` / `governor show`) and
  `work show` of the last item. Note that the TS list verbs print complete records
  (intent, events, projection; governor list embeds every governed work record) where
  harn's print one summary per item or goal, so the TS documents are larger.

One tick
  `harn supervisor tick G --harness scripted` against the TS `harn governor tick G`, each on a
  fresh copy of a one-item goal whose workflow makes one agent call and records one piece
  of evidence (harn: agent-review.sh with the scripted harness, examples/harnesses/
  scripted.sh; TS: the module above with the fake `claude`). Every run must dispatch the
  item and leave it in review. Reported: wall time, and CPU time split as below.

  The tick's own share comes from the scheduler: `perf record -a -e
  sched:sched_stat_runtime` (a tracepoint, so no hardware counters; root) reports every
  stretch of CPU time each task ran, at each tick, switch and exit, and perf also records
  forks and execs. Summed over the tool process and everything it starts, the stretches
  give that tree's exact CPU time (it matches the wait4 rusage of an unrecorded run), and
  they cost almost nothing to record. Replayed in order, a process is excluded from the
  moment it execs the workflow or agent program (harn: its sealed copy `workflow.sh` and
  the harness script; TS: `claude`), and so is every process it forks after that; a
  stretch that spans the exec is split at the exec's time. Everything else is the tool's
  own: every thread of the tool process (Node's GC, compiler and libuv threads as much as
  harn's; `perf stat --no-inherit` would miss them), its children until they exec (the
  spawn and any sandbox set-up), and the helpers it runs itself (git, probes). The TS tool
  imports its workflow module into its own process and runs it there, so that module's few
  statements are counted in the TS tool's own share (no process boundary separates them;
  they cost well under a millisecond), while harn's workflow, a separate `sh` with its
  `sed`, is excluded. The TS tool runs `claude --version` as a probe before the call; that
  process runs the agent program and is excluded with it. Below the table, the own share's
  processes other than the tool process are listed by name. Without a working perf the CPU
  rows say why, and only wall time is reported. Wall time is taken from separate runs
  without perf.

Python 3.11 standard library only. Temporary directories are removed at the end unless
--data is given. Progress goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_HARN = REPO / "target" / "release" / "harn"
AGENT_REVIEW = REPO / "examples" / "workflows" / "agent-review.sh"
SCRIPTED = REPO / "examples" / "harnesses" / "scripted.sh"
TEAM = REPO / "examples" / "team.json"
TS_PACKAGE = "harnery"
TS_VERSION = "0.34.1"
MARKER = "typescript-bench.json"  # a built root's shape, so --data reuses only a match
TIMEOUT_S = 900  # one command; a TS read of 1,000 items takes seconds, not minutes

# The TS workflow: the same steps as agent-review.sh (a stage, one agent call with the
# objective as prompt, one evidence record for the first criterion, a result).
TS_WORKFLOW = """\
export const meta = { name: "agent-review", acceptance: [{ id: "accept-1", statement: "the agent answered" }] };
export default async (ctx) => {
  ctx.stage("implement");
  const reply = await ctx.agent(ctx.work.objective);
  ctx.evidence({ kind: "review", status: "passed", label: "the agent answered", acceptanceIds: ["accept-1"] });
  return reply;
};
"""

# The fake agent the TS tool's claude-code adapter spawns (`claude -p PROMPT --output-format
# json ...`): a canned success envelope, and a version line for the tool's version probe.
FAKE_CLAUDE = """\
#!/bin/sh
case "$1" in --version) echo "2.0.0 (Claude Code)"; exit 0 ;; esac
printf '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"bench","total_cost_usd":0}\\n'
"""

# Builds a TS dataset in one node process through the package's library API, with the
# arguments the TS CLI's `work create` and `governor create` pass.
TS_BUILDER = """\
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
const [pkg, root, shape, n, width, workflow, teamPath] = process.argv.slice(2);
const work = await import(pathToFileURL(join(pkg, "dist/core/work/index.js")).href);
const gov = await import(pathToFileURL(join(pkg, "dist/core/governor/index.js")).href);
const specialists = JSON.parse(readFileSync(teamPath, "utf8"));
const count = Number(n);
const id = (prefix, i) => prefix + String(i).padStart(Number(width), "0");
const item = (wid, deps) => work.createWorkItem({
  coordRoot: root, id: wid, title: `Item ${wid}`, objective: `Objective ${wid}`,
  workflowPath: workflow, acceptance: ["tests pass"], dependencies: deps,
  maxAttempts: undefined, maxUnchargedAttempts: undefined,
  source: { kind: "human", ref: undefined }, actor: "bench" });
const goal = (gid, rootWorkId) => gov.createGovernor({
  coordRoot: root, rootWorkId, specialists, id: gid, title: undefined,
  limits: { max_cycles: undefined, max_runtime_ms: undefined, max_parallel_work: undefined,
            max_total_attempts: undefined, max_agents_per_work: undefined,
            agent_concurrency: undefined },
  automation: { accept_passing_proof: undefined, resume_approved: true, retry_blocked: undefined },
  mission: undefined, replanning: undefined });
for (let i = 0; i < count; i++) {
  if (shape === "items") {
    item(id("w", i), []);
    goal(id("g", i), id("w", i));
  } else {
    item(id("c", i), i ? [id("c", i - 1)] : []);
  }
  if ((i + 1) % 250 === 0) process.stderr.write(`  ${i + 1} items\\n`);
}
if (shape === "chain") goal("chain", id("c", count - 1));
"""


def log(msg: str) -> None:
    print(f"[typescript {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Failed(Exception):
    """A tool failed a command, or could not be set up; the message says which."""


def run(cmd, *, cwd=None, env=None, what=None, timeout=TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run a command to completion; raise Failed (with its output) unless it exits 0."""
    try:
        out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(f"{what or cmd[0]}: timed out after {timeout} s: {' '.join(map(str, cmd))}")
    except OSError as e:
        raise Failed(f"{what or cmd[0]}: cannot run {cmd[0]}: {e}")
    if out.returncode != 0:
        tail = (out.stderr.strip() or out.stdout.strip())[-2000:]
        raise Failed(f"{what or cmd[0]} failed (exit {out.returncode}): "
                     f"{' '.join(map(str, cmd))}\n{tail}")
    return out


# ----------------------------------------------------------------------------------------
# The two tools


def clean_env(base: Path) -> dict:
    """The environment both tools get: no agent session, credential or harn/harnery
    variables of the caller, a private HOME, and the fake `claude` first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLAUDE", "HARNERY_", "HARN_", "CODEX_", "CURSOR_"))
           and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CURSOR_API_KEY")}
    env["HOME"] = str(base / "home")
    env["PATH"] = f"{base / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["NO_COLOR"] = "1"
    return env


class Harn:
    name = "harn"

    def __init__(self, binary: Path, env: dict):
        self.binary, self.env = binary, env
        self.version = run([binary, "--version"], env=env, what="harn").stdout.strip()

    def cmd(self, root: Path, *args) -> tuple[list, dict]:
        at = [] if args[:1] == ("--version",) else ["--root", str(root)]
        return [str(self.binary), *args, *at], self.env

    def __call__(self, root: Path, *args) -> str:
        cmd, env = self.cmd(root, *args)
        return run(cmd, cwd=root, env=env, what="harn").stdout


class Ts:
    name = "TS"

    def __init__(self, argv: list, package: Path | None, env: dict, how: str):
        self.argv, self.package, self.base_env, self.how = argv, package, env, how
        self.version = run([*argv, "--version"], env=env, what="TS harn").stdout.strip()

    def cmd(self, root: Path, *args) -> tuple[list, dict]:
        return [*self.argv, *args], {**self.base_env, "HARNERY_COORD_ROOT_OVERRIDE": str(root)}

    def __call__(self, root: Path, *args) -> str:
        cmd, env = self.cmd(root, *args)
        return run(cmd, cwd=root, env=env, what="TS harn").stdout


def find_ts_package(executable: Path) -> Path | None:
    """The harnery package directory an installed TS `harn` belongs to, if it has dist/."""
    for d in Path(os.path.realpath(executable)).parents:
        try:
            if json.loads((d / "package.json").read_text()).get("name") == TS_PACKAGE:
                return d if (d / "dist" / "core" / "work" / "index.js").exists() else None
        except (OSError, ValueError):
            continue
    return None


def install_ts(args, base: Path, env: dict) -> Ts:
    if args.ts:
        exe = Path(args.ts)
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            raise Failed(f"--ts {exe}: not an executable")
        return Ts([str(exe.resolve())], find_ts_package(exe), env, f"--ts {exe}")
    node = shutil.which("node", path=env["PATH"])
    npm = shutil.which("npm", path=env["PATH"])
    if not node or not npm:
        raise Failed("node and npm are needed to install the TS tool (or pass --ts PATH)")
    prefix = base / "ts-package"
    marker = prefix / MARKER
    try:
        done = json.loads(marker.read_text())
        pkg = Path(done["package"])
        if done.get("version") == TS_VERSION and (pkg / "dist" / "cli.js").exists():
            log(f"reusing the TS tool in {prefix} ({done['how']})")
            return Ts([node, str(pkg / "dist" / "cli.js")], pkg, env, done["how"])
    except (OSError, ValueError, KeyError):
        pass
    shutil.rmtree(prefix, ignore_errors=True)
    prefix.mkdir(parents=True)
    npm_env = {**env, "HOME": os.environ.get("HOME", env["HOME"])}  # npm's own cache/config
    spec = f"{TS_PACKAGE}@{TS_VERSION}"
    log(f"npm install --prefix {prefix} {spec} ...")
    out = subprocess.run([npm, "install", "--prefix", str(prefix), spec, "--ignore-scripts",
                          "--no-audit", "--no-fund"], env=npm_env, capture_output=True, text=True)
    pkg = prefix / "node_modules" / TS_PACKAGE
    if out.returncode == 0 and (pkg / "dist" / "cli.js").exists():
        how = f"npm install {spec}"
    else:
        first = next((ln for ln in out.stderr.splitlines() if "error" in ln), out.stderr.strip())
        log(f"npm cannot install {spec} ({first.strip()[:160]}); building it from source")
        pkg = build_ts_from_source(args, prefix, npm, node, npm_env)
        how = f"built from {args.ts_source} with npm + tsc"
    marker.write_text(json.dumps({"version": TS_VERSION, "package": str(pkg), "how": how}))
    return Ts([node, str(pkg / "dist" / "cli.js")], pkg, env, how)


def build_ts_from_source(args, prefix: Path, npm: str, node: str, env: dict) -> Path:
    source = Path(args.ts_source) if args.ts_source else None
    if source is None or not source.exists():
        raise Failed(f"npm has no {TS_PACKAGE}@{TS_VERSION} and there is no source to build it "
                     f"from: pass --ts-source DIR (a harnery checkout or bare git repository) "
                     f"or --ts PATH")
    pkg = prefix / "src"
    pkg.mkdir()
    probe = subprocess.run(["git", "-C", str(source), "rev-parse", "--git-dir"],
                           capture_output=True, text=True)
    if probe.returncode == 0:
        archive = subprocess.run(["git", "-C", str(source), "archive", "--format=tar", "HEAD"],
                                 capture_output=True)
        if archive.returncode != 0:
            raise Failed(f"git archive of {source} failed: {archive.stderr.decode()[-500:]}")
        subprocess.run(["tar", "-x", "-C", str(pkg)], input=archive.stdout, check=True)
    else:
        shutil.copytree(source, pkg, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("node_modules", "dist", ".git"))
    try:
        manifest = json.loads((pkg / "package.json").read_text())
    except (OSError, ValueError) as e:
        raise Failed(f"{source}: no readable package.json: {e}")
    if manifest.get("name") != TS_PACKAGE or manifest.get("version") != TS_VERSION:
        raise Failed(f"{source} holds {manifest.get('name')}@{manifest.get('version')}, "
                     f"not {TS_PACKAGE}@{TS_VERSION}")
    log(f"npm install (dependencies of {TS_PACKAGE} {TS_VERSION}) in {pkg} ...")
    run([npm, "install", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=pkg, env=env,
        what="npm install")
    log("tsc -p tsconfig.build.json (the package's build) ...")
    tsc = subprocess.run([node, str(pkg / "node_modules" / "typescript" / "bin" / "tsc"), "-p",
                          "tsconfig.build.json"], cwd=pkg, env=env, capture_output=True, text=True)
    if not (pkg / "dist" / "cli.js").exists():
        raise Failed(f"tsc made no dist/cli.js (exit {tsc.returncode}): {tsc.stdout[-1500:]}")
    if tsc.returncode != 0:
        log(f"tsc reported type errors but emitted dist/ (exit {tsc.returncode})")
    return pkg


# ----------------------------------------------------------------------------------------
# Repositories and datasets


def fresh_repo(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "README.md").write_text("bench repository\n")
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    run(["git", "init", "-q", str(root)], what="git init")
    run([*git, "add", "README.md"], what="git add")
    run([*git, "commit", "-q", "-m", "init"], what="git commit")


def prepare_harn(root: Path, agent: Path | None = None) -> None:
    """A harn root: the workflow (agent-review.sh), the team (examples/team.json) and the
    scripted harness the team names, declared in .harnery/config.json."""
    fresh_repo(root)
    (root / ".harnery").mkdir()
    shutil.copy(AGENT_REVIEW, root / "wf.sh")
    shutil.copy(TEAM, root / "team.json")
    harness = agent or root / "harness.sh"
    if agent is None:
        shutil.copy(SCRIPTED, harness)
    (root / ".harnery" / "config.json").write_text(
        json.dumps({"harnesses": {"scripted": {"command": [str(harness)]}}}) + "\n")


def ts_team() -> dict:
    """examples/team.json for the TS tool: the same roles, instructions and effort (its
    `governor create` takes no harness or turn limit; every role runs on claude-code)."""
    team = json.loads(TEAM.read_text())
    return {role: {k: v for k, v in p.items() if k in ("instructions", "effort")}
            for role, p in team.items()}


def prepare_ts(ts: Ts, root: Path) -> None:
    """A TS root: `harn init` (the TS tool's own set-up), the workflow module and the team."""
    fresh_repo(root)
    ts(root, "init")
    (root / "wf.mjs").write_text(TS_WORKFLOW)
    (root / "team.json").write_text(json.dumps(ts_team(), indent=2) + "\n")


def width(n: int) -> int:
    return max(4, len(str(max(n - 1, 0))))


def build_harn(harn: Harn, root: Path, shape: str, n: int) -> None:
    prepare_harn(root)
    w = width(n)
    for i in range(n):
        if shape == "items":
            wid = f"w{i:0{w}}"
            harn(root, "work", "create", f"Item {wid}", "wf.sh", "--objective", f"Objective {wid}",
                 "--accept", "tests pass", "--id", wid, "--actor", "bench", "--quiet")
            harn(root, "supervisor", "create", wid, "--team", "team.json", "--id", f"g{i:0{w}}",
                 "--quiet")
        else:
            wid = f"c{i:0{w}}"
            deps = ["--depends-on", f"c{i - 1:0{w}}"] if i else []
            harn(root, "work", "create", f"Item {wid}", "wf.sh", "--objective", f"Objective {wid}",
                 "--accept", "tests pass", "--id", wid, "--actor", "bench", "--quiet", *deps)
        if (i + 1) % 250 == 0:
            log(f"  {i + 1} items")
    if shape == "chain":
        harn(root, "supervisor", "create", f"c{n - 1:0{w}}", "--team", "team.json", "--id",
             "chain", "--quiet")


def build_ts(ts: Ts, root: Path, shape: str, n: int, how: str) -> None:
    prepare_ts(ts, root)
    w = width(n)
    if how == "api":
        if ts.package is None:
            raise Failed("--ts-build api needs the harnery package directory (with dist/) of "
                         "the TS tool; use --ts-build cli")
        script = root.parent / "ts-builder.mjs"
        script.write_text(TS_BUILDER)
        cmd, env = ts.cmd(root)
        node = shutil.which("node", path=env["PATH"]) or "node"
        run([node, script, ts.package, root, shape, n, w, root / "wf.mjs", root / "team.json"],
            cwd=root, env=env, what="TS library build", timeout=None)
        return
    for i in range(n):
        if shape == "items":
            wid = f"w{i:0{w}}"
            ts(root, "work", "create", f"Item {wid}", "wf.mjs", "--objective", f"Objective {wid}",
               "--accept", "tests pass", "--id", wid, "--actor", "bench")
            ts(root, "governor", "create", wid, "--team", "team.json", "--id", f"g{i:0{w}}")
        else:
            wid = f"c{i:0{w}}"
            deps = ["--depends-on", f"c{i - 1:0{w}}"] if i else []
            ts(root, "work", "create", f"Item {wid}", "wf.mjs", "--objective", f"Objective {wid}",
               "--accept", "tests pass", "--id", wid, "--actor", "bench", *deps)
        if (i + 1) % 50 == 0:
            log(f"  {i + 1} items")
    if shape == "chain":
        ts(root, "governor", "create", f"c{n - 1:0{w}}", "--team", "team.json", "--id", "chain")


def dataset(base: Path, tool, shape: str, n: int, build, timings: dict) -> Path:
    """The root of `shape` for `tool`, reused when --data already holds one of that shape."""
    root = base / ("harn" if tool.name == "harn" else "ts") / shape
    want = {"shape": shape, "n": n, "version": tool.version}
    try:
        if json.loads((root / MARKER).read_text()) == want:
            log(f"reusing {tool.name} {shape} ({n}) in {root}")
            return root
    except (OSError, ValueError):
        pass
    shutil.rmtree(root, ignore_errors=True)
    log(f"building {tool.name} {shape} ({n} items) in {root} ...")
    started = time.perf_counter()
    build(root)
    timings[f"{tool.name} {shape}"] = time.perf_counter() - started
    log(f"  built in {timings[f'{tool.name} {shape}']:.1f} s")
    (root / MARKER).write_text(json.dumps(want))
    return root


def check_counts(harn: Harn, ts: Ts, roots: dict, n: int, c: int) -> None:
    """Each tool sees the dataset it built: N items and N goals; the chain goal governs C."""
    hi, ti, hc, tc = roots["harn items"], roots["TS items"], roots["harn chain"], roots["TS chain"]
    got = {
        "harn work list": len(json.loads(harn(hi, "work", "list", "--json"))["items"]),
        "harn supervisor list": len(json.loads(harn(hi, "supervisor", "list", "--json"))["goals"]),
        "harn chain graph": len(json.loads(harn(hc, "supervisor", "show", "chain", "--json"))["work"]),
        "TS work list": len(json.loads(ts(ti, "work", "list", "--json"))),
        "TS governor list": len(json.loads(ts(ti, "governor", "list", "--json"))),
        "TS chain graph": len(json.loads(ts(tc, "governor", "show", "chain", "--json"))["work"]),
    }
    want = {k: (c if "chain" in k else n) for k in got}
    bad = [f"{k}: {got[k]}, expected {want[k]}" for k in got if got[k] != want[k]]
    if bad:
        raise Failed("a dataset is not what was built: " + "; ".join(bad))


# ----------------------------------------------------------------------------------------
# Timing the read verbs


def sample(cmd: list, env: dict, cwd: Path, who: str) -> float:
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    ms = (time.perf_counter() - start) * 1000.0
    if out.returncode != 0:
        raise Failed(f"{who} failed (exit {out.returncode}): {' '.join(cmd)}\n"
                     f"{out.stderr.decode(errors='replace').strip()[-2000:]}")
    return ms


def time_reads(harn: Harn, ts: Ts, verbs: list, runs: int) -> list:
    """verbs: (label, harn root, harn args, TS root, TS args). Per verb, a block of each tool
    in turn: one warm-up, then `runs` runs back to back. Blocks rather than alternate runs:
    this machine's memory manager pages out a program's file pages when they go a minute
    without a touch, and a TS command takes seconds, so alternating made harn pay its
    binary's page faults again and again (a `supervisor list` measured 7 ms warm and 48 ms
    between TS runs) while the TS runs, which last seconds, hardly noticed."""
    results = []
    for label, hroot, hargs, troot, targs in verbs:
        hcmd, henv = harn.cmd(hroot, *hargs)
        tcmd, tenv = ts.cmd(troot, *targs)
        medians = []
        for cmd, env, root, who in ((hcmd, henv, hroot, "harn"), (tcmd, tenv, troot, "TS harn")):
            sample(cmd, env, root, who)
            medians.append(statistics.median(sample(cmd, env, root, who) for _ in range(runs)))
        log(f"  {label}: harn {medians[0]:.1f} ms, TS {medians[1]:.1f} ms")
        results.append((label, medians[0], medians[1]))
    return results


# ----------------------------------------------------------------------------------------
# One tick, and its own share of the CPU


PERF = ["perf", "record", "-q", "-a", "-e", "sched:sched_stat_runtime", "-c", "1"]
WORKLOAD = re.compile(r"PERF_RECORD_COMM: perf-exec:(\d+)/\d+")
FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
EXEC = re.compile(r"\s([\d.]+):\s+PERF_RECORD_COMM exec: (.*):(\d+)/(\d+)\s*$")
FORKED = " (forked child, before its exec)"
RUNTIME = re.compile(r"\s([\d.]+):\s+sched:sched_stat_runtime:.*?\bpid=(\d+) runtime=(\d+)")


def perf_works(scratch: Path) -> str | None:
    """None when perf can record the scheduler's runtime tracepoint system-wide here."""
    if not shutil.which("perf"):
        return "perf is not installed"
    data = scratch / "probe.data"
    out = subprocess.run([*PERF, "-o", str(data), "--", "true"], capture_output=True, text=True)
    if out.returncode != 0:
        return f"`perf record -a -e sched:sched_stat_runtime` fails here: {out.stderr.strip()[-300:]}"
    script = subprocess.run(["perf", "script", "-i", str(data), "--show-task-events"],
                            capture_output=True, text=True)
    data.unlink(missing_ok=True)
    if not WORKLOAD.search(script.stdout):
        return "perf script does not show perf's workload process"
    return None


def split_cpu(data: Path, excluded: dict) -> dict:
    """Replays one `perf record -a -e sched:sched_stat_runtime` of one tool command.

    The scheduler reports every stretch of CPU time a task ran (`runtime` ns, at the event's
    time, on every tick, switch and exit), so the sum over a process tree is its exact CPU
    time. The tree is perf's workload process and everything it forks. A process is
    excluded from the moment it execs a program named in `excluded` (kind -> comms), and
    so is every process it forks after that; a stretch that spans the exec is split at the
    exec's time. The rest is the tool's own. Also returns the own CPU of the tool's other
    processes by name, and how many execs of each excluded kind were seen."""
    out = subprocess.run(["perf", "script", "-i", str(data), "--ns", "--show-task-events",
                          "-F", "comm,pid,tid,time,event,trace"], capture_output=True, text=True)
    if out.returncode != 0:
        raise Failed(f"perf script failed: {out.stderr.strip()[-500:]}")
    kind_of = {comm: kind for kind, comms in excluded.items() for comm in comms}
    m = WORKLOAD.search(out.stdout)
    if not m:
        raise Failed("perf recorded no workload process")
    root = int(m.group(1))
    tree = {root}  # processes (tgids) of the tool's tree
    tgid = {root: root}  # task id -> process id
    name = {root: "tool"}  # process -> what it runs
    since: dict = {}  # excluded process -> the time (s) from which it is excluded
    execs = {kind: 0 for kind in excluded}
    own = excl = 0.0
    children: dict = {}
    for line in out.stdout.splitlines():
        m = RUNTIME.search(line)
        if m:
            t, task, ns = float(m.group(1)), int(m.group(2)), int(m.group(3))
            pid = tgid.get(task, task)
            if pid not in tree:
                continue
            x = since.get(pid)
            before = ns if x is None else max(0.0, min(ns, (x - t) * 1e9 + ns))
            own += before
            excl += ns - before
            if pid != root and before:
                label = name[pid] if x is None else name.get(("pre", pid), "fork")
                children[label] = children.get(label, 0.0) + before
            continue
        m = FORK.search(line)
        if m:
            child, task, parent = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if parent in tree:
                tgid[task] = child
                if child != parent:
                    tree.add(child)
                    forked = name[parent].removesuffix(FORKED)
                    name[child] = forked + FORKED
                    if parent in since:
                        since[child] = 0.0
            continue
        m = EXEC.search(line)
        if m:
            t, comm, pid = float(m.group(1)), m.group(2), int(m.group(3))
            if pid == root:
                name[root] = comm
            elif pid in tree:
                if comm in kind_of and pid not in since:
                    since[pid] = t
                    execs[kind_of[comm]] += 1
                    name[("pre", pid)] = name[pid]
                name[pid] = comm
    return {"own": own / 1e6, "excluded": excl / 1e6, "total": (own + excl) / 1e6,
            "children": {k: v / 1e6 for k, v in children.items()}, "execs": execs}


def tick_templates(harn: Harn, ts: Ts, base: Path) -> dict:
    """One-item goals, one per tool, copied afresh for every tick."""
    tick = base / "tick"
    shutil.rmtree(tick, ignore_errors=True)
    tick.mkdir(parents=True)
    agent = tick / "bench-agent.sh"  # the scripted harness, under a name perf can tell apart
    shutil.copy(SCRIPTED, agent)
    hroot = tick / "harn-template"
    prepare_harn(hroot, agent)
    harn(hroot, "work", "create", "One", "wf.sh", "--objective", "do it", "--id", "one",
         "--actor", "bench", "--quiet")
    harn(hroot, "supervisor", "create", "one", "--team", "team.json", "--id", "g", "--quiet")
    troot = tick / "ts-template"
    prepare_ts(ts, troot)
    ts(troot, "work", "create", "One", "wf.mjs", "--objective", "do it", "--id", "one",
       "--actor", "bench")
    ts(troot, "governor", "create", "one", "--team", "team.json", "--id", "g")
    # harn runs its sealed copy of the workflow as `workflow.sh`; the TS tool imports its
    # workflow module into its own process, so only the agent is a process of its own.
    return {
        "harn": (hroot, ["supervisor", "tick", "g", "--harness", "scripted", "--json"],
                 {"workflow": {"workflow.sh", "wf.sh"}, "agent": {agent.name}}, check_harn_tick),
        "TS": (troot, ["governor", "tick", "g", "--json"], {"agent": {"claude"}}, check_ts_tick),
    }


def check_harn_tick(stdout: str) -> str | None:
    try:
        o = json.loads(stdout)["outcomes"]
        if len(o) == 1 and o[0]["status"] == "completed" and o[0].get("passed") is True:
            return None
    except (ValueError, KeyError, TypeError):
        pass
    return f"harn's tick did not run the item to a passing proof: {stdout[-1500:]}"


def check_ts_tick(stdout: str) -> str | None:
    try:
        d = json.loads(stdout)
        o = d["outcomes"]
        if (len(o) == 1 and o[0]["status"] == "completed"
                and d["projection"]["next_action"] == "review"):
            return None
    except (ValueError, KeyError, TypeError):
        pass
    return f"the TS tick did not run the item to a proof in review: {stdout[-1500:]}"


def one_tick(tool, spec, work: Path, n: int, perf: Path | None) -> tuple[float, dict | None]:
    """One tick on a fresh copy of the tool's template: wall ms, and the CPU split when
    recorded under perf."""
    template, args, excluded, check = spec
    root = work / f"{tool.name.lower()}-{n}"
    shutil.copytree(template, root, symlinks=True)
    try:
        cmd, env = tool.cmd(root, *args)
        if perf is not None:
            cmd = [*PERF, "-o", str(perf), "--", *cmd]
        start = time.perf_counter()
        out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True,
                             timeout=TIMEOUT_S)
        ms = (time.perf_counter() - start) * 1000.0
        if out.returncode != 0:
            raise Failed(f"{tool.name} tick failed (exit {out.returncode}): {' '.join(cmd)}\n"
                         f"{(out.stderr.strip() or out.stdout.strip())[-2000:]}")
        bad = check(out.stdout)
        if bad:
            raise Failed(f"{bad}\n{out.stderr.strip()[-1000:]}")
        cpu = None
        if perf is not None:
            cpu = split_cpu(perf, excluded)
            missing = [k for k, n in cpu["execs"].items() if n == 0]
            if missing:
                raise Failed(f"{tool.name} tick: perf saw no exec of the {', '.join(missing)} "
                             f"program ({excluded}), so its processes cannot be told apart")
        return ms, cpu
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if perf is not None:
            perf.unlink(missing_ok=True)


def time_ticks(harn: Harn, ts: Ts, base: Path, runs: int) -> dict:
    specs = tick_templates(harn, ts, base)
    work = base / "tick"
    tools = {"harn": harn, "TS": ts}
    wall = {"harn": [], "TS": []}
    # Each tool in a block after its own warm-up, as the reads (see time_reads).
    for name in ("harn", "TS"):
        one_tick(tools[name], specs[name], work, 0, None)
        for r in range(runs):
            wall[name].append(one_tick(tools[name], specs[name], work, r + 1, None)[0])
    log(f"  {runs} ticks each timed")
    why_not = perf_works(work)
    cpu = {"harn": [], "TS": []}
    if why_not is None:
        for name in ("harn", "TS"):
            for r in range(runs):
                cpu[name].append(one_tick(tools[name], specs[name], work, 1000 + r,
                                          work / "perf.data")[1])
        log(f"  {runs} ticks each under perf")
    else:
        log(f"  no CPU split: {why_not}")
    return {"wall": wall, "cpu": cpu, "why_not": why_not}


# ----------------------------------------------------------------------------------------
# Output


def ratio(h: float, t: float) -> str:
    return f"{t / h:.1f}" if h > 0 else "n/a"


def print_tables(harn: Harn, ts: Ts, reads: list, ticks: dict | None, a, builds: dict) -> None:
    print(f"harn: {harn.binary} ({harn.version}); TS: harnery {ts.version} "
          f"({ts.how}), run as `{' '.join(ts.argv)}`")
    print()
    print(f"| read ({a.items:,} items with a goal each; chain of {a.chain:,}) | harn median ms "
          f"| TS median ms | TS/harn |")
    print("|---|---|---|---|")
    for label, h, t in reads:
        print(f"| {label} | {h:.1f} | {t:.1f} | {ratio(h, t)} |")
    if ticks is not None:
        print()
        print("| tick (one item, one agent call) | harn median | TS median | TS/harn |")
        print("|---|---|---|---|")
        hw, tw = statistics.median(ticks["wall"]["harn"]), statistics.median(ticks["wall"]["TS"])
        print(f"| wall ms | {hw:.1f} | {tw:.1f} | {ratio(hw, tw)} |")
        if ticks["why_not"]:
            print(f"| CPU ms | n/a | n/a | {ticks['why_not']} |")
        else:
            for key, label in (("total", "CPU ms, whole process tree"),
                               ("excluded", "CPU ms, workflow and agent processes"),
                               ("own", "CPU ms, the tick's own share")):
                h = statistics.median(c[key] for c in ticks["cpu"]["harn"])
                t = statistics.median(c[key] for c in ticks["cpu"]["TS"])
                print(f"| {label} | {h:.1f} | {t:.1f} | {ratio(h, t)} |")
            for name in ("harn", "TS"):
                names = sorted({k for c in ticks["cpu"][name] for k in c["children"]})
                parts = [f"{k} {statistics.median(c['children'].get(k, 0.0) for c in ticks['cpu'][name]):.1f}"
                         for k in names]
                print(f"\n{name}'s own share outside its main process (median ms): "
                      f"{', '.join(parts) or 'none'}")
            print("\nThe TS tool runs its workflow module inside its own process, so that is in "
                  "its own share; harn's workflow is a process of its own, excluded with the agent.")
    if builds:
        print()
        print("datasets built in: " + ", ".join(f"{k} {v:.1f} s" for k, v in builds.items()))


# ----------------------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--harn", default=str(DEFAULT_HARN),
                   help="the Rust harn binary (default: target/release/harn of this repository)")
    p.add_argument("--ts", metavar="PATH",
                   help="an existing TS `harn` executable to use instead of installing "
                        f"{TS_PACKAGE}@{TS_VERSION}")
    p.add_argument("--ts-source", metavar="DIR",
                   help="harnery's source (git repository, bare or not, or a directory, at "
                        f"release {TS_VERSION}) to build from when npm cannot install it")
    p.add_argument("--ts-build", choices=("api", "cli"), default="api",
                   help="how the TS datasets are built: in one node process through the "
                        "package's library API (default), or one TS CLI process per item "
                        "and goal (about 1.4 s each)")
    p.add_argument("--items", type=int, default=1000,
                   help="independent work items, each with a goal (default 1000)")
    p.add_argument("--chain", type=int, default=1000,
                   help="work items in the dependency chain (default 1000)")
    p.add_argument("--runs", type=int, default=11,
                   help="timed runs of each verb and of the tick, per tool, after one "
                        "warm-up (default 11)")
    p.add_argument("--data", metavar="DIR",
                   help="keep the TS install and the built repositories in DIR and reuse "
                        "them when their sizes match (default: a temporary directory, "
                        "removed at the end)")
    p.add_argument("--no-tick", action="store_true", help="time the read verbs only")
    a = p.parse_args()
    if a.items < 1 or a.chain < 1 or a.runs < 1:
        p.error("--items, --chain and --runs must be positive")
    binary = Path(a.harn).resolve()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        print(f"{binary}: not an executable; run `cargo build --release -p harn` first",
              file=sys.stderr)
        return 1

    if a.data:
        base = Path(a.data).resolve()
        base.mkdir(parents=True, exist_ok=True)
    else:
        base = Path(tempfile.mkdtemp(prefix="harn-typescript-"))
    try:
        (base / "home" / ".claude").mkdir(parents=True, exist_ok=True)
        (base / "home" / ".claude" / ".credentials.json").write_text(
            '{"claudeAiOauth": {"accessToken": "bench-fake-not-a-credential"}}\n')
        (base / "bin").mkdir(exist_ok=True)
        (base / "bin" / "claude").write_text(FAKE_CLAUDE)
        (base / "bin" / "claude").chmod(0o755)
        env = clean_env(base)

        harn = Harn(binary, env)
        ts = install_ts(a, base, env)
        log(f"harn {harn.version}; TS harn {ts.version} ({ts.how})")

        builds: dict = {}
        roots = {}
        for shape, n in (("items", a.items), ("chain", a.chain)):
            roots[f"harn {shape}"] = dataset(base, harn, shape, n,
                                             lambda r, s=shape, k=n: build_harn(harn, r, s, k),
                                             builds)
            roots[f"TS {shape}"] = dataset(base, ts, shape, n,
                                           lambda r, s=shape, k=n: build_ts(ts, r, s, k, a.ts_build),
                                           builds)
        check_counts(harn, ts, roots, a.items, a.chain)

        wi, wc = width(a.items), width(a.chain)
        first, goal, last = f"w{0:0{wi}}", f"g{0:0{wi}}", f"c{a.chain - 1:0{wc}}"
        hi, ti, hc, tc = roots["harn items"], roots["TS items"], roots["harn chain"], roots["TS chain"]
        verbs = [
            ("`--version` (start-up only)", hi, ["--version"], ti, ["--version"]),
            ("`work list --json` / `work list --json`", hi, ["work", "list", "--json"],
             ti, ["work", "list", "--json"]),
            ("`work show ID --json` / same", hi, ["work", "show", first, "--json"],
             ti, ["work", "show", first, "--json"]),
            ("`supervisor list --json` / `governor list --json`", hi,
             ["supervisor", "list", "--json"], ti, ["governor", "list", "--json"]),
            ("`supervisor show GOAL --json` / `governor show GOAL --json`", hi,
             ["supervisor", "show", goal, "--json"], ti, ["governor", "show", goal, "--json"]),
            ("chain: `supervisor show chain --json` / `governor show chain --json`", hc,
             ["supervisor", "show", "chain", "--json"], tc, ["governor", "show", "chain", "--json"]),
            ("chain: `work show LAST --json` / same", hc, ["work", "show", last, "--json"],
             tc, ["work", "show", last, "--json"]),
        ]
        log(f"timing {len(verbs)} read verbs, {a.runs} runs each per tool ...")
        reads = time_reads(harn, ts, verbs, a.runs)
        ticks = None
        if not a.no_tick:
            log(f"timing the tick, {a.runs} runs each per tool ...")
            ticks = time_ticks(harn, ts, base, a.runs)
        print_tables(harn, ts, reads, ticks, a, builds)
        return 0
    except Failed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if a.data:
            shutil.rmtree(base / "tick", ignore_errors=True)
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
