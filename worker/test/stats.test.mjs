// The edge's decisions counted per minute and read back from GET /__sluicegate/stats, in
// workerd: exact counts of a scripted burst, the admin token, a restart, hashed identities,
// and a flood of identities that keeps the top refused to its size.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";

const TOKEN = "stats-token-0123456789";
const API = { id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 20, mitigation_timeout: 10 };
const RULES = { rules: [API] };

const get = async (edge, ip, p = "/api/x") => {
  const res = await fetch(`${edge.url}${p}`, { headers: { "cf-connecting-ip": ip } });
  await res.arrayBuffer();
  return res.status;
};
const stats = async (edge, query = "", token = TOKEN) => {
  const res = await fetch(`${edge.url}/__sluicegate/stats${query}`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : null, text };
};
const subject = (json, kind, name) => json.subjects.find((s) => s.kind === kind && s.name === name);
/** The sum of a subject's counts over its minutes, which must equal its total. */
const summed = (s) => {
  const sum = { admitted: 0, refused: 0, failed_open: 0, shed: 0 };
  for (const m of s.minutes) for (const k of Object.keys(sum)) sum[k] += m[k];
  for (const k of Object.keys(sum)) assert.equal(sum[k], s.total[k], `${k}: the minutes add up to the total`);
  return sum;
};

describe("stats of the edge's decisions", () => {
  let backend;
  before(async () => {
    backend = await originServer((req, res) => res.end(`origin ${req.url}`));
  });
  after(async () => {
    await backend?.close();
  });

  test("without SLUICEGATE_ADMIN_TOKEN there is no stats route: its path goes to the origin", async () => {
    const edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url });
    try {
      const r = await stats(edge);
      assert.equal(r.text, "origin /__sluicegate/stats");
    } finally {
      await edge.close();
    }
  });

  describe("with a token", () => {
    let edge;
    let dir;
    before(async () => {
      dir = mkdtempSync(path.join(tmpdir(), "sluicegate-stats-"));
      edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url, adminToken: TOKEN, persist: dir });
    });
    after(async () => {
      await edge?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test("a scripted burst appears with exact counts: admitted 20, refused 5, and who was refused", async () => {
      const statuses = [];
      for (let i = 0; i < 25; i++) statuses.push(await get(edge, "203.0.113.7"));
      assert.deepEqual(statuses, [...Array(20).fill(200), ...Array(5).fill(429)]);
      const r = await stats(edge);
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("cache-control"), "no-store");
      const api = subject(r.json, "rule", "api");
      assert.deepEqual(summed(api), { admitted: 20, refused: 5, failed_open: 0, shed: 0 });
      assert.deepEqual(api.total.top_refused, [{ identity: "203.0.113.7", count: 5 }]);
      assert.equal(r.json.minute_ms, 60_000);
      assert.equal(r.json.retention_minutes, 1440);
      for (const m of api.minutes) assert.equal(m.minute % 60_000, 0, "minutes start on the minute");
      // ?rule= names one subject; one that counted nothing has none
      assert.deepEqual(
        (await stats(edge, "?rule=api")).json.subjects.map((s) => s.name),
        ["api"],
      );
      assert.deepEqual((await stats(edge, "?rule=nothing")).json.subjects, []);
      // ?since= in the future covers nothing
      assert.deepEqual((await stats(edge, `?since=${Date.now() + 120_000}`)).json.subjects, []);
    });

    test("the admin token is required, and a wrong query or method is answered naming it", async () => {
      for (const token of [null, "wrong", `${TOKEN}x`]) assert.equal((await stats(edge, "", token)).status, 401, String(token));
      const bad = await stats(edge, "?since=yesterday");
      assert.equal(bad.status, 400);
      assert.match(bad.text, /query parameter \\"since\\": must be a time in ms since the epoch/);
      const post = await fetch(`${edge.url}/__sluicegate/stats`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(post.status, 405);
      assert.equal(post.headers.get("allow"), "GET, HEAD");
      const elsewhere = await fetch(`${edge.url}/__sluicegate/nope`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(elsewhere.status, 404, "every path under /__sluicegate is the edge's");
    });

    test("the counts survive a restart", async () => {
      const before = subject((await stats(edge, "?rule=api")).json, "rule", "api");
      await edge.close();
      edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url, adminToken: TOKEN, persist: dir });
      const again = subject((await stats(edge, "?rule=api")).json, "rule", "api");
      assert.deepEqual(again.total, before.total);
      assert.ok(again.total.admitted >= 20 && again.total.refused >= 5);
    });
  });

  test("hashed identities: the top refused shows keyed hashes, never the address", async () => {
    const edge = await startEdge({ build: "deploy", rules: { ...RULES, analytics: { identities: "hashed" } }, origin: backend.url, adminToken: TOKEN });
    try {
      for (let i = 0; i < 22; i++) await get(edge, "198.51.100.9");
      const r = await stats(edge);
      const [top] = subject(r.json, "rule", "api").total.top_refused;
      assert.equal(top.count, 2);
      assert.match(top.identity, /^#[0-9a-f]{32}$/);
      assert.doesNotMatch(r.text, /198\.51\.100\.9/);
    } finally {
      await edge.close();
    }
  });

  test('"analytics": false counts nothing', async () => {
    const edge = await startEdge({ build: "deploy", rules: { ...RULES, analytics: false }, origin: backend.url, adminToken: TOKEN });
    try {
      for (let i = 0; i < 3; i++) await get(edge, "198.51.100.10");
      assert.deepEqual((await stats(edge)).json.subjects, []);
    } finally {
      await edge.close();
    }
  });

  test("a flood of refused identities keeps the top refused to its size, the heaviest first", async () => {
    const one = { rules: [{ ...API, requests_per_period: 1, mitigation_timeout: 0 }] };
    const edge = await startEdge({ build: "deploy", rules: one, origin: backend.url, adminToken: TOKEN });
    try {
      // 300 identities refused once each, and one refused 30 times
      const ips = Array.from({ length: 300 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.1`);
      for (let i = 0; i < ips.length; i += 20) await Promise.all(ips.slice(i, i + 20).flatMap((ip) => [get(edge, ip), get(edge, ip)]));
      for (let i = 0; i < 31; i++) await get(edge, "203.0.113.99");
      const api = subject((await stats(edge)).json, "rule", "api");
      assert.equal(api.total.refused, 330);
      assert.ok(api.total.top_refused.length <= 16, `${api.total.top_refused.length} identities kept`);
      for (const m of api.minutes) assert.ok(m.top_refused.length <= 10);
      assert.equal(api.total.top_refused[0].identity, "203.0.113.99");
      assert.ok(api.total.top_refused[0].count >= 30);
    } finally {
      await edge.close();
    }
  });

  test("with analytics.dataset, each decision is one Analytics Engine data point: kind, name, outcome, colo, the wait, the identity's hash", async () => {
    const rules = JSON.stringify({ ...RULES, analytics: { dataset: "DECISIONS" } });
    const main = fileURLToPath(new URL("./fixtures/analytics-app.mjs", import.meta.url));
    const edge = await startEdge({ main, vars: { APP_RULES: rules }, analyticsDatasets: ["DECISIONS"] });
    try {
      for (let i = 0; i < 22; i++) {
        const res = await edge.fetch("/api/x", { headers: { "cf-connecting-ip": "192.0.2.44" }, cf: { colo: "AMS" } });
        await res.arrayBuffer();
      }
      const points = await (await edge.fetch("/points")).json();
      assert.equal(points.length, 22);
      assert.deepEqual(points[0].blobs, ["rule", "api", "admitted", "AMS"]);
      assert.deepEqual(points[0].doubles, [1, 0]);
      assert.deepEqual(points[20].blobs, ["rule", "api", "refused", "AMS"]);
      assert.deepEqual(points[20].doubles, [1, 10], "the refusal's wait, in seconds: the block");
      assert.equal(points[21].blobs[2], "refused");
      assert.ok(points[21].doubles[1] > 9 && points[21].doubles[1] <= 10, "what is left of the block");
      assert.match(points[0].indexes[0], /^#[0-9a-f]{32}$/, "the identity's keyed hash, never the address");
      assert.equal(new Set(points.map((p) => p.indexes[0])).size, 1, "one identity, one index");
    } finally {
      await edge.close();
    }
  });

  test("a dataset the rules name but env lacks refuses to start, saying what to add", async () => {
    let edge;
    try {
      edge = await startEdge({ build: "deploy", rules: { ...RULES, analytics: { dataset: "DECISIONS" } }, origin: backend.url, analyticsDatasets: false });
    } catch (err) {
      assert.match(err.message, /sluicegate: not starting: /);
      assert.match(err.message, /env has no Workers Analytics Engine binding "DECISIONS", which analytics.dataset names/);
      assert.match(err.message, /\[\[analytics_engine_datasets\]\] binding = "DECISIONS"/);
      return;
    }
    await edge.close();
    assert.fail("the edge started without its dataset");
  });
});
