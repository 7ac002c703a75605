#!/usr/bin/env python3
"""Side-by-side bench: harn's harness daemon against supervisord, runit and s6.

Every tool supervises the same child programs (tests/fixtures/child.sh, plus a generated
bash script for the respawn figure) in private temporary directories; one run prints one
markdown table and the targets. See README.md next to this file for what each figure means
and how each tool is configured.

Python 3.11, standard library only. Needs root to install the Debian packages (apt-get).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_HARN = REPO / "target" / "release" / "harn"
CHILD = REPO / "tests" / "fixtures" / "child.sh"

TOOLS = ["harn", "supervisord", "runit", "s6"]
PACKAGES = {"supervisord": "supervisor", "runit": "runit", "s6": "s6"}
BINARIES = {
    "supervisord": ["supervisord", "supervisorctl"],
    "runit": ["runsvdir", "runsv", "sv"],
    "s6": ["s6-svscan", "s6-supervise", "s6-svc", "s6-svscanctl", "s6-svstat"],
}
STYLES = ["same-group", "setsid", "double-fork", "daemonized"]
GRACE_MS = 1000  # the stop grace (SIGTERM -> SIGKILL) asked of every tool that has one
RESPAWN_CHILD_SECS = 1.5
CLK_TCK = os.sysconf("SC_CLK_TCK")
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")

# Every process a run starts carries a marker in its argv: "9" + a token unique to this run +
# two digits for the tool + four for the service, so markers have one fixed width and one
# can never be a suffix of another. child.sh runs `sleep 1000<marker>` / `sleep 2000<marker>`.
TOKEN = f"{(os.getpid() * 7919 + int(time.time())) % 1_000_000:06d}"
RUN_MARKER_RE = re.compile(r"9" + TOKEN + r"\d{6}$")


def log(msg: str) -> None:
    print(f"[peers {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Unavailable(Exception):
    """A tool cannot be used in this run; the message says why."""


# ----------------------------------------------------------------------------------------
# /proc helpers


def proc_stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """(state, ppid, utime, stime, starttime) of a process or task, None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return _parse_stat(text)


def _parse_stat(text: str) -> tuple[str, int, int, int, int]:
    rest = text.rsplit(")", 1)[1].split()
    # rest[0] is field 3 (state); utime/stime are fields 14/15; starttime is 22.
    return rest[0], int(rest[1]), int(rest[11]), int(rest[12]), int(rest[19])


def argv_of(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def all_pids() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def alive(pid: int) -> bool:
    """Exists and is not a zombie."""
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def snapshot() -> dict[int, tuple[str, int, list[str]]]:
    """pid -> (state, ppid, argv) of every process."""
    out = {}
    for pid in all_pids():
        st = proc_stat(pid)
        if st is None:
            continue
        out[pid] = (st[0], st[1], argv_of(pid))
    return out


def has_marker(argv: list[str], marker: str) -> bool:
    return any(a.endswith(marker) for a in argv)


def marker_pids(marker: str, snap=None, zombies: bool = False) -> list[int]:
    snap = snap if snap is not None else snapshot()
    return [
        pid
        for pid, (state, _, argv) in snap.items()
        if has_marker(argv, marker) and ((state == "Z") == zombies)
    ]


def is_run_process(argv: list[str]) -> bool:
    return any(RUN_MARKER_RE.search(a) for a in argv)


def supervising_pids(root: int) -> list[int]:
    """`root` and its descendants, minus the supervised children (argv with a marker of this
    run) and everything below them."""
    snap = snapshot()
    if root not in snap:
        return []
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in snap.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        state, _, argv = snap[p]
        if is_run_process(argv) or state == "Z":
            continue
        out.append(p)
        todo.extend(children.get(p, []))
    return sorted(out)


def task_counters(pids: list[int]) -> dict[tuple[int, int, int], dict[str, int]]:
    """Per task (pid, tid, starttime): utime+stime ticks, context switches, sched runtime."""
    out = {}
    for pid in pids:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in tids:
            base = f"/proc/{pid}/task/{tid}"
            try:
                st = _parse_stat(Path(f"{base}/stat").read_text())
                status = Path(f"{base}/status").read_text()
                sched = Path(f"{base}/schedstat").read_text().split()
            except (OSError, IndexError):
                continue
            vol = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
            inv = int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
            out[(pid, tid, st[4])] = {
                "ticks": st[2] + st[3],
                "vol": vol,
                "invol": inv,
                "sched_ns": int(sched[0]),
            }
    return out


def pss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        m = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
        if m:
            total += int(m.group(1))
    return total


def wait_until(pred: Callable[[], bool], timeout: float, every: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run(cmd: list[str], timeout: float = 60, check: bool = False, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.STDOUT)
    kw.setdefault("text", True)
    proc = subprocess.run(cmd, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}: {proc.stdout.strip()[-400:]}")
    return proc


# ----------------------------------------------------------------------------------------
# Global cleanup: whatever happens, every process this run started goes, and the temporary
# directories are removed.


class Cleanup:
    def __init__(self) -> None:
        self.base: Path | None = None
        self.tools: list["Tool"] = []
        self.policy_created = False
        self.harn_cgroups: set[Path] = set()

    def sweep(self) -> int:
        """SIGKILL every process of this run still alive: supervisors found by their working
        directory or argv under the base directory, children by their marker."""
        me = os.getpid()
        killed = 0
        for _ in range(3):
            victims = []
            for pid in all_pids():
                if pid == me:
                    continue
                argv = argv_of(pid)
                hit = is_run_process(argv)
                if not hit and self.base is not None:
                    base = str(self.base)
                    hit = any(base in a for a in argv)
                    if not hit:
                        try:
                            hit = os.readlink(f"/proc/{pid}/cwd").startswith(base)
                        except OSError:
                            hit = False
                if hit and alive(pid):
                    victims.append(pid)
            if not victims:
                break
            for pid in victims:
                kill_pid(pid)
            killed += len(victims)
            time.sleep(0.2)
        return killed

    def remove_cgroups(self) -> None:
        """harn creates a cgroup per root (harn-<fnv64 of root>/<harness>); remove ours."""
        for cg in sorted(self.harn_cgroups):
            if not cg.exists():
                continue
            for sub in sorted(cg.iterdir()):
                if sub.is_dir():
                    try:
                        (sub / "cgroup.kill").write_text("1")
                    except OSError:
                        pass
            time.sleep(0.1)
            for sub in sorted(cg.iterdir()):
                if sub.is_dir():
                    try:
                        os.rmdir(sub)
                    except OSError:
                        pass
            try:
                os.rmdir(cg)
            except OSError as e:
                log(f"could not remove cgroup {cg}: {e}")

    def all(self) -> None:
        for tool in list(self.tools):
            try:
                tool.shutdown()
            except BaseException as e:  # noqa: BLE001 — cleanup must go on
                log(f"cleanup: {tool.name}: {e}")
        self.tools.clear()
        n = self.sweep()
        if n:
            log(f"cleanup: killed {n} leftover processes")
        self.remove_cgroups()
        if self.base is not None and self.base.exists():
            shutil.rmtree(self.base, ignore_errors=True)
        if self.policy_created:
            try:
                POLICY_RC_D.unlink()
            except OSError:
                pass
            self.policy_created = False


CLEANUP = Cleanup()


# ----------------------------------------------------------------------------------------
# Installing the peers


def dpkg_installed(pkg: str) -> str | None:
    p = run(["dpkg-query", "-W", "-f=${Status}\t${Version}", pkg], timeout=30)
    if p.returncode == 0 and p.stdout.startswith("install ok installed"):
        return p.stdout.split("\t", 1)[1].strip()
    return None


def install_peers(tools: list[str]) -> dict[str, str]:
    """Installs the Debian packages of the peers in `tools`; returns tool -> reason for every
    peer that could not be installed."""
    problems: dict[str, str] = {}
    wanted = {t: PACKAGES[t] for t in tools if t in PACKAGES}
    missing = {t: p for t, p in wanted.items() if dpkg_installed(p) is None}
    if missing:
        if os.geteuid() != 0:
            return {t: f"package {p} is not installed and this is not root" for t, p in missing.items()}
        if shutil.which("apt-get") is None:
            return {t: f"package {p} is not installed and there is no apt-get" for t, p in missing.items()}
        # Package scripts must not start system-wide services: a policy-rc.d that refuses
        # every start (kept if one already exists, removed at the end if we made it).
        if not POLICY_RC_D.exists():
            POLICY_RC_D.write_text("#!/bin/sh\n# temporary, from benches/peers/peers.py\nexit 101\n")
            POLICY_RC_D.chmod(0o755)
            CLEANUP.policy_created = True
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        log("apt-get update")
        up = run(["apt-get", "update"], timeout=600, env=env)
        if up.returncode != 0:
            log(f"apt-get update failed ({up.returncode}); trying to install anyway")
        pkgs = sorted(set(missing.values()))
        log(f"apt-get install -y --no-install-recommends {' '.join(pkgs)}")
        cmd = ["apt-get", "install", "-y", "--no-install-recommends"]
        res = run(cmd + pkgs, timeout=900, env=env)
        if res.returncode != 0:
            # One at a time, to tell which one fails.
            for t, p in missing.items():
                r = run(cmd + [p], timeout=900, env=env)
                if r.returncode != 0:
                    problems[t] = f"apt-get install {p} failed: {r.stdout.strip().splitlines()[-1:]}"
        if CLEANUP.policy_created:
            POLICY_RC_D.unlink()
            CLEANUP.policy_created = False
    for t in wanted:
        if t in problems:
            continue
        absent = [b for b in BINARIES[t] if shutil.which(b) is None]
        if absent:
            problems[t] = f"installed, but {', '.join(absent)} not found on PATH"
    # Nothing system-wide may have been started by a package script.
    for pid, (state, _, argv) in snapshot().items():
        name = os.path.basename(argv[0]) if argv else ""
        if name in ("supervisord", "runsvdir", "s6-svscan") and not CLEANUP.base:
            log(f"warning: a system-wide {name} runs (pid {pid}): {shlex.join(argv)}")
    return problems


# ----------------------------------------------------------------------------------------
# Services and tools


class Service:
    """A supervised program: its argv (a single element is a script run as is), plus extra
    files for runit/s6 service directories."""

    def __init__(self, name: str, argv: list[str], files: dict[str, str] | None = None):
        self.name = name
        self.argv = argv
        self.files = files or {}


class Tool:
    name = "?"

    def __init__(self, workdir: Path, services: list[Service]):
        self.dir = workdir
        self.services = services
        self.root_pid: int | None = None
        self.proc: subprocess.Popen | None = None
        self.started = False

    # What subclasses provide.
    @classmethod
    def version(cls) -> str:
        """A peer's version is its Debian package's; Harn asks its binary instead."""
        return dpkg_installed(PACKAGES[cls.name]) or "?"

    @staticmethod
    def stop_setting() -> str:
        return "?"

    def launch(self) -> None:
        raise NotImplementedError

    def stop_command(self, name: str, ignore_term: bool) -> list[str]:
        raise NotImplementedError

    def shutdown_tool(self) -> None:
        raise NotImplementedError

    # Common.
    def start(self) -> None:
        CLEANUP.tools.append(self)
        self.started = True
        self.launch()

    def supervising(self) -> list[int]:
        return supervising_pids(self.root_pid) if self.root_pid else []

    def shutdown(self) -> None:
        if not self.started:
            return
        self.started = False
        try:
            self.shutdown_tool()
        finally:
            if self.root_pid and alive(self.root_pid):
                for pid in self.supervising():
                    kill_pid(pid)
            if self.proc is not None:
                if self.proc.poll() is None:
                    self.proc.kill()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            if self in CLEANUP.tools:
                CLEANUP.tools.remove(self)

    def popen(self, cmd: list[str], logname: str) -> subprocess.Popen:
        out = open(self.dir / logname, "ab")
        try:
            return subprocess.Popen(
                cmd,
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            out.close()

    def write_run_dirs(self, top: Path, extra: dict[str, str] | None = None) -> None:
        """runit/s6 service directories: `run` is the program itself when it is one script,
        else a /bin/sh script that execs the argv."""
        top.mkdir(parents=True, exist_ok=True)
        for s in self.services:
            d = top / s.name
            d.mkdir()
            run_file = d / "run"
            if len(s.argv) == 1:
                run_file.symlink_to(s.argv[0])
            else:
                run_file.write_text("#!/bin/sh\nexec " + shlex.join(s.argv) + "\n")
                run_file.chmod(0o755)
            for fname, content in {**(extra or {}), **s.files}.items():
                (d / fname).write_text(content)


class Harn(Tool):
    name = "harn"
    binary: Path = DEFAULT_HARN

    @classmethod
    def check(cls) -> None:
        if not cls.binary.exists():
            raise Unavailable(f"{cls.binary} does not exist (build it: cargo build --release -p harn)")
        p = run([str(cls.binary), "harness", "--help"], timeout=20)
        if p.returncode != 0 or "harn harness" not in p.stdout or " up " not in p.stdout:
            raise Unavailable(f"{cls.binary} has no `harness` subcommand (rebuild it)")

    @classmethod
    def version(cls) -> str:
        p = run([str(cls.binary), "--version"], timeout=20)
        words = p.stdout.split()
        return words[1] if p.returncode == 0 and len(words) >= 2 and words[0] == "harn" else "?"

    @staticmethod
    def stop_setting() -> str:
        return f"stop_grace_ms = {GRACE_MS}"

    def h(self, *args: str) -> list[str]:
        return [str(self.binary), "harness", *args, "--root", str(self.dir)]

    def launch(self) -> None:
        lines = [
            "[limits]",
            "restart_delay_ms = 0",
            "restart_delay_max_ms = 0",
            "flap_window_ms = 1000",
            "flap_threshold = 3",
            "give_up_after = 0",
            "healthy_run_ms = 1000",
            f"stop_grace_ms = {GRACE_MS}",
            "",
        ]
        for s in self.services:
            lines += [f"[harness.{s.name}]", "command = " + json.dumps(s.argv), ""]
        (self.dir / "harness.toml").write_text("\n".join(lines))
        CLEANUP.harn_cgroups.update(harn_cgroup_candidates(self.dir))
        p = run(self.h("up", "--timeout", "30"), timeout=60)
        hint = self.dir / ".harnery" / "harness" / "daemon.json"
        if hint.exists():
            try:
                self.root_pid = int(json.loads(hint.read_text())["pid"])
            except (ValueError, KeyError):
                pass
        if p.returncode != 0:
            raise RuntimeError(f"harn harness up failed: {p.stdout.strip()[-600:]}")
        if self.root_pid is None:
            raise RuntimeError("harn harness up: no daemon.json with a pid")

    def stop_command(self, name: str, ignore_term: bool) -> list[str]:
        return self.h("stop", name)

    def shutdown_tool(self) -> None:
        if self.root_pid and alive(self.root_pid):
            try:
                run(self.h("down", "--timeout", "2"), timeout=30)
            except subprocess.TimeoutExpired:
                log("harn harness down did not return in 30 s")
            wait_until(lambda: not alive(self.root_pid), 5)


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def harn_cgroup_candidates(root: Path) -> list[Path]:
    """Where harn puts the cgroups of `root`'s harnesses: harn-<fnv64(root)> under the cgroup
    v2 group this process is in (the daemon inherits it)."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    mount = None
    for line in mounts:
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"]:
            mount = left.split()[4]
            break
    rel = next((l[3:] for l in own if l.startswith("0::")), None)
    if mount is None or rel is None:
        return []
    name = f"harn-{fnv1a64(str(root.resolve()).encode()):016x}"
    return [Path(mount) / rel.lstrip("/") / name]


class Supervisord(Tool):
    name = "supervisord"

    @staticmethod
    def stop_setting() -> str:
        return f"stopwaitsecs = {GRACE_MS // 1000}"

    def conf(self) -> Path:
        return self.dir / "supervisord.conf"

    def launch(self) -> None:
        d = self.dir
        (d / "logs").mkdir()
        text = f"""[unix_http_server]
file={d}/supervisor.sock

[supervisord]
nodaemon=true
logfile={d}/supervisord.log
pidfile={d}/supervisord.pid
childlogdir={d}/logs
{"user=root" if os.geteuid() == 0 else ""}

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{d}/supervisor.sock
"""
        for s in self.services:
            text += f"""
[program:{s.name}]
command={shlex.join(s.argv)}
autostart=true
autorestart=true
startsecs=0
stopwaitsecs={GRACE_MS // 1000}
redirect_stderr=true
stdout_logfile={d}/logs/{s.name}.log
"""
        self.conf().write_text(text)
        self.proc = self.popen(["supervisord", "-n", "-c", str(self.conf())], "stdout.log")
        self.root_pid = self.proc.pid

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"supervisord exited {self.proc.returncode}: {self.tail('supervisord.log')}")
            if not (d / "supervisor.sock").exists():
                return False
            r = run(["supervisorctl", "-c", str(self.conf()), "pid"], timeout=20)
            return r.stdout.strip().isdigit()

        if not wait_until(ready, 30, 0.1):
            raise RuntimeError("supervisord did not answer within 30 s")

    def tail(self, fname: str) -> str:
        try:
            return (self.dir / fname).read_text()[-600:]
        except OSError:
            return ""

    def ctl(self, *args: str) -> list[str]:
        return ["supervisorctl", "-c", str(self.conf()), *args]

    def stop_command(self, name: str, ignore_term: bool) -> list[str]:
        return self.ctl("stop", name)

    def shutdown_tool(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                run(self.ctl("shutdown"), timeout=30)
                # supervisord stops its programs one by one from its 1 s loop: be patient.
                self.proc.wait(timeout=15 + len(self.services))
            except subprocess.TimeoutExpired:
                log("supervisord did not shut down in time; killing it")


class ScanDirTool(Tool):
    """runit and s6: one scanner process (runsvdir, s6-svscan) watches a directory that holds
    a service directory per program."""

    scan_dir = "?"  # under the tool's working directory
    run_files: dict[str, str] = {}  # extra files in every service directory

    def scanner(self, top: str) -> list[str]:
        """The scanner's argv, watching `top`; its output goes to <argv[0]>.log."""
        raise NotImplementedError

    def stop_all(self, dirs: list[str]) -> None:
        """Stops the services in `dirs` and the scanner, which is still running."""
        raise NotImplementedError

    def svc(self, name: str) -> str:
        return str(self.dir / self.scan_dir / name)

    def launch(self) -> None:
        top = self.dir / self.scan_dir
        self.write_run_dirs(top, self.run_files)
        cmd = self.scanner(str(top))
        self.proc = self.popen(cmd, f"{cmd[0]}.log")
        self.root_pid = self.proc.pid

    def shutdown_tool(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.stop_all([self.svc(s.name) for s in self.services])


class Runit(ScanDirTool):
    name = "runit"
    scan_dir = "service"

    @staticmethod
    def stop_setting() -> str:
        return f"sv -w {GRACE_MS // 1000} force-stop (runsv never sends SIGKILL by itself)"

    def scanner(self, top: str) -> list[str]:
        return ["runsvdir", "-P", top]

    def stop_command(self, name: str, ignore_term: bool) -> list[str]:
        if ignore_term:
            return ["sv", "-w", str(GRACE_MS // 1000), "force-stop", self.svc(name)]
        return ["sv", "-w", "5", "stop", self.svc(name)]

    def stop_all(self, dirs: list[str]) -> None:
        try:
            run(["sv", "-w", str(GRACE_MS // 1000), "force-shutdown", *dirs], timeout=60)
        except subprocess.TimeoutExpired:
            pass
        # runsvdir: HUP makes it TERM every runsv and exit.
        self.proc.send_signal(signal.SIGHUP)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class S6(ScanDirTool):
    name = "s6"
    scan_dir = "scan"
    run_files = {"timeout-kill": f"{GRACE_MS}\n"}

    @staticmethod
    def stop_setting() -> str:
        return f"timeout-kill = {GRACE_MS} (default: never SIGKILL)"

    def scanner(self, top: str) -> list[str]:
        return ["s6-svscan", top]

    def stop_command(self, name: str, ignore_term: bool) -> list[str]:
        return ["s6-svc", "-d", self.svc(name)]

    def stop_all(self, dirs: list[str]) -> None:
        try:
            run(["s6-svc", "-d", *dirs], timeout=30)
            # -t: bring every service down and exit once they are (timeout-kill applies).
            run(["s6-svscanctl", "-t", str(self.dir / self.scan_dir)], timeout=30)
            self.proc.wait(timeout=GRACE_MS / 1000 + 10)
        except subprocess.TimeoutExpired:
            log("s6-svscan did not exit in time; killing it")


TOOL_CLASSES: dict[str, type[Tool]] = {"harn": Harn, "supervisord": Supervisord, "runit": Runit, "s6": S6}


# ----------------------------------------------------------------------------------------
# The measurements


class Bench:
    def __init__(self, args: argparse.Namespace, base: Path):
        self.args = args
        self.base = base
        self.seq = 0

    def marker(self, tool: str) -> str:
        self.seq += 1
        return f"9{TOKEN}{TOOLS.index(tool):02d}{self.seq:04d}"

    def workdir(self, tool: str, phase: str) -> Path:
        # Short names: harn's control socket must fit in sun_path under the root.
        return Path(tempfile.mkdtemp(prefix=f"{tool[:2]}{phase[:2]}-", dir=self.base))

    def session(self, tool: str, phase: str, services: list[Service]) -> Tool:
        t = TOOL_CLASSES[tool](self.workdir(tool, phase), services)
        t.start()
        return t

    def child(self, mode: str, *args: str) -> list[str]:
        return ["/bin/sh", str(CHILD), mode, *args]

    def wait_children(self, tool: Tool, markers: list[str], per_marker: int = 1, timeout: float = 60) -> None:
        def ok() -> bool:
            snap = snapshot()
            return all(len(marker_pids(m, snap)) >= per_marker for m in markers)

        if not wait_until(ok, timeout, 0.1):
            snap = snapshot()
            have = sum(1 for m in markers if len(marker_pids(m, snap)) >= per_marker)
            raise RuntimeError(f"only {have} of {len(markers)} children came up within {timeout:.0f} s")

    def kill_markers(self, markers: list[str]) -> None:
        for m in markers:
            for pid in marker_pids(m):
                kill_pid(pid)

    # a. respawn latency
    def respawn(self, tool: str, notify: bool = False) -> dict:
        """`notify`: s6 only — the child reports readiness on fd 3 (notification-fd), without
        which s6-supervise always waits 1 s before a respawn."""
        n = self.args.restarts
        wd = self.workdir(tool, "rsp")
        times = wd / "times"
        script = wd / "timed.sh"
        script.write_text(
            "#!/bin/bash\n"
            "# The respawn child: note the start, live 1.5 s, note the end, exit 0.\n"
            f"printf 'S %s\\n' \"$EPOCHREALTIME\" >> {shlex.quote(str(times))}\n"
            + ("printf '\\n' >&3; exec 3>&-\n" if notify else "")
            + f"sleep {RESPAWN_CHILD_SECS}\n"
            f"printf 'E %s\\n' \"$EPOCHREALTIME\" >> {shlex.quote(str(times))}\n"
            "exit 0\n"
        )
        script.chmod(0o755)
        files = {"notification-fd": "3\n"} if notify else {}
        t = TOOL_CLASSES[tool](wd, [Service("respawn", [str(script)], files)])

        def counts() -> tuple[list[float], list[float]]:
            starts, ends = [], []
            try:
                lines = times.read_text().splitlines()
            except OSError:
                return starts, ends
            for line in lines:
                parts = line.split()
                if len(parts) != 2:
                    continue
                v = float(parts[1].replace(",", "."))
                (starts if parts[0] == "S" else ends).append(v)
            return starts, ends

        try:
            t.start()
            limit = (n + 2) * (RESPAWN_CHILD_SECS + 5) + 15
            ok = wait_until(lambda: len(counts()[0]) >= n + 1, limit, 0.25)
        finally:
            t.shutdown()
        starts, ends = counts()
        lat = [(s - e) * 1000 for e, s in zip(ends, starts[1:])][:n]
        if not lat:
            raise RuntimeError(f"no restart seen within the time limit ({len(starts)} starts)")
        res = {
            "samples": len(lat),
            "p50_ms": statistics.median(lat),
            "p95_ms": percentile(lat, 95),
            "max_ms": max(lat),
            "min_ms": min(lat),
            "latencies_ms": [round(x, 3) for x in lat],
            "readiness_notification": notify,
        }
        if not ok:
            res["note"] = f"only {len(lat)} of {n} restarts seen within {limit:.0f} s"
        return res

    # b. idle cost (and c. memory at 10 children, measured in the same session)
    def idle(self, tool: str) -> dict:
        markers = [self.marker(tool) for _ in range(10)]
        services = [Service(f"i{i}", self.child("run", m)) for i, m in enumerate(markers)]
        t = self.session(tool, "idl", services)
        try:
            self.wait_children(t, markers)
            time.sleep(self.args.settle)
            pids = t.supervising()
            pss = pss_kib(pids)
            before = task_counters(pids)
            t0 = time.monotonic()
            time.sleep(self.args.idle_secs)
            secs = time.monotonic() - t0
            after = task_counters(pids)
            alive_children = sum(1 for m in markers if marker_pids(m))
        finally:
            t.shutdown()
            self.kill_markers(markers)
        common = before.keys() & after.keys()
        d = {k: sum(after[x][k] - before[x][k] for x in common) for k in ("ticks", "vol", "invol", "sched_ns")}
        ctx = d["vol"] + d["invol"]
        return {
            "seconds": round(secs, 3),
            "processes": len(pids),
            "tasks": len(common),
            "tasks_appeared_or_went": len(before.keys() ^ after.keys()),
            "cpu_ms_utime_stime": d["ticks"] * 1000 / CLK_TCK,
            "cpu_ms_sched": d["sched_ns"] / 1e6,
            "cpu_ms_per_min": d["sched_ns"] / 1e6 * 60 / secs,
            "ctx_voluntary": d["vol"],
            "ctx_involuntary": d["invol"],
            "ctx_switches": ctx,
            "wakeups_per_min": ctx * 60 / secs,
            "children_alive_at_end": alive_children,
            "pss_kib_10": pss,
        }

    # c. memory
    def memory(self, tool: str, n: int) -> dict:
        markers = [self.marker(tool) for _ in range(n)]
        services = [Service(f"m{i}", self.child("run", m)) for i, m in enumerate(markers)]
        t = self.session(tool, f"m{n}", services)
        try:
            self.wait_children(t, markers, timeout=60 + n)
            time.sleep(self.args.settle)
            pids = t.supervising()
            return {"children": n, "processes": len(pids), "pss_kib": pss_kib(pids)}
        finally:
            t.shutdown()
            self.kill_markers(markers)

    def stop_and_time(self, t: Tool, name: str, main: int, ignore_term: bool, limit: float) -> tuple[float | None, str]:
        """Runs the tool's stop command and polls until `main` is gone; (seconds, output)."""
        cmd = t.stop_command(name, ignore_term)
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        gone_at = None
        deadline = t0 + limit
        while time.monotonic() < deadline:
            if not alive(main):
                gone_at = time.monotonic() - t0
                break
            time.sleep(0.002)
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()) + 10)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        return gone_at, f"{shlex.join(cmd)} -> {p.returncode}: {out.strip()[-300:]}"

    # d. stopping a child that ignores SIGTERM
    def stop(self, tool: str) -> dict:
        m = self.marker(tool)
        t = self.session(tool, "stp", [Service("stubborn", self.child("ignore-term", m))])
        try:
            # Two processes: the shell (TERM ignored) and its `sleep 1000<marker>`, which exists
            # only after the trap is set.
            self.wait_children(t, [m], per_marker=2)
            time.sleep(0.3)
            mains = [p for p in marker_pids(m) if "ignore-term" in argv_of(p)]
            if not mains:
                raise RuntimeError("the ignore-term child is not running")
            secs, out = self.stop_and_time(t, "stubborn", mains[0], True, 30)
            time.sleep(0.5)
            left = len(marker_pids(m))
            return {
                "seconds": secs,
                "setting": TOOL_CLASSES[tool].stop_setting(),
                "left_after": left,
                "command": out,
            }
        finally:
            t.shutdown()
            self.kill_markers([m])

    # e. grandchildren left after a stop
    def tree(self, tool: str) -> dict:
        markers = {style: self.marker(tool) for style in STYLES}
        services = [Service(f"t-{style}", self.child("tree", style, m)) for style, m in markers.items()]
        t = self.session(tool, "tre", services)
        out = {}
        try:
            self.wait_children(t, list(markers.values()), per_marker=2)
            time.sleep(0.5)
            for style, m in markers.items():
                snap = snapshot()
                mains = [p for p in marker_pids(m, snap) if snap[p][2] == ["sleep", "1000" + m]]
                if not mains:
                    out[style] = {"error": "the child is not running"}
                    continue
                secs, cmd = self.stop_and_time(t, f"t-{style}", mains[0], False, 15)
                time.sleep(1.0)
                snap = snapshot()
                out[style] = {
                    "stopped_in_s": secs,
                    "left": len(marker_pids(m, snap)),
                    "zombies": len(marker_pids(m, snap, zombies=True)),
                    "left_argv": [snap[p][2] for p in marker_pids(m, snap)],
                    "command": cmd,
                }
        finally:
            t.shutdown()
            self.kill_markers(list(markers.values()))
        return out


def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


# ----------------------------------------------------------------------------------------
# Report


def fmt_ms(x) -> str:
    return "–" if x is None else (f"{x:.1f}" if x >= 10 else f"{x:.2f}")


def cell(res: dict, key: str, render: Callable[[dict], str]) -> str:
    v = res.get(key)
    if v is None:
        return "–"
    if isinstance(v, dict) and "error" in v and len(v) == 1:
        return "error: " + v["error"].replace("|", "/")[:80]
    return render(v)


def table(results: dict) -> str:
    head = [
        "tool",
        "version",
        "respawn p50 / p95 ms",
        "idle CPU ms/min",
        "idle wakeups/min",
        "PSS KiB @1 / @10 / @100",
        "stop ignore-TERM s",
        "stop setting",
        "grandchildren left (same / setsid / double / daemon)",
    ]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tool, res in results["tools"].items():
        if "unavailable" in res:
            rows.append(f"| {tool} | unavailable: {res['unavailable']} |" + " |" * (len(head) - 2))
            continue
        respawn = cell(res, "respawn", lambda r: f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p95_ms'])}"
                       + (f" (n={r['samples']})" if r["samples"] != results["settings"]["restarts"] else ""))
        if isinstance(res.get("respawn_without_notification"), dict) and "p50_ms" in res["respawn_without_notification"]:
            r = res["respawn_without_notification"]
            respawn += f" (with notification-fd; without: {fmt_ms(r['p50_ms'])} / {fmt_ms(r['p95_ms'])})"
        cpu = cell(res, "idle", lambda r: f"{r['cpu_ms_per_min']:.2f}")
        wake = cell(res, "idle", lambda r: f"{r['wakeups_per_min']:.1f}")

        def mem(n: int) -> str:
            if n == 10:
                return cell(res, "idle", lambda r: str(r["pss_kib_10"]))
            return cell(res, f"memory_{n}", lambda r: str(r["pss_kib"]))

        pss = f"{mem(1)} / {mem(10)} / {mem(100)}"
        stop = cell(res, "stop", lambda r: (fmt_s(r["seconds"]) + (f" (+{r['left_after']} left)" if r["left_after"] else "")))
        setting = TOOL_CLASSES[tool].stop_setting()
        tree = cell(res, "tree", lambda r: " / ".join(
            str(r[s]["left"]) if "left" in r.get(s, {}) else "err" for s in STYLES))
        rows.append("| " + " | ".join([tool, res.get("version", "?"), respawn, cpu, wake, pss, stop, setting, tree]) + " |")
    return "\n".join(rows)


def fmt_s(x) -> str:
    return "never (limit hit)" if x is None else f"{x:.3f}"


def targets(results: dict) -> list[str]:
    tools = results["tools"]
    h = tools.get("harn", {})
    peers = {t: r for t, r in tools.items() if t != "harn" and "unavailable" not in r}
    out = []

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("PASS" if ok else "FAIL")

    # Respawn latency.
    hr = h.get("respawn") if isinstance(h.get("respawn"), dict) and "p50_ms" in h.get("respawn", {}) else None
    pr = {t: r["respawn"] for t, r in peers.items() if isinstance(r.get("respawn"), dict) and "p50_ms" in r["respawn"]}
    if hr and pr:
        best = min(pr, key=lambda t: pr[t]["p50_ms"])
        best95 = min(pr, key=lambda t: pr[t]["p95_ms"])
        ok = hr["p50_ms"] <= pr[best]["p50_ms"] and hr["p95_ms"] <= pr[best95]["p95_ms"]
        out.append(
            f"- respawn latency no worse than the best peer: harn p50 {fmt_ms(hr['p50_ms'])} ms / p95 "
            f"{fmt_ms(hr['p95_ms'])} ms; best peer p50 {fmt_ms(pr[best]['p50_ms'])} ms ({best}), "
            f"p95 {fmt_ms(pr[best95]['p95_ms'])} ms ({best95}) -> {verdict(ok)}"
        )
    else:
        out.append("- respawn latency no worse than the best peer: n/a (missing figures)")

    # Idle wakeups: at most one per started minute counts as "no periodic wakeups".
    hi = h.get("idle") if isinstance(h.get("idle"), dict) and "ctx_switches" in h.get("idle", {}) else None
    if hi:
        allowed = max(1, math.ceil(hi["seconds"] / 60))
        s6 = peers.get("s6", {}).get("idle", {})
        s6txt = f"s6 {s6['wakeups_per_min']:.1f}/min" if "wakeups_per_min" in s6 else "s6 n/a"
        out.append(
            f"- no periodic wakeups when idle (<= 1 per minute): harn {hi['ctx_switches']} context "
            f"switches in {hi['seconds']:.0f} s = {hi['wakeups_per_min']:.1f}/min ({s6txt}) -> "
            f"{verdict(hi['ctx_switches'] <= allowed)}"
        )
    else:
        out.append("- no periodic wakeups when idle: n/a (missing figures)")

    # Memory at 100 children.
    hm = h.get("memory_100", {}).get("pss_kib") if isinstance(h.get("memory_100"), dict) else None
    pm = {t: r["memory_100"]["pss_kib"] for t, r in peers.items()
          if isinstance(r.get("memory_100"), dict) and "pss_kib" in r["memory_100"]}
    if hm is not None and pm:
        best = min(pm, key=pm.get)
        out.append(
            f"- memory at 100 children at most half the best peer's: harn {hm} KiB; best peer "
            f"{pm[best]} KiB ({best}), half = {pm[best] / 2:.0f} KiB -> {verdict(hm <= pm[best] / 2)}"
        )
    else:
        out.append("- memory at 100 children at most half the best peer's: n/a (missing figures)")

    # Grandchildren.
    ht = h.get("tree") if isinstance(h.get("tree"), dict) and "error" not in h.get("tree", {}) else None
    if ht:
        lefts = {s: ht.get(s, {}).get("left") for s in STYLES}
        ok = all(v == 0 for v in lefts.values())
        out.append(
            "- zero surviving grandchildren in all four styles: harn "
            + ", ".join(f"{s} {v if v is not None else 'err'}" for s, v in lefts.items())
            + f" -> {verdict(ok)}"
        )
    else:
        out.append("- zero surviving grandchildren in all four styles: n/a (missing figures)")
    return out


# ----------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle-secs", type=float, default=60, help="idle window for CPU and wakeups (default 60)")
    ap.add_argument("--restarts", type=int, default=30, help="restarts measured for respawn latency (default 30)")
    ap.add_argument("--only", default=",".join(TOOLS), help="comma-separated subset of " + ",".join(TOOLS))
    ap.add_argument("--harn", type=Path, default=DEFAULT_HARN, help="the harn binary (default ../../target/release/harn)")
    ap.add_argument("--settle", type=float, default=8.0, help="seconds to let a tool settle after its children are up (harn gives back its start-up code after 5 s idle)")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON instead of the table")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get anything; missing peers are unavailable")
    args = ap.parse_args()
    only = [t.strip() for t in args.only.split(",") if t.strip()]
    bad = [t for t in only if t not in TOOLS]
    if bad:
        ap.error(f"unknown tool(s) {bad}; choose from {TOOLS}")
    if args.restarts < 1 or args.idle_secs <= 0:
        ap.error("--restarts must be >= 1 and --idle-secs > 0")
    if not CHILD.exists():
        print(f"peers.py: the test child {CHILD} is missing", file=sys.stderr)
        return 2
    Harn.binary = args.harn.resolve()

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    results: dict = {
        "settings": {
            "idle_secs": args.idle_secs,
            "restarts": args.restarts,
            "respawn_child_secs": RESPAWN_CHILD_SECS,
            "grace_ms": GRACE_MS,
            "settle_secs": args.settle,
            "harn": str(Harn.binary),
            "child": str(CHILD),
            "kernel": os.uname().release,
            "cpus": os.cpu_count(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "tools": {},
    }
    try:
        problems: dict[str, str] = {}
        peers = [t for t in only if t in PACKAGES]
        if peers:
            if args.no_install:
                for t in peers:
                    if dpkg_installed(PACKAGES[t]) is None:
                        problems[t] = f"package {PACKAGES[t]} not installed (--no-install)"
            else:
                try:
                    problems = install_peers(peers)
                except (OSError, subprocess.SubprocessError) as e:
                    problems = {t: f"installing failed: {e}" for t in peers}
        CLEANUP.base = Path(tempfile.mkdtemp(prefix="harn-peers-"))
        bench = Bench(args, CLEANUP.base)
        for tool in only:
            res: dict = {}
            results["tools"][tool] = res
            try:
                if tool in problems:
                    raise Unavailable(problems[tool])
                if tool == "harn":
                    Harn.check()
                res["version"] = TOOL_CLASSES[tool].version()
            except Unavailable as e:
                res["unavailable"] = str(e)
                log(f"{tool}: unavailable: {e}")
                continue
            phases: list[tuple[str, Callable[[], dict]]] = [
                ("respawn", lambda: bench.respawn(tool, notify=(tool == "s6"))),
                ("idle", lambda: bench.idle(tool)),
                ("memory_1", lambda: bench.memory(tool, 1)),
                ("memory_100", lambda: bench.memory(tool, 100)),
                ("stop", lambda: bench.stop(tool)),
                ("tree", lambda: bench.tree(tool)),
            ]
            if tool == "s6":
                phases.insert(1, ("respawn_without_notification", lambda: bench.respawn(tool)))
            failures = 0
            for key, fn in phases:
                log(f"{tool}: {key}")
                try:
                    res[key] = fn()
                except (RuntimeError, OSError, subprocess.SubprocessError, ValueError) as e:
                    res[key] = {"error": str(e)}
                    failures += 1
                    log(f"{tool}: {key} failed: {e}")
                CLEANUP.sweep()
            if failures == len(phases) and "error" in res.get("respawn", {}):
                res["unavailable"] = "every measurement failed: " + res["respawn"]["error"]
    except KeyboardInterrupt as e:
        log(f"interrupted ({e}); cleaning up")
        CLEANUP.all()
        return 130
    finally:
        CLEANUP.all()

    if args.json:
        print(json.dumps(results, indent=2))
    else:
        s = results["settings"]
        print(f"## harn harness vs supervisord, runit, s6 ({s['started_at']}, kernel {s['kernel']}, "
              f"{s['cpus']} CPUs; {s['restarts']} restarts, {s['idle_secs']:g} s idle)\n")
        print(table(results))
        print("\nTargets:")
        for line in targets(results):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
