// The edge tried as an attacker would: request-targets sent verbatim over a real socket to
// the deploy build in workerd, a real origin behind it (with a base path) and a second
// server that must never be reached.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, request } from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { raw } from "./support/raw.mjs";

/** A server on 127.0.0.1 recording what reaches it; `upgrade` handles WebSocket upgrades. */
async function recordingServer(answer = (req, res) => res.end(`saw ${req.method} ${req.url}`), upgrade) {
  const seen = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body });
      answer(req, res);
    });
  });
  if (upgrade) server.on("upgrade", (req, socket) => upgrade(req, socket, seen));
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const sockets = new Set();
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const close = () =>
    new Promise((r) => {
      server.close(r);
      // Upgraded sockets are no longer the server's to close.
      for (const socket of sockets) socket.destroy();
    });
  return { seen, port: server.address().port, close };
}

const get = (edge, target, ip, extra = "") => raw(edge.url, `GET ${target} HTTP/1.1\r\nHost: edge.test\r\nCF-Connecting-IP: ${ip}${extra}`);

describe("the deploy build in front of an origin with a base path", () => {
  let edge;
  let origin;
  let trap;
  before(async () => {
    origin = await recordingServer((req, res) => {
      if (req.url.endsWith("/redirect")) {
        res.writeHead(302, { location: `http://127.0.0.1:${trap.port}/followed` });
        return res.end();
      }
      res.end(`saw ${req.method} ${req.url}`);
    });
    trap = await recordingServer();
    edge = await startEdge({ build: "deploy", origin: `http://127.0.0.1:${origin.port}/base` });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
    await trap?.close();
  });
  beforeEach(() => {
    origin.seen.length = 0;
  });

  test("a request-target naming another host is a path on the origin, never a request to that host", async () => {
    const targets = [`//127.0.0.1:${trap.port}/secret`, `/\\127.0.0.1:${trap.port}/x`, `///127.0.0.1:${trap.port}/x`];
    for (const target of targets) {
      const res = await raw(edge.url, `POST ${target} HTTP/1.1\r\nHost: edge.test\r\nAuthorization: Bearer secret-token\r\nContent-Type: text/plain`, "the body");
      assert.equal(res.status, 200, target);
      const got = origin.seen.at(-1);
      assert.match(got.url, new RegExp(`^/base/+127\\.0\\.0\\.1:${trap.port}/`), target);
      assert.equal(got.body, "the body");
    }
    // The absolute form and a Host naming the other server do not move the request either.
    await raw(edge.url, `GET http://127.0.0.1:${trap.port}/abs HTTP/1.1\r\nHost: 127.0.0.1:${trap.port}`);
    const res = await raw(edge.url, `GET /api/via-host HTTP/1.1\r\nHost: 127.0.0.1:${trap.port}`);
    assert.equal(res.status, 200);
    assert.equal(origin.seen.at(-1).url, "/base/api/via-host");
    assert.equal(origin.seen.at(-1).headers.host, `127.0.0.1:${origin.port}`, "the origin's own Host");
    assert.equal(origin.seen.at(-1).headers["x-forwarded-host"], `127.0.0.1:${trap.port}`);
    assert.equal(trap.seen.length, 0, "the second server was never reached");
  });

  test("the origin's base path is kept and the query passes as sent", async () => {
    const res = await get(edge, "/api/x?q=1&r=%20", "192.0.2.1");
    assert.equal(res.body, "saw GET /base/api/x?q=1&r=%20");
  });

  test("a redirect from the origin is passed back, not followed", async () => {
    const res = await get(edge, "/static/redirect", "192.0.2.2");
    assert.equal(res.status, 302);
    assert.equal(res.headers.location, `http://127.0.0.1:${trap.port}/followed`);
    assert.equal(trap.seen.length, 0);
  });

  test("encoded and re-cased spellings of /api/ are counted by the rule; the origin gets each as sent", async () => {
    const spellings = ["/%61pi/ping", "/ap%69/ping", "/api%2Fping", "/%2Fapi/ping", "/x/..%2fapi/ping", "/API/ping", "/Api/ping"];
    const results = [];
    for (let i = 0; i < 25; i++) results.push(await get(edge, spellings[i % spellings.length], "198.51.100.30"));
    assert.deepEqual(
      results.map((r) => r.status),
      [...Array(20).fill(200), ...Array(5).fill(429)],
    );
    assert.equal(results[0].headers.ratelimit, '"api";r=19;t=10');
    assert.deepEqual(
      origin.seen.slice(0, spellings.length).map((s) => s.url),
      spellings.map((s) => `/base${s}`),
    );
    assert.equal(origin.seen.length, 20, "refused requests never reach the origin");
  });

  test("a path that cannot be normalised is refused with 400 and never forwarded", async () => {
    for (const target of ["/api/%zz", "/api/%4", "/api/x%00y", "/%"]) {
      const res = await get(edge, target, "192.0.2.3");
      assert.equal(res.status, 400, target);
      assert.equal(res.headers["content-type"], "application/problem+json");
      assert.match(JSON.parse(res.body).detail, /malformed/);
    }
    assert.equal(origin.seen.length, 0);
  });

  test("hop-by-hop headers stay behind; the origin sees who was counted", async () => {
    const res = await raw(
      edge.url,
      `${[
        "GET /api/headers HTTP/1.1",
        "Host: edge.test",
        "CF-Connecting-IP: 198.51.100.31",
        "X-Forwarded-For: 10.1.2.3",
        "X-Forwarded-Host: evil.example",
        "X-Forwarded-Proto: gopher",
        "Keep-Alive: timeout=5",
        "Proxy-Authorization: Basic c2VjcmV0",
        "Proxy-Connection: keep-alive",
        "TE: trailers",
        "Trailer: X-Checksum",
        "Upgrade: h2c",
        "X-Secret: named-by-connection",
        "X-Kept: end-to-end",
      ].join("\r\n")}\r\nConnection: X-Secret`,
    );
    assert.equal(res.status, 200);
    const { headers } = origin.seen.at(-1);
    for (const name of ["keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer", "upgrade", "x-secret"]) {
      assert.equal(headers[name], undefined, name);
    }
    assert.equal(headers["x-kept"], "end-to-end");
    assert.equal(headers["x-forwarded-for"], "10.1.2.3, 198.51.100.31");
    assert.equal(headers["x-forwarded-host"], "edge.test");
    assert.equal(headers["x-forwarded-proto"], "http");
  });

  test("hostile headers get an answer below 500", async () => {
    const big = await get(edge, "/api/big", "192.0.2.4", `\r\nX-Big: ${"a".repeat(64 * 1024)}`);
    assert.ok(big.status > 0 && big.status < 500, `64 KB header: ${big.status}`);
    const hops = (n) => Array.from({ length: n }, (_, i) => `10.${i >> 8}.${i & 255}.1`).join(", ");
    const many = await raw(edge.url, `GET /api/hops HTTP/1.1\r\nHost: edge.test\r\nX-Forwarded-For: ${hops(400)}, 198.51.100.32`);
    assert.equal(many.status, 200);
    assert.match(origin.seen.at(-1).headers["x-forwarded-for"], /, 198\.51\.100\.32, 127\.0\.0\.1$/, "Miniflare sent CF-Connecting-IP: 127.0.0.1");
    const huge = await raw(edge.url, `GET /api/hops HTTP/1.1\r\nHost: edge.test\r\nX-Forwarded-For: ${hops(5_000)}`);
    assert.ok(huge.status > 0 && huge.status < 500, `5,000 hops: ${huge.status}`);
    const dup = await raw(edge.url, "GET /api/dup HTTP/1.1\r\nHost: edge.test\r\nCF-Connecting-IP: 198.51.100.33\r\nCF-Connecting-IP: 6.6.6.6");
    assert.ok(dup.status < 500, `duplicate CF-Connecting-IP: ${dup.status}`);
  });

  test("the development origin is not in the deploy build: its mock paths go to the origin", async () => {
    const res = await raw(edge.url, "POST /mock/open-meteo/config HTTP/1.1\r\nHost: edge.test\r\nContent-Type: application/json", '{"delay_ms":5000}');
    assert.equal(res.body, "saw POST /base/mock/open-meteo/config");
  });
});

describe("WebSocket upgrades", () => {
  test("an upgrade under /api/ is counted once and its 101 passes through with the socket", async () => {
    const origin = await recordingServer(undefined, (req, socket, seen) => {
      seen.push({ url: req.url, headers: req.headers });
      const accept = createHash("sha1").update(`${req.headers["sec-websocket-key"]}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
      const text = Buffer.from("hello from the origin");
      socket.write(Buffer.concat([Buffer.from([0x81, text.length]), text]));
    });
    const edge = await startEdge({ build: "deploy", origin: `http://127.0.0.1:${origin.port}` });
    try {
      const { hostname, port } = new URL(edge.url);
      const answer = await new Promise((resolve, reject) => {
        const req = request({
          host: hostname,
          port,
          path: "/api/socket",
          headers: {
            connection: "Upgrade",
            upgrade: "websocket",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
            "sec-websocket-version": "13",
            "cf-connecting-ip": "198.51.100.40",
          },
        });
        req.on("upgrade", (res, socket, head) => {
          const chunks = [head];
          const done = () => {
            socket.destroy();
            resolve({ status: res.statusCode, headers: res.headers, frame: Buffer.concat(chunks) });
          };
          if (head.length > 2) return done();
          socket.once("data", (d) => {
            chunks.push(d);
            done();
          });
        });
        req.on("response", (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
        req.on("error", reject);
        req.end();
      });
      assert.equal(answer.status, 101);
      assert.equal(answer.headers.ratelimit, '"api";r=19;t=10');
      assert.equal(answer.frame.subarray(2).toString(), "hello from the origin");
      assert.equal(origin.seen[0].headers.upgrade, "websocket");
      assert.equal(origin.seen[0].headers["x-forwarded-for"], "198.51.100.40");
      // Counted once: the next request of the key sees 18 left.
      const next = await get(edge, "/api/after", "198.51.100.40");
      assert.equal(next.headers.ratelimit, '"api";r=18;t=10');
    } finally {
      await edge.close();
      await origin.close();
    }
  });
});

describe("rules that misbehave are refused at start, naming the rule and the field", () => {
  let origin;
  before(async () => {
    origin = await recordingServer();
  });
  after(async () => {
    await origin?.close();
  });
  const rule = (fields = {}) => ({ id: "api", match: {}, characteristics: ["ip.src"], period: 10, requests_per_period: 20, ...fields });
  const cases = [
    ["a repeated key", JSON.stringify({ rules: [rule()] }).replace(/}$/, ',"rules":[]}'), /field "rules": is given twice/],
    [
      "a content_type with a control character",
      { rules: [rule({ response: { content_type: "text/plain\u0001", content: "x" } })] },
      /rule rules\[0\] \("api"\): field "response.content_type": must be a media type/,
    ],
    [
      "a token bucket too slow to count",
      { rules: [{ id: "api", match: {}, characteristics: ["ip.src"], algorithm: "token_bucket", rate: 1e-10, burst: 5 }] },
      /rule rules\[0\] \("api"\): field "rate"/,
    ],
    ["1,000 rules", { rules: Array.from({ length: 1_000 }, (_, i) => rule({ id: `r${i}` })) }, /field "rules": 1000 rules; at most 64 are allowed/],
  ];
  for (const [name, rules, message] of cases) {
    test(name, async () => {
      await assert.rejects(startEdge({ build: "deploy", rules, origin: `http://127.0.0.1:${origin.port}` }), (err) => message.test(err.message));
      assert.equal(origin.seen.length, 0);
    });
  }

  test("the deploy build without ORIGIN_URL refuses to start and says why", async () => {
    await assert.rejects(startEdge({ build: "deploy" }), /sluicegate: not starting: ORIGIN_URL is not set/);
  });

  test("an ORIGIN_URL with credentials or a query refuses to start", async () => {
    for (const url of ["http://user:pw@127.0.0.1:1/", "http://127.0.0.1:1/?x=1", "ftp://127.0.0.1/", "not a url"]) {
      await assert.rejects(startEdge({ build: "deploy", origin: url }), /sluicegate: not starting: ORIGIN_URL/, url);
    }
  });
});

describe("rules at their limits", () => {
  let origin;
  before(async () => {
    origin = await recordingServer();
  });
  after(async () => {
    await origin?.close();
  });

  test("64 matching rules with the longest ids keep every header within what clients accept", async () => {
    const rules = Array.from({ length: 64 }, (_, i) => ({
      id: `${i}`.padStart(64, "r"),
      match: { path: { starts_with: "/api/" } },
      characteristics: ["ip.src"],
      period: 31_622_400,
      requests_per_period: 10_000,
    }));
    const edge = await startEdge({ build: "deploy", rules: { rules }, origin: `http://127.0.0.1:${origin.port}` });
    try {
      const res = await fetch(`${edge.url}/api/many`, { headers: { "cf-connecting-ip": "192.0.2.60" } });
      assert.equal(res.status, 200);
      assert.ok(res.headers.get("ratelimit-policy").length <= 2048);
      assert.ok(res.headers.get("ratelimit").length <= 2048);
      assert.match(res.headers.get("ratelimit"), /^"r{63}0";r=9999;t=31622400/);
      await edge.waitForLog(/RateLimit entries left out/);
    } finally {
      await edge.close();
    }
  });

  test("a host with a trailing dot matches the host without it", async () => {
    const rules = [{ id: "host", match: { hosts: ["api.example.test"] }, characteristics: ["http.host"], period: 10, requests_per_period: 1 }];
    const edge = await startEdge({ build: "deploy", rules: { rules }, origin: `http://127.0.0.1:${origin.port}` });
    try {
      const first = await raw(edge.url, "GET /x HTTP/1.1\r\nHost: api.example.test");
      assert.equal(first.headers.ratelimit, '"host";r=0;t=10');
      const dotted = await raw(edge.url, "GET /x HTTP/1.1\r\nHost: API.example.test.");
      assert.equal(dotted.status, 429, "the same host, the same counter");
    } finally {
      await edge.close();
    }
  });

  test("the path characteristic counts 16 spellings of one path on one counter", async () => {
    const rules = [{ id: "per-path", match: { path: { starts_with: "/api/" } }, characteristics: ["http.request.uri.path"], period: 60, requests_per_period: 16 }];
    const edge = await startEdge({ build: "deploy", rules: { rules }, origin: `http://127.0.0.1:${origin.port}` });
    try {
      const spellings = [
        "/api/ping",
        "/%61pi/ping",
        "/ap%69/ping",
        "/api%2Fping",
        "/%2Fapi/ping",
        "/x/..%2fapi/ping",
        "/API/ping",
        "/Api/PING",
        "//api//ping",
        "/api/./ping",
        "/api/x/../ping",
        "/api/ping/",
        "/%41%50%49/ping",
        "/api/%70ing",
        "/./api/ping//",
        "/api\\ping",
      ];
      const left = [];
      for (const s of spellings) left.push((await get(edge, s, "192.0.2.61")).headers.ratelimit);
      assert.deepEqual(
        left,
        spellings.map((_, i) => `"per-path";r=${15 - i};t=60`),
      );
      assert.equal((await get(edge, "/API/Ping", "192.0.2.62")).status, 429);
      assert.equal((await get(edge, "/api/pong", "192.0.2.62")).status, 200, "another path, another counter");
    } finally {
      await edge.close();
    }
  });

  test("case_sensitive rules and non-ASCII paths", async () => {
    const rules = [
      { id: "exact-case", match: { path: { starts_with: "/api/" }, case_sensitive: true }, characteristics: ["ip.src"], period: 60, requests_per_period: 100 },
      { id: "cafe", match: { path: { equals: "/café" } }, characteristics: ["ip.src"], period: 60, requests_per_period: 1 },
    ];
    const edge = await startEdge({ build: "deploy", rules: { rules }, origin: `http://127.0.0.1:${origin.port}` });
    try {
      assert.equal((await get(edge, "/api/x", "192.0.2.63")).headers.ratelimit, '"exact-case";r=99;t=60');
      assert.equal((await get(edge, "/API/x", "192.0.2.63")).headers.ratelimit, undefined);
      assert.equal((await get(edge, "/caf%C3%A9", "192.0.2.63")).status, 200);
      assert.equal((await get(edge, "/CAF%c3%a9/", "192.0.2.63")).status, 429);
    } finally {
      await edge.close();
    }
  });

  test("the rules are parsed once per isolate, not once per Durable Object", async () => {
    const rules = Array.from({ length: 64 }, (_, i) => ({
      id: `rule-${i}`,
      match: { path: { equals: `/api/r${i}` } },
      characteristics: ["ip.src"],
      period: 10,
      requests_per_period: 5,
    }));
    const edge = await startEdge({ build: "deploy", rules: { rules }, origin: `http://127.0.0.1:${origin.port}` });
    try {
      for (let i = 0; i < 30; i++) {
        const res = await get(edge, `/api/r${i}`, `192.0.2.${100 + i}`);
        assert.equal(res.headers.ratelimit, `"rule-${i}";r=4;t=10`);
      }
      const checks = edge.logLines().filter((l) => l.startsWith("sluicegate: configuration checked"));
      assert.equal(checks.length, 1, checks.join("\n"));
      assert.match(checks[0], /64 rules, origin http:\/\/127\.0\.0\.1:\d+$/);
    } finally {
      await edge.close();
    }
  });
});
