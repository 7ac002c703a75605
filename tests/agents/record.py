#!/usr/bin/env python3
"""Record tests/fixtures/agents/ from the real Claude Code and Codex CLIs.

Starts standin.py on a free port, runs every case below with a private temporary HOME
(and CODEX_HOME) and working directory, and writes NAME.stdout, NAME.stderr and
NAME.code for each into tests/fixtures/agents/claude-VERSION/ and codex-VERSION/,
replacing the temporary paths and ports with <CWD>, <HOME>, <TMP> and <PORT> (and
Claude's per-project directory name, the cwd with "/" turned into "-", with <CWD-SLUG>).
It also writes manifest.json there: each case's argv, extra environment, timeout,
wall time and the files left in its working directory.

    python3 tests/agents/record.py                 # every case (about 6 minutes)
    python3 tests/agents/record.py json-text ...   # only these names (both CLIs)
    python3 tests/agents/record.py codex claude:json-text   # all of Codex, one of Claude

The CLIs are found as $CLAUDE and $CODEX, else under /tmp/agents/p/node_modules/.bin/
(npm install --prefix /tmp/agents/p @anthropic-ai/claude-code@2.1.197
 @openai/codex@0.171.0 --no-audit --no-fund).  No network is needed or used.
"""

import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "fixtures" / "agents"
BIN = Path("/tmp/agents/p/node_modules/.bin")
CLAUDE = os.environ.get("CLAUDE", str(BIN / "claude"))
CODEX = os.environ.get("CODEX", str(BIN / "codex"))
PATH = f"{Path(shutil.which('node') or '/usr/bin/node').parent}:/usr/bin:/bin"

# Switches that keep each CLI from reaching anything but the stand-in.
CLAUDE_ENV = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
              "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1"}
CODEX_CONFIG = """openai_base_url = "http://127.0.0.1:{port}/v1"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false
"""
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"], "additionalProperties": False}

CLAUDE_JSON = ["-p", "--output-format", "json"]
CLAUDE_STREAM = ["-p", "--output-format", "stream-json", "--verbose"]
CODEX_EXEC = ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]


def case(name, argv, prompt=None, auth="key", timeout=300, env=None, before=None):
    """auth: key (a working key), none (no credentials), closed (key, base URL on a
    closed port), env-key (Claude: ANTHROPIC_API_KEY instead of apiKeyHelper)."""
    return {"name": name, "argv": argv, "prompt": prompt, "auth": auth,
            "timeout": timeout, "env": env or {}, "before": before}


def claude_cases():
    cases = []
    for mode, base in (("json", CLAUDE_JSON), ("stream", CLAUDE_STREAM)):
        def c(name, scenario, extra=(), **kw):
            prompt = f"Do the task. HARN-SCENARIO={scenario}"
            cases.append(case(f"{mode}-{name}", base + list(extra), prompt, **kw))
        c("text", "text")
        c("write-file", "write-file", ["--permission-mode", "acceptEdits"])
        c("write-denied", "write-file")
        c("max-turns", "max-turns", ["--max-turns", "2"])
        for sc in ("unauthorized", "forbidden", "rate-limited", "overloaded",
                   "server-error", "usage-limit"):
            c(sc, sc)
        c("not-logged-in", "text", auth="none")
        c("no-network", "text", auth="closed", timeout=120)
        c("hang", "hang", timeout=20)
    prompt = "Do the task. HARN-SCENARIO=text"
    cases += [
        case("plain-text", ["-p"], prompt),
        case("json-unauthorized-api-key", CLAUDE_JSON, "HARN-SCENARIO=unauthorized",
             auth="env-key"),
        case("json-rate-limited-retries-2", CLAUDE_JSON, "HARN-SCENARIO=rate-limited",
             env={"CLAUDE_CODE_MAX_RETRIES": "2"}),
        case("json-no-network-retries-2", CLAUDE_JSON, prompt, auth="closed", timeout=120,
             env={"CLAUDE_CODE_MAX_RETRIES": "2"}),
        # A vendor that never answers, until Claude Code's own request timeout ends it.
        case("stream-hang-own-timeout", CLAUDE_STREAM, "HARN-SCENARIO=hang", timeout=120,
             env={"API_TIMEOUT_MS": "3000", "CLAUDE_CODE_MAX_RETRIES": "1"}),
        # A plan's usage limit that names its reset, in the zone harn runs Claude Code in.
        case("stream-usage-limit-reset", CLAUDE_STREAM, "HARN-SCENARIO=usage-limit-reset",
             env={"TZ": "UTC", "CLAUDE_CODE_MAX_RETRIES": "1"}),
        case("json-effort-model", CLAUDE_JSON + ["--effort", "high", "--model", "sonnet"],
             prompt),
        case("json-schema", CLAUDE_JSON + ["--json-schema", json.dumps(SCHEMA)], prompt),
        case("json-resume", CLAUDE_JSON + ["--resume", "{SESSION}"], "And again.",
             before=(CLAUDE_JSON, prompt)),
        case("json-resume-unknown",
             CLAUDE_JSON + ["--resume", "00000000-0000-4000-8000-000000000000"], prompt),
        case("auth-status-logged-out", ["auth", "status"], auth="none"),
        case("auth-status-logged-in", ["auth", "status"]),
        case("auth-status-api-key", ["auth", "status"], auth="env-key"),
    ]
    return cases


def codex_cases():
    prompt = "Do the task. HARN-SCENARIO={}"
    cases = [case(f"json-{sc}", CODEX_EXEC + ["-"], prompt.format(sc))
             for sc in ("text", "write-file", "unauthorized", "forbidden", "rate-limited",
                        "overloaded", "server-error", "usage-limit")]
    text = prompt.format("text")
    cases += [
        # A plan's usage limit that names its reset, in the zone harn runs Codex in.
        case("json-usage-limit-reset", CODEX_EXEC + ["-"], prompt.format("usage-limit-reset"),
             env={"TZ": "UTC"}),
        case("json-hang", CODEX_EXEC + ["-"], prompt.format("hang"), timeout=20),
        case("json-not-logged-in", CODEX_EXEC + ["-"], text, auth="none"),
        case("json-no-network", CODEX_EXEC + ["-"], text, auth="closed", timeout=60),
        case("json-no-network-bounded",
             CODEX_EXEC + ["--disable", "unbounded_connection_retries", "-"], text,
             auth="closed", timeout=180),
        case("json-not-git", ["exec", "--json", "--sandbox", "workspace-write", "-"], text),
        case("plain-text", ["exec", "--skip-git-repo-check", "--sandbox", "workspace-write",
                            "-"], text),
        case("json-model-effort",
             CODEX_EXEC + ["-m", "gpt-5.5", "-c", "model_reasoning_effort=high", "-"], text),
        case("json-output-schema", CODEX_EXEC + ["--output-schema", "{TMP}/schema.json", "-"],
             text),
        case("json-resume", CODEX_EXEC + ["resume", "{SESSION}", "-"], "And again.",
             before=(CODEX_EXEC + ["-"], text)),
        case("json-resume-unknown",
             CODEX_EXEC + ["resume", "00000000-0000-4000-8000-000000000000", "-"], text),
        case("login-status-logged-out", ["login", "status"], auth="none"),
        case("login-with-api-key", ["login", "--with-api-key"], "sk-test", auth="none"),
        case("login-status-logged-in", ["login", "status"], auth="login"),
    ]
    return cases


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def setup(tool: str, c: dict, tmp: Path, port: int) -> dict:
    """Lay out HOME for one case; return its environment."""
    home, work = tmp / "home", tmp / "work"
    work.mkdir(parents=True)
    env = {"PATH": PATH, "HOME": str(home)}
    url_port = c["closed_port"] if c["auth"] == "closed" else port
    if tool == "claude":
        (home / ".claude").mkdir(parents=True)
        settings = {"env": {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{url_port}"}}
        if c["auth"] in ("key", "closed"):
            settings["apiKeyHelper"] = "echo sk-test"
        (home / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
        env.update(CLAUDE_ENV)
        if c["auth"] == "env-key":
            env["ANTHROPIC_API_KEY"] = "sk-test"
    else:
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True)
        (codex_home / "config.toml").write_text(CODEX_CONFIG.format(port=url_port))
        env["CODEX_HOME"] = str(codex_home)
        if c["auth"] in ("key", "closed"):
            env["CODEX_API_KEY"] = "sk-test"
        if c["auth"] == "login":
            subprocess.run([CODEX, "login", "--with-api-key"], input=b"sk-test", env=env,
                           cwd=work, capture_output=True, timeout=60, check=True)
        (tmp / "schema.json").write_text(json.dumps(SCHEMA))
    return dict(env, **c["env"])


def run(tool: str, c: dict, port: int) -> dict:
    exe = CLAUDE if tool == "claude" else CODEX
    # No "_" in the name: Claude turns every non-alphanumeric into "-" in its project slug.
    tmp = Path(tempfile.gettempdir()) / f"harn-rec-{tool}-{uuid.uuid4().hex[:10]}"
    c["closed_port"] = closed_port()
    env = setup(tool, c, tmp, port)
    work = tmp / "work"
    subst = {"{TMP}": str(tmp), "{SESSION}": ""}
    if c["before"]:  # a first session, for resume
        argv, prompt = c["before"]
        first = subprocess.run([exe] + argv, input=prompt.encode(), env=env, cwd=work,
                               capture_output=True, timeout=120)
        line = first.stdout.decode().splitlines()[0]
        subst["{SESSION}"] = json.loads(line).get("session_id") or json.loads(line)["thread_id"]
    argv = [subst.get(a, a.replace("{TMP}", str(tmp))) for a in c["argv"]]
    stdin = c["prompt"].encode() + b"\n" if c["prompt"] is not None else b""
    start = time.monotonic()
    proc = subprocess.run(["timeout", str(c["timeout"]), exe] + argv, input=stdin, env=env,
                          cwd=work, capture_output=True)
    took = round(time.monotonic() - start, 1)

    def norm(data: bytes) -> str:
        text = data.decode("utf-8", "replace")
        text = text.replace(str(work).replace("/", "-"), "<CWD-SLUG>")  # Claude's project dir
        for path, mark in ((work, "<CWD>"), (tmp / "home", "<HOME>"), (tmp, "<TMP>")):
            text = text.replace(str(path), mark)
        for p in (port, c["closed_port"]):
            text = text.replace(f"127.0.0.1:{p}", "127.0.0.1:<PORT>")
        return text

    dest = OUT / f"{tool}-{VERSIONS[tool]}"
    (dest / f"{c['name']}.stdout").write_text(norm(proc.stdout))
    (dest / f"{c['name']}.stderr").write_text(norm(proc.stderr))
    (dest / f"{c['name']}.code").write_text(f"{proc.returncode}\n")
    files = sorted(p.name for p in work.iterdir())
    shutil.rmtree(tmp, ignore_errors=True)
    shown_env = {k: norm(v.encode()) for k, v in env.items() if k != "PATH"}
    return {"name": c["name"], "argv": [tool] + [norm(a.encode()) for a in argv],
            "stdin": c["prompt"], "env": shown_env, "timeout": c["timeout"],
            "seconds": took, "code": proc.returncode, "files_left": files}


def version(exe: str) -> str:
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    return next(w for w in out.split() if w[0].isdigit())


VERSIONS = {}


def main():
    only = set(sys.argv[1:])
    VERSIONS["claude"], VERSIONS["codex"] = version(CLAUDE), version(CODEX)
    log = Path(tempfile.mkdtemp(prefix="harn-rec-log-")) / "standin.jsonl"
    server = subprocess.Popen([sys.executable, "-B", str(HERE / "standin.py"), "--port", "0",
                               "--log", str(log)], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline().split()[1])
    print(f"stand-in on port {port}, log {log}", flush=True)
    jobs = [("claude", c) for c in claude_cases()] + [("codex", c) for c in codex_cases()]
    jobs = [(t, c) for t, c in jobs
            if not only or {t, c["name"], f"{t}:{c['name']}"} & only]
    slow = ("unauthorized", "rate-limited", "overloaded", "server-error", "no-network")
    jobs.sort(key=lambda j: not any(w in j[1]["name"] for w in slow))  # the slow ones first
    for tool in VERSIONS:
        (OUT / f"{tool}-{VERSIONS[tool]}").mkdir(parents=True, exist_ok=True)
    results = {"claude": [], "codex": []}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
            futures = {pool.submit(run, tool, c, port): tool for tool, c in jobs}
            for f in concurrent.futures.as_completed(futures):
                r = f.result()
                results[futures[f]].append(r)
                print(f"{futures[f]:6} {r['name']:32} exit {r['code']:3} {r['seconds']:6}s",
                      flush=True)
    finally:
        server.terminate()
        server.wait()
    for tool, rs in results.items():
        path = OUT / f"{tool}-{VERSIONS[tool]}" / "manifest.json"
        old = json.loads(path.read_text()) if path.exists() and only else []
        merged = {r["name"]: r for r in old + rs}
        path.write_text(json.dumps([merged[k] for k in sorted(merged)], indent=1) + "\n")


if __name__ == "__main__":
    main()
