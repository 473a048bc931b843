// The default ceiling of body bytes per source, in workerd: 100 MB/s per source unless the
// rules file says otherwise (`pre_read.source_bytes_per_second`; `null` turns it off), with
// or without a `pre_read` section, and the capabilities answer says which is in force.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { originServer as server } from "./support/origin.mjs";
import { raw } from "./support/raw.mjs";

const DEFAULT = 100_000_000;

/** An edge on `rules` in front of a recording origin, closed after `body(edge, origin)`. */
async function withEdge(rules, body) {
  const origin = await server();
  const edge = await startEdge({ build: "deploy", origin: origin.url, rules });
  try {
    await body(edge, origin);
  } finally {
    await edge.close();
    await origin.close();
  }
}

async function capabilities(edge) {
  const res = await fetch(`${edge.url}/api/capabilities`);
  assert.equal(res.status, 200);
  return (await res.json()).pre_read;
}

/**
 * A POST that declares `declared` bytes, sends a few and leaves after 300 ms: the declared
 * length is charged before the body is read, so this spends it without sending it. Its
 * status: 429 when it was refused before the body was read, else 0 (no answer: the body
 * never came).
 */
async function declareAndLeave(edge, declared) {
  const { host } = new URL(edge.url);
  const head = `POST /upload HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${declared}`;
  const res = await raw(edge.url, head, "x".repeat(16), { length: false, leaveAfter: 300 });
  return { status: res.status, scope: res.headers["sluicegate-scope"], retryAfter: res.headers["retry-after"] };
}

const post = (edge, bytes) => fetch(`${edge.url}/upload`, { method: "POST", body: "x".repeat(bytes) });

describe("the default source ceiling", () => {
  test("a file without pre_read has it: the capabilities answer shows it, and a body past it empties the source", async () => {
    await withEdge({ rules: [] }, async (edge, origin) => {
      assert.deepEqual(await capabilities(edge), { source_bytes_per_second: DEFAULT });
      // 150 MB declared: bigger than one second's worth, admitted only into a full bucket,
      // which it empties; 90 MB more within 900 ms are refused before they are read.
      assert.equal((await declareAndLeave(edge, 150_000_000)).status, 0);
      assert.deepEqual(await declareAndLeave(edge, 90_000_000), { status: 429, scope: "source", retryAfter: "1" });
      await edge.waitForLog(/"pre-read","scope":"source"/);
      // Within a second the source's bucket is full again.
      await new Promise((r) => setTimeout(r, 1_000));
      assert.equal((await post(edge, 1_000)).status, 200);
      assert.equal(origin.seen.length, 1, "only the last body reached the origin whole");
    });
  });

  test("a pre_read that leaves it out has it too", async () => {
    await withEdge({ rules: [], pre_read: { per_ip: { rate: 1_000, burst: 1_000 } } }, async (edge) => {
      assert.deepEqual(await capabilities(edge), { per_ip: { rate_per_s: 1000, burst: 1000 }, source_bytes_per_second: DEFAULT });
      await declareAndLeave(edge, 150_000_000);
      assert.equal((await declareAndLeave(edge, 90_000_000)).status, 429);
    });
  });

  test("null turns it off, and the capabilities answer says so", async () => {
    await withEdge({ rules: [], pre_read: { source_bytes_per_second: null } }, async (edge) => {
      assert.deepEqual(await capabilities(edge), { source_bytes_per_second: null });
      assert.equal((await declareAndLeave(edge, 150_000_000)).status, 0);
      assert.equal((await declareAndLeave(edge, 90_000_000)).status, 0, "forwarded, not refused");
      assert.equal((await post(edge, 1_000)).status, 200);
    });
  });

  test("a number replaces it", async () => {
    await withEdge({ rules: [], pre_read: { source_bytes_per_second: 5_000 } }, async (edge) => {
      assert.deepEqual(await capabilities(edge), { source_bytes_per_second: 5_000 });
      assert.equal((await post(edge, 4_000)).status, 200);
      assert.equal((await post(edge, 4_000)).status, 429);
    });
  });

  test("a bad value stops the Worker from starting, naming the field", async () => {
    await assert.rejects(
      startEdge({ build: "deploy", origin: "http://127.0.0.1:9", rules: { rules: [], pre_read: { source_bytes_per_second: 0 } } }),
      /field "pre_read.source_bytes_per_second": must be a whole number of bytes per second from 1 to 1099511627776, or null to count no body bytes, got 0/,
    );
  });
});
