// Tenant quotas (ingest-admission.md's semantics), in workerd.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";

const sha256 = (key) => createHash("sha256").update(key).digest("hex");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** An origin that answers "ok" after `holdMs`. */
const server = (holdMs = 0) => originServer((_req, res) => setTimeout(() => res.end("ok"), holdMs));

const KEYS = { acme: "key-acme-1", slow: "key-slow-1", bytes: "key-bytes-1", small: "key-small-1", queue: "key-queue-1", free: "key-free-1" };

function tenantsConfig(extra = {}) {
  return {
    rules: [],
    tenants: {
      match: { path: { starts_with: "/hooks/" } },
      key_header: "x-api-key",
      keys: Object.fromEntries(
        Object.entries(KEYS)
          .filter(([t]) => t !== "free")
          .map(([t, k]) => [sha256(k), t]),
      ),
      limits: {
        acme: { rate: 1, burst: 3 },
        slow: { rate: 0.5, burst: 1 },
        bytes: { rate: 100, burst: 100, bytes_per_second: 1000, burst_bytes: 1000 },
        small: { rate: 100, burst: 100, max_body_bytes: 2000 },
        queue: { rate: 100, burst: 100, max_queue: 1, max_queue_bytes: 1000 },
      },
      max_body_bytes: 1_000_000,
      ...extra,
    },
  };
}

async function post(edge, tenant, { body = "", key = KEYS[tenant], colo = "AMS", path = "/hooks/in" } = {}) {
  const headers = {
    "cf-connecting-ip": "192.0.2.1",
    ...(key === null ? {} : { "x-api-key": key }),
    // dispatchFetch streams the body: declare its length, as an HTTP client would.
    ...(body ? { "content-length": String(Buffer.byteLength(body)) } : {}),
  };
  // edge.fetch (Miniflare's dispatchFetch) carries request.cf, so the colo is the one given.
  const res = await edge.fetch(path, { method: "POST", body: body || undefined, headers, cf: { colo } });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

describe("tenant quotas (colo scope)", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await server();
    // `free` is known by the secret only, and has no limit of its own and there is no default.
    edge = await startEdge({ build: "deploy", rules: tenantsConfig(), origin: origin.url, tenantKeys: { [sha256(KEYS.free)]: "free" } });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("an unknown or missing key is 401 and charges nothing", async () => {
    for (const key of ["wrong", null, ""]) {
      const r = await post(edge, "acme", { key });
      assert.equal(r.status, 401);
      assert.doesNotMatch(r.body, /acme|key-/, "no hint");
    }
    const burst = [];
    for (let i = 0; i < 4; i++) burst.push((await post(edge, "acme")).status);
    assert.deepEqual(burst, [200, 200, 200, 429], "acme's full burst of 3 was still there");
  });

  test("a tenant over its rate gets 429 tenant_rate_limited with Retry-After", async () => {
    const r = await post(edge, "acme");
    assert.equal(r.status, 429);
    const problem = JSON.parse(r.body);
    assert.deepEqual([problem.tenant, problem.code], ["acme", "tenant_rate_limited"]);
    assert.equal(r.headers.get("sluicegate-scope"), "tenant");
    assert.ok(Number(r.headers.get("retry-after")) >= 1);
  });

  test("0.5 per second is one request every 2 s", async () => {
    assert.equal((await post(edge, "slow")).status, 200);
    const refused = await post(edge, "slow");
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("retry-after"), "2");
    await sleep(2_050);
    assert.equal((await post(edge, "slow")).status, 200);
  });

  test("body bytes: burst_bytes back to back, a bigger body only into a full bucket", async () => {
    assert.equal((await post(edge, "bytes", { body: "x".repeat(900) })).status, 200);
    assert.equal((await post(edge, "bytes", { body: "x".repeat(900) })).status, 429, "over 1,000 bytes");
    await sleep(1_050);
    assert.equal((await post(edge, "bytes", { body: "x".repeat(5_000) })).status, 200, "full: admitted, and emptied");
    assert.equal((await post(edge, "bytes", { body: "x".repeat(500) })).status, 429, "empty now: 500 bytes take half a second to come back");
  });

  test("a body over the tenant's max_body_bytes is 413", async () => {
    assert.equal((await post(edge, "small", { body: "x".repeat(2_000) })).status, 200);
    const r = await post(edge, "small", { body: "x".repeat(2_001) });
    assert.equal(r.status, 413);
    assert.match(JSON.parse(r.body).detail, /2000 bytes/);
  });

  test("a body of unknown length is charged once read, never refused for that (tenant-bodies.test.mjs has the rest)", async () => {
    const stream = () =>
      new ReadableStream({
        start(c) {
          c.enqueue(new Uint8Array(10));
          c.close();
        },
      });
    const send = (key) => fetch(`${edge.url}/hooks/in`, { method: "POST", body: stream(), duplex: "half", headers: { "x-api-key": key } });
    for (const tenant of ["small", "bytes"]) {
      const r = await send(KEYS[tenant]);
      assert.equal(r.status, 200, `${tenant}: ${await r.text()}`);
    }
  });

  test("no limit at all is unlimited (a tenant known by the secret, with no entry and no default)", async () => {
    const statuses = [];
    for (let i = 0; i < 30; i++) statuses.push((await post(edge, "free")).status);
    assert.deepEqual(new Set(statuses), new Set([200]));
  });

  test("requests outside the tenants' match carry no tenant", async () => {
    const r = await fetch(`${edge.url}/elsewhere`, { method: "POST" });
    assert.equal(r.status, 200);
  });

  test("colo scope: each data centre counts its own buckets", async () => {
    for (let i = 0; i < 3; i++) assert.equal((await post(edge, "acme", { colo: "SIN" })).status, 200, `SIN ${i + 1}`);
    assert.equal((await post(edge, "acme", { colo: "SIN" })).status, 429);
    for (let i = 0; i < 3; i++) assert.equal((await post(edge, "acme", { colo: "GRU" })).status, 200, `GRU ${i + 1}`);
    assert.equal((await post(edge, "acme", { colo: "SIN" })).status, 429, "SIN still spent");
  });
});

describe("a tenant's share in flight", () => {
  test("max_queue: past it 429 tenant_overload, given back when the origin answers; one big body alone is admitted", async () => {
    const origin = await server(400);
    const edge = await startEdge({ build: "deploy", rules: tenantsConfig(), origin: origin.url });
    try {
      const [a, b] = await Promise.all([post(edge, "queue"), sleep(100).then(() => post(edge, "queue"))]);
      assert.equal(a.status, 200);
      assert.equal(b.status, 429);
      assert.equal(JSON.parse(b.body).code, "tenant_overload");
      assert.equal(b.headers.get("retry-after"), "1");
      assert.equal((await post(edge, "queue")).status, 200, "given back once the origin answered");
      assert.equal((await post(edge, "queue", { body: "x".repeat(5_000) })).status, 200, "bigger than max_queue_bytes, but alone");
    } finally {
      await edge.close();
      await origin.close();
    }
  });
});

describe("fleet scope and the store", () => {
  test("fleet: one count across data centres; when the store fails, the isolate's own buckets still limit", async () => {
    const origin = await server();
    const edge = await startEdge({ build: "deploy", rules: tenantsConfig({ scope: "fleet" }), origin: origin.url });
    try {
      assert.equal((await post(edge, "acme", { colo: "AMS" })).status, 200);
      assert.equal((await post(edge, "acme", { colo: "DFW" })).status, 200);
      assert.equal((await post(edge, "acme", { colo: "SIN" })).status, 200);
      assert.equal((await post(edge, "acme", { colo: "LHR" })).status, 429, "one burst of 3 for the fleet");
    } finally {
      await edge.close();
    }
    // The fleet's object fails: each colo's own buckets answer.
    const fleetDown = await startEdge({ rules: tenantsConfig({ scope: "fleet" }), origin: origin.url, faults: { store: "fleet-tenants" } });
    try {
      const ams = [];
      for (let i = 0; i < 4; i++) ams.push((await post(fleetDown, "acme", { colo: "AMS" })).status);
      assert.deepEqual(ams, [200, 200, 200, 429]);
      assert.equal((await post(fleetDown, "acme", { colo: "DFW" })).status, 200, "DFW's own buckets");
    } finally {
      await fleetDown.close();
    }
    // No store answers: this isolate's buckets still limit.
    const failing = await startEdge({ rules: tenantsConfig({ scope: "fleet" }), origin: origin.url, faults: { store: "unavailable" } });
    try {
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await post(failing, "acme")).status);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      await failing.waitForLog(/"store-failure","tenant":"acme"/);
    } finally {
      await failing.close();
      await origin.close();
    }
  });
});

describe("invented tenant names (tenant_header)", () => {
  // The sender names its tenant; `debtor` has a limit of its own, everyone else the default.
  const named = {
    rules: [],
    tenants: {
      match: { path: { starts_with: "/hooks/" } },
      tenant_header: "x-tenant",
      limits: { debtor: { rate: 0.00001, burst: 1 }, good: { rate: 1000, burst: 1000 } },
      default: { rate: 0.01, burst: 1 },
    },
  };
  const send = async (edge, tenant) => {
    const res = await edge.fetch("/hooks/in", { method: "POST", headers: { "x-tenant": tenant, "cf-connecting-ip": "192.0.2.1" }, cf: { colo: "AMS" } });
    await res.arrayBuffer();
    return res.status;
  };
  /** Send `count` invented names, `width` at a time; every 1,000, `probe()`. The statuses by count. */
  const flood = async (edge, prefix, count, probe, width = 100) => {
    const statuses = {};
    for (let i = 0; i < count; i += width) {
      const batch = [];
      for (let j = i; j < Math.min(count, i + width); j++) batch.push(send(edge, `${prefix}-${j}`));
      for (const status of await Promise.all(batch)) statuses[status] = (statuses[status] ?? 0) + 1;
      if (i % 1_000 === 0) await probe(i);
    }
    return statuses;
  };

  test("a name longer than any tenant's (129 bytes) names no tenant: 401, nothing forwarded", async () => {
    const origin = await server();
    const edge = await startEdge({ rules: named, origin: origin.url });
    try {
      assert.equal(await send(edge, "t".repeat(128)), 200, "128 bytes is a tenant name");
      const before = origin.seen?.length;
      assert.equal(await send(edge, "t".repeat(129)), 401);
      assert.equal(await send(edge, "x".repeat(8_000)), 401);
      if (before !== undefined) assert.equal(origin.seen.length, before, "nothing reached the origin");
    } finally {
      await edge.close();
      await origin.close();
    }
  });

  test("20,000 invented names, no store: the isolate's table stops at its bound, a tenant in debt stays refused throughout", async () => {
    const origin = await server();
    // No store answers: every tenant is counted in this isolate's own table.
    const edge = await startEdge({ rules: named, origin: origin.url, faults: { store: "unavailable" } });
    try {
      assert.deepEqual([await send(edge, "debtor"), await send(edge, "debtor")], [200, 429]);
      assert.deepEqual([await send(edge, "early"), await send(edge, "early")], [200, 429], "an invented name in debt");
      const statuses = await flood(edge, "invented", 20_000, async (i) => {
        assert.equal(await send(edge, "debtor"), 429, `debtor after ${i} names`);
        assert.equal(await send(edge, "early"), 429, `early after ${i} names`);
        assert.equal(await send(edge, "good"), 200, `good after ${i} names`);
      });
      // 10,000 buckets under the default (early's among them, debtor's and good's beside), then
      // new names share one overflow bucket of the default limit (a burst of 1), long in debt.
      assert.ok(statuses[200] >= 9_990 && statuses[200] <= 10_001, JSON.stringify(statuses));
      assert.equal(statuses[200] + statuses[429], 20_000, JSON.stringify(statuses));
      const full = JSON.parse((await edge.waitForLog(/"tenant-table-full"/)).message);
      assert.ok(full.tenants <= 10_002, JSON.stringify(full));
      assert.equal(full.max_default, 10_000);
      const refused = await edge.fetch("/hooks/in", { method: "POST", headers: { "x-tenant": "one-more" } });
      assert.equal(refused.status, 429);
      assert.equal((await refused.json()).code, "tenant_rate_limited");
      assert.ok(Number(refused.headers.get("retry-after")) >= 1);
      // The isolate keeps working: a tenant of its own and a request outside the tenants.
      assert.equal(await send(edge, "good"), 200);
      assert.equal(await send(edge, "debtor"), 429);
      assert.equal((await edge.fetch("/elsewhere")).status, 200);
    } finally {
      await edge.close();
      await origin.close();
    }
  });

  test("10,500 names invented slower than buckets refill are swept, never overflow, and a tenant in debt stays refused", async () => {
    const origin = await server();
    // The development clock runs 100 times as fast: a default bucket refills in 1 s, a pass
    // of the sweep (16 shards, one every 3.75 s) takes 0.6 s; debtor owes for 1,000 s.
    const edge = await startEdge({
      rules: named,
      origin: origin.url,
      faults: { store: "unavailable" },
      vars: { SLUICEGATE_CLOCK: `100,${Date.now()},${Date.now()}` },
    });
    try {
      assert.deepEqual([await send(edge, "debtor"), await send(edge, "debtor")], [200, 429]);
      const statuses = await flood(edge, "gentle", 10_500, async (i) => {
        assert.equal(await send(edge, "debtor"), 429, `debtor after ${i} names`);
      });
      assert.deepEqual(statuses, { 200: 10_500 }, "every new name had a bucket of its own");
      assert.ok(!edge.logLines().some((l) => l.includes("tenant-table-full")), "the table never filled");
      assert.equal(await send(edge, "debtor"), 429);
    } finally {
      await edge.close();
      await origin.close();
    }
  });
});

describe("a Durable Object's tenant buckets", () => {
  test("a debt longer than a minute is written down, so an object that starts again (a restart) still refuses", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sluicegate-tenant-debt-"));
    const origin = await server();
    const rules = tenantsConfig({ limits: { acme: { rate: 0.01, burst: 1 }, slow: { rate: 1, burst: 2 } } });
    const start = () => startEdge({ build: "deploy", rules, origin: origin.url, persist: dir });
    try {
      let edge = await start();
      assert.deepEqual([(await post(edge, "acme")).status, (await post(edge, "acme")).status], [200, 429]);
      await edge.close();
      edge = await start();
      try {
        const r = await post(edge, "acme");
        assert.equal(r.status, 429, "the object started afresh, and the debt was still there");
        assert.ok(Number(r.headers.get("retry-after")) > 90);
      } finally {
        await edge.close();
      }
    } finally {
      await origin.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("isolate scope", () => {
  test("one count per tenant in the isolate, whatever the colo, and no store is asked", async () => {
    const origin = await server();
    // every Durable Object call fails: a charge in a store would log a store-failure
    const edge = await startEdge({ rules: tenantsConfig({ scope: "isolate" }), origin: origin.url, faults: { store: "unavailable" } });
    try {
      const statuses = [];
      for (const colo of ["AMS", "DFW", "SIN", "LHR"]) statuses.push((await post(edge, "acme", { colo })).status);
      assert.deepEqual(statuses, [200, 200, 200, 429], "one burst of 3 in this isolate, across colos");
      assert.ok(!edge.logLines().some((line) => line.includes('"store-failure","tenant":"acme"')), edge.logLines().join("\n"));
    } finally {
      await edge.close();
      await origin.close();
    }
  });
});
