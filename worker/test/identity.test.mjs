// Who a request is counted against, in workerd: `trusted_proxies` in the rules file makes the
// edge believe X-Forwarded-For past the proxies in front of it, for the rules, the checks
// made before the body is read and what the origin is told. Miniflare gives a request that
// has no CF-Connecting-IP one of 127.0.0.1, so here 127.0.0.1 is the trusted proxy in front
// of the edge; the fallbacks without CF-Connecting-IP (the peer, the header alone) are the
// core's unit and property tests (src/identity.rs).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { createServer } from "node:http";
import { raw } from "./support/raw.mjs";

const TRUSTED = ["127.0.0.1/32", "10.0.0.0/8", "fd00::/8"];
/** Counted per address and path, so that each request's decision line is its own. */
const PER_PATH = {
  id: "api",
  match: { path: { starts_with: "/api/" } },
  characteristics: ["ip.src", "http.request.uri.path"],
  period: 60,
  requests_per_period: 3,
};

/** An origin that records each request's headers and answers "ok"; it takes heads of up to
 * 256 KB (Node's own limit is 16 KB), so that a long X-Forwarded-For reaches it. */
async function server() {
  const seen = [];
  const origin = createServer({ maxHeaderSize: 256 * 1024 }, (req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push({ url: req.url, headers: req.headers });
      res.end("ok");
    });
  });
  await new Promise((r) => origin.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${origin.address().port}`,
    seen,
    close: () => new Promise((r) => origin.close(r)),
  };
}

/** A GET of `path` with `headers` (no CF-Connecting-IP unless given). */
async function get(edge, path, headers = {}) {
  const res = await fetch(`${edge.url}${path}`, { headers });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

/** The decision line of the (first) request for `path`, parsed. */
async function decisionFor(edge, path) {
  const { message } = await edge.waitForLog((l) => l.includes('"sluicegate":"decision"') && l.includes(`uri.path=${path}"`));
  return JSON.parse(message);
}

describe("behind trusted proxies: X-Forwarded-For decides past them", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await server();
    edge = await startEdge({ build: "deploy", origin: origin.url, rules: { trusted_proxies: TRUSTED, rules: [PER_PATH] } });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("the first untrusted hop from the right is the client, logged as read from x-forwarded-for", async () => {
    const res = await get(edge, "/api/walk", { "x-forwarded-for": "6.6.6.6, 198.51.100.7, 10.0.0.9, [fd00::1]:443" });
    assert.equal(res.status, 200);
    const line = await decisionFor(edge, "/api/walk");
    assert.equal(line.identity, "198.51.100.7");
    assert.equal(line.identity_source, "x-forwarded-for");
    assert.equal(line.key, "api|ip.src=198.51.100.7|http.request.uri.path=/api/walk");
    // The origin is told the client the edge counted.
    const seen = origin.seen.at(-1);
    assert.equal(seen.headers["x-real-ip"], "198.51.100.7");
    assert.match(seen.headers["x-forwarded-for"], /, 198\.51\.100\.7$/);
  });

  test("rotating the hops to the client's left mints no bucket", async () => {
    const statuses = [];
    for (const typed of ["1.1.1.1", "2.2.2.2, 3.3.3.3", "garbage", "4.4.4.4"]) {
      statuses.push((await get(edge, "/api/rotate", { "x-forwarded-for": `${typed}, 198.51.100.8, 10.0.0.9` })).status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429]);
  });

  test("a CF-Connecting-IP that is not a trusted proxy is the client, whatever the header says", async () => {
    await get(edge, "/api/direct", { "cf-connecting-ip": "203.0.113.9", "x-forwarded-for": "198.51.100.9" });
    const line = await decisionFor(edge, "/api/direct");
    assert.equal(line.identity, "203.0.113.9");
    assert.equal(line.identity_source, "cf-connecting-ip");
  });

  test("hostile headers: an answer below 500 and the identity the documentation names", async () => {
    const trustedHops = (n) => Array.from({ length: n }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.1`).join(", ");
    const cases = [
      // [X-Forwarded-For, identity, where it was read]
      ["x".repeat(60_000), "127.0.0.1", "cf-connecting-ip"],
      [`${"x".repeat(60_000)}, 198.51.100.9`, "198.51.100.9", "x-forwarded-for"],
      [`198.51.100.10, ${trustedHops(1_000)}`, "10.3.200.1", "x-forwarded-for"], // the 32nd hop from the right (the 968th)
      [`${"9.9.9.9,".repeat(3_000)} 198.51.100.11`, "198.51.100.11", "x-forwarded-for"],
      ["198.51.100.12, garbage", "127.0.0.1", "cf-connecting-ip"],
      ["198.51.100.12, garbage, 10.0.0.9", "10.0.0.9", "x-forwarded-for"],
      ["198.51.100.13, , 10.0.0.9", "10.0.0.9", "x-forwarded-for"],
      ["::ffff:198.51.100.14", "198.51.100.14", "x-forwarded-for"],
      ["198.51.100.15:80, ::ffff:10.0.0.9", "198.51.100.15", "x-forwarded-for"],
      ["[2001:db8:aa:bb::1]:443", "2001:db8:aa:bb::/64", "x-forwarded-for"],
      ["   198.51.100.16   ,10.0.0.9  ", "198.51.100.16", "x-forwarded-for"],
      [`${"1".repeat(65)}, 10.0.0.9`, "10.0.0.9", "x-forwarded-for"],
      ["198.51.100.17 198.51.100.18", "127.0.0.1", "cf-connecting-ip"],
    ];
    for (const [i, [xff, identity, source]] of cases.entries()) {
      const path = `/api/hostile-${i}`;
      const res = await raw(edge.url, `GET ${path} HTTP/1.1\r\nHost: edge.test\r\nX-Forwarded-For: ${xff}`);
      assert.equal(res.status, 200, `case ${i}`);
      const line = await decisionFor(edge, path);
      assert.deepEqual([line.identity, line.identity_source], [identity, source], `case ${i}: ${xff.slice(0, 60)}`);
    }
  });

  test("an obs-folded header is read as workerd unfolds it: spaces around a hop", async () => {
    const res = await raw(edge.url, "GET /api/folded HTTP/1.1\r\nHost: edge.test\r\nX-Forwarded-For: 198.51.100.19,\r\n 10.0.0.9");
    assert.equal(res.status, 200);
    const line = await decisionFor(edge, "/api/folded");
    assert.deepEqual([line.identity, line.identity_source], ["198.51.100.19", "x-forwarded-for"]);
  });

  test("garbage in place of the client's hop never mints a bucket: the proxy that passed it is counted", async () => {
    const statuses = [];
    for (let i = 0; i < 5; i++) {
      const res = await get(edge, "/api/garbage", { "x-forwarded-for": `198.51.100.${i}, not-an-address-${i}, 10.0.0.77` });
      statuses.push(res.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
    const line = await decisionFor(edge, "/api/garbage");
    assert.equal(line.identity, "10.0.0.77");
  });
});

describe("behind trusted proxies: the checks before the body is read count the same client", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await server();
    const rules = { trusted_proxies: TRUSTED, rules: [], pre_read: { per_ip: { rate: 0.01, burst: 2 } } };
    edge = await startEdge({ build: "deploy", origin: origin.url, rules });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("per_ip counts the walked address, and its refusal names where it came from", async () => {
    const a = [];
    for (const typed of ["1.1.1.1", "2.2.2.2", "3.3.3.3"]) {
      a.push((await get(edge, "/ingest", { "x-forwarded-for": `${typed}, 198.51.100.20, 10.0.0.9` })).status);
    }
    assert.deepEqual(a, [200, 200, 429]);
    const { message } = await edge.waitForLog(/"pre-read","scope":"ip"/);
    const line = JSON.parse(message);
    assert.equal(line.identity, "198.51.100.20");
    assert.equal(line.identity_source, "x-forwarded-for");
    // Another client behind the same proxies has its own bucket.
    assert.equal((await get(edge, "/ingest", { "x-forwarded-for": "198.51.100.21, 10.0.0.9" })).status, 200);
  });
});

describe("without trusted_proxies nothing changes", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await server();
    edge = await startEdge({ build: "deploy", origin: origin.url, rules: { rules: [PER_PATH] } });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("CF-Connecting-IP is the client and X-Forwarded-For is not read", async () => {
    await get(edge, "/api/plain", { "x-forwarded-for": "198.51.100.7" });
    const line = await decisionFor(edge, "/api/plain");
    assert.equal(line.identity, "127.0.0.1");
    assert.equal(line.identity_source, "cf-connecting-ip");
  });
});

describe("trusted_proxies is checked at start", () => {
  const refuses = async (trusted, ...patterns) => {
    let edge;
    try {
      edge = await startEdge({ build: "deploy", origin: "http://127.0.0.1:9", rules: { rules: [], trusted_proxies: trusted } });
    } catch (err) {
      assert.match(err.message, /sluicegate: not starting: /);
      for (const pattern of patterns) assert.match(err.message, pattern);
      return;
    }
    await edge.close();
    assert.fail("the edge started");
  };

  test("each bad range is named by its place in the list", async () => {
    await refuses(
      ["10.0.0.0/8", "192.168.1.1/16", "10.0.0.0/33", "::/0", "example.com", "[::1]:443", "::ffff:10.0.0.0/104"],
      /field "trusted_proxies\[1\]": "192\.168\.1\.1\/16" has bits set past its prefix length; write "192\.168\.0\.0\/16"/,
      /field "trusted_proxies\[2\]": "10\.0\.0\.0\/33" has a prefix length that is not a whole number from 1 to 32/,
      /field "trusted_proxies\[3\]": "::\/0" is a \/0 range/,
      /field "trusted_proxies\[4\]": "example\.com" is not an IP address or a CIDR range/,
      /field "trusted_proxies\[5\]": "\[::1\]:443" is not an IP address/,
      /field "trusted_proxies\[6\]": "::ffff:10\.0\.0\.0\/104" is an IPv4-mapped IPv6 range; write the IPv4 range "10\.0\.0\.0\/8"/,
    );
    await refuses("10.0.0.0/8", /field "trusted_proxies": must be an array of addresses or CIDR ranges/);
  });
});
