// The rules file's `log` section in workerd: which decisions get a
// `{"sluicegate":"decision",…}` line (all, refusals only, none) and the share of them written
// (`sample`). Other log lines are never affected. Log lines arrive asynchronously but in
// order, so each test ends with a request whose line is always written (a malformed path's
// "400 for" line): once it has arrived, every decision line before it has too.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { raw } from "./support/raw.mjs";

/** `limit` requests per minute per address on /api/. */
const rule = (limit) => ({
  id: "api",
  match: { path: { starts_with: "/api/" } },
  characteristics: ["ip.src"],
  period: 60,
  requests_per_period: limit,
});

/** GET /api/ping (the development origin answers it) as `ip`; its status. */
async function ping(edge, ip) {
  const res = await edge.fetch("/api/ping", { headers: { "cf-connecting-ip": ip } });
  await res.arrayBuffer();
  return res.status;
}

/** `n` pings as `ip`, `atOnce` at a time; their statuses in order. */
async function pings(edge, ip, n, atOnce = 1) {
  const statuses = [];
  for (let i = 0; i < n; i += atOnce) {
    const batch = Array.from({ length: Math.min(atOnce, n - i) }, () => ping(edge, ip));
    statuses.push(...(await Promise.all(batch)));
  }
  return statuses;
}

/** Send a request whose "400 for" line is always logged, and wait for that line: every
 * line logged before it has then arrived. */
async function settle(edge) {
  const marker = `settle-${Math.random().toString(36).slice(2)}`;
  const res = await raw(edge.url, `GET /api/%zz/${marker} HTTP/1.1\r\nHost: edge.test`);
  assert.equal(res.status, 400);
  await edge.waitForLog((l) => l.includes("400 for") && l.includes(marker), { timeout: 10_000 });
}

/** The decision lines so far, parsed. */
const decisions = (edge) =>
  edge
    .logLines()
    .filter((l) => l.includes('"sluicegate":"decision"'))
    .map((l) => JSON.parse(l));

/** An edge on `rules` for the enclosing describe: started before its tests, closed after; `edge()` reads it. */
function edgeOn(rules) {
  let edge;
  before(async () => {
    edge = await startEdge({ rules });
  });
  after(async () => {
    await edge?.close();
  });
  return () => edge;
}

describe("without a log section: a line for every decision, none of them sampled", () => {
  const current = edgeOn({ rules: [rule(3)] });

  test("5 requests over a limit of 3: 5 lines, 3 allow then 2 deny", async () => {
    const edge = current();
    assert.deepEqual(await pings(edge, "198.51.100.70", 5), [200, 200, 200, 429, 429]);
    await settle(edge);
    const lines = decisions(edge);
    assert.deepEqual(
      lines.map((l) => l.decision),
      ["allow", "allow", "allow", "deny", "deny"],
    );
    for (const line of lines) {
      assert.equal(line.identity, "198.51.100.70");
      assert.equal("sample" in line, false, "an unsampled line carries no sample field");
    }
  });
});

describe('"decisions": "refusals": a line for each refusal only', () => {
  const current = edgeOn({ rules: [rule(3)], log: { decisions: "refusals" } });

  test("5 requests over a limit of 3: 2 lines, both deny", async () => {
    const edge = current();
    assert.deepEqual(await pings(edge, "198.51.100.71", 5), [200, 200, 200, 429, 429]);
    await settle(edge);
    const lines = decisions(edge);
    assert.deepEqual(
      lines.map((l) => [l.decision, l.identity]),
      [
        ["deny", "198.51.100.71"],
        ["deny", "198.51.100.71"],
      ],
    );
    assert.ok(lines[0].retry_after_ms > 0, JSON.stringify(lines[0]));
    assert.equal("sample" in lines[0], false);
  });
});

describe('"decisions": "none": no decision lines, the same limits', () => {
  const current = edgeOn({ rules: [rule(3)], log: { decisions: "none" } });

  test("5 requests over a limit of 3 are limited as ever, and no decision is logged", async () => {
    const edge = current();
    const statuses = await pings(edge, "198.51.100.72", 5);
    assert.deepEqual(statuses, [200, 200, 200, 429, 429], "requests are still limited");
    await settle(edge);
    assert.deepEqual(decisions(edge), [], edge.logLines().join("\n"));
    // The other lines are still written: the "400 for" line settle() waited for is one.
    assert.ok(edge.logLines().some((l) => l.includes("400 for")));
  });

  test("a store failure is still logged", async () => {
    const failing = await startEdge({ rules: { rules: [rule(3)], log: { decisions: "none" } }, faults: { store: "unavailable" } });
    try {
      assert.equal(await ping(failing, "198.51.100.73"), 200, "an ip.src rule fails open");
      const { message } = await failing.waitForLog('"sluicegate":"store-failure"');
      assert.equal(JSON.parse(message).rule, "api");
    } finally {
      await failing.close();
    }
  });
});

describe('"sample": 0.5: about half of the decisions, each line saying it was sampled', () => {
  const current = edgeOn({ rules: [rule(10_000)], log: { sample: 0.5 } });

  test("400 admitted requests log between 140 and 260 lines (6 standard deviations from 200)", async () => {
    const edge = current();
    const statuses = await pings(edge, "198.51.100.74", 400, 20);
    assert.deepEqual(statuses, Array(400).fill(200));
    await settle(edge);
    const lines = decisions(edge);
    // Binomial(400, 0.5): mean 200, standard deviation 10; outside 140..260 about once in
    // 500 million runs.
    assert.ok(lines.length >= 140 && lines.length <= 260, `${lines.length} of 400 decisions logged`);
    for (const line of lines) {
      assert.equal(line.sample, 0.5);
      assert.equal(line.decision, "allow");
      assert.equal(line.identity, "198.51.100.74");
    }
  });
});
