// Rules rolled out with `"enforce"`, in workerd: a rule in shadow (`false`) refuses nothing,
// yet its `Sluicegate-Shadow` answers, its `"enforced":false` log lines and its stats'
// `would_refuse` are exactly the refusals an enforced twin makes of the same burst; a rule
// enforced for a share of its keys (`0.25`) refuses about that share of 400 clients, each
// client treated the same on every refusal.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";
import { raw } from "./support/raw.mjs";

const TOKEN = "shadow-token-0123456789";

/** A rule on `prefix`: 5 requests per 10 s per address, then blocked 10 s. */
const twin = (id, prefix, enforce) => ({
  id,
  match: { path: { starts_with: prefix } },
  characteristics: ["ip.src"],
  period: 10,
  requests_per_period: 5,
  mitigation_timeout: 10,
  ...(enforce === undefined ? {} : { enforce }),
});

/** GET `path` as `ip`: its status and `Sluicegate-Shadow` header. */
async function get(edge, path, ip) {
  const res = await fetch(`${edge.url}${path}`, { headers: { "cf-connecting-ip": ip } });
  await res.arrayBuffer();
  return { status: res.status, shadow: res.headers.get("sluicegate-shadow") };
}

/** Send a request whose "400 for" line is always logged, and wait for it: every line logged
 * before it has then arrived (lines arrive in order). */
async function settle(edge) {
  const marker = `settle-${Math.random().toString(36).slice(2)}`;
  const res = await raw(edge.url, `GET /api/%zz/${marker} HTTP/1.1\r\nHost: edge.test`);
  assert.equal(res.status, 400);
  await edge.waitForLog((l) => l.includes("400 for") && l.includes(marker), { timeout: 10_000 });
}

/** The decision lines of rule `id` so far, parsed. */
const decisions = (edge, id) =>
  edge
    .logLines()
    .filter((l) => l.includes('"sluicegate":"decision"'))
    .map((l) => JSON.parse(l))
    .filter((l) => l.rule === id);

/** The stats' total of rule `id`. */
async function total(edge, id) {
  const res = await fetch(`${edge.url}/__sluicegate/stats?rule=${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  const subject = (await res.json()).subjects.find((s) => s.kind === "rule" && s.name === id);
  assert.ok(subject, `${id} has stats`);
  return subject.total;
}

describe("rules rolled out with enforce", () => {
  let backend;
  before(async () => {
    backend = await originServer((req, res) => res.end(`origin ${req.url}`));
  });
  after(async () => {
    await backend?.close();
  });

  describe("a shadow rule and its enforced twin, under the same burst", () => {
    let edge;
    before(async () => {
      const rules = { rules: [twin("api", "/api/"), twin("preview", "/shadow/", false)] };
      edge = await startEdge({ build: "deploy", rules, origin: backend.url, adminToken: TOKEN });
    });
    after(async () => {
      await edge?.close();
    });

    test("the shadow rule refuses nothing; its shadow answers, log lines and would_refuse are the twin's refusals", async (t) => {
      // 20 requests from one client to each, interleaved so that each pair is counted at the
      // same moment of the window.
      const api = [];
      const shadow = [];
      for (let i = 0; i < 20; i++) {
        api.push(await get(edge, "/api/x", "203.0.113.7"));
        shadow.push(await get(edge, "/shadow/x", "203.0.113.7"));
      }
      const refused = api.map((r) => r.status === 429);
      // the twin refused the requests past its limit (and the block): 15 of 20
      assert.deepEqual(refused, [...Array(5).fill(false), ...Array(15).fill(true)]);
      for (const r of api) assert.equal(r.shadow, null, "an enforced rule names no shadow refusal");
      for (const [i, r] of shadow.entries()) assert.equal(r.status, 200, `shadow request ${i} went on`);
      assert.deepEqual(
        shadow.map((r) => r.shadow !== null),
        refused,
        "Sluicegate-Shadow on exactly the requests the twin refused",
      );
      for (const r of shadow.filter((r) => r.shadow)) assert.match(r.shadow, /^preview;retry-after=\d+$/);

      await settle(edge);
      const apiLines = decisions(edge, "api");
      const previewLines = decisions(edge, "preview");
      assert.equal(apiLines.length, 20);
      assert.equal(previewLines.length, 20);
      // each line in the order of its request: deny where the twin denied, marked not enforced
      assert.deepEqual(
        previewLines.map((l) => l.decision === "deny"),
        refused,
      );
      const shadowRefusals = previewLines.filter((l) => l.decision === "deny");
      t.diagnostic(`a shadow refusal's line: ${JSON.stringify(shadowRefusals[0])}`);
      assert.equal(shadowRefusals.length, 15);
      for (const l of previewLines) assert.equal(l.enforced, false, "every line of a shadow rule says so");
      for (const l of apiLines) assert.equal("enforced" in l, false, "an enforced line carries no enforced field");
      assert.ok(shadowRefusals.every((l) => l.retry_after_ms > 0 && l.identity === "203.0.113.7"));

      const [apiTotal, previewTotal] = [await total(edge, "api"), await total(edge, "preview")];
      t.diagnostic(`the shadow rule's total: ${JSON.stringify(previewTotal)}`);
      assert.deepEqual([apiTotal.admitted, apiTotal.refused, apiTotal.would_refuse], [5, 15, 0]);
      assert.deepEqual([previewTotal.refused, previewTotal.would_refuse], [0, apiTotal.refused]);
      // a shadow refusal went on: the stats count it apart from refusals, never twice
      assert.equal(previewTotal.admitted, 5);
      assert.deepEqual(previewTotal.top_refused, [], "nobody was refused");
    });
  });

  test("with analytics.dataset, a shadow refusal is a would_refuse data point with the wait it would have given", async () => {
    const rules = JSON.stringify({ rules: [twin("preview", "/api/", false)], analytics: { dataset: "DECISIONS" } });
    const main = fileURLToPath(new URL("./fixtures/analytics-app.mjs", import.meta.url));
    const edge = await startEdge({ main, vars: { APP_RULES: rules }, analyticsDatasets: ["DECISIONS"] });
    try {
      for (let i = 0; i < 7; i++) {
        const res = await edge.fetch("/api/x", { headers: { "cf-connecting-ip": "192.0.2.45" }, cf: { colo: "AMS" } });
        await res.arrayBuffer();
        assert.equal(res.status, 200, `request ${i} went on`);
      }
      const points = await (await edge.fetch("/points")).json();
      assert.deepEqual(
        points.map((p) => p.blobs[2]),
        [...Array(5).fill("admitted"), "would_refuse", "would_refuse"],
      );
      assert.deepEqual(points[5].blobs, ["rule", "preview", "would_refuse", "AMS"]);
      assert.deepEqual(points[5].doubles, [1, 10], "the wait it would have given: the block");
    } finally {
      await edge.close();
    }
  });

  test('"enforce": 0.25 refuses about a quarter of 400 clients, each the same on every refusal', async (t) => {
    const quarter = { id: "quarter", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 60, requests_per_period: 1, enforce: 0.25 };
    const edge = await startEdge({ build: "deploy", rules: { rules: [quarter] }, origin: backend.url, adminToken: TOKEN });
    try {
      const KEYS = 400;
      const ips = Array.from({ length: KEYS }, (_, i) => `10.25.${i >> 8}.${i & 255}`);
      /** Three requests from `ip`, one after another: the first admitted, the other two refused (enforced or not). */
      const client = async (ip) => {
        const answers = [];
        for (let i = 0; i < 3; i++) answers.push(await get(edge, "/api/x", ip));
        return answers;
      };
      const started = Date.now();
      const byKey = [];
      for (let i = 0; i < KEYS; i += 25) byKey.push(...(await Promise.all(ips.slice(i, i + 25).map(client))));
      assert.ok(Date.now() - started < 50_000, "1,200 requests within the rule's minute");
      let enforced = 0;
      for (const [k, [first, ...refusals]] of byKey.entries()) {
        assert.equal(first.status, 200, `${ips[k]}: the first request is within the limit`);
        assert.equal(first.shadow, null);
        const treatments = refusals.map((r) =>
          r.status === 429 ? "enforced" : r.status === 200 && r.shadow?.startsWith("quarter;") ? "shadow" : `status ${r.status}, shadow ${r.shadow}`,
        );
        assert.ok(treatments[0] === "enforced" || treatments[0] === "shadow", `${ips[k]}: ${treatments[0]}`);
        assert.equal(treatments[1], treatments[0], `${ips[k]} is treated the same on each refusal`);
        if (treatments[0] === "enforced") enforced++;
      }
      // Which keys are enforced is a fixed hash of the key: over 400 keys the share is a
      // binomial draw around 0.25 (sd 0.0217); ±0.1 is 4.6 sd.
      const share = enforced / KEYS;
      t.diagnostic(`${enforced} of ${KEYS} keys enforced (${share})`);
      assert.ok(Math.abs(share - 0.25) <= 0.1, `${enforced} of ${KEYS} keys enforced (${share})`);
      const counts = await total(edge, "quarter");
      assert.deepEqual([counts.admitted, counts.refused, counts.would_refuse], [KEYS, 2 * enforced, 2 * (KEYS - enforced)]);
    } finally {
      await edge.close();
    }
  });

  test("a tenant limit in shadow admits what it would refuse, naming the tenant; its twin refuses", async () => {
    // acme and beta each may send 2 back to back, then one a minute; acme's limit is in shadow.
    const tenants = {
      match: { path: { starts_with: "/hooks/" } },
      tenant_header: "x-tenant",
      limits: { acme: { rate: 1 / 60, burst: 2, enforce: false }, beta: { rate: 1 / 60, burst: 2 } },
      default: { rate: 1 / 60, burst: 1 },
    };
    const edge = await startEdge({ build: "deploy", rules: { rules: [], tenants }, origin: backend.url, adminToken: TOKEN });
    try {
      const post = async (tenant) => {
        const res = await fetch(`${edge.url}/hooks/in`, { method: "POST", headers: { "x-tenant": tenant }, body: "{}" });
        await res.arrayBuffer();
        return { status: res.status, shadow: res.headers.get("sluicegate-shadow") };
      };
      const acme = [];
      const beta = [];
      for (let i = 0; i < 4; i++) {
        acme.push(await post("acme"));
        beta.push(await post("beta"));
      }
      assert.deepEqual(
        beta.map((r) => r.status),
        [200, 200, 429, 429],
        "the enforced twin refuses past its burst",
      );
      assert.deepEqual(
        acme.map((r) => r.status),
        [200, 200, 200, 200],
        "the shadow limit refuses nothing",
      );
      assert.deepEqual(
        acme.map((r) => r.shadow !== null),
        [false, false, true, true],
      );
      for (const r of acme.filter((r) => r.shadow)) assert.match(r.shadow, /^tenant:acme;retry-after=\d+$/);
      const lines = await edge.waitForLog((l) => l.includes('"sluicegate":"tenant"') && l.includes('"enforced":false'));
      assert.match(lines.message, /"refusal":"tenant_rate_limited"/);
      const res = await fetch(`${edge.url}/__sluicegate/stats?rule=acme`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const subject = (await res.json()).subjects.find((s) => s.kind === "tenant" && s.name === "acme");
      assert.deepEqual([subject.total.admitted, subject.total.refused, subject.total.would_refuse], [2, 0, 2]);
    } finally {
      await edge.close();
    }
  });
});
