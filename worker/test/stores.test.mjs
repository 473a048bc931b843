// Each rule's store in workerd: the Workers Rate Limiting binding (Miniflare's own
// implementation of it, from the pinned Miniflare's `ratelimits` option), the isolate's own
// counts, and a Worker whose rules name a binding it does not have.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import "../../js/edge-node.js"; // instantiates the edge's build
import { checkRulesLines } from "../../pkg-edge/sluicegate.js";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";

const rule = (fields) => ({ id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], ...fields });

async function call(edge, path, ip, headers = {}) {
  const res = await fetch(`${edge.url}${path}`, { headers: { "cf-connecting-ip": ip, ...headers } });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

/** Miniflare's binding counts clock-aligned windows: start a test well inside one. */
async function earlyInWindow(periodS) {
  const into = Date.now() % (periodS * 1000);
  if (into > periodS * 1000 - 8000) await new Promise((r) => setTimeout(r, periodS * 1000 - into + 50));
}

describe("the Cloudflare binding", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await originServer();
    edge = await startEdge({
      origin: origin.url,
      build: "deploy",
      rules: {
        rules: [
          rule({ store: "cloudflare", binding: "API_LIMITER", period: 60, requests_per_period: 5 }),
          {
            id: "login",
            match: { path: { equals: "/login" } },
            characteristics: ["ip.src"],
            store: "cloudflare",
            binding: "LOGIN_LIMITER",
            period: 60,
            requests_per_period: 2,
            mitigation_timeout: 600,
          },
          {
            id: "burst",
            match: { path: { starts_with: "/burst/" } },
            characteristics: ["cf.colo.id"],
            store: "cloudflare",
            binding: "BURST_LIMITER",
            period: 60,
            requests_per_period: 20,
          },
        ],
      },
    });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("admits the limit, then refuses with Retry-After of one period and no invented remaining", async () => {
    await earlyInWindow(60);
    for (let n = 0; n < 5; n++) {
      const r = await call(edge, "/api/a", "198.51.100.1");
      assert.equal(r.status, 200, `request ${n + 1}`);
      assert.equal(r.headers.get("ratelimit-policy"), '"api";q=5;w=60');
      assert.equal(r.headers.get("ratelimit"), null, "the binding does not say how many remain");
    }
    const refused = await call(edge, "/api/a", "198.51.100.1");
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("retry-after"), "60");
    assert.equal(refused.headers.get("ratelimit"), '"api";r=0;t=60');
    // another address has its own key
    assert.equal((await call(edge, "/api/a", "198.51.100.2")).status, 200);
    await edge.waitForLog((line) => line.includes('"decision":"allow","via":"cloudflare"'));
    const capabilities = JSON.parse((await call(edge, "/api/capabilities", "198.51.100.9")).body);
    const api = capabilities.rules.find((r) => r.id === "api");
    assert.equal(api.store, "cloudflare");
    assert.equal(api.scope, "location");
  });

  test("a mitigation_timeout is held by the isolate's block cache, without asking the binding", async () => {
    await earlyInWindow(60);
    assert.equal((await call(edge, "/login", "203.0.113.5")).status, 200);
    assert.equal((await call(edge, "/login", "203.0.113.5")).status, 200);
    const refused = await call(edge, "/login", "203.0.113.5");
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("retry-after"), "600");
    edge.clearLogs();
    const again = await call(edge, "/login", "203.0.113.5");
    assert.equal(again.status, 429);
    await edge.waitForLog((line) => line.includes('"rule":"login"') && line.includes('"via":"isolate-cache"'));
  });

  test("200 concurrent requests on one key: the binding admits its limit", async () => {
    await earlyInWindow(60);
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => call(edge, "/burst/x", `192.0.2.${i % 250}`)));
    const admitted = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429).length;
    // Miniflare's binding counts exactly; Cloudflare's counts per location, approximately.
    assert.equal(admitted, 20);
    assert.equal(refused, 180);
  });
});

describe("a Worker without the binding its rules name", () => {
  test("refuses to start, naming the binding and the wrangler.toml lines", async () => {
    let edge;
    try {
      edge = await startEdge({
        build: "deploy",
        origin: "http://127.0.0.1:9",
        ratelimits: false,
        rules: { rules: [rule({ store: "cloudflare", binding: "API_LIMITER", period: 10, requests_per_period: 20 })] },
      });
    } catch (err) {
      assert.match(err.message, /sluicegate: not starting: /);
      assert.match(err.message, /env has no Workers Rate Limiting binding "API_LIMITER", which rule "api" counts on/);
      assert.match(err.message, /\[\[ratelimits\]\] name = "API_LIMITER"/);
      return;
    }
    await edge.close();
    assert.fail("the edge started without its binding");
  });
});

describe("the isolate store", () => {
  let origin;
  let edge;
  const flood = rule({
    id: "per-key",
    match: { path: { starts_with: "/keyed/" } },
    characteristics: ['http.request.headers["x-api-key"]'],
    store: "isolate",
    period: 60,
    requests_per_period: 10000,
    on_store_failure: "closed",
  });
  const rules = { rules: [rule({ store: "isolate", period: 60, requests_per_period: 3 }), flood] };
  before(async () => {
    origin = await originServer();
    edge = await startEdge({ origin: origin.url, build: "deploy", rules });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("counts in the isolate, as its limiter does", async () => {
    for (let n = 0; n < 3; n++) {
      const r = await call(edge, "/api/a", "198.51.100.20");
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("ratelimit"), `"api";r=${2 - n};t=60`);
    }
    const refused = await call(edge, "/api/a", "198.51.100.20");
    assert.equal(refused.status, 429);
    await edge.waitForLog((line) => line.includes('"via":"isolate"'));
    const capabilities = JSON.parse((await call(edge, "/api/capabilities", "198.51.100.9")).body);
    assert.equal(capabilities.rules.find((r) => r.id === "api").store, "isolate");
  });

  test("a flood of invented keys stays within the rule's table: past it, new keys fail as the rule says", async () => {
    const out = checkRulesLines(JSON.stringify(rules));
    const line = out.lines.find((l) => l.startsWith("per-key:"));
    const maxKeys = Number(/up to (\d+) keys per isolate/.exec(line)[1]);
    assert.ok(maxKeys > 10 && maxKeys < 200, line);
    const statuses = [];
    for (let n = 0; n < maxKeys + 100; n++) {
      statuses.push((await call(edge, "/keyed/x", "192.0.2.1", { "x-api-key": `invented-${n}` })).status);
    }
    assert.deepEqual(statuses.slice(0, maxKeys), Array(maxKeys).fill(200));
    assert.deepEqual(statuses.slice(maxKeys), Array(100).fill(503));
    // a key already counted keeps its count
    assert.equal((await call(edge, "/keyed/x", "192.0.2.1", { "x-api-key": "invented-0" })).status, 200);
    await edge.waitForLog((line) => line.includes("full of keys still counting"));
  });
});
