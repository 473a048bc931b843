// The edge's added latency (`npm run bench`): p50/p99 of 2,000 sequential requests through
// the deploy build in workerd, against a plain pass-through Worker in front of the same
// origin, measured in the same run; then requests per second (16 at a time, 3 s) for the
// admission layer: a refusal before the body is read, a tenant request admitted in colo and
// in fleet scope, and a 4 KB body whose bytes its tenant and its source count, declared
// (Content-Length) and streamed (chunked, no declared length), each beside the same body
// under a plain rule (one route bucket) with the same source count: the difference is the
// tenant path (key hash, limit lookup, both buckets; a streamed body's bytes charged as it
// comes); and a plain rule with its decision lines on and off (the rules file's `log`);
// then each rule store (a Durable Object per key, the Workers Rate Limiting binding as
// Miniflare implements it, the isolate's own count), with a key that has quota left and with
// a blocked key, against the same pass-through Worker.
// Run with Node 22 after `npm run build`. (`scripts/bench-edge-ab.mjs` compares this
// checkout's edge with another's, request by request.)
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { Miniflare, Log, LogLevel } from "miniflare";
import { COMPATIBILITY_DATE, startEdge } from "../js/testing.js";

const N = Number(process.env.SLUICEGATE_BENCH_EDGE_N || 2_000);
const WARMUP = 200;

// Limits that admit every request of the run, so each one walks the admit path.
const TENANT_KEY = "bench-tenant-key";
const tenantRules = (scope) => ({
  rules: [],
  pre_read: { per_ip: { rate: 1_000_000, burst: 1_000_000 } },
  tenants: {
    match: { path: { starts_with: "/hooks/" } },
    key_header: "x-api-key",
    keys: { [createHash("sha256").update(TENANT_KEY).digest("hex")]: "bench" },
    limits: { bench: { rate: 1_000_000, burst: 1_000_000 } },
    scope,
  },
});
const REFUSING = { rules: [], pre_read: { per_ip: { rate: 0.01, burst: 1 } } };
/** A tenant whose limit counts body bytes, and a source byte cap. */
const bytesRules = () => {
  const rules = tenantRules("colo");
  rules.pre_read.source_bytes_per_second = 1e9;
  rules.tenants.limits.bench = { rate: 1_000_000, burst: 1_000_000, bytes_per_second: 1e9, max_body_bytes: 65_536 };
  return rules;
};
/** The same source byte count and a plain rule (one route bucket per address) in place of the tenant. */
const ruleRules = () => ({
  rules: [
    {
      id: "hooks",
      match: { path: { starts_with: "/hooks/" } },
      characteristics: ["ip.src"],
      algorithm: "token_bucket",
      rate: 1_000_000,
      burst: 1_000_000,
    },
  ],
  pre_read: { per_ip: { rate: 1_000_000, burst: 1_000_000 }, source_bytes_per_second: 1e9 },
});
const BODY = "x".repeat(4_096);
/** A 4 KB body of no declared length (sent chunked): a fresh stream per request. */
const STREAMED = () =>
  new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(BODY));
      controller.close();
    },
  });
/** The fetch options of a body: a function makes a fresh streamed body for each request. */
const withBody = (body) => (typeof body === "function" ? { body: body(), duplex: "half" } : { body });

const RULES = {
  rules: [
    {
      id: "analyze",
      match: { path: [{ equals: "/api/analyze" }, { equals: "/api/analyze/stream" }], methods: ["POST"] },
      characteristics: ["ip.src"],
      algorithm: "token_bucket",
      rate: 100_000,
      burst: 100_000,
    },
  ],
  upstreams: [{ id: "nominatim", match: { path: { equals: "/api/geocode" } }, max_in_flight: 4, max_wait: 30 }],
};

const PASS_THROUGH = `export default {
  fetch(request, env) {
    const url = new URL(request.url);
    return fetch(env.ORIGIN_URL + url.pathname + url.search, request);
  },
};`;

const origin = createServer((req, res) => {
  req.resume();
  req.on("end", () => res.end("ok"));
});
await new Promise((r) => origin.listen(0, "127.0.0.1", r));
const originUrl = `http://127.0.0.1:${origin.address().port}`;

const edge = await startEdge({ build: "deploy", rules: RULES, origin: originUrl });
const plain = new Miniflare({
  modules: true,
  script: PASS_THROUGH,
  compatibilityDate: COMPATIBILITY_DATE,
  bindings: { ORIGIN_URL: originUrl },
  cf: false,
  log: new Log(LogLevel.WARN),
});
const plainUrl = (await plain.ready).origin;

/** Milliseconds of each of `n` sequential requests (each answered `expect`). */
async function timings(base, method, path, n, { headers = {}, expect = 200, body } = {}) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const res = await fetch(`${base}${path}`, { method, ...withBody(body), headers: { "cf-connecting-ip": "198.51.100.200", ...headers } });
    await res.arrayBuffer();
    if (res.status !== expect) throw new Error(`${method} ${path}: ${res.status}`);
    out.push(performance.now() - started);
  }
  return out.sort((a, b) => a - b);
}

/** Requests per second with `concurrency` requests in flight for `seconds`. */
async function throughput(base, method, path, { headers = {}, concurrency = 16, seconds = 3, body } = {}) {
  const until = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const res = await fetch(`${base}${path}`, { method, ...withBody(body), headers: { "cf-connecting-ip": "198.51.100.201", ...headers } });
        await res.arrayBuffer();
        done++;
      }
    }),
  );
  return done / seconds;
}
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const ms = (x) => `${x.toFixed(2)} ms`;

console.log(`${N} sequential requests each (after ${WARMUP} to warm up); origin answers "ok" at once`);
console.log(`${"request".padEnd(46)} ${"sluicegate p50/p99".padEnd(22)} ${"pass-through p50/p99".padEnd(22)} added p50/p99`);
for (const [label, method, path] of [
  ["route bucket, admitted (POST /api/analyze)", "POST", "/api/analyze"],
  ["upstream budget, free slots (GET /api/geocode)", "GET", "/api/geocode"],
  ["capabilities (GET /api/capabilities)", "GET", "/api/capabilities"],
]) {
  await timings(edge.url, method, path, WARMUP);
  await timings(plainUrl, method, path, WARMUP);
  const ours = await timings(edge.url, method, path, N);
  const theirs = await timings(plainUrl, method, path, N);
  const [a50, a99, b50, b99] = [pct(ours, 50), pct(ours, 99), pct(theirs, 50), pct(theirs, 99)];
  console.log(`${label.padEnd(46)} ${`${ms(a50)} / ${ms(a99)}`.padEnd(22)} ${`${ms(b50)} / ${ms(b99)}`.padEnd(22)} ${ms(a50 - b50)} / ${ms(a99 - b99)}`);
}
console.log("(the capabilities answer comes from the edge itself; its pass-through row is the origin's answer)");

// The admission layer: each case in its own edge, against the same pass-through Worker.
console.log();
console.log(`${"admission".padEnd(46)} ${"p50/p99".padEnd(22)} ${"added p50/p99".padEnd(22)} requests/s (pass-through)`);
const plain4k = { latency: await timings(plainUrl, "POST", "/hooks/in", N, { body: BODY }) };
plain4k.rps = await throughput(plainUrl, "POST", "/hooks/in", { body: BODY });
const plainEmpty = { latency: await timings(plainUrl, "POST", "/hooks/in", N) };
plainEmpty.rps = await throughput(plainUrl, "POST", "/hooks/in");
const plainStreamed = { latency: await timings(plainUrl, "POST", "/hooks/in", N, { body: STREAMED }) };
plainStreamed.rps = await throughput(plainUrl, "POST", "/hooks/in", { body: STREAMED });
const tenant = { "x-api-key": TENANT_KEY };
const p50s = {};
for (const [label, rules, expect, headers, body] of [
  ["refused before the body is read (per_ip)", REFUSING, 429, {}],
  ["tenant admitted, colo scope", tenantRules("colo"), 200, tenant],
  ["tenant admitted, fleet scope", tenantRules("fleet"), 200, tenant],
  ["plain rule, 4 KB body", ruleRules(), 200, {}, BODY],
  ["tenant counting bytes, 4 KB body", bytesRules(), 200, tenant, BODY],
  ["plain rule, 4 KB streamed body", ruleRules(), 200, {}, STREAMED],
  ["tenant counting bytes, 4 KB streamed body", bytesRules(), 200, tenant, STREAMED],
  ["plain rule, every decision logged (default)", ruleRules(), 200, {}],
  ["plain rule, no decision lines (log none)", { ...ruleRules(), log: { decisions: "none" } }, 200, {}],
]) {
  const admission = await startEdge({ build: "deploy", rules, origin: originUrl });
  const plain = !body ? plainEmpty : body === STREAMED ? plainStreamed : plain4k;
  try {
    if (expect === 429) await fetch(`${admission.url}/hooks/in`, { method: "POST", headers: { "cf-connecting-ip": "198.51.100.200" } });
    await timings(admission.url, "POST", "/hooks/in", WARMUP, { headers, expect, body });
    const ours = await timings(admission.url, "POST", "/hooks/in", N, { headers, expect, body });
    const rps = await throughput(admission.url, "POST", "/hooks/in", { headers, body });
    const [plainLatency, plainRps] = [plain.latency, plain.rps];
    const [a50, a99, b50, b99] = [pct(ours, 50), pct(ours, 99), pct(plainLatency, 50), pct(plainLatency, 99)];
    p50s[label] = a50;
    console.log(`${label.padEnd(46)} ${`${ms(a50)} / ${ms(a99)}`.padEnd(22)} ${`${ms(a50 - b50)} / ${ms(a99 - b99)}`.padEnd(22)} ${Math.round(rps)} (${Math.round(plainRps)})`);
  } finally {
    await admission.close();
  }
}
console.log(
  `the tenant path over the plain rule, p50: declared 4 KB body ${ms(p50s["tenant counting bytes, 4 KB body"] - p50s["plain rule, 4 KB body"])}, ` +
    `streamed ${ms(p50s["tenant counting bytes, 4 KB streamed body"] - p50s["plain rule, 4 KB streamed body"])}`,
);
console.log(
  `a decision's log line, p50: ${ms(p50s["plain rule, every decision logged (default)"] - p50s["plain rule, no decision lines (log none)"])} ` +
    "(workerd's console under Miniflare, which hands each line to Node)",
);

// Each store: a key with quota left, and a key blocked by its mitigation_timeout.
console.log();
console.log(`${"store".padEnd(46)} ${"p50/p99".padEnd(22)} added p50/p99`);
const plainGet = await timings(plainUrl, "GET", "/s/x", N);
const storeRule = (id, store, fields) => ({
  id,
  match: { path: { starts_with: `/${id}/` } },
  characteristics: ["ip.src"],
  store,
  // one algorithm for every store: the binding's own (fixed windows of 10 or 60 s)
  algorithm: "fixed_window",
  period: 60,
  ...fields,
  ...(store === "cloudflare" ? { binding: `${id.toUpperCase()}_LIMITER` } : {}),
});
for (const store of ["durable_object", "cloudflare", "isolate"]) {
  const rules = {
    rules: [storeRule("free", store, { requests_per_period: 1_000_000 }), storeRule("blocked", store, { requests_per_period: 1, mitigation_timeout: 3600 })],
  };
  const stores = await startEdge({ build: "deploy", rules, origin: originUrl });
  try {
    for (const [key, path, expect] of [
      ...(store === "durable_object" ? [["no rule matches (the edge alone)", "/none/x", 200]] : []),
      ["a key with quota left", "/free/x", 200],
      ["a blocked key", "/blocked/x", 429],
    ]) {
      if (expect === 429) await fetch(`${stores.url}${path}`, { headers: { "cf-connecting-ip": "198.51.100.200" } });
      await timings(stores.url, "GET", path, WARMUP, { expect });
      const ours = await timings(stores.url, "GET", path, N, { expect });
      const [a50, a99, b50, b99] = [pct(ours, 50), pct(ours, 99), pct(plainGet, 50), pct(plainGet, 99)];
      const label = path === "/none/x" ? key : `${store}, ${key}`;
      console.log(`${label.padEnd(46)} ${`${ms(a50)} / ${ms(a99)}`.padEnd(22)} ${ms(a50 - b50)} / ${ms(a99 - b99)}`);
    }
  } finally {
    await stores.close();
  }
}
console.log("(a blocked key is answered from the isolate's block cache for the Durable Object and the binding, and by the isolate's own count for the isolate store)");

await edge.close();
await plain.dispose();
await new Promise((r) => origin.close(r));
