// A consumer project in a temporary directory: the package installed in its node_modules as
// `npm pack` would ship it (package.json and its "files"), and a local HTTP server.
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** A fresh directory with node_modules/sluicegate; `remove()` deletes it. */
export function consumerProject(prefix = "sluicegate-consumer-") {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const target = path.join(dir, "node_modules", "sluicegate");
  mkdirSync(target, { recursive: true });
  const manifest = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"));
  cpSync(path.join(ROOT, "package.json"), path.join(target, "package.json"));
  for (const entry of manifest.files.flatMap(expand)) {
    cpSync(path.join(ROOT, entry), path.join(target, entry), { recursive: true });
  }
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A "files" entry as the paths it names: `docs/*.md` is each Markdown file in docs/. */
function expand(entry) {
  if (!entry.includes("*")) return [entry];
  const [dir, pattern] = [path.posix.dirname(entry), path.posix.basename(entry)];
  const [head, tail] = pattern.split("*");
  return readdirSync(path.join(ROOT, dir))
    .filter((name) => name.startsWith(head) && name.endsWith(tail))
    .map((name) => `${dir}/${name}`);
}

/**
 * An HTTP server on 127.0.0.1 at a random port, answering with `handler(req, res)`:
 * `{ url, server, close() }`.
 */
export async function listen(handler) {
  const server = createServer(handler);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        server.closeAllConnections();
      }),
  };
}

/**
 * A stand-in for a quota'd JSON API: answers `{ "n": <path> }` to any GET (with CORS, for
 * pages of another origin) and records when each request arrived (`arrivals`, ms).
 */
export async function startApi() {
  const arrivals = [];
  const api = await listen((req, res) => {
    arrivals.push(Date.now());
    res.writeHead(200, { "content-type": "application/json", "access-control-allow-origin": "*" });
    res.end(JSON.stringify({ n: req.url }));
  });
  return { ...api, arrivals };
}
