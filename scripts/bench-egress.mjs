// The egress routes' added latency (`npm run bench`): p50/p99 of sequential calls to a mock
// provider on 127.0.0.1, measured in the same run (a) directly, (b) through the edge's proxy
// with a free budget and no cache, (c) through the proxy answered from a warm cache, and
// (d) a permit's round trip (POST …/permit, then DELETE …/permit/<id>: what permit mode adds
// to the app's own direct call). The cases take turns in blocks, so that a slow patch of
// the machine falls on all of them alike. Then (e) what large answers cost the isolate:
// workerd's resident memory while four 64 MiB answers (plain, then gzip that inflates to
// 64 MiB) stream at once through a cached provider whose entries are at most 1 MiB, and the
// time to their first byte. Run with Node 22 after `npm run build`.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { gzipSync } from "node:zlib";
import { startEdge } from "../js/testing.js";

const N = Number(process.env.SLUICEGATE_BENCH_EGRESS_N || 500);
const BLOCK = 50;
const WARMUP = 100;
const TOKEN = "bench-egress-token";
const AUTH = { authorization: `Bearer ${TOKEN}` };

// The provider answers at once with a small JSON body (an Open-Meteo-sized answer for one
// point), or under /large/ with 64 MiB (/large/gzip: 64 MiB of gzip-compressed zeros).
const BODY = JSON.stringify({ latitude: 52.52, longitude: 13.41, hourly: { temperature_2m: Array(48).fill(11.5) } });
const LARGE = 64 * 1024 * 1024;
const CHUNK = Buffer.alloc(1024 * 1024, 48);
const GZIPPED = gzipSync(Buffer.alloc(LARGE));
const provider = createServer((req, res) => {
  req.resume();
  req.on("end", async () => {
    if (!req.url.includes("/large/")) {
      res.setHeader("content-type", "application/json");
      res.end(BODY);
    } else if (req.url.includes("gzip")) {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-encoding": "gzip" });
      res.end(GZIPPED);
    } else {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      for (let sent = 0; sent < LARGE; sent += CHUNK.length) {
        if (!res.write(CHUNK)) await new Promise((r) => res.once("drain", r));
      }
      res.end();
    }
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
        { id: "large", ...open, cache: { ttl_s: 3_600, max_entry_bytes: 1024 * 1024 } },
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

/** The resident memory of workerd processes started by this one, in MiB. */
function workerdRss() {
  const ps = execFileSync("ps", ["-eo", "pid=,ppid=,comm="], { encoding: "utf8" });
  const rows = ps
    .trim()
    .split("\n")
    .map((l) => l.trim().split(/\s+/));
  const mine = new Set([String(process.pid)]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, ppid] of rows) {
      if (mine.has(ppid) && !mine.has(pid)) {
        mine.add(pid);
        grew = true;
      }
    }
  }
  let kib = 0;
  for (const [pid, , comm] of rows) {
    if (!mine.has(pid) || !comm.includes("workerd")) continue;
    try {
      kib += Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]);
    } catch {}
  }
  return kib / 1024;
}

/** Four concurrent calls of `path`: workerd's peak RSS over its RSS before, and each call's time to its first byte. */
async function large(path) {
  const before = workerdRss();
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, workerdRss());
  }, 20);
  const firsts = await Promise.all(
    Array.from({ length: 4 }, async (_, i) => {
      const started = performance.now();
      const res = await fetch(`${edge.url}/egress/large/${path}?n=${i}`, { headers: AUTH });
      const reader = res.body.getReader();
      let first;
      let bytes = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        first ??= performance.now() - started;
        bytes += value.byteLength;
      }
      if (bytes !== LARGE) throw new Error(`${path}: ${bytes} bytes`);
      return first;
    }),
  );
  clearInterval(sampler);
  peak = Math.max(peak, workerdRss());
  return { grew: peak - before, first: Math.max(...firsts) };
}

console.log();
console.log("(e) four 64 MiB answers at once through a cached provider (max_entry_bytes 1 MiB):");
for (const path of ["large/plain", "large/gzip"]) {
  const { grew, first } = await large(path);
  const what = path.endsWith("gzip") ? `gzip (${(GZIPPED.length / 1024).toFixed(0)} KiB that inflate to 64 MiB)` : "plain";
  console.log(`  ${what.padEnd(42)} workerd RSS +${grew.toFixed(0)} MiB at its peak; first byte after at most ${ms(first)}`);
}

await edge.close();
await new Promise((r) => provider.close(r));
