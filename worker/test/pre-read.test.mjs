// Admission before the body is read (`pre_read`): per address, per isolate, per source's
// body bytes, in that order, in workerd.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { originServer as server } from "./support/origin.mjs";

const send = async (edge, path, ip, init = {}) => {
  const res = await fetch(`${edge.url}${path}`, { ...init, headers: { "cf-connecting-ip": ip, ...init.headers } });
  return { status: res.status, headers: res.headers, body: await res.text() };
};

describe("the order: address, then isolate", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await server();
    const rules = {
      rules: [{ id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 60, requests_per_period: 100 }],
      pre_read: { per_ip: { rate: 0.01, burst: 3 }, node: { rate: 0.01, burst: 5 } },
    };
    edge = await startEdge({ build: "deploy", rules, origin: origin.url });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("an address refused per IP never reaches the isolate's bucket, a rule or the origin", async () => {
    const a = [];
    for (let i = 0; i < 10; i++) a.push(await send(edge, "/api/x", "203.0.113.1"));
    assert.deepEqual(
      a.map((r) => r.status),
      [200, 200, 200, ...Array(7).fill(429)],
    );
    for (const r of a.slice(3)) {
      assert.equal(r.headers.get("sluicegate-scope"), "ip");
      assert.ok(Number(r.headers.get("retry-after")) >= 1);
      assert.equal(r.headers.get("content-type"), "application/problem+json");
    }
    await edge.waitForLog(/"pre-read","scope":"ip","identity":"203\.0\.113\.1"/);
    const decisions = edge.logLines().filter((l) => l.includes('"decision"') && l.includes("203.0.113.1"));
    assert.equal(decisions.length, 3, "only the admitted requests were counted by the rule");
    assert.equal(origin.seen.length, 3);
    // The isolate's bucket (5) was charged 3 times: another address gets 2, then the node says no.
    const b = [];
    for (let i = 0; i < 3; i++) b.push(await send(edge, "/api/x", "203.0.113.2"));
    assert.deepEqual(
      b.map((r) => r.status),
      [200, 200, 429],
    );
    assert.equal(b[2].headers.get("sluicegate-scope"), "node");
    await edge.waitForLog(/"pre-read","scope":"node"/);
  });
});

describe("body bytes per source", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await server();
    const rules = {
      rules: [],
      pre_read: { source_bytes_per_second: 1_000, sources: [{ id: "hooks", match: { path: { starts_with: "/hooks/" } } }] },
    };
    edge = await startEdge({ build: "deploy", rules, origin: origin.url });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("a declared Content-Length is charged before the body is read", async () => {
    const body = "x".repeat(900);
    assert.equal((await send(edge, "/hooks/a", "198.51.100.1", { method: "POST", body })).status, 200);
    const refused = await send(edge, "/hooks/b", "198.51.100.2", { method: "POST", body });
    assert.equal(refused.status, 429, "the second 900 bytes within a second of the first: one source");
    assert.equal(refused.headers.get("sluicegate-scope"), "source");
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.equal(origin.seen.filter((b) => b.url.startsWith("/hooks/")).length, 1, "the refused body was never read");
    // Another source (here: requests outside every named source count by host) has its own bytes.
    assert.equal((await send(edge, "/elsewhere", "198.51.100.3", { method: "POST", body })).status, 200);
  });

  test("a body without a declared length is charged as it streams and cut with 429 when over", async () => {
    await new Promise((r) => setTimeout(r, 1_100)); // the hooks source is full again
    // 900 bytes every 100 ms against 1,000 per second: the second chunk is over.
    const chunks = [900, 900, 900, 900, 900].map((n) => new Uint8Array(n).fill(120));
    const body = new ReadableStream({
      async pull(controller) {
        const next = chunks.shift();
        if (!next) return controller.close();
        controller.enqueue(next);
        await new Promise((r) => setTimeout(r, 100));
      },
    });
    const res = await send(edge, "/hooks/stream", "198.51.100.4", { method: "POST", body, duplex: "half" });
    assert.equal(res.status, 429);
    assert.equal(res.headers.get("sluicegate-scope"), "source");
    await edge.waitForLog(/"pre-read","scope":"source"/);
  });
});

describe("a bounded flood", () => {
  test("50,000 requests from random addresses: no 500, and a client sending meanwhile gets exactly its limits", { timeout: 240_000 }, async () => {
    const origin = await server();
    const rules = { rules: [], pre_read: { per_ip: { rate: 10, burst: 3 }, node: { rate: 1_000_000, burst: 1_000_000 } } };
    const edge = await startEdge({ build: "deploy", rules, origin: origin.url });
    try {
      let seed = 0x2545f491;
      const random = () => (seed = (seed * 1103515245 + 12345) >>> 0);
      const address = (i) =>
        i % 2
          ? `${(random() % 223) + 1}.${random() % 256}.${random() % 256}.${random() % 256}`
          : `2001:db8:${(random() % 65536).toString(16)}:${(random() % 65536).toString(16)}::${(random() % 65536).toString(16)}`;
      const statuses = new Map();
      let next = 0;
      const TOTAL = 50_000;
      const flooder = async () => {
        while (next < TOTAL) {
          const i = next++;
          const res = await fetch(`${edge.url}/ingest`, { headers: { "cf-connecting-ip": address(i) } });
          await res.arrayBuffer();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        }
      };
      const flood = Promise.all(Array.from({ length: 48 }, flooder));
      // The client: 4 requests at once, every 600 ms (its bucket of 3 refills in 300 ms):
      // each time exactly 3 get through and 1 is refused by its address. Addresses share a
      // slot when their salted hashes do (by design); a flood address can only touch the
      // client's bucket if it lands in the same one of 2^20 slots within the 100 ms before
      // a burst, about 1 chance in 10,000 per burst at this flood's pace.
      const bursts = [];
      while (next < TOTAL * 0.9 && bursts.length < 5) {
        const burst = await Promise.all(Array.from({ length: 4 }, () => send(edge, "/ingest", "192.0.2.200")));
        bursts.push(burst.map((r) => r.status).sort());
        await new Promise((r) => setTimeout(r, 600));
      }
      await flood;
      assert.ok(bursts.length >= 3, `the client sent ${bursts.length} bursts during the flood`);
      for (const burst of bursts) assert.deepEqual(burst, [200, 200, 200, 429]);
      assert.equal([...statuses.keys()].filter((s) => s >= 500).length, 0, `statuses: ${JSON.stringify([...statuses])}`);
      assert.equal(
        [...statuses.values()].reduce((a, b) => a + b, 0),
        TOTAL,
      );
    } finally {
      await edge.close();
      await origin.close();
    }
  });
});
