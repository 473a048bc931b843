// fetchForecasts from the built package against the dev worker's Open-Meteo mock, with the
// upstream's windows compressed (a "minute" of 1 s) and the pacer's budgets compressed alike.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { LocationCache, Pacer, fetchForecasts, openMeteoQueryWeight } from "sluicegate";
import { startEdge } from "../js/testing.js";

const MINUTE_MS = 1_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;
const upstreamWindows = { minuteMs: MINUTE_MS, hourMs: HOUR_MS, dayMs: DAY_MS };
const PARAMS = { daily: ["temperature_2m_max", "precipitation_sum"], forecast_days: 16 };

let edge;
const mock = (path) => `${edge.url}/mock/open-meteo${path}`;

async function configure(config) {
  const res = await fetch(mock("/config"), { method: "POST", body: JSON.stringify(config) });
  assert.equal(res.status, 200, await res.text());
  assert.equal((await fetch(mock("/reset"), { method: "POST" })).status, 200);
}

async function mockState() {
  return (await fetch(mock("/state"))).json();
}

/** `n` distinct points on a grid (distinct after the cache's rounding to 2 decimals). */
function points(n) {
  return Array.from({ length: n }, (_, i) => ({ latitude: -60 + (i % 100) * 1.1, longitude: -170 + Math.floor(i / 100) * 1.3 }));
}

/** Wait until `offset` ms into a fresh upstream "minute", so a test's burst lands in one window. */
async function startOfWindow(offset = 30) {
  const into = Date.now() % MINUTE_MS;
  await new Promise((r) => setTimeout(r, (MINUTE_MS - into + offset) % MINUTE_MS));
}

function compressedPacer(minuteBudget = 550, extra = {}) {
  return new Pacer({
    windows: [
      { lengthMs: MINUTE_MS, budget: minuteBudget },
      { lengthMs: HOUR_MS, budget: 4_800 },
      { lengthMs: DAY_MS, budget: 9_500 },
    ],
    ...extra,
  });
}

const options = (extra) => ({
  baseUrl: mock("/v1/forecast"),
  upstreamWindows,
  jitterMs: [20, 60],
  ...extra,
});

before(async () => {
  edge = await startEdge();
});
after(async () => {
  await edge?.close();
});

describe("a 1,500-location × 16-day analysis", () => {
  const cache = new LocationCache({ ttlMs: 60_000 });
  beforeEach(() =>
    configure({
      minute: { window_ms: MINUTE_MS, limit: 600 },
      hour: { window_ms: HOUR_MS, limit: 5_000 },
      day: { window_ms: DAY_MS, limit: 10_000 },
      delay_ms: 5,
      max_concurrent: 5,
    }),
  );

  test("completes with zero 429s", async () => {
    const progress = [];
    const outcome = await fetchForecasts(points(1_500), PARAMS, options({ pacer: compressedPacer(), cache, onProgress: (p) => progress.push(p) }));
    assert.equal(outcome.state, "done", JSON.stringify(outcome.abort));
    assert.equal(outcome.results.length, 1_500);
    assert.ok(outcome.results.every((r) => Array.isArray(r?.daily?.temperature_2m_max) && r.daily.time.length === 16));
    const state = await mockState();
    assert.equal(state.rejected_429, 0);
    assert.equal(outcome.stats.rateLimited, 0);
    assert.equal(state.calls, outcome.stats.calls);
    // 1,500 × 16/14 ≈ 1,714 weighted calls, in calls that pack the 550 budget.
    assert.ok(Math.abs(outcome.stats.weightSpent - (1_500 * 16) / 14) < 1, `spent ${outcome.stats.weightSpent}`);
    assert.ok(progress.length > 0 && progress.at(-1).done === outcome.stats.calls && progress.at(-1).state === "done");
    assert.ok(
      progress.some((p) => p.etaMs > 0),
      "a countdown was available while waiting",
    );
  });

  test("with a pacer planning against the mock's fixed windows: zero 429s, at most 550 planned in any of its windows, done within five", async () => {
    // The mock's windows are multiples of their length on this machine's clock, which the
    // pacer shares; 50 ms covers a call's way there and back. Each call is counted in every
    // window it may land in (its planned instant ± the margin).
    const pacer = compressedPacer(550, { fixedWindowMarginMs: 50 });
    const planned = [];
    pacer.addEventListener("queued", (e) => planned.push([e.detail.atMs, e.detail.weight]));
    const outcome = await fetchForecasts(points(1_500), PARAMS, options({ pacer, cache: new LocationCache() }));
    assert.equal(outcome.state, "done", JSON.stringify(outcome.abort));
    assert.ok(outcome.results.every((r) => r?.daily?.time.length === 16));
    assert.equal((await mockState()).rejected_429, 0);
    assert.equal(planned.length, outcome.stats.calls);
    const loads = new Map();
    for (const [at, weight] of planned) {
      for (let k = Math.floor((at - 50) / MINUTE_MS); k <= Math.floor((at + 50) / MINUTE_MS); k++) loads.set(k, (loads.get(k) ?? 0) + weight);
    }
    assert.ok(Math.max(...loads.values()) <= 550, `planned per window: ${[...loads.values()]}`);
    // 1,714 weighted calls need four windows of 550; a fifth only when the first calls were
    // asked within the margin of a boundary and count in two
    const windows = planned.map(([at]) => Math.floor(at / MINUTE_MS));
    assert.ok(Math.max(...windows) - Math.min(...windows) <= 4, `planned over windows ${[...new Set(windows)]}`);
  });

  test("run again within the TTL, it issues no upstream call", async () => {
    const outcome = await fetchForecasts(points(1_500), PARAMS, options({ pacer: compressedPacer(), cache }));
    assert.equal(outcome.state, "done");
    assert.equal(outcome.stats.cacheHits, 1_500);
    assert.equal(outcome.stats.fetches, 0);
    assert.equal((await mockState()).calls, 0);
    assert.ok(outcome.results.every((r) => r?.daily));
  });
});

describe("when the upstream refuses", () => {
  test("below the analysis' weight: exactly one call sees the 429, the rest are aborted, and fetching stops", async () => {
    await configure({
      minute: { window_ms: MINUTE_MS, limit: 600 },
      hour: { window_ms: HOUR_MS, limit: 300 },
      day: { window_ms: DAY_MS, limit: 10_000 },
      delay_ms: 20,
      max_concurrent: 5,
    });
    const outcome = await fetchForecasts(points(1_500), PARAMS, options({ pacer: compressedPacer() }));
    assert.equal(outcome.state, "aborted");
    assert.equal(outcome.abort.kind, "hourly");
    assert.ok(outcome.abort.retryAtMs > Date.now() - 1_000, "says when the next hour starts");
    assert.equal(outcome.stats.rateLimited, 1, "exactly one call saw the 429");
    // Only the calls admitted before the hourly limit was reached delivered anything.
    const missing = outcome.results.filter((r) => r === undefined).length;
    const delivered = (outcome.stats.fetches - 1) * outcome.stats.locationsPerCall;
    assert.ok(missing > 0 && missing >= 1_500 - delivered, `${missing} points missing, ${delivered} at most delivered`);
    const after = await mockState();
    assert.equal(after.calls, outcome.stats.fetches, "every fetch the batch issued reached the upstream, and no more");
    await new Promise((r) => setTimeout(r, 1_500));
    assert.equal((await mockState()).calls, after.calls, "no fetch is issued after the outcome is decided");
  });

  test("a minutely 429 is resumed exactly once, at the next upstream window", async () => {
    // The pacer believes in 550 per "minute"; the mock allows 200: the first window overruns.
    await configure({
      minute: { window_ms: MINUTE_MS, limit: 200 },
      hour: { window_ms: HOUR_MS, limit: 5_000 },
      day: { window_ms: DAY_MS, limit: 10_000 },
      delay_ms: 0,
      max_concurrent: 5,
    });
    await startOfWindow();
    const states = [];
    const outcome = await fetchForecasts(
      points(260),
      PARAMS,
      options({ pacer: compressedPacer(), maxLocationsPerCall: 40, onProgress: (p) => states.at(-1) !== p.state && states.push(p.state) }),
    );
    assert.equal(outcome.state, "done", JSON.stringify(outcome.abort));
    assert.equal(outcome.stats.resumed, true);
    assert.deepEqual(states, ["running", "paused", "running", "done"], "one pause, then the batch ran to the end");
    // Calls in flight when the first 429 came were admitted (or refused) in that window;
    // none of the refused ones was lost: every point arrived.
    assert.ok(outcome.stats.rateLimited >= 1);
    assert.equal((await mockState()).rejected_429, outcome.stats.rateLimited);
    assert.ok(outcome.results.every((r) => r?.daily));
  });

  test("a second minutely 429 ends the batch instead of resuming again", async () => {
    await configure({
      minute: { window_ms: MINUTE_MS, limit: 100 },
      hour: { window_ms: HOUR_MS, limit: 5_000 },
      day: { window_ms: DAY_MS, limit: 10_000 },
      delay_ms: 0,
      max_concurrent: 5,
    });
    await startOfWindow();
    const outcome = await fetchForecasts(points(600), PARAMS, options({ pacer: compressedPacer(), maxLocationsPerCall: 40 }));
    assert.equal(outcome.state, "aborted");
    assert.equal(outcome.abort.kind, "minutely");
    assert.equal(outcome.stats.resumed, true);
    assert.ok(outcome.stats.rateLimited >= 2);
  });
});

describe("each call is weighed as the core reads its query (openMeteoQueryWeight)", () => {
  beforeEach(() =>
    configure({
      minute: { window_ms: MINUTE_MS, limit: 600 },
      hour: { window_ms: HOUR_MS, limit: 5_000 },
      day: { window_ms: DAY_MS, limit: 10_000 },
      delay_ms: 0,
      max_concurrent: 5,
    }),
  );

  /** fetchForecasts through the mock, with the URL of every call it fetched. */
  async function fetched(n, params, extra = {}) {
    const urls = [];
    const outcome = await fetchForecasts(
      points(n),
      params,
      options({
        pacer: compressedPacer(),
        fetch: (url, init) => {
          urls.push(url);
          return fetch(url, init);
        },
        ...extra,
      }),
    );
    assert.equal(outcome.state, "done", JSON.stringify(outcome.abort));
    return { outcome, urls };
  }

  const close = (actual, expected, what) => assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual}, not ${expected}`);

  test("forecast_days=16&past_days=7 is 23 days, not 16", async () => {
    assert.equal(openMeteoQueryWeight("latitude=0&daily=a,b&forecast_days=16&past_days=7"), 23 / 14);
    assert.equal(openMeteoQueryWeight("latitude=0&daily=a,b&forecast_days=16&past_days=7", "server"), 1);
    const { outcome, urls } = await fetched(30, { ...PARAMS, past_days: 7 }, { maxLocationsPerCall: 10 });
    close(outcome.stats.weightSpent, (30 * 23) / 14, "spent");
    // what was spent is what the core reads from the very URLs fetched
    close(
      urls.reduce((sum, url) => sum + openMeteoQueryWeight(url), 0),
      outcome.stats.weightSpent,
      "the URLs weigh",
    );
    assert.ok(outcome.results.every((r) => r?.daily?.time.length === 23));
    // the mock charged the server's formula: 2 variables over 23 days weigh 1 a location there
    const charged = Object.values((await mockState()).clients).reduce((sum, client) => sum + client.minute.used, 0);
    assert.equal(charged, 30);
  });

  test("start_date..end_date counts both days", async () => {
    const { outcome } = await fetched(4, { daily: PARAMS.daily, start_date: "2026-02-01", end_date: "2026-02-28" });
    close(outcome.stats.weightSpent, 4 * 2, "28 days");
    assert.ok(outcome.results.every((r) => r?.daily?.time.length === 28));
  });

  test("a call without variables is weighed as the core weighs it, not refused", async () => {
    const conservative = await fetched(3, { forecast_days: 16 });
    close(conservative.outcome.stats.weightSpent, (3 * 16) / 14, "conservative: max(1, d/14) a location");
    assert.ok(conservative.outcome.results.every((r) => typeof r?.latitude === "number" && r.daily === undefined));
    const server = await fetched(3, { forecast_days: 16 }, { weightMode: "server" });
    close(server.outcome.stats.weightSpent, 3, "server: 1 a location");
  });

  test("a value out of range is refused naming the parameter, before any call", async () => {
    const refused = [
      [{ ...PARAMS, forecast_days: 17 }, /^forecast_days must be a whole number from 0 to 16, got "17"$/],
      [{ ...PARAMS, past_days: 93 }, /^past_days must be a whole number from 0 to 92, got "93"$/],
      [{ ...PARAMS, forecast_days: 2.5 }, /^forecast_days must be a whole number from 0 to 16, got "2.5"$/],
      [{ ...PARAMS, forecast_days: undefined, start_date: "2026-01-01" }, /^start_date is given without end_date$/],
      [{ ...PARAMS, forecast_days: undefined, start_date: "2026-02-30", end_date: "2026-03-01" }, /^start_date must be a date YYYY-MM-DD/],
    ];
    for (const [params, message] of refused) {
      await assert.rejects(fetchForecasts(points(2), params, options({ pacer: compressedPacer() })), { message }, JSON.stringify(params));
    }
    await assert.rejects(fetchForecasts(points(2), PARAMS, options({ weightMode: "exact" })), { message: /^mode must be "conservative" or "server", got "exact"$/ });
    await assert.rejects(fetchForecasts(points(2), { ...PARAMS, latitude: 1 }, options()), { name: "TypeError", message: /latitude/ });
    assert.throws(() => openMeteoQueryWeight("daily=a"), { message: "latitude is required" });
    assert.equal((await mockState()).calls, 0, "nothing was fetched");
  });
});
