// The browser client's figures (`npm run bench`): pacer utilisation, the 1,500 × 16-day
// analysis against the mock compared with its theoretical minimum, the cost of acquire
// from JS, and the packages' wasm sizes. Run with Node 22 after `npm run build`.
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { LocationCache, Pacer, PacerCore, fetchForecasts } from "../js/node.js";
import { startEdge } from "../js/testing.js";

const line = (label, value) => console.log(`${label.padEnd(58)} ${value}`);

// 1. Utilisation: a saturating queue of calls weighing 1–114 against 550 per minute.
{
  let seed = 0x9e3779b9;
  const random = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  const minute = 60_000;
  let worst = 1;
  let sum = 0;
  let windows = 0;
  let fifoWorst = 1;
  for (let run = 0; run < 40; run++) {
    const core = new PacerCore({ windows: [{ lengthMs: minute, budget: 550 }], maxWeight: null });
    const weights = Array.from({ length: 300 }, () => 1 + Math.floor(random() * 114));
    const at = weights.map((w) => [core.reserve(0, w).atMs, w]).sort((a, b) => a[0] - b[0]);
    core.free();
    const end = at.at(-1)[0] / 3; // the saturated part: calls of every weight still waiting
    for (const [t] of at) {
      const start = t + 1e-6;
      if (start + minute > end) break;
      const load = at.filter(([a]) => a >= start && a < start + minute).reduce((s, [, w]) => s + w, 0);
      worst = Math.min(worst, load / 550);
      sum += load / 550;
      windows++;
    }
    // Strict FIFO for comparison: each call waits for every earlier one.
    let clock = 0;
    const fifo = [];
    for (const w of weights) {
      for (;;) {
        const load = fifo.filter(([a]) => a > clock - minute).reduce((s, [, x]) => s + x, 0);
        if (load + w <= 550) break;
        clock = fifo.find(([a]) => a > clock - minute)[0] + minute;
      }
      fifo.push([clock, w]);
    }
    const fifoEnd = fifo.at(-1)[0] / 3;
    for (const [t] of fifo) {
      if (t + 1e-6 + minute > fifoEnd) break;
      const load = fifo.filter(([a]) => a > t && a <= t + minute).reduce((s, [, w]) => s + w, 0);
      fifoWorst = Math.min(fifoWorst, load / 550);
    }
  }
  line("pacer utilisation, weights 1–114 vs 550/min (mean, worst)", `${((100 * sum) / windows).toFixed(2)} %, ${(100 * worst).toFixed(2)} %`);
  line("strict FIFO on the same queues (worst window)", `${(100 * fifoWorst).toFixed(2)} %`);
}

// 2. The cost of one acquire + release from JS, and of one PacerCore.reserve.
{
  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 1e9 }], maxWeight: null, maxInFlight: 1e6 });
  const n = 5_000;
  for (let i = 0; i < 2_000; i++) (await pacer.acquire(1)).release(); // warm the JIT up
  let perAcquire = Infinity; // the best of three rounds
  for (let round = 0; round < 3; round++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) (await pacer.acquire(1)).release();
    perAcquire = Math.min(perAcquire, ((performance.now() - t0) * 1000) / n);
  }
  const core = new PacerCore({ windows: [{ lengthMs: 60_000, budget: 1e9 }], maxWeight: null });
  const t1 = performance.now();
  for (let i = 0; i < n; i++) core.dispatch(core.reserve(i, 1).id);
  const perReserve = ((performance.now() - t1) * 1000) / n;
  line("Pacer.acquire + release from JS (in-memory ledger)", `${perAcquire.toFixed(1)} µs per call (best of 3 × ${n} calls, ledger up to ${5 * n})`);
  line("PacerCore.reserve + dispatch from JS", `${perReserve.toFixed(1)} µs per call`);
  // Placement behind a deep queue: a page fanning out N calls at once against the Open-Meteo
  // windows (550/min, 4,800/h, 9,500/day), then the mean cost of the next 1,000 reservations:
  // `place` (what Pacer calls: a number back) and `reserve` (a { id, atMs, delayMs } object).
  const weights = [1, 1.5, 1, 2, 1];
  for (const depth of [1_000, 4_000, 10_000]) {
    const costs = ["place", "reserve"].map((how) => {
      const deep = new PacerCore();
      for (let i = 0; i < depth; i++) deep.place(0, weights[i % 5]);
      const t = performance.now();
      for (let i = 0; i < 1_000; i++) deep[how](0, weights[i % 5]);
      deep.free();
      return ((performance.now() - t) * 1000) / 1_000;
    });
    line(`PacerCore placement from JS, ${depth.toLocaleString("en")} calls queued`, `place ${costs[0].toFixed(2)} µs, reserve ${costs[1].toFixed(2)} µs (mean of the next 1,000)`);
  }
  // The harder shape: calls asked one after another (0–50 ms apart, weights 1–5) against
  // 10/s and 30/5 s, so the schedule is full of gaps shorter than a window; the search skips
  // at most 32 such stretches per window before going after the last rise.
  for (const depth of [1_000, 4_000, 10_000]) {
    const p = new PacerCore({
      windows: [
        { lengthMs: 1_000, budget: 10 },
        { lengthMs: 5_000, budget: 30 },
      ],
      maxWeight: null,
    });
    let seed = 1;
    const random = () => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    let now = 1e12;
    const next = () => {
      now += Math.floor(random() * 50);
      return now;
    };
    for (let i = 0; i < depth; i++) p.place(next(), 1 + Math.floor(random() * 5));
    const t = performance.now();
    for (let i = 0; i < 1_000; i++) p.place(next(), 1 + Math.floor(random() * 5));
    const mean = ((performance.now() - t) * 1000) / 1_000;
    p.free();
    line(`  the same at scattered instants, ${depth.toLocaleString("en")} queued`, `place ${mean.toFixed(2)} µs`);
  }
}

// 3. The 1,500-location × 16-day analysis against the mock, a "minute" compressed to 1 s: with
// the pacer planning against the mock's fixed windows (they are multiples of their length on
// this machine's clock, which the mock shares; 50 ms of margin covers a call's way there and
// back), then with the default rolling windows.
{
  const edge = await startEdge();
  try {
    const mock = (p) => `${edge.url}/mock/open-meteo${p}`;
    const minuteMs = 1_000;
    await fetch(mock("/config"), {
      method: "POST",
      body: JSON.stringify({
        minute: { window_ms: minuteMs, limit: 600 },
        hour: { window_ms: 60 * minuteMs, limit: 5_000 },
        day: { window_ms: 1_440 * minuteMs, limit: 10_000 },
        delay_ms: 5,
      }),
    });
    const windows = [
      { lengthMs: minuteMs, budget: 550 },
      { lengthMs: 60 * minuteMs, budget: 4_800 },
      { lengthMs: 1_440 * minuteMs, budget: 9_500 },
    ];
    const points = Array.from({ length: 1_500 }, (_, i) => ({ latitude: -60 + (i % 100) * 1.1, longitude: -170 + Math.floor(i / 100) * 1.3 }));
    const params = { daily: ["temperature_2m_max", "precipitation_sum"], forecast_days: 16 };
    const run = async (label, pacerOptions, cache) => {
      await fetch(mock("/reset"), { method: "POST" });
      const pacer = new Pacer({ windows, ...pacerOptions });
      const t0 = Date.now();
      const out = await fetchForecasts(points, params, {
        baseUrl: mock("/v1/forecast"),
        pacer,
        cache,
        upstreamWindows: { minuteMs, hourMs: 60 * minuteMs, dayMs: 1_440 * minuteMs },
      });
      const elapsed = Date.now() - t0;
      // With a rolling budget B per window W, total weight T can finish no sooner than
      // ⌈T/B⌉ − 1 windows after the start (the last window's calls go out at its start).
      const total = out.stats.weightSpent;
      const windowsNeeded = Math.ceil(total / 550);
      const minimum = (windowsNeeded - 1) * minuteMs;
      const state = await (await fetch(mock("/state"))).json();
      line(`1,500 × 16 d analysis, ${label}`, `weight ${total.toFixed(1)}, ${out.stats.calls} calls of ${out.stats.locationsPerCall} locations`);
      line("  completion (a minute compressed to 1 s)", `${elapsed} ms, theoretical minimum ${minimum} ms, ratio ${(elapsed / minimum).toFixed(3)}`);
      if (pacerOptions.fixedWindowMarginMs) {
        // Against fixed windows the last call can go no sooner than the start of the
        // ⌈T/B⌉-th window, counting the one the run started in.
        const fixedMinimum = (Math.floor(t0 / minuteMs) + windowsNeeded - 1) * minuteMs - t0;
        line("  the same against the fixed windows' own minimum", `${fixedMinimum} ms (started ${t0 % minuteMs} ms into a window), ratio ${(elapsed / fixedMinimum).toFixed(3)}`);
      }
      line("  429s from the mock", `${state.rejected_429}`);
      return pacer;
    };
    const cache = new LocationCache();
    const pacer = await run("fixed windows", { fixedWindowMarginMs: 50 }, cache);
    const t1 = Date.now();
    const again = await fetchForecasts(points, params, { baseUrl: mock("/v1/forecast"), pacer, cache });
    line("  the same analysis again within the TTL", `${Date.now() - t1} ms, ${again.stats.fetches} fetches, ${again.stats.cacheHits} cache hits`);
    await run("rolling windows (default)", {}, new LocationCache());
  } finally {
    await edge.close();
  }
}

// 4. Sizes.
for (const [label, file] of [
  ["browser package (sluicegate) .wasm", "../pkg/sluicegate_bg.wasm"],
  ["edge tooling (sluicegate/edge) .wasm", "../pkg-edge/sluicegate_bg.wasm"],
  ["worker .wasm", "../worker/pkg/sluicegate_worker_bg.wasm"],
]) {
  const bytes = readFileSync(new URL(file, import.meta.url));
  line(label, `${bytes.length} bytes raw, ${gzipSync(bytes, { level: 9 }).length} bytes gzip -9`);
}

// 5. Smart Flow (sluicegate/smartflow): the cost of acquire(url) from JS, never waiting (rates
// far above what the loop asks), with 1 and 10,000 learned mappings; and the wasm it adds.
import { SmartFlow, SmartFlowCore } from "../js/smartflow-node.js";
{
  const unlimited = { orgRate: 1e12, orgCapacity: 1e12, globalRate: 1e12 };
  const perCall = async (mappings) => {
    const flow = new SmartFlow({ ...unlimited, path: false }); // no cache file: saves under ~/.meraki would run while it measures
    const core = new SmartFlowCore(unlimited);
    for (let i = 0; i < mappings; i++) {
      const url = `/organizations/O_${i % 100}/networks/N_${i}`;
      flow.learnFromResponse(url, null);
      core.learnFromResponse(url, null);
    }
    const urls = Array.from({ length: 1_024 }, (_, i) => `/networks/N_${(i * 7919) % mappings}/clients`);
    const n = 100_000;
    for (let i = 0; i < 50_000; i++) await flow.acquire(urls[i & 1023]);
    let t0 = performance.now();
    for (let i = 0; i < n; i++) await flow.acquire(urls[i & 1023]);
    const viaFlow = ((performance.now() - t0) * 1000) / n;
    t0 = performance.now();
    for (let i = 0; i < n; i++) core.acquire(urls[i & 1023], performance.now() / 1000);
    const viaCore = ((performance.now() - t0) * 1000) / n;
    core.free();
    return [viaFlow, viaCore, flow.snapshot().networks];
  };
  for (const mappings of [1, 10_000]) {
    const [viaFlow, viaCore, learned] = await perCall(mappings);
    line(`SmartFlow.acquire(url), ${learned} learned mapping(s), no wait`, `${viaFlow.toFixed(2)} µs per call (await included)`);
    line(`  SmartFlowCore.acquire(url, now) alone`, `${viaCore.toFixed(2)} µs per call`);
  }
  const size = (file) => {
    const bytes = readFileSync(new URL(file, import.meta.url));
    return [bytes.length, gzipSync(bytes, { level: 9 }).length];
  };
  // its own build, the Smart Flow limiter alone (it carries none of the browser client)
  const [raw, gz] = size("../pkg-smartflow/sluicegate_bg.wasm");
  line("Smart Flow build (sluicegate/smartflow) .wasm", `${raw} bytes raw, ${gz} bytes gzip -9`);
}
