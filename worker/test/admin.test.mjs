// The admin API of tenant limits (runtime overrides), in workerd.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";

const TOKEN = "admin-token-0123456789";
const sha256 = (key) => createHash("sha256").update(key).digest("hex");

const RULES = {
  rules: [],
  tenants: {
    match: { path: { starts_with: "/hooks/" } },
    key_header: "x-api-key",
    keys: { [sha256("key-acme")]: "acme", [sha256("key-beta")]: "beta" },
    limits: { acme: { rate: 0.01, burst: 2 } },
    default: { rate: 0.01, burst: 1 },
    max_body_bytes: 100_000,
  },
};

const origin = () => originServer((req, res) => res.end(`origin ${req.method} ${req.url}`));

const admin = async (edge, method, path, { token = TOKEN, body } = {}) => {
  const headers = token === null ? {} : { authorization: `Bearer ${token}` };
  const res = await fetch(`${edge.url}${path}`, { method, headers, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : null };
};
const hook = async (edge, key) => (await fetch(`${edge.url}/hooks/in`, { method: "POST", headers: { "x-api-key": key } })).status;

describe("the admin API", () => {
  let backend;
  before(async () => {
    backend = await origin();
  });
  after(async () => {
    await backend?.close();
  });

  test("without SLUICEGATE_ADMIN_TOKEN there is no admin API: its paths go to the origin", async () => {
    const edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url });
    try {
      const r = await admin(edge, "GET", "/v1/tenants");
      assert.equal(r.text, "origin GET /v1/tenants");
    } finally {
      await edge.close();
    }
  });

  describe("with a token", () => {
    let edge;
    let dir;
    before(async () => {
      dir = mkdtempSync(path.join(tmpdir(), "sluicegate-admin-"));
      edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url, adminToken: TOKEN, persist: dir });
    });
    after(async () => {
      await edge?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test("a wrong or missing token is a bare 401", async () => {
      for (const token of [null, "wrong", `${TOKEN}x`, TOKEN.slice(0, -1)]) {
        const r = await admin(edge, "GET", "/v1/tenants", { token });
        assert.equal(r.status, 401, String(token));
        assert.equal(r.headers.get("www-authenticate"), "Bearer");
        assert.doesNotMatch(r.text, /token|acme/i);
      }
      const basic = await fetch(`${edge.url}/v1/tenants`, { headers: { authorization: `Basic ${TOKEN}` } });
      assert.equal(basic.status, 401);
    });

    test("list, put, get, delete round trips; a change resets the tenant's buckets and is logged", async () => {
      const list = await admin(edge, "GET", "/v1/tenants");
      assert.equal(list.status, 200);
      assert.deepEqual(list.json, {
        default: { rate: 0.01, burst: 1 },
        tenants: [{ tenant: "acme", limit: { rate: 0.01, burst: 2 }, source: "config" }],
      });
      assert.deepEqual((await admin(edge, "GET", "/v1/tenants/beta/rate-limit")).json, { tenant: "beta", limit: { rate: 0.01, burst: 1 }, source: "default" });

      // acme spends its burst of 2, then is refused.
      assert.deepEqual([await hook(edge, "key-acme"), await hook(edge, "key-acme"), await hook(edge, "key-acme")], [200, 200, 429]);
      const put = await admin(edge, "PUT", "/v1/tenants/acme/rate-limit", { body: JSON.stringify({ rate: 0.01, burst: 3, max_queue: 5 }) });
      assert.equal(put.status, 200);
      assert.deepEqual(put.json, { tenant: "acme", limit: { rate: 0.01, burst: 3, max_queue: 5 }, source: "override" });
      const log = JSON.parse((await edge.waitForLog(/"sluicegate":"admin","action":"put","tenant":"acme"/)).message);
      assert.deepEqual([log.before, log.after], [null, { rate: 0.01, burst: 3, max_queue: 5 }]);
      assert.ok(log.by && log.at_ms > 0);
      // The override replaced the limit and started fresh buckets: 3 more at once.
      assert.deepEqual([await hook(edge, "key-acme"), await hook(edge, "key-acme"), await hook(edge, "key-acme"), await hook(edge, "key-acme")], [200, 200, 200, 429]);
      assert.deepEqual((await admin(edge, "GET", "/v1/tenants/acme/rate-limit")).json.source, "override");

      const gone = await admin(edge, "DELETE", "/v1/tenants/acme/rate-limit");
      assert.equal(gone.status, 200);
      assert.deepEqual(gone.json, { tenant: "acme", limit: { rate: 0.01, burst: 2 }, source: "config" });
      await edge.waitForLog(/"action":"delete","tenant":"acme","before":\{"rate":0.01,"burst":3,"max_queue":5\},"after":null/);
      assert.equal((await admin(edge, "DELETE", "/v1/tenants/acme/rate-limit")).status, 404, "nothing to delete twice");
    });

    test("a bad limit is refused with 400 naming the field, and nothing changes", async () => {
      for (const [body, field] of [
        [{ rate: 0, burst: 1 }, "rate"],
        [{ rate: 1 }, "burst"],
        [{ rate: 1, burst: 1, burst_bytes: 10 }, "burst_bytes"],
        [{ rate: 1, burst: 1, max_body_bytes: 200_000 }, "max_body_bytes"],
        [{ rate: 1, burst: 1, unknown: 1 }, "unknown"],
      ]) {
        const r = await admin(edge, "PUT", "/v1/tenants/beta/rate-limit", { body: JSON.stringify(body) });
        assert.equal(r.status, 400, JSON.stringify(body));
        assert.match(JSON.parse(r.text).detail, new RegExp(`field "${field}"`));
      }
      assert.equal((await admin(edge, "PUT", "/v1/tenants/beta/rate-limit", { body: "not json" })).status, 400);
      assert.equal((await admin(edge, "PUT", "/v1/tenants/bad%20name/rate-limit", { body: "{}" })).status, 400);
      assert.equal((await admin(edge, "POST", "/v1/tenants/beta/rate-limit", { body: "{}" })).status, 405);
      assert.equal((await admin(edge, "GET", "/v1/tenants/beta/rate-limit")).json.source, "default");
    });

    test("overrides survive a restart", async () => {
      const put = await admin(edge, "PUT", "/v1/tenants/beta/rate-limit", { body: JSON.stringify({ rate: 5, burst: 50 }) });
      assert.equal(put.status, 200);
      await edge.close();
      edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url, adminToken: TOKEN, persist: dir });
      const after = await admin(edge, "GET", "/v1/tenants/beta/rate-limit");
      assert.deepEqual(after.json, { tenant: "beta", limit: { rate: 5, burst: 50 }, source: "override" });
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push(await hook(edge, "key-beta"));
      assert.deepEqual(statuses, [200, 200, 200, 200, 200], "the override, not the default's burst of 1");
    });
  });
});

describe("every admin path", () => {
  let backend;
  let edge;
  before(async () => {
    backend = await origin();
    edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url, adminToken: TOKEN });
  });
  after(async () => {
    await edge?.close();
    await backend?.close();
  });
  const auditLines = (tenant) =>
    edge
      .logLines()
      .filter((l) => l.includes('"sluicegate":"admin"') && l.includes(`"tenant":"${tenant}"`))
      .map((l) => JSON.parse(l));
  const settle = () => new Promise((r) => setTimeout(r, 200));

  test("the effective limit: override, else the tenant's entry, else the default, saying which; none is unlimited", async () => {
    const get = async (tenant) => (await admin(edge, "GET", `/v1/tenants/${tenant}/rate-limit`)).json;
    assert.deepEqual(await get("acme"), { tenant: "acme", limit: { rate: 0.01, burst: 2 }, source: "config" });
    assert.deepEqual(await get("nobody"), { tenant: "nobody", limit: { rate: 0.01, burst: 1 }, source: "default" });
    assert.equal((await admin(edge, "PUT", "/v1/tenants/nobody/rate-limit", { body: '{"rate": 2, "burst": 4}' })).status, 200);
    assert.deepEqual(await get("nobody"), { tenant: "nobody", limit: { rate: 2, burst: 4 }, source: "override" });
    const list = await admin(edge, "GET", "/v1/tenants");
    assert.deepEqual(
      list.json.tenants.map((t) => [t.tenant, t.source]),
      [
        ["acme", "config"],
        ["nobody", "override"],
      ],
    );
    assert.equal((await admin(edge, "DELETE", "/v1/tenants/nobody/rate-limit")).status, 200);
    assert.deepEqual(await get("nobody"), { tenant: "nobody", limit: { rate: 0.01, burst: 1 }, source: "default" });

    const { default: _, ...noDefault } = RULES.tenants;
    const bare = await startEdge({ build: "deploy", rules: { rules: [], tenants: noDefault }, origin: backend.url, adminToken: TOKEN });
    try {
      assert.deepEqual((await admin(bare, "GET", "/v1/tenants/beta/rate-limit")).json, { tenant: "beta", limit: null, source: "none" });
      assert.deepEqual((await admin(bare, "GET", "/v1/tenants")).json, {
        default: null,
        tenants: [{ tenant: "acme", limit: { rate: 0.01, burst: 2 }, source: "config" }],
      });
    } finally {
      await bare.close();
    }
  });

  test("put is validated against the tenants section's max_body_bytes: at it is fine, past it is 400 naming the field", async () => {
    const at = await admin(edge, "PUT", "/v1/tenants/capped/rate-limit", { body: JSON.stringify({ rate: 1, burst: 1, max_body_bytes: 100_000 }) });
    assert.equal(at.status, 200);
    const past = await admin(edge, "PUT", "/v1/tenants/capped/rate-limit", { body: JSON.stringify({ rate: 1, burst: 1, max_body_bytes: 100_001 }) });
    assert.equal(past.status, 400);
    assert.equal(past.headers.get("content-type"), "application/problem+json");
    assert.match(JSON.parse(past.text).detail, /field "max_body_bytes": 100001 is above the instance's max_body_bytes, 100000/);
    assert.equal((await admin(edge, "GET", "/v1/tenants/capped/rate-limit")).json.limit.max_body_bytes, 100_000, "nothing changed");
    assert.equal((await admin(edge, "DELETE", "/v1/tenants/capped/rate-limit")).status, 200);
  });

  test("the same put twice is idempotent: the same answer, the buckets not reset again, an audit line saying nothing changed", async () => {
    // beta (the default's burst of 1) is in debt; a put starts fresh buckets of the override.
    assert.deepEqual([await hook(edge, "key-beta"), await hook(edge, "key-beta")], [200, 429]);
    const body = JSON.stringify({ rate: 0.01, burst: 2 });
    const first = await admin(edge, "PUT", "/v1/tenants/beta/rate-limit", { body });
    assert.equal(first.status, 200);
    assert.deepEqual([await hook(edge, "key-beta"), await hook(edge, "key-beta"), await hook(edge, "key-beta")], [200, 200, 429], "fresh: a burst of 2 at once");
    const second = await admin(edge, "PUT", "/v1/tenants/beta/rate-limit", { body });
    assert.deepEqual([second.status, second.text], [first.status, first.text]);
    assert.equal(await hook(edge, "key-beta"), 429, "a repeated put is no reset: beta still owes");
    await settle();
    const lines = auditLines("beta");
    assert.deepEqual(
      lines.map((l) => [l.action, l.before, l.after, l.changed]),
      [
        ["put", null, { rate: 0.01, burst: 2 }, true],
        ["put", { rate: 0.01, burst: 2 }, { rate: 0.01, burst: 2 }, false],
      ],
    );
    for (const l of lines) assert.ok(l.by && l.at_ms > 0, JSON.stringify(l));
  });

  test("delete resets the tenant's buckets to the limit that applies then; a second delete is 404 with no audit line", async () => {
    assert.equal(await hook(edge, "key-beta"), 429, "beta owes under its override");
    const gone = await admin(edge, "DELETE", "/v1/tenants/beta/rate-limit");
    assert.equal(gone.status, 200);
    assert.deepEqual(gone.json, { tenant: "beta", limit: { rate: 0.01, burst: 1 }, source: "default" });
    assert.deepEqual([await hook(edge, "key-beta"), await hook(edge, "key-beta")], [200, 429], "fresh buckets of the default");
    const again = await admin(edge, "DELETE", "/v1/tenants/beta/rate-limit");
    assert.equal(again.status, 404);
    assert.equal(again.headers.get("content-type"), "application/problem+json");
    assert.match(JSON.parse(again.text).detail, /Tenant "beta" has no override/);
    await settle();
    const deletes = auditLines("beta").filter((l) => l.action === "delete");
    assert.deepEqual(
      deletes.map((l) => [l.before, l.after, l.changed]),
      [[{ rate: 0.01, burst: 2 }, null, true]],
    );
  });
});

describe("the admin API without its store", () => {
  test("every path answers 503 store_unavailable (problem+json, Retry-After) and nothing is audited", async () => {
    const edge = await startEdge({ rules: RULES, adminToken: TOKEN, faults: { store: "unavailable" } });
    try {
      for (const [method, path, body] of [
        ["GET", "/v1/tenants"],
        ["GET", "/v1/tenants/acme/rate-limit"],
        ["PUT", "/v1/tenants/acme/rate-limit", JSON.stringify({ rate: 1, burst: 1 })],
        ["DELETE", "/v1/tenants/acme/rate-limit"],
      ]) {
        const r = await admin(edge, method, path, { body });
        assert.equal(r.status, 503, `${method} ${path}`);
        assert.equal(r.headers.get("content-type"), "application/problem+json");
        assert.equal(r.headers.get("retry-after"), "1");
        const problem = JSON.parse(r.text);
        assert.equal(problem.code, "store_unavailable", `${method} ${path}`);
        assert.match(problem.detail, /tenant overrides/);
      }
      // A bad limit is still named first: validation needs no store.
      assert.equal((await admin(edge, "PUT", "/v1/tenants/acme/rate-limit", { body: '{"rate": 1}' })).status, 400);
      await edge.waitForLog(/"store-failure","store":"tenant-overrides"/);
      assert.ok(!edge.logLines().some((l) => l.includes('"sluicegate":"admin"')), "no change, no audit line");
    } finally {
      await edge.close();
    }
  });
});
