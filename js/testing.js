// sluicegate/testing: the edge worker in workerd, through Miniflare, for tests of one's own
// rules (or of one's own Worker) under Node. By default the development build: without an
// origin it serves the built-in development origin (GET /api/ping, the Open-Meteo mock;
// in a checkout also the www/ pages); `build: "deploy"` runs what `wrangler deploy` ships,
// which needs `origin`. `main` runs a Worker of one's own, bundled as wrangler bundles it.
//
// Node >= 22.12 and the optional peer dependency miniflare@4 (esbuild too, for `main`).

import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const workerDir = path.join(root, "worker");

/** Where the harness finds the worker, per build (absolute paths, inside the package). */
const paths = Object.freeze({
  root,
  workerDir,
  www: path.join(root, "www"),
  builds: Object.freeze({
    dev: Object.freeze({ entry: path.join(workerDir, "entry-dev.mjs"), wasm: path.join(workerDir, "pkg-dev", "sluicegate_worker_bg.wasm") }),
    deploy: Object.freeze({ entry: path.join(workerDir, "entry.mjs"), wasm: path.join(workerDir, "pkg", "sluicegate_worker_bg.wasm") }),
  }),
});

/** The base that relative URLs given to `edge.fetch` are resolved against. */
export const BASE_URL = "http://edge.test";

/** The Workers compatibility date the edge is built for (its wrangler.toml's). */
export const COMPATIBILITY_DATE = "2025-09-01";
/** The compatibility flags the edge is built for (its wrangler.toml's). */
export const COMPATIBILITY_FLAGS = Object.freeze(["enable_request_signal"]);

/**
 * @typedef {object} StartEdgeOptions
 * @property {string | object} [rules] The rules file (the parsed object or its JSON text), as
 * `SLUICEGATE_RULES`; without it, the edge's default rules.
 * @property {string} [origin] Where admitted requests go (`ORIGIN_URL`); without it the
 * development build serves its development origin and the deploy build refuses to start.
 * @property {"dev" | "deploy"} [build] Which build runs (default `"dev"`).
 * @property {Record<string, string>} [tenantKeys] API key SHA-256 (hex) → tenant, as the secret
 * `SLUICEGATE_TENANT_KEYS`.
 * @property {string} [adminToken] The secret `SLUICEGATE_ADMIN_TOKEN`: turns the admin API on.
 * @property {string} [egressToken] The secret `SLUICEGATE_EGRESS_TOKEN`: turns the egress routes on.
 * @property {string} [main] A Worker module of one's own (a path) in place of the edge's entry:
 * bundled with esbuild as wrangler bundles it (conditions `workerd`, `worker`, `browser`; `.wasm`
 * imports as compiled modules), so it may import `sluicegate/worker` or `sluicegate/hono`. It must
 * export the `RateLimiter` class. `build` is then `"deploy"` (no `faults`).
 * @property {Record<string, string>} [vars] More bindings (name → string).
 * @property {string} [binding] The Durable Object binding's name (default `RATE_LIMITER`).
 * @property {Record<string, { limit: number, period: 10 | 60 }> | false} [ratelimits] Workers Rate
 * Limiting bindings (Miniflare's own implementation of them), name → its `simple` limit and period.
 * Default: one per binding that a rule with `"store": "cloudflare"` names, with that rule's
 * `requests_per_period` and `period`, as its wrangler.toml `[[ratelimits]]` would say; `false`:
 * none (a Worker whose rules name one then refuses to start, naming it).
 * @property {string[] | false} [analyticsDatasets] Workers Analytics Engine bindings (Miniflare's,
 * whose data points go nowhere) by name. Default: the one the rules' `analytics.dataset`
 * names; `false`: none (a Worker whose rules name one then refuses to start, naming it).
 * @property {{ store?: "unavailable" | "slow" | "fleet-tenants", lease?: "leak", client?: "leaves" }} [faults]
 * The development build only: every Durable Object call fails, answers after 5 s (past the
 * edge's 1 s timeout), or fails for the fleet-wide tenant objects only; budget leases are
 * leaked; a request's client leaves after `Sluicegate-Test-Leave-After-Ms`.
 * @property {number} [port] Listen on this port (0: any free one); without it a random one.
 * @property {string} [host] The listening address (default `127.0.0.1`).
 * @property {object} [cf] The default `request.cf` (default: Miniflare's placeholder, colo
 * `DFW`; never fetched from the network).
 * @property {string} [persist] A directory for Durable Object storage, so that a second edge
 * started on it sees what the first stored (a restart).
 * @property {boolean} [echoLogs] Also print the worker's log lines to stderr (default: when
 * the environment has `SLUICEGATE_EDGE_LOGS=1`).
 */

/**
 * A log line of the worker's.
 * @typedef {{ level: string; message: string; timestamp: number }} EdgeLog
 */

/**
 * A running edge.
 * @typedef {object} TestEdge
 * @property {string} url The real listening origin, e.g. `http://127.0.0.1:40123`.
 * @property {(input: string | URL | Request, init?: RequestInit & { cf?: object }) => Promise<Response>} fetch
 * A request through the worker: relative URLs resolve against {@link BASE_URL}; `cf` becomes
 * `request.cf`. Miniflare sets `CF-Connecting-IP: 127.0.0.1` when the request has none.
 * @property {EdgeLog[]} logs The worker's log lines so far, in arrival order (they arrive
 * asynchronously: see `waitForLog`).
 * @property {() => string[]} logLines The messages of `logs`.
 * @property {() => void} clearLogs Forget the log lines so far.
 * @property {(match: string | RegExp | ((message: string, entry: EdgeLog) => boolean), options?: { timeout?: number }) => Promise<EdgeLog>} waitForLog
 * The first log line (already there or to come) whose message matches; rejects after
 * `timeout` ms (default 5000) listing the lines there were.
 * @property {unknown} miniflare The Miniflare instance, for anything else.
 * @property {() => Promise<void>} close Stop the edge.
 */

/** The `code` of an error that says what this machine lacks to start an edge (a Node, a peer dependency). */
export const MISSING_REQUIREMENT = "ERR_SLUICEGATE_TESTING_REQUIREMENT";

/**
 * An error naming what is missing, with `code` {@link MISSING_REQUIREMENT}.
 * @param {string} message
 * @param {unknown} [cause]
 */
const missing = (message, cause = undefined) => Object.assign(new Error(`sluicegate/testing: ${message}`, { cause }), { code: MISSING_REQUIREMENT });

/** Needs this Node, as Miniflare 4 does. */
function checkNode() {
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major < 22 || (major === 22 && minor < 12)) {
    throw missing(`startEdge needs Node >= 22.12 (Miniflare 4 does); this is Node ${process.versions.node}`);
  }
}

/**
 * An optional peer dependency, or an error saying how to install it.
 * @param {string} name
 * @param {string} why
 * @returns {Promise<any>}
 */
async function peer(name, why) {
  try {
    return await import(name);
  } catch (error) {
    if (error?.code !== "ERR_MODULE_NOT_FOUND" || !String(error.message).includes(`'${name}'`)) throw error;
    throw missing(`${why} needs ${name}, an optional peer dependency that is not installed: npm install --save-dev ${name}`, error);
  }
}

/**
 * The error of a Worker that refused to start, with its uncaught error's message in plain
 * text (Miniflare reports the runtime's log lines as JSON), e.g. "the edge did not start:
 * Uncaught Error: sluicegate: not starting: ORIGIN_URL is not set: …".
 * @param {any} err
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

/** Where a bundled Worker's modules are named (nothing is written there). */
const BUNDLE_ROOT = path.join(root, ".bundle");

/**
 * `main` bundled as wrangler bundles a Worker: one ES module, with `cloudflare:` and `node:`
 * imports left to workerd and every `.wasm` import a compiled module beside it.
 * @param {string} main
 * @returns {Promise<Array<{ type: "ESModule" | "CompiledWasm"; path: string; contents: string | Uint8Array }>>}
 */
async function bundle(main) {
  const esbuild = await peer("esbuild", "startEdge's `main` (a Worker of your own, bundled as wrangler bundles it)");
  /** @type {Map<string, string>} */
  const wasm = new Map(); // absolute path → module name
  const result = await esbuild.build({
    entryPoints: [main],
    bundle: true,
    write: false,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["browser", "module", "main"],
    external: ["cloudflare:*", "node:*"],
    outfile: path.join(BUNDLE_ROOT, "worker.mjs"),
    logLevel: "silent",
    plugins: [
      {
        name: "sluicegate-wasm-modules",
        /** @param {any} build */
        setup(build) {
          build.onResolve({ filter: /\.wasm(\?module)?$/ }, async (/** @type {any} */ args) => {
            const specifier = args.path.replace(/\?module$/, "");
            const file =
              specifier.startsWith(".") || path.isAbsolute(specifier)
                ? path.resolve(args.resolveDir, specifier)
                : (await build.resolve(specifier, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer })).path;
            if (!wasm.has(file)) wasm.set(file, `./wasm/${wasm.size}-${path.basename(file)}`);
            return { path: wasm.get(file), external: true };
          });
        },
      },
    ],
  });
  return [
    { type: "ESModule", path: path.join(BUNDLE_ROOT, "worker.mjs"), contents: result.outputFiles[0].text },
    ...[...wasm].map(([file, name]) => ({ type: /** @type {const} */ ("CompiledWasm"), path: path.join(BUNDLE_ROOT, name), contents: readFileSync(file) })),
  ];
}

/**
 * Start the edge worker in workerd (through Miniflare), listening on 127.0.0.1.
 *
 * @example
 * import { startEdge } from "sluicegate/testing";
 * const edge = await startEdge({ rules: { rules: [] }, origin: "http://127.0.0.1:9000" });
 * const res = await edge.fetch("/api/ping", { headers: { "cf-connecting-ip": "198.51.100.7" }, cf: { colo: "AMS" } });
 * await edge.close();
 *
 * @param {StartEdgeOptions} [options]
 * @returns {Promise<TestEdge>}
 * @throws Error naming what is missing (Node version, miniflare, a build; the first two with
 * `code` {@link MISSING_REQUIREMENT}), or the Worker's own
 * reason when it refuses to start (`the edge did not start: Uncaught Error: sluicegate: not starting: …`).
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
  ratelimits,
  analyticsDatasets,
} = {}) {
  checkNode();
  if (main !== undefined) build = "deploy";
  const files = paths.builds[build];
  if (!files) {
    throw new Error(`startEdge: build must be "dev" or "deploy", got ${JSON.stringify(build)}`);
  }
  if (main !== undefined && !existsSync(path.resolve(main))) {
    throw new Error(`startEdge: main: ${path.resolve(main)} is missing`);
  }
  if (!existsSync(files.wasm) || !existsSync(files.entry)) {
    throw new Error(`startEdge: the ${build} build is missing (${path.relative(root, files.wasm)}); in a checkout, run npm run build first`);
  }
  if (faults && build !== "dev") throw new Error("startEdge: faults are injected by the dev build only");

  // Imported here, so that the Node version check above gives the error, not miniflare.
  const { Miniflare, Log, LogLevel } = await peer("miniflare", "startEdge (the edge in workerd)");
  const modules = main === undefined ? null : await bundle(path.resolve(main));

  /** @type {Record<string, string>} */
  const bindings = { ...vars };
  if (rules !== undefined && rules !== null) {
    bindings.SLUICEGATE_RULES = typeof rules === "string" ? rules : JSON.stringify(rules);
  }
  if (origin !== undefined && origin !== null) bindings.ORIGIN_URL = String(origin);
  if (adminToken) bindings.SLUICEGATE_ADMIN_TOKEN = String(adminToken);
  if (egressToken) bindings.SLUICEGATE_EGRESS_TOKEN = String(egressToken);
  if (tenantKeys) bindings.SLUICEGATE_TENANT_KEYS = JSON.stringify(tenantKeys);
  if (faults) bindings.SLUICEGATE_FAULTS = JSON.stringify(faults);

  const echo = echoLogs ?? process.env.SLUICEGATE_EDGE_LOGS === "1";
  /** @type {EdgeLog[]} */
  const logs = [];
  /** @type {Set<(entry: EdgeLog) => void>} */
  const waiters = new Set();
  /** @param {EdgeLog} entry */
  const onLog = (entry) => {
    logs.push(entry);
    if (echo) process.stderr.write(`[edge ${entry.level}] ${entry.message}\n`);
    for (const w of waiters) w(entry);
  };

  const mf = new Miniflare({
    // Miniflare's own messages (not the worker's console): warnings and errors only.
    log: new Log(LogLevel.WARN),
    // The worker's console.* arrives here as structured lines from workerd.
    handleStructuredLogs: onLog,
    // Never download https://workers.cloudflare.com/cf.json.
    cf: cf ?? false,
    ...(port !== undefined ? { port } : {}),
    ...(host !== undefined ? { host } : {}),
    name: "sluicegate-edge",
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [...COMPATIBILITY_FLAGS],
    ...(modules
      ? { modules, modulesRoot: BUNDLE_ROOT }
      : {
          modules: true,
          scriptPath: files.entry,
          // The entries import the package's js/.
          modulesRoot: root,
          // wasm-pack's glue (*.js) is ESM, not CommonJS.
          modulesRules: [
            { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
            { type: "CompiledWasm", include: ["**/*.wasm"] },
          ],
        }),
    durableObjects: { [binding]: { className: "RateLimiter", useSQLite: true } },
    ratelimits: rateLimitBindings(ratelimits ?? bindingsOfRules(rules)),
    analyticsEngineDatasets: Object.fromEntries(
      (analyticsDatasets === false ? [] : (analyticsDatasets ?? datasetsOfRules(rules))).map((name) => [name, { dataset: "sluicegate" }]),
    ),
    ...(persist ? { durableObjectsPersist: persist } : {}),
    // The development origin serves the www/ pages through ASSETS (in a checkout).
    ...(build === "dev" && existsSync(paths.www)
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
    url,
    logs,
    logLines: () => logs.map((l) => l.message),
    clearLogs: () => {
      logs.length = 0;
    },
    waitForLog(match, { timeout = 5000 } = {}) {
      /** @type {(e: EdgeLog) => boolean} */
      const test = typeof match === "function" ? (e) => match(e.message, e) : match instanceof RegExp ? (e) => match.test(e.message) : (e) => e.message.includes(String(match));
      const found = logs.find(test);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`waitForLog: no log matching ${match} within ${timeout} ms; got:\n${logs.map((l) => l.message).join("\n")}`));
        }, timeout);
        /** @param {EdgeLog} e */
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
    fetch(input, { cf: requestCf, ...init } = {}) {
      const target = typeof input === "string" || input instanceof URL ? new URL(input, BASE_URL) : input;
      return mf.dispatchFetch(target, requestCf ? { ...init, cf: requestCf } : init);
    },
    miniflare: mf,
    async close() {
      if (closed) return;
      closed = true;
      await mf.dispose();
    },
  };
}

/**
 * The rules as an object: parsed when given as JSON text (`null` when it is not JSON: the
 * Worker then says what is wrong).
 * @param {string | object | undefined | null} rules
 * @returns {any}
 */
function parsedRules(rules) {
  if (typeof rules !== "string") return rules;
  try {
    return JSON.parse(rules);
  } catch {
    return null;
  }
}

/**
 * The Workers Rate Limiting bindings the rules' `"store": "cloudflare"` rules name, each with
 * its rule's limit and period (rules that are not valid JSON name none: the Worker says why).
 * @param {string | object | undefined | null} rules
 * @returns {Record<string, { limit: number, period: number }>}
 */
function bindingsOfRules(rules) {
  const parsed = parsedRules(rules);
  /** @type {Record<string, { limit: number, period: number }>} */
  const out = {};
  const list = parsed && typeof parsed === "object" && Array.isArray(parsed.rules) ? parsed.rules : [];
  for (const rule of list) {
    if (rule?.store === "cloudflare" && typeof rule.binding === "string" && !(rule.binding in out)) {
      out[rule.binding] = { limit: rule.requests_per_period, period: rule.period };
    }
  }
  return out;
}

/**
 * The Workers Analytics Engine binding the rules' `analytics.dataset` names, if any.
 * @param {string | object | undefined | null} rules
 * @returns {string[]}
 */
function datasetsOfRules(rules) {
  const parsed = parsedRules(rules);
  const dataset = parsed && typeof parsed === "object" ? parsed.analytics?.dataset : undefined;
  return typeof dataset === "string" ? [dataset] : [];
}

/**
 * Miniflare's `ratelimits` option: each binding in its own namespace.
 * @param {Record<string, { limit: number, period: number }> | false} given
 */
function rateLimitBindings(given) {
  if (!given) return {};
  return Object.fromEntries(Object.entries(given).map(([name, { limit, period }], i) => [name, { namespace_id: String(1001 + i), simple: { limit, period } }]));
}
