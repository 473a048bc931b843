// The app layer behind the /api/ rule (worker/examples/traffic.json): route buckets,
// upstream budgets, the capabilities answer and explicit fail modes, in workerd.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";

const TRAFFIC = JSON.parse(readFileSync(new URL("../examples/traffic.json", import.meta.url), "utf8"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** traffic.json with every route bucket refilling one token per second (bursts kept). */
function fastBuckets() {
  const rules = TRAFFIC.rules.map((r) => (r.algorithm === "token_bucket" ? { ...r, rate: 1 } : r));
  return { ...TRAFFIC, rules };
}

/** A server on 127.0.0.1; `handle(req, res)` answers. */
async function server(handle) {
  const sockets = new Set();
  const srv = createServer(handle);
  srv.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    close: () =>
      new Promise((r) => {
        srv.close(r);
        for (const s of sockets) s.destroy();
      }),
  };
}

async function call(edge, method, path, ip, init = {}) {
  const res = await fetch(`${edge.url}${path}`, { method, ...init, headers: { "cf-connecting-ip": ip, ...init.headers } });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

describe("route buckets (traffic.json)", () => {
  let origin;
  let real;
  let fast;
  before(async () => {
    origin = await server((_req, res) => res.end("ok"));
    real = await startEdge({ build: "deploy", rules: TRAFFIC, origin: origin.url });
    fast = await startEdge({ build: "deploy", rules: fastBuckets(), origin: origin.url });
  });
  after(async () => {
    await real?.close();
    await fast?.close();
    await origin?.close();
  });

  for (const [bucket, method, path, burst, wait, ip] of [
    ["analyze", "POST", "/api/analyze", 6, 5, "198.51.100.11"],
    ["destinations", "POST", "/api/destinations", 10, 2, "198.51.100.12"],
    ["geocode", "GET", "/api/geocode", 10, 2, "198.51.100.13"],
    ["wildfires", "GET", "/api/wildfires", 10, 2, "198.51.100.14"],
    ["smoke", "GET", "/api/smoke", 10, 2, "198.51.100.15"],
  ]) {
    test(`${bucket}: a burst of ${burst} at once, then 429 with Retry-After: ${wait} and every matching rule's headers`, async () => {
      for (let i = 0; i < burst; i++) {
        const r = await call(real, method, path, ip);
        assert.equal(r.status, 200, `request ${i + 1}`);
        assert.match(r.headers.get("ratelimit"), new RegExp(`"${bucket}";r=${burst - 1 - i};`));
      }
      const refused = await call(real, method, path, ip);
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get("retry-after"), String(wait));
      assert.equal(refused.headers.get("ratelimit-policy"), `"api";q=20;w=10, "${bucket}";q=${burst};w=${burst * wait}`);
      assert.match(refused.headers.get("ratelimit"), new RegExp(`^"api";r=\\d+;t=\\d+, "${bucket}";r=0;t=${wait}$`));
      assert.equal(JSON.parse(refused.body).rule, bucket);
    });
  }

  for (const [bucket, method, path, burst, ip] of [
    ["analyze", "POST", "/api/analyze", 6, "198.51.100.40"],
    ["destinations", "POST", "/api/destinations", 10, "198.51.100.43"],
    ["geocode", "GET", "/api/geocode", 10, "198.51.100.44"],
  ]) {
    test(`${bucket}: one more request is admitted per refill interval (refilling 1 per second)`, async () => {
      for (let i = 0; i < burst; i++) assert.equal((await call(fast, method, path, ip)).status, 200);
      const refused = await call(fast, method, path, ip);
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get("retry-after"), "1");
      await sleep(1_050);
      assert.equal((await call(fast, method, path, ip)).status, 200, "one token back after 1 s");
      assert.equal((await call(fast, method, path, ip)).status, 429, "and only one");
    });
  }

  test("the two analyze paths share one bucket", async () => {
    const ip = "198.51.100.41";
    for (let i = 0; i < 3; i++) assert.equal((await call(real, "POST", "/api/analyze", ip)).status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await call(real, "POST", "/api/analyze/stream", ip)).status, 200);
    assert.equal((await call(real, "POST", "/api/analyze/stream", ip)).status, 429);
    assert.equal((await call(real, "POST", "/api/analyze", ip)).status, 429);
  });

  test("destinations never starves analyze", async () => {
    const ip = "198.51.100.42";
    for (let i = 0; i < 10; i++) assert.equal((await call(real, "POST", "/api/destinations", ip)).status, 200);
    assert.equal((await call(real, "POST", "/api/destinations", ip)).status, 429);
    const analyze = await call(real, "POST", "/api/analyze", ip);
    assert.equal(analyze.status, 200);
    assert.match(analyze.headers.get("ratelimit"), /"analyze";r=5;/);
  });
});

describe("upstream budgets", () => {
  /** An origin that holds each request `holdMs` and records the most it held at once. */
  async function holdingOrigin(holdMs) {
    const seen = { now: 0, max: 0, served: 0 };
    const origin = await server((_req, res) => {
      seen.now++;
      seen.max = Math.max(seen.max, seen.now);
      setTimeout(() => {
        seen.now--;
        seen.served++;
        res.end("done");
      }, holdMs);
    });
    return { ...origin, seen };
  }
  const budget = (extra = {}) => ({
    rules: [],
    upstreams: [{ id: "slow-api", match: { path: { starts_with: "/api/slow" } }, max_in_flight: 2, max_wait: 1, ...extra }],
  });

  test("10 concurrent requests: never more than 2 at the origin; those without a slot within 1 s get 503, none 500", async () => {
    const origin = await holdingOrigin(400);
    const edge = await startEdge({ build: "deploy", rules: budget(), origin: origin.url });
    try {
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => call(edge, "GET", `/api/slow/${i}`, `192.0.2.${i + 1}`)));
      const statuses = results.map((r) => r.status).sort();
      // Slots free at 400, 800 and 1,200 ms: 6 requests get one within 1 s, 4 do not.
      assert.deepEqual(statuses, [...Array(6).fill(200), ...Array(4).fill(503)]);
      assert.equal(origin.seen.max, 2, "at most 2 in flight at the origin");
      assert.equal(origin.seen.served, 6);
      for (const r of results.filter((r) => r.status === 503)) {
        assert.equal(r.headers.get("retry-after"), "1");
        assert.equal(r.headers.get("content-type"), "application/problem+json");
        const problem = JSON.parse(r.body);
        assert.equal(problem.upstream, "slow-api");
        assert.match(problem.detail, /"slow-api" is busy/);
      }
      await edge.waitForLog(/"upstream-busy","upstream":"slow-api"/);
    } finally {
      await edge.close();
      await origin.close();
    }
  });

  test("the budget is charged only after the rules admit a request", async () => {
    const origin = await holdingOrigin(300);
    const rules = {
      rules: [{ id: "one", match: { path: { starts_with: "/api/slow" } }, characteristics: ["ip.src"], period: 60, requests_per_period: 1 }],
      upstreams: budget({ max_in_flight: 1, max_wait: 0 }).upstreams,
    };
    const edge = await startEdge({ build: "deploy", rules, origin: origin.url });
    try {
      // One client holds the only slot; a second client's refused request must not queue
      // for it, and a third client's admitted request waits for nothing else.
      const holding = call(edge, "GET", "/api/slow/a", "192.0.2.50");
      await sleep(100);
      assert.equal((await call(edge, "GET", "/api/slow/b", "192.0.2.50")).status, 429, "refused by the rule, not the budget");
      await holding;
      assert.equal((await call(edge, "GET", "/api/slow/c", "192.0.2.51")).status, 200);
    } finally {
      await edge.close();
      await origin.close();
    }
  });

  test("a streamed response holds its slot until it ends; a client that goes away gives it back", async () => {
    const arrivals = [];
    let sseEndedAt = Infinity;
    const origin = await server((req, res) => {
      arrivals.push({ path: req.url, at: Date.now() });
      if (req.url.endsWith("/sse")) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        let n = 0;
        const timer = setInterval(() => {
          res.write(`data: ${n}\n\n`);
          if (++n === 6) {
            clearInterval(timer);
            sseEndedAt = Date.now();
            res.end();
          }
        }, 100);
        return;
      }
      if (req.url.endsWith("/forever")) {
        // A stream that never ends but keeps sending (a closed client is noticed on a write).
        res.writeHead(200, { "content-type": "text/plain" });
        res.write("first chunk");
        const ticks = setInterval(() => res.write("."), 100);
        req.on("close", () => {
          clearInterval(ticks);
          res.end();
        });
        return;
      }
      res.end("quick");
    });
    const edge = await startEdge({ build: "deploy", rules: budget({ max_in_flight: 1, max_wait: 5 }), origin: origin.url });
    try {
      // SSE: the next request reaches the origin only after the stream has ended (~600 ms).
      const sse = await fetch(`${edge.url}/api/slow/sse`);
      const sseStart = Date.now();
      const next = call(edge, "GET", "/api/slow/after-sse", "192.0.2.60");
      const events = await sse.text();
      const sseEnd = Date.now();
      assert.equal((events.match(/data: /g) ?? []).length, 6);
      assert.equal((await next).status, 200);
      const afterSse = arrivals.find((a) => a.path === "/api/slow/after-sse");
      assert.ok(afterSse.at >= sseEndedAt, `waited for the stream to end (arrived ${afterSse.at - sseEndedAt} ms after it; the stream took ${sseEnd - sseStart} ms)`);

      // A client that aborts mid-body gives its slot back.
      const abort = new AbortController();
      // identity: workerd's local server would otherwise gzip the body and hold small chunks.
      const forever = await fetch(`${edge.url}/api/slow/forever`, { signal: abort.signal, headers: { "accept-encoding": "identity" } });
      const reader = forever.body.getReader();
      assert.match(new TextDecoder().decode((await reader.read()).value), /first chunk/);
      const waiting = call(edge, "GET", "/api/slow/after-abort", "192.0.2.61");
      await sleep(200);
      assert.equal(
        arrivals.some((a) => a.path === "/api/slow/after-abort"),
        false,
        "the slot is still held",
      );
      abort.abort();
      const r = await waiting;
      assert.equal(r.status, 200, "the slot came back when the client went away");
      assert.equal(r.body, "quick");
    } finally {
      await edge.close();
      await origin.close();
    }
  });

  test("an origin that fails gives the slot back", async () => {
    const edge = await startEdge({ build: "deploy", rules: budget({ max_in_flight: 1, max_wait: 0 }), origin: "http://127.0.0.1:9" });
    try {
      for (let i = 0; i < 3; i++) assert.equal((await call(edge, "GET", "/api/slow/x", "192.0.2.70")).status, 502, `request ${i + 1}`);
    } finally {
      await edge.close();
    }
  });
});

describe("the capabilities answer", () => {
  test("lists exactly the rules file's public limits, is cacheable and spends nothing", async () => {
    const origin = await server((_req, res) => res.end("origin"));
    const rules = structuredClone(TRAFFIC);
    rules.rules.push({
      id: "internal",
      match: { path: { starts_with: "/admin/" } },
      characteristics: ["ip.src"],
      period: 1,
      requests_per_period: 1,
      public: false,
    });
    rules.upstreams.push({ id: "hidden", match: { path: { starts_with: "/admin/" } }, max_in_flight: 1, public: false });
    const edge = await startEdge({ build: "deploy", rules, origin: origin.url });
    try {
      for (let i = 0; i < 25; i++) {
        const r = await call(edge, "GET", "/api/capabilities", "192.0.2.80");
        assert.equal(r.status, 200, `request ${i + 1} is never counted`);
        assert.equal(r.headers.get("ratelimit"), null);
      }
      const res = await fetch(`${edge.url}/api/capabilities`);
      assert.equal(res.headers.get("cache-control"), "public, max-age=60");
      assert.equal(res.headers.get("content-type"), "application/json");
      const answer = await res.json();
      assert.deepEqual(
        answer.rules.map((r) => r.id),
        ["api", "analyze", "destinations", "geocode", "wildfires", "smoke"],
      );
      assert.deepEqual(
        answer.upstreams.map((u) => u.id),
        ["overpass", "nominatim"],
      );
      const analyze = answer.rules[1];
      assert.deepEqual(analyze.matches, { paths: [{ equals: "/api/analyze" }, { equals: "/api/analyze/stream" }], methods: ["POST"], case_sensitive: false });
      assert.equal(analyze.rate_per_s, 0.2);
      assert.equal(analyze.burst, 6);
      assert.equal(analyze.description, TRAFFIC.rules[1].description);
      assert.deepEqual(answer.upstreams[0], {
        id: "overpass",
        description: TRAFFIC.upstreams[0].description,
        matches: {
          paths: [{ equals: "/api/analyze" }, { equals: "/api/analyze/stream" }, { equals: "/api/destinations" }],
          methods: ["POST"],
          case_sensitive: false,
        },
        max_in_flight: 2,
        max_wait_s: 30,
        scope: "isolate",
      });
      assert.deepEqual(answer.degraded, []);
      // traffic.md's provider table, with the seed's numbers; never the mirrors' addresses.
      const egress = Object.fromEntries(answer.egress.map((p) => [p.id, p]));
      assert.deepEqual(Object.keys(egress), ["overpass", "open-meteo", "open-meteo-air-quality", "nominatim", "wildfires", "smoke"]);
      assert.equal(egress.overpass.mirrors, 3);
      assert.equal(egress.overpass.max_in_flight_per_mirror, 2);
      for (const id of ["open-meteo", "open-meteo-air-quality"]) {
        assert.equal(egress[id].weight, "open-meteo");
        assert.equal(egress[id].weight_per_minute, 550);
        assert.equal(egress[id].max_in_flight_per_mirror, 4);
        assert.equal(egress[id].cache_ttl_s, 900);
      }
      assert.equal(egress.nominatim.min_interval_ms, 3500);
      assert.deepEqual([egress.wildfires.cache_ttl_s, egress.wildfires.cache_refresh], [600, "behind"]);
      assert.deepEqual([egress.smoke.cache_ttl_s, egress.smoke.cache_refresh], [1800, "behind"]);
      for (const p of answer.egress) assert.equal(p.max_wait_s, 30, `${p.id} waits UPSTREAM_BUDGET_WAIT_S`);
      assert.doesNotMatch(JSON.stringify(answer), /https?:\/\//, "no mirror address is published");
    } finally {
      await edge.close();
      await origin.close();
    }
  });
});

describe("explicit fail modes when a rule's store fails", () => {
  const rules = {
    rules: [
      { id: "per-ip", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 20 },
      {
        id: "per-key",
        match: { path: { starts_with: "/api/keyed/" } },
        characteristics: ['http.request.headers["x-api-key"]'],
        period: 10,
        requests_per_period: 20,
      },
    ],
  };
  let origin;
  before(async () => {
    origin = await server((_req, res) => res.end("origin"));
  });
  after(async () => {
    await origin?.close();
  });

  for (const store of ["unavailable", "slow"]) {
    test(`store ${store}: ip.src rules fail open, visibly; other rules fail closed with 503`, async () => {
      const edge = await startEdge({ rules, origin: origin.url, faults: { store } });
      try {
        const open = await call(edge, "GET", "/api/x", "192.0.2.90");
        assert.equal(open.status, 200);
        assert.equal(open.body, "origin");
        assert.equal(open.headers.get("sluicegate-degraded"), "per-ip");
        await edge.waitForLog(/"store-failure","rule":"per-ip".*"fails":"open"/);

        const closed = await call(edge, "GET", "/api/keyed/x", "192.0.2.90", { headers: { "x-api-key": "k1" } });
        assert.equal(closed.status, 503);
        assert.equal(closed.headers.get("retry-after"), "1");
        assert.equal(closed.headers.get("sluicegate-degraded"), "per-ip");
        assert.equal(JSON.parse(closed.body).rule, "per-key");

        const answer = await (await fetch(`${edge.url}/api/capabilities`)).json();
        assert.deepEqual(answer.degraded, [{ rule: "per-ip", fail_open_decisions: 2 }]);
      } finally {
        await edge.close();
      }
    });
  }

  test("a rule can say how it fails: on_store_failure closed for an ip.src rule", async () => {
    const closedRules = { rules: [{ ...rules.rules[0], on_store_failure: "closed" }] };
    const edge = await startEdge({ rules: closedRules, origin: origin.url, faults: { store: "unavailable" } });
    try {
      assert.equal((await call(edge, "GET", "/api/x", "192.0.2.91")).status, 503);
    } finally {
      await edge.close();
    }
  });
});

describe("no count lost to eviction", () => {
  test("a rule longer than a minute keeps its count across a restart; a short one counts in memory", async () => {
    const origin = await server((_req, res) => res.end("ok"));
    const dir = mkdtempSync(path.join(tmpdir(), "sluicegate-count-"));
    const rules = {
      rules: [
        { id: "hourly", match: { path: { starts_with: "/api/hourly" } }, characteristics: ["ip.src"], period: 3600, requests_per_period: 3 },
        { id: "bucket", match: { path: { starts_with: "/api/bucket" } }, characteristics: ["ip.src"], algorithm: "token_bucket", rate: 0.01, burst: 2 },
        { id: "short", match: { path: { starts_with: "/api/short" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 3 },
      ],
    };
    const start = () => startEdge({ build: "deploy", rules, origin: origin.url, persist: dir });
    try {
      const first = await start();
      for (const p of ["/api/hourly", "/api/hourly", "/api/bucket", "/api/short", "/api/short"]) {
        assert.equal((await call(first, "GET", p, "192.0.2.99")).status, 200, p);
      }
      await first.close();

      const second = await start();
      try {
        const hourly = await call(second, "GET", "/api/hourly", "192.0.2.99");
        assert.equal(hourly.headers.get("ratelimit").split(";")[1], "r=0", "the third of three, counted across the restart");
        assert.equal((await call(second, "GET", "/api/hourly", "192.0.2.99")).status, 429);
        assert.equal((await call(second, "GET", "/api/bucket", "192.0.2.99")).status, 200);
        assert.equal((await call(second, "GET", "/api/bucket", "192.0.2.99")).status, 429, "the bucket's 2 tokens spanned the restart");
        const short = await call(second, "GET", "/api/short", "192.0.2.99");
        assert.equal(short.headers.get("ratelimit"), '"short";r=2;t=10', "a 10 s rule counts in memory only");
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await origin.close();
    }
  });
});

describe("fleet upstream budgets (one count in a Durable Object)", () => {
  const fleet = (extra = {}) => ({
    rules: [],
    upstreams: [{ id: "shared", match: { path: { starts_with: "/api/slow" } }, max_in_flight: 2, max_wait: 1, scope: "fleet", ...extra }],
  });

  test("10 concurrent requests: never more than 2 at the origin, the rest 503 after max_wait", async () => {
    let now = 0;
    let max = 0;
    const origin = await server((_req, res) => {
      max = Math.max(max, ++now);
      setTimeout(() => {
        now--;
        res.end("done");
      }, 400);
    });
    const edge = await startEdge({ build: "deploy", rules: fleet(), origin: origin.url });
    try {
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => call(edge, "GET", `/api/slow/${i}`, `192.0.2.${i + 1}`)));
      assert.deepEqual(results.map((r) => r.status).sort(), [...Array(6).fill(200), ...Array(4).fill(503)]);
      assert.equal(max, 2);
      for (const r of results.filter((r) => r.status === 503)) assert.equal(JSON.parse(r.body).upstream, "shared");
    } finally {
      await edge.close();
      await origin.close();
    }
  });

  test("a lease its holder stops renewing (the isolate died) gives its slot back when it ends", async () => {
    const origin = await server((_req, res) => res.end("done"));
    const edge = await startEdge({ rules: fleet({ max_in_flight: 1, max_wait: 3, lease: 1 }), origin: origin.url, faults: { lease: "leak" } });
    try {
      assert.equal((await call(edge, "GET", "/api/slow/a", "192.0.2.20")).status, 200, "its lease leaks");
      const started = Date.now();
      const next = await call(edge, "GET", "/api/slow/b", "192.0.2.21");
      const waited = Date.now() - started;
      assert.equal(next.status, 200);
      assert.ok(waited >= 700 && waited < 2_500, `waited for the 1 s lease to run out (${waited} ms)`);
    } finally {
      await edge.close();
      await origin.close();
    }
  });

  test("a stream longer than the lease keeps its slot: the holder renews it", async () => {
    const arrivals = [];
    const origin = await server((req, res) => {
      arrivals.push({ path: req.url, at: Date.now() });
      if (!req.url.endsWith("/sse")) return res.end("quick");
      res.writeHead(200, { "content-type": "text/event-stream" });
      let n = 0;
      const timer = setInterval(() => {
        res.write(`data: ${n}\n\n`);
        if (++n === 25) {
          clearInterval(timer);
          res.end();
        }
      }, 100);
    });
    const edge = await startEdge({ build: "deploy", rules: fleet({ max_in_flight: 1, max_wait: 5, lease: 1 }), origin: origin.url });
    try {
      const sse = await fetch(`${edge.url}/api/slow/sse`);
      const started = Date.now();
      const next = call(edge, "GET", "/api/slow/after", "192.0.2.30");
      await sse.text();
      assert.equal((await next).status, 200);
      const after = arrivals.find((a) => a.path === "/api/slow/after");
      assert.ok(after.at - started >= 2_000, `the 2.5 s stream kept its slot past the 1 s lease (next arrived after ${after.at - started} ms)`);
    } finally {
      await edge.close();
      await origin.close();
    }
  });
});
