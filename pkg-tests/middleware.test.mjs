// sluicegate/middleware: an Express app and a Hono app on Node, each behind a keyed limit,
// served on 127.0.0.1 and asked over HTTP as a client would.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { test } from "node:test";
import { serve } from "@hono/node-server";
import express from "express";
import { Hono } from "hono";
import { expressRateLimit, honoRateLimit } from "sluicegate/middleware";

async function listen(server) {
  if (!server.listening) await once(server.listen(0, "127.0.0.1"), "listening");
  return `http://127.0.0.1:${server.address().port}`;
}

/** The /api/ rule: 20 per 10 s per client, then blocked 10 s. */
const API = { algorithm: "sliding_log", limit: 20, windowMs: 10_000, blockMs: 10_000, name: "api" };

async function sequentialThenConcurrent(base, headers = {}) {
  const statuses = [];
  for (let i = 0; i < 25; i++) {
    const res = await fetch(`${base}/api/ping`, { headers });
    statuses.push(res.status);
    await res.arrayBuffer();
  }
  return statuses;
}

test("Express: 26 requests from one client → the first 20 admitted with RateLimit headers, then 429s with Retry-After and a problem body", async (t) => {
  const app = express();
  app.use(expressRateLimit(API));
  app.get("/api/ping", (_req, res) => res.json({ pong: true }));
  const server = createServer(app);
  t.after(() => server.close());
  const base = await listen(server);

  const first = await fetch(`${base}/api/ping`);
  assert.equal(first.status, 200);
  assert.deepEqual(await first.json(), { pong: true }, "the app's own answer comes through");
  assert.equal(first.headers.get("ratelimit-policy"), '"api";q=20;w=10');
  assert.equal(first.headers.get("ratelimit"), '"api";r=19;t=10');
  const rest = await sequentialThenConcurrent(base);
  assert.deepEqual(rest, [...Array(19).fill(200), ...Array(6).fill(429)]);

  const refused = await fetch(`${base}/api/ping`);
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get("content-type"), "application/problem+json");
  assert.equal(refused.headers.get("retry-after"), "10");
  assert.match(refused.headers.get("ratelimit"), /^"api";r=0;t=(9|10)$/);
  const body = await refused.json();
  assert.equal(body.status, 429);
  assert.match(body.detail, /Rate limit "api" exceeded \(20 requests per 10 s\)/);
});

test("Express: 100 concurrent requests from one client → exactly 20 admitted; another client has its own count", async (t) => {
  const app = express();
  app.set("trust proxy", "loopback"); // req.ip: X-Forwarded-For's client, as the proxy in front says
  app.use(expressRateLimit(API));
  app.get("/api/ping", (_req, res) => res.send("pong"));
  const server = createServer(app);
  t.after(() => server.close());
  const base = await listen(server);
  const ask = (ip) =>
    fetch(`${base}/api/ping`, { headers: { "x-forwarded-for": ip } }).then(async (r) => {
      await r.arrayBuffer();
      return r.status;
    });
  const statuses = await Promise.all(Array.from({ length: 100 }, () => ask("203.0.113.7")));
  assert.equal(statuses.filter((s) => s === 200).length, 20);
  assert.equal(statuses.filter((s) => s === 429).length, 80);
  assert.equal(await ask("198.51.100.1"), 200);
});

test("Hono on Node: the same rule, 25 → 20 + 5 × 429, and 100 concurrent → exactly 20", async (t) => {
  const app = new Hono();
  app.use("/api/*", honoRateLimit({ ...API, key: (c) => c.req.header("x-client") ?? "anonymous" }));
  app.get("/api/ping", (c) => c.text("pong"));
  app.get("/health", (c) => c.text("ok"));
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  t.after(() => server.close());
  const base = await listen(server);

  const statuses = await sequentialThenConcurrent(base, { "x-client": "a" });
  assert.deepEqual(statuses, [...Array(20).fill(200), ...Array(5).fill(429)]);
  const admitted = await fetch(`${base}/api/ping`, { headers: { "x-client": "b" } });
  assert.equal(await admitted.text(), "pong");
  assert.equal(admitted.headers.get("ratelimit"), '"api";r=19;t=10');
  const ask = () =>
    fetch(`${base}/api/ping`, { headers: { "x-client": "c" } }).then(async (r) => {
      await r.arrayBuffer();
      return r.status;
    });
  const burst = await Promise.all(Array.from({ length: 100 }, ask));
  assert.equal(burst.filter((s) => s === 200).length, 20);
  assert.equal((await fetch(`${base}/health`)).status, 200, "routes outside /api/ are not limited");
});

test("Hono on Node: the default key is the socket's address", async (t) => {
  const app = new Hono();
  app.use("*", honoRateLimit({ algorithm: "fixed_window", limit: 2, windowMs: 60_000 }));
  app.get("/", (c) => c.text("hi"));
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  t.after(() => server.close());
  const base = await listen(server);
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await fetch(base, { headers: { "x-forwarded-for": `10.0.0.${i}` } })).status);
  assert.deepEqual(statuses, [200, 200, 429], "X-Forwarded-For does not choose the key");
});

test("a request the key function cannot name is answered 400 with a problem body, never counted", async (t) => {
  const app = express();
  app.use(expressRateLimit({ ...API, key: (req) => req.headers["x-api-key"] }));
  app.get("/api/ping", (_req, res) => res.send("pong"));
  const server = createServer(app);
  t.after(() => server.close());
  const base = await listen(server);
  const res = await fetch(`${base}/api/ping`);
  assert.equal(res.status, 400);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  assert.deepEqual(await res.json(), { type: "about:blank", title: "Bad Request", status: 400, detail: "The client could not be identified." });
  assert.equal((await fetch(`${base}/api/ping`, { headers: { "x-api-key": "k1" } })).status, 200);
});

test("no spelling of a limited path reaches the handler uncounted (case, encoding, slashes, dot segments)", async (t) => {
  const variants = ["/API/ping", "/%61pi/ping", "//api/ping", "/api//ping", "/api/ping/", "/api/%2e/ping", "/Api/ping", "/api/ping?x=1"];
  const expressApp = express();
  let expressHandled = 0;
  expressApp.use("/api", expressRateLimit({ algorithm: "fixed_window", limit: 1, windowMs: 60_000 }));
  expressApp.get("/api/ping", (_req, res) => res.send(`pong ${++expressHandled}`));
  const honoApp = new Hono();
  let honoHandled = 0;
  honoApp.use("/api/*", honoRateLimit({ algorithm: "fixed_window", limit: 1, windowMs: 60_000 }));
  honoApp.get("/api/ping", (c) => c.text(`pong ${++honoHandled}`));
  const servers = [createServer(expressApp), serve({ fetch: honoApp.fetch, port: 0, hostname: "127.0.0.1" })];
  t.after(() => {
    for (const s of servers) s.close();
  });
  for (const server of servers) {
    const base = await listen(server);
    assert.equal((await fetch(`${base}/api/ping`)).status, 200, "the one request the limit allows");
    for (const p of variants) {
      const res = await fetch(`${base}${p}`, { redirect: "manual" });
      assert.ok([404, 429].includes(res.status), `${p}: ${res.status} (${await res.text()})`);
    }
  }
  assert.deepEqual([expressHandled, honoHandled], [1, 1]);
});

test("bad middleware options refuse to start, naming what is wrong", () => {
  assert.throws(() => expressRateLimit({ algorithm: "sliding_log", limit: 0, windowMs: 1_000 }), /limit must be a whole number from 1/);
  assert.throws(() => expressRateLimit({ ...API, key: "ip" }), /key must be a function/);
  assert.throws(() => honoRateLimit({ ...API, name: 'a"b' }), /limit name must be 1 to 64 of/);
  assert.throws(() => honoRateLimit(), /options must be an object/);
});
