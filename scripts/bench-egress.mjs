// The egress routes' added latency (`npm run bench`): p50/p99 of sequential calls to a mock
// provider on 127.0.0.1, measured in the same run (a) directly, (b) through the edge's proxy
// with a free budget and no cache, (c) through the proxy answered from a warm cache, and
// (d) a permit's round trip (POST …/permit, then DELETE …/permit/<id>: what permit mode adds
// to the app's own direct call). The cases take turns in blocks, so that a slow patch of
// the machine falls on all of them alike. Run with Node 22 after `npm run build`.
import { createServer } from "node:http";
import { startEdge } from "../js/testing.js";

const N = Number(process.env.SLUICEGATE_BENCH_EGRESS_N || 500);
const BLOCK = 50;
const WARMUP = 100;
const TOKEN = "bench-egress-token";
const AUTH = { authorization: `Bearer ${TOKEN}` };

// The provider answers at once with a small JSON body (an Open-Meteo-sized answer for one point).
const BODY = JSON.stringify({ latitude: 52.52, longitude: 13.41, hourly: { temperature_2m: Array(48).fill(11.5) } });
const provider = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.setHeader("content-type", "application/json");
    res.end(BODY);
  });
});
await new Promise((r) => provider.listen(0, "127.0.0.1", r));
const providerUrl = `http://127.0.0.1:${provider.address().port}`;

// Budgets that never make a call wait: each call walks the gate, not its queue.
const open = { mirrors: `${providerUrl}/v1/`, max_in_flight: 1_000 };
const edge = await startEdge({
  build: "deploy",
  origin: providerUrl,
  egressToken: TOKEN,
  rules: {
    rules: [],
    egress: {
      providers: [
        { id: "free", ...open },
        { id: "cached", ...open, cache: { ttl_s: 3_600 } },
        { id: "permits", ...open },
      ],
    },
  },
});

const QUERY = "forecast?latitude=52.52&longitude=13.41&hourly=temperature_2m";

async function get(url, headers = {}) {
  const res = await fetch(url, { headers });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
  return res;
}

const cases = [
  ["(a) direct to the provider", () => get(`${providerUrl}/v1/${QUERY}`)],
  ["(b) proxy, free budget, no cache", () => get(`${edge.url}/egress/free/${QUERY}`, AUTH)],
  [
    "(c) proxy, warm cache (hit)",
    async () => {
      const res = await get(`${edge.url}/egress/cached/${QUERY}`, AUTH);
      if (res.headers.get("sluicegate-cache") !== "hit") throw new Error(`not a hit: ${res.headers.get("sluicegate-cache")}`);
    },
  ],
  [
    "(d) permit round trip (POST + DELETE)",
    async () => {
      const taken = await fetch(`${edge.url}/egress/permits/permit`, { method: "POST", headers: AUTH });
      if (taken.status !== 200) throw new Error(`POST permit: ${taken.status}`);
      const { id } = await taken.json();
      const given = await fetch(`${edge.url}/egress/permits/permit/${id}`, { method: "DELETE", headers: AUTH });
      await given.arrayBuffer();
      if (given.status !== 204) throw new Error(`DELETE permit: ${given.status}`);
    },
  ],
];

/** Milliseconds of each of `n` sequential runs of `run`. */
async function timings(run, n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await run();
    out.push(performance.now() - started);
  }
  return out;
}

await get(`${edge.url}/egress/cached/${QUERY}`, AUTH); // the miss that fills the cache
for (const [, run] of cases) await timings(run, WARMUP);
const samples = cases.map(() => []);
for (let done = 0; done < N; done += BLOCK) {
  for (const [i, [, run]] of cases.entries()) samples[i].push(...(await timings(run, Math.min(BLOCK, N - done))));
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const ms = (x) => `${x.toFixed(2)} ms`;
const [p50, p99] = [50, 99].map((p) =>
  samples.map((s) =>
    pct(
      [...s].sort((a, b) => a - b),
      p,
    ),
  ),
);

console.log(`${N} sequential calls each, in blocks of ${BLOCK} taking turns (after ${WARMUP} to warm up); the provider answers ${BODY.length} bytes at once`);
console.log(`(a p99 of ${N} is the ${Math.ceil(N / 100)}th slowest: a pause of the machine shows there first)`);
console.log(`${"call".padEnd(40)} ${"p50 / p99".padEnd(22)} added to a direct call, p50 / p99`);
cases.forEach(([label], i) => {
  // A permit's round trip comes on top of the app's own direct call: all of it is added.
  const added = i === 0 ? "" : i === 3 ? `${ms(p50[i])} / ${ms(p99[i])}` : `${ms(p50[i] - p50[0])} / ${ms(p99[i] - p99[0])}`;
  console.log(`${label.padEnd(40)} ${`${ms(p50[i])} / ${ms(p99[i])}`.padEnd(22)} ${added}`);
});

await edge.close();
await new Promise((r) => provider.close(r));
