// harn's Node runner: runs a workflow module written for the JavaScript tool (a default
// export taking a context object) on top of harn's JSON Lines workflow protocol. harn writes
// this file and hooks.mjs next to the run's records and starts
// `node runner.mjs <workflow> <frozen copy>`: the module runs from the copy's bytes under its
// own path (see hooks.mjs).
import { createInterface } from "node:readline";
import { register } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MessageChannel, receiveMessageOnPort } from "node:worker_threads";

// The module's own console output must not corrupt the protocol on stdout.
for (const name of ["log", "info", "debug", "warn"]) {
  console[name] = (...args) => process.stderr.write(args.map(String).join(" ") + "\n");
}
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");

const pending = new Map();
let onStart;
const started = new Promise((resolve) => (onStart = resolve));
createInterface({ input: process.stdin }).on("line", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  if (message.op === "start") onStart(message);
  else if (message.op === "reply" && pending.has(message.id)) {
    const settle = pending.get(message.id);
    pending.delete(message.id);
    settle(message);
  }
});

class Blocked extends Error {}
let requests = 0;
const request = (op, fields, settle) =>
  new Promise((resolve, reject) => {
    const id = `${op === "agent" ? "a" : "z"}${++requests}`;
    pending.set(id, (reply) => settle(reply, resolve, reject, id));
    send({ op, id, ...fields });
  });
const pick = (object, keys) =>
  Object.fromEntries(keys.filter((k) => object[k] !== undefined).map((k) => [k, object[k]]));

const start = await started;
const context = {
  work: start.work,
  attempt: start.attempt,
  agent: (prompt, options = {}) =>
    request(
      "agent",
      { prompt: String(prompt), ...pick(options, ["specialist", "schema"]) },
      (reply, resolve, reject, id) =>
        reply.ok
          ? resolve(options.schema ? JSON.parse(reply.text) : reply.text)
          : reject(new Error(`agent ${id}: ${reply.error}`)),
    ),
  authorize: (mutation = {}) =>
    request(
      "authorize",
      { action: String(mutation.action ?? mutation.kind ?? "mutation"), ...pick(mutation, ["target"]) },
      (reply, resolve, reject) =>
        reply.verdict === "allow" ? resolve(true) : reject(new Error(`not authorized: ${reply.reason}`)),
    ),
  parallel: (thunks) =>
    Promise.all(
      thunks.map((thunk) =>
        Promise.resolve()
          .then(thunk)
          .catch((error) => {
            send({ op: "log", message: `parallel item failed: ${error?.message ?? error}` });
            return null;
          }),
      ),
    ),
  stage: (name) => send({ op: "stage", name: String(name) }),
  log: (message) => send({ op: "log", message: String(message) }),
  evidence: (input) =>
    send({ op: "evidence", ...pick(input, ["kind", "status", "label", "summary", "ref", "acceptanceIds"]) }),
  blocked: ({ reason, decision } = {}) => {
    send({ op: "blocked", reason: String(reason ?? "a decision is needed"), ...(decision ? { decision_id: decision } : {}) });
    throw new Blocked(String(reason));
  },
};

// Exits once the last line is flushed: stdout to a pipe is asynchronous in Node.
const finish = (message, code) =>
  process.stdout.write(JSON.stringify(message) + "\n", () => process.exit(code));
const [source, frozen] = process.argv.slice(2);
const target = pathToFileURL(source).href;
// The hooks post each file the module imports before handing it over, so once the import has
// resolved every one of them is waiting on this port.
const imports = new MessageChannel();
if (frozen) {
  const port = imports.port2;
  register("./hooks.mjs", import.meta.url, { data: { target, frozen, port }, transferList: [port] });
}
const reportImports = () => {
  for (let m; (m = receiveMessageOnPort(imports.port1)); ) {
    send({ op: "log", message: `imported ${fileURLToPath(m.message.url)} (sha256 ${m.message.sha256})` });
  }
};
try {
  const module = await import(target);
  reportImports();
  const declared = module.meta?.acceptance;
  if (Array.isArray(declared)) {
    const acceptance = declared.map((c) => ({ id: String(c.id), statement: String(c.statement ?? "") }));
    send({ op: "meta", acceptance });
  }
  await module.default(context);
  finish({ op: "result", ok: true }, 0);
} catch (error) {
  finish({ op: "result", ok: false, error: String(error?.message ?? error) }, 1);
}
