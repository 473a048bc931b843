// Rules that must mean what they say, in workerd: a rate too slow to count is refused (in
// the rules file and through the admin API), a HEAD meets GET-only limits, path parameters
// do not take a request past the rules, and configurations that would be silently wrong
// stop the Worker from starting, naming the field.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";

const TRAFFIC = JSON.parse(readFileSync(new URL("../examples/traffic.json", import.meta.url), "utf8"));
const sha256 = (key) => createHash("sha256").update(key).digest("hex");
const TOKEN = "admin-token-0123456789";

async function call(edge, method, path, ip, init = {}) {
  const res = await fetch(`${edge.url}${path}`, { method, ...init, headers: { "cf-connecting-ip": ip, ...init.headers } });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

/**
 * Assert that an edge started with `options` refuses to start, its message matching every
 * pattern; an edge that starts after all is closed (so that a failing test ends).
 */
async function refusesToStart(options, ...patterns) {
  let edge;
  try {
    edge = await startEdge(options);
  } catch (err) {
    assert.match(err.message, /sluicegate: not starting: /);
    for (const pattern of patterns) assert.match(err.message, pattern);
    return;
  }
  await edge.close();
  assert.fail(`the edge started; expected it to refuse with ${patterns.join(" and ")}`);
}

/** An origin that holds each request with `hold` in its query `holdMs`, counting how many it held at once. */
async function holdingOrigin(holdMs) {
  const held = { now: 0, max: 0 };
  const origin = await originServer((req, res) => {
    if (!req.url.includes("hold")) return res.end("ok");
    held.now++;
    held.max = Math.max(held.max, held.now);
    setTimeout(() => {
      held.now--;
      res.end("ok");
    }, holdMs);
  });
  return { ...origin, held };
}

describe("a rate too slow to represent", () => {
  let origin;
  before(async () => {
    origin = await originServer();
  });
  after(async () => {
    await origin?.close();
  });

  test("in the rules file refuses to start naming the rule and field rate, and forwards nothing", async () => {
    const rules = {
      rules: [{ id: "api", match: {}, characteristics: ["ip.src"], algorithm: "token_bucket", rate: 1e-12, burst: 1 }],
    };
    await refusesToStart({ build: "deploy", rules, origin: origin.url }, /rule rules\[0\] \("api"\): field "rate": .*got 1e-12/);
    assert.equal(origin.seen.length, 0);
  });

  test("through the admin API is a 400 naming rate, and the tenant's limit is unchanged", async () => {
    const rules = {
      rules: [],
      tenants: {
        match: { path: { starts_with: "/hooks/" } },
        key_header: "x-api-key",
        keys: { [sha256("key-acme")]: "acme" },
        default: { rate: 0.01, burst: 1 },
      },
    };
    const edge = await startEdge({ build: "deploy", rules, origin: origin.url, adminToken: TOKEN });
    try {
      const headers = { authorization: `Bearer ${TOKEN}` };
      const put = await fetch(`${edge.url}/v1/tenants/acme/rate-limit`, {
        method: "PUT",
        headers,
        body: JSON.stringify({ rate: 1e-12, burst: 1 }),
      });
      assert.equal(put.status, 400);
      const problem = await put.json();
      assert.match(problem.detail, /^field "rate": .*got 1e-12/);
      const now = await (await fetch(`${edge.url}/v1/tenants/acme/rate-limit`, { headers })).json();
      assert.deepEqual(now, { tenant: "acme", limit: { rate: 0.01, burst: 1 }, source: "default" });
      // The default's burst of 1 still holds: no unlimited bucket was ever made.
      const hook = () => fetch(`${edge.url}/hooks/in`, { method: "POST", headers: { "x-api-key": "key-acme" } });
      assert.deepEqual([(await hook()).status, (await hook()).status], [200, 429]);
    } finally {
      await edge.close();
    }
  });
});

describe("a HEAD request (traffic.json)", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await holdingOrigin(300);
    const rules = structuredClone(TRAFFIC);
    rules.rules.push({
      id: "by-method",
      match: { path: { equals: "/probe" } },
      characteristics: ["ip.src", "http.request.method"],
      period: 60,
      requests_per_period: 1,
    });
    edge = await startEdge({ build: "deploy", rules, origin: origin.url });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("meets the GET-only geocode bucket: 10 of 14 admitted, then 429 naming it", async () => {
    const statuses = [];
    let refused;
    for (let i = 0; i < 14; i++) {
      const r = await call(edge, "HEAD", "/api/geocode", "198.51.100.71");
      statuses.push(r.status);
      if (r.status === 429) refused ??= r;
    }
    assert.deepEqual(statuses, [...Array(10).fill(200), ...Array(4).fill(429)]);
    assert.equal(refused.headers.get("ratelimit-policy"), '"api";q=20;w=10, "geocode";q=10;w=20');
    assert.match(refused.headers.get("ratelimit"), /"geocode";r=0;t=2$/);
    assert.equal(refused.headers.get("retry-after"), "2");
    assert.ok(origin.seen.filter((s) => s.method === "HEAD").length >= 10, "admitted HEADs went to the origin as HEADs");
  });

  test("waits for the GET-only nominatim slot: never more than 1 at the origin", async () => {
    const started = Date.now();
    const results = await Promise.all(["198.51.100.72", "198.51.100.73", "198.51.100.74"].map((ip) => call(edge, "HEAD", "/api/geocode?hold", ip)));
    assert.deepEqual(
      results.map((r) => r.status),
      [200, 200, 200],
    );
    assert.equal(origin.held.max, 1, "one search in flight at a time");
    assert.deepEqual(
      origin.seen.filter((s) => s.url === "/api/geocode?hold").map((s) => s.method),
      ["HEAD", "HEAD", "HEAD"],
    );
    assert.ok(Date.now() - started >= 850, "three searches of 300 ms one after another");
  });

  test("is counted on the GET counter of the http.request.method characteristic", async () => {
    const ip = "198.51.100.75";
    assert.equal((await call(edge, "GET", "/probe", ip)).status, 200);
    const head = await call(edge, "HEAD", "/probe", ip);
    assert.equal(head.status, 429, "the HEAD met the GET's counter, already spent");
    assert.match(head.headers.get("ratelimit"), /"by-method";r=0;/);
    assert.equal((await call(edge, "POST", "/probe", ip)).status, 200, "another method, another counter");
  });
});

describe("path parameters (traffic.json)", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await originServer((req, res) => res.end(`origin ${req.method} ${req.url}`));
    edge = await startEdge({ build: "deploy", rules: TRAFFIC, origin: origin.url });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("/api;x/ping is counted by the api rule on the /api/ping counter, and forwarded as sent", async () => {
    const ip = "198.51.100.81";
    const plain = await call(edge, "GET", "/api/ping", ip);
    assert.equal(plain.headers.get("ratelimit-policy"), '"api";q=20;w=10');
    assert.match(plain.headers.get("ratelimit"), /^"api";r=19;/);
    const params = await call(edge, "GET", "/api;x/ping", ip);
    assert.equal(params.status, 200);
    assert.equal(params.headers.get("ratelimit-policy"), '"api";q=20;w=10');
    assert.match(params.headers.get("ratelimit"), /^"api";r=18;/, "the same counter");
    assert.equal(params.body, "origin GET /api;x/ping", "the origin gets the path as sent");
    for (let i = 0; i < 18; i++) await call(edge, "GET", "/;jsessionid=1/api;v=2/ping;y", ip);
    assert.equal((await call(edge, "GET", "/api;x/ping", ip)).status, 429);
  });

  test("/api/analyze/..;/analyze meets the analyze bucket it routes to", async () => {
    const ip = "198.51.100.82";
    const statuses = [];
    for (const path of ["/api/analyze", "/api/analyze", "/api/analyze/..;/analyze", "/api/analyze/..;/analyze", "/api/x/..;/analyze;v=1", "/api/analyze;a=b"]) {
      const r = await call(edge, "POST", path, ip);
      statuses.push(r.status);
      assert.match(r.headers.get("ratelimit-policy"), /"analyze";q=6;w=30/, path);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200]);
    const refused = await call(edge, "POST", "/api/analyze/..;/analyze", ip);
    assert.equal(refused.status, 429);
    assert.equal(JSON.parse(refused.body).rule, "analyze");
    assert.ok(
      origin.seen.some((s) => s.url === "/api/analyze/..;/analyze"),
      "forwarded as sent",
    );
  });
});

describe("configurations that would be silently wrong refuse to start, naming the field", () => {
  let origin;
  before(async () => {
    origin = await originServer();
  });
  after(async () => {
    await origin?.close();
  });

  const hash = sha256("key-acme");
  const rule = (id, extra = {}) => ({ id, match: {}, characteristics: ["ip.src"], period: 10, requests_per_period: 5, ...extra });
  const keyTenants = (keys) => ({ rules: [], tenants: { match: { path: { starts_with: "/hooks/" } }, key_header: "x-api-key", keys } });
  const refuses = async (options, pattern) => {
    await refusesToStart({ build: "deploy", origin: origin.url, ...options }, pattern);
    assert.equal(origin.seen.length, 0);
  };

  test("tenants.keys hashes in other case, in the rules file, in the secret, and between them", async () => {
    const upper = hash.toUpperCase();
    await refuses(
      { rules: keyTenants({ [hash]: "acme", [upper]: "beta" }) },
      new RegExp(`field "tenants.keys": "${upper}" → "beta" and "${hash}" → "acme" are one hash in other case`),
    );
    await refuses({ rules: keyTenants({}), tenantKeys: { [hash]: "acme", [upper]: "beta" } }, /SLUICEGATE_TENANT_KEYS: ".*" → ".*" and ".*" → ".*" are one hash in other case/);
    await refuses(
      { rules: keyTenants({}), vars: { SLUICEGATE_TENANT_KEYS: `{"${hash}":"acme","${hash}":"beta"}` } },
      new RegExp(`SLUICEGATE_TENANT_KEYS: "${hash}" is given twice`),
    );
    await refuses(
      { rules: keyTenants({ [hash]: "acme" }), tenantKeys: { [upper]: "intruder" } },
      new RegExp(`API key hash "${hash}" is tenant "acme" in the rules file's tenants.keys but "intruder" in SLUICEGATE_TENANT_KEYS`),
    );
    // The same tenant in both is one key, not a conflict.
    const edge = await startEdge({ build: "deploy", rules: keyTenants({ [hash]: "acme" }), origin: origin.url, tenantKeys: { [hash]: "acme" } });
    try {
      const r = await fetch(`${edge.url}/hooks/in`, { method: "POST", headers: { "x-api-key": "key-acme" } });
      assert.equal(r.status, 200);
    } finally {
      await edge.close();
      origin.seen.length = 0;
    }
  });

  test("an unnormalised capabilities.path is refused with the form to write; the normal one answers every spelling", async () => {
    for (const [path, normal] of [
      ["/api//caps", "/api/caps"],
      ["/api/./caps", "/api/caps"],
      ["/%61pi/caps", "/api/caps"],
      ["/api/caps?x=1", "/api/caps"],
    ]) {
      await refuses(
        { rules: { rules: [], capabilities: { path } } },
        new RegExp(`rules file: field "capabilities.path": "${path.replace(/[.?]/g, "\\$&")}" is not a normalised path.*write "${normal}"`),
      );
    }
    const edge = await startEdge({ build: "deploy", rules: { rules: [rule("api")], capabilities: { path: "/api/caps" } }, origin: origin.url });
    try {
      for (const spelling of ["/api/caps", "/API/Caps/", "/api//caps", "/%61pi/caps", "/api;v=1/caps"]) {
        const r = await call(edge, "GET", spelling, "198.51.100.91");
        assert.equal(r.status, 200, spelling);
        assert.deepEqual(
          JSON.parse(r.body).rules.map((x) => x.id),
          ["api"],
          spelling,
        );
      }
      assert.equal(origin.seen.length, 0, "the edge's own answer, never forwarded");
    } finally {
      await edge.close();
    }
  });

  test("a lease on an upstream of scope isolate", async () => {
    await refuses(
      { rules: { rules: [], upstreams: [{ id: "u", match: {}, max_in_flight: 1, lease: 10 }] } },
      /upstream upstreams\[0\] \("u"\): field "lease": lease is only used with scope "fleet"/,
    );
  });

  test("ids that differ only in ASCII case", async () => {
    await refuses({ rules: { rules: [rule("api"), rule("API")] } }, /rule rules\[1\] \("API"\): field "id": "API" is an earlier rule's id, "api", in other case/);
    await refuses(
      {
        rules: {
          rules: [],
          upstreams: [
            { id: "Overpass", match: {}, max_in_flight: 1 },
            { id: "overpass", match: {}, max_in_flight: 1 },
          ],
        },
      },
      /upstream upstreams\[1\] \("overpass"\): field "id"/,
    );
    await refuses(
      {
        rules: {
          rules: [],
          pre_read: {
            source_bytes_per_second: 1000,
            sources: [
              { id: "hooks", match: {} },
              { id: "HOOKS", match: {} },
            ],
          },
        },
      },
      /field "pre_read.sources\[1\].id": "HOOKS" is an earlier source's id, "hooks"/,
    );
  });

  test("a 5 MB refusal body, and other strings past their bound", async () => {
    await refuses(
      { rules: { rules: [rule("api", { response: { content: "x".repeat(5_000_000) } })] } },
      /rule rules\[0\] \("api"\): field "response.content": is 5000000 bytes long; at most 30000 are allowed/,
    );
    await refuses(
      { rules: { rules: [rule("api", { description: "d".repeat(1_025) })] } },
      /rule rules\[0\] \("api"\): field "description": is 1025 bytes long; at most 1024 are allowed/,
    );
  });
});
