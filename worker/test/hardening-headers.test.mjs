// What the origin and the logs get from the edge, tried over raw sockets against the deploy
// build in workerd with a recording origin: forwarding headers are the edge's own, a
// `Connection` list cannot strip what the edge relies on, and header values that count a
// client never appear in a log line.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";
import { raw } from "./support/raw.mjs";

const SET_BY_EDGE = ["x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "forwarded", "x-real-ip", "true-client-ip", "cf-connecting-ip"];
const DROPPED = [
  "X-Original-URL",
  "X-Rewrite-URL",
  "X-Original-Host",
  "X-Host",
  "X-HTTP-Method-Override",
  "X-HTTP-Method",
  "X-Method-Override",
  "X-Forwarded-Prefix",
  "X-Forwarded-Server",
  "X-Forwarded-Scheme",
  "X-Forwarded-Ssl",
  "X-Url-Scheme",
  "Front-End-Https",
  "X-Client-IP",
  "X-Cluster-Client-IP",
  "Client-IP",
  "X-Originating-IP",
  "X-Remote-IP",
  "X-Remote-Addr",
  "Forwarded-For",
  "X-Forwarded",
];
/** A hostile value for each header a client might send to steer the origin. */
const hostile = (name) =>
  /url|prefix|host|server/i.test(name) ? "/admin/delete-everything" : /method/i.test(name) ? "DELETE" : /scheme|proto|ssl|https/i.test(name) ? "on" : "6.6.6.6";

/** Whether the origin's `CF-Connecting-IP` is the edge's value for `client`. The edge sets
 * it, but Miniflare (like Cloudflare) strips it from every request a Worker sends out, so
 * all the origin can show here is that no client-chosen value got through. */
const CF_CONNECTING_IP = (headers, client) => [undefined, client].includes(headers["cf-connecting-ip"]);

const headerRule = (id, header, fields = {}) => ({
  id,
  match: { path: { starts_with: "/api/" } },
  characteristics: [`http.request.headers["${header}"]`],
  period: 60,
  requests_per_period: 1_000,
  ...fields,
});

describe("forwarding headers are the edge's, never the client's", () => {
  let edge;
  let origin;
  before(async () => {
    origin = await originServer();
    edge = await startEdge({ build: "deploy", origin: origin.url, rules: { rules: [headerRule("per-key", "x-api-key")] } });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });
  beforeEach(() => {
    origin.seen.length = 0;
  });

  test("every forwarding header in the table reaches the origin dropped or with the edge's value", async () => {
    const sent = [...SET_BY_EDGE.filter((h) => h !== "cf-connecting-ip"), ...DROPPED].map((h) => `${h}: ${hostile(h)}`);
    const res = await raw(edge.url, ["GET /api/where HTTP/1.1", "Host: edge.test", "CF-Connecting-IP: 198.51.100.50", "X-Api-Key: k1", ...sent].join("\r\n"));
    assert.equal(res.status, 200);
    const { headers } = origin.seen.at(-1);
    for (const name of DROPPED) assert.equal(headers[name.toLowerCase()], undefined, name);
    assert.equal(headers["x-forwarded-for"], "6.6.6.6, 198.51.100.50", "the counted client appended");
    assert.equal(headers["x-forwarded-proto"], "http");
    assert.equal(headers["x-forwarded-host"], "edge.test");
    assert.equal(headers["x-forwarded-port"], "80");
    assert.equal(headers.forwarded, "for=198.51.100.50;host=edge.test;proto=http");
    for (const name of ["x-real-ip", "true-client-ip"]) assert.equal(headers[name], "198.51.100.50", name);
    assert.ok(CF_CONNECTING_IP(headers, "198.51.100.50"));
  });

  test("an IPv6 client, a host with a port and a request without an identity", async () => {
    await raw(edge.url, "GET /api/v6 HTTP/1.1\r\nHost: edge.test:8443\r\nCF-Connecting-IP: 2001:db8::7\r\nX-Api-Key: k2\r\nForwarded: for=6.6.6.6");
    let { headers } = origin.seen.at(-1);
    assert.equal(headers.forwarded, 'for="[2001:db8::7]";host="edge.test:8443";proto=http');
    assert.equal(headers["x-forwarded-port"], "8443");
    assert.equal(headers["x-real-ip"], "2001:db8::7");
    // Neither source holds an address: the edge names no client, and passes on none of the client's.
    await raw(edge.url, "GET /api/nobody HTTP/1.1\r\nHost: edge.test\r\nCF-Connecting-IP: not-an-address\r\nX-Real-IP: 6.6.6.6\r\nTrue-Client-IP: 6.6.6.6\r\nX-Api-Key: k3");
    ({ headers } = origin.seen.at(-1));
    assert.equal(headers.forwarded, "for=unknown;host=edge.test;proto=http");
    for (const name of ["x-real-ip", "true-client-ip", "cf-connecting-ip", "x-forwarded-for"]) assert.equal(headers[name], undefined, name);
  });

  test("Connection naming CF-Connecting-IP, Authorization, X-Forwarded-For or a header the rules read strips none of them", async () => {
    const res = await raw(
      edge.url,
      [
        "GET /api/connection HTTP/1.1",
        "Host: edge.test",
        "CF-Connecting-IP: 198.51.100.51",
        "Authorization: Bearer the-callers-token",
        "Cookie: session=1",
        "X-Api-Key: k4",
        "X-Forwarded-For: 10.0.0.9",
        "X-Secret: named-by-connection",
        "Connection: CF-Connecting-IP, Authorization, X-Forwarded-For, Cookie, X-Api-Key, Host, X-Secret",
      ].join("\r\n"),
    );
    assert.equal(res.status, 200);
    const { headers } = origin.seen.at(-1);
    assert.ok(CF_CONNECTING_IP(headers, "198.51.100.51"));
    assert.equal(headers.authorization, "Bearer the-callers-token");
    assert.equal(headers["x-forwarded-for"], "10.0.0.9, 198.51.100.51");
    assert.equal(headers.cookie, "session=1");
    assert.equal(headers["x-api-key"], "k4");
    assert.equal(headers["x-secret"], undefined, "a header the edge does not rely on is still the client's to name");
  });

  test("an Expect: 100-continue is answered by the edge, and the origin's final answer reaches the client", async () => {
    const res = await raw(
      edge.url,
      "POST /api/upload HTTP/1.1\r\nHost: edge.test\r\nCF-Connecting-IP: 198.51.100.52\r\nX-Api-Key: k5\r\nContent-Type: text/plain\r\nExpect: 100-continue",
      "the body",
    );
    assert.equal(res.status, 200);
    assert.equal(res.body, "ok");
    const got = origin.seen.at(-1);
    assert.equal(got.headers.expect, undefined);
    assert.equal(got.body, "the body");
  });
});

describe("header values that count a client never reach a log line", () => {
  let origin;
  before(async () => {
    origin = await originServer();
  });
  after(async () => {
    await origin?.close();
  });
  const rules = { rules: [headerRule("per-token", "authorization", { requests_per_period: 1 })] };
  const TOKEN = "Bearer s3cret-token-0123456789";
  /** The `key` of every decision line, in order. */
  const decisionKeys = (edge) =>
    edge
      .logLines()
      .filter((l) => l.includes('"sluicegate":"decision"'))
      .map((l) => JSON.parse(l).key);

  test("a rule counted by authorization logs a keyed hash of the token, the same for the same token", async () => {
    const edge = await startEdge({ build: "deploy", origin: origin.url, rules });
    try {
      const send = (token) => raw(edge.url, `GET /api/x HTTP/1.1\r\nHost: edge.test\r\nCF-Connecting-IP: 198.51.100.60\r\nAuthorization: ${token}`);
      assert.equal((await send(TOKEN)).status, 200);
      assert.equal((await send(TOKEN)).status, 429, "counted by the token itself");
      assert.equal((await send(TOKEN)).status, 429);
      assert.equal((await send("Bearer another-token")).status, 200);
      await edge.waitForLog(() => decisionKeys(edge).length >= 4);
      assert.ok(!edge.logLines().some((l) => l.includes("s3cret") || l.includes("another-token")), edge.logLines().join("\n"));
      const keys = decisionKeys(edge);
      assert.equal(keys.length, 4, keys.join("\n"));
      for (const key of keys) assert.match(key, /^per-token\|http\.request\.headers\["authorization"\]=#[0-9a-f]{32}$/);
      assert.equal(keys[0], keys[1], "the same token: the same hash");
      assert.equal(keys[1], keys[2], "from the Durable Object and from the isolate's block cache alike");
      assert.notEqual(keys[0], keys[3], "another token: another hash");
    } finally {
      await edge.close();
    }
  });

  test("with SLUICEGATE_LOG_KEY, two edges log the same hash for the same token", async () => {
    const vars = { SLUICEGATE_LOG_KEY: "a log key of at least thirty-two random characters" };
    const hashes = [];
    for (const extra of [vars, vars, {}]) {
      const edge = await startEdge({ build: "deploy", origin: origin.url, rules, vars: extra });
      try {
        await raw(edge.url, `GET /api/x HTTP/1.1\r\nHost: edge.test\r\nAuthorization: ${TOKEN}`);
        await edge.waitForLog('"sluicegate":"decision"');
        hashes.push(decisionKeys(edge)[0]);
      } finally {
        await edge.close();
      }
    }
    assert.equal(hashes[0], hashes[1], "one key, one hash, whichever isolate logs it");
    assert.notEqual(hashes[0], hashes[2], "without the key, an isolate's own random key");
  });

  test("a logged URL keeps its query's parameter names, never their values", async () => {
    const edge = await startEdge({ build: "deploy", origin: origin.url, rules });
    try {
      const res = await raw(edge.url, "GET /api/%zz?apikey=s3cret-in-query&page=2 HTTP/1.1\r\nHost: edge.test");
      assert.equal(res.status, 400);
      const { message } = await edge.waitForLog("400 for");
      assert.match(message, /400 for http:\/\/edge\.test\/api\/%zz\?apikey&page: /);
      assert.ok(!edge.logLines().some((l) => l.includes("s3cret")));
    } finally {
      await edge.close();
    }
  });
});

describe("the block cache holds blocked clients whatever the size of their keys", () => {
  test("many blocked clients counted by ~100 KB header values get their 429s from the cache, and the edge keeps answering", async () => {
    // An origin that takes large headers (Node's default limit is 16 KB).
    const seen = [];
    const server = createServer({ maxHeaderSize: 1024 * 1024 }, (req, res) => {
      seen.push(req.url);
      res.end("ok");
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    const rules = { rules: [headerRule("per-client", "x-client", { requests_per_period: 1, mitigation_timeout: 60 })] };
    const edge = await startEdge({ build: "deploy", origin: `http://127.0.0.1:${server.address().port}`, rules });
    try {
      const CLIENTS = 40;
      const value = (i) => `client-${i}-`.padEnd(100 * 1024, "v");
      const send = async (i) => {
        const res = await edge.fetch(`/api/x?i=${i}`, { headers: { "x-client": value(i), "cf-connecting-ip": "198.51.100.70" } });
        await res.arrayBuffer();
        return res;
      };
      for (let i = 0; i < CLIENTS; i++) {
        assert.equal((await send(i)).status, 200, `client ${i}: admitted once`);
        const blocked = await send(i);
        assert.equal(blocked.status, 429, `client ${i}: refused by its counter`);
        assert.equal(blocked.headers.get("retry-after"), "60");
        assert.equal((await send(i)).status, 429, `client ${i}: refused again`);
      }
      const fromCache = () => edge.logLines().filter((l) => l.includes('"via":"isolate-cache"'));
      await edge.waitForLog(() => fromCache().length >= CLIENTS);
      assert.equal(fromCache().length, CLIENTS, "every third request was answered from the isolate's cache");
      assert.equal(seen.length, CLIENTS, "refused requests never reach the origin");
      assert.ok(!edge.logLines().some((l) => l.includes("v".repeat(64))), "no log line holds a header value");
      const res = await edge.fetch("/api/after", { headers: { "x-client": "small", "cf-connecting-ip": "198.51.100.71" } });
      assert.equal(await res.text(), "ok", "the edge keeps answering");
    } finally {
      await edge.close();
      await new Promise((r) => server.close(r));
    }
  });
});

describe("the admin API's paths in any spelling", () => {
  const TOKEN = "admin-token-0123456789";
  const RULES = { rules: [], tenants: { match: { path: { starts_with: "/hooks/" } }, tenant_header: "x-tenant", default: { rate: 1, burst: 5 } } };
  let origin;
  let edge;
  before(async () => {
    origin = await originServer();
    edge = await startEdge({ build: "deploy", rules: RULES, origin: origin.url, adminToken: TOKEN });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("/V1/tenants and every other spelling are answered by the admin API, never seen by the origin", async () => {
    const spellings = [
      "/V1/tenants",
      "/V1/Tenants",
      "/v1/TENANTS/",
      "/%561/tenants",
      "/x/../V1/tenants",
      "//v1//Tenants",
      "/v1/TENANTS/acme/rate-limit",
      "/V1/Tenants/acme/RATE-LIMIT",
    ];
    for (const path of spellings) {
      for (const auth of ["", "\r\nAuthorization: Bearer not-the-token"]) {
        const res = await raw(edge.url, `GET ${path} HTTP/1.1\r\nHost: edge.test${auth}`);
        assert.equal(res.status, 401, `${path}${auth ? " with a wrong token" : ""}`);
        assert.equal(res.headers["www-authenticate"], "Bearer", path);
      }
    }
    const list = await raw(edge.url, `GET /V1/Tenants HTTP/1.1\r\nHost: edge.test\r\nAuthorization: Bearer ${TOKEN}`);
    assert.equal(list.status, 200);
    assert.deepEqual(JSON.parse(list.body), { default: { rate: 1, burst: 5 }, tenants: [] });
    const limit = await raw(edge.url, `GET /v1/TENANTS/acme/Rate-Limit HTTP/1.1\r\nHost: edge.test\r\nAuthorization: Bearer ${TOKEN}`);
    assert.equal(JSON.parse(limit.body).source, "default");
    assert.equal(origin.seen.length, 0, origin.seen.map((s) => s.url).join("\n"));
  });
});
