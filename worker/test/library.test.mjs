// The edge inside a Worker of one's own (sluicegate/worker's createEdge, sluicegate/hono's
// rateLimit), in workerd: the same decisions, answers and headers as the standalone Worker,
// with the app's own handler where the standalone forwards to ORIGIN_URL.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";

const RULES = readFileSync(new URL("../rules.json", import.meta.url), "utf8");
const BAD_RULES = JSON.stringify({ rules: [{ id: "a", characteristics: ["asn"], period: 10, requests_per_period: 5 }] });
const APPS = {
  hono: fileURLToPath(new URL("./fixtures/hono-app.mjs", import.meta.url)),
  plain: fileURLToPath(new URL("./fixtures/plain-app.mjs", import.meta.url)),
};

/** GET `path` as `ip` at AMS: status, headers (as an object) and body. */
async function get(edge, path, ip) {
  const res = await edge.fetch(path, { headers: { "cf-connecting-ip": ip }, cf: { colo: "AMS" } });
  const headers = Object.fromEntries([...res.headers].filter(([name]) => !["mf-content-encoding", "transfer-encoding"].includes(name)));
  return { status: res.status, headers, body: await res.text() };
}

const count = (results, status) => results.filter((r) => r.status === status).length;

describe("the default /api/ rule in front of a Hono app and of a wrapped Worker, as the standalone worker enforces it", () => {
  let origin;
  const edges = {};
  before(async () => {
    origin = await originServer((_req, res) => res.end("from the origin"));
    edges.standalone = await startEdge({ build: "deploy", origin: origin.url, rules: RULES });
    edges.hono = await startEdge({ main: APPS.hono, vars: { APP_RULES: RULES } });
    edges.plain = await startEdge({ main: APPS.plain, vars: { APP_RULES: RULES } });
  });
  after(async () => {
    for (const edge of Object.values(edges)) await edge.close();
    await origin?.close();
  });

  test("25 sequential requests from one IP at one colo: 20 reach the app with its body and the RateLimit headers, 5 get the standalone's 429", async () => {
    const runs = {};
    for (const [name, edge] of Object.entries(edges)) {
      runs[name] = [];
      for (let i = 0; i < 25; i++) runs[name].push(await get(edge, "/api/hello", "198.51.100.1"));
      assert.equal(count(runs[name], 200), 20, name);
      assert.equal(count(runs[name], 429), 5, name);
    }
    for (const name of ["hono", "plain"]) {
      runs[name].slice(0, 20).forEach((r, i) => {
        assert.equal(r.status, 200, `${name} request ${i + 1}`);
        assert.equal(r.headers["x-app"], name, "the app's own header");
        assert.equal(r.headers["content-type"], "application/json");
        assert.equal(r.headers["ratelimit-policy"], '"api";q=20;w=10');
        assert.equal(r.headers.ratelimit, `"api";r=${19 - i};t=10`);
        assert.equal(r.headers.ratelimit, runs.standalone[i].headers.ratelimit);
      });
      // The refusals are the standalone worker's, header for header and byte for byte.
      assert.deepEqual(runs[name].slice(20), runs.standalone.slice(20), name);
    }
    assert.equal(JSON.parse(runs.hono[0].body).hello, "from the app");
    assert.deepEqual(JSON.parse(runs.plain[0].body), { path: "/api/hello", colo: "AMS", hasEnv: true });
    assert.equal(runs.standalone[0].body, "from the origin");
    assert.equal(runs.standalone[20].headers["retry-after"], "10");
    assert.equal(JSON.parse(runs.standalone[20].body).rule, "api");
  });

  test("100 concurrent requests from one key: exactly 20 admitted, each with its own count", async () => {
    for (const name of ["hono", "plain"]) {
      const results = await Promise.all(Array.from({ length: 100 }, () => get(edges[name], "/api/hello", "198.51.100.2")));
      assert.equal(count(results, 200), 20, name);
      assert.equal(count(results, 429), 80, name);
      const remaining = results
        .filter((r) => r.status === 200)
        .map((r) => Number(/r=(\d+)/.exec(r.headers.ratelimit)[1]))
        .sort((a, b) => a - b);
      assert.deepEqual(
        remaining,
        Array.from({ length: 20 }, (_, i) => i),
        name,
      );
    }
  });

  test("requests no rule matches reach the app uncounted, without rate headers", async () => {
    for (const name of ["hono", "plain"]) {
      for (let i = 0; i < 25; i++) {
        const r = await get(edges[name], "/free", "198.51.100.3");
        assert.equal(r.status, 200, name);
        assert.equal(r.headers.ratelimit, undefined, name);
      }
      assert.equal((await get(edges[name], "/api/hello", "198.51.100.3")).headers.ratelimit, '"api";r=19;t=10', name);
    }
  });

  test("a handler that throws fails the request as it would without the edge (no 502 or 503 from the edge)", async () => {
    const r = await get(edges.plain, "/api/throws", "198.51.100.4");
    assert.equal(r.status, 500);
    assert.match(r.body, /the app failed/);
  });
});

describe("more of the edge inside a Worker", () => {
  test("a Durable Object binding of another name (createEdge({ rules, binding }))", async () => {
    const edge = await startEdge({ main: APPS.plain, vars: { APP_RULES: RULES, APP_BINDING: "LIMITS" }, binding: "LIMITS" });
    try {
      const results = [];
      for (let i = 0; i < 21; i++) results.push(await get(edge, "/api/hello", "198.51.100.5"));
      assert.deepEqual([count(results, 200), count(results, 429)], [20, 1]);
    } finally {
      await edge.close();
    }
  });

  test("a Hono app's upload of no declared length is metered as the standalone's: cut with 429 when over its source's bytes", async () => {
    const rules = {
      rules: [],
      pre_read: { source_bytes_per_second: 1_000, sources: [{ id: "echo", match: { path: { starts_with: "/api/echo" } } }] },
    };
    const edge = await startEdge({ main: APPS.hono, vars: { APP_RULES: JSON.stringify(rules) } });
    try {
      const send = (chunks) =>
        fetch(`${edge.url}/api/echo`, {
          method: "POST",
          duplex: "half",
          body: new ReadableStream({
            async pull(controller) {
              const next = chunks.shift();
              if (!next) return controller.close();
              controller.enqueue(new Uint8Array(next).fill(120));
              await new Promise((r) => setTimeout(r, 100));
            },
          }),
        });
      const small = await send([300, 300]);
      assert.equal(await small.text(), "app read 600 bytes");
      await new Promise((r) => setTimeout(r, 1_100)); // the source is full again
      const over = await send([900, 900, 900, 900]);
      assert.equal(over.status, 429);
      assert.equal(over.headers.get("sluicegate-scope"), "source");
      await edge.waitForLog(/"pre-read","scope":"source"/);
    } finally {
      await edge.close();
    }
  });

  test("bad rules: createEdge and rateLimit refuse to start with the standalone worker's message, naming the problem", async () => {
    const failure = (options) =>
      startEdge(options).then(
        (edge) => edge.close().then(() => assert.fail("it started")),
        (error) => error.message,
      );
    const standalone = await failure({ build: "deploy", origin: "http://127.0.0.1:9", rules: BAD_RULES });
    assert.match(standalone, /sluicegate: not starting: rule rules\[0\] \("a"\): field "match": missing.*field "characteristics": unknown characteristic "asn"/);
    for (const main of Object.values(APPS)) {
      assert.equal(await failure({ main, vars: { APP_RULES: BAD_RULES } }), standalone, main);
    }
    assert.match(await failure({ main: APPS.plain }), /sluicegate: not starting: no rules given/);
  });
});
