#!/usr/bin/env python3
"""A local stand-in for the Anthropic Messages API, the OpenAI Responses API and the Gemini API.

It lets the real Claude Code and Codex CLIs run with no network: point them at
http://127.0.0.1:PORT (README.md beside this file says how) and every request is
answered here, deterministically, by a *scenario* named anywhere in the prompt as
``HARN-SCENARIO=<name>`` (default ``text``):

  text          reply "stand-in reply" with fixed, non-zero usage
  write-file    ask the CLI's own tool to write hello.txt ("hello from the stand-in\n")
                in the working directory, then reply "done writing"
  commit        write agent.txt ("committed by the agent\n") with the CLI's own tool, then
                commit it with git in a shell, then reply "done committing"
  max-turns     ask for a harmless tool call (`true` in a shell) forever
  unauthorized  401            forbidden     403
  rate-limited  429 with retry-after: 0
  overloaded    Anthropic 529 overloaded_error / OpenAI 503 server_is_overloaded
  server-error  500
  usage-limit   Anthropic 400 "credit balance is too low" / OpenAI 429 insufficient_quota
  usage-limit-reset  a plan's usage limit that names its reset, two hours ahead on the half
                hour: Anthropic 429 with the unified rate-limit headers / OpenAI 429
                usage_limit_reached with resets_at
  hang          read the request, answer nothing, keep the connection open

A request with no credentials at all (no x-api-key / Authorization) gets the vendor's
401, as a logged-out CLI would.  Structured-output requests (Claude's --json-schema,
Codex's --output-schema) get a small value that fits the schema.

Routes: POST /v1/messages (stream or not), POST /v1/messages/count_tokens,
POST /v1beta/models/MODEL:streamGenerateContent (SSE) and :generateContent (Gemini CLI,
through GOOGLE_GEMINI_BASE_URL),
POST /v1/responses (SSE), GET /v1/responses with Upgrade: websocket (Codex's default
transport), HEAD / (Claude's connectivity probe); anything else is a 404.

Every request is appended to --log FILE as one JSON line {"time", "method", "path",
"headers" (secrets masked), "scenario", "body"}; "method" is GET-websocket for a
WebSocket handshake and WS for each message received over it.

Run:  python3 standin.py --port 0 --log /tmp/standin.jsonl
      prints "listening PORT" as its first stdout line; SIGTERM or Ctrl-C stops it.

Python 3.11, standard library only.
"""

import argparse
import base64
import hashlib
import json
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCENARIO_RE = re.compile(r"HARN-SCENARIO=([a-z][a-z0-9-]*)")
SECRET_HEADERS = {"authorization", "x-api-key", "cookie", "chatgpt-account-id"}
REPLY = "stand-in reply"
FILE_NAME = "hello.txt"
FILE_TEXT = "hello from the stand-in\n"
COMMIT_FILE = "agent.txt"
COMMIT_TEXT = "committed by the agent\n"
COMMIT_COMMAND = "git add agent.txt && git commit -q -m 'the agent commits'"

# Fixed usage numbers so fixtures and tests can compare exact values.
ANTHROPIC_USAGE = {"input_tokens": 11, "cache_creation_input_tokens": 3,
                   "cache_read_input_tokens": 5, "output_tokens": 7}
OPENAI_USAGE = {"input_tokens": 13, "input_tokens_details": {"cached_tokens": 5},
                "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 2},
                "total_tokens": 20}

GEMINI_USAGE = {"promptTokenCount": 11, "candidatesTokenCount": 3, "totalTokenCount": 14}
GEMINI_ERRORS = {  # scenario -> (status, status word, message)
    "unauthorized": (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
    "rate-limited": (429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    "server-error": (500, "INTERNAL", "An internal error has occurred."),
}


def gemini_reply(body: dict, scenario: str) -> list[dict]:
    """The model's parts: write-file asks for Gemini CLI's write_file tool until a function
    response comes back, then says it is done; anything else is the plain reply."""
    contents = body.get("contents") or [{}]
    answered = any("functionResponse" in p for p in contents[-1].get("parts", []))
    if scenario == "write-file" and not answered:
        return [{"functionCall": {"name": "write_file",
                                  "args": {"file_path": FILE_NAME, "content": FILE_TEXT}}}]
    if scenario == "write-file":
        return [{"text": "done writing"}]
    return [{"text": REPLY}]


ANTHROPIC_ERRORS = {  # scenario -> (status, error type, message)
    "unauthorized": (401, "authentication_error", "invalid x-api-key"),
    "forbidden": (403, "permission_error",
                  "Your API key does not have permission to use the specified resource."),
    "rate-limited": (429, "rate_limit_error",
                     "This request would exceed the rate limit for your organization of "
                     "50 requests per minute. Please try again later."),
    "overloaded": (529, "overloaded_error", "Overloaded"),
    "server-error": (500, "api_error", "Internal server error"),
    "usage-limit": (400, "invalid_request_error",
                    "Your credit balance is too low to access the Anthropic API. "
                    "Please go to Plans & Billing to upgrade or purchase credits."),
}
OPENAI_ERRORS = {  # scenario -> (status, error type, code, message)
    "unauthorized": (401, "invalid_request_error", "invalid_api_key",
                     "Incorrect API key provided: sk-test. You can find your API key at "
                     "https://platform.openai.com/account/api-keys."),
    "forbidden": (403, "invalid_request_error", "unsupported_country_region_territory",
                  "Country, region, or territory not supported"),
    "rate-limited": (429, "requests", "rate_limit_exceeded",
                     "Rate limit reached for requests. Please try again in 0s."),
    "overloaded": (503, "server_error", "server_is_overloaded",
                   "The server is overloaded or not ready yet."),
    "server-error": (500, "server_error", None,
                     "The server had an error while processing your request. Sorry about that!"),
    "usage-limit": (429, "insufficient_quota", "insufficient_quota",
                    "You exceeded your current quota, please check your plan and billing "
                    "details."),
}


def reset_at() -> int:
    """When a `usage-limit-reset` limit resets: two hours from now, on the half hour."""
    return (int(time.time()) + 7200) // 1800 * 1800


# Scenario of each OpenAI response id: a request that continues one (previous_response_id,
# as Codex does over its WebSocket) sends only the new input items, not the prompt.
SCENARIOS: dict[str, str] = {}


# What each vendor answers a request that carries no credentials at all.
ANTHROPIC_NO_KEY = (401, "authentication_error", "x-api-key header is required")
OPENAI_NO_KEY = (401, "invalid_request_error", None,
                 "You didn't provide an API key. You need to provide your API key in an "
                 "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), "
                 "or as the basic auth username and password. You can obtain an API key from "
                 "https://platform.openai.com/account/api-keys.")


def scenario_of(raw: str) -> str:
    """The scenario named in the request text (the last one wins), or 'text'."""
    found = SCENARIO_RE.findall(raw)
    if found:
        return found[-1]
    prev = re.search(r'"previous_response_id":\s*"([^"]+)"', raw)
    return SCENARIOS.get(prev.group(1), "text") if prev else "text"


def redact(value: str) -> str:
    """Hide a secret header's value, keeping its scheme ("Bearer <redacted>")."""
    scheme, _, rest = value.partition(" ")
    return f"{scheme} <redacted>" if rest else "<redacted>"


def example_of(schema: dict):
    """A small value that satisfies a JSON schema (for structured-output requests)."""
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: example_of(v) for k, v in props.items()
                if k in schema.get("required", props)}
    if kind == "array":
        return []
    return {"string": REPLY, "integer": 1, "number": 1, "boolean": True,
            "null": None}.get(kind, REPLY)


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class Counter:
    """Ids for OpenAI items and responses: call_standin_0001, resp_standin_0002, ..."""

    def __init__(self):
        self.n, self.lock = 0, threading.Lock()

    def next(self, prefix: str) -> str:
        with self.lock:
            self.n += 1
            return f"{prefix}_standin_{self.n:04d}"


IDS = Counter()


# ---------------------------------------------------------------- Anthropic

def claude_cwd(body: dict) -> str | None:
    """The working directory Claude Code states in its system prompt."""
    text = json.dumps(body.get("system", "")) + json.dumps(body.get("messages", []))
    m = re.search(r"(?:Primary working directory|Working directory): (/[^\\\"\n]*)", text)
    return m.group(1).strip() if m else None


def last_is_tool_result(messages: list) -> bool:
    if not messages or messages[-1].get("role") != "user":
        return False
    content = messages[-1].get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def tool_results(messages: list) -> int:
    """How many tool results the conversation holds."""
    return sum(1 for m in messages if m.get("role") == "user" and isinstance(m.get("content"), list)
               for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result")


def last_tool_failed(messages: list) -> bool:
    return last_is_tool_result(messages) and any(
        b.get("type") == "tool_result" and b.get("is_error")
        for b in messages[-1]["content"] if isinstance(b, dict))


def anthropic_reply(body: dict, scenario: str) -> list[dict]:
    """The content blocks of the assistant's answer."""
    messages = body.get("messages", [])
    turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
    tool_id = f"toolu_standin_{turn:02d}"
    if scenario == "write-file" and not last_is_tool_result(messages):
        cwd = claude_cwd(body) or "."
        return [{"type": "text", "text": "Writing the file."},
                {"type": "tool_use", "id": tool_id, "name": "Write",
                 "input": {"file_path": f"{cwd}/{FILE_NAME}", "content": FILE_TEXT}}]
    if scenario == "write-file":
        text = "the write was refused" if last_tool_failed(messages) else "done writing"
        return [{"type": "text", "text": text}]
    if scenario == "max-turns":
        return [{"type": "tool_use", "id": tool_id, "name": "Bash",
                 "input": {"command": "true", "description": "Do nothing"}}]
    if scenario == "commit":
        done = tool_results(messages)
        if done == 0:
            cwd = claude_cwd(body) or "."
            return [{"type": "tool_use", "id": tool_id, "name": "Write",
                     "input": {"file_path": f"{cwd}/{COMMIT_FILE}", "content": COMMIT_TEXT}}]
        if done == 1:
            return [{"type": "tool_use", "id": tool_id, "name": "Bash",
                     "input": {"command": COMMIT_COMMAND, "description": "Commit the file"}}]
        text = "the commit was refused" if last_tool_failed(messages) else "done committing"
        return [{"type": "text", "text": text}]
    tools = {t.get("name") for t in body.get("tools", [])}
    if "StructuredOutput" in tools and not last_is_tool_result(messages):  # --json-schema
        schema = next(t for t in body["tools"] if t.get("name") == "StructuredOutput")
        return [{"type": "tool_use", "id": tool_id, "name": "StructuredOutput",
                 "input": example_of(schema.get("input_schema", {}))}]
    return [{"type": "text", "text": REPLY}]


def anthropic_events(blocks: list[dict], model: str, msg_id: str):
    """The Messages stream events (dicts) that deliver `blocks`."""
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    yield {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": dict(ANTHROPIC_USAGE, output_tokens=1)}}
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            yield {"type": "content_block_start", "index": i,
                   "content_block": {"type": "text", "text": ""}}
            yield {"type": "ping"}
            for piece in re.findall(r"\S+\s*", block["text"]):
                yield {"type": "content_block_delta", "index": i,
                       "delta": {"type": "text_delta", "text": piece}}
        else:
            yield {"type": "content_block_start", "index": i,
                   "content_block": dict(block, input={})}
            raw = json.dumps(block["input"])
            for k in range(0, len(raw), 20):
                yield {"type": "content_block_delta", "index": i,
                       "delta": {"type": "input_json_delta", "partial_json": raw[k:k + 20]}}
        yield {"type": "content_block_stop", "index": i}
    yield {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
           "usage": {"output_tokens": ANTHROPIC_USAGE["output_tokens"]}}
    yield {"type": "message_stop"}


# ---------------------------------------------------------------- OpenAI

def openai_tools(body: dict) -> dict:
    """name -> tool, from `tools` and from `additional_tools` input items (namespaced)."""
    found = {}

    def walk(tools):
        for t in tools or []:
            if isinstance(t, dict):
                if t.get("type") == "namespace":
                    walk(t.get("tools"))
                else:
                    found.setdefault(t.get("name"), t)

    walk(body.get("tools"))
    for item in body.get("input") if isinstance(body.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            walk(item.get("tools"))
    return found


def openai_after_tool(body: dict) -> bool:
    """Whether a tool's output came back since the last user message."""
    seen = False
    for item in body.get("input") if isinstance(body.get("input"), list) else []:
        kind = item.get("type")
        if kind == "message" and item.get("role") == "user":
            seen = False
        elif kind in ("function_call_output", "custom_tool_call_output"):
            seen = True
    return seen


# The step of the commit scenario each tool call made here was for, by call id: Codex sends
# only what is new over its WebSocket, so the conversation so far is not in the request.
COMMIT_STEPS: dict[str, str] = {}


def openai_commit_step(body: dict) -> str:
    """Which step of the commit scenario the last tool output came back from ("" before any)."""
    step = ""
    for item in body.get("input") if isinstance(body.get("input"), list) else []:
        kind = item.get("type")
        if kind == "message" and item.get("role") == "user":
            step = ""
        elif kind in ("function_call_output", "custom_tool_call_output"):
            step = COMMIT_STEPS.get(item.get("call_id"), step)
    return step


def openai_tool_call(body: dict, patch: str | None, command: str) -> dict:
    """An output item calling Codex's own tool: apply_patch (for `patch`) or a shell
    tool (for `command`) when offered directly, else the code-mode `exec` tool, whose
    input is JavaScript that calls the same tools (Codex 0.171.0 offers only that)."""
    tools = openai_tools(body)
    ids = {"id": IDS.next("fc"), "call_id": IDS.next("call"), "status": "completed"}
    if patch and "apply_patch" in tools:
        if tools["apply_patch"].get("type") == "custom":
            return dict(ids, type="custom_tool_call", name="apply_patch", input=patch)
        return dict(ids, type="function_call", name="apply_patch",
                    arguments=json.dumps({"input": patch}))
    for name, args in (("exec_command", {"cmd": command}),
                       ("shell_command", {"command": command}),
                       ("shell", {"command": ["bash", "-lc", command]})):
        if name in tools and not patch:
            return dict(ids, type="function_call", name=name, arguments=json.dumps(args))
    if patch:
        js = f"text(await tools.apply_patch({json.dumps(patch)}));"
    else:
        js = f"text(await tools.exec_command({json.dumps({'cmd': command})}));"
    return dict(ids, type="custom_tool_call", name="exec", input=js)


def openai_reply(body: dict, scenario: str) -> list[dict]:
    """The output items of the response."""
    text = REPLY
    if scenario == "write-file":
        if not openai_after_tool(body):
            patch = (f"*** Begin Patch\n*** Add File: {FILE_NAME}\n"
                     f"+{FILE_TEXT.rstrip(chr(10))}\n*** End Patch\n")
            return [openai_tool_call(body, patch, "")]
        text = "done writing"
    elif scenario == "max-turns":
        return [openai_tool_call(body, None, "true")]
    elif scenario == "commit":
        step = openai_commit_step(body)
        if step == "":
            patch = (f"*** Begin Patch\n*** Add File: {COMMIT_FILE}\n"
                     f"+{COMMIT_TEXT.rstrip(chr(10))}\n*** End Patch\n")
            call = openai_tool_call(body, patch, "")
            COMMIT_STEPS[call["call_id"]] = "write"
            return [call]
        if step == "write":
            call = openai_tool_call(body, None, COMMIT_COMMAND)
            COMMIT_STEPS[call["call_id"]] = "commit"
            return [call]
        text = "done committing"
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":  # --output-schema
        text = json.dumps(example_of(fmt.get("schema", {})))
    return [{"type": "message", "id": IDS.next("msg"), "status": "completed",
             "role": "assistant",
             "content": [{"type": "output_text", "text": text, "annotations": []}]}]


def openai_events(items: list[dict], model: str, resp_id: str, usage: dict = OPENAI_USAGE):
    """The Responses stream events (dicts) that deliver `items`."""
    seq = iter(range(10 ** 6))
    base = {"id": resp_id, "object": "response", "created_at": 1700000000,
            "model": model, "output": []}

    def ev(kind, **fields):
        return dict({"type": kind, "sequence_number": next(seq)}, **fields)

    yield ev("response.created", response=dict(base, status="in_progress"))
    yield ev("response.in_progress", response=dict(base, status="in_progress"))
    for i, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield ev("response.output_item.added", output_index=i,
                     item=dict(item, status="in_progress", content=[]))
            part = {"type": "output_text", "text": "", "annotations": []}
            yield ev("response.content_part.added", item_id=item["id"], output_index=i,
                     content_index=0, part=part)
            for piece in re.findall(r"\S+\s*", text):
                yield ev("response.output_text.delta", item_id=item["id"], output_index=i,
                         content_index=0, delta=piece)
            yield ev("response.output_text.done", item_id=item["id"], output_index=i,
                     content_index=0, text=text)
            yield ev("response.content_part.done", item_id=item["id"], output_index=i,
                     content_index=0, part=dict(part, text=text))
        else:
            yield ev("response.output_item.added", output_index=i,
                     item=dict(item, status="in_progress"))
        yield ev("response.output_item.done", output_index=i, item=item)
    yield ev("response.completed", response=dict(base, status="completed", output=items,
                                                 usage=usage))


# ---------------------------------------------------------------- WebSocket
# Codex 0.171.0 first tries the Responses API over a WebSocket (GET /v1/responses with
# Upgrade: websocket); each request is a text frame {"type": "response.create", ...body}
# and each answer event is one text frame.  Errors are an event
# {"type": "error", "status": N, "error": {...}, "headers": {...}}.

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_read(rfile):
    """One whole message as (opcode, bytes), or None when the connection ends."""
    opcode, data = None, b""
    while True:
        head = rfile.read(2)
        if len(head) < 2:
            return None
        fin, op, n = head[0] & 0x80, head[0] & 0x0F, head[1] & 0x7F
        if n == 126:
            n = struct.unpack(">H", rfile.read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", rfile.read(8))[0]
        mask = rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
        chunk = rfile.read(n)
        if len(chunk) < n:
            return None
        key = (mask * (n // 4 + 1))[:n]
        chunk = (int.from_bytes(chunk, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
        if op >= 8:  # control frames come whole, even between fragments
            return op, chunk
        opcode = op if opcode is None else opcode
        data += chunk
        if fin:
            return opcode, data


def ws_write(wfile, opcode: int, data: bytes):
    n = len(data)
    if n < 126:
        head = struct.pack(">BB", 0x80 | opcode, n)
    elif n < 65536:
        head = struct.pack(">BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack(">BBQ", 0x80 | opcode, 127, n)
    wfile.write(head + data)
    wfile.flush()


# ---------------------------------------------------------------- HTTP

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "harn-standin/1"

    def log_message(self, fmt, *args):  # quiet: the JSON log is the record
        pass

    def record(self, body_text: str, scenario: str, method: str | None = None):
        headers = {k.lower(): (redact(v) if k.lower() in SECRET_HEADERS else v)
                   for k, v in self.headers.items()}
        try:
            body = json.loads(body_text) if body_text else None
        except ValueError:
            body = body_text
        line = json.dumps({"time": round(time.time(), 3), "method": method or self.command,
                           "path": self.path, "headers": headers, "scenario": scenario,
                           "body": body})
        with self.server.log_lock, open(self.server.log_path, "a") as f:
            f.write(line + "\n")

    def send_json(self, status: int, doc, extra: dict | None = None):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_standin")
        self.send_header("x-request-id", "req_standin")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_stream(self, events):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", "req_standin")
        self.send_header("x-request-id", "req_standin")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in events:
            self.wfile.write(sse(event["type"], event))
            self.wfile.flush()

    def hang(self):
        """Say nothing until the client goes away (or the server stops)."""
        self.close_connection = True
        sock = self.connection
        while not self.server.stopping.is_set():
            ready, _, _ = select.select([sock], [], [], 0.5)
            if ready:
                try:
                    if not sock.recv(1, socket.MSG_PEEK):
                        return
                except OSError:
                    return
                time.sleep(0.5)  # unread bytes (a WebSocket frame): keep waiting

    def do_GET(self):
        if self.headers.get("upgrade", "").lower() == "websocket":
            return self.websocket()
        self.handle_any("")

    def do_HEAD(self):
        self.handle_any("")

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        self.handle_any(raw)

    def handle_any(self, raw: str):
        scenario = scenario_of(raw)
        self.record(raw, scenario)
        path = self.path.split("?")[0].rstrip("/")
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        if path.endswith("/messages") and self.command == "POST":
            return self.anthropic_messages(body, scenario)
        if path.endswith("/messages/count_tokens"):
            return self.send_json(200, {"input_tokens": ANTHROPIC_USAGE["input_tokens"]})
        if path.endswith("/responses") and self.command == "POST":
            return self.openai_responses(body, scenario)
        if ":streamGenerateContent" in path or ":generateContent" in path:
            return self.gemini(body, scenario, ":streamGenerateContent" in path)
        if self.command == "HEAD":
            return self.send_json(200, {})
        return self.send_json(404, {"type": "error", "error": {
            "type": "not_found_error", "message": f"stand-in: no route {self.command} {path}"}})

    # -- Gemini

    def gemini(self, body: dict, scenario: str, stream: bool):
        if scenario == "hang":
            return self.hang()
        if scenario in GEMINI_ERRORS:
            status, code, message = GEMINI_ERRORS[scenario]
            return self.send_json(status, {"error": {"code": status, "message": message,
                                                     "status": code}})
        parts = gemini_reply(body, scenario)
        doc = {"candidates": [{"content": {"role": "model", "parts": parts},
                               "finishReason": "STOP", "index": 0}],
               "usageMetadata": GEMINI_USAGE, "modelVersion": "gemini-standin"}
        if not stream:
            return self.send_json(200, doc)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(("data: " + json.dumps(doc) + "\r\n\r\n").encode())
        self.wfile.flush()

    # -- Anthropic

    def anthropic_messages(self, body: dict, scenario: str):
        if not (self.headers.get("x-api-key") or self.headers.get("authorization")):
            scenario = "no-key"
        if scenario == "hang":
            return self.hang()
        if scenario == "usage-limit-reset":
            # A plan's five-hour window is spent: the unified rate-limit headers name when
            # it resets (unix seconds), as Claude Code reads them.
            extra = {"anthropic-ratelimit-unified-status": "rejected",
                     "anthropic-ratelimit-unified-reset": str(reset_at()),
                     "anthropic-ratelimit-unified-representative-claim": "five_hour",
                     "retry-after": "7200"}
            return self.send_json(429, {"type": "error", "error": {
                "type": "rate_limit_error", "message": "Rate limited"},
                "request_id": "req_standin"}, extra)
        if scenario in ANTHROPIC_ERRORS or scenario == "no-key":
            status, kind, message = ANTHROPIC_ERRORS.get(scenario, ANTHROPIC_NO_KEY)
            extra = {"retry-after": "0"} if status == 429 else {}
            return self.send_json(status, {"type": "error", "error": {
                "type": kind, "message": message}, "request_id": "req_standin"}, extra)
        model = body.get("model", "claude-standin")
        turn = 1 + sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        msg_id = f"msg_standin_{turn:02d}"
        blocks = anthropic_reply(body, scenario)
        if body.get("stream"):
            self.send_stream(anthropic_events(blocks, model, msg_id))
            return
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        self.send_json(200, {"id": msg_id, "type": "message", "role": "assistant",
                             "model": model, "content": blocks, "stop_reason": stop,
                             "stop_sequence": None, "usage": ANTHROPIC_USAGE})

    # -- OpenAI

    def openai_error(self, scenario: str) -> tuple[int, dict, dict]:
        if scenario == "usage-limit-reset":
            # A ChatGPT plan's usage limit, with when it resets (unix seconds).
            at = reset_at()
            return 429, {"error": {"type": "usage_limit_reached",
                                   "message": "The usage limit has been reached",
                                   "plan_type": "plus", "resets_at": at,
                                   "resets_in_seconds": at - int(time.time())}}, {}
        status, kind, code, message = OPENAI_ERRORS.get(scenario, OPENAI_NO_KEY)
        extra = {"retry-after": "0"} if status == 429 else {}
        return status, {"error": {"message": message, "type": kind, "param": None,
                                  "code": code}}, extra

    def openai_answer(self, body: dict, scenario: str):
        """The events answering one Responses request."""
        resp_id = IDS.next("resp")
        SCENARIOS[resp_id] = scenario
        model = body.get("model", "gpt-standin")
        if body.get("generate") is False:  # Codex's pre-warm: nothing generated, no usage
            zero = {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 0}
            return openai_events([], model, resp_id, zero)
        return openai_events(openai_reply(body, scenario), model, resp_id)

    def openai_responses(self, body: dict, scenario: str):
        if not self.headers.get("authorization"):
            return self.send_json(*self.openai_error("no-key"))
        if scenario == "hang":
            return self.hang()
        if scenario in OPENAI_ERRORS or scenario == "usage-limit-reset":
            return self.send_json(*self.openai_error(scenario))
        events = self.openai_answer(body, scenario)
        if body.get("stream", True):
            return self.send_stream(events)
        *_, done = events
        self.send_json(200, done["response"])

    def websocket(self):
        key = self.headers.get("sec-websocket-key", "")
        self.record("", "text", method="GET-websocket")
        if not self.headers.get("authorization"):  # refused at the handshake
            return self.send_json(*self.openai_error("no-key"))
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("upgrade", "websocket")
        self.send_header("connection", "Upgrade")
        self.send_header("sec-websocket-accept", accept)
        self.send_header("x-request-id", "req_standin")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        while True:
            message = ws_read(self.rfile)
            if message is None:
                return
            opcode, data = message
            if opcode == 8:  # close
                ws_write(self.wfile, 8, data[:2])
                return
            if opcode == 9:  # ping
                ws_write(self.wfile, 10, data)
                continue
            if opcode != 1:
                continue
            raw = data.decode("utf-8", "replace")
            scenario = scenario_of(raw)
            self.record(raw, scenario, method="WS")
            try:
                body = json.loads(raw)
            except ValueError:
                continue
            if body.get("type") != "response.create":
                continue
            if scenario == "hang":
                return self.hang()
            if scenario in OPENAI_ERRORS or scenario == "usage-limit-reset":
                status, doc, extra = self.openai_error(scenario)
                event = dict(doc, type="error", status=status, headers=extra)
                ws_write(self.wfile, 1, json.dumps(event).encode())
                continue
            for event in self.openai_answer(body, scenario):
                ws_write(self.wfile, 1, json.dumps(event).encode())


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # a client hanging up is no news


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--log", default="/dev/null", help="append one JSON line per request")
    args = ap.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    server.log_path, server.log_lock = args.log, threading.Lock()
    server.stopping = threading.Event()
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stopping.set()
        server.server_close()


def _interrupt(*_):
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)
    main()
