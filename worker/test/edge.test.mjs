// The edge rule enforced by the real worker in workerd (through startEdge).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";

const AMS = { colo: "AMS" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** GET /api/ping as `ip` at `colo`; returns status, headers and body text. */
async function ping(edge, ip, { colo = "AMS", path = "/api/ping", headers = {} } = {}) {
  const res = await edge.fetch(path, { headers: { "cf-connecting-ip": ip, ...headers }, cf: { colo } });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

function statuses(results) {
  const count = (s) => results.filter((r) => r.status === s).length;
  return { ok: count(200), limited: count(429), other: results.length - count(200) - count(429) };
}

describe("the default /api/ rule: 20 per 10 s per IP and colo, then block 10 s", () => {
  let edge;
  before(async () => {
    edge = await startEdge();
  });
  after(async () => {
    await edge?.close();
  });

  test("25 requests from one IP at one colo: exactly 20 pass, 5 get 429 with Retry-After: 10", async () => {
    const results = [];
    for (let i = 0; i < 25; i++) results.push(await ping(edge, "198.51.100.1"));
    assert.deepEqual(statuses(results), { ok: 20, limited: 5, other: 0 });
    results.slice(0, 20).forEach((r, i) => {
      assert.equal(r.status, 200, `request ${i + 1}`);
      assert.equal(r.headers.get("ratelimit-policy"), '"api";q=20;w=10');
      assert.equal(r.headers.get("ratelimit"), `"api";r=${19 - i};t=10`);
      assert.equal(r.headers.get("retry-after"), null);
    });
    for (const r of results.slice(20)) {
      assert.equal(r.status, 429);
      assert.equal(r.headers.get("retry-after"), "10");
      assert.equal(r.headers.get("ratelimit-policy"), '"api";q=20;w=10');
      assert.equal(r.headers.get("ratelimit"), '"api";r=0;t=10');
      assert.equal(r.headers.get("content-type"), "application/problem+json");
      const problem = JSON.parse(r.body);
      assert.equal(problem.status, 429);
      assert.equal(problem.rule, "api");
      assert.equal(problem.retry_after, 10);
      assert.match(problem.detail, /"api".*20 requests per 10 s/);
    }
  });

  test("every decision is logged with the identity that was counted", async () => {
    await ping(edge, "198.51.100.2", { headers: { "x-forwarded-for": "6.6.6.6" } });
    const { message: line } = await edge.waitForLog((l) => l.includes('"identity":"198.51.100.2"'));
    const entry = JSON.parse(line);
    assert.equal(entry.identity_source, "cf-connecting-ip");
    assert.equal(entry.key, "api|ip.src=198.51.100.2|cf.colo.id=AMS");
    assert.equal(entry.decision, "allow");
  });

  test("/, /api, /apix and /static/x are never counted and carry no rate headers", async () => {
    const ip = "198.51.100.3";
    for (const path of ["/", "/api", "/apix", "/static/x", "/apix/ping"]) {
      for (let i = 0; i < 25; i++) {
        const r = await ping(edge, ip, { path });
        assert.notEqual(r.status, 429, path);
        assert.equal(r.headers.get("ratelimit"), null, path);
        assert.equal(r.headers.get("ratelimit-policy"), null, path);
        assert.equal(r.headers.get("retry-after"), null, path);
      }
    }
    const root = await ping(edge, ip, { path: "/" });
    assert.equal(root.status, 200);
    assert.match(root.body, /<html|<!doctype/i);
    // None of the 125 requests above was counted.
    const first = await ping(edge, ip);
    assert.equal(first.headers.get("ratelimit"), '"api";r=19;t=10');
  });

  test("the same IP at another colo, and another IP at the same colo, have their own counters", async () => {
    const ip = "198.51.100.4";
    for (let i = 0; i < 21; i++) await ping(edge, ip);
    assert.equal((await ping(edge, ip)).status, 429);
    const otherColo = await ping(edge, ip, { colo: "DFW" });
    assert.equal(otherColo.status, 200);
    assert.equal(otherColo.headers.get("ratelimit"), '"api";r=19;t=10');
    const otherIp = await ping(edge, "198.51.100.5");
    assert.equal(otherIp.status, 200);
    assert.equal(otherIp.headers.get("ratelimit"), '"api";r=19;t=10');
  });

  test("100 concurrent requests from one key: exactly 20 admitted", async () => {
    const results = await Promise.all(Array.from({ length: 100 }, () => ping(edge, "198.51.100.6")));
    assert.deepEqual(statuses(results), { ok: 20, limited: 80, other: 0 });
    const remaining = results
      .filter((r) => r.status === 200)
      .map((r) => Number(/r=(\d+)/.exec(r.headers.get("ratelimit"))[1]))
      .sort((a, b) => a - b);
    assert.deepEqual(
      remaining,
      Array.from({ length: 20 }, (_, i) => i),
      "each admitted request saw its own count",
    );
  });

  test("rotating the leftmost X-Forwarded-For hop never overrides CF-Connecting-IP", async () => {
    const results = [];
    for (let i = 0; i < 25; i++) {
      results.push(await ping(edge, "198.51.100.7", { headers: { "x-forwarded-for": `10.9.${i}.1, 203.0.113.${i}` } }));
    }
    assert.deepEqual(statuses(results), { ok: 20, limited: 5, other: 0 });
  });

  test("rotating the last 64 bits of an IPv6 address does not reset the count", async () => {
    const results = [];
    for (let i = 0; i < 25; i++) {
      const low = [i, i * 7, i * 13, i * 31].map((n) => (n + 1).toString(16)).join(":");
      results.push(await ping(edge, `2001:db8:aa:bb:${low}`));
    }
    assert.deepEqual(statuses(results), { ok: 20, limited: 5, other: 0 });
    await edge.waitForLog((l) => l.includes('"identity":"2001:db8:aa:bb::/64"'));
    // The neighbouring /64 is another customer.
    assert.equal((await ping(edge, "2001:db8:aa:bc::1")).status, 200);
  });

  test("an IPv4-mapped IPv6 address counts as the IPv4 address", async () => {
    for (let i = 0; i < 20; i++) assert.equal((await ping(edge, "198.51.100.8")).status, 200);
    assert.equal((await ping(edge, "::ffff:198.51.100.8")).status, 429);
  });

  test("a blocked key is refused from the isolate cache, without asking the Durable Object", async () => {
    const ip = "198.51.100.9";
    for (let i = 0; i < 21; i++) await ping(edge, ip);
    const r = await ping(edge, ip);
    assert.equal(r.status, 429);
    await edge.waitForLog((l) => l.includes(`"identity":"${ip}"`) && l.includes('"via":"isolate-cache"'));
  });

  test("during the block every request of the key is refused; 10 s after it began one passes", async () => {
    const ip = "198.51.100.10";
    for (let i = 0; i < 20; i++) assert.equal((await ping(edge, ip)).status, 200);
    assert.equal((await ping(edge, ip)).status, 429);
    const blockBegan = Date.now(); // after the refusal that started it
    for (const at of [1_000, 4_000, 7_000, 9_500]) {
      await sleep(blockBegan + at - Date.now());
      const r = await ping(edge, ip);
      assert.equal(r.status, 429, `${at} ms into the block`);
      const left = Number(r.headers.get("retry-after"));
      assert.ok(left >= 1 && left <= Math.ceil((10_000 - at) / 1000) + 1, `Retry-After ${left} at ${at} ms`);
    }
    // Refusals during the block did not extend it, and counting starts fresh.
    await sleep(blockBegan + 10_050 - Date.now());
    const r = await ping(edge, ip);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("ratelimit"), '"api";r=19;t=10');
  });
});

describe("restarts", () => {
  test("a restart (or a deploy) does not lift a block: the Durable Object restores it from storage", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sluicegate-do-"));
    try {
      const first = await startEdge({ persist: dir });
      const ip = "198.51.100.20";
      for (let i = 0; i < 20; i++) assert.equal((await ping(first, ip)).status, 200);
      assert.equal((await ping(first, ip)).status, 429);
      await first.close();

      const second = await startEdge({ persist: dir });
      try {
        const r = await ping(second, ip);
        assert.equal(r.status, 429, "still blocked after the restart");
        assert.ok(Number(r.headers.get("retry-after")) >= 8, `Retry-After ${r.headers.get("retry-after")}`);
        // Another key starts fresh after the restart.
        assert.equal((await ping(second, "198.51.100.21")).headers.get("ratelimit"), '"api";r=19;t=10');
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("forwarding to ORIGIN_URL", () => {
  let edge;
  let origin;
  const seen = [];
  before(async () => {
    origin = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body });
        res.writeHead(201, { "content-type": "text/x-origin", "x-origin": "yes" });
        res.end(`origin saw ${req.method} ${req.url}`);
      });
    });
    await new Promise((r) => origin.listen(0, "127.0.0.1", r));
    edge = await startEdge({ origin: `http://127.0.0.1:${origin.address().port}` });
  });
  after(async () => {
    await edge?.close();
    await new Promise((r) => origin?.close(r));
  });

  test("a path outside the rule is forwarded untouched and answered as the origin answered", async () => {
    const res = await edge.fetch("/static/x?v=1&w=2", {
      method: "POST",
      headers: { "content-type": "text/plain", "x-custom": "kept", "cf-connecting-ip": "192.0.2.50" },
      body: "payload",
      cf: AMS,
    });
    assert.equal(res.status, 201);
    assert.equal(res.headers.get("x-origin"), "yes");
    assert.equal(res.headers.get("ratelimit"), null);
    assert.equal(await res.text(), "origin saw POST /static/x?v=1&w=2");
    const got = seen.at(-1);
    assert.equal(got.method, "POST");
    assert.equal(got.url, "/static/x?v=1&w=2");
    assert.equal(got.headers["x-custom"], "kept");
    assert.equal(got.body, "payload");
  });

  test("an admitted /api/ request reaches the origin and comes back with rate headers", async () => {
    const res = await edge.fetch("/api/data?q=1", { headers: { "cf-connecting-ip": "192.0.2.51" }, cf: AMS });
    assert.equal(res.status, 201);
    assert.equal(await res.text(), "origin saw GET /api/data?q=1");
    assert.equal(res.headers.get("x-origin"), "yes");
    assert.equal(res.headers.get("ratelimit"), '"api";r=19;t=10');
  });

  test("a refused request never reaches the origin", async () => {
    for (let i = 0; i < 20; i++) await (await edge.fetch("/api/x", { headers: { "cf-connecting-ip": "192.0.2.52" }, cf: AMS })).text();
    const before = seen.length;
    const res = await edge.fetch("/api/x", { headers: { "cf-connecting-ip": "192.0.2.52" }, cf: AMS });
    assert.equal(res.status, 429);
    assert.equal(seen.length, before);
  });
});

describe("an unreachable origin", () => {
  test("is answered 502 with a problem body, never 500", async () => {
    const closed = createServer();
    await new Promise((r) => closed.listen(0, "127.0.0.1", r));
    const port = closed.address().port;
    await new Promise((r) => closed.close(r));
    const edge = await startEdge({ origin: `http://127.0.0.1:${port}` });
    try {
      for (const path of ["/static/x", "/api/ping"]) {
        const res = await edge.fetch(path, { cf: AMS });
        assert.equal(res.status, 502, path);
        assert.equal(res.headers.get("content-type"), "application/problem+json");
        assert.equal((await res.json()).title, "Bad Gateway");
      }
      await edge.waitForLog("the origin failed");
    } finally {
      await edge.close();
    }
  });
});

describe("configured rules", () => {
  test("a bad configuration refuses to start, naming the rule and the field, and forwards nothing", async () => {
    let hits = 0;
    const origin = createServer((_req, res) => {
      hits++;
      res.end("should not be reached");
    });
    await new Promise((r) => origin.listen(0, "127.0.0.1", r));
    const rules = { rules: [{ id: "api", match: {}, characteristics: ["ip.src"], period: 0, requests_per_period: 20 }] };
    try {
      await assert.rejects(startEdge({ rules, origin: `http://127.0.0.1:${origin.address().port}` }), (err) =>
        err.message.includes('sluicegate: not starting: rule rules[0] ("api"): field "period"'),
      );
      assert.equal(hits, 0);
    } finally {
      await new Promise((r) => origin.close(r));
    }
  });

  test("rules given to startEdge replace the defaults: a token bucket by method and path, with a custom response", async () => {
    const rules = {
      rules: [
        {
          id: "analyze",
          match: { path: { equals: "/api/analyze" }, methods: ["POST"] },
          characteristics: ["ip.src"],
          algorithm: "token_bucket",
          rate: 0.2,
          burst: 3,
          response: { status_code: 503, content_type: "application/json", content: '{"busy":true}' },
        },
      ],
    };
    const edge = await startEdge({ rules: JSON.stringify(rules) });
    try {
      const post = () => edge.fetch("/api/analyze", { method: "POST", headers: { "cf-connecting-ip": "192.0.2.60" }, cf: AMS });
      for (let i = 0; i < 3; i++) {
        const r = await post();
        assert.notEqual(r.status, 503);
        assert.equal(r.headers.get("ratelimit-policy"), '"analyze";q=3;w=15');
        await r.arrayBuffer();
      }
      const refused = await post();
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get("content-type"), "application/json");
      assert.equal(refused.headers.get("retry-after"), "5");
      assert.equal(await refused.text(), '{"busy":true}');
      // GET is outside the rule, and the default /api/ rule is gone.
      const get = await edge.fetch("/api/analyze", { headers: { "cf-connecting-ip": "192.0.2.60" }, cf: AMS });
      assert.equal(get.headers.get("ratelimit"), null);
      await get.arrayBuffer();
    } finally {
      await edge.close();
    }
  });
});
