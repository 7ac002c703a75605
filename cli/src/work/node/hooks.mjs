// harn's module hooks for a workflow module: the entry module's source is the frozen copy in
// the run's directory, whatever the file at its path holds now, while its own URL stays the
// original one, so relative imports resolve beside it. Every other file it imports is read
// as it is when imported, and its digest is reported to the runner for the transcript.
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";

let target;
let frozen;
let port;

export function initialize(data) {
  target = data.target;
  frozen = readFileSync(data.frozen);
  port = data.port;
}

export async function load(url, context, nextLoad) {
  const loaded = await nextLoad(url, context);
  if (url === target) {
    if (loaded.format !== "module") {
      throw new Error(
        `harn runs a workflow module as an ES module; ${url} loads as ${loaded.format} ` +
          `(name it .mjs, or give its package.json "type": "module")`,
      );
    }
    return { ...loaded, source: frozen, shortCircuit: true };
  }
  if (url.startsWith("file:") && loaded.source != null) {
    const sha256 = createHash("sha256").update(loaded.source).digest("hex");
    port.postMessage({ url, sha256 });
  }
  return loaded;
}
